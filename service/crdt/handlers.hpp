// service/crdt/handlers.hpp — the /v2/crdt endpoints (handlers.cpp), registered by crdt_family.
#pragma once

#include "platform/routes.hpp"

namespace folio::service {

class crdt_family;

/// /v2/crdt/add, update, get, delete and sync on `routes`, served with `family`'s cache and publisher.
void register_crdt_routes(route_table& routes, crdt_family& family);

}  // namespace folio::service
