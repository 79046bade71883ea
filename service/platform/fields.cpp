#include "platform/fields.hpp"

#include <algorithm>
#include <ctime>


namespace folio::service {

namespace {
std::string as_string(const rapidjson::Value& v) { return std::string(v.GetString(), v.GetStringLength()); }
int digits(std::string_view s, std::size_t at, std::size_t n) {
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

const rapidjson::Value* field_value(const rapidjson::Value& data, const char* field) {
  auto it = data.FindMember(field);
  return it == data.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

bool is_timestamp(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS.mmmZ
  if (s.size() != 24 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z') return false;
  const int y = digits(s, 0, 4), mo = digits(s, 5, 2), d = digits(s, 8, 2), h = digits(s, 11, 2), mi = digits(s, 14, 2), sec = digits(s, 17, 2),
            ms = digits(s, 20, 3);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || ms < 0) return false;
  static constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return d <= days[mo - 1] + (mo == 2 && leap ? 1 : 0);
}

std::optional<std::int64_t> timestamp_ms(std::string_view s) {
  if (!is_timestamp(s)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = digits(s, 0, 4) - 1900, tm.tm_mon = digits(s, 5, 2) - 1, tm.tm_mday = digits(s, 8, 2);
  tm.tm_hour = digits(s, 11, 2), tm.tm_min = digits(s, 14, 2), tm.tm_sec = digits(s, 17, 2);
  return std::int64_t(timegm(&tm)) * 1000 + digits(s, 20, 3);
}

std::optional<std::string> optional_timestamp(const rapidjson::Value& data, const char* field, const std::string& what) {
  const rapidjson::Value* v = field_value(data, field);
  if (!v) return std::nullopt;
  if (!v->IsString() || !is_timestamp({v->GetString(), v->GetStringLength()}))
    throw api_error(status::invalid_argument, what + " must be an ISO 8601 UTC timestamp with milliseconds, like 2025-01-20T10:30:00.000Z.");
  return std::string(v->GetString(), v->GetStringLength());
}

const char* id_problem(std::string_view value) noexcept {
  if (value.empty()) return "must not be empty.";
  if (value.size() > max_id_bytes) return "must be at most 256 bytes.";
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f) return "must not contain control characters.";
  // UTF-8 validity: ids from a JSON body are Unicode already (parse_json); a query string's are checked
  // where it is decoded (platform/nginx_query.cpp). C1 controls U+0080-U+009F:
  for (std::size_t i = 0; i + 1 < value.size(); ++i)
    if (static_cast<unsigned char>(value[i]) == 0xC2 && static_cast<unsigned char>(value[i + 1]) < 0xA0) return "must not contain control characters.";
  return nullptr;
}

void check_id(const std::string& value, const std::string& what) {
  if (const char* problem = id_problem(value)) throw api_error(status::invalid_argument, what + " " + problem);
}

std::string required_id(const rapidjson::Value& data, const char* field, const char* missing_message) {
  const rapidjson::Value* v = field_value(data, field);
  if (!v || (v->IsString() && v->GetStringLength() == 0)) throw api_error(status::invalid_argument, missing_message);
  if (!v->IsString()) throw api_error(status::invalid_argument, std::string(field) + " must be a string.");
  std::string s = as_string(*v);
  check_id(s, field);
  return s;
}

std::optional<std::string> optional_id(const rapidjson::Value& data, const char* field) {
  const rapidjson::Value* v = field_value(data, field);
  if (!v) return std::nullopt;
  if (!v->IsString()) throw api_error(status::invalid_argument, std::string(field) + " must be a string.");
  std::string s = as_string(*v);
  check_id(s, field);
  return s;
}

namespace {

std::vector<std::string> ids_of(const rapidjson::Value& v, const char* field) {
  std::vector<std::string> out;
  if (!v.IsArray()) throw api_error(status::invalid_argument, std::string(field) + " must be an array of strings.");
  if (v.Size() > max_filter_ids) throw api_error(status::invalid_argument, std::string(field) + " may hold at most 1000 ids.");
  out.reserve(v.Size());
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const rapidjson::Value& e = v[i];
    // The id's name in a message ("locationIds[3]"), made only for a message: a list of 1,000 ids made
    // 1,000 strings that no answer used.
    auto what = [&] { return std::string(field) + "[" + std::to_string(i) + "]"; };
    if (!e.IsString()) throw api_error(status::invalid_argument, what() + " must be a string.");
    out.push_back(as_string(e));
    if (const char* problem = id_problem(out.back())) throw api_error(status::invalid_argument, what() + " " + problem);
  }
  return out;
}

}  // namespace

std::vector<std::string> id_list(const rapidjson::Value& data, const char* field) {
  const rapidjson::Value* v = field_value(data, field);
  return v ? ids_of(*v, field) : std::vector<std::string>();
}

std::optional<std::vector<std::string>> selected_ids(const rapidjson::Value& data, const char* field) {
  const rapidjson::Value* v = selection(data, field);
  if (!v) return std::nullopt;
  return ids_of(*v, field);
}

const rapidjson::Value* selection(const rapidjson::Value& data, const char* field) {
  const auto m = data.FindMember(field);
  if (m == data.MemberEnd()) return nullptr;
  if (m->value.IsNull())
    throw api_error(status::invalid_argument, std::string(field) + " is null; send a list (an empty one selects nothing), or leave the field out.");
  return &m->value;
}

std::int64_t page_size(const rapidjson::Value& data, std::int64_t default_size, std::int64_t max_size) {
  const rapidjson::Value* v = field_value(data, "pageSize");
  if (!v) return default_size;
  if (!v->IsInt64() || v->GetInt64() < 1 || v->GetInt64() > max_size)
    throw api_error(status::invalid_argument, "pageSize must be a whole number from 1 to " + std::to_string(max_size) + ".");
  return v->GetInt64();
}

std::string shown_name(std::string_view name) {
  std::size_t n = std::min<std::size_t>(name.size(), 64);
  if (n < name.size())
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
  std::string out(name.substr(0, n));
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '"' || ch == '\\') ch = '?';
  return out;
}

void check_known_fields(const rapidjson::Value& data, std::span<const std::string_view> known, std::string_view takes) {
  for (auto m = data.MemberBegin(); m != data.MemberEnd(); ++m) {
    const std::string_view name(m->name.GetString(), m->name.GetStringLength());
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw api_error(status::invalid_argument, "Unknown field \"" + shown_name(name) + "\"; " + std::string(takes) + ".");
  }
}

}  // namespace folio::service
