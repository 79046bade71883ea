#include "crdt/schema.hpp"

namespace folio::service {

namespace {

// Both dialects' texts (storage/migrations.hpp, ddl). No PostgreSQL database is older than schema 4:
// its step 4 is SQLite's steps 1 and 4 in its spelling (on its empty tables the UPDATE changes nothing).

// 1 (SQLite): the records with their snapshots, and their logs.
constexpr const char* records_1 = R"sql(
CREATE TABLE crdt_records (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  type TEXT NOT NULL, content_key TEXT NOT NULL, snapshot {BLOB} NOT NULL,
  log_len {INTEGER} NOT NULL, revision {INTEGER} NOT NULL,
  last_update TEXT NOT NULL, last_updated_by TEXT NOT NULL, session_id TEXT,
  PRIMARY KEY (tenant, org, doc, editor)){ROWID};
CREATE TABLE crdt_log (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  seq {INTEGER} NOT NULL, batch {BLOB} NOT NULL,
  PRIMARY KEY (tenant, org, doc, editor, seq)){ROWID};
)sql";

// 4: a CRDT record has an incarnation, the replica id its server edits it as, drawn at random when the
// record is added. Records stored before were edited as the database's one server replica (kept in
// meta by schemas 1-3), which stays their incarnation.
constexpr const char* incarnation_4 = R"sql(
ALTER TABLE crdt_records ADD COLUMN incarnation {INTEGER} NOT NULL DEFAULT 0;
UPDATE crdt_records SET incarnation = (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'server_replica');
)sql";

// 5: the snapshot in a table of its own, apart from the columns every request reads and every change
// rewrites (one layout for both dialects keeps the statements shared).
constexpr const char* snapshots_5 = R"sql(
CREATE TABLE crdt_snapshots (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL, snapshot {BLOB} NOT NULL,
  PRIMARY KEY (tenant, org, doc, editor)){ROWID};
INSERT INTO crdt_snapshots (tenant, org, doc, editor, snapshot) SELECT tenant, org, doc, editor, snapshot FROM crdt_records;
ALTER TABLE crdt_records DROP COLUMN snapshot;
)sql";

// 6: snapshots written from now on may be documents of format version 2 (docs/FORMAT.md), which
// earlier builds cannot read. No table changes: the version makes an earlier folio-fcgi refuse the
// database rather than fail on each record.
constexpr const char* format_2 = "SELECT 1";

// 7: a change is logged under the revision it made (`revision`, which was `seq`, its position in the
// log), so a compaction can delete the changes it folded while later ones stay; rows logged before keep
// their numbers, all below the record's revision, so the order holds. The rename fails an earlier
// folio-fcgi still running against the database (its statements name `seq`). The record counts its
// log's bytes and its snapshot's (wants_compaction; length() of a bytea is its bytes).
constexpr const char* revisions_7 =
    "ALTER TABLE crdt_log RENAME COLUMN seq TO revision;\n"
    "ALTER TABLE crdt_records ADD COLUMN log_bytes {INTEGER} NOT NULL DEFAULT 0;\n"
    "ALTER TABLE crdt_records ADD COLUMN snapshot_bytes {INTEGER} NOT NULL DEFAULT 0;\n"
    "UPDATE crdt_records SET\n"
    "  log_bytes = (SELECT coalesce(sum(length(l.batch)), 0) FROM crdt_log l WHERE l.tenant = crdt_records.tenant AND l.org = crdt_records.org\n"
    "               AND l.doc = crdt_records.doc AND l.editor = crdt_records.editor),\n"
    "  snapshot_bytes = coalesce((SELECT length(s.snapshot) FROM crdt_snapshots s WHERE s.tenant = crdt_records.tenant AND s.org = crdt_records.org\n"
    "               AND s.doc = crdt_records.doc AND s.editor = crdt_records.editor), 0);\n";

// 11: the channels of client-token streams a responder let in (crdt/publish/token_streams.hpp): one row per responder
// (`owner`, drawn at each start), channel and stream key ("<signing key id>/<tenant>") with the
// earliest expiry among that key's tokens let in; a responder that starts takes over every row
// (adopt_token_streams).
constexpr const char* token_streams_11 = R"sql(
CREATE TABLE crdt_token_streams (
  owner TEXT NOT NULL, channel TEXT NOT NULL, stream_key TEXT NOT NULL, expires {INTEGER} NOT NULL,
  PRIMARY KEY (owner, channel, stream_key)){ROWID};
)sql";

// 12: a record's history (crdt/history.hpp). crdt_changes: one row per committed change that integrated
// operations — the revision it made, who made it and when, and, for each replica whose operations it
// added, that replica's count before and after (two version-vector encodings, docs/FORMAT.md): the
// record's version at an earlier revision is its version now with the later rows undone, and an
// operation's author is the row whose range holds its seq. history_from: the earliest revision whose
// version is known (the rows after it are all kept); a record stored before keeps its revision then.
// crdt_versions: named and automatic versions, each the record's version vector at a revision (the
// value is the record's document checked out there), numbered per record by versions_made.
// versioned_revision: the revision of the record's newest version (an automatic one is due only after
// it); unversioned_since: when the first change after it was committed, NULL when there is none (the
// partial index is the automatic versions' queue, crdt/auto_versions.hpp).
// Snapshots written from now on may be documents of format version 3 (all values kept), which
// earlier builds cannot read.
constexpr const char* history_12 = R"sql(
CREATE TABLE crdt_changes (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  revision {INTEGER} NOT NULL, before_counts {BLOB} NOT NULL, after_counts {BLOB} NOT NULL,
  changed_by TEXT NOT NULL, changed_at TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, editor, revision)){ROWID};
CREATE TABLE crdt_versions (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  number {INTEGER} NOT NULL, revision {INTEGER} NOT NULL, version_vector {BLOB} NOT NULL,
  kind TEXT NOT NULL, name TEXT, pinned {INTEGER} NOT NULL, created_at TEXT NOT NULL, created_by TEXT NOT NULL,
  authors TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, editor, number)){ROWID};
ALTER TABLE crdt_records ADD COLUMN history_from {INTEGER} NOT NULL DEFAULT 0;
ALTER TABLE crdt_records ADD COLUMN versions_made {INTEGER} NOT NULL DEFAULT 0;
ALTER TABLE crdt_records ADD COLUMN versioned_revision {INTEGER} NOT NULL DEFAULT 0;
ALTER TABLE crdt_records ADD COLUMN unversioned_since TEXT;
UPDATE crdt_records SET history_from = revision, versioned_revision = revision;
CREATE INDEX crdt_records_unversioned ON crdt_records (unversioned_since) WHERE unversioned_since IS NOT NULL;
CREATE INDEX crdt_changes_by_time ON crdt_changes (changed_at);
)sql";

}  // namespace

module_migrations crdt_migrations() {
  static const std::string sqlite_1 = ddl(dialect::sqlite, records_1), sqlite_4 = ddl(dialect::sqlite, incarnation_4);
  static const std::string pg_4 = ddl(dialect::postgresql, records_1) + ddl(dialect::postgresql, incarnation_4);
  static const std::string sqlite_5 = ddl(dialect::sqlite, snapshots_5), pg_5 = ddl(dialect::postgresql, snapshots_5);
  static const std::string sqlite_7 = ddl(dialect::sqlite, revisions_7), pg_7 = ddl(dialect::postgresql, revisions_7);
  static const std::string sqlite_11 = ddl(dialect::sqlite, token_streams_11), pg_11 = ddl(dialect::postgresql, token_streams_11);
  static const std::string sqlite_12 = ddl(dialect::sqlite, history_12), pg_12 = ddl(dialect::postgresql, history_12);
  static const migration sqlite[] = {{1, sqlite_1.c_str()}, {4, sqlite_4.c_str()}, {5, sqlite_5.c_str()}, {6, format_2}, {7, sqlite_7.c_str()},
                                     {11, sqlite_11.c_str()}, {12, sqlite_12.c_str()}};
  static const migration pg[] = {{4, pg_4.c_str()}, {5, pg_5.c_str()}, {6, format_2}, {7, pg_7.c_str()}, {11, pg_11.c_str()}, {12, pg_12.c_str()}};
  return {sqlite, pg};
}

}  // namespace folio::service
