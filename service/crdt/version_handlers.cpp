// /v2/crdt/versions/add|get|update|delete|restore (docs/API.md, "Versions and history"). A version is the
// record's version vector at a revision (versions.hpp); its value is the record's document checked out
// there (folio::document::checkout), rendered as crdt/get renders a record. Each handler works through a
// record_session, so it sees the record at one committed revision under the record's entry lock, and
// writes (a version's row, a restore's change and its backup version) in one transaction that checks
// the record is still at that revision.
//
// Access: versions/get and versions/diff take a read client token of the record's scope; add and restore a write one;
// update and delete (rename, pin, drop) only the tenant's key and auth token.
#include <folio/document.hpp>

#include <algorithm>
#include <string>
#include <string_view>

#include "crdt/family.hpp"
#include "crdt/handlers.hpp"
#include "crdt/history.hpp"
#include "crdt/record_session.hpp"
#include "crdt/version_diff.hpp"
#include "crdt/versions.hpp"
#include "platform/auth.hpp"
#include "platform/clock.hpp"
#include "platform/fields.hpp"
#include "wire/base64.hpp"
#include "wire/crdt_values.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

constexpr std::string_view add_fields[] = {"organizationId", "documentId", "editorId", "name", "userId"};
constexpr std::string_view get_fields[] = {"organizationId", "documentId", "editorId", "versionId", "pageSize", "pageToken"};
constexpr std::string_view update_fields[] = {"organizationId", "documentId", "editorId", "versionId", "name", "pinned"};
constexpr std::string_view delete_fields[] = {"organizationId", "documentId", "editorId", "versionId"};
constexpr std::string_view diff_fields[] = {"organizationId", "documentId", "editorId", "from", "to"};
constexpr std::string_view restore_fields[] = {"organizationId", "documentId", "editorId", "versionId", "userId", "sessionId"};

constexpr std::int64_t default_page_size = 100;

/// A version's `name`: absent is nullopt (unchanged); null is no name; else a string under the id rules
/// (docs/API.md, "Every call": non-empty, at most 256 bytes of UTF-8, no control characters).
std::optional<std::optional<std::string>> name_field(const rapidjson::Value& data) {
  const auto m = data.FindMember("name");
  if (m == data.MemberEnd()) return std::nullopt;
  if (m->value.IsNull()) return std::optional<std::optional<std::string>>(std::optional<std::string>());
  if (!m->value.IsString()) throw api_error(status::invalid_argument, "name must be a string (or null for none).");
  std::string name(m->value.GetString(), m->value.GetStringLength());
  if (const char* why = id_problem(name)) throw api_error(status::invalid_argument, std::string("name ") + why);
  return std::optional<std::optional<std::string>>(std::move(name));
}

/// Inside the write that adds a version: refuses it when the record keeps all the versions it may (versions.hpp).
void check_room(database& db, const record_key& k, bool named) {
  const version_count c = count_versions(db, k);
  if (c.all >= max_versions)
    throw api_error(status::failed_precondition, "This record keeps " + std::to_string(max_versions) +
                                                     " versions, the most it may; delete some (versions/delete) before adding or restoring.");
  if (named && c.named >= max_named_versions)
    throw api_error(status::failed_precondition, "This record keeps " + std::to_string(max_named_versions) +
                                                     " named versions, the most it may; delete some (versions/delete) before adding another.");
}

/// The request's versionId (`field`: versionId, or versions/diff's from and to): required, a versionId of
/// this record's incarnation, of a version that exists — else 400 (not a versionId) or 404.
std::int64_t requested_number(context& c, const record_key& k, const record_row& row, const char* field = "versionId") {
  const rapidjson::Value* v = field_value(c.data, field);
  if (!v) throw api_error(status::invalid_argument, std::string(field) + " is required.");
  if (!v->IsString()) throw api_error(status::invalid_argument, std::string(field) + " must be a string that versions/add or versions/get answered.");
  const std::optional<std::int64_t> n = version_number({v->GetString(), v->GetStringLength()}, k, row.incarnation);
  if (!n) throw api_error(status::not_found, "No version found for this versionId.");
  return *n;
}

version_row existing_version(database& db, const record_key& k, std::int64_t number) {
  std::optional<version_row> v = db.read([&] { return find_version(db, k, number); });
  if (!v) throw api_error(status::not_found, "No version found for this versionId.");
  return std::move(*v);
}

void write_version(json_writer& w, const record_key& k, std::uint64_t incarnation, const version_row& v) {
  w.StartObject();
  write_member(w, "versionId", version_id(k, incarnation, v.number));
  write_member(w, "kind", v.kind);
  write_optional_member(w, "name", v.name);
  write_member(w, "createdAt", v.created_at);
  write_optional_member(w, "createdBy", v.created_by.empty() ? std::nullopt : std::optional<std::string>(v.created_by));
  w.Key("authors");
  w.StartArray();
  for (const std::string& a : v.authors) write_string(w, a);
  w.EndArray();
  w.Key("pinned");
  w.Bool(v.pinned);
  write_member(w, "version", record_version(k, incarnation, v.revision));
  w.EndObject();
}

/// Version `v`'s vector, which record `d` holds (a vector that does not decode, or names operations
/// `d` lacks, is damage: 500, never a wrong value or diff).
folio::version_vector vector_of(const version_row& v, const folio::document& d) {
  folio::version_vector at;
  if (!folio::version_vector::decode(v.version_vector, at)) throw store_error(failure::other, "a version's vector does not decode");
  const folio::version_order order = at.compare(d.version());
  if (order == folio::version_order::after || order == folio::version_order::concurrent)
    throw store_error(failure::other, "a version holds operations its record does not");
  return at;
}

/// The record checked out at version `v`: its value as of then.
folio::document checked_out(const folio::document& d, const version_row& v) { return d.checkout(vector_of(v, d)); }

/// The page token of a list that ended at version `number`: opaque, valid for this record only.
std::string page_token(const record_key& k, std::uint64_t incarnation, std::int64_t number) {
  return base64url_encode("p" + std::to_string(number) + '-' + history_tag(k, incarnation));
}

std::int64_t page_after(const rapidjson::Value& v, const record_key& k, std::uint64_t incarnation) {
  const std::optional<std::string> raw = v.IsString() ? base64url_decode({v.GetString(), v.GetStringLength()}) : std::nullopt;
  const std::optional<std::int64_t> n = raw && !raw->empty() && (*raw)[0] == 'p' ? version_number("v" + raw->substr(1), k, incarnation) : std::nullopt;
  if (!n) throw api_error(status::invalid_argument, "pageToken is not valid for this query; start again without it.");
  return *n;
}

std::string versions_add(context& c, crdt_family& f) {
  check_known_fields(c.data, add_fields, "versions/add takes organizationId, documentId, editorId, name and userId");
  const record_key k = requested_record(c);
  const std::optional<std::optional<std::string>> name = name_field(c.data);
  const std::string by = author(c.who, optional_id(c.data, "userId"));
  return with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    const record_row& row = s.open_existing();
    version_row v;
    v.revision = row.revision, v.version_vector = s.doc().version().encode(), v.kind = "named", v.name = name ? *name : std::nullopt;
    v.created_at = now_iso(), v.created_by = by;
    s.write_beside([&] {
      check_room(c.db, k, true);
      v.number = insert_version(c.db, k, v);
    });
    v = existing_version(c.db, k, v.number);
    return success_body("Version added successfully.", [&](json_writer& w) { write_version(w, k, row.incarnation, v); });
  });
}

std::string versions_get(context& c, crdt_family& f) {
  check_known_fields(c.data, get_fields, "versions/get takes organizationId, documentId, editorId, versionId, pageSize and pageToken");
  const record_key k = requested_record(c);
  const bool one = field_value(c.data, "versionId") != nullptr;
  if (one && (field_value(c.data, "pageSize") || field_value(c.data, "pageToken")))
    throw api_error(status::invalid_argument, "pageSize and pageToken list versions; leave them out with versionId.");
  const std::int64_t limit = one ? 0 : page_size(c.data, default_page_size);
  record_session s(f, c.db, k);
  const record_row& row = s.open_existing(one);
  if (one) {
    const version_row v = existing_version(c.db, k, requested_number(c, k, row));
    const folio::document then = checked_out(s.doc(), v);
    return success_body(c.out, "Version retrieved successfully.", [&](json_writer& w) {
      w.StartArray();
      w.StartObject();
      w.Key("data");
      const std::string value = value_json(then);
      w.RawValue(value.data(), value.size(), rapidjson::kStringType);
      write_member(w, "id", k.editor);
      write_member(w, "type", row.type);
      write_member(w, "contentKey", row.content_key);
      write_member(w, "version", record_version(k, row.incarnation, v.revision));
      write_member(w, "versionId", version_id(k, row.incarnation, v.number));
      write_member(w, "createdAt", v.created_at);
      write_member(w, "createdBy", v.created_by);
      w.EndObject();
      w.EndArray();
    });
  }
  const std::int64_t before = [&]() -> std::int64_t {
    const rapidjson::Value* t = field_value(c.data, "pageToken");
    return t ? page_after(*t, k, row.incarnation) : 0;
  }();
  // One more than the page: whether another page follows.
  std::vector<version_row> page = c.db.read([&] { return list_versions(c.db, k, before, static_cast<std::size_t>(limit) + 1); });
  const bool more = page.size() > static_cast<std::size_t>(limit);
  if (more) page.pop_back();
  return success_body(c.out, "Versions fetched successfully.", [&](json_writer& w) {
    w.StartArray();
    for (const version_row& v : page) write_version(w, k, row.incarnation, v);
    w.EndArray();
    if (more) write_member(w, "nextPageToken", page_token(k, row.incarnation, page.back().number));
  });
}

std::string versions_update(context& c, crdt_family& f) {
  check_known_fields(c.data, update_fields, "versions/update takes organizationId, documentId, editorId, versionId, name and pinned");
  const record_key k = requested_record(c);
  const std::optional<std::optional<std::string>> name = name_field(c.data);
  std::optional<bool> pinned;
  if (const rapidjson::Value* p = field_value(c.data, "pinned")) {
    if (!p->IsBool()) throw api_error(status::invalid_argument, "pinned must be true or false.");
    pinned = p->GetBool();
  }
  if (!name && !pinned) throw api_error(status::invalid_argument, "Nothing to update: send name, pinned or both.");
  return with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    const record_row& row = s.open_existing(false);
    const std::int64_t number = requested_number(c, k, row);
    bool found = false;
    s.write_beside([&] { found = update_version(c.db, k, number, name, pinned); });
    if (!found) throw api_error(status::not_found, "No version found for this versionId.");
    const version_row v = existing_version(c.db, k, number);
    return success_body("Version updated successfully.", [&](json_writer& w) { write_version(w, k, row.incarnation, v); });
  });
}

std::string versions_delete(context& c, crdt_family& f) {
  check_known_fields(c.data, delete_fields, "versions/delete takes organizationId, documentId, editorId and versionId");
  const record_key k = requested_record(c);
  with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    const record_row& row = s.open_existing(false);
    const std::int64_t number = requested_number(c, k, row);
    bool found = false;
    s.write_beside([&] { found = delete_version(c.db, k, number); });
    if (!found) throw api_error(status::not_found, "No version found for this versionId.");
  });
  return success_body("Version deleted successfully.", nullptr);
}

std::string versions_restore(context& c, crdt_family& f) {
  check_known_fields(c.data, restore_fields, "versions/restore takes organizationId, documentId, editorId, versionId, userId and sessionId");
  const record_key k = requested_record(c);
  const std::optional<std::string> user = optional_id(c.data, "userId"), session = optional_id(c.data, "sessionId");
  const std::string by = author(c.who, user);
  return with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    const record_row& row = s.open_existing();
    const version_row v = existing_version(c.db, k, requested_number(c, k, row));
    const folio::document then = checked_out(s.doc(), v);
    std::string text;
    const new_value value = value_of_document(then, text);
    const change_meta meta{now_iso(), by, session};
    // The state it replaces, kept first as an automatic version (in the restore's transaction).
    version_row backup;
    backup.revision = row.revision, backup.version_vector = s.doc().version().encode(), backup.kind = "auto";
    backup.created_at = meta.when, backup.created_by = by;
    folio::document& d = s.change();
    const std::uint64_t held = d.units();
    const folio::local_change change = replace_value(d, value);
    if (d.units() > folio::document::max_units(d.type())) refuse_past_max_units(d, held, d.units());
    const std::string batch = change.count ? d.encode_change(change) : std::string();
    const std::int64_t revision = s.append(change.count ? &batch : nullptr, meta, [&](std::int64_t) {
      check_room(c.db, k, false);
      backup.number = insert_version(c.db, k, backup);
    });
    return success_body("Version restored successfully.", [&](json_writer& w) {
      w.StartObject();
      write_member(w, "version", record_version(k, row.incarnation, revision));
      write_member(w, "backupVersionId", version_id(k, row.incarnation, backup.number));
      w.EndObject();
    });
  });
}

std::string versions_diff(context& c, crdt_family& f) {
  check_known_fields(c.data, diff_fields, "versions/diff takes organizationId, documentId, editorId, from and to");
  const record_key k = requested_record(c);
  record_session s(f, c.db, k);
  const record_row& row = s.open_existing();
  const folio::document& d = s.doc();
  const version_row from = existing_version(c.db, k, requested_number(c, k, row, "from"));
  const bool to_now = field_value(c.data, "to") == nullptr;
  const std::optional<version_row> to = to_now ? std::nullopt : std::optional<version_row>(existing_version(c.db, k, requested_number(c, k, row, "to")));
  const folio::version_vector from_vector = vector_of(from, d), to_vector = to ? vector_of(*to, d) : d.version();
  const change_authors authors = c.db.read([&] { return change_authors::load(c.db, k); });
  return success_body(c.out, "Versions compared successfully.", [&](json_writer& w) {
    w.StartObject();
    write_member(w, "type", row.type);
    write_member(w, "from", version_id(k, row.incarnation, from.number));
    write_member(w, "fromVersion", record_version(k, row.incarnation, from.revision));
    write_optional_member(w, "to", to ? std::optional<std::string>(version_id(k, row.incarnation, to->number)) : std::nullopt);
    write_member(w, "toVersion", record_version(k, row.incarnation, to ? to->revision : row.revision));
    w.Key("changes");
    if (d.type() == folio::record_type::map)
      write_map_diff(w, d, from_vector, to_vector, to_now, authors);
    else if (d.type() == folio::record_type::xml)
      write_xml_diff(w, d, from_vector, to_vector, to_now, authors);
    else
      write_sequence_diff(w, d, from_vector, to_vector, authors);
    w.EndObject();
  });
}

}  // namespace

void register_version_routes(route_table& routes, crdt_family& f) {
  const auto with = [&f](std::string (*handler)(context&, crdt_family&)) { return [&f, handler](context& c) { return handler(c, f); }; };
  routes.add({"/v2/crdt/versions/add", with(versions_add), true, true});
  routes.add({"/v2/crdt/versions/get", with(versions_get), false, true});
  routes.add({"/v2/crdt/versions/update", with(versions_update), true});
  routes.add({"/v2/crdt/versions/delete", with(versions_delete), true});
  routes.add({"/v2/crdt/versions/restore", with(versions_restore), true, true});
  routes.add({"/v2/crdt/versions/diff", with(versions_diff), false, true});
}

}  // namespace folio::service
