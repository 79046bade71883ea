// service/platform/nginx_query.hpp — a query string read exactly as nginx reads it (nginx/folio.conf:
// $arg_<name>, then set_unescape_uri), so that the channel id nginx computes for a subscriber and the
// responder's differ only when their secrets do (the channel_mismatch log line). Used by the subscribe
// authorization (crdt/subscribe.cpp) and by the credentials' `token` parameter (server.hpp, identify).
// Thread-safety: free functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace folio::service {

/// nginx's $arg_<name> (ngx_http_arg): the value of the first '&'-separated parameter whose name is
/// `name` with ASCII letters' case ignored, followed by '='; nullopt when there is none.
std::optional<std::string_view> nginx_arg(std::string_view query, std::string_view name);

/// set-misc's set_unescape_uri (its ngx_unescape_uri_patched, component mode): '+' is a space, "%XX" a
/// byte. Malformed escapes are not refused but dropped as it drops them: a '%' before a byte that is
/// not a hex digit is dropped (the byte is kept as it is), a '%' and one hex digit followed by another
/// byte are dropped with that byte, and a '%' with its digit at the end is dropped.
std::string nginx_unescape(std::string_view v);

/// A query's id, as nginx decodes it, with the id rules (fields.hpp); absent and empty both throw
/// api_error(INVALID_ARGUMENT, missing_message).
std::string query_param(std::string_view query, std::string_view name, const char* missing_message);

}  // namespace folio::service
