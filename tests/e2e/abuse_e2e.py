#!/usr/bin/env python3
"""End-to-end tests of slow and abusive clients: bodies that stall half-way, a crowd of idle
connections, a burst over the rate limit, a burst of subscribers, and the subscriber-authorization hop
out of reach. nginx absorbs each — the responder's workers never wait on a client; stalled and idle
connections are closed after nginx's timeouts, a burst is answered 429 in the JSON error shape, no
nginx worker dies (which would drop every tenant's subscribers) — while normal requests keep
succeeding.

Run by ctest (tests/CMakeLists.txt) as:  abuse_e2e.py BUILD_DIR SOURCE_DIR
The stack runs with a rate limit of 20 requests/s per address (burst 2000, nginx/folio.conf).
"""
import concurrent.futures
import json
import os
import resource
import selectors
import socket
import sys
import threading
import time
import unittest

from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)
from stack import raw_answer as stack_raw_answer  # noqa: E402 (abuse asks from a client address of its own)

STACK.rate = 20
IDLE = 1500
SLOW = 12  # three times the responder's workers
BURST = 600  # subscribers at once: more than a unix socket's default backlog (511) of nginx's authorization hop


def normal_request(test, source="127.0.0.1"):
    """A small authenticated read that must succeed; sent from `source`."""
    key, token = CREDS["a"]
    body = json.dumps({"data": {"organizationId": "abuse", "documentId": "d"}}).encode()
    with socket.create_connection(("127.0.0.1", STACK.port), timeout=30, source_address=(source, 0)) as s:
        s.sendall(b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-folio-api-key: %s\r\n"
                  b"x-folio-auth-token: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (key.encode(), token.encode(), len(body), body))
        raw = read_all(s)
    test.assertTrue(raw.startswith(b"HTTP/1.1 200"), raw[:200])


def responder_gets():
    """How many /v2/crdt/get requests folio-fcgi has logged."""
    with open(STACK.fcgi_log) as f:
        return sum(1 for line in f if '"endpoint":"/v2/crdt/get"' in line and '"event":"request"' in line)


def error_log():
    return os.path.join(STACK.dir, "log", "nginx-error.log")


def access_statuses():
    """The status of every request in nginx's access log (folio_json lines)."""
    return [json.loads(line)["status"] for line in log_lines(os.path.join(STACK.dir, "log", "nginx-access.log"))]


class Abuse(unittest.TestCase):
    def test_1_slow_bodies_hold_no_worker_and_are_cut_off(self):
        key, token = CREDS["a"]
        logged_before = responder_gets()
        slow = []
        for _ in range(SLOW):
            s = socket.create_connection(("127.0.0.1", STACK.port), timeout=60)
            s.sendall(b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-folio-api-key: %s\r\n"
                      b"x-folio-auth-token: %s\r\nContent-Length: 1000\r\n\r\n{\"da" % (key.encode(), token.encode()))
            slow.append(s)
        # While every slow client is mid-body, normal requests are answered.
        for _ in range(20):
            normal_request(self)
        # The slow clients then stop sending: nginx closes them (client_body_timeout; a client that
        # sends nothing gets no answer), and none of them ever reached the responder.
        for s in slow:
            self.assertEqual(read_all(s), b"")
            s.close()
        self.assertEqual(responder_gets() - logged_before, 20)
        normal_request(self)

    def test_2_idle_connections_are_held_cheaply_and_closed(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < IDLE + 200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, IDLE + 1000), hard))
        idle = []
        try:
            for i in range(IDLE):
                s = socket.create_connection(("127.0.0.1", STACK.port), timeout=60)
                if i % 2:
                    s.sendall(b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\n")  # half a header, then nothing
                idle.append(s)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                for f in [pool.submit(normal_request, self) for _ in range(50)]:
                    f.result()
            # nginx closes them (client_header_timeout) without an answer: there is no request to answer.
            closed = sum(1 for s in idle if read_all(s) == b"")
            self.assertEqual(closed, IDLE)
        finally:
            for s in idle:
                s.close()
        normal_request(self)

    @single_node  # each node counts its own share: the limit is per node (docs/OPERATIONS.md "Running N nodes")
    def test_3_a_burst_over_the_rate_limit_gets_429_json_and_others_are_served(self):
        requests = b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" * 700
        results = []

        def burst():
            with socket.create_connection(("127.0.0.1", STACK.port), timeout=60) as s:
                s.sendall(requests + b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                results.extend(responses(read_all(s)))

        threads = [threading.Thread(target=burst) for _ in range(4)]
        error_lines = len(log_lines(error_log()))
        access_429 = access_statuses().count(429)
        start = time.time()
        for t in threads:
            t.start()
        # Another client address is not limited by this one's burst.
        for _ in range(10):
            normal_request(self, source="127.0.0.2")
        for t in threads:
            t.join()
        elapsed = time.time() - start
        self.assertEqual(len(results), 4 * 701)
        limited = [body for status, body in results if status == 429]
        # nginx lets through the burst (2000) and 20 a second over the run; the rest is refused.
        self.assertGreaterEqual(len(limited), max(1, 4 * 701 - 2000 - int(20 * (elapsed + 1))))
        self.assertEqual(json.loads(limited[0]), {"error": {"message": "Too many requests; retry later.", "status": "RESOURCE_EXHAUSTED"}})
        self.assertEqual({status for status, _ in results}, {401, 429})  # the rest reached the responder
        # Each rejection is a line of the access log (status 429), none of the error log (nginx's default
        # logs one at error level per rejection: a flood would fill the disk).
        # nginx writes a request's access-log line after its answer is sent (the log phase): wait for them.
        deadline = time.time() + 10
        while access_statuses().count(429) - access_429 < len(limited) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(access_statuses().count(429) - access_429, len(limited))
        self.assertEqual(log_lines(error_log())[error_lines:], [])
        normal_request(self, source="127.0.0.2")





def dead_workers():
    """nginx's error-log lines that tell a worker died (every connection it held was dropped)."""
    return [line for line in log_lines(error_log()) if "exited on signal" in line]


def subscribe_request(editor):
    return subscription_request({"organizationId": "abuse", "documentId": "live", "editorId": editor})


def subscribers_at_once(n, editor, source):
    """Opens n connections from `source` at once, sends a subscribe on each, and returns each one's
    answer: up to Nchan's greeting, the whole refusal, or what came before the connection closed."""
    socks, answers = [], {}
    sel = selectors.DefaultSelector()
    for _ in range(n):
        s = socket.socket()
        s.bind((source, 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", STACK.port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, b"")
    request = subscribe_request(editor)
    deadline = time.time() + 120  # a guard against a hang, not a measurement
    while len(answers) < n and time.time() < deadline:
        for k, events in sel.select(1):
            s = k.fileobj
            if events & selectors.EVENT_WRITE:
                s.send(request)
                sel.modify(s, selectors.EVENT_READ, b"")
                continue
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            buf = k.data + chunk
            if not chunk or answer_complete(buf):
                answers[s] = buf
                sel.unregister(s)
            else:
                sel.modify(s, selectors.EVENT_READ, buf)
    for s in socks:
        s.close()
    return list(answers.values()) + [b"<no answer>"] * (n - len(answers))


def update_live(editor, value):
    ids = {"organizationId": "abuse", "documentId": "live", "editorId": editor}
    status, body = call("/v2/crdt/update", dict(ids, data=value), source="127.0.0.4")
    assert status == 200, body


class Subscribers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for editor in ("burst", "hop"):
            status, body = call("/v2/crdt/add", {"organizationId": "abuse", "documentId": "live", "editorId": editor, "type": "text",
                                                 "data": "0"}, source="127.0.0.4")
            assert status == 200, body

    def test_a_burst_of_subscribers_is_served_and_no_worker_dies(self):
        # Nchan crashed the worker whenever its authorization subrequest failed at once — here the hop's
        # unix socket backlog overflowing — and every subscriber the worker held was dropped with it.
        before = EventStream({"organizationId": "abuse", "documentId": "live", "editorId": "burst"}, source="127.0.0.4")
        try:
            answers = subscribers_at_once(BURST, "burst", "127.0.0.3")
            greeted = [a for a in answers if a.startswith(b"HTTP/1.1 200") and b": hi\n" in a]
            refused = [a for a in answers if a.startswith(b"HTTP/1.1 503") and b'"status":"UNAVAILABLE"' in a]
            others = [a[:300] for a in answers if a not in greeted and a not in refused]
            self.assertEqual(others[:3], [], "%d of %d answers neither a greeting nor a JSON 503" % (len(others), BURST))
            self.assertEqual(dead_workers(), [])
            update_live("burst", "after the burst")
            self.assertEqual(before.next_data()["editorId"], "burst")  # an earlier subscriber was not dropped
        finally:
            before.close()

    @single_node  # one node's hop socket taken away
    def test_an_unreachable_authorization_hop_crashes_no_worker(self):
        # The hop's socket gone (its connect() fails at once): every subscribe crashed a worker. Now the
        # subscriber gets a JSON 503 (Nchan answers a failed authorization with an empty 502, which the
        # public location turns into JSON), and the others stay connected.
        sock = os.path.join(STACK.dir, "run", "nginx-authorize.sock")
        before = EventStream({"organizationId": "abuse", "documentId": "live", "editorId": "hop"}, source="127.0.0.4")
        os.rename(sock, sock + ".away")
        try:
            answers = subscribers_at_once(3, "hop", "127.0.0.4")
            for a in answers:
                self.assert_unavailable(a)
            self.assertEqual(dead_workers(), [])
            update_live("hop", "hop unreachable")
            self.assertEqual(before.next_data()["editorId"], "hop")
        finally:
            os.rename(sock + ".away", sock)
            before.close()
        after = EventStream({"organizationId": "abuse", "documentId": "live", "editorId": "hop"}, source="127.0.0.4")  # the hop is back
        after.close()

    @single_node  # one node's hop socket taken away
    def test_an_unreachable_subscriber_hop_answers_a_json_503_that_a_balancer_may_retry(self):
        sock = os.path.join(STACK.dir, "run", "nginx-subscribe.sock")
        os.rename(sock, sock + ".away")
        try:
            for a in subscribers_at_once(3, "hop", "127.0.0.4"):
                self.assert_unavailable(a)
                self.assertIn(b"\r\nX-Folio-Unhandled: 1\r\n", a)  # the responder never saw it
            self.assertEqual(dead_workers(), [])
        finally:
            os.rename(sock + ".away", sock)
        EventStream({"organizationId": "abuse", "documentId": "live", "editorId": "hop"}, source="127.0.0.4").close()

    def assert_unavailable(self, answer):
        head, _, body = answer.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 503") and b"\r\nContent-Type: application/json\r\n" in head, answer[:300])
        self.assertEqual(json.loads(body), {"error": {"message": "The service is unavailable; retry later.", "status": "UNAVAILABLE"}})


class NginxAnswers(unittest.TestCase):
    """Every answer nginx gives itself is the JSON error shape with its own code (nginx/errors.conf)."""

    def assert_json(self, request, http, status, message):
        code, headers, body = raw_answer(request)
        self.assertEqual((code, headers.get("content-type")), (http, "application/json"), body[:300])
        self.assertEqual(json.loads(body), {"error": {"message": message, "status": status}})
        self.assertRegex(headers.get("x-request-id", ""), "^[0-9a-f]{32}$")  # every answer names its request

    def test_malformed_requests(self):
        malformed = "Malformed HTTP request: nginx could not parse its request line, a header or the body's framing."
        for request in (b"POST /v2/crdt/get%00 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                        b"GET /v2/crdt/subscribe%zz HTTP/1.1\r\nHost: x\r\n\r\n",
                        b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
                        b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n"):
            with self.subTest(request=request[:40]):
                self.assert_json(request, 400, "INVALID_ARGUMENT", malformed)
        self.assert_json(b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 10000 + b"\r\n\r\n", 400, "INVALID_ARGUMENT",
                         "Request headers are larger than the limit (8 KiB a line, 32 KiB in all).")
        self.assert_json(b"POST /v2/crdt/get?" + b"a" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "INVALID_ARGUMENT",
                         "Request URI is longer than the limit (8 KiB).")
        self.assert_json(b"GET /v2/crdt/subscribe?organizationId=" + b"o" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414,
                         "INVALID_ARGUMENT", "Request URI is longer than the limit (8 KiB).")
        self.assert_json(b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "INVALID_ARGUMENT",
                         "Transfer-Encoding must be chunked or absent.")
        self.assert_json(b"POST /v2/crdt/get HTTP/2.0\r\nHost: x\r\n\r\n", 505, "INVALID_ARGUMENT", "HTTP version not supported; use HTTP/1.1.")
        self.assert_json(b"TRACE /v2/crdt/get HTTP/1.1\r\nHost: x\r\n\r\n", 400, "INVALID_ARGUMENT", "Method not allowed; every endpoint takes POST.")

    def test_a_subscribe_with_a_body_gets_json(self):
        # The subscribe location has error pages of its own (folio.conf): nginx's 413 there, and a body
        # whose framing nginx would fail to read, are answered in JSON too.
        target = b"GET /v2/crdt/subscribe?organizationId=abuse&documentId=live&editorId=hop HTTP/1.1\r\nHost: x\r\n"
        self.assert_json(target + b"Content-Length: 5000000\r\n\r\n", 413, "INVALID_ARGUMENT", "Request body is larger than the limit.")
        for body in (b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"Content-Length: 5\r\n\r\nhello"):
            self.assert_json(target + body, 400, "INVALID_ARGUMENT", "A subscribe request has no body.")
        self.assert_json(target + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n\r\n", 400, "INVALID_ARGUMENT",
                         "Malformed HTTP request: nginx could not parse its request line, a header or the body's framing.")

    def test_a_subscriber_gets_a_json_503_while_the_responder_is_down(self):
        STACK.fcgi.terminate()
        STACK.fcgi.wait(10)
        try:
            self.assert_json(subscribe_request("hop"), 503, "UNAVAILABLE", "The service is unavailable; retry later.")
            self.assert_json(b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 503, "UNAVAILABLE",
                             "The service is unavailable; retry later.")
        finally:
            STACK.start_fcgi()
        self.assertEqual(dead_workers(), [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
