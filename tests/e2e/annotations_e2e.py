#!/usr/bin/env python3
"""End-to-end tests of comment annotations: the write side (/v2/commentannotations/add|update|delete,
comments/add|update|delete), v1 get across every filter combination, the paged v2 get, and tenant
isolation of every endpoint — through the real nginx in front of the real folio-fcgi (stack.py).

Run by ctest (tests/CMakeLists.txt) as:  annotations_e2e.py BUILD_DIR SOURCE_DIR
"""
import concurrent.futures
import itertools
import os
import re
import sys
import unittest

import stack

from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ORG = "org"


def user(uid):
    return {"userId": uid, "name": "User " + uid, "email": uid + "@example.com"}


def ann(aid=None, uid="u1", location=None, created=None, comments=None, **extra):
    a = {"from": user(uid)}
    if aid is not None:
        a["annotationId"] = aid
    if location is not None:
        a["location"] = {"id": location}
    if created is not None:
        a["createdAt"] = created
    a["commentData"] = comments if comments is not None else [{"commentText": "hi", "commentHtml": "<p>hi</p>"}]
    a.update(extra)
    return a


def req(doc, **fields):
    d = {"organizationId": ORG, "documentId": doc}
    d.update(fields)
    return d


def add(doc, anns, who="a"):
    return call("/v2/commentannotations/add", req(doc, commentAnnotations=anns), who=who)


def added(test, doc, anns, who="a"):
    """Adds annotations that must all succeed; returns the result map."""
    status, body = add(doc, anns, who)
    test.assertEqual(status, 200, body)
    results = body["result"]["data"]
    test.assertTrue(all(r["success"] for r in results.values()), results)
    test.assertEqual(body["result"]["message"], "%d of %d annotations added." % (len(anns), len(anns)))
    return results


def v1(doc, who="a", **filters):
    status, body = call("/v1/commentannotations/get", req(doc, **filters), who=who)
    assert status == 200, body
    assert body["result"]["message"] == "Annotations fetched successfully.", body
    return body["result"]["data"]


def v2(doc, who="a", **fields):
    """(annotations, nextPageToken or None) of one page."""
    status, body = call("/v2/commentannotations/get", req(doc, **fields), who=who)
    assert status == 200, body
    assert body["result"]["message"] == "Annotations fetched successfully.", body
    return body["result"]["data"], body["result"].get("nextPageToken")


def ids(annotations):
    return [a["annotationId"] if a is not None else None for a in annotations]


class Add(unittest.TestCase):
    def test_written_annotation_reads_back_whole(self):
        results = added(self, "shape", [ann("s1", "u1", location="L1", color="#ff0000", context={"page": 3, "quote": "the text"},
                                            status={"id": "RESOLVED", "name": "Resolved", "color": "#00ff00", "type": "terminal"},
                                            comments=[{"commentId": 7, "commentText": "first", "commentHtml": "<b>first</b>",
                                                       "createdAt": "2025-01-20T10:30:00.000Z", "lastUpdated": "2025-01-20T10:31:00.000Z"},
                                                      {"commentText": "reply", "from": user("u2")},
                                                      {"commentHtml": "<script>alert(1)</script>", "type": "text"}])])
        self.assertEqual(results, {"s1": {"success": True, "annotationId": "s1", "commentIds": [7, 8, 9],
                                          "message": "Annotation added successfully."}})
        a = v1("shape")[0]
        self.assertRegex(a["createdAt"], TIMESTAMP)
        self.assertEqual(a["lastUpdated"], a["createdAt"])
        c = a["comments"]
        self.assertEqual(a, {"annotationId": "s1", "location": {"id": "L1"}, "from": user("u1"), "color": "#ff0000",
                             "status": {"id": "RESOLVED", "name": "Resolved", "color": "#00ff00", "type": "terminal"},
                             "context": {"page": 3, "quote": "the text"}, "createdAt": a["createdAt"], "lastUpdated": a["lastUpdated"],
                             "comments": [
                                 {"commentId": 7, "commentText": "first", "commentHtml": "<b>first</b>", "from": user("u1"),
                                  "createdAt": "2025-01-20T10:30:00.000Z", "lastUpdated": "2025-01-20T10:31:00.000Z", "type": "text"},
                                 {"commentId": 8, "commentText": "reply", "commentHtml": "", "from": user("u2"),
                                  "createdAt": c[1]["createdAt"], "lastUpdated": c[1]["createdAt"], "type": "text"},
                                 {"commentId": 9, "commentText": "", "commentHtml": "<script>alert(1)</script>", "from": user("u1"),
                                  "createdAt": c[2]["createdAt"], "lastUpdated": c[2]["createdAt"], "type": "text"}]})
        self.assertEqual(c[1]["createdAt"], a["createdAt"])  # set by the server, at the write

    def test_defaults_and_generated_ids(self):
        results = added(self, "gen", [ann(), ann(comments=[])])
        self.assertEqual(len(results), 2)
        for aid, r in results.items():
            self.assertRegex(aid, r"^[A-Za-z0-9_-]{20}$")
            self.assertEqual(r["annotationId"], aid)
        self.assertEqual(sorted(r["commentIds"] for r in results.values()), [[], [1]])
        for a in v1("gen"):
            self.assertEqual(a["status"], {"id": "OPEN", "name": "Open", "color": "#625DF5", "type": "default"})
            self.assertEqual(a["color"], "")
            self.assertNotIn("location", a)
            self.assertNotIn("context", a)

    def test_mixed_batch_writes_the_valid_items_only(self):
        added(self, "mixed", [ann("old")])
        batch = [
            ann("m1"),                                                        # 0 ok
            ann(),                                                            # 1 ok, generated id
            {"annotationId": "m2", "commentData": []},                        # 2 no from
            ann(comments=[{"commentText": "x" * 65537}]),                     # 3 no id, comment too long
            ann("m1"),                                                        # 4 same id twice in this call
            ann("old"),                                                       # 5 exists already
            "not an object",                                                  # 6
            ann("m3", comments=[{"commentId": 4, "commentText": "a"}, {"commentId": 4, "commentText": "b"}]),  # 7 comment id twice
            ann("m4", location="L9", comments=[{"commentText": "y" * 65536, "commentHtml": "h" * 65536}]),     # 8 ok: at the limits
            {"annotationId": "m5"},                                           # 9 no from
            {"annotationId": "m5", "color": 1},                               # 10 no from, same id: keyed by place
            ann("m5"),                                                        # 11 valid, but its id came first in 9
        ]
        status, body = add("mixed", batch)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["result"]["message"], "3 of 12 annotations added.")
        r = body["result"]["data"]
        generated = [k for k in r if k not in ("m1", "m2", "old", "m3", "m4", "m5") and not k.startswith("commentAnnotations[")]
        self.assertEqual(len(generated), 1)
        self.assertEqual(list(r), ["m1", generated[0], "m2", "commentAnnotations[3]", "commentAnnotations[4]", "old",
                                   "commentAnnotations[6]", "m3", "m4", "m5", "commentAnnotations[10]", "commentAnnotations[11]"])
        self.assertEqual(r["m1"], {"success": True, "annotationId": "m1", "commentIds": [1], "message": "Annotation added successfully."})
        self.assertEqual(r["m2"], {"success": False, "annotationId": "m2", "message": "from is required."})
        self.assertEqual(r["commentAnnotations[3]"], {"success": False, "message": "commentData[0].commentText must be at most 65536 bytes."})
        self.assertEqual(r["commentAnnotations[4]"], {"success": False, "annotationId": "m1",
                                                      "message": "Annotation m1 appears more than once in commentAnnotations."})
        self.assertEqual(r["old"], {"success": False, "annotationId": "old", "message": "Annotation already exists."})
        self.assertEqual(r["commentAnnotations[6]"], {"success": False, "message": "Each item must be an object."})
        self.assertEqual(r["m3"], {"success": False, "annotationId": "m3", "message": "commentData[1].commentId 4 is used twice."})
        self.assertTrue(r["m4"]["success"])
        self.assertEqual(r["m5"], {"success": False, "annotationId": "m5", "message": "from is required."})
        self.assertEqual(r["commentAnnotations[10]"], {"success": False, "annotationId": "m5", "message": "from is required."})
        self.assertEqual(r["commentAnnotations[11]"], {"success": False, "annotationId": "m5",
                                                       "message": "Annotation m5 appears more than once in commentAnnotations."})
        self.assertEqual(sorted(ids(v1("mixed"))), sorted(["old", "m1", generated[0], "m4"]))  # nothing of the failed items

    def test_item_errors_name_the_field(self):
        cases = [
            ({"from": {"userId": "u"}}, "from.name is required."),
            ({"from": {"name": "n", "email": "e"}}, "from.userId is required."),
            ({"from": dict(user("u"), email=5)}, "from.email must be a string."),
            ({"from": dict(user("u"), photo="p")}, "from has an unknown field \"photo\"."),
            ({"from": user("u\u0001")}, "from.userId must not contain control characters."),
            ({"from": user("u" * 257)}, "from.userId must be at most 256 bytes."),
            (ann(statuss={}), "Unknown field \"statuss\"."),
            (ann(status={"name": "x"}), "status.id is required."),
            (dict(ann(), location={"locationName": "p1"}), "location.id is required."),
            (ann(color="#fff\n"), "color must not contain control characters."),
            (ann(createdAt="2025-02-30T10:00:00.000Z"), "createdAt must be an ISO 8601 UTC timestamp with milliseconds, like 2025-01-20T10:30:00.000Z."),
            (ann(createdAt="2025-01-20T10:30:00Z"), "createdAt must be an ISO 8601 UTC timestamp with milliseconds, like 2025-01-20T10:30:00.000Z."),
            (ann(context=[1]), "context must be an object."),
            (ann(context={"k": "x" * 16377}), "context must be at most 16384 bytes as JSON (it is 16385)."),
            (ann(commentData={}), "commentData must be an array."),
            (ann(comments=[{"commentText": "c"}] * 101), "commentData may hold at most 100 comments."),
            (ann(comments=[{"commentId": -1, "commentText": "c"}]), "commentData[0].commentId must be a whole number from 0 to 9007199254740991."),
            (ann(comments=[{"commentId": 1.5, "commentText": "c"}]), "commentData[0].commentId must be a whole number from 0 to 9007199254740991."),
            (ann(comments=[{"commentId": 2 ** 53, "commentText": "c"}]), "commentData[0].commentId must be a whole number from 0 to 9007199254740991."),
            (ann(comments=[{"commentText": ""}]), "commentData[0].commentText or commentData[0].commentHtml is required."),
            (ann(comments=[{"commentHtml": "h" * 65537}]), "commentData[0].commentHtml must be at most 65536 bytes."),
            (ann(comments=[{"commentText": "c", "from": {"userId": "u"}}]), "commentData[0].from.name is required."),
            (ann(comments=[{"commentText": "c", "likes": 1}]), "commentData[0] has an unknown field \"likes\"."),
        ]
        status, body = add("errs", [dict(a, annotationId="e%d" % i) for i, (a, _) in enumerate(cases)])
        self.assertEqual(status, 200, body)
        r = body["result"]["data"]
        for i, (_, message) in enumerate(cases):
            self.assertEqual(r["e%d" % i], {"success": False, "annotationId": "e%d" % i, "message": message})
        self.assertEqual(v1("errs"), [])
        ok(self, add("errs", [ann("ctx", context={"k": "x" * 16376})]), "1 of 1 annotations added.")  # exactly 16384 bytes

    def test_request_errors(self):
        path = "/v2/commentannotations/add"
        err(self, call(path, {"documentId": "d", "commentAnnotations": [ann()]}), 400, "INVALID_ARGUMENT", "Organization ID is required")
        err(self, call(path, {"organizationId": "o", "commentAnnotations": [ann()]}), 400, "INVALID_ARGUMENT", "Document ID is required")
        err(self, call(path, req("d")), 400, "INVALID_ARGUMENT", "commentAnnotations is required.")
        err(self, call(path, req("d", commentAnnotations={})), 400, "INVALID_ARGUMENT", "commentAnnotations must be an array.")
        err(self, call(path, req("d", commentAnnotations=[])), 400, "INVALID_ARGUMENT", "commentAnnotations must hold at least one annotation.")
        err(self, call(path, req("d", commentAnnotations=[ann()] * 101)), 400, "INVALID_ARGUMENT",
            "commentAnnotations may hold at most 100 annotations.")
        err(self, call(path, req("d", commentAnnotations=[ann("ro")]), who="a_ro"), 403, "PERMISSION_DENIED", "This token is read-only.")
        err(self, call(path, req("d", commentAnnotations=[ann("x")]), who=None), 401, "UNAUTHENTICATED")
        self.assertEqual(v1("d"), [])


class V1Filters(unittest.TestCase):
    """Every filter combination of docs/API.md, "Comment annotations" against a model of its rules."""
    DATA = [("a3", "L1", "u1", "2025-01-03T00:00:00.000Z"), ("a1", "L1", "u2", "2025-01-01T00:00:00.000Z"),
            ("a2", "L2", "u1", "2025-01-02T00:00:00.000Z"), ("a0", None, "u3", "2025-01-02T00:00:00.000Z"),
            ("a4", "L2", "u2", "2025-01-02T00:00:00.000Z")]

    @classmethod
    def setUpClass(cls):
        status, body = add("filters", [ann(aid, uid, location=loc, created=t) for aid, loc, uid, t in cls.DATA])
        assert status == 200 and all(r["success"] for r in body["result"]["data"].values()), body

    def expected(self, locations, users, annotation_ids):
        def passes(row):
            aid, loc, uid, _ = row
            return (not locations or loc in locations) and (not users or uid in users)
        rows = sorted(self.DATA, key=lambda r: (r[3], r[0]))  # oldest first, ties by id
        if not annotation_ids:
            return [r[0] for r in rows if passes(r)]
        by_id = {r[0]: r for r in rows}
        out, seen = [], set()
        for aid in annotation_ids:
            if aid in seen:
                continue
            seen.add(aid)
            if aid not in by_id:
                out.append(None)  # does not exist: a null slot
            elif passes(by_id[aid]):
                out.append(aid)  # exists but fails another filter: left out
        return out

    def test_every_combination(self):
        locations = [None, [], ["L1"], ["L1", "L2"], ["L2", "nowhere"]]
        users = [None, [], ["u1"], ["u2", "u3"], ["nobody"]]
        annotation_ids = [None, [], ["a3", "nope", "a1", "a3"], ["a2"], ["a0", "a4", "a1"]]
        n = 0
        for loc, usr, aids in itertools.product(locations, users, annotation_ids):
            filters = {k: v for k, v in (("locationIds", loc), ("userIds", usr), ("annotationIds", aids)) if v is not None}
            self.assertEqual(ids(v1("filters", **filters)), self.expected(loc or [], usr or [], aids or []), filters)
            n += 1
        self.assertEqual(n, 125)
        self.assertEqual(v1("nothing-here"), [])


class Update(unittest.TestCase):
    def test_update_by_ids_changes_fields_and_advances_last_updated(self):
        added(self, "upd", [ann("u-a", "u1", location="L1", created="2025-01-01T00:00:00.000Z", lastUpdated="2025-01-01T00:00:00.000Z",
                                context={"k": 1}),
                            ann("u-b", "u2", location="L2", created="2025-01-02T00:00:00.000Z")])
        before = {a["annotationId"]: a for a in v1("upd")}
        status, body = call("/v2/commentannotations/update", req("upd", annotationIds=["u-a", "missing", "u-a"], updatedData={
            "status": {"id": "RESOLVED", "name": "Resolved"}, "location": None, "color": "#123456", "from": user("u9"), "context": None}))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["result"]["message"], "1 of 2 annotations updated.")
        self.assertEqual(body["result"]["data"], {
            "u-a": {"success": True, "annotationId": "u-a", "message": "Annotation updated successfully."},
            "missing": {"success": False, "annotationId": "missing", "message": "Annotation not found."}})
        a = {x["annotationId"]: x for x in v1("upd")}
        self.assertEqual(a["u-a"]["status"], {"id": "RESOLVED", "name": "Resolved", "color": "#625DF5", "type": "default"})
        self.assertNotIn("location", a["u-a"])
        self.assertNotIn("context", a["u-a"])
        self.assertEqual(a["u-a"]["color"], "#123456")
        self.assertEqual(a["u-a"]["from"], user("u9"))
        self.assertEqual(a["u-a"]["createdAt"], "2025-01-01T00:00:00.000Z")
        self.assertRegex(a["u-a"]["lastUpdated"], TIMESTAMP)
        self.assertGreater(a["u-a"]["lastUpdated"], before["u-a"]["lastUpdated"])
        self.assertEqual(a["u-a"]["comments"], before["u-a"]["comments"])
        self.assertEqual(a["u-b"], before["u-b"])
        # the filter columns follow the new values
        self.assertEqual(ids(v1("upd", userIds=["u9"])), ["u-a"])
        self.assertEqual(ids(v1("upd", locationIds=["L1"])), [])
        self.assertEqual(ids(v2("upd", statusIds=["RESOLVED"])[0]), ["u-a"])

    def test_update_by_filters_is_anded(self):
        added(self, "updf", [ann("f1", "u1", location="L1"), ann("f2", "u2", location="L1"), ann("f3", "u1", location="L2")])
        status, body = call("/v2/commentannotations/update", req("updf", locationIds=["L1"], userIds=["u1"], updatedData={"color": "red"}))
        self.assertEqual(body["result"]["data"], {"f1": {"success": True, "annotationId": "f1", "message": "Annotation updated successfully."}})
        status, body = call("/v2/commentannotations/update", req("updf", annotationIds=["f2", "f3"], locationIds=["L2"], updatedData={"color": "blue"}))
        self.assertEqual(body["result"]["data"], {
            "f3": {"success": True, "annotationId": "f3", "message": "Annotation updated successfully."},
            "f2": {"success": False, "annotationId": "f2", "message": "Annotation does not match locationIds or userIds."}})
        self.assertEqual({a["annotationId"]: a["color"] for a in v1("updf")}, {"f1": "red", "f2": "", "f3": "blue"})

    def test_request_errors(self):
        path = "/v2/commentannotations/update"
        err(self, call(path, req("d", annotationIds=["x"])), 400, "INVALID_ARGUMENT", "updatedData is required.")
        err(self, call(path, req("d", annotationIds=["x"], updatedData=[])), 400, "INVALID_ARGUMENT", "updatedData must be an object.")
        err(self, call(path, req("d", annotationIds=["x"], updatedData={})), 400, "INVALID_ARGUMENT",
            "updatedData must hold at least one of status, location, color, from, context.")
        err(self, call(path, req("d", updatedData={"color": "c"})), 400, "INVALID_ARGUMENT", "annotationIds, locationIds or userIds is required.")
        err(self, call(path, req("d", annotationIds=["x"], updatedData={"comments": []})), 400, "INVALID_ARGUMENT",
            "updatedData has an unknown field \"comments\".")
        err(self, call(path, req("d", annotationIds=["x"], updatedData={"status": {"name": "n"}})), 400, "INVALID_ARGUMENT",
            "updatedData.status.id is required.")
        err(self, call(path, req("d", annotationIds=["x"], updatedData={"color": None})), 400, "INVALID_ARGUMENT",
            "updatedData.color must be a string.")
        err(self, call(path, req("d", annotationIds=[1], updatedData={"color": "c"})), 400, "INVALID_ARGUMENT", "annotationIds[0] must be a string.")
        err(self, call(path, req("d", annotationIds=["x"], updatedData={"color": "c"}), who="a_ro"), 403, "PERMISSION_DENIED")


class Delete(unittest.TestCase):
    def test_delete_by_ids_filters_and_everything(self):
        added(self, "del", [ann("d1", "u1", location="L1"), ann("d2", "u2", location="L1"), ann("d3", "u1", location="L2"),
                            ann("d4", "u3")])
        status, body = call("/v2/commentannotations/delete", req("del", annotationIds=["d1", "gone"]))
        self.assertEqual(body["result"]["message"], "1 of 2 annotations deleted.")
        self.assertEqual(body["result"]["data"], {"d1": {"success": True, "annotationId": "d1", "message": "Annotation deleted successfully."},
                                                  "gone": {"success": False, "annotationId": "gone", "message": "Annotation not found."}})
        self.assertEqual(ids(v1("del", annotationIds=["d1"])), [None])
        status, body = call("/v2/commentannotations/delete", req("del", userIds=["u1"], locationIds=["L1", "L2"]))
        self.assertEqual(list(body["result"]["data"]), ["d3"])
        status, body = call("/v2/commentannotations/delete", req("del"))  # organization + document only: everything
        self.assertEqual(sorted(body["result"]["data"]), ["d2", "d4"])
        self.assertEqual(v1("del"), [])
        # comments went with their annotation: the id can be used again, afresh
        added(self, "del", [ann("d1", comments=[{"commentText": "new"}])])
        self.assertEqual([c["commentText"] for c in v1("del")[0]["comments"]], ["new"])
        err(self, call("/v2/commentannotations/delete", req("del"), who="a_ro"), 403, "PERMISSION_DENIED")


class EmptyLists(unittest.TestCase):
    """One rule for every write and delete: a list that is present selects exactly its members, so an
    empty one selects nothing — never everything. On reads an empty list is no filter."""

    def test_an_empty_list_selects_nothing_on_every_write(self):
        added(self, "empty", [ann("e1", "u1", location="L1", comments=[{"commentId": 1, "commentText": "one"}]),
                              ann("e2", "u2", location="L1")])
        before = v1("empty")
        for fields in ({"annotationIds": []}, {"locationIds": []}, {"userIds": []}, {"locationIds": ["L1"], "annotationIds": []}):
            status, body = call("/v2/commentannotations/delete", req("empty", **fields))
            self.assertEqual((status, body["result"]["message"], body["result"]["data"]), (200, "0 of 0 annotations deleted.", {}), fields)
            status, body = call("/v2/commentannotations/update", req("empty", updatedData={"color": "red"}, **fields))
            self.assertEqual((status, body["result"]["message"], body["result"]["data"]), (200, "0 of 0 annotations updated.", {}), fields)
        # A requested id is reported, and not acted on, when another list selects nothing.
        unmatched = {"e1": {"success": False, "annotationId": "e1", "message": "Annotation does not match locationIds or userIds."}}
        for path, verb in (("delete", "deleted"), ("update", "updated")):
            extra = {"updatedData": {"color": "red"}} if path == "update" else {}
            status, body = call("/v2/commentannotations/" + path, req("empty", annotationIds=["e1"], userIds=[], **extra))
            self.assertEqual((status, body["result"]["message"], body["result"]["data"]), (200, "0 of 1 annotations %s." % verb, unmatched))
        # null is refused, never read as "no list" (which would select the whole document).
        for path, fields in (("delete", {"annotationIds": None}), ("update", {"userIds": None, "updatedData": {"color": "red"}}),
                             ("comments/delete", {"annotationId": "e1", "commentIds": None})):
            name = [k for k, v in fields.items() if v is None][0]
            err(self, call("/v2/commentannotations/" + path, req("empty", **fields)), 400, "INVALID_ARGUMENT",
                name + " is null; send a list (an empty one selects nothing), or leave the field out.")
        for path, fields in (("update", {"updatedData": {"commentText": "changed"}}), ("delete", {})):
            status, body = call("/v2/commentannotations/comments/" + path, req("empty", annotationId="e1", commentIds=[], **fields))
            self.assertEqual((status, body["result"]["message"], body["result"]["data"]), (200, "0 of 0 comments %sd." % path, {}))
        self.assertEqual(v1("empty"), before)  # nothing changed, not even lastUpdated
        # Reads: an empty list is no filter.
        self.assertEqual(ids(v1("empty", annotationIds=[], locationIds=[], userIds=[])), ["e1", "e2"])
        self.assertEqual(ids(v2("empty", annotationIds=[], statusIds=[])[0]), ["e1", "e2"])
        # Without any list, delete still takes the whole document (documented), and update asks for one.
        err(self, call("/v2/commentannotations/update", req("empty", updatedData={"color": "red"})), 400, "INVALID_ARGUMENT",
            "annotationIds, locationIds or userIds is required.")


class Comments(unittest.TestCase):
    def test_add_update_delete(self):
        added(self, "com", [ann("t", comments=[{"commentId": 5, "commentText": "five"}], created="2025-01-01T00:00:00.000Z",
                                lastUpdated="2025-01-01T00:00:00.000Z")])
        status, body = call("/v2/commentannotations/comments/add", req("com", annotationId="t", commentData=[
            {"commentText": "six", "from": user("u2")},
            {"commentId": 5, "commentText": "dup", "from": user("u2")},
            {"commentId": 20, "commentHtml": "<i>20</i>", "from": user("u3"), "createdAt": "2025-01-01T00:00:00.000Z",
             "lastUpdated": "2025-01-01T00:00:00.000Z"},
            {"commentText": "no author"},
            {"commentId": 20, "commentText": "twice", "from": user("u3")},
            {"commentText": "21", "from": user("u2")},
            {"commentId": 5, "commentText": "dup again", "from": user("u2")},
            {"commentId": 3},
            {"commentId": 3, "commentText": "no author either"},
            {"commentId": 3, "commentText": "three", "from": user("u2")}]))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["result"]["message"], "3 of 10 comments added.")
        self.assertEqual(body["result"]["data"], {
            "21": {"success": True, "commentId": 21, "message": "Comment added successfully."},
            "5": {"success": False, "commentId": 5, "message": "Comment already exists."},
            "20": {"success": True, "commentId": 20, "message": "Comment added successfully."},
            "commentData[3]": {"success": False, "message": "from is required."},
            "commentData[4]": {"success": False, "commentId": 20, "message": "Comment 20 appears more than once in commentData."},
            "22": {"success": True, "commentId": 22, "message": "Comment added successfully."},
            "commentData[6]": {"success": False, "commentId": 5, "message": "Comment 5 appears more than once in commentData."},
            "3": {"success": False, "commentId": 3, "message": "commentText or commentHtml is required."},
            "commentData[8]": {"success": False, "commentId": 3, "message": "from is required."},
            "commentData[9]": {"success": False, "commentId": 3, "message": "Comment 3 appears more than once in commentData."}})
        a = v1("com")[0]
        self.assertEqual([c["commentId"] for c in a["comments"]], [5, 21, 20, 22])  # in the order they were added
        self.assertEqual(a["comments"][1]["commentText"], "six")
        self.assertGreater(a["lastUpdated"], "2025-01-01T00:00:00.000Z")
        last = a["lastUpdated"]

        status, body = call("/v2/commentannotations/comments/update", req("com", annotationId="t", commentIds=[20, 99],
                                                                          updatedData={"commentText": "edited", "commentHtml": "<p>edited</p>"}))
        self.assertEqual(body["result"]["message"], "1 of 2 comments updated.")
        self.assertEqual(body["result"]["data"], {"20": {"success": True, "commentId": 20, "message": "Comment updated successfully."},
                                                  "99": {"success": False, "commentId": 99, "message": "Comment not found."}})
        c20 = [c for c in v1("com")[0]["comments"] if c["commentId"] == 20][0]
        self.assertEqual((c20["commentText"], c20["commentHtml"], c20["from"]), ("edited", "<p>edited</p>", user("u3")))
        self.assertEqual(c20["createdAt"], "2025-01-01T00:00:00.000Z")
        self.assertGreaterEqual(c20["lastUpdated"], last)  # both the comment's and the thread's advance
        self.assertGreaterEqual(v1("com")[0]["lastUpdated"], c20["lastUpdated"])
        status, body = call("/v2/commentannotations/comments/update", req("com", annotationId="t", commentIds=[5],
                                                                          updatedData={"commentText": ""}))
        self.assertEqual(body["result"]["data"]["5"]["message"], "commentText and commentHtml cannot both be empty.")

        status, body = call("/v2/commentannotations/comments/delete", req("com", annotationId="t", commentIds=[21, 77]))
        self.assertEqual(body["result"]["data"], {"21": {"success": True, "commentId": 21, "message": "Comment deleted successfully."},
                                                  "77": {"success": False, "commentId": 77, "message": "Comment not found."}})
        status, body = call("/v2/commentannotations/comments/delete", req("com", annotationId="t"))  # all the rest
        self.assertEqual(sorted(body["result"]["data"]), ["20", "22", "5"])
        a = v1("com")[0]
        self.assertEqual(a["comments"], [])
        status, body = call("/v2/commentannotations/comments/add", req("com", annotationId="t", commentData=[{"commentText": "again", "from": user("u1")}]))
        self.assertEqual(list(body["result"]["data"]), ["23"])  # ids of deleted comments are never handed out again

    def test_a_thread_lists_its_comments_in_the_order_they_were_written(self):
        added(self, "order", [ann("t", comments=[{"commentId": 900, "commentText": "first"}, {"commentId": 5, "commentText": "second"},
                                                 {"commentId": 1, "commentText": "third"}])])

        def texts():
            orders = [[c["commentText"] for c in v1("order")[0]["comments"]],
                      [c["commentText"] for c in v1("order", annotationIds=["t"])[0]["comments"]],
                      [c["commentText"] for c in v2("order")[0][0]["comments"]]]
            self.assertEqual(orders[1:], orders[:1] * 2)  # every read agrees
            return orders[0]

        self.assertEqual(texts(), ["first", "second", "third"])
        status, body = call("/v2/commentannotations/comments/add", req("order", annotationId="t", commentData=[
            {"commentId": 2, "commentText": "fourth", "from": user("u2")}, {"commentText": "fifth", "from": user("u2")}]))
        self.assertEqual(body["result"]["message"], "2 of 2 comments added.", body)
        self.assertEqual(body["result"]["data"]["901"]["commentId"], 901)
        self.assertEqual(texts(), ["first", "second", "third", "fourth", "fifth"])
        # A comment deleted and added again under its id is a new comment: it comes last.
        call("/v2/commentannotations/comments/delete", req("order", annotationId="t", commentIds=[5]))
        call("/v2/commentannotations/comments/add", req("order", annotationId="t", commentData=[{"commentId": 5, "commentText": "again", "from": user("u2")}]))
        self.assertEqual(texts(), ["first", "third", "fourth", "fifth", "again"])
        # Editing a comment keeps its place.
        call("/v2/commentannotations/comments/update", req("order", annotationId="t", commentIds=[900], updatedData={"commentText": "first!"}))
        self.assertEqual(texts(), ["first!", "third", "fourth", "fifth", "again"])

    def test_request_errors(self):
        added(self, "come", [ann("t")])
        for path in ("add", "update", "delete"):
            p = "/v2/commentannotations/comments/" + path
            fields = {"commentData": [{"commentText": "x", "from": user("u")}], "commentIds": [1], "updatedData": {"commentText": "y"}}
            err(self, call(p, req("come", **fields)), 400, "INVALID_ARGUMENT", "Annotation ID is required.")
            err(self, call(p, req("come", annotationId="nope", **fields)), 404, "NOT_FOUND", "Annotation not found.")
            err(self, call(p, req("come", annotationId="t", **fields), who="a_ro"), 403, "PERMISSION_DENIED")
        add_path = "/v2/commentannotations/comments/add"
        err(self, call(add_path, req("come", annotationId="t")), 400, "INVALID_ARGUMENT", "commentData is required.")
        err(self, call(add_path, req("come", annotationId="t", commentData=[])), 400, "INVALID_ARGUMENT", "commentData must hold at least one comment.")
        err(self, call(add_path, req("come", annotationId="t", commentData=[{"commentText": "c", "from": user("u")}] * 101)), 400,
            "INVALID_ARGUMENT", "commentData may hold at most 100 comments.")
        upd = "/v2/commentannotations/comments/update"
        err(self, call(upd, req("come", annotationId="t", updatedData={"commentText": "y"})), 400, "INVALID_ARGUMENT", "commentIds is required.")
        err(self, call(upd, req("come", annotationId="t", commentIds=["1"], updatedData={"commentText": "y"})), 400, "INVALID_ARGUMENT",
            "commentIds[0] must be a whole number from 0 to 9007199254740991.")
        err(self, call(upd, req("come", annotationId="t", commentIds=list(range(101)), updatedData={"commentText": "y"})), 400,
            "INVALID_ARGUMENT", "commentIds may hold at most 100 ids.")
        err(self, call(upd, req("come", annotationId="t", commentIds=[1])), 400, "INVALID_ARGUMENT", "updatedData is required.")
        err(self, call(upd, req("come", annotationId="t", commentIds=[1], updatedData={"from": user("u")})), 400, "INVALID_ARGUMENT",
            "updatedData may hold only commentText and commentHtml.")
        err(self, call(upd, req("come", annotationId="t", commentIds=[1], updatedData={"commentHtml": "h" * 65537})), 400, "INVALID_ARGUMENT",
            "updatedData.commentHtml must be at most 65536 bytes.")
        self.assertEqual([c["commentText"] for c in v1("come")[0]["comments"]], ["hi"])


class V2Get(unittest.TestCase):
    def test_status_and_time_filters(self):
        added(self, "v2f", [ann("s1", status={"id": "OPEN"}, created="2025-01-01T00:00:00.000Z", lastUpdated="2025-01-01T00:00:00.000Z"),
                            ann("s2", status={"id": "RESOLVED"}, created="2025-01-02T00:00:00.000Z", lastUpdated="2025-01-05T00:00:00.000Z"),
                            ann("s3", status={"id": "ARCHIVED"}, created="2025-01-03T00:00:00.000Z", lastUpdated="2025-01-03T00:00:00.000Z")])
        self.assertEqual(ids(v2("v2f")[0]), ["s1", "s2", "s3"])
        self.assertEqual(ids(v2("v2f", statusIds=["RESOLVED", "ARCHIVED"])[0]), ["s2", "s3"])
        self.assertEqual(ids(v2("v2f", updatedAfter="2025-01-03T00:00:00.000Z")[0]), ["s2"])  # exclusive
        self.assertEqual(ids(v2("v2f", updatedBefore="2025-01-03T00:00:00.000Z")[0]), ["s1"])
        self.assertEqual(ids(v2("v2f", updatedAfter="2024-12-31T00:00:00.000Z", updatedBefore="2025-01-04T00:00:00.000Z",
                                statusIds=["OPEN", "ARCHIVED"], userIds=["u1"])[0]), ["s1", "s3"])
        self.assertEqual(ids(v2("v2f", annotationIds=["s3", "nope", "s1"])[0]), ["s1", "s3"])  # a filter here: no null slots
        self.assertEqual(v2("v2f", annotationIds=["s3"])[0], v1("v2f", annotationIds=["s3"]))

    def test_request_errors(self):
        path = "/v2/commentannotations/get"
        err(self, call(path, req("d", pageSize=0)), 400, "INVALID_ARGUMENT", "pageSize must be a whole number from 1 to 1000.")
        err(self, call(path, req("d", pageSize=1001)), 400, "INVALID_ARGUMENT", "pageSize must be a whole number from 1 to 1000.")
        err(self, call(path, req("d", pageSize="10")), 400, "INVALID_ARGUMENT", "pageSize must be a whole number from 1 to 1000.")
        err(self, call(path, req("d", updatedAfter="yesterday")), 400, "INVALID_ARGUMENT",
            "updatedAfter must be an ISO 8601 UTC timestamp with milliseconds, like 2025-01-20T10:30:00.000Z.")
        err(self, call(path, req("d", statusIds="OPEN")), 400, "INVALID_ARGUMENT", "statusIds must be an array of strings.")
        for token in ("garbage!", "", "AAAA", 5):
            m = err(self, call(path, req("d", pageToken=token)), 400, "INVALID_ARGUMENT")
            self.assertIn("pageToken", m)
        err(self, call(path, {"documentId": "d"}), 400, "INVALID_ARGUMENT", "Organization ID is required")

    def test_pagination_is_stable_under_inserts_and_deletes(self):
        doc = "pages"
        originals = []
        for b in range(25):  # 2,500 annotations, many sharing a createdAt (ties go by id)
            batch = [ann("p%04d" % (b * 100 + i), "u%d" % (i % 3), comments=[], created="2025-03-01T00:00:%02d.000Z" % (i % 7))
                     for i in range(100)]
            added(self, doc, batch)
            originals += [a["annotationId"] for a in batch]
        seen, token, pages, inserted, deleted = [], None, 0, 0, set()
        while True:
            page, token = v2(doc, pageSize=97, **({"pageToken": token} if token else {}))
            seen += ids(page)
            pages += 1
            if not token:
                break
            # between pages: inserts before the cursor, at it and after it, and a delete of one not yet seen
            added(self, doc, [ann("new-%d-early" % pages, created="2025-01-01T00:00:00.000Z", comments=[]),
                              ann("new-%d-tie" % pages, created=page[-1]["createdAt"], comments=[]),
                              ann("new-%d-late" % pages, created="2026-01-01T00:00:00.000Z", comments=[])])
            inserted += 3
            unseen = sorted(set(originals) - set(seen) - deleted)
            if unseen and pages % 5 == 0:
                call("/v2/commentannotations/delete", req(doc, annotationIds=[unseen[-1]]))
                deleted.add(unseen[-1])
        self.assertEqual(len(seen), len(set(seen)), "an annotation came twice")
        self.assertEqual(set(originals) - deleted - set(seen), set(), "an annotation present throughout was skipped")
        self.assertFalse(deleted & set(seen), "a deleted annotation was returned")
        self.assertGreaterEqual(pages, 26)
        for k in range(1, pages):
            self.assertIn("new-%d-late" % k, seen)  # after the cursor: always reached
            self.assertNotIn("new-%d-early" % k, seen)  # before it: never (keyset, not offsets)
        # the order of a full read is createdAt, then id
        everything = v2(doc, pageSize=1000)[0]
        keys = [(a["createdAt"], a["annotationId"]) for a in everything]
        self.assertEqual(keys, sorted(keys))

    def test_a_token_continues_only_its_own_query(self):
        added(self, "tok", [ann("k%d" % i, "u%d" % (i % 2), comments=[]) for i in range(5)])
        page, token = v2("tok", pageSize=2)
        self.assertIsNotNone(token)
        self.assertEqual(len(v2("tok", pageSize=2, pageToken=token)[0]), 2)
        msg = "pageToken is not valid for this query; start again without it."
        err(self, call("/v2/commentannotations/get", req("tok", pageSize=2, pageToken=token, userIds=["u1"])), 400, "INVALID_ARGUMENT", msg)
        err(self, call("/v2/commentannotations/get", req("other", pageSize=2, pageToken=token)), 400, "INVALID_ARGUMENT", msg)
        err(self, call("/v2/commentannotations/get", req("tok", pageSize=2, pageToken=token), who="b"), 400, "INVALID_ARGUMENT", msg)


class Isolation(unittest.TestCase):
    """Tenant b, sending tenant a's ids to every endpoint, learns nothing and changes nothing."""

    def test_every_endpoint(self):
        doc = "iso"
        added(self, doc, [ann("shared", "u1", location="L1", comments=[{"commentId": 1, "commentText": "a's"}]), ann("a-only")])
        before = v1(doc)
        self.assertEqual(v1(doc, who="b"), [])
        self.assertEqual(v1(doc, who="b", annotationIds=["shared", "a-only"]), [None, None])
        self.assertEqual(v2(doc, who="b"), ([], None))
        b = "/v2/commentannotations/"
        status, body = call(b + "update", req(doc, annotationIds=["shared"], updatedData={"color": "b"}), who="b")
        self.assertEqual(body["result"]["data"]["shared"]["message"], "Annotation not found.")
        status, body = call(b + "update", req(doc, locationIds=["L1"], updatedData={"color": "b"}), who="b")
        self.assertEqual(body["result"]["data"], {})
        status, body = call(b + "delete", req(doc, annotationIds=["shared"]), who="b")
        self.assertEqual(body["result"]["data"]["shared"]["message"], "Annotation not found.")
        fields = {"annotationId": "shared", "commentData": [{"commentText": "b's", "from": user("b")}], "commentIds": [1],
                  "updatedData": {"commentText": "b's"}}
        for path in ("comments/add", "comments/update", "comments/delete"):
            err(self, call(b + path, req(doc, **fields), who="b"), 404, "NOT_FOUND", "Annotation not found.")
        # the same id in b's own space is b's own annotation
        added(self, doc, [ann("shared", "b1", comments=[{"commentText": "b's"}])], who="b")
        status, body = call(b + "delete", req(doc), who="b")  # b's everything
        self.assertEqual(list(body["result"]["data"]), ["shared"])
        self.assertEqual(v1(doc), before)  # a's data, untouched


def sanitized():
    """Whether the build under test has AddressSanitizer (FOLIO_SANITIZE in its CMake cache)."""
    with open(os.path.join(stack.BUILD, "CMakeCache.txt")) as f:
        return any(line.startswith("FOLIO_SANITIZE:BOOL=ON") for line in f)


def anon_rss_kb(pid):
    """Resident anonymous memory (the heap; the database file's mapped pages are not counted)."""
    with open("/proc/%d/status" % pid) as f:
        return int(next(line for line in f if line.startswith("RssAnon:")).split()[1])


class LargeAnswers(unittest.TestCase):
    """A get's answer is streamed: the responder holds a bounded buffer, not the answer (it held ~3x a
    document's size: four gets of a 203 MB document took 2.6 GB)."""

    def test_a_large_document_is_read_in_bounded_memory(self):
        doc, threads, per_call, text = "large", 16, 40, "x" * 60000
        for t in range(threads):
            added(self, doc, [ann("t%02d" % t, comments=[{"commentText": text + str(i)} for i in range(per_call)])])
        size = threads * per_call * len(text)
        pid = STACK.fcgi.pid
        before = anon_rss_kb(pid)
        peak = before
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            gets = [pool.submit(call, "/v1/commentannotations/get", req(doc)) for _ in range(3)]
            while not all(g.done() for g in gets):
                peak = max(peak, anon_rss_kb(pid))
            answers = [g.result() for g in gets]
        grown = (peak - before) * 1024
        for status, body in answers:
            self.assertEqual(status, 200)
            data = body["result"]["data"]
            self.assertEqual([a["annotationId"] for a in data], ["t%02d" % t for t in range(threads)])
            self.assertEqual([c["commentText"] for c in data[-1]["comments"]], [text + str(i) for i in range(per_call)])
        # three answers of `size` each were sent at once; the responder grew by far less than one
        # (not measurable under AddressSanitizer: its quarantine holds on to freed memory by design)
        if not sanitized():
            self.assertLess(grown, size // 4, "responder's peak grew by %d bytes for three %d-byte answers" % (grown, size))
        # the same through the paged v2 get and crdt/get of many records
        status, body = call("/v2/commentannotations/get", req(doc, pageSize=5))
        self.assertEqual(len(body["result"]["data"]), 5)
        self.assertIn("nextPageToken", body["result"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
