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
  a.check();
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

}  // namespace
