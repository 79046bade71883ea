// Convergence: replicas editing concurrently and exchanging batches in every order end identical.
//  * Exhaustive: every permutation of a set of concurrent batches, duplicates included.
//  * Seeded random scenarios (2-5 replicas, runs and single elements, random delivery order with
//    duplicates and delays, everything through the wire encoding). The fast tier runs in ctest; set
//    FOLIO_CONVERGENCE_SCENARIOS for the long tier. A failure prints its seed; rerun one scenario
//    with FOLIO_CONVERGENCE_SEED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <folio/folio.hpp>
#include <random>

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
    if (orders % 60 == 0) t.check();
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
    if (orders % 100 == 0) t.check();
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
    docs[m.to].check();
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
    docs[r].check();
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

}  // namespace
