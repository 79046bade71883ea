// Who is calling (server::identify): an API key + auth token checked against the database and
// remembered for auth_ttl, or a client token (client_token.hpp) checked against the key ring and the
// responder's set of revoked API keys (server.hpp, api_key_revoked).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include "platform/clock.hpp"
#include "platform/nginx_query.hpp"
#include "platform/server.hpp"

namespace folio::service {

namespace {

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

std::optional<principal> server::check_credentials(database& db, const request& r) {
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

std::chrono::milliseconds server::revocation_tick() const { return std::max(config_.revocation_refresh / 4, std::chrono::milliseconds(1)); }

void server::set_revocation_hooks(revocation_hooks h) {
  std::lock_guard<std::mutex> g(revoked_mu_);
  revocation_hooks_ = std::move(h);
}

std::shared_ptr<const server::revoked_set> server::revoked_keys(database& db, std::chrono::steady_clock::time_point since, bool retry) {
  std::unique_lock<std::mutex> g(revoked_mu_);
  while (revoked_reading_) {  // another thread's read: its outcome is this one's, if it is recent enough
    if (revoked_ && revoked_->read_at >= since) return revoked_;
    const std::uint64_t ended = revoked_reads_;
    if (revocation_hooks_.waiting) revocation_hooks_.waiting();
    const auto read_ended = [&] { return revoked_reads_ != ended; };
    if (db.deadline() == deadline_clock::time_point::max()) revoked_read_ended_.wait(g, read_ended);
    else if (!revoked_read_ended_.wait_until(g, db.deadline(), read_ended)) throw deadline_exceeded();
    if (revoked_failure_ && revoked_failure_->read > ended) throw store_error(revoked_failure_->kind, revoked_failure_->what);
  }
  if (revoked_ && revoked_->read_at >= since) return revoked_;
  if (!retry && revoked_failure_ && std::chrono::steady_clock::now() < revoked_failure_->retry_at)
    throw store_error(revoked_failure_->kind, revoked_failure_->what);
  // This thread reads; the others wait for it (above), or fail at once after it failed.
  revoked_reading_ = true;
  const std::function<void()> before_read = revocation_hooks_.before_read;
  g.unlock();
  auto next = std::make_shared<revoked_set>();
  next->read_at = std::chrono::steady_clock::now();  // before the query, which sees what committed before it
  std::optional<store_error> failed;
  try {
    if (before_read) before_read();
    query q = db.sql("SELECT key_id FROM api_keys WHERE revoked_at IS NOT NULL");
    while (q.step()) next->ids.insert(q.text(0));
  } catch (const store_error& e) {
    failed.emplace(e.kind, std::string("reading the revoked API keys: ") + e.what());
  } catch (...) {  // not the database's answer (memory): nothing to remember, a waiter reads again
    g.lock();
    revoked_reading_ = false, ++revoked_reads_;
    revoked_read_ended_.notify_all();
    throw;
  }
  g.lock();
  revoked_reading_ = false, ++revoked_reads_;
  if (failed) revoked_failure_ = failed_read{failed->kind, failed->what(), std::chrono::steady_clock::now() + revocation_tick(), revoked_reads_};
  else revoked_ = std::move(next), revoked_failure_.reset();
  revoked_read_ended_.notify_all();
  if (failed) throw *failed;
  return revoked_;
}

std::vector<std::string> server::read_revoked_keys(database& db) {
  const std::shared_ptr<const revoked_set> read = revoked_keys(db, std::chrono::steady_clock::now(), true);
  return std::vector<std::string>(read->ids.begin(), read->ids.end());
}

bool server::api_key_revoked(std::string_view key_id) const {
  std::lock_guard<std::mutex> g(revoked_mu_);
  return revoked_ && revoked_->ids.count(std::string(key_id));
}

bool server::api_key_revoked(database& db, std::string_view key_id) {
  // A set whose read began less than revocation_refresh ago (at or after `since`) is fresh.
  const auto since = std::chrono::steady_clock::now() - config_.revocation_refresh + std::chrono::steady_clock::duration(1);
  return revoked_keys(db, since, false)->ids.count(std::string(key_id)) > 0;
}

void server::watch_revoked_keys(const std::function<std::unique_ptr<database>()>& open, const std::function<void()>& revoked, const std::atomic<bool>& stop) {
  const auto tick = revocation_tick();
  const auto longest = std::max<std::chrono::milliseconds>(2 * config_.revocation_refresh, tick);
  auto backoff = tick;
  bool failing = false;
  std::unordered_set<std::string> seen;  // revoked keys this watch has reported
  std::unique_ptr<database> db;
  while (!stop.load()) {
    auto pause = tick;
    try {
      if (!db) db = open();
      bool any = false;
      for (std::string& id : read_revoked_keys(*db)) any |= seen.insert(std::move(id)).second;
      if (failing) log::write("info", "revoked_keys_read", "the revoked API keys are read again");
      failing = false, backoff = tick;
      if (any && revoked) revoked();
    } catch (const std::exception& e) {
      if (!failing)
        log::write("error", "revoked_keys_unread",
                   std::string("cannot read the revoked API keys (requests read them, one at a time, and open streams of revoked keys are not ended meanwhile); retrying: ") + e.what());
      failing = true;
      db.reset();  // a new connection at the next try
      pause = backoff, backoff = std::min(2 * backoff, longest);
    }
    // The pause, a tick at a time so that `stop` is seen within one.
    for (auto waited = std::chrono::milliseconds(0); waited < pause && !stop.load(); waited += tick) std::this_thread::sleep_for(std::min(tick, pause - waited));
  }
}

principal server::client_principal(database& db, std::string_view token) {
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
  if (api_key_revoked(db, t.claims.tenant)) throw api_error(status::unauthenticated, "Invalid client token: the API key that minted it is revoked.");
  principal p;
  p.tenant = t.claims.tenant, p.subject = t.claims.user, p.read_only = !t.claims.write;
  p.scope = client_scope{t.claims.org, t.claims.doc, t.claims.editor, t.claims.expires, t.key_id};
  return p;
}

principal server::identify(database& db, const request& r, bool query_token) {
  identifications_.fetch_add(1, std::memory_order_relaxed);
  const std::optional<std::string_view> bearer = bearer_token(r.authorization);
  std::optional<std::string> in_query;
  if (query_token)
    if (const std::optional<std::string_view> raw = nginx_arg(r.query, "token")) in_query = nginx_unescape(*raw);
  if (bearer || in_query) {
    if (!r.api_key.empty() || !r.auth_token.empty())
      throw api_error(status::unauthenticated, "Send either the x-folio-api-key and x-folio-auth-token headers or a client token, not both.");
    if (bearer && in_query)
      throw api_error(status::unauthenticated, "Send the client token once: in the Authorization header or in the token parameter, not both.");
    return client_principal(db, bearer ? *bearer : std::string_view(*in_query));
  }
  if (r.api_key.empty() || r.auth_token.empty()) throw api_error(status::unauthenticated, "Missing or invalid API key or auth token.");
  const std::optional<principal> who = check_credentials(db, r);
  if (!who) throw api_error(status::unauthenticated, "Missing or invalid API key or auth token.");
  return *who;
}

void server::set_client_keys(std::shared_ptr<const key_ring> ring) {
  std::lock_guard<std::mutex> g(keys_mu_);
  client_keys_ = std::move(ring);
}

std::shared_ptr<const key_ring> server::client_keys() const {
  std::lock_guard<std::mutex> g(keys_mu_);
  return client_keys_;
}

}  // namespace folio::service
