#include "wire/crdt_values.hpp"

#include "wire/status.hpp"

namespace folio::service {

folio::record_type parse_type(const rapidjson::Value& v) {
  if (v.IsString())
    if (auto t = folio::parse_record_type({v.GetString(), v.GetStringLength()})) return *t;
  throw api_error(status::invalid_argument, "Type must be one of text, map, array, xml.");
}

new_value parse_value(folio::record_type type, const rapidjson::Value& v) {
  new_value out{type, {}, {}, {}, {}};
  switch (type) {
    case folio::record_type::text:
      if (!v.IsString()) throw api_error(status::invalid_argument, "Data must be a string for type text.");
      out.text = std::string_view(v.GetString(), v.GetStringLength());
      break;
    case folio::record_type::map:
      if (!v.IsObject()) throw api_error(status::invalid_argument, "Data must be an object for type map.");
      for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) out.map.emplace(std::string(m->name.GetString(), m->name.GetStringLength()), canonical_json(m->value));
      break;
    case folio::record_type::array:
      if (!v.IsArray()) throw api_error(status::invalid_argument, "Data must be an array of objects for type array.");
      for (const auto& e : v.GetArray()) {
        if (!e.IsObject()) throw api_error(status::invalid_argument, "Data must be an array of objects for type array.");
        out.array.push_back(canonical_json(e));
      }
      break;
    case folio::record_type::xml: {
      if (!v.IsString()) throw api_error(status::invalid_argument, "Data must be a string of XML markup for type xml.");
      const folio::markup::parse_result pr = folio::markup::parse({v.GetString(), v.GetStringLength()}, out.xml);
      if (!pr) {
        // The engine's reasons are phrases ("not well-formed: ...", "invalid UTF-8"); here one starts a sentence.
        std::string why = pr.description();
        if (why[0] >= 'a' && why[0] <= 'z') why[0] = static_cast<char>(why[0] - 'a' + 'A');
        throw api_error(status::invalid_argument, "Data must be a string of XML markup for type xml. " + why + ".");
      }
      break;
    }
  }
  return out;
}

std::string json_value_rule(folio::record_type type, std::string_view value) {
  const std::string_view what = type == folio::record_type::array ? "array item" : "map value";
  try {
    if (type == folio::record_type::array && !parse_json(value, what).IsObject()) return std::string(what) + " is not a JSON object";
    if (type == folio::record_type::map) parse_json(value, what);
    return {};
  } catch (const api_error& e) {
    std::string why = e.message.ends_with('.') ? e.message.substr(0, e.message.size() - 1) : e.message;
    return why.find(what) != std::string::npos ? why : std::string(what) + ": " + why;
  }
}

folio::local_change replace(folio::document& d, const new_value& v) {
  switch (v.type) {
    case folio::record_type::text: return d.replace_text(v.text);
    case folio::record_type::map: return d.replace_map(v.map);
    case folio::record_type::array: return d.replace_array(v.array);
    case folio::record_type::xml: break;
  }
  return d.replace_xml(v.xml);
}

new_value value_of_document(const folio::document& d, std::string& text) {
  new_value out{d.type(), {}, {}, {}, {}};
  switch (d.type()) {
    case folio::record_type::text:
      text = d.text();
      out.text = text;
      break;
    case folio::record_type::map: out.map = d.map(); break;
    case folio::record_type::array: out.array = d.array(); break;
    case folio::record_type::xml: out.xml = folio::markup::flat_fragment::from(d.xml_fragment()); break;
  }
  return out;
}

std::string value_json(const folio::document& d) {
  rapidjson::StringBuffer sb;
  json_writer w(sb);
  switch (d.type()) {
    case folio::record_type::text:
      write_string(w, d.text());
      break;
    case folio::record_type::map:
      w.StartObject();
      for (const auto& [key, value] : d.map()) {
        w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
        w.RawValue(value.data(), value.size(), rapidjson::kObjectType);
      }
      w.EndObject();
      break;
    case folio::record_type::array:
      w.StartArray();
      for (const std::string& value : d.array()) w.RawValue(value.data(), value.size(), rapidjson::kObjectType);
      w.EndArray();
      break;
    case folio::record_type::xml:
      write_string(w, d.xml());
      break;
  }
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace folio::service
