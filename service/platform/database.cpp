#include "platform/database.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <string>
#include <thread>

namespace folio::service {

namespace {

[[noreturn]] void raise(sqlite3* db, int rc, const std::string& where) {
  throw store_error(rc, where + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}


const migration platform_steps[] = {
    {1, R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE api_keys (
  key_id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT) WITHOUT ROWID;
CREATE TABLE tokens (
  token_id TEXT PRIMARY KEY, key_id TEXT NOT NULL REFERENCES api_keys(key_id), subject TEXT NOT NULL,
  read_only INTEGER NOT NULL, expires_at TEXT, salt BLOB NOT NULL, hash BLOB NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT) WITHOUT ROWID;
)sql"},
};

}  // namespace

// ---- schema -----------------------------------------------------------------------------------------

std::span<const migration> platform_migrations() { return platform_steps; }

schema& schema::add(std::span<const migration> module) {
  modules_.push_back(module);
  for (const migration& m : module) version_ = std::max(version_, m.version);
  return *this;
}

std::vector<const char*> schema::step(int v) const {
  std::vector<const char*> out;
  for (const std::span<const migration>& module : modules_)
    for (const migration& m : module)
      if (m.version == v) out.push_back(m.sql);
  return out;
}

// ---- query ------------------------------------------------------------------------------------------

query& query::bind(int i, std::string_view s) {
  if (int rc = sqlite3_bind_text64(st_, i, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8); rc != SQLITE_OK) raise(db_, rc, "bind");
  return *this;
}
query& query::bind_blob(int i, std::string_view s) {
  if (int rc = sqlite3_bind_blob64(st_, i, s.data(), s.size(), SQLITE_TRANSIENT); rc != SQLITE_OK) raise(db_, rc, "bind");
  return *this;
}
query& query::bind(int i, std::int64_t v) {
  if (int rc = sqlite3_bind_int64(st_, i, v); rc != SQLITE_OK) raise(db_, rc, "bind");
  return *this;
}
query& query::bind_null(int i) {
  if (int rc = sqlite3_bind_null(st_, i); rc != SQLITE_OK) raise(db_, rc, "bind");
  return *this;
}
bool query::step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  raise(db_, rc, "step");
}
std::string query::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}
std::string_view query::text_view(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string_view();
}
std::optional<std::string> query::text_opt(int col) const {
  if (sqlite3_column_type(st_, col) == SQLITE_NULL) return std::nullopt;
  return text(col);
}
std::string query::blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}

// ---- database -----------------------------------------------------------------------------------------

database::database(const std::string& path, const schema& tables, std::int64_t max_pages) : path_(path) {
  if (int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr); rc != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw store_error(rc, "open " + path + ": " + why);
  }
  sqlite3_busy_handler(db_, busy_wait, this);
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  // Reads of the database file map it instead of copying each page into the cache (writes still go
  // through the WAL with write(2)); 256 MiB of address space per connection.
  exec("PRAGMA mmap_size=268435456");
  exec("PRAGMA foreign_keys=ON");
  if (max_pages > 0) exec(("PRAGMA max_page_count=" + std::to_string(max_pages)).c_str());
  migrate(tables);
}

int database::busy_wait(void* self, int attempt) {
  using namespace std::chrono;
  // SQLite's own steps (sqliteDefaultBusyCallback), then 100 ms a turn.
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

std::int64_t database::pragma(const char* text) {
  query q = sql(text);
  return q.step() ? q.integer(0) : 0;
}

database::space database::usage() {
  space s;
  s.pages = static_cast<std::uint64_t>(pragma("PRAGMA page_count"));
  s.free_pages = static_cast<std::uint64_t>(pragma("PRAGMA freelist_count"));
  s.max_pages = static_cast<std::uint64_t>(pragma("PRAGMA max_page_count"));
  s.page_size = static_cast<std::uint64_t>(pragma("PRAGMA page_size"));
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) s.file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (::stat((path_ + "-wal").c_str(), &st) == 0) s.wal_bytes = static_cast<std::uint64_t>(st.st_size);
  return s;
}

std::string database::write_problem() {
  try {
    const space s = usage();
    // A write of a record or a comment needs a few new pages; with none left it would fail.
    if (s.max_pages && s.pages + 16 > s.max_pages && s.free_pages < 16) return "the database is full (its page cap is reached)";
    const std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) == 0 && static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize < (std::uint64_t(1) << 20) && s.free_pages < 16)
      return "the disk holding the database is full";
    write([&] {
      sql("INSERT INTO meta (key, value) VALUES ('health_probe', strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
          .step();
    });
  } catch (const store_error& e) {
    return e.what();
  }
  return "";
}

database::~database() {
  for (auto& [k, st] : cache_) sqlite3_finalize(st);
  for (auto& [k, st] : built_) sqlite3_finalize(st);
  sqlite3_close(db_);
}

void database::exec(const char* text) {
  char* err = nullptr;
  if (int rc = sqlite3_exec(db_, text, nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw store_error(rc, why);
  }
}

query database::sql(const char* text) {
  auto it = cache_.find(text);
  if (it == cache_.end()) {
    sqlite3_stmt* st = nullptr;
    if (int rc = sqlite3_prepare_v3(db_, text, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr); rc != SQLITE_OK) raise(db_, rc, "prepare");
    it = cache_.emplace(text, st).first;
  }
  return query(db_, it->second);
}

std::string database::placeholders(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s;
}

query database::prepare(const std::string& text) {
  if (auto it = built_.find(text); it != built_.end()) return query(db_, it->second);
  const bool keep = built_.size() < 256;
  sqlite3_stmt* st = nullptr;
  if (int rc = sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()), keep ? SQLITE_PREPARE_PERSISTENT : 0, &st, nullptr); rc != SQLITE_OK)
    raise(db_, rc, "prepare");
  if (!keep) return query(db_, st, true);
  built_.emplace(text, st);
  return query(db_, st);
}

void database::migrate(const schema& tables) {
  const int target = tables.version();
  write([&] {
    int have = 0;
    {
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &st, nullptr);
      if (sqlite3_step(st) == SQLITE_ROW) have = sqlite3_column_int(st, 0);
      sqlite3_finalize(st);
    }
    if (have > target) throw store_error(SQLITE_ERROR, "database schema " + std::to_string(have) + " is newer than this build's");
    for (int v = have + 1; v <= target; ++v)
      for (const char* sql : tables.step(v)) exec(sql);
    if (have != target) exec(("PRAGMA user_version=" + std::to_string(target)).c_str());
    version_ = target;
  });
}


}  // namespace folio::service
