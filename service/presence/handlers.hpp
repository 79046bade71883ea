// service/presence/handlers.hpp — /v2/presence/set, leave and get (docs/API.md, "Presence"), registered by
// presence_family. Open to client tokens (their scope checked) and to read-only tokens: presence
// writes nothing to a record.
#pragma once

#include "platform/routes.hpp"

namespace folio::service {

class presence_family;

void register_presence_routes(route_table& routes, presence_family& family);

}  // namespace folio::service
