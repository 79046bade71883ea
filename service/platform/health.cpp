// The operators' endpoints (server.hpp): GET /healthz (readiness and liveness) and GET /metrics.
#include "platform/server.hpp"

namespace folio::service {

response server::health(database& db, const request& r) {
  if (r.query == "live" || r.query.starts_with("live=")) return {200, "{\"status\":\"ok\",\"live\":true}\n"};
  if (const std::string problem = db.write_problem(); !problem.empty()) {
    log::write("warn", "not_ready", problem);
    throw api_error(status::unavailable, "Not ready: " + problem + ".");
  }
  return {200, "{\"status\":\"ok\",\"live\":true,\"ready\":true}\n"};
}

response server::metrics_page(database& db) {
  metrics::gauges g;
  for (const auto& fill : gauges_) fill(g);
  const database::space s = db.usage();
  g.db_bytes = s.file_bytes, g.wal_bytes = s.wal_bytes, g.db_pages = s.pages, g.db_free_pages = s.free_pages, g.db_max_pages = s.max_pages;
  g.db_commits = s.commits, g.db_wal_syncs = s.wal_syncs;
  g.start_time = start_time_;
  metrics::sample_process(g);
  response res{200, metrics_.render(g)};
  res.content_type = "text/plain; version=0.0.4";
  return res;
}

}  // namespace folio::service
