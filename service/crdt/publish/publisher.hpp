// service/crdt/publish/publisher.hpp — live push (docs/API.md, crdt/sync and crdt/subscribe):
// publishing committed changes to their records' channels through nginx's Nchan publisher location.
//
// The publisher joins five parts, each in a file of its own, that share nothing but this class:
//   nchan.hpp          the channel id, and the POST / DELETE to nginx's publisher location (unix socket);
//   send_queue.hpp     the messages waiting per channel, in commit order, and the sender threads;
//   budgets.hpp        the byte and message budgets that bound what a tenant holds in Nchan's memory;
//   owed_notices.hpp   the channels owed a notice to sync, resent by a thread of their own;
//   token_streams.hpp  the open streams of client tokens, ended at their expiry by a sweeper thread.
// Each locks itself; none holds its lock while calling another, so there is no lock order to keep.
//
// The path of a change: its record_session emits the commit (commit_events.hpp); live_messages.cpp
// builds its message and its notice (the same without `update` and `version`, which tells
// subscribers to sync) and calls enqueue(), under the record's lock. enqueue takes a message of the
// tenant's budget (spent: the channel is owed the notice instead, sent once the budget has room) and
// queues it; a sender thread then publish()es it: the channel's due token streams are ended first
// (a failed deletion: nothing is published, the channel is owed the notice), then the message goes
// with its ops only while it is at most max_message_bytes and fits the byte budgets, else its
// notice. A message nginx does not take makes its channel owed the notice. A failure to publish is
// never reported to the writer.
// Presence (presence/family.hpp) adds ephemeral messages: enqueue_presence takes one from the tenant's
// presence budgets (budgets.hpp, apart from the changes') and queues it with an empty notice, in the
// channel's order with its changes; such a message is sent as it is or dropped (budget spent, queue
// full, nginx refusing it, a due stream's deletion failing), never replaced by a notice and never owed.
// Answer first: folio-fcgi holds a request's messages (answer_first, through the server's
// after-response hook) until its answer has been handed to nginx, so the answer reaches nginx before
// the change's publish does (which nginx reads first is its event loop's choice, on two connections;
// with the fan-out first, the answer would wait behind the subscribers' writes in the nginx worker
// that took both). The writer never waits for nginx.
// Thread-safety: every member may run on many threads at once, but set_forget and set_sweep_hook.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/publish/budgets.hpp"
#include "crdt/publish/nchan.hpp"
#include "crdt/publish/owed_notices.hpp"
#include "crdt/publish/send_queue.hpp"
#include "crdt/publish/token_streams.hpp"
#include "platform/config.hpp"

namespace folio::service {

class publisher {
 public:
  /// The largest message published (nginx/publish.conf's client_max_body_size is the same).
  static constexpr std::size_t max_message_bytes = 64 * 1024;
  static constexpr std::size_t full_bytes_per_window = publish_budgets::full_bytes_per_window;
  static constexpr std::size_t full_bytes_per_tenant_window = publish_budgets::full_bytes_per_tenant_window;
  static constexpr std::size_t messages_per_tenant_window = publish_budgets::messages_per_tenant_window;
  static constexpr std::chrono::seconds window = publish_budgets::window;
  static constexpr std::size_t max_owed = owed_notices::max_owed;
  static constexpr std::size_t max_owed_per_tenant = owed_notices::max_owed_per_tenant;
  static constexpr std::size_t max_token_channels = token_streams::max_channels;
  static constexpr std::size_t max_queued = send_queue::max_queued;
  static constexpr std::size_t max_queued_bytes = send_queue::max_queued_bytes;
  static constexpr int senders = send_queue::senders;

  /// `key_known(id)`: whether the key `id` a stream was let in with (token_subscribed) still holds
  /// (crdt_family's: its signing key is in the ring and its API key is not revoked; absent: every key does).
  explicit publisher(live_config c, std::function<bool(std::string_view)> key_known = {});
  publisher(const publisher&) = delete;
  publisher& operator=(const publisher&) = delete;
  const live_config& settings() const noexcept { return config_; }

  /// Queues `full` and `notice` for `channel`, to go as publish() sends them, and returns at once
  /// (send_queue.hpp). `tenant`: whose budgets the message takes (the channel's key id). Over its
  /// message budget, or with max_queued messages waiting, the channel is owed the notice instead.
  /// While the calling thread holds an answer_first, the message waits until it ends.
  void enqueue(std::string channel, std::string full, std::string notice, const std::string& tenant = {});

  /// Queues the presence message `message` for `channel`, an ephemeral one (above): dropped, and
  /// counted in presence_dropped(), when `tenant`'s presence budget is spent or the queue is full.
  void enqueue_presence(std::string channel, std::string message, const std::string& tenant);
  std::uint64_t presence_dropped() const noexcept { return presence_dropped_.load(); }

  /// While one lives on a thread, the messages that thread queues to this publisher are held: they
  /// keep their place in their channels' queues (commit order), and messages queued behind them wait
  /// too, but none is sent until the answer_first ends (above). One per thread at a time; not movable.
  class answer_first {
   public:
    explicit answer_first(publisher& p) : hold_(p.queue_) {}

   private:
    send_queue::hold hold_;
  };
  /// Waits until at most `left` messages are queued or being sent, at most `wait`; false when more still are.
  bool drain(std::chrono::milliseconds wait, std::size_t left = 0) { return queue_.drain(wait, left); }
  std::size_t queued() const { return queue_.queued(); }  ///< messages queued or being sent

  /// Publishes one message to `channel` now, on the calling thread (above): `full` when it is at most
  /// max_message_bytes and the budgets have room, else `notice` (small; for a deletion both are the
  /// same); the channel's due token streams are ended first. An empty `notice`: `full` is ephemeral
  /// (enqueue_presence), sent as it is or dropped, never owed. When nginx does not take it, or the
  /// deletion before it failed, the channel is owed `notice`. True when nginx took the message.
  bool publish(const std::string& channel, const std::string& full, const std::string& notice, const std::string& tenant = {});

  /// token_streams.hpp, subscribed.
  bool token_subscribed(const std::string& channel, std::int64_t expires, const std::string& key_id,
                        const std::function<void(std::int64_t)>& keep = {}) {
    return streams_.subscribed(channel, expires, key_id, keep);
  }
  void set_forget(std::function<void(const std::string&)> forget) { streams_.set_forget(std::move(forget)); }
  using kept_stream = token_streams::kept_stream;
  void remember_kept(const std::vector<kept_stream>& rows) { streams_.remember_kept(rows); }
  std::int64_t sweep() { return streams_.sweep(); }
  /// Nothing without a publisher socket.
  void request_sweep(std::chrono::milliseconds wait) { streams_.request_sweep(wait); }
  static std::int64_t sweep_backoff_after(std::int64_t previous) noexcept { return token_streams::sweep_backoff_after(previous); }
  std::uint64_t sweeps_done() const { return streams_.sweeps_done(); }
  void set_sweep_hook(std::function<void(std::uint64_t, std::chrono::milliseconds)> hook) { streams_.set_sweep_hook(std::move(hook)); }

  std::uint64_t published() const noexcept { return published_.load(); }
  std::uint64_t failures() const noexcept { return failures_.load(); }  ///< first attempts nginx did not take
  /// Messages not queued because their tenant's message budget was spent (their channels were owed a notice).
  std::uint64_t over_budget() const noexcept { return over_budget_.load(); }
  std::size_t owed() const { return owed_.size(); }  ///< channels owed a notice
  /// Whether nginx refused a publish for lack of shared memory (HTTP 507) in the last memory_full_hold.
  /// The subscriber authorization then refuses new subscribers with a JSON 503 (crdt/subscribe.cpp):
  /// Nchan's own refusal of a subscriber it has no memory for is an empty 507 that nginx cannot rewrite.
  bool memory_full() const { return nginx_.memory_full(); }
  static constexpr std::chrono::seconds memory_full_hold = nchan_endpoint::memory_full_hold;

 private:
  live_config config_;
  nchan_endpoint nginx_;
  publish_budgets budgets_;
  std::atomic<std::uint64_t> published_{0}, failures_{0}, over_budget_{0}, presence_dropped_{0};
  // Destroyed in the reverse order: the senders stop first (they use the rest), then the owed
  // notices' thread (it ends streams), then the sweeper.
  token_streams streams_;
  owed_notices owed_;
  send_queue queue_;
};

/// The channel of one record (nchan.hpp).
std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor);

}  // namespace folio::service
