#!/usr/bin/env bash
# Webhooks benchmark (issue 52): folio-fcgi behind nginx (bench/support/http_stack.sh) delivering to a
# receiver on loopback (bench/support/webhook_receiver.py, allowed by --webhook-allow 127.0.0.1).
#  * Deliveries per second: 5,000 events (annotations added 100 a request) whose deliveries failed
#    (the receiver answering 503; --webhook-retries 1ms: two attempts each), then replayed at once
#    (deliveries/replay failedSince) to the receiver answering 204: 5,000 over the time from the replay's
#    answer to the last delivery — the sender alone. Then 5,000 more events written while the receiver
#    answers 204: from the first write to the last delivery, end to end (writes included).
#  * crdt/update p50 and p99 with three endpoints subscribed against none (4 writers on 4 small text
#    records, wrk, $secs s a run), measured by turns, FOLIO_BENCH_ROUNDS rounds (default 3; the median
#    round's ratio), the endpoints added before and deleted after each run with them: with the default
#    settings (a record's updates coalesce into one event per 5 s) and with --webhook-coalesce 1 (every
#    update an event, three deliveries each: the sender's whole cost beside the writes). The goal is
#    a ratio <= 1.1 (issue 52), judged on the p99s; the table shows the median p99 round's figures.
#   bench/webhooks.sh [SECONDS_PER_RUN]      (default 5; everything lives in a temporary directory)
set -euo pipefail
secs=${1:-5}
source "$(dirname "$0")/support/http_stack.sh"

rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 bench/support/webhook_receiver.py "$rport" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$rport/stats" >/dev/null && break; sleep 0.05; done
receiver() { curl -sf "http://127.0.0.1:$rport$1"; }
start_webhooks() {  # folio-fcgi as start_folio starts it, with the receiver allowed and the flags given
  responder "$bin/service/folio-fcgi" --socket "$work/run/folio.sock" --db "$db" --workers 4 "${live[@]}" \
    --client-token-keys "$work/client-token.keys" --webhook-allow 127.0.0.1 "$@"
}
api() {  # PATH JSON_DATA -> the answer's result.data (JSON); stops the script on an error answer
  local out
  out=$(curl -s "$url$1" "${h[@]}" -d "{\"data\":$2}")
  python3 -c 'import json, sys; a = json.loads(sys.argv[1]); r = a.get("result")
if not r or r.get("status") != "success": sys.exit("bench/webhooks.sh: %s answered %s" % (sys.argv[2], sys.argv[1]))
print(json.dumps(r.get("data")))' "$out" "$1"
}
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
add_endpoint() { field "$(api /v2/webhooks/endpoints/add "{\"url\":\"http://127.0.0.1:$rport/$1\"}")" endpointId; }
delete_endpoint() { api /v2/webhooks/endpoints/delete "{\"endpointId\":\"$1\"}" >/dev/null; }
wait_for() {  # SECONDS WHAT COMMAND...: polls COMMAND every 0.1 s until it succeeds
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "bench/webhooks.sh: $what did not happen within the time" >&2; tail -n 5 "$work/log/responder.log" >&2; exit 1; }
    sleep 0.1
  done
}
stat_of() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$(receiver /stats)" "$1"; }
ok_ids_at_least() { [ "$(stat_of ok_ids)" -ge "$1" ]; }
queue_empty() { [ "$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["endpoints"][0]["queued"])' "$(api /v2/webhooks/endpoints/get "{\"endpointIds\":[\"$1\"]}")")" = 0 ]; }

events=5000
python3 - "$work" "$events" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
for part in ("a", "b"):
    for b in range(n // 100):
        batch = [{"annotationId": "%s%d-%d" % (part, b, i), "from": {"userId": "u%d" % (i % 7), "name": "U", "email": "u@x"}, "commentData": []}
                 for i in range(100)]
        open("%s/hooks-%s-%d.json" % (work, part, b), "w").write(json.dumps({"data": {"organizationId": "org", "documentId": "hooks", "commentAnnotations": batch}}))
for r in range(4):
    for side in ("a", "b"):
        open("%s/upd-%d-%s.json" % (work, r, side), "w").write(json.dumps({"data": {"organizationId": "org", "documentId": "upd", "editorId": "r%d" % r,
                                                                                    "data": "x" * 1000 + ("a" if side == "a" else "b")}}))
PY
post_batches() { local b; for b in $(seq 0 $((events / 100 - 1))); do curl -sf "$url/v2/commentannotations/add" "${h[@]}" -d @"$work/hooks-$1-$b.json" >/dev/null; done; }

# ---- deliveries per second -----------------------------------------------------------------------
start_webhooks --webhook-retries 1ms
receiver /status?code=503 >/dev/null
ep=$(add_endpoint backlog)
since=$(date -u -d '-2 seconds' '+%Y-%m-%dT%H:%M:%S.000Z')
post_batches a
wait_for 300 "the failing deliveries" queue_empty "$ep"
receiver /status?code=204 >/dev/null
receiver /reset >/dev/null
t0=$(date +%s.%N)
replayed=$(field "$(api /v2/webhooks/deliveries/replay "{\"endpointId\":\"$ep\",\"failedSince\":\"$since\"}")" replayed)
t1=$(date +%s.%N)
wait_for 300 "the replayed deliveries" ok_ids_at_least "$replayed"
backlog_rate=$(awk -v n="$replayed" -v a="$t1" -v b="$(stat_of last_ok)" 'BEGIN { printf "%.0f", n / (b - a) }')
replay_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
receiver /reset >/dev/null
t0=$(date +%s.%N)
post_batches b
written=$(date +%s.%N)
wait_for 300 "the live deliveries" ok_ids_at_least "$events"
live_rate=$(awk -v n="$events" -v a="$t0" -v b="$(stat_of last_ok)" 'BEGIN { printf "%.0f", n / (b - a) }')
write_rate=$(awk -v n="$events" -v a="$t0" -v b="$written" 'BEGIN { printf "%.0f", n / (b - a) }')
delete_endpoint "$ep"

# ---- crdt/update with three endpoints against none, by turns -------------------------------------
bodies=""
for r in 0 1 2 3; do bodies+="$work/upd-$r-a.json,$work/upd-$r-b.json;"; done
for r in 0 1 2 3; do curl -sf "$url/v2/crdt/add" "${h[@]}" -d "{\"data\":{\"organizationId\":\"org\",\"documentId\":\"upd\",\"editorId\":\"r$r\",\"type\":\"text\",\"data\":\"\"}}" >/dev/null; done
rounds=$(bench_rounds bench/webhooks.sh)
with_three() {  # NAME: a run with three endpoints subscribed, deleted after it
  local e1 e2 e3
  e1=$(add_endpoint one); e2=$(add_endpoint two); e3=$(add_endpoint three)
  run "$1" /v2/crdt/update 4 4 "$bodies"
  delete_endpoint "$e1"; delete_endpoint "$e2"; delete_endpoint "$e3"
}
measure() {  # CONFIG FLAGS...: rounds of none and three by turns; writes $work/CONFIG.ratios "p50 lo hi p99 lo hi n_min"
  local config=$1 k
  shift
  start_webhooks "$@"
  secs_keep=$secs; secs=1; run "$config-warm" /v2/crdt/update 4 4 "$bodies"; secs=$secs_keep
  for k in $(seq 1 "$rounds"); do
    if (( k % 2 )); then run "$config-none.$k" /v2/crdt/update 4 4 "$bodies"; with_three "$config-three.$k"
    else with_three "$config-three.$k"; run "$config-none.$k" /v2/crdt/update 4 4 "$bodies"; fi
  done
  for k in $(seq 1 "$rounds"); do
    awk -v k="$k" 'NR == FNR { p50 = $2; p99 = $3; n = $5; e = $4; next } { printf "%.9g %.9g %d %d %d\n", p50 / $2, p99 / $3, (n < $5 ? n : $5), e + $4, k }' \
      "$work/$config-three.$k.res" "$work/$config-none.$k.res"
  done > "$work/$config.rounds"
  local p50 p50_lo p50_hi p99 p99_lo p99_hi n errors
  read -r p50 p50_lo p50_hi _ _ < <(spread "$work/$config.rounds" 1)
  read -r p99 p99_lo p99_hi _ k < <(spread "$work/$config.rounds" 2)  # the judged figure's median round is shown
  n=$(awk 'NR == 1 || $3 < m { m = $3 } END { print m }' "$work/$config.rounds")
  errors=$(awk '{ e += $4 } END { print e + 0 }' "$work/$config.rounds")
  echo "$p50 $p50_lo $p50_hi $p99 $p99_lo $p99_hi $n $errors $k" > "$work/$config.ratios"
}
measure default
measure every --webhook-coalesce 1 --webhook-coalesce-max 1

printf '\nWebhooks: deliveries to a receiver on loopback (204 at once), wrk for crdt/update\n'
printf '  deliveries/s, a replayed backlog of %s (sender alone)  %8s   (replay call %s ms)\n' "$replayed" "$backlog_rate" "$replay_ms"
printf '  deliveries/s, %s events written and delivered        %8s   (writes alone: %s events/s, 100 a request)\n' "$events" "$live_rate" "$write_rate"
printf '\n  crdt/update, 4 writers on 4 records (1 KB text), %ss a run, median of %s rounds by turns (round range)\n' "$secs" "$rounds"
printf '  %-44s %8s %8s %8s %8s %8s %16s %16s  %s\n' settings none_p50 none_p99 three_p50 three_p99 requests "p50 three/none" "p99 three/none" "target: verdict"
for c in default:"coalesced (default, 5 s)" every:"every update an event (coalesce 1 ms)"; do
  config=${c%%:*} label=${c#*:}
  read -r p50 p50_lo p50_hi p99 p99_lo p99_hi n errors k < "$work/$config.ratios"
  read -r _ n50 n99 _ _ < "$work/$config-none.$k.res"
  read -r _ t50 t99 _ _ < "$work/$config-three.$k.res"
  target="$(judge "$p99" '<=' 1.1 'issue 52')"
  [ "$errors" = 0 ] || target="$target; $errors errors"
  printf '  %-44s %8s %8s %8s %8s %8s %16s %16s  %s\n' "$label" "$n50" "$(p99 "$n99" "$n")" "$t50" "$(p99 "$t99" "$n")" "$n" \
    "$p50 ($p50_lo-$p50_hi)" "$p99 ($p99_lo-$p99_hi)" "$target"
done
read -r d50 _ _ d99 _ _ _ _ _ < "$work/default.ratios"
read -r e50 _ _ e99 _ _ _ _ _ < "$work/every.ratios"
printf '\nSummary: %s deliveries/s (replayed backlog), %s end to end; crdt/update with three endpoints / none: p50 %s, p99 %s (%s); every update an event: p50 %s, p99 %s\n' \
  "$backlog_rate" "$live_rate" "$d50" "$d99" "$(judge "$d99" '<=' 1.1 'issue 52')" "$e50" "$e99"
