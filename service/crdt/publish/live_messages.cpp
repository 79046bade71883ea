#include "crdt/publish/live_messages.hpp"

#include "wire/base64.hpp"
#include "wire/json.hpp"

namespace folio::service {

void publish_committed(publisher& p, const committed_change& c) {
  if (c.what == committed_change::kind::added || (c.what == committed_change::kind::changed && !c.ops)) return;
  const live_config& live = p.settings();
  if (live.channel_secret.empty() || live.publish_socket.empty()) return;
  const bool deleted = c.what == committed_change::kind::deleted;
  const auto message = [&](bool with_ops) {
    rapidjson::StringBuffer sb;
    json_writer w(sb);
    w.StartObject();
    write_member(w, "editorId", c.key.editor);
    write_member(w, "incarnation", std::to_string(c.incarnation));
    if (deleted) {
      w.Key("deleted");
      w.Bool(true);
    } else {
      w.Key("revision");
      w.Int64(c.revision);
      if (with_ops) {
        write_member(w, "update", base64_encode(*c.ops));
        write_member(w, "version", base64_encode(c.version->encode()));
      }
      write_member(w, "lastUpdatedBy", c.meta.by);
      write_optional_member(w, "sessionId", c.meta.session);
    }
    write_member(w, "lastUpdate", c.meta.when);
    w.EndObject();
    return std::string(sb.GetString(), sb.GetSize());
  };
  const std::string notice = message(false);
  // Ops that alone exceed the largest message are not even encoded.
  const std::string full = !deleted && c.ops->size() <= publisher::max_message_bytes ? message(true) : notice;
  p.enqueue(channel_id(live.channel_secret, c.key.tenant, c.key.org, c.key.doc, c.key.editor), full, notice, c.key.tenant);
}

}  // namespace folio::service
