// /v2/presence/set, leave and get. Each reads its fields (the ids with the contract's messages, then its
// own, each refusal naming the field), keeps a client token inside its scope (scoped_key) and acting as
// its own user (author), then calls the store once; set and get first check that the record exists (one
// read of its row). Joins, changes and leaves are published (presence_family::publish).
#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "crdt/handlers.hpp"
#include "platform/fields.hpp"
#include "presence/family.hpp"
#include "presence/handlers.hpp"
#include "presence/messages.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

constexpr std::size_t max_state_bytes = 4096, max_anchor_bytes = 128, max_client_chars = 64;

std::string client_id(const rapidjson::Value& data) {
  const rapidjson::Value* v = field_value(data, "clientId");
  if (!v) throw api_error(status::invalid_argument, "clientId is required.");
  const std::string_view s = v->IsString() ? std::string_view(v->GetString(), v->GetStringLength()) : std::string_view();
  const bool ok = !s.empty() && s.size() <= max_client_chars && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!ok) throw api_error(status::invalid_argument, "clientId must be a string of 1 to 64 characters A-Z, a-z, 0-9, _ and -.");
  return std::string(s);
}

/// `state`: absent or null keeps the entry's; else an object, stored as canonical JSON of at most 4096 bytes.
std::optional<std::string> state_of(const rapidjson::Value& data) {
  const rapidjson::Value* v = field_value(data, "state");
  if (!v) return std::nullopt;
  if (!v->IsObject()) throw api_error(status::invalid_argument, "state must be a JSON object.");
  std::string json = canonical_json(*v);
  if (json.size() > max_state_bytes)
    throw api_error(status::invalid_argument, "state must be at most 4096 bytes as JSON; it is " + std::to_string(json.size()) + ".");
  return json;
}

/// `selection`: absent keeps the entry's; null clears it; else {"anchor": string, "head": string}, each at most 128 bytes.
std::optional<std::string> selection_of(const rapidjson::Value& data) {
  const auto m = data.FindMember("selection");
  if (m == data.MemberEnd()) return std::nullopt;
  const rapidjson::Value& v = m->value;
  if (v.IsNull()) return std::string("null");
  const auto anchor = v.IsObject() ? v.FindMember("anchor") : rapidjson::Value::ConstMemberIterator();
  const auto head = v.IsObject() ? v.FindMember("head") : rapidjson::Value::ConstMemberIterator();
  if (!v.IsObject() || v.MemberCount() != 2 || anchor == v.MemberEnd() || head == v.MemberEnd())
    throw api_error(status::invalid_argument, "selection must be null or an object {\"anchor\": string, \"head\": string}.");
  for (const auto& [name, value] : {std::pair{"anchor", anchor}, std::pair{"head", head}})
    if (!value->value.IsString() || value->value.GetStringLength() > max_anchor_bytes)
      throw api_error(status::invalid_argument, std::string("selection.") + name + " must be a string of at most 128 bytes.");
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  w.StartObject();
  write_member(w, "anchor", {anchor->value.GetString(), anchor->value.GetStringLength()});
  write_member(w, "head", {head->value.GetString(), head->value.GetStringLength()});
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

/// 404 as the CRDT endpoints answer a missing record.
void require_record(context& c, const record_key& k) {
  if (!c.db.read([&] { return load_record(c.db, k, false); })) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
}

api_error other_user() {
  return api_error(status::permission_denied, "This clientId is present on the record as another user; choose another clientId.");
}

std::string presence_set(context& c, presence_family& f) {
  static constexpr std::array<std::string_view, 7> known{"organizationId", "documentId", "editorId", "clientId", "state", "selection", "userId"};
  check_known_fields(c.data, known, "presence/set takes organizationId, documentId, editorId, clientId, state, selection and userId");
  const record_key k = requested_record(c);
  const std::string client = client_id(c.data);
  const std::optional<std::string> state = state_of(c.data), selection = selection_of(c.data);
  const std::string user = author(c.who, optional_id(c.data, "userId"));
  const std::int64_t now = f.now_ms();
  // The bucket is the user's own: another user sending this clientId (refused below) cannot spend it.
  if (!f.rate_limit().take(k.tenant, user + '\x1f' + client, now))
    throw api_error(status::resource_exhausted, "Too many presence updates from this clientId: at most 10 a second, in bursts of 20; retry later.");
  require_record(c, k);
  const presence_store::set_result r = f.store().set(k, client, user, state, selection, now);
  switch (r.outcome) {
    case presence_store::set_outcome::other_user: throw other_user();
    case presence_store::set_outcome::record_full:
      throw api_error(status::resource_exhausted, "This record already has 256 clients present; retry later.");
    case presence_store::set_outcome::tenant_full:
      throw api_error(status::resource_exhausted,
                      "This API key already has " + std::to_string(c.svc.settings().presence.per_tenant) + " clients present; retry later.");
    case presence_store::set_outcome::joined: f.publish(k, "join", r.entry, now); break;
    case presence_store::set_outcome::updated:
      if (r.changed) f.publish(k, "update", r.entry, now);
      break;
  }
  return success_body("Presence set successfully.", [&](json_writer& w) {
    w.StartObject();
    write_member(w, "clientId", client);
    w.Key("timeoutMs");
    w.Int64(f.timeout().count());
    w.EndObject();
  });
}

std::string presence_leave(context& c, presence_family& f) {
  static constexpr std::array<std::string_view, 4> known{"organizationId", "documentId", "editorId", "clientId"};
  check_known_fields(c.data, known, "presence/leave takes organizationId, documentId, editorId and clientId");
  const record_key k = requested_record(c);
  const std::string client = client_id(c.data);
  // A client token leaves only its own user's clients; an API key any.
  const presence_store::leave_result r = f.store().leave(k, client, c.who.scope ? std::optional<std::string>(c.who.subject) : std::nullopt);
  if (r.outcome == presence_store::leave_outcome::other_user) throw other_user();
  if (r.outcome == presence_store::leave_outcome::left) f.publish(k, "leave", r.entry, f.now_ms());
  return success_body("Presence left successfully.", [&](json_writer& w) {
    w.StartObject();
    write_member(w, "clientId", client);
    w.Key("left");
    w.Bool(r.outcome == presence_store::leave_outcome::left);
    w.EndObject();
  });
}

std::string presence_get(context& c, presence_family& f) {
  static constexpr std::array<std::string_view, 3> known{"organizationId", "documentId", "editorId"};
  check_known_fields(c.data, known, "presence/get takes organizationId, documentId and editorId");
  std::string org = required_id(c.data, "organizationId", "Organization ID is required");
  std::string doc = required_id(c.data, "documentId", "Document ID is required");
  const std::optional<std::string> editor = optional_id(c.data, "editorId");
  const record_key k = scoped_key(c.who, std::move(org), std::move(doc), editor);
  if (editor) require_record(c, k);
  // Entries the sweeper has not removed yet but that have timed out are not listed.
  const std::vector<placed_entry> present = f.store().get(k, f.now_ms() - f.timeout().count());
  return success_body("Presence retrieved successfully.", [&](json_writer& w) {
    w.StartObject();
    w.Key("presence");
    w.StartArray();
    for (const placed_entry& p : present) write_presence_entry(w, p);
    w.EndArray();
    w.EndObject();
  });
}

}  // namespace

void register_presence_routes(route_table& routes, presence_family& f) {
  const auto with = [&f](std::string (*handler)(context&, presence_family&)) { return [&f, handler](context& c) { return handler(c, f); }; };
  // Not `writes`: a read-only token may announce itself (presence changes no record).
  routes.add({"/v2/presence/set", with(presence_set), false, true});
  routes.add({"/v2/presence/leave", with(presence_leave), false, true});
  routes.add({"/v2/presence/get", with(presence_get), false, true});
}

}  // namespace folio::service
