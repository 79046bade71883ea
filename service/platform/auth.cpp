#include "platform/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "wire/status.hpp"

namespace folio::service {

namespace {

constexpr std::size_t id_hex = 16, secret_hex = 48, salt_bytes = 16;

std::string hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += digits[p[i] >> 4], s += digits[p[i] & 15];
  return s;
}
std::string random_bytes(std::size_t n) {
  std::string s(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) != 1) throw std::runtime_error("no randomness");
  return s;
}
std::string random_hex(std::size_t chars) {
  const std::string b = random_bytes(chars / 2);
  return hex(reinterpret_cast<const unsigned char*>(b.data()), b.size());
}
std::string digest(std::string_view salt, std::string_view secret) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 && EVP_DigestUpdate(ctx, salt.data(), salt.size()) == 1 &&
                  EVP_DigestUpdate(ctx, secret.data(), secret.size()) == 1 && EVP_DigestFinal_ex(ctx, md, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw std::runtime_error("SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(md), len);
}
bool is_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
/// Splits "<prefix><id>_<secret>"; false if malformed.
bool split(std::string_view full, std::string_view prefix, std::string_view& id, std::string_view& secret) {
  if (full.size() != prefix.size() + id_hex + 1 + secret_hex || full.substr(0, prefix.size()) != prefix || full[prefix.size() + id_hex] != '_')
    return false;
  id = full.substr(prefix.size(), id_hex);
  secret = full.substr(prefix.size() + id_hex + 1);
  return is_hex(id) && is_hex(secret);
}
/// Constant-time check of `secret` against a stored salt and hash (or against a dummy when absent).
bool matches(std::string_view secret, const std::optional<std::pair<std::string, std::string>>& stored) {
  static const std::string dummy_salt(salt_bytes, 'x'), dummy_hash(32, 'y');
  const std::string& salt = stored ? stored->first : dummy_salt;
  const std::string& hash = stored ? stored->second : dummy_hash;
  const std::string got = digest(salt, secret);
  return got.size() == hash.size() && CRYPTO_memcmp(got.data(), hash.data(), got.size()) == 0 && stored.has_value();
}

}  // namespace

std::string credential_id(std::string_view full, std::string_view prefix) {
  std::string_view id, secret;
  return split(full, prefix, id, secret) ? std::string(id) : std::string();
}

std::optional<principal> authenticate(database& db, std::string_view api_key, std::string_view token, const std::string& now) {
  std::string_view key_id, key_secret, token_id, token_secret;
  const bool key_ok = split(api_key, "fk_", key_id, key_secret);
  const bool token_ok = split(token, "ft_", token_id, token_secret);
  std::optional<std::pair<std::string, std::string>> key_hash, token_hash;
  principal p;
  bool live = key_ok && token_ok;
  if (key_ok) {
    query q = db.sql("SELECT salt, hash, revoked_at FROM api_keys WHERE key_id=?");
    q.bind(1, key_id);
    if (q.step()) {
      key_hash.emplace(q.blob(0), q.blob(1));
      if (q.text_opt(2)) live = false;
    }
  }
  if (token_ok) {
    query q = db.sql("SELECT salt, hash, key_id, subject, read_only, expires_at, revoked_at FROM tokens WHERE token_id=?");
    q.bind(1, token_id);
    if (q.step()) {
      token_hash.emplace(q.blob(0), q.blob(1));
      p.tenant = q.text(2), p.subject = q.text(3), p.read_only = q.integer(4) != 0, p.expires_at = q.text_opt(5);
      if (q.text_opt(6) || (p.expires_at && *p.expires_at <= now) || p.tenant != key_id) live = false;
    }
  }
  // Both hashes are always computed, so timing does not tell which part was wrong.
  const bool key_match = matches(key_ok ? key_secret : std::string_view("-"), key_hash);
  const bool token_match = matches(token_ok ? token_secret : std::string_view("-"), token_hash);
  if (!(live && key_match && token_match)) return std::nullopt;
  return p;
}

void check_scope(const principal& who, const std::string& org, const std::string& doc, const std::optional<std::string>& editor) {
  if (!who.scope) return;
  const client_scope& s = *who.scope;
  if (org != s.org) throw api_error(status::permission_denied, "The client token does not cover this organizationId.");
  if (doc != s.doc) throw api_error(status::permission_denied, "The client token does not cover this documentId.");
  if (s.editor && !editor) throw api_error(status::permission_denied, "The client token covers one editor of the document; send its editorId.");
  if (s.editor && editor != s.editor) throw api_error(status::permission_denied, "The client token does not cover this editorId.");
}

std::string author(const principal& who, const std::optional<std::string>& user) {
  if (who.scope && user && *user != who.subject)
    throw api_error(status::permission_denied, "The client token acts as its own user; leave userId out or send the token's userId.");
  return user ? *user : who.subject;
}

std::string create_key(database& db, const std::string& name, const std::string& now) {
  const std::string id = random_hex(id_hex), secret = random_hex(secret_hex), salt = random_bytes(salt_bytes);
  db.write([&] {
    db.sql("INSERT INTO api_keys (key_id, name, salt, hash, created_at) VALUES (?,?,?,?,?)")
        .bind(1, id).bind(2, name).bind_blob(3, salt).bind_blob(4, digest(salt, secret)).bind(5, now)
        .step();
  });
  return "fk_" + id + "_" + secret;
}

std::string create_token(database& db, const std::string& key_id, const std::string& subject, bool read_only,
                         const std::optional<std::string>& expires_at, const std::string& now) {
  const std::string id = random_hex(id_hex), secret = random_hex(secret_hex), salt = random_bytes(salt_bytes);
  db.write([&] {
    query q = db.sql("SELECT revoked_at FROM api_keys WHERE key_id=?");
    q.bind(1, key_id);
    if (!q.step()) throw std::runtime_error("no key with id " + key_id);
    if (q.text_opt(0)) throw std::runtime_error("key " + key_id + " is revoked");
    db.sql("INSERT INTO tokens (token_id, key_id, subject, read_only, expires_at, salt, hash, created_at) VALUES (?,?,?,?,?,?,?,?)")
        .bind(1, id).bind(2, key_id).bind(3, subject).bind(4, std::int64_t(read_only)).bind_opt(5, expires_at).bind_blob(6, salt)
        .bind_blob(7, digest(salt, secret)).bind(8, now)
        .step();
  });
  return "ft_" + id + "_" + secret;
}

bool revoke_key(database& db, const std::string& key_id, const std::string& now) {
  return db.write([&] {
    db.sql("UPDATE api_keys SET revoked_at=? WHERE key_id=? AND revoked_at IS NULL").bind(1, now).bind(2, key_id).step();
    return db.changes() > 0;
  });
}

bool revoke_token(database& db, const std::string& token_id, const std::string& now) {
  return db.write([&] {
    db.sql("UPDATE tokens SET revoked_at=? WHERE token_id=? AND revoked_at IS NULL").bind(1, now).bind(2, token_id).step();
    return db.changes() > 0;
  });
}

std::vector<credential_info> list_credentials(database& db) {
  std::vector<credential_info> out;
  {
    query q = db.sql("SELECT key_id, name, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id");
    while (q.step()) {
      credential_info c;
      c.kind = "key", c.id = q.text(0), c.name = q.text(1), c.created_at = q.text(2), c.revoked_at = q.text_opt(3), c.key_id = c.id;
      out.push_back(std::move(c));
    }
  }
  query q = db.sql("SELECT token_id, subject, created_at, revoked_at, key_id, read_only, expires_at FROM tokens ORDER BY key_id, created_at, token_id");
  while (q.step()) {
    credential_info c;
    c.kind = "token", c.id = q.text(0), c.name = q.text(1), c.created_at = q.text(2), c.revoked_at = q.text_opt(3), c.key_id = q.text(4);
    c.read_only = q.integer(5) != 0, c.expires_at = q.text_opt(6);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace folio::service
