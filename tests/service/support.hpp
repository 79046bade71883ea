// tests/service/support.hpp — what the service's tests share: a temporary database and a responder
// with an API key and token, called like folio-fcgi calls it (no socket).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "platform/auth.hpp"
#include "platform/clock.hpp"
#include "responder.hpp"
#include "wire/base64.hpp"
#include "wire/json.hpp"

namespace folio_service_test {

namespace svc = folio::service;

struct temp_db {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("folio-service-test-" + std::to_string(::getpid()));
  temp_db() { std::filesystem::create_directories(dir); }
  ~temp_db() { std::filesystem::remove_all(dir); }
  std::string path() const { return (dir / "folio.db").string(); }
};

struct fixture : ::testing::Test {
  temp_db tmp;
  svc::database db{tmp.path(), svc::responder::tables()};
  svc::responder service{svc::config{}};
  std::string key, token;
  void SetUp() override {
    key = svc::create_key(db, "t", svc::now_iso());
    token = svc::create_token(db, key.substr(3, 16), "alice", false, std::nullopt, svc::now_iso());
  }
  svc::response call(const std::string& path, const std::string& body) {
    svc::request r{"POST", path, "application/json", key, token, body, body.size(), {}, {}, {}};
    return service.handle(db, r);
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
