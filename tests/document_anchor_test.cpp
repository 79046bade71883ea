// Anchors and xml range edits (folio/document.hpp, docs/INTERNALS.md "Anchors and xml ranges"):
// text/array anchors (sequence::id_at / index_of) and xml anchors (xml_anchor_at / xml_resolve) that
// follow their item through concurrent inserts and removes in every delivery order; paths, child ids
// and markup of nested and removed nodes; replace_xml_range against a whole replace_xml and converging
// with concurrent edits; the change report of integrated ops (xml_changed); bad paths and offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <folio/document.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/documents.hpp"
#include "support/xml_documents.hpp"

namespace {

using folio::document;
using folio::op_id;
using folio::record_type;
using folio::xml_anchor;
using folio::xml_position;
using path = std::vector<std::size_t>;

document fork(const document& base, folio::replica_id r) {
  std::optional<document> d;
  EXPECT_TRUE(document::decode(base.encode(), r, d));
  return std::move(*d);
}

/// Calls f(d) with a copy of `base` (as replica 99) that received `changes` in each of their orders.
template <class F>
void in_every_order(const document& base, const std::vector<std::string>& changes, F&& f) {
  std::vector<std::size_t> order(changes.size());
  std::iota(order.begin(), order.end(), 0);
  do {
    document d = fork(base, 99);
    for (std::size_t i : order) {
      const folio::apply_result r = d.apply(changes[i]);
      ASSERT_TRUE(r) << r.message;
    }
    ASSERT_EQ(d.pending(), 0u);
    d.check_invariants();
    f(d);
  } while (std::next_permutation(order.begin(), order.end()));
}

// ---- text and array ------------------------------------------------------------------------------

TEST(Anchors, TextAnchorFollowsItsCharacterThroughConcurrentEditsInEveryOrder) {
  document base(record_type::text, 1);
  base.replace_text("abcdefgh");
  const op_id at_e = base.as_text().id_at(4);
  EXPECT_EQ(base.as_text().index_of(at_e), std::optional<std::size_t>(4));
  document a = fork(base, 2), b = fork(base, 3), c = fork(base, 4);
  std::vector<std::string> changes;
  changes.push_back(a.encode_change(a.as_text().insert_utf8(1, "XYZ")));  // before the anchor: +3
  changes.push_back(b.encode_change(b.as_text().erase(0, 2)));            // before: -2
  changes.push_back(c.encode_change(c.as_text().insert_utf8(6, "QQ")));   // after: nothing
  in_every_order(base, changes, [&](const document& d) {
    const auto i = d.as_text().index_of(at_e);
    ASSERT_TRUE(i);
    EXPECT_EQ(*i, 5u);
    EXPECT_EQ(d.as_text().at(*i), U'e');
    EXPECT_EQ(d.as_text().id_at(*i), at_e);
  });
}

TEST(Anchors, RemovedItemAnswersWhereItWasAndUnknownIdsNothing) {
  document d(record_type::text, 1);
  d.replace_text("0123456789");
  const op_id five = d.as_text().id_at(5);
  d.as_text().erase(4, 3);  // removes 4, 5, 6
  bool live = true;
  EXPECT_EQ(d.as_text().index_of(five, &live), std::optional<std::size_t>(4));
  EXPECT_FALSE(live);
  EXPECT_EQ(d.as_text().index_of(op_id{7, 0}), std::nullopt);         // a replica it never heard of
  EXPECT_EQ(d.as_text().index_of(op_id{1, 1000}), std::nullopt);      // beyond what it holds
  EXPECT_EQ(d.as_text().index_of(op_id{1, 10}), std::nullopt);        // the remove's own id: no item
  EXPECT_THROW(d.as_text().id_at(d.as_text().size()), folio::error);  // past the end
  // Many runs and leaves: every live item's index comes back, whatever the tree's shape.
  document big(record_type::array, 1);
  for (int i = 0; i < 3000; ++i) big.as_array().insert((i * 7919) % (i + 1), std::vector<std::string>{std::to_string(i)});
  for (std::size_t i = 0; i < big.as_array().size(); i += 37) EXPECT_EQ(big.as_array().index_of(big.as_array().id_at(i)), std::optional<std::size_t>(i));
}

// ---- xml: paths, ids, markup -----------------------------------------------------------------------

TEST(XmlAnchors, PathsIdsAndMarkupOfNestedAndRemovedNodes) {
  document d(record_type::xml, 1);
  ASSERT_TRUE(d.replace_xml("<p>ab<b>cd</b></p><ul><li>x</li><li>y</li></ul>").first);
  const std::vector<op_id> top = d.xml_child_ids({});
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(d.xml_path_of(top[1]), std::optional<path>(path{1}));
  EXPECT_EQ(d.xml_path_of(folio::document_start), std::optional<path>(path{}));
  const std::vector<op_id> items = d.xml_child_ids(path{1});
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(d.xml_path_of(items[1]), std::optional<path>(path{1, 1}));
  EXPECT_EQ(d.xml_markup(path{1, 1}), "<li>y</li>");
  EXPECT_EQ(d.xml_markup(path{0, 1, 0}), "cd");
  EXPECT_EQ(d.xml_markup(path{0}), "<p>ab<b>cd</b></p>");
  const op_id y_text = d.xml_child_ids(path{1, 1})[0];
  EXPECT_EQ(d.xml_path_of(y_text), std::optional<path>(path{1, 1, 0}));

  // An edit after the list became an engine (not lazy) finds the same.
  ASSERT_TRUE(d.replace_xml("<p>ab<b>cd</b></p><h1/><ul><li>y</li></ul>").first);
  EXPECT_EQ(d.xml_path_of(top[1]), std::optional<path>(path{2}));
  EXPECT_EQ(d.xml_path_of(items[0]), std::nullopt);  // removed
  EXPECT_EQ(d.xml_path_of(items[1]), std::optional<path>(path{2, 0}));
  EXPECT_EQ(d.xml_path_of(y_text), std::optional<path>(path{2, 0, 0}));
  EXPECT_EQ(d.xml_path_of(op_id{1, 100000}), std::nullopt);
  EXPECT_EQ(d.xml_path_of(op_id{42, 0}), std::nullopt);

  // The <ul> removed: everything under it is gone from view, and its anchors resolve to nothing.
  const xml_anchor in_y = d.xml_anchor_at(path{2, 0, 0}, 0);
  ASSERT_TRUE(d.replace_xml("<p>ab<b>cd</b></p><h1/>").first);
  EXPECT_EQ(d.xml_path_of(items[1]), std::nullopt);
  EXPECT_EQ(d.xml_path_of(y_text), std::nullopt);
  EXPECT_EQ(d.xml_resolve(in_y), std::nullopt);
  EXPECT_EQ(d.xml_resolve(xml_anchor{items[1], true}), std::nullopt);
  // ... while the removed <ul> itself resolves as an item of the fragment: where it was.
  EXPECT_EQ(d.xml_resolve(xml_anchor{top[1], false}), std::optional<xml_position>(xml_position{{}, 2}));
}

TEST(XmlAnchors, BadPathsAndOffsetsThrowRangeErrors) {
  document d(record_type::xml, 1);
  ASSERT_TRUE(d.replace_xml("<p>ab</p>").first);
  const auto range = [](auto&& f) {
    try {
      f();
    } catch (const folio::error& e) {
      return std::string(e.what()).rfind("[folio.range]", 0) == 0;
    }
    return false;
  };
  EXPECT_TRUE(range([&] { d.xml_child_ids(path{1}); }));
  EXPECT_TRUE(range([&] { d.xml_child_ids(path{0, 0}); }));     // a text node's children
  EXPECT_TRUE(range([&] { d.xml_child_ids(path{0, 0, 0}); }));  // below a text node
  EXPECT_TRUE(range([&] { d.xml_markup(path{}); }));
  EXPECT_TRUE(range([&] { d.xml_markup(path{0, 5}); }));
  EXPECT_TRUE(range([&] { d.xml_anchor_at(path{0, 0}, 3); }));
  EXPECT_TRUE(range([&] { d.xml_anchor_at(path{0, 1}, 0); }));
  EXPECT_TRUE(range([&] { d.replace_xml_range(path{0}, 1, 0, "x"); }));
  EXPECT_TRUE(range([&] { d.replace_xml_range(path{0}, 0, 2, "x"); }));
  EXPECT_TRUE(range([&] { d.replace_xml_range(path{0, 0}, 0, 0, "x"); }));
  EXPECT_TRUE(range([&] { d.replace_xml_range(path{7}, 0, 0, "x"); }));
  EXPECT_EQ(d.xml(), "<p>ab</p>");
  EXPECT_EQ(d.xml_anchor_at(path{0, 0}, 2), (xml_anchor{d.xml_child_ids(path{0})[0], true}));
  EXPECT_EQ(d.xml_anchor_at(path{}, 1), (xml_anchor{folio::document_start, true}));
  EXPECT_EQ(d.xml_resolve(xml_anchor{folio::document_start, false}), std::nullopt);
  EXPECT_EQ(d.xml_resolve(xml_anchor{op_id{1, 99}, false}), std::nullopt);
  document text(record_type::text, 1);
  EXPECT_THROW(text.xml_child_ids(path{}), folio::error);
}

// An anchor on a character and one on a paragraph, through concurrent typing before them, a removed
// paragraph before them and a paragraph inserted above, in every order: each resolves to a place
// whose anchor is itself (the same character and paragraph), and the end anchor to the text's end.
TEST(XmlAnchors, AnchorsFollowTheirItemsThroughConcurrentEditsInEveryOrder) {
  document base(record_type::xml, 1);
  ASSERT_TRUE(base.replace_xml("<doc><p>one</p><p>two words</p><p>three</p></doc>").first);
  const xml_anchor w = base.xml_anchor_at(path{0, 1, 0}, 4);  // the "w" of "words"
  const xml_anchor para = base.xml_anchor_at(path{0}, 1);     // the second <p>
  const xml_anchor end = base.xml_anchor_at(path{0, 1, 0}, 9);
  ASSERT_FALSE(w.end);
  ASSERT_TRUE(end.end);
  document a = fork(base, 2), b = fork(base, 3), c = fork(base, 4);
  std::vector<std::string> changes;
  changes.push_back(a.encode_change(a.replace_xml_range(path{0, 1}, 0, 1, "two new words").second));  // typing before "w"
  changes.push_back(b.encode_change(b.replace_xml_range(path{0}, 0, 1, "").second));                // removes the first <p>
  changes.push_back(c.encode_change(c.replace_xml_range(path{0}, 0, 0, "<h1>t</h1>").second));      // a heading above
  in_every_order(base, changes, [&](const document& d) {
    EXPECT_EQ(d.xml(), "<doc><h1>t</h1><p>two new words</p><p>three</p></doc>");
    const auto pw = d.xml_resolve(w);
    ASSERT_TRUE(pw);
    EXPECT_EQ(*pw, (xml_position{{0, 1, 0}, 8}));
    EXPECT_EQ(d.xml_anchor_at(pw->path, pw->offset), w);
    const auto pp = d.xml_resolve(para);
    ASSERT_TRUE(pp);
    EXPECT_EQ(*pp, (xml_position{{0}, 1}));
    EXPECT_EQ(d.xml_resolve(end), std::optional<xml_position>(xml_position{{0, 1, 0}, 13}));
  });
}

// ---- xml: range edits ------------------------------------------------------------------------------

TEST(XmlRange, ReplacingARangeGivesWhatAWholeReplaceGives) {
  struct edit {
    const char* before;
    path at;
    std::size_t from, to;
    const char* nodes;
    const char* after;
  };
  const std::vector<edit> edits = {
      {"<p>hello world</p>", {0}, 0, 1, "hello brave world", "<p>hello brave world</p>"},
      {"<p>a</p><p>b</p><p>c</p>", {}, 1, 2, "<p>b1</p><p>b2</p>", "<p>a</p><p>b1</p><p>b2</p><p>c</p>"},
      {"<p>a</p><p>b</p>", {}, 0, 2, "<p>ab</p>", "<p>ab</p>"},
      {"<p>a</p><p>b</p>", {}, 2, 2, "<ul><li>x</li></ul>", "<p>a</p><p>b</p><ul><li>x</li></ul>"},
      {"<ul><li>x</li><li>y</li></ul>", {0}, 1, 2, "<li class=\"k\">y<b>!</b></li>", "<ul><li>x</li><li class=\"k\">y<b>!</b></li></ul>"},
      {"<p>bold <b>this</b> now</p>", {0}, 0, 3, "bold this now", "<p>bold this now</p>"},
      {"<p>x</p>", {}, 0, 1, "", ""},
  };
  for (const edit& e : edits) {
    document d(record_type::xml, 1);
    ASSERT_TRUE(d.replace_xml(e.before).first);
    document whole = fork(d, 2), peer = fork(d, 3);
    const auto [pr, change] = d.replace_xml_range(e.at, e.from, e.to, e.nodes);
    ASSERT_TRUE(pr) << pr.description();
    EXPECT_EQ(d.xml(), e.after) << e.before;
    const auto [wpr, wchange] = whole.replace_xml(e.after);
    ASSERT_TRUE(wpr);
    EXPECT_EQ(change.count, wchange.count) << e.before;  // the same script, made on the range alone
    d.check_invariants();
    ASSERT_TRUE(peer.apply(d.encode_change(change)));
    EXPECT_EQ(peer.xml(), folio::testing::round_trip(d, 4).xml());
  }
}

TEST(XmlRange, RefusalsChangeNothing) {
  document d(record_type::xml, 1);
  ASSERT_TRUE(d.replace_xml("<p>ab</p>").first);
  const auto v = d.version();
  EXPECT_FALSE(d.replace_xml_range(path{0}, 0, 1, "<b>").first);
  std::string deep;
  for (std::size_t i = 0; i < folio::markup::max_depth; ++i) deep += "<i>";
  for (std::size_t i = 0; i < folio::markup::max_depth; ++i) deep += "</i>";
  EXPECT_TRUE(d.replace_xml_range(path{}, 0, 1, deep).first) << "the fragment takes max_depth";
  document e(record_type::xml, 1);
  ASSERT_TRUE(e.replace_xml("<p>ab</p>").first);
  EXPECT_THROW(e.replace_xml_range(path{0}, 0, 1, deep), folio::error) << "one level below it does not";
  EXPECT_EQ(e.xml(), "<p>ab</p>");
  EXPECT_EQ(d.version().get(1) > v.get(1), true);
}

// Concurrent range edits and whole replaces on peers converge in every delivery order.
TEST(XmlRange, ConcurrentRangeEditsConvergeInEveryOrder) {
  document base(record_type::xml, 1);
  ASSERT_TRUE(base.replace_xml("<doc><p>alpha</p><p>beta</p><ul><li>one</li><li>two</li></ul></doc>").first);
  document a = fork(base, 2), b = fork(base, 3), c = fork(base, 4);
  std::vector<std::string> changes;
  changes.push_back(a.encode_change(a.replace_xml_range(path{0, 0}, 0, 1, "alp<b>ha</b>").second));  // bold in p 1
  changes.push_back(b.encode_change(b.replace_xml_range(path{0}, 1, 2, "<p>be</p><p>ta</p>").second));  // split p 2
  changes.push_back(c.encode_change(c.replace_xml("<doc><p>alpha!</p><p>beta</p><ul><li>two</li></ul></doc>").second));
  std::optional<std::string> first;
  in_every_order(base, changes, [&](const document& d) {
    if (!first) first = d.xml();
    EXPECT_EQ(d.xml(), *first);
  });
  // C's "!" follows the "a" that A's bold removed from the text node: it stays in that text, before <b>.
  EXPECT_EQ(*first, "<doc><p>alp!<b>ha</b></p><p>be</p><p>ta</p><ul><li>two</li></ul></doc>");
}

// A keystroke's range edit in a large record is one op, and the paragraph reads back edited.
TEST(XmlRange, AKeystrokeInALargeRecordIsSmall) {
  const std::string big = folio::testing::xml_document(1 << 20);
  document d(record_type::xml, 1);
  ASSERT_TRUE(d.replace_xml(big).first);
  const path para{0, 500};
  const std::string text = d.xml_markup(path{0, 500, 0});
  ASSERT_EQ(text.substr(0, 4), "word");
  const auto [pr, change] = d.replace_xml_range(para, 0, 1, "X" + text);
  ASSERT_TRUE(pr);
  EXPECT_EQ(change.count, 1u);
  EXPECT_EQ(d.xml_markup(path{0, 500, 0}), "X" + text);
  folio::markup::fragment f;
  ASSERT_TRUE(folio::markup::parse(big, f));
  EXPECT_NE(d.xml(), folio::markup::serialize(f));
}

// Seeded random range replaces on random trees: each gives the value the splice of the parsed nodes
// into the tree's fragment gives, a peer receiving its ops gets the same, and every anchor taken
// before whose item is still live resolves to a place whose anchor is itself.
TEST(XmlRange, SeededRandomRangeReplacesMatchTheSpliceAndKeepAnchors) {
  std::mt19937 rng(53);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const auto random_nodes = [&](int depth) {
    std::string out;
    std::vector<std::string> words{"a", "bc", "def", "é", "x y"};
    const std::function<void(int)> gen = [&](int d) {
      const std::size_t n = pick(4);
      for (std::size_t i = 0; i < n; ++i) {
        if (d == 0 || pick(2)) {
          out += words[pick(words.size())];
        } else {
          const std::string tag = std::vector<std::string>{"p", "b", "i", "li"}[pick(4)];
          out += "<" + tag + (pick(3) == 0 ? " k=\"" + std::to_string(pick(3)) + "\"" : "") + ">";
          gen(d - 1);
          out += "</" + tag + ">";
        }
      }
    };
    gen(depth);
    return out;
  };
  for (int round = 0; round < 60; ++round) {
    document d(record_type::xml, 1);
    ASSERT_TRUE(d.replace_xml("<doc>" + random_nodes(3) + "</doc>").first);
    document peer = fork(d, 2);
    for (int step = 0; step < 8; ++step) {
      // A random element (or the fragment).
      path at;
      for (std::size_t k = pick(4); k > 0; --k) {
        const auto kids = d.xml_child_ids(at);
        std::vector<std::size_t> elements;
        for (std::size_t i = 0; i < kids.size(); ++i) {
          path q = at;
          q.push_back(i);
          if (d.xml_markup(q).front() == '<') elements.push_back(i);
        }
        if (elements.empty()) break;
        at.push_back(elements[pick(elements.size())]);
      }
      // Anchors on every child and code point of the element's children, before.
      std::vector<xml_anchor> anchors;
      const std::size_t n = d.xml_child_ids(at).size();
      for (std::size_t i = 0; i <= n; ++i) anchors.push_back(d.xml_anchor_at(at, i));
      for (std::size_t i = 0; i < n; ++i) {
        path q = at;
        q.push_back(i);
        if (d.xml_markup(q).front() == '<') continue;
        const std::string text = d.xml_markup(q);  // no character here needs escaping
        const std::size_t cps = static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
        for (std::size_t c : {std::size_t(0), cps / 2, cps - 1, cps}) anchors.push_back(d.xml_anchor_at(q, c));
      }
      const std::size_t from = pick(n + 1), to = from + pick(n - from + 1);
      const std::string nodes = random_nodes(2);
      // The expected value: the nodes spliced into the tree's fragment.
      folio::markup::fragment f = d.xml_fragment(), parsed;
      ASSERT_TRUE(folio::markup::parse(nodes, parsed));
      std::vector<folio::markup::node>* list = &f;
      for (std::size_t i : at) list = &(*list)[i].children;
      list->erase(list->begin() + static_cast<std::ptrdiff_t>(from), list->begin() + static_cast<std::ptrdiff_t>(to));
      list->insert(list->begin() + static_cast<std::ptrdiff_t>(from), parsed.begin(), parsed.end());
      const auto [pr, change] = d.replace_xml_range(at, from, to, nodes);
      ASSERT_TRUE(pr) << pr.description();
      ASSERT_EQ(d.xml(), folio::markup::serialize(f)) << "round " << round << " step " << step << ": " << nodes;
      d.check_invariants();
      ASSERT_TRUE(peer.apply(d.encode_change(change)));
      ASSERT_EQ(peer.xml(), d.xml());
      for (const xml_anchor& a : anchors) {
        const auto p = d.xml_resolve(a);
        if (!p) {  // its node was removed
          EXPECT_FALSE(a.end && d.xml_path_of(a.item)) << "the end of a visible node resolves";
          continue;
        }
        if (d.xml_anchor_at(p->path, p->offset) == a) continue;  // the item itself, or the node's end
        // Otherwise the item was removed, and the offset is where it was (a node: it has no path).
        EXPECT_FALSE(a.end) << "an end resolves to a place that is not that end";
        EXPECT_FALSE(d.xml_path_of(a.item)) << "a live node resolves elsewhere";
      }
    }
  }
}

// Concurrent text nodes typed into one empty element are two children that markup writes as one text;
// a replace of the element's whole children range makes them one node again.
TEST(XmlRange, AdjacentTextNodesCountAsChildrenAndMergeOnTheNextRangeReplace) {
  document base(record_type::xml, 1);
  ASSERT_TRUE(base.replace_xml("<p/>").first);
  document a = fork(base, 2), b = fork(base, 3);
  const std::string ca = a.encode_change(a.replace_xml_range(path{0}, 0, 0, "ab").second);
  const std::string cb = b.encode_change(b.replace_xml_range(path{0}, 0, 0, "cd").second);
  ASSERT_TRUE(a.apply(cb));
  ASSERT_TRUE(b.apply(ca));
  EXPECT_EQ(a.xml(), b.xml());
  EXPECT_EQ(a.xml_child_ids(path{0}).size(), 2u);
  const std::string text = a.xml_markup(path{0}).substr(3, 4);
  EXPECT_EQ(a.xml_markup(path{0, 0}) + a.xml_markup(path{0, 1}), text);
  const auto [pr, change] = a.replace_xml_range(path{0}, 0, 2, text + "!");
  ASSERT_TRUE(pr);
  EXPECT_EQ(a.xml_child_ids(path{0}).size(), 1u);
  EXPECT_EQ(a.xml(), "<p>" + text + "!</p>");
}

// ---- xml: the change report ----------------------------------------------------------------------

TEST(XmlChanged, ListsExactlyTheVisibleElementsIntegratedOpsTouched) {
  document base(record_type::xml, 1);
  ASSERT_TRUE(base.replace_xml("<doc><p>one</p><p a=\"1\">two</p><sec><p>in</p></sec><p>four</p></doc>").first);
  const auto top = base.xml_child_ids(path{0});
  const op_id doc = base.xml_child_ids({})[0], p1 = top[0], p2 = top[1], sec = top[2];
  document a = fork(base, 2), b = fork(base, 3);
  const std::string typing = a.encode_change(a.replace_xml_range(path{0, 0}, 0, 1, "one!").second);    // text of p1
  const std::string attr = a.encode_change(a.replace_xml("<doc><p>one!</p><p a=\"2\">two</p><sec><p>in</p></sec><p>four</p></doc>").second);
  const std::string under = b.encode_change(b.replace_xml_range(path{0, 2, 0}, 0, 1, "in, edited").second);  // in sec's p
  const std::string drop = b.encode_change(b.replace_xml_range(path{0}, 2, 3, "").second);                  // removes sec

  document d = fork(base, 9);
  d.record_xml_changes(true);
  ASSERT_TRUE(d.apply(typing));
  EXPECT_EQ(d.xml_changed(), std::vector<op_id>{p1});
  ASSERT_TRUE(d.apply(attr));
  EXPECT_EQ(d.xml_changed(), std::vector<op_id>{p2});
  EXPECT_TRUE(d.xml_changed().empty()) << "a report is taken once";
  ASSERT_TRUE(d.apply(b.encode_since(base.version())));  // under sec, then sec removed: sec's <p> is not visible
  EXPECT_EQ(d.xml_changed(), std::vector<op_id>{doc});
  ASSERT_TRUE(d.apply(typing));  // a duplicate integrates nothing
  EXPECT_TRUE(d.xml_changed().empty());
  // A new element: its list's element and the element itself (attributes, text) are reported; the
  // fragment is "document_start".
  document e = fork(d, 10);
  const std::string added = e.encode_change(e.replace_xml_range({}, 1, 1, "<q k=\"v\">x</q>").second);
  ASSERT_TRUE(d.apply(added));
  const auto changed = d.xml_changed();
  const op_id q = d.xml_child_ids({})[1];
  std::vector<op_id> want{folio::document_start, q};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(changed, want);
  d.record_xml_changes(false);
  ASSERT_TRUE(d.apply(a.encode_change(a.replace_xml_range(path{0, 0}, 0, 1, "one!!").second)));
  EXPECT_TRUE(d.xml_changed().empty()) << "not recording";
  (void)sec;
}

}  // namespace
