#!/usr/bin/env python3
"""The soak driver of bench/soak.sh: mixed load through nginx for SECONDS, sampling every 10 s.

Load (each a thread with kept-alive connections):
  gets       crdt/get of one record, v1 annotations get of one thread
  updates    crdt/update of text (a few characters inserted or removed; sizes stay bounded), map, xml
  syncs      crdt/sync pulls chained on the server's version; folio-cli pushes a client edit every 2 s
  subscribe  8 EventSource subscribers held for the whole run, and one more opened and closed every second
  comments   comments/add spread over 500 threads
Samples: folio-fcgi's RSS — its heap (RssAnon) and the database pages SQLite maps (RssFile, which
grow with the database by design) — and open fds, nginx's RSS (master + workers), the WAL and database sizes,
requests and 5xx in the window, latency p50/p99 of the window, and from /metrics the document cache's
size and the C heap's live allocations and held free memory. The run passes with 0 5xx, folio-fcgi's
heap over the last third of the samples after the warm-up (a fifth of the run, at least 60 s) within
5% of its heap over the first third (means: the cache's churn moves the heap by 10-20% from one
sample to the next), and the WAL bounded.

  soak.py URL KEY TOKEN SECONDS FCGI_PID NGINX_PIDFILE DB FOLIO_CLI
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

URL, KEY, TOKEN, SECONDS, FCGI_PID, NGINX_PIDFILE, DB, CLI = sys.argv[1:9]
SECONDS, FCGI_PID = int(SECONDS), int(FCGI_PID)
HOST, PORT = urllib.parse.urlparse(URL).hostname, urllib.parse.urlparse(URL).port
ORG, DOC = "soak", "doc"
RECORDS = 200
THREADS = 500
HEADERS = {"Content-Type": "application/json", "x-folio-api-key": KEY, "x-folio-auth-token": TOKEN}
USER = {"userId": "soak", "name": "Soak", "email": "soak@example.com"}

lock = threading.Lock()
window = {"latencies": [], "requests": 0, "5xx": 0, "other_errors": 0}
totals = {"requests": 0, "5xx": 0, "other_errors": 0, "events": 0, "syncs": 0, "pushes": 0}
stop = threading.Event()


class Client:
    def __init__(self):
        self.conn = None

    def post(self, path, data):
        body = json.dumps({"data": data})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
            start = time.perf_counter()
            try:
                self.conn.request("POST", path, body=body, headers=HEADERS)
                r = self.conn.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
                continue
            elapsed = time.perf_counter() - start
            with lock:
                window["latencies"].append(elapsed)
                window["requests"] += 1
                totals["requests"] += 1
                if r.status >= 500:
                    window["5xx"] += 1
                    totals["5xx"] += 1
                    print("5xx:", r.status, raw[:200], file=sys.stderr)
                elif r.status != 200:
                    window["other_errors"] += 1
                    totals["other_errors"] += 1
                    print("error:", r.status, raw[:200], file=sys.stderr)
            return r.status, json.loads(raw)


def ids(editor):
    return {"organizationId": ORG, "documentId": DOC, "editorId": editor}


def setup():
    c = Client()
    rng = random.Random(1)
    for i in range(RECORDS):
        text = "".join(rng.choice("abcdefghij klmnop") for _ in range(20000))
        c.post("/v2/crdt/add", dict(ids("t%d" % i), type="text", data=text))
    for i in range(20):
        c.post("/v2/crdt/add", dict(ids("m%d" % i), type="map", data={"k%d" % j: j for j in range(50)}))
        c.post("/v2/crdt/add", dict(ids("x%d" % i), type="xml", data="<doc>" + "<p>para</p>" * 50 + "</doc>"))
    for i in range(0, THREADS, 50):
        c.post("/v2/commentannotations/add", {"organizationId": ORG, "documentId": DOC, "commentAnnotations": [
            {"annotationId": "a%d" % j, "from": USER, "commentData": [{"commentText": "start"}]} for j in range(i, i + 50)]})


def getter(seed):
    c, rng = Client(), random.Random(seed)
    while not stop.is_set():
        c.post("/v2/crdt/get", ids("t%d" % rng.randrange(RECORDS)))
        c.post("/v1/commentannotations/get", {"organizationId": ORG, "documentId": DOC, "annotationIds": ["a%d" % rng.randrange(THREADS)]})


def updater(seed):
    c, rng = Client(), random.Random(seed)
    texts = {}
    while not stop.is_set():
        kind = rng.random()
        if kind < 0.7:
            editor = "t%d" % rng.randrange(RECORDS)
            if editor not in texts:
                texts[editor] = c.post("/v2/crdt/get", ids(editor))[1]["result"]["data"][0]["data"]
            t = texts[editor]
            at = rng.randrange(len(t))
            t = t[:at] + t[at + 8:] if rng.random() < 0.5 else t[:at] + "".join(rng.choice("qrstuvwxyz") for _ in range(8)) + t[at:]
            status, _ = c.post("/v2/crdt/update", dict(ids(editor), data=t))
            if status == 200:
                texts[editor] = t
            else:
                texts.pop(editor, None)
        elif kind < 0.85:
            m = {"k%d" % j: rng.randrange(1000) for j in range(50)}
            c.post("/v2/crdt/update", dict(ids("m%d" % rng.randrange(20)), data=m))
        else:
            n = rng.randrange(40, 60)
            c.post("/v2/crdt/update", dict(ids("x%d" % rng.randrange(20)), data="<doc>" + "<p>para</p>" * n + "</doc>"))


def syncer(seed):
    c, rng = Client(), random.Random(seed)
    versions = {}  # editor -> (incarnation, version) of the last answer
    while not stop.is_set():
        editor = "t%d" % rng.randrange(8)
        incarnation, version = versions.get(editor, (None, "AA=="))
        status, body = c.post("/v2/crdt/sync", dict(ids(editor), version=version, **({"incarnation": incarnation} if incarnation else {})))
        if status == 200:
            versions[editor] = (body["result"]["data"]["incarnation"], body["result"]["data"]["version"])
            with lock:
                totals["syncs"] += 1
        time.sleep(0.02)


def pusher(workdir):
    env = dict(os.environ, FOLIO_API_KEY=KEY, FOLIO_AUTH_TOKEN=TOKEN)
    rng = random.Random(3)
    while not stop.is_set():
        editor = "t%d" % rng.randrange(8)
        state = os.path.join(workdir, "client-%s.state" % editor)
        r = subprocess.run([CLI, "--url", URL, "--org", ORG, "--doc", DOC, "--editor", editor, "--state", state,
                            "edit", "--insert", str(rng.randrange(1000)), "[cli]"], env=env, capture_output=True, text=True)
        with lock:
            if r.returncode == 0:
                totals["pushes"] += 1
            else:
                totals["other_errors"] += 1
                print("folio-cli:", r.stderr[:200], file=sys.stderr)
        stop.wait(2)


def subscriber(editor, seconds=None):
    q = urllib.parse.urlencode(ids(editor))
    s = socket.create_connection((HOST, PORT), timeout=5)
    s.sendall(("GET /v2/crdt/subscribe?%s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nx-folio-api-key: %s\r\n"
               "x-folio-auth-token: %s\r\n\r\n" % (q, KEY, TOKEN)).encode())
    end = time.time() + seconds if seconds else None
    buf = b""
    try:
        while not stop.is_set() and (end is None or time.time() < end):
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                with lock:
                    totals["other_errors"] += 1
                print("subscriber closed by the server", file=sys.stderr)
                return
            buf += chunk
            if buf.startswith(b"HTTP/1.1 ") and not buf.startswith(b"HTTP/1.1 200"):
                with lock:
                    totals["other_errors"] += 1
                print("subscribe refused:", buf[:200], file=sys.stderr)
                return
            n = buf.count(b"\ndata: ")
            buf = buf[buf.rfind(b"\n"):]
            with lock:
                totals["events"] += n
    finally:
        s.close()


def churn():
    rng = random.Random(4)
    while not stop.is_set():
        subscriber("t%d" % rng.randrange(8), seconds=1)


def commenter(seed):
    c, rng = Client(), random.Random(seed)
    while not stop.is_set():
        c.post("/v2/commentannotations/comments/add", {"organizationId": ORG, "documentId": DOC, "annotationId": "a%d" % rng.randrange(THREADS),
                                                        "commentData": [{"commentText": "soak %d" % rng.randrange(10 ** 6), "from": USER}]})
        time.sleep(0.01)


def rss_kb(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def nginx_pids():
    master = int(open(NGINX_PIDFILE).read())
    children = [int(p) for p in open("/proc/%d/task/%d/children" % (master, master)).read().split()]
    return [master] + children


def gauges(names):
    """Current values of some of folio-fcgi's /metrics gauges (nginx serves them to loopback)."""
    conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {n: float(values.get(n, 0)) for n in names}


def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000 if xs else 0.0


def mean(samples, gauge):
    return sum(s[gauge] for s in samples) / len(samples) / 2 ** 20


def main():
    setup()
    workdir = os.path.dirname(DB)
    threads = [threading.Thread(target=getter, args=(10 + i,)) for i in range(2)]
    threads += [threading.Thread(target=updater, args=(20 + i,)) for i in range(2)]
    threads += [threading.Thread(target=syncer, args=(30,)), threading.Thread(target=pusher, args=(workdir,))]
    threads += [threading.Thread(target=subscriber, args=("t%d" % i,)) for i in range(8)]
    threads += [threading.Thread(target=churn), threading.Thread(target=commenter, args=(40,))]
    for t in threads:
        t.daemon = True
        t.start()
    print("%6s %10s %10s %8s %8s %8s %5s %5s %10s %9s %8s %7s %7s %7s" % (
        "t(s)", "fcgi_anon", "fcgi_file", "cache", "heap", "heapfree", "fds", "5xx", "nginx_rss", "wal", "db", "req/s", "p50_ms", "p99_ms"))
    samples, start = [], time.time()
    while time.time() - start < SECONDS:
        time.sleep(10)
        with lock:
            lat, n, errors = window["latencies"], window["requests"], window["5xx"]
            window.update(latencies=[], requests=0, **{"5xx": 0})
        s = {"t": time.time() - start, "rss": rss_kb(FCGI_PID, "RssAnon"), "file": rss_kb(FCGI_PID, "RssFile"), "fds": len(os.listdir("/proc/%d/fd" % FCGI_PID)),
             "nginx_rss": sum(rss_kb(p) for p in nginx_pids()), "wal": size(DB + "-wal"), "db": size(DB), "5xx": errors,
             "rps": n / 10, "p50": pct(lat, 0.5), "p99": pct(lat, 0.99)}
        s.update(gauges(["folio_doc_cache_bytes", "folio_heap_allocated_bytes", "folio_heap_free_bytes"]))
        samples.append(s)
        print("%6.0f %7d kB %7d kB %5.1f MB %5.1f MB %5.1f MB %5d %5d %7d kB %6.1f MB %5.1f MB %7.0f %7.2f %7.2f" % (
            s["t"], s["rss"], s["file"], s["folio_doc_cache_bytes"] / 2 ** 20, s["folio_heap_allocated_bytes"] / 2 ** 20,
            s["folio_heap_free_bytes"] / 2 ** 20, s["fds"], s["5xx"], s["nginx_rss"], s["wal"] / 2 ** 20, s["db"] / 2 ** 20, s["rps"], s["p50"],
            s["p99"]), flush=True)
    stop.set()
    time.sleep(1)
    warmup = max(60, SECONDS // 5)
    warm = [s for s in samples if s["t"] >= warmup]
    base, last = warm[0], warm[-1]
    third = max(1, len(warm) // 3)
    first_rss = sum(s["rss"] for s in warm[:third]) / third
    last_rss = sum(s["rss"] for s in warm[-third:]) / third
    growth = (last_rss - first_rss) / first_rss
    wal_max = max(s["wal"] for s in samples)
    print("\nsoak %d s: %d requests, %d 5xx, %d other errors; %d syncs, %d folio-cli pushes, %d events to subscribers" % (
        SECONDS, totals["requests"], totals["5xx"], totals["other_errors"], totals["syncs"], totals["pushes"], totals["events"]))
    print("folio-fcgi heap (RssAnon, means of the first and the last third after the %d s warm-up): %d kB -> %d kB (%+.1f%%, max %d kB); "
          "live allocations %.1f -> %.1f MB, held free %.1f -> %.1f MB; mapped database pages "
          "(RssFile) %d -> %d kB; fds %d -> %d; nginx RSS %d -> %d kB; WAL max %.1f MB; database %.1f -> %.1f MB" % (
              warmup, first_rss, last_rss, 100 * growth, max(s["rss"] for s in warm),
              mean(warm[:third], "folio_heap_allocated_bytes"), mean(warm[-third:], "folio_heap_allocated_bytes"),
              mean(warm[:third], "folio_heap_free_bytes"), mean(warm[-third:], "folio_heap_free_bytes"), base["file"], last["file"], base["fds"], last["fds"],
              base["nginx_rss"], last["nginx_rss"], wal_max / 2 ** 20, base["db"] / 2 ** 20, last["db"] / 2 ** 20))
    failed = totals["5xx"] > 0 or growth >= 0.05 or wal_max > 64 * 2 ** 20
    print("soak: %s (criteria: 0 5xx, heap growth < 5%% after warm-up, WAL under 64 MB)" % ("FAILED" if failed else "ok"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
