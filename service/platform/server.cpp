// The order of checks (docs/API.md): path (404), method (400), credentials (401, before the body is
// read: an API key + auth token, or a client token), content type (400), size (413), a client token
// on an endpoint it does not open or a read-only token on a write (403), JSON and envelope (400), then
// the endpoint (which keeps a client token inside its document: check_scope). One place maps every
// failure to its HTTP code and JSON body.
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "platform/fields.hpp"
#include "platform/routes.hpp"
#include "wire/json.hpp"
#include "platform/log.hpp"
#include "platform/server.hpp"

namespace folio::service {

struct route {
  std::string_view path;
  std::string (*handler)(context&);
  bool writes;
  bool client = false;  ///< a client token may call it (within its scope; the handler checks the ids)
};

namespace {

constexpr route routes[] = {
    {"/v1/commentannotations/get", annotations_get, false},
    {"/v2/commentannotations/get", annotations_get_page, false},
    {"/v2/commentannotations/add", annotations_add, true},
    {"/v2/commentannotations/update", annotations_update, true},
    {"/v2/commentannotations/delete", annotations_delete, true},
    {"/v2/commentannotations/comments/add", comments_add, true},
    {"/v2/commentannotations/comments/update", comments_update, true},
    {"/v2/commentannotations/comments/delete", comments_delete, true},
    {"/v2/crdt/add", crdt_add, true},
    {"/v2/crdt/update", crdt_update, true},
    {"/v2/crdt/get", crdt_get, false, true},
    {"/v2/crdt/delete", crdt_delete, true},
    {"/v2/crdt/sync", crdt_sync, false, true},  // a pull reads; a push is checked for a writable token by the handler
    {"/v2/auth/token", auth_token, false},       // a read-only token mints read client tokens only (the handler checks)
};

response error(const api_error& e) {
  response r{e.http ? e.http : http_code(e.code), error_body(e.message, status_name(e.code))};
  r.code = status_name(e.code);
  return r;
}

/// A storage failure as the caller sees it; the details go to the log.
response storage_failure(const store_error& e) {
  log::write("error", "storage_error", e.what());
  const int primary = e.code & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return error(api_error(status::unavailable, "The database is busy; retry the request."));
  if (primary == SQLITE_FULL) return error(api_error(status::resource_exhausted, "The database is full; the change was not stored."));
  if (primary == SQLITE_IOERR || primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN)
    return error(api_error(status::unavailable, "The database cannot be written; the change was not stored. Retry later."));
  return error(api_error(status::internal, "Internal error."));
}

/// A request past its deadline: nginx has answered, or is about to answer, that it failed.
response deadline_failure() {
  log::write("warn", "deadline_exceeded", "the request's deadline passed before it committed; nothing was changed");
  return error(api_error(status::unavailable, "The request did not finish in time; nothing was changed. Retry it."));
}

const route* find_route(std::string_view path) {
  for (const route& x : routes)
    if (x.path == path) return &x;
  return nullptr;
}

/// The endpoint label of a path for metrics and logs: a route's path, or "other" (never client text).
std::string_view endpoint_of(const route* rt, std::string_view path) {
  if (rt) return rt->path;
  if (path == "/healthz") return "/healthz";
  if (path == "/metrics") return "/metrics";
  return "other";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool is_json_content_type(std::string_view ct) {
  const std::size_t semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  if (media.size() != 16) return false;
  for (std::size_t i = 0; i < 16; ++i)
    if (std::tolower(static_cast<unsigned char>(media[i])) != "application/json"[i]) return false;
  return true;
}

std::string printable(std::string_view s) {  // for echoing a path in a message
  std::string out;
  for (char c : s.substr(0, 128)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

// The subscribe query is read exactly as nginx reads it for the channel id (nginx/folio.conf:
// $arg_<name>, then set_unescape_uri), so that nginx's channel and the responder's differ only when
// their secrets do (the channel_mismatch log line).

/// nginx's $arg_<name> (ngx_http_arg): the value of the first '&'-separated parameter whose name is
/// `name` with ASCII letters' case ignored, followed by '='; nullopt when there is none.
std::optional<std::string_view> nginx_arg(std::string_view query, std::string_view name) {
  while (true) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.size() > name.size() && pair[name.size()] == '=') {
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i) same = std::tolower(static_cast<unsigned char>(pair[i])) == std::tolower(static_cast<unsigned char>(name[i]));
      if (same) return pair.substr(name.size() + 1);
    }
    if (amp == std::string_view::npos) return std::nullopt;
    query.remove_prefix(amp + 1);
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char l = static_cast<char>(c | 0x20);
  return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

/// set-misc's set_unescape_uri (its ngx_unescape_uri_patched, component mode): '+' is a space, "%XX" a
/// byte. Malformed escapes are not refused but dropped as it drops them: a '%' before a byte that is
/// not a hex digit is dropped (the byte is kept as it is), a '%' and one hex digit followed by another
/// byte are dropped with that byte, and a '%' with its digit at the end is dropped.
std::string nginx_unescape(std::string_view v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '+') {
      out += ' ';
    } else if (v[i] != '%') {
      out += v[i];
    } else if (i + 1 < v.size()) {
      const int high = hex_digit(v[i + 1]);
      if (high < 0) {
        out += v[++i];
      } else if (i + 2 < v.size()) {
        const int low = hex_digit(v[i + 2]);
        if (low >= 0) out += static_cast<char>(high * 16 + low);
        i += 2;
      } else {
        i = v.size();
      }
    }
  }
  return out;
}

/// A subscribe query's id, as nginx decodes it; "" (absent) and "" (empty) are both missing.
std::string query_param(std::string_view query, std::string_view name, const char* missing_message) {
  const std::optional<std::string_view> raw = nginx_arg(query, name);
  if (!raw) throw api_error(status::invalid_argument, missing_message);
  const std::string v = nginx_unescape(*raw);
  if (v.empty()) throw api_error(status::invalid_argument, missing_message);
  if (unicode_problem(v) != 0) throw api_error(status::invalid_argument, std::string(name) + " must be valid UTF-8.");
  check_id(v, std::string(name));
  return v;
}

/// The client token of an Authorization header "Bearer <token>" (the scheme in any case, then spaces
/// or tabs; "Bearer" alone is an empty, malformed token); nullopt for no header or another scheme
/// (which may be meant for a proxy in front).
std::optional<std::string_view> bearer_token(std::string_view h) {
  constexpr std::string_view scheme = "bearer";
  if (h.size() < scheme.size() || (h.size() > scheme.size() && h[scheme.size()] != ' ' && h[scheme.size()] != '\t')) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != scheme[i]) return std::nullopt;
  h.remove_prefix(scheme.size());
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
  return h;
}

}  // namespace

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string now_iso() { return iso_time(now_unix_ms()); }

std::string iso_time(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

std::optional<principal> service::check_credentials(database& db, const request& r) {
  const std::string id = r.api_key + '\n' + r.auth_token;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> g(auth_mu_);
    if (auto it = auth_cache_.find(id); it != auth_cache_.end() && now < it->second.until) return it->second.who;
  }
  std::optional<principal> who = authenticate(db, r.api_key, r.auth_token, now_iso());
  if (who && config_.auth_ttl.count() > 0) {
    std::lock_guard<std::mutex> g(auth_mu_);
    if (auth_cache_.size() >= 10000) auth_cache_.clear();  // bounded: callers are few, credentials fewer
    auth_cache_[id] = {*who, now + config_.auth_ttl};
  }
  return who;
}

principal service::client_principal(std::string_view token) {
  const std::shared_ptr<const key_ring> ring = client_keys();
  if (!ring) throw api_error(status::unavailable, "Client tokens are not configured on this server.");
  const token_check t = verify_client_token(token, *ring, now_unix_ms());
  switch (t.problem) {
    case token_problem::malformed:
      throw api_error(status::unauthenticated, "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>.");
    case token_problem::unknown_key: throw api_error(status::unauthenticated, "Invalid client token: unknown signing key.");
    case token_problem::bad_signature: throw api_error(status::unauthenticated, "Invalid client token: bad signature.");
    case token_problem::expired: throw api_error(status::unauthenticated, "The client token expired at " + iso_time(t.claims.expires * 1000) + ".");
    case token_problem::none: break;
  }
  principal p;
  p.tenant = t.claims.tenant, p.subject = t.claims.user, p.read_only = !t.claims.write;
  p.scope = client_scope{t.claims.org, t.claims.doc, t.claims.editor, t.claims.expires, t.key_id};
  return p;
}

principal service::identify(database& db, const request& r, bool query_token) {
  const std::optional<std::string_view> bearer = bearer_token(r.authorization);
  std::optional<std::string> in_query;
  if (query_token)
    if (const std::optional<std::string_view> raw = nginx_arg(r.query, "token")) in_query = nginx_unescape(*raw);
  if (bearer || in_query) {
    if (!r.api_key.empty() || !r.auth_token.empty())
      throw api_error(status::unauthenticated, "Send either the x-folio-api-key and x-folio-auth-token headers or a client token, not both.");
    if (bearer && in_query)
      throw api_error(status::unauthenticated, "Send the client token once: in the Authorization header or in the token parameter, not both.");
    return client_principal(bearer ? *bearer : std::string_view(*in_query));
  }
  if (r.api_key.empty() || r.auth_token.empty()) throw api_error(status::unauthenticated, "Missing or invalid API key or auth token.");
  const std::optional<principal> who = check_credentials(db, r);
  if (!who) throw api_error(status::unauthenticated, "Missing or invalid API key or auth token.");
  return *who;
}

void service::set_client_keys(std::shared_ptr<const key_ring> ring) {
  std::lock_guard<std::mutex> g(keys_mu_);
  client_keys_ = std::move(ring);
}

std::shared_ptr<const key_ring> service::client_keys() const {
  std::lock_guard<std::mutex> g(keys_mu_);
  return client_keys_;
}

service::service(config c)
    : config_(c),
      cache_(c.cache_bytes),
      publisher_(c.live,
                 [this](std::string_view id) {
                   const std::shared_ptr<const key_ring> ring = client_keys();
                   return ring && ring->find(id);
                 }),
      start_time_(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()) {}

template <class F>
response service::observed(std::string_view endpoint, const request& r, F&& f) {
  const auto start = std::chrono::steady_clock::now();
  log::begin_request(r.request_id, endpoint);
  std::string key_id;
  response res = f(key_id);
  res.key_id = std::move(key_id);
  const double seconds = seconds_since(start);
  metrics_.observe(endpoint, res.http, seconds);
  log::access({.method = r.method, .endpoint = endpoint, .code = res.code, .key_id = res.key_id, .status = res.http, .duration_ms = seconds * 1000});
  log::end_request();
  return res;
}

response service::handle(database& db, const request& r) {
  const route* rt = find_route(r.path);
  db.set_deadline(r.deadline);
  response res = observed(endpoint_of(rt, r.path), r, [&](std::string& key_id) { return answer(db, r, rt, key_id); });
  db.set_deadline(deadline_clock::time_point::max());
  return res;
}

response service::authorize_subscriber(database& db, const request& r) {
  return observed("/v2/crdt/subscribe", r, [&](std::string& key_id) { return authorize(db, r, key_id); });
}

response service::health(database& db, const request& r) {
  if (r.query == "live" || r.query.starts_with("live=")) return {200, "{\"status\":\"ok\",\"live\":true}\n"};
  if (const std::string problem = db.write_problem(); !problem.empty()) {
    log::write("warn", "not_ready", problem);
    throw api_error(status::unavailable, "Not ready: " + problem + ".");
  }
  return {200, "{\"status\":\"ok\",\"live\":true,\"ready\":true}\n"};
}

response service::metrics_page(database& db) {
  metrics::gauges g;
  g.cache_hits = cache_.hits(), g.cache_misses = cache_.misses(), g.cache_bytes = cache_.bytes(), g.cache_entries = cache_.size();
  g.published = publisher_.published(), g.publish_failures = publisher_.failures();
  const database::space s = db.usage();
  g.db_bytes = s.file_bytes, g.wal_bytes = s.wal_bytes, g.db_pages = s.pages, g.db_free_pages = s.free_pages, g.db_max_pages = s.max_pages;
  g.start_time = start_time_;
  metrics::sample_process(g);
  response res{200, metrics_.render(g)};
  res.content_type = "text/plain; version=0.0.4";
  return res;
}

response service::answer(database& db, const request& r, const route* rt, std::string& key_id) {
  body_output out(r.stream);
  // A failure after part of the answer was streamed cannot become an error answer any more.
  const auto failed = [&](response res) {
    if (!out.started()) return res;
    log::write("error", "answer_cut_short", "a streamed answer failed after it had started; the connection is dropped");
    res.cut_short = true;
    res.body.clear();
    return res;
  };
  try {
    if (r.path == "/healthz" || r.path == "/metrics") {
      if (r.method != "GET") throw api_error(status::invalid_argument, "Method " + printable(r.method) + " is not allowed; " + r.path + " takes GET.");
      return r.path == "/healthz" ? health(db, r) : metrics_page(db);
    }
    if (!rt) throw api_error(status::not_found, "No endpoint at " + printable(r.path) + ".");
    if (r.method != "POST") throw api_error(status::invalid_argument, "Method " + printable(r.method) + " is not allowed; every endpoint takes POST.");
    const principal who = identify(db, r, false);
    key_id = who.tenant;
    if (!is_json_content_type(r.content_type)) throw api_error(status::invalid_argument, "Content-Type must be application/json.");
    if (r.content_length > config_.max_body || r.body.size() > config_.max_body)
      throw api_error(status::invalid_argument, "Request body is larger than the limit of " + std::to_string(config_.max_body) + " bytes.", 413);
    if (who.scope && !rt->client)
      throw api_error(status::permission_denied, "A client token opens only /v2/crdt/get, /v2/crdt/sync and /v2/crdt/subscribe.");
    if (rt->writes && who.read_only) throw api_error(status::permission_denied, "This token is read-only.");
    const rapidjson::Document body = parse_json(r.body);
    if (!body.IsObject()) throw api_error(status::invalid_argument, "Body must be a JSON object with a \"data\" object.");
    for (auto it = body.MemberBegin(); it != body.MemberEnd(); ++it)
      if (std::string_view(it->name.GetString(), it->name.GetStringLength()) != "data")
        throw api_error(status::invalid_argument, "Unexpected top-level key \"" + printable({it->name.GetString(), it->name.GetStringLength()}) +
                                                      "\"; the body holds only \"data\".");
    auto data = body.FindMember("data");
    if (data == body.MemberEnd()) throw api_error(status::invalid_argument, "Body must have a \"data\" object.");
    if (!data->value.IsObject()) throw api_error(status::invalid_argument, "\"data\" must be an object.");
    context c{db, *this, who, data->value, out};
    response res{200, rt->handler(c)};
    res.streamed = out.started();
    return res;
  } catch (const api_error& e) {
    return failed(error(e));
  } catch (const deadline_exceeded&) {
    return failed(deadline_failure());
  } catch (const store_error& e) {
    return failed(storage_failure(e));
  } catch (const std::exception& e) {
    log::write("error", "internal_error", e.what());
    return failed(error(api_error(status::internal, "Internal error.")));
  }
}

response service::authorize(database& db, const request& r, std::string& key_id) {
  try {
    const principal who = identify(db, r, true);
    key_id = who.tenant;
    record_key k;
    k.tenant = who.tenant;
    k.org = query_param(r.query, "organizationId", "Organization ID is required");
    k.doc = query_param(r.query, "documentId", "Document ID is required");
    k.editor = query_param(r.query, "editorId", "Editor ID is required.");
    check_scope(who, k.org, k.doc, k.editor);
    if (config_.live.channel_secret.empty()) throw api_error(status::unavailable, "Live push is not configured on this server.");
    if (!load_record(db, k, false)) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
    if (channel_id(config_.live.channel_secret, k.tenant, k.org, k.doc, k.editor) != r.channel) {
      log::write("error", "channel_mismatch", "nginx computed another channel id for a subscriber: nginx and folio-fcgi do not share the channel secret");
      throw api_error(status::internal, "Internal error.");
    }
    // Nchan asks once per stream: the publisher ends it when the token expires or loses its key.
    if (who.scope && !publisher_.token_subscribed(r.channel, who.scope->expires, who.scope->key_id))
      throw api_error(status::unavailable, "Too many live streams of client tokens on this server; try again later.");
    return {200, {}};
  } catch (const api_error& e) {
    return error(e);
  } catch (const store_error& e) {
    return storage_failure(e);
  } catch (const std::exception& e) {
    log::write("error", "internal_error", e.what());
    return error(api_error(status::internal, "Internal error."));
  }
}

}  // namespace folio::service
