#!/usr/bin/env python3
"""End-to-end tests of what operators use: /healthz and /metrics through nginx (loopback only), the
responder's one-line JSON logs and nginx's, joined by one request id, never holding a credential or
a tenant's ids or content; nginx starting again, unattended, after it was killed.

Run by ctest (tests/CMakeLists.txt) as:  operations_e2e.py BUILD_DIR SOURCE_DIR
"""
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import stack

from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)

ORG, DOC = "acme-secret-org", "q3-secret-plan"
CONTENT = "the secret content of a record"


def get_from(path, source="127.0.0.1", method="GET", headers=None, body=None, port=None):
    """(status, headers, raw body) of a request sent from `source` (any 127.0.0.0/8 address) to the
    stack (or to one node's nginx: `port`)."""
    conn = http.client.HTTPConnection("127.0.0.1", port or STACK.port, timeout=30, source_address=(source, 0))
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, r, raw


def wait_for(predicate, seconds=5):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    return predicate()


class Health(unittest.TestCase):
    def test_readiness_and_liveness_from_loopback(self):
        status, r, raw = get_from("/healthz")
        self.assertEqual(status, 200, raw)
        self.assertEqual(json.loads(raw), {"status": "ok", "live": True, "ready": True})
        self.assertEqual(r.getheader("Content-Type"), "application/json")
        status, _, raw = get_from("/healthz?live")
        self.assertEqual((status, json.loads(raw)), (200, {"status": "ok", "live": True}))

    def test_only_get(self):
        status, _, raw = get_from("/healthz", method="POST", body=b"{}")
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(raw)["error"], {"message": "Method POST is not allowed; /healthz takes GET.", "status": "INVALID_ARGUMENT"})

    def test_not_served_to_other_addresses(self):
        for path in ("/healthz", "/healthz?live", "/metrics"):
            status, r, raw = get_from(path, source="127.0.0.2")
            self.assertEqual(status, 403, path)
            self.assertEqual(r.getheader("Content-Type"), "application/json")
            self.assertEqual(json.loads(raw)["error"]["status"], "PERMISSION_DENIED")
        # The API itself is served to that address.
        key, token = CREDS["a"]
        status, _, raw = get_from("/v2/crdt/get", source="127.0.0.2", method="POST",
                                  headers={"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token},
                                  body=json.dumps({"data": {"organizationId": "o", "documentId": "d"}}))
        self.assertEqual(status, 200, raw)


class Systemd(unittest.TestCase):
    def test_ready_watchdog_and_stopping_notifications(self):
        """What systemd's Type=notify and WatchdogSec see (deploy/systemd/folio-fcgi.service)."""
        notify = os.path.join(STACK.dir, "run", "notify.sock")
        sock = os.path.join(STACK.dir, "run", "second.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
            listener.bind(notify)
            listener.settimeout(10)
            env = dict(os.environ, NOTIFY_SOCKET=notify, WATCHDOG_USEC="200000")
            p = subprocess.Popen([stack.FCGI, "--socket", sock, "--db", STACK.db, "--workers", "1"], env=env, stderr=subprocess.DEVNULL)
            try:
                self.assertEqual(listener.recv(4096), b"READY=1")
                self.assertTrue(os.path.exists(sock))  # ready means listening
                self.assertEqual(listener.recv(4096), b"WATCHDOG=1")  # every half period
                self.assertEqual(listener.recv(4096), b"WATCHDOG=1")
                p.send_signal(signal.SIGTERM)
                while True:
                    message = listener.recv(4096)
                    if message != b"WATCHDOG=1":
                        break
                self.assertEqual(message, b"STOPPING=1")
                self.assertEqual(p.wait(10), 0)
            finally:
                if p.poll() is None:
                    p.kill()


    def test_watchdog_is_not_petted_while_every_worker_is_stuck(self):
        """A responder whose every worker hangs on one request is restarted by systemd's watchdog: it
        stops petting once each worker has been on its request for twice the request timeout (here 1 s),
        and starts again once a worker is free. The stuck request: a client speaking FastCGI to the
        socket itself, which sends half its body and stops (nginx never does; it reads bodies whole)."""
        notify = os.path.join(STACK.dir, "run", "notify-stuck.sock")
        sock = os.path.join(STACK.dir, "run", "stuck.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
            listener.bind(notify)
            env = dict(os.environ, NOTIFY_SOCKET=notify, WATCHDOG_USEC="400000")
            p = subprocess.Popen([stack.FCGI, "--socket", sock, "--db", STACK.db, "--workers", "1", "--request-timeout", "1"], env=env,
                                 stderr=subprocess.DEVNULL)
            try:
                listener.settimeout(10)
                self.assertEqual(listener.recv(4096), b"READY=1")
                self.assertEqual(listener.recv(4096), b"WATCHDOG=1")
                client = socket.socket(socket.AF_UNIX)
                client.connect(sock)
                client.sendall(fcgi_record(1, b"\x00\x01\x00\x00\x00\x00\x00\x00")  # BEGIN_REQUEST, responder
                               + fcgi_record(4, fcgi_params({"REQUEST_METHOD": "POST", "DOCUMENT_URI": "/v2/crdt/get", "CONTENT_LENGTH": "100",
                                                             "CONTENT_TYPE": "application/json"}))
                               + fcgi_record(4, b"") + fcgi_record(5, b'{"data":'))  # 8 of 100 bytes, then nothing
                # Petted while the worker has been on it for less than 2 s; then silence.
                listener.settimeout(2.5)
                start = last = time.monotonic()
                silent = False
                while not silent and time.monotonic() - start < 10:
                    try:
                        self.assertEqual(listener.recv(4096), b"WATCHDOG=1")
                        last = time.monotonic()
                    except socket.timeout:
                        silent = True
                self.assertTrue(silent, "still petted %.1f s after every worker got stuck" % (time.monotonic() - start))
                self.assertGreater(time.monotonic() - last, 2.4)
                client.close()  # the worker is free again
                listener.settimeout(10)
                self.assertEqual(listener.recv(4096), b"WATCHDOG=1")
            finally:
                p.kill()
                p.wait()


def fcgi_record(kind, content):
    return struct.pack(">BBHHBx", 1, kind, 1, len(content), 0) + content


def fcgi_params(params):
    out = b""
    for name, value in params.items():
        out += bytes([len(name), len(value)]) + name.encode() + value.encode()
    return out


class Metrics(unittest.TestCase):
    def scrape(self):
        """The samples of /metrics, summed over the nodes (each counts what it served), and the texts."""
        samples, texts = {}, []
        for node in STACK.nodes:
            status, r, raw = get_from("/metrics", port=node.port if STACK.cluster else None)
            self.assertEqual(status, 200)
            self.assertEqual(r.getheader("Content-Type"), "text/plain; version=0.0.4")
            for line in raw.decode().splitlines():
                if line and not line.startswith("#"):
                    name, value = line.rsplit(" ", 1)
                    samples[name] = samples.get(name, 0) + float(value)
            texts.append(raw.decode())
        return samples, "\n".join(texts)

    def test_counts_requests_cache_and_publishes_without_tenant_data(self):
        before, _ = self.scrape()
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": DOC, "editorId": "m", "type": "text", "data": CONTENT}),
           "CRDT data added successfully.")
        for i in range(3):
            ok(self, call("/v2/crdt/update", {"organizationId": ORG, "documentId": DOC, "editorId": "m", "data": CONTENT + str(i)}),
               "CRDT data updated successfully.")
        ok(self, call("/v2/crdt/get", {"organizationId": ORG, "documentId": DOC, "editorId": "m"}), "CRDT data retrieved successfully.")
        err(self, call("/v2/crdt/get", {"organizationId": ORG, "documentId": DOC}, who="a_wrong_secret"), 401, "UNAUTHENTICATED")
        after, text = self.scrape()
        # Publishes go off the request path (a sender thread): the three may still be queued or being sent.
        until = time.monotonic() + 5
        while (after.get("folio_publish_queued", 0) or after.get("folio_publish_total", 0) - before.get("folio_publish_total", 0) < 3) \
                and time.monotonic() < until:
            time.sleep(0.05)
            after, text = self.scrape()

        def delta(name):
            return after.get(name, 0) - before.get(name, 0)

        self.assertEqual(delta('folio_requests_total{endpoint="/v2/crdt/update",status="200"}'), 3)
        self.assertEqual(delta('folio_requests_total{endpoint="/v2/crdt/get",status="401"}'), 1)
        self.assertEqual(delta('folio_request_duration_seconds_count{endpoint="/v2/crdt/update"}'), 3)
        self.assertEqual(delta('folio_request_duration_seconds_bucket{endpoint="/v2/crdt/update",le="+Inf"}'), 3)
        if STACK.cluster:  # a node's cached document is used only at the stored revision: mostly misses here
            self.assertGreaterEqual(delta("folio_doc_cache_hits_total") + delta("folio_doc_cache_misses_total"), 4)
        else:
            self.assertGreaterEqual(delta("folio_doc_cache_hits_total"), 4)  # the updates and the get find the added document
        self.assertEqual(delta("folio_publish_total"), 3)  # live push is on in the stack
        self.assertEqual(delta("folio_publish_failures_total"), 0)
        self.assertEqual(after["folio_publish_queued"], 0)
        self.assertGreater(after["folio_db_size_bytes"], 0)
        self.assertGreater(after["folio_doc_cache_bytes"], 0)
        self.assertIn("folio_oplog_compactions_total", after)
        key, token = CREDS["a"]
        for secret in (ORG, DOC, CONTENT, key, token, key[3:19], "subject-a"):
            self.assertNotIn(secret, text)

    def test_compactions_are_counted(self):
        before, _ = self.scrape()
        ok(self, call("/v2/crdt/add", {"organizationId": "o", "documentId": "compact", "editorId": "c", "type": "text", "data": ""}),
           "CRDT data added successfully.")
        for i in range(70):  # a log of 64 changes is scheduled for compaction, which runs after the answer
            ok(self, call("/v2/crdt/update", {"organizationId": "o", "documentId": "compact", "editorId": "c", "data": "x" * (i + 1)}),
               "CRDT data updated successfully.")
        compacted = lambda: self.scrape()[0]["folio_oplog_compactions_total"] - before.get("folio_oplog_compactions_total", 0)
        self.assertEqual(wait_for(compacted, 10), 1)
        # and only once: what another node scheduled finds the log short, or the changes gone
        self.assertTrue(wait_for(lambda: self.scrape()[0]["folio_oplog_compactions_queued"] == 0, 10))
        after, _ = self.scrape()
        self.assertEqual(after["folio_oplog_compactions_total"] - before.get("folio_oplog_compactions_total", 0), 1)
        self.assertEqual(after["folio_oplog_compaction_failures_total"], before.get("folio_oplog_compaction_failures_total", 0))
        self.assertEqual(after["folio_oplog_compactions_queued"], 0)
        self.assertLess(STACK.scalar("SELECT log_len FROM crdt_records WHERE doc='compact'"), 64)


class Admin(unittest.TestCase):
    def admin(self, *args):
        return STACK.admin(*args, check=False)

    def test_ids_as_listed_prefixed_or_whole_credentials(self):
        key = CREDS["a"][0]
        for key_arg in (key[3:19], key[:19], key):  # the id `list` shows, "fk_<id>", the whole key
            r = self.admin("create-token", key_arg, "pasted")
            self.assertEqual(r.returncode, 0, r.stderr)
            CREDS["pasted"] = (key, r.stdout.strip())
            ok(self, call("/v2/crdt/get", {"organizationId": "o", "documentId": "d"}, who="pasted"), "CRDT data retrieved successfully.")
            r = self.admin("revoke-token", CREDS["pasted"][1])  # a leaked token, pasted whole
            self.assertEqual(r.returncode, 0, r.stderr)
            # a checked credential is trusted for at most 2 s
            self.assertTrue(wait_for(lambda: call("/v2/crdt/get", {"organizationId": "o", "documentId": "d"}, who="pasted")[0] == 401, 5))
        r = self.admin("revoke-token", CREDS["pasted"][1])
        self.assertEqual((r.returncode, r.stderr), (1, "folio-admin: no live token with id " + CREDS["pasted"][1][3:19] + "\n"))

    def test_expiry_must_be_a_timestamp(self):
        kid = CREDS["a"][0][3:19]
        for bad in ("tomorrow", "2027-01-01", "2027-01-01T00:00:00Z", "2027-02-30T00:00:00.000Z"):
            r = self.admin("create-token", kid, "x", "--expires", bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertEqual(r.stdout, "")
            self.assertEqual(r.stderr, 'folio-admin: --expires must be a UTC timestamp like 2027-01-31T00:00:00.000Z, not "%s"\n' % bad)
        r = self.admin("create-token", kid, "x", "--expires", "2020-01-01T00:00:00.000Z")
        self.assertEqual(r.returncode, 0)
        self.assertIn("has passed; the token is created expired", r.stderr)
        self.assertTrue(r.stdout.startswith("ft_"))

    def test_webhooks_replay_takes_the_queue_limit_folio_fcgi_runs_with(self):
        # A database of its own: an endpoint with three failed deliveries, replayed under --queue-max 2.
        import sqlite3
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "folio.db")
            admin = lambda *args: subprocess.run([stack.ADMIN, "--db", db, *args], capture_output=True, text=True)  # noqa: E731
            tenant = admin("create-key", "replays").stdout.strip()[3:19]
            endpoint = "ep_" + "0" * 24
            with sqlite3.connect(db) as c:
                c.execute("INSERT INTO webhook_endpoints (tenant, id, url, enabled, secret, created_at, updated_at) VALUES (?, ?, 'https://192.0.2.10/', 1, 'whsec_x', 1, 1)",
                          (tenant, endpoint))
                for position in (1, 2, 3):
                    c.execute("INSERT INTO event_feed (position, tenant, id, type, org, created_at, in_feed, body) VALUES (?, ?, ?, 'comment.added', 'o', 1000, 1, '{}')",
                              (position, tenant, "msg_%d" % position))
                    c.execute("INSERT INTO webhook_deliveries (tenant, endpoint, position, message_id, state, attempts) VALUES (?, ?, ?, ?, 'failed', 7)",
                              (tenant, endpoint, position, "msg_%d" % position))
            since = "1970-01-01T00:00:00.000Z"
            for bad in (("--queue-max", "0"), ("--queue-max", "x"), ("--queue-max", "1234567890")):
                self.assertEqual(admin("webhooks", "replay", "--endpoint", endpoint, "--failed-since", since, *bad).returncode, 2, bad)
            self.assertEqual(admin("webhooks", "endpoints", "--queue-max", "5").returncode, 2)
            r = admin("webhooks", "replay", "--endpoint", endpoint, "--failed-since", since, "--queue-max", "2")
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "replayed 2 deliveries to %s\n" % endpoint, ""))
            self.assertRegex(admin("webhooks", "endpoints").stdout, r"  queued 2  dropped 1  ")
            # The default limit, 10,000, takes the third.
            r = admin("webhooks", "replay", "--endpoint", endpoint, "--failed-since", since)
            self.assertEqual((r.returncode, r.stdout), (0, "replayed 1 delivery to %s\n" % endpoint))

    def test_webhook_endpoints_through_nginx_and_folio_admin(self):
        # A tenant of its own: no change of the other tests makes an event for its endpoint.
        key = STACK.admin("create-key", "webhooks")
        CREDS["wh"] = (key, STACK.admin("create-token", key[3:19], "ops"))
        for url, shown in (("http://10.0.0.1/", "10.0.0.1"), ("http://169.254.169.254/latest/meta-data/", "169.254.169.254")):
            err(self, call("/v2/webhooks/endpoints/add", {"url": url}, who="wh"), 400, "INVALID_ARGUMENT",
                "url's host %s resolves to %s, a loopback, private, link-local or reserved address; webhooks reach only public addresses." % (shown, shown))
        err(self, call("/v2/webhooks/endpoints/add", {"url": "file:///etc/passwd"}, who="wh"), 400, "INVALID_ARGUMENT", "url must be an http or https URL.")
        # 192.0.2.0/24 is public but routes nowhere (TEST-NET-1); the endpoint is disabled at once and sent nothing.
        added = ok(self, call("/v2/webhooks/endpoints/add", {"url": "https://192.0.2.10/hook", "events": ["comment.added"]}, who="wh"),
                   "Webhook endpoint added successfully.")
        endpoint, secret = added["endpointId"], added["secret"]
        ok(self, call("/v2/webhooks/endpoints/update", {"endpointId": endpoint, "enabled": False}, who="wh"), "Webhook endpoint updated successfully.")
        listed = ok(self, call("/v2/webhooks/endpoints/get", {}, who="wh"), "Webhook endpoints fetched successfully.")
        self.assertEqual([(e["endpointId"], e["enabled"], e["events"]) for e in listed["endpoints"]], [(endpoint, False, ["comment.added"])])
        rotated = ok(self, call("/v2/webhooks/endpoints/rotate-secret", {"endpointId": endpoint}, who="wh"), "Webhook secret rotated successfully.")["secret"]
        self.assertEqual(ok(self, call("/v2/webhooks/endpoints/get", {"endpointIds": [endpoint]}, who="b"), "Webhook endpoints fetched successfully."),
                         {"endpoints": []})
        self.assertEqual(ok(self, call("/v2/events/get", {"limit": 5}, who="wh"), "Events fetched successfully."), {"events": [], "cursor": "0"})

        r = self.admin("webhooks", "endpoints", "--tenant", key[3:19])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^%s  tenant %s  DISABLED  https://192\.0\.2\.10/hook  events comment\.added  organizations all  queued 0  dropped 0  created \S+Z"
                         r"  old secret signs until \S+Z\n$" % (endpoint, key[3:19]))
        r = self.admin("webhooks", "deliveries", "--endpoint", endpoint)
        self.assertEqual((r.returncode, r.stdout), (0, "%s  tenant %s  deliveries: none\n" % (endpoint, key[3:19])))
        r = self.admin("webhooks", "replay", "--endpoint", endpoint, "--failed-since", "2020-01-01T00:00:00.000Z")
        self.assertEqual((r.returncode, r.stderr), (1, "folio-admin: This endpoint is disabled; enable it (webhooks/endpoints/update) first.\n"))
        r = self.admin("webhooks", "replay", "--endpoint", "ep_000000000000000000000000", "--message", "msg_x")
        self.assertEqual((r.returncode, r.stderr), (1, "folio-admin: no webhook endpoint ep_000000000000000000000000\n"))

        ok(self, call("/v2/webhooks/endpoints/delete", {"endpointId": endpoint}, who="wh"), "Webhook endpoint deleted successfully.")
        self.assertEqual(self.admin("webhooks", "endpoints", "--tenant", key).stdout, "")
        # The pull feed through the real sequencer: a change's events, in order, then nothing after the cursor.
        ok(self, call("/v2/commentannotations/add", {"organizationId": "o", "documentId": "d", "commentAnnotations": [
            {"annotationId": "t1", "from": {"userId": "ana", "name": "Ana", "email": "ana@example.com"}, "commentData": [{"commentText": "hi"}]}]}, who="wh"), "1 of 1 annotations added.")
        feed = wait_for(lambda: ok(self, call("/v2/events/get", {}, who="wh"), "Events fetched successfully.")["events"], 10)
        self.assertEqual([(e["type"], e["data"]["annotationId"]) for e in feed][:1], [("comment_annotation.added", "t1")])
        self.assertTrue(all(e["id"].startswith("msg_") and list(e) == ["id", "type", "timestamp", "data"] for e in feed), feed)
        first = ok(self, call("/v2/events/get", {"limit": 1}, who="wh"), "Events fetched successfully.")
        self.assertEqual(first["events"], feed[:1])
        rest = ok(self, call("/v2/events/get", {"after": first["cursor"]}, who="wh"), "Events fetched successfully.")
        self.assertEqual(rest["events"], feed[1:])
        others = ok(self, call("/v2/events/get", {"limit": 1000}, who="b"), "Events fetched successfully.")["events"]
        self.assertFalse({e["id"] for e in feed} & {e["id"] for e in others})
        # Secrets are answered once and never written to a log.
        self.assertTrue(wait_for(lambda: any('"/v2/webhooks/endpoints/delete"' in line for line in log_lines(STACK.fcgi_log))))
        for line in log_lines(STACK.fcgi_log):
            self.assertNotIn(secret[6:], line)
            self.assertNotIn(rotated[6:], line)


class DevSetup(unittest.TestCase):
    """scripts/service-setup.sh as scripts/run and scripts/cluster use it, with FOLIO_PORT set (here the
    stack's port): var/dev-credentials carries FOLIO_URL, which folio-cli reads, and every URL the
    greeting prints is on that port."""

    def setup(self, work, script, port):
        env = dict(os.environ, FOLIO_ADMIN=os.path.abspath(stack.ADMIN), FOLIO_PORT=str(port))
        r = subprocess.run(["bash", "-c", 'set -euo pipefail; source "$0/scripts/service-setup.sh"; ' + script, os.path.abspath(stack.SOURCE), STACK.db],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_credentials_and_greeting_carry_the_port(self):
        work = tempfile.mkdtemp(dir=STACK.dir)
        os.makedirs(os.path.join(work, "var"))
        url = "http://127.0.0.1:%d" % STACK.port
        greeting = self.setup(work, 'folio_dev_credentials "$1"; folio_welcome "$FOLIO_URL" "a test"', STACK.port)
        path = os.path.join(work, "var", "dev-credentials")
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        with open(path) as f:
            creds = dict(line.split("=", 1) for line in f.read().splitlines())
        self.assertEqual(creds["FOLIO_URL"], url)
        if STACK.port != 8080:
            self.assertNotIn("127.0.0.1:8080", greeting)
        urls = re.findall(r"https?://[^\s'\"]*", greeting)
        self.assertGreaterEqual(len(urls), 5, greeting)
        for u in urls:
            self.assertTrue(u.startswith(url + "/") or u == url, u)
        self.assertIn(url + "/demo/#token=fct1.", greeting)
        # folio-cli with the file's variables and no --url reaches the service.
        cli = subprocess.run([os.path.join(stack.BUILD, "tools", "folio-cli"), "--org", "demo", "--doc", "welcome", "--editor", "text",
                              "--state", os.path.join(work, "cli.state"), "sync"],
                             env=dict(os.environ, **creds), capture_output=True, text=True, timeout=60)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertIn("Hello from Folio!", cli.stdout)
        # The demo's rich text: an xml record in the markup of the ProseMirror binding's mapping.
        rich = subprocess.run([os.path.join(stack.BUILD, "tools", "folio-cli"), "--org", "demo", "--doc", "welcome", "--editor", "rich",
                               "--state", os.path.join(work, "rich.state"), "sync"],
                              env=dict(os.environ, **creds), capture_output=True, text=True, timeout=60)
        self.assertEqual(rich.returncode, 0, rich.stderr)
        self.assertTrue(json.loads(rich.stdout).startswith('<heading level="1">Welcome to Folio</heading><paragraph>This is <strong>rich text</strong>'), rich.stdout)
        # Another port on the next start: the key is kept, the URL follows.
        self.setup(work, 'folio_dev_credentials "$1"', STACK.port + 1)
        with open(path) as f:
            again = dict(line.split("=", 1) for line in f.read().splitlines())
        self.assertEqual(again, dict(creds, FOLIO_URL="http://127.0.0.1:%d" % (STACK.port + 1)))


class Logs(unittest.TestCase):
    def test_one_request_id_in_the_answer_the_responder_log_and_nginx_log(self):
        key, token = CREDS["a"]
        conn = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=30)
        body = json.dumps({"data": {"organizationId": ORG, "documentId": DOC, "editorId": "logged", "type": "text", "data": CONTENT}})
        conn.request("POST", "/v2/crdt/add", body=body,
                     headers={"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token})
        r = conn.getresponse()
        r.read()
        conn.close()
        self.assertEqual(r.status, 200)
        rid = r.getheader("X-Request-Id")
        self.assertRegex(rid or "", r"^[0-9a-f]{32}$")

        def find(path):
            return [json.loads(line) for line in log_lines(path) if rid in line]

        mine = wait_for(lambda: find(STACK.fcgi_log))
        self.assertEqual(len(mine), 1, mine)
        entry = mine[0]
        self.assertEqual({k: entry[k] for k in ("level", "event", "requestId", "method", "endpoint", "status", "code", "keyId")},
                         {"level": "info", "event": "request", "requestId": rid, "method": "POST", "endpoint": "/v2/crdt/add",
                          "status": 200, "code": "OK", "keyId": key[3:19]})
        self.assertIsInstance(entry["durationMs"], float)
        self.assertRegex(entry["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        access = wait_for(lambda: find(os.path.join(STACK.dir, "log", "nginx-access.log")))
        self.assertEqual(len(access), 1, access)
        self.assertEqual((access[0]["uri"], access[0]["status"]), ("/v2/crdt/add", 200))

    def test_errors_are_logged_with_their_status_and_nothing_secret(self):
        err(self, call("/v2/crdt/update", {"organizationId": ORG, "documentId": DOC, "editorId": "nobody", "data": CONTENT}), 404, "NOT_FOUND")
        err(self, call("/v2/crdt/get", {}, who="a_wrong_secret"), 401, "UNAUTHENTICATED")
        status, _, _ = get_from("/no/such/path/" + ORG, method="POST", body=b"{}")
        self.assertEqual(status, 404)

        def logged():  # access lines are written within a second of their answer (docs/OPERATIONS.md, "Logs")
            entries = [json.loads(line) for line in log_lines(STACK.fcgi_log)]  # every line is one JSON object
            return (any(e.get("endpoint") == "/v2/crdt/update" and e.get("code") == "NOT_FOUND" and e.get("status") == 404 for e in entries)
                    and any(e.get("endpoint") == "other" and e.get("status") == 404 for e in entries))
        self.assertTrue(wait_for(logged))
        lines = log_lines(STACK.fcgi_log)
        entries = [json.loads(line) for line in lines]
        self.assertTrue(any(e.get("event") == "started" for e in entries))
        for tenant in ("a", "b", "a_ro", "a_revoked", "a_wrong_secret"):
            key, token = CREDS[tenant]
            for line in lines:
                self.assertNotIn(token, line)
                self.assertNotIn(key, line)
        for line in lines:
            for secret in (ORG, DOC, CONTENT):
                self.assertNotIn(secret, line)



def child_pids(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def gone(pid):
    """True once `pid` has exited (a zombie counts: it holds no socket)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class Crash(unittest.TestCase):
    @single_node  # one nginx's sockets; scripts/cluster starts each node's nginx the same way
    def test_nginx_starts_again_after_sigkill_through_the_path_scripts_run_uses(self):
        sockets = [os.path.join(STACK.dir, "run", name) for name in ("nginx-authorize.sock", "nginx-subscribe.sock", "nginx-publish.sock")]
        conf = os.path.join(STACK.dir, "nginx", "nginx.conf")
        cleanup = os.path.join(stack.SOURCE, "scripts", "nginx-stale-sockets")
        ids = {"organizationId": "crash", "documentId": "d", "editorId": "e"}
        ok(self, call("/v2/crdt/add", dict(ids, type="text", data="before")), "CRDT data added successfully.")
        # A live nginx's sockets are not stale: the cleanup leaves them, and they keep working.
        subprocess.run([cleanup, conf], check=True)
        self.assertTrue(all(os.path.exists(s) for s in sockets))
        EventStream(ids).close()
        # nginx killed, master and workers: its sockets stay behind, and bind() on them failed
        # ("Address already in use") when scripts/run started nginx again.
        pids = [STACK.nginx.pid] + child_pids(STACK.nginx.pid)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        STACK.nginx.wait(10)
        self.assertTrue(wait_for(lambda: all(gone(p) for p in pids)))
        self.assertTrue(all(os.path.exists(s) for s in sockets))
        STACK.start_nginx()
        # Both sockets are nginx's again: a subscriber is authorized (the hop) and gets a push (the publisher).
        es = EventStream(ids)
        try:
            ok(self, call("/v2/crdt/update", dict(ids, data="after")), "CRDT data updated successfully.")
            self.assertEqual(es.next_data()["editorId"], "e")
        finally:
            es.close()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
