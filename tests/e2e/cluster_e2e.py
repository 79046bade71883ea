"""What only several nodes have (docs/OPERATIONS.md "Running N nodes"): three nodes (folio-fcgi + nginx each)
on one PostgreSQL database and one Redis, behind the round-robin front, as scripts/cluster runs them
(stack.py with FOLIO_TEST_NODES, which this module sets to 3 itself). A node is reached through its own
nginx (STACK.nodes[i].port) where a test needs to say which node serves a request, else through the
front. The other end-to-end suites also run against this stack (ctest's e2e.cluster.*).

Run as:  cluster_e2e.py BUILD_DIR SOURCE_DIR
"""
import concurrent.futures
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

os.environ["FOLIO_TEST_NODES"] = os.environ.get("FOLIO_TEST_NODES") or "3"
import stack  # noqa: E402
from stack import *  # noqa: E402,F401,F403 (setUpModule/tearDownModule start and stop the stack)

CLI = os.path.join(stack.BUILD, "tools", "folio-cli")
ORG, DOC = "cluster", "doc"
STACK.rate = 200  # a node's rate limit per client (RateLimit); the burst of 2000 covers the other tests' requests


def ids(editor):
    return {"organizationId": ORG, "documentId": DOC, "editorId": editor}


def port(i):
    return STACK.nodes[i].port


def value_on(i, editor):
    """The record's value as node i reads it."""
    status, body = call("/v2/crdt/get", ids(editor), port=port(i))
    assert status == 200, body
    return body["result"]["data"][0]["data"]


def revision(editor):
    return STACK.scalar("SELECT revision FROM crdt_records WHERE org = '%s' AND doc = '%s' AND editor = '%s'" % (ORG, DOC, editor))


def cli(i, *args, state, editor):
    """folio-cli against node i's nginx."""
    key, token = CREDS["a"]
    env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % port(i))
    r = subprocess.run([CLI, "--org", ORG, "--doc", DOC, "--editor", editor, "--state", state, *args], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("folio-cli %s failed: %s" % (" ".join(args), r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else None


def counter(i, sample):
    """A sample of node i's /metrics (0 when absent)."""
    status, raw = call("/metrics", who=None, method="GET", body=b"", content_type=None, raw=True, port=port(i))
    assert status == 200, raw
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in raw.decode().splitlines() if line.rsplit(" ", 1)[0] == sample)


def gets_served(i):
    return counter(i, 'folio_requests_total{endpoint="/v2/crdt/get",status="200"}')




class AnyNode(unittest.TestCase):
    def test_a_write_through_one_node_is_read_through_the_others_at_once(self):
        ok(self, call("/v2/crdt/add", dict(ids("seen"), type="text", data="v1"), port=port(0)), "CRDT data added successfully.")
        self.assertEqual([value_on(i, "seen") for i in (1, 2, 0)], ["v1"] * 3)  # each node caches it now
        for writer, text in ((1, "v2"), (2, "v3"), (0, "v4")):
            ok(self, call("/v2/crdt/update", dict(ids("seen"), data=text), port=port(writer)), "CRDT data updated successfully.")
            # The others hold the previous revision in their caches: never served once it is stale.
            self.assertEqual([value_on(i, "seen") for i in (0, 1, 2)], [text] * 3)
        ok(self, call("/v2/crdt/delete", ids("seen"), port=port(1)), "CRDT data deleted successfully.")
        for i in (0, 2):
            status, body = call("/v2/crdt/get", ids("seen"), port=port(i))
            self.assertEqual((status, body["result"]["data"]), (200, []))
            err(self, call("/v2/crdt/update", dict(ids("seen"), data="gone"), port=port(i)), 404, "NOT_FOUND",
                "No CRDT data found for this editor ID.")

    def test_the_front_passes_consecutive_requests_to_different_nodes(self):
        before = [gets_served(i) for i in range(3)]
        for _ in range(6):
            self.assertEqual(call("/v2/crdt/get", ids("nothing"))[0], 200)
        self.assertEqual([gets_served(i) - before[i] for i in range(3)], [2, 2, 2])

    def test_200_concurrent_updates_of_one_record_over_three_nodes_all_commit(self):
        ok(self, call("/v2/crdt/add", dict(ids("hot"), type="map", data={})), "CRDT data added successfully.")

        def update(i):
            return call("/v2/crdt/update", dict(ids("hot"), data={"k": i, "same": i}), port=port(i % 3))

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(update, range(200)))
        self.assertEqual([a for a in answers if a[0] != 200], [])
        self.assertEqual(revision("hot"), 201)  # every update is a revision of its own: none lost
        values = [value_on(i, "hot") for i in range(3)]
        self.assertEqual(values[0], values[1])
        self.assertEqual(values[0], values[2])
        self.assertEqual(values[0]["k"], values[0]["same"])  # one request's whole value, never a mix

    def test_sync_clients_on_different_nodes_converge(self):
        ok(self, call("/v2/crdt/add", dict(ids("together"), type="text", data="")), "CRDT data added successfully.")
        states = [os.path.join(STACK.dir, "together-%d.state" % i) for i in range(3)]
        for i in range(3):
            cli(i, "sync", state=states[i], editor="together")
        for round_ in range(5):  # each client types offline at the start, then syncs through its own node
            for i in range(3):
                cli(i, "edit", "--insert", "0", "%d%d" % (i, round_), "--offline", state=states[i], editor="together")
            for i in range(3):
                cli(i, "sync", state=states[i], editor="together")
        final = [cli(i, "sync", state=states[i], editor="together") for i in range(3)]
        self.assertEqual(final[0], final[1])
        self.assertEqual(final[0], final[2])
        self.assertEqual(sorted(final[0][k:k + 2] for k in range(0, len(final[0]), 2)),
                         sorted("%d%d" % (i, r) for i in range(3) for r in range(5)))
        self.assertEqual(value_on(1, "together"), final[0])

    def test_a_subscriber_on_one_node_sees_changes_made_through_every_node(self):
        ok(self, call("/v2/crdt/add", dict(ids("pushed"), type="text", data="a")), "CRDT data added successfully.")
        stream = EventStream(ids("pushed"), port=port(1))
        try:
            for writer in (0, 2, 1):
                ok(self, call("/v2/crdt/update", dict(ids("pushed"), data="by node %d" % writer, userId="u%d" % writer), port=port(writer)),
                   "CRDT data updated successfully.")
                message = stream.next_data()
                self.assertEqual((message["editorId"], message["lastUpdatedBy"]), ("pushed", "u%d" % writer))
        finally:
            stream.close()


class RateLimit(unittest.TestCase):
    def test_a_node_counts_the_client_the_front_names_not_the_front(self):
        # As the front sends them: from the front's address (trusted), with X-Forwarded-For. A burst of one
        # client past the node's limit (burst 2000, folio.conf) is refused; another client, and the
        # front's own requests without the header, are served.
        def burst(client, n):
            request = (b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"X-Forwarded-For: %s\r\nContent-Length: 2\r\n\r\n{}" % client.encode())
            last = request.replace(b"Content-Length: 2", b"Content-Length: 2\r\nConnection: close")
            with socket.create_connection(("127.0.0.1", port(0)), timeout=60) as s:
                s.sendall(request * (n - 1) + last)
                return [status for status, _ in responses(read_all(s))]

        statuses = burst("10.9.9.9", 2600)
        self.assertEqual(len(statuses), 2600)
        self.assertGreater(statuses.count(429), 0)
        self.assertEqual(set(statuses), {401, 429})  # no credentials: the rest reached the responder
        self.assertEqual(burst("10.9.9.8", 5), [401] * 5)  # another client of the front
        status, _ = call("/v2/crdt/get", ids("x"), port=port(0))  # no X-Forwarded-For: the front's own address
        self.assertEqual(status, 200)


class Failures(unittest.TestCase):
    def test_sigkill_of_a_node_during_writes_loses_no_acknowledged_write_and_the_others_serve(self):
        records = ["k%d" % i for i in range(6)]
        for r in records:
            ok(self, call("/v2/crdt/add", dict(ids(r), type="text", data="0")), "CRDT data added successfully.")
        acked = {r: "0" for r in records}
        unknown = {r: set() for r in records}  # sent, not acknowledged: may or may not be stored
        stop = threading.Event()

        def writer(r):
            n = 0
            while not stop.is_set() and n < 400:
                n += 1
                try:
                    status, _ = call("/v2/crdt/update", dict(ids(r), data=str(n)))
                except OSError:
                    status = None
                if status == 200:
                    acked[r] = str(n)
                    unknown[r].clear()
                else:
                    unknown[r].add(str(n))

        threads = [threading.Thread(target=writer, args=(r,)) for r in records]
        for t in threads:
            t.start()
        time.sleep(1.0)
        victim = STACK.nodes[2]
        # The whole node, as when its host dies: nginx's master and workers (a worker outlives a killed
        # master, and would go on answering 503s), and the responder.
        with open("/proc/%d/task/%d/children" % (victim.nginx.pid, victim.nginx.pid)) as f:
            workers = [int(p) for p in f.read().split()]
        for pid in [victim.nginx.pid, *workers, victim.fcgi.pid]:
            os.kill(pid, signal.SIGKILL)
        victim.nginx.wait()
        victim.fcgi.wait()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join()
        for r in records:  # an acknowledged write is there (or a later one the node took before dying)
            value = value_on(0, r)
            self.assertTrue(value == acked[r] or value in unknown[r], (r, value, acked[r], sorted(unknown[r])))
            self.assertEqual(value_on(1, r), value)
        # The front passes over the dead node: every request is served, writes included.
        for i in range(12):
            ok(self, call("/v2/crdt/update", dict(ids(records[0]), data="after %d" % i)), "CRDT data updated successfully.")
        self.assertEqual(value_on(1, records[0]), "after 11")
        STACK.start_fcgi()
        STACK.start_nginx()
        self.assertEqual(value_on(2, records[0]), "after 11")  # the node is back, and current

    def test_a_killed_responder_fails_no_request_through_the_front(self):
        # kill -9 of one node's folio-fcgi under load: its nginx cannot hand it requests any more, and
        # answers them "unhandled" (nginx/errors.conf); the front sends each to the next node. Only the
        # requests the dead responder had received may fail (never retried: a write is not idempotent).
        records = ["r%d" % i for i in range(6)]
        for r in records:
            ok(self, call("/v2/crdt/add", dict(ids(r), type="text", data="0")), "CRDT data added successfully.")
        victim = STACK.nodes[2]
        killed = threading.Event()
        killed_at = [None]
        answers = []  # (started after the responder was dead, status)
        lock = threading.Lock()
        after_kill = {r: 0 for r in records}

        def client(r):
            n = 0
            while after_kill[r] < 60:
                n += 1
                late = killed.is_set()
                path, body = (("/v2/crdt/update", dict(ids(r), data=str(n))) if n % 2 else ("/v2/crdt/get", ids(r)))
                status, _ = call(path, body)
                with lock:
                    answers.append((late, status))
                if late:
                    after_kill[r] += 1
                if n == 20 and r == records[0]:
                    os.kill(victim.fcgi.pid, signal.SIGKILL)
                    victim.fcgi.wait()
                    killed_at[0] = time.time()
                    killed.set()

        try:
            threads = [threading.Thread(target=client, args=(r,)) for r in records]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            late = [status for was_late, status in answers if was_late]
            early_failures = [status for was_late, status in answers if not was_late and status != 200]
            self.assertEqual([s for s in late if s != 200], [], "requests sent after the kill that failed")
            self.assertGreaterEqual(len(late), 360)
            self.assertLessEqual(len(early_failures), len(records))  # at most the ones in flight at the kill
            with open(os.path.join(STACK.dir, "front", "log", "front-access.log")) as f:
                retried = [json.loads(line)["node"] for line in f if " : " in json.loads(line)["node"]]
            dead = "127.0.0.1:%d" % victim.port
            self.assertTrue(retried and all(n.startswith(dead + " : ") for n in retried), retried[:5])
            # The dead node itself: the mark, and the redirect only to a retry location of the form asked for.
            for asked, redirect in (("2", "@folio_retry2"), ("@admin", None), (None, None)):
                conn = http.client.HTTPConnection("127.0.0.1", victim.port, timeout=30)
                key, token = CREDS["a"]
                headers = {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token}
                if asked:
                    headers["X-Folio-Retry-Unhandled"] = asked
                conn.request("POST", "/v2/crdt/get", body=json.dumps({"data": ids(records[0])}), headers=headers)
                r = conn.getresponse()
                body = json.loads(r.read())
                conn.close()
                self.assertEqual((r.status, body["error"]["status"], r.getheader("X-Folio-Unhandled"), r.getheader("X-Accel-Redirect")),
                                 (503, "UNAVAILABLE", "1", redirect))
        finally:
            STACK.start_fcgi()

    def test_a_request_the_responder_received_is_never_sent_to_another_node(self):
        # A responder that takes the request and dies before answering (here: a socket that reads the
        # request and closes). Its node answers 503 without X-Folio-Unhandled, and the front passes that
        # on: the write may have been committed, so no other node gets it.
        ok(self, call("/v2/crdt/add", dict(ids("once"), type="text", data="0")), "CRDT data added successfully.")
        victim = STACK.nodes[2]
        victim.fcgi.kill()
        victim.fcgi.wait()
        os.unlink(victim.socket)
        received = []
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(victim.socket)
        listener.listen(16)

        def dying_responder():
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    conn.settimeout(5)
                    data = b""
                    while b"once" not in data and b"healthz" not in data:  # the body has the record's id
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    received.append(data)

        thread = threading.Thread(target=dying_responder, daemon=True)
        thread.start()
        try:
            statuses = []
            for i in range(1, 10):
                status, body = call("/v2/crdt/update", dict(ids("once"), data="v%d" % i))
                statuses.append(status)
                if status != 200:
                    err(self, (status, body), 503, "UNAVAILABLE", "The service is unavailable; retry later.")
            self.assertEqual(statuses.count(503), 3, statuses)  # every third request reaches node 2
            self.assertEqual(len(received), 3)
            refused = {"v%d" % (i + 1) for i, s in enumerate(statuses) if s == 503}
            self.assertEqual(revision("once"), 1 + 6)  # no other node committed the refused ones
            self.assertNotIn(value_on(0, "once"), refused)
        finally:
            listener.close()
            os.unlink(victim.socket)
            STACK.start_fcgi()

    def test_postgresql_stopped_is_a_json_503_and_writes_resume_after_it_returns(self):
        ok(self, call("/v2/crdt/add", dict(ids("outage"), type="text", data="before")), "CRDT data added successfully.")
        STACK.pg("down")
        try:
            for i in range(3):  # every node
                err(self, call("/v2/crdt/update", dict(ids("outage"), data="during"), port=port(i)), 503, "UNAVAILABLE",
                    "The database is unavailable; retry the request.")
                self.assertEqual(call("/v2/crdt/get", ids("outage"), port=port(i))[0], 503)
        finally:
            STACK.pg("up")
        self.assertIsNone(STACK.fcgi.poll())  # no node crashed
        for i in range(3):  # each node's connections reopen on their own
            wait_until(lambda: call("/v2/crdt/update", dict(ids("outage"), data="after %d" % i), port=port(i))[0] == 200,
                       what="a write through node %d after PostgreSQL returned" % i)
        self.assertEqual([value_on(i, "outage") for i in range(3)], ["after 2"] * 3)

    def test_redis_stopped_writes_succeed_and_subscribers_catch_up_after_it_returns(self):
        ok(self, call("/v2/crdt/add", dict(ids("quiet"), type="text", data="before")), "CRDT data added successfully.")
        state = os.path.join(STACK.dir, "quiet.state")
        self.assertEqual(cli(1, "sync", state=state, editor="quiet"), "before")
        stream = EventStream(ids("quiet"), port=port(1))  # open through the outage
        try:
            failures = publish_failures()
            STACK.redis("down")
            try:
                for i in range(3):
                    ok(self, call("/v2/crdt/update", dict(ids("quiet"), data="during %d" % i), port=port(i)),
                       "CRDT data updated successfully.")
                # counted (and logged), not answered; the publishes go after the answers (sender threads)
                until = time.time() + 15
                while publish_failures() - failures < 3 and time.time() < until:
                    time.sleep(0.1)
                self.assertGreaterEqual(publish_failures() - failures, 3)
            finally:
                STACK.redis("up")
            # Once the nodes' nginx have reconnected to Redis (within seconds), the open stream gets changes
            # again, and a sync brings the client what it missed.
            stream.sock.settimeout(1)
            deadline = time.time() + 60
            while True:
                self.assertLess(time.time(), deadline, "the open stream got nothing for 60 s after Redis returned")
                ok(self, call("/v2/crdt/update", dict(ids("quiet"), data="after", userId="after-redis"), port=port(0)),
                   "CRDT data updated successfully.")
                try:
                    stream.next_data()
                    break
                except TimeoutError:
                    continue
            self.assertEqual(cli(1, "sync", state=state, editor="quiet"), "after")
        finally:
            stream.close()
        fresh = EventStream(ids("quiet"), port=port(2))  # and new subscribers are let in
        fresh.close()

    def test_a_redis_stall_leaves_each_message_ordered_by_its_revision_and_clients_converge(self):
        # Updates through the front (every node publishes some) while Redis is stopped (SIGSTOP) for a
        # few seconds: each node's nginx holds what its responder published meanwhile and releases it
        # when Redis resumes, the nodes' in any order (docs/API.md, "Live changes"). Every change message
        # carries the revision it committed, which orders them; a folio-cli watching through it ends at
        # the record's value, as does a sync. (The JavaScript client's half is js_client_e2e.py's
        # RedisStall, which runs where its WebAssembly build is: after scripts/build-js.)
        ok(self, call("/v2/crdt/add", dict(ids("stall"), type="text", data="")), "CRDT data added successfully.")
        state = os.path.join(STACK.dir, "stall.state")
        self.assertEqual(cli(1, "sync", state=state, editor="stall"), "")
        stream = EventStream(ids("stall"), port=port(1))
        watcher, watch_out = self.watch("stall", port(0))
        text, n = "", 0
        try:
            def update():
                nonlocal text, n
                n += 1
                text += "%d," % n
                ok(self, call("/v2/crdt/update", dict(ids("stall"), data=text, userId="u%d" % n)), "CRDT data updated successfully.")

            redis_stall(self, update)
            stream.sock.settimeout(30)
            messages = [stream.next_data()]
            while messages[-1].get("lastUpdatedBy") != "u%d" % n:
                messages.append(stream.next_data())
            # Update k (user uk) committed revision k + 1 (the add was revision 1): a message names its change.
            self.assertEqual([m["revision"] for m in messages], [int(m["lastUpdatedBy"][1:]) + 1 for m in messages])
            received = [m["revision"] for m in messages]
            print("%d messages, %d after a larger revision; the first: %s" % (len(received), sum(1 for a, b in zip(received, received[1:]) if b < a),
                                                                        received[:24]), file=sys.stderr)
            wait_until(lambda: self.watched(watch_out) == text, what="folio-cli watch reaching the record's value")
            self.assertIsNone(watcher.poll())
            self.assertEqual(cli(1, "sync", state=state, editor="stall"), text)
        finally:
            stream.close()
            watcher.terminate()
            watcher.wait()
            watch_out.close()

    def test_a_deletion_of_an_incarnation_a_watcher_does_not_follow_does_not_end_it(self):
        # Out of commit order (above), the deletion of a record's previous incarnation can arrive after
        # the changes of the one added again: folio-cli watch goes on following the record it follows.
        ok(self, call("/v2/crdt/add", dict(ids("again"), type="text", data="new")), "CRDT data added successfully.")
        watcher, watch_out = self.watch("again", port(0))
        try:
            wait_until(lambda: self.watched(watch_out) == "new", what="folio-cli watch showing the record")
            old = json.dumps({"editorId": "again", "incarnation": "1", "deleted": True, "lastUpdate": "2025-01-20T10:30:00.000Z"}).encode()
            with socket.socket(socket.AF_UNIX) as s:  # as a node's responder publishes (service/crdt/publish/nchan.cpp)
                s.connect(STACK.nodes[1].publish_socket)
                s.sendall(b"POST /_folio/publish/%s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (channel_of(ids("again")).encode(), len(old), old))
                self.assertRegex(read_all(s).split(b"\r\n", 1)[0], rb" 20[0-9] ")
            ok(self, call("/v2/crdt/update", dict(ids("again"), data="still here")), "CRDT data updated successfully.")
            wait_until(lambda: self.watched(watch_out) == "still here" or watcher.poll() is not None,
                       what="folio-cli watch showing the change after the old deletion")
            self.assertEqual(self.watched(watch_out), "still here")
            self.assertIsNone(watcher.poll())
        finally:
            watcher.terminate()
            watcher.wait()
            watch_out.close()

    @staticmethod
    def watch(editor, node_port):
        """A folio-cli watch of the record through the node at node_port, its output in a file."""
        key, token = CREDS["a"]
        env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % node_port)
        out = open(os.path.join(STACK.dir, "%s.watch" % editor), "w+")
        p = subprocess.Popen([CLI, "--org", ORG, "--doc", DOC, "--editor", editor, "--state", os.path.join(STACK.dir, "%s.watch.state" % editor),
                              "watch"], env=env, stdout=out, stderr=subprocess.DEVNULL)
        return p, out

    @staticmethod
    def watched(out):
        """The last value a folio-cli watch printed (None before the first; "deleted" once it ended so)."""
        out.seek(0)
        lines = [line for line in out.read().splitlines() if line.strip()]
        if not lines:
            return None
        if lines[-1] == "deleted":
            return "deleted"
        try:
            return json.loads(lines[-1])
        except ValueError:  # a line being written
            return None


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
