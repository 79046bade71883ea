#!/usr/bin/env bash
# Comment annotation benchmark (issue 5), through nginx in front of folio-fcgi, with baselines from the
# same run:
#   * /v2/commentannotations/add of 100-annotation batches (2 comments each, ids generated): latency on
#     one connection and throughput on 4, against (a) the bare SQLite transaction that writes the same
#     rows with the same pragmas (Python's sqlite3, WAL, synchronous=FULL) and (b) hello-fcgi taking
#     the same request bodies behind the same nginx;
#   * v1 get with each filter of docs/API.md, "Comment annotations" (and a v2 page) on a document holding 10,000 annotations,
#     against hello-fcgi answering the very same response bytes behind the same nginx — what moving
#     that response costs without Folio; each filter judged against issue 23's target (>= 0.5) by the
#     median of FOLIO_BENCH_ROUNDS rounds (default 3) that measure the two by turns (http_stack.sh's
#     against_ceiling), with each responder's CPU time per request (http_stack.sh's run), the figure
#     to compare builds by.
# Latency percentiles come with the number of requests that measured them (a p99 from fewer than 200 is
# not printed; runs that measure fewer are lengthened, see support/http_stack.sh).
#   bench/annotations_load.sh [SECONDS_PER_RUN]      (default 5; everything lives in a temporary directory)
set -euo pipefail
secs=${1:-5}
source "$(dirname "$0")/support/http_stack.sh"

# ---- data -------------------------------------------------------------------------------------------
python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
random.seed(5)
def body(d): return json.dumps({"data": d})
STATUSES = ["OPEN", "RESOLVED", "IN_PROGRESS", "ARCHIVED"]
def annotation(i, with_id=True):
    a = {"from": {"userId": "u%d" % (i % 20), "name": "User %d" % (i % 20), "email": "u%d@example.com" % (i % 20)},
         "color": "#%06x" % (i * 7919 % 0xffffff), "location": {"id": "loc-%d" % (i % 50), "locationName": "Section %d" % (i % 50)},
         "status": {"id": STATUSES[i % 4], "name": STATUSES[i % 4].title(), "color": "#00aa00", "type": "default"},
         "createdAt": "2025-%02d-%02dT%02d:%02d:%02d.%03dZ" % (1 + i % 12, 1 + i % 28, i % 24, i % 60, (i * 7) % 60, i % 1000),
         "context": {"quote": "the quoted passage %d" % i, "offset": i},
         "commentData": [{"commentText": "Comment %d: could this sentence be shorter and clearer?" % i,
                          "commentHtml": "<p>Comment %d: could this sentence be <b>shorter</b> and clearer?</p>" % i},
                         {"commentText": "Agreed, rewriting it now.", "commentHtml": "<p>Agreed, rewriting it now.</p>",
                          "from": {"userId": "u%d" % ((i + 1) % 20), "name": "User", "email": "r@example.com"}}]}
    if with_id:
        a["annotationId"] = "b%05d" % i
    return a
for b in range(100):  # the 10,000-annotation document
    open(work + "/seed-%d.json" % b, "w").write(body({"organizationId": "org", "documentId": "big",
                                                      "commentAnnotations": [annotation(b * 100 + i) for i in range(100)]}))
for k in range(8):  # add bodies: ids generated, so every request writes 100 new annotations
    open(work + "/add-%d.json" % k, "w").write(body({"organizationId": "org", "documentId": "adds",
                                                     "commentAnnotations": [annotation(k * 100 + i, False) for i in range(100)]}))
ids = ["b%05d" % i for i in random.sample(range(10000), 100)]
base = {"organizationId": "org", "documentId": "big"}
gets = {
    "v1-all": {},
    "v1-location": {"locationIds": ["loc-7"]},
    "v1-user": {"userIds": ["u3"]},
    "v1-location-user": {"locationIds": ["loc-7"], "userIds": ["u7"]},
    "v1-ids": {"annotationIds": ids + ["missing-%d" % i for i in range(5)]},
    "v1-location-ids": {"locationIds": ["loc-7", "loc-8"], "annotationIds": ids},
    "v2-page-status": {"statusIds": ["RESOLVED"], "pageSize": 1000},
}
for name, f in gets.items():
    open(work + "/%s.json" % name, "w").write(body(dict(base, **f)))
open(work + "/gets", "w").write(" ".join(gets))
PY

# The bare SQLite baseline: the rows one add writes (100 annotations, 200 comments, bodies of the same
# size), one transaction each, the same pragmas, on the same file system.
python3 - "$work" > "$work/sqlite.res" <<'PY'
import json, sqlite3, sys, time
work = sys.argv[1]
items = json.load(open(work + "/add-0.json"))["data"]["commentAnnotations"]
con = sqlite3.connect(work + "/baseline.db", isolation_level=None)
con.execute("PRAGMA journal_mode=WAL"); con.execute("PRAGMA synchronous=FULL")
con.execute("CREATE TABLE a (t, o, d, id, loc, usr, st, c, u, body, PRIMARY KEY (t, o, d, id)) WITHOUT ROWID")
con.execute("CREATE TABLE c (t, o, d, id, cid, body, PRIMARY KEY (t, o, d, id, cid)) WITHOUT ROWID")
for n, ix in enumerate(("c, id", "loc, c, id", "usr, c, id", "st, c, id")):
    con.execute("CREATE INDEX a_%d ON a (t, o, d, %s)" % (n, ix))
times = []
for r in range(250):
    t0 = time.perf_counter()
    con.execute("BEGIN IMMEDIATE")
    for i, a in enumerate(items):
        aid = "r%dx%d" % (r, i)
        head = dict(a); head.pop("commentData")
        con.execute("INSERT INTO a VALUES ('t','org','adds',?,?,?,?,?,?,?)", (aid, a["location"]["id"], a["from"]["userId"], a["status"]["id"],
                    a["createdAt"], a["createdAt"], json.dumps(head)))
        for k, c in enumerate(a["commentData"]):
            con.execute("INSERT INTO c VALUES ('t','org','adds',?,?,?)", (aid, k + 1, json.dumps(c)))
    con.execute("COMMIT")
    times.append((time.perf_counter() - t0) * 1000)
times.sort()
print("%.3f %.3f %d" % (times[len(times) // 2], times[int(len(times) * 0.99)], len(times)))
PY

t0=$(date +%s.%N)
for b in $(seq 0 99); do curl -sf "$url/v2/commentannotations/add" "${h[@]}" -d @"$work/seed-$b.json" >/dev/null; done
t1=$(date +%s.%N)
for g in $(cat "$work/gets"); do
  curl -sf "$url$( [[ $g == v2* ]] && echo /v2 || echo /v1)/commentannotations/get" "${h[@]}" -d @"$work/$g.json" > "$work/$g.out"
done

# ---- runs ---------------------------------------------------------------------------------------------
adds=""
for k in 0 1 2 3 4 5 6 7; do adds+="$work/add-$k.json,"; done
run add1 /v2/commentannotations/add 1 1 "$adds"
run add4 /v2/commentannotations/add 4 4 "$adds"
for g in $(cat "$work/gets"); do
  against_ceiling "$g" "$( [[ $g == v2* ]] && echo /v2 || echo /v1)/commentannotations/get" 2 8 "$work/$g.json" /same-bytes "$work/$g.out"
done
responder "$bin/bench/hello-fcgi" "$work/run/folio.sock" 4
run add1-ceiling /v2/commentannotations/add 1 1 "$adds"
run add4-ceiling /v2/commentannotations/add 4 4 "$adds"

# ---- report ---------------------------------------------------------------------------------------------
read -r s50 s99 s_n < "$work/sqlite.res"
printf '\nComment annotations, %ss per run (longer where that measured fewer than 200 requests; p99 "-" below 200),\n' "$secs"
printf 'wrk; baselines measured in this run\n'
printf '  seeding: 100 sequential adds of 100 annotations (10,000, 20,000 comments): %.2f s\n' "$(awk "BEGIN{print $t1 - $t0}")"
printf '\n  %-36s %8s %8s %8s %8s %6s  %s\n' "add, 100 annotations + 200 comments" req/s requests p50_ms p99_ms errors "vs baseline (no target)"
read -r r1 r1_50 r1_99 r1_err r1_n < "$work/add1.res"; read -r c1 _ _ _ _ < "$work/add1-ceiling.res"
printf '  %-36s %8s %8s %8s %8s %6s  p50 %.2fx the bare SQLite transaction (p50 %s ms of %s), throughput %.3fx hello-fcgi\n' \
  "1 connection" "$r1" "$r1_n" "$r1_50" "$(p99 "$r1_99" "$r1_n")" "$r1_err" "$(awk "BEGIN{print $r1_50 / $s50}")" "$s50" "$s_n" "$(awk "BEGIN{print $r1 / $c1}")"
read -r r4 r4_50 r4_99 r4_err r4_n < "$work/add4.res"; read -r c4 _ _ _ _ < "$work/add4-ceiling.res"
printf '  %-36s %8s %8s %8s %8s %6s  %.0f annotations/s; throughput %.3fx hello-fcgi\n' \
  "4 connections" "$r4" "$r4_n" "$r4_50" "$(p99 "$r4_99" "$r4_n")" "$r4_err" "$(awk "BEGIN{print $r4 * 100}")" "$(awk "BEGIN{print $r4 / $c4}")"
printf '\n  %-36s %7s %6s %8s %8s %8s %8s %6s %10s %10s %7s %9s  %s\n' "get on 10,000 annotations, 8 conns" results KB req/s requests p50_ms p99_ms errors cpu_ms/req "same: cpu" "vs same" range "target: verdict"
for g in $(cat "$work/gets"); do
  results=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['result']['data']))" "$work/$g.out")
  kb=$(awk "BEGIN{printf \"%.0f\", $(stat -c %s "$work/$g.out") / 1024}")
  read -r rps p50 p99v err n < "$work/$g.res"
  read -r ratio lo hi _ < "$work/$g.ratios"
  printf '  %-36s %7s %6s %8s %8s %8s %8s %6s %10s %10s %7s %9s  %s\n' "$g" "$results" "$kb" "$rps" "$n" "$p50" "$(p99 "$p99v" "$n")" "$err" \
    "$(cat "$work/$g.cpu")" "$(cat "$work/$g-ceiling.cpu")" "$ratio" "$lo-$hi" "$(judge "$ratio" '>=' 0.5 'issue 23')"
done
printf '  (vs same: throughput against hello-fcgi answering the very same bytes behind the same nginx, same run: the baseline;\n'
printf '   the median of %s rounds that measured the two by turns, each after a warm-up (http_stack.sh'"'"'s against_ceiling);\n' "${FOLIO_BENCH_ROUNDS:-3}"
printf '   range: the rounds'"'"' lowest and highest ratio; the median round'"'"'s figures are shown;\n'
printf '   cpu_ms/req: folio-fcgi'"'"'s CPU time per request, all threads, which moves less than throughput with other work on the cores: compare\n'
printf '   builds by it; same: cpu: hello-fcgi'"'"'s for the same bytes)\n'
