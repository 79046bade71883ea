"""EventSource subscribers of one record on raw sockets, in one epoll loop (bench/support/live_fanout.py,
bench/support/presence_fanout.py).

  sel, socks = subscribe(host, port, key, token, ids, n)    n subscribers, each greeted by Nchan
  delays = deliveries(sel, n, t0, accept)                    reads until n messages `accept` takes
  read_some(sel, on_message, wait)                           one read of what has come, message by message
"""
import json
import selectors
import socket
import time
import urllib.parse


def subscribe(host, port, key, token, ids, n):
    """`n` subscribers of the record `ids`, each greeted by Nchan (subscribed): (selector, sockets)."""
    query = urllib.parse.urlencode(ids)
    request = ("GET /v2/crdt/subscribe?%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nx-folio-api-key: %s\r\n"
               "x-folio-auth-token: %s\r\n\r\n" % (query, host, key, token)).encode()
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port))
        s.sendall(request)
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ, {"buf": bytearray(), "ready": False})
    ready = 0
    while ready < n:
        for k, _ in sel.select(10):
            buf = k.data["buf"]
            chunk = k.fileobj.recv(65536)
            if not chunk:
                raise SystemExit("a subscriber was refused or closed: %r" % bytes(buf[:300]))
            buf += chunk
            if b": hi\n" in buf and not k.data["ready"]:
                k.data["ready"] = True
                ready += 1
                del buf[:buf.index(b": hi\n") + 5]
    return sel, socks


def read_some(sel, on_message, wait=10):
    """Reads what the subscribers have (waiting at most `wait` seconds for something) and calls
    `on_message(sock, message)` for each whole message (parsed JSON); False when nothing came."""
    events = sel.select(wait)
    for k, _ in events:
        buf = k.data["buf"]
        buf += k.fileobj.recv(65536)
        while b"\n\n" in buf:
            ev, _, rest = bytes(buf).partition(b"\n\n")
            buf[:] = rest
            for line in ev.split(b"\n"):
                if line.startswith(b"data:"):
                    on_message(k.fileobj, json.loads(line[5:]))
    return bool(events)


def deliveries(sel, n, t0, accept=lambda message: True, what="deliveries"):
    """Reads the subscribers' events until `n` messages that `accept` takes have come; answers each
    one's delay from `t0` (time.perf_counter)."""
    lat = []

    def take(_, message):
        if accept(message):
            lat.append(time.perf_counter() - t0)
    while len(lat) < n:
        if not read_some(sel, take):
            raise SystemExit("%s missing: %d of %d" % (what, len(lat), n))
    return lat
