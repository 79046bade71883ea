// service/platform/auth.hpp — API keys (tenants) and tokens (docs/API.md, "Tenancy and credentials").
//
// A key is "fk_<id>_<secret>", a token "ft_<id>_<secret>" (hex). Only the id, a random salt and
// SHA-256(salt || secret) are stored; checking recomputes the hash and compares in constant time
// (OpenSSL's CRYPTO_memcmp), doing the same work whether or not the id exists. A token belongs to one
// key, names a subject (the default lastUpdatedBy), may be read-only and may expire.
// A caller may also be a client token's holder (client_token.hpp): a principal with a `scope`, whose
// requests check_scope() keeps inside one document (and editor).
// Thread-safety: functions over a caller's `database`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/database.hpp"

namespace folio::service {

/// What a client token opens: one document of the tenant, and one editor of it when `editor` is set.
struct client_scope {
  std::string org, doc;
  std::optional<std::string> editor;
  std::int64_t expires = 0;  ///< the token's expiry (seconds since the epoch)
  std::string key_id;        ///< the key that signed it: open streams end when it leaves the ring (crdt/publish/token_streams.hpp)
};

struct principal {
  std::string tenant;   ///< the API key's id: every row of this caller's data is keyed by it
  std::string subject;  ///< the token's subject name; a client token's userId
  bool read_only = false;
  std::optional<std::string> expires_at;  ///< an auth token's expiry: the client tokens it mints end by then
  std::optional<client_scope> scope;      ///< set for a client token: nothing outside it is served
};

/// For a client token's holder: 403 PERMISSION_DENIED unless the record(s) named lie inside its
/// scope (`editor` nullopt: every editor of the document, which a token for one editor does not
/// open). No-op for an API key caller.
void check_scope(const principal& who, const std::string& org, const std::string& doc, const std::optional<std::string>& editor);
/// lastUpdatedBy of a change: the request's `userId` when given, else the caller's subject. A client
/// token's holder acts as the token's user only: another `userId` is 403 PERMISSION_DENIED.
std::string author(const principal& who, const std::optional<std::string>& user);

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
