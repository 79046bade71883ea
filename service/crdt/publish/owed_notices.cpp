#include "crdt/publish/owed_notices.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "platform/log.hpp"

namespace folio::service {

void owed_notices::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (retrier_.joinable()) retrier_.join();
}

std::size_t owed_notices::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return owed_.size();
}

void owed_notices::owe(const std::string& channel, const std::string& notice, const std::string& tenant, bool deferred) {
  std::lock_guard<std::mutex> g(mu_);
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
  if (!retrier_.joinable()) retrier_ = std::thread([this] { retry_loop(); });
  cv_.notify_one();
}

void owed_notices::retry_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    auto wake = std::chrono::steady_clock::time_point::max();
    std::vector<std::pair<std::string, std::string>> due;
    std::vector<std::string> due_tenants;
    for (const auto& [channel, o] : owed_) {
      if (o.next_try <= now) due.emplace_back(channel, o.message), due_tenants.push_back(o.tenant);
      else wake = std::min(wake, o.next_try);
    }
    if (due.empty()) {
      if (wake == std::chrono::steady_clock::time_point::max()) cv_.wait(lock);
      else cv_.wait_until(lock, wake);
      continue;
    }
    lock.unlock();
    enum class outcome { delivered, failed, over_budget };
    std::vector<outcome> delivered;
    for (std::size_t i = 0; i < due.size(); ++i) {
      if (stopping_) break;  // stop() waits for at most the POST in flight
      const auto& [channel, message] = due[i];
      if (!take_message_(due_tenants[i])) delivered.push_back(outcome::over_budget);  // waits for its tenant's budget, no attempt spent
      else delivered.push_back(deliver_(channel, message) ? outcome::delivered : outcome::failed);
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
