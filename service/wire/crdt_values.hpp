// service/wire/crdt_values.hpp — a CRDT record's value on the wire (docs/API.md, the /v2/crdt endpoints): JSON in, checked against the
// record type's shape (with the contract's exact messages), applied by replace-by-value; the document's
// value out as JSON. Used by the handlers and by folio-cli. Thread-safety: free functions over values.
#pragma once

#include <folio/document.hpp>
#include <rapidjson/document.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "wire/json.hpp"

namespace folio::service {

/// A new value, checked against its type's shape.
struct new_value {
  folio::record_type type;
  std::string_view text;                      // text: the request's own string (no copy), valid while its JSON lives
  std::vector<std::string> array;             // array: canonical JSON objects
  std::map<std::string, std::string> map;     // map: key -> canonical JSON
  folio::markup::flat_fragment xml;           // xml
};

/// `type`: one of "text", "map", "array", "xml"; else INVALID_ARGUMENT.
folio::record_type parse_type(const rapidjson::Value& v);
/// A value of `type` ("Data must be a string for type text.", ... as api_error(INVALID_ARGUMENT)); a
/// text is a view of `v`'s string, so `v` must outlive the result.
new_value parse_value(folio::record_type type, const rapidjson::Value& v);
/// The rule for values a client's ops give an array item or a map entry (document::apply's check):
/// one JSON value, an object for arrays, as parse_json takes a body (valid UTF-8, nesting, no
/// duplicate keys). Answers why not, or "" — so that every record's value stays JSON on the way out.
std::string json_value_rule(folio::record_type type, std::string_view value);
/// Replaces the document's value by `v` through CRDT operations (the local change made).
folio::local_change replace(folio::document& d, const new_value& v);
/// The value `d` holds as a new value of its type (a version's value, restored into the record); a
/// text's characters are kept in `text`, which must outlive the result. O(size of the value).
new_value value_of_document(const folio::document& d, std::string& text);
/// The document's value as the API returns it (`data` of a record), as JSON. O(size of the value).
std::string value_json(const folio::document& d);

}  // namespace folio::service
