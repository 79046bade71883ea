// service/presence/family.hpp — presence (docs/API.md, "Presence"): who is on which record now, with a
// small state and a selection of their choosing. Ephemeral: nothing is written to the database. The part
// holds the store (store.hpp: this process's memory, or Redis shared by N nodes with
// --presence-redis), the per-client rate limit (rate_limit.hpp), the endpoints (handlers.cpp) and the
// sweeper: every sweep_every, the entries not set for `timeout` leave; each removed entry is reported by
// exactly one store call on one node (store.hpp), which publishes its leave.
// Joins, updates (a set that changes the state or the selection; a refresh alone publishes nothing) and
// leaves go to the record's Nchan channel as presence messages (messages.hpp), through the CRDT part's
// publisher (crdt/publish/publisher.hpp, enqueue_presence: a budget of their own, dropped when spent).
// Time is the injected clock's (now_ms; the wall clock by default), so tests decide what has expired.
// Thread-safety: every member from any thread, but set_clock and set_publish_hook (before the first request).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "crdt/family.hpp"
#include "presence/rate_limit.hpp"
#include "presence/store.hpp"

namespace folio::service {

class presence_family {
 public:
  /// Registers /v2/presence/set, leave and get on `platform` and its gauges on /metrics; the store is
  /// Redis when settings().presence.redis is set (std::invalid_argument for an address that is not one).
  presence_family(server& platform, crdt_family& crdt);
  presence_family(const presence_family&) = delete;
  presence_family& operator=(const presence_family&) = delete;

  presence_store& store() noexcept { return *store_; }
  client_rate_limit& rate_limit() noexcept { return rate_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  std::int64_t now_ms() const { return clock_(); }
  /// Tests: the clock every timestamp and expiry is taken from (ms since the epoch).
  void set_clock(std::function<std::int64_t()> clock) { clock_ = std::move(clock); }
  /// Tests: sees every presence message as it is queued for its record's channel.
  void set_publish_hook(std::function<void(const record_key&, const std::string&)> hook) { hook_ = std::move(hook); }

  /// Queues the presence message of `type` ("join", "update", "leave") about `e` for record `k`'s channel.
  void publish(const record_key& k, std::string_view type, const presence_entry& e, std::int64_t at_ms);
  /// One sweep at now_ms(): the entries not set for timeout() leave, each published. Returns how many
  /// left. Throws api_error UNAVAILABLE when Redis cannot be reached.
  std::size_t sweep();
  /// Sweeps every sweep_every() until stop(), on the calling thread (folio-fcgi gives it one).
  void run();
  void stop();
  std::chrono::milliseconds sweep_every() const noexcept;

 private:
  crdt_family& crdt_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<presence_store> store_;
  client_rate_limit rate_;
  std::function<std::int64_t()> clock_;
  std::function<void(const record_key&, const std::string&)> hook_;
  std::atomic<std::uint64_t> timed_out_{0};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

}  // namespace folio::service
