// fcgi/service.hpp — the JSON API as a function from request to response (DESIGN.md §2–§5).
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
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "auth.hpp"

#include "doc_cache.hpp"
#include "publish.hpp"
#include "store.hpp"

namespace folio::service {

struct request {
  std::string method, path, content_type, api_key, auth_token;
  std::string body;
  std::size_t content_length = 0;  ///< as announced by the client (CONTENT_LENGTH)
  std::string query;    ///< authorize only: the subscribe request's query string
  std::string channel;  ///< authorize only: the channel id nginx computed for it
};

struct response {
  int http = 200;
  std::string body;
};

struct config {
  std::size_t max_body = std::size_t(4) << 20;     ///< bytes; also enforced by nginx
  std::size_t cache_bytes = std::size_t(256) << 20;  ///< decoded documents kept in memory
  std::chrono::milliseconds auth_ttl{2000};  ///< how long a checked key + token pair is trusted without the database
  live_config live;  ///< channel secret and nginx's publisher socket (DESIGN.md §6)
};

class service {
 public:
  explicit service(config c) : config_(c), cache_(c.cache_bytes), publisher_(c.live) {}
  const config& settings() const noexcept { return config_; }
  doc_cache& cache() noexcept { return cache_; }
  publisher& live() noexcept { return publisher_; }

  /// Answers one request. Never throws.
  response handle(database& db, const request& r);
  /// Answers nginx's nchan_authorize_request for GET /v2/crdt/subscribe (`r.query`, `r.channel`):
  /// 200 to let the subscriber in; otherwise the JSON error nginx passes to the client — the same
  /// credentials rules as every endpoint, and a record of another tenant is as missing as no record.
  /// Never throws.
  response authorize_subscriber(database& db, const request& r);

 private:
  /// authenticate(), remembered for auth_ttl: a revoked or expired credential stops working within
  /// that time. Failures are not remembered (they cost the same as a database check).
  std::optional<principal> check_credentials(database& db, const request& r);

  struct remembered {
    principal who;
    std::chrono::steady_clock::time_point until;
  };
  config config_;
  doc_cache cache_;
  publisher publisher_;
  std::mutex auth_mu_;
  std::unordered_map<std::string, remembered> auth_cache_;
};

/// Current time as ISO 8601 UTC with milliseconds ("2025-01-20T10:30:00.000Z").
std::string now_iso();

}  // namespace folio::service
