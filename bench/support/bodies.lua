-- wrk script of the HTTP benchmarks (bench/support/http_stack.sh's `run`, bench/support/cluster_load.py): POSTs
-- JSON bodies read from files to TARGET with the credentials FOLIO_API_KEY and FOLIO_AUTH_TOKEN (environment).
-- BODIES: groups separated by ";" (thread k uses group k mod groups), files in a group by ",", sent in turn.
-- Prints "RESULT req/s p50_ms p99_ms errors requests".
local groups, counter = {}, 0
for g in string.gmatch(os.getenv("BODIES"), "[^;]+") do groups[#groups + 1] = g end
setup = function(thread) thread:set("group", groups[(counter % #groups) + 1]); counter = counter + 1 end
local files, n = nil, 0
init = function()
  files = {}
  for f in string.gmatch(group, "[^,]+") do local h = io.open(f, "rb"); files[#files + 1] = h:read("*a"); h:close() end
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-folio-api-key"] = os.getenv("FOLIO_API_KEY")
wrk.headers["x-folio-auth-token"] = os.getenv("FOLIO_AUTH_TOKEN")
request = function() n = n + 1; return wrk.format(nil, os.getenv("TARGET"), nil, files[(n % #files) + 1]) end
done = function(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.1f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors, summary.requests))
end
