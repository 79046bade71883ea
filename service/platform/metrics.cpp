#include "platform/metrics.hpp"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace folio::service {

void metrics::observe(std::string_view endpoint, int http, double seconds) {
  std::size_t b = 0;
  while (b < buckets.size() && seconds > buckets[b]) ++b;
  std::lock_guard<std::mutex> g(mu_);
  auto it = series_.find(endpoint);
  if (it == series_.end()) it = series_.emplace(std::string(endpoint), series{}).first;
  series& s = it->second;
  ++s.by_status[http];
  ++s.counts[b];
  s.sum += seconds;
  ++s.count;
}

namespace {

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + ' ' + help + "\n# TYPE " + name + ' ' + type + '\n';
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void metrics::sample_process(gauges& g) {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  if (statm >> size >> resident) g.resident_bytes = resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++g.open_fds;
  if (g.open_fds > 0) --g.open_fds;  // the iterator's own descriptor
  const struct mallinfo2 m = ::mallinfo2();
  g.heap_allocated = m.uordblks + m.hblkhd;
  g.heap_free = m.fordblks;
}

std::string metrics::render(const gauges& g) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    family(out, "folio_requests_total", "counter", "Requests answered, by endpoint and HTTP status.");
    for (const auto& [endpoint, s] : series_)
      for (const auto& [http, n] : s.by_status)
        out += "folio_requests_total{endpoint=\"" + endpoint + "\",status=\"" + std::to_string(http) + "\"} " + std::to_string(n) + '\n';
    family(out, "folio_request_duration_seconds", "histogram", "Time from the request's arrival at the responder to its answer, by endpoint.");
    for (const auto& [endpoint, s] : series_) {
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b <= buckets.size(); ++b) {
        cumulative += s.counts[b];
        out += "folio_request_duration_seconds_bucket{endpoint=\"" + endpoint + "\",le=\"" + (b < buckets.size() ? number(buckets[b]) : "+Inf") +
               "\"} " + std::to_string(cumulative) + '\n';
      }
      out += "folio_request_duration_seconds_sum{endpoint=\"" + endpoint + "\"} " + number(s.sum) + '\n';
      out += "folio_request_duration_seconds_count{endpoint=\"" + endpoint + "\"} " + std::to_string(s.count) + '\n';
    }
  }
  struct single {
    const char *name, *type, *help;
    std::uint64_t value;
  };
  const single singles[] = {
      {"folio_doc_cache_hits_total", "counter", "CRDT reads and writes served by a decoded document (or a get by its rendered value) already in memory.", g.cache_hits},
      {"folio_doc_cache_misses_total", "counter", "CRDT reads and writes that decoded the record from the database.", g.cache_misses},
      {"folio_doc_cache_bytes", "gauge", "Memory held by cached documents (their memory_usage()) and the values gets rendered from them.", g.cache_bytes},
      {"folio_doc_cache_entries", "gauge", "Cache entries (records seen recently).", g.cache_entries},
      {"folio_oplog_compactions_total", "counter", "Op logs folded into a new snapshot (off the request path).", g.compactions},
      {"folio_oplog_compaction_failures_total", "counter", "Compactions that failed (logged as compaction_failed; the log stays).", g.compaction_failures},
      {"folio_oplog_compactions_queued", "gauge", "Records whose log waits to be compacted.", g.compactions_queued},
      {"folio_publish_total", "counter", "Committed changes handed to nginx's Nchan publisher.", g.published},
      {"folio_publish_failures_total", "counter", "Publishes nginx did not take (subscribers catch up by syncing).", g.publish_failures},
      {"folio_publish_over_budget_total", "counter", "Changes not published because their tenant's message budget was spent (their channels owed a notice).", g.publish_over_budget},
      {"folio_presence_dropped_total", "counter", "Presence messages not published (their tenant's presence budget spent, the queue full, or nginx refusing them).", g.presence_dropped},
      {"folio_presence_timeouts_total", "counter", "Presence entries that left because they were not refreshed within --presence-timeout (removed by this process).", g.presence_left_by_timeout},
      {"folio_publish_queued", "gauge", "Committed changes waiting for (or being handed to) nginx's publisher.", g.publish_queued},
      {"folio_db_size_bytes", "gauge", "Size of the database file.", g.db_bytes},
      {"folio_db_wal_size_bytes", "gauge", "Size of the database's write-ahead log.", g.wal_bytes},
      {"folio_db_commits_total", "counter", "Write transactions committed (SQLite).", g.db_commits},
      {"folio_db_wal_syncs_total", "counter", "fsyncs of the write-ahead log that made them durable (SQLite; group commit: fewer when writes overlap).", g.db_wal_syncs},
      {"folio_db_pages", "gauge", "Pages in the database file.", g.db_pages},
      {"folio_db_free_pages", "gauge", "Pages on the database's free list (reused before it grows).", g.db_free_pages},
      {"folio_db_max_pages", "gauge", "The cap on the database's pages (folio-fcgi --max-db-pages; SQLite's default when not set).", g.db_max_pages},
      {"process_resident_memory_bytes", "gauge", "Resident memory of folio-fcgi.", g.resident_bytes},
      {"process_open_fds", "gauge", "Open file descriptors of folio-fcgi.", g.open_fds},
      {"folio_heap_allocated_bytes", "gauge", "Bytes in live heap allocations (glibc mallinfo2).", g.heap_allocated},
      {"folio_heap_free_bytes", "gauge", "Heap bytes the allocator holds free and has not returned to the system (glibc mallinfo2).", g.heap_free},
  };
  for (const single& m : singles) {
    family(out, m.name, m.type, m.help);
    out += std::string(m.name) + ' ' + std::to_string(m.value) + '\n';
  }
  family(out, "folio_start_time_seconds", "gauge", "When the responder started (Unix time).");
  char start[32];
  std::snprintf(start, sizeof start, "%.3f", g.start_time);
  out += "folio_start_time_seconds " + std::string(start) + '\n';
  return out;
}

}  // namespace folio::service
