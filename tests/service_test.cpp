// The service's handlers on a temporary SQLite file, without a socket: routing and check order, the
// JSON rules (depth, duplicates, canonical values), and a record's life through the cache and the log.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "auth.hpp"
#include "json.hpp"
#include "service.hpp"

namespace {

namespace svc = folio::service;

struct temp_db {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("folio-service-test-" + std::to_string(::getpid()));
  temp_db() { std::filesystem::create_directories(dir); }
  ~temp_db() { std::filesystem::remove_all(dir); }
  std::string path() const { return (dir / "folio.db").string(); }
};

struct fixture : ::testing::Test {
  temp_db tmp;
  svc::database db{tmp.path()};
  svc::service service{svc::config{}};
  std::string key, token;
  void SetUp() override {
    key = svc::create_key(db, "t", svc::now_iso());
    token = svc::create_token(db, key.substr(3, 16), "alice", false, std::nullopt, svc::now_iso());
  }
  svc::response call(const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size()};
    return service.handle(db, r);
  }
};

TEST(Json, CanonicalFormSortsKeysAtEveryLevel) {
  const auto d = svc::parse_json(R"({"b":{"z":1,"a":[{"y":2,"x":1}]},"a":null})");
  EXPECT_EQ(svc::canonical_json(d), R"({"a":null,"b":{"a":[{"x":1,"y":2}],"z":1}})");
}

TEST(Json, RefusesDeepNestingAndDuplicateKeys) {
  std::string deep(65, '[');
  deep += std::string(65, ']');
  EXPECT_THROW(svc::parse_json(deep), svc::api_error);
  EXPECT_NO_THROW(svc::parse_json(std::string(64, '[') + std::string(64, ']')));
  try {
    svc::parse_json(R"({"a":1,"a":2})");
    FAIL();
  } catch (const svc::api_error& e) {
    EXPECT_EQ(e.message, "Duplicate key \"a\" in a JSON object.");
  }
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
  svc::service other{svc::config{}};
  svc::request req{"POST", "/v2/crdt/get", "application/json", key, token, R"({"data":{"organizationId":"o","documentId":"d"}})", 0};
  EXPECT_NE(other.handle(db, req).body.find(R"("data":"Hello!")"), std::string::npos);
}

TEST_F(fixture, ChecksComeInTheDocumentedOrder) {
  svc::request r{"GET", "/nope", "text/plain", "", "", "garbage", 7};
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

}  // namespace

namespace {

TEST(DocCache, BoundsEntriesAndBytesLeastRecentlyUsedFirst) {
  svc::doc_cache c(100, 3);
  auto a = c.get("a");
  c.get("b"), c.get("c");
  c.get("a");  // a is now the most recent
  c.get("d");  // evicts b, the least recently used
  EXPECT_EQ(c.size(), 3u);
  EXPECT_NE(c.get("a"), nullptr);
  EXPECT_EQ(c.size(), 3u);  // a was still there: no eviction
  c.account("a", 80);
  c.account("c", 50);  // over 100 bytes: least recently used first (d, then a) until it fits
  EXPECT_EQ(c.bytes(), 50u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(a.use_count(), 1);  // out of the cache, still valid for whoever holds it
}

}  // namespace
