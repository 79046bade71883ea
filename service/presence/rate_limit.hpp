// service/presence/rate_limit.hpp — the per-client token bucket of presence/set (docs/API.md, "Presence"):
// a client (a clientId of a user within its tenant: another user sending the same clientId spends a
// bucket of its own) may set `burst` times at once, refilled at `per_second`; beyond it a set is refused
// (429). Per process: on N nodes a client spread over them may get up to N times the rate, still bounded.
// Memory: one bucket per client seen recently, at most max_clients_per_tenant per tenant and max_clients
// in all. A bucket idle for burst/per_second (2 s) is full again and can be forgotten: when a new client
// finds its tenant's (or the process's) buckets at the bound, the full ones are dropped — at most once
// per 2 s per tenant (and for the process), so a flood of new clientIds costs O(1) a request between
// those scans — and while none is full, new clients are refused (429).
// Cost: a lookup per take; a scan of a tenant's buckets (or all) at most once per 2 s.
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
  static constexpr std::int64_t refill_ms = static_cast<std::int64_t>(burst / per_second * 1000);  ///< an idle bucket's time to fill
  static constexpr std::size_t max_clients_per_tenant = 20000, max_clients = 200000;
  /// Takes one set from the bucket of `client` (its user and clientId) of `tenant` at `now_ms`; false when it is empty.
  bool take(const std::string& tenant, const std::string& client, std::int64_t now_ms);

 private:
  struct bucket {
    double tokens = burst;
    std::int64_t at_ms = 0;
  };
  struct tenant_buckets {
    std::unordered_map<std::string, bucket> clients;
    std::int64_t scanned_ms = INT64_MIN;  ///< when its full buckets were last dropped
  };
  static double refilled(const bucket& b, std::int64_t now_ms);
  /// Drops `t`'s full buckets unless it was scanned in the last refill_ms. mu_ held.
  void drop_full(tenant_buckets& t, std::int64_t now_ms);

  std::mutex mu_;
  std::unordered_map<std::string, tenant_buckets> tenants_;
  std::size_t size_ = 0;  ///< buckets in all
  std::int64_t scanned_ms_ = INT64_MIN;  ///< when every tenant was last scanned
};

}  // namespace folio::service
