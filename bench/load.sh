#!/usr/bin/env bash
# HTTP load benchmark (issue 4): wrk against nginx in front of folio-fcgi, and in the same run the
# same nginx in front of a minimal FastCGI responder (hello-fcgi) — the stack's ceiling. Prints
# throughput and p50/p99 per endpoint with its ratio to the ceiling, and the update time of a record
# whose history is the whole automerge-paper trace against a fresh record of the same text.
#   bench/load.sh [SECONDS_PER_RUN]      (default 10; everything lives in a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
folio_install_deps
secs=${1:-10}
traces=${FOLIO_TRACES_DIR:-$(cd .. && pwd)/shared/traces}
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON -DFOLIO_TRACES_DIR="$traces" >/dev/null
cmake --build build-release -j2 --target folio-fcgi folio-admin hello-fcgi seed-history >/dev/null
bin=$PWD/build-release
work=$(mktemp -d /tmp/folio-load.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
db=$work/folio.db
key=$("$bin/tools/folio-admin" --db "$db" create-key load)
token=$("$bin/tools/folio-admin" --db "$db" create-token "${key:3:16}" load)
tenant=${key:3:16}
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  sleep 0.5
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
responder() {  # starts folio-fcgi or hello-fcgi on the socket nginx uses
  [ -n "${resp_pid:-}" ] && kill "$resp_pid" && wait "$resp_pid" 2>/dev/null || true
  mkdir -p "$work/run" "$work/log"
  "$@" 2>>"$work/log/responder.log" &
  resp_pid=$!
  pids+=("$resp_pid")
  for _ in $(seq 100); do [ -S "$work/run/folio.sock" ] && break; sleep 0.05; done
}
responder "$bin/fcgi/folio-fcgi" --socket "$work/run/folio.sock" --db "$db" --workers 4
mkdir -p "$work/nginx"
FOLIO_ACCESS_LOG=off scripts/nginx-conf "$work" "$port" 10000000 > "$work/nginx/nginx.conf"
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
sleep 0.5
url=http://127.0.0.1:$port

# ---- data: a 1 KB text, 1,000 annotations in 20 locations, the trace records ----------------------
"$bin/bench/seed-history" "$db" "$tenant" org load automerge-paper.json.gz "$work/final.txt"
python3 - "$work" "$db" "$tenant" <<'PY'
import json, sqlite3, sys
work, db, tenant = sys.argv[1:4]
text = open(work + "/final.txt", encoding="utf-8").read()
def body(d): return json.dumps({"data": d})
base = {"organizationId": "org", "documentId": "load"}
open(work + "/get1k.json", "w").write(body(dict(base, editorId="small")))
open(work + "/add1k.json", "w").write(body(dict(base, editorId="small", type="text", data="x" * 1024)))
for i in range(4):
    open(work + "/add100k-%d.json" % i, "w").write(body(dict(base, editorId="big%d" % i, type="text", data=text)))
for name, editor in [("big%d" % i, "big%d" % i) for i in range(4)] + [("history", "history"), ("fresh", "fresh")]:
    open(work + "/upd-%s-a.json" % name, "w").write(body(dict(base, editorId=editor, data=text)))
    open(work + "/upd-%s-b.json" % name, "w").write(body(dict(base, editorId=editor, data=text[:50000] + "!" + text[50000:])))
open(work + "/ann.json", "w").write(body({"organizationId": "org", "documentId": "anns", "locationIds": ["loc-7"]}))
con = sqlite3.connect(db)
for i in range(1000):
    created = "2025-01-%02dT00:00:%02d.000Z" % (1 + i % 28, i % 60)
    a = {"annotationId": "a%04d" % i, "comments": [{"commentId": 1, "commentText": "c", "commentHtml": "<p>c</p>",
         "from": {"userId": "u%d" % (i % 7), "name": "U", "email": "u@x"}, "lastUpdated": created}],
         "from": {"userId": "u%d" % (i % 7), "name": "U", "email": "u@x"}, "color": "#fff", "createdAt": created,
         "lastUpdated": created, "status": {"id": "OPEN", "name": "Open", "color": "#0f0", "type": "default"},
         "location": {"id": "loc-%d" % (i % 20)}}
    con.execute("INSERT INTO annotations VALUES (?,?,?,?,?,?,?,?)", (tenant, "org", "anns", a["annotationId"], "loc-%d" % (i % 20),
                a["from"]["userId"], created, json.dumps(a, separators=(",", ":"), sort_keys=True)))
con.commit()
PY
h=(-H 'Content-Type: application/json' -H "x-folio-api-key: $key" -H "x-folio-auth-token: $token")
curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add1k.json" >/dev/null
for i in 0 1 2 3; do curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add100k-$i.json" >/dev/null; done

# BODIES: groups separated by ";" (thread k uses group k mod groups), files in a group by ",", sent in turn.
cat > "$work/wrk.lua" <<LUA
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
wrk.headers["x-folio-api-key"] = "$key"
wrk.headers["x-folio-auth-token"] = "$token"
request = function() n = n + 1; return wrk.format(nil, os.getenv("TARGET"), nil, files[(n % #files) + 1]) end
done = function(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.1f %.3f %.3f %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors))
end
LUA
# run NAME TARGET THREADS CONNECTIONS BODIES -> "rps p50_ms p99_ms errors"
run() {
  local name=$1 target=$2 threads=$3 conns=$4 bodies=$5
  BODIES=$bodies TARGET=$target wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$work/wrk.lua" "$url" | sed -n 's/^RESULT //p' > "$work/$name.res"
}
# Updates: one record per connection (4 threads x 1 connection), so the figure is the service time of an
# update rather than the queue of writers on one record.
big=""
for i in 0 1 2 3; do big+="$work/upd-big$i-a.json,$work/upd-big$i-b.json;"; done
run get1k /v2/crdt/get 2 16 "$work/get1k.json"
run update100k /v2/crdt/update 4 4 "$big"
run annotations /v1/commentannotations/get 2 16 "$work/ann.json"
run history /v2/crdt/update 1 1 "$work/upd-history-a.json,$work/upd-history-b.json"
run fresh /v2/crdt/update 1 1 "$work/upd-fresh-a.json,$work/upd-fresh-b.json"
responder "$bin/bench/hello-fcgi" "$work/run/folio.sock" 4
run ceiling /v2/crdt/get 2 16 "$work/get1k.json"

read -r c_rps c_p50 c_p99 c_err < "$work/ceiling.res"
printf '\nHTTP load, %ss per run, wrk -t2 (ratios against hello-fcgi behind the same nginx, same run)\n' "$secs"
printf '  %-34s %10s %9s %9s %7s %s\n' endpoint req/s p50_ms p99_ms errors "throughput vs ceiling"
for r in get1k:"crdt/get, 1 KB text, 16 conns" update100k:"crdt/update, 100 KB, 1 char, 4x1 conn" annotations:"commentannotations/get, 1000, by loc" history:"update, automerge-paper history, 1 conn" fresh:"update, same text fresh, 1 conn"; do
  name=${r%%:*} label=${r#*:}
  read -r rps p50 p99 err < "$work/$name.res"
  printf '  %-34s %10s %9s %9s %7s %6.2f\n' "$label" "$rps" "$p50" "$p99" "$err" "$(awk "BEGIN{print $rps / $c_rps}")"
done
printf '  %-34s %10s %9s %9s %7s   1.00 (baseline)\n' "ceiling: hello-fcgi, 16 conns" "$c_rps" "$c_p50" "$c_p99" "$c_err"
read -r _ g50 g99 _ < "$work/get1k.res"; read -r _ u50 u99 _ < "$work/update100k.res"
read -r _ h50 h99 _ < "$work/history.res"; read -r _ f50 f99 _ < "$work/fresh.res"
printf '  update p99 / get p99: %.2f one writer (the fresh 100 KB record), %.2f with 4 writers queued on SQLite (target <= 5)\n' \
  "$(awk "BEGIN{print $f99 / $g99}")" "$(awk "BEGIN{print $u99 / $g99}")"
printf '  history / fresh update: p50 %.2f, p99 %.2f (target <= 1.5)\n' "$(awk "BEGIN{print $h50 / $f50}")" "$(awk "BEGIN{print $h99 / $f99}")"
