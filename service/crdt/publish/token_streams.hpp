// service/crdt/publish/token_streams.hpp — the open streams of client tokens, ended at their tokens'
// expiry (docs/SECURITY.md "Open streams").
//
// Nchan authorizes an EventSource or WebSocket subscriber once, when it opens, and pings keep it
// open; so the publisher remembers, per channel, the earliest expiry among the client tokens let in
// (subscribed) and their signing key ids. A channel whose earliest token has expired, or one of whose
// key ids has left the key ring, is deleted (DELETE to the publisher location: Nchan ends its
// subscribers at once, 410) and forgotten: by the sweeper thread at that expiry's second (sweep()),
// by a sweep after the key ring changed (request_sweep), and before anything is published to it
// (end_due; a publish to a channel whose deletion is in flight waits for it, publishes to other
// channels do not). Subscribers reconnect, are authorized again (an expired token gets 401) and sync,
// as after any reopen. With Nchan over Redis (several nodes) the deletion reaches the channel's
// subscribers on every node, so the node that let a token in ends its streams on time whichever node
// publishes. At most max_channels channels are remembered: when full, those already due are deleted
// and forgotten; if none is, a new one is refused (the subscriber gets 503). Cost: one map entry per
// channel (its id, the few key ids with an expiry each); a check is one lookup; a sweep (at each
// expiry second, a key-ring reload, a full map) is a pass over the map and one DELETE per due channel.
//
// Kept across restarts: nginx keeps a stream open when its responder restarts, so what is remembered
// is also kept where the next responder finds it (crdt_token_streams): subscribed()'s `keep` writes
// the channel's row of a key when the key is new to the channel or its expiry is earlier than the one
// remembered (so a long-poll's every poll, which changes nothing, writes nothing), before the
// subscriber is let in — a failed write refuses it; after a deletion succeeds, `forget` (set_forget)
// deletes the channel's rows; at start the rows are read back (remember_kept). A channel with a row
// write or a deletion in flight is busy: a subscriber of it, a publish to it and a sweep of it wait
// for that to end, so a deletion removes the rows of the streams it ended and never the row of a
// stream let in after it. Cost: a write per new key on a channel (a subscriber's authorization), a
// delete per ended channel, one read of the rows at start.
// Thread-safety: every member but set_forget and set_sweep_hook from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "crdt/publish/nchan.hpp"

namespace folio::service {

class token_streams {
 public:
  static constexpr std::size_t max_channels = 100000;  ///< channels with client-token streams remembered, at most

  /// Deletions go to `nginx` (none, and no sweeps, when it is not enabled). `key_known(id)`: whether
  /// the key `id` a stream was let in with still holds (absent: every key does).
  token_streams(nchan_endpoint& nginx, std::function<bool(std::string_view)> key_known) : nginx_(nginx), key_known_(std::move(key_known)) {}
  ~token_streams() { stop(); }
  token_streams(const token_streams&) = delete;
  token_streams& operator=(const token_streams&) = delete;

  /// A client token signed by `key_id` and valid until `expires` (seconds since the epoch) is being let
  /// into `channel`. False when max_channels channels are remembered and none is due to be ended.
  /// `keep(expires)`, when given, is called (outside the locks, the channel busy) when the channel does
  /// not yet remember `key_id` with an expiry at or before `expires`: it stores the channel's row of
  /// the key with that expiry (above); when it throws, nothing is remembered and the exception goes to
  /// the caller (the subscriber is refused). No call when nothing changes.
  bool subscribed(const std::string& channel, std::int64_t expires, const std::string& key_id, const std::function<void(std::int64_t)>& keep);
  /// Deletes `channel` when its remembered streams are due (and forgets them); waits for a deletion or
  /// row write of it in flight first. False when the deletion failed (they stay remembered).
  bool end_due(const std::string& channel);
  /// After a deletion succeeds, `forget(channel)` deletes its kept rows (on the thread that deleted
  /// it, the channel busy). A failure is logged; the rows stay (the next responder that starts ends
  /// their channel again: a redundant deletion, never a missed one). Set before the first stream.
  void set_forget(std::function<void(const std::string&)> forget) { forget_ = std::move(forget); }
  /// One kept row: a channel, a key id (as subscribed()'s) and the earliest expiry of its tokens let in.
  struct kept_stream {
    std::string channel, key_id;
    std::int64_t expires = 0;
  };
  /// At start: remembers the rows kept by earlier responders (earliest expiries first), as if their
  /// streams had been let in here, and has them swept. Past max_channels channels the rest are
  /// remembered as due now: their channels are deleted at the first sweep (their subscribers reconnect
  /// and are authorized again), which brings the count back under the bound.
  void remember_kept(const std::vector<kept_stream>& rows);
  /// Ends now every remembered channel that is due (its token expired, or its key left the ring).
  /// Returns when to sweep next (seconds since the epoch): the earliest expiry among the channels
  /// still remembered, sooner when a deletion failed (a back-off; the pass stops at the first
  /// failure), or the largest int64 when nothing is remembered. The sweeper thread runs it.
  std::int64_t sweep();
  /// Has the sweeper sweep (after the key ring changed) and waits for that sweep, at most `wait`.
  /// Nothing when deletions are off.
  void request_sweep(std::chrono::milliseconds wait);
  /// How long sweeps wait, in seconds, after a pass in which nginx did not take a deletion, when they
  /// waited `previous` after the pass before (0: it went well): 2, doubling to 32.
  static std::int64_t sweep_backoff_after(std::int64_t previous) noexcept { return std::min<std::int64_t>(previous ? 2 * previous : 2, 32); }
  std::uint64_t sweeps_done() const;  ///< sweeps the sweeper has finished
  /// Tests' hook (none in production): called by the sweeper as it starts to wait, with the sweeps
  /// finished and how long it means to wait (milliseconds::max(): until woken), its lock held (signal,
  /// never block). Set before the first stream.
  void set_sweep_hook(std::function<void(std::uint64_t, std::chrono::milliseconds)> hook) { sweep_hook_ = std::move(hook); }
  /// Ends the sweeper (after the deletion in flight).
  void stop();

 private:
  struct streams {
    std::int64_t expires = 0;  ///< the earliest expiry among the tokens let in
    /// Their key ids, each once, with the earliest expiry among that key's tokens (what its kept row holds).
    std::vector<std::pair<std::string, std::int64_t>> keys;
  };
  bool due(const streams& t, std::int64_t now) const;
  void remember(const std::string& channel, const streams& t);  ///< mu_ held
  /// mu_ held: whether `channel` already remembers `key_id` with an expiry at or before `expires`.
  bool covers(const std::string& channel, const std::string& key_id, std::int64_t expires) const;
  /// mu_ held: the remembered channels that are due; the earliest expiry of the others into `earliest` (when given).
  std::vector<std::string> due_channels(std::int64_t* earliest) const;
  void wake();              ///< asks the sweeper (started if need be) for a sweep
  void wake_locked();       ///< sweep_mu_ held: the same
  void sweep_loop();        ///< the sweeper: sweeps at the next expiry and when asked

  nchan_endpoint& nginx_;
  std::function<bool(std::string_view)> key_known_;
  std::function<void(const std::string&)> forget_;
  std::function<void(std::uint64_t, std::chrono::milliseconds)> sweep_hook_;

  std::mutex mu_;
  std::condition_variable busy_cv_;
  std::unordered_set<std::string> busy_;  ///< channels whose deletion or kept-row write is in flight (mu_)
  std::size_t adding_ = 0;                 ///< of them, channels not remembered yet whose first row is being written (mu_)
  std::unordered_map<std::string, streams> streams_;  ///< by channel (mu_)

  mutable std::mutex sweep_mu_;  ///< guards the sweeper's members below
  std::condition_variable sweep_cv_, swept_cv_;
  std::atomic<bool> stopping_{false};  ///< set under sweep_mu_
  std::atomic<std::int64_t> next_expiry_ms_{std::numeric_limits<std::int64_t>::max()};  ///< when the sweeper sweeps next
  bool rescan_ = false;                                 ///< sweep again before waiting
  std::uint64_t sweeps_started_ = 0, sweeps_done_ = 0;
  std::int64_t sweep_backoff_s_ = 0;  ///< the sweeper's
  std::thread sweeper_;               ///< sweep_loop, started with the first stream
};

}  // namespace folio::service
