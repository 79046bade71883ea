// Convergence: replicas editing concurrently and exchanging batches in every order end identical.
//  * Exhaustive: every permutation of a set of concurrent batches, duplicates included.
//  * Seeded random scenarios (2-5 replicas, runs and single elements, random delivery order with
//    duplicates and delays, everything through the wire encoding). The fast tier runs in ctest; set
//    FOLIO_CONVERGENCE_SCENARIOS for the long tier. A failure prints its seed; rerun one scenario
//    with FOLIO_CONVERGENCE_SEED.
//  * Thousands of concurrent siblings (the RGA scan skips B-tree subtrees by their smallest key) and
//    removes of ranges spanning many runs (passed by known deleted stretches), delivered in hostile,
//    causal and random orders, against the order and contents the model defines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <folio/folio.hpp>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace {

using text_batch = folio::op_batch<char32_t>;

std::size_t env_or(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// A base document shared by every replica, then `per_replica` concurrent local changes on each.
std::vector<text_batch> concurrent_batches(std::size_t replicas, std::size_t per_replica, std::uint64_t seed, text_batch& base) {
  folio::text origin(100);
  origin.insert_utf8(0, "0123456789");
  origin.erase(4, 2);
  base = origin.ops_since({});
  std::mt19937_64 rng(seed);
  std::vector<text_batch> out;
  for (std::size_t r = 0; r < replicas; ++r) {
    folio::text t(r + 1);
    t.apply(base);
    for (std::size_t k = 0; k < per_replica; ++k) {
      folio::local_change c;
      if (t.size() > 0 && rng() % 3 == 0) {
        const std::size_t pos = rng() % t.size();
        c = t.erase(pos, 1 + rng() % std::min<std::size_t>(3, t.size() - pos));
      } else {
        std::u32string s(1 + rng() % 3, char32_t(U'a' + r));
        c = t.insert(rng() % (t.size() + 1), s);
      }
      out.push_back(t.ops(c));
    }
  }
  return out;
}

TEST(Convergence, EveryDeliveryOrderOfSixBatchesGivesOneResult) {
  text_batch base;
  const auto batches = concurrent_batches(3, 2, 11, base);
  std::vector<std::size_t> order(batches.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::u32string expected;
  folio::version_vector expected_version;
  std::size_t orders = 0;
  do {
    folio::text t(99);
    t.apply(base);
    for (std::size_t i : order) ASSERT_TRUE(t.apply(batches[i]));
    ASSERT_EQ(t.pending(), 0u);
    if (orders == 0) expected = t.to_u32string(), expected_version = t.version();
    ASSERT_EQ(t.to_u32string(), expected) << "order #" << orders;
    ASSERT_EQ(t.version(), expected_version);
    if (orders % 60 == 0) t.check_invariants();
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 720u);
}

TEST(Convergence, EveryOrderWithDuplicatesAndTheBaseLastGivesOneResult) {
  text_batch base;
  const auto batches = concurrent_batches(4, 1, 5, base);
  std::vector<text_batch> msgs = batches;
  msgs.push_back(base);        // the base itself arrives late: everything waits for it
  msgs.push_back(batches[0]);  // and one batch twice
  std::vector<std::size_t> order(msgs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::u32string expected;
  std::size_t orders = 0;
  do {
    folio::text t(99);
    for (std::size_t i : order) ASSERT_TRUE(t.apply(msgs[i]));
    ASSERT_EQ(t.pending(), 0u);
    if (orders == 0) expected = t.to_u32string();
    ASSERT_EQ(t.to_u32string(), expected) << "order #" << orders;
    if (orders % 100 == 0) t.check_invariants();
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 720u);
}

struct message {
  std::size_t to;
  std::string bytes;  // encoded batch
};

// Random values of each sequence type: runs of letters for text, small JSON values for arrays.
std::vector<char32_t> random_values(folio::text*, std::mt19937_64& rng, std::size_t n) {
  std::vector<char32_t> v(n);
  for (char32_t& c : v) c = char32_t(U'a' + rng() % 26);
  return v;
}
std::vector<std::string> random_values(folio::array*, std::mt19937_64& rng, std::size_t n) {
  std::vector<std::string> v(n);
  for (std::string& s : v) s = rng() % 2 ? std::to_string(rng() % 100) : R"({"k":")" + std::string(1, char('a' + rng() % 26)) + R"("})";
  return v;
}

// Runs one random scenario; returns "" on success or a description of the divergence.
template <class Doc>
std::string run_scenario(std::uint64_t seed, std::size_t steps) {
  using batch = folio::op_batch<typename Doc::value_type>;
  std::mt19937_64 rng(seed);
  const std::size_t n = 2 + rng() % 4;
  std::vector<Doc> docs;
  for (std::size_t r = 0; r < n; ++r) docs.emplace_back(folio::replica_id(r + 1));
  std::vector<message> inbox;
  auto deliver = [&](std::size_t k) -> std::string {
    const message m = inbox[k];
    if (rng() % 5 != 0) inbox.erase(inbox.begin() + std::ptrdiff_t(k));  // else: delivered again later
    batch b;
    const auto d = folio::decode_batch(m.bytes, b);
    if (!d) return "decode failed: " + d.description();
    const auto r = docs[m.to].apply(b);
    if (!r) return "apply failed: " + r.message;
    docs[m.to].check_invariants();
    return "";
  };
  for (std::size_t step = 0; step < steps; ++step) {
    if (!inbox.empty() && rng() % 2 == 0) {
      if (auto e = deliver(rng() % inbox.size()); !e.empty()) return e;
      continue;
    }
    const std::size_t r = rng() % n;
    Doc& t = docs[r];
    folio::local_change c;
    const auto kind = rng() % 10;
    if (t.size() > 0 && kind < 4) {
      const std::size_t pos = rng() % t.size();
      const std::size_t len = kind == 0 ? std::min<std::size_t>(t.size() - pos, 1 + rng() % 8) : 1;
      c = t.erase(pos, len);
    } else {
      c = t.insert(rng() % (t.size() + 1), random_values(static_cast<Doc*>(nullptr), rng, kind < 7 ? 1 : 1 + rng() % 8));
    }
    const std::string bytes = folio::encode_batch(t.ops(c));
    for (std::size_t to = 0; to < n; ++to)
      if (to != r && rng() % 8 != 0) inbox.push_back({to, bytes});  // some are lost: a sync repairs it
  }
  while (!inbox.empty())
    if (auto e = deliver(rng() % inbox.size()); !e.empty()) return e;
  // Anti-entropy: everyone syncs with everyone, in a random order.
  for (int round = 0; round < 2; ++round)
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b)
        if (a != b && !docs[b].apply(docs[a].ops_since(docs[b].version()))) return "sync failed";
  for (std::size_t r = 0; r < n; ++r) {
    docs[r].check_invariants();
    if (docs[r].pending() != 0) return "replica " + std::to_string(r) + " still has pending ops";
    if (docs[r].values() != docs[0].values()) return "replica " + std::to_string(r) + " diverged";
    if (docs[r].version() != docs[0].version()) return "versions differ";
    // A replica rebuilt from the encoding is the same document.
    Doc copy(50);
    if (!Doc::decode(docs[r].encode(), 50, copy) || copy.values() != docs[0].values()) return "decode differs";
  }
  return "";
}

template <class Doc>
void seeded_scenarios(std::size_t default_count) {
  const std::size_t scenarios = env_or("FOLIO_CONVERGENCE_SCENARIOS", default_count);
  const std::size_t first = env_or("FOLIO_CONVERGENCE_SEED", 1);
  const std::size_t count = std::getenv("FOLIO_CONVERGENCE_SEED") ? 1 : scenarios;
  for (std::size_t seed = first; seed < first + count; ++seed) {
    const std::string e = run_scenario<Doc>(seed, 150);
    ASSERT_EQ(e, "") << "seed " << seed << " (rerun: FOLIO_CONVERGENCE_SEED=" << seed << ")";
  }
}

TEST(Convergence, SeededRandomTextScenariosConverge) { seeded_scenarios<folio::text>(150); }
TEST(Convergence, SeededRandomArrayScenariosConverge) { seeded_scenarios<folio::array>(60); }

// ---- many concurrent siblings -------------------------------------------------------------------

using folio::op;
using folio::op_id;
using folio::op_kind;

// One single-unit insert of the sibling tests, each by a replica of its own (seq 0).
struct sibling {
  op_id origin;
  std::uint32_t lamport;
  folio::replica_id replica;
};

// Item indices in document order as the model defines it, independently of the engine: the
// pre-order walk of the origin tree, siblings by descending key (lamport, replica, seq).
std::vector<std::size_t> tree_order(const std::vector<sibling>& items) {
  std::map<op_id, std::vector<std::size_t>> kids;
  for (std::size_t i = 0; i < items.size(); ++i) kids[items[i].origin].push_back(i);
  for (auto& [origin, v] : kids)
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(items[a].lamport, items[a].replica) > std::tie(items[b].lamport, items[b].replica);
    });
  std::vector<std::size_t> out;
  std::vector<std::size_t> stack;
  auto push_kids = [&](op_id of) {
    auto it = kids.find(of);
    if (it != kids.end()) stack.insert(stack.end(), it->second.rbegin(), it->second.rend());
  };
  push_kids(folio::document_start);
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    out.push_back(i);
    push_kids({items[i].replica, 0});
  }
  return out;
}

char32_t value_of(folio::text*, std::size_t i) { return char32_t(0x4E00 + i); }
std::string value_of(folio::array*, std::size_t i) { return std::to_string(i); }

// n inserts, most at the document start with Lamport values that repeat (ties go to the larger
// replica), the others after an earlier item: thousands of siblings whose subtrees are nested, so
// the tree has several levels and the scan skips subtrees at each.
std::vector<sibling> random_siblings(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<sibling> items;
  for (std::size_t i = 0; i < n; ++i) {
    const folio::replica_id r = 1000 + (rng() % 2 ? i : n + i);  // replica order differs from creation order
    if (i == 0 || rng() % 10 < 7) {
      items.push_back({folio::document_start, std::uint32_t(1 + rng() % (n / 4)), r});
    } else {
      const sibling& o = items[rng() % i];
      items.push_back({{o.replica, 0}, std::uint32_t(o.lamport + 1 + rng() % 3), r});
    }
  }
  return items;
}

template <class Doc>
void siblings_in_every_kind_of_order(std::size_t n) {
  using T = typename Doc::value_type;
  const std::vector<sibling> items = random_siblings(n, 7);
  std::vector<T> expected;
  for (std::size_t i : tree_order(items)) expected.push_back(value_of(static_cast<Doc*>(nullptr), i));
  std::vector<std::size_t> by_lamport(n);
  std::iota(by_lamport.begin(), by_lamport.end(), 0);
  std::stable_sort(by_lamport.begin(), by_lamport.end(), [&](std::size_t a, std::size_t b) { return items[a].lamport > items[b].lamport; });
  std::vector<std::pair<std::string, std::vector<std::size_t>>> orders;
  orders.push_back({"Lamport decreasing (each sibling passes all earlier ones)", by_lamport});
  orders.push_back({"Lamport increasing (causal)", {by_lamport.rbegin(), by_lamport.rend()}});
  for (std::uint64_t seed : {1, 2}) {
    std::vector<std::size_t> shuffled = by_lamport;
    std::mt19937_64 rng(seed);
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    orders.push_back({"shuffled, seed " + std::to_string(seed), shuffled});
  }
  for (const auto& [name, order] : orders) {
    SCOPED_TRACE(name);
    Doc d(1);
    for (std::size_t at = 0; at < order.size(); at += 100) {  // batches of 100 ops
      folio::op_batch<T> b;
      for (std::size_t k = at; k < std::min(order.size(), at + 100); ++k) {
        const sibling& s = items[order[k]];
        b.ops.push_back(op{op_kind::insert, {s.replica, 0}, s.lamport, 1, s.origin, false});
        b.content.push_back(value_of(static_cast<Doc*>(nullptr), order[k]));
      }
      ASSERT_TRUE(d.apply(b));
      if (at % 1000 == 0) d.check_invariants();
    }
    ASSERT_EQ(d.pending(), 0u);
    d.check_invariants();
    EXPECT_EQ(d.values(), expected);
  }
}

TEST(Convergence, ThousandsOfConcurrentSiblingsTakeTheModelsOrderInAnyDeliveryOrderText) { siblings_in_every_kind_of_order<folio::text>(3000); }
TEST(Convergence, ThousandsOfConcurrentSiblingsTakeTheModelsOrderInAnyDeliveryOrderArray) { siblings_in_every_kind_of_order<folio::array>(3000); }

// ---- removes of ranges that span many runs --------------------------------------------------------

op remove_op(folio::replica_id r, std::uint32_t seq, std::uint32_t lamport, std::uint32_t len, op_id first, bool backward = false) {
  return op{op_kind::remove, {r, seq}, lamport, len, first, backward};
}

TEST(Convergence, RemovesOfRangesSpanningManyRunsConvergeInEveryDeliveryOrder) {
  // Replica 1 types "abcdefghijkl" (one op); replica 2 types P after c, Q after f, R after i: four runs.
  text_batch base{{op{op_kind::insert, {1, 0}, 1, 12, folio::document_start, false}, op{op_kind::insert, {2, 0}, 13, 1, {1, 2}, false},
                   op{op_kind::insert, {2, 1}, 14, 1, {1, 5}, false}, op{op_kind::insert, {2, 2}, 15, 1, {1, 8}, false}},
                  {U'a', U'b', U'c', U'd', U'e', U'f', U'g', U'h', U'i', U'j', U'k', U'l', U'P', U'Q', U'R'}};
  const std::vector<text_batch> changes{
      {{remove_op(3, 0, 16, 12, {1, 0})}, {}},                                           // all of replica 1's items
      {{remove_op(4, 0, 16, 8, {1, 10}, true)}, {}},                                     // backward, k down to d
      {{remove_op(5, 0, 16, 3, {1, 4}), remove_op(5, 3, 19, 1, {2, 1})}, {}},           // e f g, then Q
      {{op{op_kind::insert, {6, 0}, 16, 1, {1, 6}, false}}, {U'X'}},                     // X after g, inside the ranges
      {{remove_op(7, 0, 16, 12, {1, 0})}, {}},                                           // the whole range again
      {{remove_op(8, 0, 16, 1, {1, 11}), remove_op(8, 1, 17, 2, {1, 1}, true)}, {}}};  // l, then b a
  std::vector<std::size_t> order(changes.size());
  std::iota(order.begin(), order.end(), 0);
  std::size_t orders = 0;
  do {
    folio::text t(99);
    ASSERT_TRUE(t.apply(base));
    for (std::size_t i : order) {
      ASSERT_TRUE(t.apply(changes[i]));
      if (orders % 30 == 0) t.check_invariants();
    }
    ASSERT_EQ(t.pending(), 0u);
    ASSERT_EQ(t.to_string(), "PXR") << "order #" << orders;
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 720u);
}

// m items of replica 1 split into m runs (an item of replica 2 after each), then hundreds of removes of
// overlapping ranges (forward and backward, many the whole range) and local erases, in random orders.
TEST(Convergence, ManyRemovesOfOverlappingRangesOfManyRunsMatchTheModel) {
  const std::uint32_t m = 400;
  text_batch base;
  base.ops.push_back(op{op_kind::insert, {1, 0}, 1, m, folio::document_start, false});
  for (std::uint32_t k = 0; k < m; ++k) base.content.push_back(char32_t(U'a' + k % 26));
  for (std::uint32_t k = 0; k < m; ++k) {
    base.ops.push_back(op{op_kind::insert, {2, k}, m + 1 + k, 1, {1, k}, false});
    base.content.push_back(char32_t(U'A' + k % 26));
  }
  for (std::uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::vector<text_batch> removes;
    std::set<op_id> removed;
    for (std::uint32_t r = 0; r < 300; ++r) {
      const folio::replica_id author = 1000 + r;
      const folio::replica_id target = rng() % 5 ? 1 : 2;
      std::uint32_t lo = std::uint32_t(rng() % m), hi = lo + 1 + std::uint32_t(rng() % (m - lo));
      if (rng() % 4 == 0) lo = 0, hi = m;
      const bool backward = rng() % 2;
      removes.push_back({{remove_op(author, 0, 2 * m + 1, hi - lo, {target, backward ? hi - 1 : lo}, backward)}, {}});
      for (std::uint32_t s = lo; s < hi; ++s) removed.insert({target, s});
    }
    std::shuffle(removes.begin(), removes.end(), rng);
    folio::text t(99);
    ASSERT_TRUE(t.apply(base));
    for (std::size_t i = 0; i < removes.size(); ++i) {
      const folio::apply_result r = t.apply(removes[i]);
      ASSERT_TRUE(r) << r.message;
      if (i % 50 == 0 && t.size() > 0) {  // a local erase between them (items it deletes are not recorded as stretches)
        const std::size_t pos = rng() % t.size(), n = 1 + rng() % std::min<std::size_t>(t.size() - pos, 5);
        for (const op& o : t.ops(t.erase(pos, n)).ops)
          for (std::uint32_t k = 0; k < o.len; ++k) removed.insert(o.target(k));
        t.check_invariants();
      }
    }
    std::u32string expected;
    for (std::uint32_t k = 0; k < m; ++k) {
      if (!removed.count({1, k})) expected += char32_t(U'a' + k % 26);
      if (!removed.count({2, k})) expected += char32_t(U'A' + k % 26);
    }
    t.check_invariants();
    EXPECT_EQ(t.to_u32string(), expected);
  }
}

}  // namespace
