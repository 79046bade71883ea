// The SQLite backend of database and query (database.hpp): a file, one connection per worker thread,
// WAL, BEGIN IMMEDIATE writes behind the process's writer mutex, group commit (group_commit.hpp).
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <chrono>
#include <thread>

#include "storage/database.hpp"
#include "storage/group_commit.hpp"

namespace folio::service {

namespace {

[[noreturn]] void raise(sqlite3* db, int rc, const std::string& where) {
  throw store_error(rc, where + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

}  // namespace

store_error::store_error(int c, const std::string& what) : std::runtime_error(what), code(c), kind(failure::other) {
  switch (c & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: kind = failure::busy; break;
    case SQLITE_FULL: kind = failure::full; break;
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN: kind = failure::unwritable; break;
    default: break;
  }
}

// ---- query ------------------------------------------------------------------------------------------

void query::sqlite_release() noexcept {
  if (owned_) {
    sqlite3_finalize(st_);
    return;
  }
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

void query::sqlite_bind_text(int i, std::string_view s, bool copy) {
  if (int rc = sqlite3_bind_text64(st_, i, s.data(), s.size(), copy ? SQLITE_TRANSIENT : SQLITE_STATIC, SQLITE_UTF8); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
}
void query::sqlite_bind_blob(int i, std::string_view s) {
  if (int rc = sqlite3_bind_blob64(st_, i, s.data(), s.size(), SQLITE_TRANSIENT); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
}
void query::sqlite_bind_integer(int i, std::int64_t v) {
  if (int rc = sqlite3_bind_int64(st_, i, v); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
}
void query::sqlite_bind_null(int i) {
  if (int rc = sqlite3_bind_null(st_, i); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
}

bool query::sqlite_step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  raise(db_->db_, rc, "step");
}

std::string_view query::sqlite_text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string_view();
}

std::string query::sqlite_blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}

// ---- database ---------------------------------------------------------------------------------------

void database::sqlite_open(const std::string& target, std::int64_t max_pages) {
  // SQLite's memory statistics take one process-wide mutex around every allocation, which the worker
  // threads' reads then contend for; nothing here reads them. Set before SQLite initialises (a no-op
  // once it has).
  static const bool configured = (sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0), true);
  (void)configured;
  if (int rc = sqlite3_open_v2(target.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr); rc != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw store_error(rc, "open " + target + ": " + why);
  }
  sqlite3_busy_handler(db_, busy_wait, this);
  // Group commit syncs the write-ahead log (durable()): the database must be in WAL mode.
  {
    query mode = sql("PRAGMA journal_mode=WAL");
    if (!mode.step() || mode.text(0) != "wal") throw store_error(failure::other, "open " + target + ": the database cannot use a write-ahead log (journal_mode)");
  }
  // COMMIT writes the WAL without an fsync; write() then waits for its group's fsync (durable()).
  exec("PRAGMA synchronous=NORMAL");
  group_ = group_commit::of(target);
  // Reads of the database file map it instead of copying each page into the cache (writes still go
  // through the WAL with write(2)); 256 MiB of address space per connection.
  exec("PRAGMA mmap_size=268435456");
  exec("PRAGMA foreign_keys=ON");
  if (max_pages > 0) exec(("PRAGMA max_page_count=" + std::to_string(max_pages)).c_str());
  exec("PRAGMA analysis_limit=1000");  // tend_statistics(): an approximate ANALYZE, bounded per index
}

void database::durable(std::unique_lock<std::timed_mutex>& writer) { group_->durable(db_, writer); }

int database::busy_wait(void* self, int attempt) {
  using namespace std::chrono;
  // SQLite's own back-off steps (sqliteDefaultBusyCallback), then the last of them repeated; gives up
  // when the waits would pass the busy limit below, or the request's deadline.
  static constexpr int steps_ms[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
  constexpr int steps = sizeof steps_ms / sizeof steps_ms[0];
  int waited = 0;
  for (int i = 0; i < attempt; ++i) waited += i < steps ? steps_ms[i] : 100;
  const milliseconds next(attempt < steps ? steps_ms[attempt] : 100);
  database& db = *static_cast<database*>(self);
  if (waited + next.count() > 10000) return 0;
  if (deadline_clock::now() + next > db.deadline_) return db.busy_past_deadline_ = true, 0;
  std::this_thread::sleep_for(next);
  return 1;
}

database::space database::sqlite_usage() {
  space s;
  s.pages = static_cast<std::uint64_t>(pragma("PRAGMA page_count"));
  s.free_pages = static_cast<std::uint64_t>(pragma("PRAGMA freelist_count"));
  s.max_pages = static_cast<std::uint64_t>(pragma("PRAGMA max_page_count"));
  s.page_size = static_cast<std::uint64_t>(pragma("PRAGMA page_size"));
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) s.file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (::stat((path_ + "-wal").c_str(), &st) == 0) s.wal_bytes = static_cast<std::uint64_t>(st.st_size);
  const group_commit::counts c = group_->totals();
  s.commits = c.commits, s.wal_syncs = c.syncs;
  return s;
}

std::string database::sqlite_space_problem() {
  if (std::string failed = group_->failed(); !failed.empty()) return failed;
  const space s = usage();
  // A write of a record or a comment needs a few new pages; with none left it would fail.
  if (s.max_pages && s.pages + 16 > s.max_pages && s.free_pages < 16) return "the database is full (its page cap is reached)";
  const std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0 && static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize < (std::uint64_t(1) << 20) && s.free_pages < 16)
    return "the disk holding the database is full";
  return "";
}

void database::sqlite_release() noexcept {
  for (auto& [k, st] : cache_) sqlite3_finalize(st);
  for (auto& [k, st] : built_) sqlite3_finalize(st);
  cache_.clear();
  built_.clear();
  sqlite3_close(db_);
  db_ = nullptr;
}

void database::sqlite_exec(const char* text) {
  char* err = nullptr;
  if (int rc = sqlite3_exec(db_, text, nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw store_error(rc, why);
  }
}

query database::sqlite_sql(const char* text) {
  auto it = cache_.find(text);
  if (it == cache_.end()) {
    sqlite3_stmt* st = nullptr;
    if (int rc = sqlite3_prepare_v3(db_, text, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr); rc != SQLITE_OK) raise(db_, rc, "prepare");
    it = cache_.emplace(text, st).first;
  }
  return query(*this, it->second);
}

query database::sqlite_prepare(const std::string& text) {
  if (auto it = built_.find(text); it != built_.end()) return query(*this, it->second);
  const bool keep = built_.size() < 256;
  sqlite3_stmt* st = nullptr;
  if (int rc = sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()), keep ? SQLITE_PREPARE_PERSISTENT : 0, &st, nullptr); rc != SQLITE_OK)
    raise(db_, rc, "prepare");
  if (!keep) return query(*this, st, true);
  built_.emplace(text, st);
  return query(*this, st);
}

}  // namespace folio::service
