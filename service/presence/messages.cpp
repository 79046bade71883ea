#include "presence/messages.hpp"

#include "platform/clock.hpp"

namespace folio::service {

namespace {
void write_raw(json_writer& w, std::string_view key, const std::string& json) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  w.RawValue(json.data(), json.size(), rapidjson::kObjectType);
}
}  // namespace

std::string presence_message(std::string_view editor, std::string_view type, const presence_entry& e, std::int64_t at_ms) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  w.StartObject();
  write_member(w, "editorId", editor);
  w.Key("presence");
  w.StartObject();
  write_member(w, "type", type);
  write_member(w, "clientId", e.client);
  write_member(w, "userId", e.user);
  if (type != "leave") {
    write_raw(w, "state", e.state);
    write_raw(w, "selection", e.selection);
  }
  write_member(w, "updatedAt", iso_time(at_ms));
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

void write_presence_entry(json_writer& w, const placed_entry& p) {
  w.StartObject();
  write_member(w, "editorId", p.record.editor);
  write_member(w, "clientId", p.entry.client);
  write_member(w, "userId", p.entry.user);
  write_raw(w, "state", p.entry.state);
  write_raw(w, "selection", p.entry.selection);
  write_member(w, "updatedAt", iso_time(p.entry.updated_ms));
  w.EndObject();
}

}  // namespace folio::service
