// The webhooks' API and the pull feed (service/webhooks/handlers.cpp, endpoints.hpp; docs/API.md,
// "Webhooks" and "POST /v2/events/get"), through the responder on a real database: every endpoint, every
// refusal, the address policy at add time, rotation, the test ping's rows, the delivery log's pages,
// replays, and the feed's cursor and filter. Events are put in the feed with append_to_feed, as the
// sequencer does; attempts are written as the sender writes them.
#include <future>
#include <string_view>
#include <thread>

#include "events/feed.hpp"
#include "events/outbox.hpp"
#include "platform/client_token.hpp"
#include "support.hpp"
#include "platform/fields.hpp"
#include "webhooks/address_policy.hpp"
#include "webhooks/endpoints.hpp"
#include "webhooks/signature.hpp"

namespace {

using namespace folio_service_test;

namespace {

constexpr std::string_view base64_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                           url_safe_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Whether `s` is `prefix` and then exactly `n` characters of `alphabet` (std::regex trips GCC 12's
/// -Wmaybe-uninitialized in the sanitizer build).
bool shaped(std::string_view s, std::string_view prefix, std::size_t n, std::string_view alphabet) {
  if (s.size() != prefix.size() + n || s.substr(0, prefix.size()) != prefix) return false;
  return s.substr(prefix.size()).find_first_not_of(alphabet) == std::string_view::npos;
}

}  // namespace

/// The fixture's responder lets endpoints reach the loopback address 127.0.0.1 (tests/e2e's receiver
/// is there), as --webhook-allow 127.0.0.1 does.
svc::config allowing_loopback() {
  svc::config c;
  c.webhooks.allow = {"127.0.0.1"};
  return c;
}

constexpr const char* hook = "http://127.0.0.1:9/hook";

struct webhooks : fixture {
  webhooks() : fixture(allowing_loopback()) {}
  std::string tenant() const { return key.substr(3, 16); }
  static rapidjson::Document json(const svc::response& r) { return svc::parse_json(r.body); }
  static std::string error_of(const svc::response& r) { return json(r)["error"]["message"].GetString(); }
  static std::string status_of(const svc::response& r) { return json(r)["error"]["status"].GetString(); }
  /// `data` of a call that must succeed.
  rapidjson::Document ok(const std::string& path, const std::string& data) {
    const svc::response r = call(path, R"({"data":)" + data + "}");
    EXPECT_EQ(r.http, 200) << path << " " << data << ": " << r.body;
    rapidjson::Document d = json(r);
    rapidjson::Document out;
    if (d.HasMember("result") && d["result"].HasMember("data")) out.CopyFrom(d["result"]["data"], out.GetAllocator());
    return out;
  }
  /// Expects the call to fail with `http`, `status` and `message`.
  void refused(const std::string& path, const std::string& data, int http, const std::string& status, const std::string& message) {
    const svc::response r = call(path, R"({"data":)" + data + "}");
    EXPECT_EQ(r.http, http) << path << " " << data << ": " << r.body;
    if (r.http == 200) return;
    EXPECT_EQ(status_of(r), status) << path << " " << data;
    EXPECT_EQ(error_of(r), message) << path << " " << data;
  }
  std::string add(const std::string& extra = "") {
    return ok("/v2/webhooks/endpoints/add", R"({"url":")" + std::string(hook) + "\"" + extra + "}")["endpointId"].GetString();
  }
  /// An event of `t` (another tenant when given) in the feed, made at `at_ms`; returns (position, id).
  std::pair<std::int64_t, std::string> feed_event(std::string_view type, std::int64_t at_ms, bool in_feed = true, std::string t = {},
                                                  std::string id = svc::new_message_id()) {
    const std::string body = R"({"type":")" + std::string(type) + R"(","timestamp":")" + svc::iso_time(at_ms) + R"(","data":{"organizationId":"o"}})";
    const std::int64_t position = db.write(std::string(svc::feed_key), [&] {
      return svc::append_to_feed(db, t.empty() ? tenant() : t, id, type, "o", at_ms, in_feed, body);
    });
    return {position, id};
  }
  /// A delivery of the event at `position` to `endpoint`, in `state`.
  void delivery(const std::string& endpoint, std::int64_t position, const std::string& id, const std::string& state) {
    db.write([&] {
      db.sql("INSERT INTO webhook_deliveries (tenant, endpoint, position, message_id, state, attempts, next_at) VALUES (?, ?, ?, ?, ?, 7, NULL)")
          .bind(1, tenant()).bind(2, endpoint).bind(3, position).bind(4, id).bind(5, state).step();
    });
  }
  std::string state_of(const std::string& endpoint, std::int64_t position) {
    return db.read([&] {
      svc::query q = db.sql("SELECT state FROM webhook_deliveries WHERE tenant = ? AND endpoint = ? AND position = ?");
      q.bind(1, tenant()).bind(2, endpoint).bind(3, position);
      return q.step() ? q.text(0) : std::string("none");
    });
  }
  svc::webhook_endpoint row(const std::string& endpoint) {
    std::optional<svc::webhook_endpoint> e = svc::find_endpoint(db, tenant(), endpoint);
    EXPECT_TRUE(e.has_value());
    return e.value_or(svc::webhook_endpoint{});
  }
};

TEST_F(webhooks, EndpointsAreAddedListedUpdatedAndDeleted) {
  const rapidjson::Document added = ok("/v2/webhooks/endpoints/add", R"({"url":"http://127.0.0.1:9/a","events":["comment.added","crdt.record.added","comment.added"],)"
                                                                     R"("organizationIds":["acme","acme","beta"],"description":"Mail on comments"})");
  const std::string id = added["endpointId"].GetString(), secret = added["secret"].GetString();
  EXPECT_TRUE(shaped(id, "ep_", 24, "0123456789abcdef")) << id;
  EXPECT_TRUE(shaped(secret, "whsec_", 32, base64_alphabet)) << secret;
  const std::string second = add();

  const svc::response listed = call("/v2/webhooks/endpoints/get", R"({"data":{}})");
  ASSERT_EQ(listed.http, 200) << listed.body;
  EXPECT_EQ(listed.body.find(secret), std::string::npos);  // never the secret
  EXPECT_EQ(listed.body.find("whsec_"), std::string::npos);
  const rapidjson::Document all = json(listed);
  EXPECT_EQ(std::string(all["result"]["message"].GetString()), "Webhook endpoints fetched successfully.");
  const rapidjson::Value& eps = all["result"]["data"]["endpoints"];
  ASSERT_EQ(eps.Size(), 2u);
  const rapidjson::Value& first = eps[0];  // oldest first
  EXPECT_EQ(std::string(first["endpointId"].GetString()), id);
  EXPECT_EQ(std::string(first["url"].GetString()), "http://127.0.0.1:9/a");
  EXPECT_EQ(svc::canonical_json(first["events"]), R"(["comment.added","crdt.record.added"])");
  EXPECT_EQ(svc::canonical_json(first["organizationIds"]), R"(["acme","beta"])");
  EXPECT_EQ(std::string(first["description"].GetString()), "Mail on comments");
  EXPECT_TRUE(first["enabled"].GetBool());
  EXPECT_TRUE(first["disabledReason"].IsNull());
  EXPECT_TRUE(svc::is_timestamp(first["createdAt"].GetString()));
  EXPECT_EQ(std::string(first["updatedAt"].GetString()), first["createdAt"].GetString());
  EXPECT_TRUE(first["failingSince"].IsNull());
  EXPECT_EQ(first["queued"].GetInt64(), 0);
  EXPECT_EQ(first["dropped"].GetInt64(), 0);
  EXPECT_TRUE(eps[1]["events"].IsNull());
  EXPECT_TRUE(eps[1]["organizationIds"].IsNull());
  EXPECT_TRUE(eps[1]["description"].IsNull());
  EXPECT_EQ(first.MemberCount(), 12u);

  const rapidjson::Document one = ok("/v2/webhooks/endpoints/get", R"({"endpointIds":[")" + second + R"(","ep_000000000000000000000000"]})");
  ASSERT_EQ(one["endpoints"].Size(), 1u);
  EXPECT_EQ(std::string(one["endpoints"][0]["endpointId"].GetString()), second);

  // update: each field; null filters take every type / organization; disabling and enabling.
  const rapidjson::Document updated =
      ok("/v2/webhooks/endpoints/update", R"({"endpointId":")" + id + R"(","url":"http://127.0.0.1:9/b","events":null,"organizationIds":["x"],"description":null})");
  EXPECT_EQ(std::string(updated["url"].GetString()), "http://127.0.0.1:9/b");
  EXPECT_TRUE(updated["events"].IsNull());
  EXPECT_EQ(svc::canonical_json(updated["organizationIds"]), R"(["x"])");
  EXPECT_TRUE(updated["description"].IsNull());
  EXPECT_EQ(row(id).secret, secret);
  EXPECT_FALSE(ok("/v2/webhooks/endpoints/update", R"({"endpointId":")" + id + R"(","enabled":false})")["enabled"].GetBool());
  db.write([&] {
    db.sql("UPDATE webhook_endpoints SET disabled_reason = 'The endpoint answered 410 Gone.', failing_since = 5 WHERE id = ?").bind(1, id).step();
  });
  const rapidjson::Document enabled = ok("/v2/webhooks/endpoints/update", R"({"endpointId":")" + id + R"(","enabled":true})");
  EXPECT_TRUE(enabled["enabled"].GetBool());
  EXPECT_TRUE(enabled["disabledReason"].IsNull());
  EXPECT_TRUE(enabled["failingSince"].IsNull());
  EXPECT_EQ(svc::canonical_json(enabled["organizationIds"]), R"(["x"])");  // unchanged

  // delete: the endpoint and its deliveries; its attempts stay.
  const auto [position, message] = feed_event(svc::event_types::comment_added, 1000);
  delivery(id, position, message, "pending");
  db.write([&] {
    db.sql("INSERT INTO webhook_attempts (tenant, endpoint, attempted_at, message_id, attempt, position, http_status, latency_ms) VALUES (?, ?, 2000, ?, 1, ?, 500, 3)")
        .bind(1, tenant()).bind(2, id).bind(3, message).bind(4, position).step();
  });
  const svc::response deleted = call("/v2/webhooks/endpoints/delete", R"({"data":{"endpointId":")" + id + "\"}}");
  EXPECT_EQ(deleted.http, 200) << deleted.body;
  EXPECT_EQ(deleted.body, R"({"result":{"status":"success","message":"Webhook endpoint deleted successfully."}})");
  EXPECT_EQ(state_of(id, position), "none");
  EXPECT_EQ(svc::list_attempts(db, tenant(), id, std::nullopt, std::nullopt, 10).size(), 1u);
  refused("/v2/webhooks/endpoints/delete", R"({"endpointId":")" + id + "\"}", 404, "NOT_FOUND", "No webhook endpoint found for this endpointId.");
  EXPECT_EQ(ok("/v2/webhooks/endpoints/get", "{}")["endpoints"].Size(), 1u);
}

TEST_F(webhooks, EveryBadFieldIsRefusedByName) {
  const std::string id = add();
  const std::string ep = R"("endpointId":")" + id + "\"";
  const std::string types =
      "crdt.record.added, crdt.record.updated, crdt.record.deleted, crdt.version.created, comment_annotation.added, comment_annotation.updated, "
      "comment_annotation.deleted, comment.added, comment.updated, comment.deleted";
  struct refusal {
    std::string path, data, message;
  };
  const refusal cases[] = {
      {"endpoints/add", R"({"url":"http://127.0.0.1/","secret":"x"})", R"(Unknown field "secret"; webhooks/endpoints/add takes url, events, organizationIds and description.)"},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","eventTypes":[]})", R"(Unknown field "eventTypes"; webhooks/endpoints/add takes url, events, organizationIds and description.)"},
      {"endpoints/add", "{}", "url is required."},
      {"endpoints/add", R"({"url":null})", "url is required."},
      {"endpoints/add", R"({"url":""})", "url is required."},
      {"endpoints/add", R"({"url":7})", "url must be a string."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/)" + std::string(2040, 'a') + "\"}", "url must be at most 2048 bytes."},
      {"endpoints/add", R"({"url":"hook"})", "url must be an absolute http or https URL."},
      {"endpoints/add", R"({"url":"http://u:p@127.0.0.1/"})", "url must not hold a user name or password."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","events":[]})", "events must be a non-empty array of event types (or null for every type)."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","events":"comment.added"})", "events must be a non-empty array of event types (or null for every type)."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","events":["comment.added","webhook.ping"]})", "events[1] is not an event type; the types are " + types + "."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","events":[1]})", "events[0] is not an event type; the types are " + types + "."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","organizationIds":[]})",
       "organizationIds must be a non-empty array of organization ids (or null for every organization)."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","organizationIds":[""]})", "organizationIds[0] must not be empty."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","organizationIds":["a",2]})", "organizationIds[1] must be a string."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","description":5})", "description must be a string (or null for none)."},
      {"endpoints/add", R"({"url":"http://127.0.0.1/","description":")" + std::string(1025, 'd') + "\"}", "description must be at most 1024 bytes."},
      {"endpoints/get", R"({"endpointId":"x"})", R"(Unknown field "endpointId"; webhooks/endpoints/get takes endpointIds.)"},
      {"endpoints/get", R"({"endpointIds":"x"})", "endpointIds must be an array of strings."},
      {"endpoints/update", "{" + ep + R"(,"secret":"x"})",
       R"(Unknown field "secret"; webhooks/endpoints/update takes endpointId, url, events, organizationIds, description and enabled.)"},
      {"endpoints/update", R"({"enabled":true})", "endpointId is required."},
      {"endpoints/update", R"({"endpointId":5,"enabled":true})", "endpointId must be a string."},
      {"endpoints/update", "{" + ep + "}", "Nothing to update: send url, events, organizationIds, description or enabled."},
      {"endpoints/update", "{" + ep + R"(,"enabled":"yes"})", "enabled must be true or false."},
      {"endpoints/update", "{" + ep + R"(,"url":null})", "url is required."},
      {"endpoints/update", "{" + ep + R"(,"url":"gopher://127.0.0.1/"})", "url must be an http or https URL."},
      {"endpoints/update", "{" + ep + R"(,"events":[]})", "events must be a non-empty array of event types (or null for every type)."},
      {"endpoints/delete", "{" + ep + R"(,"force":true})", R"(Unknown field "force"; webhooks/endpoints/delete takes endpointId.)"},
      {"endpoints/delete", "{}", "endpointId is required."},
      {"endpoints/rotate-secret", "{" + ep + R"(,"secret":"x"})", R"(Unknown field "secret"; webhooks/endpoints/rotate-secret takes endpointId.)"},
      {"endpoints/test", "{" + ep + R"(,"type":"x"})", R"(Unknown field "type"; webhooks/endpoints/test takes endpointId.)"},
      {"deliveries/get", "{" + ep + R"(,"limit":5})", R"(Unknown field "limit"; webhooks/deliveries/get takes endpointId, messageId, pageSize and pageToken.)"},
      {"deliveries/get", "{" + ep + R"(,"pageSize":101})", "pageSize must be a whole number from 1 to 100."},
      {"deliveries/get", "{" + ep + R"(,"pageSize":0})", "pageSize must be a whole number from 1 to 100."},
      {"deliveries/get", "{" + ep + R"(,"pageToken":"!!"})", "pageToken is not valid for this query; start again without it."},
      {"deliveries/get", "{" + ep + R"(,"messageId":7})", "messageId must be a string."},
      {"deliveries/replay", "{" + ep + R"(,"since":"x"})", R"(Unknown field "since"; webhooks/deliveries/replay takes endpointId, and messageId or failedSince.)"},
      {"deliveries/replay", "{" + ep + "}", "Send messageId (one message) or failedSince (every delivery that failed since then), not both."},
      {"deliveries/replay", "{" + ep + R"(,"messageId":"m","failedSince":"2026-01-01T00:00:00.000Z"})",
       "Send messageId (one message) or failedSince (every delivery that failed since then), not both."},
      {"deliveries/replay", "{" + ep + R"(,"failedSince":"yesterday"})",
       "failedSince must be an ISO 8601 UTC timestamp with milliseconds, like 2025-01-20T10:30:00.000Z."},
  };
  for (const refusal& r : cases) refused("/v2/webhooks/" + r.path, r.data, 400, "INVALID_ARGUMENT", r.message);
  const refusal feed_cases[] = {
      {"", R"({"cursor":"1"})", R"(Unknown field "cursor"; events/get takes after, limit and types.)"},
      {"", R"({"after":1})", "after must be a cursor that events/get answered."},
      {"", R"({"after":"-1"})", "after must be a cursor that events/get answered."},
      {"", R"({"after":"1234567890123456789"})", "after must be a cursor that events/get answered."},
      {"", R"({"limit":0})", "limit must be a whole number from 1 to 1000."},
      {"", R"({"limit":1001})", "limit must be a whole number from 1 to 1000."},
      {"", R"({"limit":1.5})", "limit must be a whole number from 1 to 1000."},
      {"", R"({"types":[]})", "types must be a non-empty array of event types (or null for every type)."},
      {"", R"({"types":["webhook.ping"]})", "types[0] is not an event type; the types are " + types + "."},
  };
  for (const refusal& r : feed_cases) refused("/v2/events/get", r.data, 400, "INVALID_ARGUMENT", r.message);
  EXPECT_TRUE(row(id).enabled);  // nothing changed
  EXPECT_EQ(ok("/v2/webhooks/endpoints/get", "{}")["endpoints"].Size(), 1u);
}

TEST_F(webhooks, TheTwentyFirstEndpointIsRefused) {
  for (int i = 0; i < 20; ++i) add();
  refused("/v2/webhooks/endpoints/add", R"({"url":"http://127.0.0.1/"})", 429, "RESOURCE_EXHAUSTED",
          "This API key has 20 webhook endpoints, the most it may; delete one (webhooks/endpoints/delete) before adding another.");
  EXPECT_EQ(ok("/v2/webhooks/endpoints/get", "{}")["endpoints"].Size(), 20u);
  // Another tenant's count is its own.
  key = svc::create_key(db, "u", svc::now_iso());
  token = svc::create_token(db, key.substr(3, 16), "bob", false, std::nullopt, svc::now_iso());
  add();
}

// Adds from several nodes at once: the count and the insert are one step per tenant (its write key).
TEST_F(webhooks, ConcurrentAddsStopAtTheLimit) {
  const std::vector<int> added = on_nodes(3, [&](int, svc::responder& node, svc::database& on) {
    int ok = 0;
    for (int i = 0; i < 10; ++i) {
      const svc::response r = call_on(node, on, "/v2/webhooks/endpoints/add", R"({"data":{"url":"https://93.184.216.34/hook"}})");
      if (r.http == 200) ++ok;
      else EXPECT_EQ(r.http, 429) << r.body;
    }
    return ok;
  });
  EXPECT_EQ(added[0] + added[1] + added[2], 20);
  EXPECT_EQ(svc::list_endpoints(db, tenant()).size(), 20u);
}

TEST_F(webhooks, AClientTokenIsRefusedEverywhere) {
  service.platform().set_client_keys(std::make_shared<const svc::key_ring>(svc::key_ring::parse("k1 " + std::string(64, 'a'))));
  svc::client_claims claims;
  claims.tenant = tenant(), claims.org = "o", claims.doc = "d", claims.user = "ana", claims.write = true, claims.expires = 4000000000;
  const std::string client = svc::sign_client_token(claims, service.platform().client_keys()->signer());
  for (const char* path : {"/v2/webhooks/endpoints/add", "/v2/webhooks/endpoints/get", "/v2/webhooks/endpoints/update", "/v2/webhooks/endpoints/delete",
                           "/v2/webhooks/endpoints/rotate-secret", "/v2/webhooks/endpoints/test", "/v2/webhooks/deliveries/get",
                           "/v2/webhooks/deliveries/replay", "/v2/events/get"}) {
    const std::string body = R"({"data":{"url":"http://127.0.0.1/"}})";
    svc::request r{"POST", path, "application/json", {}, {}, body, body.size(), {}, {}, {}};
    r.authorization = "Bearer " + client;
    const svc::response answer = service.handle(db, r);
    EXPECT_EQ(answer.http, 403) << path;
    EXPECT_EQ(status_of(answer), "PERMISSION_DENIED") << path;
  }
  EXPECT_EQ(ok("/v2/webhooks/endpoints/get", "{}")["endpoints"].Size(), 0u);
}

TEST_F(webhooks, AReadOnlyTokenReadsButDoesNotWrite) {
  const std::string id = add();
  token = svc::create_token(db, tenant(), "reader", true, std::nullopt, svc::now_iso());
  EXPECT_EQ(ok("/v2/webhooks/endpoints/get", "{}")["endpoints"].Size(), 1u);
  ok("/v2/webhooks/deliveries/get", R"({"endpointId":")" + id + "\"}");
  ok("/v2/events/get", "{}");
  refused("/v2/webhooks/endpoints/rotate-secret", R"({"endpointId":")" + id + "\"}", 403, "PERMISSION_DENIED", "This token is read-only.");
}

TEST_F(webhooks, AnotherTenantsEndpointIsNotFound) {
  const std::string id = add();
  const auto [position, message] = feed_event(svc::event_types::comment_added, 1000);
  delivery(id, position, message, "failed");
  const std::string owner = tenant();
  key = svc::create_key(db, "other", svc::now_iso());
  token = svc::create_token(db, key.substr(3, 16), "bob", false, std::nullopt, svc::now_iso());
  const std::string ep = R"({"endpointId":")" + id + "\"";
  const std::pair<std::string, std::string> calls[] = {
      {"endpoints/update", ep + R"(,"enabled":false})"},
      {"endpoints/delete", ep + "}"},
      {"endpoints/rotate-secret", ep + "}"},
      {"endpoints/test", ep + "}"},
      {"deliveries/get", ep + "}"},
      {"deliveries/replay", ep + R"(,"messageId":")" + message + "\"}"},
      {"deliveries/replay", ep + R"(,"failedSince":"1970-01-01T00:00:00.000Z"})"},
  };
  for (const auto& [path, data] : calls) refused("/v2/webhooks/" + path, data, 404, "NOT_FOUND", "No webhook endpoint found for this endpointId.");
  EXPECT_EQ(ok("/v2/webhooks/endpoints/get", R"({"endpointIds":[")" + id + "\"]}")["endpoints"].Size(), 0u);
  EXPECT_EQ(ok("/v2/events/get", "{}")["events"].Size(), 0u);
  // Unchanged for its owner.
  const svc::webhook_endpoint e = svc::list_endpoints(db, std::nullopt).at(0).second;
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.old_secret, std::nullopt);
  db.read([&] {
    svc::query q = db.sql("SELECT state FROM webhook_deliveries WHERE tenant = ? AND endpoint = ? AND position = ?");
    q.bind(1, owner).bind(2, id).bind(3, position);
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.text(0), "failed");
  });
}

TEST_F(webhooks, InternalAddressesAreRefusedUnlessAllowed) {
  svc::responder strict{svc::config{}};
  const auto add_on = [&](svc::responder& node, const std::string& url) {
    return call_on(node, db, "/v2/webhooks/endpoints/add", R"({"data":{"url":")" + url + "\"}}");
  };
  const std::pair<std::string, std::string> refused_urls[] = {
      {"http://127.0.0.1/", "url's host 127.0.0.1 resolves to 127.0.0.1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[::1]/", "url's host ::1 resolves to ::1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://169.254.169.254/latest/meta-data/",
       "url's host 169.254.169.254 resolves to 169.254.169.254, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://10.0.0.1/", "url's host 10.0.0.1 resolves to 10.0.0.1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"https://192.168.1.1:8443/x", "url's host 192.168.1.1 resolves to 192.168.1.1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[::ffff:127.0.0.1]/", "url's host ::ffff:127.0.0.1 resolves to ::ffff:127.0.0.1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      // IPv6 that embeds or reaches an internal IPv4 address, or is reserved: 6to4 of 127.0.0.1 and of the
      // metadata address, local-use NAT64, Teredo, site-local, discard.
      {"http://[2002:7f00:1::1]/", "url's host 2002:7f00:1::1 resolves to 2002:7f00:1::1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[2002:a9fe:a9fe::]/", "url's host 2002:a9fe:a9fe:: resolves to 2002:a9fe:a9fe::, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[64:ff9b:1::a00:1]/", "url's host 64:ff9b:1::a00:1 resolves to 64:ff9b:1::a00:1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
       "url's host 2001:0:4136:e378:8000:63bf:3fff:fdd2 resolves to 2001:0:4136:e378:8000:63bf:3fff:fdd2, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[fec0::1]/", "url's host fec0::1 resolves to fec0::1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"http://[100::1]/", "url's host 100::1 resolves to 100::1, a loopback, private, link-local or reserved address; webhooks reach only public addresses."},
      {"file:///etc/passwd", "url must be an http or https URL."},
      {"gopher://example.com/", "url must be an http or https URL."},
      {"ftp://example.com/x", "url must be an http or https URL."},
  };
  for (const auto& [url, message] : refused_urls) {
    const svc::response r = add_on(strict, url);
    EXPECT_EQ(r.http, 400) << url << ": " << r.body;
    if (r.http != 400) continue;
    EXPECT_EQ(status_of(r), "INVALID_ARGUMENT") << url;
    EXPECT_EQ(error_of(r), message) << url;
  }
  // localhost resolves to loopback (127.0.0.1, and ::1 where the resolver gives it).
  const svc::response local = add_on(strict, "http://localhost:8080/hook");
  EXPECT_EQ(local.http, 400) << local.body;
  EXPECT_TRUE(error_of(local).rfind("url's host localhost resolves to 127.0.0.1, a loopback", 0) == 0 ||
              error_of(local).rfind("url's host localhost resolves to ::1, a loopback", 0) == 0)
      << error_of(local);
  // An update to a refused URL is refused too, and changes nothing.
  const std::string id = add();
  refused("/v2/webhooks/endpoints/update", R"({"endpointId":")" + id + R"(","url":"http://10.0.0.1/"})", 400, "INVALID_ARGUMENT",
          "url's host 10.0.0.1 resolves to 10.0.0.1, a loopback, private, link-local or reserved address; webhooks reach only public addresses.");
  EXPECT_EQ(row(id).url, hook);
  EXPECT_EQ(svc::list_endpoints(db, tenant()).size(), 1u);
  // Allowed by the operator (this fixture's responder allows 127.0.0.1), and a public address by anyone.
  EXPECT_EQ(add_on(service, "http://127.0.0.1:8080/receiver").http, 200);
  EXPECT_EQ(add_on(strict, "https://93.184.216.34/hook").http, 200);
  // 6to4 of a public address, and the well-known NAT64 prefix of one, are public.
  EXPECT_EQ(add_on(strict, "https://[2002:5db8:d822::1]/hook").http, 200);
  EXPECT_EQ(add_on(strict, "https://[64:ff9b::5db8:d822]/hook").http, 200);
  EXPECT_EQ(add_on(strict, "https://[2001:4860::1]/hook").http, 200);  // 2001::/23 outside Teredo's /32
}

TEST_F(webhooks, ARotatedSecretSignsBesideTheNewOneForADay) {
  const rapidjson::Document added = ok("/v2/webhooks/endpoints/add", R"({"url":")" + std::string(hook) + "\"}");
  const std::string id = added["endpointId"].GetString(), first = added["secret"].GetString();
  EXPECT_EQ(svc::signing_secrets(row(id), svc::now_unix_ms()), std::vector<std::string>{first});
  const rapidjson::Document rotated = ok("/v2/webhooks/endpoints/rotate-secret", R"({"endpointId":")" + id + "\"}");
  const std::string second = rotated["secret"].GetString();
  EXPECT_NE(second, first);
  EXPECT_EQ(rotated.MemberCount(), 1u);
  const svc::webhook_endpoint e = row(id);
  EXPECT_EQ(e.secret, second);
  EXPECT_EQ(e.old_secret, first);
  ASSERT_TRUE(e.old_secret_until.has_value());
  EXPECT_EQ(*e.old_secret_until, e.updated_at + 24 * 3600 * 1000);
  EXPECT_EQ(svc::signing_secrets(e, e.updated_at), (std::vector<std::string>{second, first}));
  EXPECT_EQ(svc::signing_secrets(e, *e.old_secret_until - 1), (std::vector<std::string>{second, first}));
  EXPECT_EQ(svc::signing_secrets(e, *e.old_secret_until), std::vector<std::string>{second});
  // Signatures under each are the Standard Webhooks ones of its own key.
  EXPECT_NE(svc::webhook_signature(second, "msg_x", 1, "{}"), svc::webhook_signature(first, "msg_x", 1, "{}"));
  // Rotating again while the first secret signs is refused, and changes nothing.
  refused("/v2/webhooks/endpoints/rotate-secret", R"({"endpointId":")" + id + "\"}", 400, "FAILED_PRECONDITION",
          "The previous secret still signs until " + svc::iso_time(*e.old_secret_until) + "; rotate again after it.");
  const svc::webhook_endpoint kept = row(id);
  EXPECT_EQ(kept.secret, second);
  EXPECT_EQ(kept.old_secret, first);
  EXPECT_EQ(kept.old_secret_until, e.old_secret_until);
  // Once it no longer signs (its day moved into the past), a rotation replaces the second.
  db.write([&] { db.sql("UPDATE webhook_endpoints SET old_secret_until = ? WHERE id = ?").bind(1, svc::now_unix_ms() - 1).bind(2, id).step(); });
  const std::string third = ok("/v2/webhooks/endpoints/rotate-secret", R"({"endpointId":")" + id + "\"}")["secret"].GetString();
  const svc::webhook_endpoint again = row(id);
  EXPECT_EQ(svc::signing_secrets(again, again.updated_at), (std::vector<std::string>{third, second}));
}

TEST_F(webhooks, TheTestPingIsQueuedForItsEndpointOnly) {
  const std::string id = add(), other = add();
  const rapidjson::Document sent = ok("/v2/webhooks/endpoints/test", R"({"endpointId":")" + id + "\"}");
  const std::string message = sent["messageId"].GetString();
  EXPECT_TRUE(shaped(message, "msg_", 27, url_safe_alphabet)) << message;
  db.read([&] {
    svc::query f = db.sql("SELECT position, tenant, type, org, created_at, in_feed, body FROM event_feed WHERE id = ?");
    f.bind(1, message);
    ASSERT_TRUE(f.step());
    const std::int64_t position = f.integer(0);
    EXPECT_EQ(f.text(1), tenant());
    EXPECT_EQ(f.text(2), "webhook.ping");
    EXPECT_EQ(f.integer(5), 0);  // sent, never listed
    EXPECT_EQ(f.text(6), R"({"type":"webhook.ping","timestamp":")" + svc::iso_time(f.integer(4)) + R"(","data":{"endpointId":")" + id + "\"}}");
    EXPECT_FALSE(f.step());
    svc::query d = db.sql("SELECT endpoint, position, message_id, state, attempts, next_at FROM webhook_deliveries WHERE tenant = ?");
    d.bind(1, tenant());
    ASSERT_TRUE(d.step());
    EXPECT_EQ(d.text(0), id);
    EXPECT_EQ(d.integer(1), position);
    EXPECT_EQ(d.text(2), message);
    EXPECT_EQ(d.text(3), "pending");
    EXPECT_EQ(d.integer(4), 0);
    EXPECT_FALSE(d.step());  // not the other endpoint
  });
  EXPECT_EQ(row(id).queued, 1);
  EXPECT_EQ(row(other).queued, 0);
  EXPECT_EQ(ok("/v2/events/get", "{}")["events"].Size(), 0u);
  // Disabling fails the pending ping (replayable once enabled); a disabled endpoint is not pinged.
  ok("/v2/webhooks/endpoints/update", R"({"endpointId":")" + id + R"(","enabled":false})");
  EXPECT_EQ(row(id).queued, 0);
  refused("/v2/webhooks/endpoints/test", R"({"endpointId":")" + id + "\"}", 400, "FAILED_PRECONDITION",
          "This endpoint is disabled; enable it (webhooks/endpoints/update) first.");
  refused("/v2/webhooks/endpoints/test", R"({"endpointId":"ep_000000000000000000000000"})", 404, "NOT_FOUND", "No webhook endpoint found for this endpointId.");
  ok("/v2/webhooks/endpoints/update", R"({"endpointId":")" + id + R"(","enabled":true})");
  EXPECT_EQ(ok("/v2/webhooks/deliveries/replay", R"({"endpointId":")" + id + R"(","messageId":")" + message + "\"}")["replayed"].GetInt64(), 1);
  EXPECT_EQ(row(id).queued, 1);
}

TEST_F(webhooks, AFullQueueRefusesThePingAndWritesNothing) {
  svc::config small = allowing_loopback();
  small.webhooks.queued_per_endpoint = 1;
  svc::responder node{small};
  const std::string id = add();
  const auto test = [&] { return call_on(node, db, "/v2/webhooks/endpoints/test", R"({"data":{"endpointId":")" + id + "\"}}"); };
  EXPECT_EQ(test().http, 200);
  const svc::response full = test();
  EXPECT_EQ(full.http, 429) << full.body;
  EXPECT_EQ(error_of(full), "This endpoint already has 1 deliveries queued, the most it may; the ping was not sent.");
  EXPECT_EQ(row(id).queued, 1);
  EXPECT_EQ(row(id).dropped, 0);  // rolled back with the rest
  db.read([&] {
    svc::query n = db.sql("SELECT count(*) FROM event_feed");
    n.step();
    EXPECT_EQ(n.integer(0), 1);
  });
}

TEST_F(webhooks, TheDeliveryLogIsPagedNewestFirst) {
  const std::string id = add(), other = add();
  // Ids in one letter case: PostgreSQL's collation orders them as bytes do.
  const auto [p1, m1] = feed_event(svc::event_types::record_added, 1000, true, {}, "msg_b");
  const auto [p2, m2] = feed_event(svc::event_types::comment_added, 1000, true, {}, "msg_a");
  // m1: attempts at 10 (500), 20 (timeout), 30 (200); m2: at 20 (refused); other endpoint: one.
  db.write([&] {
    const auto attempt = [&](const std::string& ep, std::int64_t at, const std::string& m, std::int64_t n, std::int64_t pos, std::optional<std::int64_t> http,
                             std::optional<std::string> error, std::optional<std::string> response) {
      svc::query q = db.sql("INSERT INTO webhook_attempts (tenant, endpoint, attempted_at, message_id, attempt, position, http_status, latency_ms, error, response)"
                            " VALUES (?, ?, ?, ?, ?, ?, ?, 12, ?, ?)");
      q.bind(1, tenant()).bind(2, ep).bind(3, at).bind(4, m).bind(5, n).bind(6, pos);
      if (http) q.bind(7, *http); else q.bind_null(7);
      q.bind_opt(8, error).bind_opt(9, response).step();
    };
    attempt(id, 10, m1, 1, p1, 500, std::nullopt, std::string("oops"));
    attempt(id, 20, m1, 2, p1, std::nullopt, std::string("timeout after 15 s"), std::nullopt);
    attempt(id, 20, m2, 1, p2, std::nullopt, std::string("connection refused"), std::nullopt);
    attempt(id, 30, m1, 3, p1, 200, std::nullopt, std::string("ok"));
    attempt(other, 40, m1, 1, p1, 200, std::nullopt, std::nullopt);
  });
  std::vector<std::string> seen;
  std::string request = R"({"endpointId":")" + id + R"(","pageSize":2})";
  for (int page = 0; page < 5; ++page) {
    const rapidjson::Document d = ok("/v2/webhooks/deliveries/get", request);
    for (const auto& a : d["attempts"].GetArray()) seen.push_back(std::string(a["messageId"].GetString()) + "#" + std::to_string(a["attempt"].GetInt64()));
    if (!d.HasMember("nextPageToken")) break;
    EXPECT_EQ(d["attempts"].Size(), 2u);
    request = R"({"endpointId":")" + id + R"(","pageSize":2,"pageToken":")" + d["nextPageToken"].GetString() + "\"}";
  }
  // At time 20: by message id, descending.
  EXPECT_EQ(seen, (std::vector<std::string>{m1 + "#3", m1 + "#2", m2 + "#1", m1 + "#1"}));

  const rapidjson::Document d = ok("/v2/webhooks/deliveries/get", R"({"endpointId":")" + id + R"(","messageId":")" + m1 + "\"}");
  ASSERT_EQ(d["attempts"].Size(), 3u);
  EXPECT_FALSE(d.HasMember("nextPageToken"));
  const rapidjson::Value& newest = d["attempts"][0];
  EXPECT_EQ(svc::canonical_json(newest), R"({"attempt":3,"attemptedAt":"1970-01-01T00:00:00.030Z","error":null,"eventType":"crdt.record.added","httpStatus":200,)"
                                         R"("latencyMs":12,"messageId":")" + m1 + R"(","response":"ok"})");
  EXPECT_TRUE(d["attempts"][1]["httpStatus"].IsNull());
  EXPECT_EQ(std::string(d["attempts"][1]["error"].GetString()), "timeout after 15 s");
  // A token continues only its own query.
  const rapidjson::Document paged = ok("/v2/webhooks/deliveries/get", R"({"endpointId":")" + id + R"(","pageSize":1})");
  const std::string t = paged["nextPageToken"].GetString();
  refused("/v2/webhooks/deliveries/get", R"({"endpointId":")" + id + R"(","messageId":")" + m1 + R"(","pageToken":")" + t + "\"}", 400, "INVALID_ARGUMENT",
          "pageToken is not valid for this query; start again without it.");
  refused("/v2/webhooks/deliveries/get", R"({"endpointId":")" + other + R"(","pageToken":")" + t + "\"}", 400, "INVALID_ARGUMENT",
          "pageToken is not valid for this query; start again without it.");
  refused("/v2/webhooks/deliveries/get", R"({"endpointId":"ep_000000000000000000000000"})", 404, "NOT_FOUND", "No webhook endpoint found for this endpointId.");
  EXPECT_EQ(ok("/v2/webhooks/deliveries/get", R"({"endpointId":")" + other + "\"}")["attempts"].Size(), 1u);
}

TEST_F(webhooks, ReplayQueuesOneMessageOrEveryFailureSinceATime) {
  const std::string id = add();
  const auto [p1, m1] = feed_event(svc::event_types::record_added, 1000);
  const auto [p2, m2] = feed_event(svc::event_types::record_updated, 2000);
  const auto [p3, m3] = feed_event(svc::event_types::record_deleted, 3000);
  const auto [p4, m4] = feed_event(svc::event_types::comment_added, 4000);
  delivery(id, p1, m1, "failed");
  delivery(id, p2, m2, "failed");
  delivery(id, p3, m3, "succeeded");
  delivery(id, p4, m4, "failed");
  const std::string ep = R"({"endpointId":")" + id + "\"";
  EXPECT_EQ(ok("/v2/webhooks/deliveries/replay", ep + R"(,"failedSince":"1970-01-01T00:00:02.000Z"})")["replayed"].GetInt64(), 2);
  EXPECT_EQ(state_of(id, p1), "failed");
  EXPECT_EQ(state_of(id, p2), "pending");
  EXPECT_EQ(state_of(id, p3), "succeeded");
  EXPECT_EQ(state_of(id, p4), "pending");
  EXPECT_EQ(row(id).queued, 2);
  db.read([&] {
    svc::query q = db.sql("SELECT attempts, next_at FROM webhook_deliveries WHERE endpoint = ? AND position = ?");
    q.bind(1, id).bind(2, p2);
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.integer(0), 0);  // counted afresh
    EXPECT_GT(q.integer(1), 1000);
  });
  // Again: nothing is failed since then any more.
  EXPECT_EQ(ok("/v2/webhooks/deliveries/replay", ep + R"(,"failedSince":"1970-01-01T00:00:02.000Z"})")["replayed"].GetInt64(), 0);
  // One message: a succeeded one is sent again; one the endpoint never had is not.
  const svc::response one = call("/v2/webhooks/deliveries/replay", R"({"data":)" + ep + R"(,"messageId":")" + m3 + "\"}}");
  EXPECT_EQ(one.body, R"({"result":{"status":"success","message":"Deliveries replayed.","data":{"replayed":1}}})");
  EXPECT_EQ(state_of(id, p3), "pending");
  const auto [p5, m5] = feed_event(svc::event_types::comment_deleted, 5000);
  refused("/v2/webhooks/deliveries/replay", ep + R"(,"messageId":")" + m5 + "\"}", 404, "NOT_FOUND", "This endpoint was never sent message " + m5 + ".");
  EXPECT_EQ(state_of(id, p5), "none");
  EXPECT_EQ(row(id).queued, 3);
  refused("/v2/webhooks/deliveries/replay", ep + R"(,"messageId":"msg_unknown"})", 404, "NOT_FOUND", "No event found for this messageId.");
  // Another tenant's message is not found either.
  const auto [p6, m6] = feed_event(svc::event_types::comment_deleted, 5000, true, "othertenant00000");
  refused("/v2/webhooks/deliveries/replay", ep + R"(,"messageId":")" + m6 + "\"}", 404, "NOT_FOUND", "No event found for this messageId.");
  (void)p6;
  // A disabled endpoint is not replayed to.
  ok("/v2/webhooks/endpoints/update", ep + R"(,"enabled":false})");
  EXPECT_EQ(state_of(id, p2), "failed");
  EXPECT_EQ(row(id).queued, 0);
  refused("/v2/webhooks/deliveries/replay", ep + R"(,"messageId":")" + m1 + "\"}", 400, "FAILED_PRECONDITION",
          "This endpoint is disabled; enable it (webhooks/endpoints/update) first.");
  ok("/v2/webhooks/endpoints/update", ep + R"(,"enabled":true})");
  EXPECT_EQ(ok("/v2/webhooks/deliveries/replay", ep + R"(,"failedSince":"1970-01-01T00:00:00.000Z"})")["replayed"].GetInt64(), 4);
  EXPECT_EQ(row(id).queued, 4);
}

// An endpoint filtered to other organizations or types, or another endpoint's ping, is never sent a
// message by replay: only one the endpoint has a delivery of.
TEST_F(webhooks, ReplayOfAMessageTheEndpointNeverHadIsRefused) {
  const std::string acme = add(R"(,"organizationIds":["acme"])"), comments = add(R"(,"events":["comment.added"])"), all = add();
  const auto [position, message] = feed_event(svc::event_types::record_added, 1000);  // organization "o"
  delivery(all, position, message, "succeeded");
  for (const std::string& ep : {acme, comments}) {
    refused("/v2/webhooks/deliveries/replay", R"({"endpointId":")" + ep + R"(","messageId":")" + message + "\"}", 404, "NOT_FOUND",
            "This endpoint was never sent message " + message + ".");
    EXPECT_EQ(state_of(ep, position), "none");
    EXPECT_EQ(row(ep).queued, 0);
  }
  const std::string ping = ok("/v2/webhooks/endpoints/test", R"({"endpointId":")" + comments + "\"}")["messageId"].GetString();
  refused("/v2/webhooks/deliveries/replay", R"({"endpointId":")" + all + R"(","messageId":")" + ping + "\"}", 404, "NOT_FOUND",
          "This endpoint was never sent message " + ping + ".");
  // The endpoint that had it is sent it again.
  EXPECT_EQ(ok("/v2/webhooks/deliveries/replay", R"({"endpointId":")" + all + R"(","messageId":")" + message + "\"}")["replayed"].GetInt64(), 1);
  EXPECT_EQ(state_of(all, position), "pending");
}

TEST_F(webhooks, TheFeedIsReadByCursorAndType) {
  std::vector<std::string> ids, comments;
  for (int i = 0; i < 7; ++i) {
    const std::string_view type = i % 3 == 0 ? svc::event_types::comment_added : svc::event_types::record_updated;
    const std::string id = feed_event(type, 1000 + i).second;
    ids.push_back(id);
    if (type == svc::event_types::comment_added) comments.push_back(id);
    if (i == 2) feed_event(svc::event_types::comment_added, 1000, true, "othertenant00000");  // another tenant's, between ours
    if (i == 4) feed_event(svc::event_types::ping, 1000, false);                                            // a ping: never listed
  }
  std::vector<std::string> read;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    const rapidjson::Document d = ok("/v2/events/get", after.empty() ? R"({"limit":3})" : R"({"limit":3,"after":")" + after + "\"}");
    const std::string cursor = d["cursor"].GetString();
    if (d["events"].Empty()) {
      EXPECT_EQ(cursor, after);  // nothing more: the same cursor
      break;
    }
    for (const auto& e : d["events"].GetArray()) {
      read.push_back(e["id"].GetString());
      EXPECT_EQ(e.MemberCount(), 4u);
    }
    after = cursor;
  }
  EXPECT_EQ(read, ids);
  const rapidjson::Document first = ok("/v2/events/get", R"({"limit":1})");
  EXPECT_EQ(svc::canonical_json(first["events"][0]),
            R"({"data":{"organizationId":"o"},"id":")" + ids[0] + R"(","timestamp":"1970-01-01T00:00:01.000Z","type":"comment.added"})");
  // Members in order: id, type, timestamp, data.
  const svc::response raw = call("/v2/events/get", R"({"data":{"limit":1}})");
  EXPECT_NE(raw.body.find(R"({"id":")" + ids[0] + R"(","type":"comment.added","timestamp":)"), std::string::npos) << raw.body;

  const rapidjson::Document only = ok("/v2/events/get", R"({"types":["comment.added","comment.added"]})");
  std::vector<std::string> got;
  for (const auto& e : only["events"].GetArray()) got.push_back(e["id"].GetString());
  EXPECT_EQ(got, comments);
  // The cursor of a filtered read continues after its last event.
  const rapidjson::Document next = ok("/v2/events/get", R"({"types":["comment.added"],"limit":2})");
  const rapidjson::Document rest =
      ok("/v2/events/get", R"({"types":["comment.added"],"after":")" + std::string(next["cursor"].GetString()) + "\"}");
  ASSERT_EQ(rest["events"].Size(), 1u);
  EXPECT_EQ(std::string(rest["events"][0]["id"].GetString()), comments[2]);
  // An empty feed answers cursor "0"; null fields are absent ones.
  EXPECT_EQ(ok("/v2/events/get", R"({"after":null,"limit":null,"types":null})")["events"].Size(), 7u);
  key = svc::create_key(db, "empty", svc::now_iso());
  token = svc::create_token(db, key.substr(3, 16), "bob", false, std::nullopt, svc::now_iso());
  const rapidjson::Document none = ok("/v2/events/get", "{}");
  EXPECT_EQ(none["events"].Size(), 0u);
  EXPECT_EQ(std::string(none["cursor"].GetString()), "0");
}

// A poll with types that match nothing still moves: it reads at most 10,000 of the tenant's rows and
// answers the last one read as its cursor, so a feed of other events is passed in bounded steps.
TEST_F(webhooks, AFilteredReadMovesPastWhatItScanned) {
  constexpr int scan_rows = 10000, others = scan_rows + 50;
  std::vector<std::int64_t> positions;
  db.write(std::string(svc::feed_key), [&] {
    for (int i = 0; i < others; ++i) {
      const std::string id = svc::new_message_id();
      const std::string body = R"({"type":"crdt.record.updated","timestamp":"1970-01-01T00:00:01.000Z","data":{}})";
      positions.push_back(svc::append_to_feed(db, tenant(), id, svc::event_types::record_updated, "o", 1000, true, body));
    }
  });
  const std::string comment = feed_event(svc::event_types::comment_added, 2000).second;
  const rapidjson::Document first = ok("/v2/events/get", R"({"types":["comment.added"]})");
  EXPECT_EQ(first["events"].Size(), 0u);
  EXPECT_EQ(std::string(first["cursor"].GetString()), std::to_string(positions[scan_rows - 1]));
  const rapidjson::Document second = ok("/v2/events/get", R"({"types":["comment.added"],"after":")" + std::string(first["cursor"].GetString()) + "\"}");
  ASSERT_EQ(second["events"].Size(), 1u);
  EXPECT_EQ(std::string(second["events"][0]["id"].GetString()), comment);
  // Past the end, nothing matching: the cursor is the last row read, and then stays.
  const std::string last = second["cursor"].GetString();
  feed_event(svc::event_types::record_added, 3000);
  const rapidjson::Document third = ok("/v2/events/get", R"({"types":["comment.added"],"after":")" + last + "\"}");
  EXPECT_EQ(third["events"].Size(), 0u);
  EXPECT_NE(std::string(third["cursor"].GetString()), last);
  const std::string end = third["cursor"].GetString();
  EXPECT_EQ(std::string(ok("/v2/events/get", R"({"types":["comment.added"],"after":")" + end + "\"}")["cursor"].GetString()), end);
  // Without types: the page of 100 ends at its 100th event.
  const rapidjson::Document all = ok("/v2/events/get", "{}");
  EXPECT_EQ(all["events"].Size(), 100u);
  EXPECT_EQ(std::string(all["cursor"].GetString()), std::to_string(positions[99]));
}

// check_url waits for its host's addresses at most its limit (3 s by default); a lookup past it is left
// to its own thread. The resolvers here block until the test releases them, so each outcome is fixed:
// a check_url that waited for its lookup would wait out the 10 s fallback and then take the URL.
struct blocked_resolver {
  std::shared_ptr<std::promise<void>> release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  /// A resolver that waits to be released, then answers `address`.
  svc::host_resolver answering(std::string address) const {
    return [released = released, calls = calls, address](const std::string&, addrinfo** found) {
      ++*calls;
      released.wait_for(std::chrono::seconds(10));
      addrinfo hints{};
      hints.ai_flags = AI_NUMERICHOST;
      hints.ai_socktype = SOCK_STREAM;
      return getaddrinfo(address.c_str(), nullptr, &hints, found);
    };
  }
  /// Releases the lookups and waits until none runs past its limit.
  void finish() const {
    release->set_value();
    for (int i = 0; i < 100000 && svc::abandoned_lookups() > 0; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
    EXPECT_EQ(svc::abandoned_lookups(), 0);
  }
};

TEST(url_resolution, ALookupPastItsLimitIsRefused) {
  EXPECT_EQ(svc::url_resolve_limit, std::chrono::seconds(3));
  const svc::address_policy policy;
  const blocked_resolver slow;
  EXPECT_EQ(policy.check_url("https://slow.example/hook", std::chrono::milliseconds(20), slow.answering("93.184.216.34")),
            "url's host slow.example did not resolve within 20 ms.");
  EXPECT_EQ(policy.check_url("https://slow.example/hook", std::chrono::seconds(1), slow.answering("93.184.216.34")),
            "url's host slow.example did not resolve within 1 s.");
  EXPECT_EQ(svc::abandoned_lookups(), 2);
  slow.finish();
  // Within the limit, the resolver's answer is judged as before.
  const blocked_resolver fast;
  fast.release->set_value();
  EXPECT_EQ(policy.check_url("https://fast.example/hook", svc::url_resolve_limit, fast.answering("93.184.216.34")), "");
  EXPECT_EQ(policy.check_url("https://fast.example/hook", svc::url_resolve_limit, fast.answering("10.1.2.3")),
            "url's host fast.example resolves to 10.1.2.3, a loopback, private, link-local or reserved address; webhooks reach only public addresses.");
  EXPECT_EQ(policy.check_url("https://fast.example/hook", svc::url_resolve_limit, [](const std::string&, addrinfo**) { return EAI_NONAME; }),
            "url's host fast.example does not resolve.");
}

TEST(url_resolution, AtMost64LookupsRunPastTheirLimit) {
  const svc::address_policy policy;
  const blocked_resolver slow;
  for (int i = 0; i < svc::max_abandoned_lookups; ++i)
    EXPECT_EQ(policy.check_url("https://slow.example/", std::chrono::milliseconds(1), slow.answering("93.184.216.34")),
              "url's host slow.example did not resolve within 1 ms.");
  EXPECT_EQ(svc::abandoned_lookups(), svc::max_abandoned_lookups);
  // The next one is not started: refused at once, its resolver never called.
  const blocked_resolver next;
  next.release->set_value();
  EXPECT_EQ(policy.check_url("https://next.example/", svc::url_resolve_limit, next.answering("93.184.216.34")),
            "url's host next.example did not resolve within 3 s.");
  EXPECT_EQ(*next.calls, 0);
  slow.finish();
  EXPECT_EQ(policy.check_url("https://next.example/", svc::url_resolve_limit, next.answering("93.184.216.34")), "");
}

}  // namespace
