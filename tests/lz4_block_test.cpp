// The engine's LZ4 block codec (detail/encoding/lz4_block.hpp) against liblz4, the format's reference
// implementation: what the engine writes, liblz4 reads back exactly, and what liblz4 writes (its fast
// and its high-compression parsers) the engine reads back exactly; over empty and tiny inputs, runs
// (overlapping matches), incompressible bytes, and real text longer than the 64 KiB window. Then the
// refusals of malformed blocks, each at its byte.
#include <gtest/gtest.h>
#include <lz4.h>
#include <lz4hc.h>

#include <folio/detail/encoding/lz4_block.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/trace.hpp"

namespace {

using folio::decode_status;
using folio::detail::byte_reader;

std::string compress(std::string_view in, std::size_t chain = 8) {
  std::string out;
  folio::detail::lz4_compress(in, out, chain);
  return out;
}

/// Decompresses `block` (all of `bytes` after `skip` bytes) to `size` bytes with the engine.
folio::decode_result decompress(std::string_view bytes, std::size_t size, std::string& out, std::size_t skip = 0) {
  byte_reader r(bytes);
  r.bytes(skip, "prefix");
  folio::detail::lz4_decompress(r, bytes.size() - skip, size, out);
  return r.result();
}

std::vector<std::string> inputs() {
  std::vector<std::string> v{"", "a", "abcd", "abcdabcdabcd", "abcdabcdabcdx", std::string(13, 'z'), std::string(100000, 'a')};
  for (std::size_t n = 0; n < 40; ++n) v.push_back(std::string(n, 'q') + "tail");
  std::mt19937 rng(7);
  std::string noise(70000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  v.push_back(noise);
  std::string words;
  for (int i = 0; i < 5000; ++i) words += "word" + std::to_string(rng() % 300) + (i % 17 ? " " : "\n");
  v.push_back(words);
  v.push_back(folio::testing::gunzip_file(folio::testing::traces_dir() + "/automerge-paper.json.gz").substr(0, 300000));
  return v;
}

TEST(Lz4Block, LibLz4ReadsWhatTheEngineWrites) {
  for (const std::string& in : inputs())
    for (std::size_t chain : {1, 8, 64}) {
      const std::string block = compress(in, chain);
      EXPECT_LE(block.size(), in.size() + in.size() / 255 + 16);
      std::string back(in.size(), '\0');
      const int n = LZ4_decompress_safe(block.data(), back.data(), static_cast<int>(block.size()), static_cast<int>(back.size()));
      ASSERT_EQ(n, static_cast<int>(in.size())) << "input of " << in.size() << " bytes, chain " << chain;
      EXPECT_EQ(back, in);
      std::string ours;
      ASSERT_TRUE(decompress(block, in.size(), ours));
      EXPECT_EQ(ours, in);
    }
}

TEST(Lz4Block, TheEngineReadsWhatLibLz4Writes) {
  for (const std::string& in : inputs()) {
    std::string fast(LZ4_compressBound(static_cast<int>(in.size())), '\0'), hc = fast;
    fast.resize(LZ4_compress_default(in.data(), fast.data(), static_cast<int>(in.size()), static_cast<int>(fast.size())));
    hc.resize(LZ4_compress_HC(in.data(), hc.data(), static_cast<int>(in.size()), static_cast<int>(hc.size()), LZ4HC_CLEVEL_MAX));
    for (const std::string* block : {&fast, &hc}) {
      std::string ours = "kept";  // appended to
      const folio::decode_result r = decompress(*block, in.size(), ours);
      ASSERT_TRUE(r) << r.description() << " for an input of " << in.size() << " bytes";
      EXPECT_EQ(ours, "kept" + in);
    }
  }
}

TEST(Lz4Block, TextCompressesAboutAsWellAsLibLz4HighCompression) {
  const std::string in = folio::testing::gunzip_file(folio::testing::traces_dir() + "/automerge-paper.json.gz").substr(0, 300000);
  std::string hc(LZ4_compressBound(static_cast<int>(in.size())), '\0');
  hc.resize(LZ4_compress_HC(in.data(), hc.data(), static_cast<int>(in.size()), static_cast<int>(hc.size()), 9));
  const std::size_t ours = compress(in).size();
  EXPECT_LT(ours, in.size() / 3);
  EXPECT_LT(ours, hc.size() * 5 / 4) << "the engine's blocks are more than 25% larger than liblz4's level 9";
}

TEST(Lz4Block, MalformedBlocksAreRefusedAtTheirByte) {
  std::string out;
  const auto refused = [&out](const std::string& block, std::size_t size) {  // why `block` of `size` bytes is refused
    out.clear();
    return decompress(block, size, out).description();
  };
  // A literal run longer than the size given.
  auto r = decompress(std::string("\x50hello", 6), 4, out);
  EXPECT_EQ(r.status, decode_status::inconsistent);
  EXPECT_EQ(r.description(), "inconsistent at byte 1 (literals past the block's size)");
  // Fewer literal bytes than the token says.
  EXPECT_EQ(refused(std::string("\x50hel", 4), 5), "truncated input at byte 1 (literals)");
  // Offset 0, and an offset before the output's start (a literal, a match of 8, the 5 last literals).
  EXPECT_EQ(refused(std::string("\x14" "a\x00\x00\x50" "bcdef", 10), 14), "bad reference at byte 2 (match offset)");
  EXPECT_EQ(refused(std::string("\x14" "a\x02\x00\x50" "bcdef", 10), 14), "bad reference at byte 2 (match offset)");
  out.clear();
  ASSERT_TRUE(decompress(std::string("\x14" "a\x01\x00\x50" "bcdef", 10), 14, out));
  EXPECT_EQ(out, "aaaaaaaaabcdef");
  // A match longer than the room left: with its length bytes, and already by its nibble (the length
  // bytes are not read on).
  EXPECT_EQ(refused(std::string("\x1e" "a\x01\x00\x50" "bcdef", 10), 14), "inconsistent at byte 4 (match past the block's size)");
  EXPECT_EQ(refused(std::string("\x1f" "a\x01\x00\x10\x50" "bcdef", 11), 30), "inconsistent at byte 5 (match past the block's size)");
  // A block that ends before the size given; an empty block.
  EXPECT_EQ(refused(std::string("\x30" "abc", 4), 5), "inconsistent at byte 4 (compressed block ends before its size)");
  EXPECT_EQ(refused(std::string(), 0), "truncated input at byte 0 (compressed block)");
  // Where liblz4 refuses a match, so does the engine: one that ends the block, starts in the output's
  // last 12 bytes or within 8 bytes of the block's end, or ends in the output's last 5 bytes.
  const struct {
    std::string block;
    std::size_t size;
    const char* why;
  } misplaced[] = {
      {std::string("\x10" "a\x01\x00", 4), 5, "inconsistent at byte 2 (match starts in the block's last 12 bytes)"},
      {std::string("\x10" "a\x01\x00\x50" "bcdef", 10), 10, "inconsistent at byte 2 (match starts in the block's last 12 bytes)"},
      {std::string("\x10" "a\x01\x00\x40" "bcd", 8), 30, "inconsistent at byte 2 (match within 8 bytes of the block's end)"},
      {std::string("\x1f" "a\x01\x00\x05\x50" "bcdef", 11), 28, "inconsistent at byte 5 (match ends in the block's last 5 bytes)"},
  };
  for (const auto& m : misplaced) {
    EXPECT_EQ(refused(m.block, m.size), m.why);
    std::string lib(m.size, '\0');
    EXPECT_LT(LZ4_decompress_safe(m.block.data(), lib.data(), static_cast<int>(m.block.size()), static_cast<int>(m.size)), 0) << m.why;
  }
  // The same shapes placed as the format allows read the same in both.
  const std::string fine("\x1f" "a\x01\x00\x05\x50" "bcdef", 11);  // "a", then 24 more "a" (a run), then "bcdef"
  out.clear();
  ASSERT_TRUE(decompress(fine, 30, out));
  std::string lib(30, '\0');
  ASSERT_EQ(LZ4_decompress_safe(fine.data(), lib.data(), static_cast<int>(fine.size()), 30), 30);
  EXPECT_EQ(out, lib);
  // No bytes are one empty token (found by the lz4_block fuzz target: liblz4 refuses "02" for 0 bytes).
  EXPECT_EQ(refused(std::string("\x02", 1), 0), "inconsistent at byte 0 (compressed block of no bytes is not one empty token)");
  EXPECT_TRUE(decompress(std::string("\x00", 1), 0, out));
  // A length byte missing at the end.
  EXPECT_EQ(refused(std::string("\xf0", 1), 20), "truncated input at byte 1 (literal length)");
  // Sizes past what LZ4 can reach are refused before anything is allocated: at most 255 bytes per byte.
  std::string fresh;
  r = decompress(std::string("\x00", 1), 256, fresh);
  EXPECT_EQ(r.status, decode_status::too_large);
  EXPECT_EQ(fresh.capacity(), std::string().capacity());
  // Offsets count from the block's first byte within the whole input.
  out.clear();
  r = decompress(std::string("xyz\x14" "a\x00\x00\x50" "bcdef", 13), 14, out, 3);
  EXPECT_EQ(r.description(), "bad reference at byte 5 (match offset)");
}

TEST(Lz4Block, LongestRunsReachTheRatioLimit) {
  // One literal, then a match of the whole rest: the length bytes are 255 each.
  const std::string in(300000, 'x');
  const std::string block = compress(in);
  EXPECT_LT(block.size() * 250, in.size());
  std::string out;
  ASSERT_TRUE(decompress(block, in.size(), out));
  EXPECT_EQ(out, in);
}

}  // namespace
