"""The measuring side of bench/presence.sh: N EventSource subscribers of one record on raw sockets (one
epoll loop); by turns, a presence/set (a state that changes each time: an update published to the
record's channel) and, as the baseline, a crdt/update of the same record (its change message, the same
fan-out); each timed from the request sent to each subscriber's reading of its message.

  presence_fanout.py URL API_KEY TOKEN ROUNDS SUBSCRIBERS
"""
import http.client
import json
import os
import resource
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import event_streams  # noqa: E402

url, key, token, rounds, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
H = {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token}
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
ids = {"organizationId": "org", "documentId": "presence", "editorId": "fan"}
conn = http.client.HTTPConnection(host, port, timeout=60)


def post(path, data):
    conn.request("POST", path, body=json.dumps({"data": data}), headers=H)
    r = conn.getresponse()
    raw = r.read()
    if r.status != 200:
        raise SystemExit("%s: %d %s" % (path, r.status, raw[:200]))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


post("/v2/crdt/add", dict(ids, type="text", data="x"))
sel, socks = event_streams.subscribe(host, port, key, token, ids, n)


def one_round(send, kind):
    """Sends, then reads until each subscriber has one message of `kind` ("presence" or "change");
    answers each delivery's delay and the last one's (the whole fan-out)."""
    t0 = time.perf_counter()
    send()
    lat = event_streams.deliveries(sel, n, t0, lambda m: ("presence" in m) == (kind == "presence"), kind + " deliveries")
    return lat, max(lat)


clients = ["c%d" % i for i in range(50)]  # in turn, within the per-client rate (10 a second)
for c in clients:  # joins, before the measured updates
    one_round(lambda c=c: post("/v2/presence/set", dict(ids, clientId=c, userId="u-" + c, state={"v": 0})), "presence")
pres, pres_all, chg, chg_all = [], [], [], []
for r in range(rounds + 3):
    c = clients[r % len(clients)]
    send_p = lambda: post("/v2/presence/set", dict(ids, clientId=c, userId="u-" + c, state={"name": c, "v": r + 1},
                                                     selection={"anchor": "%d.%d" % (r, r), "head": "end"}))
    send_c = lambda: post("/v2/crdt/update", dict(ids, data="x" * (r % 7 + 1) + str(r)))
    order = ((send_p, "presence"), (send_c, "change")) if r % 2 else ((send_c, "change"), (send_p, "presence"))
    for send, kind in order:
        lat, last = one_round(send, kind)
        if r >= 3:  # warm-up rounds left out
            (pres if kind == "presence" else chg).extend(lat)
            (pres_all if kind == "presence" else chg_all).append(last)
for s in socks:
    s.close()


def ms(x):
    return "%9.2f ms" % (x * 1e3)


print("\nPresence fan-out: %d announcements (presence/set) and %d changes (crdt/update, the baseline) by turns, one record,"
      " %d EventSource subscribers; delay = request sent -> message read (after 3 warm-up rounds)" % (rounds, rounds, n))
print("%-22s %12s %12s %12s %12s %12s" % ("message", "each p50", "each p99", "all-of-N p50", "all-of-N p99", "deliveries"))
print("%-22s %12s %12s %12s %12s %12d" % ("presence update", ms(pct(pres, 50)), ms(pct(pres, 99)), ms(pct(pres_all, 50)), ms(pct(pres_all, 99)), len(pres)))
print("%-22s %12s %12s %12s %12s %12d" % ("change (baseline)", ms(pct(chg, 50)), ms(pct(chg, 99)), ms(pct(chg_all, 50)), ms(pct(chg_all, 99)), len(chg)))
print("  presence / change: p50 %.2fx, p99 %.2fx (each delivery); all-of-N p50 %.2fx, p99 %.2fx   no target (issue 53 asks for the figures)" % (
    pct(pres, 50) / pct(chg, 50), pct(pres, 99) / pct(chg, 99), pct(pres_all, 50) / pct(chg_all, 50), pct(pres_all, 99) / pct(chg_all, 99)))
