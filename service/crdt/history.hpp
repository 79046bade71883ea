// service/crdt/history.hpp — a CRDT record's history (docs/API.md, "Versions and history"): the version
// string crdt/get answers, the change rows every commit that integrates operations writes (crdt_changes,
// crdt/schema.cpp, schema 12), and the record's version vector at an earlier revision, which makes an
// update's `baseVersion` and a version's value.
//
// Model: a record's revision counts its commits. A committed change that integrated operations is
// stored as one row: its revision, who made it and when, and for each replica whose operations it
// added, the replica's count before and after (so the row's operations are the seqs [before, after) of
// each). The server integrates every change whole and never holds pending operations, so the record's
// version vector after revision r is its version now with every row after r undone (each replica set
// back to its `before` in the earliest such row): O(rows after r + replicas). Rows are kept from the
// record's history_from on; an earlier revision's version is not known.
//
// A version string is "<revision>-<tag>": the tag, 12 hex digits of a SHA-256 of the record's key and
// incarnation, tells a version of this record from one of another record or of an incarnation deleted
// since. It does not grow with the replicas that wrote the record. It is not a secret: a caller who can
// name the record can read its versions anyway.
// Thread-safety: functions over a caller's `database`.
#pragma once

#include <folio/version.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "crdt/commit_events.hpp"
#include "crdt/records.hpp"
#include "storage/database.hpp"

namespace folio::service {

/// The tag of a record's versions and versionIds: 12 hex digits of SHA-256(key, incarnation).
std::string history_tag(const record_key& k, std::uint64_t incarnation);
/// The version string crdt/get answers for the record at `revision`.
std::string record_version(const record_key& k, std::uint64_t incarnation, std::int64_t revision);
/// The revision a version string names, checked against the record (its key, incarnation and current
/// revision `now`): 400 INVALID_ARGUMENT naming `field` for a string that is not a version, one of another
/// record or incarnation, or one past `now`. O(1).
std::int64_t revision_of_version(std::string_view text, const record_key& k, std::uint64_t incarnation, std::int64_t now, const char* field);

/// Inside the commit's write transaction: the row of the change that took the record's version from
/// `before` to `after` at `revision`, by `meta.by` at `meta.when`. Nothing when the versions are equal.
void record_change(database& db, const record_key& k, std::int64_t revision, const folio::version_vector& before,
                   const folio::version_vector& after, const change_meta& meta);
/// The record's version vector after `revision` (history_from <= revision <= the revision `now` is of):
/// `now` with the rows after `revision` undone. Reads inside the caller's transaction, or its own.
folio::version_vector version_at(database& db, const record_key& k, const folio::version_vector& now, std::int64_t revision);

/// Who made each operation of a record: the change rows kept (from history_from on), each a range of
/// seqs per replica. An operation (replica, seq) is the change's whose range of that replica holds seq;
/// the ranges of one replica are disjoint (each change starts where the one before it ended).
/// Memory O(rows × replicas each advanced); lookups O(log rows of the replica), O(1) when an operation
/// falls in the same range as the previous lookup (consecutive items of one change).
class change_authors {
 public:
  struct change {
    std::string by, when;  ///< changed_by (a userId), changed_at
  };
  change_authors() = default;
  change_authors(change_authors&&) = default;  // last_ points into a list, which a move keeps
  change_authors(const change_authors&) = delete;
  /// The record's rows, read inside the caller's transaction. O(rows).
  static change_authors load(database& db, const record_key& k);
  /// The change that made `id`, or nullptr when its row is not kept (the history was pruned).
  const change* of(folio::op_id id) const;

 private:
  struct range {
    std::uint32_t before, after;
    std::size_t change;
  };
  std::vector<change> changes_;
  std::unordered_map<folio::replica_id, std::vector<range>> ranges_;  ///< per replica, sorted by `before`
  mutable const range* last_ = nullptr;
  mutable folio::replica_id last_replica_ = 0;
};

}  // namespace folio::service
