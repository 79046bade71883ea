#include "fields.hpp"


namespace folio::service {

namespace {
const rapidjson::Value* member(const rapidjson::Value& data, const char* field) {
  auto it = data.FindMember(field);
  return it == data.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}
std::string as_string(const rapidjson::Value& v) { return std::string(v.GetString(), v.GetStringLength()); }
}  // namespace

void check_id(const std::string& value, const std::string& what) {
  if (value.empty()) throw api_error(status::invalid_argument, what + " must not be empty.");
  if (value.size() > max_id_bytes) throw api_error(status::invalid_argument, what + " must be at most 256 bytes.");
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f) throw api_error(status::invalid_argument, what + " must not contain control characters.");
  // UTF-8 validity is guaranteed by the JSON parser (it validates encoding); C1 controls U+0080-U+009F:
  for (std::size_t i = 0; i + 1 < value.size(); ++i)
    if (static_cast<unsigned char>(value[i]) == 0xC2 && static_cast<unsigned char>(value[i + 1]) < 0xA0)
      throw api_error(status::invalid_argument, what + " must not contain control characters.");
}

std::string required_id(const rapidjson::Value& data, const char* field, const char* missing_message) {
  const rapidjson::Value* v = member(data, field);
  if (!v || (v->IsString() && v->GetStringLength() == 0)) throw api_error(status::invalid_argument, missing_message);
  if (!v->IsString()) throw api_error(status::invalid_argument, std::string(field) + " must be a string.");
  std::string s = as_string(*v);
  check_id(s, field);
  return s;
}

std::optional<std::string> optional_id(const rapidjson::Value& data, const char* field) {
  const rapidjson::Value* v = member(data, field);
  if (!v) return std::nullopt;
  if (!v->IsString()) throw api_error(status::invalid_argument, std::string(field) + " must be a string.");
  std::string s = as_string(*v);
  check_id(s, field);
  return s;
}

std::vector<std::string> id_list(const rapidjson::Value& data, const char* field) {
  std::vector<std::string> out;
  const rapidjson::Value* v = member(data, field);
  if (!v) return out;
  if (!v->IsArray()) throw api_error(status::invalid_argument, std::string(field) + " must be an array of strings.");
  if (v->Size() > max_filter_ids) throw api_error(status::invalid_argument, std::string(field) + " may hold at most 1000 ids.");
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    const rapidjson::Value& e = (*v)[i];
    const std::string what = std::string(field) + "[" + std::to_string(i) + "]";
    if (!e.IsString()) throw api_error(status::invalid_argument, what + " must be a string.");
    out.push_back(as_string(e));
    check_id(out.back(), what);
  }
  return out;
}

}  // namespace folio::service
