#!/usr/bin/env python3
"""The workloads of issue 49's item 2 against the real nginx and folio-fcgi (tests/e2e/stack.py), with
folio-fcgi's anonymous memory (RssAnon in /proc/PID/status: the heap, not the database's mapped file
pages) sampled every 10 ms throughout:

  1. one tenant replaces a large XML value (ATTRS attributes, each given a new value) REPLACES times;
     every change stays in the record's history, so its decoded document outgrows the cache;
  2. a text record is given a long history (HISTORY_MB of inserted text: values of 1 MB added and
     removed again), then pulled 4 times at once from the empty version, twice.

The defaults are the issue's (--cache-mb 256, 60,000 attributes replaced 300 times, 4 pulls of a 423 MB
history) scaled to a quarter of the cache and run in about two minutes: the XML record outgrows the cache
(its document reaches about 80 MB; each update then decodes it from the database) and the text record's
document (about 4 bytes per character inserted) fits in a quarter of it.

It prints the figures and checks the bound docs/OPERATIONS.md ("Memory") states: folio_doc_cache_bytes
never above --cache-mb; the pulls add at most 4 MB to RssAnon whatever the history's size; and after the
XML workload RssAnon is at most its start + --cache-mb + 64 MB (a record too large for the cache is freed
after each request). While a request uses a record too large to keep, RssAnon holds that record's decoded
document besides (printed as the XML phase's peak). Exit status 1 when the bound is broken.

  bench/memory.py BUILD_DIR SOURCE_DIR [--cache-mb 64] [--attrs 15000] [--replaces 75] [--history-mb 3]
                  [--fcgi PATH]   # another folio-fcgi binary (e.g. an older build), same workload

On demand (not in scripts/test).
"""
import argparse
import base64
import concurrent.futures
import json
import os
import re
import sys
import threading
import time

args = argparse.ArgumentParser()
args.add_argument("build")
args.add_argument("source")
args.add_argument("--cache-mb", type=int, default=64)
args.add_argument("--attrs", type=int, default=15000)
args.add_argument("--replaces", type=int, default=75)
args.add_argument("--history-mb", type=int, default=3)
args.add_argument("--fcgi")
opts = args.parse_args()
sys.argv = [sys.argv[0], os.path.abspath(opts.build), os.path.abspath(opts.source)]
sys.path.insert(0, os.path.join(opts.source, "tests", "e2e"))
import stack  # noqa: E402
from stack import STACK, call  # noqa: E402

if opts.fcgi:
    stack.FCGI = os.path.abspath(opts.fcgi)
STACK.fcgi_args = ["--cache-mb", str(opts.cache_mb)]


def rss_anon_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(line for line in f if line.startswith("RssAnon:")).split()[1])


def cache_bytes():
    status, body = call("/metrics", method="GET", who=None, raw=True)
    m = re.search(rb"^folio_doc_cache_bytes (\d+)", body, re.M)
    return int(m.group(1)) if m else -1


class Sampler:
    """The peak RssAnon (KiB) and folio_doc_cache_bytes while running, per phase."""

    def __init__(self, pid):
        self.pid, self.peak, self.cache_peak, self.stop = pid, 0, 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        last_metrics = 0
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_anon_kb(self.pid))
            if time.time() - last_metrics > 0.25:
                self.cache_peak, last_metrics = max(self.cache_peak, cache_bytes()), time.time()
            time.sleep(0.01)

    def phase(self):
        """The peaks since the last call, then starts again."""
        peak, cache = max(self.peak, rss_anon_kb(self.pid)), max(self.cache_peak, cache_bytes())
        self.peak, self.cache_peak = 0, 0
        return peak, cache


def ok(res):
    status, body = res
    if status != 200:
        raise RuntimeError("%d %s" % (status, str(body)[:300]))
    return body


def main():
    stack.setUpModule()
    try:
        pid = STACK.fcgi.pid
        start = rss_anon_kb(pid)
        sampler = Sampler(pid)
        t0 = time.time()
        # 1. A large XML value replaced again and again.
        ids = {"organizationId": "org", "documentId": "xml", "editorId": "x"}

        def xml(round_):
            return "<p" + "".join(' a%d="%d"' % (i, round_) for i in range(opts.attrs)) + "/>"

        ok(call("/v2/crdt/add", dict(ids, type="xml", data=xml(0))))
        for r in range(1, opts.replaces + 1):
            ok(call("/v2/crdt/update", dict(ids, data=xml(r))))
        ok(call("/v2/crdt/get", ids))
        xml_peak, xml_cache = sampler.phase()
        xml_rest = rss_anon_kb(pid)
        t1 = time.time()
        # 2. A long text history, pulled 4 times at once from the empty version.
        tids = {"organizationId": "org", "documentId": "text", "editorId": "t"}
        ok(call("/v2/crdt/add", dict(tids, type="text", data="")))
        piece = 1_000_000
        for i in range(max(1, opts.history_mb * 1_000_000 // piece)):
            ok(call("/v2/crdt/update", dict(tids, data=(("%d-" % i) + "abcdefghij" * 24)[:242] * (piece // 242))))
            ok(call("/v2/crdt/update", dict(tids, data="")))
        first = ok(call("/v2/crdt/sync", dict(tids, version="AA==")))
        history = len(base64.b64decode(first["result"]["data"]["update"]))
        sampler.phase()
        before_pulls = rss_anon_kb(pid)
        for _ in range(2):
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                pulls = [pool.submit(call, "/v2/crdt/sync", dict(tids, version="AA=="), raw=True) for _ in range(4)]
                for p in pulls:
                    status, body = p.result()
                    if status != 200 or len(body) < history:
                        raise RuntimeError("pull answered %d, %d bytes" % (status, len(body)))
        pull_peak, pull_cache = sampler.phase()
        t2 = time.time()
        sampler.stop.set()
        mb = 1 << 20
        print("folio-fcgi %s, --cache-mb %d" % (stack.FCGI, opts.cache_mb))
        print("RssAnon at start: %.1f MB" % (start * 1024 / mb))
        print("1. xml, %d attributes replaced %d times (%.1f s): peak RssAnon %.1f MB, after %.1f MB; peak folio_doc_cache_bytes %.1f MB"
              % (opts.attrs, opts.replaces, t1 - t0, xml_peak * 1024 / mb, xml_rest * 1024 / mb, xml_cache / mb))
        print("2. text history of %.1f MB, 2 x 4 pulls at once from the empty version (%.1f s): RssAnon before %.1f MB, peak %.1f MB "
              "(+%.1f MB); peak folio_doc_cache_bytes %.1f MB"
              % (history / mb, t2 - t1, before_pulls * 1024 / mb, pull_peak * 1024 / mb, (pull_peak - before_pulls) * 1024 / mb, pull_cache / mb))
        broken = []
        if max(xml_cache, pull_cache) > opts.cache_mb * mb:
            broken.append("folio_doc_cache_bytes above --cache-mb")
        # A request's working memory beyond the cache: the record's decoded document; the pulls' must not
        # grow with the history (four answers of 4/3 x history were in flight).
        if (pull_peak - before_pulls) * 1024 > 4 * mb:
            broken.append("4 pulls grew RssAnon by more than 4 MB")
        if (xml_rest - start) * 1024 > opts.cache_mb * mb + 64 * mb:
            broken.append("RssAnon at rest after the xml workload above the start + --cache-mb + 64 MB")
        print("bound: " + ("held" if not broken else "BROKEN: " + "; ".join(broken)))
        return 1 if broken else 0
    finally:
        stack.tearDownModule()


if __name__ == "__main__":
    sys.exit(main())
