#include "events/outbox.hpp"

#include <algorithm>

#include "events/feed.hpp"
#include "wire/json.hpp"

namespace folio::service {

bool event_types::known(std::string_view type) { return std::find(all.begin(), all.end(), type) != all.end(); }

void record_event(database& db, const event_change& e) {
  db.sql("INSERT INTO event_outbox (tenant, type, org, subject, coalesces, user_id, created_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(1, e.tenant)
      .bind(2, e.type)
      .bind(3, e.org)
      .bind(4, e.subject)
      .bind(5, std::int64_t(e.coalesces))
      .bind(6, e.user_id)
      .bind(7, e.at_ms)
      .bind(8, e.data)
      .step();
  if (!e.coalesces) wake_sequencer();  // a coalescing row waits for its window: the sequencer's timer finds it
}

namespace {

/// {"organizationId":..,"documentId":.., then the members `more` writes}.
template <class F>
std::string data_object(std::string_view org, std::string_view doc, F&& more) {
  rapidjson::StringBuffer out;
  json_writer w(out);
  w.StartObject();
  w.Key("organizationId");
  write_string(w, org);
  w.Key("documentId");
  write_string(w, doc);
  more(w);
  w.EndObject();
  return std::string(out.GetString(), out.GetSize());
}

}  // namespace

std::string record_event_data(std::string_view org, std::string_view doc, std::string_view editor, std::string_view type,
                              const std::optional<std::string>& version, const std::optional<std::string>& value) {
  return data_object(org, doc, [&](json_writer& w) {
    w.Key("editorId");
    write_string(w, editor);
    w.Key("recordType");
    write_string(w, type);
    w.Key("version");
    write_optional(w, version);
    if (value) {
      w.Key("value");
      w.RawValue(value->data(), value->size(), rapidjson::kObjectType);
    }
  });
}

std::string version_event_data(std::string_view org, std::string_view doc, std::string_view editor, std::string_view type, const std::string& version,
                               std::int64_t number, std::string_view kind, const std::optional<std::string>& name, const std::string& authors) {
  return data_object(org, doc, [&](json_writer& w) {
    write_member(w, "editorId", editor);
    write_member(w, "recordType", type);
    write_member(w, "version", version);
    w.Key("versionNumber");
    w.Int64(number);
    write_member(w, "kind", kind);
    w.Key("name");
    write_optional(w, name);
    w.Key("authors");
    w.RawValue(authors.data(), authors.size(), rapidjson::kArrayType);
  });
}

std::string annotation_event_data(std::string_view org, std::string_view doc, std::string_view annotation, const std::optional<std::string>& changed_fields,
                                  const std::optional<std::string>& status) {
  return data_object(org, doc, [&](json_writer& w) {
    w.Key("annotationId");
    write_string(w, annotation);
    if (changed_fields) {
      w.Key("changedFields");
      w.RawValue(changed_fields->data(), changed_fields->size(), rapidjson::kArrayType);
      w.Key("status");
      write_optional(w, status);
    }
  });
}

std::string comment_event_data(std::string_view org, std::string_view doc, std::string_view annotation, std::int64_t comment) {
  return data_object(org, doc, [&](json_writer& w) {
    w.Key("annotationId");
    write_string(w, annotation);
    w.Key("commentId");
    w.Int64(comment);
  });
}

}  // namespace folio::service
