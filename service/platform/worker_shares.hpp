// service/platform/worker_shares.hpp — how many of a responder's workers one tenant may hold at once
// (folio-fcgi --tenant-workers, docs/OPERATIONS.md "Tenants and workers").
//
// Model: every accepted request whose caller is known (its credentials checked, before its body is
// read) is admitted under its tenant. While the tenant holds fewer than `share` workers, the request
// runs on the worker that accepted it (admission::run). Otherwise it waits in its tenant's queue
// without a thread (admission::wait: the job is moved in and the worker goes back to accepting), and
// the next worker that finishes one of that tenant's requests runs it on the same hold (done()). So a
// tenant never holds more than `share` workers, and with --workers > share a request of any other
// tenant always finds a worker the first tenant does not hold. When the tenant's queue holds
// `max_waiting` jobs, or all queues together `max_waiting_total`, the request is refused
// (admission::refuse) and answered at once. Waiting jobs of a tenant run in arrival order; a job
// whose deadline passed while it waited is answered without running (main.cpp).
// Per process: N nodes each apply the share to their own workers.
// Invariants: waiting(t) > 0 only while holding(t) == share; a tenant is in the map iff it holds a
// worker. Cost: one map entry per tenant holding a worker; admit and done are O(1) amortized under
// one mutex. Thread-safety: every member may be called from many threads at once.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace folio::service {

template <class Job>
class worker_shares {
 public:
  enum class admission { run, wait, refuse };

  worker_shares(unsigned share, std::size_t max_waiting, std::size_t max_waiting_total)
      : share_(share ? share : 1), max_waiting_(max_waiting), max_waiting_total_(max_waiting_total) {}

  unsigned share() const noexcept { return share_; }
  std::size_t max_waiting() const noexcept { return max_waiting_; }

  /// `job` of `tenant` was accepted. run: the caller runs it now, on a hold of the tenant's, and
  /// calls done(tenant) after it. wait: `job` was moved into the tenant's queue. refuse: the caller
  /// answers it at once (it keeps `job`).
  admission admit(const std::string& tenant, std::unique_ptr<Job>& job) {
    std::lock_guard<std::mutex> g(mu_);
    tenant_state& t = tenants_[tenant];
    if (t.holding < share_) {
      ++t.holding;
      return admission::run;
    }
    if (t.waiting.size() >= max_waiting_ || waiting_total_ >= max_waiting_total_) return admission::refuse;
    t.waiting.push_back(std::move(job));
    ++waiting_total_;
    return admission::wait;
  }

  /// The caller finished a job of `tenant` that it ran on a hold: the tenant's next waiting job, to
  /// run on the same hold (then done() again after it), or null when none waits (the hold is released).
  std::unique_ptr<Job> done(const std::string& tenant) {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = tenants_.find(tenant);
    if (it == tenants_.end()) return nullptr;  // not held: a caller's mistake, nothing to release
    tenant_state& t = it->second;
    if (!t.waiting.empty()) {
      std::unique_ptr<Job> next = std::move(t.waiting.front());
      t.waiting.pop_front();
      --waiting_total_;
      return next;
    }
    if (--t.holding == 0) tenants_.erase(it);
    return nullptr;
  }

  /// Every waiting job, taken out of the queues (at stop: the caller answers them).
  std::vector<std::unique_ptr<Job>> take_waiting() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::unique_ptr<Job>> out;
    for (auto& [id, t] : tenants_)
      while (!t.waiting.empty()) out.push_back(std::move(t.waiting.front())), t.waiting.pop_front();
    waiting_total_ = 0;
    return out;
  }

  unsigned holding(const std::string& tenant) const {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.holding;
  }
  std::size_t waiting(const std::string& tenant) const {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.waiting.size();
  }

 private:
  struct tenant_state {
    unsigned holding = 0;                       ///< workers running this tenant's jobs
    std::deque<std::unique_ptr<Job>> waiting;  ///< accepted, not yet run, in arrival order
  };
  const unsigned share_;
  const std::size_t max_waiting_, max_waiting_total_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, tenant_state> tenants_;
  std::size_t waiting_total_ = 0;
};

}  // namespace folio::service
