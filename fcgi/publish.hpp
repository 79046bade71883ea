// fcgi/publish.hpp — live push (DESIGN.md §6): the channel a record's changes go to, and publishing a
// committed change to it through nginx's Nchan publisher location.
//
// A channel id is hex(HMAC-SHA256(secret, keyId "\n" organizationId "\n" documentId "\n" editorId)):
// without the secret it cannot be derived from the ids, and the key id keeps tenants apart. nginx
// computes the same id for a subscriber (nginx/folio.conf, set_hmac_sha256 over the decoded query)
// and the authorizer checks that both agree. The publisher location listens on a unix socket only
// (nginx/standalone.conf.in), so nothing off the host can publish.
//
// A publish is a POST with a short timeout after the change is committed; a failure is logged and
// counted, never reported to the writer: clients catch up through sync.
// Thread-safety: `publish` may run on many threads at once (one libcurl handle per thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio::service {

struct live_config {
  std::string channel_secret;  ///< shared with nginx; empty: live push is off (subscribe answers 503)
  std::string publish_socket;  ///< nginx's publisher listener (unix socket); empty: nothing is published
};

/// The channel of one record.
std::string channel_id(std::string_view secret, std::string_view tenant, std::string_view org, std::string_view doc, std::string_view editor);

class publisher {
 public:
  explicit publisher(live_config c) : config_(std::move(c)) {}
  const live_config& settings() const noexcept { return config_; }

  /// POSTs `message` (JSON) to `channel`. False, with a log line, when nginx does not take it.
  bool publish(const std::string& channel, const std::string& message);

  std::uint64_t published() const noexcept { return published_.load(); }
  std::uint64_t failures() const noexcept { return failures_.load(); }

 private:
  live_config config_;
  std::atomic<std::uint64_t> published_{0}, failures_{0};
};

}  // namespace folio::service
