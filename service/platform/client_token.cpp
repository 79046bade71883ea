#include "platform/client_token.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "wire/base64.hpp"
#include "platform/fields.hpp"

namespace folio::service {

namespace {

constexpr std::string_view version_prefix = "fct1.";
constexpr std::size_t tenant_hex = 16, max_key_id = 32, min_secret_bytes = 32;

bool is_lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
bool is_key_id(std::string_view s) {
  if (s.empty() || s.size() > max_key_id) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_')) return false;
  return true;
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string mac_text(const signing_key& key, std::string_view signed_part) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()), reinterpret_cast<const unsigned char*>(signed_part.data()),
            signed_part.size(), md, &len))
    throw std::runtime_error("HMAC-SHA256 failed");
  return base64url_encode(std::string_view(reinterpret_cast<const char*>(md), len));
}

/// An id of a token's claims: the API's id rules (fields.hpp).
bool valid_id(const std::string& s) {
  try {
    check_id(s, "id");
    return true;
  } catch (const api_error&) {
    return false;
  }
}

/// The claims of a token whose MAC verified; nullopt if they are not of the form encode_claims writes.
std::optional<client_claims> decode_claims(std::string_view tenant, std::string_view text) {
  std::string_view parts[6];
  std::size_t n = 0;
  while (true) {
    const std::size_t nl = text.find('\n');
    if (n == 6) return std::nullopt;
    parts[n++] = text.substr(0, nl);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  if (n != 6) return std::nullopt;
  client_claims c;
  c.tenant = tenant, c.org = parts[0], c.doc = parts[1], c.user = parts[3];
  if (!valid_id(c.org) || !valid_id(c.doc) || !valid_id(c.user)) return std::nullopt;
  if (!parts[2].empty()) {
    c.editor = std::string(parts[2]);
    if (!valid_id(*c.editor)) return std::nullopt;
  }
  if (parts[4] != "r" && parts[4] != "w") return std::nullopt;
  c.write = parts[4] == "w";
  const std::string_view e = parts[5];
  // Canonical decimal: no sign, no leading zero, at most 12 digits (year 33658).
  if (e.empty() || e.size() > 12 || (e.size() > 1 && e[0] == '0') || e.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), c.expires);
  if (ec != std::errc() || end != e.data() + e.size()) return std::nullopt;
  return c;
}

}  // namespace

key_ring key_ring::parse(std::string_view text) {
  key_ring ring;
  std::size_t line_no = 0;
  bool any_signer = false;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> words;
    for (std::size_t i = 0; i < line.size();) {
      if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
        ++i;
        continue;
      }
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
      words.push_back(line.substr(start, i - start));
    }
    if (words.empty()) continue;
    const std::string where = "line " + std::to_string(line_no) + ": ";
    if (words.size() > 3 || words.size() < 2 || (words.size() == 3 && words[2] != "verify-only"))
      throw std::runtime_error(where + "expected \"<id> <secret hex> [verify-only]\"");
    if (!is_key_id(words[0])) throw std::runtime_error(where + "a key id is 1-32 characters of A-Z a-z 0-9 - _");
    if (ring.find(words[0])) throw std::runtime_error(where + "key id " + std::string(words[0]) + " appears twice");
    const std::string_view hex = words[1];
    if (hex.size() % 2 != 0 || hex.size() < 2 * min_secret_bytes)
      throw std::runtime_error(where + "a secret is at least 64 hex digits (32 bytes), an even number of them");
    signing_key k;
    k.id = words[0];
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
      if (hi < 0 || lo < 0) throw std::runtime_error(where + "a secret is hex digits");
      k.secret += static_cast<char>(hi * 16 + lo);
    }
    k.signs = words.size() == 2;
    if (k.signs) ring.signer_ = ring.keys_.size(), any_signer = true;
    ring.keys_.push_back(std::move(k));
  }
  if (!any_signer) throw std::runtime_error("no key that signs (every key is verify-only, or there is none)");
  return ring;
}

key_ring key_ring::load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot read " + path);
  if (st.st_mode & (S_IRWXO)) throw std::runtime_error(path + " is readable or writable by other users; chmod o= it (0600 or 0640)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse(text.str());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

const signing_key* key_ring::find(std::string_view id) const {
  for (const signing_key& k : keys_)
    if (k.id == id) return &k;
  return nullptr;
}

std::string encode_claims(const client_claims& c) {
  return c.org + '\n' + c.doc + '\n' + c.editor.value_or("") + '\n' + c.user + '\n' + (c.write ? "w" : "r") + '\n' + std::to_string(c.expires);
}

std::string seal_client_token(std::string_view tenant, const signing_key& key, std::string_view claims_text) {
  std::string t(version_prefix);
  t.append(tenant).append(".").append(key.id).append(".").append(base64url_encode(claims_text));
  const std::string mac = mac_text(key, t);
  return t + "." + mac;
}

std::string sign_client_token(const client_claims& c, const signing_key& key) { return seal_client_token(c.tenant, key, encode_claims(c)); }

std::optional<std::int64_t> client_token_expiry(std::int64_t now_ms, std::int64_t seconds, std::optional<std::int64_t> minter_expires_ms) {
  std::int64_t expires = now_ms / 1000 + seconds;
  if (minter_expires_ms) expires = std::min(expires, *minter_expires_ms / 1000);
  // verify_client_token refuses a token from the second it names on.
  if (expires <= now_ms / 1000) return std::nullopt;
  return expires;
}

token_check verify_client_token(std::string_view token, const key_ring& ring, std::int64_t now_ms) {
  token_check out;
  if (token.size() > max_client_token_bytes || !token.starts_with(version_prefix)) return out;
  std::string_view parts[4];
  std::string_view rest = token.substr(version_prefix.size());
  for (std::size_t i = 0; i < 4; ++i) {
    const std::size_t dot = rest.find('.');
    if ((dot == std::string_view::npos) != (i == 3)) return out;
    parts[i] = rest.substr(0, dot);
    if (i < 3) rest.remove_prefix(dot + 1);
  }
  const std::string_view tenant = parts[0], key_id = parts[1], claims = parts[2], mac = parts[3];
  if (tenant.size() != tenant_hex || !is_lower_hex(tenant) || !is_key_id(key_id) || claims.empty()) return out;
  const std::optional<std::string> claims_text = base64url_decode(claims);
  if (!claims_text || mac.size() != 43 || !base64url_decode(mac)) return out;
  const signing_key* key = ring.find(key_id);
  if (!key) {
    out.problem = token_problem::unknown_key;
    return out;
  }
  const std::string_view signed_part = token.substr(0, token.size() - mac.size() - 1);
  const std::string expected = mac_text(*key, signed_part);
  if (expected.size() != mac.size() || CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) != 0) {
    out.problem = token_problem::bad_signature;
    return out;
  }
  std::optional<client_claims> c = decode_claims(tenant, *claims_text);
  if (!c) return out;  // signed by a key of ours, yet not what encode_claims writes: malformed
  out.claims = std::move(*c);
  out.key_id = key_id;
  out.problem = now_ms / 1000 >= out.claims.expires ? token_problem::expired : token_problem::none;
  return out;
}

}  // namespace folio::service
