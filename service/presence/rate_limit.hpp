// service/presence/rate_limit.hpp — the per-client token bucket of presence/set (docs/API.md, "Presence"):
// a client (a clientId of a user within its tenant: another user sending the same clientId spends a
// bucket of its own) may set `burst` times at once, refilled at `per_second`; beyond
// it a set is refused (429). Per process: on N nodes a client spread over them may get up to N times the
// rate, still bounded.
// Cost: a lookup per take; one entry per client seen in the last burst/per_second seconds, at most
// max_clients (the full buckets are forgotten when the map reaches it; past it, new clients are refused
// until some are).
// Thread-safety: one mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace folio::service {

class client_rate_limit {
 public:
  static constexpr double burst = 20, per_second = 10;
  static constexpr std::size_t max_clients = 100000;
  /// Takes one set from `client`'s bucket at `now_ms`; false when it is empty.
  bool take(const std::string& client, std::int64_t now_ms);

 private:
  struct bucket {
    double tokens = burst;
    std::int64_t at_ms = 0;
  };
  std::mutex mu_;
  std::unordered_map<std::string, bucket> buckets_;
};

}  // namespace folio::service
