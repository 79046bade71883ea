"""The JavaScript client in a real browser: headless Chromium (Debian's package) driven by puppeteer-core
runs tests/e2e/browser/browser.e2e.js against the real stack (nginx serving /client/ and /demo/, Nchan,
folio-fcgi). The test pages come from a page server on another port, whose origin the stack allows
(CORS); the demo page's screenshot is saved as BUILD_DIR/artifacts/demo.png. Before the browser, the
files nginx serves under /client/ and /demo/ are checked over HTTP (types, caching, gzip, CORS, 404s).
Needs the WebAssembly build (scripts/build-js), `npm ci` in tests/e2e/browser, and chromium;
scripts/test does all three and runs this after the client's own tests.

Run as:  browser_e2e.py BUILD_DIR SOURCE_DIR   (FOLIO_CHROMIUM names the browser binary, if not the
default; FOLIO_BROWSER_TEST=<regular expression> runs only the cases whose names match, and
FOLIO_BROWSER_SKIP=<regular expression> skips those whose names match)
"""
import gzip
import http.client
import json
import os
import shutil
import subprocess
import unittest

from stack import *  # noqa: F401,F403 (setUpModule/tearDownModule start and stop the stack)
import stack

PAGES_PORT = stack.free_port()
PAGES_ORIGIN = "http://127.0.0.1:%d" % PAGES_PORT
# The test pages' origin, and the stack's own (as scripts/run allows it): the demo page listens over
# WebSockets, which always send an Origin.
STACK.cors_origins = "%s http://127.0.0.1:%d" % (PAGES_ORIGIN, STACK.port)
# A presence timeout far beyond the tests' deadlines: a page that leaves within one left by itself (its
# pagehide), not by the service's timeout.
STACK.fcgi_args = STACK.fcgi_args + ["--presence-timeout", "600"]


def chromium():
    """The browser: FOLIO_CHROMIUM, else Debian's chromium (headless by puppeteer's flag), else its headless shell."""
    for path in (os.environ.get("FOLIO_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-headless-shell")):
        if path:
            return path
    raise RuntimeError("no chromium: apt-get install chromium (scripts/test installs it)")


def get(path, headers=None):
    """GET `path` from the stack's nginx: (status, headers with lower-cased names, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


class StaticFiles(unittest.TestCase):
    """What nginx/static.conf promises: the client's files and the demo, typed, revalidated, gzipped."""

    def test_the_client_is_served_with_its_types_caching_and_compression(self):
        with open(os.path.join(stack.SOURCE, "clients", "js", "dist", "folio-engine.wasm"), "rb") as f:
            wasm = f.read()
        status, h, body = get("/client/dist/folio-engine.wasm")
        self.assertEqual((status, h["content-type"], body), (200, "application/wasm", wasm))
        self.assertEqual(h["cache-control"], "no-cache")
        self.assertIn("x-request-id", h)
        status, h304, _ = get("/client/dist/folio-engine.wasm", {"If-None-Match": h["etag"]})
        self.assertEqual(status, 304)   # revalidated, not downloaded again
        status, hz, body = get("/client/dist/folio-engine.wasm", {"Accept-Encoding": "gzip"})
        self.assertEqual((status, hz.get("content-encoding")), (200, "gzip"))
        self.assertEqual(gzip.decompress(body), wasm)
        self.assertLess(len(body), len(wasm) // 2)
        for path, source in (("/client/folio.js", "folio.js"), ("/client/src/client.js", "src/client.js")):
            with open(os.path.join(stack.SOURCE, "clients", "js", source), "rb") as f:
                self.assertEqual(get(path)[::2], (200, f.read()), path)
            self.assertEqual(get(path)[1]["content-type"], "text/javascript", path)

    def test_nothing_else_under_client_and_demo(self):
        for path in ("/client/package.json", "/client/src/../package.json", "/client/wasm/folio_wasm.cpp",
                     "/client/src/missing.js", "/client/node_modules/typescript/package.json", "/demo/../README.md"):
            status, h, body = get(path)
            self.assertEqual(status, 404, path)
            self.assertEqual(json.loads(body)["error"]["status"], "NOT_FOUND", path)

    def test_the_demo_page(self):
        status, h, body = get("/demo/")
        self.assertEqual((status, h["content-type"]), (200, "text/html; charset=utf-8"))
        self.assertIn(b"<script type=\"module\" src=\"demo.js\">", body)
        self.assertNotIn(b"8080", body)  # the help text names no port: demo.js writes the page's own origin
        status, h, body = get("/demo/demo.js")
        self.assertEqual((status, h["content-type"]), (200, "text/javascript"))
        self.assertIn(b"from '/client/folio.js'", body)
        self.assertIn(b"$('help-link').textContent = `${location.origin}", body)
        status, h, _ = get("/demo")
        self.assertEqual((status, h["location"].rpartition(":%d" % STACK.port)[2]), (301, "/demo/"))

    def test_the_demo_modules_named_by_its_import_map(self):
        # Every module the page's import map names, and ProseMirror's style sheet, from demo/node_modules
        # (npm ci in demo/); nothing else there: package.json, CommonJS builds, paths out of it.
        with open(os.path.join(stack.SOURCE, "demo", "index.html"), encoding="utf-8") as f:
            page = f.read()
        start = page.index('<script type="importmap">') + len('<script type="importmap">')
        imports = json.loads(page[start:page.index("</script>", start)])["imports"]
        self.assertIn("prosemirror-view", imports)
        for name, path in imports.items():
            status, h, body = get(path)
            self.assertEqual((status, h.get("content-type")), (200, "text/javascript"), path)
            with open(os.path.join(stack.SOURCE, "demo", path[len("/demo/"):]), "rb") as f:
                self.assertEqual(body, f.read(), path)
            self.assertEqual(h["cache-control"], "no-cache", path)
        status, h, _ = get("/demo/node_modules/prosemirror-view/style/prosemirror.css")
        self.assertEqual((status, h["content-type"]), (200, "text/css"))
        for path in ("/demo/node_modules/prosemirror-model/package.json", "/demo/node_modules/prosemirror-view/dist/index.cjs",
                     "/demo/node_modules/.package-lock.json", "/demo/node_modules/../package.json",
                     "/demo/node_modules/prosemirror-model/src/index.ts", "/demo/package-lock.json"):
            status, h, body = get(path)
            self.assertEqual(status, 404, path)

    def test_other_origins_load_the_client_only_if_listed(self):
        allowed = PAGES_ORIGIN
        status, h, _ = get("/client/folio.js", {"Origin": allowed})
        self.assertEqual((status, h.get("access-control-allow-origin")), (200, allowed))
        self.assertIn("Origin", h.get("vary", ""))
        status, h, _ = get("/client/folio.js", {"Origin": "http://evil.example.test"})
        self.assertEqual(status, 200)   # a plain GET is answered; the browser keeps it from the page
        self.assertNotIn("access-control-allow-origin", h)
        self.assertNotIn("access-control-allow-origin", get("/demo/", {"Origin": allowed})[1])


class Browser(unittest.TestCase):
    def test_browser_suite(self):
        here = os.path.join(stack.SOURCE, "tests", "e2e", "browser")
        key, token = CREDS["a"]
        env = dict(os.environ, FOLIO_URL="http://127.0.0.1:%d" % STACK.port, FOLIO_KEY=key, FOLIO_TOKEN=token,
                   FOLIO_PAGES_PORT=str(PAGES_PORT), FOLIO_CHROMIUM=chromium(),
                   FOLIO_ARTIFACTS=os.path.abspath(os.path.join(stack.BUILD, "artifacts")))
        pattern = os.environ.get("FOLIO_BROWSER_TEST")  # only the cases whose name matches this regular expression
        args = ["--test-name-pattern=" + pattern] if pattern else []
        r = subprocess.run(["node", "--test", *args, "browser.e2e.js"], cwd=here, env=env,
                           capture_output=True, text=True, timeout=1200)
        print(r.stdout[-6000:])
        self.assertEqual(r.returncode, 0, r.stdout[-12000:] + r.stderr[-4000:] + "\n" + STACK.log_tails())


if __name__ == "__main__":
    unittest.main(argv=[__file__])
