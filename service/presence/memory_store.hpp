// service/presence/memory_store.hpp — presence kept in this process's memory (one node; store.hpp has
// the model). Entries by record key, then clientId (ordered maps: get() lists in order), an index by
// updatedAt for expire(), a count per (record, user) and a count per tenant.
// Cost: O(log n) per set/leave, O(entries listed) per get (a document's records: O(log n + listed)),
// O(k log n) for k entries expired. Memory: bounded by the per-record and per-tenant limits.
// Thread-safety: one mutex.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "presence/store.hpp"

namespace folio::service {

class memory_presence_store final : public presence_store {
 public:
  explicit memory_presence_store(std::size_t per_tenant) : per_tenant_(per_tenant) {}
  set_result set(const record_key& k, const std::string& client, const std::string& user, const std::optional<std::string>& state,
                 const std::optional<std::string>& selection, std::int64_t now_ms) override;
  leave_result leave(const record_key& k, const std::string& client, const std::optional<std::string>& user) override;
  std::vector<placed_entry> get(const record_key& k, std::int64_t since_ms) override;
  std::vector<placed_entry> expire(std::int64_t before_ms, std::size_t limit) override;

 private:
  /// A record's key as one string, ordered so that a document's records are adjacent (cache_key's
  /// separator sorts below every id byte).
  using records = std::map<std::string, std::map<std::string, presence_entry>>;
  void remove(records::iterator r, std::map<std::string, presence_entry>::iterator e, const std::string& tenant);  ///< mu_ held

  const std::size_t per_tenant_;
  std::mutex mu_;
  records records_;
  std::set<std::tuple<std::int64_t, std::string, std::string>> by_time_;  ///< (updatedAt, record key, clientId)
  std::unordered_map<std::string, std::size_t> per_tenant_count_;
  std::unordered_map<std::string, std::size_t> per_user_count_;  ///< by "<record key>\x1f<userId>"
};

}  // namespace folio::service
