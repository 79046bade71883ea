// Pins the bytes of every encoding Folio writes: whole documents (what the service stores), batches of
// a whole history (ops_since({}), what a fresh client receives) and batches of one change, for text
// (the real editing traces), arrays, maps and xml records edited by two replicas. Each encoding's
// FNV-1a 64 digest and length must equal the ones recorded in tests/golden/encodings.txt: a change to
// the engine that alters one stored or wire byte fails here (the format is versioned in
// docs/FORMAT.md; an intended change updates the file and the format version together).
//
// Documents written in format version 1 (before version 2 compressed their content) must still decode:
// tests/golden/version1/ holds some, written by the engine of 0b5b9fa, and each must decode to the
// document that re-encodes as today's encoding of the same edits.
//
// To print the current digests (after an intended format change): FOLIO_GOLDEN_PRINT=1 encoding_golden_test
#include "support/trace.hpp"
#include "support/xml_documents.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <folio/folio.hpp>

#ifndef FOLIO_GOLDEN_FILE
#error "FOLIO_GOLDEN_FILE must name tests/golden/encodings.txt"
#endif
#ifndef FOLIO_GOLDEN_DIR
#error "FOLIO_GOLDEN_DIR must name tests/golden"
#endif

namespace {

std::string digest(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char out[48];
  std::snprintf(out, sizeof out, "%016llx %zu", static_cast<unsigned long long>(h), bytes.size());
  return out;
}

/// name -> bytes of every encoding this test makes.
std::map<std::string, std::string> current() {
  std::map<std::string, std::string> out;
  const auto add = [&](const std::string& name, const std::string& bytes) { out[name] = bytes; };

  for (const std::string& file : folio::testing::sequential_traces()) {
    const auto t = folio::testing::load_trace(file);
    folio::text doc(1);
    folio::local_change last{};
    for (const auto& tx : t.txns)
      for (const auto& p : tx.patches) {
        if (p.del) last = doc.erase(p.pos, p.del);
        if (!p.ins.empty()) last = doc.insert(p.pos, p.ins);
      }
    add("text/" + file + "/document", doc.encode());
    add("text/" + file + "/history", folio::encode_batch(doc.ops_since({})));
    add("text/" + file + "/last-change", folio::encode_batch(doc.ops(last)));
  }

  // Two replicas of each record type, edited concurrently and merged both ways.
  const auto pair_of = [&](folio::record_type type, const std::string& name, auto&& edit_a, auto&& edit_b, auto&& edit_a2) {
    folio::document a(type, 7, "content"), b(type, 9, "content");
    edit_a(a);
    ASSERT_TRUE(b.apply(a.encode_since({})));
    edit_b(b);
    const folio::local_change la = edit_a2(a);
    ASSERT_TRUE(a.apply(b.encode_since(a.version())));
    ASSERT_TRUE(b.apply(a.encode_since(b.version())));
    add(name + "/document", a.encode());
    add(name + "/document-b", b.encode());
    add(name + "/history", a.encode_since({}));
    add(name + "/last-change", a.encode_change(la));
  };
  pair_of(
      folio::record_type::text, "text/pair", [](folio::document& d) { return d.replace_text("Hello world, übermorgen 😀"); },
      [](folio::document& d) { return d.replace_text("Hello brave world, übermorgen"); },
      [](folio::document& d) { return d.replace_text("Hallo world! 😀 bis übermorgen"); });
  pair_of(
      folio::record_type::array, "array/pair",
      [](folio::document& d) { return d.replace_array({"1", "\"two\"", "{\"three\":3}", "[4]", "null"}); },
      [](folio::document& d) { return d.replace_array({"1", "\"two\"", "true", "{\"three\":3}", "[4]"}); },
      [](folio::document& d) { return d.replace_array({"0", "1", "{\"three\":3}", "null", "\"five\""}); });
  pair_of(
      folio::record_type::map, "map/pair",
      [](folio::document& d) { return d.replace_map({{"title", "\"Draft\""}, {"n", "1"}, {"tags", "[\"a\",\"b\"]"}}); },
      [](folio::document& d) {
        d.set("owner", "\"kim\"");
        return d.remove("n");
      },
      [](folio::document& d) { return d.replace_map({{"title", "\"Final\""}, {"n", "2"}, {"z", "{}"}}); });
  pair_of(
      folio::record_type::xml, "xml/pair",
      [](folio::document& d) { return d.replace_xml("<doc><p id=\"a\">Hello <b>world</b></p><p>two &amp; three</p></doc>").second; },
      [](folio::document& d) { return d.replace_xml("<doc><p id=\"a\" class=\"x\">Hello <b>brave</b> world</p><p>two &amp; three</p></doc>").second; },
      [](folio::document& d) { return d.replace_xml("<doc><h1>Title</h1><p id=\"b\">Hello <i>world</i></p></doc>").second; });

  // A large xml record and one word replaced in it.
  folio::document x(folio::record_type::xml, 3);
  std::string markup = folio::testing::xml_document(64 * 1024);
  EXPECT_TRUE(x.replace_xml(markup).first);
  add("xml/64k/document", x.encode());
  markup.replace(markup.find("word"), 4, "WORD");
  const folio::local_change one = x.replace_xml(markup).second;
  add("xml/64k/one-word", x.encode_change(one));
  add("xml/64k/document-after", x.encode());
  return out;
}

std::map<std::string, std::string> recorded() {
  std::map<std::string, std::string> out;
  std::ifstream in(FOLIO_GOLDEN_FILE);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.find('\t');
    if (tab != std::string::npos) out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return out;
}

TEST(EncodingGolden, EveryEncodingKeepsItsBytes) {
  std::map<std::string, std::string> now;
  for (const auto& [name, bytes] : current()) now[name] = digest(bytes);
  if (std::getenv("FOLIO_GOLDEN_PRINT")) {
    for (const auto& [name, d] : now) std::printf("%s\t%s\n", name.c_str(), d.c_str());
    return;
  }
  const auto was = recorded();
  ASSERT_FALSE(was.empty()) << "no digests read from " << FOLIO_GOLDEN_FILE;
  EXPECT_EQ(now.size(), was.size());
  for (const auto& [name, d] : now) {
    const auto it = was.find(name);
    if (it == was.end()) {
      ADD_FAILURE() << name << " has no recorded digest (" << d << ")";
      continue;
    }
    EXPECT_EQ(d, it->second) << name << ": the encoding's bytes changed";
  }
}

TEST(EncodingGolden, Version1DocumentsStillDecode) {
  const auto now = current();
  const struct {
    const char* file;
    const char* name;
    folio::replica_id self;
  } cases[] = {{"text-pair.doc", "text/pair/document", 7},
               {"array-pair.doc", "array/pair/document", 7},
               {"text-clownschool_flat.doc", "text/clownschool_flat.json.gz/document", 1}};
  for (const auto& c : cases) {
    std::ifstream in(std::string(FOLIO_GOLDEN_DIR) + "/version1/" + c.file, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string v1 = bytes.str();
    ASSERT_GT(v1.size(), 4u) << c.file;
    EXPECT_EQ(v1[2], '\x01') << c.file << " is not of format version 1";
    std::optional<folio::document> d;
    const folio::decode_result r = folio::document::decode(v1, c.self, d);
    ASSERT_TRUE(r) << c.file << ": " << r.description();
    d->check_invariants();
    ASSERT_TRUE(now.count(c.name)) << c.name;
    EXPECT_EQ(d->encode(), now.at(c.name)) << c.file << " does not decode to the document of today's " << c.name;
    EXPECT_EQ(now.at(c.name)[2], '\x02') << c.name << " is not written in format version 2";
  }
}

}  // namespace
