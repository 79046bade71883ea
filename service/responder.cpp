#include "responder.hpp"

#include "annotations/schema.hpp"
#include "crdt/schema.hpp"
#include "events/schema.hpp"
#include "platform/schema.hpp"
#include "storage/migrations.hpp"

namespace folio::service {

const schema& responder::tables() {
  static const schema all = schema().add(platform_migrations()).add(crdt_migrations()).add(annotation_migrations()).add(event_migrations());
  return all;
}

}  // namespace folio::service
