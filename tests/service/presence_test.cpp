// Presence (service/presence/): the stores' invariants, in memory and in a real Redis (a redis-server this
// test starts on a unix socket, with a password), shared by two stores as two nodes share it; the
// endpoints through the server on the test database (SQLite, and PostgreSQL in the pg. pass): joins,
// updates and leaves published, expiry by the injected clock, every refusal's message; the presence
// budget apart from the changes'. The wire, nginx and a 3-node cluster: tests/e2e/presence_e2e.py.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crdt/publish/budgets.hpp"
#include "platform/client_token.hpp"
#include "presence/memory_store.hpp"
#include "presence/rate_limit.hpp"
#include "presence/redis_store.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

/// A redis-server of this test's own on a unix socket in a temporary directory, requiring a password;
/// stopped (SIGTERM, waited for) at the end. Skips the test when redis-server is not installed.
class private_redis {
 public:
  private_redis() {
    dir_ = std::filesystem::temp_directory_path() / ("folio-presence-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    socket_ = (dir_ / "redis.sock").string();
    // As folio-fcgi does: a write to a connection Redis closed fails with EPIPE instead of killing the process.
    ::signal(SIGPIPE, SIG_IGN);
    start();
  }
  ~private_redis() {
    stop();
    std::filesystem::remove_all(dir_);
  }
  /// Stops it (its connections end; it keeps nothing) and starts it again on the same socket.
  void restart() {
    stop();
    start();
  }
  bool running() const { return pid_ > 0; }
  std::string address() const { return "unix:" + socket_; }
  const std::string password = "presence-test-password";

 private:
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
    std::filesystem::remove(socket_);
  }
  void start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);  // nor does it hold the test's output open
      ::execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", socket_.c_str(), "--save", "", "--appendonly", "no", "--requirepass",
               password.c_str(), "--dir", dir_.c_str(), "--loglevel", "warning", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Listening once a connection is accepted (its socket file appears at bind(), before listen()).
    for (int i = 0; i < 400 && !accepts(); ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool accepts() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    socket_.copy(a.sun_path, sizeof(a.sun_path) - 1);
    const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
  }
  std::filesystem::path dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

/// "<prefix><i>" (built by append: g++ 12 warns, wrongly, about `"c" + std::to_string(i)` inlined in a loop).
std::string numbered(const char* prefix, std::size_t i) { return std::string(prefix).append(std::to_string(i)); }

private_redis& redis() {
  static private_redis r;
  return r;
}

// The store's invariants, for each store: "memory", or "redis" (a fresh key space each test: FLUSHALL
// through a first store before the test).
struct stores : ::testing::TestWithParam<std::string> {
  std::unique_ptr<svc::presence_store> make(std::size_t per_tenant = 10000) {
    if (GetParam() == "memory") return std::make_unique<svc::memory_presence_store>(per_tenant);
    return std::make_unique<svc::redis_presence_store>(redis().address(), redis().password, per_tenant);
  }
  void SetUp() override {
    if (GetParam() == "redis") {
      if (!redis().running()) GTEST_SKIP() << "redis-server is not installed";
      flush();
    }
  }
  void flush() {
    // Through hiredis as a store does: the store's own command is private, so a Lua-free way is a
    // second store's expire of everything (every entry) — plus the count keys, which only entries make.
    svc::redis_presence_store s(redis().address(), redis().password, 1);
    while (!s.expire(std::numeric_limits<std::int64_t>::max(), 1000).empty()) {
    }
  }
  static svc::record_key rec(const std::string& editor, const std::string& tenant = "t") { return {tenant, "o", "d", editor}; }
};

TEST_P(stores, JoinUpdateLeaveKeepTheUserAndTheFields) {
  auto s = make();
  auto j = s->set(rec("e"), "c1", "ana", R"({"name":"Ana"})", std::nullopt, 1000);
  EXPECT_EQ(j.outcome, svc::presence_store::set_outcome::joined);
  EXPECT_TRUE(j.changed);
  EXPECT_EQ(j.entry.state, R"({"name":"Ana"})");
  EXPECT_EQ(j.entry.selection, "null");
  // A refresh keeps state and selection and changes nothing.
  auto r = s->set(rec("e"), "c1", "ana", std::nullopt, std::nullopt, 2000);
  EXPECT_EQ(r.outcome, svc::presence_store::set_outcome::updated);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.entry.state, R"({"name":"Ana"})");
  EXPECT_EQ(r.entry.updated_ms, 2000);
  auto u = s->set(rec("e"), "c1", "ana", std::nullopt, R"({"anchor":"1.2","head":"end"})", 3000);
  EXPECT_TRUE(u.changed);
  EXPECT_EQ(u.entry.selection, R"({"anchor":"1.2","head":"end"})");
  // Another user cannot take the clientId, nor make it leave.
  EXPECT_EQ(s->set(rec("e"), "c1", "bob", "{}", std::nullopt, 3000).outcome, svc::presence_store::set_outcome::other_user);
  EXPECT_EQ(s->leave(rec("e"), "c1", std::string("bob")).outcome, svc::presence_store::leave_outcome::other_user);
  ASSERT_EQ(s->get(rec("e"), 0).size(), 1u);
  const auto left = s->leave(rec("e"), "c1", std::string("ana"));
  EXPECT_EQ(left.outcome, svc::presence_store::leave_outcome::left);
  EXPECT_EQ(left.entry.user, "ana");
  EXPECT_EQ(s->leave(rec("e"), "c1", std::nullopt).outcome, svc::presence_store::leave_outcome::absent);
  EXPECT_TRUE(s->get(rec("e"), 0).empty());
  // Gone, the clientId is free for anyone.
  EXPECT_EQ(s->set(rec("e"), "c1", "bob", "{}", std::nullopt, 4000).outcome, svc::presence_store::set_outcome::joined);
}

TEST_P(stores, GetListsARecordOrTheWholeDocumentInOrder) {
  auto s = make();
  s->set(rec("e2"), "b", "u", "{}", std::nullopt, 10);
  s->set(rec("e1"), "z", "u", "{}", std::nullopt, 10);
  s->set(rec("e1"), "a", "u", "{}", std::nullopt, 5);
  s->set({"t", "o", "d2", "e1"}, "x", "u", "{}", std::nullopt, 10);  // another document
  s->set(rec("e1", "t2"), "y", "u", "{}", std::nullopt, 10);          // another tenant
  std::vector<std::string> seen;
  for (const auto& p : s->get(rec(""), 0)) seen.push_back(p.record.editor + "/" + p.entry.client);
  EXPECT_EQ(seen, (std::vector<std::string>{"e1/a", "e1/z", "e2/b"}));
  seen.clear();
  for (const auto& p : s->get(rec("e1"), 6)) seen.push_back(p.record.editor + "/" + p.entry.client);  // "a" set before 6
  EXPECT_EQ(seen, (std::vector<std::string>{"e1/z"}));
}

TEST_P(stores, ARecordAndATenantHoldBoundedClients) {
  auto s = make(300);
  for (std::size_t i = 0; i < svc::presence_store::max_per_record; ++i)
    ASSERT_EQ(s->set(rec("e"), numbered("c", i), "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::joined);
  EXPECT_EQ(s->set(rec("e"), "one-more", "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::record_full);
  EXPECT_EQ(s->set(rec("e"), "c0", "u", "{}", std::nullopt, 2).outcome, svc::presence_store::set_outcome::updated);  // present ones refresh
  for (int i = 0; i < 44; ++i) ASSERT_EQ(s->set(rec("f"), numbered("c", i), "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::joined);
  EXPECT_EQ(s->set(rec("g"), "c", "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::tenant_full);
  EXPECT_EQ(s->set(rec("g", "other"), "c", "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::joined);
  // A leave makes room again.
  s->leave(rec("f"), "c0", std::nullopt);
  EXPECT_EQ(s->set(rec("g"), "c", "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::joined);
  // Expiry too.
  EXPECT_EQ(s->expire(2, 1000).size(), 300u);  // every entry but c0 (set at 2), the other tenant's included
  EXPECT_EQ(s->set(rec("h"), "c", "u", "{}", std::nullopt, 3).outcome, svc::presence_store::set_outcome::joined);
}

TEST_P(stores, AnEntryExpiresOnceWhateverTheNodes) {
  // Two stores: with Redis, two nodes sharing it; in memory, the same store swept twice.
  auto a = make();
  std::unique_ptr<svc::presence_store> b_own = GetParam() == "redis" ? make() : nullptr;
  svc::presence_store& b = b_own ? *b_own : *a;
  for (int i = 0; i < 200; ++i) {
    const std::string editor = std::string("e").append(std::to_string(i % 7)), client = std::string("c").append(std::to_string(i));
    a->set(rec(editor), client, "u", "{}", std::nullopt, 100 + i);
  }
  a->set(rec("e0"), "late", "u", "{}", std::nullopt, 1000);
  // Both sweep at once, in small batches, until nothing is due: every due entry is reported exactly once.
  std::atomic<int> reported{0};
  std::mutex mu;
  std::vector<std::string> clients;
  auto sweep = [&](svc::presence_store& s) {
    for (;;) {
      const auto gone = s.expire(500, 7);
      if (gone.empty()) return;
      std::lock_guard<std::mutex> g(mu);
      for (const auto& p : gone) clients.push_back(p.entry.client), ++reported;
    }
  };
  std::thread t1([&] { sweep(*a); }), t2([&] { sweep(b); });
  t1.join(), t2.join();
  EXPECT_EQ(reported.load(), 200);
  std::sort(clients.begin(), clients.end());
  EXPECT_EQ(std::unique(clients.begin(), clients.end()), clients.end());
  // The entry set after the cut stays; once expired, it is not there to leave (one report).
  ASSERT_EQ(b.get(rec(""), 0).size(), 1u);
  EXPECT_EQ(b.expire(1001, 10).size(), 1u);
  EXPECT_EQ(a->leave(rec("e0"), "late", std::nullopt).outcome, svc::presence_store::leave_outcome::absent);
}

TEST_P(stores, APooledConnectionLostWithARedisRestartIsReplaced) {
  if (GetParam() != "redis") GTEST_SKIP() << "Redis only";
  auto s = make();
  ASSERT_EQ(s->set(rec("e"), "c", "u", "{}", std::nullopt, 1).outcome, svc::presence_store::set_outcome::joined);  // a pooled connection
  redis().restart();  // it kept nothing
  EXPECT_EQ(s->set(rec("e"), "c", "u", "{}", std::nullopt, 2).outcome, svc::presence_store::set_outcome::joined);  // not a 503
}

INSTANTIATE_TEST_SUITE_P(presence, stores, ::testing::Values("memory", "redis"), [](const auto& i) { return i.param; });

TEST(presence_store, ARedisAddressIsUnixPathOrHostPort) {
  EXPECT_THROW(svc::redis_presence_store("localhost", "", 1), std::invalid_argument);
  EXPECT_THROW(svc::redis_presence_store("host:0", "", 1), std::invalid_argument);
  EXPECT_THROW(svc::redis_presence_store("host:x1", "", 1), std::invalid_argument);
  EXPECT_NO_THROW(svc::redis_presence_store("127.0.0.1:6379", "", 1));
  EXPECT_NO_THROW(svc::redis_presence_store("unix:/run/redis.sock", "", 1));
  // Unreachable: 503 UNAVAILABLE naming the address.
  svc::redis_presence_store gone("unix:/nonexistent/redis.sock", "", 1);
  try {
    gone.set({"t", "o", "d", "e"}, "c", "u", "{}", std::nullopt, 1);
    FAIL() << "no error";
  } catch (const svc::api_error& e) {
    EXPECT_EQ(e.code, svc::status::unavailable);
    EXPECT_NE(e.message.find("Presence is unavailable: its Redis at unix:/nonexistent/redis.sock could not be reached"), std::string::npos) << e.message;
  }
}

TEST(presence_rate_limit, BurstThenRefilledByTheClock) {
  svc::client_rate_limit limit;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(limit.take("t", "u\x1f" "c", 1000)) << i;
  EXPECT_FALSE(limit.take("t", "u\x1f" "c", 1000));
  EXPECT_TRUE(limit.take("t", "u\x1f" "other", 1000));  // per client
  EXPECT_TRUE(limit.take("t2", "u\x1f" "c", 1000));     // per tenant
  EXPECT_TRUE(limit.take("t", "u\x1f" "c", 1100));      // 10 a second: one more after 100 ms
  EXPECT_FALSE(limit.take("t", "u\x1f" "c", 1100));
}

TEST(presence_rate_limit, ATenantsBucketsAreBoundedAndForgottenWhenFull) {
  svc::client_rate_limit limit;
  const std::size_t cap = svc::client_rate_limit::max_clients_per_tenant;
  for (std::size_t i = 0; i < cap; ++i) ASSERT_TRUE(limit.take("t", numbered("c", i), 0));
  // At the bound, with no bucket full again: new clients are refused, known ones and other tenants are not.
  EXPECT_FALSE(limit.take("t", "new", 1));
  EXPECT_TRUE(limit.take("t", "c0", 1));
  EXPECT_TRUE(limit.take("other", "new", 1));
  // Still within 2 s of the last scan: refused without another scan, even though the buckets are full by now.
  EXPECT_FALSE(limit.take("t", "new", svc::client_rate_limit::refill_ms));
  // Once the buckets refilled and 2 s passed since the scan, the full ones are forgotten.
  EXPECT_TRUE(limit.take("t", "new", 1 + svc::client_rate_limit::refill_ms));
}

TEST(presence_budget, SpentApartFromTheChanges) {
  svc::publish_budgets b;
  std::size_t taken = 0;
  while (b.take_presence("k", 10)) ++taken;
  // The whole window's worth, plus what refilled (200 a second) while the loop ran.
  EXPECT_GE(taken, svc::publish_budgets::presence_messages_per_tenant_window);
  EXPECT_TRUE(b.take_message("k"));           // changes keep their budget
  EXPECT_TRUE(b.take_presence("other", 10));  // and other tenants theirs
  EXPECT_FALSE(b.take_presence("other2", svc::publish_budgets::presence_bytes_per_tenant_window + 1));
}

// The endpoints through the server, on the test database, with the injected clock and every published
// message seen through the family's hook.
struct presence_api : fixture {
  std::int64_t now = 1'700'000'000'000;
  std::mutex mu;
  std::vector<std::string> published;
  void SetUp() override {
    fixture::SetUp();
    service.presence().set_clock([this] { return now; });
    service.presence().set_publish_hook([this](const svc::record_key& k, const std::string& m) {
      std::lock_guard<std::mutex> g(mu);
      published.push_back(k.editor + " " + m);
    });
    service.platform().set_client_keys(std::make_shared<const svc::key_ring>(svc::key_ring::parse("k1 " + std::string(64, 'b'))));
    ASSERT_EQ(call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":"hi"}})").http, 200);
  }
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> g(mu);
    return std::exchange(published, {});
  }
  static std::string error_of(const svc::response& r) { return svc::parse_json(r.body)["error"]["message"].GetString(); }
  static std::string ids(const std::string& more = "") { return R"({"data":{"organizationId":"o","documentId":"d","editorId":"e")" + more + "}}"; }
  svc::response as(const std::string& path, const std::string& body, const std::string& client) {
    svc::request r{"POST", path, "application/json", {}, {}, body, body.size(), {}, {}, {}};
    r.authorization = "Bearer " + client;
    return service.handle(db, r);
  }
  std::string client_token(const std::string& user, const std::string& access) {
    const svc::response res = call("/v2/auth/token", R"({"data":{"organizationId":"o","documentId":"d","userId":")" + user + R"(","access":")" + access + R"("}})");
    EXPECT_EQ(res.http, 200) << res.body;
    return svc::parse_json(res.body)["result"]["data"]["token"].GetString();
  }
  std::string iso() const { return svc::iso_time(now); }
};

TEST_F(presence_api, JoinUpdateRefreshLeaveArePublished) {
  const svc::response set = call("/v2/presence/set", ids(R"(,"clientId":"c1","state":{"name":"Ana","color":"#f00"},"userId":"ana")"));
  ASSERT_EQ(set.http, 200) << set.body;
  EXPECT_EQ(set.body, R"({"result":{"status":"success","message":"Presence set successfully.","data":{"clientId":"c1","timeoutMs":30000}}})");
  EXPECT_EQ(take(), std::vector<std::string>{"e " R"({"editorId":"e","presence":{"type":"join","clientId":"c1","userId":"ana","state":{"color":"#f00","name":"Ana"},"selection":null,"updatedAt":")" +
                                              iso() + "\"}}"});
  now += 1000;
  ASSERT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"c1","userId":"ana")")).http, 200);  // a refresh: nothing published
  EXPECT_TRUE(take().empty());
  ASSERT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"c1","userId":"ana","selection":{"head":"5.1","anchor":"end"})")).http, 200);
  EXPECT_EQ(take(), std::vector<std::string>{"e " R"({"editorId":"e","presence":{"type":"update","clientId":"c1","userId":"ana","state":{"color":"#f00","name":"Ana"},"selection":{"anchor":"end","head":"5.1"},"updatedAt":")" +
                                              iso() + "\"}}"});
  const svc::response got = call("/v2/presence/get", R"({"data":{"organizationId":"o","documentId":"d"}})");
  EXPECT_EQ(got.body, R"({"result":{"status":"success","message":"Presence retrieved successfully.","data":{"presence":[{"editorId":"e","clientId":"c1","userId":"ana","state":{"color":"#f00","name":"Ana"},"selection":{"anchor":"end","head":"5.1"},"updatedAt":")" +
                          iso() + "\"}]}}}");
  const svc::response left = call("/v2/presence/leave", ids(R"(,"clientId":"c1")"));
  EXPECT_EQ(left.body, R"({"result":{"status":"success","message":"Presence left successfully.","data":{"clientId":"c1","left":true}}})");
  EXPECT_EQ(take(), std::vector<std::string>{"e " R"({"editorId":"e","presence":{"type":"leave","clientId":"c1","userId":"ana","updatedAt":")" + iso() + "\"}}"});
  EXPECT_NE(call("/v2/presence/leave", ids(R"(,"clientId":"c1")")).body.find(R"("left":false)"), std::string::npos);
  EXPECT_TRUE(take().empty());
}

TEST_F(presence_api, ASilentClientLeavesAfterTheTimeoutOnce) {
  ASSERT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"quiet","userId":"ana")")).http, 200);
  now += 10'000;
  ASSERT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"busy","userId":"bob")")).http, 200);
  take();
  now += 20'000;  // quiet: exactly the timeout, not past it
  EXPECT_EQ(service.presence().sweep(), 0u);
  now += 1;
  EXPECT_EQ(service.presence().sweep(), 1u);
  EXPECT_EQ(take(), std::vector<std::string>{"e " R"({"editorId":"e","presence":{"type":"leave","clientId":"quiet","userId":"ana","updatedAt":")" + iso() + "\"}}"});
  EXPECT_EQ(service.presence().sweep(), 0u);
  // get leaves out an entry past its timeout even before a sweep removes it.
  now += 10'000;
  EXPECT_NE(call("/v2/presence/get", ids()).body.find(R"("presence":[]})"), std::string::npos);
}

TEST_F(presence_api, ClientTokensActAsTheirUserAndReadTokensMayAnnounce) {
  const std::string reader = client_token("ana", "read"), bob = client_token("bob", "write");
  const svc::response set = as("/v2/presence/set", ids(R"(,"clientId":"tab1","state":{})"), reader);
  ASSERT_EQ(set.http, 200) << set.body;
  EXPECT_NE(take().at(0).find(R"("userId":"ana")"), std::string::npos);
  // The read token still cannot write the record.
  const svc::response sync = as("/v2/crdt/sync", ids(R"(,"version":"AA==","incarnation":"1","update":"AAAA")"), reader);
  EXPECT_EQ(sync.http, 403);
  // Another user's clientId: refused, to set and to leave; the API key may make it leave.
  const svc::response taken = as("/v2/presence/set", ids(R"(,"clientId":"tab1")"), bob);
  EXPECT_EQ(taken.http, 403);
  EXPECT_EQ(error_of(taken), "This clientId is present on the record as another user; choose another clientId.");
  EXPECT_EQ(error_of(as("/v2/presence/leave", ids(R"(,"clientId":"tab1")"), bob)), "This clientId is present on the record as another user; choose another clientId.");
  // Bob's refused sets spend his bucket, not Ana's: her refreshes still go through.
  for (int i = 0; i < 25; ++i) as("/v2/presence/set", ids(R"(,"clientId":"tab1")"), bob);
  EXPECT_EQ(as("/v2/presence/set", ids(R"(,"clientId":"tab1")"), bob).http, 429);
  EXPECT_EQ(as("/v2/presence/set", ids(R"(,"clientId":"tab1")"), reader).http, 200);
  EXPECT_EQ(error_of(as("/v2/presence/set", ids(R"(,"clientId":"tab2","userId":"ana")"), bob)),
            "The client token acts as its own user; leave userId out or send the token's userId.");
  EXPECT_EQ(error_of(as("/v2/presence/get", R"({"data":{"organizationId":"o","documentId":"d2"}})", bob)), "The client token does not cover this documentId.");
  EXPECT_EQ(as("/v2/presence/get", R"({"data":{"organizationId":"o","documentId":"d"}})", bob).http, 200);
  EXPECT_NE(call("/v2/presence/leave", ids(R"(,"clientId":"tab1")")).body.find(R"("left":true)"), std::string::npos);
}

TEST_F(presence_api, EveryRefusalNamesItsField) {
  const auto refused = [&](const std::string& body, int http, const std::string& message, const std::string& path = "/v2/presence/set") {
    const svc::response r = call(path, body);
    EXPECT_EQ(r.http, http) << body << " " << r.body;
    EXPECT_EQ(error_of(r), message) << body;
  };
  refused(R"({"data":{"documentId":"d","editorId":"e","clientId":"c"}})", 400, "Organization ID is required");
  refused(R"({"data":{"organizationId":"o","documentId":"d","clientId":"c"}})", 400, "Editor ID is required.");
  refused(ids(), 400, "clientId is required.");
  refused(ids(R"(,"clientId":"a b")"), 400, "clientId must be a string of 1 to 64 characters A-Z, a-z, 0-9, _ and -.");
  refused(ids(R"(,"clientId":")" + std::string(65, 'x') + "\""), 400, "clientId must be a string of 1 to 64 characters A-Z, a-z, 0-9, _ and -.");
  refused(ids(R"(,"clientId":7)"), 400, "clientId must be a string of 1 to 64 characters A-Z, a-z, 0-9, _ and -.");
  refused(ids(R"(,"clientId":"c","state":[1])"), 400, "state must be a JSON object.");
  refused(ids(R"(,"clientId":"c","state":{"s":")" + std::string(4090, 'x') + "\"}"), 400, "state must be at most 4096 bytes as JSON; it is 4098.");
  refused(ids(R"(,"clientId":"c","selection":"x")"), 400, R"(selection must be null or an object {"anchor": string, "head": string}.)");
  refused(ids(R"(,"clientId":"c","selection":{"anchor":"a"})"), 400, R"(selection must be null or an object {"anchor": string, "head": string}.)");
  refused(ids(R"(,"clientId":"c","selection":{"anchor":"a","head":1})"), 400, "selection.head must be a string of at most 128 bytes.");
  refused(ids(R"(,"clientId":"c","selection":{"anchor":")" + std::string(129, 'a') + R"(","head":"b"})"), 400, "selection.anchor must be a string of at most 128 bytes.");
  refused(ids(R"(,"clientId":"c","colour":"red")"), 400,
          R"(Unknown field "colour"; presence/set takes organizationId, documentId, editorId, clientId, state, selection and userId.)");
  refused(R"({"data":{"organizationId":"o","documentId":"d","editorId":"missing","clientId":"c"}})", 404, "No CRDT data found for this editor ID.");
  refused(R"({"data":{"organizationId":"o","documentId":"d","editorId":"missing"}})", 404, "No CRDT data found for this editor ID.", "/v2/presence/get");
  refused(ids(R"(,"clientId":"c","state":{})"), 400, R"(Unknown field "state"; presence/leave takes organizationId, documentId, editorId and clientId.)", "/v2/presence/leave");
  // The state's limit is on its canonical JSON: exactly 4096 bytes is taken.
  EXPECT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"c","state":{"s":")" + std::string(4088, 'x') + "\"}")).http, 200);
}

TEST_F(presence_api, RateLimitAndBoundsAnswer429) {
  for (int i = 0; i < 20; ++i) ASSERT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"c")")).http, 200) << i;
  const svc::response over = call("/v2/presence/set", ids(R"(,"clientId":"c")"));
  EXPECT_EQ(over.http, 429);
  EXPECT_EQ(error_of(over), "Too many presence updates from this clientId: at most 10 a second, in bursts of 20; retry later.");
  now += 100;
  EXPECT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"c")")).http, 200);
  for (int i = 1; i < 256; ++i) ASSERT_EQ(call("/v2/presence/set", ids(R"(,"clientId":"k)" + std::to_string(i) + "\"")).http, 200) << i;
  const svc::response full = call("/v2/presence/set", ids(R"(,"clientId":"one-more")"));
  EXPECT_EQ(full.http, 429);
  EXPECT_EQ(error_of(full), "This record already has 256 clients present; retry later.");
}

struct presence_tenant_bound : fixture {
  static svc::config small() {
    svc::config c;
    c.presence.per_tenant = 2;
    return c;
  }
  presence_tenant_bound() : fixture(small()) {}
};

TEST_F(presence_tenant_bound, ATenantHoldsItsBound) {
  ASSERT_EQ(call("/v2/crdt/add", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","type":"text","data":""}})").http, 200);
  for (const char* c : {"a", "b"})
    ASSERT_EQ(call("/v2/presence/set", std::string(R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","clientId":")") + c + "\"}}").http, 200);
  const svc::response r = call("/v2/presence/set", R"({"data":{"organizationId":"o","documentId":"d","editorId":"e","clientId":"c"}})");
  EXPECT_EQ(r.http, 429);
  EXPECT_EQ(svc::parse_json(r.body)["error"]["message"].GetString(), std::string("This API key already has 2 clients present; retry later."));
}

}  // namespace
