#include "responder.hpp"

#include "annotations/store.hpp"
#include "crdt/records.hpp"

namespace folio::service {

const schema& responder::tables() {
  static const schema all = schema().add(platform_migrations()).add(crdt_migrations()).add(annotation_migrations());
  return all;
}

}  // namespace folio::service
