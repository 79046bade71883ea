// service/presence/redis_store.hpp — presence shared by N nodes through one Redis (store.hpp has the
// model; docs/OPERATIONS.md, "Presence"). Every call is one Lua script (EVAL), which Redis runs
// atomically, so the invariants hold across nodes: the user check and the bounds with the write, and an
// entry's removal with its report (a sweep on every node, an explicit leave: one of them removes it and
// reports it, the others find nothing).
// Keys, under "folio:presence:" (apart from Nchan's): r:<record> a hash clientId -> entry (a JSON array
// [userId, state, selection, updatedAt]); expiry, a sorted set of "<record>\x1f<clientId>" by updatedAt;
// d:<document> the set of a document's editorIds with entries; t:<tenant> the tenant's count. <record>
// is record_key::cache_key() (ids hold no control characters, so \x1f separates them).
// Connections: hiredis, blocking, 1 s to connect and per command, AUTH when a password is set; kept in
// a pool (one per concurrent caller), a failed one dropped (a pooled one's failure, as after a Redis
// restart, is retried once on a new connection). Redis unreachable: api_error UNAVAILABLE.
// The process must ignore SIGPIPE (folio-fcgi does): hiredis writes to a connection Redis may have closed.
// Cost: set/leave O(log n) in Redis, get O(entries listed), expire O(k log n); one round trip each.
// Thread-safety: every member from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "presence/store.hpp"

struct redisContext;
struct redisReply;

namespace folio::service {

class redis_presence_store final : public presence_store {
 public:
  /// `address`: "unix:/path" or "host:port"; std::invalid_argument when it is neither. Connects lazily.
  redis_presence_store(const std::string& address, std::string password, std::size_t per_tenant);
  ~redis_presence_store() override;
  set_result set(const record_key& k, const std::string& client, const std::string& user, const std::optional<std::string>& state,
                 const std::optional<std::string>& selection, std::int64_t now_ms) override;
  leave_result leave(const record_key& k, const std::string& client, const std::optional<std::string>& user) override;
  std::vector<placed_entry> get(const record_key& k, std::int64_t since_ms) override;
  std::vector<placed_entry> expire(std::int64_t before_ms, std::size_t limit) override;

 private:
  struct reply_deleter {
    void operator()(redisReply* r) const;
  };
  using reply = std::unique_ptr<redisReply, reply_deleter>;
  /// One command on a pooled connection; api_error UNAVAILABLE when Redis cannot be reached or answers an error.
  reply command(const std::vector<std::string>& args);
  redisContext* connect();

  std::string host_, unix_path_, password_, shown_;
  int port_ = 0;
  const std::size_t per_tenant_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
};

}  // namespace folio::service
