// service/platform/request.hpp — a request as folio-fcgi hands it to the service (main.cpp reads the
// FastCGI parameters into it with fastcgi_params.hpp) and the answer it gets back. Nothing FastCGI here: tests build requests
// by hand.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "storage/database.hpp"
#include "wire/body_output.hpp"

namespace folio::service {

struct identification;  // server.hpp

struct request {
  std::string method, path, content_type, api_key, auth_token;
  std::string body;
  std::size_t content_length = 0;  ///< as announced by the client (CONTENT_LENGTH)
  std::string query;    ///< authorize and /healthz: the query string
  std::string channel;  ///< authorize only: the channel id nginx computed for it
  std::string request_id;  ///< nginx's $request_id, for the log lines of this request
  /// Nothing is committed after this (database::set_deadline): the client has been told the request
  /// failed by then (nginx's fastcgi_read_timeout). folio-fcgi sets it from when nginx sent the request.
  deadline_clock::time_point deadline = deadline_clock::time_point::max();
  /// Where a large answer is sent as it is produced (body_output.hpp); none: answers are whole.
  body_output::sink stream{};
  std::string authorization{};  ///< the Authorization header: "Bearer <client token>" (other schemes are ignored)
  /// Who the caller is, as admission found it before the body was read (server::tenant_of), for
  /// server::handle to use instead of checking the credentials again; null: not checked yet.
  std::shared_ptr<const identification> identified{};
};

struct response {
  response() = default;
  response(int h, std::string b) : http(h), body(std::move(b)) {}
  int http = 200;
  std::string body;
  std::string_view content_type = "application/json";
  std::string_view code = "OK";  ///< the error status name, for the access log
  std::string key_id;             ///< the authenticated caller's key id, for the access log
  bool streamed = false;   ///< part of the body went through request::stream already; `body` is the rest
  bool cut_short = false;  ///< failed after part of a 200 was streamed: drop the connection, send nothing more
};

}  // namespace folio::service
