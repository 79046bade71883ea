// service/wire/base64.hpp — base64 over OpenSSL's codec (EVP_EncodeBlock/EVP_DecodeBlock), for binary values carried in JSON strings: URL-safe
// without padding (RFC 4648 §5) for opaque tokens; the standard alphabet with padding (§4) for CRDT
// updates and version vectors, read leniently (either alphabet, padding optional) since clients use
// whichever their platform has. Thread-safety: free functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace folio::service {

std::string base64url_encode(std::string_view bytes);
/// nullopt unless `text` is URL-safe base64 without padding (and without whitespace).
std::optional<std::string> base64url_decode(std::string_view text);

std::string base64_encode(std::string_view bytes);
/// nullopt unless `text` is base64 in either alphabet, padded or not (no whitespace).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace folio::service
