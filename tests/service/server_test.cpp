// The server (service/platform/server.hpp) through the responder: the order of its checks and /metrics.
#include <gtest/gtest.h>

#include <string>

#include "support.hpp"

namespace {

using namespace folio_service_test;

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

}  // namespace
