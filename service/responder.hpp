// service/responder.hpp — the service assembled (docs/SERVICE.md): the platform's server with every
// family's routes (crdt/, annotations/, the platform's /v2/auth/token) and every family's tables
// (tables()). folio-fcgi (main.cpp) runs one; tests, the fuzz target and folio-admin build theirs.
// Thread-safety: as server.
#pragma once

#include "annotations/handlers.hpp"
#include "crdt/family.hpp"
#include "storage/database.hpp"
#include "platform/server.hpp"

namespace folio::service {

class responder {
 public:
  explicit responder(config c) : server_(std::move(c)), crdt_(server_) { register_annotation_routes(server_.routes()); }
  responder(const responder&) = delete;
  responder& operator=(const responder&) = delete;

  /// The database schema of every family, in the order their tables were first created: the
  /// platform's, crdt/records.hpp's, annotations/store.hpp's.
  static const schema& tables();

  server& platform() noexcept { return server_; }
  crdt_family& crdt() noexcept { return crdt_; }
  const config& settings() const noexcept { return server_.settings(); }

  /// server::handle: one request, answered. Never throws.
  response handle(database& db, const request& r) { return server_.handle(db, r); }
  /// crdt_family::authorize_subscriber: nginx's question for GET /v2/crdt/subscribe. Never throws.
  response authorize_subscriber(database& db, const request& r) { return crdt_.authorize_subscriber(db, r); }

 private:
  server server_;
  crdt_family crdt_;
};

}  // namespace folio::service
