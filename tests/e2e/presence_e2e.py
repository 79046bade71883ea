"""Presence end to end (docs/API.md, "Presence"; issue 53): POST /v2/presence/set, leave and get through the
real nginx in front of the real folio-fcgi, joins, updates and leaves reaching EventSource subscribers of
the record's channel, a client that stops refreshing leaving after --presence-timeout (published once,
whichever node sweeps), read tokens announcing without writing, another user's clientId refused, the
limits and every refusal's message, CORS for browsers. On the 3-node cluster (FOLIO_TEST_NODES=3) the
nodes share presence through Redis (folio-fcgi --presence-redis): announced on one node, listed on another.

Run by ctest as:  presence_e2e.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import unittest

from stack import *  # noqa: F401,F403 (setUpModule/tearDownModule start and stop the stack)
import stack

TIMEOUT_S = 4  # --presence-timeout: short, so a silent client leaves within the test
STACK.fcgi_args = ["--presence-timeout", str(TIMEOUT_S)]
ALLOWED = "http://app.example.test"
STACK.cors_origins = ALLOWED
ORG, DOC = "org presence", "doc/ü 1"


def ids(editor, doc=DOC):
    return {"organizationId": ORG, "documentId": doc, "editorId": editor}


def add(editor):
    status, body = call("/v2/crdt/add", dict(ids(editor), type="text", data="hello"))
    assert status == 200, body


def mint(user, access="write", **extra):
    body = {"organizationId": ORG, "documentId": DOC, "userId": user, "access": access}
    body.update(extra)
    status, answer = call("/v2/auth/token", body)
    assert status == 200, answer
    return answer["result"]["data"]["token"]


def as_token(path, data, token, port=None):
    return call(path, data, who=None, headers={"Authorization": "Bearer " + token}, port=port)


def presence_of(stream):
    """The next presence message on `stream` (changes' messages are skipped)."""
    while True:
        m = stream.next_data()
        if "presence" in m:
            return m


def node_port(i):
    return STACK.nodes[i % len(STACK.nodes)].port


def timeouts_total():
    """The entries the nodes' sweepers removed (each expiry counts on the node that removed it)."""
    return metric_total("folio_presence_timeouts_total")


class Presence(unittest.TestCase):
    def test_join_update_leave_reach_every_subscriber(self):
        add("live")
        streams = [EventStream(ids("live"), port=node_port(i)) for i in range(2)]
        try:
            for s in streams:
                s.sock.settimeout(30)
            data = ok(self, call("/v2/presence/set", dict(ids("live"), clientId="tab-1", userId="ana",
                                                          state={"name": "Ana", "color": "#e11"})), "Presence set successfully.")
            self.assertEqual(data, {"clientId": "tab-1", "timeoutMs": TIMEOUT_S * 1000})
            for s in streams:
                m = presence_of(s)
                self.assertEqual(m["editorId"], "live")
                p = m["presence"]
                self.assertEqual((p["type"], p["clientId"], p["userId"], p["state"], p["selection"]),
                                 ("join", "tab-1", "ana", {"color": "#e11", "name": "Ana"}, None))
                self.assertTrue(p["updatedAt"].endswith("Z"))
            ok(self, call("/v2/presence/set", dict(ids("live"), clientId="tab-1", userId="ana", selection={"anchor": "7.3", "head": "end"})),
               "Presence set successfully.")
            for s in streams:
                p = presence_of(s)["presence"]
                self.assertEqual((p["type"], p["state"], p["selection"]), ("update", {"color": "#e11", "name": "Ana"}, {"anchor": "7.3", "head": "end"}))
            listed = ok(self, call("/v2/presence/get", {"organizationId": ORG, "documentId": DOC}), "Presence retrieved successfully.")["presence"]
            self.assertEqual([(e["editorId"], e["clientId"], e["userId"], e["selection"]) for e in listed if e["editorId"] == "live"],
                             [("live", "tab-1", "ana", {"anchor": "7.3", "head": "end"})])
            # A refresh (nothing changed) publishes nothing: the next message is the leave.
            ok(self, call("/v2/presence/set", dict(ids("live"), clientId="tab-1", userId="ana")), "Presence set successfully.")
            left = ok(self, call("/v2/presence/leave", dict(ids("live"), clientId="tab-1")), "Presence left successfully.")
            self.assertEqual(left, {"clientId": "tab-1", "left": True})
            for s in streams:
                p = presence_of(s)["presence"]
                self.assertEqual((p["type"], p["clientId"], p["userId"]), ("leave", "tab-1", "ana"))
                self.assertNotIn("state", p)
            self.assertEqual(ok(self, call("/v2/presence/get", ids("live")), "Presence retrieved successfully."), {"presence": []})
        finally:
            for s in streams:
                s.close()

    def test_a_silent_client_leaves_after_the_timeout_once(self):
        add("quiet")
        before = timeouts_total()
        stream = EventStream(ids("quiet"), port=node_port(2))
        try:
            stream.sock.settimeout(TIMEOUT_S * 10)
            # Announced through one node; the others' sweepers see it in Redis on a cluster.
            ok(self, call("/v2/presence/set", dict(ids("quiet"), clientId="gone", userId="ana"), port=node_port(0)), "Presence set successfully.")
            self.assertEqual(presence_of(stream)["presence"]["type"], "join")
            listed = ok(self, call("/v2/presence/get", ids("quiet"), port=node_port(1)), "Presence retrieved successfully.")["presence"]
            self.assertEqual([e["clientId"] for e in listed], ["gone"])  # listed by another node
            p = presence_of(stream)["presence"]  # no refresh: it times out
            self.assertEqual((p["type"], p["clientId"], p["userId"]), ("leave", "gone", "ana"))
            # Exactly one node removed it; a change published after the leave comes next, not a second leave.
            self.assertEqual(timeouts_total() - before, 1)
            ok(self, call("/v2/crdt/update", dict(ids("quiet"), data="after")), "CRDT data updated successfully.")
            while True:
                m = stream.next_data()
                self.assertNotIn("presence", m, "a second leave was published")
                if "revision" in m:
                    break
            self.assertEqual(timeouts_total() - before, 1)
            self.assertEqual(ok(self, call("/v2/presence/get", ids("quiet"), port=node_port(2)), "Presence retrieved successfully."), {"presence": []})
        finally:
            stream.close()

    def test_a_read_token_announces_but_cannot_write(self):
        add("read")
        reader = mint("rita", access="read")
        data = ok(self, as_token("/v2/presence/set", dict(ids("read"), clientId="r1", state={"name": "Rita"}), reader), "Presence set successfully.")
        self.assertEqual(data["clientId"], "r1")
        listed = ok(self, as_token("/v2/presence/get", ids("read"), reader), "Presence retrieved successfully.")["presence"]
        self.assertEqual([(e["clientId"], e["userId"]) for e in listed], [("r1", "rita")])
        err(self, as_token("/v2/crdt/sync", dict(ids("read"), version="AA==", incarnation="1", update="AAAA"), reader), 403, "PERMISSION_DENIED",
            "This token is read-only; sync without an update to only receive changes.")
        ok(self, as_token("/v2/presence/leave", dict(ids("read"), clientId="r1"), reader), "Presence left successfully.")

    def test_another_users_client_id_is_refused(self):
        add("spoof")
        ana, bob = mint("ana"), mint("bob")
        ok(self, as_token("/v2/presence/set", dict(ids("spoof"), clientId="shared"), ana), "Presence set successfully.")
        taken = "This clientId is present on the record as another user; choose another clientId."
        err(self, as_token("/v2/presence/set", dict(ids("spoof"), clientId="shared"), bob), 403, "PERMISSION_DENIED", taken)
        err(self, as_token("/v2/presence/leave", dict(ids("spoof"), clientId="shared"), bob), 403, "PERMISSION_DENIED", taken)
        err(self, as_token("/v2/presence/set", dict(ids("spoof"), clientId="b1", userId="ana"), bob), 403, "PERMISSION_DENIED",
            "The client token acts as its own user; leave userId out or send the token's userId.")
        other_doc = mint("bob", documentId="elsewhere")
        err(self, as_token("/v2/presence/get", ids("spoof"), other_doc), 403, "PERMISSION_DENIED", "The client token does not cover this documentId.")
        listed = ok(self, as_token("/v2/presence/get", ids("spoof"), bob), "Presence retrieved successfully.")["presence"]
        self.assertEqual([(e["clientId"], e["userId"]) for e in listed], [("shared", "ana")])
        ok(self, as_token("/v2/presence/leave", dict(ids("spoof"), clientId="shared"), ana), "Presence left successfully.")

    def test_refusals_and_limits(self):
        add("limits")
        base = ids("limits")
        err(self, call("/v2/presence/set", base), 400, "INVALID_ARGUMENT", "clientId is required.")
        err(self, call("/v2/presence/set", dict(base, clientId="a.b")), 400, "INVALID_ARGUMENT",
            "clientId must be a string of 1 to 64 characters A-Z, a-z, 0-9, _ and -.")
        err(self, call("/v2/presence/set", dict(base, clientId="c", state="x")), 400, "INVALID_ARGUMENT", "state must be a JSON object.")
        err(self, call("/v2/presence/set", dict(base, clientId="c", state={"s": "x" * 4090})), 400, "INVALID_ARGUMENT",
            "state must be at most 4096 bytes as JSON; it is 4098.")
        err(self, call("/v2/presence/set", dict(base, clientId="c", selection=[1])), 400, "INVALID_ARGUMENT",
            'selection must be null or an object {"anchor": string, "head": string}.')
        err(self, call("/v2/presence/set", dict(base, clientId="c", selection={"anchor": "a" * 129, "head": "b"})), 400, "INVALID_ARGUMENT",
            "selection.anchor must be a string of at most 128 bytes.")
        err(self, call("/v2/presence/set", dict(base, clientId="c", color="red")), 400, "INVALID_ARGUMENT",
            'Unknown field "color"; presence/set takes organizationId, documentId, editorId, clientId, state, selection and userId.')
        err(self, call("/v2/presence/set", dict(ids("no such record"), clientId="c")), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
        err(self, call("/v2/presence/set", dict(base, clientId="c"), who="b"), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
        # The per-client token bucket: a burst of 20 on one node (each node has its own), then 429 — the
        # bucket refills at 10 a second meanwhile, so the first 429 comes after 20 sets or a few more.
        port = node_port(0)
        taken = 0
        for _ in range(200):
            res = call("/v2/presence/set", dict(base, clientId="eager"), port=port)
            if res[0] != 200:
                break
            taken += 1
        self.assertGreaterEqual(taken, 20)
        err(self, res, 429, "RESOURCE_EXHAUSTED", "Too many presence updates from this clientId: at most 10 a second, in bursts of 20; retry later.")
        # 256 clients per record (the one above included).
        for i in range(255):
            ok(self, call("/v2/presence/set", dict(base, clientId="k%d" % i)), "Presence set successfully.")
        err(self, call("/v2/presence/set", dict(base, clientId="one-more")), 429, "RESOURCE_EXHAUSTED",
            "This record already has 256 clients present; retry later.")

    def test_a_watching_folio_cli_takes_presence_for_nothing_to_sync(self):
        add("watched")
        key, token = CREDS["a"]
        env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % STACK.port)
        # Counted by each responder as it answers (its log lines are written in batches, later).
        before = metric_total('folio_requests_total{endpoint="/v2/crdt/sync",status="200"}')
        syncs = lambda: metric_total('folio_requests_total{endpoint="/v2/crdt/sync",status="200"}') - before
        watcher = subprocess.Popen([os.path.join(stack.BUILD, "tools", "folio-cli"), "--org", ORG, "--doc", DOC, "--editor", "watched", "watch"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            wait_until(lambda: syncs() >= 2, what="the watcher's two syncs")  # at its subscribe, and a second later
            port = node_port(0)  # one node publishes all of them, in order
            for i in range(3):
                ok(self, call("/v2/presence/set", dict(ids("watched"), clientId="w", userId="ana", state={"i": i}), port=port), "Presence set successfully.")
            ok(self, call("/v2/crdt/update", dict(ids("watched"), data="after presence"), port=port), "CRDT data updated successfully.")
            for line in watcher.stdout:  # the change, which came after the presence messages
                if json.loads(line) == "after presence":
                    break
            self.assertEqual(syncs(), 2)  # a presence message is no notice: nothing to sync
        finally:
            watcher.terminate()
            watcher.wait(10)

    def test_browsers_may_call_the_three_endpoints(self):
        for path in ("/v2/presence/set", "/v2/presence/leave", "/v2/presence/get"):
            status, headers, body = raw_answer(("OPTIONS %s HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\nAccess-Control-Request-Method: POST\r\n"
                                                "Access-Control-Request-Headers: authorization, content-type\r\nConnection: close\r\n\r\n" % (path, ALLOWED)).encode())
            self.assertEqual(status, 204, (path, body))
            self.assertEqual(headers["access-control-allow-origin"], ALLOWED)
        add("cors")
        token = mint("cora")
        body = json.dumps({"data": dict(ids("cors"), clientId="c1")})
        status, headers, answer = raw_answer(("POST /v2/presence/set HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\nAuthorization: Bearer %s\r\n"
                                              "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                                              % (ALLOWED, token, len(body.encode()), body)).encode())
        self.assertEqual(status, 200, answer)
        self.assertEqual(headers["access-control-allow-origin"], ALLOWED)

    @unittest.skipIf(stack.NODES == 1, "one node keeps presence in its own memory")
    def test_when_redis_is_down_presence_answers_503_then_recovers(self):
        add("outage")
        ok(self, call("/v2/presence/set", dict(ids("outage"), clientId="before", userId="ana")), "Presence set successfully.")
        STACK.redis("down")
        try:
            for i in range(len(STACK.nodes)):
                message = err(self, call("/v2/presence/set", dict(ids("outage"), clientId="during", userId="ana"), port=node_port(i)), 503, "UNAVAILABLE")
                self.assertTrue(message.startswith("Presence is unavailable: its Redis at 127.0.0.1:"), message)
            # Records are not affected.
            ok(self, call("/v2/crdt/update", dict(ids("outage"), data="during")), "CRDT data updated successfully.")
        finally:
            STACK.redis("up")
        # Redis kept nothing (no saving): every node reconnects and presence starts over.
        for i in range(len(STACK.nodes)):
            wait_until(lambda: call("/v2/presence/set", dict(ids("outage"), clientId="after%d" % i, userId="ana"), port=node_port(i))[0] == 200,
                       what="a presence set through node %d after Redis returned" % i)
        listed = ok(self, call("/v2/presence/get", ids("outage")), "Presence retrieved successfully.")["presence"]
        self.assertEqual([e["clientId"] for e in listed], ["after%d" % i for i in range(len(STACK.nodes))])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
