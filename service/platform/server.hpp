// service/platform/server.hpp — the JSON API as a function from request to response (docs/API.md), the
// part every family shares (docs/SERVICE.md):
//
// `server::handle` is everything between libfcgi and a family's handler: the route table (routes.hpp,
// filled by the families), the order of checks (path, method, credentials before the body, content
// type, body size, envelope; server.cpp), the operators' endpoints (health.cpp) and the one mapping of
// failures to HTTP codes and JSON error bodies (failure_response). It never throws; an unexpected
// failure is a 500 INTERNAL with a log line. Who is calling is answered by identify() (credentials.cpp):
// an API key + auth token, remembered for auth_ttl, or a client token checked against the key ring.
// Handlers are testable on a temporary database without a socket.
// Thread-safety: `handle` may run on many threads at once, each with its own `database`.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "platform/auth.hpp"
#include "platform/client_token.hpp"
#include "platform/config.hpp"
#include "platform/database.hpp"
#include "platform/log.hpp"
#include "platform/metrics.hpp"
#include "platform/request.hpp"
#include "platform/routes.hpp"
#include "wire/status.hpp"

namespace folio::service {

/// Operators' endpoints, answered without credentials (nginx lets only loopback reach them):
///   GET /healthz        readiness: 200 when the database takes a write, else 503 UNAVAILABLE naming why
///   GET /healthz?live   liveness: 200 whenever the responder answers
///   GET /metrics        Prometheus text (metrics.hpp)

class server {
 public:
  /// The platform with its own route (/v2/auth/token); the families add theirs to routes().
  explicit server(config c);
  const config& settings() const noexcept { return config_; }
  route_table& routes() noexcept { return routes_; }
  metrics& stats() noexcept { return metrics_; }
  /// Adds a family's gauges to /metrics (the document cache's, the publisher's), read at every scrape.
  void add_gauges(std::function<void(metrics::gauges&)> fill) { gauges_.push_back(std::move(fill)); }

  /// The client-token key ring (client_token.hpp) from now on; requests in flight keep the one they
  /// started with. Without one, minting and client tokens answer 503 UNAVAILABLE.
  void set_client_keys(std::shared_ptr<const key_ring> ring);
  std::shared_ptr<const key_ring> client_keys() const;

  /// Answers one request, counts it in the metrics and writes its access line. Never throws.
  response handle(database& db, const request& r);

  /// The caller: an API key + auth token (check_credentials), or a client token from the
  /// Authorization header (or, with `query_token`, the subscribe query's `token`). 401 / 503 api_error.
  principal identify(database& db, const request& r, bool query_token);

  /// The tenant a request counts against in folio-fcgi's --tenant-workers (worker_shares.hpp): the
  /// caller's key id when the request is for an endpoint and its credentials are good; "" otherwise
  /// (operators' endpoints, unknown paths, failed credentials: answered without counting). Reads only
  /// the parameters, not the body; the credentials check is remembered, so handle() repeats it cheaply.
  std::string tenant_of(database& db, const request& r);
  /// The answer to a request its tenant's share of the workers kept from running: `refused` at once,
  /// `share` requests of its tenant running and no room for it to wait (429 RESOURCE_EXHAUSTED), or
  /// one whose deadline passed while it waited (503 UNAVAILABLE, as any request past its deadline).
  /// Counted and logged like every answer.
  response over_share(const request& r, const std::string& tenant, unsigned share, bool refused);

  /// Runs `answer` (a function of the caller's key id, which it sets, to a response), then counts and
  /// logs its response under `endpoint` with its duration.
  response observed(std::string_view endpoint, const request& r, const std::function<response(std::string& key_id)>& answer);

 private:
  response answer(database& db, const request& r, const route* rt, std::string& key_id);
  response health(database& db, const request& r);
  response metrics_page(database& db);
  /// authenticate(), remembered for auth_ttl: a revoked or expired credential stops working within
  /// that time. Failures are not remembered (they cost the same as a database check).
  std::optional<principal> check_credentials(database& db, const request& r);
  principal client_principal(std::string_view token);

  struct remembered {
    principal who;
    std::chrono::steady_clock::time_point until;
  };
  config config_;
  route_table routes_;
  metrics metrics_;
  std::vector<std::function<void(metrics::gauges&)>> gauges_;
  double start_time_;
  std::mutex auth_mu_;
  std::unordered_map<std::string, remembered> auth_cache_;
  mutable std::mutex keys_mu_;
  std::shared_ptr<const key_ring> client_keys_;
};

/// The answer to a failure `e` (an exception caught while answering): an api_error as its code and
/// message, a storage failure or a passed deadline as what the caller may do about it (the details go
/// to the log), anything else 500 INTERNAL with a log line. The one mapping of failures to answers.
response failure_response(const std::exception_ptr& e);

}  // namespace folio::service
