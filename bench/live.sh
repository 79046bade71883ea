#!/usr/bin/env bash
# Live push benchmark (issue 6), through nginx + Nchan in front of folio-fcgi:
#  * one REST update fanned out to 1, 100 and 1,000 EventSource subscribers: delivery latency p50/p99
#    (update sent -> event read by the subscriber; with the number of deliveries measured), and the
#    update's own latency with those subscribers against the same updates with none (same run, same
#    record), judged against the targets of issues 6 and 23;
#  * a client 10,000 operations behind on the automerge-paper record syncing: bytes of the answer
#    against the record's full encoded document.
#   bench/live.sh [ROUNDS]      (default 200 updates per subscriber count: a p99 needs 200 samples, and
#                               one subscriber gets one delivery per update)
set -euo pipefail
secs=1
source "$(dirname "$0")/support/http_stack.sh"
rounds=${1:-200}
"$bin/bench/seed-history" "$db" "$tenant" org live automerge-paper.json.gz "$work/final.txt" | tee "$work/seed.txt"
python3 bench/support/live_fanout.py "$url" "$key" "$token" "$rounds" "$(grep -o '[0-9]* bytes encoded' "$work/seed.txt" | cut -d' ' -f1)"
