#!/usr/bin/env python3
"""End-to-end tests of the service as a whole and of CRDT records: the real nginx in front of the real
folio-fcgi on loopback (stack.py), spoken to over HTTP. Comment annotations: annotations_e2e.py.

Run by ctest (tests/CMakeLists.txt) as:  service_e2e.py BUILD_DIR SOURCE_DIR
"""
import base64
import concurrent.futures
import http.client
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import struct
import threading
import time
import unittest

import stack
from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)


def rec(editor, type_, data, doc="doc", org="org", **extra):
    d = {"organizationId": org, "documentId": doc, "editorId": editor, "type": type_, "data": data}
    d.update(extra)
    return d


def without(d, key):
    """`d` without `key` (a request missing one field)."""
    return {k: v for k, v in d.items() if k != key}


def get(editor=None, doc="doc", org="org", who="a"):
    d = {"organizationId": org, "documentId": doc}
    if editor is not None:
        d["editorId"] = editor
    return call("/v2/crdt/get", d, who=who)


class Crdt(unittest.TestCase):
    def test_every_type_round_trips(self):
        values = {
            "text": "Grüße, 世界 😀 — \u00a0tabs\tand\nnewlines",
            "map": {"title": "Notes", "nested": {"z": [1, 2.5, {"deep": None}], "a": True}, "n": -12, "": "empty key"},
            "array": [{"id": 1, "tags": ["x"]}, {"id": 2, "nested": {"k": "v"}}, {}],
            "xml": '<p class="lead">Tom &amp; Jerry<br/></p>tail<w:r xmlns:w="urn:x">é &lt;</w:r>',
        }
        for t, v in values.items():
            ok(self, call("/v2/crdt/add", rec("rt-" + t, t, v, doc="rt")), "CRDT data added successfully.")
        records = ok(self, get(doc="rt"), "CRDT data retrieved successfully.")
        self.assertEqual([r["id"] for r in records], ["rt-array", "rt-map", "rt-text", "rt-xml"])  # ordered by editorId
        by_id = {r["id"]: r for r in records}
        for t, v in values.items():
            r = by_id["rt-" + t]
            self.assertEqual(r["type"], t)
            self.assertEqual(r["contentKey"], "content")
            self.assertEqual(r["lastUpdatedBy"], "subject-a")
            self.assertIsNone(r["sessionId"])
            self.assertRegex(r["lastUpdate"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            if t == "xml":
                self.assertEqual(r["data"], '<p class="lead">Tom &amp; Jerry<br/></p>tail<w:r xmlns:w="urn:x">é &lt;</w:r>')
            else:
                self.assertEqual(r["data"], v)

    def test_update_replaces_through_crdt_ops(self):
        ok(self, call("/v2/crdt/add", rec("u", "text", "Hello world", doc="upd")), "CRDT data added successfully.")
        ok(self, call("/v2/crdt/update", rec("u", "text", "Hello, brave world", doc="upd", userId="u-7", sessionId="s-1")),
           "CRDT data updated successfully.")
        r = ok(self, get("u", doc="upd"), "CRDT data retrieved successfully.")
        self.assertEqual(len(r), 1)
        self.assertEqual(r[0]["data"], "Hello, brave world")
        self.assertEqual(r[0]["lastUpdatedBy"], "u-7")
        self.assertEqual(r[0]["sessionId"], "s-1")
        # Only the difference is stored: one log row for the change.
        self.assertEqual(STACK.scalar("SELECT count(*) FROM crdt_log WHERE doc='upd' AND editor='u'"), 1)
        # An unchanged value writes no op, only the metadata.
        ok(self, call("/v2/crdt/update", rec("u", "text", "Hello, brave world", doc="upd")), "CRDT data updated successfully.")
        self.assertEqual(STACK.scalar("SELECT count(*) FROM crdt_log WHERE doc='upd' AND editor='u'"), 1)
        self.assertEqual(get("u", doc="upd")[1]["result"]["data"][0]["lastUpdatedBy"], "subject-a")

    def test_update_of_each_type(self):
        ok(self, call("/v2/crdt/add", rec("m", "map", {"a": 1, "b": {"x": 1}}, doc="upd2")), "CRDT data added successfully.")
        ok(self, call("/v2/crdt/update", rec("m", "map", {"b": {"x": 2}, "c": [1]}, doc="upd2")), "CRDT data updated successfully.")
        self.assertEqual(get("m", doc="upd2")[1]["result"]["data"][0]["data"], {"b": {"x": 2}, "c": [1]})
        ok(self, call("/v2/crdt/add", rec("a", "array", [{"i": 1}, {"i": 2}], doc="upd2")), "CRDT data added successfully.")
        ok(self, call("/v2/crdt/update", rec("a", "array", [{"i": 2}, {"i": 3}], doc="upd2")), "CRDT data updated successfully.")
        self.assertEqual(get("a", doc="upd2")[1]["result"]["data"][0]["data"], [{"i": 2}, {"i": 3}])
        ok(self, call("/v2/crdt/add", rec("x", "xml", "<ul><li>1</li></ul>", doc="upd2", contentKey="default")), "CRDT data added successfully.")
        ok(self, call("/v2/crdt/update", rec("x", "xml", '<ul><li a="b">1</li><li>2</li></ul>', doc="upd2", contentKey="default")),
           "CRDT data updated successfully.")
        r = get("x", doc="upd2")[1]["result"]["data"][0]
        self.assertEqual(r["data"], '<ul><li a="b">1</li><li>2</li></ul>')
        self.assertEqual(r["contentKey"], "default")

    def test_add_update_errors(self):
        ok(self, call("/v2/crdt/add", rec("e", "text", "x", doc="err")), "CRDT data added successfully.")
        err(self, call("/v2/crdt/add", rec("e", "text", "y", doc="err")), 409, "ALREADY_EXISTS", "CRDT data already exists for this editor ID.")
        err(self, call("/v2/crdt/update", rec("missing", "text", "y", doc="err")), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
        err(self, call("/v2/crdt/add", without(rec("e", "text", "y", doc="err"), "organizationId")), 400, "INVALID_ARGUMENT", "Organization ID is required")
        err(self, call("/v2/crdt/update", without(rec("e", "text", "y", doc="err"), "documentId")), 400, "INVALID_ARGUMENT", "Document ID is required")
        d = rec("", "text", "y", doc="err")
        err(self, call("/v2/crdt/add", d), 400, "INVALID_ARGUMENT", "Editor ID is required.")
        err(self, call("/v2/crdt/add", rec("n", "text", 5, doc="err")), 400, "INVALID_ARGUMENT", "Data must be a string for type text.")
        err(self, call("/v2/crdt/update", rec("e", "text", {"a": 1}, doc="err")), 400, "INVALID_ARGUMENT", "Data must be a string for type text.")
        err(self, call("/v2/crdt/add", rec("n", "map", [1], doc="err")), 400, "INVALID_ARGUMENT", "Data must be an object for type map.")
        err(self, call("/v2/crdt/add", rec("n", "array", [1], doc="err")), 400, "INVALID_ARGUMENT", "Data must be an array of objects for type array.")
        err(self, call("/v2/crdt/add", rec("n", "xml", 1, doc="err")), 400, "INVALID_ARGUMENT", "Data must be a string of XML markup for type xml.")
        err(self, call("/v2/crdt/add", rec("n", "xml", "<a><b></a>", doc="err")), 400, "INVALID_ARGUMENT",
            "Data must be a string of XML markup for type xml. Not well-formed: start-end tags mismatch at byte 8.")
        err(self, call("/v2/crdt/add", rec("n", "xml", "<a x='1' x='2'/>", doc="err")), 400, "INVALID_ARGUMENT",
            "Data must be a string of XML markup for type xml. Attribute \"x\" appears twice at byte 9.")
        err(self, call("/v2/crdt/add", rec("n", "json", "x", doc="err")), 400, "INVALID_ARGUMENT", "Type must be one of text, map, array, xml.")
        err(self, call("/v2/crdt/add", without(rec("n", "text", "x", doc="err"), "type")), 400, "INVALID_ARGUMENT", "Type is required.")
        err(self, call("/v2/crdt/add", without(rec("n", "text", "x", doc="err"), "data")), 400, "INVALID_ARGUMENT", "Data is required.")
        # Type and contentKey are fixed by add.
        err(self, call("/v2/crdt/update", rec("e", "map", {}, doc="err")), 400, "INVALID_ARGUMENT", "Type map does not match the record's type text.")
        err(self, call("/v2/crdt/update", rec("e", "text", "z", doc="err", contentKey="default")), 400, "INVALID_ARGUMENT",
            "contentKey \"default\" does not match the record's contentKey \"content\".")
        self.assertEqual(get("e", doc="err")[1]["result"]["data"][0]["data"], "x")

    def test_get_and_delete(self):
        self.assertEqual(ok(self, get("nothing", doc="none"), "CRDT data retrieved successfully."), [])
        self.assertEqual(ok(self, get(doc="none"), "CRDT data retrieved successfully."), [])
        err(self, call("/v2/crdt/get", {"documentId": "d"}), 400, "INVALID_ARGUMENT", "Organization ID is required")
        ok(self, call("/v2/crdt/add", rec("z", "text", "bye", doc="del")), "CRDT data added successfully.")
        ok(self, call("/v2/crdt/delete", {"organizationId": "org", "documentId": "del", "editorId": "z"}), "CRDT data deleted successfully.")
        err(self, call("/v2/crdt/delete", {"organizationId": "org", "documentId": "del", "editorId": "z"}), 404, "NOT_FOUND")
        self.assertEqual(get("z", doc="del")[1]["result"]["data"], [])
        ok(self, call("/v2/crdt/add", rec("z", "map", {"again": 1}, doc="del")), "CRDT data added successfully.")

    def test_a_document_of_many_large_records_is_read_whole(self):
        # Larger than the responder's streaming chunk (64 KiB): sent as it is produced, chunked by nginx.
        values = {"e%02d" % i: ("%02d" % i) * 60000 for i in range(20)}
        for editor, text in values.items():
            ok(self, call("/v2/crdt/add", rec(editor, "text", text, doc="large-records")), "CRDT data added successfully.")
        records = ok(self, get(doc="large-records"), "CRDT data retrieved successfully.")
        self.assertEqual([(r["id"], r["data"]) for r in records], sorted(values.items()))
        # Again: each value as the first get rendered it, sent as it is (not through the responder's buffer).
        again = ok(self, get(doc="large-records"), "CRDT data retrieved successfully.")
        self.assertEqual(again, records)

    def test_many_updates_compact_and_stay_correct(self):
        ok(self, call("/v2/crdt/add", rec("c", "text", "", doc="compact")), "CRDT data added successfully.")
        text = ""
        for i in range(150):
            text += str(i % 10)
            ok(self, call("/v2/crdt/update", rec("c", "text", text, doc="compact")), "CRDT data updated successfully.")
        self.assertEqual(get("c", doc="compact")[1]["result"]["data"][0]["data"], text)
        # Compaction runs after the answers (off the request path): the log is short soon after.
        deadline = time.time() + 10
        while STACK.scalar("SELECT count(*) FROM crdt_log WHERE doc='compact'") >= 64 and time.time() < deadline:
            time.sleep(0.05)
        self.assertLess(STACK.scalar("SELECT count(*) FROM crdt_log WHERE doc='compact'"), 64)
        self.assertEqual(STACK.scalar("SELECT log_len FROM crdt_records WHERE doc='compact'"),
                         STACK.scalar("SELECT count(*) FROM crdt_log WHERE doc='compact'"))
        self.assertEqual(get("c", doc="compact")[1]["result"]["data"][0]["data"], text)


def anon_rss_kb(pid):
    """Resident anonymous memory (the heap; the database file's mapped pages are not counted)."""
    with open("/proc/%d/status" % pid) as f:
        return int(next(line for line in f if line.startswith("RssAnon:")).split()[1])


def sanitized():
    """Whether the build under test has AddressSanitizer (FOLIO_SANITIZE in its CMake cache)."""
    with open(os.path.join(stack.BUILD, "CMakeCache.txt")) as f:
        return any(line.startswith("FOLIO_SANITIZE:BOOL=ON") for line in f)


class LargeSyncPulls(unittest.TestCase):
    """A sync's answer is streamed as its update is encoded: a pull of a long history from the empty
    version holds a piece of it, not the whole (nor its base64, nor the body), and its bytes are those of
    the answer built whole."""

    def test_pulls_of_a_long_history_are_streamed_in_bounded_memory(self):
        ids = {"organizationId": "org", "documentId": "long-history", "editorId": "h"}
        ok(self, call("/v2/crdt/add", rec("h", "text", "", doc="long-history")), "CRDT data added successfully.")
        for i in range(8):  # 8 values of 1.9 MB inserted, the first 7 removed again: a 15 MB history
            value = ("%d-" % i + "abcdefghijklmnopqrstuvwxyz" * 9) * 8000
            ok(self, call("/v2/crdt/update", dict(ids, data=value)), "CRDT data updated successfully.")
            if i < 7:
                ok(self, call("/v2/crdt/update", dict(ids, data="")), "CRDT data updated successfully.")

        def pull():
            conn = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=60)
            key, token = CREDS["a"]
            conn.request("POST", "/v2/crdt/sync", body=json.dumps({"data": dict(ids, version="AA==")}),
                         headers={"Content-Type": "application/json", "x-folio-api-key": key, "x-folio-auth-token": token})
            r = conn.getresponse()
            answer = (r.status, r.getheader("Content-Length"), r.getheader("Transfer-Encoding"), r.read())
            conn.close()
            return answer

        first = pull()  # the record is in the cache now
        self.assertEqual(first[0], 200, first[3][:300])
        body = json.loads(first[3])
        self.assertEqual(body["result"]["data"]["update"], body["result"]["data"]["update"].strip())
        update = base64.b64decode(body["result"]["data"]["update"])
        self.assertEqual(update[:5], b"Fo\x01B\x01")  # an op batch of text (docs/FORMAT.md)
        self.assertGreater(len(update), 15_000_000)
        pid = STACK.fcgi.pid
        before = peak = anon_rss_kb(pid)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            pulls = [pool.submit(pull) for _ in range(4)]
            while not all(p.done() for p in pulls):
                peak = max(peak, anon_rss_kb(pid))
            answers = [p.result() for p in pulls]
        for status, length, encoding, answer in answers:
            self.assertEqual(status, 200)
            self.assertIsNone(length)  # streamed: nginx sends it chunked
            self.assertEqual(encoding, "chunked")
            self.assertEqual(answer, first[3])  # the same bytes, pull after pull
        grown = (peak - before) * 1024
        # four answers of 4/3 x 15 MB were sent at once; the responder grew by far less than one
        # (not measurable under AddressSanitizer: its quarantine holds on to freed memory by design; on
        # N nodes a pull may reach a node that has not cached the record and decodes it)
        if not sanitized() and not STACK.cluster:
            print("peak RssAnon grew by %d KiB for four pulls of a %d-byte history" % (grown // 1024, len(update)), file=sys.stderr)
            self.assertLess(grown, len(update) // 4, "responder's peak grew by %d bytes for four pulls of a %d-byte history" % (grown, len(update)))


class Auth(unittest.TestCase):
    def test_credentials(self):
        msg = "Missing or invalid API key or auth token."
        for who in ("a_expired", "a_revoked", "a_wrong_secret", "a_key_b_token"):
            err(self, call("/v2/crdt/get", {"organizationId": "o", "documentId": "d"}, who=who), 401, "UNAUTHENTICATED", msg)
        err(self, call("/v2/crdt/get", {"organizationId": "o", "documentId": "d"}, who=None), 401, "UNAUTHENTICATED", msg)
        err(self, call("/v2/crdt/get", who=None, body="not json at all"), 401, "UNAUTHENTICATED", msg)  # before the body
        key, token = CREDS["a"]
        err(self, call("/v2/crdt/get", {}, who=None, headers={"x-folio-api-key": key}), 401, "UNAUTHENTICATED", msg)
        err(self, call("/v2/crdt/get", {}, who=None, headers={"x-folio-auth-token": token}), 401, "UNAUTHENTICATED", msg)

    def test_read_only_token(self):
        ok(self, call("/v2/crdt/add", rec("ro", "text", "x", doc="ro")), "CRDT data added successfully.")
        self.assertEqual(get("ro", doc="ro", who="a_ro")[1]["result"]["data"][0]["data"], "x")
        for path in ("/v2/crdt/add", "/v2/crdt/update", "/v2/crdt/delete"):
            err(self, call(path, rec("ro", "text", "y", doc="ro"), who="a_ro"), 403, "PERMISSION_DENIED", "This token is read-only.")
        self.assertEqual(get("ro", doc="ro")[1]["result"]["data"][0]["data"], "x")

    def test_tenants_are_isolated(self):
        ok(self, call("/v2/crdt/add", rec("shared", "text", "A's", doc="iso")), "CRDT data added successfully.")
        self.assertEqual(ok(self, get(doc="iso", who="b"), "CRDT data retrieved successfully."), [])
        err(self, call("/v2/crdt/update", rec("shared", "text", "B's", doc="iso"), who="b"), 404, "NOT_FOUND")
        ok(self, call("/v2/crdt/add", rec("shared", "text", "B's", doc="iso"), who="b"), "CRDT data added successfully.")
        self.assertEqual(get("shared", doc="iso")[1]["result"]["data"][0]["data"], "A's")
        self.assertEqual(get("shared", doc="iso", who="b")[1]["result"]["data"][0]["data"], "B's")


class BadInput(unittest.TestCase):
    def assert_alive(self):
        ok(self, get("alive", doc="alive"), "CRDT data retrieved successfully.")

    def test_envelope_and_protocol(self):
        err(self, call("/v2/crdt/get", method="GET", body=""), 400, "INVALID_ARGUMENT")
        err(self, call("/v2/crdt/get", method="PUT"), 400, "INVALID_ARGUMENT", "Method PUT is not allowed; every endpoint takes POST.")
        err(self, call("/v2/crdt/get", content_type="text/plain"), 400, "INVALID_ARGUMENT", "Content-Type must be application/json.")
        err(self, call("/v2/crdt/get", content_type=None), 400, "INVALID_ARGUMENT", "Content-Type must be application/json.")
        self.assertEqual(call("/v2/crdt/get", {"organizationId": "o", "documentId": "d"}, content_type="application/json; charset=utf-8")[0], 200)
        err(self, call("/v2/crdt/get", body="{not json"), 400, "INVALID_ARGUMENT",
            "Body is not valid JSON: missing a name for object member (at byte 1).")
        err(self, call("/v2/crdt/get", body='{"data":{}'), 400, "INVALID_ARGUMENT",
            "Body is not valid JSON: missing a comma or '}' after an object member (at byte 10).")
        err(self, call("/v2/crdt/get", body='{"data":{}}\0'), 400, "INVALID_ARGUMENT", "Body is not valid JSON: NUL byte (at byte 11).")
        err(self, call("/v2/crdt/get", body="[1]"), 400, "INVALID_ARGUMENT", "Body must be a JSON object with a \"data\" object.")
        err(self, call("/v2/crdt/get", body="{}"), 400, "INVALID_ARGUMENT", "Body must have a \"data\" object.")
        err(self, call("/v2/crdt/get", body='{"data":[]}'), 400, "INVALID_ARGUMENT", "\"data\" must be an object.")
        err(self, call("/v2/crdt/get", body='{"data":{},"extra":1}'), 400, "INVALID_ARGUMENT",
            "Unexpected top-level key \"extra\"; the body holds only \"data\".")
        err(self, call("/v2/crdt/get", body='{"data":{"organizationId":"a","organizationId":"b"}}'), 400, "INVALID_ARGUMENT",
            "Duplicate key \"organizationId\" in a JSON object.")
        err(self, call("/v9/nothing"), 404, "NOT_FOUND")
        self.assert_alive()

    def test_hostile_json(self):
        deep = "[" * 100000 + "]" * 100000
        m = err(self, call("/v2/crdt/get", body='{"data":{"x":' + deep + '}}'), 400, "INVALID_ARGUMENT")
        self.assertIn("deeper than 64", m)
        err(self, call("/v2/crdt/get", body=b'{"data":{"organizationId":"\xff\xfe"}}'), 400, "INVALID_ARGUMENT",
            "organizationId is not valid Unicode: it holds bytes that are not UTF-8 (the string ends at byte 29).")
        err(self, call("/v2/crdt/get", body='{"data":{"n":1e999}}'), 400, "INVALID_ARGUMENT")
        err(self, call("/v2/crdt/get", body='{"data":{"n":NaN}}'), 400, "INVALID_ARGUMENT")
        err(self, call("/v2/crdt/add", rec("a\u0000b", "text", "x", doc="bad")), 400, "INVALID_ARGUMENT", "editorId must not contain control characters.")
        err(self, call("/v2/crdt/add", rec("a\nb", "text", "x", doc="bad")), 400, "INVALID_ARGUMENT", "editorId must not contain control characters.")
        err(self, call("/v2/crdt/add", rec("x" * 257, "text", "x", doc="bad")), 400, "INVALID_ARGUMENT", "editorId must be at most 256 bytes.")
        err(self, call("/v2/crdt/add", rec(5, "text", "x", doc="bad")), 400, "INVALID_ARGUMENT", "editorId must be a string.")
        err(self, call("/v2/crdt/add", rec("big", "map", {"n": 10 ** 400}, doc="bad")), 400, "INVALID_ARGUMENT")
        ok(self, call("/v2/crdt/add", rec("big", "map", {"n": 2 ** 70}, doc="bad")), "CRDT data added successfully.")
        self.assertEqual(get(doc="bad")[1]["result"]["data"][0]["data"]["n"], float(2 ** 70))
        self.assert_alive()

    def test_numbers_read_back_as_the_double_javascript_parses(self):
        # Each number as sent and as read back, compared as JavaScript's JSON.parse reads them: the same
        # double (bit for bit: -0 stays -0), and an integer that fits 64 bits exactly as sent.
        texts = ["2.2250738585072011e-308", "123456789.123456789", "0.1", "1e-400", "-1e-400", "5e-324", "1.7976931348623157e308",
                 "9007199254740993", "-9223372036854775808", "18446744073709551615", "18446744073709551616", "-0", "1.0", "1E2"]
        body = '{"data":{"organizationId":"org","documentId":"num","editorId":"%s","type":"%s","data":%s}}'
        members = ",".join('"k%d":%s' % (i, t) for i, t in enumerate(texts))
        ok(self, call("/v2/crdt/add", body=body % ("m", "map", "{" + members + "}")), "CRDT data added successfully.")
        ok(self, call("/v2/crdt/add", body=body % ("a", "array", "[" + ",".join('{"v":%s}' % t for t in texts) + "]")), "CRDT data added successfully.")
        status, raw = call("/v2/crdt/get", {"organizationId": "org", "documentId": "num"}, raw=True)
        self.assertEqual(status, 200, raw)
        as_text = json.loads(raw, parse_int=str, parse_float=str)  # every number as the text it was written as
        by_id = {r["id"]: r["data"] for r in as_text["result"]["data"]}
        for i, sent in enumerate(texts):
            for got in (by_id["m"]["k%d" % i], by_id["a"][i]["v"]):
                self.assertEqual(struct.pack("<d", float(got)), struct.pack("<d", float(sent)), (sent, got))
                if re.fullmatch(r"-?[1-9][0-9]*", sent) and -2 ** 63 <= int(sent) < 2 ** 64:
                    self.assertEqual(got, sent)
        self.assertEqual(by_id["m"]["k0"], "2.225073858507201e-308")  # shortest form, as JavaScript prints it
        self.assertEqual(by_id["m"]["k1"], "123456789.12345679")
        # The same numbers sent again are the same values: the update stores no operation.
        status, before = call("/v2/crdt/sync", {"organizationId": "org", "documentId": "num", "editorId": "m", "version": "AA=="})
        ok(self, call("/v2/crdt/update", body=body.replace(',"type":"%s"', "") % ("m", "{" + members + "}")), "CRDT data updated successfully.")
        status, after = call("/v2/crdt/sync", {"organizationId": "org", "documentId": "num", "editorId": "m", "version": "AA=="})
        self.assertEqual(after["result"]["data"]["version"], before["result"]["data"]["version"])
        too_big = body % ("big", "map", '{"n":1.7976931348623159e308}')
        err(self, call("/v2/crdt/add", body=too_big), 400, "INVALID_ARGUMENT",
            "Body is not valid JSON: number too big to be stored in double (at byte %d)." % too_big.index("1.79"))

    def test_every_string_must_be_unicode_and_the_refusal_names_the_field(self):
        ids = '"organizationId":"org","documentId":"uni"'

        def end_of_string(body):  # the closing quote of the string that holds the first escape
            return body.index('"', body.index("\\u"))

        lone = "is not valid Unicode: it holds a lone surrogate \\u%s (the %s ends at byte %d)."
        bodies = {
            "map value": '{"data":{%s,"editorId":"m","type":"map","data":{"k":"a\\udc00b"}}}' % ids,
            "map key": '{"data":{%s,"editorId":"m","type":"map","data":{"a\\udc00b":1}}}' % ids,
            "editorId": '{"data":{%s,"editorId":"a\\udc00b","type":"text","data":"x"}}' % ids,
            "text": '{"data":{%s,"editorId":"t","type":"text","data":"a\\udc00b"}}' % ids,
            "xml": '{"data":{%s,"editorId":"x","type":"xml","data":"<p t=\\"\\udfff\\"/>"}}' % ids,
            "array": '{"data":{%s,"editorId":"l","type":"array","data":[{"v":1},{"v":["\\udc00"]}]}}' % ids,
            "comment": '{"data":{%s,"commentAnnotations":[{"from":{"userId":"u","name":"U","email":"u@e"},"commentData":[{"commentText":"a\\udc00"}]}]}}' % ids,
            "high": '{"data":{%s,"editorId":"h","type":"text","data":"a\\ud800b"}}' % ids,
        }
        cases = [
            ("/v2/crdt/add", bodies["map value"], "data.k " + lone % ("dc00", "string", end_of_string(bodies["map value"]))),
            ("/v2/crdt/add", bodies["map key"], "A key in data " + lone % ("dc00", "key", end_of_string(bodies["map key"]))),
            ("/v2/crdt/add", bodies["editorId"], "editorId " + lone % ("dc00", "string", end_of_string(bodies["editorId"]))),
            ("/v2/crdt/add", bodies["text"], "data " + lone % ("dc00", "string", end_of_string(bodies["text"]))),
            ("/v2/crdt/add", bodies["xml"], "data " + lone % ("dfff", "string", bodies["xml"].index('/>"') + 2)),
            ("/v2/crdt/add", bodies["array"], "data[1].v[0] " + lone % ("dc00", "string", end_of_string(bodies["array"]))),
            ("/v2/commentannotations/add", bodies["comment"],
             "commentAnnotations[0].commentData[0].commentText " + lone % ("dc00", "string", end_of_string(bodies["comment"]))),
            ("/v2/crdt/add", bodies["high"], "data is not valid Unicode: it holds a high surrogate escape (\\ud800-\\udbff) not followed by a low one "
             "(at byte %d)." % bodies["high"].index("\\ud800")),  # the escape
        ]
        for path, body, message in cases:
            err(self, call(path, body=body), 400, "INVALID_ARGUMENT", message)
        self.assertEqual(get(doc="uni")[1]["result"]["data"], [])
        self.assertEqual(call("/v1/commentannotations/get", {"organizationId": "org", "documentId": "uni"})[1]["result"]["data"], [])
        # A surrogate pair is one character, stored and returned as such.
        ok(self, call("/v2/crdt/add", body='{"data":{%s,"editorId":"ok","type":"text","data":"a\\ud83d\\ude00b"}}' % ids), "CRDT data added successfully.")
        self.assertEqual(get("ok", doc="uni")[1]["result"]["data"][0]["data"], "a\U0001F600b")
        self.assert_alive()

    def test_hostile_xml(self):
        laughs = '<!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><l>&b;</l>'
        external = '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
        for i, x in enumerate([laughs, external, "<a>" * 10000 + "</a>" * 10000, "<p>&nbsp;</p>", "<!-- c --><p/>"]):
            m = err(self, call("/v2/crdt/add", rec("x%d" % i, "xml", x, doc="hx")), 400, "INVALID_ARGUMENT")
            self.assertIn("at byte", m)
        self.assertEqual(get(doc="hx")[1]["result"]["data"], [])
        self.assert_alive()

    def test_body_limits(self):
        big = "x" * (RESPONDER_MAX_BODY + 1000)  # over the responder's limit, under nginx's
        err(self, call("/v2/crdt/add", rec("big", "text", big, doc="lim")), 413, "INVALID_ARGUMENT",
            "Request body is larger than the limit of %d bytes." % RESPONDER_MAX_BODY)
        err(self, call("/v2/crdt/add", rec("big", "text", "x" * (5 * 1024 * 1024), doc="lim")), 413, "INVALID_ARGUMENT",
            "Request body is larger than the limit.")  # nginx's own 413, in the JSON shape
        self.assertEqual(get(doc="lim")[1]["result"]["data"], [])
        self.assert_alive()


class Concurrency(unittest.TestCase):
    def test_parallel_updates_of_one_record(self):
        ok(self, call("/v2/crdt/add", rec("hot", "map", {}, doc="conc")), "CRDT data added successfully.")
        lock = threading.Lock()
        applied = []

        def update(i):
            status, body = call("/v2/crdt/update", rec("hot", "map", {"k": i, "w%d" % (i % 4): i}, doc="conc"))
            with lock:
                applied.append((status, i))
            return status
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(update, range(200)))
        self.assertEqual(set(statuses), {200})
        final = get("hot", doc="conc")[1]["result"]["data"][0]["data"]
        # The final value is one whole request's value (the last applied), never a mix.
        self.assertIn(final["k"], range(200))
        self.assertEqual(final, {"k": final["k"], "w%d" % (final["k"] % 4): final["k"]})

    def test_parallel_updates_of_distinct_records(self):
        for i in range(20):
            ok(self, call("/v2/crdt/add", rec("r%d" % i, "text", "", doc="many")), "CRDT data added successfully.")

        def work(i):
            text = ""
            for j in range(10):
                text += chr(ord("a") + j)
                status, body = call("/v2/crdt/update", rec("r%d" % i, "text", text, doc="many"))
                if status != 200:
                    return body
            return None
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            self.assertEqual([r for r in pool.map(work, range(20)) if r], [])
        records = get(doc="many")[1]["result"]["data"]
        self.assertEqual([r["data"] for r in records], ["abcdefghij"] * 20)


class Durability(unittest.TestCase):
    def test_sigkill_loses_no_acknowledged_update(self):
        ok(self, call("/v2/crdt/add", rec("dur", "text", "", doc="dur")), "CRDT data added successfully.")
        acked = []
        stop = threading.Event()

        def writer():
            text = ""
            while not stop.is_set():
                text += "x"
                try:
                    status, _ = call("/v2/crdt/update", rec("dur", "text", text, doc="dur"))
                except OSError:
                    continue
                if status == 200:
                    acked.append(text)
        t = threading.Thread(target=writer)
        t.start()
        time.sleep(1.0)
        STACK.fcgi.send_signal(signal.SIGKILL)
        STACK.fcgi.wait()
        stop.set()
        t.join()
        STACK.start_fcgi()
        self.assertTrue(acked)
        value = get("dur", doc="dur")[1]["result"]["data"][0]["data"]
        self.assertGreaterEqual(len(value), len(acked[-1]))  # every acknowledged update is there
        for r in get(doc="rt")[1]["result"]["data"] + get(doc="upd2")[1]["result"]["data"]:
            self.assertIn("data", r)  # every record still decodes


class Deadlines(unittest.TestCase):
    def test_a_write_past_its_deadline_commits_nothing(self):
        # The responder's budget runs from when nginx handed the request over (FOLIO_REQUEST_START);
        # here 2 s, while another process holds the database's write lock until the test releases it
        # (or 30 s pass). The update gives up at its deadline with nothing stored (it must not wait, and
        # commit, once the lock is free). The lock is taken before the responder starts: its workers
        # open their connections with the lock held and must not wait for it (in a write transaction
        # of the schema check, which would queue the request until the lock is released).
        ok(self, call("/v2/crdt/add", rec("late", "text", "before", doc="deadline")), "CRDT data added successfully.")
        STACK.fcgi.terminate()
        STACK.fcgi.wait(20)
        STACK.fcgi_args = ["--request-timeout", "2"]
        held = {"undo": None, "done": False}  # undo ends the holder's lock; set as soon as there is one
        guard = threading.Lock()
        released = threading.Event()  # set before the lock is let go: an answer seen with it clear came while held

        def release():  # once, from the test or the fallback timer, whichever comes first
            with guard:
                if held["done"] or held["undo"] is None:
                    return
                released.set()
                held["undo"]()
                held["done"] = True
        fallback = threading.Timer(30.0, release)
        try:
            if STACK.postgresql:  # another session holds the record's row lock, which the update's UPDATE waits for
                holder = subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", STACK.db, "-c",
                                           "BEGIN; SELECT 1 FROM crdt_records WHERE doc='deadline' FOR UPDATE; SELECT pg_sleep(60); ROLLBACK"],
                                          stdout=subprocess.DEVNULL)
                holding = ("FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(60)%' "
                           "AND pid <> pg_backend_pid()")

                def undo():
                    STACK.scalar("SELECT count(pg_terminate_backend(pid)) " + holding)
                    try:
                        holder.wait(20)
                    except subprocess.TimeoutExpired:
                        holder.kill()
                        holder.wait()
                held["undo"] = undo
                give_up = time.monotonic() + 30
                while not STACK.scalar("SELECT count(*) " + holding):  # until the holder sleeps with the lock taken
                    if holder.poll() is not None or time.monotonic() > give_up:
                        self.fail("the psql session that holds the row lock did not start (exit status %s)" % holder.poll())
                    time.sleep(0.05)
            else:
                holder = sqlite3.connect(STACK.db, timeout=30, isolation_level=None, check_same_thread=False)
                holder.execute("BEGIN IMMEDIATE")

                def undo():
                    holder.execute("ROLLBACK")
                    holder.close()
                held["undo"] = undo
            fallback.start()
            STACK.start_fcgi()
            err(self, call("/v2/crdt/update", rec("late", "text", "after", doc="deadline")), 503, "UNAVAILABLE",
                "The request did not finish in time; nothing was changed. Retry it.")
            self.assertFalse(released.is_set(), "answered at its deadline, while the lock was still held")
            release()
            self.assertEqual(get("late", doc="deadline")[1]["result"]["data"][0]["data"], "before")
            ok(self, call("/v2/crdt/update", rec("late", "text", "after", doc="deadline")), "CRDT data updated successfully.")
        finally:
            fallback.cancel()
            try:
                release()
            finally:
                STACK.fcgi.terminate()
                STACK.fcgi.wait(20)
                STACK.fcgi_args = []
                STACK.start_fcgi()


class Lifecycle(unittest.TestCase):
    def test_sigterm_finishes_in_flight_work_and_nginx_answers_json_while_down(self):
        big = rec("slow", "text", "y" * (2 * 1024 * 1024), doc="life")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(call, "/v2/crdt/add", big)
            time.sleep(0.05)  # the 2 MiB add is under way
            STACK.fcgi.send_signal(signal.SIGTERM)
            self.assertEqual(STACK.fcgi.wait(20), 0)
            status, body = pending.result()
        self.assertIn(status, (200, 503), body)  # finished, or never started: never cut off half-way
        self.assertFalse(os.path.exists(os.path.join(STACK.dir, "run", "folio.sock")))
        err(self, get("slow", doc="life"), 503, "UNAVAILABLE", "The service is unavailable; retry later.")  # nginx, JSON
        STACK.start_fcgi()
        records = get("slow", doc="life")[1]["result"]["data"]
        self.assertEqual(len(records), 1 if status == 200 else 0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
