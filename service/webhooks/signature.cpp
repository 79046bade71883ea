#include "webhooks/signature.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "wire/base64.hpp"

namespace folio::service {

namespace {

constexpr std::string_view secret_prefix = "whsec_";

std::string random_bytes(std::size_t n) {
  std::string s(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) != 1) throw std::runtime_error("no randomness");
  return s;
}

}  // namespace

std::string new_webhook_secret() { return std::string(secret_prefix).append(base64_encode(random_bytes(24))); }

std::string new_message_id() { return std::string("msg_").append(base64url_encode(random_bytes(20))); }

std::string webhook_signature(std::string_view secret, std::string_view id, std::int64_t timestamp, std::string_view body) {
  if (secret.substr(0, secret_prefix.size()) != secret_prefix) throw std::invalid_argument("a webhook secret starts with whsec_");
  const std::optional<std::string> key = base64_decode(secret.substr(secret_prefix.size()));
  if (!key || key->empty()) throw std::invalid_argument("a webhook secret is base64 after whsec_");
  std::string signed_content;
  const std::string ts = std::to_string(timestamp);
  signed_content.reserve(id.size() + ts.size() + body.size() + 2);
  signed_content.append(id).append(".").append(ts).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (!HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()), reinterpret_cast<const unsigned char*>(signed_content.data()), signed_content.size(), mac,
            &mac_len))
    throw std::runtime_error("HMAC-SHA256 failed");
  return std::string("v1,").append(base64_encode(std::string_view(reinterpret_cast<const char*>(mac), mac_len)));
}

}  // namespace folio::service
