#include "wire/base64.hpp"

#include <cstdint>

namespace folio::service {

namespace {

constexpr char standard[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The 6-bit value of a URL-safe base64 character, or -1.
int url_sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve(4 * ((bytes.size() + 2) / 3));
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = std::uint32_t(static_cast<unsigned char>(bytes[i])) << 16 | std::uint32_t(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                            static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += standard[(v >> shift) & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    std::uint32_t v = std::uint32_t(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) v |= std::uint32_t(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += standard[(v >> 18) & 63];
    out += standard[(v >> 12) & 63];
    out += rest == 2 ? standard[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 == 0 && text.ends_with("==")) text.remove_suffix(2);
  else if (text.size() % 4 == 0 && text.ends_with('=')) text.remove_suffix(1);
  std::string url(text);
  for (char& c : url) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return base64url_decode(url);
}

std::string base64url_encode(std::string_view bytes) {
  std::string out = base64_encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const int v = url_sextet(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6 | static_cast<std::uint32_t>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;  // the bits of a last partial group beyond its bytes are ignored, as OpenSSL's codec did
}

}  // namespace folio::service
