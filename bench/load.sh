#!/usr/bin/env bash
# HTTP load benchmark (issue 4): wrk against nginx in front of folio-fcgi, and in the same run the
# same nginx in front of a minimal FastCGI responder (hello-fcgi) — the stack's ceiling. Prints
# throughput and p50/p99 per endpoint with its ratio to the ceiling, and the update time of a record
# whose history is the whole automerge-paper trace against a fresh record of the same text.
#   bench/load.sh [SECONDS_PER_RUN]      (default 10; everything lives in a temporary directory)
set -euo pipefail
secs=${1:-10}
source "$(dirname "$0")/support/http_stack.sh"

# ---- data: a 1 KB text, 1,000 annotations in 20 locations, the trace records ----------------------
"$bin/bench/seed-history" "$db" "$tenant" org load automerge-paper.json.gz "$work/final.txt"
python3 - "$work" "$db" "$tenant" <<'PY'
import json, sys
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
# 1,000 annotations in 20 locations, written through the API in batches of 100
for b in range(10):
    batch = [{"annotationId": "a%04d" % i, "from": {"userId": "u%d" % (i % 7), "name": "U", "email": "u@x"}, "color": "#fff",
              "createdAt": "2025-01-%02dT00:00:%02d.000Z" % (1 + i % 28, i % 60), "location": {"id": "loc-%d" % (i % 20)},
              "commentData": [{"commentText": "c", "commentHtml": "<p>c</p>"}]} for i in range(b * 100, b * 100 + 100)]
    open(work + "/ann-add-%d.json" % b, "w").write(body({"organizationId": "org", "documentId": "anns", "commentAnnotations": batch}))
PY
curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add1k.json" >/dev/null
for b in $(seq 0 9); do curl -sf "$url/v2/commentannotations/add" "${h[@]}" -d @"$work/ann-add-$b.json" >/dev/null; done
for i in 0 1 2 3; do curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add100k-$i.json" >/dev/null; done

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
