// /v2/crdt/add|update|get|delete|sync (docs/API.md). Values go through folio::document: `add`
// builds a record by replace-by-value from empty, `update` diffs the new value into ops on the stored
// state and persists only those ops; `get` folds the log into the snapshot (or uses the cached
// document, or the value a get rendered at the stored revision); `sync` integrates a client's ops
// whole or not at all and answers what the client lacks.
// Each goes through a record_session (record_session.hpp): everything that depends only on the request
// and the record — parsing the value, decoding a batch, the diff, encoding — happens before the
// process-wide writer section, which holds only the statements and the commit.
// The session's add, append or erase commits and emits the commit event (commit_events.hpp), which the
// live push and any other subscriber hear, still under the record's lock. So each handler reads: parse
// the request, then one record_session (open, change, add, append or erase).
//
// Incarnations (docs/API.md, the /v2/crdt endpoints): `add` draws a random incarnation, the replica id the server edits the
// record as, so a record deleted and added again never repeats an op id of the old one. Sync answers
// and published changes carry it; a client that has state sends it back, and one holding another
// incarnation's state is refused with ABORTED, never merged.
#include <folio/document.hpp>
#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/family.hpp"
#include "crdt/handlers.hpp"
#include "crdt/history.hpp"
#include "crdt/record_session.hpp"
#include "crdt/version_diff.hpp"
#include "platform/clock.hpp"
#include "platform/fields.hpp"
#include "wire/base64.hpp"
#include "wire/crdt_values.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

/// Bytes written as standard base64 (base64_encode's text) into a body as they come, a piece at a time:
/// the same text as base64_encode of all of them, holding at most two bytes between pieces.
class base64_pieces {
 public:
  explicit base64_pieces(body_output& out) : out_(out) {}
  void add(std::string_view bytes) {
    if (!carry_.empty()) {  // complete the group the last piece left
      const std::size_t take = std::min(bytes.size(), 3 - carry_.size());
      carry_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (carry_.size() < 3) return;
      out_.append(base64_encode(carry_));
      carry_.clear();
    }
    const std::size_t whole = bytes.size() / 3 * 3;
    if (whole) out_.append(base64_encode(bytes.substr(0, whole)));
    carry_.assign(bytes.substr(whole));
    out_.flush_if_full();
  }
  /// The last group, padded.
  void end() {
    if (!carry_.empty()) out_.append(base64_encode(carry_));
    carry_.clear();
  }

 private:
  body_output& out_;
  std::string carry_;
};

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

/// An edit through the engine (`edit()`: replace(), or a rebase), with a record whose op counter is
/// spent answered as a client error: nothing can be added to it (its ids are capped at 2^31), and every
/// later update would fail alike.
template <class Edit>
folio::local_change counted_edit(Edit&& edit) {
  try {
    return edit();
  } catch (const folio::error& e) {
    switch (e.code()) {
      case folio::error_code::overflow:
        throw api_error(status::failed_precondition,
                        "This record has used all the operation ids a record can hold (2^31); add its value as a new record under another editorId.");
      default: throw;
    }
  }
}


/// The update's `baseVersion`, when given: the revision it names (history.hpp), which the record's
/// history still holds. 400 for a string that is no version of this record; 409 ABORTED for one older
/// than the history kept.
std::optional<std::int64_t> base_revision(const std::optional<std::string>& text, const record_key& k, const record_row& row) {
  if (!text) return std::nullopt;
  const std::int64_t base = revision_of_version(*text, k, row.incarnation, row.revision, "baseVersion");
  if (base < row.history_from)
    throw api_error(status::aborted, "baseVersion " + *text + " is older than the history this record keeps (from revision " +
                                         std::to_string(row.history_from) +
                                         " on): get the record again, compute the new value from what it answers, and update with that answer's version.");
  return base;
}

/// replace-by-value made at revision `base` and merged with every change committed since, as a
/// client replica's offline edit merges: the value is diffed against `d` checked out at that revision
/// (its version read from the change rows), and the operations made there become `d`'s next ones
/// (document::rebase). At the current revision: a plain replace.
folio::local_change replace_value_at(database& db, const record_key& k, const record_row& row, folio::document& d, std::int64_t base, const new_value& v) {
  if (base == row.revision) return replace_value(d, v);
  const folio::version_vector at = db.read([&] { return version_at(db, k, d.version(), base); });
  folio::document checked_out = d.checkout(at);
  const folio::local_change made = replace_value(checked_out, v);
  return counted_edit([&] { return d.rebase(checked_out, made); });
}

/// One record of crdt/get's answer; `attribution`, when given, writes the value's runs by author after it.
void write_record(json_writer& w, body_output& out, const record_key& k, const record_row& row, const rendered_value& value,
                  const std::function<void(json_writer&)>& attribution = nullptr) {
  w.StartObject();
  w.Key("data");
  w.RawValue(value.json.data(), 0, rapidjson::kStringType);  // the writer's separator and count of the value; then its
  out.append_or_send(value.json);                             // bytes, a large value's sent as they are
  write_member(w, "id", row.editor);
  write_member(w, "lastUpdate", row.last_update);
  write_member(w, "lastUpdatedBy", row.last_updated_by);
  write_optional_member(w, "sessionId", row.session_id);
  write_member(w, "type", row.type);
  write_member(w, "contentKey", row.content_key);
  write_member(w, "version", record_version(k, row.incarnation, row.revision));
  if (attribution) {
    w.Key("attribution");
    attribution(w);
  }
  w.EndObject();
}

/// A binary field sent as base64 (docs/API.md, crdt/sync and crdt/subscribe); `required` decides whether absence is an error.
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

std::string crdt_add(context& c, crdt_family& f) {
  const record_key k = requested_record(c);
  const rapidjson::Value* t = field_value(c.data, "type");
  if (!t) throw api_error(status::invalid_argument, "Type is required.");
  const folio::record_type type = parse_type(*t);
  const std::string content_key = content_key_of(c.data);
  const new_value value = value_of(type, c.data);
  const std::optional<std::string> user = optional_id(c.data, "userId"), session = optional_id(c.data, "sessionId");

  with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    if (s.open()) throw api_error(status::already_exists, "CRDT data already exists for this editor ID.");
    record_row row;
    row.incarnation = new_incarnation();
    folio::document d(type, row.incarnation, content_key);
    replace(d, value);
    if (d.units() > folio::document::max_units(type)) refuse_past_max_units(d, 0, d.units());
    row.editor = k.editor, row.type = std::string(folio::to_string(type)), row.content_key = content_key, row.snapshot = d.encode(folio::kept_values::all);
    row.revision = 1, row.last_update = now_iso(), row.last_updated_by = author(c.who, user), row.session_id = session;
    s.add(std::move(d), row);
  });
  return success_body("CRDT data added successfully.", nullptr);
}

std::string crdt_update(context& c, crdt_family& f) {
  const record_key k = requested_record(c);
  std::optional<folio::record_type> type;
  if (const rapidjson::Value* t = field_value(c.data, "type")) type = parse_type(*t);
  const std::optional<std::string> content_key = optional_id(c.data, "contentKey");
  const std::optional<std::string> user = optional_id(c.data, "userId"), session = optional_id(c.data, "sessionId");
  std::optional<new_value> value;
  if (type) value = value_of(*type, c.data);  // else once the record's type is known
  std::optional<std::string> base_text;
  if (const rapidjson::Value* b = field_value(c.data, "baseVersion")) {
    if (!b->IsString()) throw api_error(status::invalid_argument, "baseVersion must be a version string that crdt/get answered (like \"12-3f2a9c0d1e4b\").");
    base_text.emplace(b->GetString(), b->GetStringLength());
  }

  with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    const record_row& row = s.open_existing();
    if (type && folio::to_string(*type) != row.type)
      throw api_error(status::invalid_argument, "Type " + std::string(folio::to_string(*type)) + " does not match the record's type " + row.type + ".");
    if (content_key && *content_key != row.content_key)
      throw api_error(status::invalid_argument, "contentKey \"" + *content_key + "\" does not match the record's contentKey \"" + row.content_key + "\".");
    if (const folio::record_type stored = *folio::parse_record_type(row.type); !value || value->type != stored) value = value_of(stored, c.data);
    const std::optional<std::int64_t> base = base_revision(base_text, k, row);
    const change_meta meta{now_iso(), author(c.who, user), session};
    // Diff and encode before the writer section.
    folio::document& d = s.change();
    const std::uint64_t held = d.units();
    const folio::local_change change = base ? replace_value_at(c.db, k, row, d, *base, *value) : replace_value(d, *value);
    // Checked after the diff (its op count is known only then); the session drops the changed document.
    if (d.units() > folio::document::max_units(d.type())) refuse_past_max_units(d, held, d.units());
    const std::string batch = change.count ? d.encode_change(change) : std::string();
    s.append(change.count ? &batch : nullptr, meta);
  });
  return success_body("CRDT data updated successfully.", nullptr);
}

std::string crdt_get(context& c, crdt_family& f) {
  std::string org = required_id(c.data, "organizationId", "Organization ID is required");
  std::string doc = required_id(c.data, "documentId", "Document ID is required");
  const std::optional<std::string> editor = optional_id(c.data, "editorId");
  const record_key k = scoped_key(c.who, std::move(org), std::move(doc), editor);
  bool attribution = false;
  if (const rapidjson::Value* a = field_value(c.data, "attribution")) {
    if (!a->IsBool()) throw api_error(status::invalid_argument, "attribution must be true or false.");
    attribution = a->GetBool();
  }
  std::vector<std::string> editors;
  if (editor)
    editors.push_back(*editor);
  else
    editors = document_editors(c.db, k.tenant, k.org, k.doc);
  // Streamed (body_output.hpp): a document of many records is held one record at a time.
  return success_body(c.out, "CRDT data retrieved successfully.", [&](json_writer& w) {
    w.StartArray();
    for (const std::string& id : editors) {
      record_key rk = k;
      rk.editor = id;
      // Each record as its latest committed state, one at a time: its value as rendered for that
      // revision (record_session::open_rendered).
      record_session s(f, c.db, std::move(rk));
      std::shared_ptr<const rendered_value> value;
      if (!attribution) {
        if (const std::optional<record_row>& row = s.open_rendered(value_json, value)) write_record(w, c.out, s.key(), *row, *value);
      } else if (const std::optional<record_row>& row = s.open()) {
        // With attribution: the document itself, rendered here (the cached rendering is skipped),
        // and for a text record who inserted each run of it (crdt/version_diff.hpp).
        const folio::document& d = s.doc();
        const rendered_value rendered{row->revision, row->incarnation, value_json(d)};
        if (d.type() != folio::record_type::text) {
          write_record(w, c.out, s.key(), *row, rendered);
        } else {
          const change_authors authors = c.db.read([&] { return change_authors::load(c.db, s.key()); });
          write_record(w, c.out, s.key(), *row, rendered, [&](json_writer& aw) { write_text_attribution(aw, d, authors); });
        }
      }
      c.out.flush_if_full();
    }
    w.EndArray();
  });
}

std::string crdt_delete(context& c, crdt_family& f) {
  const record_key k = requested_record(c);
  with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    s.open_existing(false);
    s.erase(change_meta{now_iso(), c.who.subject, std::nullopt});
  });
  return success_body("CRDT data deleted successfully.", nullptr);
}

std::string crdt_sync(context& c, crdt_family& f) {
  const record_key k = requested_record(c);
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
  const std::string by = author(c.who, user);

  return with_retries([&](bool exclusive) {
    record_session s(f, c.db, k, exclusive);
    const record_row& row = s.open_existing();
    const std::string record_incarnation = incarnation_text(row);
    if (incarnation && *incarnation != record_incarnation)
      throw api_error(status::aborted,
                      "This record was deleted and added again since the client's state was synced (incarnation " + *incarnation + ", now " +
                          record_incarnation + "): drop the local state and sync again from the empty version.");
    // The answer is what the client lacks before the push (it has its own ops): the ops since its
    // version, cut at the record's version before the push (document::encode_since).
    const folio::version_vector before_push = s.doc().version();
    std::int64_t revision = row.revision;  // the answer's: after the push, when it stored something
    if (push) {
      // Decode and integrate before the writer section; only the append is written inside it.
      folio::document& d = s.change();
      const folio::version_vector before = d.version();
      const folio::record_type record_type = d.type();
      // The Lamport headroom rule: a client's push can never leave the record without op ids for
      // its later edits (docs/INTERNALS.md); max_units: never past what its snapshot can be read back with.
      const folio::apply_result r = d.apply(*update, [&](std::string_view value) { return json_value_rule(record_type, value); },
                                            folio::apply_options{.bounded_lamport = true, .max_units = folio::document::max_units(record_type)});
      if (r.status == folio::apply_status::too_large) {
        s.unchanged();  // refused before anything was integrated
        throw api_error(status::failed_precondition,
                        "update would take the record past the operations it can hold: " + r.message +
                            ". Nothing was stored; add the record's value as a new record under another editorId (or delete the record and add it "
                            "again) to start a fresh history.");
      }
      if (!r || d.pending() != 0) {
        if (d.version() == before && d.pending() == 0) s.unchanged();  // nothing integrated (a malformed batch, a first op invalid)
        // else: partly integrated; the session leaves the entry empty, rebuilt by the next request
        if (!r)
          throw api_error(status::invalid_argument,
                          "update is invalid: " + r.message + (r.message.starts_with("batch") ? "." : " (operation " + std::to_string(r.op_index) + ")."));
        throw api_error(status::failed_precondition,
                        "update depends on operations the server does not have; sync without an update first, then send the operations the server's version lacks.");
      }
      if (d.version() == before) {
        s.unchanged();  // all duplicates: nothing to store
      } else {
        const std::string ops = d.encode_since(before);
        revision = s.append(&ops, change_meta{now_iso(), by, session});
      }
    }
    // Streamed (body_output.hpp), under the record's lock: the update is encoded and sent a piece at a
    // time, so a pull of a long history holds a piece of it, never the whole (nor its base64 or body).
    return success_body(c.out, "CRDT data synced successfully.", [&](json_writer& w) {
      w.StartObject();
      write_member(w, "incarnation", record_incarnation);
      w.Key("update");
      w.RawValue("\"", 1, rapidjson::kStringType);  // the writer's separator, then the string's bytes as they come
      base64_pieces update_text(c.out);
      const folio::document& d = s.doc();
      d.encode_since(client_version, d.version() == before_push ? nullptr : &before_push, [&](std::string_view piece) { update_text.add(piece); });
      update_text.end();
      c.out.append("\"");
      write_member(w, "version", base64_encode(s.doc().version().encode()));
      write_member(w, "recordVersion", record_version(k, row.incarnation, revision));
      write_member(w, "type", row.type);
      write_member(w, "contentKey", row.content_key);
      w.EndObject();
    });
  });
}

}  // namespace

folio::local_change replace_value(folio::document& d, const new_value& v) {
  return counted_edit([&] { return replace(d, v); });
}

/// The refusal of a change after which `d`'s record would hold more unit operations than a record of
/// its type can (folio::document::max_units: what the service reads back from its snapshot, the one
/// limit of the decoder and of this check). `held` and `after`: its units before and after the change.
void refuse_past_max_units(const folio::document& d, std::uint64_t held, std::uint64_t after) {
  throw api_error(status::failed_precondition,
                  "This record holds " + std::to_string(held) + " operations (its whole history, removes included) and the change would take it to " +
                      std::to_string(after) + ", past the " + std::to_string(folio::document::max_units(d.type())) +
                      (d.type() == folio::record_type::array || d.type() == folio::record_type::xml ? " an " : " a ") + std::string(folio::to_string(d.type())) +
                      " record can hold; nothing was stored. Add its value as a new record under another editorId (or delete the record and add it "
                      "again) to start a fresh history.");
}

record_key requested_record(context& c) {
  std::string org = required_id(c.data, "organizationId", "Organization ID is required");
  std::string doc = required_id(c.data, "documentId", "Document ID is required");
  return scoped_key(c.who, std::move(org), std::move(doc), required_id(c.data, "editorId", "Editor ID is required."));
}

void register_crdt_routes(route_table& routes, crdt_family& f) {
  const auto with = [&f](std::string (*handler)(context&, crdt_family&)) { return [&f, handler](context& c) { return handler(c, f); }; };
  routes.add({"/v2/crdt/add", with(crdt_add), true});
  routes.add({"/v2/crdt/update", with(crdt_update), true});
  routes.add({"/v2/crdt/get", with(crdt_get), false, true});
  routes.add({"/v2/crdt/delete", with(crdt_delete), true});
  // A pull reads; a push is checked for a writable token by the handler.
  routes.add({"/v2/crdt/sync", with(crdt_sync), false, true});
}

}  // namespace folio::service
