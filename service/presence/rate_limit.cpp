#include "presence/rate_limit.hpp"

#include <algorithm>

namespace folio::service {

bool client_rate_limit::take(const std::string& client, std::int64_t now_ms) {
  std::lock_guard<std::mutex> g(mu_);
  const auto refilled = [&](const bucket& b) { return std::min(burst, b.tokens + per_second * static_cast<double>(std::max<std::int64_t>(0, now_ms - b.at_ms)) / 1000); };
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_clients) std::erase_if(buckets_, [&](const auto& b) { return refilled(b.second) >= burst; });
    if (buckets_.size() >= max_clients) return false;
    it = buckets_.emplace(client, bucket{burst, now_ms}).first;
  }
  bucket& b = it->second;
  b.tokens = refilled(b), b.at_ms = std::max(b.at_ms, now_ms);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace folio::service
