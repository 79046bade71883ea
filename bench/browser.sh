#!/usr/bin/env bash
# Folio in a browser (issue 20), in Debian's headless Chromium driven by puppeteer-core
# (bench/peers/browser.mjs; the page's side is bench/peers/browser-page.js):
#  * replay: automerge-paper's patches as local edits in a page, through Folio's JavaScript client
#    (its engine directly: Replica.insert / delete at code-point positions), diamond-types-web
#    (OpLog.ins / del + checkout) and Yjs (Y.Text, a fixed clientID, one transaction per trace
#    transaction), a fresh browser per library, fastest and median of 5 runs after 2 warm-up runs, every
#    result checked against the trace's endContent; ratios to Folio's native local replay in the same
#    run (bench/trace_bench); the goal: Folio faster than both peers in the browser.
#  * size: what a page downloads to use each library (WebAssembly + JavaScript), gzip -9, with Folio's
#    as the reference; no target.
#  * live: the time from a REST update to the change visible in a page (the stack of
#    bench/support/http_stack.sh; a page of its origin connected with a client token, a textarea bound
#    to a text record), p50/p99 over 200 updates, beside the update's own round trip and a Node.js
#    client's receive time from the same run; no target.
# Needs Node.js and Chromium (Debian's chromium package, installed when missing); the npm packages are
# pinned by bench/peers/package-lock.json (npm ci when missing); the engine is built by scripts/build-js.
#   bench/browser.sh [--trace-bench-output FILE] [replay] [size] [live]      (default: all three)
# --trace-bench-output takes Folio's native figure from a trace_bench run already made (scripts/bench
# passes its own) instead of running trace_bench again.
set -euo pipefail
cd "$(dirname "$0")/.."
traces_dir=${FOLIO_TRACES_DIR:-$PWD/bench/traces}
folio_out=
if [ "${1:-}" = --trace-bench-output ]; then folio_out=$2; shift 2; fi
[ $# -gt 0 ] || set -- replay size live
for part in "$@"; do
  case $part in replay | size | live) ;; *) echo "usage: bench/browser.sh [--trace-bench-output FILE] [replay] [size] [live]" >&2; exit 2 ;; esac
done
wants() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
parts=("$@")
source scripts/deps.sh
folio_install_deps "${FOLIO_TEST_PACKAGES[@]}"  # the browser too (deps.sh's test-only list)
command -v node >/dev/null || { echo "bench/browser.sh: needs Node.js (node and npm)" >&2; exit 1; }
(cd bench/peers && { npm ls --silent >/dev/null 2>&1 || npm ci --no-audit --no-fund --silent; })
figures=$(mktemp)
made=
trap 'rm -f "$figures" $made' EXIT
scripts/build-js >"$figures" 2>&1 || { cat "$figures" >&2; exit 1; }  # clients/js/dist/folio-engine.wasm (incremental)
: >"$figures"

if wants replay; then
  if [ -z "$folio_out" ]; then
    cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON -DFOLIO_TRACES_DIR="$traces_dir" >/dev/null
    cmake --build build-release -j2 --target trace_bench >/dev/null
    folio_out=$(mktemp)
    made=$folio_out
    build-release/bench/trace_bench --benchmark_filter='^automerge-paper/(gap_buffer|local_replay)$' --benchmark_repetitions=5 >"$folio_out" 2>/dev/null
  fi
  for lib in folio diamond-types yjs; do
    node bench/peers/browser.mjs replay "$lib" "$traces_dir/automerge-paper.json.gz" 5 2 >>"$figures"
  done
fi
if wants size; then
  node bench/peers/browser.mjs size >>"$figures"
fi
if wants live; then
  secs=1
  # Starts folio-fcgi (with client-token keys) and nginx on a free loopback port; stops them on exit.
  source bench/support/http_stack.sh
  trap 'rm -f "$figures" $made; cleanup' EXIT
  node bench/peers/browser.mjs live "$url" "$key" "$token" 200 10 >>"$figures"
fi

python3 - "$figures" "${folio_out:-/dev/null}" <<'PY'
import json, re, sys
figs = [json.loads(l) for l in open(sys.argv[1])]
native_text = open(sys.argv[2]).read()
def pct(xs, p):  # nearest rank, as bench/support/live_fanout.py
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
def median(xs):
    return pct(xs, 50)
def num(n):
    return "{:,}".format(n)

replays = {(f["lib"], f["figure"]): f for f in figs if "runs" in f}
if replays:
    any_ = next(iter(replays.values()))
    native = float(re.search(r"^  local replay +([0-9.]+) ms", native_text.split("\nautomerge-paper: gap buffer", 1)[1], re.M).group(1))
    print("\nautomerge-paper in %s (headless, puppeteer-core): %d patches as local edits through each library's JavaScript API in a page, "
          "a fresh browser per library; fastest and median of %d runs after %d warm-up runs, each result checked against endContent; "
          "ratios to Folio's native local replay of this run (trace_bench, %.3f ms, baseline)" % (
              any_["browser"], any_["patches"], any_["reps"], any_["warmup"], native))
    print("  %-34s %11s %11s %9s" % ("library", "fastest", "median", "ratio"))
    versions = {"folio": "folio (clients/js, wasm)", "diamond-types": "diamond-types-web " + json.load(open("bench/peers/node_modules/diamond-types-web/package.json"))["version"],
                "yjs": "yjs " + json.load(open("bench/peers/node_modules/yjs/package.json"))["version"]}
    fast = {}
    for lib in ("folio", "diamond-types", "yjs"):
        runs = replays[(lib, "local_replay")]["runs"]
        fast[lib] = min(runs)
        print("  %-34s %8.1f ms %8.1f ms %8.1fx" % (versions[lib], min(runs), median(runs), min(runs) / native))
    one, doc = min(replays[("yjs", "local_replay_one_transaction")]["runs"]), min(replays[("diamond-types", "local_replay_doc")]["runs"])
    print("  also: yjs with the whole trace in one transaction %.1f ms (%.1fx); diamond-types through Doc.ins/del %.1f ms (%.1fx)" % (
        one, one / native, doc, doc / native))
    peer = min(("diamond-types", "yjs"), key=lambda l: fast[l])
    print("  folio / the faster peer (%s): %.2f   faster than both peers in the browser (issue 20): %s" % (
        peer, fast["folio"] / fast[peer], "met" if fast["folio"] < fast[peer] else "MISSED"))

sizes = [f for f in figs if "js_minified" in f]
if sizes:
    print("\nWhat a page downloads to use each library, bytes: its WebAssembly and its JavaScript, gzip -9 (the gzip program; brotli q11 beside); "
          "JavaScript as published (each module file the entry imports, compressed one by one, as a page without a bundler loads them) "
          "and as one minified ES module (esbuild, the same settings for each); ratios to Folio's total (baseline); no target")
    print("  %-26s %12s %20s %14s %12s %13s %9s" % ("library", "wasm gzip", "JS published gzip", "JS min gzip", "total gzip", "total brotli", "ratio"))
    base = None
    for s in sizes:
        total = s["wasm"]["gzip"] + s["js_minified"]["gzip"]
        base = base or total
        label = {"folio": "folio (clients/js %s)", "yjs": "yjs %s"}.get(s["lib"], "%s") % s["version"]
        print("  %-26s %12s %13s (%2d files) %14s %12s %13s %8.2fx" % (
            label, num(s["wasm"]["gzip"]) if s["wasm"]["files"] else "-", num(s["js_published"]["gzip"]), s["js_published"]["files"],
            num(s["js_minified"]["gzip"]), num(total), num(s["wasm"]["brotli"] + s["js_minified"]["brotli"]), total / base))
    f = sizes[0]
    print("  (folio uncompressed: wasm %s B, JS as published %s B; its JavaScript includes the sync client, the textarea binding and the "
          "EventSource fallback; yjs: the whole module with lib0, no network provider; diamond-types-web: wasm-pack's glue and module)" % (
              num(f["wasm"]["raw"]), num(f["js_published"]["raw"])))

live = {f["receiver"]: f for f in figs if f.get("figure") == "live"}
if live:
    p = live["page"]
    print("\nREST update -> the change visible, through nginx + Nchan (%s, headless): %d updates per receiver after %d warm-up ones, "
          "one at a time, each sent 10 ms after the last was seen; time from sending the update; the page's figure includes the "
          "DevTools hop that reports it; p99 \"-\" from fewer than 200 samples; no target" % (p["browser"], p["samples"], p["warmup"]))
    upd = live["page"]["update_ms"] + live["node"]["update_ms"]
    rows = [("REST update's own round trip (baseline)", upd),
            ("Node.js client (clients/js, fetch stream)", live["node"]["seen_ms"]),
            ("page (clients/js, EventSource, textarea)", live["page"]["seen_ms"])]
    base50 = pct(upd, 50)
    print("  %-44s %10s %10s %8s %12s" % ("receiver", "p50", "p99", "samples", "p50 ratio"))
    for label, xs in rows:
        p99 = "%7.2f ms" % pct(xs, 99) if len(xs) >= 200 else "-"
        print("  %-44s %7.2f ms %10s %8d %11.2fx" % (label, pct(xs, 50), p99, len(xs), pct(xs, 50) / base50))
    print("  page / Node.js client: p50 %.2fx, p99 %.2fx" % (pct(live["page"]["seen_ms"], 50) / pct(live["node"]["seen_ms"], 50),
                                                           pct(live["page"]["seen_ms"], 99) / pct(live["node"]["seen_ms"], 99)))
PY
