// service/platform/fields.hpp — reading the fields of a request's `data` object, with the contract's id rules
// (docs/API.md, "Every call": non-empty UTF-8, at most 256 bytes, no control characters) and its exact messages.
// Every failure is an api_error(INVALID_ARGUMENT) naming the field. Thread-safety: free functions.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/status.hpp"

namespace folio::service {

inline constexpr std::size_t max_id_bytes = 256;
inline constexpr std::size_t max_filter_ids = 1000;

/// The member `field` of `data`, or nullptr when it is absent or null.
const rapidjson::Value* field_value(const rapidjson::Value& data, const char* field);
/// "2025-01-20T10:30:00.000Z": ISO 8601 UTC with milliseconds, a real calendar date (docs/API.md, "Every call").
bool is_timestamp(std::string_view s);
/// Milliseconds since the epoch of such a timestamp; nullopt when !is_timestamp(s).
std::optional<std::int64_t> timestamp_ms(std::string_view s);
/// An optional timestamp (absent or null: nullopt); `what` names it in the message.
std::optional<std::string> optional_timestamp(const rapidjson::Value& data, const char* field, const std::string& what);

/// The rule an id breaks ("must not be empty.", ...), or nullptr for a valid id.
const char* id_problem(std::string_view value) noexcept;
/// Checks an id's rules; `what` names it in the message ("<what> <id_problem>").
void check_id(const std::string& value, const std::string& what);
/// A required id: absent, null or "" gives `missing_message` (the reference API's wording).
std::string required_id(const rapidjson::Value& data, const char* field, const char* missing_message);
/// An optional id (absent or null: nullopt).
std::optional<std::string> optional_id(const rapidjson::Value& data, const char* field);
/// An optional array of ids, at most 1000, as reads take it: absent, null or empty is no filter (an
/// empty list).
std::vector<std::string> id_list(const rapidjson::Value& data, const char* field);
/// The same as writes and deletes take it: absent is nullopt, and a list that is present selects
/// exactly its members, so an empty one selects nothing (never everything; docs/API.md). null is
/// refused: a client that sends null for "no ids" must not select by the other fields, or all.
std::optional<std::vector<std::string>> selected_ids(const rapidjson::Value& data, const char* field);
/// A page's `pageSize`: absent or null is `default_size`; else a whole number from 1 to `max_size`, or
/// 400 `pageSize must be a whole number from 1 to 1000.` (the maximum named).
std::int64_t page_size(const rapidjson::Value& data, std::int64_t default_size, std::int64_t max_size = 1000);
/// A member name as a message shows it: at most 64 bytes (cut at a UTF-8 character's start), with
/// control characters, '"' and '\\' shown as '?'.
std::string shown_name(std::string_view name);
/// 400 INVALID_ARGUMENT `Unknown field "<name>"; <takes>.` for the first member of `data` whose name is
/// not in `known`. Linear in the members.
void check_known_fields(const rapidjson::Value& data, std::span<const std::string_view> known, std::string_view takes);
/// The member `field` of a write's or delete's selection: nullptr when absent; null is refused (as in
/// selected_ids).
const rapidjson::Value* selection(const rapidjson::Value& data, const char* field);

}  // namespace folio::service
