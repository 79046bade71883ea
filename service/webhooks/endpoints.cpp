#include "webhooks/endpoints.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

#include "events/feed.hpp"
#include "events/outbox.hpp"
#include "platform/clock.hpp"
#include "webhooks/signature.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

/// The write key of a tenant's endpoints: adds of one tenant are serialised, so its count is exact.
std::string endpoints_key(std::string_view tenant) { return "webhooks\x1f" + std::string(tenant); }

constexpr const char* endpoint_columns =
    "id, url, event_types, org_ids, description, enabled, disabled_reason, secret, old_secret, old_secret_until, created_at, updated_at, "
    "failing_since, queued, dropped, tenant FROM webhook_endpoints";

std::optional<std::int64_t> integer_opt(const query& q, int col) { return q.is_null(col) ? std::nullopt : std::optional(q.integer(col)); }

webhook_endpoint endpoint_of(const query& q) {
  webhook_endpoint e;
  e.id = q.text(0), e.url = q.text(1), e.events = q.text_opt(2), e.org_ids = q.text_opt(3), e.description = q.text_opt(4);
  e.enabled = q.integer(5) != 0, e.disabled_reason = q.text_opt(6), e.secret = q.text(7), e.old_secret = q.text_opt(8);
  e.old_secret_until = integer_opt(q, 9), e.created_at = q.integer(10), e.updated_at = q.integer(11), e.failing_since = integer_opt(q, 12);
  e.queued = q.integer(13), e.dropped = q.integer(14);
  return e;
}

std::optional<webhook_endpoint> read_endpoint(database& db, std::string_view tenant, std::string_view id) {
  query q = db.prepare(std::string("SELECT ") + endpoint_columns + " WHERE tenant = ? AND id = ?");
  q.bind(1, tenant).bind(2, id);
  return q.step() ? std::optional(endpoint_of(q)) : std::nullopt;
}

api_error no_endpoint() { return api_error(status::not_found, "No webhook endpoint found for this endpointId."); }

webhook_endpoint existing(database& db, std::string_view tenant, std::string_view id) {
  std::optional<webhook_endpoint> e = read_endpoint(db, tenant, id);
  if (!e) throw no_endpoint();
  return std::move(*e);
}

/// An enabled endpoint of the tenant (replays and pings go only to those).
void check_enabled(const webhook_endpoint& e) {
  if (!e.enabled) throw api_error(status::failed_precondition, "This endpoint is disabled; enable it (webhooks/endpoints/update) first.");
}

/// Inside a write: the endpoint's pending deliveries become 'failed' (a disabled or deleted endpoint is
/// sent nothing more), and its count of queued deliveries loses them.
void fail_pending(database& db, std::string_view tenant, std::string_view id) {
  db.sql("UPDATE webhook_deliveries SET state = 'failed', next_at = NULL, claimed_by = NULL, claimed_until = NULL"
         " WHERE tenant = ? AND endpoint = ? AND state = 'pending'")
      .bind(1, tenant).bind(2, id).step();
  const std::int64_t ended = db.changes();
  if (ended > 0)
    db.sql("UPDATE webhook_endpoints SET queued = CASE WHEN queued > ? THEN queued - ? ELSE 0 END WHERE tenant = ? AND id = ?")
        .bind(1, ended).bind(2, ended).bind(3, tenant).bind(4, id).step();
}

}  // namespace

std::vector<std::string> signing_secrets(const webhook_endpoint& e, std::int64_t now_ms) {
  std::vector<std::string> out{e.secret};
  if (e.old_secret && e.old_secret_until && now_ms < *e.old_secret_until) out.push_back(*e.old_secret);
  return out;
}

std::string new_endpoint_id() {
  unsigned char bytes[12];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("no randomness for a webhook endpoint's id");
  std::string id = "ep_";
  for (const unsigned char b : bytes) id.append({"0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15]});
  return id;
}

webhook_endpoint add_endpoint(database& db, const webhook_config& cfg, std::string_view tenant, const endpoint_fields& f, std::int64_t now_ms) {
  webhook_endpoint e;
  e.id = new_endpoint_id(), e.url = f.url, e.events = f.events, e.org_ids = f.org_ids, e.description = f.description;
  e.secret = new_webhook_secret();
  db.write(endpoints_key(tenant), [&] {
    query n = db.sql("SELECT count(*), coalesce(max(created_at), 0) FROM webhook_endpoints WHERE tenant = ?");
    n.bind(1, tenant).step();
    // Later than every endpoint of the tenant: "oldest first" is the order they were added in.
    e.created_at = e.updated_at = std::max(now_ms, n.integer(1) + 1);
    if (n.integer(0) >= static_cast<std::int64_t>(cfg.endpoints_per_tenant))
      throw api_error(status::resource_exhausted, "This API key has " + std::to_string(cfg.endpoints_per_tenant) +
                                                      " webhook endpoints, the most it may; delete one (webhooks/endpoints/delete) before adding another.");
    db.sql("INSERT INTO webhook_endpoints (tenant, id, url, event_types, org_ids, description, enabled, secret, created_at, updated_at)"
           " VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)")
        .bind(1, tenant).bind(2, e.id).bind(3, e.url).bind_opt(4, e.events).bind_opt(5, e.org_ids).bind_opt(6, e.description)
        .bind(7, e.secret).bind(8, e.created_at).bind(9, e.updated_at).step();
  });
  return e;
}

std::vector<std::pair<std::string, webhook_endpoint>> list_endpoints(database& db, const std::optional<std::string>& tenant,
                                                                    const std::vector<std::string>& ids) {
  std::string text = std::string("SELECT ") + endpoint_columns;
  if (tenant) text += " WHERE tenant = ?";
  if (tenant && !ids.empty()) text += " AND id IN (" + database::placeholders(ids.size()) + ")";
  text += tenant ? " ORDER BY created_at, id" : " ORDER BY tenant, created_at, id";
  return db.read([&] {
    query q = db.prepare(text);
    int at = 1;
    if (tenant) q.bind(at++, *tenant);
    if (tenant)
      for (const std::string& id : ids) q.bind_view(at++, id);
    std::vector<std::pair<std::string, webhook_endpoint>> out;
    while (q.step()) out.emplace_back(q.text(15), endpoint_of(q));
    return out;
  });
}

std::optional<webhook_endpoint> find_endpoint(database& db, std::string_view tenant, std::string_view id) {
  return db.read([&] { return read_endpoint(db, tenant, id); });
}

std::optional<std::string> tenant_of_endpoint(database& db, std::string_view id) {
  return db.read([&] {
    query q = db.sql("SELECT tenant FROM webhook_endpoints WHERE id = ? ORDER BY tenant LIMIT 2");
    q.bind(1, id);
    if (!q.step()) return std::optional<std::string>();
    std::optional<std::string> tenant = q.text(0);
    if (q.step()) throw std::runtime_error("endpoint " + std::string(id) + " belongs to more than one tenant; name one with --tenant");
    return tenant;
  });
}

webhook_endpoint update_endpoint(database& db, std::string_view tenant, std::string_view id, const endpoint_update& u, std::int64_t now_ms) {
  return db.write(endpoints_key(tenant), [&] {
    webhook_endpoint e = existing(db, tenant, id);
    if (u.enabled == false && e.enabled) fail_pending(db, tenant, id);
    if (u.url) e.url = *u.url;
    if (u.events) e.events = *u.events;
    if (u.org_ids) e.org_ids = *u.org_ids;
    if (u.description) e.description = *u.description;
    if (u.enabled == true) e.disabled_reason.reset(), e.failing_since.reset();
    if (u.enabled) e.enabled = *u.enabled;
    query set = db.sql("UPDATE webhook_endpoints SET url = ?, event_types = ?, org_ids = ?, description = ?, enabled = ?, disabled_reason = ?,"
                       " failing_since = ?, updated_at = ? WHERE tenant = ? AND id = ?");
    set.bind(1, e.url).bind_opt(2, e.events).bind_opt(3, e.org_ids).bind_opt(4, e.description).bind(5, std::int64_t(e.enabled)).bind_opt(6, e.disabled_reason);
    if (e.failing_since) set.bind(7, *e.failing_since); else set.bind_null(7);
    set.bind(8, now_ms).bind(9, tenant).bind(10, id).step();
    return existing(db, tenant, id);
  });
}

void delete_endpoint(database& db, std::string_view tenant, std::string_view id) {
  db.write(endpoints_key(tenant), [&] {
    db.sql("DELETE FROM webhook_endpoints WHERE tenant = ? AND id = ?").bind(1, tenant).bind(2, id).step();
    if (db.changes() == 0) throw no_endpoint();
    db.sql("DELETE FROM webhook_deliveries WHERE tenant = ? AND endpoint = ?").bind(1, tenant).bind(2, id).step();
  });
}

std::string rotate_secret(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view id, std::int64_t now_ms) {
  const std::string secret = new_webhook_secret();
  db.write(endpoints_key(tenant), [&] {
    // The secret in use must outlive the one it replaces: a receiver that has not switched yet still
    // verifies with the older one, which a second rotation would end at once.
    if (const webhook_endpoint e = existing(db, tenant, id); e.old_secret_until && now_ms < *e.old_secret_until)
      throw api_error(status::failed_precondition, "The previous secret still signs until " + iso_time(*e.old_secret_until) + "; rotate again after it.");
    db.sql("UPDATE webhook_endpoints SET old_secret = secret, old_secret_until = ?, secret = ?, updated_at = ? WHERE tenant = ? AND id = ?")
        .bind(1, now_ms + cfg.old_secret_for.count()).bind(2, secret).bind(3, now_ms).bind(4, tenant).bind(5, id).step();
  });
  return secret;
}

std::string send_test_message(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view id, std::int64_t now_ms) {
  const std::string message = new_message_id();
  rapidjson::StringBuffer body;
  json_writer w(body);
  w.StartObject();
  write_member(w, "type", event_types::ping);
  write_member(w, "timestamp", iso_time(now_ms));
  w.Key("data");
  w.StartObject();
  write_member(w, "endpointId", id);
  w.EndObject();
  w.EndObject();
  db.write(feed_key, [&] {
    check_enabled(existing(db, tenant, id));
    const std::int64_t position = append_to_feed(db, tenant, message, event_types::ping, "", now_ms, false, {body.GetString(), body.GetSize()});
    if (!queue_delivery(db, cfg, tenant, id, position, message, now_ms))
      throw api_error(status::resource_exhausted, "This endpoint already has " + std::to_string(cfg.queued_per_endpoint) +
                                                      " deliveries queued, the most it may; the ping was not sent.");
  });
  return message;
}

std::vector<delivery_attempt> list_attempts(database& db, std::string_view tenant, std::string_view endpoint, const std::optional<std::string>& message_id,
                                            const std::optional<attempt_key>& after, std::size_t limit) {
  std::string text = "SELECT a.message_id, f.type, a.attempt, a.attempted_at, a.latency_ms, a.http_status, a.error, a.response FROM webhook_attempts a"
                     " LEFT JOIN event_feed f ON f.position = a.position AND f.tenant = a.tenant WHERE a.tenant = ? AND a.endpoint = ?";
  if (message_id) text += " AND a.message_id = ?";
  if (after) text += " AND (a.attempted_at, a.message_id, a.attempt) < (?, ?, ?)";
  text += " ORDER BY a.attempted_at DESC, a.message_id DESC, a.attempt DESC LIMIT ?";
  return db.read([&] {
    query q = db.prepare(text);
    q.bind(1, tenant).bind(2, endpoint);
    int at = 3;
    if (message_id) q.bind(at++, *message_id);
    if (after) q.bind(at, after->attempted_at).bind(at + 1, after->message_id).bind(at + 2, after->attempt), at += 3;
    q.bind(at, static_cast<std::int64_t>(limit));
    std::vector<delivery_attempt> out;
    while (q.step()) {
      delivery_attempt a;
      a.message_id = q.text(0), a.event_type = q.text_opt(1), a.attempt = q.integer(2), a.attempted_at = q.integer(3), a.latency_ms = q.integer(4);
      a.http_status = integer_opt(q, 5), a.error = q.text_opt(6), a.response = q.text_opt(7);
      out.push_back(std::move(a));
    }
    return out;
  });
}

std::vector<std::pair<std::string, std::int64_t>> delivery_states(database& db, std::string_view tenant, std::string_view endpoint) {
  return db.read([&] {
    query q = db.sql("SELECT state, count(*) FROM webhook_deliveries WHERE tenant = ? AND endpoint = ? GROUP BY state ORDER BY state");
    q.bind(1, tenant).bind(2, endpoint);
    std::vector<std::pair<std::string, std::int64_t>> out;
    while (q.step()) out.emplace_back(q.text(0), q.integer(1));
    return out;
  });
}

std::size_t replay_message(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::string_view message_id,
                           std::int64_t now_ms) {
  return db.write(endpoints_key(tenant), [&] {
    check_enabled(existing(db, tenant, endpoint));
    query event = db.sql("SELECT position FROM event_feed WHERE tenant = ? AND id = ?");
    event.bind(1, tenant).bind(2, message_id);
    if (!event.step()) throw api_error(status::not_found, "No event found for this messageId.");
    const std::int64_t position = event.integer(0);
    // Only a message the endpoint had (its filters took it, or it was its ping): a delivery in any state.
    query had = db.sql("SELECT 1 FROM webhook_deliveries WHERE tenant = ? AND endpoint = ? AND position = ?");
    had.bind(1, tenant).bind(2, endpoint).bind(3, position);
    if (!had.step()) throw api_error(status::not_found, "This endpoint was never sent message " + std::string(message_id) + ".");
    return std::size_t(queue_delivery(db, cfg, tenant, endpoint, position, message_id, now_ms));
  });
}

std::size_t replay_failed_since(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::int64_t since_ms,
                                std::int64_t now_ms) {
  return db.write(endpoints_key(tenant), [&] {
    check_enabled(existing(db, tenant, endpoint));
    std::vector<std::pair<std::int64_t, std::string>> failed;
    {
      query q = db.sql("SELECT d.position, d.message_id FROM webhook_deliveries d JOIN event_feed f ON f.position = d.position AND f.tenant = d.tenant"
                       " WHERE d.tenant = ? AND d.endpoint = ? AND d.state = 'failed' AND f.created_at >= ? ORDER BY d.position LIMIT ?");
      q.bind(1, tenant).bind(2, endpoint).bind(3, since_ms).bind(4, static_cast<std::int64_t>(max_replayed));
      while (q.step()) failed.emplace_back(q.integer(0), q.text(1));
    }
    std::size_t queued = 0;
    for (const auto& [position, id] : failed) queued += queue_delivery(db, cfg, tenant, endpoint, position, id, now_ms);
    return queued;
  });
}

}  // namespace folio::service
