// The platform (service/platform/) through the responder on a temporary database: the order of checks,
// deadlines, a full database, /metrics, the schema's migrations from schema 1, and client tokens
// through the server (the wire in tests/e2e/tokens_e2e.py).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <folio/document.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "annotations/store.hpp"
#include "crdt/record_session.hpp"
#include "annotations/schema.hpp"
#include "crdt/records.hpp"
#include "crdt/schema.hpp"
#include "platform/schema.hpp"
#include "platform/client_token.hpp"
#include "platform/fastcgi_params.hpp"
#include "platform/worker_shares.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

TEST_F(fixture, AWriteWhoseDeadlinePassedCommitsNothing) {
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"t")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"before"}})").http, 200);
  for (const std::string& path : {std::string("/v2/crdt/update"), std::string("/v2/commentannotations/add")}) {
    const std::string body = path == "/v2/crdt/update" ? ids + R"(,"data":"after"}})"
                                                        : R"({"data":{"organizationId":"o","documentId":"d","commentAnnotations":[{"annotationId":"a",)"
                                                          R"("from":{"userId":"u","name":"U","email":"u@e"},"commentData":[{"commentText":"x"}]}]}})";
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    r.deadline = svc::deadline_clock::now() + std::chrono::milliseconds(200);
    svc::response res;
    {
      // Another write of the same record (of the same annotated document) holds its lock past this
      // one's deadline: this process's writer section (SQLite), another node's lock (PostgreSQL).
      held_write writer(tmp, path == "/v2/crdt/update" ? svc::record_key{key.substr(3, 16), "o", "d", "t"}.cache_key()
                                                         : svc::document_key({key.substr(3, 16), "o", "d"}));
      auto f = std::async(std::launch::async, [&] { return service.handle(db, r); });
      std::this_thread::sleep_until(r.deadline + std::chrono::milliseconds(100));
      writer.release();
      res = f.get();
    }
    EXPECT_EQ(res.http, 503) << path;
    EXPECT_EQ(res.body, R"({"error":{"message":"The request did not finish in time; nothing was changed. Retry it.","status":"UNAVAILABLE"}})") << path;
  }
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"before")"), std::string::npos);
  EXPECT_NE(call("/v1/commentannotations/get", R"({"data":{"organizationId":"o","documentId":"d"}})").body.find(R"("data":[])"), std::string::npos);
  // With the time it needs, the same update commits.
  EXPECT_EQ(call("/v2/crdt/update", ids + R"(,"data":"after"}})").http, 200);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"after")"), std::string::npos);
}

TEST_F(fixture, ChecksComeInTheDocumentedOrder) {
  svc::request r{"GET", "/nope", "text/plain", "", "", "garbage", 7, {}, {}, {}};
  EXPECT_EQ(service.handle(db, r).http, 404);  // path first
  r.path = "/v2/crdt/get";
  EXPECT_EQ(service.handle(db, r).http, 400);  // then the method
  r.method = "POST";
  EXPECT_EQ(service.handle(db, r).http, 401);  // then credentials, before the body
  r.api_key = key, r.auth_token = token;
  EXPECT_EQ(service.handle(db, r).body, R"({"error":{"message":"Content-Type must be application/json.","status":"INVALID_ARGUMENT"}})");
  r.content_type = "application/json";
  r.content_length = (std::size_t(4) << 20) + 1;
  EXPECT_EQ(service.handle(db, r).http, 413);
  r.content_length = 7;
  EXPECT_EQ(service.handle(db, r).http, 400);  // the body last
}

/// A body of `n` letters no compressor or CRDT run can shrink much (a fixed pseudo-random sequence).
std::string letters(std::size_t n, std::uint32_t seed) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    s += static_cast<char>('a' + (seed >> 24) % 26);
  }
  return s;
}

std::string integrity(const std::string& path) {
  sqlite3* raw = nullptr;
  sqlite3_open(path.c_str(), &raw);
  std::string out;
  sqlite3_exec(
      raw, "PRAGMA integrity_check",
      [](void* o, int, char** v, char**) {
        *static_cast<std::string*>(o) += v[0] ? v[0] : "";
        return 0;
      },
      &out, nullptr);
  sqlite3_close(raw);
  return out;
}

// Group commit (platform/database.hpp): writers on several connections commit one after another and
// share the WAL's fsyncs — every write is there afterwards, read through a new connection, and there
// were fewer fsyncs than commits (one per commit when each waited for its own, as before).
TEST_F(fixture, ConcurrentWritesShareTheWalsFsyncs) {
  FOLIO_SQLITE_ONLY();
  constexpr int writers = 4, each = 100;
  std::vector<std::unique_ptr<svc::database>> connections;
  for (int w = 0; w < writers; ++w) connections.push_back(std::make_unique<svc::database>(tmp.path(), svc::responder::tables()));
  const svc::database::space before = db.usage();
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      svc::database& mine = *connections[std::size_t(w)];
      for (int i = 0; i < each; ++i)
        mine.write([&] {
          mine.sql("INSERT INTO meta (key, value) VALUES (?, 'v')").bind(1, "group-" + std::to_string(w) + "-" + std::to_string(i)).step();
        });
    });
  for (std::thread& t : threads) t.join();
  const svc::database::space after = db.usage();
  EXPECT_EQ(after.commits - before.commits, std::uint64_t(writers * each));
  EXPECT_LT(after.wal_syncs - before.wal_syncs, after.commits - before.commits);
  EXPECT_GT(after.wal_syncs, before.wal_syncs);
  svc::database reader(tmp.path(), svc::responder::tables());
  svc::query q = reader.sql("SELECT count(*) FROM meta WHERE key LIKE 'group-%'");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.integer(0), writers * each);
}

namespace wal_fault {
// A VFS over SQLite's default one whose write-ahead logs' xSync fails while `fail` is set: the
// group commit's fsync failing, as a disk error would make it.
std::atomic<bool> fail{false};
sqlite3_vfs* real = nullptr;
sqlite3_vfs shim;
struct file {
  sqlite3_file base;
  sqlite3_file* inner;  // the real VFS's file, in the same allocation after this one
  bool wal;
};
sqlite3_file* in(sqlite3_file* f) { return reinterpret_cast<file*>(f)->inner; }
sqlite3_io_methods methods = {
    3,
    [](sqlite3_file* f) { return in(f)->pMethods->xClose(in(f)); },
    [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) { return in(f)->pMethods->xRead(in(f), b, n, o); },
    [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) { return in(f)->pMethods->xWrite(in(f), b, n, o); },
    [](sqlite3_file* f, sqlite3_int64 n) { return in(f)->pMethods->xTruncate(in(f), n); },
    [](sqlite3_file* f, int flags) { return reinterpret_cast<file*>(f)->wal && fail ? SQLITE_IOERR_FSYNC : in(f)->pMethods->xSync(in(f), flags); },
    [](sqlite3_file* f, sqlite3_int64* n) { return in(f)->pMethods->xFileSize(in(f), n); },
    [](sqlite3_file* f, int l) { return in(f)->pMethods->xLock(in(f), l); },
    [](sqlite3_file* f, int l) { return in(f)->pMethods->xUnlock(in(f), l); },
    [](sqlite3_file* f, int* r) { return in(f)->pMethods->xCheckReservedLock(in(f), r); },
    [](sqlite3_file* f, int op, void* a) { return in(f)->pMethods->xFileControl(in(f), op, a); },
    [](sqlite3_file* f) { return in(f)->pMethods->xSectorSize(in(f)); },
    [](sqlite3_file* f) { return in(f)->pMethods->xDeviceCharacteristics(in(f)); },
    [](sqlite3_file* f, int pg, int sz, int e, void volatile** p) { return in(f)->pMethods->xShmMap(in(f), pg, sz, e, p); },
    [](sqlite3_file* f, int o, int n, int fl) { return in(f)->pMethods->xShmLock(in(f), o, n, fl); },
    [](sqlite3_file* f) { in(f)->pMethods->xShmBarrier(in(f)); },
    [](sqlite3_file* f, int d) { return in(f)->pMethods->xShmUnmap(in(f), d); },
    [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) { return in(f)->pMethods->xFetch(in(f), o, n, p); },
    [](sqlite3_file* f, sqlite3_int64 o, void* p) { return in(f)->pMethods->xUnfetch(in(f), o, p); },
};
int open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
  file* w = reinterpret_cast<file*>(f);
  w->inner = reinterpret_cast<sqlite3_file*>(w + 1);
  w->wal = (flags & SQLITE_OPEN_WAL) != 0;
  const int rc = real->xOpen(real, name, w->inner, flags, out);
  w->base.pMethods = rc == SQLITE_OK && w->inner->pMethods ? &methods : nullptr;
  return rc;
}
/// Makes the shim SQLite's default VFS until the end of the scope.
struct installed {
  installed() {
    real = sqlite3_vfs_find(nullptr);
    shim = *real;
    shim.zName = "folio-wal-fault";
    shim.szOsFile = static_cast<int>(sizeof(file)) + real->szOsFile;
    shim.xOpen = open;
    sqlite3_vfs_register(&shim, 1);
  }
  ~installed() {
    sqlite3_vfs_register(real, 1);
    sqlite3_vfs_unregister(&shim);
    fail = false;
  }
};
}  // namespace wal_fault

// A failed fsync of the WAL fails the writes it was to make durable and every later write of the file
// in this process (the kernel may forget the failed pages, so a later fsync proves nothing), and the
// database reports it as its write problem (/healthz unready) — even once the disk syncs again.
TEST_F(fixture, AFailedWalFsyncFailsThatWriteAndEveryLaterOne) {
  FOLIO_SQLITE_ONLY();
  const wal_fault::installed shim;
  svc::database d((tmp.dir / "fault.db").string(), svc::responder::tables());
  auto put = [&](const char* name) { d.write([&] { d.sql("INSERT INTO meta (key, value) VALUES (?, 'v')").bind(1, name).step(); }); };
  put("before");
  EXPECT_EQ(d.write_problem(), "");
  wal_fault::fail = true;
  try {
    put("during");
    ADD_FAILURE() << "the write was answered although its fsync failed";
  } catch (const svc::store_error& e) {
    EXPECT_EQ(e.kind, svc::failure::not_durable);
    EXPECT_NE(std::string(e.what()).find("an fsync of the write-ahead log failed"), std::string::npos) << e.what();
  }
  wal_fault::fail = false;
  EXPECT_THROW(put("after"), svc::store_error);
  EXPECT_NE(d.write_problem().find("restart folio-fcgi"), std::string::npos) << d.write_problem();
}

TEST_F(fixture, AFullDatabaseRefusesWritesKeepsReadsAndTakesWritesOnceSpaceReturns) {
  FOLIO_SQLITE_ONLY();  // SQLite's page cap
  const std::string full_error = R"({"error":{"message":"The database is full; the change was not stored.","status":"RESOURCE_EXHAUSTED"}})";
  ASSERT_EQ(call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"big","type":"text","data":")" + letters(40000, 7) + R"("}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":""}})").http, 200);
  const svc::response added = call("/v2/commentannotations/add", R"({"data":{"organizationId":"o","documentId":"d","commentAnnotations":[{"annotationId":"a","from":{"userId":"u1","name":"U","email":"u@example.com"},"commentData":[{"commentText":"first"}]}]}})");
  ASSERT_NE(added.body.find(R"("success":true)"), std::string::npos) << added.body;

  // Another connection (another responder) with the file capped a few pages above its size.
  svc::database capped(tmp.path(), svc::responder::tables(), static_cast<std::int64_t>(db.usage().pages) + 8);
  auto call_on = [&](svc::database& on, const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    return service.handle(on, r);
  };
  std::string acked;
  svc::response refused;
  for (int i = 0; i < 200 && refused.http == 200; ++i) {
    const std::string value = acked + letters(2000, static_cast<std::uint32_t>(i));
    refused = call_on(capped, "/v2/crdt/update", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","data":")" + value + R"("}})");
    if (refused.http == 200) acked = value;
  }
  EXPECT_EQ(refused.http, 429);
  EXPECT_EQ(refused.body, full_error);
  EXPECT_FALSE(acked.empty());
  // Comment writes are refused the same way (whatever fits in the last free bytes of a page is taken).
  svc::response comment;
  for (int i = 0; i < 50 && comment.http == 200; ++i)
    comment = call_on(capped, "/v2/commentannotations/comments/add",
                      R"({"data":{"organizationId":"o","documentId":"d","annotationId":"a","commentData":[{"from":{"userId":"u2","name":"V","email":"v@example.com"},"commentText":")" + letters(3000, 99u + static_cast<std::uint32_t>(i)) + R"("}]}})");
  EXPECT_EQ(comment.body, full_error);

  // Reads keep working and show the last acknowledged value; readiness says why it is not ready.
  svc::response got = call_on(capped, "/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})");
  EXPECT_EQ(got.http, 200);
  EXPECT_NE(got.body.find(R"("data":")" + acked + R"(")"), std::string::npos);
  EXPECT_EQ(call_on(capped, "/v2/commentannotations/get", R"({"data":{"organizationId":"o","documentId":"d"}})").http, 200);
  svc::request health{"GET", "/healthz", "", "", "", "", 0, {}, {}, {}};
  const svc::response not_ready = service.handle(capped, health);
  EXPECT_EQ(not_ready.http, 503);
  EXPECT_EQ(not_ready.body, R"({"error":{"message":"Not ready: the database is full (its page cap is reached).","status":"UNAVAILABLE"}})");
  health.query = "live";
  EXPECT_EQ(service.handle(capped, health).http, 200);
  EXPECT_EQ(integrity(tmp.path()), "ok");

  // Space returns: deleting a record frees pages under the same cap, and the refused write succeeds.
  EXPECT_EQ(call_on(capped, "/v2/crdt/delete", R"({"data":{"organizationId":"o","documentId":"d","editorId":"big"}})").http, 200);
  const std::string next = acked + "!";
  EXPECT_EQ(call_on(capped, "/v2/crdt/update", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","data":")" + next + R"("}})").http, 200);
  EXPECT_NE(call("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})").body.find(R"("data":")" + next + R"(")"),
            std::string::npos);
  health.query.clear();
  EXPECT_EQ(service.handle(db, health).http, 200);
  EXPECT_EQ(integrity(tmp.path()), "ok");
  // A fresh reader (empty cache) decodes the record to the same value: nothing half-written.
  svc::responder other{svc::config{}};
  EXPECT_NE(other.handle(db, svc::request{"POST", "/v2/crdt/get", "application/json", key, token, R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})", 0, {}, {}, {}})
                .body.find(R"("data":")" + next + R"(")"),
            std::string::npos);
}

// PostgreSQL: the server ends an idle connection (a restart, a failover, pg_terminate_backend): the
// next request notices before using it and reconnects, so it is answered as if nothing had happened.
// (The database down for good: 503 UNAVAILABLE, tests/e2e/faults_e2e.py's DatabaseDown.)
TEST_F(fixture, AConnectionTheServerEndedIsReopenedByTheNextRequest) {
  if (!tmp.postgresql()) GTEST_SKIP() << "PostgreSQL only";
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"kept"}})").http, 200);
  for (const std::string& path : {std::string("/v2/crdt/update"), std::string("/v2/crdt/get")}) {
    svc::query pid = db.sql("SELECT pg_backend_pid()");
    ASSERT_TRUE(pid.step());
    const std::string terminate = "SELECT pg_terminate_backend(" + std::to_string(pid.integer(0)) + ")";
    PGconn* admin = PQconnectdb(tmp.conninfo.c_str());
    PQclear(PQexec(admin, terminate.c_str()));
    PQfinish(admin);
    // Until the backend has exited, so its end of the connection is closed: it leaves pg_stat_activity
    // before that (a request in between would find the connection open and lose it mid-request: 503).
    // The test's cluster runs on this machine: its process is in /proc until it exits (a zombie has
    // closed its files too).
    const std::string stat = "/proc/" + std::to_string(pid.integer(0)) + "/stat";
    for (int waited = 0; waited < 1000; ++waited) {
      char text[512] = {};
      std::FILE* f = std::fopen(stat.c_str(), "r");  // stdio: a read of an exiting process fails (ESRCH), never throws
      const std::size_t n = f ? std::fread(text, 1, sizeof text - 1, f) : 0;
      if (f) std::fclose(f);
      const char* paren = n ? std::strrchr(text, ')') : nullptr;
      if (!paren || std::strncmp(paren + 1, " Z ", 3) == 0) break;  // gone, or a zombie
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const svc::response next = call(path, ids + (path == "/v2/crdt/update" ? R"(,"data":"next"}})" : "}}"));
    EXPECT_EQ(next.http, 200) << path << ": " << next.body;
  }
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"next")"), std::string::npos);
}

// database::key_hold: a key's write lock held across transactions (the record session's exclusive retry)
// makes writers of that key on other connections wait — up to their deadline — and nobody else; the
// holder's own writes of the key go through.
TEST_F(fixture, AKeyHoldMakesOtherConnectionsWritesOfThatKeyWait) {
  if (!tmp.postgresql()) GTEST_SKIP() << "PostgreSQL only (SQLite serialises every write of the file)";
  svc::database other{tmp.path(), svc::responder::tables()};
  auto write = [&](svc::database& conn, const std::string& record) {
    conn.set_deadline(svc::deadline_clock::now() + std::chrono::milliseconds(300));
    try {
      conn.write(record, [&] { conn.sql("UPDATE folio_schema SET version = version").step(); });
      return std::string("committed");
    } catch (const svc::deadline_exceeded&) {
      return std::string("waited past its deadline");
    }
  };
  auto lock_timeout = [](svc::database& conn) {
    svc::query q = conn.sql("SELECT current_setting('lock_timeout')");
    return q.step() ? q.text(0) : std::string("?");
  };
  {
    svc::database::key_hold hold(db, "record-a");
    EXPECT_EQ(write(other, "record-a"), "waited past its deadline");
    EXPECT_EQ(write(other, "record-b"), "committed");
    EXPECT_EQ(write(db, "record-a"), "committed");  // the holder's own write
    // A second hold of the key waits for the first no longer than its deadline, and leaves the
    // connection's lock_timeout as it was, whether it times out or not.
    other.set_deadline(svc::deadline_clock::now() + std::chrono::milliseconds(300));
    EXPECT_THROW(svc::database::key_hold(other, "record-a"), svc::deadline_exceeded);
    EXPECT_EQ(lock_timeout(other), "0");
    { svc::database::key_hold b(other, "record-b"); }
    EXPECT_EQ(lock_timeout(other), "0");
  }
  EXPECT_EQ(write(other, "record-a"), "committed");
  db.set_deadline(svc::deadline_clock::time_point::max());
}

TEST_F(fixture, MetricsCountRequestsWithoutCredentialsOrTenantData) {
  call("/v2/crdt/add", R"({"data":{"organizationId":"secret-org","documentId":"secret-doc","editorId":"e","type":"map","data":{"k":"v"}}})");
  call("/v2/crdt/get", R"({"data":{"organizationId":"secret-org","documentId":"secret-doc","editorId":"e"}})");
  call("/v2/crdt/get", R"({"data":{"organizationId":"secret-org","documentId":"secret-doc","editorId":"missing"}})");
  call("/v2/crdt/nope", "{}");
  svc::request m{"GET", "/metrics", "", "", "", "", 0, {}, {}, {}};
  const svc::response r = service.handle(db, m);
  EXPECT_EQ(r.http, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4");
  for (const char* line : {"folio_requests_total{endpoint=\"/v2/crdt/add\",status=\"200\"} 1\n", "folio_requests_total{endpoint=\"/v2/crdt/get\",status=\"200\"} 2\n",
                           "folio_requests_total{endpoint=\"other\",status=\"404\"} 1\n",
                           "folio_request_duration_seconds_bucket{endpoint=\"/v2/crdt/get\",le=\"+Inf\"} 2\n",
                           "folio_request_duration_seconds_count{endpoint=\"/v2/crdt/add\"} 1\n", "folio_doc_cache_hits_total 1\n",
                           "folio_doc_cache_entries 1\n", "# TYPE folio_request_duration_seconds histogram\n"})
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
  for (const std::string& secret : {std::string("secret-org"), std::string("secret-doc"), std::string("alice"), key.substr(3, 16), std::string("nope")})
    EXPECT_EQ(r.body.find(secret), std::string::npos) << secret;
  EXPECT_NE(r.body.find("folio_db_size_bytes "), std::string::npos);
  // The process's own gauges hold its real figures.
  for (const char* name : {"process_resident_memory_bytes", "process_open_fds", "folio_heap_allocated_bytes", "folio_heap_free_bytes"})
    EXPECT_NE(r.body.find("\n" + std::string(name) + " "), std::string::npos) << name;
  const auto gauge = [&](const std::string& name) { return std::stod(r.body.substr(r.body.find("\n" + name + " ") + name.size() + 2)); };
  EXPECT_GT(gauge("process_resident_memory_bytes"), 1e6);
  EXPECT_GE(gauge("process_open_fds"), 3);  // stdio and the database at least
#ifndef __SANITIZE_ADDRESS__  // ASan's allocator replaces glibc's, whose counts then stay near zero
  EXPECT_GT(gauge("folio_heap_allocated_bytes"), 1e5);
#endif
  m.method = "POST";
  EXPECT_EQ(service.handle(db, m).http, 400);
}

/// `path`'s schema as tests/golden/schema-sqlite.txt writes it: user_version, then sqlite_master in
/// creation order (type, name, table, SQL with newlines as \n), a line each.
std::string schema_of(const std::string& path) {
  sqlite3* raw = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  std::string out;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &st, nullptr);
  if (sqlite3_step(st) == SQLITE_ROW) out += "user_version\t" + std::to_string(sqlite3_column_int64(st, 0)) + "\n";
  sqlite3_finalize(st);
  sqlite3_prepare_v2(raw, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < 4; ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      std::string v = t ? reinterpret_cast<const char*>(t) : "";
      for (std::size_t at = 0; (at = v.find('\n', at)) != std::string::npos; at += 2) v.replace(at, 1, "\\n");
      out += v + (c == 3 ? "\n" : "\t");
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(raw);
  return out;
}

TEST_F(fixture, AFreshDatabaseHasThePinnedSchema) {
  FOLIO_SQLITE_ONLY();
  // Each family creates its own tables (docs/SERVICE.md); together they must make exactly the schema
  // the single migration list made before the split, table by table and in the same order.
  std::ifstream in(FOLIO_SCHEMA_GOLDEN);
  std::string golden, line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') golden += line + "\n";
  ASSERT_FALSE(golden.empty()) << "nothing read from " << FOLIO_SCHEMA_GOLDEN;
  EXPECT_EQ(schema_of(tmp.path()), golden);
}

/// What the row of annotation `id` holds of its comments (schema 9): nullopt for NULL (none held).
std::optional<std::string> held_comments(svc::database& db, const svc::annotation_scope& s, const std::string& id) {
  svc::query q = db.sql("SELECT comments FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
  q.bind(1, s.tenant).bind(2, s.org).bind(3, s.doc).bind(4, id);
  return q.step() ? q.text_opt(0) : std::optional<std::string>("(no such annotation)");
}

TEST(Store, MigratesASchema1DatabaseToTheCurrentOne) {
  temp_db tmp;
  FOLIO_SQLITE_ONLY();  // no PostgreSQL database is older than schema 4
  folio::document record(folio::record_type::text, 777);  // edited as the database's one server replica, as schema 1-3 did
  record.replace_text("kept");
  {
    // Schema 1 as shipped, with one annotation whose comments sit in its body and one text record.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &raw), SQLITE_OK);
    const char* v1 = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
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
CREATE TABLE api_keys (
  key_id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT) WITHOUT ROWID;
CREATE TABLE tokens (
  token_id TEXT PRIMARY KEY, key_id TEXT NOT NULL REFERENCES api_keys(key_id), subject TEXT NOT NULL,
  read_only INTEGER NOT NULL, expires_at TEXT, salt BLOB NOT NULL, hash BLOB NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT) WITHOUT ROWID;
INSERT INTO meta VALUES ('server_replica', '777');
INSERT INTO annotations VALUES ('t', 'o', 'd', 'a1', 'L1', 'u1', '2025-01-01T00:00:00.000Z',
  '{"annotationId":"a1","color":"#f00","comments":[{"commentId":2,"commentText":"two"},{"commentId":1,"commentText":"one"}],"createdAt":"2025-01-01T00:00:00.000Z","lastUpdated":"2025-01-02T00:00:00.000Z","status":{"id":"RESOLVED"}}');
PRAGMA user_version = 1;
)sql";
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "INSERT INTO crdt_records VALUES ('t', 'o', 'd', 'e', 'text', 'content', ?, 0, 1, '2025-01-01T00:00:00.000Z', 'u', NULL)",
                                 -1, &st, nullptr),
              SQLITE_OK);
    const std::string snapshot = record.encode();
    sqlite3_bind_blob(st, 1, snapshot.data(), static_cast<int>(snapshot.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(raw);
  }
  svc::database db(tmp.path(), svc::responder::tables());
  EXPECT_EQ(db.version(), svc::responder::tables().version());
  // 2: comments in their own table; 3: listed in the order they were before (commentId), and a comment
  // added now comes after them, whatever its id.
  const svc::annotation_scope s{"t", "o", "d"};
  std::vector<svc::annotation_head> found;
  std::string comments;  // as a thread's answer lists them (the scan hands over one or more at a time, comma-separated)
  svc::scan_threads(db, s, {}, {[&](const svc::annotation_head& a) { return found.push_back(a), true; }, [&](std::string_view c) {
                      comments += (comments.empty() ? "" : ",") + std::string(c);
                    }});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].body, R"({"annotationId":"a1","color":"#f00","createdAt":"2025-01-01T00:00:00.000Z","lastUpdated":"2025-01-02T00:00:00.000Z",)"
                           R"("status":{"id":"RESOLVED"}})");
  EXPECT_EQ(comments, R"({"commentId":1,"commentText":"one"},{"commentId":2,"commentText":"two"})");
  EXPECT_EQ(held_comments(db, s, "a1"), comments);  // 9: held in the annotation's row
  svc::annotation_filter by_status;
  by_status.statuses = {"RESOLVED"};
  by_status.updated_after = "2025-01-01T12:00:00.000Z";
  EXPECT_EQ(svc::match_annotations(db, s, by_status), std::vector<std::string>{"a1"});
  EXPECT_EQ(svc::load_annotation(db, s, "a1")->next_comment_id, 3);
  db.write([&] { svc::insert_comment(db, s, "a1", 0, R"({"commentId":0,"commentText":"zero"})"); });
  EXPECT_EQ(svc::comment_ids(db, s, "a1"), (std::vector<std::int64_t>{1, 2, 0}));
  // 4: the record's incarnation is the replica it was edited as, so the service goes on editing it as
  // that replica.
  const std::optional<svc::record_row> row = svc::load_record(db, {"t", "o", "d", "e"});
  ASSERT_TRUE(row);
  EXPECT_EQ(row->incarnation, 777u);
}

/// A module's migrations up to `version` (a database as an older build left it).
svc::module_migrations up_to(svc::module_migrations m, int version) {
  auto cut = [&](std::span<const svc::migration> steps) {
    std::size_t n = 0;
    while (n < steps.size() && steps[n].version <= version) ++n;
    return steps.first(n);
  };
  return {cut(m.sqlite), cut(m.postgresql)};
}

// Schema 5 moves each record's snapshot out of crdt_records: a database schema 4 left (on either
// backend) keeps its records, and their snapshots, through the migration. The snapshot is one an
// earlier build wrote (document format version 1, tests/golden/version1/), which still decodes. Its
// log holds a change numbered as builds before schema 7 numbered them (by position, from 0); a change
// logged now (under its revision) comes after it.
TEST(Store, MigratesASchema4DatabaseToTheCurrentOne) {
  temp_db tmp;
  std::ifstream v1(std::string(FOLIO_GOLDEN_DIR) + "/version1/text-pair.doc", std::ios::binary);
  const std::string snapshot((std::istreambuf_iterator<char>(v1)), std::istreambuf_iterator<char>());
  ASSERT_EQ(snapshot.substr(0, 4), std::string("Fo\x01" "D"));
  std::optional<folio::document> client;  // another replica's edits, logged by the old build and by this one
  ASSERT_TRUE(folio::document::decode(snapshot, 99, client));
  const std::string first = client->encode_change(client->replace_text("Hallo brave world! 😀 bis morgen"));
  const std::string second = client->encode_change(client->replace_text("Hallo world! 😀 bis morgen"));
  {
    const svc::schema v4 = svc::schema().add(up_to(svc::platform_migrations(), 4)).add(up_to(svc::crdt_migrations(), 4))
                               .add(up_to(svc::annotation_migrations(), 4));
    ASSERT_EQ(v4.version(), 4);
    svc::database old(tmp.path(), v4);
    old.write([&] {
      old.sql("INSERT INTO crdt_records (tenant, org, doc, editor, type, content_key, snapshot, log_len, revision, last_update, last_updated_by, "
              "session_id, incarnation) VALUES ('t', 'o', 'd', 'e', 'text', 'content', ?, 1, 3, '2026-01-01T00:00:00.000Z', 'u', NULL, 7)")
          .bind_blob(1, snapshot)
          .step();
      old.sql("INSERT INTO crdt_log (tenant, org, doc, editor, seq, batch) VALUES ('t', 'o', 'd', 'e', 0, ?)").bind_blob(1, first).step();
      // A thread whose comments are listed in another order than their ids (schema 3's positions).
      old.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, "
              "next_comment_id) VALUES ('t', 'o', 'd', 'a', 'l', 'u', '2026-01-01T00:00:00.000Z', '{}', 'OPEN', '2026-01-01T00:00:00.000Z', 4)")
          .step();
      old.sql("INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) VALUES "
              "('t', 'o', 'd', 'a', 3, '{\"commentId\":3}', 2), ('t', 'o', 'd', 'a', 1, '{\"commentId\":1}', 2), ('t', 'o', 'd', 'a', 2, '{\"commentId\":2}', 1)")
          .step();
      // The same annotation id in another document, and in another tenant's: their own threads.
      old.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, "
              "next_comment_id) VALUES ('t', 'o', 'd2', 'a', 'l', 'u', '2025-01-01T00:00:00.000Z', '{}', 'OPEN', '2025-01-01T00:00:00.000Z', 2), "
              "('t2', 'o', 'd', 'a', 'l', 'u', '2025-01-01T00:00:00.000Z', '{}', 'OPEN', '2025-01-01T00:00:00.000Z', 2)")
          .step();
      old.sql("INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) VALUES "
              "('t', 'o', 'd2', 'a', 1, '{\"in\":\"d2\"}', 2), ('t2', 'o', 'd', 'a', 1, '{\"in\":\"t2\"}', 2)")
          .step();
      // A thread with no comment, and one whose comments pass what a row holds (schema 9): 65,536 bytes
      // with the commas between them hold, one byte more does not.
      for (const char* id : {"none", "bound", "past"})
        old.sql("INSERT INTO annotations (tenant, org, doc, annotation_id, location_id, user_id, created_at, body, status_id, last_updated, "
                "next_comment_id) VALUES ('t', 'o', 'd3', ?, 'l', 'u', '2025-01-01T00:00:00.000Z', '{}', 'OPEN', '2025-01-01T00:00:00.000Z', 5)")
            .bind(1, id)
            .step();
      for (const char* id : {"bound", "past"})
        for (int n = 1; n <= 4; ++n) {
          // 3 bodies of 16,384 bytes, one of 16,381 and 3 commas: 65,536 bytes for "bound"; in "past" one
          // character of the last takes two bytes (the bound counts bytes, not characters)
          std::string body = "{\"c\":\"" + std::string(n == 4 ? 16373 : 16376, 'y') + "\"}";
          if (std::string(id) == "past" && n == 4) body.replace(6, 1, "\xc3\xa9");
          old.sql("INSERT INTO annotation_comments (tenant, org, doc, annotation_id, comment_id, body, position) VALUES ('t', 'o', 'd3', ?, ?, ?, ?)")
              .bind(1, id).bind(2, std::int64_t(n)).bind(3, body).bind(4, std::int64_t(n))
              .step();
        }
    });
  }
  svc::database db(tmp.path(), svc::responder::tables());
  EXPECT_EQ(db.version(), 11);
  const svc::record_key k{"t", "o", "d", "e"};
  std::optional<svc::record_row> row = svc::load_record(db, k);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->revision, 3);
  EXPECT_EQ(row->snapshot, snapshot);
  EXPECT_EQ(row->log_bytes, static_cast<std::int64_t>(first.size()));  // counted by the migration
  EXPECT_EQ(row->snapshot_bytes, static_cast<std::int64_t>(snapshot.size()));
  std::optional<folio::document> back;
  ASSERT_TRUE(folio::document::decode(row->snapshot, row->incarnation, back));
  EXPECT_EQ(back->text(), "Hallo brave world! 😀 bis übermorgen");
  db.write([&] { EXPECT_EQ(svc::append_change(db, k, *row, &second, "2026-01-02T00:00:00.000Z", "u", std::nullopt), 4); });
  row = svc::load_record(db, k);
  const std::vector<svc::logged_change> log = svc::load_log(db, k);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(row->log_len, 2);
  EXPECT_EQ(row->log_bytes, static_cast<std::int64_t>(first.size() + second.size()));
  EXPECT_EQ(log[0].revision, 0);  // its position, as logged by the old build
  EXPECT_EQ(log[1].revision, 4);
  EXPECT_EQ(log[1].batch, second);
  EXPECT_EQ(svc::fold_log(*row, log).text(), "Hallo world! 😀 bis morgen");
  // The thread keeps its order through the migrations, and its comment ids stay unique in it.
  const svc::annotation_scope s{"t", "o", "d"};
  EXPECT_EQ(svc::comment_ids(db, s, "a"), (std::vector<std::int64_t>{2, 1, 3}));  // 8: a tie of positions (no build wrote one) by comment id
  // 9: each thread's row holds its comments in that order, within the bound; none for none.
  EXPECT_EQ(held_comments(db, s, "a"), std::optional<std::string>(R"({"commentId":2},{"commentId":1},{"commentId":3})"));
  EXPECT_EQ(held_comments(db, {"t", "o", "d2"}, "a"), std::optional<std::string>(R"({"in":"d2"})"));
  EXPECT_EQ(held_comments(db, {"t2", "o", "d"}, "a"), std::optional<std::string>(R"({"in":"t2"})"));
  const svc::annotation_scope d3{"t", "o", "d3"};
  EXPECT_EQ(held_comments(db, d3, "none"), std::optional<std::string>(""));
  ASSERT_TRUE(held_comments(db, d3, "bound"));
  EXPECT_EQ(held_comments(db, d3, "bound")->size(), svc::held_comments_max);
  EXPECT_EQ(held_comments(db, d3, "past"), std::nullopt);
  std::string listed;  // either way, a read gives every thread whole
  svc::scan_threads(db, d3, {}, {[&](const svc::annotation_head& h) { return listed += "[" + h.id, true; }, [&](std::string_view c) {
                      listed += std::to_string(c.size()) + ";";
                    }});
  EXPECT_EQ(listed, "[bound65536;[none[past16384;16384;16384;16382;");
  db.write([&] {
    EXPECT_FALSE(svc::insert_comment(db, s, "a", 1, R"({"commentId":1,"again":true})"));
    EXPECT_TRUE(svc::insert_comment(db, s, "a", 5, R"({"commentId":5})"));
  });
  EXPECT_EQ(svc::comment_ids(db, s, "a"), (std::vector<std::int64_t>{2, 1, 3, 5}));
  EXPECT_EQ(svc::load_comment(db, s, "a", 1), std::optional<std::string>(R"({"commentId":1})"));
  std::string thread;
  svc::scan_listed_threads(db, s, {"a"}, {}, {[](const svc::annotation_head&) { return true; }, [&](std::string_view c) { thread += std::string(c) + ';'; }},
                           [] { ADD_FAILURE() << "a is there"; });
  EXPECT_EQ(thread, R"({"commentId":2};{"commentId":1};{"commentId":3};{"commentId":5};)");
  // 8: comments keyed by their annotation's integer key: each thread kept its own.
  for (const auto& [scope, body] : {std::pair<svc::annotation_scope, std::string>{{"t", "o", "d2"}, R"({"in":"d2"})"},
                                    std::pair<svc::annotation_scope, std::string>{{"t2", "o", "d"}, R"({"in":"t2"})"}}) {
    EXPECT_EQ(svc::comment_ids(db, scope, "a"), std::vector<std::int64_t>{1}) << scope.tenant << scope.doc;
    EXPECT_EQ(svc::load_comment(db, scope, "a", 1), std::optional<std::string>(body));
  }
  db.write([&] { EXPECT_TRUE(svc::delete_annotation(db, s, "a")); });
  EXPECT_EQ(svc::comment_ids(db, {"t", "o", "d2"}, "a"), std::vector<std::int64_t>{1});  // another document's thread stays
  svc::query left = db.sql("SELECT count(*) FROM annotation_comments");
  ASSERT_TRUE(left.step());
  EXPECT_EQ(left.integer(0), 2 + 8);  // the deleted thread's comments went with it (d3's threads keep theirs)
  if (db.kind() == svc::dialect::sqlite) {  // the copy's keys are counted: none is handed out again (AUTOINCREMENT)
    svc::query seq = db.sql("SELECT seq FROM sqlite_sequence WHERE name = 'annotations'");
    ASSERT_TRUE(seq.step());
    EXPECT_EQ(seq.integer(0), 6);
  }
}

TEST(Store, OpensACurrentDatabaseAndRefusesANewerOneWhileAnotherProcessHoldsTheWriteLock) {
  // folio-fcgi's workers open their connections after the socket listens: one that waited for another
  // process's write lock (the schema check ran in a write transaction, with no deadline) stalled every
  // request queued for it. The raw connection below stands for that process (a backup, sqlite3).
  temp_db tmp;
  FOLIO_SQLITE_ONLY();
  const int target = [&] {
    svc::database created(tmp.path(), svc::responder::tables());
    return created.version();
  }();
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &other), SQLITE_OK);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> close_other(other, sqlite3_close);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  {
    svc::database opened(tmp.path(), svc::responder::tables());  // the lock held: reads the version, writes nothing
    EXPECT_EQ(opened.version(), target);
  }
  // A newer build's schema is refused as such, not after waiting for the lock (then as "busy").
  const std::string newer = std::to_string(target + 1);
  ASSERT_EQ(sqlite3_exec(other, ("PRAGMA user_version = " + newer + "; COMMIT; BEGIN IMMEDIATE").c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  try {
    svc::database refused(tmp.path(), svc::responder::tables());
    ADD_FAILURE() << "a database of schema " << newer << " was opened";
  } catch (const svc::store_error& e) {
    EXPECT_EQ(std::string(e.what()), "database schema " + newer + " is newer than this build's");
  }
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
}

// The query planner's statistics (database::tend_statistics): a query that two indexes fit, on a
// table never analysed, goes through the one that leaves more rows to check (here: the user index,
// 500 rows, where the location index gives 40); at the connection's first tending of its statistics
// (a worker's first request), the table is analysed and the same query takes the location index.
TEST(Store, TendedStatisticsLetThePlannerPickTheNarrowerIndex) {
  temp_db tmp;
  FOLIO_SQLITE_ONLY();  // PostgreSQL: autovacuum analyses its tables
  svc::database db(tmp.path(), svc::responder::tables());
  const svc::annotation_scope s{"t", "o", "d"};
  db.write([&] {
    for (int i = 0; i < 2000; ++i) {
      const std::string at = "2025-01-01T00:00:00.000Z";
      ASSERT_TRUE(svc::insert_annotation(db, s, {"a" + std::to_string(i), "loc-" + std::to_string(i % 50), "u" + std::to_string(i % 4), "OPEN", at, at, "{}", 1}));
    }
  });
  svc::annotation_filter f;
  f.locations = {"loc-7"}, f.users = {"u3"};
  auto plan = [&] {
    svc::query q = db.prepare("EXPLAIN QUERY PLAN SELECT annotation_id FROM annotations WHERE tenant=? AND org=? AND doc=? AND location_id IN (?) AND user_id IN (?)");
    q.bind(1, s.tenant).bind(2, s.org).bind(3, s.doc).bind(4, f.locations[0]).bind(5, f.users[0]);
    std::string out;
    while (q.step()) out += q.text(3) + ";";
    return out;
  };
  const std::vector<std::string> matching = svc::match_annotations(db, s, f);  // the connection queries the table
  EXPECT_EQ(matching.size(), 20u);
  EXPECT_NE(plan().find("annotations_by_user"), std::string::npos) << plan();
  db.tend_statistics();
  EXPECT_NE(plan().find("annotations_by_location"), std::string::npos) << plan();
  EXPECT_EQ(svc::match_annotations(db, s, f), matching);
  // The schedule: calls 1, 2, 4, ..., 128, then every 256th.
  std::vector<std::uint64_t> due;
  for (std::uint64_t call = 1; call <= 1024; ++call)
    if (svc::database::statistics_due(call)) due.push_back(call);
  EXPECT_EQ(due, (std::vector<std::uint64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024}));
}

// Every responder reads the revoked API keys at each revocation tick (server.hpp, read_revoked_keys): the read
// goes through the partial index of revoked keys (schema 10), linear in them rather than in all keys.
TEST_F(fixture, TheRevokedKeysAreReadThroughTheirIndex) {
  const char* read = "SELECT key_id FROM api_keys WHERE revoked_at IS NOT NULL";
  std::string plan;
  if (db.kind() == svc::dialect::sqlite) {
    svc::query q = db.prepare(std::string("EXPLAIN QUERY PLAN ") + read);
    while (q.step()) plan += q.text(3) + ";";
  } else {
    db.exec("SET enable_seqscan = off");  // a table of a few rows is scanned whole otherwise
    svc::query q = db.prepare(std::string("EXPLAIN ") + read);
    while (q.step()) plan += q.text(0) + ";";
    db.exec("RESET enable_seqscan");
  }
  EXPECT_NE(plan.find("api_keys_revoked"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("api_keys_revoked"), plan.rfind("api_keys_revoked")) << plan;
  EXPECT_EQ(service.platform().read_revoked_keys(db), std::vector<std::string>{});
  ASSERT_TRUE(svc::revoke_key(db, key.substr(3, 16), svc::now_iso()));
  EXPECT_EQ(service.platform().read_revoked_keys(db), std::vector<std::string>{key.substr(3, 16)});
}

// Client tokens through the server (service/platform/client_token.hpp; the wire in tests/e2e/tokens_e2e.py).
struct tokens : fixture {
  void SetUp() override {
    fixture::SetUp();
    service.platform().set_client_keys(std::make_shared<const svc::key_ring>(svc::key_ring::parse("k1 " + std::string(64, 'b'))));
    call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":"hi"}})");
  }
  svc::response bearer(const std::string& path, const std::string& body, const std::string& client) {
    svc::request r{"POST", path, "application/json", {}, {}, body, body.size(), {}, {}, {}};
    r.authorization = "Bearer " + client;
    return service.handle(db, r);
  }
  rapidjson::Document mint(const std::string& data) {
    const svc::response res = call("/v2/auth/token", R"({"data":{"organizationId":"o","documentId":"d",)" + data + "}}");
    EXPECT_EQ(res.http, 200) << res.body;
    return svc::parse_json(res.body);
  }
  static std::string error_of(const svc::response& r) { return svc::parse_json(r.body)["error"]["message"].GetString(); }
};

TEST_F(tokens, MintedTokensOpenTheirRecordOnly) {
  const rapidjson::Document answer = mint(R"("userId":"ana","access":"read","expiresInSeconds":60)");
  const std::string client = answer["result"]["data"]["token"].GetString();
  EXPECT_EQ(std::string(answer["result"]["message"].GetString()), "Client token created.");
  const svc::response got = bearer("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})", client);
  EXPECT_EQ(got.http, 200) << got.body;
  EXPECT_NE(got.body.find("\"data\":\"hi\""), std::string::npos);
  const svc::response other = bearer("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d2"}})", client);
  EXPECT_EQ(other.http, 403);
  EXPECT_EQ(error_of(other), "The client token does not cover this documentId.");
  // Another endpoint: refused before the body is parsed (this one is not JSON).
  const svc::response update = bearer("/v2/crdt/update", "{", client);
  EXPECT_EQ(update.http, 403);
  EXPECT_EQ(error_of(update), "A client token opens only /v2/crdt/get, /v2/crdt/sync and /v2/crdt/subscribe.");
  EXPECT_EQ(bearer("/v2/crdt/get", "{}", client.substr(1)).http, 401);
}

TEST_F(tokens, AnExpiredTokenNamesItsExpiry) {
  svc::client_claims c;
  c.tenant = key.substr(3, 16), c.org = "o", c.doc = "d", c.user = "ana", c.expires = 1700000000;
  const std::string client = svc::sign_client_token(c, service.platform().client_keys()->signer());
  const svc::response r = bearer("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d"}})", client);
  EXPECT_EQ(r.http, 401);
  EXPECT_EQ(error_of(r), "The client token expired at 2023-11-14T22:13:20.000Z.");
  EXPECT_EQ(std::string(svc::parse_json(r.body)["error"]["status"].GetString()), "UNAUTHENTICATED");
}

TEST_F(tokens, NoClientTokenOutlivesItsMinter) {
  const std::int64_t soon = svc::now_unix_ms() + 120000;
  const std::string expires = svc::iso_time(soon);
  token = svc::create_token(db, key.substr(3, 16), "backend", false, expires, svc::now_iso());
  const rapidjson::Document answer = mint(R"("userId":"ana","access":"write")");
  EXPECT_EQ(std::string(answer["result"]["data"]["expiresAt"].GetString()), svc::iso_time(soon / 1000 * 1000));
}

TEST_F(tokens, WithoutKeysMintingAndBearersAreUnavailable) {
  const rapidjson::Document answer = mint(R"("userId":"ana","access":"write")");
  const std::string client = answer["result"]["data"]["token"].GetString();
  service.platform().set_client_keys(nullptr);
  const svc::response m = call("/v2/auth/token", R"({"data":{"organizationId":"o","documentId":"d","userId":"u","access":"read"}})");
  EXPECT_EQ(m.http, 503);
  EXPECT_EQ(error_of(m), "Client tokens are not configured on this server.");
  const svc::response g = bearer("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d"}})", client);
  EXPECT_EQ(g.http, 503);
  EXPECT_EQ(error_of(g), "Client tokens are not configured on this server.");
}

TEST(Clock, IsoTimeWritesWhatTheCLibraryConvertsForEveryKindOfDate) {
  auto reference = [](std::int64_t ms) {  // gmtime_r and printf, as iso_time did
    const std::int64_t secs_floor = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
    const std::time_t secs = static_cast<std::time_t>(secs_floor);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms - secs_floor * 1000));
    return std::string(buf);
  };
  std::vector<std::int64_t> at = {0, 1, 999, 1000, 86399999, 86400000, 951782400000 /* 2000-02-29 */, 4107456000000 /* 2100-02-28 */,
                                  4107542400000 /* 2100-03-01 */, 13574563200000 /* 2400-02-29 */, 253402300799999, 253402300800000, -1, -86400001};
  std::mt19937_64 rng(23);
  for (int i = 0; i < 100000; ++i) at.push_back(static_cast<std::int64_t>(rng() % 253402300800000));
  for (std::int64_t ms : at) ASSERT_EQ(svc::iso_time(ms), reference(ms)) << ms;
  EXPECT_EQ(svc::iso_time(951782400123), "2000-02-29T00:00:00.123Z");
}

TEST(FastcgiParams, ReadsEachWantedNameOnceTheFirstEntryWinning) {
  // What nginx/folio.conf sends, in another order, among entries folio does not read.
  const char* const envp[] = {"HTTP_X_FOLIO_API_KEY_OLD=stale",  // a longer name that starts like a wanted one
                              "REQUEST_METHOD=POST",
                              "GATEWAY_INTERFACE=CGI/1.1",
                              "DOCUMENT_URI=/v2/crdt/get",
                              "SCRIPT_NAME=/ignored-when-DOCUMENT_URI-is-there",
                              "CONTENT_TYPE=application/json; charset=utf-8",
                              "CONTENT_LENGTH=42",
                              "HTTP_X_FOLIO_API=not the key",  // a shorter one
                              "HTTP_X_FOLIO_API_KEY=fk_1=with=equals",
                              "http_x_folio_auth_token=wrong case",
                              "HTTP_X_FOLIO_AUTH_TOKEN=ft_1",
                              "HTTP_X_FOLIO_API_KEY=fk_second",  // repeated: the first one counts
                              "HTTP_AUTHORIZATION",  // no '=': not an entry (taking it as empty would hide the next)
                              "HTTP_AUTHORIZATION=Bearer ct",
                              "QUERY_STRING=live",
                              "QUERY_STRING=ignored",
                              "FOLIO_REQUEST_ID=abc123",
                              "FOLIO_REQUEST_START=1764370000.123",
                              "FOLIO_CHANNEL=ch",
                              nullptr};
  svc::request r;
  const svc::request_params p = svc::read_params(envp, r);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v2/crdt/get");
  EXPECT_EQ(r.content_type, "application/json; charset=utf-8");
  EXPECT_EQ(p.content_length, "42");
  EXPECT_EQ(r.api_key, "fk_1=with=equals");
  EXPECT_EQ(r.auth_token, "ft_1");
  EXPECT_EQ(r.authorization, "Bearer ct");
  EXPECT_EQ(r.query, "live");
  EXPECT_EQ(r.request_id, "abc123");
  EXPECT_EQ(p.start, "1764370000.123");
  EXPECT_EQ(r.channel, "ch");
}

TEST(FastcgiParams, AbsentNamesReadAsEmptyAndThePathFallsBackToScriptName) {
  const char* const envp[] = {"SCRIPT_NAME=/healthz", "DOCUMENT_URI=", "QUERY_STRING=", nullptr};
  svc::request r;
  const svc::request_params p = svc::read_params(envp, r);
  EXPECT_EQ(r.path, "/healthz");
  EXPECT_EQ(r.query, "");  // present and empty
  EXPECT_EQ(r.method, "");
  EXPECT_EQ(r.api_key, "");
  EXPECT_EQ(p.start, "");
  EXPECT_EQ(p.content_length, "");
  svc::request none;
  svc::read_params(nullptr, none);  // libfcgi's list before any parameter
  EXPECT_EQ(none.path, "");
}

/// Jobs 0..n-1 for the worker_shares tests (each job is its number).
std::vector<std::unique_ptr<int>> numbered_jobs(int n) {
  std::vector<std::unique_ptr<int>> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back(std::make_unique<int>(i));
  return jobs;
}

TEST(WorkerShares, ATenantHoldsAtMostItsShareAndItsWaitingRequestsRunInOrder) {
  svc::worker_shares<int> shares(16, 2, 2, 3);  // workers enough that the reserve never holds one back
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  auto job = [](int n) { return std::make_unique<int>(n); };
  std::unique_ptr<int> a1 = job(1), a2 = job(2), a3 = job(3), a4 = job(4), a5 = job(5), b1 = job(6), b2 = job(7), c1 = job(8);
  EXPECT_EQ(shares.admit("a", a1), adm::run);
  EXPECT_EQ(shares.admit("a", a2), adm::run);
  EXPECT_EQ(shares.admit("a", a3), adm::wait);  // a holds its share: a3 waits without a worker
  EXPECT_EQ(a3, nullptr);
  EXPECT_EQ(shares.admit("a", a4), adm::wait);
  EXPECT_EQ(shares.admit("a", a5), adm::refuse);  // a's queue is full
  EXPECT_EQ(*a5, 5);
  EXPECT_EQ(shares.admit("b", b1), adm::run);  // another tenant runs at once
  EXPECT_EQ(shares.admit("b", b2), adm::run);
  EXPECT_EQ(shares.holding("a"), 2u);
  EXPECT_EQ(shares.holding("b"), 2u);
  EXPECT_EQ(shares.waiting("a"), 2u);
  EXPECT_EQ(shares.running(), 4u);
  // Another worker accepts: a's request ends and its hold passes to a3, which the free worker runs.
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.finish("a");
  EXPECT_EQ(shares.holding("a"), 2u);
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(3, std::string("a")));
  std::unique_ptr<int> c2 = job(9);
  EXPECT_EQ(shares.admit("a", c2), adm::wait);
  shares.finish("a");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 4);
  shares.finish("a");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 9);
  shares.finish("a");  // none waits: the hold is released
  EXPECT_EQ(shares.holding("a"), 1u);
  EXPECT_EQ(shares.admit("c", c1), adm::run);
  shares.finish("a");
  EXPECT_EQ(shares.holding("a"), 0u);
  EXPECT_TRUE(shares.take_waiting().empty());
}

TEST(WorkerShares, AFreeWorkerAcceptsWhenNoOtherDoesHoweverManyTenantsAreAtTheirShare) {
  // Shares of two, tenants a and b at theirs with requests waiting; workers enough that the reserve
  // never holds one back.
  svc::worker_shares<int> shares(16, 2, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  std::vector<std::unique_ptr<int>> jobs = numbered_jobs(8);
  for (int i : {0, 1}) EXPECT_EQ(shares.admit("a", jobs[i]), adm::run);
  for (int i : {2, 3}) EXPECT_EQ(shares.admit("a", jobs[i]), adm::wait);
  for (int i : {4, 5}) EXPECT_EQ(shares.admit("b", jobs[i]), adm::run);
  for (int i : {6, 7}) EXPECT_EQ(shares.admit("b", jobs[i]), adm::wait);
  // A request of a ends while no worker accepts: its worker accepts, a's next request waits ready.
  shares.finish("a");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  EXPECT_EQ(shares.waiting("a"), 2u);
  EXPECT_EQ(shares.holding("a"), 2u);  // 1 running, 1 ready: a still holds no more than its share
  std::unique_ptr<int> c = std::make_unique<int>(100);
  shares.accepted();
  EXPECT_EQ(shares.admit("c", c), adm::run);  // tenant c's request runs at once
  // A request of b ends while no worker accepts: that worker accepts too.
  shares.finish("b");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  // c's ends: another worker accepts, so this one runs the first ready request (a's, then b's).
  shares.finish("c");
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(2, std::string("a")));
  shares.finish("a");  // a's last waiting request becomes ready, behind b's
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(6, std::string("b")));
  // A new request of a, with a hold free but a's earlier request ready: it waits behind it.
  std::unique_ptr<int> a_late = std::make_unique<int>(101);
  shares.finish("a");  // a: 1 running (job 1), 1 ready (job 3), 0 queued
  EXPECT_EQ(shares.admit("a", a_late), adm::wait);
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 3);
  // At stop the accepting worker is back: free workers run what is ready without accepting, then end.
  shares.accepted();
  s = shares.next(false);
  EXPECT_EQ(s.kind, step::accept);  // nobody else accepts: ready requests wait for a worker that finishes
  shares.accepted();
  s = shares.next(true);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 101);
  EXPECT_EQ(shares.next(true).kind, step::exit);
  EXPECT_EQ(shares.waiting(), 1u);  // b's job 7: queued until one of b's running requests ends
  shares.finish("b");
  s = shares.next(true);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 7);
}

TEST(WorkerShares, TheLastFreeWorkerIsKeptForTenantsWithNoneRunning) {
  // Four workers, the default share of three. The calls follow what the workers do: each admit is a
  // worker that accepted; after wait (or refuse) that worker asks next().
  svc::worker_shares<int> shares(4, 3, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  auto job = [](int n) { return std::make_unique<int>(n); };
  std::unique_ptr<int> a1 = job(1), a2 = job(2), a3 = job(3), a4 = job(4), b1 = job(11), b2 = job(12), c1 = job(21);
  EXPECT_EQ(shares.admit("a", a1), adm::run);
  EXPECT_EQ(shares.admit("a", a2), adm::run);
  EXPECT_EQ(shares.admit("b", b1), adm::run);  // b has none running: it may start with one worker left
  EXPECT_EQ(shares.admit("a", a3), adm::wait);  // a has two running: the last worker is kept
  EXPECT_EQ(shares.holding("a"), 3u);           // a3 is ready, on a's third hold
  EXPECT_EQ(shares.next(false).kind, step::accept);  // the last worker accepts again
  shares.accepted();
  EXPECT_EQ(shares.admit("b", b2), adm::wait);  // so does b, with one running
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.admit("a", a4), adm::wait);  // a at its share: queued behind a3
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.running(), 3u);
  EXPECT_EQ(shares.admit("c", c1), adm::run);  // a tenant with none running takes the last worker
  EXPECT_EQ(shares.running(), 4u);
  // Nothing strands, in arrival order: c's request ends while no worker accepts, so its worker accepts;
  // each worker that is free next runs the first ready request (a3, then b2, then a4).
  shares.finish("c");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.finish("a");  // a1: its hold passes to a4, ready behind b2
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(3, std::string("a")));
  shares.finish("b");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(12, std::string("b")));
  shares.finish("a");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(4, std::string("a")));
  EXPECT_EQ(shares.waiting(), 0u);
  EXPECT_EQ(shares.running(), 3u);
}

TEST(WorkerShares, OneTenantRunsOnAllButOneWorkerWhateverItsShare) {
  // --tenant-workers equal to --workers: the reserve still keeps one worker for another tenant.
  svc::worker_shares<int> shares(4, 4, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  std::vector<std::unique_ptr<int>> jobs = numbered_jobs(6);
  for (int i : {0, 1, 2}) EXPECT_EQ(shares.admit("a", jobs[i]), adm::run);
  EXPECT_EQ(shares.admit("a", jobs[3]), adm::wait);  // ready on a's fourth hold; the last worker accepts
  EXPECT_EQ(shares.holding("a"), 4u);
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.admit("a", jobs[4]), adm::wait);  // queued: a holds its share
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.admit("b", jobs[5]), adm::run);
  shares.finish("b");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.finish("a");
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 3);
  shares.finish("a");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 4);
  EXPECT_EQ(shares.running(), 3u);
}

TEST(WorkerShares, WithOneWorkerEveryRequestRuns) {
  // One worker: it accepts only when it runs nothing, so each request finds every tenant with none
  // running and starts at once, on the last (only) worker.
  svc::worker_shares<int> shares(1, 1, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  for (const char* tenant : {"a", "a", "b", "a"}) {
    EXPECT_EQ(shares.next(false).kind, step::accept);
    shares.accepted();
    std::unique_ptr<int> j = std::make_unique<int>(0);
    EXPECT_EQ(shares.admit(tenant, j), adm::run);
    shares.finish(tenant);
  }
  EXPECT_EQ(shares.next(true).kind, step::exit);
  // Two workers, share two (--tenant-workers 2): a tenant runs one request at a time while the other
  // worker accepts; its second request waits ready and runs on the first worker free.
  svc::worker_shares<int> two(2, 2, 8, 16);
  std::unique_ptr<int> a1 = std::make_unique<int>(1), a2 = std::make_unique<int>(2);
  EXPECT_EQ(two.admit("a", a1), adm::run);
  EXPECT_EQ(two.admit("a", a2), adm::wait);
  EXPECT_EQ(two.next(false).kind, step::accept);
  two.finish("a");
  step s = two.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 2);
}

TEST(WorkerShares, AllQueuesTogetherAreBounded) {
  svc::worker_shares<int> shares(16, 1, 5, 2);
  using adm = svc::worker_shares<int>::admission;
  std::vector<std::unique_ptr<int>> jobs = numbered_jobs(6);
  EXPECT_EQ(shares.admit("a", jobs[0]), adm::run);
  EXPECT_EQ(shares.admit("b", jobs[1]), adm::run);
  EXPECT_EQ(shares.admit("a", jobs[2]), adm::wait);
  EXPECT_EQ(shares.admit("b", jobs[3]), adm::wait);
  EXPECT_EQ(shares.admit("a", jobs[4]), adm::refuse);  // two wait in all
  EXPECT_EQ(shares.admit("c", jobs[5]), adm::run);     // a tenant under its share still runs
  EXPECT_EQ(shares.take_waiting().size(), 2u);
}

}  // namespace
