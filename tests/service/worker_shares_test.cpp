// The workers' shares of the tenants (service/platform/worker_shares.hpp).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "platform/worker_shares.hpp"
#include "support.hpp"

namespace {

using namespace folio_service_test;

/// Jobs 0..n-1 for the worker_shares tests (each job is its number).
std::vector<std::unique_ptr<int>> numbered_jobs(int n) {
  std::vector<std::unique_ptr<int>> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back(std::make_unique<int>(i));
  return jobs;
}

/// Ends a running request of `tenant`, then asks the freed worker for its next step: the job it runs,
/// or -1 when it is not told to run one.
int run_after_finish(svc::worker_shares<int>& shares, const std::string& tenant) {
  shares.finish(tenant);
  const svc::worker_shares<int>::step s = shares.next(false);
  return s.kind == svc::worker_shares<int>::step::run ? *s.job : -1;
}

TEST(WorkerShares, ATenantHoldsAtMostItsShareAndItsWaitingRequestsRunInOrder) {
  svc::worker_shares<int> shares(16, 2, 2, 3);  // workers enough that the reserve never holds one back
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  auto job = [](int n) { return std::make_unique<int>(n); };
  std::unique_ptr<int> a1 = job(1), a2 = job(2), a3 = job(3), a4 = job(4), a5 = job(5), b1 = job(6), b2 = job(7), c1 = job(8);
  EXPECT_EQ(shares.admit("a", a1), adm::run);
  EXPECT_EQ(shares.admit("a", a2), adm::run);
  EXPECT_EQ(shares.admit("a", a3), adm::wait);  // a holds its share: a3 waits without a worker
  EXPECT_EQ(a3, nullptr);
  EXPECT_EQ(shares.admit("a", a4), adm::wait);
  EXPECT_EQ(shares.admit("a", a5), adm::refuse);  // a's queue is full
  EXPECT_EQ(*a5, 5);
  EXPECT_EQ(shares.admit("b", b1), adm::run);  // another tenant runs at once
  EXPECT_EQ(shares.admit("b", b2), adm::run);
  EXPECT_EQ(shares.holding("a"), 2u);
  EXPECT_EQ(shares.holding("b"), 2u);
  EXPECT_EQ(shares.waiting("a"), 2u);
  EXPECT_EQ(shares.running(), 4u);
  // Another worker accepts: a's request ends and its hold passes to a3, which the free worker runs.
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.finish("a");
  EXPECT_EQ(shares.holding("a"), 2u);
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(3, std::string("a")));
  std::unique_ptr<int> c2 = job(9);
  EXPECT_EQ(shares.admit("a", c2), adm::wait);
  EXPECT_EQ(run_after_finish(shares, "a"), 4);
  EXPECT_EQ(run_after_finish(shares, "a"), 9);
  shares.finish("a");  // none waits: the hold is released
  EXPECT_EQ(shares.holding("a"), 1u);
  EXPECT_EQ(shares.admit("c", c1), adm::run);
  shares.finish("a");
  EXPECT_EQ(shares.holding("a"), 0u);
  EXPECT_TRUE(shares.take_waiting().empty());
}

TEST(WorkerShares, AFreeWorkerAcceptsWhenNoOtherDoesHoweverManyTenantsAreAtTheirShare) {
  // Shares of two, tenants a and b at theirs with requests waiting; workers enough that the reserve
  // never holds one back.
  svc::worker_shares<int> shares(16, 2, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  std::vector<std::unique_ptr<int>> jobs = numbered_jobs(8);
  for (int i : {0, 1}) EXPECT_EQ(shares.admit("a", jobs[i]), adm::run);
  for (int i : {2, 3}) EXPECT_EQ(shares.admit("a", jobs[i]), adm::wait);
  for (int i : {4, 5}) EXPECT_EQ(shares.admit("b", jobs[i]), adm::run);
  for (int i : {6, 7}) EXPECT_EQ(shares.admit("b", jobs[i]), adm::wait);
  // A request of a ends while no worker accepts: its worker accepts, a's next request waits ready.
  shares.finish("a");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  EXPECT_EQ(shares.waiting("a"), 2u);
  EXPECT_EQ(shares.holding("a"), 2u);  // 1 running, 1 ready: a still holds no more than its share
  std::unique_ptr<int> c = std::make_unique<int>(100);
  shares.accepted();
  EXPECT_EQ(shares.admit("c", c), adm::run);  // tenant c's request runs at once
  // A request of b ends while no worker accepts: that worker accepts too.
  shares.finish("b");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  // c's ends: another worker accepts, so this one runs the first ready request (a's, then b's).
  shares.finish("c");
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(2, std::string("a")));
  shares.finish("a");  // a's last waiting request becomes ready, behind b's
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(6, std::string("b")));
  // A new request of a, with a hold free but a's earlier request ready: it waits behind it.
  std::unique_ptr<int> a_late = std::make_unique<int>(101);
  shares.finish("a");  // a: 1 running (job 1), 1 ready (job 3), 0 queued
  EXPECT_EQ(shares.admit("a", a_late), adm::wait);
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 3);
  // At stop the accepting worker is back: free workers run what is ready without accepting, then end.
  shares.accepted();
  s = shares.next(false);
  EXPECT_EQ(s.kind, step::accept);  // nobody else accepts: ready requests wait for a worker that finishes
  shares.accepted();
  s = shares.next(true);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 101);
  EXPECT_EQ(shares.next(true).kind, step::exit);
  EXPECT_EQ(shares.waiting(), 1u);  // b's job 7: queued until one of b's running requests ends
  shares.finish("b");
  s = shares.next(true);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(*s.job, 7);
}

TEST(WorkerShares, TheLastFreeWorkerIsKeptForTenantsWithNoneRunning) {
  // Four workers, the default share of three. The calls follow what the workers do: each admit is a
  // worker that accepted; after wait (or refuse) that worker asks next().
  svc::worker_shares<int> shares(4, 3, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  auto job = [](int n) { return std::make_unique<int>(n); };
  std::unique_ptr<int> a1 = job(1), a2 = job(2), a3 = job(3), a4 = job(4), b1 = job(11), b2 = job(12), c1 = job(21);
  EXPECT_EQ(shares.admit("a", a1), adm::run);
  EXPECT_EQ(shares.admit("a", a2), adm::run);
  EXPECT_EQ(shares.admit("b", b1), adm::run);  // b has none running: it may start with one worker left
  EXPECT_EQ(shares.admit("a", a3), adm::wait);  // a has two running: the last worker is kept
  EXPECT_EQ(shares.holding("a"), 3u);           // a3 is ready, on a's third hold
  EXPECT_EQ(shares.next(false).kind, step::accept);  // the last worker accepts again
  shares.accepted();
  EXPECT_EQ(shares.admit("b", b2), adm::wait);  // so does b, with one running
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.admit("a", a4), adm::wait);  // a at its share: queued behind a3
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.running(), 3u);
  EXPECT_EQ(shares.admit("c", c1), adm::run);  // a tenant with none running takes the last worker
  EXPECT_EQ(shares.running(), 4u);
  // Nothing strands, in arrival order: c's request ends while no worker accepts, so its worker accepts;
  // each worker that is free next runs the first ready request (a3, then b2, then a4).
  shares.finish("c");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.finish("a");  // a1: its hold passes to a4, ready behind b2
  step s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(3, std::string("a")));
  shares.finish("b");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(12, std::string("b")));
  shares.finish("a");
  s = shares.next(false);
  ASSERT_EQ(s.kind, step::run);
  EXPECT_EQ(std::make_pair(*s.job, s.tenant), std::make_pair(4, std::string("a")));
  EXPECT_EQ(shares.waiting(), 0u);
  EXPECT_EQ(shares.running(), 3u);
}

TEST(WorkerShares, OneTenantRunsOnAllButOneWorkerWhateverItsShare) {
  // --tenant-workers equal to --workers: the reserve still keeps one worker for another tenant.
  svc::worker_shares<int> shares(4, 4, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  std::vector<std::unique_ptr<int>> jobs = numbered_jobs(6);
  for (int i : {0, 1, 2}) EXPECT_EQ(shares.admit("a", jobs[i]), adm::run);
  EXPECT_EQ(shares.admit("a", jobs[3]), adm::wait);  // ready on a's fourth hold; the last worker accepts
  EXPECT_EQ(shares.holding("a"), 4u);
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.admit("a", jobs[4]), adm::wait);  // queued: a holds its share
  EXPECT_EQ(shares.next(false).kind, step::accept);
  shares.accepted();
  EXPECT_EQ(shares.admit("b", jobs[5]), adm::run);
  shares.finish("b");
  EXPECT_EQ(shares.next(false).kind, step::accept);
  EXPECT_EQ(run_after_finish(shares, "a"), 3);
  EXPECT_EQ(run_after_finish(shares, "a"), 4);
  EXPECT_EQ(shares.running(), 3u);
}

TEST(WorkerShares, WithOneWorkerEveryRequestRuns) {
  // One worker: it accepts only when it runs nothing, so each request finds every tenant with none
  // running and starts at once, on the last (only) worker.
  svc::worker_shares<int> shares(1, 1, 8, 16);
  using adm = svc::worker_shares<int>::admission;
  using step = svc::worker_shares<int>::step;
  for (const char* tenant : {"a", "a", "b", "a"}) {
    EXPECT_EQ(shares.next(false).kind, step::accept);
    shares.accepted();
    std::unique_ptr<int> j = std::make_unique<int>(0);
    EXPECT_EQ(shares.admit(tenant, j), adm::run);
    shares.finish(tenant);
  }
  EXPECT_EQ(shares.next(true).kind, step::exit);
  // Two workers, share two (--tenant-workers 2): a tenant runs one request at a time while the other
  // worker accepts; its second request waits ready and runs on the first worker free.
  svc::worker_shares<int> two(2, 2, 8, 16);
  std::unique_ptr<int> a1 = std::make_unique<int>(1), a2 = std::make_unique<int>(2);
  EXPECT_EQ(two.admit("a", a1), adm::run);
  EXPECT_EQ(two.admit("a", a2), adm::wait);
  EXPECT_EQ(two.next(false).kind, step::accept);
  EXPECT_EQ(run_after_finish(two, "a"), 2);
}

TEST(WorkerShares, AllQueuesTogetherAreBounded) {
  svc::worker_shares<int> shares(16, 1, 5, 2);
  using adm = svc::worker_shares<int>::admission;
  std::vector<std::unique_ptr<int>> jobs = numbered_jobs(6);
  EXPECT_EQ(shares.admit("a", jobs[0]), adm::run);
  EXPECT_EQ(shares.admit("b", jobs[1]), adm::run);
  EXPECT_EQ(shares.admit("a", jobs[2]), adm::wait);
  EXPECT_EQ(shares.admit("b", jobs[3]), adm::wait);
  EXPECT_EQ(shares.admit("a", jobs[4]), adm::refuse);  // two wait in all
  EXPECT_EQ(shares.admit("c", jobs[5]), adm::run);     // a tenant under its share still runs
  EXPECT_EQ(shares.take_waiting().size(), 2u);
}

}  // namespace
