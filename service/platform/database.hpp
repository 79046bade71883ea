// service/platform/database.hpp — SQLite storage (the README's "Running it for real", storage): one `database` per worker thread (its own
// connection), WAL, synchronous=FULL (a committed write is on disk), BEGIN IMMEDIATE for writes, a
// busy timeout. The schema carries a version number (PRAGMA user_version) and forward migrations; each
// module owns its tables' migrations (`schema`: the platform its own, crdt/records.cpp and
// annotations/store.cpp theirs; docs/SERVICE.md lists who owns which table). Every row is keyed by the
// tenant (the API key's id) first, so no query can reach another tenant's data.
// Thread-safety: a `database` is used by one thread at a time; several may share the file.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace folio::service {

/// One prepared statement, reset on destruction of the `query`.
class query {
 public:
  query(sqlite3* db, sqlite3_stmt* st, bool owned = false) : db_(db), st_(st), owned_(owned) {}
  query(const query&) = delete;
  ~query() {
    if (owned_) {
      sqlite3_finalize(st_);
      return;
    }
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  query& bind(int i, std::string_view s);
  query& bind_blob(int i, std::string_view s);
  query& bind(int i, std::int64_t v);
  query& bind_null(int i);
  query& bind_opt(int i, const std::optional<std::string>& s) { return s ? bind(i, *s) : bind_null(i); }
  /// Steps once: true for a row, false when done. Throws store_error on failure.
  bool step();
  std::string text(int col) const;
  /// The column's text, valid until the next step() or the end of the query.
  std::string_view text_view(int col) const;
  std::optional<std::string> text_opt(int col) const;
  std::string blob(int col) const;
  std::int64_t integer(int col) const { return sqlite3_column_int64(st_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_;
  bool owned_;
};

struct store_error : std::runtime_error {
  int code;
  store_error(int c, const std::string& what) : std::runtime_error(what), code(c) {}
};

/// The request's deadline passed before it could take a lock or commit (database::set_deadline):
/// nothing it did was committed. Its client has been told, or is about to be, that it failed.
struct deadline_exceeded : std::runtime_error {
  deadline_exceeded() : std::runtime_error("the request's deadline passed") {}
};

using deadline_clock = std::chrono::steady_clock;

/// One module's part of a schema version: the SQL that takes the module's tables from `version - 1` to
/// `version`. Never edit a shipped entry; append a new one.
struct migration {
  int version;
  const char* sql;
};

/// A database's schema: the migrations of every module that owns tables (the platform's credentials
/// and meta, each family's own), in the order the modules were added. Version v is reached from v - 1
/// by running each module's step to v, module by module in that order, in one transaction.
class schema {
 public:
  schema& add(std::span<const migration> module);
  /// The highest version a module's migrations reach (PRAGMA user_version of a migrated database).
  int version() const noexcept { return version_; }
  /// The SQL texts that take a database from version `v - 1` to `v`, in module order.
  std::vector<const char*> step(int v) const;

 private:
  std::vector<std::span<const migration>> modules_;
  int version_ = 0;
};

/// The platform's tables: meta (the health probe; schema 1-3 kept the server replica there) and the
/// credentials (api_keys, tokens; auth.hpp).
std::span<const migration> platform_migrations();

class database {
 public:
  /// Opens (creating if needed) and migrates the database at `path` to `tables` (a database of a newer
  /// schema is refused). `max_pages` > 0 caps the file (SQLite's max_page_count): a write that needs
  /// more fails with SQLITE_FULL, as on a full disk.
  database(const std::string& path, const schema& tables, std::int64_t max_pages = 0);
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  /// A statement prepared once per connection.
  query sql(const char* text);
  /// A statement whose text is built at run time (filters, IN lists): kept per connection for the
  /// first 256 distinct texts, prepared for this use only after that.
  query prepare(const std::string& text);
  void exec(const char* text);
  /// "?,?,...,?" with n placeholders, for IN lists.
  static std::string placeholders(std::size_t n);
  /// Rows changed by the last statement.
  int changes() const { return sqlite3_changes(db_); }

  /// Runs f() inside BEGIN IMMEDIATE ... COMMIT; rolls back if it throws. Writers of this process
  /// queue on a mutex first: SQLite admits one writer at a time anyway, and its busy handler waits by
  /// sleeping, which would put long stalls in the latency tail. The busy handler still covers writers
  /// in other processes. Nothing is committed after the deadline: waiting for the mutex or for another
  /// process's lock ends there, and a transaction whose f() ran past it is rolled back; both throw
  /// deadline_exceeded. Keep f() to the statements: work that depends only on the request belongs
  /// before write(), so that one request's CPU never holds other records' writes.
  template <class F>
  auto write(F&& f) {
    std::unique_lock<std::timed_mutex> one_writer(writer_mutex(), std::defer_lock);
    if (!one_writer.try_lock_until(deadline_)) throw deadline_exceeded();
    busy_past_deadline_ = false;
    try {
      return transaction("BEGIN IMMEDIATE", std::forward<F>(f), true);
    } catch (const store_error& e) {
      if ((e.code & 0xff) == SQLITE_BUSY && busy_past_deadline_) throw deadline_exceeded();  // another process held the lock
      throw;
    }
  }
  /// Runs f() inside a read transaction (a consistent snapshot across statements).
  template <class F>
  auto read(F&& f) {
    return transaction("BEGIN", std::forward<F>(f), false);
  }

  /// The deadline of the request this connection serves (none by default): write() commits nothing
  /// after it, and waits for locks no longer than until it.
  void set_deadline(deadline_clock::time_point t) noexcept { deadline_ = t; }
  deadline_clock::time_point deadline() const noexcept { return deadline_; }

  int version() const { return version_; }
  const std::string& path() const { return path_; }

  /// What keeps this database from taking writes, or "" when a write commits: the cap or the disk
  /// is full, or a probe write (one row of `meta`, synchronous like every write) fails.
  std::string write_problem();

  struct space {
    std::uint64_t file_bytes = 0, wal_bytes = 0, pages = 0, free_pages = 0, max_pages = 0, page_size = 0;
  };
  space usage();
  static std::timed_mutex& writer_mutex() {
    static std::timed_mutex m;
    return m;
  }

 private:
  void migrate(const schema& tables);
  template <class F>
  auto transaction(const char* begin, F&& f, bool writes) {
    sql(begin).step();
    try {
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        commit(writes);
      } else {
        auto r = f();
        commit(writes);
        return r;
      }
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  void commit(bool writes) {
    if (writes && deadline_clock::now() > deadline_) throw deadline_exceeded();  // rolled back by the caller
    sql("COMMIT").step();
  }
  /// SQLite's busy handler: waits for another process's lock with growing sleeps, for at most 10 s
  /// and never past the deadline.
  static int busy_wait(void* self, int attempt);

  std::int64_t pragma(const char* text);

  sqlite3* db_ = nullptr;
  std::string path_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
  std::unordered_map<std::string, sqlite3_stmt*> built_;  ///< prepare()'s statements, by text
  int version_ = 0;
  deadline_clock::time_point deadline_ = deadline_clock::time_point::max();
  bool busy_past_deadline_ = false;  ///< busy_wait stopped waiting because of the deadline
};

}  // namespace folio::service
