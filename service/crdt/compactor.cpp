#include "crdt/compactor.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "crdt/record_session.hpp"
#include "platform/log.hpp"

namespace folio::service {

namespace {
/// Another compaction deleted some of the changes this one folded: roll back, change nothing.
struct went_first {};
}  // namespace

void compactor::schedule(const record_key& k) noexcept {
  try {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ || queue_.size() >= max_queued || !queued_.insert(k.cache_key()).second) return;
    queue_.push_back(k);
  } catch (...) {
    return;  // out of memory: the record's next write schedules it again
  }
  wake_.notify_one();
}

bool compactor::next(record_key& k, bool wait) {
  std::unique_lock<std::mutex> l(mu_);
  if (wait) wake_.wait(l, [&] { return stopping_ || !queue_.empty(); });
  if (stopping_ || queue_.empty()) return false;
  k = std::move(queue_.front());
  queue_.pop_front();
  queued_.erase(k.cache_key());  // a write from now on schedules it again
  return true;
}

void compactor::run(database& db) {
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);  // this thread only (Linux: nice is per thread)
  record_key k;
  while (next(k, true)) compact(db, k);
}

void compactor::drain(database& db) {
  record_key k;
  while (next(k, false)) compact(db, k);
}

void compactor::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    queue_.clear();
    queued_.clear();
  }
  wake_.notify_all();
}

void compactor::fill(metrics::gauges& g) const {
  std::lock_guard<std::mutex> l(mu_);
  g.compactions = done_, g.compaction_failures = failed_, g.compactions_queued = queue_.size();
}

void compactor::compact(database& db, const record_key& k) {
  try {
    db.set_deadline(deadline_clock::now() + timeout_);
    std::optional<record_row> row;
    std::vector<logged_change> log;
    db.read([&] {
      row = load_record(db, k, true);
      if (row && wants_compaction(row->log_len, row->log_bytes, row->snapshot_bytes)) log = load_log(db, k);
    });
    if (log.empty()) return;  // deleted, or compacted already (by another node)
    const std::string snapshot = fold_log(*row, log).encode();
    folded_log folded{log.back().seq, static_cast<std::int64_t>(log.size()), 0};
    for (const logged_change& c : log) folded.bytes += static_cast<std::int64_t>(c.batch.size());
    const bool stored = db.write(k.cache_key(), [&] {
      const std::optional<record_row> now = load_record(db, k, false);
      if (!now || now->incarnation != row->incarnation) return false;  // deleted, or added again
      if (!service::compact(db, k, snapshot, folded)) throw went_first{};
      return true;
    });
    if (stored) {
      std::lock_guard<std::mutex> l(mu_);
      ++done_;
    }
  } catch (const went_first&) {
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++failed_;
    }
    log::write("error", "compaction_failed",  // no ids: docs/OPERATIONS.md, "Logs"
               std::string("a record's log was not compacted: ") + e.what() + "; it stays logged, and the record's next write schedules it again");
  }
}

}  // namespace folio::service
