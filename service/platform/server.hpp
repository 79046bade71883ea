// service/platform/server.hpp — the JSON API as a function from request to response (docs/API.md).
//
// `service::handle` is everything between libfcgi and SQLite: routing, the order of checks (path,
// method, credentials before the body, content type, body size, envelope), the endpoints, and the one
// mapping of failures to HTTP codes and JSON error bodies. It never throws; an unexpected failure is a
// 500 INTERNAL with a log line. Handlers are testable on a temporary database without a socket.
// Thread-safety: `handle` may run on many threads at once, each with its own `database`; the shared
// document cache locks per record.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "platform/auth.hpp"
#include "wire/body_output.hpp"
#include "platform/client_token.hpp"

#include "crdt/doc_cache.hpp"
#include "platform/metrics.hpp"
#include "crdt/publish.hpp"
#include "platform/database.hpp"

namespace folio::service {

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
};

struct route;  ///< an endpoint of the router (router.cpp)

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

struct config {
  std::size_t max_body = std::size_t(4) << 20;     ///< bytes; also enforced by nginx
  std::size_t cache_bytes = std::size_t(256) << 20;  ///< decoded documents kept in memory
  std::chrono::milliseconds auth_ttl{2000};  ///< how long a checked key + token pair is trusted without the database
  /// A request's time budget from when nginx sent it; below nginx's fastcgi_read_timeout (60 s), so a
  /// request nginx gave up on never commits afterwards (folio-fcgi sets request::deadline with it).
  std::chrono::milliseconds request_timeout{50000};
  live_config live;  ///< channel secret and nginx's publisher socket (docs/API.md, crdt/sync and crdt/subscribe)
};

/// Operators' endpoints, answered without credentials (nginx lets only loopback reach them):
///   GET /healthz        readiness: 200 when the database takes a write, else 503 UNAVAILABLE naming why
///   GET /healthz?live   liveness: 200 whenever the responder answers
///   GET /metrics        Prometheus text (metrics.hpp)

class service {
 public:
  explicit service(config c);
  const config& settings() const noexcept { return config_; }
  doc_cache& cache() noexcept { return cache_; }
  publisher& live() noexcept { return publisher_; }

  metrics& stats() noexcept { return metrics_; }

  /// The client-token key ring (client_token.hpp) from now on; requests in flight keep the one they
  /// started with. Without one, minting and client tokens answer 503 UNAVAILABLE.
  void set_client_keys(std::shared_ptr<const key_ring> ring);
  std::shared_ptr<const key_ring> client_keys() const;

  /// Answers one request, counts it in the metrics and writes its access line. Never throws.
  response handle(database& db, const request& r);
  /// Answers nginx's nchan_authorize_request for GET /v2/crdt/subscribe (`r.query`, `r.channel`):
  /// 200 to let the subscriber in; otherwise the JSON error nginx passes to the client — the same
  /// credentials rules as every endpoint, and a record of another tenant is as missing as no record.
  /// Never throws.
  response authorize_subscriber(database& db, const request& r);

 private:
  response answer(database& db, const request& r, const route* rt, std::string& key_id);
  response authorize(database& db, const request& r, std::string& key_id);
  response health(database& db, const request& r);
  response metrics_page(database& db);
  /// Times `f`, then counts and logs its response under `endpoint`.
  template <class F>
  response observed(std::string_view endpoint, const request& r, F&& f);
  /// authenticate(), remembered for auth_ttl: a revoked or expired credential stops working within
  /// that time. Failures are not remembered (they cost the same as a database check).
  std::optional<principal> check_credentials(database& db, const request& r);
  /// The caller: an API key + auth token (check_credentials), or a client token from the
  /// Authorization header (or, with `query_token`, the subscribe query's `token`). 401 / 503 api_error.
  principal identify(database& db, const request& r, bool query_token);
  principal client_principal(std::string_view token);

  struct remembered {
    principal who;
    std::chrono::steady_clock::time_point until;
  };
  config config_;
  doc_cache cache_;
  publisher publisher_;
  metrics metrics_;
  double start_time_;
  std::mutex auth_mu_;
  std::unordered_map<std::string, remembered> auth_cache_;
  mutable std::mutex keys_mu_;
  std::shared_ptr<const key_ring> client_keys_;
};

/// Current time as ISO 8601 UTC with milliseconds ("2025-01-20T10:30:00.000Z").
std::string now_iso();
/// `unix_ms` (milliseconds since the epoch) in that form.
std::string iso_time(std::int64_t unix_ms);
/// Milliseconds since the epoch now.
std::int64_t now_unix_ms();

}  // namespace folio::service
