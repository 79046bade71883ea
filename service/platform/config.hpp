// service/platform/config.hpp — the responder's settings (folio-fcgi's flags; docs/OPERATIONS.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace folio::service {

/// Live push (docs/API.md, crdt/sync and crdt/subscribe; crdt/publish/publisher.hpp).
struct live_config {
  std::string channel_secret;  ///< shared with nginx; empty: live push is off (subscribe answers 503)
  std::string publish_socket;  ///< nginx's publisher listener (unix socket); empty: nothing is published
};

/// CRDT records' history (crdt/auto_versions.hpp; docs/OPERATIONS.md, "History").
struct history_config {
  std::chrono::milliseconds quiet{std::chrono::seconds(30)};          ///< an automatic version once a record was this quiet
  std::chrono::milliseconds at_most{std::chrono::minutes(10)};        ///< or this long after its first unversioned change
  std::chrono::milliseconds keep_all{std::chrono::hours(24)};         ///< automatic versions younger than this all stay
  std::chrono::milliseconds hourly_for{std::chrono::hours(24 * 30)};  ///< then one an hour until this old, then one a day
  std::chrono::milliseconds history{std::chrono::hours(24 * 30)};     ///< change rows (baseVersion, authors of operations) kept this long
  std::chrono::milliseconds pass_every{std::chrono::seconds(5)};      ///< how often automatic versions are looked for
};

struct config {
  std::size_t max_body = std::size_t(4) << 20;     ///< bytes; also enforced by nginx
  std::size_t cache_bytes = std::size_t(256) << 20;  ///< decoded documents kept in memory
  std::size_t cache_entries = 0;  ///< records the cache holds at most; 0: one per KiB of cache_bytes (doc_cache::default_max_entries)
  std::chrono::milliseconds auth_ttl{2000};  ///< how long a checked key + token pair is trusted without the database
  /// How old the responder's list of revoked API keys may be when a client token is checked (server.hpp,
  /// api_key_revoked): older, the check reads it again first. So a client token minted by a key is refused
  /// from at most this long after the key's revocation committed.
  std::chrono::milliseconds revocation_refresh{1000};
  /// A request's time budget from when nginx sent it; below nginx's fastcgi_read_timeout (60 s), so a
  /// request nginx gave up on never commits afterwards (folio-fcgi sets request::deadline with it).
  std::chrono::milliseconds request_timeout{50000};
  history_config history;  ///< automatic versions, their thinning, the change rows' retention
  live_config live;  ///< channel secret and nginx's publisher socket (docs/API.md, crdt/sync and crdt/subscribe)
};

}  // namespace folio::service
