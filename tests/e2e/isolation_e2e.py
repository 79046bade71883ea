#!/usr/bin/env python3
"""End-to-end tenant isolation: tenant b, using exactly the ids of tenant a's records, annotations
and comments, probes every endpoint — reads, writes, deletes, sync, subscriptions. Each answer must
be the answer for ids that exist nowhere (nothing reveals that a's data exists, timing aside), and
a's data must be byte-for-byte what it was. Then b writes under the same ids and only ever sees and
changes its own data. (That the same ids in two tenants are separate live channels: e2e.live.)

Run by ctest (tests/CMakeLists.txt) as:  isolation_e2e.py BUILD_DIR SOURCE_DIR
"""
import http.client
import json
import socket
import struct
import subprocess
import sys
import time
import unittest
import urllib.parse

from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)

ORG, DOC, EDITOR, ANN = "iso-org", "iso-doc", "iso-editor", "iso-ann"
NOWHERE = ("nowhere-org", "nowhere-doc", "nowhere-editor", "nowhere-ann")
USER = {"userId": "u1", "name": "U", "email": "u@example.com"}


def subscribe(who, org, doc, editor):
    c = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=10)
    key, token = CREDS[who]
    q = urllib.parse.urlencode({"organizationId": org, "documentId": doc, "editorId": editor})
    c.request("GET", "/v2/crdt/subscribe?" + q, headers={"x-folio-api-key": key, "x-folio-auth-token": token, "Accept": "text/event-stream"})
    r = c.getresponse()
    body = r.read() if r.status != 200 else b"(subscribed)"
    c.close()
    return r.status, body.decode()


def probes(who, org, doc, editor, ann):
    """Every endpoint once, against the given ids: reads, existence probes, writes and deletes that
    can only succeed on existing data. Returns [(name, status, raw body)]."""
    base = {"organizationId": org, "documentId": doc}
    one = dict(base, editorId=editor)
    calls = [
        ("crdt/get one", "/v2/crdt/get", one),
        ("crdt/get document", "/v2/crdt/get", base),
        ("crdt/update", "/v2/crdt/update", dict(one, data="overwritten")),
        ("crdt/update typed", "/v2/crdt/update", dict(one, type="text", data="overwritten")),
        ("crdt/sync pull", "/v2/crdt/sync", dict(one, version="AA==")),
        ("crdt/sync push", "/v2/crdt/sync", dict(one, version="AA==", update="AAAA")),
        ("crdt/delete", "/v2/crdt/delete", one),
        ("v1 get", "/v1/commentannotations/get", base),
        ("v1 get by id", "/v1/commentannotations/get", dict(base, annotationIds=[ann])),
        ("v2 get", "/v2/commentannotations/get", base),
        ("v2 get by id", "/v2/commentannotations/get", dict(base, annotationIds=[ann])),
        ("update by id", "/v2/commentannotations/update", dict(base, annotationIds=[ann], updatedData={"color": "red"})),
        ("update by filter", "/v2/commentannotations/update", dict(base, userIds=["u1"], updatedData={"color": "red"})),
        ("comments/add", "/v2/commentannotations/comments/add", dict(base, annotationId=ann, commentData=[{"commentText": "x", "from": USER}])),
        ("comments/update", "/v2/commentannotations/comments/update", dict(base, annotationId=ann, commentIds=[1], updatedData={"commentText": "x"})),
        ("comments/delete one", "/v2/commentannotations/comments/delete", dict(base, annotationId=ann, commentIds=[1])),
        ("comments/delete all", "/v2/commentannotations/comments/delete", dict(base, annotationId=ann)),
        ("delete by id", "/v2/commentannotations/delete", dict(base, annotationIds=[ann])),
        ("delete by filter", "/v2/commentannotations/delete", dict(base, userIds=["u1"])),
    ]
    out = []
    for name, path, data in calls:
        status, body = call(path, data, who=who)
        out.append((name, status, json.dumps(body, sort_keys=True)))
    out.append(("subscribe", *subscribe(who, org, doc, editor)))
    return out


def a_state(test):
    """Everything tenant a can read about its data, as text."""
    parts = []
    for path, data in (("/v2/crdt/get", {"organizationId": ORG, "documentId": DOC}),
                       ("/v1/commentannotations/get", {"organizationId": ORG, "documentId": DOC}),
                       ("/v2/commentannotations/get", {"organizationId": ORG, "documentId": DOC})):
        status, body = call(path, data, who="a")
        test.assertEqual(status, 200, body)
        parts.append(json.dumps(body, sort_keys=True))
    return "\n".join(parts)


class Isolation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for editor, type_, data in ((EDITOR, "text", "a's secret text"), ("iso-map", "map", {"k": "a's value"}),
                                    ("iso-xml", "xml", "<p>a's</p>"), ("iso-array", "array", [{"who": "a's"}])):
            status, body = call("/v2/crdt/add", {"organizationId": ORG, "documentId": DOC, "editorId": editor, "type": type_, "data": data})
            assert status == 200, body
        status, body = call("/v2/commentannotations/add", {"organizationId": ORG, "documentId": DOC, "commentAnnotations": [
            {"annotationId": ANN, "from": USER, "commentData": [{"commentText": "a's comment", "from": USER}]}]})
        assert status == 200 and body["result"]["data"][ANN]["success"], body

    def test_every_probe_of_another_tenant_answers_as_for_ids_that_exist_nowhere_and_changes_nothing(self):
        before = a_state(self)
        for who in ("b", "a_key_b_token", "a_wrong_secret"):
            seen = probes(who, ORG, DOC, EDITOR, ANN)
            nowhere = probes(who, *NOWHERE)
            for (name, status, body), (_, status2, body2) in zip(seen, nowhere):
                for real, other in zip((ORG, DOC, EDITOR, ANN), NOWHERE):
                    body2 = body2.replace(other, real)
                self.assertEqual((status, body), (status2, body2), "%s by %s" % (name, who))
                self.assertNotIn("a's", body, name)
            self.assertEqual(a_state(self), before, "after %s's probes" % who)
        # The probes did meet the contract's answers, not some blanket refusal.
        by_name = {name: (status, body) for name, status, body in probes("b", ORG, DOC, EDITOR, ANN)}
        self.assertEqual(by_name["crdt/get one"][0], 200)
        self.assertEqual(by_name["crdt/update"][0], 404)
        self.assertEqual(by_name["crdt/sync pull"][0], 404)
        self.assertEqual(by_name["crdt/delete"][0], 404)
        self.assertEqual(by_name["subscribe"][0], 404)
        self.assertIn('"success": false', by_name["update by id"][1])

    def test_the_same_ids_in_another_tenant_are_separate_data(self):
        before = a_state(self)
        # b creates under a's ids: no ALREADY_EXISTS that would reveal a's record or annotation.
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": DOC, "editorId": EDITOR, "type": "text", "data": "b's"}, who="b"),
           "CRDT data added successfully.")
        status, body = call("/v2/commentannotations/add", {"organizationId": ORG, "documentId": DOC, "commentAnnotations": [
            {"annotationId": ANN, "from": USER, "commentData": [{"commentText": "b's comment", "from": USER}]}]}, who="b")
        self.assertTrue(body["result"]["data"][ANN]["success"], body)
        ok(self, call("/v2/crdt/update", {"organizationId": ORG, "documentId": DOC, "editorId": EDITOR, "data": "b's, changed"}, who="b"),
           "CRDT data updated successfully.")
        status, body = call("/v2/commentannotations/comments/add", {"organizationId": ORG, "documentId": DOC, "annotationId": ANN,
                                                                     "commentData": [{"commentText": "b's second", "from": USER}]}, who="b")
        self.assertEqual(status, 200, body)
        # b sees only its own.
        data = ok(self, call("/v2/crdt/get", {"organizationId": ORG, "documentId": DOC}, who="b"), "CRDT data retrieved successfully.")
        self.assertEqual([(r["id"], r["data"]) for r in data], [(EDITOR, "b's, changed")])
        status, body = call("/v1/commentannotations/get", {"organizationId": ORG, "documentId": DOC}, who="b")
        self.assertEqual([c["commentText"] for a in body["result"]["data"] for c in a["comments"]], ["b's comment", "b's second"])
        self.assertEqual(subscribe("b", ORG, DOC, EDITOR)[0], 200)
        self.assertEqual(a_state(self), before)
        # b's deletes, by id and by filter, remove only b's data.
        ok(self, call("/v2/crdt/delete", {"organizationId": ORG, "documentId": DOC, "editorId": EDITOR}, who="b"), "CRDT data deleted successfully.")
        status, body = call("/v2/commentannotations/delete", {"organizationId": ORG, "documentId": DOC}, who="b")
        self.assertEqual(list(body["result"]["data"]), [ANN])
        self.assertEqual(a_state(self), before)
        self.assertIn("a's secret text", before)


def fcgi_record(kind, content=b""):
    return struct.pack(">BBHHBx", 1, kind, 1, len(content), 0) + content


def fcgi_pairs(params):
    out = b""
    for k, v in params.items():
        k, v = k.encode(), v.encode()
        for n in (len(k), len(v)):
            out += bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
        out += k + v
    return out


class HeldRequest:
    """A FastCGI request sent straight to a node's folio-fcgi socket (as nginx would), its parameters
    whole and its body held back until send_body(): a request of `who` that keeps the worker reading
    it busy for as long as the test wants."""
    opened = []  # closed by the test's tearDown

    def __init__(self, node, who, body, started=None):
        self.body = body
        key, token = CREDS[who]
        params = {"REQUEST_METHOD": "POST", "DOCUMENT_URI": "/v2/crdt/get", "CONTENT_TYPE": "application/json",
                  "CONTENT_LENGTH": str(len(body)), "HTTP_X_FOLIO_API_KEY": key, "HTTP_X_FOLIO_AUTH_TOKEN": token}
        if started is not None:
            params["FOLIO_REQUEST_START"] = started  # when nginx handed it over (seconds since the epoch)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        HeldRequest.opened.append(self)
        self.sock.connect(node.socket)
        self.sock.sendall(fcgi_record(1, struct.pack(">HB5x", 1, 0)) + fcgi_record(4, fcgi_pairs(params)) + fcgi_record(4))

    def send_body(self):
        self.sock.sendall(fcgi_record(5, self.body) + fcgi_record(5))

    def send_body_but_the_last_byte(self):
        """Sends the body but its last byte; returns once a worker has read nearly all of it: `body` is
        made far larger than the socket's send buffer (set small), so the send can only end once the
        request runs. The request then holds its worker until send_rest()."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        assert len(self.body) > 16 * 65536
        chunks, sent = b"", 0
        while sent < len(self.body) - 1:
            n = min(60000, len(self.body) - 1 - sent)
            chunks += fcgi_record(5, self.body[sent:sent + n])
            sent += n
        self.sock.sendall(chunks)

    def send_rest(self):
        self.sock.sendall(fcgi_record(5, self.body[-1:]) + fcgi_record(5))

    def answer(self):
        """(HTTP status, parsed JSON body) of the answer, read to the end of the request."""
        out, buf = b"", b""
        while True:
            while len(buf) < 8 or len(buf) < 8 + struct.unpack(">H", buf[4:6])[0] + buf[6]:
                more = self.sock.recv(65536)
                if not more:
                    raise AssertionError("the connection ended before the request did")
                buf += more
            kind, n, pad = buf[1], struct.unpack(">H", buf[4:6])[0], buf[6]
            if kind == 6:
                out += buf[8:8 + n]
            buf = buf[8 + n + pad:]
            if kind == 3:  # FCGI_END_REQUEST
                self.sock.close()
                head, _, body = out.partition(b"\r\n\r\n")
                return int(head.split(b"Status: ")[1][:3]), json.loads(body)


def accept_queue(path):
    """Connections waiting in the listen queue of the unix socket at `path` (ss's Recv-Q)."""
    for line in subprocess.run(["ss", "-xlH"], check=True, capture_output=True, text=True).stdout.splitlines():
        fields = line.split()
        if path in fields:
            return int(fields[2])
    raise AssertionError("%s is not listening" % path)


class WorkerShares(unittest.TestCase):
    """A tenant holds at most --tenant-workers of a responder's workers (worker_shares.hpp): its requests
    beyond that wait without a worker, and another tenant's request is answered meanwhile."""

    def setUp(self):
        self.node = STACK.nodes[0]
        self.restart(["--workers", "2", "--tenant-workers", "1"])

    def tearDown(self):
        for held in HeldRequest.opened:
            held.sock.close()
        HeldRequest.opened.clear()
        self.restart([])

    def restart(self, args):
        STACK.fcgi.terminate()
        STACK.fcgi.wait(10)
        STACK.fcgi_args = args
        STACK.start_fcgi()

    def test_a_tenant_holding_its_share_of_the_workers_leaves_one_to_another_tenant(self):
        ids = {"organizationId": "share-org", "documentId": "share-doc", "editorId": "e"}
        ok(self, call("/v2/crdt/add", dict(ids, type="text", data="a's"), port=self.node.port), "CRDT data added successfully.")
        body = json.dumps({"data": ids}).encode()
        # Two of tenant a's requests whose bodies have not arrived: each holds the worker that reads it
        # until its body comes, unless it waits for a's share (one worker of two). A third one, whose
        # deadline has passed, is accepted too: by the worker a does not hold, which then is free.
        first = HeldRequest(self.node, "a", body)
        second = HeldRequest(self.node, "a", body)
        late = HeldRequest(self.node, "a", body, started="%.3f" % (time.time() - 3600))
        late.send_body()
        until = time.monotonic() + 10
        while accept_queue(self.node.socket) and time.monotonic() < until:
            time.sleep(0.01)
        self.assertEqual(accept_queue(self.node.socket), 0, "a request waits in the listen queue: tenant a holds every worker")
        # Tenant b's request finds the worker tenant a does not hold.
        c = http.client.HTTPConnection("127.0.0.1", self.node.port, timeout=10)
        key, token = CREDS["b"]
        try:
            c.request("POST", "/v2/crdt/get", json.dumps({"data": {"organizationId": "share-org", "documentId": "share-doc"}}),
                      {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token})
            r = c.getresponse()
            self.assertEqual((r.status, json.loads(r.read())["result"]["data"]), (200, []))
        finally:
            c.close()
        # a's first request ends; its worker runs a's waiting ones in turn (the late one is not run).
        first.send_body()
        second.send_body()
        for held in (first, second):
            status, answer = held.answer()
            self.assertEqual(status, 200, answer)
            self.assertEqual((status, [r["data"] for r in answer["result"]["data"]]), (200, ["a's"]))
        self.assertEqual(late.answer(), (503, {"error": {"message": "The request did not finish in time; nothing was changed. Retry it.",
                                                         "status": "UNAVAILABLE"}}))


    def test_a_tenant_whose_queue_is_full_is_answered_429_at_once(self):
        body = json.dumps({"data": {"organizationId": "share-org", "documentId": "none", "editorId": "e"}}).encode()
        first = HeldRequest(self.node, "a", body)  # holds a's one worker
        waiting = [HeldRequest(self.node, "a", body) for _ in range(256)]  # a's queue, full
        until = time.monotonic() + 10
        while accept_queue(self.node.socket) and time.monotonic() < until:
            time.sleep(0.01)
        one_more = HeldRequest(self.node, "a", body)
        self.assertEqual(one_more.answer(), (429, {"error": {"message": "This API key already has 1 requests running on this server and too many waiting; retry later.",
                                                             "status": "RESOURCE_EXHAUSTED"}}))
        for held in [first] + waiting:
            held.send_body()
        for held in [first] + waiting:
            self.assertEqual(held.answer()[0], 200)  # each ran in turn

    def tenant(self, name):
        """Credentials of tenant `name` (made on first use): a key and a token of its own."""
        if name not in CREDS:
            key = STACK.admin("create-key", "tenant-" + name)
            CREDS[name] = (key, STACK.admin("create-token", key[3:19], "subject-" + name))

    def get_as(self, who, timeout):
        """An HTTP request of tenant `who` through nginx, sent (its answer: getresponse())."""
        c = http.client.HTTPConnection("127.0.0.1", self.node.port, timeout=timeout)
        key, token = CREDS[who]
        c.request("POST", "/v2/crdt/get", json.dumps({"data": {"organizationId": "share-org", "documentId": "none"}}),
                  {"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token})
        return c

    def test_a_light_tenant_finds_a_worker_while_two_tenants_hold_their_shares(self):
        """Every worker busy (a at its share of 2 of 4, b and d with one request each), a's next request
        waiting: a worker that ends one of a's requests accepts rather than run a's waiting one while no
        other worker accepts, so a third tenant's request is answered while the others are still held."""
        self.restart(["--workers", "4", "--tenant-workers", "2"])
        self.tenant("c")
        self.tenant("d")
        ids = {"organizationId": "share-org", "documentId": "none", "editorId": "e"}
        body = json.dumps({"data": ids}).encode()
        large = body + b" " * (2 << 20)  # JSON: the spaces are whitespace after the object
        # a1, a2 run (each proven to run: its worker reads its body); a3 waits for a's share. b1 runs on
        # the third worker; d1, of a tenant with none running, takes the last one. Every worker is busy.
        a1, a2 = HeldRequest(self.node, "a", large), HeldRequest(self.node, "a", large)
        a1.send_body_but_the_last_byte()
        a2.send_body_but_the_last_byte()
        a3 = HeldRequest(self.node, "a", body)
        wait_until(lambda: accept_queue(self.node.socket) == 0, what="a3 accepted")
        b1 = HeldRequest(self.node, "b", large)
        b1.send_body_but_the_last_byte()
        d1 = HeldRequest(self.node, "d", large)
        d1.send_body_but_the_last_byte()
        # Tenant c's request waits in the listen queue until a1 ends. a1's worker must then accept it
        # rather than run a3 (whose body the test holds back: running it would hold that worker too).
        c = self.get_as("c", 20)
        try:
            a1.send_rest()
            self.assertEqual(a1.answer()[0], 200)
            r = c.getresponse()
            self.assertEqual((r.status, json.loads(r.read())["result"]["data"]), (200, []))
        finally:
            c.close()
        # The rest end; a3 runs on a worker that ends a request while another accepts.
        a3.send_body()
        for held in (a2, b1, d1):
            held.send_rest()
        for held in (a2, a3, b1, d1):
            self.assertEqual(held.answer()[0], 200)

    def test_a_light_tenant_finds_a_worker_while_two_tenants_hold_what_they_can_with_the_default_share(self):
        """4 workers, the default share of 3: tenants a and b each with a request running and more waiting
        can together run on at most 3 workers (the last free one is kept for a tenant with none running),
        so a third tenant's request is answered at once while all of theirs are still held."""
        self.restart(["--workers", "4"])
        self.tenant("c")
        ids = {"organizationId": "share-org", "documentId": "none", "editorId": "e"}
        body = json.dumps({"data": ids}).encode()
        large = body + b" " * (2 << 20)  # JSON: the spaces are whitespace after the object
        # a1, a2 and b1 run (each proven to run: its worker reads its body). a3 and b2, whose bodies the
        # test holds back, would hold the last worker if they ran: they wait, each on a hold of its
        # tenant's (a3 is accepted first: the listen queue is in arrival order).
        a1, a2, b1 = HeldRequest(self.node, "a", large), HeldRequest(self.node, "a", large), HeldRequest(self.node, "b", large)
        for held in (a1, a2, b1):
            held.send_body_but_the_last_byte()
        a3 = HeldRequest(self.node, "a", body)
        wait_until(lambda: accept_queue(self.node.socket) == 0, what="a3 accepted")
        b2 = HeldRequest(self.node, "b", body)
        c = self.get_as("c", 10)
        try:
            r = c.getresponse()  # while a1, a2 and b1 are held and a3, b2 wait
            self.assertEqual((r.status, json.loads(r.read())["result"]["data"]), (200, []))
        finally:
            c.close()
        # Everything ends: a3 and b2 run on workers that end a request while another accepts, in turn.
        a3.send_body()
        b2.send_body()
        for held in (a1, a2, b1):
            held.send_rest()
        for held in (a1, a2, a3, b1, b2):
            self.assertEqual(held.answer()[0], 200)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])
