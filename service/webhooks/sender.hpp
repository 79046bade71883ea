// service/webhooks/sender.hpp — the webhook sender: the pending rows of webhook_deliveries become
// signed HTTP POSTs to their endpoints, off the request path (docs/WEBHOOKS.md, "Delivery";
// docs/OPERATIONS.md, "Webhooks").
//
// Model. A delivery is one event (event_feed, by position) owed to one endpoint. The sender owns a
// libcurl multi handle holding the attempts in flight. A claim (a read; when it finds something to
// take, one short write transaction) picks due rows — state 'pending', next_at <= now, not claimed or
// claimed_until < now, endpoint enabled — oldest next_at first, and marks each claimed_by = this node, claimed_until = now + timeout + 30 s, so that
// no other sender (another node, or this one later) takes a row while its claim is live, and a row
// whose sender died is taken again once its claim has passed. Claims serialise on one write key (on
// PostgreSQL an advisory lock; SQLite serialises every write), and each row's UPDATE is guarded by the
// same conditions the selection used, so a row is claimed by one sender at a time.
// Each claimed row becomes a transfer: a POST of the event's body with the headers of the Standard
// Webhooks specification — webhook-id (the message id, the same on every attempt), webhook-timestamp
// (this attempt's time, seconds) and webhook-signature ("v1,<base64 HMAC-SHA256 of id.timestamp.body>"
// under the current secret, then under the rotated-out one while old_secret_until > now,
// space-separated). A transfer's outcome is committed in a write transaction of its own: a
// webhook_attempts row, then the delivery moved — a 2xx: 'succeeded'; a 410: the endpoint disabled;
// anything else (no answer, a 3xx, a 4xx, a 5xx): due again retries[attempts - 1] later, within ±10%
// (jitter), or 'failed' after the last. The endpoint's failing_since is set at its first failure after
// a success and cleared by a success; a failure when it is disable_after old disables the endpoint.
// The outcome writes the endpoint's row before the delivery's, the order queue_delivery takes them in.
// Disabling fails its pending deliveries. A delivery leaving 'pending' takes one off the endpoint's
// `queued`. An outcome is applied only while the sender's claim on the row stands (claimed_by and
// claimed_until unchanged): a row taken over, replayed or deleted meanwhile is left as it is.
//
// Isolation: in this process at most sends_per_endpoint transfers of one endpoint (1 while its last
// attempt timed out and it has not answered since: a hanging endpoint backs off to one send at a time;
// this process remembers that for an hour after the timeout, one map entry per such endpoint),
// sends_per_tenant of one tenant and `sends` in all are in flight; the claim passes over the endpoints
// and tenants at their bound, so a tenant whose endpoints all hang holds at most sends_per_tenant slots
// and never the due deliveries of another tenant. The bound that guarantees a tenant a slot: whenever
// (tenants with transfers in flight) x sends_per_tenant < sends, a free slot exists and the next claim
// gives it to the first due delivery of a tenant below its bound (at the defaults, 256 / 8: fewer than 32
// tenants in flight). So `sends` is high: a transfer in flight costs a socket and a few KiB (libcurl's
// handle, the body), and no CPU while it waits for an answer.
// run() keeps claiming while transfers are in flight: a due delivery waits at most for the next poll
// of the table (every poll_ms, or at once after wake() or a finished transfer), never for another
// endpoint's transfer.
//
// Safety: protocols http and https only, no redirects followed (a 3xx is a failure), no proxy from
// the environment, the whole attempt within `timeout`, and every address libcurl is about to connect
// to checked by address_policy::allows (from `allow`): a refused one fails the attempt with "address X
// is not allowed". The first 1,024 bytes of an answer are kept. Secrets are never logged.
//
// Delivery is at least once: a sender that dies after sending and before its outcome commits leaves the
// row claimed; it is sent again after claimed_until (by any node); so does an outcome whose write
// fails. Order is not kept across retries. A pending delivery whose event was pruned fails unsent.
//
// Costs: a claim reads the due rows in next_at order through the partial index webhook_deliveries_due
// (no sort), once more for each endpoint or tenant it finds at its bound (at most sends + 1 reads), and
// passes over the due rows of those — at most `sends` endpoints of at most queued_per_endpoint rows
// each — before it finds others; it updates at most `sends` rows. An outcome is
// a handful of single-row statements. prune_webhook_log holds the write lock for at most `batch` rows at
// a time: each transaction deletes at most that many, found through the time indexes (oldest first);
// its work is linear in the rows it deletes, plus one read of the finished deliveries per batch of them.
// Thread-safety: send_due and run on one thread at a time; stop and wake from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "platform/config.hpp"
#include "storage/database.hpp"
#include "webhooks/address_policy.hpp"

namespace folio::service {

/// The write key claims of deliveries serialise on.
inline constexpr std::string_view delivery_claim_key = "webhooks\x1f" "claims";

/// Rows prune_webhook_log deletes per write transaction by default.
inline constexpr std::size_t webhook_prune_batch = 1000;

/// Deletes what is older than cfg.keep at `now_ms`: delivery attempts and events of the feed, then the
/// finished deliveries ('succeeded', 'failed') whose event is gone (a pending one whose event is gone
/// fails when it is claimed). Each write transaction deletes at most `batch` rows of one table, and they
/// follow one another until none is left, so writers wait for one batch at most, never for the whole
/// backlog (after downtime, or a shorter keep); `committed`, when given, is told each transaction's
/// rows. Returns the rows deleted. Throws store_error (what earlier transactions deleted stays deleted).
std::size_t prune_webhook_log(database& db, const webhook_config& cfg, std::int64_t now_ms, std::size_t batch = webhook_prune_batch,
                              const std::function<void(std::size_t)>& committed = {});

class webhook_sender {
 public:
  using clock = std::function<std::int64_t()>;  ///< milliseconds since the epoch

  /// `node_id` names this process in claims (a random string per process); `now` is the clock outcomes
  /// are timed by (tests inject one). Throws std::invalid_argument for an `allow` entry that is
  /// neither a host nor a range, std::runtime_error when libcurl cannot start.
  webhook_sender(webhook_config cfg, std::string node_id, clock now);
  ~webhook_sender();
  webhook_sender(const webhook_sender&) = delete;
  webhook_sender& operator=(const webhook_sender&) = delete;

  /// One round: claims what is due at `now_ms` (within the bounds above, counting transfers already in
  /// flight), sends it, and returns once every transfer in flight has ended and its outcome is
  /// committed; returns how many ended. Throws store_error (a claim that failed claims nothing; an
  /// outcome that failed to commit leaves its row to be sent again after its claim).
  std::size_t send_due(database& db, std::int64_t now_ms);
  /// Rounds on `db` until stop(), claiming new due work while earlier transfers are in flight (the table
  /// polled every poll_ms, at once after wake()), and pruning the log hourly (prune_webhook_log). Failures
  /// are logged and tried again. At stop(), transfers still in flight are abandoned: their claims
  /// lapse and their rows are sent again.
  void run(database& db);
  void stop();
  /// Cuts run()'s wait short: deliveries were queued.
  void wake();

 private:
  struct transfer;
  struct endpoint_key {
    std::string tenant, id;
    auto operator<=>(const endpoint_key&) const = default;
  };

  /// The due deliveries at `now_ms` a claim may take, oldest next_at first, at most `limit`, passing over
  /// the endpoints `full` and the tenants `held`.
  std::vector<std::unique_ptr<transfer>> select_due(database& db, std::int64_t now_ms, const std::vector<endpoint_key>& full,
                                                    const std::vector<std::string>& held, std::size_t limit);
  /// Claims due deliveries at `now_ms` into transfers; returns how many.
  std::size_t claim(database& db, std::int64_t now_ms);
  /// Waits for transfers at most `wait_ms`, then commits the outcome of each one that ended; returns
  /// how many ended.
  std::size_t progress(database& db, int wait_ms);
  /// Starts `t`'s attempt in the multi handle; "" when started, else why not (its outcome, a failure).
  std::string start(transfer& t);
  /// Commits the outcome of `t`'s attempt (write transaction of its own).
  void record(database& db, transfer& t, long http_status, const std::string& error);
  std::int64_t retry_delay(std::size_t attempts);
  /// Transfers of endpoint `k` that may be in flight: 1 while its last attempt timed out, else sends_per_endpoint.
  unsigned endpoint_bound(const endpoint_key& k) const;

  webhook_config cfg_;
  std::string node_;
  clock now_;
  address_policy policy_;
  void* multi_ = nullptr;  ///< CURLM
  std::map<void*, std::unique_ptr<transfer>> flying_;  ///< by CURL easy handle
  std::map<endpoint_key, unsigned> per_endpoint_;      ///< transfers in flight per endpoint
  /// The endpoints whose last attempt timed out and that have not answered since, with that time (ms);
  /// run() forgets an entry an hour after it.
  std::map<endpoint_key, std::int64_t> timed_out_;
  std::mt19937_64 jitter_;
  std::atomic<bool> stopping_{false}, woken_{false};
};

}  // namespace folio::service
