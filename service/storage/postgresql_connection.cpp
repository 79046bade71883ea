// The PostgreSQL backend of database and query (database.hpp): libpq, one connection per worker thread,
// binary results, writes serialised per key by advisory locks, reconnection of a connection the server
// ended.
#include <endian.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>

#include "storage/database.hpp"

namespace folio::service {

namespace {

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

bool is_postgresql(std::string_view target) {
  if (target.starts_with("postgresql://") || target.starts_with("postgres://")) return true;
  std::size_t i = 0;  // a conninfo starts with a keyword and '='
  while (i < target.size() && (std::isalpha(static_cast<unsigned char>(target[i])) || target[i] == '_')) ++i;
  while (i < target.size() && target[i] == ' ') ++i;
  return i > 0 && i < target.size() && target[i] == '=';
}

// ---- query ------------------------------------------------------------------------------------------

void query::pg_release() noexcept {
  PQclear(result_);
  pg_drain();  // left before the end (single-row mode): the connection is free for its next statement
}

// Text and bytes go in binary format (their bytes as they are, with their length: a NUL is refused,
// never cut), integers as decimal text (the server knows the column's width).
void query::pg_param(int i, std::string value, bool binary, bool null) {
  const auto at = static_cast<std::size_t>(i - 1);
  if (values_.size() <= at) values_.resize(at + 1), formats_.resize(at + 1), nulls_.resize(at + 1, 1);
  values_[at] = std::move(value), formats_[at] = binary, nulls_[at] = null;
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

bool query::pg_step() {
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

std::string_view query::pg_text_view(int col) const {
  return {PQgetvalue(result_, row_, col), static_cast<std::size_t>(PQgetlength(result_, row_, col))};
}

bool query::pg_is_null(int col) const { return PQgetisnull(result_, row_, col) != 0; }

std::int64_t query::pg_integer(int col) const {
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

// ---- database ---------------------------------------------------------------------------------------

void database::pg_open(const std::string& target, std::int64_t max_pages) {
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
}

void database::pg_release() noexcept {
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

void database::pg_exec(const char* text) {
  connected();
  PGresult* res = PQexec(pg_, text);
  const ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) pg_raise(res, "exec");
  PQclear(res);
}

void database::pg_rollback() noexcept {
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

query database::pg_sql(const char* text) {
  connected();
  auto it = pg_cache_.find(text);
  if (it == pg_cache_.end()) it = pg_cache_.emplace(text, pg_statement(text)).first;
  return query(*this, it->second);
}

query database::pg_prepare(const std::string& text) {
  connected();
  if (auto it = pg_built_.find(text); it != pg_built_.end()) return query(*this, it->second);
  if (pg_built_.size() >= 256) return query(*this, std::string(), pg_text(text));
  return query(*this, pg_built_.emplace(text, pg_statement(text)).first->second);
}

}  // namespace folio::service
