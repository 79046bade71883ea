// service/storage/migrations.hpp — a database's schema as the migrations of the modules that own tables
// (docs/SERVICE.md, "Schema versions"). Each module keeps its steps in a file of its own
// (platform/schema.cpp, crdt/schema.cpp, annotations/schema.cpp); database's constructor runs the steps
// a database lacks, in one transaction (database::migrate, migrations.cpp). The version is stored in
// PRAGMA user_version (SQLite) or the table folio_schema (PostgreSQL).
// Thread-safety: immutable after construction.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "storage/database.hpp"

namespace folio::service {

/// One module's part of a schema version: the SQL that takes the module's tables from `version - 1` to
/// `version`. Never edit a shipped entry; append a new one.
struct migration {
  int version;
  const char* sql;
};

/// A module's migrations in both dialects. A PostgreSQL list starts at the version that created the
/// module's tables as they are then (no PostgreSQL database is older than schema 4); every later step
/// is written in both lists with the same version number.
struct module_migrations {
  std::span<const migration> sqlite, postgresql;
};

/// A database's schema: the migrations of every module that owns tables (the platform's credentials
/// and meta, each family's own), in the order the modules were added. Version v is reached from v - 1
/// by running each module's step to v, module by module in that order, in one transaction.
class schema {
 public:
  schema& add(module_migrations module);
  /// The highest version a module's migrations reach (the version of a migrated database).
  int version() const noexcept { return version_; }
  /// The SQL texts that take a database of `d` from version `v - 1` to `v`, in module order.
  std::vector<const char*> step(dialect d, int v) const;

 private:
  std::vector<module_migrations> modules_;
  int version_ = 0;
};

/// A DDL text shared by both dialects, with each dialect's spelling of what differs substituted:
/// `{BLOB}` (BLOB, BYTEA), `{INTEGER}` (INTEGER, BIGINT), `{ROWID}` (" WITHOUT ROWID", nothing) and
/// `{IDENTITY}` (a 64-bit primary key the database numbers, never reusing a number).
/// A module builds its steps from these once, at its first call (the texts then live as long as the process).
std::string ddl(dialect d, const char* text);

}  // namespace folio::service
