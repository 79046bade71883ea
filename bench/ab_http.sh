#!/usr/bin/env bash
# Old and new folio-fcgi side by side over HTTP (the HTTP rows of bench/ab.sh's comparison): crdt/get of a
# 1 KB and of a 100 KB text record through the same nginx, measured by turns in each round — hello-fcgi
# answering the very same bytes (the ceiling), the other commit's folio-fcgi, this checkout's — each
# freshly started and warmed up for a second (http_stack.sh's warm_run), ROUNDS times, old and new in
# turn first (so that neither is always measured last). Prints
# per figure each side's median throughput and CPU time per request over the rounds, and the medians of
# the rounds' ratios: old and new against the ceiling, new against old. Both binaries serve one database
# (made by this checkout), so REV must be of the same schema version; a side answering errors stops the
# script.
#   bench/ab_http.sh REV [ROUNDS] [SECONDS_PER_RUN]      (defaults 5 and 5)
set -euo pipefail
rev=${1:?usage: bench/ab_http.sh REV [ROUNDS] [SECONDS_PER_RUN]}
rounds=${2:-5}
secs=${3:-5}
source "$(dirname "$0")/support/http_stack.sh"  # at the checkout's root from here on
source bench/support/ab_worktree.sh
ab_worktree_build "$rev" old_dir folio-fcgi

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
base = {"organizationId": "org", "documentId": "ab"}
for name, size in (("1k", 1024), ("100k", 100 * 1024)):
    text = ("Folio keeps \"shared\" state, één keer. " * (size // 30 + 1))[:size]
    open(work + "/add%s.json" % name, "w").write(json.dumps({"data": dict(base, editorId=name, type="text", data=text)}))
    open(work + "/get%s.json" % name, "w").write(json.dumps({"data": dict(base, editorId=name)}))
PY
for g in 1k 100k; do
  curl -sf "$url/v2/crdt/add" "${h[@]}" -d @"$work/add$g.json" >/dev/null
  curl -sf "$url/v2/crdt/get" "${h[@]}" -d @"$work/get$g.json" > "$work/get$g.out"
done

side_start() {  # SIDE FIGURE: the side's responder, freshly started
  case $1 in
    ceiling) responder "$bin/bench/hello-fcgi" "$work/run/folio.sock" 4 "$work/get$2.out" ;;
    old) responder "$old_dir/service/folio-fcgi" --socket "$work/run/folio.sock" --db "$db" --workers 4 "${live[@]}" --client-token-keys "$work/client-token.keys" ;;
    new) start_folio ;;
  esac
}
echo "bench/ab_http.sh: old $old_sha, new $new_sha, $rounds rounds of ${secs}s runs, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; ++r)); do
  for g in 1k 100k; do
    sides="ceiling old new"
    (( r % 2 )) || sides="ceiling new old"
    for side in $sides; do
      target=/v2/crdt/get
      [ $side = ceiling ] && target=/same-bytes
      side_start "$side" "$g"
      warm_run "$g-$side-$r" "$target" 2 16 "$work/get$g.json"
    done
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work" "$rounds" <<'PY'
import statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def res(g, side, r):
    rps = float(open("%s/%s-%s-%d.res" % (work, g, side, r)).read().split()[0])
    cpu = float(open("%s/%s-%s-%d.cpu" % (work, g, side, r)).read())
    return rps, cpu
med = statistics.median
print("\n  %-22s %11s %11s %11s %9s %9s %13s %13s %8s" % ("crdt/get, 16 conns", "ceiling/s", "old req/s", "new req/s", "old cpu", "new cpu",
                                                          "old/ceiling", "new/ceiling", "new/old"))
for g, label in (("1k", "1 KB text"), ("100k", "100 KB text")):
    rows = [{s: res(g, s, r) for s in ("ceiling", "old", "new")} for r in range(1, rounds + 1)]
    col = lambda s, i: med(x[s][i] for x in rows)
    ratio = lambda a, b: [x[a][0] / x[b][0] for x in rows]
    rng = lambda v: "%.2f (%.2f-%.2f)" % (med(v), min(v), max(v))
    print("  %-22s %11.0f %11.0f %11.0f %9.4f %9.4f %13s %13s %8s" % (label, col("ceiling", 0), col("old", 0), col("new", 0), col("old", 1), col("new", 1),
                                                                    "%.2f" % med(ratio("old", "ceiling")), "%.2f" % med(ratio("new", "ceiling")),
                                                                    "%.2f" % med(ratio("new", "old"))))
    print("  %-22s ranges over the rounds: old/ceiling %s, new/ceiling %s, new/old %s" % ("", rng(ratio("old", "ceiling")), rng(ratio("new", "ceiling")), rng(ratio("new", "old"))))
print("  (req/s and cpu, the responder's CPU ms per request, all threads: medians over the rounds; ratios: the medians of the")
print("   rounds' ratios, each round measuring the three by turns; the ceiling is hello-fcgi answering the very same bytes)")
PY
