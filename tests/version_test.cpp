#include <gtest/gtest.h>

#include <folio/version.hpp>

namespace {

folio::version_vector vv(std::initializer_list<std::pair<folio::replica_id, std::uint32_t>> xs) {
  folio::version_vector v;
  for (auto [r, c] : xs) v.observe(r, c);
  return v;
}

TEST(Version, AbsentReplicaCountsZero) {
  const auto v = vv({{7, 3}});
  EXPECT_EQ(v.get(7), 3u);
  EXPECT_EQ(v.get(8), 0u);
  EXPECT_TRUE(v.contains({7, 2}));
  EXPECT_FALSE(v.contains({7, 3}));
}

TEST(Version, ObserveNeverLowers) {
  auto v = vv({{1, 5}});
  v.observe(1, 2);
  EXPECT_EQ(v.get(1), 5u);
}

TEST(Version, CompareIsAPartialOrder) {
  EXPECT_EQ(vv({{1, 2}}).compare(vv({{1, 2}})), folio::version_order::equal);
  EXPECT_EQ(vv({{1, 2}}).compare(vv({{1, 3}})), folio::version_order::before);
  EXPECT_EQ(vv({{1, 2}, {2, 1}}).compare(vv({{1, 2}})), folio::version_order::after);
  EXPECT_EQ(vv({{1, 3}}).compare(vv({{2, 1}})), folio::version_order::concurrent);
  EXPECT_EQ(vv({}).compare(vv({{2, 1}})), folio::version_order::before);
}

TEST(Version, MergeIsPointwiseMax) {
  auto a = vv({{1, 3}, {3, 1}});
  a.merge(vv({{1, 1}, {2, 4}}));
  EXPECT_EQ(a, vv({{1, 3}, {2, 4}, {3, 1}}));
}

TEST(Version, EncodeDecodeRoundTrips) {
  const auto v = vv({{1, 3}, {1ull << 40, 7}, {UINT64_MAX, 1}});
  folio::version_vector back;
  ASSERT_TRUE(folio::version_vector::decode(v.encode(), back));
  EXPECT_EQ(back, v);
}

TEST(Version, EncodingIsTheDocumentedBytes) {
  // count 2; (1, 3); (300, 1): 300 = 0xAC 0x02
  EXPECT_EQ(vv({{300, 1}, {1, 3}}).encode(), std::string("\x02\x01\x03\xAC\x02\x01", 6));
}

TEST(Version, DecodeRejectsBadInput) {
  folio::version_vector v;
  auto r = folio::version_vector::decode(std::string("\x01\x01\x80", 3), v);  // count's varint cut short
  EXPECT_EQ(r.status, folio::decode_status::truncated);
  EXPECT_EQ(r.offset, 3u);
  EXPECT_EQ(r.description(), "truncated input at byte 3 (version count)");
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x01", 2), v).status, folio::decode_status::too_large);
  EXPECT_EQ(folio::version_vector::decode(std::string("\x02\x05\x01\x02\x01", 5), v).status, folio::decode_status::inconsistent);  // not ascending
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x00\x01", 3), v).status, folio::decode_status::inconsistent);          // replica 0
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x01\x00", 3), v).status, folio::decode_status::inconsistent);          // count 0
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x01\x01\x00", 4), v).status, folio::decode_status::trailing_bytes);
  EXPECT_EQ(folio::version_vector::decode(std::string("\xff\xff\xff\xff\x0f", 5), v).status, folio::decode_status::too_large);
  EXPECT_EQ(folio::version_vector::decode(std::string("\x01\x01\xff\xff\xff\xff\x0f", 7), v).status, folio::decode_status::overlong_varint);
  const std::string eleven(11, '\xff');
  EXPECT_EQ(folio::version_vector::decode("\x01" + eleven, v).status, folio::decode_status::overlong_varint);
}

}  // namespace
