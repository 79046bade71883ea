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

}  // namespace folio::service
