// service/platform/clock.hpp — the service's wall clock: timestamps as the API writes them (docs/API.md,
// "Every call": ISO 8601 UTC with milliseconds) and milliseconds since the epoch. Used by the handlers,
// the log and the tools; steady-clock deadlines live with the database (storage/database.hpp).
// Thread-safety: free functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio::service {

/// Current time as ISO 8601 UTC with milliseconds ("2025-01-20T10:30:00.000Z").
std::string now_iso();
/// `unix_ms` (milliseconds since the epoch) in that form.
std::string iso_time(std::int64_t unix_ms);
/// The same text without an allocation (the log writes one per line). O(1), no lock.
struct iso_chars {
  std::array<char, 32> text;
  std::size_t size = 0;
  std::string_view view() const noexcept { return {text.data(), size}; }
};
iso_chars iso_time_chars(std::int64_t unix_ms);
/// Milliseconds since the epoch now.
std::int64_t now_unix_ms();

}  // namespace folio::service
