#!/usr/bin/env bash
# One tenant's floods against another tenant's small changes (issue 19, item 3; issue 49, items 4 and 5),
# all in one run, each beside tenant B alone measured just before it:
#   xml        tenant A replaces a 3.5 MiB XML record in a loop (a parse, a tree diff and tens of thousands
#              of ops per update), one client, while B sends small text updates one after another.
#   heavy      4 clients of tenant A: two replace 3.5 MiB XML records, two replace arrays of 20,000
#              objects (large replica tables) — enough to keep every worker busy without a per-tenant share
#              (folio-fcgi --tenant-workers, default workers - 1).
#   heavy2     "heavy" from two tenants at once, A and C (4 clients each): both at their share, each with
#              requests waiting for a worker.
#   many       4 processes of tenant A send small updates across $FOLIO_ISOLATION_RECORDS records (default
#              4,000) as fast as the stack answers, while B's subscriber waits for each of B's changes.
# Prints, per flood, B's update latency (p50, p99, max, over >= 200 updates) and, for "many", the time
# from B's update sent to its message reaching B's EventSource subscriber; with A's throughput, nginx's
# `ngx_slab_alloc() failed` lines and folio-fcgi's publish failures and over-budget changes meanwhile.
#   bench/isolation.sh [SECONDS] [FLOODS]            (default 20 per run; FLOODS default "xml heavy many";
#                                                   heavy2 is run when named)
#   FOLIO_COMPARE_BIN=/other/build-release bench/isolation.sh   also runs that build's folio-fcgi, same nginx
#   FOLIO_ISOLATION_SHARES="4 2" bench/isolation.sh 20 heavy   also runs folio-fcgi with --tenant-workers 4
#                                                   (every worker: no share, as before it), then 2
set -euo pipefail
secs=${1:-20}
floods=${2:-xml heavy many}
source "$(dirname "$0")/support/http_stack.sh"
key_b=$("$bin/tools/folio-admin" --db "$db" create-key other)
token_b=$("$bin/tools/folio-admin" --db "$db" create-token "${key_b:3:16}" other)
key_c=$("$bin/tools/folio-admin" --db "$db" create-key third)
token_c=$("$bin/tools/folio-admin" --db "$db" create-token "${key_c:3:16}" third)

measure() {  # LABEL: for each flood, B alone, then B beside A, on the responder now running
  python3 - "$url" "$key" "$token" "$key_b" "$token_b" "$secs" "$1" "$floods" "$work/log/nginx-error.log" "${FOLIO_ISOLATION_RECORDS:-4000}" "$key_c" "$token_c" <<'PY'
import http.client, json, multiprocessing, queue, sys, threading, time, urllib.parse
url, key_a, token_a, key_b, token_b, secs, label, floods, nginx_log, records, key_c, token_c = sys.argv[1:13]
secs, records = float(secs), int(records)
host, port = url.split("//")[1].split(":")
port = int(port)

class Client:
    def __init__(self, key, token):
        self.h = {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token}
        self.c = None
    def post(self, path, data):
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection(host, port, timeout=120)
            try:
                self.c.request("POST", path, json.dumps({"data": data}), self.h)
                r = self.c.getresponse()
                body = r.read()
                break
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                if attempt:
                    raise
        if r.status != 200:
            raise SystemExit("%s %d %s" % (path, r.status, body[:200]))

def xml(variant):
    return "".join('<p id="p%d" class="c%d">paragraph %d of the record</p>' % (i, variant, i) for i in range(60000))

def table(variant):
    return [{"row": i, "v": variant, "name": "row %d of the table" % i} for i in range(20000)]

tag = str(time.time_ns())
B = {"organizationId": "light", "documentId": tag, "editorId": "small"}
b = Client(key_b, token_b)
b.post("/v2/crdt/add", dict(B, type="text", data="hello"))

class Subscriber:
    """B's EventSource subscriber: the arrival time of each message."""
    def __init__(self):
        q = urllib.parse.urlencode(B)
        self.c = http.client.HTTPConnection(host, port, timeout=600)
        self.c.request("GET", "/v2/crdt/subscribe?" + q, headers={"x-folio-api-key": key_b, "x-folio-auth-token": token_b, "Accept": "text/event-stream"})
        self.r = self.c.getresponse()
        assert self.r.status == 200, self.r.status
        assert self.r.fp.readline().startswith(b":")
        self.arrivals = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()
    def read(self):
        while True:
            line = self.r.fp.readline()
            if not line:
                return
            if line.startswith(b"data:"):
                self.arrivals.put(time.monotonic())

sub = Subscriber()
probe_n, next_probe = [0], [0.0]

def probe(seconds, push):
    # Paced at 25 updates a second: B's own changes stay far inside its publish budget (6,000 a minute).
    lat, pushed, end = [], [], time.monotonic() + seconds
    while time.monotonic() < end or len(lat) < 200:
        probe_n[0] += 1
        t = time.monotonic()
        time.sleep(max(0.0, next_probe[0] - t))
        t = time.monotonic()
        next_probe[0] = t + 0.04
        b.post("/v2/crdt/update", dict(B, data="hello %d" % probe_n[0]))
        lat.append((time.monotonic() - t) * 1000)
        if push:
            try:
                pushed.append((sub.arrivals.get(timeout=30) - t) * 1000)
            except queue.Empty:
                pushed.append(float("inf"))
        while not sub.arrivals.empty():
            sub.arrivals.get()
    return lat, pushed

def stats(lat):
    lat = sorted(lat)
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1], len(lat)

def metric(name):
    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")

def slab_failures():
    try:
        with open(nginx_log, errors="replace") as f:
            return sum("ngx_slab_alloc() failed" in line for line in f)
    except FileNotFoundError:
        return 0

def many_worker(k, n, stop, count):
    a = Client(key_a, token_a)
    i = 0
    while not stop.is_set():
        a.post("/v2/crdt/update", {"organizationId": "many", "documentId": tag, "editorId": "r%d" % ((i * 4 + k) % n), "data": {"n": i}})
        i += 1
        with count.get_lock():
            count.value += 1

def many_add(k, n):
    a = Client(key_a, token_a)
    for r in range(k, n, 4):
        a.post("/v2/crdt/add", {"organizationId": "many", "documentId": tag, "editorId": "r%d" % r, "type": "map", "data": {}})

def run_flood(name):
    stop = threading.Event()
    done = [0, 0.0]
    lock = threading.Lock()
    if name in ("xml", "heavy", "heavy2"):
        kinds = ["xml"] if name == "xml" else ["xml", "xml", "table", "table"]
        tenants = [(key_a, token_a)] + ([(key_c, token_c)] if name == "heavy2" else [])
        jobs = [(who, k, kind) for who in tenants for k, kind in enumerate(kinds)]
        for who, k, kind in jobs:
            Client(*who).post("/v2/crdt/add", {"organizationId": "heavy", "documentId": tag, "editorId": "%s-%s-%d" % (name, kind, k),
                                               "type": "xml" if kind == "xml" else "array", "data": xml(0) if kind == "xml" else table(0)})
        def client(who, k, kind):
            a, v = Client(*who), 0
            while not stop.is_set():
                v += 1
                t = time.monotonic()
                a.post("/v2/crdt/update", {"organizationId": "heavy", "documentId": tag, "editorId": "%s-%s-%d" % (name, kind, k), "data": xml(v) if kind == "xml" else table(v)})
                with lock:
                    done[0] += 1
                    done[1] += time.monotonic() - t
        threads = [threading.Thread(target=client, args=job) for job in jobs]
        for t in threads:
            t.start()
        who = "tenant A" if len(tenants) == 1 else "tenants A and C"
        return stop, lambda: [t.join() for t in threads], lambda: "%s: %d clients, %d updates of %.0f ms on average" % (who, len(jobs), done[0], done[1] / max(done[0], 1) * 1000)
    ctx = multiprocessing.get_context("fork")
    adders = [ctx.Process(target=many_add, args=(k, records)) for k in range(4)]
    for p in adders:
        p.start()
    for p in adders:
        p.join()
    mstop, count = ctx.Event(), ctx.Value("l", 0)
    procs = [ctx.Process(target=many_worker, args=(k, records, mstop, count)) for k in range(4)]
    started = time.monotonic()
    for p in procs:
        p.start()
    class both:
        def set(self):
            mstop.set()
    def join():
        for p in procs:
            p.join()
        done[0], done[1] = count.value, time.monotonic() - started
    return both(), join, lambda: "tenant A: 4 processes, %d small updates across %d records, %.0f a second" % (done[0], records, done[0] / max(done[1], 1e-9))

print(label)
print("  %-40s %9s %9s %9s %8s" % ("tenant B", "p50 ms", "p99 ms", "max ms", "samples"))
for name in floods.split():
    push = name == "many"
    alone, alone_push = probe(secs, push)
    before = (slab_failures(), metric("folio_publish_failures_total"), metric("folio_publish_over_budget_total"))
    stop, join, describe = run_flood(name)
    time.sleep(1)
    beside, beside_push = probe(secs, push)
    stop.set()
    join()
    after = (slab_failures(), metric("folio_publish_failures_total"), metric("folio_publish_over_budget_total"))
    print("  flood %s — %s" % (name, describe()))
    print("  %-40s %9.2f %9.2f %9.2f %8d" % ("update, no flood", *stats(alone)))
    print("  %-40s %9.2f %9.2f %9.2f %8d" % ("update, beside the flood", *stats(beside)))
    if push:
        print("  %-40s %9.2f %9.2f %9.2f %8d" % ("update sent -> pushed, no flood", *stats(alone_push)))
        print("  %-40s %9.2f %9.2f %9.2f %8d" % ("update sent -> pushed, beside the flood", *stats(beside_push)))
    print("  during the flood: %d ngx_slab_alloc() failures, %.0f publish failures, %.0f changes over their budget" % tuple(y - x for x, y in zip(before, after)))
PY
}

measure "folio-fcgi ($(git rev-parse --short HEAD), 4 workers, --tenant-workers default: 3)"
for share in ${FOLIO_ISOLATION_SHARES:-}; do
  responder "$bin/service/folio-fcgi" --socket "$work/run/folio.sock" --db "$db" --workers 4 --tenant-workers "$share" "${live[@]}"
  measure "folio-fcgi ($(git rev-parse --short HEAD), 4 workers, --tenant-workers $share)"
done
if [ -n "${FOLIO_COMPARE_BIN:-}" ]; then
  compare="$FOLIO_COMPARE_BIN/service/folio-fcgi"
  [ -x "$compare" ] || compare="$FOLIO_COMPARE_BIN/fcgi/folio-fcgi"  # a build from before the service/ layout
  responder "$compare" --socket "$work/run/folio.sock" --db "$db" --workers 4 "${live[@]}"
  measure "folio-fcgi ($FOLIO_COMPARE_BIN)"
fi
