"""The JavaScript client (clients/js, the engine as WebAssembly) against the real stack: runs
clients/js/test/e2e/*.e2e.js under Node's test runner with the stack's URL and tenant a's credentials,
with which the tests play the application's backend: they add records and mint the client tokens the
clients connect with (POST /v2/auth/token).
Needs the WebAssembly build (scripts/build-js); scripts/test runs this after the client's npm test, on
one node and with FOLIO_TEST_NODES=3, where a Redis stall also delivers a record's messages out of commit
order (RedisStall; docs/API.md, live changes) and the client must converge through it.

Run as:  js_client_e2e.py BUILD_DIR SOURCE_DIR
"""
import glob
import json
import os
import subprocess
import sys
import unittest

from stack import *  # noqa: F401,F403 (setUpModule/tearDownModule start and stop the stack)
import stack


class JavaScriptClient(unittest.TestCase):
    def test_node_suite(self):
        tests = sorted(glob.glob(os.path.join(stack.SOURCE, "clients", "js", "test", "e2e", "*.e2e.js")))
        self.assertTrue(tests, "no clients/js/test/e2e/*.e2e.js")
        key, token = CREDS["a"]
        env = dict(os.environ, FOLIO_URL="http://127.0.0.1:%d" % STACK.port, FOLIO_KEY=key, FOLIO_TOKEN=token)
        r = subprocess.run(["node", "--test", *tests], env=env, capture_output=True, text=True, timeout=600)
        print(r.stdout[-3000:])
        self.assertEqual(r.returncode, 0, r.stdout[-8000:] + r.stderr[-4000:])


@unittest.skipIf(stack.NODES == 1, "a Redis stall reorders messages only across nodes (FOLIO_TEST_NODES=3)")
class RedisStall(unittest.TestCase):
    ORG, DOC, EDITOR = "js-cluster", "doc", "stall"

    def ids(self):
        return {"organizationId": self.ORG, "documentId": self.DOC, "editorId": self.EDITOR}

    def test_the_client_converges_through_a_redis_stall_and_shows_the_largest_revisions_metadata(self):
        # Updates through the front (every node commits and publishes some) while Redis is stopped
        # (SIGSTOP): each node's nginx holds what its responder published meanwhile and releases it when
        # Redis resumes (SIGCONT), the nodes' interleaved, so a record's messages arrive out of commit
        # order (docs/API.md, live changes; cluster_e2e.py checks the messages and folio-cli). The
        # JavaScript client, subscribed through node 2, must end at the record's value, and its metadata
        # must be the last update's (the largest revision), not that of whichever message came last.
        ok(self, call("/v2/crdt/add", dict(self.ids(), type="text", data="")), "CRDT data added successfully.")
        stream = EventStream(self.ids(), port=STACK.nodes[1].port)  # the order messages come in, for the log
        client, out = self.follow(STACK.nodes[2].port)
        text, n = "", 0
        try:
            wait_until(lambda: self.shown(out) is not None or client.poll() is not None, what="the JavaScript client connected")
            self.assertIsNone(client.poll())

            def update():
                nonlocal text, n
                n += 1
                text += "%d," % n
                ok(self, call("/v2/crdt/update", dict(self.ids(), data=text, userId="u%d" % n, sessionId="s%d" % n)),
                   "CRDT data updated successfully.")

            redis_stall(self, update)
            stream.sock.settimeout(30)
            received = [stream.next_data()]
            while received[-1].get("lastUpdatedBy") != "u%d" % n:
                received.append(stream.next_data())
            revisions = [m["revision"] for m in received]
            print("%d messages, %d after a larger revision; the first: %s" % (
                len(revisions), sum(1 for a, b in zip(revisions, revisions[1:]) if b < a), revisions[:24]), file=sys.stderr)

            status, body = call("/v2/crdt/get", self.ids())
            self.assertEqual(status, 200, body)
            record = body["result"]["data"][0]
            self.assertEqual((record["data"], record["lastUpdatedBy"], record["sessionId"]), (text, "u%d" % n, "s%d" % n))
            revision = STACK.scalar("SELECT revision FROM crdt_records WHERE org = '%s' AND doc = '%s' AND editor = '%s'"
                                    % (self.ORG, self.DOC, self.EDITOR))
            self.assertEqual(revision, n + 1)  # the add was revision 1, update k revision k + 1
            expected = {"value": text, "metadata": {"revision": revision, "lastUpdatedBy": "u%d" % n, "sessionId": "s%d" % n,
                                                    "lastUpdate": record["lastUpdate"]}}
            wait_until(lambda: self.shown(out) == expected or client.poll() is not None, 60,
                       what="the JavaScript client showing the record's value and its last update's metadata")
            self.assertEqual(self.shown(out), expected)
            self.assertIsNone(client.poll())
        finally:
            stream.close()
            client.terminate()
            client.wait()
            out.close()
            with open(os.path.join(STACK.dir, "log", "%s.js.stderr" % self.EDITOR)) as f:
                errors = f.read()
            if errors:
                print("the JavaScript client's stderr:\n" + errors[-4000:], file=sys.stderr)

    def follow(self, node_port):
        """The JavaScript client following the record through the node at node_port with the API key's
        headers, printing {value, metadata} as JSON at the start and at each change or metadata event,
        its output in a file (its stderr in the stack's log directory)."""
        script = os.path.join(STACK.dir, "follow-%s.mjs" % self.EDITOR)
        with open(script, "w") as f:
            f.write("import { connect } from %s;\n"
                    "const [baseUrl, key, token, organizationId, documentId, editorId] = process.argv.slice(2);\n"
                    "const r = await connect({ baseUrl, headers: { 'x-folio-api-key': key, 'x-folio-auth-token': token },"
                    " organizationId, documentId, editorId });\n"
                    "const show = () => process.stdout.write(JSON.stringify({ value: r.value, metadata: r.metadata }) + '\\n');\n"
                    "r.on('change', show).on('metadata', show).on('deleted', () => process.exit(3));\nshow();\n"
                    % json.dumps("file://" + os.path.abspath(os.path.join(stack.SOURCE, "clients", "js", "folio.js"))))
        key, token = CREDS["a"]
        out = open(os.path.join(STACK.dir, "%s.js.out" % self.EDITOR), "w+")
        with open(os.path.join(STACK.dir, "log", "%s.js.stderr" % self.EDITOR), "w") as err_file:
            p = subprocess.Popen(["node", script, "http://127.0.0.1:%d" % node_port, key, token, self.ORG, self.DOC, self.EDITOR],
                                 stdout=out, stderr=err_file)
        return p, out

    @staticmethod
    def shown(out):
        """The last {value, metadata} the client printed (None before the first)."""
        out.seek(0)
        lines = [line for line in out.read().splitlines() if line.strip()]
        try:
            return json.loads(lines[-1]) if lines else None
        except ValueError:  # a line being written
            return None


if __name__ == "__main__":
    unittest.main(argv=[__file__])
