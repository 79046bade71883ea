#include "platform/routes.hpp"

#include <stdexcept>
#include <string>

namespace folio::service {

void route_table::add(route r) {
  if (find(r.path)) throw std::logic_error("route " + std::string(r.path) + " registered twice");
  routes_.push_back(std::move(r));
}

const route* route_table::find(std::string_view path) const {
  for (const route& r : routes_)
    if (r.path == path) return &r;
  return nullptr;
}

}  // namespace folio::service
