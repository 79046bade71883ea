// The wire library (service/wire/): the JSON rules (depth, duplicates, NUL bytes, numbers as JavaScript
// reads them, Unicode, canonical values), base64 in both alphabets, and a streamed body's output.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "wire/base64.hpp"
#include "wire/body_output.hpp"
#include "wire/json.hpp"

namespace {

namespace svc = folio::service;

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

TEST(Json, ARawControlCharacterIsRefusedWhereverItIs) {
  // RapidJSON 1.1.0's own sixteen-byte scan takes 0x1A-0x1F for ordinary bytes: with it a body with a
  // raw ESC in a key is taken, and a refusal naming the key is not JSON. parse_json's scan (json.cpp)
  // stops at each of 0x01-0x1F (a NUL is refused before it runs), before, inside and after a
  // sixteen-byte block.
  for (int c = 0x01; c < 0x20; ++c) {
    for (const std::size_t pad : {std::size_t(0), std::size_t(5), std::size_t(20), std::size_t(40)}) {
      const std::string inner = std::string(pad, 'a') + static_cast<char>(c) + std::string(pad, 'b');
      for (const std::string& body : {"{\"data\":{\"x\":\"" + inner + "\"}}", "{\"data\":{\"" + inner + "\":1}}"}) {
        std::string message;
        try {
          svc::parse_json(body);
        } catch (const svc::api_error& e) {
          message = e.message;
        }
        EXPECT_EQ(message, "Body is not valid JSON: invalid escape character in string (at byte " + std::to_string(body.find(static_cast<char>(c))) + ").")
            << c << " " << pad;
      }
    }
  }
}

TEST(Json, StringsReadAsRapidJsonsOwnByteLoopReadsThem) {
  // parse_json's string scan (json.cpp) copies runs and two-byte escapes itself, sixteen bytes a test:
  // it must give the very key and value, or the very refusal at the very byte, that RapidJSON's own
  // byte loop gives (a MemoryStream, which no SIMD scan reads). Runs of every length around 16, escapes
  // of every kind, the faults a scan could misplace (raw control characters, 0x1A-0x1F included, a
  // backslash making no escape, a body cut in a string or an escape) at every alignment, and the end
  // of the body within sixteen bytes of all of them. Each body is read twice: as a view followed by
  // plain bytes a scan must not take, and from a buffer of its exact size (AddressSanitizer sees a
  // load past it).
  int refused = 0, read = 0;
  auto check = [&](const std::string& body) {
    rapidjson::Document ref;
    rapidjson::MemoryStream ms(body.data(), body.size());
    ref.ParseStream<rapidjson::kParseIterativeFlag>(ms);
    const std::string padded = body + std::string(16, 'z');
    const auto exact = std::make_unique<char[]>(body.size() + 1);  // + 1: a zero-length body still has a buffer
    std::memcpy(exact.get(), body.data(), body.size());
    for (const std::string_view in : {std::string_view(padded).substr(0, body.size()), std::string_view(exact.get(), body.size())}) {
      std::string message;
      rapidjson::Document got;
      try {
        got = svc::parse_json(in);
      } catch (const svc::api_error& e) {
        message = e.message;
      }
      if (ref.HasParseError()) {
        std::string why = rapidjson::GetParseError_En(ref.GetParseError());
        why.pop_back();  // its period
        why[0] = static_cast<char>(why[0] - 'A' + 'a');
        EXPECT_EQ(message, "Body is not valid JSON: " + why + " (at byte " + std::to_string(ref.GetErrorOffset()) + ").") << body;
        continue;
      }
      ASSERT_EQ(message, "") << body;
      const auto text = [](const rapidjson::Value& v) { return std::string(v.GetString(), v.GetStringLength()); };
      EXPECT_EQ(text(got.MemberBegin()->name), text(ref.MemberBegin()->name)) << body;
      EXPECT_EQ(text(got.MemberBegin()->value), text(ref.MemberBegin()->value)) << body;
    }
    ++(ref.HasParseError() ? refused : read);
  };
  const std::vector<std::string> tokens = {"a",     "bcdefgh", "\xc3\xa9", " ",      "/",      "\\n",  "\\\\", "\\\"",
                                           "\\/",   "\\t",     "\\b",      "\\f",    "\\r",    "\\u00e9", "\\u0041",
                                           "\x01",  "\x1a",    "\x1f",     "\n",     "\\x",    "\\"};
  constexpr std::size_t faults = 6;  // the last six tokens: mostly refused (a lone "\\" can begin an escape)
  std::mt19937 rng(23);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int round = 0; round < 20000; ++round) {
    std::string key, text;
    for (std::size_t k = pick(4); k > 0; --k) key += tokens[pick(tokens.size() - faults)];
    std::vector<std::string> chosen;
    for (std::size_t k = pick(24); k > 0; --k) chosen.push_back(tokens[pick(tokens.size() - faults)]);
    if (round % 4 == 0) chosen.insert(chosen.begin() + static_cast<std::ptrdiff_t>(pick(chosen.size() + 1)), tokens[tokens.size() - 1 - pick(faults)]);
    for (const std::string& t : chosen) text += t;
    std::string body = "{\"" + key + "\":\"" + text + "\"}";
    if (round % 7 == 0) body.resize(body.size() - 1 - pick(std::min<std::size_t>(body.size() - 1, 20)));  // cut
    check(body);
  }
  EXPECT_GT(refused, 4000);  // both kinds of body are made often
  EXPECT_GT(read, 10000);
  // And every place near a block's edge and the body's end: one special token at every position of a
  // 0-48 byte string, in the key and in the value, the body whole and without its last 1-3 bytes.
  for (const std::string special : {"\\n", "\\\\", "\\\"", "\\u0041", "\x1a", "\\x", "\\"})
    for (std::size_t length = 0; length <= 48; ++length)
      for (std::size_t at = 0; at <= length; ++at) {
        const std::string s = std::string(at, 'a') + special + std::string(length - at, 'b');
        for (const std::string& body : {"{\"" + s + "\":\"v\"}", "{\"k\":\"" + s + "\"}"})
          for (std::size_t cut = 0; cut <= 3; ++cut) check(body.substr(0, body.size() - cut));
      }
}

TEST(Json, EveryControlCharacterIsWrittenEscaped) {
  // Each between ordinary bytes, so that a sixteen-byte block holds it alone (the SSE2 writer's scan
  // found 0x00-0x19 and wrote 0x1A-0x1F raw).
  std::string text;
  for (int c = 0; c < 0x20; ++c) text += std::string(20, 'a') + static_cast<char>(c);
  text += std::string(20, 'a');
  rapidjson::Document d;
  d.SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), d.GetAllocator());
  for (const std::string& out : {svc::canonical_json(d), svc::error_body(text, "INVALID_ARGUMENT")}) {
    for (const char ch : out) EXPECT_GE(static_cast<unsigned char>(ch), 0x20u) << out;
    EXPECT_NE(out.find("a\\u001Aa"), std::string::npos) << out;
    EXPECT_NE(out.find("a\\u001Fa"), std::string::npos) << out;
  }
  const rapidjson::Document back = svc::parse_json(svc::canonical_json(d));
  EXPECT_EQ(std::string(back.GetString(), back.GetStringLength()), text);
}

TEST(Json, StringsAreWrittenAsRapidJsonsOwnLoopWritesThem) {
  // json_writer copies runs sixteen bytes at a time; a writer of another allocator type takes
  // RapidJSON's generic loop, a byte at a time. Random strings with runs of every length between the
  // bytes to escape, keys and values.
  struct plain_allocator : rapidjson::CrtAllocator {};
  using plain_writer = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>, plain_allocator>;
  std::mt19937 rng(23);
  const std::string specials[] = {"\"", "\\", std::string(1, '\0'), "\x01", "\x1a", "\x1f", "\n", "\t", " ", "/", "\x7f", "\xc3\xa9", "\xf0\x9f\x98\x80"};
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int pieces = static_cast<int>(rng() % 6);
    for (int i = 0; i < pieces; ++i) text += std::string(rng() % 40, static_cast<char>('a' + rng() % 26)) + specials[rng() % std::size(specials)];
    text += std::string(rng() % 40, 'z');
    rapidjson::StringBuffer fast_buffer, plain_buffer;
    svc::json_writer fast(fast_buffer);
    plain_writer plain(plain_buffer);
    fast.StartObject(), plain.StartObject();
    fast.Key(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    plain.Key(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    fast.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    plain.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    fast.EndObject(), plain.EndObject();
    ASSERT_EQ(std::string(fast_buffer.GetString(), fast_buffer.GetSize()), std::string(plain_buffer.GetString(), plain_buffer.GetSize())) << round;
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

TEST(BodyOutput, ALargeValueIsSentAsItIsAfterWhatIsBuffered) {
  std::vector<std::string> sent;
  std::vector<const char*> from;  // where the sink read each piece
  svc::body_output out([&](std::string_view b) { sent.emplace_back(b), from.push_back(b.data()); }, 8);
  out.append("{\"a\":");
  out.append_or_send("1234567");  // under a chunk: buffered
  EXPECT_TRUE(sent.empty());
  EXPECT_FALSE(out.started());
  const std::string large(20, 'x');
  out.append(",\"b\":");
  out.append_or_send(large);  // the buffer first, then the value itself
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0], "{\"a\":1234567,\"b\":");
  EXPECT_EQ(sent[1], large);
  EXPECT_EQ(from[1], large.data());  // not a copy
  EXPECT_TRUE(out.started());
  out.append("}");
  EXPECT_EQ(out.take(), "}");
  // Without a sink everything stays in the buffer.
  svc::body_output whole({}, 8);
  whole.append_or_send(large);
  EXPECT_EQ(whole.take(), large);
  EXPECT_FALSE(whole.started());
}

TEST(BodyOutput, AnAnswerStartsEmptyOnTheBufferTheAnswerBeforeLeftAndANestedOneHasItsOwn) {
  const char* first_room = nullptr;
  {
    svc::body_output a;
    a.append(std::string(3000, 'a'));  // left unsent and untaken
    first_room = a.buffer().GetString();
  }
  svc::body_output b;
  EXPECT_EQ(b.buffer().GetSize(), 0u);
  EXPECT_EQ(b.buffer().GetString(), first_room);  // the same room, kept: no growth from 256 bytes again
  b.append("{\"b\":");
  {
    svc::body_output nested;  // an answer built while another is (an error body, a publish)
    nested.append("{\"n\":1}");
    EXPECT_NE(nested.buffer().GetString(), b.buffer().GetString());
    EXPECT_EQ(nested.take(), "{\"n\":1}");
  }
  b.append("2}");
  EXPECT_EQ(b.take(), "{\"b\":2}");
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

}  // namespace
