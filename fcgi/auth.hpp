// fcgi/auth.hpp — API keys (tenants) and tokens (DESIGN.md §3).
//
// A key is "fk_<id>_<secret>", a token "ft_<id>_<secret>" (hex). Only the id, a random salt and
// SHA-256(salt || secret) are stored; checking recomputes the hash and compares in constant time
// (OpenSSL's CRYPTO_memcmp), doing the same work whether or not the id exists. A token belongs to one
// key, names a subject (the default lastUpdatedBy), may be read-only and may expire.
// Thread-safety: functions over a caller's `database`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store.hpp"

namespace folio::service {

struct principal {
  std::string tenant;   ///< the API key's id: every row of this caller's data is keyed by it
  std::string subject;  ///< the token's subject name
  bool read_only = false;
};

/// The caller, if both the key and the token are valid, live, unexpired and belong together.
std::optional<principal> authenticate(database& db, std::string_view api_key, std::string_view token, const std::string& now);

/// Creates a key named `name`; returns the full key (shown once).
std::string create_key(database& db, const std::string& name, const std::string& now);
/// Creates a token for key `key_id`; returns the full token (shown once). Throws std::runtime_error for
/// an unknown or revoked key.
std::string create_token(database& db, const std::string& key_id, const std::string& subject, bool read_only,
                         const std::optional<std::string>& expires_at, const std::string& now);
bool revoke_key(database& db, const std::string& key_id, const std::string& now);
bool revoke_token(database& db, const std::string& token_id, const std::string& now);

struct credential_info {
  std::string kind, id, name, created_at;  ///< kind "key" or "token"; name = key name or token subject
  std::string key_id;                      ///< tokens: their key
  bool read_only = false;
  std::optional<std::string> expires_at, revoked_at;
};
std::vector<credential_info> list_credentials(database& db);

/// The id part of a full key or token ("fk_<id>_<secret>"), or empty if malformed.
std::string credential_id(std::string_view full, std::string_view prefix);

}  // namespace folio::service
