#!/usr/bin/env bash
# One tenant's heavy write against another tenant's small ones (issue 19, item 3): tenant A replaces a
# 3.5 MiB XML record in a loop (every element's attribute changed: a parse, a tree diff and tens of
# thousands of ops per update) while tenant B sends small text updates one after another. Prints B's
# update latency (p50, p99, max, over >= 200 updates) with A running, beside B alone in the same run,
# and their ratio. Before the writer section held only the statements, B's update waited for A's whole
# parse and diff.
#   bench/isolation.sh [SECONDS]                     (default 20 per run)
#   FOLIO_COMPARE_BIN=/other/build-release bench/isolation.sh   also runs that build's folio-fcgi, same nginx
set -euo pipefail
secs=${1:-20}
source "$(dirname "$0")/support/http_stack.sh"
key_b=$("$bin/tools/folio-admin" --db "$db" create-key other)
token_b=$("$bin/tools/folio-admin" --db "$db" create-token "${key_b:3:16}" other)

measure() {  # LABEL: B alone, then B beside A, on the responder now running
  python3 - "$url" "$key" "$token" "$key_b" "$token_b" "$secs" "$1" <<'PY'
import http.client, json, sys, threading, time
url, key_a, token_a, key_b, token_b, secs, label = sys.argv[1:8]
secs = float(secs)
host, port = url.split("//")[1].split(":")

def post(key, token, path, data):
    c = http.client.HTTPConnection(host, int(port), timeout=120)
    c.request("POST", path, json.dumps({"data": data}), {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token})
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit("%s %d %s" % (path, r.status, body[:200]))

def xml(variant):
    return "".join('<p id="p%d" class="c%d">paragraph %d of the record</p>' % (i, variant, i) for i in range(60000))

tag = str(time.time_ns())
A = {"organizationId": "heavy", "documentId": tag, "editorId": "big"}
B = {"organizationId": "light", "documentId": tag, "editorId": "small"}
post(key_a, token_a, "/v2/crdt/add", dict(A, type="xml", data=xml(0)))
post(key_b, token_b, "/v2/crdt/add", dict(B, type="text", data="hello"))

def probe(seconds):
    lat, i, end = [], 0, time.monotonic() + seconds
    while time.monotonic() < end or len(lat) < 200:
        i += 1
        t = time.monotonic()
        post(key_b, token_b, "/v2/crdt/update", dict(B, data="hello %d" % i))
        lat.append((time.monotonic() - t) * 1000)
    lat.sort()
    return lat

def stats(lat):
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1], len(lat)

alone = stats(probe(secs))
stop, heavy = threading.Event(), [0, 0.0]
def tenant_a():
    v = 0
    while not stop.is_set():
        v += 1
        t = time.monotonic()
        post(key_a, token_a, "/v2/crdt/update", dict(A, data=xml(v)))
        heavy[0] += 1
        heavy[1] += time.monotonic() - t
t = threading.Thread(target=tenant_a)
t.start()
time.sleep(1)
beside = stats(probe(secs))
stop.set()
t.join()
print("%s: tenant A's 3.5 MiB XML update took %.0f ms on average (%d updates)" % (label, heavy[1] / max(heavy[0], 1) * 1000, heavy[0]))
print("  %-28s %9s %9s %9s %8s" % ("tenant B's small update", "p50 ms", "p99 ms", "max ms", "samples"))
print("  %-28s %9.2f %9.2f %9.2f %8d" % ("alone (baseline)", *alone))
print("  %-28s %9.2f %9.2f %9.2f %8d" % ("beside tenant A", *beside))
print("  %-28s %9.2f %9.2f %9.2f" % ("ratio", beside[0] / alone[0], beside[1] / alone[1], beside[2] / alone[2]))
PY
}

measure "folio-fcgi ($(git rev-parse --short HEAD))"
if [ -n "${FOLIO_COMPARE_BIN:-}" ]; then
  compare="$FOLIO_COMPARE_BIN/service/folio-fcgi"
  [ -x "$compare" ] || compare="$FOLIO_COMPARE_BIN/fcgi/folio-fcgi"  # a build from before the service/ layout
  responder "$compare" --socket "$work/run/folio.sock" --db "$db" --workers 4 "${live[@]}"
  measure "folio-fcgi ($FOLIO_COMPARE_BIN)"
fi
