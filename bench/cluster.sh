#!/usr/bin/env bash
# 1, 2 and 3 nodes on PostgreSQL on this machine (issue 22): wrk through the stack's port (with 2 and 3
# nodes the round-robin front, Nchan over Redis, as scripts/cluster runs them; tests/e2e/stack.py starts
# them), for crdt/get of a 1 KB text (16 connections) and crdt/update of 1 KB texts (4 connections, one
# record each). Prints throughput and latency, the CPU time per request of each kind of process (summed
# over the nodes) and the document cache's hit rate, with ratios against 1 node from the same run.
# Two cores cannot show scaling: every node, PostgreSQL and Redis share them, so the figure to read is the
# CPU per request, which says what each node costs and where the time goes (docs/OPERATIONS.md).
#   bench/cluster.sh [SECONDS_PER_RUN]      (default 10)
set -euo pipefail
secs=${1:-10}
cd "$(dirname "$0")/.."
source scripts/deps.sh
folio_install_deps "${FOLIO_CLUSTER_PACKAGES[@]}"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=OFF >/dev/null
cmake --build build-release -j2 --target folio-fcgi folio-admin >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for n in 1 2 3; do
  python3 bench/support/cluster_load.py build-release . "$n" "$secs" | grep '^RESULT' >> "$out"
done
printf 'Nodes on PostgreSQL, %ss per run, wrk through the front (1 node: its own nginx); cpu ms per request answered,\n' "$secs"
printf 'summed over the processes of each kind; ratios against 1 node in this run\n'
printf '  %-9s %5s %9s %7s %7s %8s %6s %6s %6s %6s %8s %6s %8s %9s %9s %9s\n' workload nodes req/s p50_ms p99_ms requests errors \
  fcgi nginx front postgres redis cpu/req "hit rate" "req/s ×" "cpu/req ×"
awk '{ key = $2; total = $9 + $10 + $11 + $12 + $13
       if ($3 == 1) { base_rps[key] = $4; base_cpu[key] = total }
       printf "  %-9s %5s %9s %7s %7s %8s %6s %6.3f %6.3f %6.3f %8.3f %6.3f %8.3f %8.0f%% %9.2f %9.2f\n", $2, $3, $4, $5, $6, $7, $8,
              $9, $10, $11, $12, $13, total, 100 * $14, $4 / base_rps[key], total / base_cpu[key] }' "$out"
