// POST /v2/auth/token (docs/API.md, "POST /v2/auth/token"): an application's backend, with its API key and
// auth token, mints a client token for one document (and editor) of its tenant, one user and one
// access level (client_token.hpp). Nothing is written to the database: the token is checked by its
// signature and the set of revoked API keys (server.hpp). A read-only auth token mints read tokens only, and no client token
// outlives the auth token that minted it. `data` holds only the fields of the contract, none of them
// null (check_token_fields). The token names its tenant, the minting API key: once that key is revoked
// the token is refused (server::api_key_revoked).
#include <algorithm>
#include <iterator>
#include <string_view>

#include "platform/auth_handlers.hpp"
#include "platform/client_token.hpp"
#include "platform/clock.hpp"
#include "platform/fields.hpp"
#include "platform/server.hpp"
#include "wire/json.hpp"

namespace folio::service {

namespace {

/// The fields POST /v2/auth/token takes. Anything else in `data`, and null for any field, is refused: a
/// misspelt or null editorId read as absent would mint a token for every editor of the document.
constexpr std::string_view token_fields[] = {"organizationId", "documentId", "editorId", "userId", "access", "expiresInSeconds"};

/// 400 INVALID_ARGUMENT for the first member of `data` that is not one of token_fields, or the first that is null.
/// Linear in the members.
void check_token_fields(const rapidjson::Value& data) {
  check_known_fields(data, token_fields, "a client token takes organizationId, documentId, editorId, userId, access and expiresInSeconds");
  for (auto m = data.MemberBegin(); m != data.MemberEnd(); ++m) {
    const std::string_view name(m->name.GetString(), m->name.GetStringLength());
    if (m->value.IsNull())
      throw api_error(status::invalid_argument, name == "editorId" ? std::string("editorId must not be null; leave it out for a token of every editor of the document.")
                                                                   : std::string(name) + " must not be null.");
  }
}

std::string auth_token(context& c) {
  check_token_fields(c.data);
  client_claims t;
  t.tenant = c.who.tenant;
  t.org = required_id(c.data, "organizationId", "Organization ID is required");
  t.doc = required_id(c.data, "documentId", "Document ID is required");
  t.editor = optional_id(c.data, "editorId");
  t.user = required_id(c.data, "userId", "userId is required.");
  const rapidjson::Value* access = field_value(c.data, "access");
  if (!access) throw api_error(status::invalid_argument, "access is required.");
  const std::string_view level = access->IsString() ? std::string_view(access->GetString(), access->GetStringLength()) : std::string_view();
  if (level != "read" && level != "write") throw api_error(status::invalid_argument, "access must be \"read\" or \"write\".");
  t.write = level == "write";
  std::int64_t seconds = 3600;
  if (const rapidjson::Value* e = field_value(c.data, "expiresInSeconds")) {
    if (!e->IsInt64() || e->GetInt64() < 1 || e->GetInt64() > max_client_token_seconds)
      throw api_error(status::invalid_argument, "expiresInSeconds must be a whole number from 1 to 86400.");
    seconds = e->GetInt64();
  }
  if (t.write && c.who.read_only) throw api_error(status::permission_denied, "This token is read-only; it can mint read client tokens only.");
  const std::shared_ptr<const key_ring> ring = c.svc.client_keys();
  if (!ring) throw api_error(status::unavailable, "Client tokens are not configured on this server.");
  // Whole seconds, never more than asked for (at most 1 s less), and never past the minter's expiry.
  // The responder trusts a checked credential for up to 2 s (server.hpp, auth_cache_), so the minter may have expired
  // since, or its API key been revoked (which this responder sees within revocation_refresh): then it is
  // refused as an expired auth token is, rather than minting a dead token.
  std::optional<std::int64_t> minter;
  if (c.who.expires_at) minter = timestamp_ms(*c.who.expires_at);
  const std::optional<std::int64_t> expiry = client_token_expiry(now_unix_ms(), seconds, minter);
  if (!expiry || c.svc.api_key_revoked(c.db, c.who.tenant)) throw api_error(status::unauthenticated, "Missing or invalid API key or auth token.");
  const std::int64_t expires = t.expires = *expiry;
  const std::string token = sign_client_token(t, ring->signer());
  return success_body("Client token created.", [&](json_writer& w) {
    w.StartObject();
    write_member(w, "token", token);
    write_member(w, "expiresAt", iso_time(expires * 1000));
    w.EndObject();
  });
}

}  // namespace

void register_auth_routes(route_table& routes) {
  // A read-only token mints read client tokens only (the handler checks).
  routes.add({"/v2/auth/token", auth_token, false});
}

}  // namespace folio::service
