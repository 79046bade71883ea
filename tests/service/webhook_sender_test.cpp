// The webhook sender (webhooks/sender.hpp) against a real HTTP receiver on loopback (a listening socket
// of this test, a thread per connection, answers scripted per path) and a real database: the headers
// and signatures (checked here with OpenSSL's HMAC, not with the service's code), the retry schedule
// under an injected clock, disabling (410, failing for 5 days), the address check at connect time, one
// endpoint or tenant that hangs not holding another's delivery, a hanging endpoint's back-off, claims
// across senders, and the log's retention (in batches).
// Ordering is by latches (the receiver's condition variable), never by waiting on the clock.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "events/feed.hpp"
#include "support.hpp"
#include "webhooks/sender.hpp"
#include "webhooks/signature.hpp"

namespace folio_service_test {
namespace {

constexpr std::int64_t second = 1000, minute = 60 * second, hour = 60 * minute, day = 24 * hour;

/// An HTTP/1.1 server on 127.0.0.1 answering each POST as its path's script says: a status, or hang
/// until release() (then 200).
class receiver {
 public:
  struct request {
    std::string path, body;
    std::map<std::string, std::string> headers;  ///< names in lower case
  };
  struct answer {
    int status = 200;
    bool hang = false;
    std::string body;      ///< "" for "answer <status>"
    std::string location;  ///< a Location header, when not ""
  };
  using script = std::function<answer(int nth)>;  ///< nth: 0 for the path's first request

  receiver() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("receiver cannot listen");
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~receiver() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = released_ = true;
    }
    changed_.notify_all();
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
    ::close(listener_);
  }
  std::string url(const std::string& path, const std::string& host = "127.0.0.1") const { return "http://" + host + ":" + std::to_string(port_) + path; }
  void on(const std::string& path, script s) {
    std::lock_guard<std::mutex> l(mu_);
    scripts_[path] = std::move(s);
  }
  /// Hanging requests are answered (200), and later ones no longer hang.
  void release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      released_ = true;
    }
    changed_.notify_all();
  }
  std::vector<request> received(const std::string& path = "") {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<request> out;
    for (const request& r : got_)
      if (path.empty() || r.path == path) out.push_back(r);
    return out;
  }
  /// Waits until `paths` have received `n` requests together (false after 30 s: the test fails, it
  /// never orders by it).
  bool wait_for(const std::vector<std::string>& paths, std::size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    return changed_.wait_for(l, std::chrono::seconds(30), [&] {
      std::size_t got = 0;
      for (const std::string& p : paths) got += count(p);
      return got >= n;
    });
  }
  bool wait_for(const std::string& path, std::size_t n) { return wait_for(std::vector<std::string>{path}, n); }

 private:
  std::size_t count(const std::string& path) const {
    std::size_t n = 0;
    for (const request& r : got_) n += r.path == path;
    return n;
  }
  void accept_loop() {
    for (;;) {
      const int c = ::accept(listener_, nullptr, nullptr);
      if (c < 0) return;
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return (void)::close(c);
      connections_.emplace_back([this, c] { serve(c); });
    }
  }
  void serve(int c) {
    timeval tv{30, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string in;
    char buf[4096];
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return (void)::close(c);
      in.append(buf, static_cast<std::size_t>(n));
    }
    request r;
    const std::string head = in.substr(0, head_end);
    const std::size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    r.path = first.substr(first.find(' ') + 1, first.rfind(' ') - first.find(' ') - 1);
    for (std::size_t at = line_end; at != std::string::npos && at < head.size();) {
      const std::size_t next = head.find("\r\n", at + 2);
      const std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      }
      at = next;
    }
    const std::size_t length = std::stoul(r.headers.count("content-length") ? r.headers["content-length"] : "0");
    r.body = in.substr(head_end + 4);
    while (r.body.size() < length) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return (void)::close(c);
      r.body.append(buf, static_cast<std::size_t>(n));
    }
    answer a;
    {
      std::unique_lock<std::mutex> l(mu_);
      const int nth = static_cast<int>(count(r.path));
      if (scripts_.count(r.path)) a = scripts_[r.path](nth);
      got_.push_back(r);
      changed_.notify_all();
      if (a.hang) changed_.wait(l, [&] { return released_; });
    }
    const std::string body = a.body.empty() ? "answer " + std::to_string(a.status) : a.body;
    const std::string out = "HTTP/1.1 " + std::to_string(a.status) + " X\r\nContent-Length: " + std::to_string(body.size()) +
                            (a.location.empty() ? "" : "\r\nLocation: " + a.location) + "\r\nConnection: close\r\n\r\n" + body;
    ::send(c, out.data(), out.size(), MSG_NOSIGNAL);
    ::close(c);
  }

  int listener_ = -1, port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> connections_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, script> scripts_;
  std::vector<request> got_;
  bool stopping_ = false, released_ = false;
};

receiver::answer status(int s) { return {s, false, {}, {}}; }
receiver::answer hang() { return {200, true, {}, {}}; }

/// The Standard Webhooks signature, computed here: "v1," + base64(HMAC-SHA256(base64-decoded secret
/// after "whsec_", "id.timestamp.body")).
std::string expected_signature(const std::string& secret, const std::string& id, const std::string& timestamp, const std::string& body) {
  const std::string b64 = secret.substr(6);
  std::vector<unsigned char> key(b64.size());
  int n = EVP_DecodeBlock(key.data(), reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  for (std::size_t i = b64.size(); i > 0 && b64[i - 1] == '='; --i) --n;
  const std::string message = id + "." + timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), n, reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_len);
  std::vector<unsigned char> out(4 * ((mac_len + 2) / 3) + 1);
  EVP_EncodeBlock(out.data(), mac, static_cast<int>(mac_len));
  return "v1," + std::string(reinterpret_cast<const char*>(out.data()));
}

struct webhook_sending : ::testing::Test {
  temp_db tmp;
  svc::database db{tmp.path(), svc::responder::tables()};
  receiver rx;
  svc::webhook_config cfg;
  std::atomic<std::int64_t> now{1'800'000'000'000};
  const std::string tenant = "k1";
  std::map<std::string, std::string> secrets;  ///< by endpoint id

  webhook_sending() { cfg.allow = {"127.0.0.0/8"}; }

  std::unique_ptr<svc::webhook_sender> make(const std::string& node = "node-a") {
    return std::make_unique<svc::webhook_sender>(cfg, node, [this] { return now.load(); });
  }
  void endpoint(const std::string& id, const std::string& url, const std::string& who = "") {
    secrets[id] = svc::new_webhook_secret();
    db.write([&] {
      db.sql("INSERT INTO webhook_endpoints (tenant, id, url, enabled, secret, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?, ?)")
          .bind(1, who.empty() ? tenant : who).bind(2, id).bind(3, url).bind(4, secrets[id]).bind(5, now.load()).bind(6, now.load()).step();
    });
  }
  /// An event of the feed queued for `endpoint`, due now; returns its message id.
  std::string event(const std::string& endpoint, const std::string& who = "") {
    const std::string id = svc::new_message_id();
    const std::string body = R"({"type":"comment.added","timestamp":"2027-01-15T08:00:00.000Z","data":{"n":")" + id + "\"}}";
    db.write(svc::feed_key, [&] {
      const std::int64_t position = svc::append_to_feed(db, who.empty() ? tenant : who, id, "comment.added", "o", now.load(), true, body);
      EXPECT_TRUE(svc::queue_delivery(db, cfg, who.empty() ? tenant : who, endpoint, position, id, now.load()));
    });
    return id;
  }
  std::int64_t integer(const std::string& sql) {
    svc::query q = db.prepare(sql);
    return q.step() && !q.is_null(0) ? q.integer(0) : -1;
  }
  std::string text(const std::string& sql) {
    svc::query q = db.prepare(sql);
    return q.step() && !q.is_null(0) ? q.text(0) : std::string("NULL");
  }
  std::string state(const std::string& message) { return text("SELECT state FROM webhook_deliveries WHERE message_id = '" + message + "'"); }
  std::int64_t next_at(const std::string& message) { return integer("SELECT next_at FROM webhook_deliveries WHERE message_id = '" + message + "'"); }
  std::int64_t queued(const std::string& ep) { return integer("SELECT queued FROM webhook_endpoints WHERE id = '" + ep + "'"); }
  /// Two events for `ep`: one due now, one due an hour later.
  std::pair<std::string, std::string> now_and_later(const std::string& ep) {
    const std::string first = event(ep);
    now += hour;
    const std::string later = event(ep);
    now -= hour;
    return {first, later};
  }
  /// The only endpoint, `ep`, is disabled for `reason`, and what it was owed (`owed`) has failed.
  void expect_disabled(const std::string& ep, const std::string& reason, const std::vector<std::string>& owed) {
    EXPECT_EQ(integer("SELECT enabled FROM webhook_endpoints"), 0);
    EXPECT_EQ(text("SELECT disabled_reason FROM webhook_endpoints"), reason);
    for (const std::string& m : owed) EXPECT_EQ(state(m), "failed") << m;
    EXPECT_EQ(queued(ep), 0);
  }
};

TEST_F(webhook_sending, ADeliveryIsPostedWithTheStandardHeadersAndAVerifiableSignature) {
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  EXPECT_EQ(queued("ep_a"), 1);
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 1u);
  const std::vector<receiver::request> got = rx.received("/a");
  ASSERT_EQ(got.size(), 1u);
  const receiver::request& r = got[0];
  EXPECT_EQ(r.headers.at("webhook-id"), id);
  EXPECT_EQ(r.headers.at("webhook-timestamp"), std::to_string(now / 1000));
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("user-agent"), "Folio-Webhooks/1");
  EXPECT_EQ(r.body, text("SELECT body FROM event_feed WHERE id = '" + id + "'"));
  EXPECT_EQ(r.headers.at("webhook-signature"), expected_signature(secrets["ep_a"], id, r.headers.at("webhook-timestamp"), r.body));
  EXPECT_EQ(state(id), "succeeded");
  EXPECT_EQ(queued("ep_a"), 0);
  EXPECT_EQ(integer("SELECT http_status FROM webhook_attempts WHERE message_id = '" + id + "'"), 200);
  EXPECT_EQ(integer("SELECT attempt FROM webhook_attempts WHERE message_id = '" + id + "'"), 1);
  EXPECT_EQ(integer("SELECT attempted_at FROM webhook_attempts WHERE message_id = '" + id + "'"), now.load());
  EXPECT_EQ(text("SELECT response FROM webhook_attempts WHERE message_id = '" + id + "'"), "answer 200");
  EXPECT_EQ(text("SELECT error FROM webhook_attempts WHERE message_id = '" + id + "'"), "NULL");
  EXPECT_EQ(s->send_due(db, now + day), 0u);  // nothing more to send
}

TEST_F(webhook_sending, APollThatFindsNothingDueWritesNothing) {
  FOLIO_SQLITE_ONLY();  // the count of commits is SQLite's
  endpoint("ep_a", rx.url("/a"));
  now += hour;
  event("ep_a");  // due in an hour
  now -= hour;
  auto s = make();
  const std::uint64_t commits = db.usage().commits;
  EXPECT_EQ(s->send_due(db, now), 0u);
  EXPECT_EQ(db.usage().commits, commits);
  EXPECT_EQ(s->send_due(db, now + hour), 1u);
  EXPECT_GT(db.usage().commits, commits);
}

TEST_F(webhook_sending, TheLogKeepsAnAnswersFirstKilobyteAsText) {
  rx.on("/a", [](int) { return receiver::answer{502, false, std::string("\xff\x00ok", 4) + std::string(2000, 'x'), {}}; });
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  EXPECT_EQ(make()->send_due(db, now), 1u);
  EXPECT_EQ(integer("SELECT http_status FROM webhook_attempts"), 502);
  const std::string kept = "\xef\xbf\xbd\xef\xbf\xbdok";  // the byte that is not UTF-8 and the NUL, each as U+FFFD
  EXPECT_EQ(text("SELECT response FROM webhook_attempts"), kept + std::string(1024 - kept.size(), 'x'));
  EXPECT_EQ(state(id), "pending");
}

TEST_F(webhook_sending, ARotatedOutSecretSignsToo_UntilItExpires) {
  endpoint("ep_a", rx.url("/a"));
  const std::string old_secret = svc::new_webhook_secret();
  db.write([&] {
    db.sql("UPDATE webhook_endpoints SET old_secret = ?, old_secret_until = ?").bind(1, old_secret).bind(2, now + hour).step();
  });
  const std::string first = event("ep_a");
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 1u);
  now += hour;  // the old secret's day is over
  const std::string second_id = event("ep_a");
  EXPECT_EQ(s->send_due(db, now), 1u);
  const std::vector<receiver::request> got = rx.received("/a");
  ASSERT_EQ(got.size(), 2u);
  const std::string& ts = got[0].headers.at("webhook-timestamp");
  EXPECT_EQ(got[0].headers.at("webhook-signature"),
            expected_signature(secrets["ep_a"], first, ts, got[0].body) + " " + expected_signature(old_secret, first, ts, got[0].body));
  EXPECT_EQ(got[1].headers.at("webhook-signature"), expected_signature(secrets["ep_a"], second_id, got[1].headers.at("webhook-timestamp"), got[1].body));
}

TEST_F(webhook_sending, FailuresAreRetriedOnTheScheduleWithJitterEachAttemptSignedAnew) {
  rx.on("/a", [](int nth) { return status(nth < 4 ? 500 : 200); });
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  auto s = make();
  const std::int64_t start = now;
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(s->send_due(db, now), 1u) << k;
    EXPECT_EQ(state(id), "pending");
    EXPECT_EQ(integer("SELECT failing_since FROM webhook_endpoints"), start);  // since the first failure
    const std::int64_t wait = cfg.retries[k].count(), due = next_at(id);
    EXPECT_GE(due - now, wait - wait / 10) << k;
    EXPECT_LE(due - now, wait + wait / 10) << k;
    EXPECT_EQ(s->send_due(db, due - 1), 0u) << k;  // not before it is due
    now = due;
  }
  EXPECT_EQ(s->send_due(db, now), 1u);
  EXPECT_EQ(state(id), "succeeded");
  EXPECT_EQ(queued("ep_a"), 0);
  EXPECT_EQ(integer("SELECT failing_since FROM webhook_endpoints"), -1);  // cleared by the success
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_attempts WHERE http_status = 500"), 4);
  EXPECT_EQ(integer("SELECT max(attempt) FROM webhook_attempts"), 5);
  const std::vector<receiver::request> got = rx.received("/a");
  ASSERT_EQ(got.size(), 5u);
  std::set<std::string> timestamps;
  for (const receiver::request& r : got) {
    EXPECT_EQ(r.headers.at("webhook-id"), id);  // the same on every attempt
    EXPECT_EQ(r.headers.at("webhook-signature"), expected_signature(secrets["ep_a"], id, r.headers.at("webhook-timestamp"), r.body));
    timestamps.insert(r.headers.at("webhook-timestamp"));
  }
  EXPECT_EQ(timestamps.size(), 5u);  // each attempt its own timestamp
  EXPECT_LT(std::stoll(got[1].headers.at("webhook-timestamp")) - start / 1000, 6);  // about 5 s after the first
}

TEST_F(webhook_sending, ADeliveryFailsAfterTheLastRetry) {
  rx.on("/a", [](int) { return status(503); });
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  auto s = make();
  for (std::size_t k = 0; k <= cfg.retries.size(); ++k) {
    ASSERT_EQ(state(id), "pending");
    EXPECT_EQ(s->send_due(db, now), 1u);
    if (k == cfg.retries.size()) break;
    const std::int64_t wait = cfg.retries[k].count(), due = next_at(id);  // 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, ±10%
    EXPECT_GE(due - now, wait - wait / 10) << k;
    EXPECT_LE(due - now, wait + wait / 10) << k;
    now = due;
  }
  EXPECT_EQ(state(id), "failed");
  EXPECT_EQ(integer("SELECT attempts FROM webhook_deliveries"), 8);
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_attempts"), 8);
  EXPECT_EQ(queued("ep_a"), 0);
  EXPECT_EQ(integer("SELECT enabled FROM webhook_endpoints"), 1);  // about 28 hours of failures: not 5 days
  EXPECT_EQ(s->send_due(db, now + day), 0u);
}

TEST_F(webhook_sending, A410DisablesTheEndpointAndFailsWhatItIsOwed) {
  rx.on("/a", [](int) { return status(410); });
  endpoint("ep_a", rx.url("/a"));
  const auto [sent, later] = now_and_later("ep_a");
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 1u);
  expect_disabled("ep_a", "The endpoint answered 410 Gone.", {sent, later});
  EXPECT_EQ(s->send_due(db, now + 2 * hour), 0u);
  EXPECT_EQ(rx.received().size(), 1u);
}

TEST_F(webhook_sending, AnEndpointFailingForFiveDaysIsDisabled) {
  rx.on("/a", [](int) { return status(500); });
  endpoint("ep_a", rx.url("/a"));
  db.write([&] { db.sql("UPDATE webhook_endpoints SET failing_since = ?").bind(1, now - 5 * day + 1).step(); });
  const auto [id, later] = now_and_later("ep_a");
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 1u);  // failing for 5 days less 1 ms: retried
  EXPECT_EQ(integer("SELECT enabled FROM webhook_endpoints"), 1);
  EXPECT_EQ(state(id), "pending");
  now = next_at(id);
  EXPECT_EQ(s->send_due(db, now), 1u);
  expect_disabled("ep_a", "The endpoint failed for 5 days.", {id, later});
}

TEST_F(webhook_sending, AnAddressThePolicyRefusesIsNeverConnectedTo) {
  cfg.allow.clear();
  endpoint("ep_ip", rx.url("/ip"));
  endpoint("ep_name", rx.url("/name", "localhost"));  // a name that resolves to loopback
  const std::string by_ip = event("ep_ip"), by_name = event("ep_name");
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 2u);
  EXPECT_TRUE(rx.received().empty());
  EXPECT_EQ(text("SELECT error FROM webhook_attempts WHERE message_id = '" + by_ip + "'"), "address 127.0.0.1 is not allowed");
  EXPECT_EQ(integer("SELECT http_status FROM webhook_attempts WHERE message_id = '" + by_ip + "'"), -1);
  const std::string named = text("SELECT error FROM webhook_attempts WHERE message_id = '" + by_name + "'");
  EXPECT_TRUE(named == "address 127.0.0.1 is not allowed" || named == "address ::1 is not allowed") << named;
  EXPECT_EQ(state(by_ip), "pending");  // a failure like any other: retried
  cfg.allow = {"127.0.0.1"};
  EXPECT_EQ(make()->send_due(db, std::max(next_at(by_ip), next_at(by_name))), 2u);
  EXPECT_EQ(rx.received("/ip").size(), 1u);
  EXPECT_EQ(rx.received("/name").size(), 1u);  // ::1, not allowed, is passed over for 127.0.0.1
}

TEST_F(webhook_sending, ARedirectIsAFailureAndNotFollowed) {
  const std::string elsewhere = rx.url("/elsewhere");
  rx.on("/a", [&](int) { return receiver::answer{302, false, {}, elsewhere}; });
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  EXPECT_EQ(make()->send_due(db, now), 1u);
  EXPECT_EQ(integer("SELECT http_status FROM webhook_attempts"), 302);
  EXPECT_EQ(text("SELECT error FROM webhook_attempts"), "redirects are not followed");
  EXPECT_EQ(state(id), "pending");
  EXPECT_TRUE(rx.received("/elsewhere").empty());
}

TEST_F(webhook_sending, AnAttemptEndsAtTheTimeout) {
  cfg.timeout = std::chrono::milliseconds(300);
  rx.on("/a", [](int) { return hang(); });
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  EXPECT_EQ(make()->send_due(db, now), 1u);
  EXPECT_EQ(text("SELECT error FROM webhook_attempts"), "timeout after 300 ms");
  EXPECT_EQ(integer("SELECT http_status FROM webhook_attempts"), -1);
  EXPECT_GE(integer("SELECT latency_ms FROM webhook_attempts"), 250);  // libcurl times from its own start, a little after ours
  EXPECT_EQ(state(id), "pending");
  rx.release();
}

TEST_F(webhook_sending, ADisabledEndpointIsNotSentTo_ADeletedOneMidSendIsLeftDeleted) {
  endpoint("ep_off", rx.url("/off"));
  endpoint("ep_gone", rx.url("/gone"));
  rx.on("/gone", [](int) { return hang(); });
  const std::string off = event("ep_off");
  event("ep_gone");
  db.write([&] { db.sql("UPDATE webhook_endpoints SET enabled = 0 WHERE id = 'ep_off'").step(); });
  auto s = make();
  svc::database own{tmp.path(), svc::responder::tables()};
  std::future<std::size_t> sent = std::async(std::launch::async, [&] { return s->send_due(own, now); });
  EXPECT_TRUE(rx.wait_for("/gone", 1));
  db.write([&] {  // as endpoints/delete does
    db.sql("DELETE FROM webhook_deliveries WHERE endpoint = 'ep_gone'").step();
    db.sql("DELETE FROM webhook_endpoints WHERE id = 'ep_gone'").step();
  });
  rx.release();
  EXPECT_EQ(sent.get(), 1u);
  EXPECT_TRUE(rx.received("/off").empty());
  EXPECT_EQ(state(off), "pending");
  EXPECT_EQ(queued("ep_off"), 1);
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_endpoints"), 1);  // nothing written back for the deleted one
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_deliveries"), 1);
  EXPECT_EQ(integer("SELECT http_status FROM webhook_attempts WHERE endpoint = 'ep_gone'"), 200);  // its log stays until kept time
}

TEST_F(webhook_sending, AnEndpointThatHangsDoesNotHoldAnotherEndpointsDelivery) {
  cfg.sends = 4, cfg.sends_per_endpoint = 2, cfg.timeout = std::chrono::minutes(5);  // no attempt ends but by release()
  rx.on("/hang", [](int) { return hang(); });
  endpoint("ep_hang", rx.url("/hang"));
  endpoint("ep_fast", rx.url("/fast"), "k2");  // another tenant's
  for (int i = 0; i < 5; ++i) event("ep_hang");
  auto s = make();
  svc::database own{tmp.path(), svc::responder::tables()};
  std::thread loop([&] { s->run(own); });
  EXPECT_TRUE(rx.wait_for("/hang", 2));
  event("ep_fast", "k2");
  s->wake();
  EXPECT_TRUE(rx.wait_for("/fast", 1));
  EXPECT_EQ(rx.received("/hang").size(), 2u);  // the hanging endpoint holds its two slots, no more
  rx.release();
  EXPECT_TRUE(rx.wait_for("/hang", 5));  // the rest follow once its slots free
  s->stop();
  loop.join();
}

TEST_F(webhook_sending, TenantsWhoseEndpointsAllHangLeaveAnotherTenantASlot) {
  // 5 tenants in flight x 2 per tenant < 12 sends: a sixth tenant gets a slot while they all hang (one
  // tenant's 3 endpoints and 4 tenants' one each, enough to fill 12 slots without the tenants' bound).
  cfg.sends = 12, cfg.sends_per_endpoint = 4, cfg.sends_per_tenant = 2, cfg.timeout = std::chrono::minutes(5);  // no attempt ends but by release()
  const std::vector<std::pair<std::string, std::string>> hanging = {{"k1", "/k1a"}, {"k1", "/k1b"}, {"k1", "/k1c"}, {"k3", "/k3"},
                                                                    {"k4", "/k4"},   {"k5", "/k5"},   {"k6", "/k6"}};
  std::vector<std::string> paths;
  for (const auto& [who, path] : hanging) {
    rx.on(path, [](int) { return hang(); });
    endpoint("ep" + path.substr(1), rx.url(path), who);
    for (int i = 0; i < 4; ++i) event("ep" + path.substr(1), who);
    paths.push_back(path);
  }
  endpoint("ep_fast", rx.url("/fast"), "k2");
  auto s = make();
  svc::database own{tmp.path(), svc::responder::tables()};
  std::thread loop([&] { s->run(own); });
  EXPECT_TRUE(rx.wait_for(paths, 10));  // each hanging tenant holds its two slots
  event("ep_fast", "k2");
  s->wake();
  EXPECT_TRUE(rx.wait_for("/fast", 1));
  std::size_t held = 0, held_by_k1 = 0;
  for (const std::string& p : paths) held += rx.received(p).size(), held_by_k1 += p.starts_with("/k1") ? rx.received(p).size() : 0;
  EXPECT_EQ(held, 10u);  // two per hanging tenant, however many endpoints it has
  EXPECT_EQ(held_by_k1, 2u);
  rx.release();
  EXPECT_TRUE(rx.wait_for(paths, 28));  // the rest follow once their slots free
  s->stop();
  loop.join();
}

TEST_F(webhook_sending, AnEndpointWhoseLastAttemptTimedOutGetsOneSendUntilItAnswers) {
  cfg.timeout = std::chrono::milliseconds(300);  // the attempts that hang end at their timeout
  rx.on("/a", [](int nth) { return nth < 2 ? hang() : status(200); });
  endpoint("ep_a", rx.url("/a"));
  event("ep_a");
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 1u);  // timed out
  for (int i = 0; i < 4; ++i) event("ep_a");
  now += 10 * second;  // the first one's retry is due too
  EXPECT_EQ(s->send_due(db, now), 1u);  // five due, one sent: it times out again
  EXPECT_EQ(rx.received("/a").size(), 2u);
  now += 10 * second;
  EXPECT_EQ(s->send_due(db, now), 1u);  // still one at a time: this one is answered
  EXPECT_EQ(s->send_due(db, now), 4u);  // answered: sends_per_endpoint again
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'"), 5);
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_attempts WHERE error = 'timeout after 300 ms'"), 2);
  rx.release();
}

TEST_F(webhook_sending, TwoSendersNeverSendOneDeliveryTwiceWhileItsClaimStands) {
  cfg.sends_per_endpoint = 16, cfg.sends_per_tenant = 16;
  rx.on("/a", [](int) { return hang(); });
  endpoint("ep_a", rx.url("/a"));
  for (int i = 0; i < 10; ++i) event("ep_a");
  auto a = make("node-a"), b = make("node-b");
  svc::database db_a{tmp.path(), svc::responder::tables()}, db_b{tmp.path(), svc::responder::tables()};
  std::future<std::size_t> sent_by_a = std::async(std::launch::async, [&] { return a->send_due(db_a, now); });
  EXPECT_TRUE(rx.wait_for("/a", 10));  // a holds all ten
  EXPECT_EQ(b->send_due(db_b, now), 0u);
  EXPECT_EQ(b->send_due(db_b, now + cfg.timeout.count() + 30 * second - 1), 0u);  // a's claims still stand
  rx.release();
  EXPECT_EQ(sent_by_a.get(), 10u);
  std::set<std::string> ids;
  for (const receiver::request& r : rx.received()) ids.insert(r.headers.at("webhook-id"));
  EXPECT_EQ(rx.received().size(), 10u);
  EXPECT_EQ(ids.size(), 10u);
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'"), 10);
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_deliveries WHERE claimed_by IS NOT NULL"), 0);
}

TEST_F(webhook_sending, ADeadSendersClaimIsTakenOverOnceItLapses) {
  rx.on("/a", [](int nth) { return nth == 0 ? hang() : status(200); });
  endpoint("ep_a", rx.url("/a"));
  const std::string id = event("ep_a");
  auto dead = make("node-dead");
  {
    svc::database own{tmp.path(), svc::responder::tables()};
    std::thread loop([&] { dead->run(own); });
    EXPECT_TRUE(rx.wait_for("/a", 1));  // sent, its answer not yet come
    dead->stop();                       // gone mid-send: its claim stays
    loop.join();
  }
  EXPECT_EQ(text("SELECT claimed_by FROM webhook_deliveries"), "node-dead");
  const std::int64_t until = integer("SELECT claimed_until FROM webhook_deliveries");
  EXPECT_EQ(until, now + cfg.timeout.count() + 30 * second);
  auto heir = make("node-b");
  EXPECT_EQ(heir->send_due(db, until), 0u);
  EXPECT_EQ(heir->send_due(db, until + 1), 1u);
  EXPECT_EQ(state(id), "succeeded");
  EXPECT_EQ(queued("ep_a"), 0);
  const std::vector<receiver::request> got = rx.received("/a");
  ASSERT_EQ(got.size(), 2u);  // the dead sender's begun send, and the heir's
  EXPECT_EQ(got[1].headers.at("webhook-id"), id);
  rx.release();
}

TEST_F(webhook_sending, TheLogIsKeptForItsTimeThenPruned) {
  endpoint("ep_a", rx.url("/a"));
  const std::string done = event("ep_a");
  auto s = make();
  EXPECT_EQ(s->send_due(db, now), 1u);
  now += hour;
  const std::string owed = event("ep_a");  // pending, never sent before its event is pruned
  db.write([&] { db.sql("UPDATE webhook_deliveries SET next_at = ? WHERE message_id = ?").bind(1, now + 40 * day).bind(2, owed).step(); });
  EXPECT_EQ(svc::prune_webhook_log(db, cfg, now + cfg.keep.count() - hour), 0u);  // the first event's 30 days not yet over
  EXPECT_EQ(svc::prune_webhook_log(db, cfg, now + cfg.keep.count() - hour + 1), 3u);  // its attempt, its event, its delivery
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_attempts"), 0);
  EXPECT_EQ(state(done), "NULL");
  EXPECT_EQ(state(owed), "pending");
  EXPECT_EQ(svc::prune_webhook_log(db, cfg, now + cfg.keep.count() + 1), 1u);  // the second event
  EXPECT_EQ(queued("ep_a"), 1);
  EXPECT_EQ(s->send_due(db, now + 41 * day), 0u);  // its event is gone: failed, not sent
  EXPECT_EQ(state(owed), "failed");
  EXPECT_EQ(queued("ep_a"), 0);
  EXPECT_EQ(rx.received().size(), 1u);
}

TEST_F(webhook_sending, TheLogIsPrunedInBatchesEachItsOwnTransaction) {
  endpoint("ep_a", rx.url("/a"));
  for (int i = 0; i < 25; ++i) {
    const std::string id = event("ep_a");
    db.write([&] {
      db.sql("INSERT INTO webhook_attempts (tenant, endpoint, attempted_at, message_id, attempt, position, http_status, latency_ms)"
             " SELECT tenant, endpoint, ?, message_id, 1, position, 200, 1 FROM webhook_deliveries WHERE message_id = ?")
          .bind(1, now.load()).bind(2, id).step();
      db.sql("UPDATE webhook_deliveries SET state = 'succeeded', attempts = 1, next_at = NULL WHERE message_id = ?").bind(1, id).step();
    });
  }
  db.write([&] { db.sql("UPDATE webhook_endpoints SET queued = 0").step(); });
  std::vector<std::size_t> transactions;
  const auto committed = [&](std::size_t n) { transactions.push_back(n); };
  EXPECT_EQ(svc::prune_webhook_log(db, cfg, now + cfg.keep.count(), 10, committed), 0u);  // not yet expired
  EXPECT_EQ(transactions, (std::vector<std::size_t>{0, 0}));
  transactions.clear();
  EXPECT_EQ(svc::prune_webhook_log(db, cfg, now + cfg.keep.count() + 1, 10, committed), 75u);
  // The attempts, the events, then the deliveries whose event is gone: at most 10 rows a transaction.
  EXPECT_EQ(transactions, (std::vector<std::size_t>{10, 10, 5, 10, 10, 5, 10, 10, 5}));
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_attempts"), 0);
  EXPECT_EQ(integer("SELECT count(*) FROM event_feed"), 0);
  EXPECT_EQ(integer("SELECT count(*) FROM webhook_deliveries"), 0);
}

}  // namespace
}  // namespace folio_service_test
