// service/platform/config.hpp — the responder's settings (folio-fcgi's flags; docs/OPERATIONS.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

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

/// Events and webhooks (docs/WEBHOOKS.md; docs/OPERATIONS.md, "Webhooks").
struct webhook_config {
  std::chrono::milliseconds coalesce{std::chrono::seconds(5)};       ///< a record's updates are one event once it was this quiet
  std::chrono::milliseconds coalesce_max{std::chrono::seconds(30)};  ///< or this long after the first of them
  std::size_t value_bytes = 0;  ///< crdt.record.* events carry the record's value when its JSON takes at most this (0: never)
  std::chrono::milliseconds keep{std::chrono::hours(24 * 30)};  ///< events of the feed and the delivery log are kept this long
  /// Hosts (names as written in an endpoint's URL) and address ranges (CIDR) that endpoints may reach
  /// although they are loopback, link-local, private or unique-local (webhooks/address_policy.hpp).
  std::vector<std::string> allow;
  std::size_t endpoints_per_tenant = 20;
  std::size_t queued_per_endpoint = 10000;  ///< deliveries pending per endpoint; events beyond stay in the feed only
  std::chrono::milliseconds timeout{std::chrono::seconds(15)};  ///< an attempt's whole time, connecting included
  /// The waits before the second, third, ... attempt (each with up to 10% jitter); after the last, the
  /// delivery has failed.
  std::vector<std::chrono::milliseconds> retries{std::chrono::seconds(5),  std::chrono::minutes(5), std::chrono::minutes(30), std::chrono::hours(2),
                                                 std::chrono::hours(5),    std::chrono::hours(10),  std::chrono::hours(10)};
  std::chrono::milliseconds disable_after{std::chrono::hours(24 * 5)};  ///< an endpoint failing this long is disabled
  std::chrono::milliseconds old_secret_for{std::chrono::hours(24)};     ///< a rotated-out secret still signs this long
  unsigned sends_per_endpoint = 4;  ///< attempts in flight to one endpoint at a time (1 while its last attempt timed out)
  unsigned sends_per_tenant = 8;    ///< attempts in flight to one tenant's endpoints at a time
  unsigned sends = 256;             ///< attempts in flight in this process (each a socket and a few KiB)
};

/// Presence (docs/API.md "Presence"; presence/family.hpp; docs/OPERATIONS.md "Presence").
struct presence_config {
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};  ///< a client not refreshed for this long leaves
  /// The Redis that N nodes share presence through: "unix:/path" or "host:port"; empty: this process's memory.
  std::string redis;
  std::string redis_password;         ///< AUTH sent on each connection when not empty
  std::size_t per_tenant = 10000;     ///< clients present per tenant at most (429 beyond)
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
  webhook_config webhooks;  ///< events, the feed, webhook delivery
  presence_config presence;  ///< who is present on records, shared through Redis on N nodes
  live_config live;  ///< channel secret and nginx's publisher socket (docs/API.md, crdt/sync and crdt/subscribe)
};

}  // namespace folio::service
