// service/storage/group_commit.hpp — the group commit of one SQLite file in this process (docs/SERVICE.md,
// "Storage"): a write commits with synchronous=NORMAL (COMMIT writes the WAL, no fsync) and leaves the
// writer section; then it waits for an fsync of the WAL that began after its COMMIT — the first writer
// to find none running starts one (the leader), and it covers every COMMIT before it — so concurrent
// writes of different records share one fsync instead of queueing one each behind the writer mutex,
// and a write still returns only once its change is on disk (what synchronous=FULL gives).
// A reader on another connection may see a change in the moment between its COMMIT and that fsync: it
// survives a crash of the process then (it is in the OS's page cache), not yet a power loss. Its writer
// has not been answered yet; a record's own next writer waits for the record's lock until then
// (crdt/record_session.hpp). An fsync that fails fails its writers (store_error, not_durable: their
// changes are committed but may not be on disk) and every later write of the file in this process, and
// failed() reports it until a restart (after a failed fsync the kernel may drop the unwritten pages'
// error, so no later fsync proves them durable).
// COMMITs are numbered in order (under the writer section); `synced` is the highest number an fsync of
// the WAL has covered. Thread-safety: every member takes the group's mutex; shared by every connection
// to the file in this process.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace folio::service {

class group_commit {
 public:
  /// The group of the file at `path` (one per file, shared by every connection to it in this process).
  static std::shared_ptr<group_commit> of(const std::string& path);

  /// Right after a write's COMMIT on `db`, with the writer section held: notes the commit, leaves the
  /// section and returns once an fsync of the WAL that began after the COMMIT has completed. Throws
  /// store_error (not_durable) when that fsync fails, or one failed before.
  void durable(sqlite3* db, std::unique_lock<std::timed_mutex>& writer);

  /// Why an fsync of the WAL failed, once one has ("" before): from then on no write of this file is
  /// answered as durable in this process; only a restart (SQLite recovering from what is on disk) is
  /// sure again.
  std::string failed();

  struct counts {
    std::uint64_t commits = 0, syncs = 0;
  };
  /// The writes committed through this process and the fsyncs that made them durable.
  counts totals();

  /// Tests: returns true once at least `n` commits wait for an fsync (committed, not yet covered), false
  /// if they do not within `most` (a bound on a failing test's wait, not an ordering).
  bool await_pending(std::uint64_t n, std::chrono::milliseconds most);
  /// Tests: called by each leader before it syncs the WAL, without the group's mutex held (empty: none).
  /// Set it before the writers start and clear it after they end.
  static inline std::function<void(group_commit&)> before_sync;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t committed_ = 0, synced_ = 0, syncs_ = 0;
  bool syncing_ = false;
  std::string failed_;
};

}  // namespace folio::service
