#include "storage/group_commit.hpp"

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "storage/database.hpp"

namespace folio::service {

std::shared_ptr<group_commit> group_commit::of(const std::string& path) {
  static std::mutex all_mu;
  static std::unordered_map<std::string, std::weak_ptr<group_commit>> all;
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  std::lock_guard<std::mutex> g(all_mu);
  std::weak_ptr<group_commit>& known = all[ec ? path : canonical.string()];
  std::shared_ptr<group_commit> group = known.lock();
  if (!group) known = group = std::make_shared<group_commit>();
  return group;
}

void group_commit::durable(sqlite3* db, std::unique_lock<std::timed_mutex>& writer) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t mine = ++committed_;
  writer.unlock();  // the next writer commits while this one waits for the disk
  if (before_sync) cv_.notify_all();  // a test's await_pending()
  while (synced_ < mine) {
    if (!failed_.empty()) throw store_error(failure::not_durable, failed_);
    if (syncing_) {
      cv_.wait(lock);
      continue;
    }
    // This writer syncs for the group: every COMMIT numbered up to `target` has returned, so its
    // frames are in the WAL file, which one fsync makes durable.
    syncing_ = true;
    const std::uint64_t target = committed_;
    lock.unlock();
    if (before_sync) before_sync(*this);
    sqlite3_file* wal = nullptr;
    int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
    if (rc == SQLITE_OK) rc = wal && wal->pMethods ? wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL) : SQLITE_IOERR_FSYNC;
    lock.lock();
    syncing_ = false;
    if (rc == SQLITE_OK) synced_ = std::max(synced_, target), ++syncs_;
    else
      failed_ = "an fsync of the write-ahead log failed (" + std::string(sqlite3_errstr(rc)) +
                "): changes committed since may not be on disk; restart folio-fcgi (SQLite recovers the database from the disk)";
    cv_.notify_all();
  }
}

std::string group_commit::failed() {
  std::lock_guard<std::mutex> g(mu_);
  return failed_;
}

group_commit::counts group_commit::totals() {
  std::lock_guard<std::mutex> g(mu_);
  return {committed_, syncs_};
}

bool group_commit::await_pending(std::uint64_t n, std::chrono::milliseconds most) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, most, [&] { return committed_ - synced_ >= n; });
}

}  // namespace folio::service
