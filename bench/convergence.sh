#!/usr/bin/env bash
# Convergence on demand: N seeded random multi-replica scenarios (2-5 replicas, concurrent edits,
# out-of-order and duplicated delivery through the wire encoding) for each of the four record types
# — text and array (tests/convergence_test.cpp), map and xml (tests/tree_convergence_test.cpp).
# Default 25,000 per type (100,000 in all). A divergence fails with its seed.
#   bench/convergence.sh [SCENARIOS_PER_TYPE]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
folio_install_deps
per_type=${1:-25000}
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=ON -DFOLIO_BUILD_BENCH=OFF >/dev/null
cmake --build build-release -j2 --target convergence_test tree_convergence_test
start=$(date +%s)
FOLIO_CONVERGENCE_SCENARIOS=$per_type build-release/tests/convergence_test --gtest_filter='*SeededRandom*'
FOLIO_CONVERGENCE_SCENARIOS=$per_type build-release/tests/tree_convergence_test --gtest_filter='*SeededRandom*'
echo "convergence: $((4 * per_type)) scenarios ($per_type per type: text, array, map, xml), 0 divergences, $(( $(date +%s) - start )) s"
