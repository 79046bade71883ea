// service/crdt/publish/send_queue.hpp — the messages waiting for nginx, per channel, and the sender
// threads that hand them over.
//
// The request that committed a change queues its message (push, under the record's lock, so a
// record's messages queue in commit order) and answers; sender threads send each channel's messages
// one at a time in the order they were queued, different channels in parallel, and tenants in turn
// (round robin: a message waits for at most one message of each other tenant with messages ready,
// however many one tenant queued). The writer never waits for nginx. At most max_queued messages
// wait (nginx far behind or gone) and max_queued_bytes of them carry ops; past the bytes a message's
// notice is queued instead of it (push), past the count push refuses it (the publisher owes the
// channel a notice).
// A hold (publisher::answer_first) keeps back the messages its thread queues until it ends: they keep
// their place in their channels' queues (commit order), and messages queued behind them wait too.
// Cost: one map entry per channel with messages waiting, the messages themselves; `senders` threads,
// started with the first message.
// Thread-safety: push, drain and queued from any thread; a hold belongs to its thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace folio::service {

class send_queue {
 public:
  static constexpr std::size_t max_queued = 100000;                       ///< messages waiting for a sender, at most
  static constexpr std::size_t max_queued_bytes = std::size_t(64) << 20;  ///< bytes of them, at most
  static constexpr int senders = 2;                                       ///< threads sending queued messages

  /// `send(channel, full, notice, tenant)` hands one message to nginx (the publisher's publish), on a sender thread.
  using sender = std::function<void(const std::string&, const std::string&, const std::string&, const std::string&)>;
  explicit send_queue(sender send) : send_(std::move(send)) {}
  ~send_queue() { stop(); }
  send_queue(const send_queue&) = delete;
  send_queue& operator=(const send_queue&) = delete;

  /// Queues `full` and `notice` for `channel` of `tenant` (moved from only when queued); over
  /// max_queued_bytes the notice is queued alone (an ephemeral message, whose notice is empty, is
  /// refused instead). False when max_queued messages wait or stopping.
  /// While the calling thread holds a hold of this queue, the message is held (above).
  bool push(std::string&& channel, std::string&& full, std::string&& notice, const std::string& tenant);
  /// Waits until at most `left` messages are queued or being sent, at most `wait`; false when more still are.
  bool drain(std::chrono::milliseconds wait, std::size_t left = 0);
  std::size_t queued() const;  ///< messages queued or being sent
  /// Sends what is queued for a moment (2 s) at most, then ends the senders after the sends in
  /// flight; what is left is dropped with a warning line.
  void stop();

  /// While one lives on a thread, the messages that thread queues to this queue are held (above).
  /// One per thread at a time (nested ones stack); not movable.
  class hold {
   public:
    explicit hold(send_queue& q);
    ~hold();
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;

   private:
    friend class send_queue;
    send_queue& q_;
    hold* outer_;                        ///< the thread's hold before this one (nested)
    std::vector<std::string> channels_;  ///< channels with a message held by this hold (a channel again only after another)
  };

 private:
  struct queued_message {
    std::string full, notice;
    const hold* held = nullptr;  ///< not to be sent while this hold lives
  };
  struct channel_queue {
    std::string tenant;
    std::deque<queued_message> messages;
    bool sending = false;  ///< a sender holds its front message; the channel is in ready_ iff !sending and its front message waits, not held
  };
  void release(hold& h);
  void make_ready(const std::string& channel, const std::string& tenant);  ///< mu_ held
  /// A sender thread: takes a ready channel's first message, sends it, puts the channel back.
  void send_loop();

  sender send_;
  mutable std::mutex mu_;
  std::condition_variable ready_cv_, drained_cv_;
  std::unordered_map<std::string, channel_queue> queues_;  ///< by channel, while messages wait or one is sent
  /// Channels whose first message a sender may take, by tenant, and the tenants with such channels, in turn.
  std::unordered_map<std::string, std::deque<std::string>> ready_;
  std::deque<std::string> ready_tenants_;
  std::size_t queued_ = 0, queued_bytes_ = 0;  ///< messages queued or being sent, and their bytes
  bool stopping_ = false;
  std::vector<std::thread> senders_;  ///< send_loop, started with the first message queued
};

}  // namespace folio::service
