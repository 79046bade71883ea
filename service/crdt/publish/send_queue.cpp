#include "crdt/publish/send_queue.hpp"

#include "platform/log.hpp"

namespace folio::service {

namespace {
thread_local send_queue::hold* holding = nullptr;  ///< the calling thread's innermost hold, if any
}  // namespace

send_queue::hold::hold(send_queue& q) : q_(q), outer_(holding) { holding = this; }

send_queue::hold::~hold() {
  holding = outer_;
  if (!channels_.empty()) q_.release(*this);
}

void send_queue::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_) return;
  }
  // Committed changes still queued go out first, for a moment at most (a stopping responder).
  drain(std::chrono::seconds(2));
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
    if (queued_ != 0)
      log::write("warn", "publish_queue_dropped",
                 std::to_string(queued_) + " committed changes of " + std::to_string(queues_.size()) +
                     " channels were not handed to nginx before the responder stopped (nginx too slow); their subscribers catch up at their next message or sync");
  }
  ready_cv_.notify_all();
  for (std::thread& t : senders_) t.join();
}

void send_queue::release(hold& h) {
  std::lock_guard<std::mutex> g(mu_);
  bool woke = false;
  for (const std::string& channel : h.channels_) {
    const auto q = queues_.find(channel);
    if (q == queues_.end()) continue;  // every message sent and the queue gone (listed twice: sent since its first listing)
    channel_queue& c = q->second;
    const bool front_held = !c.messages.empty() && c.messages.front().held;  // then the channel is not in ready_
    for (queued_message& m : c.messages) m.held = m.held == &h ? nullptr : m.held;
    if (front_held && !c.sending && !c.messages.front().held) make_ready(channel, c.tenant), woke = true;
  }
  if (woke) ready_cv_.notify_all();
}

void send_queue::make_ready(const std::string& channel, const std::string& tenant) {
  std::deque<std::string>& mine = ready_[tenant];
  if (mine.empty()) ready_tenants_.push_back(tenant);
  mine.push_back(channel);
}

bool send_queue::push(std::string&& channel, std::string&& full, std::string&& notice, const std::string& tenant) {
  std::lock_guard<std::mutex> g(mu_);
  if (queued_ >= max_queued || stopping_) return false;
  if (queued_bytes_ + full.size() + notice.size() > max_queued_bytes) {
    if (notice.empty()) return false;  // an ephemeral message has no notice to stand for it
    full = notice;                     // its ops would not fit: subscribers sync
  }
  queued_bytes_ += full.size() + notice.size();
  ++queued_;
  const auto [entry, created] = queues_.try_emplace(channel);
  channel_queue& q = entry->second;
  if (created) q.tenant = tenant;  // a channel is one tenant's (its records'), set once: senders read it unlocked
  hold* const h = holding && &holding->q_ == this ? holding : nullptr;  // this queue's only
  q.messages.push_back({std::move(full), std::move(notice), h});
  if (h && (h->channels_.empty() || h->channels_.back() != channel)) h->channels_.push_back(channel);  // a request's messages to one channel come together
  if (!q.sending && q.messages.size() == 1 && !h) make_ready(channel, tenant);
  if (senders_.empty())
    for (int i = 0; i < senders; ++i) senders_.emplace_back([this] { send_loop(); });
  ready_cv_.notify_one();
  return true;
}

void send_queue::send_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ready_cv_.wait(lock, [&] { return stopping_ || !ready_tenants_.empty(); });
    if (stopping_) return;
    // The next tenant in turn, its next channel; the tenant goes to the back while it has more.
    const std::string tenant = std::move(ready_tenants_.front());
    ready_tenants_.pop_front();
    const auto mine = ready_.find(tenant);
    const std::string channel = std::move(mine->second.front());
    mine->second.pop_front();
    if (mine->second.empty()) ready_.erase(mine);
    else ready_tenants_.push_back(tenant);
    channel_queue& q = queues_.at(channel);  // references to map elements survive rehashing
    q.sending = true;
    const queued_message m = std::move(q.messages.front());
    q.messages.pop_front();
    lock.unlock();
    send_(channel, m.full, m.notice, tenant);  // the channel's tenant: ready_ lists a channel under it
    lock.lock();
    q.sending = false;
    if (!q.messages.empty() && !q.messages.front().held)
      make_ready(channel, q.tenant), ready_cv_.notify_one();  // behind other channels: one busy channel cannot starve them
    else if (q.messages.empty())
      queues_.erase(channel);  // else its front is held: its release makes it ready
    queued_bytes_ -= m.full.size() + m.notice.size();
    --queued_;
    drained_cv_.notify_all();  // drain()s waiting for this many or fewer
  }
}

bool send_queue::drain(std::chrono::milliseconds wait, std::size_t left) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_cv_.wait_for(lock, wait, [&] { return queued_ <= left; });
}

std::size_t send_queue::queued() const {
  std::lock_guard<std::mutex> g(mu_);
  return queued_;
}

}  // namespace folio::service
