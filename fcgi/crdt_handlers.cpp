// /v2/crdt/add|update|get|delete|sync (DESIGN.md §5, §6). Values go through folio::document: `add`
// builds a record by replace-by-value from empty, `update` diffs the new value into ops on the stored
// state and persists only those ops; `get` folds the log into the snapshot (or uses the cached
// document); `sync` integrates a client's ops whole or not at all and answers what the client lacks.
// Every committed change is then published to the record's channel (publish.hpp), still under the
// record's lock so that subscribers see changes in commit order.
//
// Incarnations (DESIGN.md §5): `add` draws a random incarnation, the replica id the server edits the
// record as, so a record deleted and added again never repeats an op id of the old one. Sync answers
// and published changes carry it; a client that has state sends it back, and one holding another
// incarnation's state is refused with ABORTED, never merged.
#include <folio/document.hpp>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "base64.hpp"
#include "crdt_values.hpp"
#include "fields.hpp"
#include "handlers.hpp"
#include "json.hpp"

namespace folio::service {

namespace {

/// The request's `data` member, checked against the record type's shape.
new_value value_of(folio::record_type type, const rapidjson::Value& data) {
  const rapidjson::Value* v = field_value(data, "data");
  if (!v) throw api_error(status::invalid_argument, "Data is required.");
  return parse_value(type, *v);
}

std::string content_key_of(const rapidjson::Value& data) {
  const std::optional<std::string> k = optional_id(data, "contentKey");
  return k ? *k : std::string("content");
}

/// A record's incarnation as the API writes it: a decimal string (a JavaScript number could not hold
/// its 63 bits).
std::string incarnation_text(const record_row& row) { return std::to_string(row.incarnation); }

/// The stored record as a document: the snapshot with the log folded in.
folio::document rebuild(database& db, const record_key& k, const record_row& row) {
  std::optional<folio::document> d;
  if (const folio::decode_result r = folio::document::decode(row.snapshot, row.incarnation, d); !r)
    throw std::runtime_error("stored snapshot does not decode: " + r.description());
  if (row.log_len > 0)
    for (const std::string& batch : load_log(db, k)) {
      const folio::apply_result r = d->apply(batch);
      if (!r || r.pending) throw std::runtime_error("stored change does not apply: " + r.message);
    }
  return std::move(*d);
}

/// True when `e` holds the record of `row`: the same incarnation at the same revision.
bool holds(const cached_doc& e, const record_row& row) { return e.doc && e.revision == row.revision && e.doc->replica() == row.incarnation; }

/// Makes `e` hold the record at `row.revision` (the caller holds e.lock and a transaction).
folio::document& current(context& c, const record_key& k, const record_row& row, cached_doc& e) {
  database& db = c.db;
  const bool hit = holds(e, row);
  c.svc.cache().note(hit);
  if (!hit) {
    e.doc.reset();
    e.revision = -1;
    e.doc.emplace(rebuild(db, k, row));
    e.revision = row.revision;
  }
  return *e.doc;
}

void write_record(json_writer& w, const record_row& row, const folio::document& d) {
  w.StartObject();
  w.Key("data");
  write_value(w, d);
  w.Key("id");
  write_string(w, row.editor);
  w.Key("lastUpdate");
  write_string(w, row.last_update);
  w.Key("lastUpdatedBy");
  write_string(w, row.last_updated_by);
  w.Key("sessionId");
  write_optional(w, row.session_id);
  w.Key("type");
  write_string(w, row.type);
  w.Key("contentKey");
  write_string(w, row.content_key);
  w.EndObject();
}

/// Publishes one committed change of `k` (DESIGN.md §6, docs/API.md "live messages"): its ops, the
/// server's version after it and its metadata, all under the record's `incarnation`; and its notice,
/// the same without `update` and `version` (subscribers sync), which the publisher sends instead when
/// the whole message is over 64 KiB or the minute's budget is spent, and owes the channel when nginx
/// refuses a message (fcgi/publish.hpp).
/// `ops` null: the record was deleted (one small message, `deleted: true`).
void publish_change(context& c, const record_key& k, const std::string& incarnation, const std::string* ops, const folio::version_vector* version,
                    const std::string& last_update, const std::string& by, const std::optional<std::string>& session) {
  const live_config& live = c.svc.live().settings();
  if (live.channel_secret.empty() || live.publish_socket.empty()) return;
  const auto message = [&](bool with_ops) {
    rapidjson::StringBuffer sb;
    json_writer w(sb);
    w.StartObject();
    w.Key("editorId");
    write_string(w, k.editor);
    w.Key("incarnation");
    write_string(w, incarnation);
    if (!ops) {
      w.Key("deleted");
      w.Bool(true);
    } else {
      if (with_ops) {
        w.Key("update");
        write_string(w, base64_encode(*ops));
        w.Key("version");
        write_string(w, base64_encode(version->encode()));
      }
      w.Key("lastUpdatedBy");
      write_string(w, by);
      w.Key("sessionId");
      write_optional(w, session);
    }
    w.Key("lastUpdate");
    write_string(w, last_update);
    w.EndObject();
    return std::string(sb.GetString(), sb.GetSize());
  };
  const std::string notice = message(false);
  // Ops that alone exceed the largest message are not even encoded.
  const std::string full = ops && ops->size() <= publisher::max_message_bytes ? message(true) : notice;
  c.svc.live().publish(channel_id(live.channel_secret, k.tenant, k.org, k.doc, k.editor), full, notice);
}

/// A binary field sent as base64 (DESIGN.md §6); `required` decides whether absence is an error.
std::optional<std::string> binary_field(const rapidjson::Value& data, const char* field, bool required) {
  const rapidjson::Value* v = field_value(data, field);
  if (!v) {
    if (required) throw api_error(status::invalid_argument, std::string(field) + " is required.");
    return std::nullopt;
  }
  if (!v->IsString()) throw api_error(status::invalid_argument, std::string(field) + " must be a base64 string.");
  std::optional<std::string> bytes = base64_decode({v->GetString(), v->GetStringLength()});
  if (!bytes) throw api_error(status::invalid_argument, std::string(field) + " is not valid base64.");
  return bytes;
}

/// The sync request's `incarnation`: absent or null is nullopt; else the decimal string a sync answer
/// gave (1-19 digits).
std::optional<std::string> incarnation_field(const rapidjson::Value& data) {
  const rapidjson::Value* v = field_value(data, "incarnation");
  if (!v) return std::nullopt;
  const std::string_view s = v->IsString() ? std::string_view(v->GetString(), v->GetStringLength()) : std::string_view();
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string_view::npos)
    throw api_error(status::invalid_argument, "incarnation must be the string a sync answer gave (decimal digits).");
  return std::string(s);
}

record_key key_of(context& c, bool editor_required = true) {
  record_key k;
  k.tenant = c.who.tenant;
  k.org = required_id(c.data, "organizationId", "Organization ID is required");
  k.doc = required_id(c.data, "documentId", "Document ID is required");
  if (editor_required) k.editor = required_id(c.data, "editorId", "Editor ID is required.");
  return k;
}

}  // namespace

std::string crdt_add(context& c) {
  const record_key k = key_of(c);
  const rapidjson::Value* t = field_value(c.data, "type");
  if (!t) throw api_error(status::invalid_argument, "Type is required.");
  const folio::record_type type = parse_type(*t);
  const std::string content_key = content_key_of(c.data);
  const new_value value = value_of(type, c.data);
  const std::optional<std::string> user = optional_id(c.data, "userId"), session = optional_id(c.data, "sessionId");

  const std::string ck = k.cache_key();
  std::shared_ptr<cached_doc> e = c.svc.cache().get(ck);
  std::lock_guard<std::mutex> g(e->lock);
  std::optional<folio::document> d;
  c.db.write([&] {
    if (load_record(c.db, k)) throw api_error(status::already_exists, "CRDT data already exists for this editor ID.");
    record_row row;
    row.incarnation = new_incarnation();
    d.emplace(type, row.incarnation, content_key);
    replace(*d, value);
    row.editor = k.editor, row.type = std::string(folio::to_string(type)), row.content_key = content_key, row.snapshot = d->encode();
    row.revision = 1, row.last_update = now_iso(), row.last_updated_by = user ? *user : c.who.subject, row.session_id = session;
    insert_record(c.db, k, row);
  });
  e->doc = std::move(d);
  e->revision = 1;
  c.svc.cache().account(ck, e->doc->memory_usage());
  return success_body("CRDT data added successfully.", nullptr);
}

std::string crdt_update(context& c) {
  const record_key k = key_of(c);
  std::optional<folio::record_type> type;
  if (const rapidjson::Value* t = field_value(c.data, "type")) type = parse_type(*t);
  const std::optional<std::string> content_key = optional_id(c.data, "contentKey");
  const std::optional<std::string> user = optional_id(c.data, "userId"), session = optional_id(c.data, "sessionId");
  std::optional<new_value> early;
  if (type) early = value_of(*type, c.data);  // parse outside the write lock when the type is known

  const std::string ck = k.cache_key();
  std::shared_ptr<cached_doc> e = c.svc.cache().get(ck);
  std::lock_guard<std::mutex> g(e->lock);
  const std::string when = now_iso(), by = user ? *user : c.who.subject;
  std::string batch, incarnation;
  bool compacted = false;
  const std::int64_t revision = c.db.write([&] {
    const std::optional<record_row> row = load_record(c.db, k);
    if (!row) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
    incarnation = incarnation_text(*row);
    if (type && folio::to_string(*type) != row->type)
      throw api_error(status::invalid_argument, "Type " + std::string(folio::to_string(*type)) + " does not match the record's type " + row->type + ".");
    if (content_key && *content_key != row->content_key)
      throw api_error(status::invalid_argument, "contentKey \"" + *content_key + "\" does not match the record's contentKey \"" + row->content_key + "\".");
    const new_value value = early ? std::move(*early) : value_of(*folio::parse_record_type(row->type), c.data);
    folio::document& d = current(c, k, *row, *e);
    e->revision = -1;  // the document changes below; until the commit it matches no stored revision
    const folio::local_change change = replace(d, value);
    batch = change.count ? d.encode_change(change) : std::string();
    const std::int64_t rev = append_change(c.db, k, *row, change.count ? &batch : nullptr, when, by, session);
    if (change.count && row->log_len + 1 >= compact_after) {
      compact(c.db, k, d.encode());
      compacted = true;
    }
    return rev;
  });
  if (compacted) c.svc.stats().compaction();
  e->revision = revision;  // only once committed: a failed commit leaves the entry matching nothing
  c.svc.cache().account(ck, e->doc ? e->doc->memory_usage() : 0);
  if (!batch.empty()) publish_change(c, k, incarnation, &batch, &e->doc->version(), when, by, session);
  return success_body("CRDT data updated successfully.", nullptr);
}

std::string crdt_get(context& c) {
  record_key k = key_of(c, false);
  const std::optional<std::string> editor = optional_id(c.data, "editorId");
  if (editor) {  // fast path: one row read (atomic on its own) and the cached document at that revision
    k.editor = *editor;
    std::optional<record_row> row = load_record(c.db, k, false);
    if (!row) return success_body("CRDT data retrieved successfully.", [](json_writer& w) { w.StartArray(), w.EndArray(); });
    std::shared_ptr<cached_doc> e = c.svc.cache().get(k.cache_key());
    std::lock_guard<std::mutex> g(e->lock);
    if (holds(*e, *row)) {
      c.svc.cache().note(true);
      return success_body("CRDT data retrieved successfully.", [&](json_writer& w) {
        w.StartArray();
        write_record(w, *row, *e->doc);
        w.EndArray();
      });
    }
  }
  return c.db.read([&] {
    std::vector<record_row> rows;
    if (editor) {
      k.editor = *editor;
      if (auto row = load_record(c.db, k)) rows.push_back(std::move(*row));
    } else {
      rows = load_document_records(c.db, k.tenant, k.org, k.doc);
    }
    return success_body("CRDT data retrieved successfully.", [&](json_writer& w) {
      w.StartArray();
      for (const record_row& row : rows) {
        record_key rk = k;
        rk.editor = row.editor;
        const std::string ck = rk.cache_key();
        std::shared_ptr<cached_doc> e = c.svc.cache().get(ck);
        std::lock_guard<std::mutex> g(e->lock);
        if (holds(*e, row)) {
          c.svc.cache().note(true);
          write_record(w, row, *e->doc);
        } else if (e->doc && (e->doc->replica() != row.incarnation || e->revision > row.revision)) {
          // A newer write landed after this read began (or the record was added again): read this
          // snapshot's state without replacing the newer one in the cache.
          c.svc.cache().note(false);
          write_record(w, row, rebuild(c.db, rk, row));
        } else {
          write_record(w, row, current(c, rk, row, *e));
          c.svc.cache().account(ck, e->doc->memory_usage());
        }
      }
      w.EndArray();
    });
  });
}

std::string crdt_delete(context& c) {
  const record_key k = key_of(c);
  const std::string ck = k.cache_key();
  std::shared_ptr<cached_doc> e = c.svc.cache().get(ck);
  std::lock_guard<std::mutex> g(e->lock);
  const std::optional<record_row> gone = c.db.write([&] {
    std::optional<record_row> row = load_record(c.db, k, false);
    if (row) delete_record(c.db, k);
    return row;
  });
  e->doc.reset();
  e->revision = -1;
  c.svc.cache().erase(ck);
  if (!gone) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
  publish_change(c, k, incarnation_text(*gone), nullptr, nullptr, now_iso(), c.who.subject, std::nullopt);
  return success_body("CRDT data deleted successfully.", nullptr);
}

std::string crdt_sync(context& c) {
  const record_key k = key_of(c);
  const std::string version_bytes = *binary_field(c.data, "version", true);
  folio::version_vector client_version;
  if (const folio::decode_result r = folio::version_vector::decode(version_bytes, client_version); !r)
    throw api_error(status::invalid_argument, "version is not a valid version vector: " + r.description() + ".");
  const std::optional<std::string> update = binary_field(c.data, "update", false);
  const bool push = update && !update->empty();
  const std::optional<std::string> incarnation = incarnation_field(c.data);
  if (!incarnation && (push || !client_version.empty()))
    throw api_error(status::invalid_argument,
                    "incarnation is required with a version that is not empty or an update: send the incarnation of the record's last sync "
                    "answer (a client that has nothing syncs with the empty version and no update).");
  if (push && c.who.read_only) throw api_error(status::permission_denied, "This token is read-only; sync without an update to only receive changes.");
  const std::optional<std::string> user = optional_id(c.data, "userId"), session = optional_id(c.data, "sessionId");

  const std::string ck = k.cache_key();
  std::shared_ptr<cached_doc> e = c.svc.cache().get(ck);
  std::lock_guard<std::mutex> g(e->lock);
  const std::string when = now_iso(), by = user ? *user : c.who.subject;
  std::string answer, ops, type, content_key, record_incarnation;
  bool compacted = false;
  auto integrate = [&] {
    const std::optional<record_row> row = load_record(c.db, k);
    if (!row) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
    record_incarnation = incarnation_text(*row);
    if (incarnation && *incarnation != record_incarnation)
      throw api_error(status::aborted,
                      "This record was deleted and added again since the client's state was synced (incarnation " + *incarnation + ", now " +
                          record_incarnation + "): drop the local state and sync again from the empty version.");
    type = row->type, content_key = row->content_key;
    folio::document& d = current(c, k, *row, *e);
    answer = d.encode_since(client_version);  // before the push: the client has its own ops
    if (!push) return row->revision;
    const folio::version_vector before = d.version();
    e->revision = -1;  // the document changes below; until the commit it matches no stored revision
    const folio::record_type record_type = d.type();
    const folio::apply_result r = d.apply(*update, [&](std::string_view value) { return json_value_rule(record_type, value); });
    if (!r || d.pending() != 0) {
      if (d.version() == before && d.pending() == 0)
        e->revision = row->revision;  // nothing integrated (a malformed batch, a first op invalid): still the stored record
      else
        e->doc.reset();  // partly integrated: rebuilt from storage by the next request
      if (!r) throw api_error(status::invalid_argument, "update is invalid: " + r.message + (r.message.starts_with("batch") ? "." : " (operation " + std::to_string(r.op_index) + ")."));
      throw api_error(status::failed_precondition,
                      "update depends on operations the server does not have; sync without an update first, then send the operations the server's version lacks.");
    }
    if (d.version() == before) return e->revision = row->revision;  // all duplicates: nothing to store
    ops = d.encode_since(before);
    const std::int64_t rev = append_change(c.db, k, *row, &ops, when, by, session);
    if (row->log_len + 1 >= compact_after) {
      compact(c.db, k, d.encode());
      compacted = true;
    }
    return rev;
  };
  const std::int64_t revision = push ? c.db.write(integrate) : c.db.read(integrate);
  if (compacted) c.svc.stats().compaction();
  e->revision = revision;
  c.svc.cache().account(ck, e->doc->memory_usage());
  const folio::version_vector& server_version = e->doc->version();
  if (!ops.empty()) publish_change(c, k, record_incarnation, &ops, &server_version, when, by, session);
  return success_body("CRDT data synced successfully.", [&](json_writer& w) {
    w.StartObject();
    w.Key("incarnation");
    write_string(w, record_incarnation);
    w.Key("update");
    write_string(w, base64_encode(answer));
    w.Key("version");
    write_string(w, base64_encode(server_version.encode()));
    w.Key("type");
    write_string(w, type);
    w.Key("contentKey");
    write_string(w, content_key);
    w.EndObject();
  });
}

}  // namespace folio::service
