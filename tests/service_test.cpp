// The service's handlers on a temporary SQLite file, without a socket: routing and check order, the
// JSON rules (depth, duplicates, canonical values), and a record's life through the cache and the log.
#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <set>
#include <thread>
#include <string>

#include <folio/document.hpp>
#include <sqlite3.h>

#include "annotations/store.hpp"
#include "annotations/model.hpp"
#include "platform/auth.hpp"
#include "wire/base64.hpp"
#include "platform/fields.hpp"
#include "wire/json.hpp"
#include "platform/clock.hpp"
#include "responder.hpp"

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

TEST(Json, RefusesANulByteWhereverItIs) {
  // RapidJSON alone would stop at the NUL and take "1" and {} as whole texts.
  for (const std::string& text : {std::string("1\0x", 3), std::string("{}\0", 3), std::string("[\"a\0\"]", 6)}) {
    try {
      svc::parse_json(text, "map value");
      FAIL() << text;
    } catch (const svc::api_error& e) {
      EXPECT_EQ(e.message, "map value is not valid JSON: NUL byte (at byte " + std::to_string(text.find('\0')) + ").");
    }
  }
}

TEST(Json, NumbersReadBackAsTheDoubleJavaScriptParses) {
  // Each number as sent, and as canonical_json writes it: integers that fit 64 bits exactly, every
  // other number the shortest text of the nearest double (what JSON.parse gives and JavaScript prints).
  const std::pair<const char*, const char*> cases[] = {
      {"2.2250738585072011e-308", "2.225073858507201e-308"},  // was ...014e-308 (RapidJSON's fast path)
      {"123456789.123456789", "123456789.12345679"},           // was 123456789.1234568
      {"0.1", "0.1"},
      {"1.0", "1"},
      {"1E2", "100"},
      {"5e-324", "5e-324"},
      {"2.4703282292062328e-324", "5e-324"},
      {"1e-400", "0"},
      {"-1e-400", "-0"},
      {"-0", "-0"},
      {"1.7976931348623157e308", "1.7976931348623157e+308"},
      {"2.225073858507201136057409796709131975934819546351645648e-308", "2.225073858507201e-308"},  // RapidJSON's full precision asserts here
      {"9007199254740993", "9007199254740993"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"18446744073709551615", "18446744073709551615"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(svc::canonical_json(svc::parse_json(std::string("[") + in + "]")), std::string("[") + out + "]") << in;
  for (const char* too_big : {"1.7976931348623159e308", "1e400", "-1e309"}) {
    try {
      svc::parse_json(std::string("[") + too_big + "]", "map value");
      FAIL() << too_big;
    } catch (const svc::api_error& e) {
      EXPECT_EQ(e.message, "map value is not valid JSON: number too big to be stored in double (at byte 1).") << too_big;
    }
  }
  // Any double, written shortest and read back, is the same double, and is written the same again.
  std::mt19937_64 rng(18);
  for (int i = 0; i < 200000; ++i) {
    double d;
    const std::uint64_t bits = rng();
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    char text[32];
    const std::string shortest(text, std::to_chars(text, text + sizeof text, d).ptr);
    const std::string canonical = svc::canonical_json(svc::parse_json("[" + shortest + "]"));
    const double back = std::strtod(canonical.c_str() + 1, nullptr);
    ASSERT_EQ(std::memcmp(&back, &d, sizeof d), 0) << shortest << " -> " << canonical;
    ASSERT_EQ(svc::canonical_json(svc::parse_json(canonical)), canonical);
  }
}

TEST(Json, EveryStringMustBeUnicodeAndARefusalNamesTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"data":{"editorId":"a\udc00b"}})", R"(editorId is not valid Unicode: it holds a lone surrogate \udc00 (the string ends at byte 29).)"},
      {R"({"data":{"data":{"k\udfff":1}}})", R"(A key in data is not valid Unicode: it holds a lone surrogate \udfff (the key ends at byte 25).)"},
      {R"({"data":{"commentAnnotations":[{"commentData":[{"commentText":"\udc00"}]}]}})",
       R"(commentAnnotations[0].commentData[0].commentText is not valid Unicode: it holds a lone surrogate \udc00 (the string ends at byte 69).)"},
      {R"({"data":{"list":["ok","\udc00"]}})", R"(list[1] is not valid Unicode: it holds a lone surrogate \udc00 (the string ends at byte 29).)"},
      {R"({"data":{"x":"\ud800z"}})", R"(x is not valid Unicode: it holds a high surrogate escape (\ud800-\udbff) not followed by a low one (at byte 14).)"},
      {"{\"data\":{\"x\":\"\xff\"}}", "x is not valid Unicode: it holds bytes that are not UTF-8 (the string ends at byte 15)."},
      {"{\"data\":{\"x\":\"\xc0\xaf\"}}", "x is not valid Unicode: it holds bytes that are not UTF-8 (the string ends at byte 16)."},  // overlong '/'
      {"{\"data\":{\"x\":\"\xf4\x90\x80\x80\"}}", "x is not valid Unicode: it holds bytes that are not UTF-8 (the string ends at byte 18)."},  // U+110000
      {"{\"data\":{\"\xed\xa0\x80\":1}}", "A key in data is not valid Unicode: it holds a lone surrogate \\ud800 (the key ends at byte 13)."},  // raw, as escaped
      {R"({"\udc00":1})", R"(A key of the body is not valid Unicode: it holds a lone surrogate \udc00 (the key ends at byte 8).)"},
  };
  for (const auto& [body, message] : cases) {
    try {
      svc::parse_json(body);
      FAIL() << body;
    } catch (const svc::api_error& e) {
      EXPECT_EQ(e.message, message) << body;
    }
  }
  try {
    svc::parse_json(R"({"a":["\udc00"]})", "map value");
    FAIL();
  } catch (const svc::api_error& e) {
    EXPECT_EQ(e.message, R"(map value at a[0] is not valid Unicode: it holds a lone surrogate \udc00 (the string ends at byte 13).)");
  }
  // The check on its own, at every length around its eight-byte steps.
  for (std::size_t pad = 0; pad < 17; ++pad) {
    const std::string ascii(pad, 'a');
    EXPECT_EQ(svc::unicode_problem(ascii + "\xC3\xA9\xF0\x9F\x98\x80" + ascii), 0u) << pad;
    EXPECT_EQ(svc::unicode_problem(ascii + "\xE2\x82"), 1u) << pad;  // cut short
    EXPECT_EQ(svc::unicode_problem(ascii + "\xED\xB0\x80" + ascii), 0xDC00u) << pad;
    EXPECT_EQ(svc::unicode_problem(ascii + "\x80" + ascii), 1u) << pad;
  }
  // A surrogate pair is one character, and stays one.
  EXPECT_EQ(svc::canonical_json(svc::parse_json(R"(["\ud83d\ude00"])")), "[\"\xF0\x9F\x98\x80\"]");
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
  EXPECT_EQ(live.crdt().live().failures(), 1u);
  EXPECT_EQ(live.crdt().live().published(), 0u);
  EXPECT_EQ(run("/v2/crdt/update", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p","data":"ab"}})").http, 200);
  EXPECT_EQ(live.crdt().live().failures(), 1u);  // no ops, nothing to publish
  EXPECT_EQ(run("/v2/crdt/sync", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p","version":"AA=="}})").http, 200);
  EXPECT_EQ(run("/v2/crdt/delete", R"({"data":{"organizationId":"o","documentId":"d","editorId":"p"}})").http, 200);
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
  EXPECT_NE(get().body.find(R"("data":"Hello")"), std::string::npos);
  EXPECT_EQ(service.crdt().cache().misses(), misses);
  // Ops held back for missing dependencies did change the document: it is rebuilt from storage.
  const std::string missing_deps("Fo\x01" "B\x01\x01\x05\x01>\x00\x03\x02\x02\x00\x02hi", 17);
  const svc::response held = push(missing_deps);
  EXPECT_NE(held.body.find("FAILED_PRECONDITION"), std::string::npos) << held.body;
  const svc::response after = get();
  EXPECT_NE(after.body.find(R"("data":"Hello")"), std::string::npos) << after.body;
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

TEST_F(fixture, AnEmptyListSelectsNothingOnEveryWriteAndDelete) {
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  ASSERT_EQ(call("/v2/commentannotations/add", doc + R"(,"commentAnnotations":[{"annotationId":"a","from":{"userId":"u","name":"U","email":"u@e"},)"
                                                     R"("commentData":[{"commentId":1,"commentText":"one"}]}]}})")
                .http,
            200);
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
  // Before the Unicode rule a lone surrogate escape was stored as the bytes ED B0 80. Such a body is
  // read back with parse_stored_json, so writes to the thread keep working.
  const std::string doc = R"({"data":{"organizationId":"o","documentId":"d")";
  ASSERT_EQ(call("/v2/commentannotations/add", doc + R"(,"commentAnnotations":[{"annotationId":"a","from":{"userId":"u","name":"U","email":"u@e"},)"
                                                     R"("commentData":[{"commentId":1,"commentText":"one"}]}]}})")
                .http,
            200);
  db.exec(R"sql(UPDATE annotations SET body = replace(body, '"name":"U"', '"name":"U' || char(56320) || '"');
                UPDATE annotation_comments SET body = replace(body, '"one"', '"one' || char(56320) || '"');)sql");
  const svc::response added = call("/v2/commentannotations/comments/add", doc + R"(,"annotationId":"a","commentData":[{"commentText":"two","from":{"userId":"u","name":"U","email":"u@e"}}]}})");
  EXPECT_EQ(added.http, 200) << added.body;
  const svc::response edited = call("/v2/commentannotations/comments/update", doc + R"(,"annotationId":"a","commentIds":[1],"updatedData":{"commentHtml":"<p>1</p>"}}})");
  EXPECT_EQ(edited.http, 200) << edited.body;
  EXPECT_NE(edited.body.find("1 of 1 comments updated."), std::string::npos) << edited.body;
  EXPECT_THROW(svc::parse_json(svc::load_comment(db, {key.substr(3, 16), "o", "d"}, "a", 1).value()), svc::api_error);  // what folio-admin check reports
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
  std::unique_lock<std::timed_mutex> writer(svc::database::writer_mutex());
  auto answer = [&](std::string path, std::string body) {
    auto f = std::async(std::launch::async, [&, path, body] { return call(path, body); });
    if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      writer.unlock();  // let it finish, so the test ends
      ADD_FAILURE() << path << " waited for the writer section";
    }
    return f.get();
  };
  // xml markup that does not parse (the record's type is known only from storage)
  const svc::response bad_xml = answer("/v2/crdt/update", ids + R"(,"data":"<p>a</q>"}})");
  EXPECT_EQ(bad_xml.http, 400) << bad_xml.body;
  // a pushed batch that does not decode
  const svc::response bad_batch = answer("/v2/crdt/sync", text_ids + R"(,"version":"AA==","incarnation":")" + incarnation + R"(","update":")" +
                                                            svc::base64_encode("not a batch") + "\"}}");
  EXPECT_EQ(bad_batch.http, 400) << bad_batch.body;
}

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
      // Another request holds the writer section past this one's deadline.
      std::unique_lock<std::timed_mutex> writer(svc::database::writer_mutex());
      auto f = std::async(std::launch::async, [&] { return service.handle(db, r); });
      std::this_thread::sleep_until(r.deadline + std::chrono::milliseconds(100));
      writer.unlock();
      res = f.get();
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

TEST_F(fixture, TheLargestCommentIdGivenByAClientNeverBlocksGeneratedIds) {
  // Ids are handed out after the largest the thread has had; a client giving 2^53 - 1 used to leave no
  // id for any comment sent without one ("No comment id is left ..."). Now the smallest free ids follow.
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
  for (const std::string& batch : svc::load_log(db, {key.substr(3, 16), "o", "d", "t"})) ASSERT_TRUE(frozen->apply(batch));
  ASSERT_TRUE(frozen->apply(jump));
  db.write([&] { svc::compact(db, {key.substr(3, 16), "o", "d", "t"}, frozen->encode()); });
  svc::responder fresh{svc::config{}};  // an empty cache reads the stored record
  const std::string body = ids + R"(,"data":"abcde"}})";
  const svc::response r = fresh.handle(db, svc::request{"POST", "/v2/crdt/update", "application/json", key, token, body, body.size(), {}, {}, {}});
  EXPECT_EQ(r.http, 400);
  EXPECT_EQ(r.body, R"({"error":{"message":"This record has used all the operation ids a record can hold (2^31); add its value as a new record under another editorId.","status":"FAILED_PRECONDITION"}})");
  const std::string get = ids + "}}";
  EXPECT_NE(fresh.handle(db, svc::request{"POST", "/v2/crdt/get", "application/json", key, token, get, get.size(), {}, {}, {}}).body.find(R"("data":"xabcd")"),
            std::string::npos);
}

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

TEST_F(fixture, AFullDatabaseRefusesWritesKeepsReadsAndTakesWritesOnceSpaceReturns) {
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

namespace {

TEST(Store, MigratesASchema1DatabaseToTheCurrentOne) {
  temp_db tmp;
  folio::document record(folio::record_type::text, 777);  // edited as the database's one server replica, as schema 1-3 did
  record.replace_text("kept");
  {
    // Schema 1 as shipped, with one annotation whose comments sit in its body and one text record.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &raw), SQLITE_OK);
    const char* v1 = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE crdt_records (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  type TEXT NOT NULL, content_key TEXT NOT NULL, snapshot BLOB NOT NULL,
  log_len INTEGER NOT NULL, revision INTEGER NOT NULL,
  last_update TEXT NOT NULL, last_updated_by TEXT NOT NULL, session_id TEXT,
  PRIMARY KEY (tenant, org, doc, editor)) WITHOUT ROWID;
CREATE TABLE crdt_log (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, editor TEXT NOT NULL,
  seq INTEGER NOT NULL, batch BLOB NOT NULL,
  PRIMARY KEY (tenant, org, doc, editor, seq)) WITHOUT ROWID;
CREATE TABLE annotations (
  tenant TEXT NOT NULL, org TEXT NOT NULL, doc TEXT NOT NULL, annotation_id TEXT NOT NULL,
  location_id TEXT, user_id TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (tenant, org, doc, annotation_id)) WITHOUT ROWID;
INSERT INTO meta VALUES ('server_replica', '777');
INSERT INTO annotations VALUES ('t', 'o', 'd', 'a1', 'L1', 'u1', '2025-01-01T00:00:00.000Z',
  '{"annotationId":"a1","color":"#f00","comments":[{"commentId":2,"commentText":"two"},{"commentId":1,"commentText":"one"}],"createdAt":"2025-01-01T00:00:00.000Z","lastUpdated":"2025-01-02T00:00:00.000Z","status":{"id":"RESOLVED"}}');
PRAGMA user_version = 1;
)sql";
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "INSERT INTO crdt_records VALUES ('t', 'o', 'd', 'e', 'text', 'content', ?, 0, 1, '2025-01-01T00:00:00.000Z', 'u', NULL)",
                                 -1, &st, nullptr),
              SQLITE_OK);
    const std::string snapshot = record.encode();
    sqlite3_bind_blob(st, 1, snapshot.data(), static_cast<int>(snapshot.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(raw);
  }
  svc::database db(tmp.path(), svc::responder::tables());
  EXPECT_EQ(db.version(), svc::responder::tables().version());
  // 2: comments in their own table; 3: listed in the order they were before (commentId), and a comment
  // added now comes after them, whatever its id.
  const svc::annotation_scope s{"t", "o", "d"};
  std::vector<svc::annotation_head> found;
  svc::scan_annotations(db, s, {}, [&](const svc::annotation_head& a) { return found.push_back(a), true; });
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].body, R"({"annotationId":"a1","color":"#f00","createdAt":"2025-01-01T00:00:00.000Z","lastUpdated":"2025-01-02T00:00:00.000Z",)"
                           R"("status":{"id":"RESOLVED"}})");
  std::string comments;
  svc::scan_comments(db, s, "a1", [&](std::string_view c) { comments += std::string(c) + ';'; });
  EXPECT_EQ(comments, R"({"commentId":1,"commentText":"one"};{"commentId":2,"commentText":"two"};)");
  svc::annotation_filter by_status;
  by_status.statuses = {"RESOLVED"};
  by_status.updated_after = "2025-01-01T12:00:00.000Z";
  EXPECT_EQ(svc::match_annotations(db, s, by_status), std::vector<std::string>{"a1"});
  EXPECT_EQ(svc::load_annotation(db, s, "a1")->next_comment_id, 3);
  db.write([&] { svc::insert_comment(db, s, "a1", 0, R"({"commentId":0,"commentText":"zero"})"); });
  EXPECT_EQ(svc::comment_ids(db, s, "a1"), (std::vector<std::int64_t>{1, 2, 0}));
  // 4: the record's incarnation is the replica it was edited as, so the service goes on editing it as
  // that replica.
  const std::optional<svc::record_row> row = svc::load_record(db, {"t", "o", "d", "e"});
  ASSERT_TRUE(row);
  EXPECT_EQ(row->incarnation, 777u);
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
  const std::string before = svc::random_annotation_id();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_LT(before, svc::random_annotation_id());  // time first: inserts stay together in the keys
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

TEST(Base64Url, RoundTripsAndRefusesOtherAlphabets) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n < 10; ++n) EXPECT_EQ(svc::base64url_decode(svc::base64url_encode(all.substr(0, n))), all.substr(0, n));
  EXPECT_EQ(svc::base64url_decode(svc::base64url_encode(all)), all);
  EXPECT_EQ(svc::base64url_encode("\xfb\xff"), "-_8");
  for (const char* bad : {"a", "ab+c", "ab/c", "ab=c", "abc=", "ab c", "ab\n"}) EXPECT_FALSE(svc::base64url_decode(bad)) << bad;
}

TEST(Base64, StandardOutReadsEitherAlphabetPaddedOrNot) {
  EXPECT_EQ(svc::base64_encode("\xfb\xff"), "+/8=");
  for (const char* in : {"+/8=", "+/8", "-_8=", "-_8"}) EXPECT_EQ(svc::base64_decode(in), "\xfb\xff") << in;
  EXPECT_EQ(svc::base64_decode(""), "");
  EXPECT_EQ(svc::base64_decode("AA=="), std::string(1, '\0'));
  for (const char* bad : {"A", "AA=", "A===", "ab=c", "ab c", "AAAA\n"}) EXPECT_FALSE(svc::base64_decode(bad)) << bad;
}

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

// Client tokens through the router (service/platform/client_token.hpp; the wire in tests/e2e/tokens_e2e.py).
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
  EXPECT_EQ(error_of(update), "A client token opens only /v2/crdt/get, /v2/crdt/sync and /v2/crdt/subscribe.");
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
