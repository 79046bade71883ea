// tests/service/support.hpp — what the service's tests share: a temporary database (SQLite, or PostgreSQL in
// the tests' PostgreSQL pass) and a responder with an API key and token, called like folio-fcgi calls it
// (no socket).
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "platform/auth.hpp"
#include "platform/clock.hpp"
#include "responder.hpp"
#include "wire/base64.hpp"
#include "wire/json.hpp"

namespace folio_service_test {

namespace svc = folio::service;

/// The database a test runs on: a SQLite file in a temporary directory, or — in the PostgreSQL pass
/// (ctest's "pg." tests: FOLIO_TEST_PG names the conninfo file that scripts/pg-test-cluster wrote) — a
/// schema of its own in the test run's private cluster, dropped at the end. path() is what --db takes.
struct temp_db {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("folio-service-test-" + std::to_string(::getpid()));
  std::string conninfo, schema;
  temp_db() {
    std::filesystem::create_directories(dir);
    const char* pg = std::getenv("FOLIO_TEST_PG");
    if (!pg || !*pg) return;
    std::ifstream in(pg);
    std::getline(in, conninfo);
    if (conninfo.empty()) throw std::runtime_error(std::string("no conninfo in ") + pg + " (scripts/pg-test-cluster start)");
    static int made = 0;
    schema = std::string("t").append(std::to_string(::getpid())).append("_").append(std::to_string(++made));
    admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema);
  }
  ~temp_db() {
    std::filesystem::remove_all(dir);
    if (postgresql()) admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
  }
  bool postgresql() const { return !schema.empty(); }
  std::string path() const { return postgresql() ? conninfo + " options='-c search_path=" + schema + "'" : (dir / "folio.db").string(); }

 private:
  void admin(const std::string& sql) const {
    PGconn* c = PQconnectdb(conninfo.c_str());
    PGresult* r = PQexec(c, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string why = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    if (!ok) throw std::runtime_error("PostgreSQL: " + why);
  }
};

/// Another writer holding the write lock of `key` until release() (or the end of the object): on
/// SQLite the process's writer section, which every write takes; on PostgreSQL the key's lock
/// (database::write(key, f)), held by a transaction on a connection of its own.
class held_write {
 public:
  held_write(const temp_db& tmp, const std::string& key) {
    if (!tmp.postgresql()) {
      sqlite_ = std::unique_lock<std::timed_mutex>(svc::database::writer_mutex());
      return;
    }
    std::promise<void> locked;
    std::future<void> taken = locked.get_future();
    holder_ = std::async(std::launch::async, [this, target = tmp.path(), key, locked = std::move(locked)]() mutable {
      svc::database other{target, svc::responder::tables()};
      other.write(key, [&] {
        locked.set_value();
        release_.get_future().wait();
      });
    });
    taken.wait();
  }
  held_write(const held_write&) = delete;
  ~held_write() { release(); }
  void release() {
    if (sqlite_.owns_lock()) sqlite_.unlock();
    if (holder_.valid()) release_.set_value(), holder_.get();
  }

 private:
  std::unique_lock<std::timed_mutex> sqlite_;
  std::promise<void> release_;
  std::future<void> holder_;
};

/// Skips a test of one backend's own machinery (SQLite's page cap, its file, its writer mutex).
#define FOLIO_SQLITE_ONLY() \
  if (tmp.postgresql()) GTEST_SKIP() << "SQLite only"

struct fixture : ::testing::Test {
  fixture() = default;
  /// With `service` built from `settings` (a derived fixture's).
  explicit fixture(svc::config settings) : service{std::move(settings)} {}
  temp_db tmp;
  svc::database db{tmp.path(), svc::responder::tables()};
  svc::responder service{svc::config{}};
  std::string key, token;
  void SetUp() override {
    key = svc::create_key(db, "t", svc::now_iso());
    token = svc::create_token(db, key.substr(3, 16), "alice", false, std::nullopt, svc::now_iso());
  }
  svc::response call(const std::string& path, const std::string& body) { return call_on(service, db, path, body); }
  /// A request through another responder (a node, a restarted process: its own cache) on `on`.
  svc::response call_on(svc::responder& node, svc::database& on, const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    return node.handle(on, r);
  }
  /// Runs `per_node(n, node, node_db)` for n in [0, nodes) at once, each on a thread of its own with a
  /// responder and a connection of its own (another process or node), and returns what each returned.
  template <class F>
  std::vector<int> on_nodes(int nodes, F per_node) {
    std::vector<std::future<int>> done;
    for (int n = 0; n < nodes; ++n)
      done.push_back(std::async(std::launch::async, [&, n] {
        svc::responder node{svc::config{}};
        svc::database node_db{tmp.path(), svc::responder::tables()};
        return per_node(n, node, node_db);
      }));
    std::vector<int> out;
    for (auto& f : done) out.push_back(f.get());
    return out;
  }
  /// A push of `update` to the record of `ids` (`{"data":{...ids...`), under the incarnation a first
  /// sync (from the empty version) answers.
  svc::response push(const std::string& ids, const std::string& update) {
    const svc::response first = call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})");
    const rapidjson::Document answer = svc::parse_json(first.body);
    const std::string incarnation = answer.HasMember("result") ? answer["result"]["data"]["incarnation"].GetString() : "1";
    return call("/v2/crdt/sync", ids + R"(,"version":"AA==","incarnation":")" + incarnation + R"(","update":")" + svc::base64_encode(update) + "\"}}");
  }
};

}  // namespace folio_service_test
