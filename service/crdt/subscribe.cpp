// GET /v2/crdt/subscribe, as nginx's nchan_authorize_request asks it (docs/API.md, crdt/subscribe):
// the caller's credentials (an API key + auth token, or a client token, also from the query's
// `token`), the record's ids from the query as nginx decoded them for the channel id, the record's
// existence, and the channel id nginx computed, which must be the responder's.
#include "crdt/family.hpp"
#include "platform/nginx_query.hpp"

namespace folio::service {

response crdt_family::authorize_subscriber(database& db, const request& r) {
  return server_.observed("/v2/crdt/subscribe", r, [&](std::string& key_id) -> response {
    try {
      const principal who = server_.identify(db, r, true);
      key_id = who.tenant;
      std::string org = query_param(r.query, "organizationId", "Organization ID is required");
      std::string doc = query_param(r.query, "documentId", "Document ID is required");
      const record_key k = scoped_key(who, std::move(org), std::move(doc), query_param(r.query, "editorId", "Editor ID is required."));
      const live_config& live = server_.settings().live;
      if (live.channel_secret.empty()) throw api_error(status::unavailable, "Live push is not configured on this server.");
      if (!load_record(db, k, false)) throw api_error(status::not_found, "No CRDT data found for this editor ID.");
      if (channel_id(live.channel_secret, k.tenant, k.org, k.doc, k.editor) != r.channel) {
        log::write("error", "channel_mismatch", "nginx computed another channel id for a subscriber: nginx and folio-fcgi do not share the channel secret");
        throw api_error(status::internal, "Internal error.");
      }
      // Nchan asks once per stream: the publisher ends it when the token expires, loses its signing key or
      // its API key is revoked (stream_key_id).
      if (publisher_.memory_full()) throw api_error(status::unavailable, "Live push is out of memory; retry later.");
      // Its channel is kept in crdt_token_streams before it is let in (publish/token_streams.hpp): a failed write
      // refuses it with the storage failure's answer (docs/API.md).
      const std::string stream_key = who.scope ? stream_key_id(*who.scope, who.tenant) : std::string();
      const auto keep = [&](std::int64_t expires) { keep_token_stream(db, stream_owner_, {r.channel, stream_key, expires}); };
      if (who.scope && !publisher_.token_subscribed(r.channel, who.scope->expires, stream_key,
                                                    keeping_streams_ ? std::function<void(std::int64_t)>(keep) : nullptr))
        throw api_error(status::unavailable, "Too many live streams of client tokens on this server; try again later.");
      return {200, {}};
    } catch (...) {
      return failure_response(std::current_exception());
    }
  });
}

}  // namespace folio::service
