// fcgi/base64.hpp — URL-safe base64 without padding (RFC 4648 §5) over OpenSSL's codec, for opaque
// tokens and binary values carried in JSON strings. Thread-safety: free functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace folio::service {

std::string base64url_encode(std::string_view bytes);
/// nullopt unless `text` is URL-safe base64 without padding (and without whitespace).
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace folio::service
