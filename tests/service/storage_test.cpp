// Storage (service/storage/) under the responder and on its own, on a temporary database (SQLite, or
// PostgreSQL in the "pg." pass): deadlines, group commit and a failed fsync, a full database, a
// connection the server ended, key holds, and the planner's statistics.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "annotations/store.hpp"
#include "crdt/records.hpp"
#include "storage/group_commit.hpp"
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
      // The request ends while the lock is still held: it gave up at its deadline, never took the lock.
      // (The wait is a bound on a failure's report, not an ordering: the request ends long before it.)
      auto f = std::async(std::launch::async, [&] { return service.handle(db, r); });
      const bool gave_up = f.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
      writer.release();
      res = f.get();
      EXPECT_TRUE(gave_up) << path << ": the request waited for the lock past its deadline";
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

// Group commit (storage/group_commit.hpp): writers on several connections commit one after another and
// share the WAL's fsyncs — every write is there afterwards, read through a new connection, and there
// were fewer fsyncs than commits (one per commit when each waits for its own). The overlap is made,
// not hoped for: the first leader holds its fsync until every writer has committed and waits, so the
// next fsync covers at least writers - 1 commits.
TEST_F(fixture, ConcurrentWritesShareTheWalsFsyncs) {
  FOLIO_SQLITE_ONLY();
  constexpr int writers = 4, each = 100;
  std::vector<std::unique_ptr<svc::database>> connections;
  for (int w = 0; w < writers; ++w) connections.push_back(std::make_unique<svc::database>(tmp.path(), svc::responder::tables()));
  const svc::database::space before = db.usage();
  std::atomic<bool> first{true}, overlapped{false};
  svc::group_commit::before_sync = [&](svc::group_commit& group) {
    if (first.exchange(false)) overlapped = group.await_pending(writers, std::chrono::seconds(30));
  };
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
  svc::group_commit::before_sync = nullptr;
  EXPECT_TRUE(overlapped) << "the other writers did not commit while the first fsync was held";
  const svc::database::space after = db.usage();
  EXPECT_EQ(after.commits - before.commits, std::uint64_t(writers * each));
  EXPECT_LE(after.wal_syncs - before.wal_syncs, after.commits - before.commits - (writers - 2));
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

/// `prefix` followed by `n` (appended: GCC 12 at -O3 warns falsely, -Wrestrict, on prefix + to_string(n)).
std::string numbered(const char* prefix, int n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
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
      ASSERT_TRUE(svc::insert_annotation(db, s, {numbered("a", i), numbered("loc-", i % 50), numbered("u", i % 4), "OPEN", at, at, "{}", 1}));
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

}  // namespace
