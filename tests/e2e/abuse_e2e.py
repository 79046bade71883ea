#!/usr/bin/env python3
"""End-to-end tests of slow and abusive clients: bodies that stall half-way, a crowd of idle
connections, and a burst over the rate limit. nginx absorbs each — the responder's workers never
wait on a client; stalled and idle connections are closed after nginx's timeouts, a burst is answered
429 in the JSON error shape — while normal requests keep succeeding.

Run by ctest (tests/CMakeLists.txt) as:  abuse_e2e.py BUILD_DIR SOURCE_DIR
The stack runs with a rate limit of 20 requests/s per address (burst 2000, nginx/folio.conf).
"""
import concurrent.futures
import json
import resource
import socket
import sys
import threading
import time
import unittest

from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)

STACK.rate = 20
IDLE = 1500
SLOW = 12  # three times the responder's workers


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


def read_all(s):
    chunks = []
    while True:
        c = s.recv(65536)
        if not c:
            return b"".join(chunks)
        chunks.append(c)


def responses(raw):
    """(status, body) of each HTTP/1.1 response in `raw` (Content-Length framed)."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = int([line.split(b":", 1)[1] for line in lines if line.lower().startswith(b"content-length:")][0])
        out.append((int(lines[0].split()[1]), rest[:length]))
        raw = rest[length:]
    return out


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

    def test_3_a_burst_over_the_rate_limit_gets_429_json_and_others_are_served(self):
        requests = b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" * 700
        results = []

        def burst():
            with socket.create_connection(("127.0.0.1", STACK.port), timeout=60) as s:
                s.sendall(requests + b"POST /v2/crdt/get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                results.extend(responses(read_all(s)))

        threads = [threading.Thread(target=burst) for _ in range(4)]
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
        normal_request(self, source="127.0.0.2")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
