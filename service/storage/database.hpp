// service/storage/database.hpp — the storage interface (docs/SERVICE.md, "Storage"): one SQL-level
// machinery that every module's store (platform/auth.cpp, crdt/records.cpp, annotations/store.cpp)
// writes its statements against, with two backends chosen by the `--db` value, each in a file of its own:
//
//   * SQLite (a file path; the default; sqlite_connection.cpp): one connection per worker thread, WAL,
//     BEGIN IMMEDIATE for writes behind a process-wide writer mutex (SQLite admits one writer at a time
//     anyway), a busy handler for writers in other processes, schema version in PRAGMA user_version, an
//     optional page cap. A write returns once its change is on disk, sharing the WAL's fsyncs with the
//     writes that overlap it (group_commit.hpp).
//   * PostgreSQL (`postgresql://...`, `postgres://...` or a libpq conninfo `key=value ...`; libpq, its C
//     client, directly; postgresql_connection.cpp): one connection per worker thread,
//     synchronous_commit=on (a success answer means the commit is durable), READ COMMITTED writes that
//     serialise per *key* (`write(key, f)`: a transaction-scoped advisory lock on a 64-bit hash of the
//     key — a record's, an annotated document's), so writes to different records run in parallel;
//     REPEATABLE READ read transactions (one snapshot across statements); schema version in the table
//     folio_schema; a connection the server ended while idle is reset before its next use, one lost
//     during a request fails that request (failure::unavailable) and is reset on the next.
//
// The model: `query` is a prepared statement with positional parameters, written once in SQLite's
// spelling (`?`, `?N`) and translated to `$N` for PostgreSQL; `database` is a connection with the
// statement caches, `read`/`write` transactions and the schema version. Each public member goes to its
// backend's half (a `sqlite_`/`pg_` member of the same name). The stores' SQL is shared: it keeps to
// what both dialects accept (upserts as `ON CONFLICT ... DO ...`, row values, CAST where PostgreSQL
// cannot infer a parameter's type), and asks `kind()` only where they really differ (a planner hint).
// Each module owns its tables' migrations (migrations.hpp); the planner's statistics are tended in
// statistics.cpp.
// Every row is keyed by the tenant (the API key's id) first, so no query can reach another tenant's data.
// Thread-safety: a `database` is used by one thread at a time; several may share the file / the server.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct pg_conn;
struct pg_result;

namespace folio::service {

enum class dialect { sqlite, postgresql };

/// What a storage failure means for the caller (server.cpp maps it to the answer, docs/API.md).
enum class failure {
  busy,         ///< locked by another writer past the wait (SQLITE_BUSY/LOCKED; PostgreSQL deadlock or serialization failure)
  full,         ///< no space: the page cap or the disk (SQLITE_FULL; PostgreSQL disk_full)
  unwritable,   ///< an I/O error or a read-only database
  unavailable,  ///< the database server cannot be reached (the connection is reset on the next use)
  not_durable,  ///< SQLite: committed, but an fsync of the WAL failed (group_commit.hpp): maybe not on disk
  other,        ///< anything else: a defect (500)
};

struct store_error : std::runtime_error {
  int code;  ///< SQLite's result code, or 0 (PostgreSQL: the SQLSTATE is in what())
  failure kind;
  store_error(int c, const std::string& what);
  store_error(failure k, const std::string& what) : std::runtime_error(what), code(0), kind(k) {}
};

/// The request's deadline passed before it could take a lock or commit (database::set_deadline):
/// nothing it did was committed. Its client has been told, or is about to be, that it failed.
struct deadline_exceeded : std::runtime_error {
  deadline_exceeded() : std::runtime_error("the request's deadline passed") {}
};

using deadline_clock = std::chrono::steady_clock;

class database;
class schema;
class group_commit;

/// One prepared statement with positional parameters (1-based), reset on destruction. SQLite steps
/// the statement row by row; PostgreSQL runs it at the first step() (binary results, all rows held
/// until the query ends) and then walks the rows.
class query {
 public:
  query(database& db, sqlite3_stmt* st, bool owned = false) : db_(&db), st_(st), owned_(owned) {}
  /// PostgreSQL: the prepared statement `name`, or (name empty) the one-off statement `text`, already
  /// in PostgreSQL's spelling, parsed and run by the first step().
  query(database& db, std::string name, std::string text = {}) : db_(&db), pg_(true), pg_name_(std::move(name)), pg_sql_(std::move(text)) {}
  query(const query&) = delete;
  ~query();
  query& bind(int i, std::string_view s);
  /// bind(i, s) without copying the text (SQLite: SQLITE_STATIC; PostgreSQL copies it as bind does):
  /// the caller keeps `s`'s bytes alive and unchanged until the query ends (its destructor clears the
  /// bindings). For statements that bind many values which outlive them (a hundred requested ids).
  query& bind_view(int i, std::string_view s);
  query& bind_blob(int i, std::string_view s);
  query& bind(int i, std::int64_t v);
  query& bind_null(int i);
  query& bind_opt(int i, const std::optional<std::string>& s) { return s ? bind(i, *s) : bind_null(i); }
  /// PostgreSQL: rows are fetched one at a time as step() asks (libpq's single-row mode) instead of
  /// all at the first step, so a large result is never held whole; call before the first step().
  /// SQLite steps row by row anyway.
  query& one_row_at_a_time() {
    single_row_ = pg_;
    return *this;
  }
  /// Steps once: true for a row, false when done. Throws store_error on failure.
  bool step();
  std::string text(int col) const { return std::string(text_view(col)); }
  /// The column's text, valid until the next step() or the end of the query.
  std::string_view text_view(int col) const;
  std::optional<std::string> text_opt(int col) const;
  bool is_null(int col) const;
  std::string blob(int col) const;
  std::int64_t integer(int col) const;

 private:
  // SQLite's half (sqlite_connection.cpp)
  void sqlite_release() noexcept;
  void sqlite_bind_text(int i, std::string_view s, bool copy);
  void sqlite_bind_blob(int i, std::string_view s);
  void sqlite_bind_integer(int i, std::int64_t v);
  void sqlite_bind_null(int i);
  bool sqlite_step();
  std::string_view sqlite_text(int col) const;
  std::string sqlite_blob(int col) const;
  // PostgreSQL's half (postgresql_connection.cpp)
  void pg_release() noexcept;
  void pg_param(int i, std::string value, bool binary, bool null);
  bool pg_step();
  std::string_view pg_text_view(int col) const;
  bool pg_is_null(int col) const;
  std::int64_t pg_integer(int col) const;
  /// PostgreSQL, the first step(): sends the statement with its parameters (in single-row mode when
  /// asked); its results then come through PQgetResult.
  void pg_send();
  /// PostgreSQL: reads the results still coming, to the end, and drops them.
  void pg_drain() noexcept;

  database* db_;
  // SQLite
  sqlite3_stmt* st_ = nullptr;
  bool owned_ = false;
  // PostgreSQL: the statement's name (or text), its parameters until the first step(), then its result
  bool pg_ = false;
  std::string pg_name_, pg_sql_;
  std::vector<std::string> values_;
  std::vector<int> formats_;
  std::vector<char> nulls_;
  pg_result* result_ = nullptr;
  int row_ = -1, rows_ = 0;
  bool single_row_ = false;  ///< one_row_at_a_time(): result_ holds the current row only
  bool pending_ = false;     ///< results of the sent statement are still coming from the server (either mode)
};

/// Whether a --db value names a PostgreSQL database (a postgresql:// or postgres:// URI, or a libpq
/// conninfo "key=value ...") rather than a SQLite file.
bool is_postgresql(std::string_view target);

class database {
 public:
  /// Opens (creating if needed) and migrates the database `target` (a SQLite file path, or a
  /// PostgreSQL URI/conninfo: is_postgresql) to `tables` (a database of a newer schema is refused).
  /// `max_pages` > 0 caps a SQLite file (max_page_count): a write that needs more fails with
  /// SQLITE_FULL, as on a full disk; PostgreSQL refuses it.
  database(const std::string& target, const schema& tables, std::int64_t max_pages = 0);
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  dialect kind() const noexcept { return pg_ ? dialect::postgresql : dialect::sqlite; }

  /// A statement prepared once per connection.
  query sql(const char* text);
  /// A statement whose text is built at run time (filters, IN lists): kept per connection for the
  /// first 256 distinct texts, prepared for this use only after that (PostgreSQL: parsed with its
  /// parameters in the one round trip that runs it).
  query prepare(const std::string& text);
  void exec(const char* text);
  /// "?,?,...,?" with n placeholders, for IN lists.
  static std::string placeholders(std::size_t n);
  /// Rows changed by the last statement.
  int changes() const { return pg_ ? pg_changes_ : sqlite3_changes(db_); }

  /// Runs f() inside a write transaction and commits; rolls back if it throws. SQLite: BEGIN
  /// IMMEDIATE, after this process's writers queue on a mutex (SQLite admits one writer at a time
  /// anyway, and its busy handler waits by sleeping, which would put long stalls in the latency tail);
  /// the busy handler still covers writers in other processes. PostgreSQL: BEGIN (READ COMMITTED) with
  /// lock and statement timeouts at the deadline; writes of different keys run in parallel (write(key, f)).
  /// Nothing is committed after the deadline: waiting for a lock ends there, and a transaction whose
  /// f() ran past it is rolled back; both throw deadline_exceeded. Keep f() to the statements: work
  /// that depends only on the request belongs before write(), so that one request's CPU never holds
  /// other writes.
  template <class F>
  auto write(F&& f) {
    return write(std::string_view(), std::forward<F>(f));
  }
  /// write(f), serialised with every other write of `key` on any connection to the database: on
  /// PostgreSQL a transaction-scoped advisory lock on the key's 64-bit hash is the transaction's first
  /// statement (two keys of one hash only wait for each other); on SQLite every write is serialised
  /// already. The record session writes under the record's key, annotation writes under the
  /// document's.
  template <class F>
  auto write(std::string_view key, F&& f) {
    if (pg_) return transaction(begin_write(key).c_str(), std::forward<F>(f), true);
    std::unique_lock<std::timed_mutex> one_writer(writer_mutex(), std::defer_lock);
    if (!one_writer.try_lock_until(deadline_)) throw deadline_exceeded();
    busy_past_deadline_ = false;
    try {
      if constexpr (std::is_void_v<decltype(f())>) {
        transaction("BEGIN IMMEDIATE", std::forward<F>(f), true);
        durable(one_writer);
      } else {
        auto r = transaction("BEGIN IMMEDIATE", std::forward<F>(f), true);
        durable(one_writer);
        return r;
      }
    } catch (const store_error& e) {
      if ((e.code & 0xff) == SQLITE_BUSY && busy_past_deadline_) throw deadline_exceeded();  // another process held the lock
      throw;
    }
  }
  /// Holds `key`'s write lock (the one write(key, f) takes) from now until the hold ends, across
  /// transactions: a writer of the key on any other connection waits meanwhile, while this
  /// connection's own write(key, f) goes through. PostgreSQL: a session-level advisory lock on the
  /// key's hash (advisory locks are re-entrant on one connection), waited for no longer than the
  /// deadline (deadline_exceeded); released when the hold ends, or with the connection if it is lost.
  /// SQLite: nothing (every write of the file is serialised already). The record session takes it
  /// after another node moved a record under it (record_session.hpp).
  class key_hold {
   public:
    key_hold(database& db, std::string_view key);
    ~key_hold();
    key_hold(const key_hold&) = delete;
    key_hold& operator=(const key_hold&) = delete;

   private:
    database& db_;
    std::int64_t hash_ = 0;
    bool held_ = false;
  };

  /// Runs f() inside a read transaction (a consistent snapshot across statements).
  template <class F>
  auto read(F&& f) {
    return transaction(pg_ ? "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY" : "BEGIN", std::forward<F>(f), false);
  }

  /// The deadline of the request this connection serves (none by default): write() commits nothing
  /// after it, and waits for locks no longer than until it.
  void set_deadline(deadline_clock::time_point t) noexcept { deadline_ = t; }
  deadline_clock::time_point deadline() const noexcept { return deadline_; }

  /// SQLite: keeps the query planner's statistics (sqlite_stat1) in step with the tables this
  /// connection reads, which is what lets it pick, of two indexes that both fit a query, the one that
  /// leaves fewer rows to check (annotations filtered by location and by user). Calls 1, 2, 4, ...,
  /// 128 and then every 256th run PRAGMA optimize, holding this process's writer mutex: ANALYZE of
  /// each table this connection has queried whose indexes were never analysed or that has grown
  /// 25-fold since, reading at most about 1,000 entries an index (analysis_limit), so its cost is
  /// bounded whatever the table's size; otherwise it writes nothing (no transaction, no fsync). Each connection
  /// learns statistics by its own ANALYZE (SQLite loads them when it reads the schema). For between
  /// requests (folio-fcgi's workers call it after each answer has gone), never inside a transaction;
  /// it waits for the lock no more than 5 s, then throws store_error (busy), leaving the next try to
  /// the next of those calls. PostgreSQL: nothing (autovacuum analyses its tables).
  void tend_statistics();
  /// Whether tend_statistics' call number `call` (from 1) runs PRAGMA optimize: 1, 2, 4, ..., 128,
  /// then every 256th. A database never analysed is planned blind for a request or two rather than
  /// 255, and a connection that is done learning pays for the check rarely.
  static constexpr bool statistics_due(std::uint64_t call) noexcept { return call < 256 ? (call & (call - 1)) == 0 : call % 256 == 0; }

  int version() const { return version_; }
  /// The --db value (a file path, or a PostgreSQL URI/conninfo).
  const std::string& path() const { return path_; }

  /// What keeps this database from taking writes, or "" when a write commits: the cap or the disk
  /// is full (SQLite), or a probe write (one row of `meta`, synchronous like every write) fails.
  std::string write_problem();
  /// What the backend's own consistency check finds wrong (SQLite's integrity_check; PostgreSQL has
  /// none without extensions: none), one line each.
  std::vector<std::string> integrity_problems();

  struct space {
    std::uint64_t file_bytes = 0, wal_bytes = 0, pages = 0, free_pages = 0, max_pages = 0, page_size = 0;
    /// SQLite: writes committed through this process, and the fsyncs of the WAL that made them
    /// durable (group commit: fewer when writes overlap).
    std::uint64_t commits = 0, wal_syncs = 0;
  };
  /// SQLite: the file's figures and this process's group commits; PostgreSQL: file_bytes is
  /// pg_database_size, the rest 0.
  space usage();
  static std::timed_mutex& writer_mutex() {
    static std::timed_mutex m;
    return m;
  }

 private:
  friend class query;
  /// Connects to `target` and sets the connection up (the constructor's work before migrating). May throw.
  void sqlite_open(const std::string& target, std::int64_t max_pages);
  void pg_open(const std::string& target, std::int64_t max_pages);
  /// Finalizes the statements and closes the connection: the destructor's, and the constructor's when
  /// connecting or migrating throws (a destructor does not run for an object never constructed).
  void release() noexcept;
  void sqlite_release() noexcept;
  void pg_release() noexcept;
  /// Takes the database to `tables`' version (migrations.cpp).
  void migrate(const schema& tables);
  template <class F>
  auto transaction(const char* begin, F&& f, bool writes) {
    try {
      pg_ ? exec(begin) : void(sql(begin).step());
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        commit(writes);
      } else {
        auto r = f();
        commit(writes);
        return r;
      }
    } catch (...) {
      rollback();
      throw;
    }
  }

  void commit(bool writes) {
    if (writes && deadline_clock::now() > deadline_) throw deadline_exceeded();  // rolled back by the caller
    pg_ ? exec("COMMIT") : void(sql("COMMIT").step());
  }
  void rollback() noexcept;
  void pg_rollback() noexcept;
  void sqlite_exec(const char* text);
  void pg_exec(const char* text);
  query sqlite_sql(const char* text);
  query pg_sql(const char* text);
  query sqlite_prepare(const std::string& text);
  query pg_prepare(const std::string& text);
  space sqlite_usage();
  /// SQLite: what keeps the file from taking writes before a probe write is tried (a failed fsync, the
  /// page cap, the disk), or "".
  std::string sqlite_space_problem();
  /// SQLite, right after a write's COMMIT, with the writer section held: notes the commit, leaves the
  /// section and returns once an fsync of the WAL that began after the COMMIT has completed
  /// (group_commit.hpp). Throws store_error (not_durable) when the fsync fails, or one failed before.
  void durable(std::unique_lock<std::timed_mutex>& writer);
  /// PostgreSQL: the statements that open a write transaction of `key` (one round trip).
  std::string begin_write(std::string_view key) const;
  long long ms_left() const;  ///< milliseconds to the deadline (at least 1): PostgreSQL's lock and statement timeouts
  /// PostgreSQL: a connection that is not up, or that the server ended while it was idle, is reset;
  /// throws failure::unavailable if it stays down.
  void connected();
  /// PostgreSQL: the failure of `res` (or of the connection) as a store_error; clears `res`.
  [[noreturn]] void pg_raise(pg_result* res, const char* where);
  /// PostgreSQL: prepares `text` (translated to $N placeholders) under a new name; returns the name.
  std::string pg_statement(std::string_view text);
  /// SQLite's busy handler: waits for another process's lock with growing sleeps, for at most 10 s
  /// and never past the deadline.
  static int busy_wait(void* self, int attempt);

  std::int64_t pragma(const char* text);

  sqlite3* db_ = nullptr;
  pg_conn* pg_ = nullptr;
  std::string path_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
  std::unordered_map<std::string, sqlite3_stmt*> built_;  ///< prepare()'s statements, by text
  std::unordered_map<const char*, std::string> pg_cache_;  ///< sql()'s PostgreSQL statement names, by text
  std::unordered_map<std::string, std::string> pg_built_;  ///< prepare()'s, by text
  std::uint64_t pg_statements_ = 0;  ///< statements named so far
  int pg_changes_ = 0;
  int version_ = 0;
  std::uint64_t statistics_calls_ = 0;  ///< tend_statistics() calls on this connection
  deadline_clock::time_point deadline_ = deadline_clock::time_point::max();
  bool busy_past_deadline_ = false;  ///< busy_wait stopped waiting because of the deadline
  std::shared_ptr<group_commit> group_;  ///< SQLite: the group commit of the file in this process
};

}  // namespace folio::service
