// service/crdt/versions.hpp — a CRDT record's versions (docs/API.md, "Versions and history"): rows of
// crdt_versions (crdt/schema.cpp, schema 12), each the record's version vector at one revision plus what
// the API lists about it. A version's value is the record's document checked out at that vector
// (folio::document::checkout), so a version costs its row — the vector, O(replicas that wrote the
// record), and its names — never a copy of the value, and reading one costs the record's size whatever
// its age.
//
// A record numbers its versions (crdt_records.versions_made, raised in the same transaction as the
// insert, under the record's write lock); a versionId is "v<number>-<tag>" (tag: history.hpp), so an id of
// another record or of an incarnation deleted since names nothing here. Kinds: "named" (versions/add),
// "auto" (taken after a record changed and went quiet, or before a restore; crdt/auto_versions.hpp).
// Named and pinned versions are kept until deleted; automatic ones are thinned with age.
// Thread-safety: functions over a caller's `database`.
#pragma once

#include <folio/version.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/records.hpp"
#include "storage/database.hpp"

namespace folio::service {

struct version_row {
  std::int64_t number = 0, revision = 0;
  std::string version_vector;  ///< encoded (docs/FORMAT.md)
  std::string kind;            ///< "named" | "auto"
  std::optional<std::string> name;
  bool pinned = false;
  std::string created_at, created_by;  ///< created_by: "" for an automatic version (the API's null)
  std::vector<std::string> authors;  ///< the userIds whose changes are in it and not in the version before it
};

/// "v<number>-<tag>".
std::string version_id(const record_key& k, std::uint64_t incarnation, std::int64_t number);
/// The number a versionId names, or nullopt for a string that is no versionId of this record's incarnation.
std::optional<std::int64_t> version_number(std::string_view id, const record_key& k, std::uint64_t incarnation);

/// Most versions a record keeps (named ones among them at most max_named_versions), and most authors a
/// version lists: what a writer can make the record's history hold is bounded, whatever it sends.
inline constexpr std::int64_t max_versions = 10000, max_named_versions = 1000;
inline constexpr std::size_t max_version_authors = 100;
/// The record's versions, all and named.
struct version_count {
  std::int64_t all = 0, named = 0;
};
version_count count_versions(database& db, const record_key& k);

/// Inside a write transaction holding the record's lock: numbers `v` (the record's next number) and
/// inserts it; returns its number. Its authors: the distinct authors of the record's changes after the
/// newest version's revision up to v.revision, in the order they first changed it, the first
/// max_version_authors of them.
std::int64_t insert_version(database& db, const record_key& k, version_row v);
/// The record's versions, newest first, numbered below `before` (0: from the newest), at most `limit`.
std::vector<version_row> list_versions(database& db, const record_key& k, std::int64_t before, std::size_t limit);
std::optional<version_row> find_version(database& db, const record_key& k, std::int64_t number);
/// Inside a write transaction: renames and/or pins; false when there is no such version.
bool update_version(database& db, const record_key& k, std::int64_t number, const std::optional<std::optional<std::string>>& name,
                    std::optional<bool> pinned);
bool delete_version(database& db, const record_key& k, std::int64_t number);
/// Inside a write transaction: the version's authors (thinning merges a dropped version's into its newer neighbour's).
void set_version_authors(database& db, const record_key& k, std::int64_t number, const std::vector<std::string>& authors);

}  // namespace folio::service
