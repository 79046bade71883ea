// service/annotations/model.hpp — the shapes of comment annotations and comments (docs/API.md, "Comment annotations"):
// checking a request's items into values, and the JSON the store keeps and the API returns.
//
// An annotation body is written in one order (annotationId, location, from, color, status, context,
// createdAt, lastUpdated); a comment body as (commentId, commentText, commentHtml, from, createdAt,
// lastUpdated, type). A stored body is itself a valid request item, so updates read it back through
// the same checks and write it out again through the same writer. Failures are api_error
// (INVALID_ARGUMENT) with a message naming the field relative to the item ("from.userId is required.").
// Thread-safety: free functions.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::service {

inline constexpr std::size_t max_annotations_per_add = 100;
inline constexpr std::size_t max_comments_per_call = 100;
inline constexpr std::size_t max_comment_bytes = 64 * 1024;  ///< commentText, commentHtml each
inline constexpr std::size_t max_context_bytes = 16 * 1024;  ///< context, as canonical JSON
inline constexpr std::size_t max_short_text = 256;           ///< names, emails, colours, status fields
inline constexpr std::int64_t max_comment_id = (std::int64_t(1) << 53) - 1;  ///< exact in every JSON reader

struct user {
  std::string id, name, email;
};

struct annotation_status {
  std::string id = "OPEN", name = "Open", color = "#625DF5", type = "default";
};

struct annotation_location {
  std::string id;
  std::optional<std::string> name;  ///< locationName
};

struct comment_value {
  std::optional<std::int64_t> id;  ///< generated when absent
  std::string text, html, type = "text";
  std::optional<user> from;        ///< the annotation's author when absent (add only)
  std::optional<std::string> created_at, last_updated;  ///< the write's time when absent
};

struct annotation_value {
  std::optional<std::string> id;  ///< generated when absent
  std::optional<annotation_location> location;
  user from;
  std::string color;
  annotation_status status;
  std::optional<std::string> context;  ///< canonical JSON object
  std::optional<std::string> created_at, last_updated;
  std::vector<comment_value> comments;
};

/// `updatedData` of /v2/commentannotations/update: each field present replaces the stored one;
/// `location` and `context` may be null to remove them.
struct annotation_update {
  std::optional<annotation_status> status;
  std::optional<std::optional<annotation_location>> location;
  std::optional<std::string> color;
  std::optional<user> from;
  std::optional<std::optional<std::string>> context;
};

/// An item of `commentAnnotations` (or a stored body). Comments are checked too unless `with_comments` is false.
annotation_value parse_annotation(const rapidjson::Value& v, bool with_comments = true);
/// An item of `commentData` (or a stored body); `path` prefixes field names in messages ("commentData[2].").
comment_value parse_comment(const rapidjson::Value& v, const std::string& path, bool from_required);
annotation_update parse_annotation_update(const rapidjson::Value& v);
/// A `commentId` value: a whole number in [0, 2^53 - 1]; `what` names it in the message.
std::int64_t parse_comment_id(const rapidjson::Value& v, const std::string& what);

/// The stored body (no comments); id, createdAt and lastUpdated must be set.
std::string annotation_body(const annotation_value& a);
/// The stored body of a comment; id, from, createdAt and lastUpdated must be set.
std::string comment_body(const comment_value& c);
/// A stored body read back (it was written by the functions above).
annotation_value stored_annotation(const std::string& body);
comment_value stored_comment(const std::string& body);

/// A fresh annotation id: 20 URL-safe characters, the creation time in milliseconds (so ids of later
/// calls sort after earlier ones) then 72 random bits.
std::string random_annotation_id();
/// The same at `unix_ms` (milliseconds since the epoch, below 2^48): ids compare as their times do, and
/// ids of one millisecond differ in their random bits.
std::string random_annotation_id(std::int64_t unix_ms);

}  // namespace folio::service
