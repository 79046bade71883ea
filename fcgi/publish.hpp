// fcgi/publish.hpp — live push (DESIGN.md §6): the channel a record's changes go to, and publishing a
// committed change to it through nginx's Nchan publisher location.
//
// A channel id is hex(HMAC-SHA256(secret, keyId "\n" organizationId "\n" documentId "\n" editorId)):
// without the secret it cannot be derived from the ids, and the key id keeps tenants apart. nginx
// computes the same id for a subscriber (nginx/folio.conf, set_hmac_sha256 over the decoded query)
// and the authorizer checks that both agree. The publisher location listens on a unix socket only
// (nginx/standalone.conf.in), so nothing off the host can publish.
//
// What nginx holds (nginx/publish.conf, docs/OPERATIONS.md has the arithmetic): a channel keeps its
// last 16 messages for 60 s, and a message is at most max_message_bytes. A change goes with its ops
// only while it fits in that and in the budget of full_bytes_per_window bytes of such messages a
// window (60 s, a token bucket); otherwise its notice goes: the same message without `update` and
// `version`, which tells subscribers to sync (docs/API.md). So one tenant's large or many changes
// cannot fill Nchan's shared memory and crowd out another's.
//
// A publish is a POST with a short timeout after the change is committed; a failure is never
// reported to the writer. Instead the channel is owed a notice: a background thread resends the
// channel's latest owed notice (one per channel, at most max_owed channels) with backoff until nginx
// takes one, so a subscriber learns it missed something even when the failed change was the last
// before a quiet period. Cost: one map entry per owed channel; a retry is one POST.
// Thread-safety: `publish` may run on many threads at once (one libcurl handle per thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace folio::service {

struct live_config {
  std::string channel_secret;  ///< shared with nginx; empty: live push is off (subscribe answers 503)
  std::string publish_socket;  ///< nginx's publisher listener (unix socket); empty: nothing is published
};

/// The channel of one record.
std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor);

class publisher {
 public:
  /// The largest message published (nginx/publish.conf's client_max_body_size is the same).
  static constexpr std::size_t max_message_bytes = 64 * 1024;
  /// Bytes of messages with ops published per window, at most (a token bucket refilled over the window).
  static constexpr std::size_t full_bytes_per_window = std::size_t(32) << 20;
  static constexpr std::chrono::seconds window{60};  ///< nginx/publish.conf's nchan_message_timeout
  static constexpr std::size_t max_owed = 10000;     ///< channels owed a notice, at most

  explicit publisher(live_config c) : config_(std::move(c)), budget_(static_cast<double>(full_bytes_per_window)) {}
  ~publisher();
  publisher(const publisher&) = delete;
  publisher& operator=(const publisher&) = delete;
  const live_config& settings() const noexcept { return config_; }

  /// Publishes one message to `channel`: `full` (a change with its ops) when it is at most
  /// max_message_bytes and the window's budget has room, else `notice` (small; for a deletion both
  /// are the same). When nginx does not take it, the channel is owed `notice` (retried in the
  /// background). True when nginx took the message.
  bool publish(const std::string& channel, const std::string& full, const std::string& notice);

  std::uint64_t published() const noexcept { return published_.load(); }
  std::uint64_t failures() const noexcept { return failures_.load(); }  ///< first attempts nginx did not take

 private:
  struct owed_notice {
    std::string message;
    int attempts = 0;
    std::chrono::steady_clock::time_point next_try;
  };
  /// One POST; the libcurl or HTTP failure as text, "" on success.
  std::string post(const std::string& channel, const std::string& message);
  bool take_budget(std::size_t bytes);
  void owe(const std::string& channel, const std::string& notice);
  void retry_loop();

  live_config config_;
  std::atomic<std::uint64_t> published_{0}, failures_{0};
  std::mutex budget_mu_;
  double budget_;  ///< bytes of full messages that may go now
  std::chrono::steady_clock::time_point refilled_ = std::chrono::steady_clock::now();
  std::mutex owed_mu_;
  std::condition_variable owed_cv_;
  std::unordered_map<std::string, owed_notice> owed_;  ///< by channel
  std::atomic<bool> stopping_{false};
  std::thread retrier_;  ///< started with the first owed notice
};

}  // namespace folio::service
