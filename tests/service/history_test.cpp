// The records' history off the request path (crdt/auto_versions.hpp): automatic versions, their thinning
// and the change rows' retention, each pass run at a time the test chooses (the injected `now_ms`), never
// by waiting; and the change rows an update's baseVersion is computed from (crdt/history.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crdt/auto_versions.hpp"
#include "crdt/history.hpp"
#include "crdt/versions.hpp"
#include "platform/fields.hpp"
#include "support.hpp"

namespace folio_service_test {
namespace {

constexpr std::int64_t second = 1000, hour = 3600 * second, day = 24 * hour;

struct history : fixture {
  svc::history_config cfg;  // the defaults: 30 s quiet, 10 minutes at most, all for a day, hourly for 30 days
  const svc::record_key k{"", "o", "d", "e"};

  void SetUp() override {
    fixture::SetUp();
    const rapidjson::Document who = svc::parse_json(call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":"a"}})").body);
    ASSERT_TRUE(who.HasMember("result"));
  }
  std::string update(const std::string& value, const std::string& user) {
    return call("/v2/crdt/update", std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","data":")").append(value).append(R"(","userId":")").append(user).append("\"}}")).body;
  }
  svc::record_key key() const {
    svc::record_key out = k;
    out.tenant = tenant();
    return out;
  }
  std::string tenant() const {
    svc::query q = const_cast<svc::database&>(db).sql("SELECT tenant FROM crdt_records LIMIT 1");
    return q.step() ? q.text(0) : std::string();
  }
  std::vector<svc::version_row> listed() { return db.read([&] { return svc::list_versions(db, key(), 0, 1000); }); }
  std::int64_t since_change() {  // the record's last write, as the pass compares it
    const std::optional<svc::record_row> row = svc::load_record(db, key(), false);
    return *svc::timestamp_ms(row->last_update);
  }
  std::size_t take(std::int64_t now) { return svc::take_due_versions(service.crdt(), db, cfg, now); }
};

TEST_F(history, AVersionIsTakenOnceARecordIsQuietAndListsItsAuthors) {
  update("ab", "bo");
  update("abc", "cy");
  const std::int64_t last = since_change();
  EXPECT_EQ(take(last + 29 * second), 0u);  // not quiet long enough
  EXPECT_TRUE(listed().empty());
  EXPECT_EQ(take(last + 30 * second), 1u);
  const std::vector<svc::version_row> v = listed();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, "auto");
  EXPECT_EQ(v[0].created_by, "");
  EXPECT_EQ(v[0].authors, (std::vector<std::string>{"alice", "bo", "cy"}));  // the add's author first
  EXPECT_EQ(take(last + 31 * second), 0u);  // nothing changed since
  update("abcd", "bo");
  EXPECT_EQ(take(since_change() + 40 * second), 1u);
  EXPECT_EQ(listed()[0].authors, (std::vector<std::string>{"bo"}));
}

TEST_F(history, ContinuousEditingGetsAVersionAtMostEveryTenMinutes) {
  update("ab", "bo");
  const std::int64_t first = since_change();
  // Still editing: the last write a second before each pass (as a stream of writes leaves it).
  const auto written_at = [&](std::int64_t at) {
    db.write([&] { db.sql("UPDATE crdt_records SET last_update=? WHERE tenant=?").bind(1, svc::iso_time(at)).bind(2, tenant()).step(); });
  };
  written_at(first + 9 * 60 * second - second);
  EXPECT_EQ(take(first + 9 * 60 * second), 0u);
  written_at(first + 10 * 60 * second - second);
  EXPECT_EQ(take(first + 10 * 60 * second), 1u);  // ten minutes after the first change not in a version
}

TEST_F(history, OnSeveralNodesOneVersionIsTaken) {
  update("ab", "bo");
  const std::int64_t now = since_change() + 60 * second;
  const std::vector<int> took = on_nodes(4, [&](int, svc::responder& node, svc::database& node_db) {
    return static_cast<int>(svc::take_due_versions(node.crdt(), node_db, cfg, now));
  });
  int total = 0;
  for (int t : took) total += t;
  EXPECT_EQ(total, 1);
  EXPECT_EQ(listed().size(), 1u);
}

TEST_F(history, ANamedVersionOfTheCurrentStateLeavesNoAutomaticOneDue) {
  update("ab", "bo");
  call("/v2/crdt/versions/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","name":"n"}})");
  EXPECT_EQ(take(since_change() + day), 0u);
  EXPECT_EQ(listed().size(), 1u);
}

TEST_F(history, ThinningKeepsOneAnHourThenOneADayAndMovesAuthors) {
  const std::int64_t now = 100 * day;
  const svc::record_key rk = key();
  // Automatic versions: two in the last day, four in one hour two days ago (one of them named), three on
  // one day forty days ago (one of them pinned).
  struct made {
    std::int64_t at;
    std::string kind;
    bool pinned;
    std::string author;
  };
  const std::vector<made> versions = {
      {now - 40 * day - 3 * hour, "auto", false, "p"}, {now - 40 * day - 2 * hour, "auto", false, "q"},
      {now - 40 * day - 1 * hour, "auto", true, "r"},  {now - 2 * day - 50 * 60 * second, "auto", false, "s"},
      {now - 2 * day - 40 * 60 * second, "named", false, "t"}, {now - 2 * day - 30 * 60 * second, "auto", false, "u"},
      {now - 2 * day - 20 * 60 * second, "auto", false, "v"}, {now - 2 * hour, "auto", false, "w"}, {now - hour, "auto", false, "x"}};
  db.write([&] {
    for (const made& m : versions) {
      svc::version_row v;
      v.revision = 1, v.version_vector = std::string("\x00", 1), v.kind = m.kind, v.pinned = m.pinned, v.created_at = svc::iso_time(m.at);
      v.authors = {m.author};
      svc::insert_version(db, rk, v);
    }
  });
  EXPECT_EQ(svc::thin_versions(db, cfg, now), 2u);
  std::vector<std::string> authors;
  for (const svc::version_row& v : listed()) {
    std::string shown;
    for (const std::string& a : v.authors) shown.append(shown.empty() ? "" : "+").append(a);
    authors.push_back(shown);
  }
  // Newest first. The last day's all stay. Two days ago, all in one hour: u goes into v (its newer
  // neighbour kept, same bucket); the named t stays, and s, after it, is kept. Forty days ago, all on
  // one day: the pinned r stays, q after it is kept, p goes into q (p, the first version, also lists the
  // record's add, by alice).
  EXPECT_EQ(authors, (std::vector<std::string>{"x", "w", "v+u", "t", "s", "r", "q+p+alice"}));
}

TEST_F(history, RetentionMovesTheHistoryAndOldBaseVersionsAreRefused) {
  const std::string first = [&] {
    const rapidjson::Document got = svc::parse_json(call("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})").body);
    return std::string(got["result"]["data"][0]["version"].GetString());
  }();
  update("ab", "bo");
  update("abc", "bo");
  EXPECT_EQ(svc::prune_history(db, cfg, since_change() + 29 * day), 0u);
  EXPECT_GT(svc::prune_history(db, cfg, since_change() + 31 * day), 0u);
  const std::string answer =
      call("/v2/crdt/update", std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","data":"x","baseVersion":")").append(first).append("\"}}")).body;
  EXPECT_NE(answer.find("ABORTED"), std::string::npos) << answer;
  EXPECT_NE(answer.find("is older than the history this record keeps (from revision 3 on)"), std::string::npos) << answer;
}

TEST_F(history, ABaseVersionIsTheVectorOfItsRevision) {
  update("ab", "bo");
  update("abc", "bo");
  const svc::record_key rk = key();
  const folio::version_vector now = [&] {
    folio::version_vector v;
    svc::query q = db.sql("SELECT after_counts FROM crdt_changes ORDER BY revision DESC LIMIT 1");
    EXPECT_TRUE(q.step());
    EXPECT_TRUE(folio::version_vector::decode(q.blob(0), v));
    return v;
  }();
  // Revision 1 (the add) held 1 op of the server replica: "a"; each update one more.
  const std::uint32_t ops_now = now.entries().at(0).count;
  EXPECT_EQ(db.read([&] { return svc::version_at(db, rk, now, 3); }), now);
  EXPECT_EQ(db.read([&] { return svc::version_at(db, rk, now, 2); }).entries().at(0).count, ops_now - 1);
  EXPECT_EQ(db.read([&] { return svc::version_at(db, rk, now, 1); }).entries().at(0).count, ops_now - 2);
  EXPECT_TRUE(db.read([&] { return svc::version_at(db, rk, now, 0); }).empty());
}

TEST_F(history, ARecordKeepsABoundedNumberOfVersions) {
  const svc::record_key rk = key();
  db.write([&] {
    for (std::int64_t n = 0; n < svc::max_named_versions; ++n) {
      svc::version_row v;
      v.revision = 1, v.version_vector = std::string("\x00", 1), v.kind = "named", v.created_at = svc::iso_time(n);
      svc::insert_version(db, rk, v);
    }
  });
  const std::string ids = R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")";
  const svc::response refused = call("/v2/crdt/versions/add", ids + "}}");
  EXPECT_EQ(refused.http, 400);
  EXPECT_NE(refused.body.find("This record keeps 1000 named versions, the most it may; delete some (versions/delete) before adding another."),
            std::string::npos) << refused.body;
  EXPECT_EQ(listed().size(), static_cast<std::size_t>(svc::max_named_versions));  // nothing was added
  // Automatic versions are still taken until the record keeps max_versions in all.
  update("ab", "bo");
  EXPECT_EQ(take(since_change() + day), 1u);
}

TEST_F(history, EachOperationsAuthorIsTheChangeRowHoldingItsSeq) {
  update("ab", "bo");
  update("abc", "cy");
  const svc::record_key rk = key();
  folio::replica_id server = 0;
  {
    svc::query q = db.sql("SELECT after_counts FROM crdt_changes ORDER BY revision DESC LIMIT 1");
    ASSERT_TRUE(q.step());
    folio::version_vector v;
    ASSERT_TRUE(folio::version_vector::decode(q.blob(0), v));
    server = v.entries().at(0).replica;
  }
  const svc::change_authors authors = db.read([&] { return svc::change_authors::load(db, rk); });
  // The add inserted op 0 ("a"), each update one more: "b" (op 1) by bo, "c" (op 2) by cy.
  ASSERT_NE(authors.of({server, 0}), nullptr);
  EXPECT_EQ(authors.of({server, 0})->by, "alice");
  EXPECT_EQ(authors.of({server, 1})->by, "bo");
  EXPECT_EQ(authors.of({server, 2})->by, "cy");
  EXPECT_EQ(authors.of({server, 0})->by, "alice");  // back to an earlier range
  EXPECT_EQ(authors.of({server, 3}), nullptr);      // not made yet
  EXPECT_EQ(authors.of({server + 1, 0}), nullptr);  // a replica that never wrote
  // Rows pruned: their operations have no author.
  db.sql("DELETE FROM crdt_changes WHERE revision < 3").step();
  const svc::change_authors kept = db.read([&] { return svc::change_authors::load(db, rk); });
  EXPECT_EQ(kept.of({server, 0}), nullptr);
  EXPECT_EQ(kept.of({server, 2})->by, "cy");
}

TEST_F(history, AttributionAndDiffNameEachRunsAuthor) {
  const std::string v1 = svc::parse_json(call("/v2/crdt/versions/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e"}})").body)["result"]["data"]["versionId"].GetString();
  update("ab", "bo");
  update("abc", "cy");
  const std::string got = call("/v2/crdt/get", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","attribution":true}})").body;
  const rapidjson::Document g = svc::parse_json(got);
  const rapidjson::Value& runs = g["result"]["data"][0]["attribution"];
  ASSERT_EQ(runs.Size(), 3u) << got;
  EXPECT_EQ(std::string(runs[0]["text"].GetString()) + runs[0]["userId"].GetString() + runs[1]["userId"].GetString() + runs[2]["userId"].GetString(),
            "aalicebocy");
  const std::string d = call("/v2/crdt/versions/diff", std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","from":")").append(v1).append("\"}}")).body;
  EXPECT_NE(d.find(R"("changes":[{"op":"equal","text":"a","userIds":[]},{"op":"insert","text":"b","userIds":["bo"]},{"op":"insert","text":"c","userIds":["cy"]}])"),
            std::string::npos)
      << d;
}

}  // namespace
}  // namespace folio_service_test
