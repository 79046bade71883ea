// tests/service/events_test.cpp — events from changes (events/outbox.hpp) and the sequencer
// (events/feed.hpp): every change writes its outbox row in its own transaction; a pass at a time the
// test chooses makes the feed's events, coalesces a record's updates and queues deliveries.
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "events/feed.hpp"
#include "events/outbox.hpp"
#include "support.hpp"
#include "webhooks/endpoints.hpp"

using namespace folio_service_test;

namespace {

struct feed_event {
  std::int64_t position;
  std::string id, type;
  rapidjson::Document body;
};

std::vector<feed_event> feed(svc::database& db) {
  std::vector<feed_event> out;
  svc::query q = db.sql("SELECT position, id, type, body FROM event_feed WHERE in_feed = 1 ORDER BY position");
  while (q.step()) {
    feed_event e{q.integer(0), q.text(1), q.text(2), {}};
    e.body.Parse(q.text(3).c_str());
    out.push_back(std::move(e));
  }
  return out;
}

std::int64_t outbox_rows(svc::database& db) {
  svc::query q = db.sql("SELECT count(*) FROM event_outbox");
  q.step();
  return q.integer(0);
}

std::vector<std::string> users_of(const feed_event& e) {
  std::vector<std::string> out;
  for (const auto& u : e.body["data"]["userIds"].GetArray()) out.emplace_back(u.GetString());
  return out;
}

const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")";

struct events : fixture {
  events() = default;
  explicit events(svc::config settings) : fixture(std::move(settings)) {}
  svc::webhook_config cfg;  // defaults: a 5 s quiet window, 30 s at most
  std::size_t pass(std::int64_t after_ms) { return svc::sequence_events(db, cfg, svc::now_unix_ms() + after_ms); }
  svc::response update(const std::string& value, const std::string& user) {
    return call("/v2/crdt/update", ids + R"(,"data":")" + value + R"(","userId":")" + user + "\"}}");
  }
};

TEST_F(events, ARecordsUpdatesAreOneEventOnceQuietAndADeletionComesAfterThem) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  ASSERT_EQ(update("ab", "bob").http, 200);
  ASSERT_EQ(update("abc", "carol").http, 200);
  ASSERT_EQ(update("abcd", "bob").http, 200);
  EXPECT_EQ(outbox_rows(db), 4);
  EXPECT_EQ(pass(0), 1u);  // the add at once; the updates wait for 5 quiet seconds
  EXPECT_EQ(pass(1000), 0u);
  EXPECT_EQ(pass(6000), 1u);
  std::vector<feed_event> f = feed(db);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].type, "crdt.record.added");
  EXPECT_EQ(users_of(f[0]), std::vector<std::string>{"alice"});
  EXPECT_EQ(f[1].type, "crdt.record.updated");
  EXPECT_EQ(users_of(f[1]), (std::vector<std::string>{"bob", "carol"}));
  EXPECT_EQ(f[1].body["data"]["changes"].GetInt64(), 3);
  EXPECT_STREQ(f[1].body["data"]["recordType"].GetString(), "text");
  const rapidjson::Document got = svc::parse_json(call("/v2/crdt/get", ids + "}}").body);
  EXPECT_STREQ(f[1].body["data"]["version"].GetString(), got["result"]["data"][0]["version"].GetString());
  EXPECT_EQ(f[0].body.MemberCount(), 3u);  // type, timestamp, data
  EXPECT_NE(f[0].id, f[1].id);
  EXPECT_EQ(f[0].id.rfind("msg_", 0), 0u);
  EXPECT_EQ(outbox_rows(db), 0);

  // Updates then a deletion within the window: the updates' event first, then the deletion's, at once.
  ASSERT_EQ(update("x", "dave").http, 200);
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  EXPECT_EQ(pass(0), 2u);
  f = feed(db);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[2].type, "crdt.record.updated");
  EXPECT_EQ(users_of(f[2]), std::vector<std::string>{"dave"});
  EXPECT_EQ(f[3].type, "crdt.record.deleted");
  EXPECT_TRUE(f[3].body["data"]["version"].IsNull());
  EXPECT_LT(f[2].position, f[3].position);
}

TEST_F(events, ContinuousUpdatesMakeAnEventAtTheMostWait) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  ASSERT_EQ(update("ab", "bob").http, 200);
  pass(0);
  const std::int64_t due = svc::next_ready_ms(db, cfg) - svc::now_unix_ms();  // the quiet window's end
  EXPECT_GT(due, 0);
  EXPECT_LE(due, cfg.coalesce.count());
  // A window longer than the most wait, as updates that never pause make it: the event comes once the
  // first update is coalesce_max old.
  cfg.coalesce = std::chrono::hours(1);
  EXPECT_EQ(pass(29000), 0u);
  EXPECT_EQ(pass(31000), 1u);
}

TEST_F(events, AChangeThatIsRefusedWritesNoEvent) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  EXPECT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 409);
  EXPECT_EQ(call("/v2/commentannotations/comments/add",
                 R"({"data":{"organizationId":"o","documentId":"d","annotationId":"none","commentData":[{"commentText":"x","from":{"userId":"u","name":"U","email":"u@e"}}]}})")
                .http,
            404);
  EXPECT_EQ(call("/v2/crdt/update", ids + R"(,"data":"a"}})").http, 200);  // the same value: no operation, no event
  EXPECT_EQ(outbox_rows(db), 1);
}

TEST_F(events, AnnotationsAndCommentsMakeTheirEvents) {
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  ASSERT_EQ(call("/v2/commentannotations/add", doc + R"(,"commentAnnotations":[{"annotationId":"a","from":{"userId":"u","name":"U","email":"u@e"},)"
                                                     R"("commentData":[{"commentText":"first"}]}]}})")
                .http,
            200);
  ASSERT_EQ(call("/v2/commentannotations/update", doc + R"(,"annotationIds":["a"],"updatedData":{"status":{"id":"RESOLVED","name":"Resolved","color":"#0f0","type":"terminal"},"color":"#f00"}}})").http, 200);
  ASSERT_EQ(call("/v2/commentannotations/comments/add", doc + R"(,"annotationId":"a","commentData":[{"commentText":"second","from":{"userId":"v","name":"V","email":"v@e"}}]}})").http, 200);
  ASSERT_EQ(call("/v2/commentannotations/comments/update", doc + R"(,"annotationId":"a","commentIds":[2],"updatedData":{"commentText":"2nd"}}})").http, 200);
  ASSERT_EQ(call("/v2/commentannotations/comments/delete", doc + R"(,"annotationId":"a","commentIds":[2]}})").http, 200);
  ASSERT_EQ(call("/v2/commentannotations/delete", doc + R"(,"annotationIds":["a"]}})").http, 200);
  EXPECT_EQ(pass(0), 6u);
  const std::vector<feed_event> f = feed(db);
  std::vector<std::string> types;
  for (const feed_event& e : f) types.push_back(e.type);
  EXPECT_EQ(types, (std::vector<std::string>{"comment_annotation.added", "comment_annotation.updated", "comment.added", "comment.updated", "comment.deleted",
                                             "comment_annotation.deleted"}));
  EXPECT_EQ(users_of(f[0]), std::vector<std::string>{"u"});
  const rapidjson::Value& changed = f[1].body["data"]["changedFields"];
  ASSERT_EQ(changed.Size(), 2u);
  EXPECT_STREQ(changed[0].GetString(), "status");
  EXPECT_STREQ(changed[1].GetString(), "color");
  EXPECT_STREQ(f[1].body["data"]["status"].GetString(), "RESOLVED");
  EXPECT_EQ(users_of(f[2]), std::vector<std::string>{"v"});
  EXPECT_EQ(f[2].body["data"]["commentId"].GetInt64(), 2);
  EXPECT_EQ(users_of(f[5]), std::vector<std::string>{"alice"});
}

TEST_F(events, ANamedVersionMakesItsEvent) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/versions/add", ids + R"(,"name":"draft","userId":"bob"}})").http, 200);
  EXPECT_EQ(pass(0), 2u);
  const std::vector<feed_event> f = feed(db);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].type, "crdt.version.created");
  EXPECT_STREQ(f[1].body["data"]["kind"].GetString(), "named");
  EXPECT_STREQ(f[1].body["data"]["name"].GetString(), "draft");
  EXPECT_EQ(f[1].body["data"]["versionNumber"].GetInt64(), 1);
  EXPECT_EQ(users_of(f[1]), std::vector<std::string>{"bob"});
}

TEST_F(events, DeliveriesAreQueuedForTheEndpointsWhoseFiltersTakeTheEventUpToTheCap) {
  const auto endpoint = [&](const std::string& id, const char* types, const char* orgs, int enabled) {
    db.write([&] {
      db.sql("INSERT INTO webhook_endpoints (tenant, id, url, event_types, org_ids, enabled, secret, created_at, updated_at) VALUES (?, ?, 'https://example.com/', ?, ?, ?, 'whsec_AAAA', 1, 1)")
          .bind(1, key.substr(3, 16)).bind(2, id).bind_opt(3, types ? std::optional<std::string>(types) : std::nullopt)
          .bind_opt(4, orgs ? std::optional<std::string>(orgs) : std::nullopt).bind(5, std::int64_t(enabled)).step();
    });
  };
  endpoint("all", nullptr, nullptr, 1);
  endpoint("adds", R"(["crdt.record.added"])", nullptr, 1);
  endpoint("other-org", nullptr, R"(["p"])", 1);
  endpoint("off", nullptr, nullptr, 0);
  cfg.queued_per_endpoint = 1;
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  EXPECT_EQ(pass(0), 2u);
  svc::query q = db.sql("SELECT endpoint, position, state FROM webhook_deliveries ORDER BY endpoint, position");
  std::vector<std::string> rows;
  while (q.step()) rows.push_back(q.text(0) + "@" + std::to_string(q.integer(1)) + ":" + q.text(2));
  // The second event for "all" found its queue full: failed without an attempt, for a replay to send.
  EXPECT_EQ(rows, (std::vector<std::string>{"adds@1:pending", "all@1:pending", "all@2:failed"}));
  svc::query counts = db.sql("SELECT id, queued, dropped FROM webhook_endpoints ORDER BY id");
  std::vector<std::string> standing;
  while (counts.step()) standing.push_back(counts.text(0) + " " + std::to_string(counts.integer(1)) + "/" + std::to_string(counts.integer(2)));
  EXPECT_EQ(standing, (std::vector<std::string>{"adds 1/0", "all 1/1", "off 0/0", "other-org 0/0"}));
}

}  // namespace

namespace {

TEST_F(events, APushOverSyncMakesAnUpdateByItsAuthor) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  folio::document client(folio::record_type::text, 99);
  client.replace_text("mine");
  ASSERT_EQ(push(ids, client.encode_since({})).http, 200);
  EXPECT_EQ(pass(60000), 2u);
  const std::vector<feed_event> f = feed(db);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].type, "crdt.record.updated");
  EXPECT_EQ(users_of(f[1]), std::vector<std::string>{"alice"});
}

svc::config with_values(std::size_t bytes) {
  svc::config c;
  c.webhooks.value_bytes = bytes;
  return c;
}

struct events_with_values : events {
  events_with_values() : events(with_values(16)) {}
};

TEST_F(events_with_values, ASmallRecordsValueRidesInItsEventAndALargeOnesDoesNot) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"small"}})").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"big","type":"text","data":"far more than sixteen bytes"}})").http, 200);
  EXPECT_EQ(pass(0), 2u);
  const std::vector<feed_event> f = feed(db);
  ASSERT_EQ(f.size(), 2u);
  ASSERT_TRUE(f[0].body["data"].HasMember("value"));
  EXPECT_STREQ(f[0].body["data"]["value"].GetString(), "small");
  EXPECT_FALSE(f[1].body["data"].HasMember("value"));
}

}  // namespace

namespace {

TEST_F(events, UpdatesAfterADeletionAndAnAddWaitForTheirOwnWindowAfterThem) {
  // A review's case: add, update (bob), delete, add, update (carol) in one pass. Carol's update is of
  // the record added again: it must come after the deletion and the add, not merge with bob's.
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  ASSERT_EQ(update("ab", "bob").http, 200);
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"b"}})").http, 200);
  ASSERT_EQ(update("bc", "carol").http, 200);
  EXPECT_EQ(pass(0), 4u);
  EXPECT_EQ(pass(6000), 1u);
  std::vector<std::string> seen;
  for (const feed_event& e : feed(db)) seen.push_back(e.type + (e.type == "crdt.record.updated" ? " " + users_of(e)[0] : ""));
  EXPECT_EQ(seen, (std::vector<std::string>{"crdt.record.added", "crdt.record.updated bob", "crdt.record.deleted", "crdt.record.added",
                                            "crdt.record.updated carol"}));
}

TEST_F(events, APositionIsNeverHandedOutTwiceEvenOnceTheFeedIsPruned) {
  ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
  pass(0);
  const std::int64_t first = feed(db).at(0).position;
  db.write([&] { db.sql("DELETE FROM event_feed").step(); });  // as retention does, once the events are old
  ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
  pass(0);
  EXPECT_GT(feed(db).at(0).position, first);  // a cursor at `first` still finds it
}

TEST_F(events, AReplayOfADeliveryInFlightDropsTheClaimAndQueuesItAgain) {
  const std::string tenant = key.substr(3, 16);
  db.write([&] {
    db.sql("INSERT INTO webhook_endpoints (tenant, id, url, enabled, secret, created_at, updated_at, queued) VALUES (?, 'ep', 'https://example.com/', 1, 'whsec_AAAA', 1, 1, 1)")
        .bind(1, tenant).step();
    db.sql("INSERT INTO webhook_deliveries (tenant, endpoint, position, message_id, state, attempts, next_at, claimed_by, claimed_until) "
           "VALUES (?, 'ep', 7, 'msg_x', 'pending', 3, 0, 'node', 99)")
        .bind(1, tenant).step();
  });
  db.write([&] { EXPECT_TRUE(svc::queue_delivery(db, cfg, tenant, "ep", 7, "msg_x", 1000)); });
  svc::query q = db.sql("SELECT state, attempts, next_at, CASE WHEN claimed_by IS NULL THEN 1 ELSE 0 END FROM webhook_deliveries");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "pending");
  EXPECT_EQ(q.integer(1), 0);
  EXPECT_EQ(q.integer(2), 1000);
  EXPECT_EQ(q.integer(3), 1);  // the attempt in flight no longer moves it
  svc::query n = db.sql("SELECT queued FROM webhook_endpoints");
  ASSERT_TRUE(n.step());
  EXPECT_EQ(n.integer(0), 1);  // still one pending delivery
}

}  // namespace

namespace {

/// An endpoint "ep" with room for one delivery, and two events for it: the second is dropped.
struct dropped_events : events {
  void drop_the_second_event(const std::string& tenant) {
    db.write([&] {
      db.sql("INSERT INTO webhook_endpoints (tenant, id, url, enabled, secret, created_at, updated_at) VALUES (?, 'ep', 'https://example.com/', 1, 'whsec_AAAA', 1, 1)")
          .bind(1, tenant).step();
    });
    cfg.queued_per_endpoint = 1;
    ASSERT_EQ(call("/v2/crdt/add", ids + R"(,"type":"text","data":"a"}})").http, 200);
    ASSERT_EQ(call("/v2/crdt/delete", ids + "}}").http, 200);
    EXPECT_EQ(pass(0), 2u);
  }
};

TEST_F(dropped_events, AnEventDroppedForAFullQueueIsReplayedOnceTheQueueHasRoom) {
  const std::string tenant = key.substr(3, 16);
  ASSERT_NO_FATAL_FAILURE(drop_the_second_event(tenant));
  const std::vector<feed_event> f = feed(db);
  ASSERT_EQ(f.size(), 2u);
  // The first delivery leaves the queue (as the sender does once it is sent), making room.
  db.write([&] {
    db.sql("UPDATE webhook_deliveries SET state = 'succeeded' WHERE position = ?").bind(1, f[0].position).step();
    db.sql("UPDATE webhook_endpoints SET queued = queued - 1").step();
  });
  // By message: the endpoint had it (dropped), so it is queued now.
  EXPECT_EQ(svc::replay_message(db, cfg, tenant, "ep", f[1].id, 1000), 1u);
  svc::query q = db.sql("SELECT state FROM webhook_deliveries WHERE position = ?");
  q.bind(1, f[1].position);
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "pending");
}

TEST_F(dropped_events, ADroppedEventIsAmongWhatFailedSinceATime) {
  const std::string tenant = key.substr(3, 16);
  ASSERT_NO_FATAL_FAILURE(drop_the_second_event(tenant));
  db.write([&] {
    db.sql("UPDATE webhook_deliveries SET state = 'succeeded' WHERE state = 'pending'").step();
    db.sql("UPDATE webhook_endpoints SET queued = 0").step();
  });
  EXPECT_EQ(svc::replay_failed_since(db, cfg, tenant, "ep", 0, 1000), 1u);
}

}  // namespace
