#include "metrics.hpp"

#include <cstdio>

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
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const char* name, std::uint64_t v) {
  out += name;
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

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
  family(out, "folio_doc_cache_hits_total", "counter", "CRDT reads and writes served by a decoded document already in memory.");
  sample(out, "folio_doc_cache_hits_total", g.cache_hits);
  family(out, "folio_doc_cache_misses_total", "counter", "CRDT reads and writes that decoded the record from the database.");
  sample(out, "folio_doc_cache_misses_total", g.cache_misses);
  family(out, "folio_doc_cache_bytes", "gauge", "Memory held by cached documents (their memory_usage()).");
  sample(out, "folio_doc_cache_bytes", g.cache_bytes);
  family(out, "folio_doc_cache_entries", "gauge", "Cache entries (records seen recently).");
  sample(out, "folio_doc_cache_entries", g.cache_entries);
  family(out, "folio_oplog_compactions_total", "counter", "Op logs folded into a new snapshot.");
  sample(out, "folio_oplog_compactions_total", compactions_.load());
  family(out, "folio_publish_total", "counter", "Committed changes handed to nginx's Nchan publisher.");
  sample(out, "folio_publish_total", g.published);
  family(out, "folio_publish_failures_total", "counter", "Publishes nginx did not take (subscribers catch up by syncing).");
  sample(out, "folio_publish_failures_total", g.publish_failures);
  family(out, "folio_db_size_bytes", "gauge", "Size of the database file.");
  sample(out, "folio_db_size_bytes", g.db_bytes);
  family(out, "folio_db_wal_size_bytes", "gauge", "Size of the database's write-ahead log.");
  sample(out, "folio_db_wal_size_bytes", g.wal_bytes);
  family(out, "folio_db_pages", "gauge", "Pages in the database file.");
  sample(out, "folio_db_pages", g.db_pages);
  family(out, "folio_db_free_pages", "gauge", "Pages on the database's free list (reused before it grows).");
  sample(out, "folio_db_free_pages", g.db_free_pages);
  family(out, "folio_db_max_pages", "gauge", "The cap on the database's pages (folio-fcgi --max-db-pages; SQLite's default when not set).");
  sample(out, "folio_db_max_pages", g.db_max_pages);
  family(out, "folio_start_time_seconds", "gauge", "When the responder started (Unix time).");
  char start[32];
  std::snprintf(start, sizeof start, "%.3f", g.start_time);
  out += "folio_start_time_seconds " + std::string(start) + '\n';
  return out;
}

}  // namespace folio::service
