// service/events/schema.hpp — the tables of events and webhooks (docs/WEBHOOKS.md; docs/SERVICE.md,
// "Schema versions"): the outbox every change writes in its own transaction, the event feed, the
// webhook endpoints, their deliveries and the delivery log, with their migrations.
#pragma once

#include "storage/migrations.hpp"

namespace folio::service {

module_migrations event_migrations();

}  // namespace folio::service
