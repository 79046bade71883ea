#include "crdt/versions.hpp"

#include <algorithm>

#include "crdt/history.hpp"
#include "events/outbox.hpp"
#include "platform/clock.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

std::vector<std::string> authors_of(const std::string& text) {
  const rapidjson::Document d = parse_stored_json(text);
  std::vector<std::string> out;
  if (d.IsArray())
    for (const rapidjson::Value& a : d.GetArray())
      if (a.IsString()) out.emplace_back(a.GetString(), a.GetStringLength());
  return out;
}

#define FOLIO_VERSION_COLUMNS "number, revision, version_vector, kind, name, pinned, created_at, created_by, authors"

version_row row_of(query& q) {
  version_row v;
  v.number = q.integer(0), v.revision = q.integer(1), v.version_vector = q.blob(2), v.kind = q.text(3), v.name = q.text_opt(4);
  v.pinned = q.integer(5) != 0, v.created_at = q.text(6), v.created_by = q.text(7), v.authors = authors_of(q.text(8));
  return v;
}

}  // namespace

std::string version_id(const record_key& k, std::uint64_t incarnation, std::int64_t number) {
  return 'v' + std::to_string(number) + '-' + history_tag(k, incarnation);
}

std::optional<std::int64_t> version_number(std::string_view id, const record_key& k, std::uint64_t incarnation) {
  const std::size_t dash = id.find('-');
  if (id.size() < 2 || id[0] != 'v' || dash == std::string_view::npos || dash < 2 || dash > 19) return std::nullopt;
  const std::string_view digits = id.substr(1, dash - 1);
  if (digits[0] == '0' || digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  if (id.substr(dash + 1) != history_tag(k, incarnation)) return std::nullopt;
  return std::stoll(std::string(digits));
}

std::int64_t insert_version(database& db, const record_key& k, version_row v) {
  std::int64_t since = 0;  // the newest version's revision: this one's authors changed the record after it
  {
    query q = db.sql("SELECT revision FROM crdt_versions WHERE tenant=? AND org=? AND doc=? AND editor=? ORDER BY number DESC LIMIT 1");
    q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
    if (q.step()) since = q.integer(0);
  }
  {
    query q = db.sql("SELECT changed_by FROM crdt_changes WHERE tenant=? AND org=? AND doc=? AND editor=? AND revision>? AND revision<=? ORDER BY revision");
    q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, since).bind(6, v.revision);
    while (q.step() && v.authors.size() < max_version_authors)
      if (std::string by = q.text(0); std::find(v.authors.begin(), v.authors.end(), by) == v.authors.end()) v.authors.push_back(std::move(by));
  }
  // A version of the current revision is the newest state's: no automatic version is due until the next change.
  db.sql("UPDATE crdt_records SET versions_made=versions_made+1, "
         "versioned_revision=CASE WHEN versioned_revision < ? THEN ? ELSE versioned_revision END, "
         "unversioned_since=CASE WHEN revision <= ? THEN NULL ELSE unversioned_since END "
         "WHERE tenant=? AND org=? AND doc=? AND editor=?")
      .bind(1, v.revision).bind(2, v.revision).bind(3, v.revision).bind(4, k.tenant).bind(5, k.org).bind(6, k.doc).bind(7, k.editor)
      .step();
  query n = db.sql("SELECT versions_made, type, incarnation FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?");
  n.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  if (!n.step()) throw store_error(failure::other, "the record of a version is gone");
  v.number = n.integer(0);
  // Its event (events/outbox.hpp), in this transaction: by its creator (none for an automatic one).
  record_event(db, {k.tenant, event_types::version_created, k.org,
                    std::string("version\x1f").append(k.org).append("\x1f").append(k.doc).append("\x1f").append(k.editor), false, v.created_by,
                    now_unix_ms(),
                    version_event_data(k.org, k.doc, k.editor, n.text(1), record_version(k, static_cast<std::uint64_t>(n.integer(2)), v.revision), v.number,
                                       v.kind, v.name, json_string_array(v.authors))});
  db.sql("INSERT INTO crdt_versions (tenant, org, doc, editor, " FOLIO_VERSION_COLUMNS ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, v.number).bind(6, v.revision).bind_blob(7, v.version_vector)
      .bind(8, v.kind).bind_opt(9, v.name).bind(10, std::int64_t(v.pinned ? 1 : 0)).bind(11, v.created_at).bind(12, v.created_by)
      .bind(13, json_string_array(v.authors))
      .step();
  return v.number;
}

version_count count_versions(database& db, const record_key& k) {
  query q = db.sql("SELECT count(*), coalesce(sum(CASE WHEN kind='named' THEN 1 ELSE 0 END), 0) FROM crdt_versions "
                   "WHERE tenant=? AND org=? AND doc=? AND editor=?");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  version_count c;
  if (q.step()) c.all = q.integer(0), c.named = q.integer(1);
  return c;
}

std::vector<version_row> list_versions(database& db, const record_key& k, std::int64_t before, std::size_t limit) {
  query q = db.sql("SELECT " FOLIO_VERSION_COLUMNS " FROM crdt_versions WHERE tenant=? AND org=? AND doc=? AND editor=? AND number<? ORDER BY number DESC LIMIT ?");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, before > 0 ? before : INT64_MAX).bind(6, static_cast<std::int64_t>(limit));
  std::vector<version_row> out;
  while (q.step()) out.push_back(row_of(q));
  return out;
}

std::optional<version_row> find_version(database& db, const record_key& k, std::int64_t number) {
  query q = db.sql("SELECT " FOLIO_VERSION_COLUMNS " FROM crdt_versions WHERE tenant=? AND org=? AND doc=? AND editor=? AND number=?");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, number);
  if (!q.step()) return std::nullopt;
  return row_of(q);
}

bool update_version(database& db, const record_key& k, std::int64_t number, const std::optional<std::optional<std::string>>& name,
                    std::optional<bool> pinned) {
  if (!find_version(db, k, number)) return false;
  if (name)
    db.sql("UPDATE crdt_versions SET name=? WHERE tenant=? AND org=? AND doc=? AND editor=? AND number=?")
        .bind_opt(1, *name).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor).bind(6, number)
        .step();
  if (pinned)
    db.sql("UPDATE crdt_versions SET pinned=? WHERE tenant=? AND org=? AND doc=? AND editor=? AND number=?")
        .bind(1, std::int64_t(*pinned ? 1 : 0)).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor).bind(6, number)
        .step();
  return true;
}

bool delete_version(database& db, const record_key& k, std::int64_t number) {
  db.sql("DELETE FROM crdt_versions WHERE tenant=? AND org=? AND doc=? AND editor=? AND number=?")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, number)
      .step();
  return db.changes() > 0;
}

void set_version_authors(database& db, const record_key& k, std::int64_t number, const std::vector<std::string>& authors) {
  db.sql("UPDATE crdt_versions SET authors=? WHERE tenant=? AND org=? AND doc=? AND editor=? AND number=?")
      .bind(1, json_string_array(authors)).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor).bind(6, number)
      .step();
}

}  // namespace folio::service
