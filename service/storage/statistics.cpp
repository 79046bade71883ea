// SQLite's planner statistics (database::tend_statistics, database.hpp).
#include <chrono>
#include <mutex>

#include "storage/database.hpp"

namespace folio::service {

void database::tend_statistics() {
  if (pg_ || !statistics_due(++statistics_calls_)) return;
  struct deadline_scope {
    database& db;
    deadline_clock::time_point before = db.deadline_;
    ~deadline_scope() { db.deadline_ = before; }
  } scope{*this};
  deadline_ = deadline_clock::now() + std::chrono::seconds(5);
  // In its own transaction, which writes (and takes SQLite's write lock) only if it analyses
  // something: this process's writers are kept out by the mutex, another process's by the busy
  // handler. No fsync is waited for: statistics lost in a power cut are made again.
  std::unique_lock<std::timed_mutex> one_writer(writer_mutex(), std::defer_lock);
  if (!one_writer.try_lock_until(deadline_)) throw store_error(failure::busy, "another write held the lock for 5 s");
  exec("PRAGMA optimize");
}

}  // namespace folio::service
