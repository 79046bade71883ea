// service/annotations/schema.hpp — the annotations family's tables (docs/SERVICE.md, "Schema versions"):
// annotations and annotation_comments (annotations/store.hpp), their indexes and the triggers that keep
// an annotation's held comments from going stale, with their migrations.
#pragma once

#include "storage/migrations.hpp"

namespace folio::service {

module_migrations annotation_migrations();

}  // namespace folio::service
