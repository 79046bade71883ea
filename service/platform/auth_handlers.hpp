// service/platform/auth_handlers.hpp — the platform's own endpoint: POST /v2/auth/token (client tokens,
// auth_handlers.cpp).
#pragma once

#include "platform/routes.hpp"

namespace folio::service {

void register_auth_routes(route_table& routes);

}  // namespace folio::service
