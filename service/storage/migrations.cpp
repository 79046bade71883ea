#include "storage/migrations.hpp"

#include <algorithm>
#include <cstring>

namespace folio::service {

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

std::string ddl(dialect d, const char* text) {
  const bool sqlite = d == dialect::sqlite;
  const struct {
    const char* name;
    const char* spelling;
  } words[] = {{"{BLOB}", sqlite ? "BLOB" : "BYTEA"}, {"{INTEGER}", sqlite ? "INTEGER" : "BIGINT"}, {"{ROWID}", sqlite ? " WITHOUT ROWID" : ""},
                       {"{IDENTITY}", sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"}};
  std::string out;
  for (const char* p = text; *p;) {
    bool replaced = false;
    for (const auto& w : words)
      if (std::strncmp(p, w.name, std::strlen(w.name)) == 0) {
        out += w.spelling, p += std::strlen(w.name), replaced = true;
        break;
      }
    if (!replaced) out += *p++;
  }
  return out;
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
