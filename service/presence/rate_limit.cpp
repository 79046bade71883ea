#include "presence/rate_limit.hpp"

#include <algorithm>

namespace folio::service {

double client_rate_limit::refilled(const bucket& b, std::int64_t now_ms) {
  return std::min(burst, b.tokens + per_second * static_cast<double>(std::max<std::int64_t>(0, now_ms - b.at_ms)) / 1000);
}

void client_rate_limit::drop_full(tenant_buckets& t, std::int64_t now_ms) {
  if (t.scanned_ms != INT64_MIN && now_ms - t.scanned_ms < refill_ms) return;
  t.scanned_ms = now_ms;
  size_ -= std::erase_if(t.clients, [&](const auto& b) { return refilled(b.second, now_ms) >= burst; });
}

bool client_rate_limit::take(const std::string& tenant, const std::string& client, std::int64_t now_ms) {
  std::lock_guard<std::mutex> g(mu_);
  tenant_buckets& t = tenants_[tenant];
  auto it = t.clients.find(client);
  if (it == t.clients.end()) {
    if (t.clients.size() >= max_clients_per_tenant) drop_full(t, now_ms);
    if (size_ >= max_clients && (scanned_ms_ == INT64_MIN || now_ms - scanned_ms_ >= refill_ms)) {
      scanned_ms_ = now_ms;
      for (auto& [name, other] : tenants_) other.scanned_ms = INT64_MIN, drop_full(other, now_ms);
      std::erase_if(tenants_, [&](const auto& other) { return other.second.clients.empty() && &other.second != &t; });
    }
    if (t.clients.size() >= max_clients_per_tenant || size_ >= max_clients) return false;
    it = t.clients.emplace(client, bucket{burst, now_ms}).first;
    ++size_;
  }
  bucket& b = it->second;
  b.tokens = refilled(b, now_ms), b.at_ms = std::max(b.at_ms, now_ms);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace folio::service
