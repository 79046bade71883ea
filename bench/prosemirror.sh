#!/usr/bin/env bash
# ProseMirror on an xml record in a page (issue 53): a local keystroke and a remote keystroke in a ~1 MB
# ProseMirror document (5,700 paragraphs with bold and italic runs, a list every 40), bound to Folio
# (clients/js/src/prosemirror.js on the engine in WebAssembly) and to Yjs (y-prosemirror's ySyncPlugin
# with initProseMirrorDoc, its README's setup without cursors and undo), the same document and the same
# keystrokes in the same page (bench/prosemirror-page.js says what each figure times), and the editor
# alone (no collaboration) as the baseline; a fresh headless Chromium per library (bench/prosemirror.mjs).
# p50/p99 over SAMPLES keystrokes of each kind after WARMUP untimed ones; the goal (issue 53): Folio at
# least as fast as y-prosemirror.
# Needs Node.js, Chromium (Debian's) and the npm packages of tests/e2e/browser (npm ci when missing);
# the engine is built by scripts/build-js.
#   bench/prosemirror.sh [BYTES] [SAMPLES] [WARMUP]     (defaults: 1000000 1000 100)
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=${1:-1000000}
samples=${2:-1000}
warmup=${3:-100}
command -v node >/dev/null || { echo "bench/prosemirror.sh: needs Node.js (node and npm)" >&2; exit 1; }
(cd tests/e2e/browser && { npm ls --silent >/dev/null 2>&1 || npm ci --no-audit --no-fund --silent; })
figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
scripts/build-js >"$figures" 2>&1 || { cat "$figures" >&2; exit 1; }
: >"$figures"
FOLIO_CHROMIUM=${FOLIO_CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)} node bench/prosemirror.mjs "$bytes" "$samples" "$warmup" >"$figures"
python3 - "$figures" <<'PY'
import json, sys
figs = {f["lib"]: f for f in (json.loads(l) for l in open(sys.argv[1]))}
def pct(xs, p):  # nearest rank, as bench/browser.sh
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
any_ = next(iter(figs.values()))
versions = {"prosemirror": "ProseMirror alone (baseline)", "folio": "Folio (clients/js, wasm)",
            "yjs": "Yjs %s + y-prosemirror %s" % tuple(json.load(open("tests/e2e/browser/node_modules/%s/package.json" % p))["version"] for p in ("yjs", "y-prosemirror"))}
print("\nA keystroke in a %s-byte ProseMirror document (%d top-level blocks) in %s (headless%s): p50/p99 over %d keystrokes after %d warm-up ones; "
      "local: view.dispatch until it returns (the editor's update and redraw, the binding, the CRDT op); remote: a peer's update handed "
      "to the editor's side until the view shows it; the goal (issue 53): Folio at least as fast as y-prosemirror" % (
          "{:,}".format(any_["bytes"]), any_["blocks"], any_["browser"], ", cross-origin isolated: 5 us timer" if any_["isolated"] else "", any_["samples"], any_["warmup"]))
print("  %-34s %11s %11s %11s %11s" % ("library", "local p50", "local p99", "remote p50", "remote p99"))
for lib in ("prosemirror", "folio", "yjs"):
    if lib in figs:
        f = figs[lib]
        print("  %-34s %8.3f ms %8.3f ms %8.3f ms %8.3f ms" % (versions[lib], pct(f["local"], 50), pct(f["local"], 99), pct(f["remote"], 50), pct(f["remote"], 99)))
if "folio" in figs and "yjs" in figs:
    f, y = figs["folio"], figs["yjs"]
    ratios = [pct(f[k], p) / pct(y[k], p) for k in ("local", "remote") for p in (50, 99)]
    print("  folio / y-prosemirror: local p50 %.2f, p99 %.2f; remote p50 %.2f, p99 %.2f   at least as fast (p50s): %s" % (
        *ratios, "met" if ratios[0] <= 1 and ratios[2] <= 1 else "MISSED"))
PY
