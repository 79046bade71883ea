// service/crdt/publish/nchan.hpp — the channel a record's changes go to, and the two requests the
// responder makes of nginx's Nchan publisher location: POST a message to a channel, DELETE a channel.
//
// A channel id is hex(HMAC-SHA256(secret, keyId "\n" organizationId "\n" documentId "\n" editorId)):
// without the secret it cannot be derived from the ids, and the key id keeps tenants apart. nginx
// computes the same id for a subscriber (nginx/folio.conf, set_hmac_sha256 over the decoded query)
// and the authorizer checks that both agree. The publisher location listens on a unix socket only
// (nginx/standalone.conf.in), so nothing off the host can publish.
// Each request has a short timeout (1 s to connect, 2 s in all) and goes on the calling thread's own
// libcurl handle, kept, so its connection to nginx is reused from one request to the next.
// Thread-safety: send() and memory_full() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio::service {

/// The channel of one record.
std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor);

class nchan_endpoint {
 public:
  /// `socket`: the publisher location's unix socket; empty: live push is off and nothing is sent.
  explicit nchan_endpoint(std::string socket) : socket_(std::move(socket)) {}
  bool enabled() const noexcept { return !socket_.empty(); }
  /// One POST of `message` to `channel` (or, with `message` null, a DELETE of the channel); the
  /// libcurl or HTTP failure as text, "" on success (a DELETE of a channel Nchan does not hold, 404,
  /// succeeds).
  std::string send(const std::string& channel, const std::string* message);
  /// Whether nginx refused a request for lack of shared memory (HTTP 507) in the last memory_full_hold.
  bool memory_full() const;
  static constexpr std::chrono::seconds memory_full_hold{5};

 private:
  std::string socket_;
  std::atomic<std::int64_t> memory_full_until_ms_{0};  ///< steady clock, ms: memory_full() until then
};

}  // namespace folio::service
