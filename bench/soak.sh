#!/usr/bin/env bash
# Soak: SECONDS (default 600) of mixed load through nginx + Nchan + folio-fcgi (Release) — gets,
# updates of text/map/xml records, sync pulls and folio-cli pushes, EventSource subscribers (held and
# churning), comment writes — sampling folio-fcgi's RSS and fds, nginx's RSS, the WAL, the database
# and latency every 10 s (bench/support/soak.py). Fails on any 5xx, heap growth of 5% or more after the
# warm-up (soak.py says how it is compared), or a WAL over 64 MB. The document cache is held to 32 MiB
# so that the 200 records (20,000 characters each) cycle through it and the run reaches its steady
# state within the warm-up.
#   bench/soak.sh [SECONDS]
set -euo pipefail
secs=1
source "$(dirname "$0")/support/http_stack.sh"
cmake --build build-release -j2 --target folio-cli >/dev/null
responder "$bin/service/folio-fcgi" --socket "$work/run/folio.sock" --db "$db" --workers 4 --cache-mb 32 "${live[@]}"
python3 bench/support/soak.py "$url" "$key" "$token" "${1:-600}" "$resp_pid" "$work/nginx/nginx.pid" "$db" "$bin/tools/folio-cli"
