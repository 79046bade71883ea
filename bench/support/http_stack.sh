# bench/support/http_stack.sh — sourced by the HTTP benchmarks (bench/load.sh, bench/annotations_load.sh,
# bench/live.sh, bench/browser.sh): installs and builds what they need (Release), starts folio-fcgi and nginx
# (the standalone config, access log off) on a free loopback port with a fresh database, one
# credential and a client-token signing key, and defines
#   responder CMD...            restart the FastCGI responder on the socket nginx uses (folio-fcgi or hello-fcgi)
#   run NAME TARGET THREADS CONNECTIONS BODIES
#                               wrk for $secs seconds, longer when that gives fewer than 200 requests (a p99
#                               needs 200 samples; up to 8x $secs), with a 30 s timeout (wrk's 2 s default
#                               left the slowest answers out of the percentiles, as errors); writes
#                               "req/s p50_ms p99_ms errors requests" to $work/NAME.res. BODIES: groups
#                               separated by ";" (thread k uses group k mod groups), files in a group by ","
#                               sent in turn. Also writes "$work/NAME.cpu": the responder's CPU time (user +
#                               system, all threads, /proc/PID/stat) per request answered, in ms — a figure
#                               that moves less than throughput when other work shares the cores (though by
#                               up to a quarter between runs here), to compare builds by —
#                               and "$work/NAME.busy": the cores the whole machine kept busy meanwhile
#                               (/proc/stat: wrk, nginx, the responder, the kernel).
#   start_folio                 (re)start folio-fcgi as this file first starts it (4 workers, live push, client tokens)
#   warm_run NAME TARGET THREADS CONNECTIONS BODIES
#                               run, after a 1 s warm-up of the responder just started; stops the script (with
#                               the responders' log's end) when the responder answered errors or nothing
#   against_ceiling NAME TARGET THREADS CONNECTIONS BODIES CEILING_TARGET [SAME_BYTES]
#                               a figure and its baseline measured by turns: $FOLIO_BENCH_ROUNDS rounds (default 3;
#                               with an even count the lower of the middle two is taken), each
#                               hello-fcgi (answering the file SAME_BYTES when given) on CEILING_TARGET, then
#                               folio-fcgi on TARGET, each run after a 1 s warm-up of its own freshly started
#                               responder, so that the two meet the machine in the same state (a figure and a
#                               baseline measured a minute apart differed by up to 0.25 in their ratio on a
#                               shared 2-core machine). Writes NAME's and NAME-ceiling's files, as run does,
#                               from the round whose throughput ratio is the median, and "$work/NAME.ratios":
#                               "median min max rounds" of the rounds' ratios. Stops the script when a round of
#                               either side answered an error or nothing. Ends with a freshly started folio-fcgi
#                               running (its cache empty but for the warm-up's).
#   p99 MS REQUESTS             the p99 as printed in a table: "-" when fewer than 200 requests measured it
#   judge VALUE OP BOUND ISSUE  "<= 5 (issue 4): met" or "... MISSED"; OP is <= or >=
# and $bin, $work, $db, $key, $token, $tenant, $url, and h=(curl headers). Everything lives in $work,
# removed on exit. The caller sets secs first.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/deps.sh
folio_install_deps
traces=${FOLIO_TRACES_DIR:-$PWD/bench/traces}
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON -DFOLIO_TRACES_DIR="$traces" >/dev/null
cmake --build build-release -j2 --target folio-fcgi folio-admin hello-fcgi seed-history >/dev/null
bin=$PWD/build-release
work=$(mktemp -d /tmp/folio-load.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
db=$work/folio.db
key=$("$bin/tools/folio-admin" --db "$db" create-key load)
token=$("$bin/tools/folio-admin" --db "$db" create-token "${key:3:16}" load)
tenant=${key:3:16}
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  sleep 0.5
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
responder() {  # starts folio-fcgi or hello-fcgi on the socket nginx uses
  local p kept=()
  if [ -n "${resp_pid:-}" ]; then
    kill "$resp_pid" && wait "$resp_pid" 2>/dev/null || true
    for p in "${pids[@]}"; do [ "$p" = "$resp_pid" ] || kept+=("$p"); done
    pids=("${kept[@]}")  # its pid is free for reuse: the cleanup must not signal it
  fi
  mkdir -p "$work/run" "$work/log"
  "$@" 2>>"$work/log/responder.log" &
  resp_pid=$!
  pids+=("$resp_pid")
  for _ in $(seq 100); do [ -S "$work/run/folio.sock" ] && break; sleep 0.05; done
}
mkdir -p "$work/nginx"
scripts/nginx-conf "$work" "$port" > /dev/null  # makes $work/channel.secret, before folio-fcgi reads it
live=(--channel-secret-file "$work/channel.secret" --publish-socket "$work/run/nginx-publish.sock")
# A client-token signing key, as scripts/run makes one (POST /v2/auth/token; bench/browser.sh's page uses one).
(umask 077; echo "bench1 $(openssl rand -hex 32)" > "$work/client-token.keys")
start_folio() { responder "$bin/service/folio-fcgi" --socket "$work/run/folio.sock" --db "$db" --workers 4 "${live[@]}" --client-token-keys "$work/client-token.keys"; }
start_folio
FOLIO_ACCESS_LOG=off scripts/nginx-start "$work" "$port" 10000000 &   # as scripts/run starts it
pids+=($!)
sleep 0.5
url=http://127.0.0.1:$port
h=(-H 'Content-Type: application/json' -H "x-folio-api-key: $key" -H "x-folio-auth-token: $token")

# run NAME TARGET THREADS CONNECTIONS BODIES -> "rps p50_ms p99_ms errors requests"
responder_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$resp_pid/stat"; }
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }  # busy, all
run() {
  local name=$1 target=$2 threads=$3 conns=$4 bodies=$5 d=$secs n cpu_before ticks_before
  while :; do
    cpu_before=$(responder_cpu_ms)  # the last attempt's, as its requests are
    ticks_before=$(machine_ticks)
    BODIES=$bodies TARGET=$target FOLIO_API_KEY=$key FOLIO_AUTH_TOKEN=$token \
      wrk -t"$threads" -c"$conns" -d"${d}s" --timeout 30s -s bench/support/bodies.lua "$url" | sed -n 's/^RESULT //p' > "$work/$name.res"
    read -r _ _ _ _ n < "$work/$name.res"
    if [ "$n" -ge 200 ] || [ "$d" -ge $((8 * secs)) ]; then break; fi
    d=$(( d * 250 / (n > 0 ? n : 1) + 1 ))  # aim at 250 requests
    [ "$d" -le $((8 * secs)) ] || d=$((8 * secs))
  done
  awk -v a="$(responder_cpu_ms)" -v b="$cpu_before" -v n="$n" 'BEGIN { printf "%.4f\n", (n > 0 ? (a - b) / n : 0) }' > "$work/$name.cpu"
  echo "$ticks_before $(machine_ticks)" | awk -v cores="$(nproc)" '{ printf "%.2f\n", ($4 > $2 ? cores * ($3 - $1) / ($4 - $2) : 0) }' > "$work/$name.busy"
}
warm_run() {  # NAME TARGET THREADS CONNECTIONS BODIES
  local keep=$secs rps err
  secs=1; run "$1-warm" "$2" "$3" "$4" "$5"; secs=$keep
  run "$@"
  read -r rps _ _ err _ < "$work/$1.res"
  if [ "$err" != 0 ] || awk -v r="$rps" 'BEGIN { exit !(r <= 0) }'; then  # a run with errors or no answers has no figure
    echo "$1: $rps req/s, $err errors; the responders' log ends:" >&2
    tail -n 5 "$work/log/responder.log" >&2
    exit 1
  fi
}
# spread FILE COLUMN: of the numbers in COLUMN of FILE's rows, "median lowest highest rows" (2 places),
# then the last field of the median row (its round). With an even count the lower middle is the median.
spread() {
  sort -g -k"$2,$2" "$1" | awk -v c="$2" '{ v[NR] = $c; r[NR] = $NF } END { m = int((NR + 1) / 2); printf "%.2f %.2f %.2f %d %s\n", v[m], v[1], v[NR], NR, r[m] }'
}
bench_rounds() {  # CALLER -> FOLIO_BENCH_ROUNDS (default 3), checked
  local rounds=${FOLIO_BENCH_ROUNDS:-3}
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$1: FOLIO_BENCH_ROUNDS must be a positive integer, not '$rounds'" >&2; exit 2; }
  echo "$rounds"
}
against_ceiling() {  # NAME TARGET THREADS CONNECTIONS BODIES CEILING_TARGET [SAME_BYTES]
  local name=$1 target=$2 threads=$3 conns=$4 bodies=$5 ctarget=$6 same=${7:-} rounds k f
  rounds=$(bench_rounds against_ceiling)
  for k in $(seq 1 "$rounds"); do
    responder "$bin/bench/hello-fcgi" "$work/run/folio.sock" 4 ${same:+"$same"}
    warm_run "$name-ceiling.$k" "$ctarget" "$threads" "$conns" "$bodies"
    start_folio
    warm_run "$name.$k" "$target" "$threads" "$conns" "$bodies"
  done
  for k in $(seq 1 "$rounds"); do  # "ratio round" (unrounded: the median printed is rps / ceiling's to 2 places)
    awk -v k="$k" 'NR == FNR { f = $1; next } { printf "%.9g %d\n", f / $1, k }' "$work/$name.$k.res" "$work/$name-ceiling.$k.res"
  done > "$work/$name.rounds"
  local med lo hi n
  read -r med lo hi n k < <(spread "$work/$name.rounds" 1)
  for f in res cpu busy; do
    cp "$work/$name.$k.$f" "$work/$name.$f"
    cp "$work/$name-ceiling.$k.$f" "$work/$name-ceiling.$f"
  done
  echo "$med $lo $hi $n" > "$work/$name.ratios"
}
# by_turns A BODIES_A B BODIES_B TARGET THREADS CONNECTIONS: two runs of the running folio-fcgi compared by
# their latency (A's p50 and p99 / B's), measured by turns for FOLIO_BENCH_ROUNDS rounds (default 3; A first
# in odd rounds, B first in even ones), so that a slow spell of the machine or its disk (an fsync's tail)
# falls on both sides rather than on one run's p99. Writes A-B.ratios: "p50_median p50_lo p50_hi
# p99_median p99_lo p99_hi rounds fewest_requests", and keeps as A.* and B.* the files of the round whose
# p99 ratio is the median.
by_turns() {
  local a=$1 abodies=$2 b=$3 bbodies=$4 target=$5 threads=$6 conns=$7 rounds k f
  rounds=$(bench_rounds by_turns)
  for k in $(seq 1 "$rounds"); do
    if (( k % 2 )); then
      run "$a.$k" "$target" "$threads" "$conns" "$abodies"; run "$b.$k" "$target" "$threads" "$conns" "$bbodies"
    else
      run "$b.$k" "$target" "$threads" "$conns" "$bbodies"; run "$a.$k" "$target" "$threads" "$conns" "$abodies"
    fi
  done
  for k in $(seq 1 "$rounds"); do  # "p50_ratio p99_ratio fewer_requests round"
    awk -v k="$k" 'NR == FNR { p50 = $2; p99 = $3; n = $5; next } { printf "%.9g %.9g %d %d\n", p50 / $2, p99 / $3, (n < $5 ? n : $5), k }' \
      "$work/$a.$k.res" "$work/$b.$k.res"
  done > "$work/$a-$b.rounds"
  local p50 p50_lo p50_hi p99 p99_lo p99_hi n fewest
  read -r p50 p50_lo p50_hi _ _ < <(spread "$work/$a-$b.rounds" 1)
  read -r p99 p99_lo p99_hi n k < <(spread "$work/$a-$b.rounds" 2)
  fewest=$(awk 'NR == 1 || $3 < m { m = $3 } END { print m }' "$work/$a-$b.rounds")
  for f in res cpu busy; do
    cp "$work/$a.$k.$f" "$work/$a.$f"
    cp "$work/$b.$k.$f" "$work/$b.$f"
  done
  echo "$p50 $p50_lo $p50_hi $p99 $p99_lo $p99_hi $n $fewest" > "$work/$a-$b.ratios"
}
p99() { if [ "$2" -ge 200 ]; then echo "$1"; else echo "-"; fi; }
judge() {  # VALUE OP BOUND ISSUE
  awk -v v="$1" -v op="$2" -v b="$3" -v i="$4" 'BEGIN {
    ok = op == "<=" ? v <= b : v >= b
    printf "%s %s (%s): %s", op, b, i, ok ? "met" : "MISSED" }'
}
