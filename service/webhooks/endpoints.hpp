// service/webhooks/endpoints.hpp — a tenant's webhook endpoints and their delivery log, as the API
// (webhooks/handlers.cpp; docs/API.md, "Webhooks") and folio-admin ("webhooks"; docs/OPERATIONS.md)
// manage and read them. The tables are events/schema.cpp's (webhook_endpoints, webhook_deliveries,
// webhook_attempts, event_feed).
//
// Model. An endpoint is a row keyed by (tenant, id): its URL, its filters (JSON arrays of event types
// and organization ids; NULL takes all), its secret and, for old_secret_for after a rotation, the
// secret before it (both sign a delivery meanwhile: signing_secrets). Changing an endpoint writes under
// its tenant's key (endpoints_key), so the count that bounds a tenant's endpoints and the insert are one
// step on every node. Disabling an endpoint (or deleting it) ends its pending deliveries: they become
// 'failed' (and so replayable once it is enabled again) and its count of queued deliveries drops with
// them. Every statement is keyed by the tenant first: no call reaches another tenant's rows.
// Failures a caller can act on are api_error (NOT_FOUND for an endpoint or message the tenant does not
// have, RESOURCE_EXHAUSTED past the endpoints' or the queue's limit, FAILED_PRECONDITION for a disabled
// endpoint); storage failures are store_error.
// Thread-safety: free functions over a caller's `database`, each its own transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/config.hpp"
#include "storage/database.hpp"

namespace folio::service {

/// An endpoint as stored. `events` and `org_ids` are JSON arrays of strings (nullopt: every one).
struct webhook_endpoint {
  std::string id, url;
  std::optional<std::string> events, org_ids, description;
  bool enabled = true;
  std::optional<std::string> disabled_reason;
  std::string secret;
  std::optional<std::string> old_secret;
  std::optional<std::int64_t> old_secret_until;  ///< ms since the epoch: the old secret signs before this
  std::int64_t created_at = 0, updated_at = 0;   ///< ms since the epoch
  std::optional<std::int64_t> failing_since;
  std::int64_t queued = 0, dropped = 0;
};

/// The secrets that sign a delivery at `now_ms`: the endpoint's, then the one it replaced while that
/// still signs.
std::vector<std::string> signing_secrets(const webhook_endpoint& e, std::int64_t now_ms);

/// What endpoints/add takes, checked already (the handler checks the fields and the URL's policy).
struct endpoint_fields {
  std::string url;
  std::optional<std::string> events, org_ids, description;
};
/// A new endpoint's id: "ep_" + 24 hex digits (12 random bytes). Throws std::runtime_error without
/// randomness.
std::string new_endpoint_id();
/// Adds an endpoint with a new secret at `now_ms` (or a millisecond after the tenant's newest endpoint,
/// so that their creation times order them as added); returns it. RESOURCE_EXHAUSTED when the tenant has
/// cfg.endpoints_per_tenant already.
webhook_endpoint add_endpoint(database& db, const webhook_config& cfg, std::string_view tenant, const endpoint_fields& f, std::int64_t now_ms);

/// The tenant's endpoints, oldest first (then by id); `ids` non-empty: only those (ids it lacks are
/// not listed). `tenant` nullopt (folio-admin): every tenant's, by tenant. The pairs are (tenant, endpoint).
std::vector<std::pair<std::string, webhook_endpoint>> list_endpoints(database& db, const std::optional<std::string>& tenant,
                                                                    const std::vector<std::string>& ids = {});
/// One endpoint, or nullopt.
std::optional<webhook_endpoint> find_endpoint(database& db, std::string_view tenant, std::string_view id);
/// The tenant an endpoint id belongs to (folio-admin without --tenant): nullopt when none has it;
/// std::runtime_error when more than one does (endpoint ids are random; only a copied database can).
std::optional<std::string> tenant_of_endpoint(database& db, std::string_view id);

/// endpoints/update: each member set is changed (an inner nullopt: back to every type / every
/// organization / no description).
struct endpoint_update {
  std::optional<std::string> url;
  std::optional<std::optional<std::string>> events, org_ids, description;
  std::optional<bool> enabled;
};
/// Applies `u` at `now_ms` and returns the endpoint after. Enabling clears disabled_reason and
/// failing_since; disabling fails its pending deliveries. NOT_FOUND for an endpoint the tenant lacks.
webhook_endpoint update_endpoint(database& db, std::string_view tenant, std::string_view id, const endpoint_update& u, std::int64_t now_ms);
/// Deletes the endpoint and its deliveries (its attempts stay, as the log, until they are `keep` old).
/// NOT_FOUND for an endpoint the tenant lacks.
void delete_endpoint(database& db, std::string_view tenant, std::string_view id);
/// Gives the endpoint a new secret and returns it; the current one signs too until now + old_secret_for.
/// FAILED_PRECONDITION while the secret a previous rotation replaced still signs; NOT_FOUND for an
/// endpoint the tenant lacks.
std::string rotate_secret(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view id, std::int64_t now_ms);
/// endpoints/test: a webhook.ping event for this endpoint only (never in the feed), queued at `now_ms`,
/// in one write under feed_key; returns its message id. FAILED_PRECONDITION for a disabled endpoint,
/// RESOURCE_EXHAUSTED when its queue is full (nothing is written then).
std::string send_test_message(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view id, std::int64_t now_ms);

/// One attempt of the delivery log.
struct delivery_attempt {
  std::string message_id;
  std::optional<std::string> event_type;  ///< nullopt once its event is past the kept time
  std::int64_t attempt = 0, attempted_at = 0, latency_ms = 0;
  std::optional<std::int64_t> http_status;
  std::optional<std::string> error, response;
};
/// Where a page of attempts ends: the newest-first order's key of its last attempt.
struct attempt_key {
  std::int64_t attempted_at = 0;
  std::string message_id;
  std::int64_t attempt = 0;
};
/// The endpoint's attempts newest first (attempted_at, then message id and attempt, descending),
/// `limit` of them after `after` (a keyset page), only `message_id`'s when given. O(limit) rows read
/// through the table's key.
std::vector<delivery_attempt> list_attempts(database& db, std::string_view tenant, std::string_view endpoint, const std::optional<std::string>& message_id,
                                            const std::optional<attempt_key>& after, std::size_t limit);

/// How many of the endpoint's deliveries are in each state ('pending', 'succeeded', 'failed'), by state.
std::vector<std::pair<std::string, std::int64_t>> delivery_states(database& db, std::string_view tenant, std::string_view endpoint);

/// deliveries/replay of one message (an event of the tenant's feed, or a ping) the endpoint has a
/// delivery of, in any state (so one its filters took): queued again for the endpoint at `now_ms`.
/// Returns 1, or 0 when the endpoint's queue is full. NOT_FOUND for an endpoint or message the tenant
/// lacks, or a message the endpoint never had; FAILED_PRECONDITION for a disabled endpoint.
std::size_t replay_message(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::string_view message_id,
                           std::int64_t now_ms);
/// deliveries/replay since a time: every delivery of the endpoint that failed whose event was made at or
/// after `since_ms`, oldest event first, at most max_replayed; returns how many were queued (those past
/// the queue's limit stay failed). Errors as replay_message.
inline constexpr std::size_t max_replayed = 10000;
std::size_t replay_failed_since(database& db, const webhook_config& cfg, std::string_view tenant, std::string_view endpoint, std::int64_t since_ms,
                                std::int64_t now_ms);

}  // namespace folio::service
