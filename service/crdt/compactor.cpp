#include "crdt/compactor.hpp"

#include <optional>

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
    if (stopping_ || queue_.size() >= max_queued) return;
    std::string key = k.cache_key();
    if (const auto r = resting_.find(key); r != resting_.end()) {
      if (std::chrono::steady_clock::now() < r->second) return;  // failed a moment ago
      resting_.erase(r);
    }
    if (!queued_.insert(std::move(key)).second) return;
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
  // The connection's deadline is this compaction's while it runs, and the caller's again after.
  struct deadline_scope {
    database& db;
    deadline_clock::time_point before = db.deadline();
    ~deadline_scope() { db.set_deadline(before); }
  } scope{db};
  try {
    const std::optional<stored_record> stored = read_stored(db, k);
    if (!stored || !wants_compaction(stored->row.log_len, stored->row.log_bytes, stored->row.snapshot_bytes))
      return;  // deleted, or compacted already (by another node)
    const std::string snapshot = fold_log(stored->row, stored->log).encode(folio::kept_values::all);
    // What replaces the stored snapshot must read back: decoded before it is written (a document
    // past its type's limit, or an encoder's fault, leaves the record as it is, logged and counted).
    std::optional<folio::document> back;
    if (const folio::decode_result r = folio::document::decode(snapshot, stored->row.incarnation, back); !r)
      throw std::runtime_error("the new snapshot does not decode: " + r.description());
    back.reset();
    const folded_log folded = folded_of(stored->log);
    db.set_deadline(deadline_clock::now() + timeout_);  // for the write only: the fold above took what it took
    db.write(k.cache_key(), [&] {
      if (!service::compact(db, k, stored->row.incarnation, snapshot, folded)) throw went_first{};
    });
    std::lock_guard<std::mutex> l(mu_);
    ++done_;
  } catch (const went_first&) {
  } catch (const std::exception& e) {
    try {
      {
        std::lock_guard<std::mutex> l(mu_);
        ++failed_;
        if (resting_.size() >= max_queued) resting_.clear();
        resting_[k.cache_key()] = std::chrono::steady_clock::now() + rest_after_failure;
      }
      log::write("error", "compaction_failed",  // no ids: docs/OPERATIONS.md, "Logs"
                 std::string("a record's log was not compacted: ") + e.what() +
                     "; it stays logged, and the record's writes schedule it again after a minute");
    } catch (...) {  // out of memory: the count above is what is left
    }
  }
}

}  // namespace folio::service
