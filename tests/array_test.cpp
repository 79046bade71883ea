#include <gtest/gtest.h>

#include <folio/array.hpp>
#include <folio/text.hpp>

namespace {

TEST(Array, HoldsOpaqueValuesInOrder) {
  folio::array a(1);
  a.insert(0, R"({"id":1})");
  a.insert(1, R"({"id":2})");
  a.insert(0, std::vector<std::string>{"1", "[true]"});
  a.erase(1, 1);
  EXPECT_EQ(a.values(), (std::vector<std::string>{"1", R"({"id":1})", R"({"id":2})"}));
  EXPECT_EQ(a.at(2), R"({"id":2})");
  a.check_invariants();
}

TEST(Array, ReplicasConverge) {
  folio::array a(1), b(2);
  b.apply(a.ops(a.insert(0, std::vector<std::string>{"0", "1", "2"})));
  const auto ba = a.ops(a.insert(1, R"("a")"));
  const auto bb = b.ops(b.erase(0, 2));
  a.apply(bb), b.apply(ba);
  EXPECT_EQ(a.values(), b.values());
  EXPECT_EQ(a.values(), (std::vector<std::string>{R"("a")", "2"}));
}

TEST(Array, EncodesAndDecodesDocumentsAndBatches) {
  folio::array a(1);
  a.insert(0, std::vector<std::string>{"", std::string(1000, 'x'), std::string("\0\xff", 2)});
  a.erase(0, 1);
  folio::array b(2);
  ASSERT_TRUE(folio::array::decode(a.encode(), 2, b));
  EXPECT_EQ(b.values(), a.values());
  folio::op_batch<std::string> wire;
  ASSERT_TRUE(folio::decode_batch(folio::encode_batch(a.ops_since({})), wire));
  EXPECT_EQ(wire, a.ops_since({}));
  folio::text wrong(3);
  EXPECT_EQ(folio::text::decode(a.encode(), 3, wrong).status, folio::decode_status::wrong_kind);
}

// k replicas each remove the same n items concurrently: k·n remove units. The values kept are the n
// inserted ones; a remove unit holds none (it once held an empty-string slot: 32 bytes a unit).
TEST(Array, RemovesHoldNoValueSlots) {
  constexpr int n = 1000, k = 1000;
  folio::array a(1);
  const auto inserted = a.ops(a.insert(0, std::vector<std::string>(n, "0")));
  folio::op_batch<std::string> removes;
  for (int r = 0; r < k; ++r) {
    folio::array b(folio::replica_id(100 + r));
    b.apply(inserted);
    const auto ops = b.ops(b.erase(0, n));
    removes.ops.insert(removes.ops.end(), ops.ops.begin(), ops.ops.end());
  }
  const std::size_t before = a.memory_usage();
  ASSERT_EQ(a.apply(removes).status, folio::apply_status::ok);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.ops_since({}).ops.size(), std::size_t(k) + 1);
  EXPECT_LT(a.memory_usage() - before, std::size_t(k) * 1024) << "per remover, not per remove unit";
  a.check_invariants();
  folio::array c(2);
  ASSERT_TRUE(folio::array::decode(a.encode(), 2, c));
  c.check_invariants();
  EXPECT_EQ(c.ops_since({}).ops, a.ops_since({}).ops);  // its removed values are placeholders: not encoded
}

}  // namespace
