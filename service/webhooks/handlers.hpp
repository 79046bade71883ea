// service/webhooks/handlers.hpp — the webhooks' API (handlers.cpp; docs/API.md, "Webhooks" and
// "POST /v2/events/get"): /v2/webhooks/endpoints/add|get|update|delete|rotate-secret|test,
// /v2/webhooks/deliveries/get|replay and the pull feed /v2/events/get, for the tenant's API key and auth
// token only. Their store is webhooks/endpoints.hpp; the feed's rows are events/feed.hpp's.
#pragma once

#include "platform/routes.hpp"

namespace folio::service {

/// The /v2/webhooks endpoints and /v2/events/get on `routes`.
void register_webhook_routes(route_table& routes);

}  // namespace folio::service
