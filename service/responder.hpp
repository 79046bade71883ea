// service/responder.hpp — the service assembled (docs/SERVICE.md): the platform's server with every
// family's routes (crdt/, presence/, annotations/, the platform's /v2/auth/token) and every family's tables
// (tables()). folio-fcgi (main.cpp) runs one; tests, the fuzz target and folio-admin build theirs.
// Thread-safety: as server.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "annotations/handlers.hpp"
#include "crdt/family.hpp"
#include "events/feed.hpp"
#include "storage/database.hpp"
#include "platform/server.hpp"
#include "presence/family.hpp"
#include "webhooks/handlers.hpp"

namespace folio::service {

class responder {
 public:
  explicit responder(config c) : server_(std::move(c)), crdt_(server_), presence_(server_, crdt_), events_(server_.settings().webhooks) {
    register_annotation_routes(server_.routes());
    register_webhook_routes(server_.routes());
  }
  responder(const responder&) = delete;
  responder& operator=(const responder&) = delete;

  /// The database schema of every family, in the order their tables were first created: the
  /// platform's, crdt/records.hpp's, annotations/store.hpp's.
  static const schema& tables();

  server& platform() noexcept { return server_; }
  /// The CRDT records' part (tests reach its background work through it).
  crdt_family& crdt() noexcept { return crdt_; }
  /// Presence (presence/family.hpp).
  presence_family& presence() noexcept { return presence_; }
  const config& settings() const noexcept { return server_.settings(); }

  /// server::handle: one request, answered. Never throws.
  response handle(database& db, const request& r) { return server_.handle(db, r); }
  /// crdt_family::authorize_subscriber: nginx's question for GET /v2/crdt/subscribe. Never throws.
  response authorize_subscriber(database& db, const request& r) { return crdt_.authorize_subscriber(db, r); }

  /// At start, after the client-token keys are loaded: takes over what earlier responders left that
  /// outlives them (crdt_family::keep_token_streams: the client-token streams still open in nginx),
  /// reading on `db`; `connect` opens a connection per thread that needs one later. Throws store_error.
  void resume(database& db, std::function<std::unique_ptr<database>()> connect) { crdt_.keep_token_streams(db, std::move(connect)); }
  /// The client-token keys or the revoked API keys changed: what they let in and no longer would ends
  /// now (the publisher's sweep of open streams), waited for at most `wait`.
  void credentials_changed(std::chrono::milliseconds wait) { crdt_.live().request_sweep(wait); }
  /// The families' background work (the records' compactions), on the calling thread with its own
  /// connection, until stop_background().
  void run_background(database& db) { crdt_.compactions().run(db); }
  /// The records' history upkeep (automatic versions, thinning, retention), likewise until stop_background().
  void run_history(database& db) { crdt_.history().run(crdt_, db); }
  /// The events' sequencer (events/feed.hpp): outbox rows become the feed's events and their webhook
  /// deliveries, likewise until stop_background().
  void run_events(database& db) { events_.run(db); }
  /// `f` runs whenever the sequencer has queued deliveries (folio-fcgi: the webhook sender's wake()). Before run_events().
  void on_events_made(std::function<void()> f) { events_.on_events_made(std::move(f)); }
  /// The presence sweeper (timed-out clients leave), likewise until stop_background(). No database.
  void run_presence() { presence_.run(); }
  void stop_background() {
    presence_.stop();
    crdt_.compactions().stop();
    crdt_.history().stop();
    events_.stop();
  }

 private:
  server server_;
  crdt_family crdt_;
  presence_family presence_;
  event_sequencer events_;
};

}  // namespace folio::service
