"""The JavaScript client in a real browser: headless Chromium (Debian's package) driven by puppeteer-core
runs tests/e2e/browser/browser.e2e.js against the real stack (nginx serving /client/ and /demo/, Nchan,
folio-fcgi). The test pages come from a page server on another port, whose origin the stack allows
(CORS); the demo page's screenshot is saved as BUILD_DIR/artifacts/demo.png.
Needs the WebAssembly build (scripts/build-js), `npm ci` in tests/e2e/browser, and chromium;
scripts/test does all three and runs this after the client's own tests.

Run as:  browser_e2e.py BUILD_DIR SOURCE_DIR   (FOLIO_CHROMIUM names the browser binary, if not the
default; FOLIO_BROWSER_TEST=<regular expression> runs only the cases whose names match)
"""
import os
import shutil
import subprocess
import unittest

from stack import *  # noqa: F401,F403 (setUpModule/tearDownModule start and stop the stack)
import stack

PAGES_PORT = stack.free_port()
STACK.cors_origins = "http://127.0.0.1:%d" % PAGES_PORT


def chromium():
    """The browser: FOLIO_CHROMIUM, else Debian's chromium (headless by puppeteer's flag), else its headless shell."""
    for path in (os.environ.get("FOLIO_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-headless-shell")):
        if path:
            return path
    raise RuntimeError("no chromium: apt-get install chromium (scripts/test installs it)")


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
