"""Connected clients end to end (docs/API.md, crdt/sync and crdt/subscribe, issue 6): POST /v2/crdt/sync and the live push of
GET /v2/crdt/subscribe through the real nginx + Nchan in front of the real folio-fcgi. Client replicas
are folio-cli processes (the engine's sync_client) keeping their state in files; the transports are
also spoken raw here (EventSource, long-poll, WebSocket) so that what nginx sends is checked as bytes.

Run by ctest as:  live_e2e.py BUILD_DIR SOURCE_DIR
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import queue
import socket
import subprocess
import threading
import time
import unittest
import urllib.parse

from stack import *  # noqa: F401,F403 (setUpModule/tearDownModule start and stop the stack)
import stack
from varints import read_varint

CLI = os.path.join(stack.BUILD, "tools", "folio-cli")
ORG, DOC = "org live", "doc/ü+1"   # a space, a slash, a plus and non-ASCII: the query decoding is exercised


def ids(editor):
    return {"organizationId": ORG, "documentId": DOC, "editorId": editor}


def query(editor, org=ORG, doc=DOC):
    return urllib.parse.urlencode({"organizationId": org, "documentId": doc, "editorId": editor})


def creds_headers(who):
    if not who:
        return {}
    key, token = CREDS[who]
    return {"x-folio-api-key": key, "x-folio-auth-token": token}


def cli(*args, state=None, editor="e", who="a", check=True):
    key, token = CREDS[who]
    env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % STACK.port)
    cmd = [CLI, "--org", ORG, "--doc", DOC, "--editor", editor]
    if state:
        cmd += ["--state", state]
    r = subprocess.run(cmd + list(args), env=env, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("folio-cli %s failed: %s" % (" ".join(args), r.stderr))
    return r


def value_of(cli_result):
    return json.loads(cli_result.stdout.strip().splitlines()[-1])


def rest_value(editor, who="a"):
    status, body = call("/v2/crdt/get", ids(editor), who=who)
    assert status == 200, body
    return body["result"]["data"][0]["data"]


def add(editor, type_, data, who="a"):
    status, body = call("/v2/crdt/add", dict(ids(editor), type=type_, data=data), who=who)
    assert status == 200, body


def update(editor, data, who="a", port=None, **extra):
    """crdt/update through the stack, or through one node's nginx (`port`)."""
    status, body = call("/v2/crdt/update", dict(ids(editor), data=data, **extra), who=who, port=port)
    assert status == 200, body


def state_path(name):
    return os.path.join(STACK.dir, name + ".state")


class EventSource:
    """A raw EventSource subscriber: connects, waits for Nchan's greeting, yields events."""

    def __init__(self, editor, who="a", last_event_id=None, raw_query=None, port=None):
        subscribing = Subscribing(ids(editor) if raw_query is None else None, who)
        self.conn = http.client.HTTPConnection("127.0.0.1", port or STACK.port, timeout=10)  # the stack, or one node's nginx
        h = dict(creds_headers(who), Accept="text/event-stream")
        if last_event_id:
            h["Last-Event-ID"] = last_event_id
        self.conn.request("GET", "/v2/crdt/subscribe?" + (raw_query or query(editor)), headers=h)
        self.sock = self.conn.sock  # http.client lets go of it once a streamed response begins
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        if self.status == 200:
            line = self.resp.fp.readline()
            assert line.startswith(b":"), line  # ": hi" — subscribed from here on
            subscribing.done()

    def next(self, timeout=10):
        """(id, parsed data) of the next event; socket.timeout when none comes within `timeout` (Nchan's
        keep-alive comments do not count)."""
        deadline = time.time() + timeout
        event_id, data = None, []
        while True:
            self.sock.settimeout(max(0.01, deadline - time.time()))
            line = self.resp.fp.readline()
            if time.time() > deadline:
                raise socket.timeout("no event in %s s" % timeout)
            if not line:
                raise EOFError("stream closed")
            line = line.rstrip(b"\r\n")
            if line.startswith(b"id:"):
                event_id = line[3:].strip().decode()
            elif line.startswith(b"data:"):
                data.append(line[5:].lstrip().decode())
            elif not line and data:
                return event_id, json.loads("\n".join(data))

    def close(self):
        self.conn.close()


class WebSocket:
    """A minimal RFC 6455 client: the handshake, then unmasked text frames from the server."""

    def __init__(self, editor, who="a"):
        self.sock = socket.create_connection(("127.0.0.1", STACK.port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET /v2/crdt/subscribe?%s HTTP/1.1" % query(editor), "Host: 127.0.0.1", "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: " + key]
        lines += ["%s: %s" % kv for kv in creds_headers(who).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])
        self.head = head.decode("latin-1")

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def next_text(self, timeout=10):
        self.sock.settimeout(timeout)
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            payload = self._read(n)
            if b0 & 0x0F == 1:
                return json.loads(payload)

    def close(self):
        self.sock.close()


def log_now():
    """Now as folio-fcgi's log lines write their time (ISO 8601 UTC, milliseconds)."""
    ms = int(time.time() * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def fcgi_lines_since(since):
    """folio-fcgi's log lines written after `since` (log_now()). Access lines are held up to a second
    (docs/OPERATIONS.md, "Logs"), so a line's place in the file does not tell when its request was
    answered; its time does."""
    def time_of(line):
        try:
            return json.loads(line).get("time", "")
        except ValueError:  # not one of the responder's lines
            return ""
    return [line for line in log_lines(STACK.fcgi_log) if time_of(line) > since]


class Watcher:
    """`folio-cli watch` in the background; its printed values arrive on a queue."""

    def __init__(self, editor, transport="eventsource", state=None, who="a"):
        key, token = CREDS[who]
        env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % STACK.port)
        self.log_start = log_now()  # for settled()
        self.proc = subprocess.Popen([CLI, "--org", ORG, "--doc", DOC, "--editor", editor, "--transport", transport]
                                     + (["--state", state] if state else []) + ["watch"],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.values = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.values.put(json.loads(line) if line.strip() != "deleted" else "<deleted>")

    def settled(self):
        """Waits for the watcher's second sync, a second after it subscribed (folio-cli watch), so that
        what it shows next came through the stream."""
        deadline = time.time() + 20
        while sum('"/v2/crdt/sync"' in line for line in fcgi_lines_since(self.log_start)) < 2 and time.time() < deadline:
            time.sleep(0.1)

    def wait_for(self, value, timeout=20):
        """Reads printed values until `value` appears; returns everything seen."""
        seen, deadline = [], time.time() + timeout
        while time.time() < deadline:
            try:
                v = self.values.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            seen.append(v)
            if v == value:
                return seen
        raise AssertionError("watcher never showed %r; saw %r; stderr %s\n%s" % (value, seen, self.stop(), STACK.log_tails()))

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return ""


def incarnation_of(editor, who="a"):
    """The record's incarnation, as a first sync (the empty version, no update) answers it."""
    status, body = call("/v2/crdt/sync", dict(ids(editor), version="AA=="), who=who)
    assert status == 200, body
    return body["result"]["data"]["incarnation"]


def sync_call(editor, version=b"\x00", update=None, who="a", incarnation=None, **extra):
    """A sync; one with state (a version or an update) names the record's current incarnation unless
    `incarnation` is given ("" sends none)."""
    data = dict(ids(editor), version=base64.b64encode(version).decode(), **extra)
    if update is not None:
        data["update"] = base64.b64encode(update).decode()
    if incarnation is None and (version != b"\x00" or update is not None):
        incarnation = incarnation_of(editor) if who in ("a", "a_ro") else "1"
    if incarnation:
        data["incarnation"] = incarnation
    return call("/v2/crdt/sync", data, who=who)


def restart_nginx(**env):
    """Every node's nginx stopped and started again, rendered with `env` (scripts/nginx-conf's settings)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        STACK.nginx.terminate()
        STACK.nginx.wait(10)
        STACK.start_nginx()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class LivePush(unittest.TestCase):
    def test_an_eventsource_client_sees_a_rest_update_and_its_replica_equals_the_rest_value(self):
        add("es", "text", "Hello")
        w = Watcher("es")
        try:
            w.wait_for("Hello")
            update("es", "Hello, live world")
            w.wait_for("Hello, live world")
            self.assertEqual(rest_value("es"), "Hello, live world")
        finally:
            w.stop()

    def test_the_pushed_message_carries_the_ops_version_and_metadata(self):
        add("msg", "map", {"a": 1})
        es = EventSource("msg")
        try:
            update("msg", {"a": 1, "b": [True]}, userId="carol", sessionId="s-9")
            event_id, m = es.next()
            self.assertTrue(event_id)
            self.assertEqual(m["editorId"], "msg")
            self.assertEqual(m["lastUpdatedBy"], "carol")
            self.assertEqual(m["sessionId"], "s-9")
            self.assertEqual(base64.b64decode(m["update"])[:5], b"Fo\x01B\x03")  # a map batch
            # A replica at the message's version holds the REST value: replay it through folio-cli.
            st = state_path("msg-before")
            cli("sync", state=st, editor="msg")
            self.assertEqual(value_of(cli("apply", json.dumps(m), state=st, editor="msg")), {"a": 1, "b": [True]})
            # No-op updates publish nothing; deletes publish a tombstone.
            update("msg", {"a": 1, "b": [True]})
            self.assertEqual(call("/v2/crdt/delete", ids("msg"))[0], 200)
            _, m = es.next()
            self.assertTrue(m["deleted"])
        finally:
            es.close()

    def test_every_transport_delivers(self):
        add("tr", "text", "0")
        # EventSource through folio-cli and raw (above); long-poll through folio-cli
        w = Watcher("tr", transport="longpoll")
        try:
            w.wait_for("0")
            for i in range(1, 30):  # a long-poll is only waiting once its request is in: keep changing
                update("tr", "lp %d" % i)
                try:
                    v = w.values.get(timeout=0.5)
                    break
                except queue.Empty:
                    continue
            self.assertTrue(v.startswith("lp "))
            update("tr", "lp final")
            w.wait_for("lp final")
        finally:
            w.stop()
        # WebSocket, raw
        ws = WebSocket("tr")
        self.assertEqual(ws.status, 101, ws.head)
        try:
            update("tr", "over a websocket")
            m = ws.next_text()
            self.assertEqual(m["editorId"], "tr")
            st = state_path("tr-ws")
            cli("sync", state=st, editor="tr")  # already at the latest version: applying is a no-op
            self.assertEqual(value_of(cli("apply", json.dumps(m), state=st, editor="tr")), "over a websocket")
        finally:
            ws.close()
        # Long-poll, raw: the answer is the message itself, JSON
        result = {}

        def poll():
            c = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=20)
            c.request("GET", "/v2/crdt/subscribe?" + query("tr"), headers=creds_headers("a"))
            r = c.getresponse()
            result["status"], result["type"], result["body"] = r.status, r.getheader("Content-Type"), r.read()
            c.close()
        t = threading.Thread(target=poll)
        t.start()
        for i in range(40):
            time.sleep(0.25)
            update("tr", "raw poll %d" % i)
            if not t.is_alive():
                break
        t.join(20)
        self.assertEqual(result["status"], 200)
        self.assertEqual(result["type"], "application/json")
        self.assertEqual(json.loads(result["body"])["editorId"], "tr")

    def test_a_watcher_syncs_when_subscribed_and_once_more_a_second_later(self):
        # With several nginx workers a subscription reaches the channel's owning worker a moment after
        # Nchan's greeting, and a change committed in that moment would reach neither the first sync
        # nor the stream: folio-cli syncs again a second later.
        add("settle", "text", "s")
        start = log_now()

        def requests():  # the endpoints folio-fcgi answered since `start`
            return [json.loads(line).get("endpoint") for line in fcgi_lines_since(start)]

        w = Watcher("settle")
        try:
            w.wait_for("s")
            deadline = time.time() + 10
            while requests().count("/v2/crdt/sync") < 2 and time.time() < deadline:
                time.sleep(0.2)
            time.sleep(1.5)  # and no third one
            self.assertEqual(requests().count("/v2/crdt/subscribe"), 1)  # the authorization
            self.assertEqual(requests().count("/v2/crdt/sync"), 2)
        finally:
            w.stop()

    def test_a_reconnecting_eventsource_client_gets_no_replay_and_catches_up_by_syncing(self):
        # Nchan's message ids start over when nginx restarts, so a Last-Event-ID from before a restart
        # could skip a newer message: nginx ignores it, and a client syncs after each (re)subscribe.
        add("resume", "text", "a")
        st = state_path("resume")
        cli("sync", state=st, editor="resume")
        es = EventSource("resume")
        update("resume", "ab")
        first_id, _ = es.next()
        es.close()
        # Messages go to nginx after the answer (crdt/publish/send_queue.hpp), and in a cluster to the other nodes through
        # Redis: subscribe again only once every node has "abc"'s message (a watcher per node sees that
        # version), or the new subscriber could receive it live, as it should, which is not a replay.
        watchers = [EventSource("resume", port=n.port) for n in STACK.nodes]
        try:
            update("resume", "abc")  # while disconnected
            version = sync_call("resume")[1]["result"]["data"]["version"]
            for w in watchers:
                self.assertEqual(w.next()[1]["version"], version)
        finally:
            for w in watchers:
                w.close()
        es = EventSource("resume", last_event_id=first_id)
        try:
            self.assertEqual(value_of(cli("sync", state=st, editor="resume")), "abc")  # the catch-up
            update("resume", "abcd")
            _, m = es.next()  # the live change, not a replay of "abc"
            self.assertEqual(m["version"], sync_call("resume")[1]["result"]["data"]["version"])
        finally:
            es.close()

    def test_a_client_that_missed_messages_detects_the_gap_and_converges(self):
        add("gap", "map", {})
        st = state_path("gap")
        cli("sync", state=st, editor="gap")
        es = EventSource("gap")
        try:
            update("gap", {"x": 1})
            update("gap", {"x": 1, "y": 2})
            update("gap", {"x": 1, "y": 2, "z": 3})
            msgs = [es.next()[1] for _ in range(3)]
        finally:
            es.close()
        # The client saw only the last change: its ops do not depend on the missed ones (another key),
        # yet the version it carries shows the gap, and the client syncs.
        last_only = dict(msgs[2])
        v = value_of(cli("apply", json.dumps(last_only), state=st, editor="gap"))
        self.assertEqual(v, {"x": 1, "y": 2, "z": 3})
        self.assertEqual(v, rest_value("gap"))


class NginxMemory(unittest.TestCase):
    """What a channel holds in Nchan's shared memory is bounded, and a subscriber learns of every change
    it could not be pushed: large changes go as notices (no update: sync now), and a failed publish is
    followed by a notice resent until nginx takes one (service/crdt/publish/owed_notices.hpp)."""

    def test_a_large_change_goes_as_a_notice_that_makes_clients_sync(self):
        add("big", "text", "small")
        es = EventSource("big")
        try:
            update("big", "still small")
            _, m = es.next()
            self.assertEqual(sorted(m), ["editorId", "incarnation", "lastUpdate", "lastUpdatedBy", "revision", "sessionId", "update", "version"])
            small_revision = m["revision"]
            big = "L" * (80 * 1024)  # its message would be over 64 KiB
            update("big", big, userId="ula")
            _, m = es.next()
            self.assertEqual(sorted(m), ["editorId", "incarnation", "lastUpdate", "lastUpdatedBy", "revision", "sessionId"])
            self.assertEqual((m["editorId"], m["lastUpdatedBy"], m["incarnation"]), ("big", "ula", incarnation_of("big")))
            self.assertEqual(m["revision"], small_revision + 1)
        finally:
            es.close()
        st = state_path("big")
        cli("sync", state=st, editor="big")
        update("big", big + "!")
        self.assertEqual(value_of(cli("apply", json.dumps(m), state=st, editor="big")), big + "!")  # a notice: folio-cli syncs

    def test_changes_beyond_the_minute_budget_go_as_notices(self):
        # 32 MiB of messages with ops a minute (refilled as the minute passes): changes of 40 KB (54 KB
        # messages) sent faster than it refills spend it, and from then on even a change that fits in
        # a message goes as a notice. Flood until budget-0's subscriber sees one (at most 4,000 changes).
        value = "w" * (40 * 1024)
        for i in range(10):
            add("budget-%d" % i, "map", {})
        st = state_path("budget")
        cli("sync", state=st, editor="budget-0")
        es = EventSource("budget-0")
        seen, notice, sent = [], threading.Event(), [0]
        lock = threading.Lock()

        def read():
            while not notice.is_set():
                m = es.next(timeout=60)[1]
                seen.append(m)
                if "update" not in m:
                    notice.set()

        def flood():
            while not notice.is_set():
                with lock:
                    i = sent[0]
                    sent[0] += 1
                if i >= 4000:
                    return
                # The budget is each responder's: in a cluster, all through one node (under ASan, spread
                # over three the flood did not outrun three refills).
                update("budget-%d" % (i % 10), {"k": value + str(i)}, port=STACK.nodes[0].port if STACK.cluster else None)

        reader = threading.Thread(target=read)
        reader.start()
        threads = [threading.Thread(target=flood) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            reader.join(60)
        finally:
            notice.set()
            es.close()
            STACK.fcgi.terminate()  # a fresh budget for the tests after this one
            STACK.fcgi.wait(10)
            STACK.start_fcgi()
        self.assertTrue("update" in seen[0] and "update" not in seen[-1], "%d changes, %d messages" % (sent[0], len(seen)))
        self.assertEqual(value_of(cli("apply", json.dumps(seen[-1]), state=st, editor="budget-0")), rest_value("budget-0"))

    def test_one_tenant_flooding_large_changes_does_not_starve_another_tenants_subscribers(self):
        # Nchan's shared memory (128 MiB) must not fill with one tenant's messages: if it did, publishes
        # would fail (507) and another tenant's pushes would be dropped without its subscribers knowing.
        add("quiet", "text", "q0", who="b")
        st = state_path("quiet")
        cli("sync", state=st, editor="quiet", who="b")
        es = EventSource("quiet", who="b")
        try:
            value = "v" * (200 * 1024)

            def flood(first):
                for i in range(first, 850, 4):
                    update("flood-%d" % (i % 50), {"k": value + str(i)})

            for i in range(50):  # 50 records, then 800 updates of 200 KB in four threads
                add("flood-%d" % i, "map", {})
            threads = [threading.Thread(target=flood, args=(50 + k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            quiet = "b's change of 100 KB " + "q" * (100 * 1024)
            update("quiet", quiet, who="b")
            _, m = es.next(timeout=30)  # on the same connection: nothing was dropped
        finally:
            es.close()
        self.assertEqual(m["editorId"], "quiet")
        self.assertEqual(value_of(cli("apply", json.dumps(m), state=st, editor="quiet", who="b")), quiet)

    def test_a_tenant_flooding_small_changes_across_many_records_spends_only_its_own_message_budget(self):
        # Tenant a sends small changes across 400 records, more than its 6,000 messages a minute
        # (publisher::messages_per_tenant_window), through one node (the budget is each responder's),
        # until 1,000 changes past the first one over that budget.
        # Past its budget a's changes are not published: their channels are owed one notice each, sent
        # as the budget refills (a's subscriber learns of its record's change). Meanwhile tenant b's
        # changes reach b's subscriber, with their ops, within a second; nothing fails in nginx.
        port = STACK.nodes[0].port if STACK.cluster else STACK.port
        records = 400
        flood_ids = [dict(ids("many-%d" % i)) for i in range(records)]
        key, token = CREDS["a"]
        headers = {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token}

        def post(conn, path, data):
            conn.request("POST", path, json.dumps({"data": data}), headers)
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200, body

        def metric(name):
            status, text = call("/metrics", method="GET", who=None, content_type=None, raw=True, port=port)
            for line in text.decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
            raise AssertionError("no %s in /metrics" % name)

        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for r in flood_ids:
            post(c, "/v2/crdt/add", dict(r, type="map", data={}))
        c.close()
        add("quiet-many", "text", "q", who="b")
        watched = EventSource("many-0", port=port)
        quiet = EventSource("quiet-many", who="b", port=port)
        nginx_log = os.path.join(STACK.dir, "log", "nginx-error.log")
        slab_before = sum("ngx_slab_alloc() failed" in line for line in log_lines(nginx_log))
        failures_before = metric("folio_publish_failures_total")
        # The flood goes on until 1,000 changes after the first one over a's budget (at most 20,000).
        sent, limit, stop = [0], [20000], threading.Event()
        lock = threading.Lock()

        def flood():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            while not stop.is_set():
                with lock:
                    i = sent[0]
                    sent[0] += 1
                if i >= limit[0]:
                    break
                post(conn, "/v2/crdt/update", dict(flood_ids[i % records], data={"n": i}))
            conn.close()

        threads = [threading.Thread(target=flood) for _ in range(4)]
        latencies = []
        try:
            for t in threads:
                t.start()
            k = 0
            while any(t.is_alive() for t in threads) or k < 5:
                k += 1
                update("quiet-many", "q%d" % k, who="b", port=port)
                answered = time.monotonic()
                _, m = quiet.next(timeout=10)
                latencies.append(time.monotonic() - answered)
                self.assertIn("update", m)  # with its ops: b's byte budget is b's own
                if limit[0] == 20000 and metric("folio_publish_over_budget_total") > 0:
                    with lock:
                        limit[0] = sent[0] + 1000
                time.sleep(0.2)
            for t in threads:
                t.join()
            over = metric("folio_publish_over_budget_total")
            self.assertGreater(over, 0, "tenant a's %d messages were all published" % (records + sent[0]))
            self.assertEqual(metric("folio_publish_failures_total"), failures_before)
            # a's change after the flood: over its budget (the counter says), its record's subscriber
            # still learns of it by a notice, sent as the budget refills; within it, by the change.
            last = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            post(last, "/v2/crdt/update", dict(flood_ids[0], data={"n": "last"}))
            last.close()
            deferred = metric("folio_publish_over_budget_total") > over
            until = time.monotonic() + 30
            while True:
                _, m = watched.next(timeout=max(0.1, until - time.monotonic()))
                if "update" not in m or not deferred:
                    break  # a notice (the subscriber syncs), or, within the budget, a message
        finally:
            stop.set()
            watched.close()
            quiet.close()
            for t in threads:
                t.join()
            STACK.fcgi.terminate()  # a fresh budget for the tests after this one
            STACK.fcgi.wait(10)
            STACK.start_fcgi()
        latencies.sort()
        self.assertLessEqual(latencies[-1], 1.0, "b's changes reached b's subscriber after %s s" % ["%.2f" % x for x in latencies])
        self.assertEqual(sum("ngx_slab_alloc() failed" in line for line in log_lines(nginx_log)), slab_before)

    @single_node  # one node's publisher socket made to fail; a cluster's Redis outage: cluster_e2e.py
    def test_a_failed_publish_is_followed_by_a_notice_so_the_last_change_is_not_lost(self):
        add("lost-push", "text", "p0")
        w = Watcher("lost-push")
        try:
            w.wait_for("p0")
            w.settled()
            # A responder with no connection to nginx yet, and nginx's publisher socket out of reach:
            # the next publish fails.
            STACK.fcgi.terminate()
            STACK.fcgi.wait(10)
            STACK.start_fcgi()
            away = STACK.publish_socket + ".away"
            os.rename(STACK.publish_socket, away)
            def failures():
                return sum('"publish_failed"' in line for line in log_lines(STACK.fcgi_log))
            before = failures()
            try:
                update("lost-push", "p1, the last change before a quiet period")
                # The publish goes after the answer (a sender thread): the socket comes back once it failed.
                until = time.monotonic() + 10
                while failures() == before and time.monotonic() < until:
                    time.sleep(0.02)
                self.assertGreater(failures(), before)
            finally:
                os.rename(away, STACK.publish_socket)
            w.wait_for("p1, the last change before a quiet period")  # the resent notice, then a sync
        finally:
            w.stop()
        self.assertTrue(any('"publish_notice_delivered"' in line for line in log_lines(STACK.fcgi_log)))


    def test_subscribers_past_nchans_memory_get_a_json_503(self):
        # nginx restarted with 32 KiB of Nchan memory (FOLIO_NCHAN_MEMORY): each new channel takes some of
        # it, so subscribers to new records (through one node, in a cluster) fill it before any publish. Nchan refused the rest with an
        # empty-bodied 507; the public location now answers each of them a JSON 503.
        records = 400
        c = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=60)
        for i in range(records):
            c.request("POST", "/v2/crdt/add", json.dumps({"data": dict(ids("full-%d" % i), type="map", data={})}),
                      dict(creds_headers("a"), **{"Content-Type": "application/json"}))
            r = c.getresponse()
            body = r.read()
            self.assertEqual(r.status, 200, body)
        c.close()
        restart_nginx(FOLIO_NCHAN_MEMORY="32k")
        port = STACK.nodes[0].port if STACK.cluster else STACK.port  # one node's memory
        streams, refusals = [], []
        try:
            for i in range(records):
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                s.sendall(subscription_request(ids("full-%d" % i)))
                answer = read_answer(s)
                if answer.startswith(b"HTTP/1.1 200"):
                    streams.append(s)
                    continue
                s.close()
                head, _, body = answer.partition(b"\r\n\r\n")
                self.assertTrue(head.startswith(b"HTTP/1.1 503") and b"\r\nContent-Type: application/json\r\n" in head, answer[:300])
                self.assertEqual(json.loads(body), {"error": {"message": "Live push is out of memory; retry later.", "status": "UNAVAILABLE"}})
                refusals.append(i)
                if len(refusals) == 5:
                    break
            self.assertEqual(len(refusals), 5, "%d subscribers, none refused: Nchan's memory did not fill" % len(streams))
        finally:
            for s in streams:
                s.close()
            restart_nginx()


class Sync(unittest.TestCase):
    CASES = {
        "text": ("the quick brown fox",
                 [["--insert", "4", "very "], ["--delete", "10", "6"], ["--insert", "0", "A:"]],
                 [["--insert", "4", "slow "], ["--delete", "4", "6"], ["--insert", "18", "!"]]),
        "map": ({"k": 1, "gone": 0, "keep": "x"},
                [["--set", "k", "\"a\""], ["--remove", "gone"], ["--set", "a", "[1]"]],
                [["--set", "k", "\"b\""], ["--set", "gone", "5"], ["--remove", "keep"]]),
        "array": ([{"i": 1}, {"i": 2}],
                  [["--replace", '[{"i":0},{"i":1},{"i":2},{"a":1}]']],
                  [["--replace", '[{"i":2},{"b":1}]']]),
        "xml": ("<p>Hello <b>world</b></p>",
                [["--replace", '<p class="a">Hello big <b>world</b></p>']],
                [["--replace", "<p>Hello <i>world</i>!</p><hr/>"]]),
    }

    def test_concurrent_offline_edits_converge_in_both_sync_orders(self):
        for type_, (initial, edits_a, edits_b) in self.CASES.items():
            for order in ("ab", "ba"):
                with self.subTest(type=type_, order=order):
                    editor = "conv-%s-%s" % (type_, order)
                    add(editor, type_, initial)
                    sa, sb = state_path(editor + "-a"), state_path(editor + "-b")
                    cli("sync", state=sa, editor=editor)
                    cli("sync", state=sb, editor=editor)
                    for e in edits_a:
                        cli("edit", *e, "--offline", state=sa, editor=editor)
                    for e in edits_b:
                        cli("edit", *e, "--offline", state=sb, editor=editor)
                    first, second = (sa, sb) if order == "ab" else (sb, sa)
                    cli("sync", state=first, editor=editor)
                    cli("sync", state=second, editor=editor)
                    va = value_of(cli("sync", state=sa, editor=editor))
                    vb = value_of(cli("sync", state=sb, editor=editor))
                    self.assertEqual(va, vb)
                    self.assertEqual(va, rest_value(editor))
                    self.assertNotEqual(va, initial)

    def test_folio_cli_refuses_a_value_the_record_would_refuse(self):
        add("clibad", "map", {"a": 1})
        st = state_path("clibad")
        cli("sync", state=st, editor="clibad")
        r = cli("edit", "--replace", "{not json", state=st, editor="clibad", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("JSON", r.stderr)
        r = cli("edit", "--replace", "[1]", state=st, editor="clibad", check=False)
        self.assertEqual((r.returncode, r.stderr.strip()), (1, "folio-cli: Data must be an object for type map."))
        self.assertEqual(rest_value("clibad"), {"a": 1})

    def test_sync_answers_what_the_client_lacks_and_pushes_are_idempotent(self):
        add("idem", "text", "abc")
        status, body = sync_call("idem")
        data = ok(self, (status, body), "CRDT data synced successfully.")
        self.assertEqual((data["type"], data["contentKey"]), ("text", "content"))
        version = base64.b64decode(data["version"])
        # Up to date: an empty batch back.
        data = ok(self, sync_call("idem", version=version), "CRDT data synced successfully.")
        self.assertEqual(base64.b64decode(data["update"]), b"Fo\x01B\x01\x00\x00\x00")
        # A client push, twice: stored once, answered with the same version.
        st = state_path("idem")
        cli("sync", state=st, editor="idem")
        cli("edit", "--insert", "3", "d", "--offline", state=st, editor="idem")
        before = call("/v2/crdt/get", ids("idem"))[1]["result"]["data"][0]
        cli("sync", state=st, editor="idem")
        after = call("/v2/crdt/get", ids("idem"))[1]["result"]["data"][0]
        self.assertEqual(after["data"], "abcd")
        self.assertEqual(after["lastUpdatedBy"], "subject-a")
        self.assertNotEqual(after["lastUpdate"], before["lastUpdate"])

    def test_last_updated_by_and_session_follow_the_pushing_client(self):
        add("who", "text", "")
        batch = bytes.fromhex("466f01420101" + "05" + "01" + "3e0000020200" + "026869")  # replica 5 types "hi"
        ok(self, sync_call("who", update=batch, userId="dana", sessionId="tab-2"), "CRDT data synced successfully.")
        rec = call("/v2/crdt/get", ids("who"))[1]["result"]["data"][0]
        self.assertEqual((rec["data"], rec["lastUpdatedBy"], rec["sessionId"]), ("hi", "dana", "tab-2"))
        last = rec["lastUpdate"]
        ok(self, sync_call("who", update=batch, userId="eve"), "CRDT data synced successfully.")  # duplicates only
        rec = call("/v2/crdt/get", ids("who"))[1]["result"]["data"][0]
        self.assertEqual((rec["lastUpdatedBy"], rec["lastUpdate"]), ("dana", last))

    def test_bad_sync_requests_are_refused_and_change_nothing(self):
        add("bad", "text", "keep")
        hi_from_5 = bytes.fromhex("466f01420101" + "05" + "01" + "3e0000020200" + "026869")
        missing_deps = bytes.fromhex("466f01420101" + "05" + "01" + "3e0003020200" + "026869")  # seq 3: 0..2 missing
        inc = incarnation_of("bad")
        cases = [
            (dict(ids("bad")), 400, "INVALID_ARGUMENT", "version is required."),
            (dict(ids("bad"), version=7), 400, "INVALID_ARGUMENT", "version must be a base64 string."),
            (dict(ids("bad"), version="!!"), 400, "INVALID_ARGUMENT", "version is not valid base64."),
            (dict(ids("bad"), version=base64.b64encode(b"\x01\x00\x01").decode()), 400, "INVALID_ARGUMENT", None),
            (dict(ids("bad"), version="AA==", update="%%%"), 400, "INVALID_ARGUMENT", "update is not valid base64."),
            (dict(ids("bad"), version="AA==", incarnation=inc, update=base64.b64encode(hi_from_5[:9]).decode()), 400, "INVALID_ARGUMENT", None),
            (dict(ids("bad"), version="AA==", incarnation=inc, update=base64.b64encode(b"Fo\x01B\x03\x00\x00").decode()), 400, "INVALID_ARGUMENT",
             "update is invalid: batch holds map operations; this record is text."),
            (dict(ids("bad"), version="AA==", incarnation=inc, update=base64.b64encode(missing_deps).decode()), 400, "FAILED_PRECONDITION", None),
            (dict(ids("bad"), version="AA==", update=base64.b64encode(hi_from_5).decode()), 400, "INVALID_ARGUMENT",
             "incarnation is required with a version that is not empty or an update: send the incarnation of the record's last sync answer "
             "(a client that has nothing syncs with the empty version and no update)."),
            (dict(ids("bad"), version=base64.b64encode(b"\x01\x05\x01").decode()), 400, "INVALID_ARGUMENT",
             "incarnation is required with a version that is not empty or an update: send the incarnation of the record's last sync answer "
             "(a client that has nothing syncs with the empty version and no update)."),
            (dict(ids("bad"), version="AA==", incarnation=7), 400, "INVALID_ARGUMENT", "incarnation must be the string a sync answer gave (decimal digits)."),
            (dict(ids("bad"), version="AA==", incarnation="x1"), 400, "INVALID_ARGUMENT", "incarnation must be the string a sync answer gave (decimal digits)."),
            (dict(ids("bad"), version="AA==", incarnation="12"), 409, "ABORTED",
             "This record was deleted and added again since the client's state was synced (incarnation 12, now %s): drop the local state "
             "and sync again from the empty version." % inc),
            (dict(ids("bad"), editorId="nope", version="AA=="), 404, "NOT_FOUND", "No CRDT data found for this editor ID."),
        ]
        for data, http, status, message in cases:
            with self.subTest(data=data):
                msg = err(self, call("/v2/crdt/sync", data), http, status, message)
                if message is None and status == "INVALID_ARGUMENT":
                    self.assertIn("byte", msg)  # malformed bytes are named with their offset
                if status == "FAILED_PRECONDITION":
                    self.assertIn("sync without an update first", msg)
        self.assertEqual(rest_value("bad"), "keep")
        # The refused batch left nothing behind in the cache either: a good push still lands whole.
        ok(self, sync_call("bad", update=hi_from_5), "CRDT data synced successfully.")
        self.assertIn("hi", rest_value("bad"))
        # Read-only tokens may pull, not push; another tenant sees nothing.
        ok(self, sync_call("bad", who="a_ro"), "CRDT data synced successfully.")
        err(self, sync_call("bad", update=hi_from_5, who="a_ro"), 403, "PERMISSION_DENIED")
        err(self, sync_call("bad", who="b"), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
        err(self, sync_call("bad", who=None), 401, "UNAUTHENTICATED")


def version_replicas(version_b64):
    """The replica ids a base64 version vector names (varint count, then varint replica and count each)."""
    data = base64.b64decode(version_b64)
    n, at = read_varint(data, 0)
    replicas = []
    for _ in range(n):
        replica, at = read_varint(data, at)
        _, at = read_varint(data, at)
        replicas.append(replica)
    return replicas


class AnswerDropper:
    """A loopback proxy that forwards one HTTP request to nginx and drops the answer once it begins:
    the server has committed, the client never hears — as when a connection dies mid-request."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.server.getsockname()[1]
        self.forwarded = threading.Event()
        threading.Thread(target=self._one, daemon=True).start()

    def _one(self):
        client, _ = self.server.accept()
        with client, socket.create_connection(("127.0.0.1", STACK.port)) as upstream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += client.recv(65536)
            head, body = request.split(b"\r\n\r\n", 1)
            length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
            while len(body) < length:
                body += client.recv(65536)
            upstream.sendall(head + b"\r\n\r\n" + body)
            upstream.recv(1)  # the answer began: the change is committed
            self.forwarded.set()
        self.server.close()


class RecordIdentity(unittest.TestCase):
    """docs/API.md, the /v2/crdt endpoints: a record deleted and added again is a new record whose op ids never repeat the
    old one's, and its old clients are told; an op id names one op forever."""

    def test_a_record_added_again_never_repeats_op_ids_and_its_old_clients_are_told(self):
        add("again", "text", "old text")
        st = state_path("again")
        cli("sync", state=st, editor="again")
        cli("edit", "--insert", "0", "my ", "--offline", state=st, editor="again")
        old_inc, old_version = incarnation_of("again"), sync_call("again")[1]["result"]["data"]["version"]
        es = EventSource("again")
        try:
            self.assertEqual(call("/v2/crdt/delete", ids("again"))[0], 200)
            _, m = es.next()
            self.assertEqual((m["deleted"], m["incarnation"]), (True, old_inc))
        finally:
            es.close()
        add("again", "text", "new text")
        new_inc, new_version = incarnation_of("again"), sync_call("again")[1]["result"]["data"]["version"]
        self.assertNotEqual(new_inc, old_inc)
        self.assertEqual(set(version_replicas(old_version)) & set(version_replicas(new_version)), set())  # no op id repeats
        # The old client is told, and nothing of its state reaches the new record.
        told = ("folio-cli: the record was deleted and added again since this replica last synced; its state (%s) is of the old "
                "record: delete it and sync again (edits the server does not have are lost)" % st)
        r = cli("sync", state=st, editor="again", check=False)
        self.assertEqual((r.returncode, r.stderr.strip()), (1, told))
        r = cli("edit", "--insert", "0", "x", state=st, editor="again", check=False)
        self.assertEqual((r.returncode, r.stderr.strip()), (1, told))
        err(self, sync_call("again", version=base64.b64decode(old_version), incarnation=old_inc), 409, "ABORTED",
            "This record was deleted and added again since the client's state was synced (incarnation %s, now %s): drop the local state "
            "and sync again from the empty version." % (old_inc, new_inc))
        self.assertEqual(rest_value("again"), "new text")
        # A pushed change of the new record is of another incarnation for the old client's state.
        es = EventSource("again")
        try:
            update("again", "new text!")
            _, m = es.next()
        finally:
            es.close()
        self.assertEqual(m["incarnation"], new_inc)
        r = cli("apply", json.dumps(m), state=st, editor="again", check=False)
        self.assertEqual((r.returncode, r.stderr.strip()), (1, told))
        # A watcher started from the old state follows the new record; a new replica joins it.
        w = Watcher("again", state=st)
        try:
            w.wait_for("new text!")
        finally:
            self.assertIn("the record was deleted and added again; following the new one", w.stop())
        os.remove(st)
        self.assertEqual(value_of(cli("sync", state=st, editor="again")), "new text!")

    def test_an_op_id_known_with_other_content_is_refused_and_nothing_is_applied(self):
        add("reuse", "text", "")
        hi_from_5 = bytes.fromhex("466f01420101" + "05" + "01" + "3e0000020200" + "026869")  # replica 5 types "hi"
        yo_from_5 = bytes.fromhex("466f01420101" + "05" + "01" + "3e0000020200" + "02796f")  # the same ids, "yo"
        ok(self, sync_call("reuse", update=hi_from_5), "CRDT data synced successfully.")
        err(self, sync_call("reuse", update=yo_from_5), 400, "INVALID_ARGUMENT",
            "update is invalid: operation id (5, 0) is taken by an operation with another value; a replica must never reuse an operation "
            "id (operation 0).")
        self.assertEqual(rest_value("reuse"), "hi")
        ok(self, sync_call("reuse", update=hi_from_5), "CRDT data synced successfully.")  # the same op again: a duplicate
        self.assertEqual(rest_value("reuse"), "hi")

    def test_folio_cli_saves_an_edit_before_sending_it_so_a_lost_answer_never_reuses_its_op_ids(self):
        add("lost", "text", "base")
        st = state_path("lost")
        cli("sync", state=st, editor="lost")
        dropper = AnswerDropper()
        key, token = CREDS["a"]
        env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL=dropper.url)
        r = subprocess.run([CLI, "--org", ORG, "--doc", DOC, "--editor", "lost", "--state", st, "edit", "--insert", "4", " one"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertTrue(dropper.forwarded.is_set())
        self.assertEqual(r.returncode, 1, r.stderr)  # the answer never came ...
        self.assertEqual(rest_value("lost"), "base one")  # ... but the edit was committed
        # The next edit gets new op ids; the first is sent again with its own content (a duplicate).
        self.assertEqual(value_of(cli("edit", "--insert", "8", " two", state=st, editor="lost")), "base one two")
        self.assertEqual(rest_value("lost"), "base one two")


class Access(unittest.TestCase):
    def subscribe_status(self, editor, who="a", **q):
        c = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=10)
        c.request("GET", "/v2/crdt/subscribe?" + query(editor, **q), headers=dict(creds_headers(who), Accept="text/event-stream"))
        r = c.getresponse()
        body = r.read() if r.status != 200 else b""
        c.close()
        return r.status, json.loads(body) if body else None

    def test_subscribe_is_refused_without_auth_for_another_tenant_and_for_a_missing_record(self):
        add("acc", "text", "secret")
        self.assertEqual(self.subscribe_status("acc", who=None), (401, {"error": {"message": "Missing or invalid API key or auth token.", "status": "UNAUTHENTICATED"}}))
        self.assertEqual(self.subscribe_status("acc", who="a_revoked")[0], 401)
        self.assertEqual(self.subscribe_status("acc", who="a_key_b_token")[0], 401)
        missing = {"error": {"message": "No CRDT data found for this editor ID.", "status": "NOT_FOUND"}}
        self.assertEqual(self.subscribe_status("acc", who="b"), (404, missing))  # b's view: no such record
        self.assertEqual(self.subscribe_status("nope"), (404, missing))
        self.assertEqual(self.subscribe_status("acc", org="")[1]["error"]["message"], "Organization ID is required")
        self.assertEqual(self.subscribe_status("acc", org=b"a\xed\xb0\x80"),  # a surrogate, URL-encoded: not UTF-8
                         (400, {"error": {"message": "organizationId must be valid UTF-8.", "status": "INVALID_ARGUMENT"}}))
        # Read-only tokens may listen.
        es = EventSource("acc", who="a_ro")
        self.assertEqual(es.status, 200)
        es.close()

    def test_the_responder_reads_the_query_as_nginx_does(self):
        # nginx's $arg_ takes the first parameter whose name matches in any case, and set_unescape_uri
        # drops malformed escapes instead of refusing them. The responder read the query otherwise, so
        # its channel differed from nginx's: 500 and a channel_mismatch line blaming the secret, or a
        # 400 where nginx had computed a channel.
        add("case", "text", "c")
        mismatches = sum('"channel_mismatch"' in line for line in log_lines(STACK.fcgi_log))
        ids_q = urllib.parse.urlencode({"organizationId": ORG, "documentId": DOC})
        es = EventSource("case", raw_query="EDITORID=case&%s&editorId=nosuch" % ids_q)
        try:
            self.assertEqual(es.status, 200)
            update("case", "c2")
            self.assertEqual(es.next()[1]["editorId"], "case")
        finally:
            es.close()
        # "x%zz%4zb%+c%": '%z' keeps the z, '%4z' is dropped whole, '%+' keeps the plus, a final '%' is dropped.
        status, body = call("/v2/crdt/add", {"organizationId": "xzzb+c", "documentId": DOC, "editorId": "esc", "type": "text", "data": "e"})
        self.assertEqual(status, 200, body)
        es = EventSource("esc", raw_query="organizationId=x%%zz%%4zb%%+c%%&%s" % urllib.parse.urlencode({"documentId": DOC, "editorId": "esc"}))
        try:
            self.assertEqual(es.status, 200)
            status, body = call("/v2/crdt/update", {"organizationId": "xzzb+c", "documentId": DOC, "editorId": "esc", "data": "e2"})
            self.assertEqual(status, 200, body)
            self.assertEqual(es.next()[1]["editorId"], "esc")
        finally:
            es.close()
        es = EventSource("esc", raw_query="organizationId=a%%00&%s" % urllib.parse.urlencode({"documentId": DOC, "editorId": "esc"}))
        self.assertEqual((es.status, json.loads(es.resp.read())["error"]["message"]), (400, "organizationId must not contain control characters."))
        es.close()
        self.assertEqual(sum('"channel_mismatch"' in line for line in log_lines(STACK.fcgi_log)), mismatches)

    def test_another_tenant_with_the_same_ids_has_its_own_channel(self):
        add("twin", "text", "a's")
        add("twin", "text", "b's", who="b")
        es_b = EventSource("twin", who="b")
        es_a = EventSource("twin", who="a")
        try:
            update("twin", "a changed", who="a")
            self.assertEqual(es_a.next()[1]["editorId"], "twin")
            with self.assertRaises(socket.timeout):
                es_b.next(timeout=1.0)
        finally:
            es_a.close()
            es_b.close()

    def test_the_publisher_and_authorizer_are_not_reachable_from_the_network(self):
        add("pub", "text", "x")
        es = EventSource("pub")
        try:
            for path in ("/_folio/publish/" + "0" * 64, "/_folio/authorize?" + query("pub")):
                for method in ("POST", "GET"):
                    c = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=10)
                    c.request(method, path, body=b'{"forged":true}', headers=creds_headers("a"))
                    r = c.getresponse()
                    self.assertEqual(r.status, 404, path)
                    self.assertEqual(json.loads(r.read())["error"]["status"], "NOT_FOUND")
            # The publisher listens on a unix socket only: no TCP port of this nginx publishes.
            conf = open(os.path.join(STACK.dir, "nginx", "nginx.conf")).read()
            for hop in ("publish.conf;", "subscribe.conf;", "authorize.conf;"):
                server = conf[conf.index(hop) - 200:conf.index(hop)]
                self.assertIn("listen unix:", server.rsplit("server {", 1)[1], hop)
            with self.assertRaises(socket.timeout):
                es.next(timeout=0.5)  # the forged POSTs reached no one
            # Through the socket, to the channel the secret gives, a publish does arrive (so the
            # checks above could have failed).
            es.close()
            es = EventSource("pub")
            secret = open(STACK.secret).readline().strip().encode()
            kid = CREDS["a"][0][3:19]
            channel = hmac.new(secret, "\n".join([kid, ORG, DOC, "pub"]).encode(), hashlib.sha256).hexdigest()
            s = socket.socket(socket.AF_UNIX)
            s.connect(STACK.publish_socket)
            body = b'{"probe":true}'
            s.sendall(b"POST /_folio/publish/%s HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (channel.encode(), len(body), body))
            s.recv(4096)
            s.close()
            self.assertEqual(es.next()[1], {"probe": True})
        finally:
            es.close()


class Restarts(unittest.TestCase):
    def test_clients_reconnect_and_converge_across_responder_and_nginx_restarts(self):
        add("rs", "text", "v1")
        st = state_path("rs")
        cli("sync", state=st, editor="rs")
        watchers = [Watcher("rs"), Watcher("rs", transport="longpoll")]

        def all_show(value):
            for w in watchers:
                w.wait_for(value)

        try:
            all_show("v1")
            # The responder restarts: subscribers stay connected to nginx; the next change arrives.
            STACK.fcgi.terminate()
            STACK.fcgi.wait(10)
            STACK.start_fcgi()
            update("rs", "v2")
            all_show("v2")
            # A client's acknowledged edit, then nginx restarts (Nchan's buffers and ids start over;
            # subscribers are answered 410 or cut off).
            cli("edit", "--insert", "2", "+client", state=st, editor="rs")
            all_show("v2+client")
            STACK.nginx.terminate()
            STACK.nginx.wait(10)
            STACK.start_nginx()
            update("rs", "v3 after restarts")
            all_show("v3 after restarts")
            self.assertEqual(rest_value("rs"), "v3 after restarts")
            self.assertEqual(value_of(cli("sync", state=st, editor="rs")), "v3 after restarts")
        finally:
            for w in watchers:
                w.stop()

    def test_nothing_acknowledged_is_lost_when_the_responder_is_killed(self):
        add("kill", "map", {})
        st = state_path("kill")
        for i in range(5):
            cli("edit", "--set", "k%d" % i, str(i), state=st, editor="kill")
        STACK.fcgi.kill()
        STACK.fcgi.wait(10)
        STACK.start_fcgi()
        self.assertEqual(rest_value("kill"), {"k%d" % i: i for i in range(5)})


if __name__ == "__main__":
    unittest.main(argv=[__file__])
