// The OR-map object: add-wins, highest id wins, removes only what was observed; replicas that
// integrate the same operations in any causal order end in the same state.
#include <gtest/gtest.h>

#include <algorithm>
#include <folio/detail/tree/or_map.hpp>
#include <random>
#include <set>

namespace {

using folio::item_key;
using folio::detail::or_map;

// The ids of a key's live entries: what a local set or remove observes.
std::vector<item_key> ids(or_map::entry_range es) {
  std::vector<item_key> out;
  for (const auto& [name, value] : es) out.push_back(name.id);
  return out;
}

TEST(OrMap, SetOverwritesWhatItObserved) {
  or_map m;
  m.set("k", {1, 1, 0}, "\"a\"", {});
  m.set("k", {2, 1, 1}, "\"b\"", ids(m.entries("k")));
  EXPECT_EQ(*m.get("k"), "\"b\"");
  EXPECT_EQ(ids(m.entries("k")).size(), 1u);
  m.check_invariants();
}

TEST(OrMap, ConcurrentSetsResolveToTheHighestIdEverywhere) {
  or_map a, b;
  const item_key x{5, 1, 3}, y{5, 2, 0};  // equal Lamport: replica 2 wins
  a.set("k", x, "\"from 1\"", {}), a.set("k", y, "\"from 2\"", {});
  b.set("k", y, "\"from 2\"", {}), b.set("k", x, "\"from 1\"", {});
  EXPECT_EQ(*a.get("k"), "\"from 2\"");
  EXPECT_EQ(a, b);
  EXPECT_EQ(ids(a.entries("k")).size(), 2u);  // both kept until someone overwrites them
}

TEST(OrMap, AConcurrentSetSurvivesARemove) {
  or_map base;
  base.set("k", {1, 1, 0}, "1", {});
  const auto seen = ids(base.entries("k"));
  or_map a = base, b = base;
  a.remove("k", seen);                    // replica A removes what it saw ...
  b.set("k", {2, 2, 0}, "2", seen);       // ... while B sets a new value
  a.set("k", {2, 2, 0}, "2", seen);
  b.remove("k", seen);
  EXPECT_EQ(a, b);
  ASSERT_NE(a.get("k"), nullptr);
  EXPECT_EQ(*a.get("k"), "2");  // add-wins
}

TEST(OrMap, RemovingEverythingObservedDropsTheKey) {
  or_map m;
  m.set("a", {1, 1, 0}, "1", {});
  m.set("b", {2, 1, 1}, "2", {});
  m.remove("a", ids(m.entries("a")));
  EXPECT_EQ(m.get("a"), nullptr);
  EXPECT_EQ(m.size(), 1u);
  m.remove("missing", {});
  m.remove("b", {});  // observed nothing: removes nothing
  EXPECT_EQ(*m.get("b"), "2");
  m.check_invariants();
}

TEST(OrMap, DiffSetsChangedAndNewKeysAndRemovesVanishedOnes) {
  or_map m;
  m.set("a", {1, 1, 0}, "1", {});
  m.set("b", {2, 1, 1}, "2", {});
  m.set("c", {3, 1, 2}, "3", {});
  const auto changes = folio::detail::diff_map(m, {{"a", "1"}, {"b", "20"}, {"d", "4"}});
  using change = std::pair<std::string, std::optional<std::string>>;
  EXPECT_EQ(changes, (std::vector<change>{{"b", "20"}, {"c", std::nullopt}, {"d", "4"}}));
  EXPECT_TRUE(folio::detail::diff_map(m, {{"a", "1"}, {"b", "2"}, {"c", "3"}}).empty());
}

// An operation as a replica makes it: set (value) or remove (nullopt), with the entries it observed.
struct map_op {
  std::string key;
  item_key id;
  std::optional<std::string> value;
  std::vector<item_key> preds;
};

void integrate(or_map& m, const map_op& o) {
  if (o.value) m.set(o.key, o.id, *o.value, o.preds);
  else m.remove(o.key, o.preds);
}

TEST(OrMap, EveryDeliveryOrderOfConcurrentOpsGivesOneState) {
  or_map base;
  base.set("k", {1, 1, 0}, "0", {});
  base.set("j", {2, 1, 1}, "0", {});
  const auto k0 = ids(base.entries("k")), j0 = ids(base.entries("j"));
  const std::vector<map_op> ops{{"k", {3, 2, 0}, "a", k0}, {"k", {3, 3, 0}, std::nullopt, k0}, {"k", {3, 4, 0}, "b", k0},
                                {"j", {3, 2, 1}, std::nullopt, j0}, {"j", {4, 3, 1}, "c", {}}, {"k", {5, 4, 1}, "d", {}}};
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::optional<or_map> first;
  do {
    or_map m = base;
    for (std::size_t i : order) integrate(m, ops[i]);
    m.check_invariants();
    if (!first) first = m;
    ASSERT_EQ(m, *first);
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(*first->get("k"), "d");
  EXPECT_EQ(*first->get("j"), "c");
}

// Seeded: 2-5 replicas set and remove a few keys from their own state; every op reaches every other
// replica in a random order that respects causality (an op waits until the entries it names arrived).
TEST(OrMap, SeededRandomCausalDeliveryConverges) {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::size_t n = 2 + rng() % 4;
    std::vector<or_map> maps(n);
    std::vector<std::set<folio::op_id>> seen(n);  // ops integrated by each replica
    std::vector<std::uint32_t> clock(n, 0), seq(n, 0);
    std::vector<std::vector<map_op>> inbox(n);
    std::vector<map_op> all;
    auto deliver = [&](std::size_t r, const map_op& o) {
      integrate(maps[r], o);
      seen[r].insert({o.id.replica, o.id.seq});
      clock[r] = std::max(clock[r], o.id.lamport);
    };
    auto ready = [&](std::size_t r, const map_op& o) {
      return std::all_of(o.preds.begin(), o.preds.end(), [&](const item_key& p) { return seen[r].count({p.replica, p.seq}) != 0; });
    };
    for (int step = 0; step < 120; ++step) {
      const std::size_t r = rng() % n;
      if (!inbox[r].empty() && rng() % 2) {
        const std::size_t k = rng() % inbox[r].size();
        if (ready(r, inbox[r][k])) deliver(r, inbox[r][k]), inbox[r].erase(inbox[r].begin() + std::ptrdiff_t(k));
        continue;
      }
      map_op o;
      o.key = std::string(1, char('a' + rng() % 3));
      o.id = {++clock[r], folio::replica_id(r + 1), seq[r]++};
      o.preds = ids(maps[r].entries(o.key));
      if (rng() % 3) o.value = std::to_string(rng() % 100);
      deliver(r, o);
      all.push_back(o);
      for (std::size_t to = 0; to < n; ++to)
        if (to != r) inbox[to].push_back(o);
    }
    for (bool progress = true; progress;) {  // drain in random order, respecting causality
      progress = false;
      for (std::size_t r = 0; r < n; ++r) {
        std::shuffle(inbox[r].begin(), inbox[r].end(), rng);
        for (std::size_t k = 0; k < inbox[r].size();)
          if (ready(r, inbox[r][k])) deliver(r, inbox[r][k]), inbox[r].erase(inbox[r].begin() + std::ptrdiff_t(k)), progress = true;
          else ++k;
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      ASSERT_TRUE(inbox[r].empty());
      maps[r].check_invariants();
      ASSERT_EQ(maps[r], maps[0]) << "replica " << r;
    }
  }
}

// Thousands of concurrent sets of one key, then sets that each observed one of them, then a remove
// that observed half of what is left: the live entries are the model's (every set no op observed),
// winner first, whatever the order of the concurrent ones. Preds that are not live entries of the key
// (removed already, or another key's) remove nothing.
TEST(OrMap, ThousandsOfConcurrentSetsOfOneKeyKeepTheModelsEntries) {
  std::mt19937_64 rng(5);
  std::vector<item_key> concurrent;
  std::set<item_key> ids_used;
  while (concurrent.size() < 3000) {
    const item_key id{std::uint32_t(1 + rng() % 500), 1 + rng() % 50, std::uint32_t(rng() % 1000)};
    if (ids_used.insert(id).second) concurrent.push_back(id);
  }
  std::vector<map_op> later;
  std::set<item_key> live(concurrent.begin(), concurrent.end());
  or_map other;
  other.set("j", {9, 9, 9}, "j", {});
  for (std::uint32_t i = 0; i < 1500; ++i) {
    const item_key seen = concurrent[rng() % concurrent.size()];  // some are observed twice
    const item_key id{1000 + i, 100, i};
    later.push_back({"k", id, std::string("v").append(std::to_string(i)), {seen, {9, 9, 9}}});
    live.erase(seen), live.insert(id);
  }
  std::vector<item_key> half;
  for (const item_key& id : live)
    if (rng() % 2) half.push_back(id);
  later.push_back({"k", {5000, 100, 5000}, std::nullopt, half});
  for (const item_key& id : half) live.erase(id);
  std::optional<or_map> first;
  for (bool reversed : {false, true}) {
    or_map m = other;
    for (std::size_t i = 0; i < concurrent.size(); ++i) {
      const item_key& id = concurrent[reversed ? concurrent.size() - 1 - i : i];
      m.set("k", id, std::to_string(id.lamport), {});
    }
    for (const map_op& o : later) integrate(m, o);
    m.check_invariants();
    std::vector<item_key> expected(live.rbegin(), live.rend());
    EXPECT_EQ(ids(m.entries("k")), expected);
    EXPECT_EQ(*m.get("j"), "j");
    if (first) {
      EXPECT_EQ(m, *first);
    }
    first = m;
  }
}

}  // namespace
