// service/presence/store.hpp — who is present on which record (docs/API.md, "Presence"): the entries, and
// the store interface that keeps them, in this process's memory (memory_store.hpp, one node) or in Redis
// (redis_store.hpp, shared by N nodes).
//
// Model: an entry is keyed by its record (tenant, organizationId, documentId, editorId) and a clientId,
// and holds the user it acts for, its state (canonical JSON of an object), its selection (JSON: null or
// {"anchor","head"}) and when it was last set (updatedAt, ms since the epoch). Nothing is written to the
// database. Invariants every store keeps, whatever the interleaving of calls on any node:
//  - a clientId of a record belongs to one userId while present (another user's set is refused);
//  - at most max_per_record entries per record, max_per_user of them one user's (so one client token,
//    whose clientIds are its own to choose, cannot fill a record), and `per_tenant` per tenant (a join
//    beyond any bound is refused);
//  - an entry is removed once, by leave() or by expire(); only that call reports it, so exactly one leave
//    is published per entry, whichever node removes it.
// Thread-safety: every member from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crdt/records.hpp"

namespace folio::service {

struct presence_entry {
  std::string client, user;
  std::string state = "{}";          ///< canonical JSON of an object
  std::string selection = "null";    ///< JSON: null or {"anchor":...,"head":...}
  std::int64_t updated_ms = 0;       ///< last set, ms since the epoch
};

/// An entry with its record (get() across a document's records, expire()).
struct placed_entry {
  record_key record;
  presence_entry entry;
};

class presence_store {
 public:
  static constexpr std::size_t max_per_record = 256;
  static constexpr std::size_t max_per_user = 64;  ///< a user's entries on one record, at most

  enum class set_outcome { joined, updated, other_user, record_full, user_full, tenant_full };
  struct set_result {
    set_outcome outcome = set_outcome::joined;
    presence_entry entry;  ///< joined/updated: the entry as stored (state and selection kept when not given)
    bool changed = true;   ///< joined, or its state or selection changed (a refresh alone changes neither)
  };
  enum class leave_outcome { left, absent, other_user };
  struct leave_result {
    leave_outcome outcome = leave_outcome::absent;
    presence_entry entry;  ///< left: the entry removed
  };

  virtual ~presence_store() = default;
  /// Joins or refreshes `client` of record `k` as `user` at `now_ms`; `state`/`selection` nullopt keep
  /// the entry's (a join: "{}" and "null"). O(log n) in memory; one round trip to Redis.
  virtual set_result set(const record_key& k, const std::string& client, const std::string& user, const std::optional<std::string>& state,
                         const std::optional<std::string>& selection, std::int64_t now_ms) = 0;
  /// Removes `client` of `k`; with `user` given, only when the entry is that user's (else other_user,
  /// nothing removed).
  virtual leave_result leave(const record_key& k, const std::string& client, const std::optional<std::string>& user) = 0;
  /// The entries of `k` (k.editor empty: of every record of the document) set at or after `since_ms`,
  /// ordered by editorId then clientId. O(entries listed).
  virtual std::vector<placed_entry> get(const record_key& k, std::int64_t since_ms) = 0;
  /// Removes and returns the entries last set before `before_ms`, at most `limit` of them, oldest first.
  virtual std::vector<placed_entry> expire(std::int64_t before_ms, std::size_t limit) = 0;
};

}  // namespace folio::service
