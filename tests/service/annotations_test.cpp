// The comment annotation family (service/annotations/): its handlers through the responder (selection
// rules, bodies stored by earlier builds, comment ids) and its model (timestamps, ids, stored bodies).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "annotations/model.hpp"
#include "annotations/store.hpp"
#include "platform/fields.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

/// Adds annotation "a" by user "u" with comment 1 ("one") to the document `doc` names
/// (`{"data":{...ids...`).
svc::response add_thread(fixture& f, const std::string& doc) {
  return f.call("/v2/commentannotations/add", doc + R"(,"commentAnnotations":[{"annotationId":"a","from":{"userId":"u","name":"U","email":"u@e"},)"
                                                    R"("commentData":[{"commentId":1,"commentText":"one"}]}]}})");
}

TEST_F(fixture, AnEmptyListSelectsNothingOnEveryWriteAndDelete) {
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  ASSERT_EQ(add_thread(*this, doc).http, 200);
  const std::string before = call("/v1/commentannotations/get", doc + "}}").body;
  const auto answers = [&](const char* path, const std::string& fields, const char* message) {
    const svc::response r = call(path, doc + fields + "}}");
    EXPECT_EQ(r.http, 200) << path << fields << r.body;
    EXPECT_NE(r.body.find(std::string(R"("message":")") + message + R"(","data":{}})"), std::string::npos) << path << fields << r.body;
  };
  answers("/v2/commentannotations/delete", R"(,"annotationIds":[])", "0 of 0 annotations deleted.");
  answers("/v2/commentannotations/delete", R"(,"locationIds":[],"userIds":["u"])", "0 of 0 annotations deleted.");
  answers("/v2/commentannotations/update", R"(,"userIds":[],"updatedData":{"color":"red"})", "0 of 0 annotations updated.");
  answers("/v2/commentannotations/comments/update", R"(,"annotationId":"a","commentIds":[],"updatedData":{"commentText":"x"})", "0 of 0 comments updated.");
  answers("/v2/commentannotations/comments/delete", R"(,"annotationId":"a","commentIds":[])", "0 of 0 comments deleted.");
  // A requested id is still reported when another list selects nothing.
  const svc::response reported = call("/v2/commentannotations/delete", doc + R"(,"annotationIds":["a","nope"],"userIds":[]}})");
  EXPECT_NE(reported.body.find(R"("message":"0 of 2 annotations deleted.","data":{"a":{"success":false,"annotationId":"a","message":"Annotation does not match locationIds or userIds."},)"
                               R"("nope":{"success":false,"annotationId":"nope","message":"Annotation not found."}})"),
            std::string::npos)
      << reported.body;
  // null is not "no list": a client sending null for "no ids" must not select everything.
  for (const auto& [path, fields, field] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"/v2/commentannotations/delete", R"(,"annotationIds":null)", "annotationIds"},
           {"/v2/commentannotations/update", R"(,"locationIds":null,"updatedData":{"color":"red"})", "locationIds"},
           {"/v2/commentannotations/comments/delete", R"(,"annotationId":"a","commentIds":null)", "commentIds"}}) {
    const svc::response r = call(path, doc + fields + "}}");
    EXPECT_EQ(r.http, 400) << path << r.body;
    EXPECT_EQ(r.body, R"({"error":{"message":")" + field + R"( is null; send a list (an empty one selects nothing), or leave the field out.","status":"INVALID_ARGUMENT"}})")
        << path;
  }
  EXPECT_EQ(call("/v1/commentannotations/get", doc + "}}").body, before);
}

TEST_F(fixture, AThreadStoredWithALoneSurrogateByAnEarlierBuildStaysWritable) {
  FOLIO_SQLITE_ONLY();  // no PostgreSQL database predates the Unicode rule (and its TEXT holds only UTF-8)
  // Before the Unicode rule a lone surrogate escape was stored as the bytes ED B0 80. Such a body is
  // read back with parse_stored_json, so writes to the thread keep working.
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  ASSERT_EQ(add_thread(*this, doc).http, 200);
  db.exec(R"sql(UPDATE annotations SET body = replace(body, '"name":"U"', '"name":"U' || char(56320) || '"');
                UPDATE annotation_comments SET body = replace(body, '"one"', '"one' || char(56320) || '"');)sql");
  const svc::response added = call("/v2/commentannotations/comments/add", doc + R"(,"annotationId":"a","commentData":[{"commentText":"two","from":{"userId":"u","name":"U","email":"u@e"}}]}})");
  EXPECT_EQ(added.http, 200) << added.body;
  const svc::response edited = call("/v2/commentannotations/comments/update", doc + R"(,"annotationId":"a","commentIds":[1],"updatedData":{"commentHtml":"<p>1</p>"}}})");
  EXPECT_EQ(edited.http, 200) << edited.body;
  EXPECT_NE(edited.body.find("1 of 1 comments updated."), std::string::npos) << edited.body;
  EXPECT_THROW(svc::parse_json(svc::load_comment(db, {key.substr(3, 16), "o", "d"}, "a", 1).value()), svc::api_error);  // what folio-admin check reports
}

TEST_F(fixture, TheLargestCommentIdGivenByAClientNeverBlocksGeneratedIds) {
  // Ids are handed out after the largest the thread has had, and when a client gave 2^53 - 1 the
  // smallest free ids follow: a comment sent without one always gets an id ("No comment id is left ..." never).
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  const std::string from = R"("from":{"userId":"u","name":"U","email":"u@e"})";
  const svc::response added = call("/v2/commentannotations/add", doc + R"(,"commentAnnotations":[{"annotationId":"a",)" + from +
                                                                    R"(,"commentData":[{"commentId":9007199254740991,"commentText":"max"},{"commentText":"next"}]}]}})");
  EXPECT_NE(added.body.find(R"("commentIds":[9007199254740991,1])"), std::string::npos) << added.body;
  const std::string more = R"(,"annotationId":"a","commentData":[{"commentText":"x",)" + from + R"(},{"commentId":2,"commentText":"y",)" + from + R"(}]}})";
  const svc::response a2 = call("/v2/commentannotations/comments/add", doc + more);
  EXPECT_NE(a2.body.find(R"("3":{"success":true,"commentId":3)"), std::string::npos) << a2.body;
  EXPECT_NE(a2.body.find(R"("2":{"success":true,"commentId":2)"), std::string::npos) << a2.body;
  const std::string thread = call("/v1/commentannotations/get", doc + "}}").body;
  for (const char* c : {R"("commentId":9007199254740991,"commentText":"max")", R"("commentId":1,"commentText":"next")", R"("commentId":3,"commentText":"x")",
                        R"("commentId":2,"commentText":"y")"})
    EXPECT_NE(thread.find(c), std::string::npos) << c << "\n" << thread;
}

// database::prepare keeps the first 256 built texts per connection and runs later ones for one use
// (SQLite: a statement of its own; PostgreSQL: parsed with its parameters when it runs), so queries
// past the cache answer for their own text even when two are open at once.
TEST_F(fixture, BuiltStatementsPastTheCacheAnswerForTheirOwnText) {
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  ASSERT_EQ(add_thread(*this, doc).http, 200);
  const svc::annotation_scope s{key.substr(3, 16), "o", "d"};
  std::vector<std::string> ids{"a"};
  for (std::size_t n = 1; n <= 300; ++n, ids.push_back("missing" + std::to_string(n)))
    ASSERT_EQ(svc::annotations_passing(db, s, ids, {}), (std::unordered_map<std::string, bool>{{"a", true}})) << n;
  auto counting = [&](std::size_t n) {
    return "SELECT count(*) FROM annotations WHERE tenant=? AND annotation_id IN (" + svc::database::placeholders(n) + ")";
  };
  auto bind = [&](svc::query& q, std::size_t n, const std::string& id) {
    q.bind(1, s.tenant);
    for (int i = 0; i < static_cast<int>(n); ++i) q.bind(i + 2, i == 0 ? id : "none");
  };
  svc::query found = db.prepare(counting(400));
  svc::query not_found = db.prepare(counting(401));
  bind(found, 400, "a");
  bind(not_found, 401, "b");
  ASSERT_TRUE(not_found.step());
  ASSERT_TRUE(found.step());
  EXPECT_EQ(found.integer(0), 1);
  EXPECT_EQ(not_found.integer(0), 0);
}

TEST(Annotations, TimestampsAreIso8601UtcWithMillisecondsOnRealDates) {
  EXPECT_TRUE(svc::is_timestamp("2025-01-20T10:30:00.000Z"));
  EXPECT_TRUE(svc::is_timestamp("2024-02-29T23:59:59.999Z"));
  EXPECT_TRUE(svc::is_timestamp("2000-02-29T00:00:00.000Z"));
  for (const char* bad : {"2025-02-29T00:00:00.000Z", "1900-02-29T00:00:00.000Z", "2025-04-31T00:00:00.000Z", "2025-13-01T00:00:00.000Z",
                          "2025-01-20T24:00:00.000Z", "2025-01-20T10:60:00.000Z", "2025-01-20T10:30:00Z", "2025-01-20T10:30:00.000+00:00",
                          "2025-01-20 10:30:00.000Z", "2025-01-2OT10:30:00.000Z", ""})
    EXPECT_FALSE(svc::is_timestamp(bad)) << bad;
}

TEST(Annotations, GeneratedIdsAreUrlSafeDistinctAndInTimeOrder) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = svc::random_annotation_id();
    ASSERT_EQ(id.size(), 20u);
    ASSERT_EQ(id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), std::string::npos) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
  // Time first, big-endian (inserts stay together in the keys): a later millisecond sorts after, whatever
  // the random bits, across each byte of the time; ids of one millisecond differ.
  for (const std::int64_t ms : {std::int64_t{0}, std::int64_t{255}, std::int64_t{0xFFFF}, std::int64_t{1767225600000}, (std::int64_t{1} << 48) - 2})
    for (int i = 0; i < 20; ++i) EXPECT_LT(svc::random_annotation_id(ms), svc::random_annotation_id(ms + 1)) << ms;
  EXPECT_NE(svc::random_annotation_id(1767225600000), svc::random_annotation_id(1767225600000));
  EXPECT_EQ(svc::random_annotation_id(1767225600000).substr(0, 8), svc::random_annotation_id(1767225600000).substr(0, 8));
}

TEST(Annotations, StoredBodiesReadBackThroughTheSameChecks) {
  const auto item = svc::parse_json(
      R"({"annotationId":"x","from":{"userId":"u","name":"U","email":"u@e"},"context":{"b":1,"a":[2]},"commentData":[{"commentText":"t"}]})");
  svc::annotation_value a = svc::parse_annotation(item);
  a.created_at = a.last_updated = "2025-01-20T10:30:00.000Z";
  const std::string body = svc::annotation_body(a);
  EXPECT_EQ(body, R"({"annotationId":"x","from":{"userId":"u","name":"U","email":"u@e"},"color":"",)"
                  R"("status":{"id":"OPEN","name":"Open","color":"#625DF5","type":"default"},"context":{"a":[2],"b":1},)"
                  R"("createdAt":"2025-01-20T10:30:00.000Z","lastUpdated":"2025-01-20T10:30:00.000Z"})");
  EXPECT_EQ(svc::annotation_body(svc::stored_annotation(body)), body);
  svc::comment_value c = a.comments.at(0);
  c.id = 3, c.from = a.from, c.created_at = c.last_updated = a.created_at;
  EXPECT_EQ(svc::comment_body(svc::stored_comment(svc::comment_body(c))), svc::comment_body(c));
}

// A get by ids reads the listed threads (store.hpp, scan_listed_threads): in request
// order, a missing id in its place, an annotation that fails another filter left out with its
// comments, each thread with its own comments in the order they were added.
TEST_F(fixture, ListedThreadsComeInRequestOrderEachWithItsOwnComments) {
  const svc::annotation_scope s{key.substr(3, 16), "o", "d"};
  const std::string at = "2025-01-01T00:00:00.000Z";
  db.write([&] {
    for (const char* id : {"a", "b", "c"}) {
      ASSERT_TRUE(svc::insert_annotation(db, s, {id, std::string(id) == "b" ? "L2" : "L1", "u", "OPEN", at, at, "{}", 1}));
      for (int n : {3, 1, 2}) ASSERT_TRUE(svc::insert_comment(db, s, id, n, std::string(id) + std::to_string(n)));
    }
  });
  std::string seen;
  const svc::thread_visitor v{[&](const svc::annotation_head& h) { return seen += " [" + h.id, true; }, [&](std::string_view c) { seen += " " + std::string(c); }};
  svc::annotation_filter f;
  f.locations = {"L1"};
  svc::scan_listed_threads(db, s, {"c", "b", "gone", "a"}, f, v, [&] { seen += " null"; });
  EXPECT_EQ(seen, " [c c3 c1 c2 null [a a3 a1 a2");
  seen.clear();
  svc::scan_listed_threads(db, s, {"a", "gone", "b"}, f, v, [&] { seen += " null"; });  // the last id fails: no row, nothing
  EXPECT_EQ(seen, " [a a3 a1 a2 null");
  seen.clear();
  svc::scan_listed_threads(db, s, {"b", "gone"}, {}, v, [&] { seen += " null"; });
  EXPECT_EQ(seen, " [b b3 b1 b2 null");
  seen.clear();
  svc::scan_listed_threads(db, {s.tenant, "o", "other"}, {"a"}, {}, v, [&] { seen += " null"; });  // another document's "a"
  EXPECT_EQ(seen, " null");
}

// A get by ids of large threads (40 threads of 40-60 KB, their comments held in the row or in their
// table) listed in reverse key order and in a shuffled order with missing ids: each thread whole, in
// its place; a visitor that stops is not called again.
TEST_F(fixture, LargeListedThreadsComeWholeInRequestOrderInAnyOrderOfTheirKeys) {
  const svc::annotation_scope s{key.substr(3, 16), "o", "d"};
  const std::string at = "2025-01-01T00:00:00.000Z";
  std::map<std::string, std::string> comments_of;  // id -> its comments, comma-separated
  std::vector<std::string> ids;
  db.write([&] {
    for (int i = 0; i < 40; ++i) {
      const std::string id = "t" + std::to_string(10 + i);  // inserted in key order
      ids.push_back(id);
      std::vector<svc::comment_row> held;
      std::string& all = comments_of[id];
      for (int n = 1; n <= (i % 2 ? 3 : 2); ++n) {
        const std::string body = "\"" + id + "/" + std::to_string(n) + std::string(20000, char('a' + n)) + "\"";
        if (i % 2 == 0) held.push_back({n, body});  // even: the row holds its 40 KB of comments
        all += (all.empty() ? "" : ",") + body;
      }
      ASSERT_TRUE(svc::insert_annotation(db, s, {id, "L1", "u", "OPEN", at, at, "{}", 4}, held));
      if (i % 2) {  // odd: 60 KB of comments in their table (written after the row: not held)
        for (int n = 1; n <= 3; ++n)
          ASSERT_TRUE(svc::insert_comment(db, s, id, n, "\"" + id + "/" + std::to_string(n) + std::string(20000, char('a' + n)) + "\""));
      }
    }
  });
  std::string seen;
  std::size_t begun = 0, stop_at = SIZE_MAX;
  const svc::thread_visitor v{[&](const svc::annotation_head& h) { return ++begun <= stop_at && (seen += " [" + h.id + "]", true); },
                              [&](std::string_view c) { seen += std::string(c) + ";"; }};
  auto expected = [&](const std::vector<std::string>& order) {
    std::string e;
    for (const std::string& id : order) e += comments_of.count(id) ? " [" + id + "]" + comments_of[id] + ";" : " null";
    return e;
  };
  // Row-held comments come in one call, a table's one per call: compare with the calls joined.
  auto joined = [](std::string x) {
    for (std::size_t p; (p = x.find("\";\"")) != std::string::npos;) x.replace(p, 3, "\",\"");
    return x;
  };
  const std::vector<std::string> reversed(ids.rbegin(), ids.rend());
  db.read([&] { svc::scan_listed_threads(db, s, reversed, {}, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), expected(reversed));
  std::vector<std::string> shuffled = ids;
  std::mt19937 rng(23);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  shuffled.insert(shuffled.begin() + 7, "gone");
  shuffled.push_back("gone too");
  seen.clear();
  db.read([&] { svc::scan_listed_threads(db, s, shuffled, {}, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), expected(shuffled));
  // A visitor that stops at the fifth thread: four threads whole, nothing after.
  seen.clear(), begun = 0, stop_at = 4;
  db.read([&] { svc::scan_listed_threads(db, s, reversed, {}, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), expected({reversed.begin(), reversed.begin() + 4}));
  EXPECT_EQ(begun, 5u);
  // Threads handed on from the first statement's rows (held in the row), then from a thread that is not
  // held on, the rest read by key: missing ids in their places on both sides of the switch.
  const std::vector<std::string> mixed = {"t10", "gone", "t12", "t11", "t14", "gone too", "t13", "t16"};
  seen.clear(), begun = 0, stop_at = SIZE_MAX;
  db.read([&] { svc::scan_listed_threads(db, s, mixed, {}, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), expected(mixed));
  // A visitor that stops at the first thread read by key, after the switch.
  seen.clear(), begun = 0, stop_at = 2;
  db.read([&] { svc::scan_listed_threads(db, s, mixed, {}, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), expected({"t10", "gone", "t12"}));
  EXPECT_EQ(begun, 3u);
  // Threads whose rows hold them, so each is handed on from the first statement: one that fails the
  // location filter left out (the statement gives it no row: a place with no row reads as failing, not
  // missing), one held with no comments (''), a missing id; then a visitor that stops at the second
  // thread, among those handed on.
  db.write([&] {
    ASSERT_TRUE(svc::insert_annotation(db, s, {"elsewhere", "L2", "u", "OPEN", at, at, "{}", 2}, {{1, "\"e/1\""}}));
    ASSERT_TRUE(svc::insert_annotation(db, s, {"quiet", "L1", "u", "OPEN", at, at, "{}", 1}));
  });
  svc::annotation_filter in_l1;
  in_l1.locations = {"L1"};
  const std::vector<std::string> held_only = {"t10", "elsewhere", "quiet", "gone", "t12"};
  seen.clear(), begun = 0, stop_at = SIZE_MAX;
  db.read([&] { svc::scan_listed_threads(db, s, held_only, in_l1, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), " [t10]" + comments_of["t10"] + "; [quiet] null [t12]" + comments_of["t12"] + ";");
  seen.clear(), begun = 0, stop_at = 1;
  db.read([&] { svc::scan_listed_threads(db, s, held_only, in_l1, v, [&] { seen += " null"; }); });
  EXPECT_EQ(joined(seen), " [t10]" + comments_of["t10"] + ";");
  EXPECT_EQ(begun, 2u);
}

// Pages (scan_threads with a limit): the page's last annotation bounds the join, so a page holds
// exactly `limit` threads (or what is left), in (createdAt, annotationId) order across ties of
// createdAt, each with its own comments, and the next page starts after it; with annotation ids as
// well (their rows bounded by the ids instead).
TEST_F(fixture, PagesHoldTheirLimitInOrderAcrossTiesOfCreatedAt) {
  const svc::annotation_scope s{key.substr(3, 16), "o", "d"};
  std::vector<std::string> expected;
  db.write([&] {
    for (int i = 0; i < 23; ++i) {
      const std::string id = std::string("a").append(std::to_string((i * 7) % 23));
      const std::string at = std::string("2025-01-0").append(std::to_string(1 + i % 3)).append("T00:00:00.000Z");
      ASSERT_TRUE(svc::insert_annotation(db, s, {id, i % 2 ? "L1" : "L2", "u", "OPEN", at, at, "{}", 1}));
      ASSERT_TRUE(svc::insert_comment(db, s, id, 1, id + "/1"));
      ASSERT_TRUE(svc::insert_comment(db, s, id, 2, id + "/2"));
    }
  });
  for (const bool with_ids : {false, true}) {
    svc::annotation_filter all;
    if (with_ids)
      for (int i = 22; i >= 0; --i) all.ids.push_back("a" + std::to_string(i));
    std::vector<std::pair<std::string, std::string>> heads;  // (createdAt, id) of every annotation, as a scan gives them
    svc::scan_threads(db, s, all, {[&](const svc::annotation_head& h) { return heads.emplace_back(h.created_at, h.id), true; }, [](std::string_view) {}});
    ASSERT_EQ(heads.size(), 23u);
    ASSERT_TRUE(std::is_sorted(heads.begin(), heads.end()));
    for (const std::int64_t limit : {1, 4, 7, 23, 30}) {
      svc::annotation_filter f = all;
      f.limit = limit;
      std::vector<std::pair<std::string, std::string>> walked;
      for (int page = 0; page < 30; ++page) {
        std::vector<std::pair<std::string, std::string>> got;
        std::string comments;
        svc::scan_threads(db, s, f, {[&](const svc::annotation_head& h) { return got.emplace_back(h.created_at, h.id), true; },
                                     [&](std::string_view c) { comments += std::string(c) + ";"; }});
        ASSERT_LE(got.size(), static_cast<std::size_t>(limit)) << limit;
        std::string want;
        for (const auto& h : got) want += h.second + "/1;" + h.second + "/2;";
        EXPECT_EQ(comments, want) << limit;
        walked.insert(walked.end(), got.begin(), got.end());
        if (got.size() < static_cast<std::size_t>(limit)) break;
        f.after = got.back();
      }
      EXPECT_EQ(walked, heads) << "limit " << limit << (with_ids ? " with ids" : "");
    }
  }
}

// An annotation's row holds its thread's comments (store.hpp, schema 9) exactly as their table has
// them, through every write of the thread, or none past held_comments_max bytes (and again once they
// are back within it); a read gives the same bytes whether the row holds them or not.
TEST_F(fixture, AnAnnotationsRowHoldsItsCommentsThroughEveryWrite) {
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  const svc::annotation_scope s{key.substr(3, 16), "o", "d"};
  auto held = [&](const char* id) {
    svc::query q = db.sql("SELECT comments FROM annotations WHERE tenant=? AND org=? AND doc=? AND annotation_id=?");
    q.bind(1, s.tenant).bind(2, s.org).bind(3, s.doc).bind(4, std::string(id));
    return q.step() ? q.text_opt(0) : std::optional<std::string>("(no such annotation)");
  };
  auto in_table = [&](const char* id) {  // the thread's comments as their table has them, joined as a row holds them
    std::string joined;
    for (const std::int64_t c : svc::comment_ids(db, s, id)) joined.append(joined.empty() ? "" : ",").append(*svc::load_comment(db, s, id, c));
    return joined;
  };
  auto ok = [](const svc::response& r) { return r.http == 200 && r.body.find(R"("success":false)") == std::string::npos; };
  auto read = [&] {  // a v1 get of the document, checked to read the same once no row holds its comments (left so)
    const std::string answer = call("/v1/commentannotations/get", doc + "}}").body;
    db.write([&] {
      svc::query unhold = db.sql("UPDATE annotations SET comments = NULL WHERE tenant=? AND org=? AND doc=?");
      unhold.bind(1, s.tenant).bind(2, s.org).bind(3, s.doc).step();
    });
    EXPECT_EQ(call("/v1/commentannotations/get", doc + "}}").body, answer);
    return answer;
  };
  ASSERT_TRUE(ok(call("/v2/commentannotations/add", doc + R"(,"commentAnnotations":[{"annotationId":"a","from":{"userId":"u","name":"U","email":"u@e"},)"
                                                     R"("commentData":[{"commentId":5,"commentText":"five"},{"commentId":2,"commentText":"two"}]},)"
                                                     R"({"annotationId":"b","from":{"userId":"u","name":"U","email":"u@e"}}]}})")));
  EXPECT_EQ(held("a"), in_table("a"));
  EXPECT_NE(held("a")->find(R"("commentText":"five")"), std::string::npos);
  EXPECT_EQ(held("b"), std::optional<std::string>(""));
  const std::string first = read();
  EXPECT_NE(first.find(R"("comments":[{"commentId":5,)"), std::string::npos) << first;
  EXPECT_NE(first.find(R"("comments":[])"), std::string::npos) << first;
  const std::string on_a = doc + R"(,"annotationId":"a",)";
  ASSERT_TRUE(ok(call("/v2/commentannotations/comments/add", on_a + R"("commentData":[{"commentId":1,"commentText":"one","from":{"userId":"u","name":"U","email":"u@e"}}]}})")));
  EXPECT_EQ(held("a"), in_table("a"));
  ASSERT_TRUE(ok(call("/v2/commentannotations/comments/update", on_a + R"("commentIds":[2],"updatedData":{"commentText":"TWO"}}})")));
  EXPECT_EQ(held("a"), in_table("a"));
  EXPECT_NE(held("a")->find(R"("commentText":"TWO")"), std::string::npos);
  ASSERT_TRUE(ok(call("/v2/commentannotations/comments/delete", on_a + R"("commentIds":[5]}})")));
  EXPECT_EQ(held("a"), in_table("a"));
  EXPECT_EQ(svc::comment_ids(db, s, "a"), (std::vector<std::int64_t>{2, 1}));
  read();
  // Past the bound: two comments of 40,000 bytes each are not held; deleting one holds the other again.
  const std::string big(40000, 'x');
  const std::string on_b = doc + R"(,"annotationId":"b",)";
  ASSERT_TRUE(ok(call("/v2/commentannotations/comments/add", on_b + R"("commentData":[{"commentId":1,"commentText":")" + big + R"(","from":{"userId":"u","name":"U","email":"u@e"}},{"commentId":2,"commentText":")" +
                                                            big + R"(","from":{"userId":"u","name":"U","email":"u@e"}}]}})")));
  EXPECT_EQ(held("b"), std::nullopt);
  const std::string past = read();
  EXPECT_NE(past.find(R"("commentText":")" + big + R"(","commentHtml":"",)"), std::string::npos);
  ASSERT_TRUE(ok(call("/v2/commentannotations/comments/delete", on_b + R"("commentIds":[1]}})")));
  EXPECT_EQ(held("b"), in_table("b"));
  EXPECT_NE(held("b")->find(big), std::string::npos);
  read();
  // Whoever writes a comment without holding the thread again (the store alone, an older build, a
  // hand), the row is left holding none (the schema's triggers), never a stale copy.
  const std::function<void()> writes[] = {
      [&] { ASSERT_TRUE(svc::insert_comment(db, s, "a", 9, R"({"commentId":9})")); },
      [&] { db.exec("UPDATE annotation_comments SET body = '{\"commentId\":9,\"by\":\"hand\"}' WHERE comment_id = 9"); },
      [&] { db.exec("DELETE FROM annotation_comments WHERE comment_id = 9"); },
  };
  const char* after[] = {R"({"commentId":9}]})", R"({"commentId":9,"by":"hand"}]})", R"("commentText":"ONE")"};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ok(call("/v2/commentannotations/comments/update", on_a + R"("commentIds":[1],"updatedData":{"commentText":"ONE"}}})")));
    ASSERT_EQ(held("a"), in_table("a"));
    db.write(writes[i]);
    EXPECT_EQ(held("a"), std::nullopt) << i;
    EXPECT_NE(read().find(after[i]), std::string::npos) << i;
  }
}

}  // namespace
