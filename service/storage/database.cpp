// What database and query do whatever the backend (database.hpp): each call goes to its backend's half,
// sqlite_connection.cpp or postgresql_connection.cpp.
#include "storage/database.hpp"

#include "platform/clock.hpp"
#include "storage/migrations.hpp"

namespace folio::service {

// ---- query ------------------------------------------------------------------------------------------

query::~query() { pg_ ? pg_release() : sqlite_release(); }

query& query::bind(int i, std::string_view s) {
  pg_ ? pg_param(i, std::string(s), true, false) : sqlite_bind_text(i, s, true);
  return *this;
}
query& query::bind_view(int i, std::string_view s) {
  pg_ ? pg_param(i, std::string(s), true, false) : sqlite_bind_text(i, s, false);
  return *this;
}
query& query::bind_blob(int i, std::string_view s) {
  pg_ ? pg_param(i, std::string(s), true, false) : sqlite_bind_blob(i, s);
  return *this;
}
query& query::bind(int i, std::int64_t v) {
  pg_ ? pg_param(i, std::to_string(v), false, false) : sqlite_bind_integer(i, v);
  return *this;
}
query& query::bind_null(int i) {
  pg_ ? pg_param(i, std::string(), false, true) : sqlite_bind_null(i);
  return *this;
}
bool query::step() { return pg_ ? pg_step() : sqlite_step(); }
std::string_view query::text_view(int col) const { return pg_ ? pg_text_view(col) : sqlite_text(col); }
std::string query::blob(int col) const { return pg_ ? text(col) : sqlite_blob(col); }
bool query::is_null(int col) const { return pg_ ? pg_is_null(col) : sqlite3_column_type(st_, col) == SQLITE_NULL; }
std::optional<std::string> query::text_opt(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}
std::int64_t query::integer(int col) const { return pg_ ? pg_integer(col) : sqlite3_column_int64(st_, col); }

// ---- database ---------------------------------------------------------------------------------------

database::database(const std::string& target, const schema& tables, std::int64_t max_pages) : path_(target) {
  try {
    is_postgresql(target) ? pg_open(target, max_pages) : sqlite_open(target, max_pages);
    migrate(tables);
  } catch (...) {
    release();
    throw;
  }
}

database::~database() { release(); }

void database::release() noexcept {
  sqlite_release();
  pg_release();
}

std::int64_t database::pragma(const char* text) {
  query q = sql(text);
  return q.step() ? q.integer(0) : 0;
}

database::space database::usage() {
  if (!pg_) return sqlite_usage();
  space s;
  s.file_bytes = static_cast<std::uint64_t>(pragma("SELECT pg_database_size(current_database())"));
  return s;
}

std::string database::write_problem() {
  try {
    if (!pg_)
      if (std::string problem = sqlite_space_problem(); !problem.empty()) return problem;
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

void database::exec(const char* text) { pg_ ? pg_exec(text) : sqlite_exec(text); }

void database::rollback() noexcept {
  if (pg_) pg_rollback();
  else sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

query database::sql(const char* text) { return pg_ ? pg_sql(text) : sqlite_sql(text); }

query database::prepare(const std::string& text) { return pg_ ? pg_prepare(text) : sqlite_prepare(text); }

std::string database::placeholders(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s;
}

}  // namespace folio::service
