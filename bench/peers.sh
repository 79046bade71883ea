#!/usr/bin/env bash
# Folio against peer CRDT libraries on the same editing traces, every figure as a ratio to the C++ gap
# buffer measured in the same run: bench/trace_bench (Folio + the gap buffer), then
# bench/peers/replay.mjs once per library and trace (Yjs and diamond-types through Node, each in its own
# process, used the fastest way its documentation shows; see replay.mjs), then one table per trace with
# Folio's targets judged. Each table has a line of remote keystrokes: trace_bench's remote_keys workload
# (each patch of the trace as a remote update of its own, a patch's delete and insert as two, applied in
# turn by a fresh receiver; making the updates is untimed) in each library: Folio's "remote keys" row of
# trace_bench (folio::document::apply per batch); diamond-types OpLog.addFromBytes of each patch's
# OpLog.getPatchSince bytes, then one checkout() (also reported: Doc.mergeBytes per update, which keeps
# the text current); Yjs Y.applyUpdate of each transaction's v1 update as doc.on('update') gives it.
# Needs Node.js; the packages are pinned by bench/peers/package-lock.json and installed with `npm ci`
# when missing (the registry or npm's cache is needed once, never during a run).
#   bench/peers.sh [--trace-bench-output FILE] [trace ...]     traces: automerge-paper seph-blog1 (default both)
# --trace-bench-output takes Folio's figures from a trace_bench run already made (scripts/bench passes its
# own, so that every figure it prints comes from one run) instead of running trace_bench again.
set -euo pipefail
cd "$(dirname "$0")/.."
traces_dir=${FOLIO_TRACES_DIR:-$PWD/bench/traces}
folio_out=
if [ "${1:-}" = --trace-bench-output ]; then folio_out=$2; shift 2; fi
[ $# -gt 0 ] || set -- automerge-paper seph-blog1
command -v node >/dev/null || { echo "bench/peers.sh: needs Node.js (node and npm)" >&2; exit 1; }
(cd bench/peers && { npm ls --silent >/dev/null 2>&1 || npm ci --no-audit --no-fund --silent; })
peers=$(mktemp)
made=
trap 'rm -f "$peers" $made' EXIT
if [ -z "$folio_out" ]; then
  cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=ON -DFOLIO_TRACES_DIR="$traces_dir" >/dev/null
  cmake --build build-release -j2 --target trace_bench >/dev/null
  folio_out=$(mktemp)
  made=$folio_out
  pattern=$(IFS='|'; echo "$*")
  build-release/bench/trace_bench --benchmark_filter="^($pattern)/(gap_buffer|local_replay|remote_merge|remote_keys|encode|encode_zstd)\$" \
    --benchmark_repetitions=5 >"$folio_out" 2>/dev/null
fi
for trace in "$@"; do
  for lib in diamond-types yjs; do
    node --expose-gc bench/peers/replay.mjs "$lib" "$traces_dir/$trace.json.gz" 5 2 >>"$peers"
  done
done
python3 - "$folio_out" "$peers" bench/peers/node_modules "$@" <<'PY'
import json, re, sys
folio_text, peers_file, modules, traces = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4:]
version = {lib: json.load(open("%s/%s/package.json" % (modules, pkg)))["version"] for lib, pkg in (("yjs", "yjs"), ("diamond-types", "diamond-types-node"))}
peer = {}
for line in open(peers_file):
    o = json.loads(line)
    peer[(o["trace"], o["lib"], o["figure"])] = o
reps = next(iter(peer.values()))
def folio(trace, label):  # a row of trace_bench's summary for this trace: value (ms, KB or MB)
    block = folio_text.split("\n%s: gap buffer" % trace, 1)[1].split("\n\n", 1)[0]
    m = re.search(r"^  %s +([0-9.]+) (ms|KB|MB)" % re.escape(label), block, re.M)
    return float(m.group(1))
def verdict(value, must, aim):
    return "aim met" if aim and value <= aim else ("must met, aim MISSED" if aim else "met") if value <= must else "MISSED"
for trace in traces:
    gap = float(re.search(r"^%s: gap buffer replays \d+ patches in ([0-9.]+) ms" % trace, folio_text, re.M).group(1))
    print("\n%s: ratios to the C++ gap buffer of this run (%.3f ms, baseline)" % (trace, gap))
    print("  %-22s %19s %19s %10s %16s" % ("library", "local replay", "merge whole log", "encoded", "compressed"))
    def row(name, local, merge, enc_kb, comp):
        print("  %-22s %9.1f ms %6.1fx %9.1f ms %6.1fx %7.1f KB %16s" % (name, local, local / gap, merge, merge / gap, enc_kb, comp))
    fl, fm, fe, fz = folio(trace, "local replay"), folio(trace, "remote merge"), folio(trace, "encoded size"), folio(trace, "zstd size")
    row("folio", fl, fm, fe, "%.1f KB zstd" % fz)
    p = lambda lib, fig: peer[(trace, lib, fig)]["value"]
    row("diamond-types %s" % version["diamond-types"], p("diamond-types", "local_replay"), p("diamond-types", "remote_merge"),
        p("diamond-types", "encoded_bytes") / 1000, "-")
    row("yjs %s" % version["yjs"], p("yjs", "local_replay"), p("yjs", "remote_merge"), p("yjs", "encoded_bytes") / 1000,
        "%.1f KB v2" % (p("yjs", "encoded_bytes_v2") / 1000))
    print("  also: yjs with the whole trace in one transaction %.1f ms (%.1fx); diamond-types through Doc.ins/del %.1f ms (%.1fx)" % (
        p("yjs", "local_replay_one_transaction"), p("yjs", "local_replay_one_transaction") / gap,
        p("diamond-types", "local_replay_doc"), p("diamond-types", "local_replay_doc") / gap))
    keys = {lib: p(lib, "remote_keys_updates") for lib in ("diamond-types", "yjs")}
    if keys["diamond-types"] != keys["yjs"]:
        sys.exit("bench/peers.sh: the peers applied different numbers of keystroke updates: %r" % keys)
    fk = folio(trace, "remote keys")
    print("  remote keystrokes, %d updates applied one by one: folio %.1f ms (%.1fx); diamond-types %.1f ms (%.1fx), "
          "through Doc.mergeBytes %.1f ms (%.1fx); yjs %.1f ms (%.1fx)" % (
        keys["yjs"], fk, fk / gap, p("diamond-types", "remote_keys"), p("diamond-types", "remote_keys") / gap,
        p("diamond-types", "remote_keys_doc"), p("diamond-types", "remote_keys_doc") / gap, p("yjs", "remote_keys"), p("yjs", "remote_keys") / gap))
    print("    (the updates, made untimed: diamond-types OpLog.getPatchSince %.1f MB in all, yjs v1 updates %.1f MB in all; "
          "folio: trace_bench's remote keys)" % (p("diamond-types", "remote_keys_bytes") / 1e6, p("yjs", "remote_keys_bytes") / 1e6))
    print("  (folio: fastest of 5 repetitions; peers: fastest of %d runs after %d warm-up runs; peers are reference figures, no target)" % (
        reps["reps"], reps["warmup"]))
    if trace == "automerge-paper":
        print("  folio's targets: local replay <= 8x / <= 4x (issue 2): %s; merge <= 8x / <= 4x (issue 2): %s; "
              "encoded <= 160 KB / <= 105 KB (issue 2): %s, <= 110 KB (issue 23): %s" % (
                  verdict(fl / gap, 8, 4), verdict(fm / gap, 8, 4), verdict(fe, 160, 105), verdict(fe, 110, 0)))
    else:
        print("  no targets are set on this trace")
PY
