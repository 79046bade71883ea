// folio/utf8.hpp — strict UTF-8 <-> code points (no overlongs, no surrogates, max U+10FFFF), as the
// engine reads and writes its values. Public so that code around the engine (the service's JSON reader,
// the WebAssembly binding) uses the same rules. Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace folio {

inline bool valid_code_point(char32_t c) noexcept { return c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF); }

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

/// The length of the run of ASCII bytes (< 0x80) that `p` starts, at most `n`: 8 bytes a test of
/// their high bits, the first other byte found in its word by counting trailing zeros (little-endian;
/// a byte loop elsewhere); once a word passes, 32 bytes a test while they pass. O(n) with a small
/// constant in long runs, and one word's test where ASCII and other scripts alternate every few bytes.
inline std::size_t ascii_run(const unsigned char* p, std::size_t n) noexcept {
  constexpr std::uint64_t high = 0x8080808080808080u;
  std::size_t i = 0;
  while (i + 8 <= n) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (const std::uint64_t h = w & high) {
      if constexpr (std::endian::native == std::endian::little) return i + static_cast<std::size_t>(std::countr_zero(h)) / 8;
      break;
    }
    i += 8;
    for (std::uint64_t v[4]; i + 32 <= n; i += 32) {  // a long run: then the word that stops it, above
      std::memcpy(v, p + i, 32);
      if ((v[0] | v[1] | v[2] | v[3]) & high) break;
    }
  }
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

/// Code points in `s` (valid UTF-8): its bytes that do not continue a code point. O(bytes), runs of
/// ASCII at ascii_run's pace.
inline std::size_t code_point_count(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t run = ascii_run(p + i, s.size() - i);
    count += run, i += run;
    for (; i < s.size() && p[i] >= 0x80; ++i) count += (p[i] & 0xC0) != 0x80;
  }
  return count;
}

/// The UTF-8 length of code points `s` (valid).
inline std::size_t utf8_length(std::u32string_view s) noexcept {
  std::size_t n = 0;
  for (char32_t c : s) n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  return n;
}

/// Appends code points `s` (valid) as UTF-8; runs of ASCII, most text, are copied without a growth
/// check per byte.
inline void append_utf8(std::string& out, std::u32string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t j = i;
    while (j < s.size() && s[j] < 0x80) ++j;
    if (j > i) {
      const std::size_t at = out.size();
      out.resize(at + (j - i));
      char* p = out.data() + at;
      for (std::size_t k = i; k < j; ++k) *p++ = static_cast<char>(s[k]);
      i = j;
    }
    if (i < s.size()) append_utf8(out, s[i++]);
  }
}

/// Decodes one code point starting at s[i]; advances i. Returns false (i unchanged) on invalid input.
inline bool next_code_point(std::string_view s, std::size_t& i, char32_t& out) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    out = b0;
    ++i;
    return true;
  }
  std::size_t n;
  char32_t c;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0)
    n = 1, c = b0 & 0x1F, min = 0x80;
  else if ((b0 & 0xF0) == 0xE0)
    n = 2, c = b0 & 0x0F, min = 0x800;
  else if ((b0 & 0xF8) == 0xF0)
    n = 3, c = b0 & 0x07, min = 0x10000;
  else
    return false;
  if (s.size() - i <= n) return false;
  for (std::size_t k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || !valid_code_point(c)) return false;
  out = c;
  i += n + 1;
  return true;
}

/// Appends the code points of `s` to `out`; on invalid UTF-8 returns false and sets `bad_at` to the
/// byte offset of the first invalid sequence (out then holds the valid prefix). A container that can
/// be resized (std::vector, std::u32string) is grown once by at most a code point per byte, written
/// through a pointer and cut to what was written (one ASCII byte, a keystroke's content, is pushed
/// back: growing, filling and cutting cost more than it); others get push_back. O(bytes).
template <class Out>
bool decode_utf8(std::string_view s, Out& out, std::size_t* bad_at = nullptr) {
  std::size_t i = 0;
  if constexpr (requires { out.resize(std::size_t{}); out.data(); }) {
    if (s.size() == 1 && static_cast<unsigned char>(s[0]) < 0x80) return out.push_back(static_cast<char32_t>(s[0])), true;
    const std::size_t at = out.size();
    out.resize(at + s.size());
    auto* const first = out.data() + at;
    auto* p = first;
    bool ok = true;
    while (i < s.size()) {
      if (static_cast<unsigned char>(s[i]) < 0x80) {  // ASCII
        *p++ = static_cast<char32_t>(s[i++]);
        continue;
      }
      char32_t c;
      if (!next_code_point(s, i, c)) {
        ok = false;
        break;
      }
      *p++ = c;
    }
    out.resize(at + static_cast<std::size_t>(p - first));
    if (!ok && bad_at) *bad_at = i;
    return ok;
  } else {
    while (i < s.size()) {
      char32_t c;
      if (!next_code_point(s, i, c)) {
        if (bad_at) *bad_at = i;
        return false;
      }
      out.push_back(c);
    }
    return true;
  }
}

}  // namespace folio
