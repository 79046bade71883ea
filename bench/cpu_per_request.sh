#!/usr/bin/env bash
# CPU time folio-fcgi spends per request, by endpoint: the responder's user + system time (all its
# threads, from /proc/PID/stat) over a wrk run divided by the requests answered. Unlike latency and
# throughput, this hardly moves when other work shares the cores, so two builds can be compared on a
# busy machine (run it in each checkout; the baseline is hello-fcgi's CPU per request in the same run,
# the FastCGI floor). The workloads are bench/load.sh's: a 1 KB text get, one-character updates of
# 100 KB texts (4 writers on 4 records, and 1 writer), and a 1,000-annotation get by location.
#   bench/cpu_per_request.sh [SECONDS_PER_RUN]      (default 10)
set -euo pipefail
secs=${1:-10}
source "$(dirname "$0")/support/http_stack.sh"

python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
random.seed(7)
text = "".join(random.choice("abcdefghij klmnopqrstuvwxyz\n") for _ in range(100 * 1024))
base = {"organizationId": "org", "documentId": "cpu"}
def write(name, d):
    open(work + "/" + name, "w").write(json.dumps({"data": dict(base, **d)}))
write("get1k.json", {"editorId": "small"})
write("add1k.json", {"editorId": "small", "type": "text", "data": "x" * 1024})
for i in range(4):
    write("add-big%d.json" % i, {"editorId": "big%d" % i, "type": "text", "data": text})
    write("upd-big%d-a.json" % i, {"editorId": "big%d" % i, "data": text})
    write("upd-big%d-b.json" % i, {"editorId": "big%d" % i, "data": text[:50000] + "!" + text[50000:]})
open(work + "/ann.json", "w").write(json.dumps({"data": {"organizationId": "org", "documentId": "anns", "locationIds": ["loc-7"]}}))
for b in range(10):
    batch = [{"annotationId": "a%04d" % i, "from": {"userId": "u%d" % (i % 7), "name": "U", "email": "u@x"},
              "createdAt": "2025-01-%02dT00:00:%02d.000Z" % (1 + i % 28, i % 60), "location": {"id": "loc-%d" % (i % 20)},
              "commentData": [{"commentText": "c", "commentHtml": "<p>c</p>"}]} for i in range(b * 100, b * 100 + 100)]
    open(work + "/ann-add-%d.json" % b, "w").write(json.dumps({"data": {"organizationId": "org", "documentId": "anns", "commentAnnotations": batch}}))
PY
curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add1k.json" >/dev/null
for i in 0 1 2 3; do curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add-big$i.json" >/dev/null; done
for b in $(seq 0 9); do curl -sf "$url/v2/commentannotations/add" "${h[@]}" -d @"$work/ann-add-$b.json" >/dev/null; done

cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$resp_pid/stat"; }
measure() {  # NAME TARGET THREADS CONNECTIONS BODIES -> "$work/NAME.cpu": CPU ms per request, requests
  local before after n
  before=$(cpu_ms)
  run "$1" "$2" "$3" "$4" "$5"
  after=$(cpu_ms)
  read -r _ _ _ _ n < "$work/$1.res"
  awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN { printf "%.4f %d\n", (a - b) / n, n }' > "$work/$1.cpu"
}
big=""
for i in 0 1 2 3; do big+="$work/upd-big$i-a.json,$work/upd-big$i-b.json;"; done
measure get1k /v2/crdt/get 2 16 "$work/get1k.json"
measure update4 /v2/crdt/update 4 4 "$big"
measure update1 /v2/crdt/update 1 1 "$work/upd-big0-a.json,$work/upd-big0-b.json"
measure annotations /v1/commentannotations/get 2 16 "$work/ann.json"
responder "$bin/bench/hello-fcgi" "$work/run/folio.sock" 4
measure ceiling /v2/crdt/get 2 16 "$work/get1k.json"

read -r floor _ < "$work/ceiling.cpu"
printf '\nfolio-fcgi CPU time per request (user + system, all threads), %ss runs, commit %s, load %s\n' \
  "$secs" "$(git rev-parse --short=7 HEAD)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-44s %12s %9s %9s\n' endpoint "CPU ms/req" requests "vs floor"
for r in get1k:"crdt/get, 1 KB text, 16 conns" update4:"crdt/update, 100 KB, 1 char, 4 writers" update1:"crdt/update, 100 KB, 1 char, 1 writer" annotations:"commentannotations/get, 1000, by loc"; do
  read -r ms n < "$work/${r%%:*}.cpu"
  printf '  %-44s %12s %9s %9.1f\n' "${r#*:}" "$ms" "$n" "$(awk "BEGIN{print $ms / $floor}")"
done
read -r ms n < "$work/ceiling.cpu"
printf '  %-44s %12s %9s %9s\n' "hello-fcgi, the same gets (baseline)" "$ms" "$n" 1.0
printf '  (no target: a figure to compare builds by; bench/load.sh has the latency and throughput targets)\n'
