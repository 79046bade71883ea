#!/usr/bin/env bash
# Folio against peer CRDT libraries on the same editing traces, every figure as a ratio to the C++ gap
# buffer measured in the same run: runs bench/trace_bench (Folio + the gap buffer), then
# bench/peers/replay.mjs (Yjs and diamond-types through Node), then prints one table.
# Needs Node.js and npm (the packages come from the npm registry). On demand only; not part of CI.
#   bench/peers.sh [trace ...]      default: automerge-paper seph-blog1
set -euo pipefail
cd "$(dirname "$0")/.."
traces_dir=${FOLIO_TRACES_DIR:-$(cd .. && pwd)/shared/traces}
[ $# -gt 0 ] || set -- automerge-paper seph-blog1
(cd bench/peers && npm install --no-audit --no-fund --silent)
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_TRACES_DIR="$traces_dir" >/dev/null
cmake --build build-release -j2 --target trace_bench >/dev/null
for trace in "$@"; do
  folio=$(build-release/bench/trace_bench --benchmark_filter="^$trace/(gap_buffer|local_replay|remote_merge|encode|encode_zstd)\$" --benchmark_repetitions=5 2>/dev/null)
  gap=$(sed -n "s/^$trace: gap buffer replays .* in \([0-9.]*\) ms/\1/p" <<<"$folio")
  peers=$(node bench/peers/replay.mjs "$traces_dir/$trace.json.gz" 3)
  echo
  echo "$trace — ratios to the C++ gap buffer of this run ($gap ms)"
  printf '  %-15s %16s %16s %11s %11s\n' library "local replay" "remote merge" encoded "compressed"
  row() {  # library, local ms, merge ms, encoded bytes, compressed bytes (or -)
    awk -v l="$1" -v a="$2" -v m="$3" -v e="$4" -v z="$5" -v g="$gap" 'BEGIN {
      zs = z == "-" ? "-" : sprintf("%.1f KB", z / 1000)
      printf "  %-15s %8.1f ms %5.1fx %8.1f ms %5.1fx %8.1f KB %11s\n", l, a, a / g, m, m / g, e / 1000, zs }'
  }
  pick() { sed -n "s/^  $1 *\([0-9.]*\) \(ms\|KB\).*/\1/p" <<<"$folio"; }
  kb() { awk -v v="$1" 'BEGIN { print v * 1000 }'; }
  row folio "$(pick 'local replay')" "$(pick 'remote merge')" "$(kb "$(pick 'encoded size')")" "$(kb "$(pick 'zstd size')")"
  for lib in diamond-types yjs; do
    get() { node -e 'let v;for(const l of require("fs").readFileSync(0,"utf8").trim().split("\n")){const o=JSON.parse(l);if(o.lib===process.argv[1]&&o.figure===process.argv[2])v=o.value}console.log(v)' "$lib" "$1" <<<"$peers"; }
    z=-
    [ "$lib" = yjs ] && z=$(get encoded_bytes_v2)
    row "$lib" "$(get local_replay)" "$(get remote_merge)" "$(get encoded_bytes)" "$z"
  done
  echo "  (compressed: folio with zstd, yjs in its v2 update format; diamond-types has no other form here)"
done
