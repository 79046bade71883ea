// service/crdt/auto_versions.hpp — the upkeep of CRDT records' history off the request path (docs/API.md,
// "Versions and history"; docs/OPERATIONS.md, "History"): automatic versions, their thinning with age,
// and the change rows' retention (crdt/history.hpp), on a thread of folio-fcgi's with a connection of
// its own.
//
// Automatic versions. A change with operations sets its record's unversioned_since (when none is set:
// the first change after the newest version); a pass takes a version of kind "auto" of every record
// whose last write is `quiet` old, or whose first unversioned change is `at_most` old (continuous
// editing). The records waiting are the rows of a partial index (crdt_records_unversioned), so a pass
// costs the records waiting, not all records. Taking one opens the record as a request does
// (record_session) and writes the version in one transaction under the record's lock that first checks
// no version of that revision was taken meanwhile: on N nodes, each pass may find a record due, and one
// version is taken.
//
// Thinning. Named and pinned versions stay until deleted. Automatic ones younger than `keep_all` all
// stay; older ones keep the newest of each hour while younger than `hourly_for`, then the newest of each
// day. A dropped version's authors go to the next newer version kept, so the authors of a list still
// say who changed the record between each version and the one before it.
//
// Retention of change rows. Rows older than `history` are deleted, and their record's history_from
// moves past them: a baseVersion older than that is refused (409), and the authors of operations made
// before it are no longer known to a diff. Versions keep their own authors and stay readable.
//
// Every function takes the time (`now_ms`) from its caller: tests run passes at any time they choose.
// Thread-safety: run() on one thread; stop() from any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "platform/config.hpp"
#include "storage/database.hpp"

namespace folio::service {

class crdt_family;


/// Takes the automatic versions due at `now_ms` (at most `limit`); returns how many it took.
std::size_t take_due_versions(crdt_family& f, database& db, const history_config& cfg, std::int64_t now_ms, std::size_t limit = 1000);
/// Thins the automatic versions of every record as of `now_ms`; returns how many it deleted.
std::size_t thin_versions(database& db, const history_config& cfg, std::int64_t now_ms);
/// Deletes the change rows older than cfg.history as of `now_ms`, moving their records' history_from;
/// returns how many it deleted.
std::size_t prune_history(database& db, const history_config& cfg, std::int64_t now_ms);

class history_keeper {
 public:
  explicit history_keeper(history_config cfg) : cfg_(cfg) {}
  const history_config& settings() const noexcept { return cfg_; }
  /// Passes on `db` until stop(): due versions every pass_every (or half of `quiet`, when shorter), thinning
  /// and retention every hour.
  /// A pass that fails is logged; the next one tries again.
  void run(crdt_family& f, database& db);
  void stop();

 private:
  history_config cfg_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace folio::service
