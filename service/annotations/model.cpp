#include "annotations/model.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <initializer_list>

#include "platform/clock.hpp"
#include "platform/fields.hpp"
#include "wire/json.hpp"
#include "wire/status.hpp"

namespace folio::service {

namespace {

[[noreturn]] void fail(const std::string& message) { throw api_error(status::invalid_argument, message); }

/// The members of one request object, checked against the fields it may hold. `path` names the object
/// in messages ("" for the item itself, "from." for its author).
class object_reader {
 public:
  object_reader(const rapidjson::Value& v, std::string path, std::initializer_list<std::string_view> allowed) : v_(v), path_(std::move(path)) {
    if (!v.IsObject()) fail((path_.empty() ? std::string("Each item") : path_.substr(0, path_.size() - 1)) + " must be an object.");
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
      const std::string_view name(m->name.GetString(), m->name.GetStringLength());
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::string shown(name.substr(0, 64));
        for (char& c : shown)
          if (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\') c = '?';
        fail(path_.empty() ? "Unknown field \"" + shown + "\"." : path_.substr(0, path_.size() - 1) + " has an unknown field \"" + shown + "\".");
      }
    }
  }
  std::string name(const char* field) const { return path_ + field; }
  /// The member, or nullptr when absent or null.
  const rapidjson::Value* get(const char* field) const { return field_value(v_, field); }
  bool has(const char* field) const { return v_.HasMember(field); }
  /// A string of at most `max` bytes; short texts (max_short_text) must not hold control characters.
  std::optional<std::string> text(const char* field, std::size_t max) const {
    const rapidjson::Value* m = get(field);
    if (!m) return std::nullopt;
    if (!m->IsString()) fail(name(field) + " must be a string.");
    std::string s(m->GetString(), m->GetStringLength());
    if (s.size() > max) fail(name(field) + " must be at most " + std::to_string(max) + " bytes.");
    if (max == max_short_text)
      for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) fail(name(field) + " must not contain control characters.");
    return s;
  }
  std::string required_text(const char* field) const {
    std::optional<std::string> s = text(field, max_short_text);
    if (!s || s->empty()) fail(name(field) + " is required.");
    return *s;
  }
  std::optional<std::string> id(const char* field) const {
    const rapidjson::Value* m = get(field);
    if (!m) return std::nullopt;
    if (!m->IsString()) fail(name(field) + " must be a string.");
    std::string s(m->GetString(), m->GetStringLength());
    check_id(s, name(field));
    return s;
  }
  std::string required_id(const char* field) const {
    std::optional<std::string> s = get(field) && get(field)->IsString() && get(field)->GetStringLength() == 0 ? std::nullopt : id(field);
    if (!s) fail(name(field) + " is required.");
    return *s;
  }
  std::optional<std::string> timestamp(const char* field) const { return optional_timestamp(v_, field, name(field)); }

 private:
  const rapidjson::Value& v_;
  std::string path_;
};

user parse_user(const rapidjson::Value& v, const std::string& path) {
  object_reader r(v, path, {"userId", "name", "email"});
  return {r.required_id("userId"), r.required_text("name"), r.required_text("email")};
}

annotation_status parse_status(const rapidjson::Value& v, const std::string& path) {
  object_reader r(v, path, {"id", "name", "color", "type"});
  annotation_status s;
  s.id = r.required_id("id");
  s.name = r.text("name", max_short_text).value_or(s.id);
  s.color = r.text("color", max_short_text).value_or(s.color);
  s.type = r.text("type", max_short_text).value_or(s.type);
  return s;
}

annotation_location parse_location(const rapidjson::Value& v, const std::string& path) {
  object_reader r(v, path, {"id", "locationName"});
  return {r.required_id("id"), r.text("locationName", max_short_text)};
}

std::string parse_context(const rapidjson::Value& v, const std::string& name) {
  if (!v.IsObject()) fail(name + " must be an object.");
  std::string c = canonical_json(v);
  if (c.size() > max_context_bytes) fail(name + " must be at most 16384 bytes as JSON (it is " + std::to_string(c.size()) + ").");
  return c;
}

void write_user(json_writer& w, const user& u) {
  w.StartObject();
  write_member(w, "userId", u.id);
  write_member(w, "name", u.name);
  write_member(w, "email", u.email);
  w.EndObject();
}

template <class F>
std::string written(F&& f) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  f(w);
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace

std::string random_annotation_id() { return random_annotation_id(now_unix_ms()); }

std::string random_annotation_id(std::int64_t unix_ms) {
  // 8 characters of milliseconds since 1970 (48 bits, big-endian: ids sort by creation time), then 12
  // of randomness (72 bits). Time order keeps a batch's inserts together in the primary key and the
  // comments' key — a few pages written per batch instead of one random page per annotation.
  static constexpr char alphabet[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";  // ASCII order
  unsigned char bytes[15];
  const auto ms = static_cast<std::uint64_t>(unix_ms);
  for (int i = 0; i < 6; ++i) bytes[i] = static_cast<unsigned char>(ms >> (8 * (5 - i)));
  if (RAND_bytes(bytes + 6, 9) != 1) throw api_error(status::unavailable, "No randomness available for an annotation id; retry.");
  std::string id;
  for (std::size_t i = 0; i < sizeof bytes; i += 3) {
    const unsigned v = unsigned(bytes[i]) << 16 | unsigned(bytes[i + 1]) << 8 | bytes[i + 2];
    for (int k = 18; k >= 0; k -= 6) id += alphabet[(v >> k) & 63];
  }
  return id;
}

std::int64_t parse_comment_id(const rapidjson::Value& v, const std::string& what) {
  if (!v.IsInt64() || v.GetInt64() < 0 || v.GetInt64() > max_comment_id) fail(what + " must be a whole number from 0 to 9007199254740991.");
  return v.GetInt64();
}

comment_value parse_comment(const rapidjson::Value& v, const std::string& path, bool from_required) {
  object_reader r(v, path, {"commentId", "commentText", "commentHtml", "from", "createdAt", "lastUpdated", "type"});
  comment_value c;
  if (const rapidjson::Value* id = r.get("commentId")) c.id = parse_comment_id(*id, r.name("commentId"));
  c.text = r.text("commentText", max_comment_bytes).value_or("");
  c.html = r.text("commentHtml", max_comment_bytes).value_or("");
  if (c.text.empty() && c.html.empty()) fail(path + "commentText or " + path + "commentHtml is required.");
  if (const rapidjson::Value* from = r.get("from")) c.from = parse_user(*from, path + "from.");
  else if (from_required) fail(r.name("from") + " is required.");
  c.created_at = r.timestamp("createdAt");
  c.last_updated = r.timestamp("lastUpdated");
  c.type = r.text("type", max_short_text).value_or("text");
  return c;
}

annotation_value parse_annotation(const rapidjson::Value& v, bool with_comments) {
  object_reader r(v, "", {"annotationId", "location", "from", "color", "status", "context", "createdAt", "lastUpdated", "commentData"});
  annotation_value a;
  a.id = r.id("annotationId");
  if (const rapidjson::Value* loc = r.get("location")) a.location = parse_location(*loc, "location.");
  const rapidjson::Value* from = r.get("from");
  if (!from) fail("from is required.");
  a.from = parse_user(*from, "from.");
  a.color = r.text("color", max_short_text).value_or("");
  if (const rapidjson::Value* st = r.get("status")) a.status = parse_status(*st, "status.");
  if (const rapidjson::Value* ctx = r.get("context")) a.context = parse_context(*ctx, "context");
  a.created_at = r.timestamp("createdAt");
  a.last_updated = r.timestamp("lastUpdated");
  if (!with_comments) return a;
  if (const rapidjson::Value* cs = r.get("commentData")) {
    if (!cs->IsArray()) fail("commentData must be an array.");
    if (cs->Size() > max_comments_per_call) fail("commentData may hold at most 100 comments.");
    for (rapidjson::SizeType i = 0; i < cs->Size(); ++i)
      a.comments.push_back(parse_comment((*cs)[i], "commentData[" + std::to_string(i) + "].", false));
  }
  return a;
}

annotation_update parse_annotation_update(const rapidjson::Value& v) {
  object_reader r(v, "updatedData.", {"status", "location", "color", "from", "context"});
  annotation_update u;
  if (v.ObjectEmpty()) fail("updatedData must hold at least one of status, location, color, from, context.");
  if (const rapidjson::Value* st = r.get("status")) u.status = parse_status(*st, "updatedData.status.");
  else if (r.has("status")) fail("updatedData.status must be an object.");
  if (r.has("location")) u.location = r.get("location") ? std::optional(parse_location(*r.get("location"), "updatedData.location.")) : std::nullopt;
  if (r.has("color")) {
    u.color = r.text("color", max_short_text);
    if (!u.color) fail("updatedData.color must be a string.");
  }
  if (const rapidjson::Value* from = r.get("from")) u.from = parse_user(*from, "updatedData.from.");
  else if (r.has("from")) fail("updatedData.from must be an object.");
  if (r.has("context")) u.context = r.get("context") ? std::optional(parse_context(*r.get("context"), "updatedData.context")) : std::nullopt;
  return u;
}

std::string annotation_body(const annotation_value& a) {
  return written([&](json_writer& w) {
    w.StartObject();
    write_member(w, "annotationId", *a.id);
    if (a.location) {
      w.Key("location");
      w.StartObject();
      write_member(w, "id", a.location->id);
      if (a.location->name) {
        write_member(w, "locationName", *a.location->name);
      }
      w.EndObject();
    }
    w.Key("from");
    write_user(w, a.from);
    write_member(w, "color", a.color);
    w.Key("status");
    w.StartObject();
    for (const auto& [k, val] : {std::pair{"id", &a.status.id}, {"name", &a.status.name}, {"color", &a.status.color}, {"type", &a.status.type}}) {
      write_member(w, k, *val);
    }
    w.EndObject();
    if (a.context) {
      w.Key("context");
      w.RawValue(a.context->data(), a.context->size(), rapidjson::kObjectType);
    }
    write_member(w, "createdAt", *a.created_at);
    write_member(w, "lastUpdated", *a.last_updated);
    w.EndObject();
  });
}

std::string comment_body(const comment_value& c) {
  return written([&](json_writer& w) {
    w.StartObject();
    w.Key("commentId");
    w.Int64(*c.id);
    write_member(w, "commentText", c.text);
    write_member(w, "commentHtml", c.html);
    w.Key("from");
    write_user(w, *c.from);
    write_member(w, "createdAt", *c.created_at);
    write_member(w, "lastUpdated", *c.last_updated);
    write_member(w, "type", c.type);
    w.EndObject();
  });
}

annotation_value stored_annotation(const std::string& body) { return parse_annotation(parse_stored_json(body), false); }

comment_value stored_comment(const std::string& body) { return parse_comment(parse_stored_json(body), "", true); }

}  // namespace folio::service
