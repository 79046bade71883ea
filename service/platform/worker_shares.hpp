// service/platform/worker_shares.hpp — how many of a responder's workers one tenant may hold at once
// (folio-fcgi --tenant-workers, docs/OPERATIONS.md "Tenants and workers"), and what a free worker does
// next: run a request that waited, or accept a new one.
//
// Model: every accepted request whose caller is known (its credentials checked, before its body is
// read) is admitted under its tenant. A tenant has `share` holds. A request may start (run on a worker)
// only if its tenant has no request running, or if, after it starts, fewer than `workers` requests
// run (the reserve: the last worker not running a request is kept for tenants with none running).
// A request that arrives while its tenant has a free hold, nothing of its own waiting, and the reserve
// allows it, runs at once on the worker that accepted it (admission::run); otherwise it waits without
// a thread (admission::wait: the job is moved in, the worker is free again), or, when the tenant's
// waiting requests number `max_waiting` or all waiting requests `max_waiting_total`, it is refused
// (admission::refuse) and answered at once. A waiting request is either queued under its tenant (no
// hold free) or ready (it has a hold and waits only for a worker); when one of the tenant's requests
// ends (finish), its hold passes to the tenant's first queued request, which becomes ready. Ready
// requests form one queue in the order they got their holds.
// A free worker asks next(): it runs the first ready request only while another worker is accepting
// (then at most workers - 2 others run, so the reserve allows it); otherwise it accepts (and reports
// accepted() when accept returns). So at most one worker accepts while requests are ready, and while
// any worker is not running a request, some worker accepts. The reserve holds back, at admission, a
// request of a tenant with one running that would take the last worker: that worker then accepts, so a
// request of a tenant with none running is always accepted and started by a worker not busy with a
// request in progress, however many tenants are at their share or hold several workers — unless
// another tenant with none running took that last worker first. Whenever every worker runs a request,
// the one that started last started while its tenant had no other running; with one worker, everything
// runs, one at a time.
// A ready request never strands: whenever one is ready, some worker is running a request (or deciding),
// and it takes the ready one when it is free (or, when no other worker accepts, accepts, and the next
// worker to be free takes it). At stop, free workers run the ready requests without accepting until
// none is left (nothing more is accepted, so the reserve has no one to keep a worker for).
// A tenant's requests start in arrival order (one runs at admission only when none of its own waits).
// A job whose deadline passed while it waited is answered without running (main.cpp).
// Per process: N nodes each apply the share and the reserve to their own workers. Requests without a
// tenant (main.cpp: operators' endpoints, the subscriber-authorization hop, failed credentials) are not
// counted: running() counts requests running on a hold, and the reserve is reckoned on that count.
// Invariants: holding(t) = running(t) + ready(t) <= share; queued(t) > 0 only while holding(t) == share;
// running() <= workers - 1 unless the request that started last started while its tenant had none
// running, or at stop; a tenant is in the map iff it holds a hold; accepting_ is the number of workers between
// next() answering accept and accepted(). Cost: one map entry per tenant holding a hold; every member
// is O(1) amortized under one mutex (take_waiting: linear). Thread-safety: every member may be called
// from many threads at once.
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

  /// `workers`: the workers that run the requests (the reserve keeps the last of them); `share`: the
  /// holds of each tenant.
  worker_shares(unsigned workers, unsigned share, std::size_t max_waiting, std::size_t max_waiting_total)
      : workers_(workers ? workers : 1), share_(share ? share : 1), max_waiting_(max_waiting), max_waiting_total_(max_waiting_total) {}

  unsigned share() const noexcept { return share_; }
  std::size_t max_waiting() const noexcept { return max_waiting_; }

  unsigned workers() const noexcept { return workers_; }

  /// `job` of `tenant` was accepted. run: the caller runs it now, on a hold of the tenant's, and
  /// calls finish(tenant) after it. wait: `job` was moved in (queued or ready). refuse: the caller
  /// answers it at once (it keeps `job`).
  admission admit(const std::string& tenant, std::unique_ptr<Job>& job) {
    std::lock_guard<std::mutex> g(mu_);
    tenant_state& t = tenants_[tenant];
    if (t.holding < share_ && t.ready == 0 && reserve_allows(t)) {
      ++t.holding, ++running_;
      return admission::run;
    }
    // Here holding > 0 (a tenant without holds has none running: it runs at once), so the entry stays.
    if (t.queued.size() + t.ready >= max_waiting_ || waiting_total_ >= max_waiting_total_) return admission::refuse;
    ++waiting_total_;
    if (t.holding < share_) {  // a hold is free; the tenant's earlier requests are ready, or the reserve holds it back
      ++t.holding, ++t.ready;
      ready_.push_back({tenant, std::move(job)});
    } else {
      t.queued.push_back(std::move(job));
    }
    return admission::wait;
  }

  /// The caller finished a job of `tenant` that ran on a hold (admit's run, or next's run): the hold
  /// passes to the tenant's first queued job, which becomes ready, or is released.
  void finish(const std::string& tenant) {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = tenants_.find(tenant);
    if (it == tenants_.end() || running_ == 0) return;  // not held: a caller's mistake, nothing to release
    tenant_state& t = it->second;
    --running_;
    if (!t.queued.empty()) {
      ++t.ready;
      ready_.push_back({tenant, std::move(t.queued.front())});
      t.queued.pop_front();
      return;
    }
    if (--t.holding == 0) tenants_.erase(it);
  }

  /// What a free worker does next. run: `job` (of `tenant`, on its hold; then finish(tenant)).
  /// accept: accept a new request, then call accepted() whether or not one came. exit: `stopping` and
  /// nothing is ready.
  struct step {
    enum kind_t { run, accept, exit } kind;
    std::unique_ptr<Job> job{};
    std::string tenant{};
  };
  step next(bool stopping) {
    std::lock_guard<std::mutex> g(mu_);
    // The reserve needs no check here: while another worker accepts, this one and that one run nothing,
    // so after the ready request starts at most workers - 1 run.
    if (!ready_.empty() && (accepting_ > 0 || stopping)) {
      step s{step::run, std::move(ready_.front().second), std::move(ready_.front().first)};
      ready_.pop_front();
      --tenants_[s.tenant].ready, --waiting_total_, ++running_;
      return s;
    }
    if (stopping) return {step::exit};
    ++accepting_;
    return {step::accept};
  }
  /// The caller's accept (after next() said accept) returned.
  void accepted() {
    std::lock_guard<std::mutex> g(mu_);
    if (accepting_ > 0) --accepting_;
  }

  /// Every waiting job, taken out of the queues (at stop, when no worker is left: the caller answers them).
  std::vector<std::unique_ptr<Job>> take_waiting() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::unique_ptr<Job>> out;
    for (auto& [tenant, job] : ready_) out.push_back(std::move(job));
    ready_.clear();
    for (auto& [id, t] : tenants_) {
      while (!t.queued.empty()) out.push_back(std::move(t.queued.front())), t.queued.pop_front();
      t.holding -= t.ready, t.ready = 0;
    }
    waiting_total_ = 0;
    return out;
  }

  /// Holds of `tenant`: its requests running plus its ready ones.
  unsigned holding(const std::string& tenant) const {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.holding;
  }
  /// Requests of `tenant` accepted and not yet running (queued or ready).
  std::size_t waiting(const std::string& tenant) const {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.queued.size() + it->second.ready;
  }
  /// Requests running on a hold, and requests waiting (queued or ready), of every tenant.
  std::size_t running() const {
    std::lock_guard<std::mutex> g(mu_);
    return running_;
  }
  std::size_t waiting() const {
    std::lock_guard<std::mutex> g(mu_);
    return waiting_total_;
  }

 private:
  struct tenant_state {
    unsigned holding = 0;                      ///< holds: requests running plus ready ones
    unsigned ready = 0;                        ///< of them, ready (in ready_)
    std::deque<std::unique_ptr<Job>> queued;  ///< accepted, no hold yet, in arrival order
  };
  /// Whether a request of `t` may start now: `t` has none running, or one worker stays free after it.
  bool reserve_allows(const tenant_state& t) const noexcept { return t.holding == t.ready || running_ + 1 < workers_; }

  const unsigned workers_, share_;
  const std::size_t max_waiting_, max_waiting_total_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, tenant_state> tenants_;
  std::deque<std::pair<std::string, std::unique_ptr<Job>>> ready_;  ///< in the order they got their holds
  std::size_t waiting_total_ = 0;                                   ///< queued plus ready, every tenant
  std::size_t running_ = 0;                                         ///< jobs running on a hold
  unsigned accepting_ = 0;                                          ///< workers told to accept, not yet back
};

}  // namespace folio::service
