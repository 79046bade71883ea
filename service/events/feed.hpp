// service/events/feed.hpp — the sequencer: event_outbox rows become the events of the feed
// (event_feed) and their webhook deliveries (webhook_deliveries), off the request path
// (docs/WEBHOOKS.md, "Ordering" and "The pull feed").
//
// Model. A pass (sequence_events) is one write transaction under the feed's key (feed_key: on
// PostgreSQL an advisory lock, so passes of N nodes run one at a time; SQLite serialises every write):
// it reads the oldest outbox rows, makes an event of each row that is ready, gives it the next feed
// position (event_feed's identity: never handed out twice, even once the rows are pruned; the passes
// are serialised, so positions are handed out in order and a reader that sees a position sees every
// position before it), queues a delivery for each enabled endpoint of the tenant whose filters take
// it, and deletes the rows it used — all or nothing, so a crash at any point leaves the rows for the
// next pass and never makes an event twice.
// A row is ready at once unless it coalesces: the updates of one subject are one event once the newest
// of them is `coalesce` old or the oldest `coalesce_max` old, listing every author (in the order of
// their first change) and how many changes it covers. A row of the subject that does not coalesce (a
// deletion, or the add of its next incarnation) cuts its updates: those before it are one event placed
// just before its own, at once, so a record's update never comes after its deletion nor merges with
// the updates of the record added again; those after it wait for their window.
// The subjects that look ready are found by a read before the transaction (grouping the waiting rows
// costs time linear in them, and holds no write lock); the transaction reads their rows again.
// An endpoint whose queue holds queued_per_endpoint deliveries gets none for the event: the event stays
// in the feed, the endpoint counts it in `dropped`, and its delivery is recorded as failed without an
// attempt, so that a replay sends it once the queue has room.
// Thread-safety: free functions over a caller's `database`.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "platform/config.hpp"
#include "storage/database.hpp"

namespace folio::service {

/// The write key sequencing passes and anything else that appends to the feed serialise on.
inline constexpr std::string_view feed_key = "events\x1f" "feed";

/// One pass at `now_ms`: at most `limit` outbox rows read. Returns how many events it made.
/// Throws store_error (nothing is changed then).
std::size_t sequence_events(database& db, const webhook_config& cfg, std::int64_t now_ms, std::size_t limit = 1000);
/// The earliest time a coalescing row now in the outbox becomes ready, or -1 when none is there (one
/// statement): when the sequencer's next pass is due if no other change wakes it.
std::int64_t next_ready_ms(database& db, const webhook_config& cfg);

/// Inside a write transaction under feed_key: appends an event to the feed at the next position and
/// returns the position. `in_feed` false: an endpoint's test ping, sent and never listed.
std::int64_t append_to_feed(database& db, std::string_view tenant, std::string_view id, std::string_view type, std::string_view org,
                            std::int64_t at_ms, bool in_feed, std::string_view body);
/// Inside a write transaction: queues the delivery of the feed's event `position` (message `id`) to the
/// tenant's endpoint, due at `now_ms`, unless the endpoint's queue is full (then counts it dropped,
/// records the delivery as failed without an attempt — a replay sends it later — and returns false). A delivery of that event to that endpoint already there is made pending again
/// (a replay), its attempts counted from zero.
bool queue_delivery(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::int64_t position,
                    std::string_view id, std::int64_t now_ms);

/// Runs sequence_events passes on a thread of folio-fcgi's with a connection of its own: a pass as soon
/// as a change in this process wrote an outbox row that makes an event at once (wake_sequencer), when
/// the first coalescing subject becomes ready (next_ready_ms), and at least every poll (feed.cpp's poll_ms; rows written
/// by other processes or nodes). A pass that finds nothing to do costs two reads and no transaction. A pass that fails is
/// logged; the next one tries again.
/// Thread-safety: run() on one thread; stop() and wake() from any.
class event_sequencer {
 public:
  explicit event_sequencer(const webhook_config& cfg) : cfg_(cfg) {}
  /// `f` runs after each pass that made events (their deliveries are queued): the webhook sender's
  /// wake(). Before run().
  void on_events_made(std::function<void()> f) { made_ = std::move(f); }
  void run(database& db);
  void stop();

 private:
  const webhook_config& cfg_;
  std::function<void()> made_;
  std::mutex mutex_;  ///< guards stop_
  bool stop_ = false;
};

/// Tells this process's sequencer that an outbox row that makes an event at once was written (record_event calls it; the row is
/// committed an instant later, or rolled back, and a pass finds it or nothing). Never blocks.
void wake_sequencer() noexcept;

}  // namespace folio::service
