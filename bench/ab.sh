#!/usr/bin/env bash
# Old and new binaries side by side: builds the engine benchmarks (trace_bench, record_bench, json_bench)
# of this checkout and of another commit (a worktree under build-ab/, Release), runs them in turn, old
# then new, ROUNDS times, and prints for every benchmark the median over the rounds of each side's CPU
# time and the ratio new / old (the baseline is the old binary of the same run). A restructuring shows
# "unchanged within noise" as ratios near 1.00 across the table; the spread column is the larger of the
# two sides' (max - min) / median over the rounds, the noise a ratio should be read against.
#   bench/ab.sh REV [ROUNDS] [FILTER]    (ROUNDS default 5; FILTER a --benchmark_filter regex, default all)
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/ab.sh REV [ROUNDS] [FILTER]}
rounds=${2:-5}
filter=${3:-.}
source scripts/deps.sh
folio_install_deps
source bench/support/ab_worktree.sh
targets=(trace_bench record_bench json_bench)
ab_worktree_build "$rev" old_dir "${targets[@]}"
ab_build . build-ab/new "${targets[@]}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/ab.sh: old $old_sha, new $new_sha, $rounds rounds, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; ++r)); do
  for t in "${targets[@]}"; do
    for side in old new; do
      dir=build-ab/new
      [ $side = old ] && dir=$old_dir
      "$dir/bench/$t" --benchmark_filter="$filter" --benchmark_out="$out/$t-$side-$r.json" \
        --benchmark_out_format=json >/dev/null 2>&1
    done
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$rounds" <<'PY'
import glob, json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
times = {}  # (bench, side) -> [cpu ms per round]
order = []
for path in sorted(glob.glob(out + "/*.json")):
    side = path.rsplit("-", 2)[-2]
    if not open(path).read(1):
        continue  # the filter selected none of this binary's benchmarks
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate" or "cpu_time" not in b:
            continue
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        key = b["name"]
        if key not in order:
            order.append(key)
        times.setdefault((key, side), []).append(b["cpu_time"] * scale)
print("\n  %-58s %11s %11s %7s %7s" % ("benchmark (CPU time, median of %d rounds)" % rounds, "old ms", "new ms", "new/old", "spread"))
ratios = []
for key in order:
    o, n = times.get((key, "old")), times.get((key, "new"))
    if not o or not n:
        print("  %-58s %s" % (key[:58], "only in " + ("old" if o else "new")))
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    spread = max((max(v) - min(v)) / statistics.median(v) for v in (o, n) if statistics.median(v) > 0)
    ratios.append(mn / mo)
    print("  %-58s %11.4f %11.4f %7.2f %6.0f%%" % (key[:58], mo, mn, mn / mo, 100 * spread))
if ratios:
    g = 1.0
    for r in ratios:
        g *= r
    print("\n  %d benchmarks: geometric mean of new/old %.3f, smallest %.2f, largest %.2f" % (len(ratios), g ** (1 / len(ratios)), min(ratios), max(ratios)))
PY
