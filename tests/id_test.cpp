#include <gtest/gtest.h>

#include <folio/id.hpp>

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

}  // namespace
