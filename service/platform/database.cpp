#include "platform/database.hpp"

#include <openssl/rand.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <string>
#include <thread>

namespace folio::service {

namespace {

[[noreturn]] void raise(sqlite3* db, int rc, const std::string& where) {
  throw store_error(rc, where + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

// Schema migrations: entry k takes the schema from version k to k + 1. Never edit a shipped entry;
// append a new one.
const char* const migrations[] = {
    R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE api_keys (
  key_id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT) WITHOUT ROWID;
CREATE TABLE tokens (
  token_id TEXT PRIMARY KEY, key_id TEXT NOT NULL REFERENCES api_keys(key_id), subject TEXT NOT NULL,
  read_only INTEGER NOT NULL, expires_at TEXT, salt BLOB NOT NULL, hash BLOB NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT) WITHOUT ROWID;
CREATE TABLE crdt_records (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  type TEXT NOT NULL, content_key TEXT NOT NULL, snapshot BLOB NOT NULL,
  log_len INTEGER NOT NULL, revision INTEGER NOT NULL,
  last_update TEXT NOT NULL, last_updated_by TEXT NOT NULL, session_id TEXT,
  PRIMARY KEY (tenant, org, doc, editor)) WITHOUT ROWID;
CREATE TABLE crdt_log (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  seq INTEGER NOT NULL, batch BLOB NOT NULL,
  PRIMARY KEY (tenant, org, doc, editor, seq)) WITHOUT ROWID;
CREATE TABLE annotations (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  location_id TEXT, user_id TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, annotation_id)) WITHOUT ROWID;
CREATE INDEX annotations_by_time ON annotations (tenant, org, doc, created_at, annotation_id);
CREATE INDEX annotations_by_location ON annotations (tenant, org, doc, location_id, created_at, annotation_id);
CREATE INDEX annotations_by_user ON annotations (tenant, org, doc, user_id, created_at, annotation_id);
)sql",
    // 2: the annotation write side. Comments move to their own table (a comment write no longer
    // rewrites its thread); status and lastUpdated become columns for the v2 filters.
    R"sql(
CREATE TABLE annotation_comments (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  comment_id INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, annotation_id, comment_id)) WITHOUT ROWID;
INSERT OR IGNORE INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body)
  SELECT a.tenant, a.org, a.doc, a.annotation_id, json_extract(c.value, '$.commentId'), json(c.value)
  FROM annotations a, json_each(a.body, '$.comments') c WHERE json_type(c.value, '$.commentId') = 'integer';
ALTER TABLE annotations ADD COLUMN status_id TEXT NOT NULL DEFAULT 'OPEN';
ALTER TABLE annotations ADD COLUMN last_updated TEXT NOT NULL DEFAULT '';
ALTER TABLE annotations ADD COLUMN next_comment_id INTEGER NOT NULL DEFAULT 1;
UPDATE annotations SET next_comment_id = 1 + coalesce((SELECT max(c.comment_id) FROM annotation_comments c WHERE c.tenant = annotations.tenant
  AND c.org = annotations.org AND c.doc = annotations.doc AND c.annotation_id = annotations.annotation_id), 0);
UPDATE annotations SET status_id = coalesce(json_extract(body, '$.status.id'), 'OPEN'),
  last_updated = coalesce(json_extract(body, '$.lastUpdated'), created_at), body = json_remove(body, '$.comments');
CREATE INDEX annotations_by_status ON annotations (tenant, org, doc, status_id, created_at, annotation_id);
)sql",
    // 3: a thread lists its comments in the order they were added, whatever their ids. Comments stored
    // before keep the commentId order they were listed in; later ones follow them.
    R"sql(
ALTER TABLE annotation_comments ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
UPDATE annotation_comments SET position = comment_id + 1;
CREATE INDEX annotation_comments_in_order ON annotation_comments (tenant, org, doc, annotation_id, position);
)sql",
    // 4: a CRDT record has an incarnation, the replica id its server edits it as, drawn at random when
    // the record is added: a record deleted and added again never repeats the old one's op ids, and a
    // client holding the old one's state is told. Records stored before were edited as the database's
    // one server replica (kept in meta by schema 1-3), which stays their incarnation.
    R"sql(
ALTER TABLE crdt_records ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;
UPDATE crdt_records SET incarnation = (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'server_replica');
)sql",
};

}  // namespace

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

database::database(const std::string& path, std::int64_t max_pages) : path_(path) {
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
  migrate();
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

void database::migrate() {
  write([&] {
    int have = 0;
    {
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &st, nullptr);
      if (sqlite3_step(st) == SQLITE_ROW) have = sqlite3_column_int(st, 0);
      sqlite3_finalize(st);
    }
    if (have > schema_version) throw store_error(SQLITE_ERROR, "database schema " + std::to_string(have) + " is newer than this build's");
    for (int v = have; v < schema_version; ++v) exec(migrations[v]);
    if (have != schema_version) exec(("PRAGMA user_version=" + std::to_string(schema_version)).c_str());
    version_ = schema_version;
  });
}

std::uint64_t new_incarnation() {
  std::uint64_t r = 0;
  while (r == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&r), sizeof r) != 1) throw store_error(SQLITE_ERROR, "no randomness for a record's incarnation");
    r >>= 1;  // below 2^63: fits SQLite's signed integers
  }
  return r;
}

// ---- CRDT records ---------------------------------------------------------------------------------------

namespace {
record_row row_of(query& q) {
  record_row r;
  r.editor = q.text(0), r.type = q.text(1), r.content_key = q.text(2), r.snapshot = q.blob(3);
  r.log_len = q.integer(4), r.revision = q.integer(5);
  r.last_update = q.text(6), r.last_updated_by = q.text(7), r.session_id = q.text_opt(8);
  r.incarnation = static_cast<std::uint64_t>(q.integer(9));
  return r;
}
}  // namespace

std::optional<record_row> load_record(database& db, const record_key& k, bool with_snapshot) {
  query q = db.sql(with_snapshot ? "SELECT editor, type, content_key, snapshot, log_len, revision, last_update, last_updated_by, session_id, incarnation "
                                   "FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?"
                                 : "SELECT editor, type, content_key, NULL, log_len, revision, last_update, last_updated_by, session_id, incarnation "
                                   "FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  if (!q.step()) return std::nullopt;
  return row_of(q);
}

std::vector<std::string> document_editors(database& db, const std::string& tenant, const std::string& org, const std::string& doc) {
  query q = db.sql("SELECT editor FROM crdt_records WHERE tenant=? AND org=? AND doc=? ORDER BY editor");
  q.bind(1, tenant).bind(2, org).bind(3, doc);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

std::vector<std::string> load_log(database& db, const record_key& k) {
  query q = db.sql("SELECT batch FROM crdt_log WHERE tenant=? AND org=? AND doc=? AND editor=? ORDER BY seq");
  q.bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.blob(0));
  return out;
}

void insert_record(database& db, const record_key& k, const record_row& r) {
  db.sql("INSERT INTO crdt_records (tenant, org, doc, editor, type, content_key, snapshot, log_len, revision, last_update, last_updated_by, session_id, "
         "incarnation) VALUES (?,?,?,?,?,?,?,0,?,?,?,?,?)")
      .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, r.type).bind(6, r.content_key).bind_blob(7, r.snapshot)
      .bind(8, r.revision).bind(9, r.last_update).bind(10, r.last_updated_by).bind_opt(11, r.session_id).bind(12, static_cast<std::int64_t>(r.incarnation))
      .step();
}

std::int64_t append_change(database& db, const record_key& k, const record_row& before, const std::string* batch, const std::string& last_update,
                           const std::string& by, const std::optional<std::string>& session) {
  std::int64_t log_len = before.log_len;
  if (batch) {
    db.sql("INSERT INTO crdt_log (tenant, org, doc, editor, seq, batch) VALUES (?,?,?,?,?,?)")
        .bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).bind(5, log_len).bind_blob(6, *batch)
        .step();
    ++log_len;
  }
  const std::int64_t revision = before.revision + 1;
  db.sql("UPDATE crdt_records SET log_len=?, revision=?, last_update=?, last_updated_by=?, session_id=? WHERE tenant=? AND org=? AND doc=? AND editor=?")
      .bind(1, log_len).bind(2, revision).bind(3, last_update).bind(4, by).bind_opt(5, session)
      .bind(6, k.tenant).bind(7, k.org).bind(8, k.doc).bind(9, k.editor)
      .step();
  return revision;
}

void compact(database& db, const record_key& k, const std::string& snapshot) {
  db.sql("DELETE FROM crdt_log WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  db.sql("UPDATE crdt_records SET snapshot=?, log_len=0 WHERE tenant=? AND org=? AND doc=? AND editor=?")
      .bind_blob(1, snapshot).bind(2, k.tenant).bind(3, k.org).bind(4, k.doc).bind(5, k.editor)
      .step();
}

bool delete_record(database& db, const record_key& k) {
  db.sql("DELETE FROM crdt_log WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  db.sql("DELETE FROM crdt_records WHERE tenant=? AND org=? AND doc=? AND editor=?").bind(1, k.tenant).bind(2, k.org).bind(3, k.doc).bind(4, k.editor).step();
  return db.changes() > 0;
}

}  // namespace folio::service
