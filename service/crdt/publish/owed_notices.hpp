// service/crdt/publish/owed_notices.hpp — the channels owed a notice to sync, and the thread that
// resends them.
//
// A failure to publish is never reported to the writer. Instead the channel is owed a notice (the
// change's message without `update` and `version`, which tells subscribers to sync; docs/API.md): a
// background thread resends the channel's latest owed notice (one per channel, at most
// max_owed_per_tenant channels of a tenant and max_owed in all) with backoff (2 s doubling to 32 s,
// the first try after 1 s) until nginx takes one, each send taking a message of its tenant's budget
// (budgets.hpp), so a subscriber learns it missed something even when the failed change was the last
// before a quiet period. A channel is also owed its notice when its tenant's message budget is spent
// (`deferred`: no send failed); that one goes, without a line in the log, once the budget has room.
// Cost: one map entry per owed channel; a retry is one POST; one thread, started with the first
// notice owed.
// Thread-safety: owe() and size() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace folio::service {

class owed_notices {
 public:
  static constexpr std::size_t max_owed = 100000;           ///< channels owed a notice, at most
  static constexpr std::size_t max_owed_per_tenant = 25000;  ///< of one tenant, at most

  /// `take_message(tenant)`: takes a message of the tenant's budget, false when it is spent (the
  /// notice waits for it, no attempt spent). `deliver(channel, notice)`: sends it; true when nginx took it.
  owed_notices(std::function<bool(const std::string&)> take_message, std::function<bool(const std::string&, const std::string&)> deliver)
      : take_message_(std::move(take_message)), deliver_(std::move(deliver)) {}
  ~owed_notices() { stop(); }
  owed_notices(const owed_notices&) = delete;
  owed_notices& operator=(const owed_notices&) = delete;

  /// `channel` is owed `notice` (the latest replaces one owed already; its next try stays), of
  /// `tenant`'s; past the bounds it is dropped, with an error line. Nothing once stopping.
  void owe(const std::string& channel, const std::string& notice, const std::string& tenant, bool deferred = false);
  std::size_t size() const;  ///< channels owed a notice
  /// Ends the thread (after the send in flight); notices still owed are dropped.
  void stop();

 private:
  struct owed_notice {
    std::string message, tenant;
    int attempts = 0;
    std::chrono::steady_clock::time_point next_try;
    bool deferred = false;  ///< owed only because its tenant's message budget was spent (no publish failed)
  };
  /// Resends the owed notices as their tries come due.
  void retry_loop();

  std::function<bool(const std::string&)> take_message_;
  std::function<bool(const std::string&, const std::string&)> deliver_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, owed_notice> owed_;            ///< by channel (mu_)
  std::unordered_map<std::string, std::size_t> owed_by_tenant_;  ///< entries of owed_ per tenant (mu_)
  std::atomic<bool> stopping_{false};                           ///< set under mu_
  std::thread retrier_;                                         ///< retry_loop, started with the first notice owed (mu_)
};

}  // namespace folio::service
