// folio-fcgi: the FastCGI responder. Flags, signals and the accept loop; everything else is in the
// folio_service library. A pool of worker threads, each with its own FCGX_Request and its own database
// connection (SQLite, or PostgreSQL when --db is a postgresql:// URI or a libpq conninfo), accepts on one
// unix socket; a tenant holds at most --tenant-workers of them (default: all but one), its requests
// beyond that wait without a thread, the last worker not running a request is kept for tenants with
// none running, and a free worker runs a waiting request only while another worker accepts
// (platform/worker_shares.hpp); one more thread, with a connection
// of its own, compacts records' logs off the request path (crdt/compactor.hpp). SIGTERM/SIGINT: stop accepting, let in-flight requests
// finish, exit 0. nginx's subscriber authorization (/_folio/authorize, an internal location) arrives
// on the same socket. Under systemd (Type=notify) it reports READY=1 once it listens, STOPPING=1 on
// a stop signal, and pets the watchdog while a worker can answer (deploy/systemd/folio-fcgi.service).
// One more thread sweeps presence: clients not refreshed for --presence-timeout leave (presence/family.hpp).
// SIGHUP reloads the client-token key file (--client-token-keys; a file that does not load keeps the
// keys in use, with an error line).
//
//   folio-fcgi --socket var/run/folio.sock --db var/folio.db|postgresql://... [--workers 4] [--tenant-workers 3] [--max-body 4194304]
//              [--channel-secret-file var/channel.secret --publish-socket var/run/nginx-publish.sock]
//              [--max-db-pages N] [--access-log on|off] [--request-timeout 50]
//              [--client-token-keys /etc/folio/client-token.keys] [--auto-version-quiet 30] [--auto-version-at-most 600]
//              [--versions-keep-all-hours 24] [--versions-hourly-days 30] [--history-days 30]
//              [--webhook-allow HOST|CIDR,...] [--webhook-retries 5s,5m,30m,2h,5h,10h,10h] [--webhook-timeout 15]
//              [--webhook-coalesce 5000] [--webhook-coalesce-max 30000] [--webhook-value-bytes 0] [--events-keep-days 30]
//              [--webhook-endpoints-max 20] [--webhook-queue-max 10000] [--webhook-sends-per-tenant 8]
//              [--presence-timeout 30] [--presence-redis unix:/path|host:port] [--presence-redis-password-file PATH]
//              [--presence-max-per-tenant 10000]
#include <fcgiapp.h>
#include <malloc.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "platform/clock.hpp"
#include "platform/fastcgi_params.hpp"
#include "platform/log.hpp"
#include "platform/worker_shares.hpp"
#include "responder.hpp"
#include "webhooks/address_policy.hpp"
#include "webhooks/sender.hpp"

namespace {

struct options {
  std::string socket = "var/run/folio.sock", db = "var/folio.db";
  unsigned workers = 4;
  unsigned tenant_workers = 0;     ///< 0: workers - 1 (at least 1)
  std::size_t max_body = std::size_t(4) << 20, cache_mb = 256, cache_entries = 0;
  std::string channel_secret_file, publish_socket;
  long long max_db_pages = 0;
  bool access_log = true;
  unsigned request_timeout_s = 50;
  std::string client_token_keys;
  folio::service::history_config history;
  folio::service::webhook_config webhooks;
  folio::service::presence_config presence;
  std::string presence_redis_password_file;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "folio-fcgi: %s\nusage: folio-fcgi [--socket PATH] [--db PATH|postgresql://...] [--workers N] [--tenant-workers N] [--max-body BYTES]\n"
               "                  [--cache-mb MB] [--cache-entries N] [--channel-secret-file PATH] [--publish-socket PATH] [--max-db-pages N] [--access-log on|off]\n"
               "                  [--request-timeout SECONDS] [--client-token-keys PATH] [--auto-version-quiet SECONDS] [--auto-version-at-most SECONDS]\n"
               "                  [--versions-keep-all-hours N] [--versions-hourly-days N] [--history-days N]\n"
               "                  [--webhook-allow HOST|CIDR,...] [--webhook-retries DURATION,...] [--webhook-timeout SECONDS]\n"
               "                  [--webhook-coalesce MS] [--webhook-coalesce-max MS] [--webhook-value-bytes N] [--events-keep-days N]\n"
               "                  [--webhook-endpoints-max N] [--webhook-queue-max N] [--webhook-sends-per-tenant N]\n"
               "                  [--presence-timeout SECONDS] [--presence-redis unix:/path|host:port] [--presence-redis-password-file PATH]\n"
               "                  [--presence-max-per-tenant N]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    auto number = [&](const std::string& v) -> unsigned long long {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end || n == 0) usage(("not a positive number: " + v).c_str());
      return n;
    };
    auto list = [&](const std::string& v) {  // comma-separated, spaces around an entry dropped
      std::vector<std::string> out;
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        const std::size_t b = v.find_first_not_of(' ', at), e = v.find_last_not_of(' ', comma - 1);
        out.push_back(b < comma && e != std::string::npos && e >= b ? v.substr(b, e - b + 1) : std::string());
        at = comma + 1;
      }
      return out;
    };
    auto duration = [&](const std::string& v) {  // a whole number with its unit: ms, s, m or h
      std::size_t digits = 0;
      while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
      const std::string unit = v.substr(digits);
      const long long scale = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60000 : unit == "h" ? 3600000 : 0;
      if (digits == 0 || digits > 9 || scale == 0) usage(("not a duration (a number and ms, s, m or h): " + v).c_str());
      const long long n = static_cast<long long>(number(v.substr(0, digits)));
      return std::chrono::milliseconds(n * scale);
    };
    if (a == "--socket") o.socket = value();
    else if (a == "--db") o.db = value();
    else if (a == "--workers") o.workers = static_cast<unsigned>(number(value()));
    else if (a == "--tenant-workers") o.tenant_workers = static_cast<unsigned>(number(value()));
    else if (a == "--max-body") o.max_body = number(value());
    else if (a == "--cache-mb") o.cache_mb = number(value());
    else if (a == "--cache-entries") o.cache_entries = number(value());
    else if (a == "--channel-secret-file") o.channel_secret_file = value();
    else if (a == "--publish-socket") o.publish_socket = value();
    else if (a == "--max-db-pages") o.max_db_pages = static_cast<long long>(number(value()));
    else if (a == "--access-log") {
      const std::string v = value();
      if (v != "on" && v != "off") usage("--access-log takes on or off");
      o.access_log = v == "on";
    }
    else if (a == "--request-timeout") o.request_timeout_s = static_cast<unsigned>(number(value()));
    else if (a == "--client-token-keys") o.client_token_keys = value();
    else if (a == "--auto-version-quiet") o.history.quiet = std::chrono::seconds(number(value()));
    else if (a == "--auto-version-at-most") o.history.at_most = std::chrono::seconds(number(value()));
    else if (a == "--versions-keep-all-hours") o.history.keep_all = std::chrono::hours(number(value()));
    else if (a == "--versions-hourly-days") o.history.hourly_for = std::chrono::hours(24 * number(value()));
    else if (a == "--history-days") o.history.history = std::chrono::hours(24 * number(value()));
    else if (a == "--webhook-allow") {
      o.webhooks.allow = list(value());
      try {
        folio::service::address_policy check(o.webhooks.allow);
      } catch (const std::invalid_argument& e) {
        usage((std::string("--webhook-allow: ") + e.what()).c_str());
      }
    }
    else if (a == "--webhook-retries") {
      o.webhooks.retries.clear();
      for (const std::string& d : list(value())) o.webhooks.retries.push_back(duration(d));
    }
    else if (a == "--webhook-timeout") o.webhooks.timeout = std::chrono::seconds(number(value()));
    else if (a == "--webhook-coalesce") o.webhooks.coalesce = std::chrono::milliseconds(number(value()));
    else if (a == "--webhook-coalesce-max") o.webhooks.coalesce_max = std::chrono::milliseconds(number(value()));
    else if (a == "--webhook-value-bytes") {
      const std::string v = value();
      o.webhooks.value_bytes = v == "0" ? 0 : number(v);
    }
    else if (a == "--events-keep-days") o.webhooks.keep = std::chrono::hours(24 * number(value()));
    else if (a == "--webhook-endpoints-max") o.webhooks.endpoints_per_tenant = number(value());
    else if (a == "--webhook-queue-max") o.webhooks.queued_per_endpoint = number(value());
    else if (a == "--webhook-sends-per-tenant") o.webhooks.sends_per_tenant = static_cast<unsigned>(number(value()));
    else if (a == "--presence-timeout") o.presence.timeout = std::chrono::seconds(number(value()));
    else if (a == "--presence-redis") o.presence.redis = value();
    else if (a == "--presence-redis-password-file") o.presence_redis_password_file = value();
    else if (a == "--presence-max-per-tenant") o.presence.per_tenant = number(value());
    else if (a == "--help" || a == "-h") usage("help");
    else usage(("unknown argument " + a).c_str());
  }
  if (o.tenant_workers > o.workers) usage("--tenant-workers must be at most --workers");
  if (o.webhooks.coalesce_max < o.webhooks.coalesce) usage("--webhook-coalesce-max must be at least --webhook-coalesce");
  return o;
}

const char* reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
  }
}

void put(FCGX_Request& req, std::string_view bytes) {
  while (!bytes.empty()) {  // FCGX_PutStr takes an int
    const int n = static_cast<int>(std::min<std::size_t>(bytes.size(), 1 << 30));
    if (FCGX_PutStr(bytes.data(), n, req.out) != n) return;  // the peer went away; FCGX_Finish_r ends it
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void respond(FCGX_Request& req, const folio::service::response& res) {
  if (res.cut_short) {  // part of a 200 was sent: end the connection without ending the response
    shutdown(req.ipcFd, SHUT_RDWR);
    return;
  }
  if (!res.streamed) {
    // FCGX_FPrintF knows no %zu: the head is built here.
    const std::string head = "Status: " + std::to_string(res.http) + " " + reason(res.http) + "\r\nContent-Type: " + std::string(res.content_type) +
                             "\r\nContent-Length: " + std::to_string(res.body.size()) + "\r\n\r\n";
    put(req, head);
  }
  put(req, res.body);
}

/// A streamed answer (body_output.hpp): a 200 whose length is not known in advance (nginx sends it
/// to the client chunked), its head before the first bytes.
folio::service::body_output::sink stream_to(FCGX_Request& req) {
  return [&req, head_sent = false](std::string_view bytes) mutable {
    if (!head_sent) put(req, "Status: 200 OK\r\nContent-Type: application/json\r\n\r\n"), head_sent = true;
    put(req, bytes);
  };
}

/// When the request's time budget ends: `timeout` after nginx sent it (FOLIO_REQUEST_START, nginx's
/// $msec: seconds since the epoch with milliseconds), or after now when nginx did not say.
folio::service::deadline_clock::time_point deadline_of(const std::string& start, std::chrono::milliseconds timeout) {
  using namespace std::chrono;
  const auto now = folio::service::deadline_clock::now();
  char* end = nullptr;
  const double sent = std::strtod(start.c_str(), &end);
  if (start.empty() || *end != '\0' || !(sent > 0)) return now + timeout;
  const double waited = duration<double>(system_clock::now().time_since_epoch()).count() - sent;  // in nginx's and our queues
  return now + timeout - duration_cast<milliseconds>(duration<double>(std::clamp(waited, 0.0, 3600.0)));
}

/// What the watchdog knows of a worker: when it took its current request (steady clock, ms), or idle
/// (waiting for one) or gone (its thread ended).
struct worker_state {
  static constexpr std::int64_t idle = 0, gone = -1;
  std::atomic<std::int64_t> busy_since_ms{idle};
};

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count() + 1;  // never idle's 0
}

/// One accepted request: its FastCGI connection and its parameters, read before its body (which
/// the worker that runs it reads), so that it can wait for a worker without holding one.
struct accepted {
  FCGX_Request fcgx{};
  folio::service::request r;
};
using shares_t = folio::service::worker_shares<accepted>;

/// Reads the parameters of the request just accepted into `a.r` (its body stays unread).
void prepare(accepted& a, folio::service::responder& svc) {
  a.r = {};
  const folio::service::request_params p = folio::service::read_params(a.fcgx.envp, a.r);
  a.r.deadline = deadline_of(p.start, svc.settings().request_timeout);
  a.r.content_length = std::strtoull(p.content_length.c_str(), nullptr, 10);
  a.r.stream = stream_to(a.fcgx);
}

void serve(accepted& a, folio::service::responder& svc, folio::service::database& db) {
  FCGX_Request& req = a.fcgx;
  folio::service::request& r = a.r;
  if (r.path == "/_folio/authorize")  // nginx's nchan_authorize_request for /v2/crdt/subscribe
    return respond(req, svc.authorize_subscriber(db, r));
  r.channel.clear();  // FOLIO_CHANNEL: the authorization hop's only (the channel id nginx computed)
  // Read at most the limit + 1 bytes: enough to know a body is too large without holding it.
  const std::size_t cap = svc.settings().max_body + 1;
  if (r.content_length <= svc.settings().max_body) {
    r.body.resize(std::min(r.content_length, cap));
    std::size_t got = 0;
    while (got < r.body.size()) {
      const int n = FCGX_GetStr(r.body.data() + got, static_cast<int>(std::min<std::size_t>(r.body.size() - got, 1 << 20)), req.in);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    r.body.resize(got);
  }
  respond(req, svc.handle(db, r));
}

/// Answers `a` (serve(), or `instead` when given) and ends its connection.
void run(accepted& a, folio::service::responder& svc, folio::service::database& db, const folio::service::response* instead = nullptr) {
  FCGX_Request& req = a.fcgx;
  {
    // What the families defer until the answer has gone (server.hpp, after-response hooks).
    folio::service::server::answer_scope after_response(svc.platform());
    if (instead) respond(req, *instead);  // its body stays unread: the lingering close below
    else serve(a, svc, db);
    // libfcgi ends a connection with a lingering close: shutdown, then a poll until nginx closes
    // its end (at most 2 s), so that unread request bytes cannot make the kernel reset the answer —
    // a wait and two context switches per request, with the worker idle meanwhile. When the
    // request has been read to its end (the body, then the empty record that ends it), nothing is
    // left to reset it: the request is "detached", which makes FCGX_Finish_r close at once.
    // Otherwise the after-response hooks run before that wait.
    if (!instead && FCGX_GetChar(req.in) == EOF && FCGX_GetError(req.in) == 0) FCGX_Detach(&req);
    else FCGX_FFlush(req.out), after_response.answered();  // the answer's bytes to nginx, then the hooks
    FCGX_Finish_r(&req);
  }
  try {
    db.tend_statistics();  // the query planner's statistics, after the answer has gone
  } catch (const std::exception& e) {
    folio::service::log::write("warn", "statistics_failed", std::string("the query planner's statistics were not refreshed: ") + e.what());
  }
}

/// Runs `a`, accepted under `tenant`, as worker_shares admits it: at once (then finish()), left
/// waiting, or refused (answered 429 at once). Returns the accepted-request object to accept into
/// next (a fresh one when `a` was left waiting).
std::unique_ptr<accepted> admit_and_run(std::unique_ptr<accepted> a, const std::string& tenant, shares_t& shares, folio::service::responder& svc,
                                        folio::service::database& db, int fd) {
  if (tenant.empty()) {
    run(*a, svc, db);
    return a;
  }
  switch (shares.admit(tenant, a)) {
    case shares_t::admission::wait: {
      auto fresh = std::make_unique<accepted>();
      FCGX_InitRequest(&fresh->fcgx, fd, 0);
      return fresh;
    }
    case shares_t::admission::refuse: {
      const folio::service::response refused = svc.platform().over_share(a->r, tenant, shares.share(), true);
      run(*a, svc, db, &refused);
      return a;
    }
    case shares_t::admission::run: break;
  }
  run(*a, svc, db);
  shares.finish(tenant);
  return a;
}

/// Runs a request that waited for a worker (worker_shares::next): answered 503 without running when
/// its deadline passed meanwhile. Then its hold passes on (finish).
void run_waited(std::unique_ptr<accepted> a, const std::string& tenant, shares_t& shares, folio::service::responder& svc, folio::service::database& db) {
  if (folio::service::deadline_clock::now() < a->r.deadline) {
    run(*a, svc, db);
  } else {
    const folio::service::response late = svc.platform().over_share(a->r, tenant, shares.share(), false);
    run(*a, svc, db, &late);
  }
  shares.finish(tenant);
}

/// The channel secret: the file's first line (hex from `openssl rand -hex 32`, as scripts/run makes it).
std::string read_secret(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line.size() < 32) {
    folio::service::log::write("error", "startup_failed", "cannot read a channel secret of at least 32 characters from " + path);
    std::exit(1);
  }
  return line;
}

/// Loads the client-token key file into `svc` (at start, and on SIGHUP); false, with an error line,
/// when it does not load (the keys in use stay).
bool load_client_keys(folio::service::responder& svc, const std::string& path) {
  try {
    auto ring = std::make_shared<const folio::service::key_ring>(folio::service::key_ring::load(path));
    const std::string what = std::to_string(ring->size()) + " key(s) from " + path + ", signing with " + ring->signer().id;
    svc.platform().set_client_keys(std::move(ring));
    // Open streams of tokens whose key left the ring end now (waited for a while, so that "loaded" in
    // the log means they were ended, but not long: signals wait meanwhile).
    svc.credentials_changed(std::chrono::seconds(5));
    folio::service::log::write("info", "client_token_keys_loaded", what);
    return true;
  } catch (const std::exception& e) {
    folio::service::log::write("error", "client_token_keys_failed", std::string("client-token keys not loaded: ") + e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  // Block the stop signals in every thread; the main thread waits for them with sigwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);  // reload the client-token keys
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Requests waiting for their tenant's share hold a connection each (up to 1,024, below): the soft
  // limit on open files is raised to the hard one.
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  // The C heap: at most two arenas, and blocks of 128 KiB or more always mmapped (returned to the
  // system when freed), so the memory glibc holds free stays below the live heap however many threads
  // allocate at once and however large the documents decoded and evicted (docs/OPERATIONS.md, "Memory").
  // The environment's MALLOC_ARENA_MAX and MALLOC_MMAP_THRESHOLD_ win.
  if (!std::getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 2);
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  folio::service::log::set_access(o.access_log);
  try {
    folio::service::database probe(o.db, folio::service::responder::tables(), o.max_db_pages);  // creates and migrates before the socket opens
  } catch (const std::exception& e) {
    folio::service::log::write("error", "startup_failed", std::string("cannot open the database: ") + e.what());
    return 1;
  }
  if (FCGX_Init() != 0) return folio::service::log::write("error", "startup_failed", "FCGX_Init failed"), 1;
  unlink(o.socket.c_str());
  // A burst of (re)subscribing clients each costs an authorization; listen() caps the backlog at
  // net.core.somaxconn (docs/OPERATIONS.md).
  const int fd = FCGX_OpenSocket(o.socket.c_str(), 4096);
  if (fd < 0) return folio::service::log::write("error", "startup_failed", "cannot listen on " + o.socket + ": " + std::strerror(errno)), 1;
  chmod(o.socket.c_str(), 0666);  // nginx's workers may run as another user

  folio::service::config cfg;
  cfg.max_body = o.max_body;
  cfg.cache_bytes = o.cache_mb << 20;
  cfg.cache_entries = o.cache_entries;
  cfg.request_timeout = std::chrono::seconds(o.request_timeout_s);
  cfg.history = o.history;
  cfg.webhooks = o.webhooks;
  cfg.presence = o.presence;
  if (!o.presence_redis_password_file.empty()) {
    std::ifstream in(o.presence_redis_password_file);
    if (!in || !std::getline(in, cfg.presence.redis_password) || cfg.presence.redis_password.empty())
      return folio::service::log::write("error", "startup_failed", "cannot read the presence Redis password from " + o.presence_redis_password_file), 1;
  }
  if (!o.channel_secret_file.empty()) cfg.live.channel_secret = read_secret(o.channel_secret_file);
  cfg.live.publish_socket = o.publish_socket;
  std::optional<folio::service::responder> made;
  try {
    made.emplace(cfg);
  } catch (const std::invalid_argument& e) {
    return folio::service::log::write("error", "startup_failed", std::string("--presence-redis: ") + e.what()), 1;
  }
  folio::service::responder& svc = *made;
  // The webhook sender (webhooks/sender.hpp), its claims under a node id of this process's own: 16 random hex digits.
  std::unique_ptr<folio::service::webhook_sender> sender;
  try {
    unsigned char bytes[8] = {};
    if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("no randomness for the node id");
    std::string node_id;
    for (const unsigned char b : bytes) node_id += "0123456789abcdef"[b >> 4], node_id += "0123456789abcdef"[b & 15];
    sender = std::make_unique<folio::service::webhook_sender>(cfg.webhooks, node_id, folio::service::now_unix_ms);
  } catch (const std::exception& e) {
    folio::service::log::write("error", "startup_failed", std::string("cannot start the webhook sender: ") + e.what());
    return 1;
  }
  svc.on_events_made([&sender] { sender->wake(); });  // deliveries go out at once, not at the sender's next poll
  if (!o.client_token_keys.empty() && !load_client_keys(svc, o.client_token_keys)) return 1;
  // What earlier responders left that outlives them (the client-token streams still open in nginx,
  // ended when due) is taken over. After the keys: a kept stream's key must be known, or it is ended as the key's.
  try {
    folio::service::database db(o.db, folio::service::responder::tables(), o.max_db_pages);
    svc.resume(db, [&o] { return std::make_unique<folio::service::database>(o.db, folio::service::responder::tables(), o.max_db_pages); });
  } catch (const std::exception& e) {
    folio::service::log::write("error", "startup_failed", std::string("cannot read the kept client-token streams: ") + e.what());
    return 1;
  }
  std::atomic<bool> stopping{false};
  // A request waits without a thread while its tenant holds its share of the workers, or while it would
  // take the last free worker and its tenant has a request running (the reserve); at most
  // max_waiting such requests per tenant and 1,024 in all (each holds a connection from nginx).
  shares_t shares(o.workers, o.tenant_workers ? o.tenant_workers : std::max(1u, o.workers - 1), 256, 1024);
  std::vector<std::thread> workers;
  std::vector<worker_state> states(o.workers);
  for (unsigned i = 0; i < o.workers; ++i)
    workers.emplace_back([&, &state = states[i]] {
      std::unique_ptr<folio::service::database> db;
      try {
        db = std::make_unique<folio::service::database>(o.db, folio::service::responder::tables(), o.max_db_pages);
      } catch (const std::exception& e) {
        folio::service::log::write("error", "worker_failed", std::string("worker cannot open the database: ") + e.what());
        state.busy_since_ms = worker_state::gone;
        return;
      }
      auto next = std::make_unique<accepted>();
      FCGX_InitRequest(&next->fcgx, fd, 0);
      state.busy_since_ms = worker_state::idle;
      // Each turn: a request that waited for a worker (only while another worker accepts), or a new
      // one (worker_shares.hpp, next). A failed accept (the stop, or a broken socket) ends accepting
      // for this worker; it then runs what is ready and ends.
      bool accepting = true;
      for (;;) {
        shares_t::step s = shares.next(stopping.load() || !accepting);
        if (s.kind == shares_t::step::exit) break;
        if (s.kind == shares_t::step::run) {
          state.busy_since_ms = steady_ms();
          run_waited(std::move(s.job), s.tenant, shares, svc, *db);
          state.busy_since_ms = worker_state::idle;
          continue;
        }
        accepting = !stopping.load() && FCGX_Accept_r(&next->fcgx) >= 0;
        shares.accepted();
        if (!accepting) continue;
        state.busy_since_ms = steady_ms();
        prepare(*next, svc);
        const std::string tenant = svc.platform().tenant_of(*db, next->r);
        next = admit_and_run(std::move(next), tenant, shares, svc, *db, fd);
        state.busy_since_ms = worker_state::idle;
      }
      state.busy_since_ms = worker_state::gone;
      FCGX_Free(&next->fcgx, 1);
    });
  // The families' background work, off the request path, each on a thread with a connection of its own:
  // the compactions of the records' logs, the records' history upkeep (automatic versions, thinning,
  // retention), the events' sequencer (outbox rows become the feed's events and webhook deliveries)
  // and the webhook deliveries (with the delivery log's retention). One that fails to start or dies is
  // logged and stays stopped until a restart.
  const auto background = [&](std::function<void(folio::service::database&)> work, const char* event, const char* what) {
    return std::thread([&, work = std::move(work), event, what] {
      try {
        folio::service::database db(o.db, folio::service::responder::tables(), o.max_db_pages);
        work(db);
      } catch (const std::exception& e) {
        folio::service::log::write("error", event, std::string(what) + " until a restart: " + e.what());
      }
    });
  };
  std::thread compaction = background([&](folio::service::database& db) { svc.run_background(db); }, "compaction_stopped", "no more compactions");
  std::thread history = background([&](folio::service::database& db) { svc.run_history(db); }, "history_upkeep_stopped", "no more automatic versions");
  std::thread events = background([&](folio::service::database& db) { svc.run_events(db); }, "events_stopped", "no more events are made from changes");
  std::thread webhooks = background([&](folio::service::database& db) { sender->run(db); }, "webhooks_stopped", "no more webhook deliveries");
  std::thread presence([&] { svc.run_presence(); });  // timed-out clients leave (no database)
  // The revoked API keys, re-read on a connection of their own (server.hpp, watch_revoked_keys): the client
  // tokens of a key revoked on any node are refused here within revocation_refresh, and their open
  // streams end at the read that sees the revocation (credentials_changed). A connection that will not open
  // (PostgreSQL still starting) or a read that fails is tried again, with a backoff, until the stop.
  std::thread revocations([&] {
    svc.platform().watch_revoked_keys([&] { return std::make_unique<folio::service::database>(o.db, folio::service::responder::tables(), o.max_db_pages); },
                                      [&] { svc.credentials_changed(std::chrono::milliseconds(0)); }, stopping);
  });
  folio::service::log::write("info", "started",
                             "listening on " + o.socket + " (" + std::to_string(o.workers) + " workers, database " + (folio::service::is_postgresql(o.db) ? std::string("PostgreSQL") : o.db) + ", live push " +
                                 (cfg.live.channel_secret.empty() ? "off" : cfg.live.publish_socket.empty() ? "subscribe only" : "via " + cfg.live.publish_socket) +
                                 ")");
  sd_notify(0, "READY=1");
  // The main thread waits for a stop signal, petting systemd's watchdog (if one is set) meanwhile —
  // but only while the workers can answer: when every one of them has been on one request for more
  // than twice the request timeout (a request past its deadline commits nothing, so a worker still on
  // it is stuck) or has gone, the watchdog is left to fire and systemd restarts the responder.
  std::uint64_t watchdog_us = 0;
  if (sd_watchdog_enabled(0, &watchdog_us) <= 0) watchdog_us = 0;
  const std::int64_t stuck_ms = 2 * static_cast<std::int64_t>(o.request_timeout_s) * 1000;
  int sig = -1;
  bool stuck = false;
  const timespec half{static_cast<time_t>(watchdog_us / 2000000), static_cast<long>(watchdog_us / 2 % 1000000) * 1000};
  while (sig < 0) {
    sig = watchdog_us ? sigtimedwait(&stop, nullptr, &half) : sigwaitinfo(&stop, nullptr);
    if (sig == SIGHUP) {
      if (!o.client_token_keys.empty()) load_client_keys(svc, o.client_token_keys);
      sig = -1;  // and on to the watchdog, as after a timeout
    }
    if (sig >= 0 || !watchdog_us) continue;
    const std::int64_t now = steady_ms();
    const bool able = std::any_of(states.begin(), states.end(), [&](const worker_state& w) {
      const std::int64_t since = w.busy_since_ms.load();
      return since == worker_state::idle || (since != worker_state::gone && now - since < stuck_ms);
    });
    if (!able && !stuck)
      folio::service::log::write("error", "workers_stuck", "every worker has been on one request for more than " + std::to_string(stuck_ms / 1000) +
                                                               " s (or has stopped); the systemd watchdog is no longer petted");
    stuck = !able;
    if (able) sd_notify(0, "WATCHDOG=1");
  }
  sd_notify(0, "STOPPING=1");
  folio::service::log::write("info", "stopping", std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + ", finishing in-flight requests");
  stopping = true;
  FCGX_ShutdownPending();
  shutdown(fd, SHUT_RDWR);  // wakes the workers blocked in accept; requests in progress finish
  for (std::thread& t : workers) t.join();
  // The workers run every waiting request before they end (worker_shares.hpp); none is left unless
  // every worker ended early (its database did not open).
  for (std::unique_ptr<accepted>& a : shares.take_waiting()) {
    const folio::service::response late = svc.platform().over_share(a->r, "", shares.share(), false);
    folio::service::database db(o.db, folio::service::responder::tables(), o.max_db_pages);
    run(*a, svc, db, &late);
  }
  svc.stop_background();
  sender->stop();
  compaction.join();
  history.join();
  events.join();
  webhooks.join();
  presence.join();
  revocations.join();
  close(fd);
  unlink(o.socket.c_str());
  return 0;
}
