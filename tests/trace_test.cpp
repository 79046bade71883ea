// Replays the real editing traces of bench/traces: every sequential trace must give exactly its
// endContent, also after encode -> decode and after merging the whole op log into an empty replica;
// the concurrent trace, replayed with one replica per agent, must converge to its endContent.
#include "support/trace.hpp"

#include <gtest/gtest.h>

#include <folio/folio.hpp>

namespace {

using folio::testing::load_trace;

folio::text replay(const folio::testing::trace& t, folio::replica_id id) {
  folio::text doc(id);
  for (const auto& tx : t.txns)
    for (const auto& p : tx.patches) {
      if (p.del) doc.erase(p.pos, p.del);
      if (!p.ins.empty()) doc.insert(p.pos, p.ins);
    }
  return doc;
}

class SequentialTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(SequentialTrace, ReplayGivesEndContent) {
  const auto t = load_trace(GetParam());
  const folio::text doc = replay(t, 1);
  EXPECT_EQ(doc.to_u32string(), t.end);
  doc.check_invariants();
}

TEST_P(SequentialTrace, EncodeDecodeRoundTrips) {
  const auto t = load_trace(GetParam());
  const folio::text doc = replay(t, 1);
  const std::string bytes = doc.encode();
  folio::text copy(2);
  const auto r = folio::text::decode(bytes, 2, copy);
  ASSERT_TRUE(r) << r.description();
  EXPECT_EQ(copy.to_u32string(), t.end);
  EXPECT_EQ(copy.version(), doc.version());
  copy.check_invariants();
  // The decoded copy keeps the full history: it can serve a replica that has nothing.
  folio::text fresh(3);
  ASSERT_TRUE(fresh.apply(copy.ops_since({})));
  EXPECT_EQ(fresh.to_u32string(), t.end);
  // And re-encoding the copy gives the same bytes.
  EXPECT_EQ(copy.encode(), bytes);
}

TEST_P(SequentialTrace, MergingTheWholeLogIntoAnEmptyReplicaConverges) {
  const auto t = load_trace(GetParam());
  const folio::text doc = replay(t, 1);
  const auto batch = doc.ops_since({});
  folio::op_batch<char32_t> wire;
  ASSERT_TRUE(folio::decode_batch(folio::encode_batch(batch), wire));
  EXPECT_EQ(wire, batch);
  folio::text remote(2);
  const auto r = remote.apply(wire);
  ASSERT_TRUE(r) << r.message;
  EXPECT_EQ(r.pending, 0u);
  EXPECT_EQ(remote.to_u32string(), t.end);
  EXPECT_EQ(remote.version(), doc.version());
  remote.check_invariants();
}

INSTANTIATE_TEST_SUITE_P(Traces, SequentialTrace, ::testing::ValuesIn(folio::testing::sequential_traces()), [](const auto& param_info) {
  std::string n = param_info.param.substr(0, param_info.param.find(".json"));
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// One replica per agent. Before a transaction, its agent's replica is brought to exactly the version
// of the transaction's parents (ops taken from an archive replica that has seen everything), so the
// patch positions mean what they meant to the typist.
TEST(ConcurrentTrace, FriendsforeverConvergesWithOneReplicaPerAgent) {
  const auto t = load_trace("friendsforever.concurrent.json.gz");
  ASSERT_GE(t.agents, 2u);
  std::vector<folio::text> agents;
  for (std::size_t a = 0; a < t.agents; ++a) agents.emplace_back(folio::replica_id(a + 1));
  folio::text archive(1000);
  std::vector<folio::version_vector> after(t.txns.size());
  std::size_t merges = 0;
  for (std::size_t i = 0; i < t.txns.size(); ++i) {
    const auto& tx = t.txns[i];
    folio::text& doc = agents.at(tx.agent);
    folio::version_vector want;
    for (std::size_t p : tx.parents) want.merge(after.at(p));
    if (doc.version() != want) {
      ASSERT_TRUE(doc.apply(archive.ops_between(doc.version(), want)));
      ++merges;
    }
    ASSERT_EQ(doc.version(), want) << "txn " << i << ": the agent's replica holds ops outside the parents";
    const folio::version_vector before = doc.version();
    for (const auto& p : tx.patches) {
      if (p.del) doc.erase(p.pos, p.del);
      if (!p.ins.empty()) doc.insert(p.pos, p.ins);
    }
    ASSERT_TRUE(archive.apply(doc.ops_between(before, doc.version())));
    after[i] = doc.version();
  }
  EXPECT_GT(merges, 0u);
  EXPECT_EQ(archive.to_u32string(), t.end);
  archive.check_invariants();
  for (auto& doc : agents) {
    ASSERT_TRUE(doc.apply(archive.ops_since(doc.version())));
    EXPECT_EQ(doc.to_u32string(), t.end);
    EXPECT_EQ(doc.version(), archive.version());
    doc.check_invariants();
  }
}

}  // namespace
