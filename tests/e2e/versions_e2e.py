#!/usr/bin/env python3
"""End-to-end tests of merging writes and of versions (docs/API.md: crdt/update's `baseVersion`, "Versions
and history"): the real nginx, folio-fcgi and database (stack.py), client replicas as folio-cli, over HTTP.
The concurrent rounds check the result against a model kept by the test (which unique characters, keys
or items were added and removed), never against the server's own answer.

Run by ctest (tests/CMakeLists.txt) as:  versions_e2e.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import stack
from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)

CLI = os.path.join(stack.BUILD, "tools", "folio-cli")
ORG = "org-v"


def ids(doc, editor):
    return {"organizationId": ORG, "documentId": doc, "editorId": editor}


def record(test, doc, editor, who="a", headers=None):
    found = ok(test, call("/v2/crdt/get", ids(doc, editor), who=who, headers=headers), "CRDT data retrieved successfully.")
    test.assertEqual(len(found), 1)
    return found[0]


def add(test, doc, editor, type_, value):
    ok(test, call("/v2/crdt/add", dict(ids(doc, editor), type=type_, data=value)), "CRDT data added successfully.")


def update(test, doc, editor, value, base=None, **extra):
    data = dict(ids(doc, editor), data=value, **extra)
    if base is not None:
        data["baseVersion"] = base
    ok(test, call("/v2/crdt/update", data), "CRDT data updated successfully.")


def versions(test, doc, editor, who="a", headers=None, **extra):
    return ok(test, call("/v2/crdt/versions/get", dict(ids(doc, editor), **extra), who=who, headers=headers), "Versions fetched successfully.")


def execute(sql):
    """Runs one statement that changes the stack's database (SQLite file or PostgreSQL)."""
    if STACK.postgresql:
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql, STACK.db], check=True, capture_output=True)
    else:
        import sqlite3
        with sqlite3.connect(STACK.db) as db:
            db.execute(sql)


class Replica:
    """A client replica: folio-cli with a state file, against the stack."""

    def __init__(self, doc, editor):
        self.dir = tempfile.mkdtemp(prefix="folio-replica-")
        self.state = os.path.join(self.dir, "state")
        self.doc, self.editor = doc, editor
        self.value = self.run("sync")

    def run(self, *args):
        key, token = CREDS["a"]
        env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % STACK.port)
        r = subprocess.run([CLI, "--org", ORG, "--doc", self.doc, "--editor", self.editor, "--state", self.state, *args], env=env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("folio-cli %s failed: %s" % (" ".join(args), r.stderr))
        out = r.stdout.strip().splitlines()
        return json.loads(out[-1]) if out else None

    def edit(self, *edit, offline=False):
        self.value = self.run("edit", *edit, *(["--offline"] if offline else []))
        return self.value

    def sync(self):
        self.value = self.run("sync")
        return self.value

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class BaseVersion(unittest.TestCase):
    def typed_while_a_backend_wrote(self, doc, with_base):
        """The issue's example: a backend reads "Hello world", a client types "big " meanwhile, the backend
        writes "Hello world!" (with the version it read as baseVersion, or none). Answers the server's
        value and the client's after a sync."""
        add(self, doc, "t", "text", "Hello world")
        read = record(self, doc, "t")
        self.assertRegex(read["version"], r"^[1-9][0-9]*-[0-9a-f]{12}$")
        client = Replica(doc, "t")
        try:
            self.assertEqual(client.edit("--insert", "6", "big "), "Hello big world")
            update(self, doc, "t", "Hello world!", base=read["version"] if with_base else None)
            return record(self, doc, "t")["data"], client.sync()
        finally:
            client.close()

    def test_the_issue_example_keeps_both_edits(self):
        self.assertEqual(self.typed_while_a_backend_wrote("ex", True), ("Hello big world!", "Hello big world!"))

    def test_without_base_version_an_update_overwrites(self):
        self.assertEqual(self.typed_while_a_backend_wrote("ow", False), ("Hello world!", "Hello world!"))

    def test_each_version_names_its_state(self):
        add(self, "vs", "t", "text", "a")
        first = record(self, "vs", "t")["version"]
        self.assertEqual(record(self, "vs", "t")["version"], first)  # a read moves nothing
        update(self, "vs", "t", "ab")
        second = record(self, "vs", "t")["version"]
        self.assertNotEqual(second, first)
        update(self, "vs", "t", "ab", userId="someone")  # only the metadata: a new version too
        self.assertNotEqual(record(self, "vs", "t")["version"], second)

    def test_map_keys_the_backend_did_not_change_keep_what_others_wrote(self):
        add(self, "mp", "m", "map", {"a": 1, "b": 2, "c": 3, "x": 0})
        read = record(self, "mp", "m")
        client = Replica("mp", "m")
        try:
            client.edit("--set", "a", "10")
            client.edit("--set", "d", "4")
            client.edit("--set", "x", "\"client\"")  # the backend removes x meanwhile: add-wins keeps this
            mine = dict(read["data"])
            mine["b"] = 20
            del mine["c"], mine["x"]
            update(self, "mp", "m", mine, base=read["version"])
            self.assertEqual(record(self, "mp", "m")["data"], {"a": 10, "b": 20, "d": 4, "x": "client"})
            self.assertEqual(client.sync(), {"a": 10, "b": 20, "d": 4, "x": "client"})
        finally:
            client.close()

    def test_array_elements_merge(self):
        add(self, "ar", "a", "array", [{"id": 1}, {"id": 2}])
        read = record(self, "ar", "a")
        client = Replica("ar", "a")
        try:
            client.edit("--insert", "1", '{"id":"c"}')
            update(self, "ar", "a", [{"id": 2}, {"id": 3}], base=read["version"])
            self.assertEqual(record(self, "ar", "a")["data"], [{"id": "c"}, {"id": 2}, {"id": 3}])
            self.assertEqual(client.sync(), [{"id": "c"}, {"id": 2}, {"id": 3}])
        finally:
            client.close()

    def test_xml_merges_characters_and_attributes(self):
        add(self, "xm", "x", "xml", '<p class="a">Hello world</p>')
        read = record(self, "xm", "x")
        update(self, "xm", "x", '<p class="a" id="x">Hello big world</p>')  # another writer, after the read
        update(self, "xm", "x", '<p class="b">Hello world!</p>', base=read["version"])
        self.assertEqual(record(self, "xm", "x")["data"], '<p class="b" id="x">Hello big world!</p>')

    def test_the_current_version_is_a_plain_update(self):
        add(self, "cur", "t", "text", "one")
        update(self, "cur", "t", "two", base=record(self, "cur", "t")["version"])
        self.assertEqual(record(self, "cur", "t")["data"], "two")

    def test_versions_of_anything_else_are_refused(self):
        add(self, "bad", "t", "text", "one")
        add(self, "bad", "u", "text", "other")
        mine = record(self, "bad", "t")["version"]
        revision, tag = mine.split("-")
        shape = 'baseVersion must be a version string that crdt/get answered (like "12-3f2a9c0d1e4b").'
        for garbage in (12, "", "x", "12", "12-", "012-" + tag, "-" + tag, revision + "-" + tag[:-1], revision + "-" + tag + "0"):
            err(self, call("/v2/crdt/update", dict(ids("bad", "t"), data="two", baseVersion=garbage)), 400, "INVALID_ARGUMENT", shape)
        other = ("baseVersion is a version of another record, or of this record before it was deleted and added again; send a version "
                 "crdt/get answered for this record.")
        err(self, call("/v2/crdt/update", dict(ids("bad", "t"), data="two", baseVersion=record(self, "bad", "u")["version"])), 400,
            "INVALID_ARGUMENT", other)
        err(self, call("/v2/crdt/update", dict(ids("bad", "t"), data="two", baseVersion="99999-" + tag)), 400, "INVALID_ARGUMENT",
            "baseVersion names a revision this record has not reached.")
        ok(self, call("/v2/crdt/delete", ids("bad", "t")), "CRDT data deleted successfully.")
        add(self, "bad", "t", "text", "one")  # another incarnation: the old version names nothing here
        err(self, call("/v2/crdt/update", dict(ids("bad", "t"), data="two", baseVersion=mine)), 400, "INVALID_ARGUMENT", other)
        self.assertEqual(record(self, "bad", "t")["data"], "one")  # nothing was stored

    def test_a_version_older_than_the_history_kept_is_409(self):
        add(self, "old", "t", "text", "one")
        read = record(self, "old", "t")["version"]
        update(self, "old", "t", "two")
        update(self, "old", "t", "three")
        # As a record stored before this build, or one whose change rows the retention deleted.
        execute("UPDATE crdt_records SET history_from = 3 WHERE org = '%s' AND doc = 'old'" % ORG)
        err(self, call("/v2/crdt/update", dict(ids("old", "t"), data="four", baseVersion=read)), 409, "ABORTED",
            "baseVersion %s is older than the history this record keeps (from revision 3 on): get the record again, compute the new value from "
            "what it answers, and update with that answer's version." % read)
        self.assertEqual(record(self, "old", "t")["data"], "three")


class ConcurrentRounds(unittest.TestCase):
    """Rounds of client edits and backend writes from stale reads, against a model of what each added
    and removed. Every character, key or item is unique, so what the result must hold does not depend
    on how a diff aligns equal characters."""

    ROUNDS = 200

    @staticmethod
    def unique(n):
        return chr(0x4E00 + n)  # CJK ideographs: one code point each, all different

    @staticmethod
    def typed(text, rng, token):
        """A backend's edit of `text`: `token` inserted somewhere, and now and then one character removed.
        Answers the new text, the token and the character removed (or None)."""
        at = rng.randint(0, len(text))
        text = text[:at] + token + text[at:]
        gone = None
        if len(text) > 3 and rng.random() < 0.3:
            i = rng.randrange(len(text))
            gone = text[i]
            text = text[:i] + text[i + 1:]
        return text, token, gone

    def rounds(self, doc, editor, type_, initial, client_edit, backend_value, tokens_of):
        add(self, doc, editor, type_, initial)
        rng = random.Random(51)
        clients = [Replica(doc, editor) for _ in range(2)] if client_edit else []
        added, removed = set(tokens_of(initial)), set()
        reads = []
        try:
            for n in range(self.ROUNDS):
                reads.append(record(self, doc, editor))
                if clients:
                    c = clients[n % 2]
                    token = client_edit(c, rng, n)
                    added.add(token)
                    if rng.random() < 0.3:
                        c.sync()
                read = reads.pop(rng.randrange(len(reads))) if len(reads) > 2 or rng.random() < 0.5 else reads[-1]
                value, token, gone = backend_value(read["data"], rng, n)
                added.add(token)
                if gone is not None:
                    removed.add(gone)
                update(self, doc, editor, value, base=read["version"])
            for c in clients:  # their offline edits reach the server
                c.sync()
            final = record(self, doc, editor)["data"]
            have = tokens_of(final)
            self.assertEqual(sorted(have), sorted(set(have)), "a token twice")
            self.assertEqual(set(have), added - removed)
            for c in clients:
                self.assertEqual(c.sync(), final)
        finally:
            for c in clients:
                c.close()

    def test_text(self):
        def client_edit(c, rng, n):
            token = self.unique(2 * n)
            c.edit("--insert", str(rng.randint(0, len(c.value))), token, offline=rng.random() < 0.5)
            return token

        def backend_value(text, rng, n):
            return self.typed(text, rng, self.unique(2 * n + 1))

        self.rounds("rounds", "text", "text", "", client_edit, backend_value, list)

    def test_map(self):
        def client_edit(c, rng, n):
            c.edit("--set", "c%d" % n, str(n), offline=rng.random() < 0.5)
            return "c%d" % n

        def backend_value(m, rng, n):
            m = dict(m)
            m["b%d" % n] = n
            gone = None
            mine = sorted(k for k in m if k.startswith("b") and k != "b%d" % n)
            if mine and rng.random() < 0.3:
                gone = rng.choice(mine)
                del m[gone]
            return m, "b%d" % n, gone

        self.rounds("rounds", "map", "map", {}, client_edit, backend_value, lambda m: list(m))

    def test_array(self):
        def client_edit(c, rng, n):
            c.edit("--insert", str(rng.randint(0, len(c.value))), json.dumps({"id": "c%d" % n}), offline=rng.random() < 0.5)
            return "c%d" % n

        def backend_value(items, rng, n):
            items = list(items)
            items.insert(rng.randint(0, len(items)), {"id": "b%d" % n})
            gone = None
            if len(items) > 3 and rng.random() < 0.3:
                gone = items.pop(rng.randrange(len(items)))["id"]
            return items, "b%d" % n, gone

        self.rounds("rounds", "array", "array", [], client_edit, backend_value, lambda items: [i["id"] for i in items])

    def test_xml(self):
        # Two backends (no client tool edits XML): each writes from its own stale reads.
        def backend_value(markup, rng, n):
            text, token, gone = self.typed(markup[len('<p k="v">'):-len("</p>")], rng, self.unique(n))
            return '<p k="v">' + text + "</p>", token, gone

        self.rounds("rounds", "xml", "xml", '<p k="v">x</p>', None, backend_value,
                    lambda markup: list(markup[len('<p k="v">'):-len("</p>")]))


class Versions(unittest.TestCase):
    def test_add_list_get_rename_pin_delete(self):
        add(self, "vl", "t", "text", "one")
        first = ok(self, call("/v2/crdt/versions/add", dict(ids("vl", "t"), name="First", userId="ana")), "Version added successfully.")
        self.assertEqual((first["kind"], first["name"], first["createdBy"], first["authors"], first["pinned"]), ("named", "First", "ana", ["subject-a"], False))
        self.assertRegex(first["versionId"], r"^v1-[0-9a-f]{12}$")
        update(self, "vl", "t", "two", userId="bo")
        update(self, "vl", "t", "three", userId="cy")
        update(self, "vl", "t", "three!", userId="bo")
        second = ok(self, call("/v2/crdt/versions/add", ids("vl", "t")), "Version added successfully.")
        self.assertEqual((second["name"], second["createdBy"], second["authors"]), (None, "subject-a", ["bo", "cy"]))
        listed = versions(self, "vl", "t")
        self.assertEqual([v["versionId"] for v in listed], [second["versionId"], first["versionId"]])
        self.assertEqual(listed[0], second)
        # A version's value, in crdt/get's shape.
        got = ok(self, call("/v2/crdt/versions/get", dict(ids("vl", "t"), versionId=first["versionId"])), "Version retrieved successfully.")
        self.assertEqual(got, [{"data": "one", "id": "t", "type": "text", "contentKey": "content", "version": first["version"],
                                "versionId": first["versionId"], "createdAt": first["createdAt"], "createdBy": "ana"}])
        renamed = ok(self, call("/v2/crdt/versions/update", dict(ids("vl", "t"), versionId=first["versionId"], name="Draft", pinned=True)),
                     "Version updated successfully.")
        self.assertEqual((renamed["name"], renamed["pinned"]), ("Draft", True))
        ok(self, call("/v2/crdt/versions/update", dict(ids("vl", "t"), versionId=first["versionId"], name=None)), "Version updated successfully.")
        self.assertEqual(versions(self, "vl", "t")[1]["name"], None)
        ok(self, call("/v2/crdt/versions/delete", dict(ids("vl", "t"), versionId=second["versionId"])), "Version deleted successfully.")
        self.assertEqual([v["versionId"] for v in versions(self, "vl", "t")], [first["versionId"]])
        for path in ("/v2/crdt/versions/get", "/v2/crdt/versions/delete", "/v2/crdt/versions/restore"):
            err(self, call(path, dict(ids("vl", "t"), versionId=second["versionId"])), 404, "NOT_FOUND", "No version found for this versionId.")
        self.assertEqual(record(self, "vl", "t")["data"], "three!")  # versions never change the value

    def test_pages(self):
        add(self, "pg", "t", "text", "0")
        made = []
        for n in range(5):
            update(self, "pg", "t", str(n + 1))
            made.append(ok(self, call("/v2/crdt/versions/add", ids("pg", "t")), "Version added successfully.")["versionId"])
        seen, token = [], None
        while True:
            extra = {"pageSize": 2}
            if token:
                extra["pageToken"] = token
            status, body = call("/v2/crdt/versions/get", dict(ids("pg", "t"), **extra))
            self.assertEqual(status, 200, body)
            seen += [v["versionId"] for v in body["result"]["data"]]
            token = body["result"].get("nextPageToken")
            if not token:
                break
        self.assertEqual(seen, made[::-1])
        err(self, call("/v2/crdt/versions/get", dict(ids("pg", "t"), pageSize=0)), 400, "INVALID_ARGUMENT", "pageSize must be a whole number from 1 to 1000.")
        err(self, call("/v2/crdt/versions/get", dict(ids("pg", "t"), pageToken="nonsense")), 400, "INVALID_ARGUMENT",
            "pageToken is not valid for this query; start again without it.")
        add(self, "pg", "u", "text", "0")
        status, body = call("/v2/crdt/versions/get", dict(ids("pg", "t"), pageSize=2))
        err(self, call("/v2/crdt/versions/get", dict(ids("pg", "u"), pageToken=body["result"]["nextPageToken"])), 400, "INVALID_ARGUMENT",
            "pageToken is not valid for this query; start again without it.")

    def test_fields_are_checked(self):
        add(self, "vf", "t", "text", "0")
        err(self, call("/v2/crdt/versions/add", dict(ids("vf", "t"), nmae="typo")), 400, "INVALID_ARGUMENT",
            'Unknown field "nmae"; versions/add takes organizationId, documentId, editorId, name and userId.')
        err(self, call("/v2/crdt/versions/add", dict(ids("vf", "t"), name="")), 400, "INVALID_ARGUMENT", "name must not be empty.")
        err(self, call("/v2/crdt/versions/add", dict(ids("vf", "t"), name=5)), 400, "INVALID_ARGUMENT", "name must be a string (or null for none).")
        err(self, call("/v2/crdt/versions/get", dict(ids("vf", "t"), versionId=5)), 400, "INVALID_ARGUMENT",
            "versionId must be a string that versions/add or versions/get answered.")
        err(self, call("/v2/crdt/versions/get", dict(ids("vf", "t"), versionId="v1-000000000000")), 404, "NOT_FOUND", "No version found for this versionId.")
        err(self, call("/v2/crdt/versions/update", dict(ids("vf", "t"), versionId="v1-000000000000")), 400, "INVALID_ARGUMENT",
            "Nothing to update: send name, pinned or both.")
        err(self, call("/v2/crdt/versions/add", ids("vf", "missing")), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
        err(self, call("/v2/crdt/versions/add", ids("vf", "t"), who="b"), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
        v = ok(self, call("/v2/crdt/versions/add", ids("vf", "t")), "Version added successfully.")
        err(self, call("/v2/crdt/versions/get", dict(ids("vf", "t"), versionId=v["versionId"]), who="b"), 404, "NOT_FOUND",
            "No CRDT data found for this editor ID.")
        self.assertEqual(versions(self, "vf", "t", who="a")[0]["versionId"], v["versionId"])

    def test_restore_is_a_forward_change_connected_clients_merge(self):
        add(self, "rs", "t", "text", "The first draft")
        v1 = ok(self, call("/v2/crdt/versions/add", dict(ids("rs", "t"), name="draft")), "Version added successfully.")
        update(self, "rs", "t", "A second text altogether")
        client = Replica("rs", "t")
        try:
            client.edit("--insert", "0", ">> ", offline=True)  # typed while the restore happens
            restored = ok(self, call("/v2/crdt/versions/restore", dict(ids("rs", "t"), versionId=v1["versionId"], userId="ana")),
                          "Version restored successfully.")
            self.assertEqual(record(self, "rs", "t")["data"], "The first draft")
            self.assertEqual(record(self, "rs", "t")["version"], restored["version"])
            backup = ok(self, call("/v2/crdt/versions/get", dict(ids("rs", "t"), versionId=restored["backupVersionId"])),
                        "Version retrieved successfully.")[0]
            self.assertEqual(backup["data"], "A second text altogether")
            self.assertEqual(versions(self, "rs", "t")[0]["kind"], "auto")
            # The client merges the restore with its own edit, without reloading: both are there (where the
            # restore's inserts and the client's, made at the same place, interleave is the CRDT's order).
            merged = client.sync()
            self.assertIn(">> ", merged)
            self.assertEqual(merged.replace(">> ", "", 1), "The first draft")
            self.assertEqual(record(self, "rs", "t")["data"], merged)
        finally:
            client.close()

    def test_every_type_restores(self):
        values = {"map": ({"a": 1}, {"b": 2}), "array": ([{"i": 1}], [{"i": 2}, {"i": 3}]),
                  "xml": ('<p a="1">one</p>', "<q>two</q>tail"), "text": ("one", "two")}
        for t, (old, new) in values.items():
            add(self, "every", t, t, old)
            v = ok(self, call("/v2/crdt/versions/add", ids("every", t)), "Version added successfully.")
            update(self, "every", t, new)
            ok(self, call("/v2/crdt/versions/restore", dict(ids("every", t), versionId=v["versionId"])), "Version restored successfully.")
            self.assertEqual(record(self, "every", t)["data"], old, t)

    def test_client_tokens(self):
        add(self, "tok", "t", "text", "one")

        def token(access, doc="tok"):
            minted = ok(self, call("/v2/auth/token", {"organizationId": ORG, "documentId": doc, "userId": "ana", "access": access}),
                        "Client token created.")
            return {"Authorization": "Bearer " + minted["token"]}

        v = ok(self, call("/v2/crdt/versions/add", ids("tok", "t")), "Version added successfully.")
        read, write, elsewhere = token("read"), token("write"), token("read", doc="other")
        self.assertEqual(versions(self, "tok", "t", who=None, headers=read)[0]["versionId"], v["versionId"])
        ok(self, call("/v2/crdt/versions/get", dict(ids("tok", "t"), versionId=v["versionId"]), who=None, headers=read), "Version retrieved successfully.")
        err(self, call("/v2/crdt/versions/add", ids("tok", "t"), who=None, headers=read), 403, "PERMISSION_DENIED", "This token is read-only.")
        err(self, call("/v2/crdt/versions/restore", dict(ids("tok", "t"), versionId=v["versionId"]), who=None, headers=read), 403,
            "PERMISSION_DENIED", "This token is read-only.")
        mine = ok(self, call("/v2/crdt/versions/add", ids("tok", "t"), who=None, headers=write), "Version added successfully.")
        self.assertEqual(mine["createdBy"], "ana")
        ok(self, call("/v2/crdt/versions/restore", dict(ids("tok", "t"), versionId=v["versionId"]), who=None, headers=write),
           "Version restored successfully.")
        for path in ("/v2/crdt/versions/update", "/v2/crdt/versions/delete"):
            err(self, call(path, dict(ids("tok", "t"), versionId=v["versionId"], pinned=True), who=None, headers=write), 403, "PERMISSION_DENIED",
                "A client token opens only /v2/crdt/get, /v2/crdt/sync, /v2/crdt/subscribe, /v2/crdt/versions/get, diff, add and restore, and /v2/presence/set, leave and get.")
        err(self, call("/v2/crdt/versions/get", ids("tok", "t"), who=None, headers=elsewhere), 403, "PERMISSION_DENIED",
            "The client token does not cover this documentId.")


def diff(test, doc, editor, who="a", headers=None, **extra):
    return ok(test, call("/v2/crdt/versions/diff", dict(ids(doc, editor), **extra), who=who, headers=headers), "Versions compared successfully.")


def named(test, doc, editor):
    return ok(test, call("/v2/crdt/versions/add", ids(doc, editor)), "Version added successfully.")["versionId"]


def runs(changes, key="text"):
    return [(r["op"], r[key], r["userIds"]) for r in changes]


class Diffs(unittest.TestCase):
    """versions/diff and crdt/get's attribution: each character's or element's author is the change that
    inserted or removed it (the update's userId, the client token's subject for a folio-cli edit)."""

    def test_text_diff_between_two_versions_with_two_authors(self):
        add(self, "dt", "t", "text", "Hello world")
        v1 = named(self, "dt", "t")
        update(self, "dt", "t", "Hello world!", userId="ana")
        client = Replica("dt", "t")  # edits as subject-a (tenant a's auth token)
        try:
            client.edit("--insert", "6", "big ")
        finally:
            client.close()
        update(self, "dt", "t", "Hello big wor!", userId="bo", baseVersion=record(self, "dt", "t")["version"])
        v2 = named(self, "dt", "t")
        update(self, "dt", "t", "Hello big wor!?", userId="cy")
        got = diff(self, "dt", "t", **{"from": v1, "to": v2})
        self.assertEqual((got["type"], got["from"], got["to"]), ("text", v1, v2))
        self.assertEqual(runs(got["changes"]), [("equal", "Hello ", []), ("insert", "big ", ["subject-a"]), ("equal", "wor", []),
                                                ("delete", "ld", ["bo"]), ("insert", "!", ["ana"])])
        # to absent: the record now, with cy's "?" as well.
        now = diff(self, "dt", "t", **{"from": v1})
        self.assertEqual((now["to"], now["toVersion"]), (None, record(self, "dt", "t")["version"]))
        self.assertEqual(runs(now["changes"])[-2:], [("insert", "!", ["ana"]), ("insert", "?", ["cy"])])
        # The other way round: what v1 has and v2 lacks is deleted.
        back = diff(self, "dt", "t", **{"from": v2, "to": v1})
        self.assertEqual(runs(back["changes"]), [("equal", "Hello ", []), ("delete", "big ", []), ("equal", "wor", []),
                                                 ("insert", "ld", ["subject-a"]), ("delete", "!", [])])

    def test_array_diff(self):
        one, two, three, four = {"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}
        add(self, "da", "a", "array", [one, two, three])
        v1 = named(self, "da", "a")
        update(self, "da", "a", [one, three], userId="ana")
        update(self, "da", "a", [one, three, four], userId="bo")
        got = diff(self, "da", "a", **{"from": v1})
        self.assertEqual(runs(got["changes"], "values"), [("equal", [one], []), ("delete", [two], ["ana"]), ("equal", [three], []),
                                                          ("insert", [four], ["bo"])])

    def test_map_diff(self):
        add(self, "dm", "m", "map", {"a": 1, "b": 2, "c": 3})
        v1 = named(self, "dm", "m")
        update(self, "dm", "m", {"a": 1, "b": {"x": 20}, "c": 3, "d": 4}, userId="ana")
        client = Replica("dm", "m")  # edits as subject-a
        try:
            client.edit("--remove", "c")
        finally:
            client.close()
        v2 = named(self, "dm", "m")
        update(self, "dm", "m", {"a": 1, "b": {"x": 20}, "d": 5}, userId="bo")
        got = diff(self, "dm", "m", **{"from": v1, "to": v2})
        self.assertEqual(got["changes"], {"added": {"d": {"value": 4, "userIds": ["ana"]}},
                                          "removed": {"c": {"value": 3, "userIds": ["subject-a"]}},
                                          "changed": {"b": {"old": 2, "new": {"x": 20}, "userIds": ["ana"]}}})
        now = diff(self, "dm", "m", **{"from": v1})
        self.assertEqual(now["changes"]["added"], {"d": {"value": 5, "userIds": ["ana", "bo"]}})
        self.assertEqual(diff(self, "dm", "m", **{"from": v2})["changes"],
                         {"added": {}, "removed": {}, "changed": {"d": {"old": 4, "new": 5, "userIds": ["bo"]}}})

    def test_xml_diff(self):
        add(self, "dx", "x", "xml", '<doc><p class="a">Hello world</p><q/></doc>')
        v1 = named(self, "dx", "x")
        update(self, "dx", "x", '<doc><p class="b" id="x">Hello big world</p><h1>Title</h1></doc>', userId="ana")
        v2 = named(self, "dx", "x")
        update(self, "dx", "x", '<doc><p id="x">Hello big world</p><h1>Title</h1></doc>', userId="bo")
        got = diff(self, "dx", "x", **{"from": v1, "to": v2})["changes"]
        self.assertEqual("".join(r["text"] for r in got["text"] if r["op"] != "delete"), "Hello big worldTitle")
        self.assertEqual("".join(r["text"] for r in got["text"] if r["op"] != "insert"), "Hello world")
        self.assertEqual([r["text"] for r in got["text"] if r["op"] == "insert"], ["big ", "Title"])
        self.assertEqual(got["elements"], {"added": [{"tag": "h1", "userIds": ["ana"]}], "removed": [{"tag": "q", "userIds": []}]})
        self.assertEqual(got["attributes"], [{"tag": "p", "name": "class", "op": "changed", "old": "a", "new": "b"},
                                             {"tag": "p", "name": "id", "op": "added", "new": "x"}])
        now = diff(self, "dx", "x", **{"from": v2})["changes"]
        self.assertEqual(now["text"], [{"op": "equal", "text": "Hello big worldTitle", "userIds": []}])
        self.assertEqual(now["elements"], {"added": [], "removed": []})
        self.assertEqual(now["attributes"], [{"tag": "p", "name": "class", "op": "removed", "old": "b"}])

    def test_attribution_runs_after_edits_by_two_users(self):
        add(self, "at", "t", "text", "Hello world")
        update(self, "at", "t", "Hello big world", userId="ana")
        update(self, "at", "t", "Hello big world!", userId="bo")
        got = ok(self, call("/v2/crdt/get", dict(ids("at", "t"), attribution=True)), "CRDT data retrieved successfully.")[0]
        self.assertEqual(got["data"], "Hello big world!")
        plain = record(self, "at", "t")
        self.assertNotIn("attribution", plain)
        self.assertEqual({k: v for k, v in got.items() if k != "attribution"}, plain)
        self.assertEqual("".join(r["text"] for r in got["attribution"]), got["data"])
        self.assertEqual([r["userId"] for r in got["attribution"]], ["subject-a", "ana", "subject-a", "bo"])
        self.assertEqual(got["attribution"][1]["text"].strip(), "big")
        self.assertEqual(got["attribution"][3]["text"], "!")
        self.assertEqual(got["attribution"][3]["lastUpdate"], plain["lastUpdate"])
        # Pruned history: the user is not known.
        execute("DELETE FROM crdt_changes WHERE org='%s' AND doc='at'" % ORG)
        got = ok(self, call("/v2/crdt/get", dict(ids("at", "t"), attribution=True)), "CRDT data retrieved successfully.")[0]
        self.assertEqual(got["attribution"], [{"text": "Hello big world!", "userId": None, "lastUpdate": None}])
        # Other types: no attribution; not a boolean: 400.
        add(self, "at", "m", "map", {"k": 1})
        both = ok(self, call("/v2/crdt/get", {"organizationId": ORG, "documentId": "at", "attribution": True}), "CRDT data retrieved successfully.")
        self.assertEqual([("attribution" in r) for r in both], [False, True])
        err(self, call("/v2/crdt/get", dict(ids("at", "t"), attribution="yes")), 400, "INVALID_ARGUMENT", "attribution must be true or false.")

    def test_errors_tokens_and_tenants(self):
        add(self, "de", "t", "text", "one")
        v = named(self, "de", "t")
        err(self, call("/v2/crdt/versions/diff", ids("de", "t")), 400, "INVALID_ARGUMENT", "from is required.")
        err(self, call("/v2/crdt/versions/diff", dict(ids("de", "t"), **{"from": 3})), 400, "INVALID_ARGUMENT",
            "from must be a string that versions/add or versions/get answered.")
        err(self, call("/v2/crdt/versions/diff", dict(ids("de", "t"), **{"from": v, "to": "v99-000000000000"})), 404, "NOT_FOUND",
            "No version found for this versionId.")
        err(self, call("/v2/crdt/versions/diff", dict(ids("de", "t"), **{"from": v, "extra": 1})), 400, "INVALID_ARGUMENT",
            'Unknown field "extra"; versions/diff takes organizationId, documentId, editorId, from and to.')
        minted = ok(self, call("/v2/auth/token", {"organizationId": ORG, "documentId": "de", "userId": "ana", "access": "read"}), "Client token created.")
        read = {"Authorization": "Bearer " + minted["token"]}
        self.assertEqual(diff(self, "de", "t", who=None, headers=read, **{"from": v})["changes"], [{"op": "equal", "text": "one", "userIds": []}])
        # Another tenant's record of the same ids: none there.
        err(self, call("/v2/crdt/versions/diff", dict(ids("de", "t"), **{"from": v}), who="b"), 404, "NOT_FOUND", "No CRDT data found for this editor ID.")


def setUpModule():
    # No automatic version while a test reads its lists (history_test.cpp takes them with an injected clock).
    STACK.fcgi_args = ["--auto-version-quiet", "86400", "--auto-version-at-most", "86400"]
    stack.setUpModule()


tearDownModule = stack.tearDownModule

if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
