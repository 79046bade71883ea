#include "crdt/family.hpp"

#include <openssl/rand.h>

#include "crdt/handlers.hpp"
#include "crdt/publish/live_messages.hpp"

namespace folio::service {

crdt_family::crdt_family(server& platform)
    : server_(platform),
      cache_(platform.settings().cache_bytes, platform.settings().cache_entries),
      publisher_(platform.settings().live, [&platform](std::string_view id) {
        const std::size_t slash = id.find('/');  // stream_key_id's "<signing key id>/<tenant>"
        const std::shared_ptr<const key_ring> ring = platform.client_keys();
        return ring && ring->find(id.substr(0, slash)) && (slash == std::string_view::npos || !platform.api_key_revoked(id.substr(slash + 1)));
      }),
      compactor_(platform.settings().request_timeout),
      history_(platform.settings().history) {
  register_crdt_routes(platform.routes(), *this);
  register_version_routes(platform.routes(), *this);
  commits_.subscribe([this](const committed_change& c) { publish_committed(publisher_, c); });
  // A request's publishes go to nginx once its answer has (publish/publisher.hpp, answer_first).
  platform.add_after_response([this]() -> std::function<void()> {
    auto held = std::make_shared<std::optional<publisher::answer_first>>(std::in_place, publisher_);
    return [held] { held->reset(); };
  });
  platform.add_gauges([this](metrics::gauges& g) {
    g.cache_hits = cache_.hits(), g.cache_misses = cache_.misses(), g.cache_bytes = cache_.bytes(), g.cache_entries = cache_.size();
    g.published = publisher_.published(), g.publish_failures = publisher_.failures(), g.publish_queued = publisher_.queued();
    g.publish_over_budget = publisher_.over_budget();
    compactor_.fill(g);
  });
}

void crdt_family::keep_token_streams(database& db, std::function<std::unique_ptr<database>()> connect) {
  if (publisher_.settings().publish_socket.empty()) return;
  unsigned char id[12];
  if (RAND_bytes(id, sizeof id) != 1) throw store_error(failure::other, "no randomness for the token streams' owner id");
  static constexpr char hex[] = "0123456789abcdef";
  for (const unsigned char b : id) stream_owner_ += hex[b >> 4], stream_owner_ += hex[b & 15];
  std::vector<publisher::kept_stream> kept;
  for (token_stream_row& r : adopt_token_streams(db, stream_owner_)) kept.push_back({std::move(r.channel), std::move(r.stream_key), r.expires});
  publisher_.set_forget([this, connect = std::move(connect)](const std::string& channel) {
    // A connection per deleting thread (the background thread, the two senders, a worker whose
    // subscriber found the map full), kept for its next deletion; one that failed is opened again.
    thread_local std::unique_ptr<database> conn;
    thread_local const crdt_family* db_of = nullptr;
    if (!conn || db_of != this) conn.reset(), conn = connect(), db_of = this;
    conn->set_deadline(deadline_clock::now() + server_.settings().request_timeout);
    try {
      forget_token_streams(*conn, stream_owner_, channel);
    } catch (...) {
      conn.reset();
      throw;
    }
  });
  keeping_streams_ = true;
  if (!kept.empty())
    log::write("info", "token_streams_kept", std::to_string(kept.size()) + " kept rows of client-token streams let in before this start are remembered");
  publisher_.remember_kept(kept);
}

std::string stream_key_id(const client_scope& s, const std::string& tenant) { return s.key_id + '/' + tenant; }

record_key scoped_key(const principal& who, std::string org, std::string doc, const std::optional<std::string>& named) {
  check_scope(who, org, doc, named);
  return record_key{who.tenant, std::move(org), std::move(doc), named.value_or(std::string())};
}

}  // namespace folio::service
