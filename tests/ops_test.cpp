#include <gtest/gtest.h>

#include <folio/ops.hpp>

namespace {

TEST(Ops, RemoveTargetsRunForwardOrBackward) {
  const folio::op fwd{folio::op_kind::remove, {1, 10}, 20, 3, {2, 5}, false};
  const folio::op back{folio::op_kind::remove, {1, 10}, 20, 3, {2, 5}, true};
  EXPECT_EQ(fwd.target(2), (folio::op_id{2, 7}));
  EXPECT_EQ(back.target(2), (folio::op_id{2, 3}));
}

TEST(Ops, BatchCountsUnitOperations) {
  folio::op_batch<char32_t> b;
  EXPECT_TRUE(b.empty());
  b.ops.push_back({folio::op_kind::insert, {1, 0}, 1, 4, folio::document_start, false});
  b.ops.push_back({folio::op_kind::remove, {1, 4}, 5, 2, {1, 0}, false});
  EXPECT_EQ(b.unit_count(), 6u);
}

TEST(Ops, ApplyResultIsTrueOnlyWhenOk) {
  folio::apply_result r;
  EXPECT_TRUE(r);
  r.status = folio::apply_status::invalid;
  EXPECT_FALSE(r);
}

}  // namespace
