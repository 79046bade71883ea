#include "events/feed.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include <rapidjson/document.h>

#include "events/outbox.hpp"
#include "platform/clock.hpp"
#include "webhooks/signature.hpp"
#include "wire/json.hpp"

namespace folio::service {

std::int64_t append_to_feed(database& db, std::string_view tenant, std::string_view id, std::string_view type, std::string_view org,
                            std::int64_t at_ms, bool in_feed, std::string_view body) {
  query top = db.sql("SELECT coalesce(max(position), 0) FROM event_feed");
  top.step();
  const std::int64_t position = top.integer(0) + 1;
  db.sql("INSERT INTO event_feed (position, tenant, id, type, org, created_at, in_feed, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(1, position)
      .bind(2, tenant)
      .bind(3, id)
      .bind(4, type)
      .bind(5, org)
      .bind(6, at_ms)
      .bind(7, std::int64_t(in_feed))
      .bind(8, body)
      .step();
  return position;
}

bool queue_delivery(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::int64_t position,
                    std::string_view id, std::int64_t now_ms) {
  // The endpoint's count of pending deliveries moves with each delivery that enters or leaves 'pending'.
  query was = db.sql("SELECT state FROM webhook_deliveries WHERE tenant = ? AND endpoint = ? AND position = ?");
  was.bind(1, tenant).bind(2, endpoint).bind(3, position);
  const std::optional<std::string> state = was.step() ? std::optional(was.text(0)) : std::nullopt;
  if (state == "pending") {  // already queued: due now, its attempts counted afresh
    db.sql("UPDATE webhook_deliveries SET attempts = 0, next_at = ? WHERE tenant = ? AND endpoint = ? AND position = ?")
        .bind(1, now_ms).bind(2, tenant).bind(3, endpoint).bind(4, position).step();
    return true;
  }
  db.sql("UPDATE webhook_endpoints SET queued = queued + 1 WHERE tenant = ? AND id = ? AND queued < ?")
      .bind(1, tenant).bind(2, endpoint).bind(3, static_cast<std::int64_t>(cfg.queued_per_endpoint)).step();
  if (db.changes() == 0) {
    db.sql("UPDATE webhook_endpoints SET dropped = dropped + 1 WHERE tenant = ? AND id = ?").bind(1, tenant).bind(2, endpoint).step();
    return false;
  }
  db.sql("INSERT INTO webhook_deliveries (tenant, endpoint, position, message_id, state, attempts, next_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)"
         " ON CONFLICT (tenant, endpoint, position) DO UPDATE SET state = 'pending', attempts = 0, next_at = excluded.next_at,"
         " claimed_by = NULL, claimed_until = NULL")
      .bind(1, tenant).bind(2, endpoint).bind(3, position).bind(4, id).bind(5, now_ms).step();
  return true;
}

}  // namespace folio::service
