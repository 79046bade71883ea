// service/crdt/records.hpp — CRDT records in the database (storage/database.hpp: SQLite or PostgreSQL; docs/SERVICE.md).
//
// A CRDT record is a row of crdt_records (type, root name, metadata, a revision that every write
// bumps, the incarnation that `add` draws), its snapshot (the encoded document, a row of
// crdt_snapshots: apart, so that the small row every request reads and every change rewrites does not
// carry it) and an append-only log of encoded change batches since the snapshot (crdt_log); readers
// fold the log into the snapshot. A change is logged under the revision it made (crdt_log.revision, so
// the log's order is its commit order and a number is never reused while the record lives); log_len counts
// the log's rows and log_bytes their bytes, snapshot_bytes the snapshot's. When the log is long enough
// that compacting pays (wants_compaction) the record is compacted off the request path
// (crdt/compactor.hpp): its changes up to some revision folded into a new snapshot and deleted, in one
// transaction that changes neither the revision nor the value, while later changes stay logged.
// This module reads and writes the three tables and crdt_token_streams, the channels of client-token
// streams kept across restarts (crdt/publish/token_streams.hpp); their migrations are crdt/schema.cpp's.
// Every record row is keyed by the tenant first; a crdt_token_streams row names its tenant in its
// stream key and is read by no request.
// Thread-safety: functions over a caller's `database`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/database.hpp"

namespace folio::service {

/// A row of crdt_token_streams: a channel holding streams of client tokens signed by `stream_key`
/// ("<signing key id>/<tenant>", crdt/family.hpp stream_key_id) let in by the responder `owner`, and
/// the earliest expiry among those tokens (seconds since the epoch).
struct token_stream_row {
  std::string channel, stream_key;
  std::int64_t expires = 0;
};
/// Writes `owner`'s row of the channel and key (replacing its expiry). One write transaction.
void keep_token_stream(database& db, const std::string& owner, const token_stream_row& r);
/// Deletes `owner`'s rows of `channel`. One write transaction.
void forget_token_streams(database& db, const std::string& owner, const std::string& channel);
/// At a responder's start: makes every row of the table `owner`'s (the earliest expiry per channel and
/// key; the rows of earlier responders, this node's and other nodes', are taken over) and returns
/// them, earliest expiry first. One write transaction, none when the table is empty (a read finds it so:
/// a responder then starts while another process holds the write lock); O(r log r) for r rows.
std::vector<token_stream_row> adopt_token_streams(database& db, const std::string& owner);

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
  /// The log's batches' bytes, and the stored snapshot's (what wants_compaction weighs).
  std::int64_t log_bytes = 0, snapshot_bytes = 0;
  /// The earliest revision whose version vector is known (crdt/history.hpp); the versions the record
  /// has numbered (crdt_versions.number); the revision its latest automatic or restore version is of.
  std::int64_t history_from = 1, versions_made = 0, versioned_revision = 0;
  /// When the first change after the newest version was committed (ISO text), if any.
  std::optional<std::string> unversioned_since;
};

/// A fresh incarnation: 63 random bits, never 0 (a valid replica id that fits a signed column).
std::uint64_t new_incarnation();

/// When compacting a record pays: its log holds at least compact_after changes, and either
/// compact_always_after of them or at least 1/compact_log_share of the snapshot's bytes. A compaction
/// rewrites the whole snapshot, so a large record edited in small steps waits until its log is worth
/// that much (the bytes compactions write stay within compact_log_share times the log's, whatever
/// the record's size); the log a rebuild folds in stays at most compact_always_after changes, or a
/// quarter of the snapshot's bytes past the last change (docs/SERVICE.md gives examples).
inline constexpr std::int64_t compact_after = 64;
inline constexpr std::int64_t compact_always_after = 1024;
inline constexpr std::int64_t compact_log_share = 4;
bool wants_compaction(std::int64_t log_len, std::int64_t log_bytes, std::int64_t snapshot_bytes);

/// The record's row; without its snapshot when `with_snapshot` is false (enough when the cached
/// document is at the row's revision). Throws store_error when the snapshot is asked for and its row
/// is missing (damage: every write keeps the two together).
std::optional<record_row> load_record(database& db, const record_key& k, bool with_snapshot = true);
/// The editorIds of a document's records, in order.
std::vector<std::string> document_editors(database& db, const std::string& tenant, const std::string& org, const std::string& doc);
/// One logged change: the revision it made (or, for a change logged before the log was kept by
/// revision, its position in the log: below every later revision, so the order holds) and its batch.
struct logged_change {
  std::int64_t revision = 0;
  std::string batch;
};
/// The record's log, in commit order.
std::vector<logged_change> load_log(database& db, const record_key& k);
void insert_record(database& db, const record_key& k, const record_row& r);
/// Appends one encoded change (or none) under the new revision, bumps the revision and (with a change)
/// log_len, writes the metadata. Returns the revision.
std::int64_t append_change(database& db, const record_key& k, const record_row& before, const std::string* batch, const std::string& last_update,
                           const std::string& by, const std::optional<std::string>& session);
/// The logged changes a compaction folded: those up to revision `through`, `count` of them, of `bytes` bytes.
struct folded_log {
  std::int64_t through = 0, count = 0, bytes = 0;
};
/// What folding all of `log` folds.
folded_log folded_of(const std::vector<logged_change>& log);
/// Inside a write transaction: replaces the snapshot of the record's `incarnation` by `snapshot`, which
/// folds the logged changes `folded` into the stored one, and deletes those changes; the revision and
/// the value stay. False when the record is gone or is another incarnation (deleted, added again), or
/// its log no longer holds exactly `folded.count` changes up to `folded.through` (another compaction
/// went first): the caller must roll back, as something may have been deleted.
bool compact(database& db, const record_key& k, std::uint64_t incarnation, const std::string& snapshot, const folded_log& folded);
bool delete_record(database& db, const record_key& k);

}  // namespace folio::service
