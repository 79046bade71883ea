#include <gtest/gtest.h>

#include <folio/detail/sequence/content_log.hpp>
#include <folio/detail/util/small_vector.hpp>
#include <folio/utf8.hpp>
#include <folio/ops.hpp>
#include <string>
#include <vector>

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

// The per-batch scratch vector: inline up to N, then on the heap, its elements kept across growth,
// and a heap block kept (and reused) after clear.
TEST(SmallVector, KeepsItsElementsInlineAndPastN) {
  folio::detail::small_vector<std::uint64_t, 4> v;
  for (std::uint64_t i = 0; i < 100; ++i) {
    v.push_back(i * 3);
    ASSERT_EQ(v.size(), i + 1);
    for (std::uint64_t k = 0; k <= i; ++k) ASSERT_EQ(v[k], k * 3);
  }
  EXPECT_EQ(v.back(), 99u * 3);
  v.pop_back();
  EXPECT_EQ(v.size(), 99u);
  v.clear();
  EXPECT_TRUE(v.empty());
  v.resize(9, 7);
  EXPECT_EQ(v.size(), 9u);
  for (std::size_t k = 0; k < 9; ++k) EXPECT_EQ(v[k], 7u);
  folio::detail::small_vector<std::uint64_t, 4> w;
  w.resize(3, 1);
  w.reserve(50);  // moves to the heap with its elements
  w.push_back(2);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0], 1u);
  EXPECT_EQ(w[3], 2u);
}

// The text content log keeps a keystroke's one-byte values as they come, widens the whole log on the
// first value that needs two or four bytes, and reads back every value at every width.
TEST(ContentLog, AppendsAndWidensThroughEveryWidth) {
  folio::detail::content_log<char32_t> log;
  std::u32string want;
  auto add = [&](std::u32string s) {
    log.append(s.data(), s.size());
    want += s;
    ASSERT_EQ(log.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(log[i], want[i]) << i;
  };
  add(U"h");
  add(U"ello");
  add(U"\u00e9t\u00e9 ");            // still one byte a value
  add(U"123456789");                  // past the short path
  add(U"\u20ac");                     // two bytes
  add(U"ab");
  add(U"\U0001F600");                 // four bytes
  add(U"z\u00e9");
  log.push_placeholders(2);
  EXPECT_EQ(log.size(), want.size() + 2);
  EXPECT_EQ(log[want.size()], U'\0');
  std::string utf8;
  log.append_as_utf8(utf8, 0, want.size());
  std::u32string back;
  ASSERT_TRUE(folio::decode_utf8(utf8, back));
  EXPECT_EQ(back, want);
}

// decode_utf8 appends to what a container holds, and on a fault keeps the valid prefix and names the
// first bad byte, into a resizable container (one growth, then cut) and a push_back one alike.
TEST(Utf8, DecodeAppendsAndKeepsTheValidPrefix) {
  std::u32string s = U"x";
  std::size_t bad = 99;
  EXPECT_TRUE(folio::decode_utf8("a\xc3\xa9" "b", s, &bad));
  EXPECT_EQ(s, U"xa\u00e9b");
  EXPECT_FALSE(folio::decode_utf8("cd\xc3" "(e", s, &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(s, U"xa\u00e9bcd");
  std::vector<char32_t> v;
  EXPECT_FALSE(folio::decode_utf8("\xe2\x82\xac" "z\xff", v, &bad));
  EXPECT_EQ(bad, 4u);
  EXPECT_EQ(v, (std::vector<char32_t>{U'\u20ac', U'z'}));
  struct pushed {
    std::u32string s;
    void push_back(char32_t c) { s.push_back(c); }
  } p;
  EXPECT_FALSE(folio::decode_utf8("q\xed\xa0\x80", p, &bad));  // a surrogate
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(p.s, U"q");
}

}  // namespace
