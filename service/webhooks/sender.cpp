#include "webhooks/sender.hpp"

#include <curl/curl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "folio/utf8.hpp"
#include "platform/log.hpp"
#include "webhooks/signature.hpp"

namespace folio::service {

namespace {

constexpr std::int64_t claim_margin_ms = 30 * 1000;
constexpr std::size_t response_kept = 1024;
constexpr std::int64_t prune_every_ms = 3600 * 1000;
constexpr int poll_ms = 250;

/// A duration as a reason or an error says it: a count of its largest whole unit (days, hours, s, ms).
std::string spoken(std::chrono::milliseconds d) {
  const std::int64_t ms = d.count(), day = 24 * 3600 * 1000, hour = 3600 * 1000;
  const auto counted = [](std::int64_t n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); };
  if (ms > 0 && ms % day == 0) return counted(ms / day, "day");
  if (ms > 0 && ms % hour == 0) return counted(ms / hour, "hour");
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

/// The URL's host as written (brackets of an IPv6 literal taken off), or "" when it does not parse.
std::string url_host(const std::string& url) {
  CURLU* u = curl_url();
  std::string host;
  char* part = nullptr;
  if (u && curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &part, 0) == CURLUE_OK && part) host = part;
  curl_free(part);
  curl_url_cleanup(u);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

/// The first bytes of an answer as the log keeps them: text (a byte that is not UTF-8, or NUL, as
/// U+FFFD), at most response_kept bytes, cut before a character. O(bytes).
std::string kept_text(std::string_view raw) {
  std::string out;
  for (std::size_t i = 0; i < raw.size();) {
    char32_t c = 0;
    if (!folio::next_code_point(raw, i, c)) c = 0xFFFD, ++i;
    if (c == 0) c = 0xFFFD;
    const std::size_t before = out.size();
    folio::append_utf8(out, c);
    if (out.size() > response_kept) {
      out.resize(before);
      break;
    }
  }
  return out;
}

}  // namespace

/// One attempt in flight: what it sends, what came back, and what its outcome is committed against.
struct webhook_sender::transfer {
  std::string tenant, endpoint, message_id, url, host, body;
  std::string secret;
  std::optional<std::string> old_secret;  ///< still signing
  bool event_gone = false;                ///< the event is no longer in event_feed
  std::int64_t position = 0, attempts_before = 0, claimed_until = 0, started_ms = 0;
  std::chrono::steady_clock::time_point started;
  const address_policy* policy = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string response;  ///< the first response_kept bytes of the answer
  std::string refused;   ///< an address the policy refused
  char error[CURL_ERROR_SIZE] = {};

  transfer() = default;
  transfer(const transfer&) = delete;
  ~transfer() {
    curl_slist_free_all(headers);
    if (easy) curl_easy_cleanup(easy);
  }

  static std::size_t keep(char* data, std::size_t size, std::size_t n, void* self) {
    transfer& t = *static_cast<transfer*>(self);
    const std::size_t bytes = size * n;
    t.response.append(data, std::min(bytes, response_kept - std::min(response_kept, t.response.size())));
    return bytes;
  }
  /// libcurl's socket for a connection to `address`: refused (no socket) unless the policy allows it.
  static curl_socket_t open_socket(void* self, curlsocktype, curl_sockaddr* address) {
    transfer& t = *static_cast<transfer*>(self);
    if (!t.policy->allows(&address->addr, t.host)) {
      t.refused = address_text(&address->addr);
      if (t.refused.empty()) t.refused = "of family " + std::to_string(address->family);
      return CURL_SOCKET_BAD;
    }
    return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
  }
};

webhook_sender::webhook_sender(webhook_config cfg, std::string node_id, clock now)
    : cfg_(std::move(cfg)), node_(std::move(node_id)), now_(std::move(now)), policy_(cfg_.allow), jitter_(std::random_device{}()) {
  static const bool global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  multi_ = global ? curl_multi_init() : nullptr;
  if (!multi_) throw std::runtime_error("libcurl did not start");
  cfg_.sends = std::max(1u, cfg_.sends);
  cfg_.sends_per_endpoint = std::max(1u, cfg_.sends_per_endpoint);
  cfg_.sends_per_tenant = std::max(1u, cfg_.sends_per_tenant);
}

webhook_sender::~webhook_sender() {
  for (auto& [easy, t] : flying_) curl_multi_remove_handle(static_cast<CURLM*>(multi_), t->easy);
  flying_.clear();
  curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

void webhook_sender::stop() {
  stopping_ = true;
  curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

void webhook_sender::wake() {
  woken_ = true;
  curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

std::int64_t webhook_sender::retry_delay(std::size_t attempts) {
  const std::int64_t base = cfg_.retries[attempts - 1].count(), spread = base / 10;
  return base + std::uniform_int_distribution<std::int64_t>(-spread, spread)(jitter_);
}

std::vector<std::unique_ptr<webhook_sender::transfer>> webhook_sender::select_due(database& db, std::int64_t now_ms, const std::vector<endpoint_key>& full,
                                                                                 const std::vector<std::string>& held, std::size_t limit) {
  std::string text =
      "SELECT d.tenant, d.endpoint, d.position, d.message_id, d.attempts, e.url, e.secret, e.old_secret, e.old_secret_until, f.body"
      " FROM webhook_deliveries d JOIN webhook_endpoints e ON e.tenant = d.tenant AND e.id = d.endpoint"
      " LEFT JOIN event_feed f ON f.position = d.position AND f.tenant = d.tenant"
      " WHERE d.state = 'pending' AND d.next_at <= ? AND (d.claimed_until IS NULL OR d.claimed_until < ?) AND e.enabled = 1";
  for (std::size_t i = 0; i < full.size(); ++i) text += " AND NOT (d.tenant = ? AND d.endpoint = ?)";
  for (std::size_t i = 0; i < held.size(); ++i) text += " AND d.tenant <> ?";
  text += " ORDER BY d.next_at LIMIT ?";  // the due index's order: no sort
  query q = db.prepare(text);
  q.bind(1, now_ms).bind(2, now_ms);
  int p = 3;
  for (const endpoint_key& k : full) {
    q.bind(p, k.tenant).bind(p + 1, k.id);
    p += 2;
  }
  for (const std::string& tenant : held) q.bind(p++, tenant);
  q.bind(p, static_cast<std::int64_t>(limit));
  std::vector<std::unique_ptr<transfer>> due;
  while (q.step()) {
    auto t = std::make_unique<transfer>();
    t->tenant = q.text(0), t->endpoint = q.text(1), t->position = q.integer(2), t->message_id = q.text(3), t->attempts_before = q.integer(4);
    t->url = q.text(5), t->secret = q.text(6);
    if (!q.is_null(7) && !q.is_null(8) && q.integer(8) > now_ms) t->old_secret = q.text(7);
    t->event_gone = q.is_null(9);
    if (!t->event_gone) t->body = q.text(9);
    due.push_back(std::move(t));
  }
  return due;
}

unsigned webhook_sender::endpoint_bound(const endpoint_key& k) const { return timed_out_.count(k) ? 1u : cfg_.sends_per_endpoint; }

std::size_t webhook_sender::claim(database& db, std::int64_t now_ms) {
  if (flying_.size() >= cfg_.sends) return 0;
  const std::int64_t until = now_ms + cfg_.timeout.count() + claim_margin_ms;
  std::map<std::string, unsigned> in_flight;  // transfers in flight per tenant
  for (const auto& [k, n] : per_endpoint_) in_flight[k.tenant] += n;
  // Passed over by the selection: the tenants at their bound (`held`), and the other endpoints at theirs (`full`).
  std::vector<std::string> held0;
  for (const auto& [tenant, n] : in_flight)
    if (n >= cfg_.sends_per_tenant) held0.push_back(tenant);
  std::vector<endpoint_key> full0;
  for (const auto& [k, n] : per_endpoint_)
    if (n >= endpoint_bound(k) && in_flight[k.tenant] < cfg_.sends_per_tenant) full0.push_back(k);
  // A read first: a poll that finds nothing to claim writes nothing (no write lock, no fsync).
  if (db.read([&] { return select_due(db, now_ms, full0, held0, 1); }).empty()) return 0;
  std::map<endpoint_key, unsigned> taken;
  std::vector<std::unique_ptr<transfer>> claimed = db.write(delivery_claim_key, [&] {
    taken = per_endpoint_;
    std::map<std::string, unsigned> per_tenant = in_flight;
    std::vector<endpoint_key> full = full0;
    std::vector<std::string> held = held0;
    std::size_t room = cfg_.sends - flying_.size();
    std::vector<std::unique_ptr<transfer>> out;
    while (room > 0) {
      std::vector<std::unique_ptr<transfer>> due = select_due(db, now_ms, full, held, room);
      if (due.empty()) break;
      const std::size_t passed_before = full.size() + held.size(), claimed_before = out.size();
      for (std::unique_ptr<transfer>& t : due) {
        if (room == 0) break;
        const endpoint_key k{t->tenant, t->endpoint};
        unsigned& n = taken[k];
        if (per_tenant[t->tenant] >= cfg_.sends_per_tenant) {
          if (std::find(held.begin(), held.end(), t->tenant) == held.end()) held.push_back(t->tenant);
          continue;
        }
        if (n >= endpoint_bound(k)) {
          if (std::find(full.begin(), full.end(), k) == full.end()) full.push_back(k);
          continue;
        }
        if (t->event_gone) {  // its event is no longer kept (prune_webhook_log): given up, never sent
          db.sql("UPDATE webhook_deliveries SET state = 'failed', next_at = NULL WHERE tenant = ? AND endpoint = ? AND position = ?"
                 " AND state = 'pending' AND (claimed_until IS NULL OR claimed_until < ?)")
              .bind(1, t->tenant).bind(2, t->endpoint).bind(3, t->position).bind(4, now_ms)
              .step();
          if (db.changes() == 1)
            db.sql("UPDATE webhook_endpoints SET queued = queued - 1 WHERE tenant = ? AND id = ? AND queued > 0").bind(1, t->tenant).bind(2, t->endpoint).step();
          continue;
        }
        db.sql("UPDATE webhook_deliveries SET claimed_by = ?, claimed_until = ? WHERE tenant = ? AND endpoint = ? AND position = ?"
               " AND state = 'pending' AND (claimed_until IS NULL OR claimed_until < ?)")
            .bind(1, node_).bind(2, until).bind(3, t->tenant).bind(4, t->endpoint).bind(5, t->position).bind(6, now_ms)
            .step();
        if (db.changes() != 1) continue;
        t->claimed_until = until;
        ++n, ++per_tenant[t->tenant], --room;
        out.push_back(std::move(t));
      }
      if (full.size() + held.size() == passed_before && out.size() == claimed_before) break;  // nothing more to take
    }
    return out;
  });
  per_endpoint_ = std::move(taken);
  for (auto it = per_endpoint_.begin(); it != per_endpoint_.end();) it = it->second ? std::next(it) : per_endpoint_.erase(it);
  const std::size_t n = claimed.size();
  for (std::unique_ptr<transfer>& t : claimed) {
    const std::string why = start(*t);
    if (why.empty()) {
      flying_.emplace(t->easy, std::move(t));
      continue;
    }
    --per_endpoint_[{t->tenant, t->endpoint}];
    try {
      record(db, *t, 0, why);
    } catch (const std::exception& e) {
      log::write("error", "webhook_outcome_failed", std::string("a delivery's outcome was not recorded (sent again after its claim): ") + e.what());
    }
  }
  return n;
}

std::string webhook_sender::start(transfer& t) {
  t.started_ms = now_();
  t.started = std::chrono::steady_clock::now();
  t.policy = &policy_;
  t.host = url_host(t.url);
  const std::int64_t timestamp = t.started_ms / 1000;
  std::string signatures;
  try {
    signatures = webhook_signature(t.secret, t.message_id, timestamp, t.body);
    if (t.old_secret) signatures.append(" ").append(webhook_signature(*t.old_secret, t.message_id, timestamp, t.body));
  } catch (const std::invalid_argument&) {
    return "the endpoint's secret is not usable";
  }
  for (const std::string& line : {"webhook-id: " + t.message_id, "webhook-timestamp: " + std::to_string(timestamp), "webhook-signature: " + signatures,
                                  std::string("content-type: application/json"), std::string("user-agent: Folio-Webhooks/1"),
                                  std::string("Expect:")})  // no 100-continue round trip before a larger body
    if (curl_slist* more = curl_slist_append(t.headers, line.c_str())) t.headers = more;
    else return "out of memory";
  CURL* e = t.easy = curl_easy_init();
  if (!e) return "out of memory";
  curl_easy_setopt(e, CURLOPT_URL, t.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROXY, "");  // never a proxy from the environment: the address checked is the endpoint's own
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(cfg_.timeout.count()));
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t.body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t.body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &transfer::keep);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &transfer::open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &t);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error);
  if (curl_multi_add_handle(static_cast<CURLM*>(multi_), e) != CURLM_OK) return "out of memory";
  return {};
}

std::size_t webhook_sender::progress(database& db, int wait_ms) {
  CURLM* m = static_cast<CURLM*>(multi_);
  int running = 0;
  curl_multi_perform(m, &running);
  if (static_cast<std::size_t>(running) == flying_.size()) {  // none has ended: wait for one, for a wake() or the time
    curl_multi_poll(m, nullptr, 0, wait_ms, nullptr);
    curl_multi_perform(m, &running);
  }
  std::size_t ended = 0;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    const auto it = flying_.find(msg->easy_handle);
    if (it == flying_.end()) continue;
    std::unique_ptr<transfer> t = std::move(it->second);
    flying_.erase(it);
    curl_multi_remove_handle(m, t->easy);
    if (--per_endpoint_[{t->tenant, t->endpoint}] == 0) per_endpoint_.erase({t->tenant, t->endpoint});
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    std::string error;
    const CURLcode code = msg->data.result;
    switch (code) {
      case CURLE_OK:
        if (status >= 300 && status < 400) error = "redirects are not followed";
        break;
      case CURLE_OPERATION_TIMEDOUT: error = "timeout after " + spoken(cfg_.timeout); break;
      case CURLE_COULDNT_RESOLVE_HOST: error = "host " + t->host + " does not resolve"; break;
      case CURLE_COULDNT_CONNECT: {
        long os_error = 0;
        curl_easy_getinfo(t->easy, CURLINFO_OS_ERRNO, &os_error);
        if (!t->refused.empty()) error = "address " + t->refused + " is not allowed";  // and no other address connected
        else if (os_error == ECONNREFUSED) error = "connection refused";
        else error = "cannot connect: " + std::string(os_error ? std::strerror(static_cast<int>(os_error)) : curl_easy_strerror(code));
        break;
      }
      default: error = *t->error ? std::string(t->error) : std::string(curl_easy_strerror(code));
    }
    if (code != CURLE_OK) status = 0;
    const endpoint_key k{t->tenant, t->endpoint};
    if (code == CURLE_OPERATION_TIMEDOUT) timed_out_[k] = now_();  // hanging: one send at a time until it answers
    else if (code == CURLE_OK) timed_out_.erase(k);
    ++ended;
    try {
      record(db, *t, status, error);
    } catch (const std::exception& e) {
      log::write("error", "webhook_outcome_failed", std::string("a delivery's outcome was not recorded (sent again after its claim): ") + e.what());
    }
  }
  return ended;
}

void webhook_sender::record(database& db, transfer& t, long http_status, const std::string& error) {
  const std::int64_t now = now_();
  const std::int64_t latency = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t.started).count();
  const bool succeeded = error.empty() && http_status >= 200 && http_status < 300, gone = error.empty() && http_status == 410;
  const std::int64_t attempt = t.attempts_before + 1;
  db.write([&] {
    query a = db.sql("INSERT INTO webhook_attempts (tenant, endpoint, attempted_at, message_id, attempt, position, http_status, latency_ms, error, response)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    a.bind(1, t.tenant).bind(2, t.endpoint).bind(3, t.started_ms).bind(4, t.message_id).bind(5, attempt).bind(6, t.position);
    http_status ? a.bind(7, static_cast<std::int64_t>(http_status)) : a.bind_null(7);
    a.bind(8, latency);
    error.empty() ? a.bind_null(9) : a.bind(9, error);
    http_status ? a.bind(10, kept_text(t.response)) : a.bind_null(10);
    a.step();
    // The delivery moves only while this sender's claim on it stands.
    const auto move = [&](const char* state, std::optional<std::int64_t> next_at) {
      query u = db.sql("UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at = ?, claimed_by = NULL, claimed_until = NULL"
                       " WHERE tenant = ? AND endpoint = ? AND position = ? AND state = 'pending' AND claimed_by = ? AND claimed_until = ?");
      u.bind(1, state).bind(2, attempt);
      next_at ? u.bind(3, *next_at) : u.bind_null(3);
      u.bind(4, t.tenant).bind(5, t.endpoint).bind(6, t.position).bind(7, node_).bind(8, t.claimed_until).step();
      if (db.changes() == 1 && std::string_view(state) != "pending")
        db.sql("UPDATE webhook_endpoints SET queued = queued - 1 WHERE tenant = ? AND id = ? AND queued > 0").bind(1, t.tenant).bind(2, t.endpoint).step();
    };
    // Disabled: the endpoint gets nothing more until it is enabled again; what it was owed has failed.
    const auto disable = [&](const std::string& reason) {
      db.sql("UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE tenant = ? AND id = ?")
          .bind(1, reason).bind(2, now).bind(3, t.tenant).bind(4, t.endpoint).step();
      move("failed", std::nullopt);
      db.sql("UPDATE webhook_deliveries SET state = 'failed', next_at = NULL, claimed_by = NULL, claimed_until = NULL"
             " WHERE tenant = ? AND endpoint = ? AND state = 'pending'")
          .bind(1, t.tenant).bind(2, t.endpoint).step();
      const std::int64_t failed = db.changes();
      db.sql("UPDATE webhook_endpoints SET queued = CASE WHEN queued > ? THEN queued - ? ELSE 0 END WHERE tenant = ? AND id = ?")
          .bind(1, failed).bind(2, failed).bind(3, t.tenant).bind(4, t.endpoint).step();
    };
    // Each outcome writes the endpoint's row before the delivery's, in the order queue_delivery takes
    // them, so that on PostgreSQL a sequencing pass and an outcome never wait for each other in a cycle.
    if (succeeded) {
      db.sql("UPDATE webhook_endpoints SET failing_since = NULL WHERE tenant = ? AND id = ?").bind(1, t.tenant).bind(2, t.endpoint).step();
      return move("succeeded", std::nullopt);
    }
    if (gone) return disable("The endpoint answered 410 Gone.");
    std::optional<std::int64_t> failing_since;  // since the first failure after the last success: this one, when none was
    {
      query f = db.sql("UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, ?) WHERE tenant = ? AND id = ? RETURNING failing_since");
      f.bind(1, now).bind(2, t.tenant).bind(3, t.endpoint);
      if (f.step()) failing_since = f.integer(0);
    }
    if (!failing_since) return;  // the endpoint was deleted, and its deliveries with it
    if (now - *failing_since >= cfg_.disable_after.count()) return disable("The endpoint failed for " + spoken(cfg_.disable_after) + ".");
    const std::size_t made = static_cast<std::size_t>(attempt);
    if (made > cfg_.retries.size()) move("failed", std::nullopt);
    else move("pending", now + retry_delay(made));
  });
}

std::size_t webhook_sender::send_due(database& db, std::int64_t now_ms) {
  claim(db, now_ms);
  std::size_t ended = 0;
  while (!flying_.empty()) ended += progress(db, 1000);
  return ended;
}

void webhook_sender::run(database& db) {
  std::int64_t prune_due = 0, last_claim = 0;
  bool freed = true;
  while (!stopping_) {
    const std::int64_t now = now_();
    try {
      if (now >= prune_due) {
        prune_due = now + prune_every_ms;
        std::erase_if(timed_out_, [&](const auto& e) { return now - e.second >= prune_every_ms; });
        prune_webhook_log(db, cfg_, now);
      }
    } catch (const std::exception& e) {
      log::write("error", "webhook_prune_failed", std::string("the delivery log was not pruned (tried again in an hour): ") + e.what());
    }
    if (woken_.exchange(false) || freed || now - last_claim >= poll_ms) {
      last_claim = now;
      try {
        claim(db, now);
      } catch (const std::exception& e) {
        log::write("error", "webhook_claim_failed", std::string("due deliveries were not claimed (tried again at the next poll): ") + e.what());
      }
    }
    freed = progress(db, poll_ms) > 0;
  }
  // Abandoned: their claims lapse, and the rows are sent again (by this node after a restart, or another).
  for (auto& [easy, t] : flying_) curl_multi_remove_handle(static_cast<CURLM*>(multi_), t->easy);
  flying_.clear();
  per_endpoint_.clear();
}

std::size_t prune_webhook_log(database& db, const webhook_config& cfg, std::int64_t now_ms, std::size_t batch,
                              const std::function<void(std::size_t)>& committed) {
  batch = std::max<std::size_t>(1, batch);
  const std::int64_t before = now_ms - cfg.keep.count();
  std::size_t deleted = 0;
  const auto count = [&](std::size_t n) {
    deleted += n;
    if (committed) committed(n);
    return n;
  };
  // The expired rows, oldest first through the time index, `batch` to a transaction, until a transaction
  // finds fewer. By key (row values: SQLite and PostgreSQL alike), as webhook_attempts has no rowid.
  for (const char* text : {"DELETE FROM webhook_attempts WHERE (tenant, endpoint, attempted_at, message_id, attempt) IN"
                           " (SELECT tenant, endpoint, attempted_at, message_id, attempt FROM webhook_attempts WHERE attempted_at < ?"
                           " ORDER BY attempted_at LIMIT ?)",
                           "DELETE FROM event_feed WHERE position IN (SELECT position FROM event_feed WHERE created_at < ? ORDER BY created_at LIMIT ?)"}) {
    std::size_t n = 0;
    do {
      n = count(db.write([&] {
        db.sql(text).bind(1, before).bind(2, static_cast<std::int64_t>(batch)).step();
        return static_cast<std::size_t>(db.changes());
      }));
    } while (n == batch);
  }
  // Finished deliveries whose event is gone: found by a read (no write lock held while the table is
  // scanned), deleted by key, `batch` to a transaction.
  struct key {
    std::string tenant, endpoint;
    std::int64_t position;
  };
  for (;;) {
    const std::vector<key> orphans = db.read([&] {
      query q = db.sql("SELECT d.tenant, d.endpoint, d.position FROM webhook_deliveries d WHERE d.state <> 'pending'"
                       " AND NOT EXISTS (SELECT 1 FROM event_feed f WHERE f.position = d.position) LIMIT ?");
      q.bind(1, static_cast<std::int64_t>(batch));
      std::vector<key> out;
      while (q.step()) out.push_back({q.text(0), q.text(1), q.integer(2)});
      return out;
    });
    if (orphans.empty()) break;
    count(db.write([&] {
      std::size_t n = 0;
      for (const key& k : orphans) {
        db.sql("DELETE FROM webhook_deliveries WHERE tenant = ? AND endpoint = ? AND position = ? AND state <> 'pending'")
            .bind(1, k.tenant).bind(2, k.endpoint).bind(3, k.position).step();
        n += static_cast<std::size_t>(db.changes());
      }
      return n;
    }));
    if (orphans.size() < batch) break;
  }
  return deleted;
}

}  // namespace folio::service
