// service/annotations/handlers.hpp — the comment annotation endpoints (handlers.cpp; docs/API.md,
// "Comment annotations"). Their tables are annotations/store.hpp's.
#pragma once

#include "platform/routes.hpp"

namespace folio::service {

/// /v1/commentannotations/get and the /v2/commentannotations endpoints on `routes`.
void register_annotation_routes(route_table& routes);

}  // namespace folio::service
