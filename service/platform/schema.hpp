// service/platform/schema.hpp — the platform's tables (docs/SERVICE.md, "Schema versions"): meta (the
// health probe) and the credentials (api_keys, tokens; auth.hpp), with their migrations.
#pragma once

#include "storage/migrations.hpp"

namespace folio::service {

module_migrations platform_migrations();

}  // namespace folio::service
