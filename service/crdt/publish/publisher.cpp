#include "crdt/publish/publisher.hpp"

#include <curl/curl.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "platform/log.hpp"

namespace folio::service {

std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor) {
  std::string msg;
  msg.reserve(tenant.size() + org.size() + doc.size() + editor.size() + 3);
  msg.append(tenant).append(1, '\n').append(org).append(1, '\n').append(doc).append(1, '\n').append(editor);
  unsigned char mac[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) out += hex[mac[i] >> 4], out += hex[mac[i] & 15];
  return out;
}

namespace {

struct curl_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};

std::size_t discard(char*, std::size_t size, std::size_t n, void*) { return size * n; }

/// One handle per thread, kept: its connection to nginx is reused from one publish to the next.
CURL* thread_handle() {
  static const bool global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  thread_local std::unique_ptr<CURL, curl_deleter> handle(global ? curl_easy_init() : nullptr);
  return handle.get();
}

}  // namespace

publisher::~publisher() {
  // Committed changes still queued go out first, for a moment at most (a stopping responder).
  drain(std::chrono::seconds(2));
  {
    std::lock_guard<std::mutex> g(queue_mu_);
    senders_stop_ = true;
    if (queued_ != 0)
      log::write("warn", "publish_queue_dropped",
                 std::to_string(queued_) + " committed changes of " + std::to_string(queues_.size()) +
                     " channels were not handed to nginx before the responder stopped (nginx too slow); their subscribers catch up at their next message or sync");
  }
  queue_cv_.notify_all();
  for (std::thread& t : senders_) t.join();
  {
    std::lock_guard<std::mutex> g(owed_mu_);
    stopping_ = true;
  }
  owed_cv_.notify_all();
  if (retrier_.joinable()) retrier_.join();
}

std::string publisher::post(const std::string& channel, const std::string* message) {
  CURL* c = thread_handle();
  long code = 0;
  CURLcode rc = CURLE_FAILED_INIT;
  if (c) {
    curl_easy_reset(c);
    const std::string url = "http://localhost/_folio/publish/" + channel;
    struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, config_.publish_socket.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (message) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, message->data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(message->size()));
    } else {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
  }
  if (rc == CURLE_OK && ((code >= 200 && code < 300) || (!message && code == 404))) return {};
  // 507: Nchan's shared memory is full; new subscribers are refused for a while (memory_full()).
  if (rc == CURLE_OK && code == 507)
    memory_full_until_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count() +
                            std::chrono::duration_cast<std::chrono::milliseconds>(memory_full_hold).count();
  return (rc == CURLE_OK ? std::string("refused") : curl_easy_strerror(rc)) + " (HTTP " + std::to_string(code) + ")";
}

publisher::tenant_budget& publisher::refilled_budget(const std::string& tenant) {
  const auto now = std::chrono::steady_clock::now();
  if (budgets_.size() >= 10000 && !budgets_.count(tenant))  // forget the tenants whose budgets are whole again
    std::erase_if(budgets_, [&](const auto& b) { return now - b.second.refilled >= window; });
  tenant_budget& b = budgets_[tenant];
  const double part = std::chrono::duration<double>(now - b.refilled).count() / std::chrono::duration<double>(window).count();
  b.messages = std::min<double>(messages_per_tenant_window, b.messages + messages_per_tenant_window * part);
  b.full_bytes = std::min<double>(full_bytes_per_tenant_window, b.full_bytes + full_bytes_per_tenant_window * part);
  b.refilled = now;
  return b;
}

bool publisher::take_budget(const std::string& tenant, std::size_t bytes) {
  std::lock_guard<std::mutex> g(budget_mu_);
  const auto now = std::chrono::steady_clock::now();
  const double full = static_cast<double>(full_bytes_per_window);
  budget_ = std::min(full, budget_ + full * std::chrono::duration<double>(now - refilled_).count() / std::chrono::duration<double>(window).count());
  refilled_ = now;
  tenant_budget& mine = refilled_budget(tenant);
  if (budget_ < static_cast<double>(bytes) || mine.full_bytes < static_cast<double>(bytes)) return false;
  budget_ -= static_cast<double>(bytes);
  mine.full_bytes -= static_cast<double>(bytes);
  return true;
}

bool publisher::take_message(const std::string& tenant) {
  bool log_spent = false;
  {
    std::lock_guard<std::mutex> g(budget_mu_);
    tenant_budget& mine = refilled_budget(tenant);
    if (mine.messages >= 1) {
      mine.messages -= 1;
      mine.spent_logged = false;
      return true;
    }
    log_spent = !mine.spent_logged;
    mine.spent_logged = true;
  }
  if (log_spent)
    log::write("warn", "publish_budget_spent",
               "key " + tenant + " published " + std::to_string(messages_per_tenant_window) + " messages in the last " + std::to_string(window.count()) +
                   " s; its further changes owe their channels a notice to sync, sent as its budget refills");
  return false;
}

bool publisher::publish(const std::string& channel, const std::string& full, const std::string& notice, const std::string& tenant) {
  if (config_.publish_socket.empty()) return false;
  if (!end_due_streams(channel)) {
    // Logged there; the channel's streams stay remembered, and the owed notice goes after a deletion that succeeds.
    ++failures_;
    owe(channel, notice, tenant);
    return false;
  }
  const std::string& message = full.size() <= max_message_bytes && take_budget(tenant, full.size()) ? full : notice;
  const std::string why = post(channel, &message);
  if (why.empty()) {
    ++published_;
    return true;
  }
  ++failures_;
  log::write("warn", "publish_failed",
             "publish to channel " + channel.substr(0, 12) + "... failed: " + why + "; a notice to sync is resent until nginx takes one");
  owe(channel, notice, tenant);
  return false;
}

namespace {
thread_local publisher::answer_first* holding = nullptr;  ///< the calling thread's innermost answer_first, if any
}  // namespace

publisher::answer_first::answer_first(publisher& p) : p_(p), outer_(holding) { holding = this; }

publisher::answer_first::~answer_first() {
  holding = outer_;
  if (!channels_.empty()) p_.release(*this);
}

void publisher::release(answer_first& a) {
  std::lock_guard<std::mutex> g(queue_mu_);
  bool woke = false;
  for (const std::string& channel : a.channels_) {
    const auto q = queues_.find(channel);
    if (q == queues_.end()) continue;  // every message sent and the queue gone (listed twice: sent since its first listing)
    channel_queue& c = q->second;
    const bool front_held = !c.messages.empty() && c.messages.front().held;  // then the channel is not in ready_
    for (queued_message& m : c.messages) m.held = m.held == &a ? nullptr : m.held;
    if (front_held && !c.sending && !c.messages.front().held) make_ready(channel, c.tenant), woke = true;
  }
  if (woke) queue_cv_.notify_all();
}

void publisher::make_ready(const std::string& channel, const std::string& tenant) {
  std::deque<std::string>& mine = ready_[tenant];
  if (mine.empty()) ready_tenants_.push_back(tenant);
  mine.push_back(channel);
}

void publisher::enqueue(std::string channel, std::string full, std::string notice, const std::string& tenant) {
  if (config_.publish_socket.empty()) return;
  if (!take_message(tenant)) {  // its budget is spent: one notice per channel, later
    ++over_budget_;
    owe(channel, notice, tenant, true);
    return;
  }
  {
    std::lock_guard<std::mutex> g(queue_mu_);
    if (queued_ < max_queued && !senders_stop_) {
      if (queued_bytes_ + full.size() + notice.size() > max_queued_bytes) full = notice;  // its ops would not fit: subscribers sync
      queued_bytes_ += full.size() + notice.size();
      ++queued_;
      const auto [entry, created] = queues_.try_emplace(channel);
      channel_queue& q = entry->second;
      if (created) q.tenant = tenant;  // a channel is one tenant's (its records'), set once: senders read it unlocked
      answer_first* const hold = holding && &holding->p_ == this ? holding : nullptr;  // this publisher's only
      q.messages.push_back({std::move(full), std::move(notice), hold});
      if (hold && (hold->channels_.empty() || hold->channels_.back() != channel)) hold->channels_.push_back(channel);  // a request's messages to one channel come together
      if (!q.sending && q.messages.size() == 1 && !hold) make_ready(channel, tenant);
      if (senders_.empty())
        for (int i = 0; i < senders; ++i) senders_.emplace_back([this] { send_loop(); });
      queue_cv_.notify_one();
      return;
    }
  }
  ++failures_;
  log::write("warn", "publish_queue_full",
             "channel " + channel.substr(0, 12) + "...: " + std::to_string(max_queued) + " messages already wait for nginx; the channel is owed a notice to sync");
  owe(channel, notice, tenant);
}

void publisher::send_loop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [&] { return senders_stop_ || !ready_tenants_.empty(); });
    if (senders_stop_) return;
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
    publish(channel, m.full, m.notice, tenant);  // the channel's tenant: ready_ lists a channel under it
    lock.lock();
    q.sending = false;
    if (!q.messages.empty() && !q.messages.front().held)
      make_ready(channel, q.tenant), queue_cv_.notify_one();  // behind other channels: one busy channel cannot starve them
    else if (q.messages.empty())
      queues_.erase(channel);  // else its front is held: its release makes it ready
    queued_bytes_ -= m.full.size() + m.notice.size();
    if (--queued_ == 0) drained_cv_.notify_all();
  }
}

bool publisher::drain(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  return drained_cv_.wait_for(lock, wait, [&] { return queued_ == 0; });
}

std::size_t publisher::queued() const {
  std::lock_guard<std::mutex> g(queue_mu_);
  return queued_;
}

namespace {
std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

bool publisher::due(const token_streams& t, std::int64_t now) const {
  if (now >= t.expires) return true;  // verify_client_token refuses a token from its second on
  if (key_known_)
    for (const auto& [id, expires] : t.keys)
      if (!key_known_(id)) return true;
  return false;
}

void publisher::remember(const std::string& channel, const token_streams& t) {
  token_streams& r = streams_[channel];
  if (r.keys.empty() || t.expires < r.expires) r.expires = t.expires;
  for (const auto& key : t.keys) {  // (no structured binding: clang before 16 cannot capture one)
    const auto k = std::find_if(r.keys.begin(), r.keys.end(), [&](const auto& e) { return e.first == key.first; });
    if (k == r.keys.end()) r.keys.push_back(key);
    else k->second = std::min(k->second, key.second);
  }
}

bool publisher::covers(const std::string& channel, const std::string& key_id, std::int64_t expires) const {
  const auto it = streams_.find(channel);
  if (it == streams_.end()) return false;
  for (const auto& [id, e] : it->second.keys)
    if (id == key_id) return e <= expires;
  return false;
}

bool publisher::end_due_streams(const std::string& channel) {
  token_streams t;
  {
    std::unique_lock<std::mutex> g(streams_mu_);
    // A deletion of this channel in flight (the background's, say, while a request publishes): its
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
  const std::string why = post(channel, nullptr);
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
    std::lock_guard<std::mutex> g(streams_mu_);
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

bool publisher::token_subscribed(const std::string& channel, std::int64_t expires, const std::string& key_id, const std::function<void(std::int64_t)>& keep) {
  token_streams t;
  t.expires = expires;
  t.keys.emplace_back(key_id, expires);
  std::unique_lock<std::mutex> lock(streams_mu_);
  for (bool swept = false;; swept = true) {
    busy_cv_.wait(lock, [&] { return !busy_.count(channel); });
    if (covers(channel, key_id, expires)) return true;  // remembered and kept already: nothing to write
    if (streams_.count(channel) || streams_.size() + adding_ < max_token_channels) break;
    if (swept) {
      log::write("error", "token_streams_full",
                 std::to_string(max_token_channels) + " channels already hold streams of unexpired client tokens; a subscriber is refused");
      return false;
    }
    // Full: end the channels already due (silent ones whose tokens expired), then there is room.
    const std::vector<std::string> ended = due_channels(nullptr);
    lock.unlock();
    for (const std::string& id : ended) end_due_streams(id);
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
  // Ended at its expiry by background_loop: woken when this one comes before the expiry it waits for
  // (during a sweep that is "never", so a sweep always looks again at what came in meanwhile).
  if (expires * 1000 < next_expiry_ms_.load()) wake_background();
  return true;
}

void publisher::remember_kept(const std::vector<kept_stream>& rows) {
  {
    std::lock_guard<std::mutex> g(streams_mu_);
    std::vector<kept_stream> sorted(rows);
    std::stable_sort(sorted.begin(), sorted.end(), [](const kept_stream& a, const kept_stream& b) { return a.expires < b.expires; });
    std::size_t past_bound = 0;
    for (const kept_stream& r : sorted) {
      token_streams t;
      t.expires = r.expires;
      t.keys.emplace_back(r.key_id, r.expires);
      const bool fits = streams_.count(r.channel) || streams_.size() < max_token_channels;
      if (!fits) t.expires = 0, ++past_bound;  // due now: deleted at the first sweep
      remember(r.channel, t);
    }
    if (past_bound)
      log::write("warn", "token_streams_past_bound",
                 std::to_string(past_bound) + " kept rows of client-token streams are past the " + std::to_string(max_token_channels) +
                     " channels a responder remembers; their channels are ended now (their subscribers reconnect)");
  }
  if (!rows.empty()) wake_background();
}

void publisher::wake_locked(bool sweep) {
  if (sweep) rescan_ = true;
  if (!retrier_.joinable()) retrier_ = std::thread([this] { background_loop(); });
  owed_cv_.notify_one();
}

void publisher::wake_background() {
  if (config_.publish_socket.empty()) return;  // nothing can be deleted: no sweeps
  std::lock_guard<std::mutex> g(owed_mu_);
  if (!stopping_) wake_locked(true);
}

void publisher::request_sweep(std::chrono::milliseconds wait) {
  if (config_.publish_socket.empty()) return;
  std::unique_lock<std::mutex> g(owed_mu_);
  if (stopping_) return;
  const std::uint64_t target = sweeps_started_ + 1;  // one that starts after this request
  wake_locked(true);
  swept_cv_.wait_for(g, wait, [&] { return sweeps_done_ >= target || stopping_; });
}

std::uint64_t publisher::sweeps_done() const {
  std::lock_guard<std::mutex> g(owed_mu_);
  return sweeps_done_;
}

std::vector<std::string> publisher::due_channels(std::int64_t* earliest) const {
  std::vector<std::string> out;
  const std::int64_t now = now_seconds();
  for (const auto& [id, streams] : streams_)
    if (due(streams, now)) out.push_back(id);
    else if (earliest) *earliest = std::min(*earliest, streams.expires);
  return out;
}

std::int64_t publisher::sweep() {
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  std::vector<std::string> ended;
  {
    std::lock_guard<std::mutex> g(streams_mu_);
    ended = due_channels(&earliest);
  }
  for (const std::string& id : ended) {
    if (stopping_) break;
    if (!end_due_streams(id)) {
      // nginx does not take deletions (restarting, its socket gone): the rest wait for the next pass,
      // after a back-off (2 s, doubling to 32 s), rather than one failing request each.
      sweep_backoff_s_ = sweep_backoff_after(sweep_backoff_s_);
      return std::min(earliest, now_seconds() + sweep_backoff_s_);
    }
  }
  sweep_backoff_s_ = 0;
  return earliest;
}

void publisher::owe(const std::string& channel, const std::string& notice, const std::string& tenant, bool deferred) {
  std::lock_guard<std::mutex> g(owed_mu_);
  if (stopping_) return;
  auto it = owed_.find(channel);
  if (it == owed_.end()) {
    std::size_t& mine = owed_by_tenant_[tenant];
    if (owed_.size() >= max_owed || mine >= max_owed_per_tenant) {
      if (!mine) owed_by_tenant_.erase(tenant);
      log::write("error", "publish_notice_dropped",
                 "channel " + channel.substr(0, 12) + "... is not owed a notice: " + std::to_string(mine >= max_owed_per_tenant ? max_owed_per_tenant : max_owed) +
                     " channels " + (mine >= max_owed_per_tenant ? "of its key " : "") + "already are; its subscribers sync when they reconnect");
      return;
    }
    ++mine;
    it = owed_.emplace(channel, owed_notice{notice, tenant, 0, std::chrono::steady_clock::now() + std::chrono::seconds(1), deferred}).first;
  } else {
    // The latest: any notice makes subscribers sync. The time of its next try stays (a channel changed
    // again and again is not put off).
    it->second.message = notice;
    it->second.deferred = it->second.deferred && deferred;
  }
  wake_locked(false);
}

bool publisher::memory_full() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count() < memory_full_until_ms_.load();
}

std::size_t publisher::owed() const {
  std::lock_guard<std::mutex> g(owed_mu_);
  return owed_.size();
}

void publisher::background_loop() {
  std::unique_lock<std::mutex> lock(owed_mu_);
  constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
  while (!stopping_) {
    // Streams of client tokens that expired (or whose key left the ring) end when their expiry comes or
    // a sweep is asked for, and the loop wakes again at the next expiry: on time even when nothing is
    // published to the channel through this node. A wake for an owed notice alone sweeps nothing.
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
    const auto now = std::chrono::steady_clock::now();
    auto wake = std::chrono::steady_clock::time_point::max();
    if (const std::int64_t next = next_expiry_ms_.load(); next != never) wake = now + std::chrono::milliseconds(std::max<std::int64_t>(0, next - now_ms()));
    std::vector<std::pair<std::string, std::string>> due;
    std::vector<std::string> due_tenants;
    for (const auto& [channel, o] : owed_) {
      if (o.next_try <= now) due.emplace_back(channel, o.message), due_tenants.push_back(o.tenant);
      else wake = std::min(wake, o.next_try);
    }
    if (due.empty()) {
      if (rescan_) continue;  // asked for while sweeping
      if (wake == std::chrono::steady_clock::time_point::max()) owed_cv_.wait(lock);
      else owed_cv_.wait_until(lock, wake);
      continue;
    }
    lock.unlock();
    enum class outcome { delivered, failed, over_budget };
    std::vector<outcome> delivered;
    for (std::size_t i = 0; i < due.size(); ++i) {
      if (stopping_) break;  // the destructor waits for at most the POST in flight
      const auto& [channel, message] = due[i];
      if (!take_message(due_tenants[i])) delivered.push_back(outcome::over_budget);  // waits for its tenant's budget, no attempt spent
      else delivered.push_back(end_due_streams(channel) && post(channel, &message).empty() ? outcome::delivered : outcome::failed);
    }
    lock.lock();
    for (std::size_t i = 0; i < delivered.size(); ++i) {
      auto it = owed_.find(due[i].first);
      if (it == owed_.end()) continue;
      if (delivered[i] == outcome::over_budget) {
        it->second.next_try = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        continue;
      }
      if (it->second.message != due[i].second) continue;  // a newer notice is owed: it goes next
      if (delivered[i] == outcome::delivered) {
        if (!it->second.deferred)  // a notice owed for a failure
          log::write("info", "publish_notice_delivered",
                     "channel " + due[i].first.substr(0, 12) + "... got its notice to sync after " + std::to_string(it->second.attempts + 1) + " attempt(s)");
        if (const auto t = owed_by_tenant_.find(it->second.tenant); t != owed_by_tenant_.end() && --t->second == 0) owed_by_tenant_.erase(t);
        owed_.erase(it);
      } else {
        it->second.attempts = std::min(it->second.attempts + 1, 5);
        it->second.next_try = std::chrono::steady_clock::now() + std::chrono::seconds(1 << it->second.attempts);  // 2 s ... 32 s
      }
    }
  }
}

}  // namespace folio::service
