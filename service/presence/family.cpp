#include "presence/family.hpp"

#include <algorithm>

#include "platform/clock.hpp"
#include "platform/log.hpp"
#include "presence/handlers.hpp"
#include "presence/memory_store.hpp"
#include "presence/messages.hpp"
#include "presence/redis_store.hpp"

namespace folio::service {

namespace {
std::unique_ptr<presence_store> store_for(const presence_config& c) {
  if (c.redis.empty()) return std::make_unique<memory_presence_store>(c.per_tenant);
  return std::make_unique<redis_presence_store>(c.redis, c.redis_password, c.per_tenant);
}
/// Entries expired per store call (a sweep makes as many calls as it needs).
constexpr std::size_t expire_batch = 500;
}  // namespace

presence_family::presence_family(server& platform, crdt_family& crdt)
    : crdt_(crdt), timeout_(platform.settings().presence.timeout), store_(store_for(platform.settings().presence)), clock_(now_unix_ms) {
  register_presence_routes(platform.routes(), *this);
  platform.add_gauges([this](metrics::gauges& g) {
    g.presence_dropped = crdt_.live().presence_dropped();
    g.presence_left_by_timeout = timed_out_.load();
  });
}

void presence_family::publish(const record_key& k, std::string_view type, const presence_entry& e, std::int64_t at_ms) {
  const live_config& live = crdt_.live().settings();
  std::string message = presence_message(k.editor, type, e, at_ms);
  if (hook_) hook_(k, message);
  if (live.channel_secret.empty() || live.publish_socket.empty()) return;
  crdt_.live().enqueue_presence(channel_id(live.channel_secret, k.tenant, k.org, k.doc, k.editor), std::move(message), k.tenant);
}

std::size_t presence_family::sweep() {
  const std::int64_t now = now_ms();
  std::size_t left = 0;
  for (;;) {
    const std::vector<placed_entry> gone = store_->expire(now - timeout_.count(), expire_batch);
    for (const placed_entry& p : gone) publish(p.record, "leave", p.entry, now);
    left += gone.size();
    timed_out_ += gone.size();
    if (gone.size() < expire_batch) return left;
  }
}

std::chrono::milliseconds presence_family::sweep_every() const noexcept {
  return std::clamp(timeout_ / 10, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
}

void presence_family::run() {
  std::unique_lock<std::mutex> lock(mu_);
  bool failing = false;
  while (!stopping_) {
    lock.unlock();
    try {
      sweep();
      if (failing) log::write("info", "presence_sweep_resumed", "presence entries expire again");
      failing = false;
    } catch (const api_error& e) {
      if (!failing) log::write("error", "presence_sweep_failed", e.message + " Expired clients leave once it answers again.");
      failing = true;
    } catch (const std::exception& e) {
      if (!failing) log::write("error", "presence_sweep_failed", std::string("presence sweep failed: ") + e.what());
      failing = true;
    }
    lock.lock();
    stop_cv_.wait_for(lock, sweep_every(), [&] { return stopping_; });
  }
}

void presence_family::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
}

}  // namespace folio::service
