// The order of checks (docs/API.md): path (404), method (400), credentials (401, before the body is
// read: an API key + auth token, or a client token), content type (400), size (413), a client token
// on an endpoint it does not open or a read-only token on a write (403), JSON and envelope (400), then
// the endpoint (which keeps a client token inside its document: check_scope). One place maps every
// failure to its HTTP code and JSON body (failure_response).
#include "platform/server.hpp"

#include <cctype>
#include <chrono>
#include <string_view>

#include "platform/auth_handlers.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

response error(const api_error& e) {
  response r{e.http ? e.http : http_code(e.code), error_body(e.message, status_name(e.code))};
  r.code = status_name(e.code);
  return r;
}

/// A storage failure as the caller sees it; the details go to the log.
response storage_failure(const store_error& e) {
  log::write("error", "storage_error", e.what());
  switch (e.kind) {
    case failure::busy: return error(api_error(status::unavailable, "The database is busy; retry the request."));
    case failure::full: return error(api_error(status::resource_exhausted, "The database is full; the change was not stored."));
    case failure::unwritable: return error(api_error(status::unavailable, "The database cannot be written; the change was not stored. Retry later."));
    case failure::unavailable: return error(api_error(status::unavailable, "The database is unavailable; retry the request."));
    case failure::not_durable:
      return error(api_error(status::unavailable, "The database could not confirm that the change is on disk; it may have been stored. Retry later."));
    case failure::other: break;
  }
  return error(api_error(status::internal, "Internal error."));
}

/// A request past its deadline: nginx has answered, or is about to answer, that it failed.
response deadline_failure() {
  log::write("warn", "deadline_exceeded", "the request's deadline passed before it committed; nothing was changed");
  return error(api_error(status::unavailable, "The request did not finish in time; nothing was changed. Retry it."));
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

}  // namespace

response failure_response(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const api_error& e) {
    return error(e);
  } catch (const deadline_exceeded&) {
    return deadline_failure();
  } catch (const store_error& e) {
    return storage_failure(e);
  } catch (const std::exception& e) {
    log::write("error", "internal_error", e.what());
    return error(api_error(status::internal, "Internal error."));
  }
}

server::server(config c)
    : config_(std::move(c)), start_time_(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()) {
  register_auth_routes(routes_);
}

server::answer_scope::answer_scope(server& s) {
  after_.reserve(s.after_response_.size());
  for (const after_response_hook& hook : s.after_response_)
    if (std::function<void()> after = hook()) after_.push_back(std::move(after));
}

void server::answer_scope::answered() noexcept {
  while (!after_.empty()) {
    const std::function<void()> after = std::move(after_.back());
    after_.pop_back();
    try {
      after();
    } catch (const std::exception& e) {
      log::write("error", "after_response_failed", std::string("work deferred until an answer was sent failed: ") + e.what());
    } catch (...) {
      log::write("error", "after_response_failed", "work deferred until an answer was sent failed");
    }
  }
}

response server::observed(std::string_view endpoint, const request& r, const std::function<response(std::string& key_id)>& answer) {
  const auto start = std::chrono::steady_clock::now();
  log::begin_request(r.request_id, endpoint);
  std::string key_id;
  response res = answer(key_id);
  res.key_id = std::move(key_id);
  const double seconds = seconds_since(start);
  metrics_.observe(endpoint, res.http, seconds);
  log::access({.method = r.method, .endpoint = endpoint, .code = res.code, .key_id = res.key_id, .status = res.http, .duration_ms = seconds * 1000});
  log::end_request();
  return res;
}

response server::handle(database& db, const request& r) {
  const route* rt = routes_.find(r.path);
  db.set_deadline(r.deadline);
  response res = observed(endpoint_of(rt, r.path), r, [&](std::string& key_id) { return answer(db, r, rt, key_id); });
  db.set_deadline(deadline_clock::time_point::max());
  return res;
}

std::string server::tenant_of(database& db, request& r) {
  if (!routes_.find(r.path) || r.method != "POST") return {};  // answered before credentials are checked
  auto checked = std::make_shared<identification>();
  checked->at = std::chrono::steady_clock::now();
  db.set_deadline(r.deadline);  // as in handle(): a wait for the revoked keys ends at the request's deadline
  try {
    checked->who = identify(db, r, false);
  } catch (...) {
    checked->failure = std::current_exception();  // handle() answers it
  }
  db.set_deadline(deadline_clock::time_point::max());
  r.identified = checked;
  return checked->who ? checked->who->tenant : std::string();
}

principal server::caller_of(database& db, const request& r) {
  if (const identification* checked = r.identified.get(); checked && std::chrono::steady_clock::now() - checked->at < config_.revocation_refresh) {
    if (checked->failure) std::rethrow_exception(checked->failure);
    if (checked->who) return *checked->who;
  }
  return identify(db, r, false);
}

response server::over_share(const request& r, const std::string& tenant, unsigned share, bool refused) {
  return observed(endpoint_of(routes_.find(r.path), r.path), r, [&](std::string& key_id) {
    key_id = tenant;
    if (!refused) return deadline_failure();
    return error(api_error(status::resource_exhausted,
                           "This API key already has " + std::to_string(share) + " requests running on this server and too many waiting; retry later."));
  });
}

response server::answer(database& db, const request& r, const route* rt, std::string& key_id) {
  body_output out(r.stream);
  try {
    if (r.path == "/healthz" || r.path == "/metrics") {
      if (r.method != "GET") throw api_error(status::invalid_argument, "Method " + printable(r.method) + " is not allowed; " + r.path + " takes GET.");
      return r.path == "/healthz" ? health(db, r) : metrics_page(db);
    }
    if (!rt) throw api_error(status::not_found, "No endpoint at " + printable(r.path) + ".");
    if (r.method != "POST") throw api_error(status::invalid_argument, "Method " + printable(r.method) + " is not allowed; every endpoint takes POST.");
    const principal who = caller_of(db, r);
    key_id = who.tenant;
    if (!is_json_content_type(r.content_type)) throw api_error(status::invalid_argument, "Content-Type must be application/json.");
    if (r.content_length > config_.max_body || r.body.size() > config_.max_body)
      throw api_error(status::invalid_argument, "Request body is larger than the limit of " + std::to_string(config_.max_body) + " bytes.", 413);
    if (who.scope && !rt->client)
      throw api_error(status::permission_denied, "A client token opens only /v2/crdt/get, /v2/crdt/sync, /v2/crdt/subscribe, /v2/crdt/versions/get, diff, add and restore, and /v2/presence/set, leave and get.");
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
  } catch (...) {
    response res = failure_response(std::current_exception());
    if (!out.started()) return res;
    // A failure after part of the answer was streamed cannot become an error answer any more.
    log::write("error", "answer_cut_short", "a streamed answer failed after it had started; the connection is dropped");
    res.cut_short = true;
    res.body.clear();
    return res;
  }
}

}  // namespace folio::service
