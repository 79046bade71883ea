#include "storage/database.hpp"

#include <endian.h>
#include <libpq-fe.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "platform/clock.hpp"

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
    // Schema 10: the revoked keys, which every responder re-reads each revocation tick (server.hpp,
    // read_revoked_keys), through an index of them alone: a read is linear in the revoked keys.
    {10, "CREATE INDEX api_keys_revoked ON api_keys (key_id) WHERE revoked_at IS NOT NULL;"},
};

// PostgreSQL (from schema 4, database.hpp): the same tables in its types.
const migration platform_pg_steps[] = {
    {1, R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE api_keys (
  key_id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BYTEA NOT NULL, hash BYTEA NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT);
CREATE TABLE tokens (
  token_id TEXT PRIMARY KEY, key_id TEXT NOT NULL REFERENCES api_keys(key_id), subject TEXT NOT NULL,
  read_only BIGINT NOT NULL, expires_at TEXT, salt BYTEA NOT NULL, hash BYTEA NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT);
)sql"},
    {10, "CREATE INDEX api_keys_revoked ON api_keys (key_id) WHERE revoked_at IS NOT NULL;"},
};

/// The failure a SQLSTATE names (PostgreSQL's error codes, appendix A).
failure failure_of(std::string_view state) {
  if (state == "40001" || state == "40P01" || state == "55P03") return failure::busy;  // serialization, deadlock, lock timeout
  if (state == "53100") return failure::full;                                        // disk_full
  if (state == "25006" || state.starts_with("58")) return failure::unwritable;        // read-only transaction, system errors
  if (state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03" || state == "53300") return failure::unavailable;
  return failure::other;
}

/// SQLite's `?` and `?N` placeholders as PostgreSQL's `$N` (outside quoted literals and identifiers).
std::string pg_text(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  int next = 0;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      std::size_t j = i + 1;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      out += '$';
      if (j > i + 1) out.append(text.substr(i + 1, j - i - 1)), i = j - 1;
      else out += std::to_string(++next);
    } else {
      out += c;
    }
  }
  return out;
}

/// FNV-1a: a key's 64-bit hash for pg_advisory_xact_lock (the same on every node).
std::int64_t key_hash(std::string_view key) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : key) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<std::int64_t>(h);
}

}  // namespace

// ---- schema -----------------------------------------------------------------------------------------

module_migrations platform_migrations() { return {platform_steps, platform_pg_steps}; }

schema& schema::add(module_migrations module) {
  modules_.push_back(module);
  for (const migration& m : module.sqlite) version_ = std::max(version_, m.version);
  for (const migration& m : module.postgresql) version_ = std::max(version_, m.version);
  return *this;
}

std::vector<const char*> schema::step(dialect d, int v) const {
  std::vector<const char*> out;
  for (const module_migrations& module : modules_)
    for (const migration& m : d == dialect::sqlite ? module.sqlite : module.postgresql)
      if (m.version == v) out.push_back(m.sql);
  return out;
}

bool is_postgresql(std::string_view target) {
  if (target.starts_with("postgresql://") || target.starts_with("postgres://")) return true;
  std::size_t i = 0;  // a conninfo starts with a keyword and '='
  while (i < target.size() && (std::isalpha(static_cast<unsigned char>(target[i])) || target[i] == '_')) ++i;
  while (i < target.size() && target[i] == ' ') ++i;
  return i > 0 && i < target.size() && target[i] == '=';
}

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

query::~query() {
  if (pg_) {
    PQclear(result_);
    pg_drain();  // left before the end (single-row mode): the connection is free for its next statement
    return;
  }
  if (owned_) {
    sqlite3_finalize(st_);
    return;
  }
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

void query::pg_param(int i, std::string value, bool binary, bool null) {
  const auto at = static_cast<std::size_t>(i - 1);
  if (values_.size() <= at) values_.resize(at + 1), formats_.resize(at + 1), nulls_.resize(at + 1, 1);
  values_[at] = std::move(value), formats_[at] = binary, nulls_[at] = null;
}

// PostgreSQL: text and bytes go in binary format (their bytes as they are, with their length: a NUL
// is refused, never cut), integers as decimal text (the server knows the column's width).
query& query::bind(int i, std::string_view s) {
  if (pg_) return pg_param(i, std::string(s), true, false), *this;
  if (int rc = sqlite3_bind_text64(st_, i, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
  return *this;
}
query& query::bind_view(int i, std::string_view s) {
  if (pg_) return pg_param(i, std::string(s), true, false), *this;
  if (int rc = sqlite3_bind_text64(st_, i, s.data(), s.size(), SQLITE_STATIC, SQLITE_UTF8); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
  return *this;
}
query& query::bind_blob(int i, std::string_view s) {
  if (pg_) return pg_param(i, std::string(s), true, false), *this;
  if (int rc = sqlite3_bind_blob64(st_, i, s.data(), s.size(), SQLITE_TRANSIENT); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
  return *this;
}
query& query::bind(int i, std::int64_t v) {
  if (pg_) return pg_param(i, std::to_string(v), false, false), *this;
  if (int rc = sqlite3_bind_int64(st_, i, v); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
  return *this;
}
query& query::bind_null(int i) {
  if (pg_) return pg_param(i, std::string(), false, true), *this;
  if (int rc = sqlite3_bind_null(st_, i); rc != SQLITE_OK) raise(db_->db_, rc, "bind");
  return *this;
}
void query::pg_send() {
  const std::size_t n = values_.size();
  std::vector<const char*> values(n);
  std::vector<int> lengths(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = nulls_[i] ? nullptr : values_[i].c_str(), lengths[i] = static_cast<int>(values_[i].size());
  const int sent = pg_name_.empty() ? PQsendQueryParams(db_->pg_, pg_sql_.c_str(), static_cast<int>(n), nullptr, values.data(), lengths.data(), formats_.data(), 1)
                                    : PQsendQueryPrepared(db_->pg_, pg_name_.c_str(), static_cast<int>(n), values.data(), lengths.data(), formats_.data(), 1);
  if (!sent) db_->pg_raise(nullptr, "step");
  pending_ = true;
  if (single_row_ && !PQsetSingleRowMode(db_->pg_)) {  // the rows would come whole, read as the end: refuse instead
    pg_drain();
    throw store_error(failure::other, "step: libpq did not take single-row mode");
  }
}

void query::pg_drain() noexcept {
  while (pending_) {
    pg_result* r = PQgetResult(db_->pg_);
    if (!r) pending_ = false;
    PQclear(r);
  }
}

bool query::step() {
  if (pg_) {
    // Whole results: the first step takes the one result (all rows) and reads on to the end of the
    // results. Single-row mode: each step takes the next row's result, until the empty one that ends them.
    if (row_ < 0) pg_send();
    if (!single_row_ && row_ >= 0) return ++row_ < rows_;
    PQclear(result_);
    result_ = nullptr;
    if (!pending_) return false;
    pg_result* r = PQgetResult(db_->pg_);
    const ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (single_row_ && st == PGRES_SINGLE_TUPLE) {
      result_ = r, row_ = 0;
      return true;
    }
    pg_drain();
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) db_->pg_raise(r, "step");
    if (single_row_) {  // the end of the rows (row_ >= 0 from here: a later step sends nothing again)
      PQclear(r);
      row_ = 0;
      return false;
    }
    result_ = r;
    const char* changed = PQcmdTuples(result_);
    db_->pg_changes_ = *changed ? std::atoi(changed) : 0;
    rows_ = PQntuples(result_);
    return ++row_ < rows_;
  }
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  raise(db_->db_, rc, "step");
}
std::string_view query::text_view(int col) const {
  if (pg_) return {PQgetvalue(result_, row_, col), static_cast<std::size_t>(PQgetlength(result_, row_, col))};
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string_view();
}
std::string query::blob(int col) const {
  if (pg_) return text(col);
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
}
bool query::is_null(int col) const { return pg_ ? PQgetisnull(result_, row_, col) != 0 : sqlite3_column_type(st_, col) == SQLITE_NULL; }
std::optional<std::string> query::text_opt(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}
std::int64_t query::integer(int col) const {
  if (!pg_) return sqlite3_column_int64(st_, col);
  if (PQgetisnull(result_, row_, col)) return 0;
  const char* p = PQgetvalue(result_, row_, col);
  switch (PQgetlength(result_, row_, col)) {  // binary int8, int4, int2 (network order)
    case 8: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<std::int64_t>(be64toh(v));
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<std::int32_t>(be32toh(v));
    }
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<std::int16_t>(be16toh(v));
    }
    default: throw store_error(failure::other, "integer column " + std::to_string(col) + " has an unexpected width");
  }
}

// ---- database -----------------------------------------------------------------------------------------

/// The group commit of one database file in this process (database.hpp): COMMITs are numbered in
/// order (under the writer section); `synced` is the highest number an fsync of the WAL has covered.
struct database::wal_group {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t committed = 0, synced = 0, syncs = 0;
  bool syncing = false;
  /// Why an fsync of the WAL failed, once one has: from then on no write of this file is answered as
  /// durable in this process. After a failed fsync Linux may mark the unwritten pages clean, so a later
  /// fsync can succeed without them on disk; only a restart (SQLite recovering from what is on disk)
  /// is sure again. write_problem() reports it, so /healthz turns unready.
  std::string failed;

  /// The group of the file at `path` (one per file, shared by every connection to it in this process).
  static std::shared_ptr<wal_group> of(const std::string& path) {
    static std::mutex all_mu;
    static std::unordered_map<std::string, std::weak_ptr<wal_group>> all;
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    std::lock_guard<std::mutex> g(all_mu);
    std::weak_ptr<wal_group>& known = all[ec ? path : canonical.string()];
    std::shared_ptr<wal_group> group = known.lock();
    if (!group) known = group = std::make_shared<wal_group>();
    return group;
  }
};

database::database(const std::string& target, const schema& tables, std::int64_t max_pages) : path_(target) {
  try {
    set_up(target, tables, max_pages);
  } catch (...) {
    release();
    throw;
  }
}

void database::set_up(const std::string& target, const schema& tables, std::int64_t max_pages) {
  if (is_postgresql(target)) {
    if (max_pages > 0) throw store_error(failure::other, "--max-db-pages applies to a SQLite database only");
    pg_ = PQconnectdb(target.c_str());
    if (PQstatus(pg_) != CONNECTION_OK) {
      std::string why = PQerrorMessage(pg_);
      PQfinish(pg_);
      pg_ = nullptr;
      throw store_error(failure::unavailable, "connect to PostgreSQL: " + why);
    }
    // A success answer means a durable commit, whatever the server's default; times are UTC text.
    exec("SET synchronous_commit = on; SET client_min_messages = warning");
    migrate(tables);
    return;
  }
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
  group_ = wal_group::of(target);
  // Reads of the database file map it instead of copying each page into the cache (writes still go
  // through the WAL with write(2)); 256 MiB of address space per connection.
  exec("PRAGMA mmap_size=268435456");
  exec("PRAGMA foreign_keys=ON");
  if (max_pages > 0) exec(("PRAGMA max_page_count=" + std::to_string(max_pages)).c_str());
  exec("PRAGMA analysis_limit=1000");  // tend_statistics(): an approximate ANALYZE, bounded per index
  migrate(tables);
}

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

void database::durable(std::unique_lock<std::timed_mutex>& writer) {
  wal_group& g = *group_;
  std::unique_lock<std::mutex> lock(g.mu);
  const std::uint64_t mine = ++g.committed;
  writer.unlock();  // the next writer commits while this one waits for the disk
  while (g.synced < mine) {
    if (!g.failed.empty()) throw store_error(failure::not_durable, g.failed);
    if (g.syncing) {
      g.cv.wait(lock);
      continue;
    }
    // This writer syncs for the group: every COMMIT numbered up to `target` has returned, so its
    // frames are in the WAL file, which one fsync makes durable.
    g.syncing = true;
    const std::uint64_t target = g.committed;
    lock.unlock();
    sqlite3_file* wal = nullptr;
    int rc = sqlite3_file_control(db_, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
    if (rc == SQLITE_OK) rc = wal && wal->pMethods ? wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL) : SQLITE_IOERR_FSYNC;
    lock.lock();
    g.syncing = false;
    if (rc == SQLITE_OK) g.synced = std::max(g.synced, target), ++g.syncs;
    else
      g.failed = "an fsync of the write-ahead log failed (" + std::string(sqlite3_errstr(rc)) +
                 "): changes committed since may not be on disk; restart folio-fcgi (SQLite recovers the database from the disk)";
    g.cv.notify_all();
  }
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
  if (pg_) {
    s.file_bytes = static_cast<std::uint64_t>(pragma("SELECT pg_database_size(current_database())"));
    return s;
  }
  s.pages = static_cast<std::uint64_t>(pragma("PRAGMA page_count"));
  s.free_pages = static_cast<std::uint64_t>(pragma("PRAGMA freelist_count"));
  s.max_pages = static_cast<std::uint64_t>(pragma("PRAGMA max_page_count"));
  s.page_size = static_cast<std::uint64_t>(pragma("PRAGMA page_size"));
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) s.file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (::stat((path_ + "-wal").c_str(), &st) == 0) s.wal_bytes = static_cast<std::uint64_t>(st.st_size);
  std::lock_guard<std::mutex> g(group_->mu);
  s.commits = group_->committed, s.wal_syncs = group_->syncs;
  return s;
}

std::string database::write_problem() {
  try {
    if (!pg_) {
      {
        std::lock_guard<std::mutex> g(group_->mu);
        if (!group_->failed.empty()) return group_->failed;
      }
      const space s = usage();
      // A write of a record or a comment needs a few new pages; with none left it would fail.
      if (s.max_pages && s.pages + 16 > s.max_pages && s.free_pages < 16) return "the database is full (its page cap is reached)";
      const std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
      struct statvfs fs {};
      if (::statvfs(dir.c_str(), &fs) == 0 && static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize < (std::uint64_t(1) << 20) && s.free_pages < 16)
        return "the disk holding the database is full";
    }
    write([&] {
      sql("INSERT INTO meta (key, value) VALUES ('health_probe', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").bind(1, now_iso()).step();
    });
  } catch (const store_error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> database::integrity_problems() {
  std::vector<std::string> out;
  if (pg_) return out;
  query q = sql("PRAGMA integrity_check");
  while (q.step())
    if (q.text(0) != "ok") out.push_back(q.text(0));
  return out;
}

database::~database() { release(); }

void database::release() noexcept {
  for (auto& [k, st] : cache_) sqlite3_finalize(st);
  for (auto& [k, st] : built_) sqlite3_finalize(st);
  cache_.clear();
  built_.clear();
  sqlite3_close(db_);
  db_ = nullptr;
  if (pg_) PQfinish(pg_);
  pg_ = nullptr;
}

void database::connected() {
  // An idle connection that the server has ended (a restart, a failover, pg_terminate_backend) has the
  // server's last message and the end of the stream waiting on its socket: a poll that costs no round
  // trip notices it, so the request reconnects rather than failing on a connection known to be gone.
  if (PQstatus(pg_) == CONNECTION_OK && PQtransactionStatus(pg_) == PQTRANS_IDLE)
    for (int i = 0; i < 2 && PQstatus(pg_) == CONNECTION_OK; ++i) {  // the message, then the end
      pollfd p{PQsocket(pg_), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) break;
      PQconsumeInput(pg_);
    }
  if (PQstatus(pg_) == CONNECTION_OK) return;
  pg_cache_.clear();  // the server forgot the connection's statements
  pg_built_.clear();
  PQreset(pg_);
  if (PQstatus(pg_) != CONNECTION_OK) throw store_error(failure::unavailable, std::string("reconnect to PostgreSQL: ") + PQerrorMessage(pg_));
  exec("SET synchronous_commit = on; SET client_min_messages = warning");
}

void database::pg_raise(pg_result* res, const char* where) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string why = res ? PQresultErrorMessage(res) : "";
  if (why.empty()) why = PQerrorMessage(pg_);
  while (!why.empty() && why.back() == '\n') why.pop_back();
  const std::string sqlstate = state ? state : "";
  PQclear(res);
  if (sqlstate == "55P03" || sqlstate == "57014") throw deadline_exceeded();  // lock_timeout, statement_timeout: set at the deadline
  const failure kind = PQstatus(pg_) != CONNECTION_OK ? failure::unavailable : failure_of(sqlstate);
  throw store_error(kind, std::string(where) + ": " + (sqlstate.empty() ? "" : sqlstate + " ") + why);
}

void database::exec(const char* text) {
  if (pg_) {
    connected();
    PGresult* res = PQexec(pg_, text);
    const ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) pg_raise(res, "exec");
    PQclear(res);
    return;
  }
  char* err = nullptr;
  if (int rc = sqlite3_exec(db_, text, nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw store_error(rc, why);
  }
}

void database::rollback() noexcept {
  if (!pg_) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return;
  }
  if (PQstatus(pg_) == CONNECTION_OK) PQclear(PQexec(pg_, "ROLLBACK"));
}

long long database::ms_left() const {
  using namespace std::chrono;
  return std::max<long long>(1, duration_cast<milliseconds>(deadline_ - deadline_clock::now()).count());
}

std::string database::begin_write(std::string_view key) const {
  std::string begin = "BEGIN";
  if (deadline_ != deadline_clock::time_point::max()) {
    const std::string left = std::to_string(ms_left());
    begin += "; SET LOCAL lock_timeout = " + left + "; SET LOCAL statement_timeout = " + left;
  }
  if (!key.empty()) begin += "; SELECT pg_advisory_xact_lock(" + std::to_string(key_hash(key)) + ")";
  return begin;
}

database::key_hold::key_hold(database& db, std::string_view key) : db_(db) {
  if (!db.pg_) return;
  hash_ = key_hash(key);
  std::string lock = "SELECT pg_advisory_lock(" + std::to_string(hash_) + ")";
  // Waited for no longer than the deadline; one implicit transaction, so a timeout undoes the SET too.
  if (db.deadline_ != deadline_clock::time_point::max())
    lock = "SET lock_timeout = " + std::to_string(db.ms_left()) + "; " + lock + "; RESET lock_timeout";
  db.exec(lock.c_str());
  held_ = true;
}

database::key_hold::~key_hold() {
  if (!held_ || PQstatus(db_.pg_) != CONNECTION_OK) return;  // a lost connection released it
  PQclear(PQexec(db_.pg_, ("SELECT pg_advisory_unlock(" + std::to_string(hash_) + ")").c_str()));
}

std::string database::pg_statement(std::string_view text) {
  std::string name = "f";  // appended, not "f" + to_string(): GCC 12 at -O3 warns (-Wrestrict) falsely on that
  name += std::to_string(++pg_statements_);
  PGresult* res = PQprepare(pg_, name.c_str(), pg_text(text).c_str(), 0, nullptr);
  if (PQresultStatus(res) != PGRES_COMMAND_OK) pg_raise(res, "prepare");
  PQclear(res);
  return name;
}

query database::sql(const char* text) {
  if (pg_) {
    connected();
    auto it = pg_cache_.find(text);
    if (it == pg_cache_.end()) it = pg_cache_.emplace(text, pg_statement(text)).first;
    return query(*this, it->second);
  }
  auto it = cache_.find(text);
  if (it == cache_.end()) {
    sqlite3_stmt* st = nullptr;
    if (int rc = sqlite3_prepare_v3(db_, text, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr); rc != SQLITE_OK) raise(db_, rc, "prepare");
    it = cache_.emplace(text, st).first;
  }
  return query(*this, it->second);
}

std::string database::placeholders(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s;
}

query database::prepare(const std::string& text) {
  if (pg_) {
    connected();
    if (auto it = pg_built_.find(text); it != pg_built_.end()) return query(*this, it->second);
    if (pg_built_.size() >= 256) return query(*this, std::string(), pg_text(text));
    return query(*this, pg_built_.emplace(text, pg_statement(text)).first->second);
  }
  if (auto it = built_.find(text); it != built_.end()) return query(*this, it->second);
  const bool keep = built_.size() < 256;
  sqlite3_stmt* st = nullptr;
  if (int rc = sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()), keep ? SQLITE_PREPARE_PERSISTENT : 0, &st, nullptr); rc != SQLITE_OK)
    raise(db_, rc, "prepare");
  if (!keep) return query(*this, st, true);
  built_.emplace(text, st);
  return query(*this, st);
}

void database::migrate(const schema& tables) {
  const int target = tables.version();
  auto refuse_newer = [&](int have) {
    if (have > target) throw store_error(failure::other, "database schema " + std::to_string(have) + " is newer than this build's");
  };
  auto upgrade = [&](int have) {
    refuse_newer(have);
    for (int v = have + 1; v <= target; ++v)
      for (const char* sql : tables.step(kind(), v)) exec(sql);
    version_ = target;
  };
  if (pg_) {
    // One node migrates at a time (the lock), the others then find the version it wrote.
    write("folio_schema", [&] {
      exec("CREATE TABLE IF NOT EXISTS folio_schema (version INTEGER NOT NULL)");
      const int have = static_cast<int>(pragma("SELECT version FROM folio_schema"));
      upgrade(have);
      if (have != target) {
        exec("DELETE FROM folio_schema");
        exec(("INSERT INTO folio_schema (version) VALUES (" + std::to_string(target) + ")").c_str());
      }
    });
    return;
  }
  auto stored_version = [&] { return static_cast<int>(pragma("PRAGMA user_version")); };
  // A database already at this build's schema is only read: every worker's connection, and the
  // compactor's, opens after the startup probe has migrated, and a write transaction here would wait,
  // with no request's deadline to end it, for any other process holding the write lock — while the
  // socket already listens and requests queue for the workers.
  if (const int have = stored_version(); have >= target) {
    refuse_newer(have);  // without waiting for the lock either
    version_ = target;
    return;
  }
  write([&] {
    const int have = stored_version();  // again under the lock: another process may have migrated meanwhile
    upgrade(have);
    if (have != target) exec(("PRAGMA user_version=" + std::to_string(target)).c_str());
  });
}

}  // namespace folio::service
