// service/crdt/publish/live_messages.hpp — the live push's subscriber of committed changes
// (commit_events.hpp): each change becomes the live message of its record's channel (docs/API.md,
// "live messages"), queued on the publisher (publisher.hpp), which sends it off the request path.
#pragma once

#include "crdt/commit_events.hpp"
#include "crdt/publish/publisher.hpp"

namespace folio::service {

/// Queues the live message of `c` (a `changed` with ops, or a `deleted`; nothing for an `added` or a
/// change of the metadata alone) for `c.key`'s channel: its ops, the server's version after it and its
/// metadata, all under the record's incarnation; and its notice, the same without `update` and
/// `version` (subscribers sync), which the publisher sends instead when the whole message is over
/// max_message_bytes or a budget is spent, and owes the channel when nginx refuses a message. Both
/// carry `revision`, the record's revision the change committed: nodes publish independently, so
/// subscribers may get a record's messages out of commit order, and the revision orders them
/// (docs/API.md). A deletion is one small message, `deleted: true`, no revision. Nothing when live
/// push is off (no channel secret or no publisher socket).
void publish_committed(publisher& p, const committed_change& c);

}  // namespace folio::service
