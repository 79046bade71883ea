// folio/record_type.hpp — the four record types, numbered once: the number is the value type byte of
// every encoding (encoding.hpp, docs/FORMAT.md), the name is the service's `type` (docs/API.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace folio {

/// A record's type; the values are the encoding's value types (byte 4 of a batch or document).
enum class record_type : std::uint8_t { text = 1, array = 2, map = 3, xml = 4 };

/// Every record type, in the order of their numbers.
inline constexpr record_type all_record_types[] = {record_type::text, record_type::array, record_type::map, record_type::xml};

inline std::string_view to_string(record_type t) noexcept {
  switch (t) {
    case record_type::text:
      return "text";
    case record_type::array:
      return "array";
    case record_type::map:
      return "map";
    case record_type::xml:
      return "xml";
  }
  return "?";
}
/// The type named `s` ("text", "array", "map", "xml"), or nullopt.
inline std::optional<record_type> parse_record_type(std::string_view s) noexcept {
  for (record_type t : all_record_types)
    if (to_string(t) == s) return t;
  return std::nullopt;
}
/// The type numbered `n` (a value type byte, or a number from outside C++), or nullopt.
inline std::optional<record_type> record_type_of(std::uint64_t n) noexcept {
  for (record_type t : all_record_types)
    if (static_cast<std::uint64_t>(t) == n) return t;
  return std::nullopt;
}

}  // namespace folio
