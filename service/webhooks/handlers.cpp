// The webhooks' API (docs/API.md, "Webhooks" and "POST /v2/events/get"). Each handler checks every
// field first (unknown fields are refused by name, as versions/* do), then makes one call of the store
// (webhooks/endpoints.hpp), which is one transaction. An endpoint's URL is checked against the address
// policy (webhooks/address_policy.hpp, with --webhook-allow) whenever it is given; that resolves its
// host (waiting at most 3 s), before any transaction. Secrets appear in the answers of add and rotate-secret only, never in
// a log line.
#include "webhooks/handlers.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/outbox.hpp"
#include "platform/clock.hpp"
#include "platform/fields.hpp"
#include "platform/server.hpp"
#include "webhooks/address_policy.hpp"
#include "webhooks/endpoints.hpp"
#include "wire/base64.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

constexpr std::string_view add_fields[] = {"url", "events", "organizationIds", "description"};
constexpr std::string_view get_fields[] = {"endpointIds"};
constexpr std::string_view update_fields[] = {"endpointId", "url", "events", "organizationIds", "description", "enabled"};
constexpr std::string_view one_endpoint_fields[] = {"endpointId"};
constexpr std::string_view deliveries_fields[] = {"endpointId", "messageId", "pageSize", "pageToken"};
constexpr std::string_view replay_fields[] = {"endpointId", "messageId", "failedSince"};
constexpr std::string_view feed_fields[] = {"after", "limit", "types"};

constexpr std::size_t max_url_bytes = 2048, max_description_bytes = 1024, max_endpoint_orgs = 100;
constexpr std::int64_t default_attempts_page = 50, max_attempts_page = 100, default_feed_limit = 100, max_feed_limit = 1000;
/// The most of a tenant's feed rows one events/get reads (matching its filters or not).
constexpr std::int64_t feed_scan_rows = 10000;

/// `field`'s event types: a non-empty array of known types, without repeats (in the order first given).
std::vector<std::string> event_type_list(const rapidjson::Value& v, const char* field, const char* null_means) {
  if (!v.IsArray() || v.Empty())
    throw api_error(status::invalid_argument, std::string(field) + " must be a non-empty array of event types (" + null_means + ").");
  std::vector<std::string> types;
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const std::string_view t = v[i].IsString() ? std::string_view(v[i].GetString(), v[i].GetStringLength()) : std::string_view();
    if (!event_types::known(t)) {
      std::string all;
      for (std::string_view k : event_types::all) all += (all.empty() ? "" : ", ") + std::string(k);
      throw api_error(status::invalid_argument, std::string(field) + "[" + std::to_string(i) + "] is not an event type; the types are " + all + ".");
    }
    if (std::find(types.begin(), types.end(), t) == types.end()) types.emplace_back(t);  // at most 10 kept: O(n) in all
  }
  return types;
}

/// A filter of add and update: absent is nullopt (add: every one; update: unchanged), null is every one,
/// else the stored JSON array.
using filter_field = std::optional<std::optional<std::string>>;

filter_field events_field(const rapidjson::Value& data) {
  const auto m = data.FindMember("events");
  if (m == data.MemberEnd()) return std::nullopt;
  if (m->value.IsNull()) return filter_field(std::optional<std::string>());
  return filter_field(json_string_array(event_type_list(m->value, "events", "or null for every type")));
}

filter_field organizations_field(const rapidjson::Value& data) {
  const auto m = data.FindMember("organizationIds");
  if (m == data.MemberEnd()) return std::nullopt;
  if (m->value.IsNull()) return filter_field(std::optional<std::string>());
  const rapidjson::Value& v = m->value;
  if (!v.IsArray() || v.Empty())
    throw api_error(status::invalid_argument, "organizationIds must be a non-empty array of organization ids (or null for every organization).");
  if (v.Size() > max_endpoint_orgs) throw api_error(status::invalid_argument, "organizationIds may hold at most 100 ids.");
  std::vector<std::string> ids;
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const std::string what = "organizationIds[" + std::to_string(i) + "]";
    if (!v[i].IsString()) throw api_error(status::invalid_argument, what + " must be a string.");
    std::string id(v[i].GetString(), v[i].GetStringLength());
    check_id(id, what);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(std::move(id));  // at most 100: O(100²)
  }
  return filter_field(json_string_array(ids));
}

filter_field description_field(const rapidjson::Value& data) {
  const auto m = data.FindMember("description");
  if (m == data.MemberEnd()) return std::nullopt;
  if (m->value.IsNull()) return filter_field(std::optional<std::string>());
  if (!m->value.IsString()) throw api_error(status::invalid_argument, "description must be a string (or null for none).");
  if (m->value.GetStringLength() > max_description_bytes) throw api_error(status::invalid_argument, "description must be at most 1024 bytes.");
  return filter_field(std::string(m->value.GetString(), m->value.GetStringLength()));
}

/// An endpoint's URL: a string of at most 2048 bytes that the address policy takes (its host resolves
/// to addresses webhooks may reach). `required`: absent or null is refused.
std::optional<std::string> url_field(context& c, bool required) {
  const auto m = c.data.FindMember("url");
  if (m == c.data.MemberEnd() && !required) return std::nullopt;
  if (m == c.data.MemberEnd() || m->value.IsNull() || (m->value.IsString() && m->value.GetStringLength() == 0))
    throw api_error(status::invalid_argument, "url is required.");
  if (!m->value.IsString()) throw api_error(status::invalid_argument, "url must be a string.");
  std::string url(m->value.GetString(), m->value.GetStringLength());
  if (url.size() > max_url_bytes) throw api_error(status::invalid_argument, "url must be at most 2048 bytes.");
  if (std::string why = address_policy(c.svc.settings().webhooks.allow).check_url(url); !why.empty())
    throw api_error(status::invalid_argument, std::move(why));
  return url;
}

std::string endpoint_id(context& c) { return required_id(c.data, "endpointId", "endpointId is required."); }

void write_optional_integer(json_writer& w, const char* key, const std::optional<std::int64_t>& v) {
  w.Key(key);
  if (v)
    w.Int64(*v);
  else
    w.Null();
}

void write_optional_time(json_writer& w, const char* key, const std::optional<std::int64_t>& ms) {
  write_optional_member(w, key, ms ? std::optional(iso_time(*ms)) : std::nullopt);
}

void write_raw_or_null(json_writer& w, const char* key, const std::optional<std::string>& json) {
  w.Key(key);
  if (json)
    w.RawValue(json->data(), json->size(), rapidjson::kArrayType);
  else
    w.Null();
}

/// An endpoint as the API shows it: everything but its secrets.
void write_endpoint(json_writer& w, const webhook_endpoint& e) {
  w.StartObject();
  write_member(w, "endpointId", e.id);
  write_member(w, "url", e.url);
  write_raw_or_null(w, "events", e.events);
  write_raw_or_null(w, "organizationIds", e.org_ids);
  write_optional_member(w, "description", e.description);
  w.Key("enabled");
  w.Bool(e.enabled);
  write_optional_member(w, "disabledReason", e.disabled_reason);
  write_member(w, "createdAt", iso_time(e.created_at));
  write_member(w, "updatedAt", iso_time(e.updated_at));
  write_optional_time(w, "failingSince", e.failing_since);
  w.Key("queued");
  w.Int64(e.queued);
  w.Key("dropped");
  w.Int64(e.dropped);
  w.EndObject();
}

std::string endpoints_add(context& c) {
  check_known_fields(c.data, add_fields, "webhooks/endpoints/add takes url, events, organizationIds and description");
  endpoint_fields f;
  f.events = events_field(c.data).value_or(std::nullopt);
  f.org_ids = organizations_field(c.data).value_or(std::nullopt);
  f.description = description_field(c.data).value_or(std::nullopt);
  f.url = *url_field(c, true);
  const webhook_endpoint e = add_endpoint(c.db, c.svc.settings().webhooks, c.who.tenant, f, now_unix_ms());
  return success_body("Webhook endpoint added successfully.", [&](json_writer& w) {
    w.StartObject();
    write_member(w, "endpointId", e.id);
    write_member(w, "secret", e.secret);
    w.EndObject();
  });
}

std::string endpoints_get(context& c) {
  check_known_fields(c.data, get_fields, "webhooks/endpoints/get takes endpointIds");
  const std::vector<std::string> ids = id_list(c.data, "endpointIds");
  const auto endpoints = list_endpoints(c.db, c.who.tenant, ids);
  return success_body("Webhook endpoints fetched successfully.", [&](json_writer& w) {
    w.StartObject();
    w.Key("endpoints");
    w.StartArray();
    for (const auto& [tenant, e] : endpoints) write_endpoint(w, e);
    w.EndArray();
    w.EndObject();
  });
}

std::string endpoints_update(context& c) {
  check_known_fields(c.data, update_fields, "webhooks/endpoints/update takes endpointId, url, events, organizationIds, description and enabled");
  const std::string id = endpoint_id(c);
  endpoint_update u;
  u.events = events_field(c.data), u.org_ids = organizations_field(c.data), u.description = description_field(c.data);
  if (const auto m = c.data.FindMember("enabled"); m != c.data.MemberEnd()) {
    if (!m->value.IsBool()) throw api_error(status::invalid_argument, "enabled must be true or false.");
    u.enabled = m->value.GetBool();
  }
  u.url = url_field(c, false);
  if (!u.url && !u.events && !u.org_ids && !u.description && !u.enabled)
    throw api_error(status::invalid_argument, "Nothing to update: send url, events, organizationIds, description or enabled.");
  const webhook_endpoint e = update_endpoint(c.db, c.who.tenant, id, u, now_unix_ms());
  return success_body("Webhook endpoint updated successfully.", [&](json_writer& w) { write_endpoint(w, e); });
}

std::string endpoints_delete(context& c) {
  check_known_fields(c.data, one_endpoint_fields, "webhooks/endpoints/delete takes endpointId");
  delete_endpoint(c.db, c.who.tenant, endpoint_id(c));
  return success_body("Webhook endpoint deleted successfully.", nullptr);
}

/// A success answer whose data is {"<key>": "<value>"}.
std::string one_member_body(std::string_view message, std::string_view key, std::string_view value) {
  return success_body(message, [&](json_writer& w) {
    w.StartObject();
    write_member(w, key, value);
    w.EndObject();
  });
}

std::string endpoints_rotate_secret(context& c) {
  check_known_fields(c.data, one_endpoint_fields, "webhooks/endpoints/rotate-secret takes endpointId");
  const std::string secret = rotate_secret(c.db, c.svc.settings().webhooks, c.who.tenant, endpoint_id(c), now_unix_ms());
  return one_member_body("Webhook secret rotated successfully.", "secret", secret);
}

std::string endpoints_test(context& c) {
  check_known_fields(c.data, one_endpoint_fields, "webhooks/endpoints/test takes endpointId");
  const std::string message = send_test_message(c.db, c.svc.settings().webhooks, c.who.tenant, endpoint_id(c), now_unix_ms());
  return one_member_body("Test message queued.", "messageId", message);
}

/// deliveries/get's page token: the query it continues (endpoint and messageId) and the key of the last
/// attempt of the page, separated by U+001F (no id holds a control character).
std::string attempts_token(const std::string& endpoint, const std::optional<std::string>& message, const delivery_attempt& last) {
  return base64url_encode(endpoint + '\x1f' + message.value_or("") + '\x1f' + std::to_string(last.attempted_at) + '\x1f' + std::to_string(last.attempt) +
                          '\x1f' + last.message_id);
}

attempt_key attempts_after(const rapidjson::Value& v, const std::string& endpoint, const std::optional<std::string>& message) {
  const auto invalid = [] { return api_error(status::invalid_argument, "pageToken is not valid for this query; start again without it."); };
  const std::optional<std::string> raw = v.IsString() ? base64url_decode({v.GetString(), v.GetStringLength()}) : std::nullopt;
  if (!raw) throw invalid();
  std::vector<std::string> parts(1);
  for (const char ch : *raw)
    if (ch == '\x1f') parts.emplace_back();
    else parts.back() += ch;
  if (parts.size() != 5 || parts[0] != endpoint || parts[1] != message.value_or("") || parts[4].empty()) throw invalid();
  const auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char d) { return d >= '0' && d <= '9'; })) throw invalid();
    return std::stoll(s);
  };
  return {number(parts[2]), parts[4], number(parts[3])};
}

std::string deliveries_get(context& c) {
  check_known_fields(c.data, deliveries_fields, "webhooks/deliveries/get takes endpointId, messageId, pageSize and pageToken");
  const std::string id = endpoint_id(c);
  const std::optional<std::string> message = optional_id(c.data, "messageId");
  const std::int64_t limit = page_size(c.data, default_attempts_page, max_attempts_page);
  std::optional<attempt_key> after;
  if (const rapidjson::Value* t = field_value(c.data, "pageToken")) after = attempts_after(*t, id, message);
  if (!find_endpoint(c.db, c.who.tenant, id)) throw api_error(status::not_found, "No webhook endpoint found for this endpointId.");
  // One more than the page: whether another page follows.
  std::vector<delivery_attempt> page = list_attempts(c.db, c.who.tenant, id, message, after, static_cast<std::size_t>(limit) + 1);
  const bool more = page.size() > static_cast<std::size_t>(limit);
  if (more) page.pop_back();
  return success_body("Deliveries fetched successfully.", [&](json_writer& w) {
    w.StartObject();
    w.Key("attempts");
    w.StartArray();
    for (const delivery_attempt& a : page) {
      w.StartObject();
      write_member(w, "messageId", a.message_id);
      write_optional_member(w, "eventType", a.event_type);
      w.Key("attempt");
      w.Int64(a.attempt);
      write_member(w, "attemptedAt", iso_time(a.attempted_at));
      write_optional_integer(w, "httpStatus", a.http_status);
      w.Key("latencyMs");
      w.Int64(a.latency_ms);
      write_optional_member(w, "error", a.error);
      write_optional_member(w, "response", a.response);
      w.EndObject();
    }
    w.EndArray();
    if (more) write_member(w, "nextPageToken", attempts_token(id, message, page.back()));
    w.EndObject();
  });
}

std::string deliveries_replay(context& c) {
  check_known_fields(c.data, replay_fields, "webhooks/deliveries/replay takes endpointId, and messageId or failedSince");
  const std::string id = endpoint_id(c);
  const std::optional<std::string> message = optional_id(c.data, "messageId");
  const std::optional<std::string> since = optional_timestamp(c.data, "failedSince", "failedSince");
  if (message.has_value() == since.has_value())
    throw api_error(status::invalid_argument, "Send messageId (one message) or failedSince (every delivery that failed since then), not both.");
  const webhook_config& cfg = c.svc.settings().webhooks;
  const std::int64_t now = now_unix_ms();
  const std::size_t replayed = message ? replay_message(c.db, cfg, c.who.tenant, id, *message, now)
                                       : replay_failed_since(c.db, cfg, c.who.tenant, id, *timestamp_ms(*since), now);
  return success_body("Deliveries replayed.", [&](json_writer& w) {
    w.StartObject();
    w.Key("replayed");
    w.Uint64(replayed);
    w.EndObject();
  });
}

// ---- the pull feed ------------------------------------------------------------------------------------

/// A cursor events/get answered: the decimal position of the last event read.
std::int64_t feed_after(const rapidjson::Value& data) {
  const rapidjson::Value* v = field_value(data, "after");
  if (!v) return 0;
  const std::string_view s = v->IsString() ? std::string_view(v->GetString(), v->GetStringLength()) : std::string_view();
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char d) { return d >= '0' && d <= '9'; }))
    throw api_error(status::invalid_argument, "after must be a cursor that events/get answered.");
  return std::stoll(std::string(s));
}

std::string events_get(context& c) {
  check_known_fields(c.data, feed_fields, "events/get takes after, limit and types");
  const std::int64_t after = feed_after(c.data);
  std::int64_t limit = default_feed_limit;
  if (const rapidjson::Value* v = field_value(c.data, "limit")) {
    if (!v->IsInt64() || v->GetInt64() < 1 || v->GetInt64() > max_feed_limit)
      throw api_error(status::invalid_argument, "limit must be a whole number from 1 to 1000.");
    limit = v->GetInt64();
  }
  std::vector<std::string> types;
  if (const rapidjson::Value* v = field_value(c.data, "types")) types = event_type_list(*v, "types", "or null for every type");
  // At most feed_scan_rows of the tenant's rows after `after`, by its (tenant, position) index, each
  // kept when it is listed (in_feed) and of a type asked for: O(feed_scan_rows) per call whatever the
  // tenant's feed holds. One statement picks the positions (the kept ones up to the limit-th, and the
  // rows before it: the last one scanned is the cursor, events or not, so a poll that matches nothing
  // still moves past what it read), without the bodies; a second reads the kept events' bodies by
  // key (an event's row never changes; one pruned in between is left out).
  std::string pick = "SELECT position, kept FROM (SELECT position, kept, sum(kept) OVER (ORDER BY position) AS n FROM (SELECT position, CASE WHEN in_feed = 1";
  if (!types.empty()) pick += " AND type IN (" + database::placeholders(types.size()) + ")";
  pick += " THEN 1 ELSE 0 END AS kept FROM event_feed WHERE tenant = ? AND position > ? ORDER BY position LIMIT ?) AS scanned) AS counted"
          " WHERE n < ? OR (n = ? AND kept = 1) ORDER BY position";
  // The first statement scans `limit` rows (enough when every row is kept: a read without types), and
  // only when those were all there and fewer were kept, scans feed_scan_rows.
  std::int64_t cursor = after;
  std::vector<std::string> events;  // each {"id":..., then the body's members}
  c.db.read([&] {
    std::vector<std::int64_t> kept;
    for (const std::int64_t scan : {limit, feed_scan_rows}) {
      query q = c.db.prepare(pick);
      int at = 1;
      for (const std::string& t : types) q.bind_view(at++, t);
      q.bind(at, c.who.tenant).bind(at + 1, after).bind(at + 2, scan).bind(at + 3, limit).bind(at + 4, limit);
      kept.clear(), cursor = after;
      std::int64_t rows = 0;
      for (; q.step(); ++rows) {
        cursor = q.integer(0);
        if (q.integer(1) == 1) kept.push_back(cursor);
      }
      if (static_cast<std::int64_t>(kept.size()) == limit || rows < scan) break;
    }
    if (kept.empty()) return;
    query q = c.db.prepare("SELECT id, body FROM event_feed WHERE tenant = ? AND position IN (" + database::placeholders(kept.size()) + ") ORDER BY position");
    q.bind(1, c.who.tenant);
    for (std::size_t i = 0; i < kept.size(); ++i) q.bind(static_cast<int>(i) + 2, kept[i]);
    while (q.step()) {
      rapidjson::StringBuffer id;
      json_writer w(id);
      write_string(w, q.text_view(0));
      const std::string_view body = q.text_view(1);  // {"type":...,"timestamp":...,"data":{...}}, written by the service
      events.push_back("{\"id\":" + std::string(id.GetString(), id.GetSize()) + "," + std::string(body.substr(1)));
    }
  });
  return success_body(c.out, "Events fetched successfully.", [&](json_writer& w) {
    w.StartObject();
    w.Key("events");
    w.StartArray();
    for (const std::string& e : events) w.RawValue(e.data(), e.size(), rapidjson::kObjectType);
    w.EndArray();
    write_member(w, "cursor", std::to_string(cursor));
    w.EndObject();
  });
}

}  // namespace

void register_webhook_routes(route_table& routes) {
  routes.add({"/v2/webhooks/endpoints/add", endpoints_add, true});
  routes.add({"/v2/webhooks/endpoints/get", endpoints_get, false});
  routes.add({"/v2/webhooks/endpoints/update", endpoints_update, true});
  routes.add({"/v2/webhooks/endpoints/delete", endpoints_delete, true});
  routes.add({"/v2/webhooks/endpoints/rotate-secret", endpoints_rotate_secret, true});
  routes.add({"/v2/webhooks/endpoints/test", endpoints_test, true});
  routes.add({"/v2/webhooks/deliveries/get", deliveries_get, false});
  routes.add({"/v2/webhooks/deliveries/replay", deliveries_replay, true});
  routes.add({"/v2/events/get", events_get, false});
}

}  // namespace folio::service
