#!/usr/bin/env bash
# Presence benchmark (issue 53), through nginx + Nchan in front of folio-fcgi (bench/support/http_stack.sh):
# the fan-out delay of a presence announcement (POST /v2/presence/set with a changed state: an update
# published on the record's channel) to N EventSource subscribers, p50/p99 over ROUNDS announcements,
# against the same fan-out of a crdt/update's change message measured by turns in the same run (the
# baseline), and their ratio (bench/support/presence_fanout.py).
#   bench/presence.sh [ROUNDS] [SUBSCRIBERS]      (defaults 200 and 50: a p99 needs 200 samples)
set -euo pipefail
secs=1
source "$(dirname "$0")/support/http_stack.sh"
python3 bench/support/presence_fanout.py "$url" "$key" "$token" "${1:-200}" "${2:-50}"
