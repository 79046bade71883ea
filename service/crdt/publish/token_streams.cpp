#include "crdt/publish/token_streams.hpp"

#include "platform/log.hpp"

namespace folio::service {

namespace {
std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

bool token_streams::due(const streams& t, std::int64_t now) const {
  if (now >= t.expires) return true;  // verify_client_token refuses a token from its second on
  if (key_known_)
    for (const auto& [id, expires] : t.keys)
      if (!key_known_(id)) return true;
  return false;
}

void token_streams::remember(const std::string& channel, const streams& t) {
  streams& r = streams_[channel];
  if (r.keys.empty() || t.expires < r.expires) r.expires = t.expires;
  for (const auto& key : t.keys) {  // (no structured binding: clang before 16 cannot capture one)
    const auto k = std::find_if(r.keys.begin(), r.keys.end(), [&](const auto& e) { return e.first == key.first; });
    if (k == r.keys.end()) r.keys.push_back(key);
    else k->second = std::min(k->second, key.second);
  }
}

bool token_streams::covers(const std::string& channel, const std::string& key_id, std::int64_t expires) const {
  const auto it = streams_.find(channel);
  if (it == streams_.end()) return false;
  for (const auto& [id, e] : it->second.keys)
    if (id == key_id) return e <= expires;
  return false;
}

bool token_streams::end_due(const std::string& channel) {
  streams t;
  {
    std::unique_lock<std::mutex> g(mu_);
    // A deletion of this channel in flight (the sweeper's, say, while a request publishes): its
    // outcome first, so a message never overtakes the deletion that must come before it; a kept-row
    // write in flight too, so that the deletion's `forget` removes it. Other channels do not wait.
    busy_cv_.wait(g, [&] { return !busy_.count(channel); });
    auto it = streams_.find(channel);
    if (it == streams_.end() || !due(it->second, now_seconds())) return true;
    // Forgotten before the deletion: a subscriber let in after it (once the channel is no longer busy)
    // is remembered, and kept, anew.
    t = std::move(it->second);
    streams_.erase(it);
    busy_.insert(channel);
  }
  const std::string why = nginx_.send(channel, nullptr);
  if (why.empty() && forget_) {
    try {
      forget_(channel);
    } catch (const std::exception& e) {
      log::write("warn", "token_streams_not_forgotten",
                 "channel " + channel.substr(0, 12) + "...: its streams were ended but its kept rows were not deleted (" + e.what() +
                     "); the next responder to start ends the channel again");
    }
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    busy_.erase(channel);
    if (!why.empty()) remember(channel, t);
  }
  busy_cv_.notify_all();
  if (why.empty()) {
    log::write("info", "token_streams_ended",
               "channel " + channel.substr(0, 12) + "...: a client token on its streams expired or lost its key; its subscribers were ended (they reconnect and are authorized again)");
    return true;
  }
  log::write("warn", "token_streams_not_ended",
             "channel " + channel.substr(0, 12) + "...: deleting it to end streams of an expired client token failed: " + why + "; nothing goes to it until a deletion succeeds");
  return false;
}

bool token_streams::subscribed(const std::string& channel, std::int64_t expires, const std::string& key_id, const std::function<void(std::int64_t)>& keep) {
  streams t;
  t.expires = expires;
  t.keys.emplace_back(key_id, expires);
  std::unique_lock<std::mutex> lock(mu_);
  for (bool swept = false;; swept = true) {
    busy_cv_.wait(lock, [&] { return !busy_.count(channel); });
    if (covers(channel, key_id, expires)) return true;  // remembered and kept already: nothing to write
    if (streams_.count(channel) || streams_.size() + adding_ < max_channels) break;
    if (swept) {
      log::write("error", "token_streams_full",
                 std::to_string(max_channels) + " channels already hold streams of unexpired client tokens; a subscriber is refused");
      return false;
    }
    // Full: end the channels already due (silent ones whose tokens expired), then there is room.
    const std::vector<std::string> ended = due_channels(nullptr);
    lock.unlock();
    for (const std::string& id : ended) end_due(id);
    lock.lock();
  }
  if (keep) {
    // The row first, the channel busy meanwhile (a deletion of it waits, then removes the row too).
    const bool adding = !streams_.count(channel);
    busy_.insert(channel);
    adding_ += adding;
    lock.unlock();
    const auto done = [&] {
      lock.lock();
      busy_.erase(channel);
      adding_ -= adding;
      busy_cv_.notify_all();
    };
    try {
      keep(expires);
    } catch (...) {
      done();
      throw;
    }
    done();
  }
  remember(channel, t);
  lock.unlock();
  // Ended at its expiry by the sweeper: woken when this one comes before the expiry it waits for
  // (during a sweep that is "never", so a sweep always looks again at what came in meanwhile).
  if (expires * 1000 < next_expiry_ms_.load()) wake();
  return true;
}

void token_streams::remember_kept(const std::vector<kept_stream>& rows) {
  {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<kept_stream> sorted(rows);
    std::stable_sort(sorted.begin(), sorted.end(), [](const kept_stream& a, const kept_stream& b) { return a.expires < b.expires; });
    std::size_t past_bound = 0;
    for (const kept_stream& r : sorted) {
      streams t;
      t.expires = r.expires;
      t.keys.emplace_back(r.key_id, r.expires);
      const bool fits = streams_.count(r.channel) || streams_.size() < max_channels;
      if (!fits) t.expires = 0, ++past_bound;  // due now: deleted at the first sweep
      remember(r.channel, t);
    }
    if (past_bound)
      log::write("warn", "token_streams_past_bound",
                 std::to_string(past_bound) + " kept rows of client-token streams are past the " + std::to_string(max_channels) +
                     " channels a responder remembers; their channels are ended now (their subscribers reconnect)");
  }
  if (!rows.empty()) wake();
}

std::vector<std::string> token_streams::due_channels(std::int64_t* earliest) const {
  std::vector<std::string> out;
  const std::int64_t now = now_seconds();
  for (const auto& [id, s] : streams_)
    if (due(s, now)) out.push_back(id);
    else if (earliest) *earliest = std::min(*earliest, s.expires);
  return out;
}

std::int64_t token_streams::sweep() {
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  std::vector<std::string> ended;
  {
    std::lock_guard<std::mutex> g(mu_);
    ended = due_channels(&earliest);
  }
  for (const std::string& id : ended) {
    if (stopping_) break;
    if (!end_due(id)) {
      // nginx does not take deletions (restarting, its socket gone): the rest wait for the next pass,
      // after a back-off (2 s, doubling to 32 s), rather than one failing request each.
      sweep_backoff_s_ = sweep_backoff_after(sweep_backoff_s_);
      return std::min(earliest, now_seconds() + sweep_backoff_s_);
    }
  }
  sweep_backoff_s_ = 0;
  return earliest;
}

void token_streams::wake_locked() {
  rescan_ = true;
  if (!sweeper_.joinable()) sweeper_ = std::thread([this] { sweep_loop(); });
  sweep_cv_.notify_one();
}

void token_streams::wake() {
  if (!nginx_.enabled()) return;  // nothing can be deleted: no sweeps
  std::lock_guard<std::mutex> g(sweep_mu_);
  if (!stopping_) wake_locked();
}

void token_streams::request_sweep(std::chrono::milliseconds wait) {
  if (!nginx_.enabled()) return;
  std::unique_lock<std::mutex> g(sweep_mu_);
  if (stopping_) return;
  const std::uint64_t target = sweeps_started_ + 1;  // one that starts after this request
  wake_locked();
  swept_cv_.wait_for(g, wait, [&] { return sweeps_done_ >= target || stopping_; });
}

std::uint64_t token_streams::sweeps_done() const {
  std::lock_guard<std::mutex> g(sweep_mu_);
  return sweeps_done_;
}

void token_streams::stop() {
  {
    std::lock_guard<std::mutex> g(sweep_mu_);
    stopping_ = true;
  }
  sweep_cv_.notify_all();
  swept_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

void token_streams::sweep_loop() {
  std::unique_lock<std::mutex> lock(sweep_mu_);
  constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
  while (!stopping_) {
    // Streams of client tokens that expired (or whose key left the ring) end when their expiry comes or
    // a sweep is asked for, and the loop wakes again at the next expiry: on time even when nothing is
    // published to the channel through this node.
    if (rescan_ || now_ms() >= next_expiry_ms_.load()) {
      rescan_ = false;
      ++sweeps_started_;
      next_expiry_ms_ = never;  // a subscribe meanwhile asks for another pass
      lock.unlock();
      const std::int64_t next_expiry = sweep();
      lock.lock();
      ++sweeps_done_;
      swept_cv_.notify_all();
      if (stopping_) break;
      if (next_expiry != never) next_expiry_ms_ = next_expiry * 1000;
    }
    if (rescan_) continue;  // asked for while sweeping
    const std::int64_t next = next_expiry_ms_.load();
    const std::chrono::milliseconds wait = next == never ? std::chrono::milliseconds::max() : std::chrono::milliseconds(std::max<std::int64_t>(0, next - now_ms()));
    if (sweep_hook_) sweep_hook_(sweeps_done_, wait);
    if (next == never) sweep_cv_.wait(lock);
    else sweep_cv_.wait_until(lock, std::chrono::steady_clock::now() + wait);
  }
}

}  // namespace folio::service
