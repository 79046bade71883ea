#!/usr/bin/env bash
# Instructions each editing-trace workload of bench/trace_bench executes, counted by callgrind over its
# measured part alone (bench/instruction_counts.cpp), per patch or batch, and as a ratio against the gap
# buffer counted in the same run. A count does not move with other work on the cores, so it resolves
# changes of a few percent that wall-clock time on a shared machine cannot: steer the engine's hot paths
# by it. It is not time (a load that misses the cache counts as one instruction like any other): the
# issues' targets are judged on trace_bench's time ratios, so these rows have none.
#   bench/instructions.sh [TRACE]      (a file of bench/traces; default automerge-paper.json.gz; ~1 minute)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
folio_install_deps valgrind
trace=${1:-automerge-paper.json.gz}
traces=${FOLIO_TRACES_DIR:-$PWD/bench/traces}
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON -DFOLIO_TRACES_DIR="$traces" >/dev/null
cmake --build build-release -j2 --target instruction_counts >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

count() {  # count MODE: "units instructions" into $work/MODE.res (exits the script on any failure)
  local units collected
  valgrind --tool=callgrind --callgrind-out-file="$work/$1.out" --collect-atstart=no --toggle-collect="measured_$1(*" \
    build-release/bench/instruction_counts "$1" "$trace" > "$work/$1.txt" 2> "$work/$1.log" ||
    { cat "$work/$1.log" >&2; exit 1; }
  read -r _ units < "$work/$1.txt"
  collected=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/$1.log")
  [ "${collected:-0}" -gt 0 ] && [ "${units:-0}" -gt 0 ] || { echo "instructions.sh: callgrind counted nothing for $1" >&2; exit 1; }
  echo "$units $collected" > "$work/$1.res"
}

echo "Instructions under callgrind ($(valgrind --version)), $trace, commit $(git rev-parse --short=7 HEAD), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "(ratios: the whole trace's instructions against the gap buffer's, counted in this run, as trace_bench's"
echo " time ratios are taken; a steering figure, not time: no targets)"
printf '  %-48s %10s %16s %10s %9s\n' workload units instructions "per unit" "vs gap"
count gap
read -r gap_units gap_n < "$work/gap.res"
row() {  # row LABEL UNITS INSTRUCTIONS
  awk -v l="$1" -v u="$2" -v n="$3" -v gn="$gap_n" 'BEGIN { printf "  %-48s %10d %16d %10.1f %8.2fx\n", l, u, n, n / u, n / gn }'
}
row "gap buffer, every patch (baseline)" "$gap_units" "$gap_n"
for m in local:"local edits of folio::text, every patch" remote_keys:"remote keys: a batch a patch, document::apply" \
         decode:"  decoding alone (decode_batch)" integrate:"  integrating alone (text::apply)"; do
  count "${m%%:*}"
  read -r units n < "$work/${m%%:*}.res"
  row "${m#*:}" "$units" "$n"
done
echo "  (units: patches for the first two rows, batches for the rest: a patch that deletes and inserts is two."
echo "   Decoding and integrating are counted apart, each in a loop of its own, through decode_batch and"
echo "   text::apply; document::apply reads a keystroke's op from its bytes and integrates it without an"
echo "   op_batch, so remote keys is not their sum plus a remainder: the two rows show the shares)"
