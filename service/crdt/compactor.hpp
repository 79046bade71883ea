// service/crdt/compactor.hpp — compaction of CRDT records' logs off the request path (docs/SERVICE.md,
// "Compaction"): a write after which compacting its record pays (records.hpp, wants_compaction)
// schedules the record and answers; a background thread (folio-fcgi's, with a database connection of its own) folds the log
// into a new snapshot.
//
// A compaction never touches the cached document nor waits for a request: it reads the record's
// snapshot and log in one read transaction (read_stored; it stops if compacting no longer pays:
// another node compacted it), rebuilds the document from them (fold_log), encodes it,
// and in one write transaction under the record's key (the writer section every write of the record
// takes) stores the snapshot and deletes the changes it folded — those up to the last seq it read;
// changes committed meanwhile stay logged after it. The revision does not move (the value is the
// same), so no request that opened the record before is disturbed. It gives up, changing nothing,
// when the record was deleted or added again (another incarnation) or another compaction (another
// node's) went first; the record is then scheduled again by its next write if it still needs it.
//
// Bounded: at most max_queued records wait (one entry each, deduplicated by record); past that a
// schedule is dropped, and the record's next write, or its next rebuild from storage, schedules it
// again. A compaction that fails (storage, a record that does not decode) is logged and counted, and
// its record is scheduled again by a write only after rest_after_failure (a damaged record does not
// cost a fold per write). The thread runs at the workers' priority: a lower one would hold the
// writer section (SQLite's one writer, a record's lock) at a share of the CPU while writers wait.
// The deadline of its write is the request timeout from the moment it starts to write.
// A new snapshot is decoded back before it is written: one that would not read back (past its type's
// limit, document::max_units) is a failed compaction, and the stored snapshot and log stay.
// Cost: per record compacted, a decode of the stored snapshot, the log applied, an encode, a decode of the new one, and one
// write transaction; for the writers, one lookup under a mutex per write past the threshold.
// Thread-safety: schedule() from any thread; run() on one thread; stop() from any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "crdt/records.hpp"
#include "storage/database.hpp"
#include "platform/metrics.hpp"

namespace folio::service {

class compactor {
 public:
  static constexpr std::size_t max_queued = 10000;
  /// A record whose compaction failed is not scheduled again for this long.
  static constexpr std::chrono::seconds rest_after_failure{60};

  /// `request_timeout`: how long one compaction may wait for the record's writer section and take.
  explicit compactor(std::chrono::milliseconds request_timeout) : timeout_(request_timeout) {}
  compactor(const compactor&) = delete;
  compactor& operator=(const compactor&) = delete;

  /// Schedules `k` (nothing when it is already waiting, or max_queued records are). Never throws.
  void schedule(const record_key& k) noexcept;
  /// Compacts scheduled records on `db` until stop(), waiting for them meanwhile.
  void run(database& db);
  /// Compacts the records scheduled now, on `db`, and returns (tests and tools).
  void drain(database& db);
  /// Ends run() after the compaction in progress (its wait for a lock is bounded by the request
  /// timeout); later schedules are dropped.
  void stop();

  /// Gauges for /metrics.
  void fill(metrics::gauges& g) const;

 private:
  bool next(record_key& k, bool wait);
  void compact(database& db, const record_key& k);

  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<record_key> queue_;
  std::unordered_set<std::string> queued_;  ///< the cache keys in queue_
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> resting_;  ///< failed: not before then (at most max_queued)
  bool stopping_ = false;
  std::uint64_t done_ = 0, failed_ = 0;
};

}  // namespace folio::service
