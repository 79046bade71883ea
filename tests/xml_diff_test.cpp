// The XML edit script: applying diff(a, b) to a gives exactly b, and small changes give small scripts.
#include <gtest/gtest.h>

#include <folio/detail/tree/xml_diff.hpp>
#include <random>

#include "support/xml_documents.hpp"
#include "support/xml_edit.hpp"

namespace {

using folio::markup::fragment;
using folio::markup::node;

fragment parsed(std::string_view s) {
  fragment f;
  const auto r = folio::markup::parse(s, f);
  EXPECT_TRUE(r) << r.description();
  return f;
}

// diff(a, b) applied to a must serialise exactly like b; returns the script's size.
std::size_t check_diff(const fragment& a, const fragment& b) {
  const auto fa = folio::markup::flat_fragment::from(a), fb = folio::markup::flat_fragment::from(b);
  const auto script = folio::detail::diff_xml(fa, fb);
  fragment patched = a;
  folio::testing::apply_xml_edit(patched, script, fb);
  EXPECT_EQ(folio::markup::serialize(patched), folio::markup::serialize(b));
  EXPECT_EQ(patched, b);
  return folio::detail::xml_edit_size(script);
}

TEST(XmlDiff, EqualFragmentsNeedNoEdit) {
  const auto a = parsed("<p a=\"1\">x<b>y</b></p>tail");
  const auto flat = [](const fragment& f) { return folio::markup::flat_fragment::from(f); };
  EXPECT_TRUE(folio::detail::diff_xml(flat(a), flat(a)).empty());
  // Under one root element (paired without hashing): nothing either, at any depth.
  const auto doc = parsed("<doc a=\"1\"><sec><p>x<b>y</b></p></sec><sec/></doc>");
  EXPECT_TRUE(folio::detail::diff_xml(flat(doc), flat(doc)).empty());
  EXPECT_TRUE(folio::detail::diff_xml(flat(doc), flat(parsed("<doc a=\"1\"><sec><p>x<b>y</b></p></sec><sec/></doc>"))).empty());
}

TEST(XmlDiff, AnAttributeChangeIsOneSet) {
  EXPECT_EQ(check_diff(parsed(R"(<doc><p class="a" id="1">x</p></doc>)"), parsed(R"(<doc><p class="b" id="1">x</p></doc>)")), 1u);
  EXPECT_EQ(check_diff(parsed(R"(<p class="a" id="1"/>)"), parsed(R"(<p id="1"/>)")), 1u);
  EXPECT_EQ(check_diff(parsed(R"(<doc v="1"><p>x</p></doc>)"), parsed(R"(<doc v="2"><p>x</p></doc>)")), 1u);  // the root's own
}

TEST(XmlDiff, AWordChangeDeepInsideIsCharacterEdits) {
  const auto a = parsed("<doc><sec><p>keep</p><p>the quick brown fox</p></sec></doc>");
  const auto b = parsed("<doc><sec><p>keep</p><p>the quick red fox</p></sec></doc>");
  EXPECT_EQ(check_diff(a, b), 6u);  // remove b,o,w,n; insert e,d ("r" is kept)
}

TEST(XmlDiff, AnInsertedParagraphIsOneInsertNotAShift) {
  std::string before, after;
  for (int i = 0; i < 100; ++i) {
    const std::string p = "<p>paragraph " + std::to_string(i) + "</p>";
    before += p, after += p;
    if (i == 50) after += "<p>new</p>";
  }
  EXPECT_EQ(check_diff(parsed(before), parsed(after)), 1u);
  EXPECT_EQ(check_diff(parsed(after), parsed(before)), 1u);
}

TEST(XmlDiff, ChangedTagsAreReplacedWhole) {
  EXPECT_EQ(check_diff(parsed("<p>x</p>"), parsed("<h1>x</h1>")), 2u);
  check_diff(parsed("a<p>b</p>c"), parsed("<p>b</p>"));
  check_diff(parsed(""), parsed("<p>b</p>x"));
  check_diff(parsed("<p>b</p>x"), parsed(""));
}

// The CRDT tree's current value can hold empty and adjacent text nodes (concurrent inserts, removed
// characters); the script turns it into the new value all the same.
TEST(XmlDiff, EmptyAndAdjacentTextNodesOnTheOldSide) {
  const fragment old{node::make_text("a"), node::make_text(""), node::make_text("b"),
                     node::make_element("p", {}, {node::make_text(""), node::make_text("x"), node::make_text("y")}), node::make_text("")};
  check_diff(old, parsed("ab<p>xy</p>"));
  check_diff(old, parsed("a<p>xyz</p>tail"));
  check_diff(old, parsed(""));
  check_diff(old, parsed("<q/>ab<p>xy</p>"));
}

TEST(XmlDiff, OneWordInAMebibyteDocumentIsAHandfulOfEdits) {
  const std::string doc = folio::testing::xml_document(1u << 20);
  std::string changed = doc;
  const std::size_t at = changed.find("word", changed.size() / 2);
  changed.replace(at, 4, "WORD");
  EXPECT_LE(check_diff(parsed(doc), parsed(changed)), 8u);
}

// Every text of 200 paragraphs replaced by an unrelated one: the texts share one budget proportional
// to the whole fragment, so the diff stops looking for minimal scripts partway (each text alone
// would fit its own allowance) and replaces the rest whole, still exactly.
TEST(XmlDiff, ManyTextDiffsShareOneBudget) {
  std::mt19937_64 rng(3);
  auto paragraphs = [&rng] {
    std::string s;
    for (int p = 0; p < 200; ++p) {
      s += "<p>";
      for (int i = 0; i < 1000; ++i) s += rng() % 2 ? 'a' : 'b';
      s += "</p>";
    }
    return s;
  };
  const fragment a = parsed(paragraphs()), b = parsed(paragraphs());
  const std::size_t size = check_diff(a, b);
  EXPECT_GT(size, 150'000u) << "each text diffed minimally (~400 edits each): the budget was not shared";
  EXPECT_LT(size, 400'000u) << "nothing diffed minimally";
}

// Random trees, randomly mutated: the script always reproduces the target.
node random_node(std::mt19937_64& rng, int depth) {
  if (depth > 3 || rng() % 3 == 0) return node::make_text(std::string(1 + rng() % 4, char('a' + rng() % 3)));
  node e = node::make_element(std::string(1, char('p' + rng() % 3)));
  if (rng() % 2) e.attributes.push_back({"k", std::to_string(rng() % 3)});
  for (int i = int(rng() % 4); i > 0; --i) e.children.push_back(random_node(rng, depth + 1));
  return e;
}

void mutate(std::vector<node>& list, std::mt19937_64& rng, int depth) {
  if (!list.empty() && rng() % 3 != 0) {
    node& n = list[rng() % list.size()];
    if (n.type == node::kind::element && rng() % 2) return mutate(n.children, rng, depth + 1);
    if (n.type == node::kind::text) n.text.insert(rng() % (n.text.size() + 1), 1, char('x' + rng() % 3));
    else if (rng() % 2) n.attributes.clear();
    else n.attributes = {{"k", "new"}};
    return;
  }
  const std::size_t pos = rng() % (list.size() + 1);
  if (!list.empty() && rng() % 2) list.erase(list.begin() + std::ptrdiff_t(pos % list.size()));
  else list.insert(list.begin() + std::ptrdiff_t(pos), random_node(rng, depth));
}

TEST(XmlDiff, RandomMutationsAreReproducedExactly) {
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    fragment a;
    for (int i = int(rng() % 5); i > 0; --i) a.push_back(random_node(rng, 0));
    fragment b = a;
    for (int m = int(1 + rng() % 4); m > 0; --m) mutate(b, rng, 0);
    // Normalise both (adjacent text nodes merge) through the canonical form.
    a = parsed(folio::markup::serialize(a));
    b = parsed(folio::markup::serialize(b));
    check_diff(a, b);
    check_diff(b, a);
  }
}

}  // namespace
