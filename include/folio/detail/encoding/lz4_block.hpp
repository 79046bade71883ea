// folio/detail/encoding/lz4_block.hpp — the LZ4 block format (lz4.org's "LZ4 Block Format Description"), written
// and read with the standard library only, so that every program embedding the engine (the browser's
// WebAssembly too) reads a compressed document. Documents of version 2 compress their content with it
// (docs/FORMAT.md); the blocks are plain LZ4 blocks, which liblz4's LZ4_decompress_safe reads and whose
// output this reader reads (tests/lz4_block_test.cpp checks both ways).
//
// A block is a list of sequences: a token byte (high nibble: literal count, low nibble: match length
// - 4; 15 in either says more length bytes follow, each added, 255 meaning another follows), the
// literals, then a 2-byte little-endian offset back into the output (1..65535) and the match's extra
// length bytes. The last sequence is literals only and ends the block. As the format asks of writers,
// the last 5 bytes are always literals and no match starts in the last 12 bytes.
//
// Writing (lz4_compress): greedy parse; the longest match among the last `max_chain` earlier
// positions with the same 4-byte hash, at most 64 KiB back (a hash chain as LZ4 HC keeps). O(n ×
// max_chain) time, at most n + n/255 + 16 bytes out; tables of 4 bytes per head (2^8 to 2^16 heads,
// about the input's size) and 2 bytes per position of the 64 KiB window.
// Reading (lz4_decompress), from untrusted bytes: the output size is given (the encoding stores it),
// every length is checked against the bytes left in and the room left out, every offset against the
// bytes written; O(block + output) time, and the output is at most 255 × the block (refused before
// anything is allocated otherwise: LZ4 cannot do better than that ratio). What liblz4's
// LZ4_decompress_safe refuses is refused too: a match that starts in the output's last 12 bytes or
// within 8 bytes of the block's end, or ends in the output's last 5 bytes (so the last sequence is
// literals only).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "varint.hpp"

namespace folio::detail {

namespace lz4 {
inline constexpr std::size_t min_match = 4;
inline constexpr std::size_t last_literals = 5;    ///< the block's last bytes are literals
inline constexpr std::size_t match_start_limit = 12;  ///< no match starts in the block's last 12 bytes
inline constexpr std::size_t max_offset = 65535;
inline constexpr std::size_t max_ratio = 255;      ///< output bytes per block byte, at most

inline std::uint32_t read32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
/// A length past a nibble's 15: bytes of 255 while more follow, then the rest.
inline void put_length_tail(std::string& out, std::size_t n) {
  for (; n >= 255; n -= 255) out.push_back(static_cast<char>(255));
  out.push_back(static_cast<char>(n));
}
inline void put_sequence(std::string& out, const unsigned char* literals, std::size_t nlit, std::size_t offset, std::size_t match) {
  const std::size_t ml = match == 0 ? 0 : match - min_match;
  out.push_back(static_cast<char>((std::min<std::size_t>(nlit, 15) << 4) | (match == 0 ? 0 : std::min<std::size_t>(ml, 15))));
  if (nlit >= 15) put_length_tail(out, nlit - 15);
  out.append(reinterpret_cast<const char*>(literals), nlit);
  if (match == 0) return;
  out.push_back(static_cast<char>(offset & 0xff));
  out.push_back(static_cast<char>(offset >> 8));
  if (ml >= 15) put_length_tail(out, ml - 15);
}
}  // namespace lz4

/// Appends `in` as one LZ4 block to `out`. `max_chain` earlier positions are tried per position (1 is
/// LZ4's fast parse; more finds longer matches at that cost per byte).
inline void lz4_compress(std::string_view in, std::string& out, std::size_t max_chain = 8) {
  using namespace lz4;
  const std::size_t n = in.size();
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t anchor = 0;  // first byte not yet written
  if (n > match_start_limit) {
    int bits = 8;  // heads: a power of two near the input's size, 2^8 .. 2^16
    while (bits < 16 && (std::size_t(1) << bits) < n) ++bits;
    std::vector<std::uint32_t> head(std::size_t(1) << bits, UINT32_MAX);
    std::vector<std::uint16_t> chain(std::min<std::size_t>(n, max_offset + 1));  // distance to the previous position of the same hash
    const std::size_t window = chain.size();
    auto hash = [&](std::size_t i) { return static_cast<std::size_t>((read32(p + i) * 2654435761u) >> (32 - bits)); };
    std::size_t inserted = 0;  // positions below this are in the tables
    auto insert_up_to = [&](std::size_t end) {
      for (; inserted < end; ++inserted) {
        const std::size_t h = hash(inserted);
        const std::size_t d = head[h] == UINT32_MAX ? 0 : inserted - head[h];
        chain[inserted % window] = static_cast<std::uint16_t>(d > max_offset ? 0 : d);
        head[h] = static_cast<std::uint32_t>(inserted);
      }
    };
    const std::size_t last_start = n - match_start_limit;  // a match starts at or before this
    const std::size_t match_end_limit = n - last_literals;  // and ends at or before this
    std::size_t i = 0;
    while (i <= last_start) {
      insert_up_to(i);
      std::size_t best_len = 0, best_at = 0;
      const std::uint32_t word = read32(p + i);
      std::size_t cand = head[hash(i)];
      for (std::size_t tries = 0; cand != UINT32_MAX && i - cand <= max_offset && tries < max_chain; ++tries) {
        if (read32(p + cand) == word) {
          std::size_t len = min_match;
          while (i + len < match_end_limit && p[cand + len] == p[i + len]) ++len;
          if (len > best_len) best_len = len, best_at = cand;
          if (i + len >= match_end_limit) break;
        }
        const std::uint16_t d = chain[cand % window];
        if (d == 0 || d > cand) break;
        cand -= d;
      }
      if (best_len < min_match) {
        ++i;
        continue;
      }
      while (i > anchor && best_at > 0 && p[i - 1] == p[best_at - 1]) --i, --best_at, ++best_len;  // reach back into the literals
      put_sequence(out, p + anchor, i - anchor, i - best_at, best_len);
      i += best_len;
      anchor = i;
    }
  }
  put_sequence(out, p + anchor, n - anchor, 0, 0);
}

/// Reads one LZ4 block of `block_size` bytes at `r` that decompresses to exactly `size` bytes, appended
/// to `out`. Failures are latched in `r` at the byte that shows them (status and `what` as for any
/// field): a length past the block or past `size`, an offset of 0 or before the output's start, a
/// block that ends early or holds more than `size` bytes.
inline bool lz4_decompress(byte_reader& r, std::uint64_t block_size, std::uint64_t size, std::string& out) {
  using namespace lz4;
  if (block_size > r.remaining()) return r.fail(decode_status::truncated, "compressed block");
  if (size > block_size * max_ratio) return r.fail(decode_status::too_large, "compressed block's size (more than 255 bytes per byte)");
  if (size > out.max_size() - out.size()) return r.fail(decode_status::too_large, "compressed block's size");  // 32-bit size_t
  const std::size_t blen = static_cast<std::size_t>(block_size);  // <= remaining()
  const std::size_t base = out.size();
  const std::size_t at = r.offset();
  byte_reader b(r.bytes(blen, "compressed block"));
  out.reserve(base + static_cast<std::size_t>(size));
  auto length = [&](std::size_t nibble, const char* what) -> std::uint64_t {
    std::uint64_t n = nibble;
    if (nibble == 15)
      for (std::uint8_t more = 255; more == 255 && b.ok() && n <= size;) n += more = b.byte(what);
    return n;
  };
  auto fail = [&](decode_status s, const char* what) { return r.fail_at(at + b.offset(), s, what); };
  if (blen == 0) return fail(decode_status::truncated, "compressed block");
  if (size == 0 && (blen != 1 || b.bytes(1, "block token")[0] != 0))  // as liblz4: nothing is one 0 token
    return r.fail_at(at, decode_status::inconsistent, "compressed block of no bytes is not one empty token");
  while (b.ok() && !b.at_end()) {
    const std::uint8_t token = b.byte("block token");
    const std::uint64_t nlit = length(token >> 4, "literal length");
    if (!b.ok()) break;
    if (nlit > size - (out.size() - base)) return fail(decode_status::inconsistent, "literals past the block's size");
    out += b.bytes(nlit, "literals");
    if (!b.ok() || b.at_end()) break;  // the last sequence: literals only
    // As liblz4 reads blocks: a match starts at least 12 bytes before the end of the output, with at
    // least 8 bytes of the block after its literals (offset, a token, the last 5 literals).
    if (out.size() - base + match_start_limit > size) return fail(decode_status::inconsistent, "match starts in the block's last 12 bytes");
    if (b.remaining() < 8) return fail(decode_status::inconsistent, "match within 8 bytes of the block's end");
    const std::size_t offset_at = b.offset();
    const std::size_t low = b.byte("match offset");  // little-endian; two statements fix the order
    const std::size_t offset = low | std::size_t(b.byte("match offset")) << 8;
    const std::uint64_t match = length(token & 15, "match length") + min_match;
    if (!b.ok()) break;
    const std::size_t written = out.size() - base;
    if (offset == 0 || offset > written) return r.fail_at(at + offset_at, decode_status::bad_reference, "match offset");
    if (match > size - written) return fail(decode_status::inconsistent, "match past the block's size");
    if (written + match + last_literals > size) return fail(decode_status::inconsistent, "match ends in the block's last 5 bytes");
    if (offset >= match) {
      out.append(out, out.size() - offset, static_cast<std::size_t>(match));
    } else {
      for (std::uint64_t k = 0; k < match; ++k) out.push_back(out[out.size() - offset]);  // overlapping: a run
    }
  }
  if (!b.ok()) return r.fail_at(at + b.result().offset, b.result().status, b.result().detail);
  if (out.size() - base != size) return r.fail_at(at + blen, decode_status::inconsistent, "compressed block ends before its size");
  return true;
}

}  // namespace folio::detail
