#include <gtest/gtest.h>

#include <folio/detail/replica/id_table.hpp>
#include <folio/id.hpp>
#include <map>
#include <random>

namespace {

TEST(Id, OpIdsOrderByReplicaThenSeq) {
  EXPECT_LT((folio::op_id{1, 9}), (folio::op_id{2, 0}));
  EXPECT_LT((folio::op_id{2, 0}), (folio::op_id{2, 1}));
  EXPECT_EQ((folio::op_id{3, 4}), (folio::op_id{3, 4}));
}

TEST(Id, ItemKeyOrdersByLamportThenReplicaThenSeq) {
  using folio::item_key;
  EXPECT_LT((item_key{1, 9, 9}), (item_key{2, 1, 0}));  // Lamport decides first
  EXPECT_LT((item_key{5, 1, 9}), (item_key{5, 2, 0}));  // then the replica
  EXPECT_LT((item_key{5, 2, 0}), (item_key{5, 2, 1}));  // then the seq
}

TEST(Id, DocumentStartIsReplicaZero) {
  EXPECT_EQ(folio::document_start.replica, 0u);
  EXPECT_LT(folio::max_counter, UINT32_MAX / 2 + 1);
}

// detail::id_table against std::map, over ids that grow it many times, repeat, and include 0 (kept
// beside the array) and the largest id.
TEST(Id, IdTableAnswersAsAMap) {
  folio::detail::id_table<std::uint32_t> t;
  std::map<folio::replica_id, std::uint32_t> m;
  std::mt19937_64 rng(23);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(7), nullptr);
  for (std::uint32_t i = 0; i < 20000; ++i) {
    const folio::replica_id id = i % 5 == 0 ? i / 5 : i == 7 ? UINT64_MAX : rng() >> (i % 60);  // small ids (0 among them) repeat
    const auto [value, added] = t.try_emplace(id, i);
    const auto [it, m_added] = m.try_emplace(id, i);
    ASSERT_EQ(added, m_added) << id;
    ASSERT_EQ(*value, it->second) << id;
  }
  EXPECT_EQ(t.size(), m.size());
  for (const auto& [id, v] : m) {
    ASSERT_NE(t.find(id), nullptr) << id;
    EXPECT_EQ(*t.find(id), v) << id;
  }
  std::size_t absent = 0;
  for (int i = 0; i < 1000; ++i)
    if (const folio::replica_id id = rng(); !m.count(id)) {
      EXPECT_EQ(t.find(id), nullptr) << id;
      ++absent;
    }
  EXPECT_GT(absent, 990u);
  *t.find(0) = 99;  // a value is changed in place
  EXPECT_EQ(*t.find(0), 99u);
}

}  // namespace
