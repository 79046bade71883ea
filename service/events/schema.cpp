#include "events/schema.hpp"

namespace folio::service {

namespace {

// 13: events and webhooks (events/outbox.hpp, events/feed.hpp, webhooks/).
// event_outbox: one row per change that causes an event, inserted in the change's own transaction
// (so an acknowledged change always has its row) and deleted by the transaction that turns it into
// an event of the feed. `subject` names what changed ("crdt\x1f<org>\x1f<doc>\x1f<editor>", an
// annotation, a comment); `coalesces` marks an update that is merged with the other updates of its
// subject into one event (feed.hpp); `data` is the event's data object without userIds and changes.
// event_feed: the tenant's events in the order they were sequenced (`position`, one sequence across
// tenants that never hands a number out twice, even after the rows are pruned, assigned by the one
// writer that sequences; feed.hpp), `body` the event as it is sent;
// in_feed 0 for an endpoint's test ping (sent, never listed). webhook_endpoints: a tenant's
// endpoints with their filters (JSON arrays, NULL: all), secret, the secret before the last rotation
// while it still signs, and their standing: failing_since (the first failed attempt since the last
// success), queued (deliveries pending), dropped (events not queued because the queue was full).
// webhook_deliveries: one row per event and endpoint until it succeeds or fails for good — its next
// attempt and who is sending it (claimed_by until claimed_until: another node takes it over after).
// webhook_attempts: the delivery log, one row per attempt.
constexpr const char* events_13 = R"sql(
CREATE TABLE event_outbox (
  seq {IDENTITY}, tenant TEXT NOT NULL, type TEXT NOT NULL, org TEXT NOT NULL, subject TEXT NOT NULL,
  coalesces {INTEGER} NOT NULL, user_id TEXT NOT NULL, created_at {INTEGER} NOT NULL, data TEXT NOT NULL);
CREATE INDEX event_outbox_coalescing ON event_outbox (tenant, subject, created_at) WHERE coalesces = 1;
CREATE INDEX event_outbox_at_once ON event_outbox (seq) WHERE coalesces = 0;
CREATE TABLE event_feed (
  position {IDENTITY}, tenant TEXT NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, org TEXT NOT NULL,
  created_at {INTEGER} NOT NULL, in_feed {INTEGER} NOT NULL, body TEXT NOT NULL);
CREATE INDEX event_feed_by_tenant ON event_feed (tenant, position);
CREATE UNIQUE INDEX event_feed_by_id ON event_feed (tenant, id);
CREATE INDEX event_feed_by_time ON event_feed (created_at);
CREATE TABLE webhook_endpoints (
  tenant TEXT NOT NULL, id TEXT NOT NULL, url TEXT NOT NULL, event_types TEXT, org_ids TEXT, description TEXT,
  enabled {INTEGER} NOT NULL, disabled_reason TEXT, secret TEXT NOT NULL, old_secret TEXT, old_secret_until {INTEGER},
  created_at {INTEGER} NOT NULL, updated_at {INTEGER} NOT NULL, failing_since {INTEGER},
  queued {INTEGER} NOT NULL DEFAULT 0, dropped {INTEGER} NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, id)){ROWID};
CREATE TABLE webhook_deliveries (
  tenant TEXT NOT NULL, endpoint TEXT NOT NULL, position {INTEGER} NOT NULL, message_id TEXT NOT NULL,
  state TEXT NOT NULL, attempts {INTEGER} NOT NULL, next_at {INTEGER}, claimed_by TEXT, claimed_until {INTEGER},
  PRIMARY KEY (tenant, endpoint, position)){ROWID};
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE TABLE webhook_attempts (
  tenant TEXT NOT NULL, endpoint TEXT NOT NULL, attempted_at {INTEGER} NOT NULL, message_id TEXT NOT NULL, attempt {INTEGER} NOT NULL,
  position {INTEGER} NOT NULL, http_status {INTEGER}, latency_ms {INTEGER} NOT NULL, error TEXT, response TEXT,
  PRIMARY KEY (tenant, endpoint, attempted_at, message_id, attempt)){ROWID};
CREATE INDEX webhook_attempts_by_time ON webhook_attempts (attempted_at);
)sql";

}  // namespace

module_migrations event_migrations() {
  static const std::string sqlite_13 = ddl(dialect::sqlite, events_13), pg_13 = ddl(dialect::postgresql, events_13);
  static const migration sqlite[] = {{13, sqlite_13.c_str()}};
  static const migration pg[] = {{13, pg_13.c_str()}};
  return {sqlite, pg};
}

}  // namespace folio::service
