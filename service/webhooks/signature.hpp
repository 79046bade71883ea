// service/webhooks/signature.hpp — endpoint secrets and message signatures by the Standard Webhooks
// specification (docs/WEBHOOKS.md, "Verifying a delivery"): a secret is "whsec_" + base64 of 24
// random bytes; a message's signature is "v1," + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")),
// the key being the secret's bytes (its base64 after the prefix, decoded).
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace folio::service {

/// A new secret: "whsec_" + base64 of 24 bytes from OpenSSL's generator. Throws std::runtime_error
/// when no randomness is available.
std::string new_webhook_secret();
/// "v1,<base64 signature>" of the message `id` sent at `timestamp` (seconds since the epoch) with
/// `body`, under `secret` (as new_webhook_secret makes them; std::invalid_argument otherwise).
std::string webhook_signature(std::string_view secret, std::string_view id, std::int64_t timestamp, std::string_view body);
/// A new message id: "msg_" + 27 characters of URL-safe base64 (20 random bytes).
std::string new_message_id();

}  // namespace folio::service
