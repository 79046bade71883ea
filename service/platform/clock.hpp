// service/platform/clock.hpp — the service's wall clock: timestamps as the API writes them (docs/API.md,
// "Every call": ISO 8601 UTC with milliseconds) and milliseconds since the epoch. Used by the handlers,
// the log and the tools; steady-clock deadlines live with the database (database.hpp).
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>

namespace folio::service {

/// Current time as ISO 8601 UTC with milliseconds ("2025-01-20T10:30:00.000Z").
std::string now_iso();
/// `unix_ms` (milliseconds since the epoch) in that form.
std::string iso_time(std::int64_t unix_ms);
/// Milliseconds since the epoch now.
std::int64_t now_unix_ms();

}  // namespace folio::service
