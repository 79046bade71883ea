#include "events/feed.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <optional>
#include <vector>

#include <rapidjson/document.h>

#include "events/outbox.hpp"
#include "platform/clock.hpp"
#include "platform/log.hpp"
#include "webhooks/signature.hpp"
#include "wire/json.hpp"

namespace folio::service {

std::int64_t append_to_feed(database& db, std::string_view tenant, std::string_view id, std::string_view type, std::string_view org,
                            std::int64_t at_ms, bool in_feed, std::string_view body) {
  query q = db.sql("INSERT INTO event_feed (tenant, id, type, org, created_at, in_feed, body) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING position");
  q.bind(1, tenant).bind(2, id).bind(3, type).bind(4, org).bind(5, at_ms).bind(6, std::int64_t(in_feed)).bind(7, body);
  if (!q.step()) throw store_error(failure::other, "an event's position was not returned");
  const std::int64_t position = q.integer(0);
  while (q.step()) {
  }
  return position;
}

bool queue_delivery(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::int64_t position,
                    std::string_view id, std::int64_t now_ms) {
  // Already queued: due now, its attempts counted afresh, and any claim on it dropped — an attempt in
  // flight then records its own outcome in the log but moves the delivery no more (its outcome is
  // guarded by the claim), and the delivery is sent again. One statement, so a sender that ends it
  // meanwhile is either before it (then the row is not pending: below) or after it.
  db.sql("UPDATE webhook_deliveries SET attempts = 0, next_at = ?, claimed_by = NULL, claimed_until = NULL"
         " WHERE tenant = ? AND endpoint = ? AND position = ? AND state = 'pending'")
      .bind(1, now_ms).bind(2, tenant).bind(3, endpoint).bind(4, position).step();
  if (db.changes() == 1) return true;
  // Not pending (or new): it enters the queue, counted in the endpoint's pending deliveries.
  db.sql("UPDATE webhook_endpoints SET queued = queued + 1 WHERE tenant = ? AND id = ? AND queued < ?")
      .bind(1, tenant).bind(2, endpoint).bind(3, static_cast<std::int64_t>(cfg.queued_per_endpoint)).step();
  if (db.changes() == 0) {
    // Full: counted as dropped, and kept as a delivery that failed without an attempt, so that a replay
    // (of the message, or of what failed since a time) sends it once the queue has room.
    db.sql("UPDATE webhook_endpoints SET dropped = dropped + 1 WHERE tenant = ? AND id = ?").bind(1, tenant).bind(2, endpoint).step();
    db.sql("INSERT INTO webhook_deliveries (tenant, endpoint, position, message_id, state, attempts, next_at) VALUES (?, ?, ?, ?, 'failed', 0, NULL)"
           " ON CONFLICT (tenant, endpoint, position) DO NOTHING")
        .bind(1, tenant).bind(2, endpoint).bind(3, position).bind(4, id).step();
    return false;
  }
  db.sql("INSERT INTO webhook_deliveries (tenant, endpoint, position, message_id, state, attempts, next_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)"
         " ON CONFLICT (tenant, endpoint, position) DO UPDATE SET state = 'pending', attempts = 0, next_at = excluded.next_at,"
         " claimed_by = NULL, claimed_until = NULL")
      .bind(1, tenant).bind(2, endpoint).bind(3, position).bind(4, id).bind(5, now_ms).step();
  return true;
}

}  // namespace folio::service

namespace folio::service {

namespace {

/// An outbox row as a pass reads it.
struct outbox_row {
  std::int64_t seq = 0;
  std::string tenant, type, org, subject, user_id, data;
  std::int64_t created_at = 0;
};

/// An event to make: its outbox rows (one, or a coalesced subject's in commit order).
struct pending_event {
  std::int64_t order = 0;  ///< where it goes among the pass's events (sequence_events)
  std::vector<outbox_row> rows;
};

std::vector<outbox_row> read_rows(query& q) {
  std::vector<outbox_row> rows;
  while (q.step())
    rows.push_back({q.integer(0), q.text(1), q.text(2), q.text(3), q.text(4), q.text(5), q.text(7), q.integer(6)});
  return rows;
}

/// A tenant's endpoint as a pass matches events against it: NULL filters take everything.
struct endpoint_filter {
  std::string id;
  std::optional<std::vector<std::string>> types, orgs;
  bool takes(std::string_view type, std::string_view org) const {
    const auto in = [](const std::optional<std::vector<std::string>>& list, std::string_view v) {
      return !list || std::find(list->begin(), list->end(), v) != list->end();
    };
    return in(types, type) && in(orgs, org);
  }
};

std::optional<std::vector<std::string>> string_list(const std::optional<std::string>& json) {
  if (!json) return std::nullopt;
  rapidjson::Document d;
  d.Parse(json->data(), json->size());
  std::vector<std::string> out;
  if (d.HasParseError() || !d.IsArray()) return out;  // written by this service as arrays of strings: takes nothing otherwise
  for (const rapidjson::Value& v : d.GetArray())
    if (v.IsString()) out.emplace_back(v.GetString(), v.GetStringLength());
  return out;
}

std::vector<endpoint_filter> enabled_endpoints(database& db, const std::string& tenant) {
  query q = db.sql("SELECT id, event_types, org_ids FROM webhook_endpoints WHERE tenant = ? AND enabled = 1 ORDER BY created_at, id");
  q.bind(1, tenant);
  std::vector<endpoint_filter> out;
  while (q.step()) out.push_back({q.text(0), string_list(q.text_opt(1)), string_list(q.text_opt(2))});
  return out;
}

/// The event's body: {"type","timestamp","data"}, data being the newest row's with the authors (each
/// once, in the order of their first change; none for a change the service made itself) and the count.
std::string event_body(const pending_event& e) {
  const outbox_row& last = e.rows.back();
  std::vector<std::string_view> users;
  for (const outbox_row& r : e.rows)
    if (!r.user_id.empty() && std::find(users.begin(), users.end(), r.user_id) == users.end()) users.push_back(r.user_id);
  rapidjson::StringBuffer out;
  json_writer w(out);
  w.StartObject();
  write_member(w, "type", last.type);
  write_member(w, "timestamp", iso_time(last.created_at));
  w.Key("data");
  // The stored data object with userIds and changes appended as its last members.
  std::string data = last.data.substr(0, last.data.size() - 1);
  {
    rapidjson::StringBuffer more;
    json_writer m(more);
    m.StartObject();
    m.Key("userIds");
    m.StartArray();
    for (std::string_view u : users) write_string(m, u);
    m.EndArray();
    m.Key("changes");
    m.Int64(static_cast<std::int64_t>(e.rows.size()));
    m.EndObject();
    data.append(",").append(more.GetString() + 1, more.GetSize() - 1);
  }
  w.RawValue(data.data(), data.size(), rapidjson::kObjectType);
  w.EndObject();
  return std::string(out.GetString(), out.GetSize());
}

std::mutex signal_mutex;
std::condition_variable signal_changed;
bool signal_pending = false;

}  // namespace

std::size_t sequence_events(database& db, const webhook_config& cfg, std::int64_t now_ms, std::size_t limit) {
  const std::int64_t quiet_before = now_ms - cfg.coalesce.count(), started_before = now_ms - cfg.coalesce_max.count();
  const auto ready_by_time = [&](const std::vector<outbox_row>& rows) {
    return rows.back().created_at <= quiet_before || rows.front().created_at <= started_before;
  };
  // The coalescing subjects that look ready, read before the write transaction (a read takes no write
  // lock: the grouping, linear in the rows waiting, never holds other writes); the transaction reads
  // each one's rows again and decides from them. Nothing to do is found without a transaction (SQLite:
  // no fsync), as most passes find.
  std::set<std::pair<std::string, std::string>> candidates;  // (tenant, subject)
  {
    query q = db.sql("SELECT tenant, subject FROM event_outbox WHERE coalesces = 1 GROUP BY tenant, subject HAVING max(created_at) <= ? OR min(created_at) <= ? LIMIT ?");
    q.bind(1, quiet_before).bind(2, started_before).bind(3, static_cast<std::int64_t>(limit));
    while (q.step()) candidates.emplace(q.text(0), q.text(1));
    query at_once = db.sql("SELECT 1 FROM event_outbox WHERE coalesces = 0 LIMIT 1");
    if (candidates.empty() && !at_once.step()) return 0;
  }
  return db.write(feed_key, [&] {
    // The rows that make an event each, oldest first (a pending_event's order is twice its seq).
    query at_once = db.sql("SELECT seq, tenant, type, org, subject, user_id, created_at, data FROM event_outbox WHERE coalesces = 0 ORDER BY seq LIMIT ?");
    at_once.bind(1, static_cast<std::int64_t>(limit));
    std::vector<pending_event> events;
    std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> cuts;  // the seqs of each subject's rows read here
    for (outbox_row& r : read_rows(at_once)) {
      cuts[{r.tenant, r.subject}].push_back(r.seq);
      candidates.emplace(r.tenant, r.subject);
      events.push_back({2 * r.seq, {std::move(r)}});
    }
    // Each subject's updates, cut at its rows read above (a deletion, or an add after it): the updates
    // before a cut are one event placed just before it (order 2 * cut - 1), so a record's updates never
    // come after its deletion nor merge with those of its next incarnation; the updates after the last
    // cut wait for their own window (order: twice their newest seq, when ready).
    for (const auto& subject : candidates) {
      query q = db.sql("SELECT seq, tenant, type, org, subject, user_id, created_at, data FROM event_outbox WHERE tenant = ? AND subject = ? AND coalesces = 1 ORDER BY seq");
      q.bind(1, subject.first).bind(2, subject.second);
      std::vector<outbox_row> rows = read_rows(q);
      const std::vector<std::int64_t>& at = cuts[subject];
      std::size_t i = 0;
      for (const std::int64_t cut : at) {
        pending_event e{2 * cut - 1, {}};
        for (; i < rows.size() && rows[i].seq < cut; ++i) e.rows.push_back(std::move(rows[i]));
        if (!e.rows.empty()) events.push_back(std::move(e));
      }
      std::vector<outbox_row> tail(std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(i)), std::make_move_iterator(rows.end()));
      if (!tail.empty() && ready_by_time(tail)) events.push_back({2 * tail.back().seq, std::move(tail)});
    }
    std::sort(events.begin(), events.end(), [](const pending_event& a, const pending_event& b) { return a.order < b.order; });
    std::map<std::string, std::vector<endpoint_filter>> endpoints;  // by tenant, read once a pass
    for (const pending_event& e : events) {
      const outbox_row& last = e.rows.back();
      const std::string id = new_message_id(), body = event_body(e);
      const std::int64_t position = append_to_feed(db, last.tenant, id, last.type, last.org, last.created_at, true, body);
      auto found = endpoints.find(last.tenant);
      if (found == endpoints.end()) found = endpoints.emplace(last.tenant, enabled_endpoints(db, last.tenant)).first;
      for (const endpoint_filter& ep : found->second)
        if (ep.takes(last.type, last.org)) queue_delivery(db, cfg, last.tenant, ep.id, position, id, now_ms);
      for (const outbox_row& r : e.rows) db.sql("DELETE FROM event_outbox WHERE seq = ?").bind(1, r.seq).step();
    }
    return events.size();
  });
}

std::int64_t next_ready_ms(database& db, const webhook_config& cfg) {
  query q = db.sql(
      "SELECT min(CASE WHEN mx + ? < mn + ? THEN mx + ? ELSE mn + ? END) FROM "
      "(SELECT min(created_at) AS mn, max(created_at) AS mx FROM event_outbox WHERE coalesces = 1 GROUP BY tenant, subject) g");
  const std::int64_t quiet = cfg.coalesce.count(), most = cfg.coalesce_max.count();
  q.bind(1, quiet).bind(2, most).bind(3, quiet).bind(4, most);
  if (!q.step() || q.is_null(0)) return -1;
  return q.integer(0);
}

void wake_sequencer() noexcept {
  {
    std::lock_guard<std::mutex> l(signal_mutex);
    signal_pending = true;
  }
  signal_changed.notify_all();
}

void event_sequencer::run(database& db) {
  constexpr std::int64_t poll_ms = 200;
  for (;;) {
    std::int64_t wait_ms = poll_ms;
    try {
      const std::int64_t now = now_unix_ms();
      const std::size_t limit = 1000;
      const std::size_t made = sequence_events(db, cfg_, now, limit);
      if (made > 0 && made_) made_();
      if (made >= limit) continue;  // more are waiting
      if (const std::int64_t next = next_ready_ms(db, cfg_); next >= 0) wait_ms = std::clamp<std::int64_t>(next - now_unix_ms() + 1, 1, poll_ms);
    } catch (const std::exception& e) {
      log::write("error", "events_pass_failed", std::string("sequencing events failed; tried again in a second: ") + e.what());
      wait_ms = 1000;
    }
    std::unique_lock<std::mutex> l(signal_mutex);
    signal_changed.wait_for(l, std::chrono::milliseconds(wait_ms), [&] {
      std::lock_guard<std::mutex> s(mutex_);
      return signal_pending || stop_;
    });
    signal_pending = false;
    std::lock_guard<std::mutex> s(mutex_);
    if (stop_) return;
  }
}

void event_sequencer::stop() {
  {
    std::lock_guard<std::mutex> l(signal_mutex);
    std::lock_guard<std::mutex> s(mutex_);
    stop_ = true;
  }
  signal_changed.notify_all();
}

}  // namespace folio::service
