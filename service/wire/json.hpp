// service/wire/json.hpp — request bodies in, response bodies out (RapidJSON).
//
// Parsing is iterative (no recursion on input depth), validates UTF-8, refuses strings that are not
// Unicode (a lone surrogate escape), nesting deeper than 64 levels and duplicate keys, and reports
// failures as api_error naming the field and the byte offset. Numbers (docs/API.md, "Every call") read as
// JavaScript reads them: integers that fit 64 bits exactly, every other number as the nearest double
// (correctly rounded), and are written back as the shortest text that reads as the same double. Values
// stored by the service (map values, array elements) are kept as canonical JSON: object keys sorted,
// no whitespace, so equal values have equal bytes. Thread-safety: free functions over values.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/body_output.hpp"
#include "wire/status.hpp"

namespace folio::service {

inline constexpr int max_json_depth = 64;

/// The writer of every response body and log line. Its stack allocator is a type of its own so that
/// RapidJSON 1.1.0's SSE2 specialisation for Writer<StringBuffer> does not apply: that scan takes bytes
/// from 0x1A to 0x1F for ordinary ones (it compares with 0x19, not 0x1F) and writes them unescaped,
/// which is not JSON. This writer's own scan is below.
struct json_writer_allocator : rapidjson::CrtAllocator {};
using json_writer = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>, json_writer_allocator>;

}  // namespace folio::service

namespace folio::service {

/// The number of bytes from `p` before the first that a JSON string cannot hold as it is ('"', '\\'
/// or a control character, 0x00-0x1F), at most `end - p`: sixteen bytes a test where SSE2 is (every
/// x86-64), with unaligned loads that never reach past `end`, then a byte at a time. The body reader's
/// scan (json.cpp) and json_writer's (below) both find their runs with it. O(run).
inline std::size_t plain_json_run(const char* p, const char* end) noexcept {
  const char* const begin = p;
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1F);
  for (; end - p >= 16; p += 16) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(s, quote), _mm_cmpeq_epi8(s, backslash)),
                                      _mm_cmpeq_epi8(_mm_max_epu8(s, control), control));  // s <= 0x1F
    if (const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(stop)); mask != 0)
      return static_cast<std::size_t>(p - begin) + static_cast<std::size_t>(__builtin_ctz(mask));
  }
#endif
  while (p < end && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) > 0x1F) ++p;
  return static_cast<std::size_t>(p - begin);
}

/// `n` bytes from `from` to `to` with fixed-size moves (two, overlapping, for n up to 32): the runs
/// between escapes are often a few bytes long, where a call to memcpy would cost more than the copy.
inline void copy_json_run(char* to, const char* from, std::size_t n) noexcept {
  if (n > 32) std::memcpy(to, from, n);
  else if (n >= 16) std::memcpy(to, from, 16), std::memcpy(to + n - 16, from + n - 16, 16);
  else if (n >= 8) std::memcpy(to, from, 8), std::memcpy(to + n - 8, from + n - 8, 8);
  else if (n >= 4) std::memcpy(to, from, 4), std::memcpy(to + n - 4, from + n - 4, 4);
  else if (n > 0) to[0] = from[0], to[n / 2] = from[n / 2], to[n - 1] = from[n - 1];
}

}  // namespace folio::service

/// json_writer's scan of a string for the next byte to escape: the run before it is copied whole
/// (plain_json_run); the byte itself goes through RapidJSON's own loop, which escapes as it always has
/// (short forms, else \u00XX). WriteString reserved room for the whole string before it scans. O(n).
template <>
inline bool rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>, folio::service::json_writer_allocator>::ScanWriteUnescapedString(
    rapidjson::StringStream& is, std::size_t length) {
  const std::size_t run = folio::service::plain_json_run(is.src_, is.head_ + length);
  folio::service::copy_json_run(os_->PushUnsafe(run), is.src_, run);
  is.src_ += run;
  return is.Tell() < length;
}

namespace folio::service {

/// 0 when `text` is Unicode as UTF-8: well-formed, no overlong forms, nothing beyond U+10FFFF, no
/// surrogate code points (U+D800-DFFF, which RapidJSON writes for a lone surrogate escape); 1 for
/// bytes that are not UTF-8; else the first surrogate's code point. O(n), runs of ASCII 32 bytes a
/// step (folio::ascii_run, the engine's UTF-8 copy uses it too).
unsigned unicode_problem(std::string_view text) noexcept;

/// Parses an untrusted body; throws api_error(INVALID_ARGUMENT) naming the rule it broke (`what`
/// names the text in the message for invalid JSON: "Body is not valid JSON: ..."). Strings are
/// scanned sixteen bytes at a time where SSE2 is (json.cpp). O(n).
rapidjson::Document parse_json(std::string_view body, std::string_view what = "Body");
inline rapidjson::Document parse_json(const char* body, std::string_view what = "Body") { return parse_json(std::string_view(body), what); }
/// parse_json for JSON the service stored itself (annotation and comment bodies): the same rules,
/// except that a surrogate code point is let through. Builds before the Unicode rule stored a lone
/// surrogate escape (\udc00) as the bytes ED B0 80; writes to such a thread keep working, and
/// `folio-admin check` (which reads with parse_json) reports the body.
rapidjson::Document parse_stored_json(std::string_view body);

/// Canonical bytes of a value: keys sorted (byte order), integers as they are, other numbers as
/// write_double writes them. Iterative.
std::string canonical_json(const rapidjson::Value& v);

/// A finite double as the shortest text that reads back as the same double (std::to_chars: "0.1",
/// "1e+300", "-0", "100" for 100.0); JSON.parse reads the same double from it (its text may differ from
/// JavaScript's own: "1.5e-07", "1e+20").
void write_double(json_writer& w, double d);

/// {"result":{"status":"success","message":...}} with `data` written by `write_data` when given,
/// into `out` (which `write_data` may flush between items); answers what `out` has not sent.
template <class F>
std::string success_body(body_output& out, std::string_view message, F&& write_data) {
  json_writer w(out.buffer());
  w.StartObject();
  w.Key("result");
  w.StartObject();
  w.Key("status");
  w.String("success");
  w.Key("message");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  if constexpr (!std::is_same_v<std::decay_t<F>, std::nullptr_t>) {
    w.Key("data");
    write_data(w);
  }
  w.EndObject();
  w.EndObject();
  return out.take();
}

/// The same, as a whole string.
template <class F>
std::string success_body(std::string_view message, F&& write_data) {
  body_output out;
  return success_body(out, message, std::forward<F>(write_data));
}

/// {"error":{"message":...,"status":...}}
std::string error_body(std::string_view message, std::string_view status);

inline void write_string(json_writer& w, std::string_view s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }
/// `items` as a JSON array of strings (stored lists: a version's authors, an endpoint's filters).
std::string json_string_array(const std::vector<std::string>& items);
/// The string, or null when absent.
inline void write_optional(json_writer& w, const std::optional<std::string>& s) {
  if (s)
    write_string(w, *s);
  else
    w.Null();
}

/// An object member "key": "value".
inline void write_member(json_writer& w, std::string_view key, std::string_view value) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  write_string(w, value);
}

/// An object member "key": "value", or "key": null when absent.
inline void write_optional_member(json_writer& w, std::string_view key, const std::optional<std::string>& value) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  write_optional(w, value);
}

}  // namespace folio::service
