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

/// SAX handler in front of the DOM builder: checks depth and duplicate keys (which RapidJSON's DOM
/// parser does not) while the document is built, in one pass.
struct checked_builder {
  rapidjson::Document& doc;
  std::vector<std::unordered_set<std::string>> keys;  // one per open object
  int depth = 0;
  bool too_deep = false;
  std::string duplicate;
  bool open() { return ++depth <= max_json_depth || (too_deep = true, false); }
  bool Null() { return doc.Null(); }
  bool Bool(bool b) { return doc.Bool(b); }
  bool Int(int i) { return doc.Int(i); }
  bool Uint(unsigned u) { return doc.Uint(u); }
  bool Int64(int64_t i) { return doc.Int64(i); }
  bool Uint64(uint64_t u) { return doc.Uint64(u); }
  bool Double(double d) { return doc.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return doc.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc.String(s, n, copy); }
  bool StartObject() { return open() && (keys.emplace_back(), doc.StartObject()); }
  bool EndObject(rapidjson::SizeType n) { return --depth, keys.pop_back(), doc.EndObject(n); }
  bool StartArray() { return open() && doc.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return --depth, doc.EndArray(n); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    if (!keys.back().emplace(s, n).second) return duplicate.assign(s, n), false;
    return doc.Key(s, n, copy);
  }
};

}  // namespace

rapidjson::Document parse_json(std::string_view body, std::string_view what) {
  // RapidJSON's streams read a NUL as the end of the text, so "1\0anything" would parse as 1. JSON
  // never holds a raw NUL (in a string it is escaped, elsewhere it is not whitespace).
  if (const std::size_t nul = body.find('\0'); nul != std::string_view::npos)
    throw api_error(status::invalid_argument, std::string(what) + " is not valid JSON: NUL byte (at byte " + std::to_string(nul) + ").");
  rapidjson::Document doc;
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(body.data(), body.size());
  rapidjson::ParseResult pr;
  bool too_deep = false;
  std::string duplicate;
  auto generate = [&](rapidjson::Document& d) {
    checked_builder b{d, {}, 0, false, {}};
    pr = reader.Parse<parse_flags>(ms, b);
    too_deep = b.too_deep, duplicate = std::move(b.duplicate);
    return !pr.IsError();
  };
  doc.Populate(generate);
  if (too_deep) throw api_error(status::invalid_argument, "JSON nesting is deeper than 64 levels (at byte " + std::to_string(pr.Offset()) + ").");
  if (!duplicate.empty()) throw api_error(status::invalid_argument, "Duplicate key \"" + duplicate + "\" in a JSON object.");
  if (pr.IsError()) {
    // RapidJSON's reasons are sentences ("Invalid value."); inside this one they become a phrase.
    std::string why = rapidjson::GetParseError_En(pr.Code());
    if (why.ends_with('.')) why.pop_back();
    if (why.size() > 1 && why[0] >= 'A' && why[0] <= 'Z' && why[1] >= 'a' && why[1] <= 'z') why[0] = static_cast<char>(why[0] - 'A' + 'a');
    throw api_error(status::invalid_argument, std::string(what) + " is not valid JSON: " + why + " (at byte " + std::to_string(pr.Offset()) + ").");
  }
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

std::string success_body_array(std::string_view message, const std::vector<const std::string*>& items, std::string_view more_members) {
  std::string out = success_body(message, [](json_writer& w) { w.Null(); });
  out.resize(out.size() - 6);  // "null}}"
  std::size_t size = out.size() + 2 + items.size() + more_members.size() + 2;
  for (const std::string* item : items) size += item ? item->size() : 4;
  out.reserve(size);
  out += '[';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    out += items[i] ? std::string_view(*items[i]) : std::string_view("null");
  }
  out += ']';
  out += more_members;
  out += "}}";
  return out;
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
