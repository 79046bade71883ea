#include "presence/memory_store.hpp"

namespace folio::service {

namespace {
/// The record's key back from its string (cache_key's four ids).
record_key key_of(const std::string& s) {
  record_key k;
  std::string* parts[] = {&k.tenant, &k.org, &k.doc, &k.editor};
  std::size_t at = 0;
  for (std::string* p : parts) {
    const std::size_t end = std::min(s.find('\x1f', at), s.size());
    p->assign(s, at, end - at);
    at = end + 1;
  }
  return k;
}
}  // namespace

presence_store::set_result memory_presence_store::set(const record_key& k, const std::string& client, const std::string& user,
                                                      const std::optional<std::string>& state, const std::optional<std::string>& selection,
                                                      std::int64_t now_ms) {
  std::lock_guard<std::mutex> g(mu_);
  const std::string rk = k.cache_key();
  auto r = records_.find(rk);
  presence_entry* e = nullptr;
  set_outcome outcome = set_outcome::updated;
  if (r != records_.end()) {
    if (const auto it = r->second.find(client); it != r->second.end()) e = &it->second;
  }
  if (e) {
    if (e->user != user) return {set_outcome::other_user, *e};
    by_time_.erase({e->updated_ms, rk, client});
  } else {
    if (r != records_.end() && r->second.size() >= max_per_record) return {set_outcome::record_full, {}};
    const std::string user_key = rk + '\x1f' + user;
    if (const auto u = per_user_count_.find(user_key); u != per_user_count_.end() && u->second >= max_per_user) return {set_outcome::user_full, {}};
    std::size_t& count = per_tenant_count_[k.tenant];
    if (count >= per_tenant_) {
      if (count == 0) per_tenant_count_.erase(k.tenant);
      return {set_outcome::tenant_full, {}};
    }
    ++count;
    ++per_user_count_[user_key];
    if (r == records_.end()) r = records_.try_emplace(rk).first;
    e = &r->second[client];
    e->client = client, e->user = user;
    outcome = set_outcome::joined;
  }
  const bool changed = outcome == set_outcome::joined || (state && *state != e->state) || (selection && *selection != e->selection);
  if (state) e->state = *state;
  if (selection) e->selection = *selection;
  e->updated_ms = now_ms;
  by_time_.emplace(now_ms, rk, client);
  return {outcome, *e, changed};
}

void memory_presence_store::remove(records::iterator r, std::map<std::string, presence_entry>::iterator e, const std::string& tenant) {
  by_time_.erase({e->second.updated_ms, r->first, e->first});
  if (const auto u = per_user_count_.find(r->first + '\x1f' + e->second.user); u != per_user_count_.end() && --u->second == 0) per_user_count_.erase(u);
  r->second.erase(e);
  if (r->second.empty()) records_.erase(r);
  if (const auto c = per_tenant_count_.find(tenant); c != per_tenant_count_.end() && --c->second == 0) per_tenant_count_.erase(c);
}

presence_store::leave_result memory_presence_store::leave(const record_key& k, const std::string& client, const std::optional<std::string>& user) {
  std::lock_guard<std::mutex> g(mu_);
  const auto r = records_.find(k.cache_key());
  if (r == records_.end()) return {};
  const auto e = r->second.find(client);
  if (e == r->second.end()) return {};
  if (user && e->second.user != *user) return {leave_outcome::other_user, e->second};
  leave_result out{leave_outcome::left, e->second};
  remove(r, e, k.tenant);
  return out;
}

std::vector<placed_entry> memory_presence_store::get(const record_key& k, std::int64_t since_ms) {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<placed_entry> out;
  const std::string rk = k.cache_key();
  // One record, or every record whose key starts with the document's (tenant, org, doc and the separator).
  const bool whole_document = k.editor.empty();
  auto r = whole_document ? records_.lower_bound(rk) : records_.find(rk);
  for (; r != records_.end() && (whole_document ? r->first.starts_with(rk) : r->first == rk); ++r) {
    const record_key at = key_of(r->first);
    for (const auto& [client, e] : r->second)
      if (e.updated_ms >= since_ms) out.push_back({at, e});
    if (!whole_document) break;
  }
  return out;
}

std::vector<placed_entry> memory_presence_store::expire(std::int64_t before_ms, std::size_t limit) {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<placed_entry> out;
  while (!by_time_.empty() && out.size() < limit) {
    const auto& [at, rk, client] = *by_time_.begin();
    if (at >= before_ms) break;
    const auto r = records_.find(rk);
    const auto e = r->second.find(client);
    out.push_back({key_of(rk), e->second});
    remove(r, e, out.back().record.tenant);
  }
  return out;
}

}  // namespace folio::service
