// service/crdt/handlers.hpp — the /v2/crdt endpoints (handlers.cpp) and /v2/crdt/versions (version_handlers.cpp),
// registered by crdt_family.
#pragma once

#include <folio/document.hpp>

#include <cstdint>

#include "crdt/records.hpp"
#include "wire/crdt_values.hpp"
#include "platform/routes.hpp"

namespace folio::service {

class crdt_family;

/// /v2/crdt/add, update, get, delete and sync on `routes`, served with `family`'s cache and publisher.
void register_crdt_routes(route_table& routes, crdt_family& family);
/// /v2/crdt/versions/add, get, update, delete and restore (version_handlers.cpp).
void register_version_routes(route_table& routes, crdt_family& family);

/// The record a request's organizationId, documentId and editorId name (each required, with the
/// contract's messages), inside the caller's tenant and a client token's scope (scoped_key).
record_key requested_record(context& c);
/// replace() through the engine, with a record whose op counter is spent (2^31) answered as a client
/// error: 400 FAILED_PRECONDITION, nothing can be added to it.
folio::local_change replace_value(folio::document& d, const new_value& v);
/// The refusal of a change after which `d`'s record would hold more unit operations than a record of
/// its type can (folio::document::max_units: what the service reads back from its snapshot, the one
/// limit of the decoder and of this check). `held` and `after`: its units before and after the change.
[[noreturn]] void refuse_past_max_units(const folio::document& d, std::uint64_t held, std::uint64_t after);

}  // namespace folio::service
