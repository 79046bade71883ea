// Convergence of map and xml records: every delivery order of a set of concurrent changes (including
// edits inside an element another replica deletes, attribute races and inserts at one place), and
// seeded random scenarios — 2 to 5 replicas editing concurrently, changes delivered out of order,
// duplicated, and through the wire encoding, check_invariants() after every step.
//
// FOLIO_CONVERGENCE_SCENARIOS sets the number of random scenarios per type (default 150);
// FOLIO_CONVERGENCE_SEED picks the first seed (default 1). A failure prints its seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <folio/document.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using folio::document;
using folio::record_type;
namespace markup = folio::markup;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

std::string value_of(const document& d) {
  if (d.type() == record_type::xml) return d.xml();
  std::string s;
  for (const auto& [k, v] : d.map()) s += k + "=" + v + ";";
  return s;
}

// ---- every delivery order -------------------------------------------------------------------------

// Delivers every permutation of `changes` to a replica holding `base`; all must end in one state.
std::string deliver_in_every_order(const document& base, const std::vector<std::string>& changes) {
  std::vector<std::size_t> order(changes.size());
  std::iota(order.begin(), order.end(), 0);
  std::optional<std::string> first;
  std::size_t orders = 0;
  do {
    std::optional<document> d;
    EXPECT_TRUE(document::decode(base.encode(), 99, d));
    for (std::size_t i : order) {
      const folio::apply_result r = d->apply(changes[i]);
      EXPECT_TRUE(r) << r.message;
      d->check_invariants();
    }
    EXPECT_EQ(d->pending(), 0u);
    const std::string v = value_of(*d);
    if (!first) first = v;
    EXPECT_EQ(v, *first) << "order " << orders;
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  return *first;
}

TEST(TreeConvergence, XmlEveryDeliveryOrderOfConcurrentChanges) {
  document base(record_type::xml, 1);
  ASSERT_TRUE(base.replace_xml("<doc><sec id=\"s\"><p>inside</p></sec><p>after</p></doc>").first);
  auto fork = [&](folio::replica_id r) {
    std::optional<document> d;
    EXPECT_TRUE(document::decode(base.encode(), r, d));
    return std::move(*d);
  };
  document a = fork(2), b = fork(3), c = fork(4), d = fork(5);
  std::vector<std::string> changes;
  auto change = [&](document& x, const char* xml) {
    const auto [pr, ch] = x.replace_xml(xml);
    EXPECT_TRUE(pr) << pr.description();
    EXPECT_GT(ch.count, 0u);
    changes.push_back(x.encode_change(ch));
  };
  change(a, "<doc><p>after</p></doc>");                                                  // A deletes <sec>
  change(b, "<doc><sec id=\"s\"><p>inside, edited</p></sec><p>after</p></doc>");         // B edits inside it ...
  change(b, "<doc><sec id=\"s\"><p>inside, edited</p><p>new</p></sec><p>after</p></doc>");  // ... twice (depends on B1)
  change(c, "<doc><sec id=\"t\"><p>inside</p></sec><p>after</p><p>c</p></doc>");         // C: attribute race, insert at the end
  change(d, "<doc><sec id=\"u\"><p>inside</p></sec><p>after</p><p>d</p></doc>");         // D: the same attribute, same place
  const std::string result = deliver_in_every_order(base, changes);
  // <sec> is gone with everything done inside it; both end inserts survive, in one order.
  EXPECT_TRUE(result == "<doc><p>after</p><p>d</p><p>c</p></doc>" || result == "<doc><p>after</p><p>c</p><p>d</p></doc>") << result;
}

TEST(TreeConvergence, XmlAttributeRaceKeepsTheHighestId) {
  document base(record_type::xml, 1);
  base.replace_xml("<p/>");
  std::optional<document> a, b;
  ASSERT_TRUE(document::decode(base.encode(), 2, a));
  ASSERT_TRUE(document::decode(base.encode(), 3, b));
  const std::string ca = a->encode_change(a->replace_xml("<p k=\"from 2\"/>").second);
  const std::string cb = b->encode_change(b->replace_xml("<p k=\"from 3\"/>").second);
  // Equal Lamport values: replica 3's set wins, whatever the order.
  EXPECT_EQ(deliver_in_every_order(base, {ca, cb}), "<p k=\"from 3\"/>");
}

TEST(TreeConvergence, MapEveryDeliveryOrderOfConcurrentChanges) {
  document base(record_type::map, 1);
  base.replace_map({{"k", "0"}, {"j", "0"}});
  std::optional<document> a, b, c;
  ASSERT_TRUE(document::decode(base.encode(), 2, a));
  ASSERT_TRUE(document::decode(base.encode(), 3, b));
  ASSERT_TRUE(document::decode(base.encode(), 4, c));
  std::vector<std::string> changes;
  changes.push_back(a->encode_change(a->remove("k")));            // A removes k ...
  changes.push_back(b->encode_change(b->set("k", "\"b\"")));      // ... while B sets it: add-wins
  changes.push_back(b->encode_change(b->set("j", "1")));          // B then sets j ...
  changes.push_back(c->encode_change(c->set("j", "2")));          // ... concurrently with C
  changes.push_back(c->encode_change(c->replace_map({{"j", "2"}, {"n", "null"}})));  // C removes k (saw only k=0)
  const std::string result = deliver_in_every_order(base, changes);
  // j: B's set has the higher id — Lamport 4 (B had made one more op) beats C's 3, though C's replica is larger.
  EXPECT_EQ(result, "j=1;k=\"b\";n=null;");
}

// ---- hostile shapes: many siblings, preds naming other ops -------------------------------------------

using folio::op_id;
using folio::detail::tree_op;
using folio::detail::tree_op_kind;

std::string batch_bytes(record_type t, const std::vector<tree_op>& ops) {
  std::string out;
  folio::detail::put_header(out, folio::detail::kind_batch, t);
  folio::detail::put_tree_ops(out, t == record_type::map ? folio::detail::tree_shape::map : folio::detail::tree_shape::xml, ops);
  return out;
}

// Hundreds of elements inserted at the start of the root, each by a replica of its own with Lamport
// values that repeat (so the B-tree of the children sequence has several levels): concurrent siblings
// in descending (lamport, replica) order, whether they arrive newest or oldest first or shuffled.
TEST(TreeConvergence, XmlManySiblingElementsAtOnePlaceTakeOneOrder) {
  const std::size_t n = 800;
  std::mt19937_64 rng(3);
  std::vector<tree_op> ops;
  for (std::size_t i = 0; i < n; ++i) {
    tree_op o;
    o.id = {1000 + (i * 7919) % n, 0}, o.lamport = std::uint32_t(1 + rng() % 200), o.ref = folio::document_start;
    o.nodes = {"e" + std::to_string(i)};
    ops.push_back(o);
  }
  std::vector<tree_op> expected = ops;
  std::sort(expected.begin(), expected.end(), [](const tree_op& a, const tree_op& b) { return std::tie(a.lamport, a.id) > std::tie(b.lamport, b.id); });
  markup::fragment f;
  for (const tree_op& o : expected) f.push_back(markup::node::make_element(o.nodes[0]));
  std::vector<std::vector<tree_op>> orders{expected, {expected.rbegin(), expected.rend()}, ops};
  for (const auto& order : orders) {
    document d(record_type::xml, 1);
    const folio::apply_result r = d.apply(batch_bytes(record_type::xml, order));
    ASSERT_TRUE(r) << r.message;
    d.check_invariants();
    EXPECT_EQ(d.xml(), markup::serialize(f));
  }
}

// A set's preds are the ids of the entries its author saw; one naming another key's entry, or an entry
// removed already, removes nothing, in every delivery order.
TEST(TreeConvergence, MapPredsNamingOtherOpsRemoveNothing) {
  auto op = [](tree_op_kind kind, folio::replica_id r, std::uint32_t lamport, std::string key, std::string value, std::vector<op_id> preds) {
    tree_op o;
    o.kind = kind, o.id = {r, 0}, o.lamport = lamport, o.key = std::move(key), o.value = std::move(value), o.preds = std::move(preds);
    return o;
  };
  const std::vector<std::string> changes{
      batch_bytes(record_type::map, {op(tree_op_kind::set, 2, 1, "k", "\"a\"", {})}),
      batch_bytes(record_type::map, {op(tree_op_kind::set, 3, 1, "j", "\"b\"", {})}),
      batch_bytes(record_type::map, {op(tree_op_kind::set, 4, 2, "k", "\"c\"", {{2, 0}, {3, 0}})}),  // saw k=a and j=b
      batch_bytes(record_type::map, {op(tree_op_kind::unset, 5, 2, "k", "", {{2, 0}})}),              // removes k=a again
      batch_bytes(record_type::map, {op(tree_op_kind::set, 6, 1, "k", "\"e\"", {})})};               // concurrent with all
  EXPECT_EQ(deliver_in_every_order(document(record_type::map, 1), changes), "j=\"b\";k=\"c\";");
}

// ---- seeded random scenarios ----------------------------------------------------------------------

/// A random edit of a fragment: insert an element or a text node, remove a node, set or remove an
/// attribute, insert or remove characters in a text node — somewhere in the tree.
std::string mutate(const std::string& xml, std::mt19937_64& rng) {
  markup::fragment f;
  if (!markup::parse(xml, f)) throw std::runtime_error("replica produced unparsable XML: " + xml);
  std::vector<std::pair<std::vector<markup::node>*, int>> lists{{&f, 0}};
  for (std::size_t i = 0; i < lists.size(); ++i)
    for (markup::node& n : *lists[i].first)
      if (n.type == markup::node::kind::element) lists.push_back({&n.children, lists[i].second + 1});
  auto [list, depth] = lists[rng() % lists.size()];
  static const char* const tags[] = {"p", "b", "li", "w:r"};
  static const char* const names[] = {"a", "b", "id"};
  static const char* const words[] = {"x", "yz", "é", "&<>\"", "😀", " "};
  const std::size_t pos = list->empty() ? 0 : rng() % list->size();
  switch (rng() % 6) {
    case 0:
      if (list->size() < 6 && depth < 5) {
        markup::node e = markup::node::make_element(tags[rng() % 4]);
        if (rng() % 2) e.attributes.push_back({names[rng() % 3], words[rng() % 6]});
        if (rng() % 2) e.children.push_back(markup::node::make_text(words[rng() % 6]));
        list->insert(list->begin() + std::ptrdiff_t(rng() % (list->size() + 1)), std::move(e));
      }
      break;
    case 1:
      if (list->size() < 6) list->insert(list->begin() + std::ptrdiff_t(rng() % (list->size() + 1)), markup::node::make_text(words[rng() % 6]));
      break;
    case 2:
      if (!list->empty()) list->erase(list->begin() + std::ptrdiff_t(pos));
      break;
    default:
      if (list->empty()) break;
      markup::node& n = (*list)[pos];
      if (n.type == markup::node::kind::element) {
        const std::string name = names[rng() % 3];
        std::erase_if(n.attributes, [&](const markup::attribute& a) { return a.name == name; });
        if (rng() % 3) n.attributes.push_back({name, words[rng() % 6]});
        std::sort(n.attributes.begin(), n.attributes.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
      } else {
        std::u32string cps;
        folio::decode_utf8(n.text, cps);
        if (!cps.empty() && rng() % 2) {
          const std::size_t at = rng() % cps.size();
          cps.erase(at, 1 + rng() % 3);
        } else {
          std::u32string w;
          folio::decode_utf8(words[rng() % 6], w);
          cps.insert(cps.empty() ? 0 : rng() % (cps.size() + 1), w);
        }
        n.text.clear();
        for (char32_t c : cps) folio::append_utf8(n.text, c);
      }
  }
  return markup::serialize(f);
}

folio::local_change random_edit(document& d, std::mt19937_64& rng) {
  if (d.type() == record_type::xml) {
    const auto [pr, ch] = d.replace_xml(mutate(d.xml(), rng));
    if (!pr) throw std::runtime_error("mutation produced bad XML: " + pr.description());
    return ch;
  }
  const std::string key(1, char('a' + rng() % 4));
  if (rng() % 4 == 0) return d.remove(key);
  if (rng() % 5 == 0) {  // replace the whole value
    std::map<std::string, std::string> v = d.map();
    v.erase(std::string(1, char('a' + rng() % 4)));
    v[key] = std::to_string(rng() % 10);
    return d.replace_map(v);
  }
  return d.set(key, std::to_string(rng() % 10));
}

void random_scenario(record_type type, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t n = 2 + rng() % 4;
  std::vector<document> reps;
  for (std::size_t r = 0; r < n; ++r) reps.emplace_back(type, r + 1);
  std::vector<std::vector<std::string>> inbox(n);
  for (int step = 0; step < 60; ++step) {
    const std::size_t r = rng() % n;
    const auto what = rng() % 10;
    if (what < 4 && !inbox[r].empty()) {  // deliver one waiting change, in any order; sometimes keep it (duplicate)
      const std::size_t k = rng() % inbox[r].size();
      const folio::apply_result res = reps[r].apply(inbox[r][k]);
      ASSERT_TRUE(res) << res.message;
      if (rng() % 4) inbox[r].erase(inbox[r].begin() + std::ptrdiff_t(k));
    } else if (what == 4) {  // sync with a peer through its version vector
      const std::size_t from = rng() % n;
      ASSERT_TRUE(reps[r].apply(reps[from].encode_since(reps[r].version())));
    } else {
      const folio::local_change ch = random_edit(reps[r], rng);
      if (ch.count == 0) continue;
      const std::string batch = reps[r].encode_change(ch);
      for (std::size_t to = 0; to < n; ++to)
        if (to != r) inbox[to].push_back(batch);
    }
    reps[r].check_invariants();
  }
  for (std::size_t r = 0; r < n; ++r) {  // deliver the rest in a random order
    std::shuffle(inbox[r].begin(), inbox[r].end(), rng);
    for (const std::string& b : inbox[r]) ASSERT_TRUE(reps[r].apply(b));
    reps[r].check_invariants();
    ASSERT_EQ(reps[r].pending(), 0u);
  }
  // Every replica also decodes from another's encoding to the same value.
  std::optional<document> copy;
  ASSERT_TRUE(document::decode(reps[n - 1].encode(), 77, copy));
  copy->check_invariants();
  for (std::size_t r = 0; r < n; ++r) {
    ASSERT_EQ(reps[r].version(), reps[0].version()) << "replica " << r;
    ASSERT_EQ(value_of(reps[r]), value_of(reps[0])) << "replica " << r;
  }
  ASSERT_EQ(value_of(*copy), value_of(reps[0]));
}

/// FOLIO_CONVERGENCE_SCENARIOS random scenarios of `type` (150 by default) from seed FOLIO_CONVERGENCE_SEED (1).
void seeded_random_scenarios(record_type type) {
  const std::uint64_t first = env_or("FOLIO_CONVERGENCE_SEED", 1), count = env_or("FOLIO_CONVERGENCE_SCENARIOS", 150);
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    SCOPED_TRACE(std::string(folio::to_string(type)) + " seed " + std::to_string(seed));
    random_scenario(type, seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(TreeConvergence, SeededRandomMapScenarios) { seeded_random_scenarios(record_type::map); }
TEST(TreeConvergence, SeededRandomXmlScenarios) { seeded_random_scenarios(record_type::xml); }

}  // namespace
