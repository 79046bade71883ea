#include <gtest/gtest.h>

#include <folio/text.hpp>
#include <folio/zstd.hpp>

namespace {

folio::text sample_text() {
  folio::text t(1);
  for (int i = 0; i < 200; ++i) t.insert_utf8(t.size(), "the same words again and again ");
  return t;
}
/// A batch of the whole history: its content is not compressed (a document's is, format version 2).
std::string sample() { return folio::encode_batch(sample_text().ops_since({})); }

TEST(Zstd, CompressedEncodingsRoundTripAndShrink) {
  const std::string raw = sample();
  const std::string z = folio::zstd::compress(raw);
  EXPECT_LT(z.size() * 4, raw.size());
  std::string back;
  ASSERT_TRUE(folio::zstd::decompress(z, back));
  EXPECT_EQ(back, raw);
  folio::op_batch<char32_t> b;
  ASSERT_TRUE(folio::decode_batch(back, b));
  const std::string doc = sample_text().encode();
  ASSERT_TRUE(folio::zstd::decompress(folio::zstd::compress(doc), back));
  folio::text t(2);
  ASSERT_TRUE(folio::text::decode(back, 2, t));
  EXPECT_EQ(t.to_u32string(), sample_text().to_u32string());
}

TEST(Zstd, OutputIsCapped) {
  const std::string z = folio::zstd::compress(std::string(1 << 20, 'a'));
  std::string out;
  const auto r = folio::zstd::decompress(z, out, 1000);
  EXPECT_EQ(r.status, folio::decode_status::too_large);
  EXPECT_TRUE(out.empty());
}

TEST(Zstd, CorruptAndTruncatedFramesAreRefused) {
  const std::string z = folio::zstd::compress(sample());
  std::string out;
  EXPECT_EQ(folio::zstd::decompress("not zstd", out).status, folio::decode_status::bad_magic);
  EXPECT_FALSE(folio::zstd::decompress(z.substr(0, z.size() / 2), out));
  std::string bad = z;
  for (std::size_t i = 12; i < bad.size(); i += 7) bad[i] = char(bad[i] ^ 0x5a);
  EXPECT_FALSE(folio::zstd::decompress(bad, out));
  EXPECT_EQ(folio::zstd::decompress(z + "x", out).status, folio::decode_status::trailing_bytes);
}

}  // namespace
