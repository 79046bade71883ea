// service/crdt/publish/publisher.hpp — live push (docs/API.md, crdt/sync and crdt/subscribe): the channel a record's changes go to, and publishing a
// committed change to it through nginx's Nchan publisher location.
//
// A channel id is hex(HMAC-SHA256(secret, keyId "\n" organizationId "\n" documentId "\n" editorId)):
// without the secret it cannot be derived from the ids, and the key id keeps tenants apart. nginx
// computes the same id for a subscriber (nginx/folio.conf, set_hmac_sha256 over the decoded query)
// and the authorizer checks that both agree. The publisher location listens on a unix socket only
// (nginx/standalone.conf.in), so nothing off the host can publish.
//
// What nginx holds (nginx/publish.conf, docs/OPERATIONS.md has the arithmetic): a channel keeps its
// last 16 messages for 60 s, and a message is at most max_message_bytes. Budgets, token buckets
// refilled over a window (60 s, what nginx keeps a message): a tenant publishes at most
// messages_per_tenant_window messages a window (so it creates at most that many channels in it: a
// message makes at most one), and a change goes with its ops only while it fits in a message, in the
// tenant's full_bytes_per_tenant_window and in everyone's full_bytes_per_window; otherwise its notice
// goes: the same message without `update` and `version`, which tells subscribers to sync (docs/API.md).
// A change over its tenant's message budget is not queued: its channel is owed its notice (below),
// sent when the tenant's budget has room again. So what one tenant's changes, large or many, hold in
// Nchan's shared memory is bounded, and one tenant's flood spends only its own budgets.
//
// A publish is a POST with a short timeout, made off the request path: the request that committed a
// change queues its message (enqueue, under the record's lock, so a record's messages queue in commit
// order) and answers; sender threads POST each channel's messages one at a time in the order they were
// queued, different channels in parallel, and tenants in turn (round robin: a message waits for at
// most one message of each other tenant with messages ready, however many one tenant queued). folio-fcgi holds a request's messages until its answer is
// handed to nginx (answer_first), so the answer reaches nginx before the change's publish does. The writer never waits for nginx — with many subscribers,
// Nchan's fan-out happens before it answers the POST. At most max_queued messages wait (nginx far
// behind or gone) and max_queued_bytes of them carry ops; past those the channel is owed a notice
// (below) or the notice is queued instead. Cost: one map entry per channel with messages waiting, the
// messages themselves; two threads.
// A failure to publish is never reported to the writer. Instead the channel is owed a notice: a background thread resends the
// channel's latest owed notice (one per channel, at most max_owed_per_tenant channels of a tenant and
// max_owed in all) with backoff until nginx takes one, each send taking a message of its tenant's
// budget, so a subscriber learns it missed something even when the failed change was the last
// before a quiet period. Cost: one map entry per owed channel; a retry is one POST; one budget entry
// per tenant that published in the last window.
//
// Client tokens on open streams (docs/SECURITY.md "Open streams"): Nchan authorizes an EventSource or
// WebSocket subscriber once, when it opens, and pings keep it open; so the publisher remembers, per
// channel, the earliest expiry among the client tokens let in (token_subscribed) and their signing key
// ids. A channel whose earliest token has expired, or one of whose key ids has left the key ring, is
// deleted (DELETE to the publisher location: Nchan ends its subscribers at once, 410) and forgotten:
// by a background thread at that expiry's second (sweep()), by a sweep after the key ring changed
// (request_sweep), and before anything is published to it (then the message goes; a publish to a
// channel whose deletion is in flight waits for it, publishes to other channels do not). Subscribers reconnect, are authorized again (an
// expired token gets 401) and sync, as after any reopen. With Nchan over Redis (several nodes) the
// deletion reaches the channel's subscribers on every node, so the node that let a token in ends its
// streams on time whichever node publishes. At most max_token_channels channels are remembered:
// when full, those already due are deleted and forgotten; if none is, a new one is refused (the
// subscriber gets 503). Cost: one map entry per channel (its id, the few key ids with an expiry each); a check
// is one lookup; a sweep (at each expiry second, a key-ring reload, a full map) is a pass over the map
// and one DELETE per due channel.
// Kept across restarts (docs/SECURITY.md "Open streams"): nginx keeps a stream open when its responder
// restarts, so what is remembered is also kept where the next responder finds it (crdt/records.hpp,
// crdt_token_streams): token_subscribed's `keep` writes the channel's row of a key when the key is new
// to the channel or its expiry is earlier than the one remembered (so a long-poll's every poll, which
// changes nothing, writes nothing), before the subscriber is let in — a failed write refuses it;
// after a deletion succeeds, `forget` (set_forget) deletes the channel's rows; at start the rows are
// read back (remember_kept). A channel with a row write or a deletion in flight is busy: a
// subscriber of it, a publish to it and a sweep of it wait for that to end, so a deletion removes the
// rows of the streams it ended and never the row of a stream let in after it. Cost: a write per new
// key on a channel (a subscriber's authorization), a delete per ended channel, one read of the rows
// at start.
// Thread-safety: `publish` and `token_subscribed` may run on many threads at once (one libcurl handle
// per thread).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "platform/config.hpp"

namespace folio::service {


/// The channel of one record.
std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor);

class publisher {
 public:
  /// The largest message published (nginx/publish.conf's client_max_body_size is the same).
  static constexpr std::size_t max_message_bytes = 64 * 1024;
  /// Bytes of messages with ops published per window, at most (a token bucket refilled over the window).
  static constexpr std::size_t full_bytes_per_window = std::size_t(32) << 20;
  /// A tenant's share of those: bytes of its messages with ops per window, at most.
  static constexpr std::size_t full_bytes_per_tenant_window = std::size_t(8) << 20;
  /// Messages (with ops or notices) a tenant publishes per window, at most; a channel it publishes to
  /// takes at least one, so it bounds the tenant's channels too.
  static constexpr std::size_t messages_per_tenant_window = 6000;
  static constexpr std::chrono::seconds window{60};  ///< nginx/publish.conf's nchan_message_timeout
  static constexpr std::size_t max_owed = 100000;           ///< channels owed a notice, at most
  static constexpr std::size_t max_owed_per_tenant = 25000;  ///< of one tenant, at most

  static constexpr std::size_t max_token_channels = 100000;  ///< channels with client-token streams remembered, at most

  /// `key_known(id)`: whether the key `id` a stream was let in with (token_subscribed) still holds
  /// (crdt_family's: its signing key is in the ring and its API key is not revoked; absent: every key does).
  explicit publisher(live_config c, std::function<bool(std::string_view)> key_known = {})
      : config_(std::move(c)), key_known_(std::move(key_known)), budget_(static_cast<double>(full_bytes_per_window)) {}
  ~publisher();
  publisher(const publisher&) = delete;
  publisher& operator=(const publisher&) = delete;
  const live_config& settings() const noexcept { return config_; }

  static constexpr std::size_t max_queued = 100000;                   ///< messages waiting for a sender, at most
  static constexpr std::size_t max_queued_bytes = std::size_t(64) << 20;  ///< bytes of them, at most
  static constexpr int senders = 2;                                   ///< threads sending queued messages

  /// Queues `full` and `notice` for `channel`, to go as publish() sends them, and returns at once
  /// (above). Over max_queued_bytes the notice is queued alone; over max_queued the channel is owed it.
  /// While the calling thread holds an answer_first, the message waits until it ends (below).
  /// `tenant`: whose budgets the message takes (the channel's key id). Over its message budget the
  /// channel is owed the notice instead (sent once the budget has room).
  void enqueue(std::string channel, std::string full, std::string notice, const std::string& tenant = {});

  /// While one lives on a thread, the messages that thread queues to this publisher are held: they keep their place
  /// in their channels' queues (commit order), and messages queued behind them wait too, but none is
  /// sent until the answer_first ends. folio-fcgi holds one from a request's start until its answer
  /// has been handed to nginx (main.cpp), so the answer reaches nginx before the publish does (which
  /// nginx reads first is its event loop's choice, on two connections): with the fan-out first, the answer waited behind a thousand subscribers' writes in
  /// the nginx worker that took both (bench/live.sh, the update's latency with 1,000 subscribers).
  /// One per thread at a time; not movable.
  class answer_first {
   public:
    explicit answer_first(publisher& p);
    ~answer_first();
    answer_first(const answer_first&) = delete;
    answer_first& operator=(const answer_first&) = delete;

   private:
    friend class publisher;
    publisher& p_;
    answer_first* outer_;                 ///< the thread's answer_first before this one (nested)
    std::vector<std::string> channels_;  ///< channels with a message held by this answer_first (a channel again only after another)
  };
  /// Waits until no message is queued or being sent, at most `wait`; false when some still are.
  bool drain(std::chrono::milliseconds wait);
  std::size_t queued() const;  ///< messages queued or being sent

  /// Publishes one message to `channel` now, on the calling thread: `full` (a change with its ops) when it is at most
  /// max_message_bytes and the window's budget has room, else `notice` (small; for a deletion both
  /// are the same). When nginx does not take it, the channel is owed `notice` (retried in the
  /// background). True when nginx took the message.
  /// A channel remembered as holding a stream of a client token is deleted first when that token has
  /// expired or its key left the ring (above); if nginx does not take the deletion, nothing is published,
  /// the channel stays remembered and is owed `notice` (sent after a deletion that succeeds).
  bool publish(const std::string& channel, const std::string& full, const std::string& notice, const std::string& tenant = {});
  /// A client token signed by `key_id` and valid until `expires` (seconds since the epoch) is being let
  /// into `channel`. False when max_token_channels channels are remembered and none is due to be ended.
  /// `keep(expires)`, when given, is called (outside the publisher's locks, the channel busy) when the
  /// channel does not yet remember `key_id` with an expiry at or before `expires`: it stores the
  /// channel's row of the key with that expiry (above); when it throws, nothing is remembered and the
  /// exception goes to the caller (the subscriber is refused). No call when nothing changes.
  bool token_subscribed(const std::string& channel, std::int64_t expires, const std::string& key_id,
                        const std::function<void(std::int64_t)>& keep = {});
  /// After a deletion of a remembered channel succeeds, `forget(channel)` deletes its kept rows (on the
  /// thread that deleted it, the channel busy). A failure is logged; the rows stay (the next responder
  /// that starts ends their channel again: a redundant deletion, never a missed one). Set before the
  /// first stream; the background thread calls it from then on.
  void set_forget(std::function<void(const std::string&)> forget) { forget_ = std::move(forget); }
  /// One kept row: a channel, a key id (as token_subscribed's) and the earliest expiry of its tokens let in.
  struct kept_stream {
    std::string channel, key_id;
    std::int64_t expires = 0;
  };
  /// At start: remembers the rows kept by earlier responders (earliest expiries first), as if their
  /// streams had been let in here, and has them swept. Past max_token_channels channels the rest are
  /// remembered as due now: their channels are deleted at the first sweep (their subscribers reconnect
  /// and are authorized again), which brings the count back under the bound.
  void remember_kept(const std::vector<kept_stream>& rows);
  /// Ends now every remembered channel that is due (its token expired, or its key left the ring).
  /// Returns when to sweep next (seconds since the epoch): the earliest expiry among the channels
  /// still remembered, sooner when a deletion failed (a back-off; the pass stops at the first
  /// failure), or the largest int64 when nothing is remembered. The background thread runs it.
  std::int64_t sweep();
  /// Has the background thread sweep (after the key ring changed) and waits for that sweep, at most
  /// `wait`. Nothing without a publisher socket.
  void request_sweep(std::chrono::milliseconds wait);

  /// How long sweeps wait, in seconds, after a pass in which nginx did not take a deletion, when they
  /// waited `previous` after the pass before (0: it went well): 2, doubling to 32.
  static std::int64_t sweep_backoff_after(std::int64_t previous) noexcept { return std::min<std::int64_t>(previous ? 2 * previous : 2, 32); }

  std::uint64_t published() const noexcept { return published_.load(); }
  std::uint64_t failures() const noexcept { return failures_.load(); }  ///< first attempts nginx did not take
  /// Messages not queued because their tenant's message budget was spent (their channels were owed a notice).
  std::uint64_t over_budget() const noexcept { return over_budget_.load(); }
  std::size_t owed() const;  ///< channels owed a notice
  /// Whether nginx refused a publish for lack of shared memory (HTTP 507) in the last memory_full_hold.
  /// The subscriber authorization then refuses new subscribers with a JSON 503 (crdt/subscribe.cpp):
  /// Nchan's own refusal of a subscriber it has no memory for is an empty 507 that nginx cannot rewrite.
  bool memory_full() const;
  static constexpr std::chrono::seconds memory_full_hold{5};
  /// Sweeps the background thread has finished.
  std::uint64_t sweeps_done() const;

 private:
  struct owed_notice {
    std::string message, tenant;
    int attempts = 0;
    std::chrono::steady_clock::time_point next_try;
    bool deferred = false;  ///< owed only because its tenant's message budget was spent (no publish failed)
  };
  struct queued_message {
    std::string full, notice;
    const answer_first* held = nullptr;  ///< not to be sent while this answer_first lives
  };
  struct channel_queue {
    std::string tenant;
    std::deque<queued_message> messages;
    bool sending = false;  ///< a sender holds its front message; the channel is in ready_ iff !sending and its front message waits, not held
  };
  void release(answer_first& a);
  struct token_streams {
    std::int64_t expires = 0;  ///< the earliest expiry among the tokens let in
    /// Their key ids, each once, with the earliest expiry among that key's tokens (what its kept row holds).
    std::vector<std::pair<std::string, std::int64_t>> keys;
  };
  /// One POST of `message` (or, with `message` null, a DELETE of the channel); the libcurl or HTTP
  /// failure as text, "" on success (a DELETE of a channel Nchan does not hold, 404, succeeds).
  std::string post(const std::string& channel, const std::string* message);
  bool due(const token_streams& t, std::int64_t now) const;
  /// Deletes `channel` when its remembered token streams are due (and forgets them). False when the
  /// deletion failed (they stay remembered).
  bool end_due_streams(const std::string& channel);
  void remember(const std::string& channel, const token_streams& t);  ///< streams_mu_ held
  /// streams_mu_ held: whether `channel` already remembers `key_id` with an expiry at or before `expires`.
  bool covers(const std::string& channel, const std::string& key_id, std::int64_t expires) const;
  struct tenant_budget {
    double messages = static_cast<double>(messages_per_tenant_window), full_bytes = static_cast<double>(full_bytes_per_tenant_window);
    std::chrono::steady_clock::time_point refilled = std::chrono::steady_clock::now();
    bool spent_logged = false;  ///< a line was written since its message budget last had room
  };
  tenant_budget& refilled_budget(const std::string& tenant);  ///< budget_mu_ held
  bool take_budget(const std::string& tenant, std::size_t bytes);  ///< bytes of a message with ops
  bool take_message(const std::string& tenant);                    ///< one message
  void owe(const std::string& channel, const std::string& notice, const std::string& tenant, bool deferred = false);
  void make_ready(const std::string& channel, const std::string& tenant);  ///< queue_mu_ held
  void wake_background();       ///< asks background_loop (started if need be) for a sweep
  void wake_locked(bool sweep);  ///< owed_mu_ held: starts or wakes background_loop, with a sweep or not
  /// streams_mu_ held: the remembered channels that are due; the earliest expiry of the others into
  /// `earliest` (when given).
  std::vector<std::string> due_channels(std::int64_t* earliest) const;
  /// Resends owed notices with backoff, and ends token streams at their expiry (sweep()).
  void background_loop();
  /// A sender thread: takes a ready channel's first message, publishes it, puts the channel back.
  void send_loop();

  live_config config_;
  std::function<bool(std::string_view)> key_known_;
  std::mutex streams_mu_;
  std::condition_variable busy_cv_;
  /// Channels whose deletion or kept-row write is in flight (streams_mu_).
  std::unordered_set<std::string> busy_;
  std::size_t adding_ = 0;  ///< of them, channels not remembered yet whose first row is being written (streams_mu_)
  std::unordered_map<std::string, token_streams> streams_;  ///< by channel
  std::function<void(const std::string&)> forget_;
  std::atomic<std::uint64_t> published_{0}, failures_{0}, over_budget_{0};
  std::atomic<std::int64_t> memory_full_until_ms_{0};  ///< steady clock, ms: memory_full() until then
  std::mutex budget_mu_;
  double budget_;  ///< bytes of full messages that may go now, of every tenant
  std::chrono::steady_clock::time_point refilled_ = std::chrono::steady_clock::now();
  std::unordered_map<std::string, tenant_budget> budgets_;  ///< by tenant (budget_mu_)
  mutable std::mutex owed_mu_;
  std::condition_variable owed_cv_;
  std::unordered_map<std::string, owed_notice> owed_;  ///< by channel
  std::unordered_map<std::string, std::size_t> owed_by_tenant_;  ///< entries of owed_ per tenant
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> next_expiry_ms_{std::numeric_limits<std::int64_t>::max()};  ///< when background_loop sweeps next
  bool rescan_ = false;                                   ///< owed_mu_: sweep again before waiting
  std::uint64_t sweeps_started_ = 0, sweeps_done_ = 0;   ///< owed_mu_
  std::condition_variable swept_cv_;
  std::int64_t sweep_backoff_s_ = 0;                      ///< the background thread's
  std::thread retrier_;  ///< background_loop, started with the first owed notice or token stream

  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_, drained_cv_;
  std::unordered_map<std::string, channel_queue> queues_;  ///< by channel, while messages wait or one is sent
  /// Channels whose first message a sender may take, by tenant, and the tenants with such channels, in turn.
  std::unordered_map<std::string, std::deque<std::string>> ready_;
  std::deque<std::string> ready_tenants_;
  std::size_t queued_ = 0, queued_bytes_ = 0;               ///< messages queued or being sent, and their bytes
  bool senders_stop_ = false;
  std::vector<std::thread> senders_;  ///< send_loop, started with the first message queued
};

}  // namespace folio::service
