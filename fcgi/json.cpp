#include "json.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

namespace folio::service {

namespace {

constexpr unsigned parse_flags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

/// First pass (SAX): depth and duplicate keys, which RapidJSON's DOM parser does not check.
struct shape_check : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, shape_check> {
  std::vector<std::unordered_set<std::string>> keys;  // one per open object
  int depth = 0;
  bool too_deep = false;
  std::string duplicate;
  bool open() { return ++depth <= max_json_depth || (too_deep = true, false); }
  bool StartObject() { return open() && (keys.emplace_back(), true); }
  bool EndObject(rapidjson::SizeType) { return --depth, keys.pop_back(), true; }
  bool StartArray() { return open(); }
  bool EndArray(rapidjson::SizeType) { return --depth, true; }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (keys.back().emplace(s, n).second) return true;
    duplicate.assign(s, n);
    return false;
  }
  bool Default() { return true; }
};

}  // namespace

rapidjson::Document parse_json(std::string_view body) {
  shape_check check;
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(body.data(), body.size());
  const rapidjson::ParseResult pr = reader.Parse<parse_flags>(ms, check);
  if (check.too_deep) throw api_error(status::invalid_argument, "JSON nesting is deeper than 64 levels (at byte " + std::to_string(pr.Offset()) + ").");
  if (!check.duplicate.empty()) throw api_error(status::invalid_argument, "Duplicate key \"" + check.duplicate + "\" in a JSON object.");
  if (pr.IsError())
    throw api_error(status::invalid_argument,
                    std::string("Body is not valid JSON: ") + rapidjson::GetParseError_En(pr.Code()) + " (at byte " + std::to_string(pr.Offset()) + ").");
  rapidjson::Document doc;
  doc.Parse<parse_flags>(body.data(), body.size());
  if (doc.HasParseError()) throw api_error(status::invalid_argument, "Body is not valid JSON.");
  return doc;
}

std::string canonical_json(const rapidjson::Value& root) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  struct frame {
    const rapidjson::Value* v;
    std::vector<const rapidjson::Value::Member*> members;  // objects: sorted by key
    std::size_t next = 0;
  };
  auto scalar = [&](const rapidjson::Value& v) {
    switch (v.GetType()) {
      case rapidjson::kNullType: w.Null(); break;
      case rapidjson::kFalseType: w.Bool(false); break;
      case rapidjson::kTrueType: w.Bool(true); break;
      case rapidjson::kStringType: w.String(v.GetString(), v.GetStringLength()); break;
      default:
        if (v.IsInt64()) w.Int64(v.GetInt64());
        else if (v.IsUint64()) w.Uint64(v.GetUint64());
        else w.Double(v.GetDouble());
    }
  };
  std::vector<frame> stack;
  auto open = [&](const rapidjson::Value& v) {
    if (v.IsObject()) {
      frame f{&v, {}, 0};
      for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) f.members.push_back(&*it);
      std::sort(f.members.begin(), f.members.end(), [](const auto* a, const auto* b) {
        return std::string_view(a->name.GetString(), a->name.GetStringLength()) < std::string_view(b->name.GetString(), b->name.GetStringLength());
      });
      w.StartObject();
      stack.push_back(std::move(f));
    } else if (v.IsArray()) {
      w.StartArray();
      stack.push_back({&v, {}, 0});
    } else {
      scalar(v);
    }
  };
  open(root);
  while (!stack.empty()) {
    frame& f = stack.back();
    if (f.v->IsObject()) {
      if (f.next == f.members.size()) {
        w.EndObject();
        stack.pop_back();
        continue;
      }
      const auto* m = f.members[f.next++];
      w.Key(m->name.GetString(), m->name.GetStringLength());
      open(m->value);  // may invalidate `f`
    } else {
      if (f.next == f.v->Size()) {
        w.EndArray();
        stack.pop_back();
        continue;
      }
      open((*f.v)[static_cast<rapidjson::SizeType>(f.next++)]);
    }
  }
  return std::string(sb.GetString(), sb.GetSize());
}

std::string error_body(std::string_view message, std::string_view status) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("message");
  write_string(w, message);
  w.Key("status");
  write_string(w, status);
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace folio::service
