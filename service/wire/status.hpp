// service/wire/status.hpp — the service's error statuses and the one place that maps them to HTTP
// (docs/API.md, "Every call": the callable-function convention). Handlers fail with `api_error`; the server (platform/server.cpp, failure_response) turns
// it into the JSON error body.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace folio::service {

enum class status {
  invalid_argument,
  failed_precondition,
  out_of_range,
  unauthenticated,
  permission_denied,
  not_found,
  already_exists,
  aborted,
  resource_exhausted,
  internal,
  unavailable,
};

inline std::string_view status_name(status s) {
  switch (s) {
    case status::invalid_argument: return "INVALID_ARGUMENT";
    case status::failed_precondition: return "FAILED_PRECONDITION";
    case status::out_of_range: return "OUT_OF_RANGE";
    case status::unauthenticated: return "UNAUTHENTICATED";
    case status::permission_denied: return "PERMISSION_DENIED";
    case status::not_found: return "NOT_FOUND";
    case status::already_exists: return "ALREADY_EXISTS";
    case status::aborted: return "ABORTED";
    case status::resource_exhausted: return "RESOURCE_EXHAUSTED";
    case status::internal: return "INTERNAL";
    case status::unavailable: return "UNAVAILABLE";
  }
  return "INTERNAL";
}

inline int http_code(status s) {
  switch (s) {
    case status::invalid_argument:
    case status::failed_precondition:
    case status::out_of_range: return 400;
    case status::unauthenticated: return 401;
    case status::permission_denied: return 403;
    case status::not_found: return 404;
    case status::already_exists:
    case status::aborted: return 409;
    case status::resource_exhausted: return 429;
    case status::internal: return 500;
    case status::unavailable: return 503;
  }
  return 500;
}

/// A failure a handler reports to the caller: a status and a message naming the field or rule.
struct api_error {
  status code;
  std::string message;
  int http = 0;  ///< overrides http_code(code) when set (413 for an oversized body)
  api_error(status c, std::string m, int h = 0) : code(c), message(std::move(m)), http(h) {}
};

}  // namespace folio::service
