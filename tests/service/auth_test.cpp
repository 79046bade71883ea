// Credentials (service/platform/auth.hpp) and client tokens through the server
// (service/platform/client_token.hpp; the wire in tests/e2e/tokens_e2e.py).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "platform/client_token.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

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
  EXPECT_EQ(error_of(update), "A client token opens only /v2/crdt/get, /v2/crdt/sync, /v2/crdt/subscribe, /v2/crdt/versions/get, diff, add and restore, and /v2/presence/set, leave and get.");
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

}  // namespace
