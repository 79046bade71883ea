#!/bin/sh
# bench/storage.sh [BUILD_DIR] — per-write latency and throughput, SQLite against PostgreSQL in the same run
# (bench/storage_bench.cpp), PostgreSQL on a private cluster (scripts/pg-test-cluster: unix socket, fsync on)
# started for the run and removed after it (a fresh database every run). Arguments after BUILD_DIR go to
# storage_bench (--writes N).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
[ $# -gt 0 ] && shift
state=$(mktemp -d "${TMPDIR:-/tmp}/folio-storage-bench.XXXXXX")
trap '"$here/scripts/pg-test-cluster" stop "$state"; rm -rf "$state"' EXIT
"$here/scripts/pg-test-cluster" start "$state"
"$build/bench/storage_bench" "$(cat "$state/conninfo")" "$@"
