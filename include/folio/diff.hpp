// folio/diff.hpp — "replace with this new value": turn a new full value into the minimal operations
// on the existing state.
//
// Text is diffed by code point, arrays by element (byte equality of the canonical values), both with
// Myers' algorithm after trimming the common prefix and suffix, so a one-character change in a 1 MiB
// text costs a linear scan and one or two operations. An unchanged value produces no operation.
// The edits are applied from the end backwards, so their positions stay valid; the result is one
// local change whose ops can be sent with `doc.ops(change)`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "array.hpp"
#include "detail/util/myers.hpp"
#include "utf8.hpp"
#include "text.hpp"

namespace folio {

namespace detail {
template <class Seq, class T>
local_change apply_hunks(Seq& doc, const std::vector<hunk>& hunks, const T* target) {
  const std::uint32_t first = doc.version().get(doc.replica());
  std::uint64_t units = 0;
  for (const hunk& h : hunks) units += h.a_len + h.b_len;
  reserve_counters(first, doc.clock(), units);  // all or nothing
  for (auto it = hunks.rbegin(); it != hunks.rend(); ++it) {
    if (it->a_len) doc.erase(it->a_pos, it->a_len);
    if (it->b_len) doc.sequence<T>::insert(it->a_pos, target + it->b_pos, it->b_len);
  }
  return local_change{doc.replica(), first, doc.version().get(doc.replica()) - first};
}

/// Bytes `a` and `b` have in common at their start: memcmp over blocks (the C library's vector
/// compare), then byte by byte in the block that differs. O(n), a block a step.
inline std::size_t common_prefix(std::string_view a, std::string_view b) noexcept {
  constexpr std::size_t block = 64;
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i + block <= n && std::memcmp(a.data() + i, b.data() + i, block) == 0) i += block;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}
/// Bytes `a` and `b` have in common at their end, at most `most`; as common_prefix.
inline std::size_t common_suffix(std::string_view a, std::string_view b, std::size_t most) noexcept {
  constexpr std::size_t block = 64;
  std::size_t k = 0;
  while (k + block <= most && std::memcmp(a.data() + a.size() - k - block, b.data() + b.size() - k - block, block) == 0) k += block;
  while (k < most && a[a.size() - 1 - k] == b[b.size() - 1 - k]) ++k;
  return k;
}
}  // namespace detail

/// Makes `doc` equal to `value` with the fewest inserted and removed code points.
inline local_change replace_text(text& doc, std::u32string_view value) {
  for (char32_t c : value)
    if (!valid_code_point(c)) detail::fail(error_code::value, "not a Unicode scalar value");
  const std::u32string old = doc.to_u32string();
  return detail::apply_hunks(doc, detail::myers_diff(old.data(), old.size(), value.data(), value.size()), value.data());
}

/// UTF-8 form of replace_text, with the same result. Throws "[folio.utf8]" on invalid UTF-8.
/// The common prefix and suffix are found on the UTF-8 bytes (identical code points are identical
/// bytes), so only the changed middle is decoded and diffed: a small change in a large text costs one
/// pass of byte comparison instead of two code point copies of both values. O(n + D²) as Myers.
inline local_change replace_text_utf8(text& doc, std::string_view utf8) {
  const std::string old = doc.to_string();
  const std::string_view a = old, b = utf8;
  const auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
  // The longest common prefix and then suffix (not overlapping it), both cut back to whole code points.
  std::size_t pre = detail::common_prefix(a, b);
  while (pre > 0 && ((pre < a.size() && continuation(a[pre])) || (pre < b.size() && continuation(b[pre])))) --pre;
  std::size_t suf = detail::common_suffix(a, b, std::min(a.size(), b.size()) - pre);
  while (suf > 0 && continuation(a[a.size() - suf])) --suf;
  // Only the middle of the new value is checked: its prefix and suffix are bytes of the old text, whole
  // code points (the cuts above), so its first invalid byte, if any, lies in the middle.
  const std::u32string x = detail::code_points_or_throw(a.substr(pre, a.size() - pre - suf));
  std::u32string y;
  detail::decode_utf8_or_throw(b.substr(pre, b.size() - pre - suf), y, pre);
  const std::size_t offset = code_point_count(a.substr(0, pre));  // code points in the prefix
  std::uint64_t budget = detail::diff_budget(doc.size() + doc.size() - x.size() + y.size());  // as for the whole values
  std::vector<detail::hunk> hunks = detail::myers_diff(x.data(), x.size(), y.data(), y.size(), budget);
  for (detail::hunk& h : hunks) h.a_pos += offset;
  return detail::apply_hunks(doc, hunks, y.data());
}

/// Makes `doc` equal to `values` with the fewest inserted and removed elements (equal = same bytes).
inline local_change replace_array(array& doc, const std::vector<std::string>& values) {
  const std::vector<std::string> old = doc.values();
  // Compare small integers instead of strings: equal values get equal ids.
  std::unordered_map<std::string_view, std::uint32_t> ids;
  auto to_ids = [&](const std::vector<std::string>& v) {
    std::vector<std::uint32_t> out;
    out.reserve(v.size());
    for (const std::string& s : v) out.push_back(ids.try_emplace(s, static_cast<std::uint32_t>(ids.size())).first->second);
    return out;
  };
  const std::vector<std::uint32_t> a = to_ids(old), b = to_ids(values);
  return detail::apply_hunks(doc, detail::myers_diff(a.data(), a.size(), b.data(), b.size()), values.data());
}

}  // namespace folio
