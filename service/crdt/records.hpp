// service/crdt/records.hpp — CRDT records in the database (platform/database.hpp: SQLite or PostgreSQL; docs/SERVICE.md).
//
// A CRDT record is a row of crdt_records (type, root name, metadata, a revision that every write
// bumps, the incarnation that `add` draws), its snapshot (the encoded document, a row of
// crdt_snapshots: apart, so that the small row every request reads and every change rewrites does not
// carry it) and an append-only log of encoded change batches since the snapshot (crdt_log); readers
// fold the log into the snapshot. A change is logged under the revision it made (its `seq`, so the
// log's order is its commit order and a number is never reused while the record lives); log_len counts
// the log's rows. Once the log reaches `compact_after` changes the record is compacted off the request
// path (crdt/compactor.hpp): its changes up to some seq folded into a new snapshot and deleted, in one
// transaction that changes neither the revision nor the value, while later changes stay logged.
// This module owns the three tables and their migrations (crdt_migrations).
// Every row is keyed by the tenant first.
// Thread-safety: functions over a caller's `database`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "platform/database.hpp"

namespace folio::service {

/// The tables crdt_records and crdt_log (schema 1), the incarnation column (schema 4), the snapshots
/// in crdt_snapshots (schema 5); schema 6 and 7 change no table (format version 2 snapshots; a change
/// logged under its revision).
module_migrations crdt_migrations();

struct record_key {
  std::string tenant, org, doc, editor;
  std::string cache_key() const { return tenant + '\x1f' + org + '\x1f' + doc + '\x1f' + editor; }
};

struct record_row {
  std::string editor, type, content_key, snapshot;
  std::int64_t log_len = 0, revision = 0;
  std::string last_update, last_updated_by;
  std::optional<std::string> session_id;
  /// The record's incarnation: the replica id the server edits this record as, random per `add`
  /// (new_incarnation), so a record deleted and added again never reuses an op id of the old one.
  std::uint64_t incarnation = 0;
};

/// A fresh incarnation: 63 random bits, never 0 (a valid replica id that fits a signed column).
std::uint64_t new_incarnation();

inline constexpr std::int64_t compact_after = 64;

/// The record's row; without its snapshot when `with_snapshot` is false (enough when the cached
/// document is at the row's revision). Throws store_error when the snapshot is asked for and its row
/// is missing (damage: every write keeps the two together).
std::optional<record_row> load_record(database& db, const record_key& k, bool with_snapshot = true);
/// The editorIds of a document's records, in order.
std::vector<std::string> document_editors(database& db, const std::string& tenant, const std::string& org, const std::string& doc);
/// One logged change: its seq (the revision it made; before schema 7, its position in the log) and its batch.
struct logged_change {
  std::int64_t seq = 0;
  std::string batch;
};
/// The record's log, in commit order.
std::vector<logged_change> load_log(database& db, const record_key& k);
void insert_record(database& db, const record_key& k, const record_row& r);
/// Appends one encoded change (or none) under the new revision, bumps the revision and (with a change)
/// log_len, writes the metadata. Returns the revision.
std::int64_t append_change(database& db, const record_key& k, const record_row& before, const std::string* batch, const std::string& last_update,
                           const std::string& by, const std::optional<std::string>& session);
/// Inside a write transaction: replaces the snapshot by `snapshot`, which folds the logged changes up
/// to seq `through` (`count` of them) into the stored one, and deletes those changes; the revision and
/// the value stay. False when the log no longer holds exactly `count` changes up to `through` (another
/// compaction went first): the caller must roll back, as something was deleted.
bool compact(database& db, const record_key& k, const std::string& snapshot, std::int64_t through, std::int64_t count);
bool delete_record(database& db, const record_key& k);

}  // namespace folio::service
