// service/crdt/schema.hpp — the CRDT family's tables (docs/SERVICE.md, "Schema versions"): crdt_records,
// crdt_snapshots and crdt_log (the records, crdt/records.hpp) and crdt_token_streams (the channels of
// client-token streams kept across restarts, crdt/publish/token_streams.hpp), with their migrations.
#pragma once

#include "storage/migrations.hpp"

namespace folio::service {

module_migrations crdt_migrations();

}  // namespace folio::service
