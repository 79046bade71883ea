// service/platform/server.hpp — the JSON API as a function from request to response (docs/API.md), the
// part every family shares (docs/SERVICE.md):
//
// `server::handle` is everything between libfcgi and a family's handler: the route table (routes.hpp,
// filled by the families), the order of checks (path, method, credentials before the body, content
// type, body size, envelope; server.cpp), the operators' endpoints (health.cpp) and the one mapping of
// failures to HTTP codes and JSON error bodies (failure_response). It never throws; an unexpected
// failure is a 500 INTERNAL with a log line. Who is calling is answered by identify() (credentials.cpp):
// an API key + auth token, remembered for auth_ttl, or a client token checked against the key ring and
// the set of revoked API keys (api_key_revoked).
// Handlers are testable on a temporary database without a socket.
// Thread-safety: `handle` may run on many threads at once, each with its own `database`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "platform/auth.hpp"
#include "platform/client_token.hpp"
#include "platform/config.hpp"
#include "storage/database.hpp"
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

/// The outcome of one check of a request's credentials (server::identify): the caller, or the failure
/// to answer, and when it was checked.
struct identification {
  std::optional<principal> who;
  std::exception_ptr failure;
  std::chrono::steady_clock::time_point at;
};

class server {
 public:
  /// The platform with its own route (/v2/auth/token); the families add theirs to routes().
  explicit server(config c);
  const config& settings() const noexcept { return config_; }
  route_table& routes() noexcept { return routes_; }
  metrics& stats() noexcept { return metrics_; }
  /// Adds a family's gauges to /metrics (the document cache's, the publisher's), read at every scrape.
  void add_gauges(std::function<void(metrics::gauges&)> fill) { gauges_.push_back(std::move(fill)); }

  /// After-response hooks: work a family defers until a request's answer has been handed to nginx
  /// (the CRDT family: its publishes, crdt/publish/publisher.hpp answer_first). `hook()` runs on the request's
  /// thread as the request starts and returns what to run once its answer has gone (or nothing).
  /// The FastCGI loop brackets each request with an answer_scope and knows nothing of what the hooks do.
  /// Add hooks before the first request.
  using after_response_hook = std::function<std::function<void()>()>;
  void add_after_response(after_response_hook hook) { after_response_.push_back(std::move(hook)); }
  /// One request's after-response hooks: begun on construction; answered() (or the destructor, at the
  /// latest) runs what they returned, in the reverse order, once. On the request's thread; not movable.
  class answer_scope {
   public:
    explicit answer_scope(server& s);
    ~answer_scope() { answered(); }
    answer_scope(const answer_scope&) = delete;
    answer_scope& operator=(const answer_scope&) = delete;
    void answered() noexcept;

   private:
    std::vector<std::function<void()>> after_;
  };

  /// The client-token key ring (client_token.hpp) from now on; requests in flight keep the one they
  /// started with. Without one, minting and client tokens answer 503 UNAVAILABLE.
  void set_client_keys(std::shared_ptr<const key_ring> ring);
  std::shared_ptr<const key_ring> client_keys() const;

  /// Revoked API keys (folio-admin revoke-key). A client token carries no database row but names its
  /// tenant, the API key that minted it; a client token of a revoked key is refused (401). Each
  /// responder keeps the set of revoked key ids, read from the database with the time the read began:
  /// watch_revoked_keys re-reads it every revocation_refresh / 4 (the tick), and a check that finds the
  /// set older than revocation_refresh reads it first itself (so the bound holds without the watch, or
  /// while it is late). A revocation committed at time R is therefore seen by every check from R +
  /// revocation_refresh on, on every node. Cost: a check is one hash lookup under a mutex; a read is
  /// one query returning the revoked key ids through a partial index of the revoked keys (linear in
  /// them; keys are never un-revoked).
  /// One read runs at a time, shared: a check that needs the set while another thread reads it waits
  /// for that read (never past its request's deadline: deadline_exceeded), and takes its outcome. A
  /// failed read is remembered for a tick: until then a check that needs the set fails at once with it
  /// (store_error, 503 UNAVAILABLE) instead of reading, so with the database down at most one thread
  /// waits on it at a time (the watch's tick, or the first check after the tick, tries again).
  ///
  /// Reads the revoked keys now (or takes a read that began now, on another thread) and returns them.
  /// A database failure throws (store_error), keeping the previous set and its age.
  std::vector<std::string> read_revoked_keys(database& db);
  /// Whether `key_id` was revoked as of the last read (no database; for the publisher's sweeps).
  bool api_key_revoked(std::string_view key_id) const;
  /// The same, reading the revoked keys first when the last read began revocation_refresh ago or more
  /// (client tokens, and minting them: a key trusted from auth_cache_ mints no token once it is seen revoked).
  bool api_key_revoked(database& db, std::string_view key_id);
  /// Reads the revoked keys every tick until `stop`, on a connection of its own that `open` makes
  /// (folio-fcgi: a new database connection), calling `revoked()` after a read that found keys this
  /// watch had not seen revoked yet (folio-fcgi: a publisher sweep, ending their client tokens' open
  /// streams; a request's own read does not count as the watch's). A connection that cannot be opened,
  /// or a read that fails, is logged (once per run of failures) and tried again — the connection made
  /// anew — after a backoff that doubles from one tick to at most 2 x revocation_refresh (or the
  /// tick): the watch stops only when told. Runs on a thread of its own; returns within a tick of `stop`
  /// (plus a read or an open under way).
  void watch_revoked_keys(const std::function<std::unique_ptr<database>()>& open, const std::function<void()>& revoked, const std::atomic<bool>& stop);

  /// Tests' hooks into the reads of the revoked keys (none in production): `before_read` runs as a read
  /// begins, outside any lock (it may throw a store_error, as a failing database would); `waiting` runs
  /// when a check starts waiting for another thread's read (with the set's mutex held: signal, never block).
  struct revocation_hooks {
    std::function<void()> before_read, waiting;
  };
  void set_revocation_hooks(revocation_hooks h);

  /// Answers one request, counts it in the metrics and writes its access line. Never throws.
  response handle(database& db, const request& r);

  /// The caller: an API key + auth token (check_credentials), or a client token from the
  /// Authorization header (or, with `query_token`, the subscribe query's `token`). 401 / 503 api_error.
  principal identify(database& db, const request& r, bool query_token);

  /// The tenant a request counts against in folio-fcgi's --tenant-workers (worker_shares.hpp): the
  /// caller's key id when the request is for an endpoint and its credentials are good; "" otherwise
  /// (operators' endpoints, unknown paths, failed credentials: answered without counting). Reads only
  /// the parameters, not the body. The check's outcome (the caller, or the failure) goes into
  /// r.identified, and handle() answers with it, so a request's credentials are checked once — unless
  /// the request then waited revocation_refresh or more for a worker: handle() checks them again, so
  /// that a revocation is seen by every request that starts running revocation_refresh after it.
  std::string tenant_of(database& db, request& r);
  /// How many times identify() has checked credentials (in this process; tests count it).
  std::uint64_t identifications() const noexcept { return identifications_.load(std::memory_order_relaxed); }
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
  principal client_principal(database& db, std::string_view token);
  /// The caller of a request for an endpoint: r.identified when admission checked it less than
  /// revocation_refresh ago, else identify().
  principal caller_of(database& db, const request& r);
  struct revoked_set {
    std::unordered_set<std::string> ids;
    std::chrono::steady_clock::time_point read_at;  ///< when the read that filled `ids` began
  };
  /// A failed read of the revoked keys, remembered until `retry_at` (a tick after it ended).
  struct failed_read {
    failure kind;
    std::string what;
    std::chrono::steady_clock::time_point retry_at;
    std::uint64_t read;  ///< which read failed (revoked_reads_ when it ended)
  };
  /// The set as of a read begun at `since` or later: revoked_ if it is that recent, else the outcome of
  /// the read under way (waited for until db's deadline), else a read of its own — unless a failed read
  /// is remembered and `retry` is false: then that failure, at once. Throws store_error or deadline_exceeded.
  std::shared_ptr<const revoked_set> revoked_keys(database& db, std::chrono::steady_clock::time_point since, bool retry);
  std::chrono::milliseconds revocation_tick() const;  ///< the watch's period: a quarter of revocation_refresh, never zero

  struct remembered {
    principal who;
    std::chrono::steady_clock::time_point until;
  };
  config config_;
  route_table routes_;
  metrics metrics_;
  std::vector<std::function<void(metrics::gauges&)>> gauges_;
  std::vector<after_response_hook> after_response_;
  double start_time_;
  std::mutex auth_mu_;
  std::unordered_map<std::string, remembered> auth_cache_;
  mutable std::mutex keys_mu_;
  std::shared_ptr<const key_ring> client_keys_;
  mutable std::mutex revoked_mu_;  ///< guards the members below
  std::condition_variable revoked_read_ended_;
  std::shared_ptr<const revoked_set> revoked_;  ///< null before the first read
  bool revoked_reading_ = false;                ///< a read is under way (one at a time: reads replace the set in order)
  std::uint64_t revoked_reads_ = 0;             ///< reads ended, failed or not
  std::optional<failed_read> revoked_failure_;  ///< the last read's failure, if it failed
  revocation_hooks revocation_hooks_;
  std::atomic<std::uint64_t> identifications_{0};
};

/// The answer to a failure `e` (an exception caught while answering): an api_error as its code and
/// message, a storage failure or a passed deadline as what the caller may do about it (the details go
/// to the log), anything else 500 INTERNAL with a log line. The one mapping of failures to answers.
response failure_response(const std::exception_ptr& e);

}  // namespace folio::service
