// service/crdt/family.hpp — the CRDT records' part of the service (docs/API.md, the /v2/crdt endpoints;
// docs/SERVICE.md): the decoded documents kept in memory (doc_cache.hpp), the live push to nginx's
// Nchan (publish/publisher.hpp; it hears every commit through commit_events.hpp and holds a request's messages
// until its answer has gone, through the server's after-response hook), the logs' compaction off the request path (compactor.hpp), the history's upkeep (auto_versions.hpp), the endpoints (handlers.cpp, version_handlers.cpp, registered on the server's route table) and
// the subscribe authorization nginx asks for (subscribe.cpp). Its tables are crdt/records.hpp's.
// Thread-safety: as the server; the cache and the publisher lock themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <folio/document.hpp>

#include "crdt/auto_versions.hpp"
#include "crdt/commit_events.hpp"
#include "crdt/compactor.hpp"
#include "crdt/doc_cache.hpp"
#include "crdt/publish/publisher.hpp"
#include "crdt/records.hpp"
#include "platform/server.hpp"

namespace folio::service {

class crdt_family {
 public:
  /// Registers the /v2/crdt routes on `platform`, the cache's, publisher's and compactor's gauges on its
  /// /metrics and the publisher's hold on its after-response hooks; subscribes the live push to commits().
  explicit crdt_family(server& platform);
  crdt_family(const crdt_family&) = delete;
  crdt_family& operator=(const crdt_family&) = delete;

  server& platform() noexcept { return server_; }
  doc_cache& cache() noexcept { return cache_; }
  publisher& live() noexcept { return publisher_; }
  /// Every record_session's commits go to these subscribers (the live push first).
  commit_events& commits() noexcept { return commits_; }
  /// Tests' hook (none in production): runs on a request's thread as its record_session starts to
  /// commit (after open() and the change, before the writer section). Set before the first request.
  void set_before_commit(std::function<void(const record_key&)> hook) { before_commit_ = std::move(hook); }
  const std::function<void(const record_key&)>& before_commit() const noexcept { return before_commit_; }
  /// The records waiting for compaction; folio-fcgi gives its run() a thread and a connection.
  compactor& compactions() noexcept { return compactor_; }
  /// Automatic versions, thinning, the change rows' retention (auto_versions.hpp); folio-fcgi gives its
  /// run() a thread and a connection.
  history_keeper& history() noexcept { return history_; }

  /// Answers nginx's nchan_authorize_request for GET /v2/crdt/subscribe (`r.query`, `r.channel`):
  /// 200 to let the subscriber in; otherwise the JSON error nginx passes to the client — the same
  /// credentials rules as every endpoint, and a record of another tenant is as missing as no record.
  /// Never throws.
  response authorize_subscriber(database& db, const request& r);

  /// Keeps the channels of client-token streams across restarts (publish/token_streams.hpp; crdt_token_streams): takes
  /// over the rows earlier responders kept (adopt_token_streams, on `db`) and remembers them, and from
  /// now on has subscribe authorizations write rows and deletions remove them — the latter on
  /// connections `connect` opens, one per thread that deletes. Once, at start, after the client-token
  /// keys are loaded (a key a row names must be known, or its channel is ended as the key's). Nothing
  /// without a publisher socket (nothing could be deleted). Throws store_error.
  void keep_token_streams(database& db, std::function<std::unique_ptr<database>()> connect);

 private:
  server& server_;
  doc_cache cache_;
  commit_events commits_;
  std::function<void(const record_key&)> before_commit_;
  // Before the publisher: its threads call `forget` (keep_token_streams), which reads them, until it is destroyed.
  std::string stream_owner_;      ///< this responder's crdt_token_streams rows' owner, drawn at start
  bool keeping_streams_ = false;  ///< keep_token_streams was called: subscribers' rows are written
  publisher publisher_;
  compactor compactor_;
  history_keeper history_;
};

/// The record `org`/`doc`/`editor` of the caller's tenant, kept inside a client token's scope
/// (check_scope; `named` is the editor the request names, if any). The one place a record key is made
/// from a request.
record_key scoped_key(const principal& who, std::string org, std::string doc, const std::optional<std::string>& named);

/// The id a client token's open stream is remembered under (publisher::token_subscribed's key id):
/// "<signing key id>/<tenant>" ('/' occurs in neither). The family's publisher finds such a stream due
/// when its signing key has left the key ring or its tenant's API key is revoked
/// (server::api_key_revoked, as of the last read).
std::string stream_key_id(const client_scope& s, const std::string& tenant);

}  // namespace folio::service
