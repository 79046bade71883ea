// service/crdt/record_session.hpp — one request's hold on a CRDT record, and the one protocol that keeps the
// cached document (doc_cache.hpp) and the stored record (records.hpp) in step:
//
//   1. open() locks the record's cache entry (one request per record at a time in this process),
//      waiting no longer than the request's deadline, reads the record's row (one statement, no
//      snapshot) and makes the entry hold the document at that revision of that incarnation: the
//      cached one when it does, else rebuilt from the snapshot and log in one read transaction. A
//      record that does not exist gets no entry (requests for missing records never evict others).
//   2. The handler changes the document (change()) — parsing, decoding, diffing, encoding — outside
//      the process-wide writer section, so one request's CPU never holds other records' writes.
//   3. commit(write) takes the writer section — database::write under the record's key: SQLite's one
//      writer, or on PostgreSQL the record's advisory lock, so writes of one record serialise across
//      every node and writes of different records do not — checks that the stored row is still the
//      one open() read (another process or node may have written; then the change is dropped and
//      record_moved thrown, and the handler starts again), runs `write` and commits. Only then does the entry say it holds
//      the new revision. A handler commits through add() (a new record), append() (a change of an
//      existing record: the change's batch appended to the log with its metadata; a log long enough
//      that compacting pays, records.hpp wants_compaction, is then scheduled for compaction, which
//      happens off the request path, compactor.hpp, and moves neither the revision nor the cached
//      document) or erase() (a deletion).
//      Each of the three writes its change's row of the event outbox (events/outbox.hpp:
//      crdt.record.added, crdt.record.updated for a change with operations, crdt.record.deleted) in the
//      commit's own transaction, so an acknowledged change always has its webhook event and feed entry.
//   4. Each of those then emits the commit event (commit_events.hpp) to the family's subscribers —
//      the live push among them — still under the record's entry lock, so a record's events follow
//      its commit order. Handlers do not publish, or notify anything else, themselves.
//
//   A read of the value alone (crdt/get) takes open_rendered() instead of open(): it reads the row
//   (one statement) and, when the entry holds the value rendered at that row's revision and
//   incarnation, answers with it without the entry's lock and without the document — gets of a record
//   neither queue behind each other nor serialise the document again, and a get while an update of the
//   record is being prepared answers the committed revision at once, when that revision was rendered
//   already. Otherwise (the first get after each commit) it opens as above and
//   renders the value once, storing it in the entry (counted in its bytes) for the gets after it. A
//   commit drops the entry's rendered value: it is of the revision before.
//
// A handler starts again at most twice (with_retries). The first attempt is optimistic: nothing
// outside this process waits while it prepares. A record moved under it is one that writers on
// several nodes contend for, so the next attempts are exclusive: open() takes the record's write lock
// from open() to its commit (database::key_hold; after the entry's lock, the order every session takes
// the two in), so no other node can move the record before this commit — N nodes writing one record
// commit one after another instead of retrying into each other.
//
// A record too large for the cache (doc_cache.hpp, max_record_bytes) is served as any other, and its
// session empties the entry when it ends: the document and value live while a request uses them.
//
// Invariant: an entry's document is at the revision the entry names, or the entry names none (-1).
// A session that changed the document and did not commit leaves the entry empty, so the next request
// rebuilds it from storage: a cached document never holds an uncommitted change.
// Thread-safety: a session belongs to one request (one thread).
#pragma once

#include <folio/document.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/commit_events.hpp"
#include "crdt/doc_cache.hpp"
#include "crdt/records.hpp"
#include "storage/database.hpp"
#include "wire/status.hpp"

namespace folio::service {

/// The stored row changed between a session's open() and its commit (a writer in another process or node).
struct record_moved : std::runtime_error {
  record_moved() : std::runtime_error("the record changed while the request was being prepared") {}
};

class crdt_family;

class record_session {
 public:
  /// `exclusive`: open() holds the record's write lock until the session ends (above).
  record_session(crdt_family& family, database& db, record_key k, bool exclusive = false);
  ~record_session();
  record_session(const record_session&) = delete;
  record_session& operator=(const record_session&) = delete;

  const record_key& key() const noexcept { return key_; }

  /// The record's row (without its snapshot) with its document ready in doc() (unless
  /// `with_document` is false), or nullopt when there is no record. Locks the record's entry first;
  /// throws deadline_exceeded when the deadline of `db` passes while waiting for it.
  const std::optional<record_row>& open(bool with_document = true);
  /// For a read of the value alone: the record's row (without its snapshot) with `value` set to the
  /// document as `render` writes it at that row's revision, or nullopt when there is no record. Takes
  /// neither the entry's lock nor the document when the entry holds that revision's value already
  /// (above); else as open(), then renders and keeps it. Throws as open().
  using renderer = std::string (*)(const folio::document&);
  const std::optional<record_row>& open_rendered(renderer render, std::shared_ptr<const rendered_value>& value);
  /// open(), for a record that must exist: 404 NOT_FOUND when it does not.
  const record_row& open_existing(bool with_document = true);
  /// The document at the opened row's revision.
  folio::document& doc() { return *entry_->doc; }
  /// doc(), to be changed: until commit() the entry names no revision.
  folio::document& change();
  /// After change(): the document is as it was (the change was refused before anything was
  /// integrated), so the entry holds the opened revision again.
  void unchanged();

  /// Commits `row` (with `d`, its document, encoded in row.snapshot) as a new record — the opened
  /// record must be absent — then puts `d` in the record's entry at row.revision, or nothing when
  /// another request holds the entry (it never waits: the record is committed already), and emits
  /// `added`. Throws as commit().
  void add(folio::document d, const record_row& row);
  /// After change(): commits the change — `batch` appended to the record's log (null: no ops, only the
  /// metadata and the revision move) — schedules the record's compaction when its log has become long
  /// enough that compacting pays (wants_compaction), and emits `changed`. Returns the new revision;
  /// throws as commit().
  /// `beside`, when given, runs inside the commit's transaction with the new revision (a restore's
  /// version of the state it replaces), so both are committed or neither.
  std::int64_t append(const std::string* batch, const change_meta& meta, const std::function<void(std::int64_t)>& beside = nullptr);
  /// Writes beside the opened record without changing it (a version of it): `write` runs in a write
  /// transaction after the check a commit makes (the stored row is still the opened one, else
  /// record_moved). Throws as commit().
  template <class F>
  void write_beside(F&& write) {
    commit([&] {
      write();
      return row_->revision;
    });
  }
  /// Deletes the opened record, drops its entry and emits `deleted` with `meta`. Throws as commit().
  void erase(const change_meta& meta);

 private:
  /// Runs `write` (returning the record's new revision) in a write transaction after checking that
  /// the stored row is still the opened one (or still absent); then the entry holds that revision.
  /// Throws record_moved when the row changed, deadline_exceeded when the deadline passed (nothing is
  /// committed either way).
  template <class F>
  std::int64_t commit(F&& write) {
    committing();
    const std::int64_t revision = db_.write(cache_key_, [&] {
      const std::optional<record_row> now = load_record(db_, key_, false);
      if (now.has_value() != row_.has_value() || (now && (now->revision != row_->revision || now->incarnation != row_->incarnation)))
        throw record_moved();
      return write();
    });
    committed(revision);
    return revision;
  }
  /// The value a record's event carries (webhook_config::value_bytes): `d` rendered, when it fits.
  /// Rendered before the commit, outside the writer section.
  std::optional<std::string> event_value(const folio::document& d) const;
  /// Inside the commit's transaction: the change's event (events/outbox.hpp); `revision` -1 for a deletion.
  void record_commit_event(std::string_view type, const std::string& record_type, std::uint64_t incarnation, std::int64_t revision,
                           const change_meta& meta, const std::optional<std::string>& value);
  void hold(folio::document d, std::int64_t revision);  ///< add()'s: `d` in the entry, if it can be taken at once
  void forget();                                        ///< erase()'s: drops the entry
  void committing();  ///< the family's before_commit hook, if any
  void committed(std::int64_t revision);
  void account();
  void lock(std::shared_ptr<cached_doc> entry);
  void adopt(std::shared_ptr<cached_doc> entry, std::unique_lock<std::timed_mutex> l);  ///< the session's entry from now on, locked by `l`

  crdt_family& family_;
  database& db_;
  record_key key_;
  std::string cache_key_;
  std::shared_ptr<cached_doc> entry_;
  std::unique_lock<std::timed_mutex> lock_;
  std::optional<record_row> row_;
  folio::version_vector before_change_;  ///< change()'s: the document's version before the change (the change row's `before`)
  bool changing_ = false;
  bool exclusive_ = false;
  bool too_large_ = false;  ///< the entry's document and value are above what the cache keeps: dropped when the session ends
  std::optional<database::key_hold> hold_;  ///< after lock_: released before the entry's lock
};

/// A record as stored: its row with the snapshot, and its log.
struct stored_record {
  record_row row;
  std::vector<logged_change> log;
};
/// The record's row, snapshot and log at one revision (one read transaction); nullopt when there is no record.
std::optional<stored_record> read_stored(database& db, const record_key& k);
/// The stored record as a document: `row`'s snapshot (loaded with it) with `log`'s changes applied
/// in order. Throws std::runtime_error when either does not decode or apply (damage).
folio::document fold_log(const record_row& row, const std::vector<logged_change>& log);

/// Runs `attempt(exclusive)` (which opens its own record_session, exclusive as told) again when a writer
/// in another process or node moved the record under it: first optimistic, then exclusive (above). A
/// third move (possible only without the lock: SQLite, a writer in another process) is 503 UNAVAILABLE.
template <class F>
auto with_retries(F&& attempt) {
  for (int tries = 1;; ++tries) {
    try {
      return attempt(tries > 1);
    } catch (const record_moved&) {
      if (tries == 3) throw api_error(status::unavailable, "The record kept changing while the request was prepared; retry it.");
    }
  }
}

}  // namespace folio::service
