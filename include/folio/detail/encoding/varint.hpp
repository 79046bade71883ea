// folio/detail/encoding/varint.hpp — LEB128 varints and a bounds-checked reader over untrusted bytes.
//
// The reader never reads past its end and never throws: the first failure is latched (status, byte
// offset, field name) and every later read returns 0, so decoders can read a whole record and check once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../../error.hpp"
#include "../../utf8.hpp"

namespace folio::detail {

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(static_cast<std::uint8_t>(v) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

/// A length-prefixed string: its byte count as a varint, then its bytes.
inline void put_string(std::string& out, std::string_view s) {
  put_varint(out, s.size());
  out += s;
}
/// Code points `s` (valid) as put_string writes their UTF-8, without a copy.
inline void put_string(std::string& out, std::u32string_view s) {
  put_varint(out, utf8_length(s));
  append_utf8(out, s);
}

/// The largest magnitude byte_reader::svarint reads by default: a zigzag varint of at most twice it.
inline constexpr std::uint64_t svarint_max_abs = std::uint64_t(1) << 32;

inline std::uint64_t zigzag(std::int64_t v) { return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63); }
inline std::int64_t unzigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }

/// Reads at `p` (before `end`) a varint that byte_reader::varint(what, max) would read without a
/// fault into `v`, moving `p` past it; false otherwise (cut short, an overlong spelling, above `max`),
/// where the caller reads the bytes again to name the fault: byte_reader::varint past its one-byte
/// case (varint_checked) and read_single_op_text (the op table's reading). Two and three bytes, the length of most seqs and Lamport values, are read without a bound check
/// per byte when three bytes are left; longer ones byte by byte.
[[gnu::always_inline]] inline bool take_varint(const unsigned char*& p, const unsigned char* end, std::uint64_t max, std::uint64_t& v) noexcept {
  if (p != end && *p < 0x80) return v = *p++, v <= max;  // one byte, as most fields are
  if (end - p >= 3 && p[1] != 0 && (p[1] < 0x80 || (p[2] != 0 && p[2] < 0x80))) {  // a zero last group: overlong
    std::uint64_t x = (p[0] & 0x7fu) | std::uint64_t(p[1] & 0x7fu) << 7;
    const int n = p[1] < 0x80 ? 2 : 3;
    if (n == 3) x |= std::uint64_t(p[2]) << 14;
    if (x > max) return false;
    return p += n, v = x, true;
  }
  std::uint64_t x = 0;
  for (int shift = 0; shift < 64 && p != end; shift += 7) {
    const unsigned b = *p++;
    x |= std::uint64_t(b & 0x7fu) << shift;
    if (b < 0x80) {
      if ((b == 0 && shift != 0) || (shift == 63 && b > 1) || x > max) return false;
      return v = x, true;
    }
  }
  return false;
}

class byte_reader {
 public:
  explicit byte_reader(std::string_view bytes) : p_(bytes.data()), begin_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool ok() const noexcept { return result_.status == decode_status::ok; }
  bool at_end() const noexcept { return p_ == end_; }
  std::size_t offset() const noexcept { return static_cast<std::size_t>(p_ - begin_); }
  std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
  const decode_result& result() const noexcept { return result_; }

  /// Records the first failure only; returns false so callers can `return r.fail(...)`.
  bool fail(decode_status s, const char* what) {
    if (ok()) result_ = decode_result{s, offset(), what};
    p_ = end_;
    return false;
  }

  /// Like fail(), but names an earlier byte offset (for fields validated after reading).
  bool fail_at(std::size_t offset, decode_status s, const char* what) {
    if (ok()) result_ = decode_result{s, offset, what};
    p_ = end_;
    return false;
  }

  std::uint8_t byte(const char* what) {
    if (p_ == end_) return fail(decode_status::truncated, what), 0;
    return static_cast<std::uint8_t>(*p_++);
  }

  /// Unsigned LEB128, minimal length, at most `max` in value.
  std::uint64_t varint(const char* what, std::uint64_t max = UINT64_MAX) {
    if (p_ != end_ && static_cast<std::uint8_t>(*p_) < 0x80 && static_cast<std::uint8_t>(*p_) <= max)  // one byte, as most fields are: inline
      return static_cast<std::uint8_t>(*p_++);
    return varint_longer(what, max);
  }

  /// Zigzag-encoded signed varint of magnitude at most `max_abs` (so adding it to a counter cannot
  /// overflow).
  std::int64_t svarint(const char* what, std::uint64_t max_abs = svarint_max_abs) { return unzigzag(varint(what, 2 * max_abs)); }

  /// The bytes not read yet, without reading them.
  std::string_view rest() const noexcept { return {p_, remaining()}; }

  /// `n` raw bytes; an empty view (and a latched failure) if fewer remain. `n` is 64 bits wide so
  /// that a length read as a varint is compared whole where size_t has 32 bits (WebAssembly): cut to
  /// size_t first, 2^32 + 1 would read as 1.
  std::string_view bytes(std::uint64_t n, const char* what) {
    if (remaining() < n) return fail(decode_status::truncated, what), std::string_view{};
    std::string_view s(p_, static_cast<std::size_t>(n));
    p_ += n;
    return s;
  }

 private:
  /// varint() past its one-byte case (and every failure): take_varint reads it; a spelling it does
  /// not take, varint_checked reads again byte by byte and names.
  [[gnu::noinline]] std::uint64_t varint_longer(const char* what, std::uint64_t max) {
    const auto* q = reinterpret_cast<const unsigned char*>(p_);
    if (std::uint64_t v = 0; take_varint(q, reinterpret_cast<const unsigned char*>(end_), max, v)) {
      p_ = reinterpret_cast<const char*>(q);
      return v;
    }
    return varint_checked(what, max);
  }
  /// The byte-by-byte reading of a varint, which names the failure.
  std::uint64_t varint_checked(const char* what, std::uint64_t max) {
    std::uint64_t v = 0;
    const char* start = p_;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_) return fail(decode_status::truncated, what), 0;
      const auto b = static_cast<std::uint8_t>(*p_++);
      if (shift == 63 && b > 1) return p_ = start, fail(decode_status::overlong_varint, what), 0;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        // A trailing zero group is a longer spelling of a smaller value: refuse it, so that every
        // value has exactly one encoding.
        if (b == 0 && shift != 0) return p_ = start, fail(decode_status::overlong_varint, what), 0;
        break;
      }
      if (shift == 63) return p_ = start, fail(decode_status::overlong_varint, what), 0;
    }
    if (v > max) return p_ = start, fail(decode_status::overlong_varint, what), 0;
    return v;
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  decode_result result_{};
};

}  // namespace folio::detail
