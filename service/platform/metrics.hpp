// service/platform/metrics.hpp — what an operator scrapes from GET /metrics (Prometheus text format 0.0.4):
// requests by endpoint and HTTP status, latency histograms by endpoint, the document cache, op-log
// compactions, live-push publishes, the database's size, and the process's memory and descriptors.
// Labels are endpoint paths from a fixed list (anything else is "other") and status codes: nothing a
// client sends, nothing of a tenant.
// Thread-safety: every member may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace folio::service {

class metrics {
 public:
  /// Upper bounds of the latency buckets, in seconds (+Inf is implied).
  static constexpr std::array<double, 13> buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

  /// One answered request: `endpoint` is the route's path (or "other"), `http` its status code.
  void observe(std::string_view endpoint, int http, double seconds);

  /// Everything above plus the gauges the caller knows (cache size, publishes, database files).
  struct gauges {
    std::uint64_t cache_hits = 0, cache_misses = 0, cache_bytes = 0, cache_entries = 0, published = 0, publish_failures = 0, publish_queued = 0;
    std::uint64_t publish_over_budget = 0;
    std::uint64_t presence_dropped = 0, presence_left_by_timeout = 0;
    std::uint64_t compactions = 0, compaction_failures = 0, compactions_queued = 0;
    std::uint64_t db_bytes = 0, wal_bytes = 0, db_pages = 0, db_free_pages = 0, db_max_pages = 0, db_commits = 0, db_wal_syncs = 0;
    double start_time = 0;
    /// The process: resident memory, open descriptors, and the C heap (glibc's mallinfo2: bytes in
    /// allocations, and bytes the allocator holds free without returning them to the system).
    std::uint64_t resident_bytes = 0, open_fds = 0, heap_allocated = 0, heap_free = 0;
  };
  std::string render(const gauges& g) const;
  /// Fills the process members of `g` from /proc/self and the allocator.
  static void sample_process(gauges& g);

 private:
  struct series {
    std::map<int, std::uint64_t> by_status;
    std::array<std::uint64_t, buckets.size() + 1> counts{};  ///< per bucket, not cumulative; last is +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, series, std::less<>> series_;
};

}  // namespace folio::service
