// folio/detail/encoding/compressed_section.hpp — a part of an encoding stored as is or LZ4-compressed, whichever
// is smaller (docs/FORMAT.md, "Format versions"): the content of a version 2 document and each column
// of its op table.
//
//   mode 0 (stored)      varint length n, then n bytes
//   mode 1 (compressed)  varint size n, varint block length b, then an LZ4 block of b bytes that
//                        decompresses to exactly n bytes (detail/encoding/lz4_block.hpp)
//   any other mode is refused
//
// Reading from untrusted bytes gives a view of the n bytes (into the input when stored, into a buffer
// the caller owns when compressed) and where they came from, so that a fault found inside them is
// reported at its own byte (stored) or at the block's first byte (compressed: the byte is not one of
// the encoding's). O(n + b) time; n is at most 255 × b (lz4_decompress) and at most what the caller
// says its reader can use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lz4_block.hpp"
#include "varint.hpp"

namespace folio::detail {

enum class section_mode : std::uint8_t { stored = 0, lz4 = 1 };

/// Appends `raw` as a section: compressed when that is smaller. O(n × lz4_compress's chain).
inline void put_section(std::string& out, std::string_view raw) {
  std::string block;
  if (raw.size() > 16) lz4_compress(raw, block);  // shorter ones never gain: the block adds two varints
  std::string head;
  put_varint(head, raw.size());
  put_varint(head, block.size());
  if (!block.empty() && head.size() + block.size() < raw.size()) {
    out.push_back(static_cast<char>(section_mode::lz4));
    out += head;
    out += block;
  } else {
    out.push_back(static_cast<char>(section_mode::stored));
    put_string(out, raw);
  }
}

/// A section as read: its bytes, and the offset in the whole encoding of its first byte (stored) or of
/// its block (compressed).
struct section {
  std::string_view bytes;
  std::size_t at = 0;
  bool compressed = false;

  /// Latches in `r` the failure `inner` (a reader over `bytes`) found, at the byte it names or, for a
  /// compressed section, at the block's first byte. Returns false.
  bool fail(byte_reader& r, const byte_reader& inner) const {
    const decode_result& e = inner.result();
    return r.fail_at(compressed ? at : at + e.offset, e.status, e.detail);
  }
};

/// Reads a section at `r` (`what` names it in failures: "content", "op shapes", ...). A compressed one
/// is decompressed into `buffer`, which the returned view then points into. A section longer than
/// `max_size` (what its reader can use: the caller knows from what it read before) is refused as
/// too_large before anything is allocated.
inline bool read_section(byte_reader& r, std::string& buffer, section& s, const char* what, std::uint64_t max_size = UINT64_MAX) {
  const std::size_t mode_at = r.offset();
  const std::uint8_t mode = r.byte(what);
  if (!r.ok()) return false;
  if (mode == static_cast<std::uint8_t>(section_mode::stored)) {
    const std::uint64_t n = r.varint(what);
    if (r.ok() && n > max_size) return r.fail(decode_status::too_large, what);
    s.at = r.offset(), s.compressed = false;
    s.bytes = r.bytes(n, what);
    return r.ok();
  }
  if (mode != static_cast<std::uint8_t>(section_mode::lz4)) return r.fail_at(mode_at, decode_status::inconsistent, "unknown section mode");
  const std::uint64_t size = r.varint(what);
  if (r.ok() && size > max_size) return r.fail(decode_status::too_large, what);
  const std::uint64_t block = r.varint(what);
  s.at = r.offset(), s.compressed = true;
  buffer.clear();
  if (!r.ok() || !lz4_decompress(r, block, size, buffer)) return false;
  s.bytes = buffer;
  return true;
}

}  // namespace folio::detail
