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
import sys
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


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
