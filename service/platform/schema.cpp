#include "platform/schema.hpp"

namespace folio::service {

namespace {

// Both dialects' text (storage/migrations.hpp, ddl).
constexpr const char* tables = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL){ROWID};
CREATE TABLE api_keys (
  key_id TEXT PRIMARY KEY, name TEXT NOT NULL, salt {BLOB} NOT NULL, hash {BLOB} NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT){ROWID};
CREATE TABLE tokens (
  token_id TEXT PRIMARY KEY, key_id TEXT NOT NULL REFERENCES api_keys(key_id), subject TEXT NOT NULL,
  read_only {INTEGER} NOT NULL, expires_at TEXT, salt {BLOB} NOT NULL, hash {BLOB} NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT){ROWID};
)sql";

// The revoked keys, which every responder re-reads each revocation tick (server.hpp,
// read_revoked_keys), through an index of them alone: a read is linear in the revoked keys.
constexpr const char* revoked_index = "CREATE INDEX api_keys_revoked ON api_keys (key_id) WHERE revoked_at IS NOT NULL;";

}  // namespace

module_migrations platform_migrations() {
  static const std::string sqlite_1 = ddl(dialect::sqlite, tables), pg_1 = ddl(dialect::postgresql, tables);
  static const migration sqlite[] = {{1, sqlite_1.c_str()}, {10, revoked_index}};
  static const migration pg[] = {{1, pg_1.c_str()}, {10, revoked_index}};
  return {sqlite, pg};
}

}  // namespace folio::service
