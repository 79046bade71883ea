#!/bin/sh
# bench/versions.sh [BUILD_DIR] — bench/version_bench (versions and history on automerge-paper replayed as
# REST updates) on SQLite, then on PostgreSQL on a private cluster (scripts/pg-test-cluster: unix socket,
# fsync on) started for the run and removed after it (a fresh database). Arguments after BUILD_DIR go to
# version_bench (--step N, --samples N).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
[ $# -gt 0 ] && shift
"$build/bench/version_bench" "$@"
state=$(mktemp -d "${TMPDIR:-/tmp}/folio-versions-bench.XXXXXX")
trap '"$here/scripts/pg-test-cluster" stop "$state"; rm -rf "$state"' EXIT
"$here/scripts/pg-test-cluster" start "$state"
echo
"$build/bench/version_bench" "$(cat "$state/conninfo")" "$@"
