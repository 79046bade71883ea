// folio/text.hpp — collaborative text: a sequence of Unicode code points.
//
// Positions and lengths count code points (not UTF-8 bytes, not UTF-16 units). Values are valid
// Unicode scalar values; UTF-8 in and out is strict (no surrogates, no overlongs).
#pragma once

#include <string>
#include <string_view>

#include "utf8.hpp"
#include "sequence.hpp"

namespace folio {

namespace detail {
/// Decodes UTF-8 given by the embedding program into `out` (anything with push_back(char32_t));
/// throws "[folio.utf8]" naming the byte (counted from `at`: `utf8` may be a part of the value).
template <class Out>
void decode_utf8_or_throw(std::string_view utf8, Out& out, std::size_t at = 0) {
  std::size_t bad = 0;
  if (!decode_utf8(utf8, out, &bad)) fail(error_code::utf8, "invalid UTF-8 at byte " + std::to_string(at + bad));
}
/// The code points of UTF-8 given by the embedding program; throws as decode_utf8_or_throw.
inline std::u32string code_points_or_throw(std::string_view utf8) {
  std::u32string cps;
  decode_utf8_or_throw(utf8, cps);
  return cps;
}
}  // namespace detail

class text : public sequence<char32_t> {
 public:
  using sequence::insert;
  using sequence::sequence;

  /// Inserts code points before `pos`. Throws "[folio.range]", or "[folio.value]" for a value that is
  /// not a Unicode scalar value.
  local_change insert(std::size_t pos, std::u32string_view s) { return sequence::insert(pos, s.data(), s.size()); }
  /// Inserts UTF-8 text before code point `pos`. Throws "[folio.utf8]" on invalid UTF-8.
  local_change insert_utf8(std::size_t pos, std::string_view utf8) {
    const std::u32string cps = detail::code_points_or_throw(utf8);
    return sequence::insert(pos, cps.data(), cps.size());
  }

  std::u32string to_u32string() const {
    std::u32string s;
    s.reserve(size());
    for_each([&](char32_t c) { s.push_back(c); });
    return s;
  }
  /// The text as UTF-8.
  std::string to_string() const {
    std::string s;
    s.reserve(size());
    impl_.for_each_live_span([&](const detail::content_log<char32_t>& values, std::size_t at, std::size_t n) { values.append_as_utf8(s, at, n); });
    return s;
  }

  static decode_result decode(std::string_view bytes, replica_id self, text& out, std::size_t max_ops = default_max_ops,
                              std::string* content_key = nullptr) {
    return sequence::decode(bytes, self, out, max_ops, content_key);
  }
};

}  // namespace folio
