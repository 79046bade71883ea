// service/platform/client_token.hpp — scoped client tokens (docs/API.md, "Client tokens"; format and rotation in docs/SECURITY.md
// "Client tokens").
//
// A client token lets an end-user client (a browser) open one document — and, when it names one, one
// editor — with `read` or `write` access, as one user, until it expires. The application's backend
// mints it (POST /v2/auth/token) with its API key; the client never sees the key. It is
//
//   fct1.<tenant>.<key id>.<claims>.<mac>
//
// `fct1` is the format and its version; <tenant> the API key id (16 lowercase hex digits, in clear so
// that nginx can compute a subscriber's channel id, nginx/folio-http.conf); <key id> the signing key's
// id; <claims> base64url (no padding) of "org\ndoc\neditor\nuser\naccess\nexpires" — ids follow the API's
// id rules, so they hold no control character and "\n" cannot occur inside one; editor is "" for every
// editor of the document; access "r" or "w"; expires whole seconds since the epoch in decimal — and
// <mac> base64url of HMAC-SHA256(key secret, everything before ".<mac>"). Every field and the version
// are under the MAC. Checking needs no database: the key ring is in memory (the server also refuses a
// token whose tenant's API key is revoked: server::api_key_revoked); the MAC is compared as
// text, in constant time (CRYPTO_memcmp), so a token has exactly one accepted spelling.
//
// Key ring: a file of lines "<id> <secret hex> [verify-only]" ('#' comments, blank lines ignored).
// Every key verifies; the last key not marked verify-only signs. Rotation without downtime: append a
// key (verify-only first when several responders share the file, until each has reloaded), reload
// (SIGHUP), later remove the old key once the tokens it signed have expired.
//
// Cost: signing and checking are one HMAC over at most ~1.5 KB; checking is linear in the token's
// length and bounded by max_client_token_bytes. Thread-safety: a key_ring is immutable once built;
// the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::service {

/// Longer tokens are malformed without further work (a real one is under 1.5 KB).
inline constexpr std::size_t max_client_token_bytes = 4096;
/// The longest lifetime a client token can be given (POST /v2/auth/token's expiresInSeconds).
inline constexpr std::int64_t max_client_token_seconds = 86400;

struct signing_key {
  std::string id;      ///< [A-Za-z0-9_-]{1,32}
  std::string secret;  ///< at least 32 bytes
  bool signs = true;   ///< false: "verify-only"
};

class key_ring {
 public:
  /// The keys of a key file's text; std::runtime_error naming the line for a malformed one, a repeated
  /// id, or no key that signs.
  static key_ring parse(std::string_view text);
  /// parse() of the file at `path`; also refuses a file other users may read or write.
  static key_ring load(const std::string& path);

  const signing_key& signer() const { return keys_[signer_]; }
  /// The key with this id, or nullptr.
  const signing_key* find(std::string_view id) const;
  std::size_t size() const { return keys_.size(); }

 private:
  std::vector<signing_key> keys_;
  std::size_t signer_ = 0;
};

struct client_claims {
  std::string tenant, org, doc;
  std::optional<std::string> editor;  ///< absent: every editor of the document
  std::string user;                   ///< lastUpdatedBy of the changes the token makes
  bool write = false;
  std::int64_t expires = 0;  ///< seconds since the epoch; the token is refused from this second on
};

/// The claims part before base64url: "org\ndoc\neditor\nuser\naccess\nexpires".
std::string encode_claims(const client_claims& c);
/// "fct1.<tenant>.<key id>.<base64url(claims_text)>.<mac>" signed with `key`.
std::string seal_client_token(std::string_view tenant, const signing_key& key, std::string_view claims_text);
/// seal_client_token(c.tenant, key, encode_claims(c)).
std::string sign_client_token(const client_claims& c, const signing_key& key);

enum class token_problem { none, malformed, unknown_key, bad_signature, expired };

struct token_check {
  token_problem problem = token_problem::malformed;
  client_claims claims;  ///< filled when the signature verified (problem none or expired)
  std::string key_id;    ///< the signing key's id, likewise
};

/// The expiry (seconds since the epoch) of a token minted at `now_ms` for `seconds` by a credential that
/// expires at `minter_expires_ms` (absent: never): now plus `seconds` in whole seconds (rounded down, so
/// never later than asked), never past the minter's expiry (rounded down). nullopt when that is already
/// past — the minter expired, or expires within the current second — so that no token is minted that
/// would be refused from the start.
std::optional<std::int64_t> client_token_expiry(std::int64_t now_ms, std::int64_t seconds, std::optional<std::int64_t> minter_expires_ms);

/// Checks `token` against `ring` at `now_ms` (milliseconds since the epoch): its form, its key, its
/// MAC, then its claims and expiry. Never throws for any input.
token_check verify_client_token(std::string_view token, const key_ring& ring, std::int64_t now_ms);

}  // namespace folio::service
