"""The measuring side of bench/subscriber_burst.sh: N raw EventSource subscribers on one epoll loop.

  subscriber_burst.py URL API_KEY TOKEN N NGINX_ERROR_LOG
"""
import collections
import http.client
import json
import resource
import selectors
import socket
import sys
import time
import urllib.parse

url, key, token, n, error_log = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
resource.setrlimit(resource.RLIMIT_NOFILE, (n * 2 + 1024, n * 2 + 1024))
ids = {"organizationId": "org", "documentId": "burst", "editorId": "e"}
conn = http.client.HTTPConnection(host, port, timeout=60)
conn.request("POST", "/v2/crdt/add", body=json.dumps({"data": dict(ids, type="text", data="x")}),
             headers={"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token})
assert conn.getresponse().status == 200
request = ("GET /v2/crdt/subscribe?%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nx-folio-api-key: %s\r\n"
           "x-folio-auth-token: %s\r\n\r\n" % (urllib.parse.urlencode(ids), host, key, token)).encode()


def kind(buf):
    """'greeted', 'JSON 503', another status line, or 'closed'; None while incomplete."""
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return None
    status = head.split(b"\r\n")[0].decode(errors="replace")
    if status.startswith("HTTP/1.1 200"):
        return "greeted" if b": hi\n" in body else None
    lengths = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    if not lengths or len(body) < lengths[0]:
        return None
    if status.startswith("HTTP/1.1 503") and b'"status":"UNAVAILABLE"' in body:
        return "refused with a JSON 503"
    return status + " " + body[:80].decode(errors="replace")


def run(count, at_once):
    """Subscribes `count` clients, all at once or one after another; (kinds, seconds each, total)."""
    sel = selectors.DefaultSelector()
    kinds, took, socks = collections.Counter(), [], []
    start = time.perf_counter()

    def open_one():
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((host, port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, [b"", time.perf_counter()])

    def pump(until):
        while len(took) < until:
            events = sel.select(60)
            if not events:
                raise SystemExit("no answer for 60 s: %d of %d answered" % (len(took), count))
            for k, ev in events:
                s, data = k.fileobj, k.data
                if ev & selectors.EVENT_WRITE:
                    s.send(request)
                    sel.modify(s, selectors.EVENT_READ, data)
                    continue
                try:
                    chunk = s.recv(65536)
                except OSError:
                    chunk = b""
                data[0] += chunk
                what = "closed without an answer" if not chunk else kind(data[0])
                if what:
                    kinds[what] += 1
                    took.append(time.perf_counter() - data[1])
                    sel.unregister(s)

    if at_once:
        for _ in range(count):
            open_one()
        pump(count)
    else:
        for i in range(count):
            open_one()
            pump(i + 1)
    total = time.perf_counter() - start
    for s in socks:
        s.close()
    return kinds, sorted(took), total


def pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def dead_workers():
    with open(error_log) as f:
        return sum(1 for line in f if "exited on signal" in line)


base_kinds, base_took, base_total = run(n, at_once=False)
time.sleep(1)
kinds, took, total = run(n, at_once=True)
time.sleep(1)
print("\nSubscriber burst: %d EventSource subscribers of one record (nginx + Nchan + authorization hop + folio-fcgi)" % n)
print("%-26s %10s %10s %10s   %s" % ("", "all in", "p50", "p99", "answers"))
print("%-26s %8.2f s %7.1f ms %7.1f ms   %s" % ("one after another (base)", base_total, pct(base_took, 50) * 1e3, pct(base_took, 99) * 1e3, dict(base_kinds)))
print("%-26s %8.2f s %7.1f ms %7.1f ms   %s" % ("all at once", total, pct(took, 50) * 1e3, pct(took, 99) * 1e3, dict(kinds)))
print("all at once / one after another: %.2fx the time; nginx workers died: %d" % (total / base_total, dead_workers()))
ok = set(kinds) <= {"greeted", "refused with a JSON 503"} and set(base_kinds) <= {"greeted"} and dead_workers() == 0
sys.exit(0 if ok else 1)
