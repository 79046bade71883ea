"""The JavaScript client (clients/js, the engine as WebAssembly) against the real stack: runs
clients/js/test/e2e/*.e2e.js under Node's test runner with the stack's URL and tenant a's credentials,
with which the tests play the application's backend: they add records and mint the client tokens the
clients connect with (POST /v2/auth/token).
Needs the WebAssembly build (scripts/build-js); scripts/test runs this after the client's npm test.

Run as:  js_client_e2e.py BUILD_DIR SOURCE_DIR
"""
import glob
import os
import subprocess
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


if __name__ == "__main__":
    unittest.main(argv=[__file__])
