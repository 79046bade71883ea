#!/usr/bin/env bash
# The long fuzz run: every libFuzzer target for RUNS executions (default 10,000,000) over its seed
# corpus, reporting executions, time and coverage per target (scripts/fuzz). Extra arguments pick
# targets:  bench/fuzz.sh 10000000 request sync
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
folio_install_deps
runs=${1:-10000000}
shift $(( $# > 0 ? 1 : 0 ))
exec scripts/fuzz --runs "$runs" "$@"
