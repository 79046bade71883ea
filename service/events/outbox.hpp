// service/events/outbox.hpp — what a change writes so that its event is never lost (docs/WEBHOOKS.md):
// one row of event_outbox per change that causes an event, inserted by the change's own write
// transaction (record_session's commits, the annotation and version writes), so a change that was
// acknowledged has its row and one that rolled back has none. The sequencer (feed.hpp) turns the rows
// into the events of the feed and the webhook deliveries, off the request path.
//
// The event types (docs/WEBHOOKS.md, "Events"); an event's body is {"type", "timestamp", "data"}, and
// its data the ids of what changed, written here as a JSON object without `userIds` and `changes`
// (the sequencer adds them: an update coalesced from several changes lists every author).
// Thread-safety: free functions over a caller's `database`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "storage/database.hpp"

namespace folio::service {

namespace event_types {
inline constexpr std::string_view record_added = "crdt.record.added", record_updated = "crdt.record.updated", record_deleted = "crdt.record.deleted",
                                  version_created = "crdt.version.created", annotation_added = "comment_annotation.added",
                                  annotation_updated = "comment_annotation.updated", annotation_deleted = "comment_annotation.deleted",
                                  comment_added = "comment.added", comment_updated = "comment.updated", comment_deleted = "comment.deleted";
/// Every type a tenant's changes cause, in the order docs/WEBHOOKS.md lists them.
inline constexpr std::array<std::string_view, 10> all = {record_added,     record_updated,     record_deleted,     version_created, annotation_added,
                                                         annotation_updated, annotation_deleted, comment_added,     comment_updated, comment_deleted};
/// The type of an endpoint's test message (webhooks' /test): sent, never in the feed.
inline constexpr std::string_view ping = "webhook.ping";
bool known(std::string_view type);
}  // namespace event_types

/// One change's event, as its transaction writes it.
struct event_change {
  std::string_view tenant, type, org;
  /// What changed, the key updates coalesce on and the sequencer orders by: "<kind>\x1f<ids>\x1f...".
  std::string subject;
  bool coalesces = false;  ///< an update merged with the others of its subject (crdt.record.updated)
  std::string_view user_id;
  std::int64_t at_ms = 0;  ///< when the change was committed (its timestamp)
  std::string data;        ///< the data object's JSON, without userIds and changes
};

/// Inserts `e`'s row of event_outbox. Call inside the change's write transaction. Throws store_error.
void record_event(database& db, const event_change& e);

/// Data objects (JSON text) of the events, each starting with the organization and document ids.
/// A CRDT record's: editorId, recordType and version ("<revision>-<tag>", crdt/history.hpp; null for a
/// deletion), and `value` (JSON text) when given.
std::string record_event_data(std::string_view org, std::string_view doc, std::string_view editor, std::string_view type,
                              const std::optional<std::string>& version, const std::optional<std::string>& value = std::nullopt);
/// A version's: as a record's (its version, no value), then versionNumber, kind, name (or null) and
/// authors (`authors`: JSON array text, the version's authors as versions/get lists them).
std::string version_event_data(std::string_view org, std::string_view doc, std::string_view editor, std::string_view type, const std::string& version,
                               std::int64_t number, std::string_view kind, const std::optional<std::string>& name, const std::string& authors);
/// An annotation's: annotationId, and for an update `changedFields` (the updated fields' names, JSON
/// array text) and `status` (its status id after the change, or null).
std::string annotation_event_data(std::string_view org, std::string_view doc, std::string_view annotation,
                                  const std::optional<std::string>& changed_fields = std::nullopt, const std::optional<std::string>& status = std::nullopt);
/// A comment's: annotationId and commentId.
std::string comment_event_data(std::string_view org, std::string_view doc, std::string_view annotation, std::int64_t comment);

}  // namespace folio::service
