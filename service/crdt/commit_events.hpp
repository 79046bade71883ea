// service/crdt/commit_events.hpp — "a change of a record committed", the event record_session emits
// after each commit (record_session.hpp: add, append, erase), and the subscribers that act on it: the
// live push (publish/live_messages.hpp). Webhook events are not a subscriber: they must commit with
// the change, so record_session writes them in the commit's transaction (events/outbox.hpp).
// A handler never calls a subscriber: it commits through its record_session, and every subscriber
// hears of every commit, so a new subscriber needs no handler change.
//
// Model: an event is emitted on the committing request's thread, after the commit (the change is
// durable) and before the session ends — for `changed` and `deleted` while the session holds the
// record's entry lock, so one record's events are emitted in its commit order within this process
// (several nodes each emit their own commits; `revision` orders them). An `added` event may be emitted
// without the entry lock (an add of a record not cached takes none), so a change committed just after
// an add may be emitted before the add's event. A subscriber runs on the request path: it queues
// work and returns (the publisher's enqueue), never waits for a network or the database. It must not
// throw; a failure is logged and the request is still answered as committed.
// Thread-safety: subscribe() before the first request; emit() from many threads at once.
#pragma once

#include <folio/document.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "crdt/records.hpp"

namespace folio::service {

/// Who changed a record and when (the metadata every write of a record stores).
struct change_meta {
  std::string when, by;
  std::optional<std::string> session;
};

/// One committed change of a record. References are valid during the emit() that passes it.
struct committed_change {
  enum class kind { added, changed, deleted };
  kind what;
  const record_key& key;
  std::uint64_t incarnation;  ///< the record's (its replica id; a record added again has a new one)
  std::int64_t revision;     ///< the record's revision after the change; -1 for deleted
  const std::string* ops;    ///< changed: the batch appended to the log, or null when no op changed (only the metadata moved); else null
  const folio::version_vector* version;  ///< added, changed: the record's version after the change; deleted: null
  const change_meta& meta;  ///< added, changed: as stored; deleted: when it was deleted and by whom (the caller's subject)
};

class commit_events {
 public:
  using subscriber = std::function<void(const committed_change&)>;
  /// Adds `s`; subscribers hear each event in the order they subscribed. Before the first request.
  void subscribe(subscriber s) { subscribers_.push_back(std::move(s)); }
  /// Tells every subscriber of `c`. Never throws (above).
  void emit(const committed_change& c) const noexcept;

 private:
  std::vector<subscriber> subscribers_;
};

}  // namespace folio::service
