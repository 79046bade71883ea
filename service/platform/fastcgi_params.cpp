#include "platform/fastcgi_params.hpp"

#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>

namespace folio::service {

request_params read_params(const char* const* envp, request& r) {
  request_params p;
  std::string script_name;
  const struct {
    std::string_view name;
    std::string* value;
  } wanted[] = {
      {"REQUEST_METHOD", &r.method},
      {"DOCUMENT_URI", &r.path},
      {"SCRIPT_NAME", &script_name},
      {"CONTENT_TYPE", &r.content_type},
      {"CONTENT_LENGTH", &p.content_length},
      {"HTTP_X_FOLIO_API_KEY", &r.api_key},
      {"HTTP_X_FOLIO_AUTH_TOKEN", &r.auth_token},
      {"HTTP_AUTHORIZATION", &r.authorization},
      {"QUERY_STRING", &r.query},
      {"FOLIO_REQUEST_ID", &r.request_id},
      {"FOLIO_REQUEST_START", &p.start},
      {"FOLIO_CHANNEL", &r.channel},
  };
  static_assert(std::size(wanted) <= 32, "`seen` has a bit for each");
  std::uint32_t seen = 0;  // bit i: wanted[i] has been read
  for (const char* const* e = envp; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    const std::string_view name(*e, static_cast<std::size_t>(eq - *e));
    for (std::size_t i = 0; i < std::size(wanted); ++i)
      if (wanted[i].name == name) {
        if (!(seen >> i & 1)) *wanted[i].value = eq + 1, seen |= std::uint32_t(1) << i;
        break;
      }
  }
  if (r.path.empty()) r.path = std::move(script_name);
  return p;
}

}  // namespace folio::service
