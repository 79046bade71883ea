// One document model for the four record types (folio/document.hpp): type and root name, the one entry
// point, text, array and map values through it, replace-by-value, and hostile encodings. XML records,
// applying batches and the record limits have files of their own (document_xml_test.cpp,
// document_apply_test.cpp, document_limits_test.cpp).
#include <gtest/gtest.h>

#include <folio/document.hpp>
#include <algorithm>
#include <functional>
#include <random>
#include <string>

#include "support/documents.hpp"

namespace {

using folio::document;
using folio::record_type;
using folio::testing::round_trip;

// ---- type and root name ---------------------------------------------------------------------------

TEST(Document, KeepsTypeAndContentKeyThroughTheEncoding) {
  for (record_type t : {record_type::text, record_type::array, record_type::map, record_type::xml}) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    document d(t, 1, "default");
    const document e = round_trip(d, 2);
    EXPECT_EQ(e.type(), t);
    EXPECT_EQ(e.content_key(), "default");
    EXPECT_EQ(e.replica(), 2u);
  }
  EXPECT_EQ(folio::parse_record_type("xml"), record_type::xml);
  EXPECT_FALSE(folio::parse_record_type("XML").has_value());
}

// record_type.hpp numbers the types once: the number is the encodings' value type byte.
TEST(Document, RecordTypesAreNumberedByTheirValueTypeByte) {
  for (record_type t : folio::all_record_types) {
    EXPECT_EQ(folio::record_type_of(static_cast<std::uint64_t>(t)), t);
    EXPECT_EQ(static_cast<unsigned char>(document(t, 1).encode()[4]), static_cast<unsigned char>(t));
  }
  EXPECT_FALSE(folio::record_type_of(0).has_value());
  EXPECT_FALSE(folio::record_type_of(5).has_value());
}

// Map and xml records have one entry point, document (folio.hpp says why there is no map.hpp or
// xml.hpp): the example of folio.hpp, and the type checked on every call.
TEST(Document, MapAndXmlRecordsThroughTheOneEntryPoint) {
  document m(record_type::map, 1), x(record_type::xml, 1);
  m.set("title", "\"Draft\"");
  ASSERT_TRUE(x.replace_xml("<p>Hello <b>world</b></p>").first);
  document mp(record_type::map, 2), xp(record_type::xml, 2);
  EXPECT_TRUE(mp.apply(m.encode_since(mp.version())));
  EXPECT_TRUE(xp.apply(x.encode_since(xp.version())));
  EXPECT_EQ(mp.map(), (std::map<std::string, std::string>{{"title", "\"Draft\""}}));
  EXPECT_EQ(xp.xml(), "<p>Hello <b>world</b></p>");
  EXPECT_THROW(x.set("k", "v"), folio::error);
  EXPECT_THROW(m.replace_xml("<p/>"), folio::error);
  EXPECT_FALSE(xp.apply(m.encode_since({})));  // a map batch is refused by an xml record
}

// apply decodes text and array batches into buffers it keeps between calls: what one batch left
// there (more ops, more values, a batch refused halfway through its bytes) never reaches the next.
TEST(Document, BatchesAppliedInTurnDoNotSeeEachOthersOps) {
  folio::document a(folio::record_type::text, 1), b(folio::record_type::text, 2);
  std::string big;
  for (int i = 0; i < 3000; ++i) big += "word ";
  const folio::local_change c1 = a.replace_text(big);
  const folio::local_change c2 = a.replace_text(big + "!");
  const folio::local_change c3 = a.replace_text("gone");
  const std::string first = a.encode_change(c1), second = a.encode_change(c2), third = a.encode_change(c3);
  ASSERT_TRUE(b.apply(first));
  EXPECT_EQ(b.text(), big);
  const folio::apply_result cut = b.apply(second.substr(0, second.size() - 1));  // its content ends early
  EXPECT_EQ(cut.status, folio::apply_status::invalid);
  EXPECT_EQ(b.text(), big);
  ASSERT_TRUE(b.apply(second));
  ASSERT_TRUE(b.apply(third));
  EXPECT_EQ(b.text(), "gone");
  EXPECT_EQ(b.encode(), [&] {
    folio::document c(folio::record_type::text, 2);
    c.apply(a.encode_since({}));
    return c.encode();
  }());
  folio::document x(folio::record_type::array, 3), y(folio::record_type::array, 4);
  const folio::local_change many = x.replace_array(std::vector<std::string>(50, "\"v\""));  // under 4 KiB: the buffers are kept
  const folio::local_change one = x.replace_array({"1"});
  ASSERT_TRUE(y.apply(x.encode_change(many)));
  ASSERT_TRUE(y.apply(x.encode_change(one)));
  EXPECT_EQ(y.array(), std::vector<std::string>{"1"});
}

TEST(Document, RefusesBatchesOfAnotherType) {
  document text(record_type::text, 1), array(record_type::array, 2), map(record_type::map, 3), xml(record_type::xml, 4);
  text.replace_text("hi");
  map.set("k", "1");
  const std::string tb = text.encode_since({}), mb = map.encode_since({});
  const folio::apply_result r1 = array.apply(tb);
  EXPECT_FALSE(r1);
  EXPECT_EQ(r1.message, "batch holds text operations; this record is array");
  EXPECT_FALSE(xml.apply(mb));
  EXPECT_EQ(xml.apply(mb).message, "batch holds map operations; this record is xml");
  EXPECT_TRUE(array.array().empty());
  std::optional<document> out;
  EXPECT_TRUE(document::decode(map.encode(), 5, out));
  EXPECT_EQ(out->type(), record_type::map);
  EXPECT_THROW(text.map(), folio::error);
  EXPECT_THROW(map.replace_xml(folio::markup::fragment{}), folio::error);
}

TEST(Document, AValueCheckRefusesTheWholeBatchBeforeAnythingIntegrates) {
  document array(record_type::array, 1), map(record_type::map, 2), text(record_type::text, 3);
  array.replace_array({"a", "b"});
  array.replace_array({"bad", "a", "b"});  // a second op
  map.set("k", "ok");
  map.set("j", "bad");
  text.replace_text("bad");
  std::vector<std::string> seen;
  const auto no_bad = [&](std::string_view v) {
    seen.emplace_back(v);
    return v == "bad" ? std::string("no bad values") : std::string();
  };
  for (document* source : {&array, &map}) {
    document replica(source->type(), 9);
    const folio::apply_result r = replica.apply(source->encode_since({}), no_bad);
    EXPECT_FALSE(r);
    EXPECT_EQ(r.message, "no bad values");
    EXPECT_EQ(r.op_index, 1u);
    EXPECT_TRUE(replica.version().empty());  // the first op passed the check, and is not integrated either
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "bad", "ok", "bad"}));
  document replica(record_type::text, 9);
  EXPECT_TRUE(replica.apply(text.encode_since({}), no_bad));  // text values are code points: never checked
  EXPECT_EQ(seen.size(), 5u);
}

// ---- text and array through the document -----------------------------------------------------------

TEST(Document, TextAndArrayReplaceAndSync) {
  document a(record_type::text, 1), b(record_type::text, 2);
  const folio::local_change c = a.replace_text("Hello world");
  ASSERT_TRUE(b.apply(a.encode_change(c)));
  a.replace_text("Hello, world");
  b.replace_text("Hello world!");
  ASSERT_TRUE(a.apply(b.encode_since(a.version())));
  ASSERT_TRUE(b.apply(a.encode_since(b.version())));
  EXPECT_EQ(a.text(), "Hello, world!");
  EXPECT_EQ(b.text(), a.text());
  EXPECT_EQ(round_trip(a, 3).text(), a.text());

  document x(record_type::array, 1);
  x.replace_array({"{\"a\":1}", "{\"b\":2}"});
  EXPECT_EQ(x.replace_array({"{\"a\":1}", "{\"b\":2}"}).count, 0u);
  EXPECT_EQ(x.replace_array({"{\"b\":2}"}).count, 1u);
  EXPECT_EQ(round_trip(x, 2).array(), std::vector<std::string>{"{\"b\":2}"});
}

// ---- map ---------------------------------------------------------------------------------------------

TEST(Document, MapReplaceEmitsOnlyTheDifference) {
  document m(record_type::map, 1);
  std::map<std::string, std::string> v;
  for (int i = 0; i < 100; ++i) v[std::string("k").append(std::to_string(i))] = std::to_string(i);
  EXPECT_EQ(m.replace_map(v).count, 100u);
  EXPECT_EQ(m.replace_map(v).count, 0u);  // unchanged: no op
  v["k5"] = "\"five\"";
  v.erase("k7");
  v["new"] = "true";
  const folio::local_change c = m.replace_map(v);
  EXPECT_EQ(c.count, 3u);  // one set, one remove, one set
  EXPECT_EQ(m.map(), v);
  const document n = round_trip(m, 2);
  EXPECT_EQ(n.map(), v);
  // The change alone brings a replica that had the first version up to date.
  document p(record_type::map, 3);
  ASSERT_TRUE(p.apply(m.encode_since({})));
  EXPECT_EQ(p.map(), v);
}

TEST(Document, MapConcurrentSetAndRemoveIsAddWins) {
  document a(record_type::map, 1), b(record_type::map, 2);
  a.set("k", "1");
  ASSERT_TRUE(b.apply(a.encode_since({})));
  a.remove("k");
  b.set("k", "2");
  ASSERT_TRUE(a.apply(b.encode_since(a.version())));
  ASSERT_TRUE(b.apply(a.encode_since(b.version())));
  EXPECT_EQ(a.map(), b.map());
  EXPECT_EQ(a.map().at("k"), "2");
  // Concurrent sets: the higher op id wins on both (equal Lamport values: replica 2 > 1).
  a.set("j", "\"a\"");
  b.set("j", "\"b\"");
  ASSERT_TRUE(a.apply(b.encode_since(a.version())));
  ASSERT_TRUE(b.apply(a.encode_since(b.version())));
  EXPECT_EQ(a.map().at("j"), "\"b\"");
  EXPECT_EQ(b.map(), a.map());
}

// ---- hostile encodings -----------------------------------------------------------------------------

// Random mutation of valid encodings of every type: decoding and applying never crash, and either
// fail cleanly or leave a document that passes check_invariants().
TEST(Document, MutatedBytesNeverCrash) {
  document t(record_type::text, 1), r(record_type::array, 1), m(record_type::map, 1), x(record_type::xml, 1);
  t.replace_text("Hello, world");
  r.replace_array({"1", "\"two\"", "{}"});
  m.replace_map({{"a", "1"}, {"b", "[2]"}});
  x.replace_xml("<p a=\"1\">Hi <b>there</b></p><q/>text");
  std::mt19937_64 rng(7);
  for (const document* d : {&t, &r, &m, &x}) {
    const std::string doc = d->encode(), batch = d->encode_since({});
    for (int i = 0; i < 3000; ++i) {
      std::string s = i % 2 ? doc : batch;
      const int edits = 1 + int(rng() % 4);
      for (int k = 0; k < edits && !s.empty(); ++k) {
        const std::size_t at = rng() % s.size();
        switch (rng() % 3) {
          case 0: s[at] = char(rng()); break;
          case 1: s.erase(at, 1 + rng() % 3); break;
          default: s.insert(at, 1, char(rng())); break;
        }
      }
      if (i % 2) {
        std::optional<document> out;
        if (document::decode(s, 2, out)) out->check_invariants(), (void)out->encode();
      } else {
        document fresh(d->type(), 2);
        fresh.apply(s);
        fresh.check_invariants();
        (void)fresh.encode();
      }
    }
  }
}

}  // namespace
