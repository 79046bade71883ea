// The CRDT family (service/crdt/) through the responder on a temporary database: a record's life through
// the cache and the log, the record session's protocol (a refused or partial push, a record added
// again, the writer section), live-push messages and channel ids, and the document cache's bounds.
#include <gtest/gtest.h>

#include <folio/document.hpp>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "crdt/doc_cache.hpp"
#include "crdt/history.hpp"
#include "crdt/publish/publisher.hpp"
#include "crdt/record_session.hpp"
#include "crdt/records.hpp"
#include "platform/fields.hpp"
#include "crdt/history.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

// crdt_token_streams (schema 11; crdt/publish/token_streams.hpp "Kept across restarts"), on both backends: a responder
// rewrites its own row of a channel and key, deletes its own rows of a channel only, and one that starts
// takes over every row, the earliest expiry per channel and key, earliest first.
TEST_F(fixture, TokenStreamRowsAreKeptForgottenAndTakenOver) {
  svc::keep_token_stream(db, "old1", {"c1", "k1/t", 100});
  svc::keep_token_stream(db, "old1", {"c1", "k1/t", 90});  // an earlier token: the row is rewritten
  svc::keep_token_stream(db, "old1", {"c2", "k1/t", 300});
  svc::keep_token_stream(db, "old2", {"c1", "k1/t", 120});  // another node's row of the same channel and key
  svc::keep_token_stream(db, "old2", {"c1", "k2/t", 200});
  svc::keep_token_stream(db, "old2", {"c3", "k1/t", 50});
  svc::forget_token_streams(db, "old2", "c3");  // its own rows of c3 only
  svc::forget_token_streams(db, "old1", "c3");
  const std::vector<svc::token_stream_row> rows = svc::adopt_token_streams(db, "new");
  std::vector<std::tuple<std::string, std::string, std::int64_t>> got;
  for (const svc::token_stream_row& r : rows) got.emplace_back(r.channel, r.stream_key, r.expires);
  EXPECT_EQ(got, (std::vector<std::tuple<std::string, std::string, std::int64_t>>{{"c1", "k1/t", 90}, {"c1", "k2/t", 200}, {"c2", "k1/t", 300}}));
  svc::query left = db.sql("SELECT count(*) FROM crdt_token_streams WHERE owner <> 'new'");
  ASSERT_TRUE(left.step());
  EXPECT_EQ(left.integer(0), 0);
  svc::forget_token_streams(db, "new", "c1");
  EXPECT_EQ(svc::adopt_token_streams(db, "newer").size(), 1u);  // c2's row
}

TEST_F(fixture, RecordLifeThroughTheHandlers) {
  auto r = call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":"Hello"}})");
  EXPECT_EQ(r.http, 200) << r.body;
  r = call("/v2/crdt/update", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","data":"Hello!"}})");
  EXPECT_EQ(r.http, 200) << r.body;
  r = call("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})");
  EXPECT_EQ(r.http, 200);
  EXPECT_NE(r.body.find(R"("data":"Hello!","id":"e")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("lastUpdatedBy":"alice")"), std::string::npos) << r.body;
  // A second service (another process, an empty cache) reads the same value from snapshot + log.
  svc::responder other{svc::config{}};
  svc::request req{"POST", "/v2/crdt/get", "application/json", key, token, R"({"data":{"organizationId":"o","documentId":"d"}})", 0, {}, {}, {}};
  EXPECT_NE(other.handle(db, req).body.find(R"("data":"Hello!")"), std::string::npos);
}

TEST_F(fixture, AFailedPublishNeverFailsTheWrite) {
  svc::config c;
  c.live = {std::string(64, 'f'), (tmp.dir / "no-nginx-here.sock").string()};
  svc::responder live{c};
  auto run = [&](const char* path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    return live.handle(db, r);
  };
  EXPECT_EQ(run("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p","type":"text","data":"a"}})").http, 200);
  EXPECT_EQ(run("/v2/crdt/update", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p","data":"ab"}})").http, 200);
  const auto sent = [&] { return live.crdt().live().drain(std::chrono::seconds(10)); };  // publishes go off the request path
  ASSERT_TRUE(sent());
  EXPECT_EQ(live.crdt().live().failures(), 1u);
  EXPECT_EQ(live.crdt().live().published(), 0u);
  EXPECT_EQ(run("/v2/crdt/update", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p","data":"ab"}})").http, 200);
  ASSERT_TRUE(sent());
  EXPECT_EQ(live.crdt().live().failures(), 1u);  // no ops, nothing to publish
  EXPECT_EQ(run("/v2/crdt/sync", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p","version":"AA=="}})").http, 200);
  EXPECT_EQ(run("/v2/crdt/delete", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p"}})").http, 200);
  ASSERT_TRUE(sent());
  EXPECT_EQ(live.crdt().live().failures(), 2u);
}

TEST_F(fixture, ARefusedPushKeepsTheCachedDocumentUnlessItChangedIt) {
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"Hello"}})").http, 200);
  const auto push = [&](const std::string& update) { return fixture::push(ids, update); };
  const auto get = [&] { return call("/v2/crdt/get", ids + "}}"); };
  ASSERT_EQ(get().http, 200);
  const std::uint64_t misses = service.crdt().cache().misses();
  // Malformed, or for another record type: nothing was integrated, the cached document still serves.
  EXPECT_EQ(push(std::string("\x01\x02\x03", 3)).http, 400);
  EXPECT_EQ(push(std::string("Fo\x01" "B\x03\x00\x00", 7)).http, 400);
  ASSERT_EQ(call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})").http, 200);  // reads the document (a get reads its rendered value)
  EXPECT_NE(get().body.find(R"("data":"Hello")"), std::string::npos);
  EXPECT_EQ(service.crdt().cache().misses(), misses);
  // Ops held back for missing dependencies did change the document: the next request that reads it
  // rebuilds it from storage. A get meanwhile answers the value rendered at the committed revision.
  const std::string missing_deps("Fo\x01" "B\x01\x01\x05\x01>\x00\x03\x02\x02\x00\x02hi", 17);
  const svc::response held = push(missing_deps);
  EXPECT_NE(held.body.find("FAILED_PRECONDITION"), std::string::npos) << held.body;
  const svc::response after = get();
  EXPECT_NE(after.body.find(R"("data":"Hello")"), std::string::npos) << after.body;
  EXPECT_EQ(service.crdt().cache().misses(), misses);
  ASSERT_EQ(call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})").http, 200);
  EXPECT_EQ(service.crdt().cache().misses(), misses + 1);
}

TEST_F(fixture, PushedMapAndArrayValuesMustBeJson) {
  // The engine keeps them as opaque bytes; `get` writes them into its answer as they are.
  const auto ids = [](const char* editor) { return std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":")") + editor + "\""; };
  ASSERT_EQ(call("/v2/crdt/add", ids("m") + R"(,"type":"map","data":{"a":1}}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", ids("l") + R"(,"type":"array","data":[{"a":1}]}})").http, 200);
  const auto push = [&](const char* editor, const std::string& update) {
    return fixture::push(ids(editor), update);
  };
  const auto refused = [](const std::string& message) {
    return R"({"error":{"message":")" + message + R"(","status":"INVALID_ARGUMENT"}})";
  };
  folio::document map(folio::record_type::map, 77), array(folio::record_type::array, 78);
  EXPECT_EQ(push("m", map.encode_change(map.set("k", "[2,"))).body,
            refused("update is invalid: map value is not valid JSON: invalid value (at byte 3) (operation 0)."));
  EXPECT_EQ(push("m", map.encode_change(map.set("k", std::string("-1\0\0", 4)))).body,
            refused("update is invalid: map value is not valid JSON: NUL byte (at byte 2) (operation 0)."));
  EXPECT_EQ(push("m", map.encode_change(map.set("k", R"({"x":1,"x":2})"))).body,
            refused(R"(update is invalid: map value: Duplicate key \"x\" in a JSON object (operation 0).)"));
  EXPECT_EQ(push("l", array.encode_change(array.replace_array({R"({"b":2})", "7"}))).body,
            refused("update is invalid: array item is not a JSON object (operation 0)."));
  // Nothing of a refused batch was kept; JSON that is not in the canonical form is taken as it is.
  EXPECT_NE(call("/v2/crdt/get", ids("m") + "}}").body.find(R"("data":{"a":1})"), std::string::npos);
  EXPECT_NE(call("/v2/crdt/get", ids("l") + "}}").body.find(R"("data":[{"a":1}])"), std::string::npos);
  folio::document fresh(folio::record_type::map, 79);
  EXPECT_EQ(push("m", fresh.encode_change(fresh.set("k", R"( [ 2 ] )"))).http, 200);
  EXPECT_NE(call("/v2/crdt/get", ids("m") + "}}").body.find(R"("data":{"a":1,"k": [ 2 ] })"), std::string::npos);
}

// Several nodes on one database (PostgreSQL's deployment; on SQLite, several processes): each has its
// own document cache, and a cached document is used only at the revision the record's row holds.
TEST_F(fixture, ANodeNeverServesAStaleCachedDocument) {
  svc::responder node_b{svc::config{}};
  svc::database db_b{tmp.path(), svc::responder::tables()};
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")";
  auto on_b = [&](const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    return node_b.handle(db_b, r);
  };
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"one"}})").http, 200);
  EXPECT_NE(on_b("/v2/crdt/get", ids + "}}").body.find(R"("data":"one")"), std::string::npos);  // B caches it
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"two"}})").http, 200);                     // A writes
  EXPECT_NE(on_b("/v2/crdt/get", ids + "}}").body.find(R"("data":"two")"), std::string::npos);  // B reads it at once
  ASSERT_EQ(on_b("/v2/crdt/update", ids + R"(,"data":"two three"}})").http, 200);               // B writes on top of it
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"two three")"), std::string::npos);
  EXPECT_NE(on_b("/v2/crdt/get", ids + "}}").body.find(R"("data":"two three")"), std::string::npos);  // B renders revision 3
  // Deleted and added again on A, and brought to the same revision: B's cached document and rendered
  // value (another incarnation) are never served.
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"new"}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"newer"}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"newest"}})").http, 200);
  EXPECT_NE(on_b("/v2/crdt/get", ids + "}}").body.find(R"("data":"newest")"), std::string::npos);
}

// Concurrent updates of one record through four nodes (own connection, own cache each): every update
// answered 200 is in the record (one revision each), the others are 503 (the record kept moving), none
// is half-written or a 500. On PostgreSQL this needs the record's lock (database::write(key, f)):
// without it two commits of one revision both pass the revision check and collide in crdt_log.
TEST_F(fixture, ConcurrentUpdatesThroughSeveralNodesLoseNothing) {
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"start"}})").http, 200);
  constexpr int updates = 25;
  const std::vector<int> answered = on_nodes(4, [&](int n, svc::responder& node, svc::database& node_db) {
    int ok = 0;
    for (int i = 0; i < updates; ++i) {
      const svc::response res = call_on(node, node_db, "/v2/crdt/update", ids + R"(,"data":"node )" + std::to_string(n) + " update " + std::to_string(i) + R"("}})");
      if (res.http == 200) ++ok;
      else EXPECT_EQ(res.http, 503) << res.body;
    }
    return ok;
  });
  const int ok = std::accumulate(answered.begin(), answered.end(), 0);
  EXPECT_GT(ok, 0);
  const std::optional<svc::record_row> row = svc::load_record(db, {key.substr(3, 16), "o", "d", "e"}, false);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->revision, 1 + ok);
  svc::responder fresh{svc::config{}};  // snapshot + log rebuild to a value one of the updates wrote
  const std::string get = ids + "}}";
  svc::request r{"POST", "/v2/crdt/get", "application/json", key, token, get, get.size(), {}, {}, {}};
  const std::string got = fresh.handle(db, r).body;
  EXPECT_NE(got.find(R"("data":"node )"), std::string::npos) << got;
}

TEST(Channel, IdsAreKeyedHmacsOfTheTenantAndIds) {
  const std::string a = svc::channel_id("secret", "k1", "o", "d", "e");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, svc::channel_id("secret", "k1", "o", "d", "e"));
  EXPECT_NE(a, svc::channel_id("secret", "k2", "o", "d", "e"));
  EXPECT_NE(a, svc::channel_id("other", "k1", "o", "d", "e"));
  // The newline separator is unambiguous only because ids never hold control characters (docs/API.md, "Every call").
  EXPECT_EQ(svc::channel_id("s", "k", "o\nd", "x", "e"), svc::channel_id("s", "k", "o", "d\nx", "e"));
  EXPECT_THROW(svc::check_id("o\nd", "organizationId"), svc::api_error);
  // The value nginx's set_hmac_sha256 computes for the same input (checked by e2e.live end to end).
  EXPECT_EQ(svc::channel_id("secretsecret", "abc123", "o r g", "d", "\xe2\x82\xac"), "c4bb69fed0713ecbf42a95fe7b3bdad8d9d9df0013b21aa383afee85b69759a9");
}

TEST_F(fixture, ARequestRefusedForItsOwnContentIsAnsweredWhileTheWriterSectionIsHeld) {
  // Parsing the value, decoding a batch and diffing happen before the writer section: while another
  // request holds it, these are answered at once (before, each waited for the section first).
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"x")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"xml","data":"<p>a</p>"}})").http, 200);
  const std::string text_ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"t")";
  ASSERT_EQ(call("/v2/crdt/add", text_ids + R"(,"type":"text","data":"abc"}})").http, 200);
  const svc::response first = call("/v2/crdt/sync", text_ids + R"(,"version":"AA=="}})");
  const std::string incarnation = svc::parse_json(first.body)["result"]["data"]["incarnation"].GetString();
  // The record's write lock held: SQLite's writer section, or on PostgreSQL the record's own lock.
  auto answer = [&](const std::string& editor, std::string path, std::string body) {
    held_write writer(tmp, svc::record_key{key.substr(3, 16), "o", "d", editor}.cache_key());
    auto f = std::async(std::launch::async, [&, path, body] { return call(path, body); });
    if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      writer.release();  // let it finish, so the test ends
      ADD_FAILURE() << path << " waited for the writer section";
    }
    return f.get();
  };
  // xml markup that does not parse (the record's type is known only from storage)
  const svc::response bad_xml = answer("x", "/v2/crdt/update", ids + R"(,"data":"<p>a</q>"}})");
  EXPECT_EQ(bad_xml.http, 400) << bad_xml.body;
  // a pushed batch that does not decode
  const svc::response bad_batch = answer("t", "/v2/crdt/sync", text_ids + R"(,"version":"AA==","incarnation":")" + incarnation + R"(","update":")" +
                                                            svc::base64_encode("not a batch") + "\"}}");
  EXPECT_EQ(bad_batch.http, 400) << bad_batch.body;
}

// Several nodes (responders with caches of their own) on one PostgreSQL database, writing one record at
// once: a request whose record another node moved between its open() and its commit starts again
// holding the record's lock (record_session.hpp), so every update commits — none is answered 503 —
// and the record ends at one request's whole value. (On SQLite one process writes a file.)
TEST_F(fixture, ConcurrentUpdatesOfOneRecordThroughSeveralNodesAllCommit) {
  if (!tmp.postgresql()) GTEST_SKIP() << "PostgreSQL only";
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"hot")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"map","data":{}}})").http, 200);
  constexpr int nodes = 3, writers_per_node = 2, updates = 20;
  std::vector<std::unique_ptr<svc::responder>> node;
  for (int n = 0; n < nodes; ++n) node.push_back(std::make_unique<svc::responder>(svc::config{}));
  std::vector<std::future<std::vector<std::string>>> writers;
  for (int n = 0; n < nodes; ++n)
    for (int w = 0; w < writers_per_node; ++w)
      writers.push_back(std::async(std::launch::async, [&, n, w] {
        svc::database conn{tmp.path(), svc::responder::tables()};  // a worker's connection
        std::vector<std::string> refused;
        for (int i = 0; i < updates; ++i) {
          const std::string value = std::to_string((n * writers_per_node + w) * updates + i);
          const std::string body = ids + R"(,"data":{"k":)" + value + R"(,"same":)" + value + "}}}";
          svc::request r{"POST", "/v2/crdt/update", "application/json", key, token, body, body.size(), {}, {}, {}};
          r.deadline = svc::deadline_clock::now() + std::chrono::seconds(30);
          const svc::response res = node[n]->handle(conn, r);
          if (res.http != 200) refused.push_back(res.body);
        }
        return refused;
      }));
  for (auto& w : writers) EXPECT_EQ(w.get(), std::vector<std::string>{});
  // Every node reads the same whole value of one request.
  std::string first;
  for (auto& n : node) {
    svc::request r{"POST", "/v2/crdt/get", "application/json", key, token, ids + "}}", 0, {}, {}, {}};
    const rapidjson::Document answer = svc::parse_json(n->handle(db, r).body);
    const rapidjson::Value& data = answer["result"]["data"][0]["data"];
    EXPECT_EQ(data["k"].GetInt(), data["same"].GetInt());
    const std::string value = std::to_string(data["k"].GetInt());
    if (first.empty()) first = value;
    EXPECT_EQ(value, first);
  }
}

TEST_F(fixture, AnAddIsAnsweredAsCommittedWhenAnotherRequestHoldsTheNewRecordsEntry) {
  // After an add commits, a crdt/get of the new record (streaming it, say) may hold its cache entry.
  // The add must not wait for it until its deadline and answer 503 "nothing was changed" for a record
  // that is stored (the retry would then get 409 ALREADY_EXISTS).
  const std::string body = R"({"data":{"organizationId":"o","documentId":"d","editorId":"held","type":"text","data":"stored"}})";
  svc::request r{"POST", "/v2/crdt/add", "application/json", key, token, body, body.size(), {}, {}, {}};
  r.deadline = svc::deadline_clock::now() + std::chrono::seconds(3);
  const svc::record_key k{key.substr(3, 16), "o", "d", "held"};
  svc::response res;
  {
    held_write writer(tmp, k.cache_key());  // the add stops at its commit
    std::promise<void> committing;
    std::atomic<bool> told{false};
    service.crdt().set_before_commit([&](const svc::record_key& at) {
      if (at.editor == "held" && !told.exchange(true)) committing.set_value();
    });
    auto f = std::async(std::launch::async, [&] { return service.handle(db, r); });
    committing.get_future().wait();  // past its open(), which found no record: at its commit
    const std::shared_ptr<svc::cached_doc> entry = service.crdt().cache().get(k.cache_key());
    std::unique_lock<std::timed_mutex> held(entry->lock);  // "the get" holds the entry from now on
    writer.release();
    res = f.get();
    service.crdt().set_before_commit({});
  }
  EXPECT_EQ(res.http, 200) << res.body;
  EXPECT_NE(call("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"held"}})").body.find(R"("data":"stored")"), std::string::npos);
}

TEST_F(fixture, AGetOfARenderedRevisionNeverWaitsForTheRecordsEntry) {
  // The first get of a revision renders the value and keeps it in the entry; the gets after it answer
  // from it without the entry's lock: while another request holds the entry (an update preparing its
  // change, a get rendering a large record), a get of the committed revision is answered at once —
  // before, it waited for the entry until its deadline and answered 503. Once an update commits, gets
  // answer its value, and the entry counts the rendered bytes.
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"hot")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"one \"quoted\""}})").http, 200);
  const svc::record_key k{key.substr(3, 16), "o", "d", "hot"};
  const std::size_t before = service.crdt().cache().bytes();
  const svc::response first = call("/v2/crdt/get", ids + "}}");
  ASSERT_EQ(first.http, 200) << first.body;
  EXPECT_NE(first.body.find(R"("data":"one \"quoted\"","id":"hot")"), std::string::npos) << first.body;
  EXPECT_EQ(service.crdt().cache().bytes(), before + std::string(R"("one \"quoted\"")").size());
  const std::shared_ptr<svc::cached_doc> entry = service.crdt().cache().find(k.cache_key());
  ASSERT_TRUE(entry);
  {
    std::unique_lock<std::timed_mutex> held(entry->lock);  // another request holds the entry
    const std::string body = ids + "}}";
    svc::request r{"POST", "/v2/crdt/get", "application/json", key, token, body, body.size(), {}, {}, {}};
    r.deadline = svc::deadline_clock::now() + std::chrono::seconds(2);
    const svc::response again = std::async(std::launch::async, [&] { return service.handle(db, r); }).get();
    EXPECT_EQ(again.http, 200) << again.body;
    EXPECT_EQ(again.body, first.body);
  }
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"two"}})").http, 200);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"two","id":"hot")"), std::string::npos);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"two","id":"hot")"), std::string::npos);  // rendered
}

TEST_F(fixture, AClientOfARecordAddedAgainIsRefusedAndTheCacheNeverServesTheOldOne) {
  // delete then add under the same ids: a new incarnation. A client that synced the old record is told
  // (409 ABORTED), pushing or pulling, and a reader never gets the old record from the cache.
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"r")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"old"}})").http, 200);
  const rapidjson::Document first = svc::parse_json(call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})").body);
  const std::string old_incarnation = first["result"]["data"]["incarnation"].GetString();
  const std::string old_version = first["result"]["data"]["version"].GetString();
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"old")"), std::string::npos);  // cached now
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"new"}})").http, 200);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"new")"), std::string::npos);
  const rapidjson::Document second = svc::parse_json(call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})").body);
  const std::string new_incarnation = second["result"]["data"]["incarnation"].GetString();
  EXPECT_NE(new_incarnation, old_incarnation);
  const svc::response pull = call("/v2/crdt/sync", ids + R"(,"version":")" + old_version + R"(","incarnation":")" + old_incarnation + "\"}}");
  EXPECT_EQ(pull.http, 409);
  EXPECT_EQ(pull.body, R"({"error":{"message":"This record was deleted and added again since the client's state was synced (incarnation )" + old_incarnation +
                           ", now " + new_incarnation + R"(): drop the local state and sync again from the empty version.","status":"ABORTED"}})");
  folio::document client(folio::record_type::text, 99);
  client.replace_text("mine");
  const svc::response push = call("/v2/crdt/sync", ids + R"(,"version":")" + old_version + R"(","incarnation":")" + old_incarnation + R"(","update":")" +
                                                      svc::base64_encode(client.encode_since({})) + "\"}}");
  EXPECT_EQ(push.http, 409);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"new")"), std::string::npos);  // nothing merged
}

TEST_F(fixture, APushThatWouldSpendTheRecordsOpIdsIsRefusedAndNoRecordAnswersUpdatesWith500) {
  // A push whose Lamport value jumps to 2^31 - 1 was accepted, and every later update of the record
  // was a 500 ([folio.overflow]). It is refused now (the Lamport headroom rule), and a record stored
  // in that state by an earlier build answers a 400 that says what to do.
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"t")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"abc"}})").http, 200);
  folio::text peer(7);
  peer.insert_utf8(0, "x");
  folio::op_batch<char32_t> b;
  ASSERT_TRUE(folio::decode_batch(folio::encode_batch(peer.ops_since({})), b));
  for (auto& o : b.ops) o.lamport = folio::max_counter;
  const std::string jump = folio::encode_batch(b);
  const svc::response pushed = push(ids, jump);
  EXPECT_EQ(pushed.http, 400) << pushed.body;
  EXPECT_NE(pushed.body.find("(the Lamport headroom rule) (operation 0)."), std::string::npos) << pushed.body;
  EXPECT_EQ(call("/v2/crdt/update", ids + R"(,"data":"abcd"}})").http, 200);

  // A record an earlier build let reach the limit: its snapshot at clock 2^31 - 1.
  const std::optional<svc::record_row> row = svc::load_record(db, {key.substr(3, 16), "o", "d", "t"});
  ASSERT_TRUE(row);
  std::optional<folio::document> frozen;
  ASSERT_TRUE(folio::document::decode(row->snapshot, row->incarnation, frozen));
  const std::vector<svc::logged_change> log = svc::load_log(db, {key.substr(3, 16), "o", "d", "t"});
  for (const svc::logged_change& c : log) ASSERT_TRUE(frozen->apply(c.batch));
  ASSERT_TRUE(frozen->apply(jump));
  db.write([&] { ASSERT_TRUE(svc::compact(db, {key.substr(3, 16), "o", "d", "t"}, row->incarnation, frozen->encode(), svc::folded_of(log))); });
  svc::responder fresh{svc::config{}};  // an empty cache reads the stored record
  const std::string body = ids + R"(,"data":"abcde"}})";
  const svc::response r = call_on(fresh, db, "/v2/crdt/update", body);
  EXPECT_EQ(r.http, 400);
  EXPECT_EQ(r.body, R"({"error":{"message":"This record has used all the operation ids a record can hold (2^31); add its value as a new record under another editorId.","status":"FAILED_PRECONDITION"}})");
  const std::string get = ids + "}}";
  EXPECT_NE(call_on(fresh, db, "/v2/crdt/get", get).body.find(R"("data":"xabcd")"),
            std::string::npos);
}

// The record "c" of the compaction tests, and the compactor's gauges.
struct compacting : fixture {
  using fixture::fixture;
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"c")";
  svc::record_key k;
  void SetUp() override {
    fixture::SetUp();
    k = {key.substr(3, 16), "o", "d", "c"};
  }
  svc::metrics::gauges gauges(svc::responder& of) {
    svc::metrics::gauges g;
    of.crdt().compactions().fill(g);
    return g;
  }
  svc::metrics::gauges gauges() { return gauges(service); }
  /// Adds "c" empty and updates it compact_after times (a log worth compacting).
  void fill_log() {
    ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":""}})").http, 200);
    for (int i = 0; i < svc::compact_after; ++i) ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":")" + std::string(i + 1, 'x') + "\"}}").http, 200);
  }
  /// Adds "c" as an empty array and pushes replica 7's inserts of `n` items "{}" (in pushes below the
  /// body limit) and its remove of the first `removed` of them: the record then holds `units` (n items
  /// and the remove's log entries: the client's units, the record holding nothing else), and replica 7's
  /// next op has seq n + removed.
  void add_array_with_removed_items(std::uint32_t n, std::uint32_t removed, std::uint64_t& units) {
    ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"array","data":[]}})").http, 200);
    folio::document client(folio::record_type::array, 7);
    for (std::uint32_t at = 0; at < n;) {
      const std::uint32_t take = std::min<std::uint32_t>(n - at, 1u << 19);
      const folio::version_vector before = client.version();
      client.as_array().insert(at, std::vector<std::string>(take, "{}"));
      ASSERT_EQ(push(ids, client.encode_since(before)).http, 200);
      at += take;
    }
    const folio::version_vector before = client.version();
    client.as_array().erase(0, removed);
    ASSERT_EQ(push(ids, client.encode_since(before)).http, 200);
    units = client.units();
  }
};

/// compacting with a cache that keeps a record holding max_units (a 2^22-element array, about 200 MB
/// decoded): its pushes integrate into the cached record instead of decoding it every time (a record
/// over a quarter of the cache is not kept), so the tests measure the limit, not the decoder.
struct near_the_limit : compacting {
  near_the_limit() : compacting(big_cache()) {}
  static svc::config big_cache() {
    svc::config c;
    c.cache_bytes = std::size_t(2) << 30;
    return c;
  }
};

// Compaction happens off the request path (crdt/compactor.hpp): the write that fills the log only
// schedules it; the compactor folds the log into a new snapshot without moving the revision, and the
// cached document serves on. A record deleted before its compaction ran is left as it is.
/// A remove by replica `author` (op seq `seq`, Lamport value `lamport`) of its items first..first+n-1.
template <class T>
std::string remove_of(folio::replica_id author, std::uint32_t seq, std::uint32_t lamport, std::uint32_t first, std::uint32_t n) {
  folio::op o;
  o.kind = folio::op_kind::remove, o.id = {author, seq}, o.lamport = lamport, o.len = n, o.ref = {author, first};
  return folio::encode_batch(folio::op_batch<T>{{o}, {}});
}

// Issue 49, item 1: removes of what is removed already, each accepted, took the record's history past
// what its snapshot can be read back with, and after a restart every request of the record was a 500.
// A push that would take the record past folio::document::max_units is refused (400, nothing stored);
// every change up to it is read back by a fresh process after the record is compacted. The record is
// filled by inserts (2^22 array elements): a remove holds one unit, however long its range.
TEST_F(near_the_limit, APushPastWhatARecordCanHoldIsRefusedAndEverythingStoredReadsBack) {
  constexpr std::uint64_t limit = folio::document::max_units(folio::record_type::array);
  constexpr auto n = static_cast<std::uint32_t>(limit - 3);
  std::uint64_t units = 0;
  ASSERT_NO_FATAL_FAILURE(add_array_with_removed_items(n, n - 1, units));  // about n + 1 units
  ASSERT_LE(units, limit - 2);
  const std::uint64_t room = limit - units;
  std::uint32_t seq = 2 * n - 1;
  std::uint64_t accepted = 0;
  svc::response refused;
  for (;;) {  // removes of what is removed already: one unit each
    const svc::response r = push(ids, remove_of<std::string>(7, seq, 1, 0, n - 1));
    if (r.http != 200) {
      refused = r;
      break;
    }
    ++accepted, seq += n - 1;
    ASSERT_LE(accepted, room);
  }
  EXPECT_EQ(accepted, room);
  EXPECT_EQ(refused.http, 400) << refused.body;
  EXPECT_NE(refused.body.find(R"("status":"FAILED_PRECONDITION")"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("the record holds " + std::to_string(limit) + " unit operations and the batch would add 1, past the " + std::to_string(limit) +
                              " an array record can hold"),
            std::string::npos)
      << refused.body;
  EXPECT_NE(refused.body.find("add the record's value as a new record under another editorId"), std::string::npos) << refused.body;
  service.crdt().compactions().drain(db);
  EXPECT_EQ(gauges().compaction_failures, 0u);
  svc::responder restarted{svc::config{}};
  const svc::response got = call_on(restarted, db, "/v2/crdt/get", ids + "}}");
  EXPECT_EQ(got.http, 200) << got.body;
  EXPECT_NE(got.body.find(R"("data":[{}])"), std::string::npos) << got.body;
  EXPECT_EQ(call_on(restarted, db, "/v2/crdt/update", ids + R"(,"data":[{"a":1}]}})").http, 400);  // full: it would add 2
  EXPECT_EQ(call_on(restarted, db, "/v2/crdt/sync", ids + R"(,"version":"AA=="}})").http, 200);
  const std::optional<svc::record_row> row = svc::load_record(db, k);
  std::optional<folio::document> d;
  ASSERT_TRUE(folio::document::decode(row->snapshot, row->incarnation, d));
  EXPECT_LE(d->units(), limit);
}

// The update (replace by value) of a record whose history is near the limit: refused when the diff
// would take it past, with nothing stored, and the cached document is not left changed.
TEST_F(near_the_limit, AnUpdatePastWhatARecordCanHoldIsRefusedAndNothingChanges) {
  constexpr std::uint64_t limit = folio::document::max_units(folio::record_type::array);
  std::uint64_t units = 0;
  ASSERT_NO_FATAL_FAILURE(add_array_with_removed_items(static_cast<std::uint32_t>(limit - 4), static_cast<std::uint32_t>(limit - 4), units));
  ASSERT_LE(units, limit - 3);
  // Room for 3: the client's remove of one more item of its (removed) ones, held one unit each, until
  // then.
  for (std::uint32_t seq = static_cast<std::uint32_t>(2 * (limit - 4)); units < limit - 3; ++units, ++seq)
    ASSERT_EQ(push(ids, remove_of<std::string>(7, seq, 1, 0, 1)).http, 200);
  // [a1,a2] adds 2; [a3,a4,a5] then removes the two (one remove) and adds 3: 4 more.
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":[{"a":1},{"a":2}]}})").http, 200);
  const svc::response r = call("/v2/crdt/update", ids + R"(,"data":[{"a":3},{"a":4},{"a":5}]}})");
  EXPECT_EQ(r.http, 400) << r.body;
  EXPECT_NE(r.body.find(R"("status":"FAILED_PRECONDITION")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("past the " + std::to_string(limit) + " an array record can hold; nothing was stored."), std::string::npos) << r.body;
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":[{"a":1},{"a":2}])"), std::string::npos);
  // [a1] removes one: one more unit, to the limit.
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":[{"a":1}]}})").http, 200);
  service.crdt().compactions().drain(db);
  svc::responder restarted{svc::config{}};
  EXPECT_NE(call_on(restarted, db, "/v2/crdt/get", ids + "}}").body.find(R"("data":[{"a":1}])"), std::string::npos);
}

// A compaction decodes the snapshot it made before it replaces the stored one: a record whose log an
// earlier build let grow past the limit keeps its snapshot and log (the failure logged and counted),
// and still reads back, where the compaction used to store a snapshot that no longer decoded.
TEST_F(compacting, ACompactionNeverStoresASnapshotThatDoesNotDecode) {
  constexpr std::uint64_t limit = folio::document::max_units(folio::record_type::array);
  constexpr auto n = static_cast<std::uint32_t>(limit);
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"array","data":[]}})").http, 200);
  folio::document client(folio::record_type::array, 7);
  client.as_array().insert(0, std::vector<std::string>(n, "{}"));
  const folio::version_vector inserted = client.version();
  client.as_array().erase(0, n - 1);  // n + 1 units: one past the limit
  std::optional<svc::record_row> row = svc::load_record(db, k, false);
  // A log long enough to be compacted: the insert, the remove, and the remove again (duplicates).
  std::vector<std::string> log{client.encode_since({})};
  while (log.size() < std::size_t(svc::compact_after)) log.push_back(client.encode_since(inserted));
  db.write([&] {
    for (const std::string& b : log) row->revision = svc::append_change(db, k, *row, &b, svc::now_iso(), "old build", std::nullopt);
  });
  const std::string before = svc::load_record(db, k)->snapshot;
  service.crdt().compactions().schedule(k);
  service.crdt().compactions().drain(db);
  EXPECT_EQ(gauges().compaction_failures, 1u);
  EXPECT_EQ(gauges().compactions, 0u);
  EXPECT_EQ(svc::load_record(db, k)->snapshot, before);
  svc::responder restarted{svc::config{}};
  const svc::response got = call_on(restarted, db, "/v2/crdt/get", ids + "}}");
  EXPECT_EQ(got.http, 200) << got.body;
  EXPECT_NE(got.body.find(R"("data":[{}])"), std::string::npos) << got.body;
}

// Issue 49, item 3: a write token's removes over a long range it removed already, each one's Lamport
// value one above the record's clock, raised the clock by the range's length per push, up to 2^31 - 1,
// and the owner's update was refused. Such a push is refused now; the owner's update goes on.
TEST_F(fixture, RemovesOfRemovedTextCannotClimbTheRecordsClock) {
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"climb")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":""}})").http, 200);
  constexpr std::uint32_t n = 1u << 20;
  folio::document client(folio::record_type::text, 7);
  client.as_text().insert(0, std::u32string(n, U'c'));
  client.as_text().erase(0, n);
  ASSERT_EQ(push(ids, client.encode_since({})).http, 200);
  std::uint32_t seq = 2 * n, clock = 2 * n;
  int taken = 0;
  for (int i = 0; i < 2047 && clock + n <= folio::max_counter; ++i) {
    const svc::response r = push(ids, remove_of<char32_t>(7, seq, clock + 1, 0, n));
    if (r.http != 200) {
      EXPECT_EQ(r.http, 400) << r.body;
      EXPECT_NE(r.body.find("(the Lamport headroom rule) (operation 0)."), std::string::npos) << r.body;
      break;
    }
    ++taken, seq += n, clock += n;
  }
  EXPECT_EQ(taken, 0);
  EXPECT_EQ(call("/v2/crdt/update", ids + R"(,"data":"the owner's"}})").http, 200);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"the owner's")"), std::string::npos);
}

TEST_F(compacting, RecordsAreCompactedOffTheRequestPath) {
  fill_log();
  std::optional<svc::record_row> row = svc::load_record(db, k, false);
  EXPECT_EQ(row->log_len, svc::compact_after);  // nothing compacted while answering
  EXPECT_EQ(gauges().compactions_queued, 1u);
  const std::uint64_t misses = service.crdt().cache().misses();
  service.crdt().compactions().drain(db);
  row = svc::load_record(db, k, false);
  EXPECT_EQ(row->log_len, 0);
  EXPECT_EQ(row->revision, 1 + svc::compact_after);
  EXPECT_EQ(gauges().compactions, 1u);
  EXPECT_EQ(gauges().compactions_queued, 0u);
  const std::string value = R"("data":")" + std::string(svc::compact_after, 'x') + "\"";
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(value), std::string::npos);
  EXPECT_EQ(service.crdt().cache().misses(), misses);  // the cached document is still at the revision
  svc::responder fresh{svc::config{}};                  // and the stored one is the same value
  const std::string get = ids + "}}";
  EXPECT_NE(call_on(fresh, db, "/v2/crdt/get", get).body.find(value),
            std::string::npos);

  svc::responder restarted{svc::config{}};  // a rebuild (an empty cache, a restart) schedules a log that long
  for (int i = 0; i < svc::compact_after; ++i) ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"y)" + std::to_string(i) + "\"}}").http, 200);
  EXPECT_EQ(gauges().compactions_queued, 1u);
  EXPECT_EQ(call_on(restarted, db, "/v2/crdt/get", get).http, 200);
  EXPECT_EQ(gauges(restarted).compactions_queued, 1u);
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"new"}})").http, 200);
  service.crdt().compactions().drain(db);
  EXPECT_EQ(gauges().compactions, 1u);
  EXPECT_EQ(gauges().compaction_failures, 0u);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"new")"), std::string::npos);
}

// A compaction rewrites the whole snapshot, so a large record edited in small steps is compacted once
// its log's bytes reach a quarter of the snapshot's (or its log 1,024 changes), not every 64 changes.
TEST(Records, CompactingPaysOnceTheLogIsWorthTheSnapshot) {
  EXPECT_FALSE(svc::wants_compaction(63, 1 << 20, 100));  // never below 64 changes
  EXPECT_TRUE(svc::wants_compaction(64, 25, 100));
  EXPECT_FALSE(svc::wants_compaction(64, 24, 100));
  EXPECT_FALSE(svc::wants_compaction(1023, 1000, 100000));
  EXPECT_TRUE(svc::wants_compaction(1024, 1000, 100000));
}

TEST_F(compacting, ALargeRecordEditedInSmallStepsIsCompactedWhenItsLogIsWorthIt) {
  std::string text;
  for (std::uint32_t x = 1; text.size() < 20000; x = x * 1103515245u + 12345u) text += static_cast<char>('a' + (x >> 16) % 26);  // does not compress
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":")" + text + "\"}}").http, 200);
  const auto queued = [&] { return gauges().compactions_queued; };
  int updates = 0;
  for (; updates < svc::compact_after; ++updates) ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":")" + text.substr(0, updates + 1) + "!" + text.substr(updates + 1) + "\"}}").http, 200);
  EXPECT_EQ(queued(), 0u);  // 64 small changes are not worth rewriting 20 KB
  std::optional<svc::record_row> row = svc::load_record(db, k, false);
  while (row->log_bytes * svc::compact_log_share < row->snapshot_bytes) {
    ASSERT_EQ(queued(), 0u) << "scheduled at " << row->log_bytes << " log bytes, snapshot " << row->snapshot_bytes;
    ++updates;
    ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":")" + text.substr(0, updates % 1000) + "!" + text.substr(updates % 1000) + "\"}}").http, 200);
    row = svc::load_record(db, k, false);
  }
  EXPECT_EQ(queued(), 1u);
  EXPECT_GT(updates, 2 * svc::compact_after);
  service.crdt().compactions().drain(db);
  row = svc::load_record(db, k, true);
  EXPECT_EQ(row->log_len, 0);
  EXPECT_EQ(row->log_bytes, 0);
  EXPECT_EQ(row->snapshot_bytes, static_cast<std::int64_t>(row->snapshot.size()));
}

// A compaction stores the snapshot it folded and deletes exactly the changes it folded: one committed
// while it worked stays logged after the new snapshot. One that finds some of its changes gone (another
// compaction went first) refuses, and its transaction rolls back.
TEST_F(compacting, ACompactionKeepsTheChangesCommittedWhileItWorked) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"v0"}})").http, 200);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"v)" + std::to_string(i) + "\"}}").http, 200);
  const std::vector<svc::logged_change> log = svc::load_log(db, k);
  ASSERT_EQ(log.size(), 3u);
  const std::optional<svc::record_row> read = svc::load_record(db, k);
  const std::uint64_t incarnation = read->incarnation;
  const std::string snapshot = svc::fold_log(*read, log).encode();
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"v4"}})").http, 200);  // while the compaction worked

  struct went_first {};
  EXPECT_THROW(db.write([&] {
                 if (!svc::compact(db, k, incarnation, snapshot, {log.back().revision, 4, 0})) throw went_first{};
               }),
               went_first);
  EXPECT_EQ(svc::load_log(db, k).size(), 4u);  // rolled back
  db.write([&] { EXPECT_TRUE(svc::compact(db, k, incarnation, snapshot, svc::folded_of(log))); });
  const std::optional<svc::record_row> row = svc::load_record(db, k);
  EXPECT_EQ(row->log_len, 1);
  EXPECT_EQ(row->log_bytes, static_cast<std::int64_t>(svc::load_log(db, k).at(0).batch.size()));
  EXPECT_EQ(row->snapshot_bytes, static_cast<std::int64_t>(snapshot.size()));
  EXPECT_EQ(row->revision, 5);
  EXPECT_EQ(row->snapshot, snapshot);
  svc::responder fresh{svc::config{}};
  const std::string get = ids + "}}";
  EXPECT_NE(call_on(fresh, db, "/v2/crdt/get", get).body.find(R"("data":"v4")"),
            std::string::npos);
  EXPECT_NE(call("/v2/crdt/get", ids + "}}").body.find(R"("data":"v4")"), std::string::npos);
}

// Changes pushed through four nodes (own connection, cache and compactor each), each node compacting
// the record between its requests: every character a push answered 200 carried is in the record at
// the end, and nothing else, whatever order the nodes' pushes and compactions interleaved in (the one
// interleaving that matters most, a change committed while a compaction works, is made on purpose in
// ACompactionKeepsTheChangesCommittedWhileItWorked). Each node's client pushes all its ops every time
// (ops the record has are skipped), so its last acknowledged push says what must be there.
TEST_F(fixture, ChangesPushedThroughSeveralCompactingNodesAllStay) {
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"p")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":""}})").http, 200);
  const rapidjson::Document first = svc::parse_json(call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})").body);
  const std::string incarnation = first["result"]["data"]["incarnation"].GetString();
  constexpr int nodes = 4, pushes = 40;
  const std::vector<int> acked = on_nodes(nodes, [&](int n, svc::responder& node, svc::database& node_db) {
    folio::text client(static_cast<folio::replica_id>(100 + n));
    int last = 0;
    for (int i = 0; i < pushes; ++i) {
      client.insert_utf8(client.size(), std::string(1, static_cast<char>('a' + n)));
      const std::string body = ids + R"(,"version":"AA==","incarnation":")" + incarnation + R"(","update":")" +
                               svc::base64_encode(folio::encode_batch(client.ops_since({}))) + "\"}}";
      const svc::response res = call_on(node, node_db, "/v2/crdt/sync", body);
      if (res.http == 200) last = i + 1;
      else EXPECT_EQ(res.http, 503) << res.body;
      node.crdt().compactions().drain(node_db);
    }
    return last;
  });
  svc::responder fresh{svc::config{}};
  const std::string get = ids + "}}";
  const rapidjson::Document answer =
      svc::parse_json(call_on(fresh, db, "/v2/crdt/get", get).body);
  const std::string text = answer["result"]["data"][0]["data"].GetString();
  for (int n = 0; n < nodes; ++n) EXPECT_EQ(std::count(text.begin(), text.end(), 'a' + n), acked[n]) << "node " << n << " in " << text;
  const std::optional<svc::record_row> row = svc::load_record(db, {key.substr(3, 16), "o", "d", "p"}, false);
  EXPECT_LT(row->log_len, svc::compact_after);  // compacted along the way
}

// A record deleted and added again while a compaction worked on it is left alone: the new record
// may already have as many changes, under revisions as low, as the compaction folded of the old one.
TEST_F(compacting, ACompactionOfARecordAddedAgainMeanwhileChangesNothing) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"old"}})").http, 200);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"old )" + std::to_string(i) + "\"}}").http, 200);
  const std::optional<svc::stored_record> old = svc::read_stored(db, k);
  const std::string snapshot = svc::fold_log(old->row, old->log).encode();
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"new"}})").http, 200);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"new )" + std::to_string(i) + "\"}}").http, 200);
  ASSERT_EQ(svc::folded_of(svc::load_log(db, k)).count, svc::folded_of(old->log).count);  // as many changes, as low
  ASSERT_EQ(svc::folded_of(svc::load_log(db, k)).through, svc::folded_of(old->log).through);
  EXPECT_FALSE(db.write([&] { return svc::compact(db, k, old->row.incarnation, snapshot, svc::folded_of(old->log)); }));
  EXPECT_EQ(svc::load_record(db, k, false)->log_len, 3);
  svc::responder fresh{svc::config{}};
  const std::string get = ids + "}}";
  EXPECT_NE(call_on(fresh, db, "/v2/crdt/get", get).body.find(R"("data":"new 3")"),
            std::string::npos);
}

// A compaction that fails (here: a logged change that does not apply, damage) is counted, changes
// nothing, and its record is not scheduled again by the writes of the next minute.
TEST_F(compacting, AFailedCompactionRestsItsRecord) {
  fill_log();
  ASSERT_EQ(gauges().compactions_queued, 1u);
  db.write([&] { db.sql("UPDATE crdt_log SET batch = ? WHERE revision = 2").bind_blob(1, std::string(1, '\0')).step(); });  // the first change, damaged
  service.crdt().compactions().drain(db);
  EXPECT_EQ(gauges().compaction_failures, 1u);
  EXPECT_EQ(gauges().compactions, 0u);
  EXPECT_EQ(svc::load_record(db, k, false)->log_len, svc::compact_after);
  ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":"y"}})").http, 200);  // the cached document still takes writes
  EXPECT_EQ(gauges().compactions_queued, 0u);                                // but the record rests
}

// A sync's answer is streamed (body_output.hpp) a piece at a time as its update is encoded, and is the
// same bytes as the body the handler built whole before: success_body over base64_encode of
// encode_since of the record before the push, for pulls from the empty version and from a partial one,
// with and without a push, of a history larger than many of the stream's chunks.
TEST_F(fixture, ASyncAnswerIsStreamedAsTheBytesOfTheWholeAnswer) {
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"long")";
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":""}})").http, 200);
  std::string value;
  for (int round = 0; round < 6; ++round) {  // 6 x 100,000 characters inserted, all but the last removed
    value.clear();
    for (int i = 0; i < 100000; ++i) value += char('a' + (i * 7 + round) % 26);
    value += "é€😀";
    ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":")" + value + "\"}}").http, 200);
    if (round < 5) {
      ASSERT_EQ(call("/v2/crdt/update", ids + R"(,"data":""}})").http, 200);
    }
  }
  const svc::record_key k{key.substr(3, 16), "o", "d", "long"};
  const auto stored = [&] {
    std::optional<svc::stored_record> st = svc::read_stored(db, k);
    return svc::fold_log(st->row, st->log);
  };
  const auto expected = [&](const folio::document& before, const folio::version_vector& since, const folio::document& after) {
    const std::optional<svc::record_row> row = svc::load_record(db, k, false);
    return svc::success_body("CRDT data synced successfully.", [&](svc::json_writer& w) {
      w.StartObject();
      svc::write_member(w, "incarnation", std::to_string(row->incarnation));
      svc::write_member(w, "update", svc::base64_encode(before.encode_since(since)));
      svc::write_member(w, "version", svc::base64_encode(after.version().encode()));
      svc::write_member(w, "recordVersion", svc::record_version(k, row->incarnation, row->revision));
      svc::write_member(w, "type", row->type);
      svc::write_member(w, "contentKey", row->content_key);
      w.EndObject();
    });
  };
  const auto streamed = [&](const std::string& body, std::size_t* pieces) {
    svc::request r{"POST", "/v2/crdt/sync", "application/json", key, token, body, body.size(), {}, {}, {}};
    std::string sent;
    r.stream = [&](std::string_view b) { sent += b, ++*pieces; };
    const svc::response res = service.handle(db, r);
    EXPECT_EQ(res.http, 200) << res.body;
    EXPECT_TRUE(res.streamed);
    return sent + res.body;
  };
  const std::string incarnation = std::to_string(svc::load_record(db, k, false)->incarnation);
  const folio::document all = stored();
  ASSERT_GT(all.encode_since(folio::version_vector{}).size(), std::size_t(600000));
  std::size_t pieces = 0;
  EXPECT_EQ(streamed(ids + R"(,"version":"AA=="}})", &pieces), expected(all, {}, all));
  EXPECT_GT(pieces, 5u);  // sent as it was made
  // Not streamed (no sink): the same bytes.
  EXPECT_EQ(call("/v2/crdt/sync", ids + R"(,"version":"AA=="}})").body, expected(all, {}, all));
  // From a partial version (the record's first replica up to half its ops), with a push: the answer is
  // what the record lacked before the push.
  folio::version_vector partial;
  for (const folio::version_vector::entry& e : all.version().entries()) partial.observe(e.replica, e.count / 2);
  folio::document client(folio::record_type::text, 777);
  ASSERT_TRUE(client.apply(all.encode_since({})));
  const folio::local_change mine = client.as_text().insert(0, std::vector<char32_t>{U'm', U'i', U'n', U'e'});
  const std::string update = client.encode_change(mine);
  folio::version_vector sent_version = partial;
  sent_version.observe(777, mine.first + mine.count);
  const std::string body = ids + R"(,"version":")" + svc::base64_encode(sent_version.encode()) + R"(","incarnation":")" + incarnation +
                           R"(","update":")" + svc::base64_encode(update) + "\"}}";
  pieces = 0;
  const std::string answer = streamed(body, &pieces);
  const folio::document after = stored();
  ASSERT_NE(after.version(), all.version());
  EXPECT_EQ(answer, expected(all, sent_version, after));
  EXPECT_GT(pieces, 1u);
}

TEST(DocCache, BoundsEntriesAndBytesLeastRecentlyUsedFirst) {
  const std::size_t entry = svc::doc_cache::entry_overhead("a");  // every key here is one byte
  svc::doc_cache c(3 * entry + 300, 3);
  c.get("a"), c.get("b"), c.get("c");
  EXPECT_EQ(c.bytes(), 3 * entry);  // an empty entry costs its bookkeeping
  c.get("a");  // a is now the most recent
  auto d = c.get("d");  // evicts b, the least recently used
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.find("b"), nullptr);
  EXPECT_NE(c.get("a"), nullptr);
  EXPECT_EQ(c.size(), 3u);  // a was still there: no eviction
  EXPECT_TRUE(c.account("a", 200));
  EXPECT_TRUE(c.account("c", 200));  // over the budget: least recently used first (d) until it fits
  EXPECT_EQ(c.bytes(), 2 * entry + 400);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.find("d"), nullptr);
  EXPECT_EQ(d.use_count(), 1);  // out of the cache, still valid for whoever holds it
}

// The budget holds for every record: one above a quarter of it is not kept (account answers false and
// counts only its entry), and it evicts no other record for itself.
TEST(DocCache, ARecordAboveAQuarterOfTheBudgetIsNotKept) {
  svc::doc_cache c(1 << 20);
  EXPECT_EQ(c.max_record_bytes(), std::size_t(1) << 18);
  EXPECT_EQ(c.max_entries(), 1024u);  // one per KiB of the budget, at least 1,024
  EXPECT_EQ(svc::doc_cache(std::size_t(256) << 20).max_entries(), 262144u);
  c.get("small");
  EXPECT_TRUE(c.account("small", 1000));
  c.get("huge");
  EXPECT_FALSE(c.account("huge", std::size_t(1) << 30));
  EXPECT_LE(c.bytes(), std::size_t(1) << 20);
  EXPECT_EQ(c.bytes(), svc::doc_cache::entry_overhead("small") + 1000 + svc::doc_cache::entry_overhead("huge"));
  EXPECT_NE(c.find("small"), nullptr);  // not evicted for the record that is not kept
  EXPECT_TRUE(c.account("huge", 1000));  // smaller again: kept
  EXPECT_EQ(c.bytes(), svc::doc_cache::entry_overhead("small") + svc::doc_cache::entry_overhead("huge") + 2000);
}

// The number of entries is a setting (--cache-entries, config::cache_entries); by default one per KiB
// of the budget, so that a budget raised for many small records holds them.
TEST(DocCache, HoldsAsManyRecordsAsItsSettingSays) {
  svc::doc_cache by_default(std::size_t(256) << 20);
  for (int i = 0; i < 70000; ++i) by_default.get("record " + std::to_string(i));
  EXPECT_EQ(by_default.size(), 70000u);
  svc::doc_cache few(std::size_t(256) << 20, 100);
  for (int i = 0; i < 1000; ++i) few.get("record " + std::to_string(i));
  EXPECT_EQ(few.size(), 100u);
}

TEST_F(fixture, TheCacheHoldsAtMostTheConfiguredRecords) {
  svc::config c;
  c.cache_entries = 3;
  svc::responder node{c};
  for (int i = 0; i < 6; ++i) {
    const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"r)" + std::to_string(i) + "\"";
    ASSERT_EQ(call_on(node, db, "/v2/crdt/add", ids + R"(,"type":"text","data":"v"}})").http, 200);
    ASSERT_EQ(call_on(node, db, "/v2/crdt/get", ids + "}}").http, 200);
  }
  EXPECT_EQ(node.crdt().cache().size(), 3u);
}

// Through the handlers: an xml record whose document outgrows a quarter of --cache-mb (each replace of
// its many attributes adds to its history) is answered as always, and is not kept: the cache stays
// within its budget, the record's entry holds no document once its request ended, and the records
// already cached stay cached.
TEST_F(fixture, ARecordTooLargeForTheCacheIsServedWithoutBeingKept) {
  svc::config small;
  small.cache_bytes = std::size_t(1) << 20;
  svc::responder node{small};
  const auto run = [&](const std::string& path, const std::string& body) { return call_on(node, db, path, body); };
  const std::string hot = R"({"data":{"organizationId":"o","documentId":"d","editorId":"hot")";
  ASSERT_EQ(run("/v2/crdt/add", hot + R"(,"type":"text","data":"kept"}})").http, 200);
  const auto xml = [](int round) {
    std::string x = "<p";
    for (int i = 0; i < 2000; ++i) x += " a" + std::to_string(i) + R"(=\")" + std::to_string(round) + R"(\")";
    return x + "/>";
  };
  const std::string big = R"({"data":{"organizationId":"o","documentId":"d","editorId":"big")";
  ASSERT_EQ(run("/v2/crdt/add", big + R"(,"type":"xml","data":")" + xml(0) + "\"}}").http, 200);
  const svc::record_key k{key.substr(3, 16), "o", "d", "big"};
  for (int round = 1; round <= 12; ++round) {
    ASSERT_EQ(run("/v2/crdt/update", big + R"(,"data":")" + xml(round) + "\"}}").http, 200);
    EXPECT_LE(node.crdt().cache().bytes(), small.cache_bytes) << "round " << round;
  }
  const std::shared_ptr<svc::cached_doc> entry = node.crdt().cache().find(k.cache_key());
  ASSERT_TRUE(entry);
  EXPECT_FALSE(entry->doc.has_value());
  EXPECT_EQ(entry->rendered.load(), nullptr);
  const svc::response got = run("/v2/crdt/get", big + "}}");
  ASSERT_EQ(got.http, 200);
  EXPECT_NE(got.body.find(R"( a1999=\"12\")"), std::string::npos);
  EXPECT_FALSE(entry->doc.has_value());
  EXPECT_EQ(entry->rendered.load(), nullptr);
  const svc::response pulled = run("/v2/crdt/sync", big + R"(,"version":"AA=="}})");
  ASSERT_EQ(pulled.http, 200) << pulled.body;
  EXPECT_FALSE(entry->doc.has_value());
  EXPECT_LE(node.crdt().cache().bytes(), small.cache_bytes);
  const std::shared_ptr<svc::cached_doc> kept = node.crdt().cache().find(svc::record_key{key.substr(3, 16), "o", "d", "hot"}.cache_key());
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->doc.has_value());
}

}  // namespace
