// /v1/commentannotations/get (DESIGN.md §4): filters within a list are OR'ed, lists are AND'ed; with
// annotationIds, one slot per distinct requested id in request order (null where the id does not exist
// in the document, left out where it exists but fails another filter); otherwise oldest first.
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fields.hpp"
#include "handlers.hpp"
#include "json.hpp"

namespace folio::service {

std::string annotations_get(context& c) {
  const std::string org = required_id(c.data, "organizationId", "Organization ID is required");
  const std::string doc = required_id(c.data, "documentId", "Document ID is required");
  annotation_filter f;
  f.locations = id_list(c.data, "locationIds");
  f.users = id_list(c.data, "userIds");
  std::vector<std::string> requested = id_list(c.data, "annotationIds");
  std::unordered_set<std::string> seen;
  for (std::string& id : requested)
    if (seen.insert(id).second) f.ids.push_back(id);
  return c.db.read([&] {
    const auto found = find_annotations(c.db, c.who.tenant, org, doc, f);
    return success_body("Annotations fetched successfully.", [&](json_writer& w) {
      w.StartArray();
      if (f.ids.empty()) {
        for (const auto& [id, body] : found) w.RawValue(body.data(), body.size(), rapidjson::kObjectType);
      } else {
        std::unordered_map<std::string, const std::string*> by_id;
        for (const auto& [id, body] : found) by_id.emplace(id, &body);
        std::unordered_set<std::string> exist;
        for (std::string& id : existing_annotations(c.db, c.who.tenant, org, doc, f.ids)) exist.insert(std::move(id));
        for (const std::string& id : f.ids) {
          if (auto it = by_id.find(id); it != by_id.end())
            w.RawValue(it->second->data(), it->second->size(), rapidjson::kObjectType);
          else if (!exist.count(id))
            w.Null();
        }
      }
      w.EndArray();
    });
  });
}

}  // namespace folio::service
