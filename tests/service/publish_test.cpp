// The publisher's bookkeeping of client-token streams (service/crdt/publish/token_streams.hpp): a channel whose earliest
// token expired, or one of whose keys left the ring, is deleted before the next message, at the expiry
// even without one, and at a sweep after the ring changed; a failed deletion publishes nothing and keeps
// the channel remembered; at most max_token_channels channels.
// nginx's publisher location is played by a unix-socket server that records each request's method.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "crdt/publish/publisher.hpp"

namespace {

namespace svc = folio::service;

/// Answers every request on a unix socket with `status` (DELETE: `delete_status`), one per connection.
/// With `jitter`, each connection is served on a thread of its own after a random pause of up to 2 ms,
/// so requests sent at once are answered in any order. POSTs are listed in the order their
/// connections were accepted (the order the publisher sent them), whatever the pauses.
class fake_nginx {
 public:
  explicit fake_nginx(bool jitter = false) : jitter_(jitter) {
    path_ = (std::filesystem::temp_directory_path() / ("folio-publish-test-" + std::to_string(::getpid()) + ".sock")).string();
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path_.copy(a.sun_path, sizeof(a.sun_path) - 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd_, 16) != 0) throw std::runtime_error("cannot listen on " + path_);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_nginx() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (std::thread& t : served_) t.join();
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::atomic<int> delete_status{200};
  std::atomic<int> post_status{201};
  /// The methods received since the last call.
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> g(mu_);
    return std::exchange(methods_, {});
  }
  /// While closed, requests are recorded but not answered (a POST in flight).
  void gate(bool closed) {
    {
      std::lock_guard<std::mutex> g(mu_);
      gate_closed_ = closed;
    }
    gate_cv_.notify_all();
  }
  /// Every POST received: its path and body, in the order their connections were accepted.
  std::vector<std::pair<std::string, std::string>> posts() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [seq, post] : posts_) out.push_back(post);
    return out;
  }
  /// Waits until `n` POSTs have been received (not necessarily answered), at most `wait`; false if fewer were.
  bool wait_posts(std::size_t n, std::chrono::seconds wait = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> g(mu_);
    return posted_cv_.wait_for(g, wait, [&] { return posts_.size() >= n; });
  }

 private:
  void serve() {
    std::mt19937 rng(3);
    for (std::uint64_t seq = 0;; ++seq) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      if (!jitter_) {
        respond(c, std::chrono::microseconds(0), seq);
        continue;
      }
      served_.emplace_back([this, c, seq, pause = std::chrono::microseconds(rng() % 2000)] { respond(c, pause, seq); });
    }
  }
  void respond(int c, std::chrono::microseconds pause, std::uint64_t seq) {
    {
      std::string in;
      char buf[4096];
      std::size_t need = std::string::npos;
      while (need == std::string::npos || in.size() < need) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
        const std::size_t head = in.find("\r\n\r\n");
        if (need == std::string::npos && head != std::string::npos) {
          std::size_t length = 0;
          if (const std::size_t cl = in.find("Content-Length: "); cl != std::string::npos && cl < head) length = std::stoul(in.substr(cl + 16));
          need = head + 4 + length;
        }
      }
      std::this_thread::sleep_for(pause);
      const std::string method = in.substr(0, in.find(' '));
      {
        std::lock_guard<std::mutex> g(mu_);
        methods_.push_back(method);
        const std::size_t head = in.find("\r\n\r\n");
        if (method == "POST" && head != std::string::npos) {
          posts_.emplace(seq, std::make_pair(in.substr(5, in.find(' ', 5) - 5), in.substr(head + 4)));
          posted_cv_.notify_all();
        }
      }
      {
        std::unique_lock<std::mutex> g(mu_);
        gate_cv_.wait(g, [&] { return !gate_closed_; });
      }
      const int status = method == "DELETE" ? delete_status.load() : post_status.load();
      const std::string answer = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }
  bool jitter_;
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
  std::vector<std::thread> served_;
  std::mutex mu_;
  std::condition_variable gate_cv_, posted_cv_;
  bool gate_closed_ = false;
  std::vector<std::string> methods_;
  std::map<std::uint64_t, std::pair<std::string, std::string>> posts_;  ///< by accept order
};

std::int64_t now_s() { return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(); }

const std::string ch(64, 'a'), other(64, 'b');
using methods = std::vector<std::string>;

// Queued messages (what a committed change publishes) reach nginx in the order they were queued on each
// channel, however the answers of concurrent requests are timed, and channels go in parallel.
TEST(Publisher, QueuedMessagesGoInOrderPerChannelAndChannelsInParallel) {
  fake_nginx nginx(true);
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  constexpr int n = 100;
  for (int i = 0; i < n; ++i)
    for (const std::string* c : {&ch, &other}) p.enqueue(*c, c->substr(0, 1) + std::to_string(i), "{}");
  ASSERT_TRUE(p.drain(std::chrono::seconds(30)));
  EXPECT_EQ(p.queued(), 0u);
  EXPECT_EQ(p.published(), 2u * n);
  std::map<std::string, std::vector<std::string>> by_channel;
  std::vector<std::string> order;
  for (const auto& [path, body] : nginx.posts()) by_channel[path.substr(path.rfind('/') + 1)].push_back(body), order.push_back(body);
  std::vector<std::string> want_a, want_b;
  for (int i = 0; i < n; ++i) want_a.push_back(std::string("a").append(std::to_string(i))), want_b.push_back(std::string("b").append(std::to_string(i)));
  EXPECT_EQ(by_channel[ch], want_a);
  EXPECT_EQ(by_channel[other], want_b);
  // In parallel: the second channel's first message did not wait for the first channel's last.
  EXPECT_LT(std::find(order.begin(), order.end(), "b0") - order.begin(), std::find(order.begin(), order.end(), want_a.back()) - order.begin());
}

// A message queued while its thread holds an answer_first (folio-fcgi: until the request's answer
// is handed to nginx) waits until that ends, and so does what is queued behind it on its channel, in
// order; other channels go meanwhile.
TEST(Publisher, AMessageHeldForItsAnswerWaitsAndKeepsItsPlace) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  std::optional<svc::publisher::answer_first> held(std::in_place, p);
  p.enqueue(ch, "a0", "{}");
  std::thread([&] {  // another request's, not held
    p.enqueue(ch, "a1", "{}");
    p.enqueue(other, "b0", "{}");
  }).join();
  ASSERT_TRUE(p.drain(std::chrono::seconds(30), 2));  // b0 sent
  EXPECT_EQ(p.queued(), 2u);  // a0 held, a1 behind it: never sent while held, however long this waits
  ASSERT_EQ(nginx.posts().size(), 1u);
  EXPECT_EQ(nginx.posts()[0].second, "b0");
  held.reset();
  ASSERT_TRUE(p.drain(std::chrono::seconds(30)));
  const auto posts = nginx.posts();
  ASSERT_EQ(posts.size(), 3u);
  EXPECT_EQ(posts[1].second, "a0");
  EXPECT_EQ(posts[2].second, "a1");
}

// A message held while the one before it on its channel is being sent stays queued when that send
// ends, and goes once released.
TEST(Publisher, AMessageHeldBehindOneInFlightGoesOnceReleased) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  nginx.gate(true);
  p.enqueue(ch, "a0", "{}");
  ASSERT_TRUE(nginx.wait_posts(1));
  ASSERT_EQ(nginx.posts().size(), 1u);  // a0 in flight: received, not answered
  {
    svc::publisher::answer_first held(p);
    p.enqueue(ch, "a1", "{}");
    nginx.gate(false);
    ASSERT_TRUE(p.drain(std::chrono::seconds(30), 1));  // a0 answered
    EXPECT_EQ(p.queued(), 1u);
    EXPECT_EQ(nginx.posts().size(), 1u);
  }
  ASSERT_TRUE(p.drain(std::chrono::seconds(30)));
  const auto posts = nginx.posts();
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[1].second, "a1");
}

TEST(Publisher, EndsStreamsOfAnExpiredTokenBeforePublishing) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  ASSERT_TRUE(p.token_subscribed(ch, now_s() + 3600, "k1"));
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), methods{"POST"});  // valid for an hour: nothing ended
  ASSERT_TRUE(p.token_subscribed(ch, now_s(), "k1"));  // expires this second: refused from now on
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), (methods{"DELETE", "POST"}));
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), methods{"POST"});  // forgotten once ended
  EXPECT_TRUE(p.publish(other, "{}", "{}"));
  EXPECT_EQ(nginx.take(), methods{"POST"});  // a channel without client tokens
}

TEST(Publisher, EndsStreamsWhoseKeyLeftTheRing) {
  fake_nginx nginx;
  std::atomic<bool> k2_in_ring{true};
  svc::publisher p(svc::live_config{"secret", nginx.path()}, [&](std::string_view id) { return id != "k2" || k2_in_ring.load(); });
  ASSERT_TRUE(p.token_subscribed(ch, now_s() + 3600, "k1"));
  ASSERT_TRUE(p.token_subscribed(ch, now_s() + 7200, "k2"));
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), methods{"POST"});
  k2_in_ring = false;
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), (methods{"DELETE", "POST"}));
}

// Without any publish through this publisher (with several nodes, the changes may all go through
// others): the channel is deleted at its token's expiry, and at a sweep once its key left the ring.
TEST(Publisher, EndsStreamsAtTheirExpiryAndAtASweepWithoutAPublish) {
  fake_nginx nginx;
  std::atomic<bool> k2_in_ring{true};
  std::mutex mu;  // before the publisher: its sweeper calls the hook until it is destroyed
  std::condition_variable cv;
  bool waits_an_hour = false;
  svc::publisher p(svc::live_config{"secret", nginx.path()}, [&](std::string_view id) { return id != "k2" || k2_in_ring.load(); });
  p.set_sweep_hook([&](std::uint64_t, std::chrono::milliseconds wait) {
    std::lock_guard<std::mutex> g(mu);
    waits_an_hour = wait > std::chrono::minutes(30);
    cv.notify_all();
  });
  ASSERT_TRUE(p.token_subscribed(ch, now_s() + 1, "k1"));
  ASSERT_TRUE(p.token_subscribed(other, now_s() + 3600, "k2"));
  {
    // The sweeper waits for the other channel's expiry, an hour away, only once the first channel's
    // (within a second) has passed and its pass has ended it.
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(30), [&] { return waits_an_hour; }));
  }
  EXPECT_EQ(nginx.take(), methods{"DELETE"});  // the first channel's alone: the other's token is valid for an hour
  k2_in_ring = false;
  p.request_sweep(std::chrono::seconds(30));  // what a key-file reload (SIGHUP) does
  EXPECT_EQ(nginx.take(), methods{"DELETE"});
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_TRUE(p.publish(other, "{}", "{}"));
  EXPECT_EQ(nginx.take(), (methods{"POST", "POST"}));  // both forgotten once ended
}

// nginx refusing deletions: the sweeper backs off (2 s, doubling) instead of retrying in a loop.
// A pass of the sweep stops at the first deletion nginx does not take: the rest wait for the next
// pass, after a back-off (the sweeper's wait, sweep_backoff_after), rather than each making a failing
// request. Checked where the sweeper starts to wait (its hook), not timed.
TEST(Publisher, AFailedDeletionEndsItsSweep) {
  fake_nginx nginx;
  nginx.delete_status = 500;
  struct wait_seen {
    std::uint64_t sweeps_done;
    std::size_t deletions;  ///< requests nginx had received by then
    std::chrono::milliseconds wait;
  };
  std::mutex mu;  // before the publisher: its sweeper calls the hook until it is destroyed
  std::condition_variable cv;
  std::vector<wait_seen> waits;
  std::size_t deletions = 0;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  p.set_sweep_hook([&](std::uint64_t done, std::chrono::milliseconds wait) {
    std::lock_guard<std::mutex> g(mu);
    deletions += nginx.take().size();  // every pass finished: its deletion was answered, so recorded
    waits.push_back({done, deletions, wait});
    cv.notify_all();
  });
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(p.token_subscribed("expired" + std::to_string(i), now_s() - 10, "k1"));
  p.request_sweep(std::chrono::seconds(60));  // returns once a pass that started after the 50 has finished
  const std::uint64_t finished = p.sweeps_done();
  ASSERT_GE(finished, 1u);
  std::unique_lock<std::mutex> g(mu);
  ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(60), [&] { return !waits.empty() && waits.back().sweeps_done >= finished; }));
  for (const wait_seen& w : waits) {
    // All 50 channels are due at every pass, and each pass stopped at its first (failed) deletion.
    EXPECT_EQ(w.deletions, w.sweeps_done) << "a pass stops at the first failed deletion";
    // And the next pass waits for its back-off (2 s or more, counted from the whole second): without
    // it, the sweeper would go again at once.
    EXPECT_GE(w.wait, std::chrono::milliseconds(1000));
  }
}

TEST(Publisher, SweepsBackOffWhileNginxRefusesDeletions) {
  std::vector<std::int64_t> waits;
  for (std::int64_t w = 0; waits.size() < 7;) waits.push_back(w = svc::publisher::sweep_backoff_after(w));
  EXPECT_EQ(waits, (std::vector<std::int64_t>{2, 4, 8, 16, 32, 32, 32}));
}

TEST(Publisher, AFailedDeletionPublishesNothing) {
  fake_nginx nginx;
  nginx.delete_status = 500;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  ASSERT_TRUE(p.token_subscribed(ch, now_s() - 10, "k1"));
  // The owed notice's background retry (after 1 s) may add DELETEs of its own; never a POST before one succeeds.
  EXPECT_FALSE(p.publish(ch, "{\"full\":1}", "{}"));
  methods m = nginx.take();
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m.front(), "DELETE");
  EXPECT_EQ(std::count(m.begin(), m.end(), "POST"), 0);
  EXPECT_GE(p.failures(), 1u);
  EXPECT_FALSE(p.publish(ch, "{\"full\":2}", "{}"));  // still remembered: deleted first again
  m = nginx.take();
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m.front(), "DELETE");
  EXPECT_EQ(std::count(m.begin(), m.end(), "POST"), 0);
  nginx.delete_status = 404;  // Nchan no longer holds the channel: as good as deleted
  EXPECT_TRUE(p.publish(ch, "{\"full\":3}", "{}"));
  m = nginx.take();
  ASSERT_GE(m.size(), 2u);
  EXPECT_EQ(m.front(), "DELETE");
  EXPECT_NE(std::find(m.begin(), m.end(), "POST"), m.end());
}

TEST(Publisher, RemembersBoundedChannels) {
  svc::publisher p(svc::live_config{"secret", ""});
  const std::int64_t later = now_s() + 3600;
  for (std::size_t i = 0; i < svc::publisher::max_token_channels; ++i) ASSERT_TRUE(p.token_subscribed(std::to_string(i), later, "k1"));
  EXPECT_FALSE(p.token_subscribed("one more", later, "k1"));  // full of unexpired tokens
  EXPECT_TRUE(p.token_subscribed("7", later + 10, "k2"));     // a channel already remembered is updated
}

// Kept across restarts (publish/token_streams.hpp): a row is written when the channel gains a key or an earlier
// expiry, never for a subscriber that changes nothing (a long-poll's every poll).
TEST(Publisher, KeepsARowOnlyWhenWhatIsRememberedChanges) {
  svc::publisher p(svc::live_config{"secret", ""});
  std::vector<std::pair<std::string, std::int64_t>> kept;
  const std::int64_t t = now_s() + 3600;
  const auto subscribe = [&](const std::string& key, std::int64_t expires) {
    return p.token_subscribed(ch, expires, key, [&](std::int64_t e) { kept.emplace_back(key, e); });
  };
  ASSERT_TRUE(subscribe("k1", t));
  ASSERT_TRUE(subscribe("k1", t));       // the same token polling again
  ASSERT_TRUE(subscribe("k1", t + 60));  // a later token of the same key: the row's earlier expiry covers it
  ASSERT_TRUE(subscribe("k1", t - 60));  // an earlier one: the row is rewritten
  ASSERT_TRUE(subscribe("k2", t + 60));  // another key: its own row
  ASSERT_TRUE(subscribe("k2", t + 60));
  EXPECT_EQ(kept, (std::vector<std::pair<std::string, std::int64_t>>{{"k1", t}, {"k1", t - 60}, {"k2", t + 60}}));
}

// A row that cannot be written refuses the subscriber (the exception reaches the authorization) and
// remembers nothing: the next subscriber tries again.
TEST(Publisher, AFailedKeepRemembersNothing) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  int tries = 0;
  const auto failing = [&](std::int64_t) {
    ++tries;
    throw std::runtime_error("database unavailable");
  };
  EXPECT_THROW(p.token_subscribed(ch, now_s() - 10, "k1", failing), std::runtime_error);
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), methods{"POST"});  // nothing remembered: nothing ended
  EXPECT_THROW(p.token_subscribed(ch, now_s() - 10, "k1", failing), std::runtime_error);
  EXPECT_EQ(tries, 2);
  EXPECT_TRUE(p.token_subscribed(ch, now_s() - 10, "k1", [](std::int64_t) {}));
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  EXPECT_EQ(nginx.take(), (methods{"DELETE", "POST"}));
}

// The kept rows go once the deletion that ends their streams succeeded, not before nor after a failed one.
TEST(Publisher, ForgetsTheKeptRowsAfterADeletionSucceeds) {
  fake_nginx nginx;
  nginx.delete_status = 500;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  std::mutex mu;
  std::vector<std::string> forgotten;
  p.set_forget([&](const std::string& channel) {
    std::lock_guard<std::mutex> g(mu);
    forgotten.push_back(channel);
  });
  ASSERT_TRUE(p.token_subscribed(ch, now_s() - 10, "k1", [](std::int64_t) {}));
  EXPECT_FALSE(p.publish(ch, "{}", "{}"));
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_TRUE(forgotten.empty());
  }
  nginx.delete_status = 200;
  EXPECT_TRUE(p.publish(ch, "{}", "{}"));
  std::lock_guard<std::mutex> g(mu);
  EXPECT_EQ(forgotten, std::vector<std::string>{ch});
}

// What an earlier responder kept is remembered at start: due rows are ended at the first sweep (and
// forgotten), the others when they are due; past the bound, the rest are ended at once.
TEST(Publisher, RemembersKeptRowsAtStart) {
  fake_nginx nginx;
  std::atomic<bool> k2_in_ring{true};
  svc::publisher p(svc::live_config{"secret", nginx.path()}, [&](std::string_view id) { return id != "k2" || k2_in_ring.load(); });
  std::mutex mu;
  std::vector<std::string> forgotten;
  p.set_forget([&](const std::string& channel) {
    std::lock_guard<std::mutex> g(mu);
    forgotten.push_back(channel);
  });
  p.remember_kept({{ch, "k1", now_s() - 10}, {other, "k2", now_s() + 3600}});
  p.request_sweep(std::chrono::seconds(30));
  EXPECT_EQ(nginx.take(), methods{"DELETE"});
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(forgotten, std::vector<std::string>{ch});
  }
  EXPECT_TRUE(p.publish(other, "{}", "{}"));
  EXPECT_EQ(nginx.take(), methods{"POST"});  // valid for an hour
  k2_in_ring = false;
  p.request_sweep(std::chrono::seconds(30));
  EXPECT_EQ(nginx.take(), methods{"DELETE"});
}

TEST(Publisher, KeptRowsPastTheBoundAreEndedAtOnce) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  const std::int64_t later = now_s() + 3600;
  std::vector<svc::publisher::kept_stream> rows;
  for (std::size_t i = 0; i <= svc::publisher::max_token_channels; ++i) rows.push_back({std::to_string(i), "k1", later + std::int64_t(i)});
  p.remember_kept(rows);
  // The latest row is past the bound: remembered as due now, and its channel alone is ended; the bound
  // holds for what stays.
  p.request_sweep(std::chrono::seconds(30));
  EXPECT_EQ(nginx.take(), methods{"DELETE"});
  EXPECT_FALSE(p.token_subscribed("new", later, "k1"));
  EXPECT_TRUE(p.token_subscribed("7", later, "k2"));
}

std::string channel_of(char tenant, int i) {
  char id[65];
  std::snprintf(id, sizeof id, "%c%063d", tenant, i);
  return id;
}

// Tenants take turns at the senders: a message of tenant b queued behind thousands of tenant a's, on
// as many channels, waits for at most one of a's per turn, not for all of them.
TEST(Publisher, TenantsTakeTurnsSoOneTenantsQueueDoesNotDelayAnothers) {
  fake_nginx nginx(true);  // a thread per connection: both senders' POSTs in flight at once
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  nginx.gate(true);  // both senders in flight with a's first two messages
  p.enqueue(channel_of('a', 0), "a0", "{}", "a");
  p.enqueue(channel_of('a', 1), "a1", "{}", "a");
  ASSERT_TRUE(nginx.wait_posts(2));
  EXPECT_EQ(nginx.posts().size(), 2u);
  constexpr int n = 3000;  // within a's message budget
  for (int i = 2; i < n; ++i) p.enqueue(channel_of('a', i), std::string("a").append(std::to_string(i)), "{}", "a");
  p.enqueue(channel_of('b', 0), "b0", "{}", "b");
  nginx.gate(false);
  ASSERT_TRUE(p.drain(std::chrono::seconds(60)));
  const auto posts = nginx.posts();
  ASSERT_EQ(posts.size(), static_cast<std::size_t>(n + 1));
  const auto b = std::find_if(posts.begin(), posts.end(), [](const auto& post) { return post.second == "b0"; });
  ASSERT_NE(b, posts.end());
  // a0, a1 in flight, then at most one more of a's per sender ahead of it (the two senders connect in
  // either order)
  EXPECT_LE(b - posts.begin(), 4);
  EXPECT_EQ(p.over_budget(), 0u);
}

// A tenant publishes at most messages_per_tenant_window messages a window: beyond it its changes are
// not queued, each channel is owed one notice instead, and another tenant's budget is untouched.
TEST(Publisher, ATenantsMessagesAreBoundedAndItsFloodLeavesAnotherTenantsBudget) {
  fake_nginx nginx(true);
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  nginx.gate(true);  // nothing is sent meanwhile: what is queued is what the budget let in
  constexpr int budget = static_cast<int>(svc::publisher::messages_per_tenant_window), over = 2000, channels = 1000;
  for (int i = 0; i < budget + over; ++i) p.enqueue(channel_of('a', i % channels), std::string("a").append(std::to_string(i)), "{}", "a");
  for (int i = 0; i < 10; ++i) p.enqueue(channel_of('b', i), std::string("b").append(std::to_string(i)), "{}", "b");
  // The bucket refills over the window (100 messages a second): a slow run lets a few more in.
  EXPECT_GE(p.over_budget(), static_cast<std::uint64_t>(over - 100));
  EXPECT_LE(p.queued(), static_cast<std::size_t>(budget + 100 + 10));
  EXPECT_EQ(p.owed(), static_cast<std::size_t>(channels));  // each of a's channels owed one notice, not one per change
  nginx.gate(false);
  ASSERT_TRUE(p.drain(std::chrono::seconds(60)));
  int b_posts = 0;
  for (const auto& post : nginx.posts()) b_posts += post.second[0] == 'b';
  EXPECT_EQ(b_posts, 10);  // b's changes all went, with their ops
}

// nginx answering 507 (Nchan's shared memory full) to a publish marks the memory full for a while: the
// subscriber authorization then refuses new subscribers with a JSON 503 rather than let Nchan answer
// them an empty 507.
TEST(Publisher, ARefusalForLackOfMemoryMarksTheMemoryFull) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  EXPECT_TRUE(p.publish(ch, "a0", "{}", "a"));
  EXPECT_FALSE(p.memory_full());
  nginx.post_status = 500;
  EXPECT_FALSE(p.publish(ch, "a1", "{}", "a"));
  EXPECT_FALSE(p.memory_full());  // another failure says nothing of the memory
  nginx.post_status = 507;
  EXPECT_FALSE(p.publish(ch, "a2", "{}", "a"));
  EXPECT_TRUE(p.memory_full());
}

}  // namespace

namespace {

// A presence message (publisher::enqueue_presence) goes in its channel's order with the changes, as it
// is; one nginx refuses is dropped and counted, never owed as a notice to sync.
TEST(Publisher, PresenceMessagesGoInOrderAndAreDroppedNeverOwed) {
  fake_nginx nginx;
  svc::publisher p(svc::live_config{"secret", nginx.path()});
  p.enqueue(ch, "change1", "notice1");
  p.enqueue_presence(ch, "presence1", "t");
  p.enqueue(ch, "change2", "notice2");
  ASSERT_TRUE(p.drain(std::chrono::seconds(30)));
  const auto posts = nginx.posts();
  ASSERT_EQ(posts.size(), 3u);
  EXPECT_EQ(posts[0].second, "change1");
  EXPECT_EQ(posts[1].second, "presence1");
  EXPECT_EQ(posts[2].second, "change2");
  EXPECT_EQ(p.presence_dropped(), 0u);
  nginx.post_status = 500;
  p.enqueue_presence(ch, "presence2", "t");
  ASSERT_TRUE(p.drain(std::chrono::seconds(30)));
  EXPECT_EQ(p.presence_dropped(), 1u);
  EXPECT_EQ(p.owed(), 0u);        // nothing to resend
  EXPECT_EQ(p.failures(), 0u);    // the changes' counters are the changes'
  EXPECT_EQ(p.published(), 2u);
}

}  // namespace
