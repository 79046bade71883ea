#include "platform/nginx_query.hpp"

#include <cctype>

#include "platform/fields.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char l = static_cast<char>(c | 0x20);
  return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

}  // namespace

std::optional<std::string_view> nginx_arg(std::string_view query, std::string_view name) {
  while (true) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.size() > name.size() && pair[name.size()] == '=') {
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i) same = std::tolower(static_cast<unsigned char>(pair[i])) == std::tolower(static_cast<unsigned char>(name[i]));
      if (same) return pair.substr(name.size() + 1);
    }
    if (amp == std::string_view::npos) return std::nullopt;
    query.remove_prefix(amp + 1);
  }
}

std::string nginx_unescape(std::string_view v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '+') {
      out += ' ';
    } else if (v[i] != '%') {
      out += v[i];
    } else if (i + 1 < v.size()) {
      const int high = hex_digit(v[i + 1]);
      if (high < 0) {
        out += v[++i];
      } else if (i + 2 < v.size()) {
        const int low = hex_digit(v[i + 2]);
        if (low >= 0) out += static_cast<char>(high * 16 + low);
        i += 2;
      } else {
        i = v.size();
      }
    }
  }
  return out;
}

std::string query_param(std::string_view query, std::string_view name, const char* missing_message) {
  const std::optional<std::string_view> raw = nginx_arg(query, name);
  if (!raw) throw api_error(status::invalid_argument, missing_message);
  const std::string v = nginx_unescape(*raw);
  if (v.empty()) throw api_error(status::invalid_argument, missing_message);
  if (unicode_problem(v) != 0) throw api_error(status::invalid_argument, std::string(name) + " must be valid UTF-8.");
  check_id(v, std::string(name));
  return v;
}

}  // namespace folio::service
