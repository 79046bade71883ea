#!/usr/bin/env python3
"""End-to-end fault tests: the responder SIGKILLed at random moments under concurrent writes — REST
updates, comments and folio-cli client replicas (text and array) editing and syncing — (every
acknowledged write survives, every client ends equal to the server, every record decodes and passes
check_invariants()), versions added and restored under SIGKILL (each whole or not at all, every
acknowledged one kept, every listed version readable, versions still usable as baseVersion after
restarts), a client whose answers are lost before it removes what it inserted, and a full database
(writes refused with RESOURCE_EXHAUSTED, reads served, nothing corrupted, writes back once space
returns).

Run by ctest (tests/CMakeLists.txt) as:  faults_e2e.py BUILD_DIR SOURCE_DIR
FOLIO_CRASH_KILLS sets the number of kills (default 20), FOLIO_VERSION_KILLS those of the versions'
test (default 30); FOLIO_CRASH_SEED the random seed.
"""
import http.client
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import unittest
import xml.etree.ElementTree as ET

import stack
from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)

ORG = "faults"


def admin_check(test):
    """folio-admin check on the stack's database: integrity, every record decodes and checks."""
    out = subprocess.run([stack.ADMIN, "--db", STACK.db, "check"], capture_output=True, text=True)
    test.assertEqual(out.returncode, 0, out.stdout + out.stderr)
    test.assertTrue(out.stdout.startswith("ok: "), out.stdout)
    return out.stdout


def record_value(test, doc, editor):
    data = ok(test, call("/v2/crdt/get", {"organizationId": ORG, "documentId": doc, "editorId": editor}), "CRDT data retrieved successfully.")
    test.assertEqual(len(data), 1, data)
    return data[0]["data"]


CLI = os.path.join(stack.BUILD, "tools", "folio-cli")


def folio_cli(state, editor, *args, doc="crash"):
    """folio-cli as a client replica with its state in `state`: (exit status, stdout, stderr)."""
    key, token = CREDS["a"]
    env = dict(os.environ, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token, FOLIO_URL="http://127.0.0.1:%d" % STACK.port)
    r = subprocess.run([CLI, "--org", ORG, "--doc", doc, "--editor", editor, "--state", state, *args], env=env, capture_output=True,
                       text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def kill_responder():
    STACK.fcgi.send_signal(signal.SIGKILL)
    STACK.fcgi.wait()


class Writer(threading.Thread):
    """Writes attempt 0, 1, 2, ... of one record (or comment) until stopped; attempt n's value holds
    everything of attempts 0..n. Remembers which attempts were acknowledged (HTTP 200)."""

    def __init__(self, name, send):
        super().__init__(name=name, daemon=True)
        self.send, self.acked, self.failed, self.attempts = send, [], 0, 0
        self.stopping = threading.Event()

    def run(self):
        n = 0
        while not self.stopping.is_set():
            try:
                status, body = self.send(n)
            except OSError:
                status, body = None, None
            self.attempts += 1
            if status == 200 and body["result"]["status"] == "success" and self.item_ok(n, body):
                self.acked.append(n)
            else:
                self.failed += 1
                time.sleep(0.01)
            n += 1

    def item_ok(self, n, body):
        data = body["result"].get("data")
        if isinstance(data, dict) and data:  # batch answers: the one item's own outcome
            return all(v.get("success") for v in data.values())
        return True


def text_value(n):
    return "".join("line %d\n" % i for i in range(n + 1))


def map_value(n):
    return {"k%d" % i: "v%d" % i for i in range(n + 1)}


def xml_value(n):
    return "<doc>" + "".join('<p n="%d">para %d</p>' % (i, i) for i in range(n + 1)) + "</doc>"


class CheckFindsDamage(unittest.TestCase):
    def test_check_names_every_damaged_record_and_body(self):
        # folio-admin check on a database in which things were damaged by hand (the service refuses to
        # store any of them): a map value that is not JSON in a snapshot that still decodes, a snapshot
        # cut short, a record's log counted wrong and logged past its revision, an annotation body and
        # a comment body that are not JSON, an annotation's row holding comments it does not have, a
        # comment whose annotation is gone. SQLite: in a copy of the file; PostgreSQL: in place, the
        # damaged document removed after the check.
        doc = "damage"
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "m", "type": "map", "data": {"k": "plantedvalue"}}),
           "CRDT data added successfully.")
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "t", "type": "text", "data": "hello"}),
           "CRDT data added successfully.")
        for editor in ("s", "o", "l"):  # "s" loses its snapshot row, "o" its record row (the snapshot left behind)
            ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": editor, "type": "text", "data": "x"}),
               "CRDT data added successfully.")
        # "l" has one logged change (revision 2): its row's log_bytes is made one too many, and the
        # change is renumbered past the record's revision.
        ok(self, call("/v2/crdt/update", {"organizationId": ORG, "documentId": doc, "editorId": "l", "data": "xy"}), "CRDT data updated successfully.")
        logged = STACK.scalar("SELECT length(batch) FROM crdt_log WHERE org = '%s' AND doc = '%s' AND editor = 'l'" % (ORG, doc))
        user = {"userId": "u", "name": "U", "email": "u@example.com"}
        status, body = call("/v2/commentannotations/add", {"organizationId": ORG, "documentId": doc, "commentAnnotations": [
            {"annotationId": "damaged", "from": user, "commentData": [{"commentText": "c", "from": user}]}]})
        self.assertEqual(status, 200, body)
        # "t" loses its last 2 bytes: the decoder stops at its content section, whose 6 bytes (the length 5
        # and "hello", stored: too short to compress) end the snapshot (whose length varies with the random
        # incarnation: its varint takes 8 or 9 bytes).
        # Text snapshots are of format 3 (FORMAT.md): the last section holds the removed values (none here:
        # a stored empty section, 2 bytes), which the truncation below takes away.
        removed_at = STACK.scalar("SELECT length(snapshot) - 2 FROM crdt_snapshots WHERE org = '%s' AND doc = '%s' AND editor = 't'" % (ORG, doc))
        if STACK.postgresql:
            copy = STACK.db
            where_doc = "org = '%s' AND doc = '%s'" % (ORG, doc)
            self.assertEqual(STACK.scalar("SELECT count(*) FROM crdt_snapshots WHERE %s AND editor = 'm' AND position('\"plantedvalue\"'::bytea IN snapshot) > 0"
                                          % where_doc), 1)
            tenant = subprocess.run(["psql", "-X", "-At", "-c", "SELECT tenant FROM crdt_records WHERE %s AND editor = 'm'" % where_doc, STACK.db],
                                    check=True, capture_output=True, text=True).stdout.strip()
            damage = """
                UPDATE crdt_snapshots SET snapshot = overlay(snapshot PLACING 'plantedvalue!!'::bytea
                    FROM position('"plantedvalue"'::bytea IN snapshot)) WHERE {w} AND editor = 'm';
                UPDATE crdt_snapshots SET snapshot = substring(snapshot FROM 1 FOR length(snapshot) - 2) WHERE {w} AND editor = 't';
                DELETE FROM crdt_snapshots WHERE {w} AND editor = 's';
                DELETE FROM crdt_records WHERE {w} AND editor = 'o';
                UPDATE crdt_records SET log_bytes = log_bytes + 1 WHERE {w} AND editor = 'l';
                UPDATE crdt_log SET revision = 9 WHERE {w} AND editor = 'l';
                UPDATE annotations SET body = '{{"annotationId":' WHERE {w} AND annotation_id = 'damaged';
                UPDATE annotation_comments SET body = '[]' WHERE aid = (SELECT aid FROM annotations WHERE {w} AND annotation_id = 'damaged');
                UPDATE annotations SET comments = '{{}}' WHERE {w} AND annotation_id = 'damaged';
                INSERT INTO annotation_comments (aid, position, comment_id, body) VALUES (-1, 1, 1, '{{}}');""".format(w=where_doc)
            subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", damage, STACK.db], check=True)
            self.addCleanup(subprocess.run, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                                             "DELETE FROM crdt_log WHERE {w}; DELETE FROM crdt_snapshots WHERE {w}; DELETE FROM crdt_records WHERE {w}; "
                                             "DELETE FROM annotation_comments WHERE aid = -1 OR aid IN (SELECT aid FROM annotations WHERE {w}); "
                                             "DELETE FROM annotations WHERE {w};".format(w=where_doc),
                                             STACK.db], check=True)
        else:
            copy = os.path.join(STACK.dir, "damaged.db")
            src, dst = sqlite3.connect(STACK.db), sqlite3.connect(copy)
            src.backup(dst)
            src.close()
            tenant, snapshot = dst.execute("SELECT tenant, snapshot FROM crdt_snapshots WHERE org=? AND doc=? AND editor='m'", (ORG, doc)).fetchone()
            self.assertEqual(snapshot.count(b'"plantedvalue"'), 1)
            dst.execute("UPDATE crdt_snapshots SET snapshot=? WHERE org=? AND doc=? AND editor='m'",
                        (snapshot.replace(b'"plantedvalue"', b'plantedvalue!!'), ORG, doc))  # same length: still decodes
            dst.execute("UPDATE crdt_snapshots SET snapshot=substr(snapshot, 1, length(snapshot) - 2) WHERE org=? AND doc=? AND editor='t'", (ORG, doc))
            dst.execute("DELETE FROM crdt_snapshots WHERE org=? AND doc=? AND editor='s'", (ORG, doc))
            dst.execute("DELETE FROM crdt_records WHERE org=? AND doc=? AND editor='o'", (ORG, doc))
            dst.execute("UPDATE crdt_records SET log_bytes = log_bytes + 1 WHERE org=? AND doc=? AND editor='l'", (ORG, doc))
            dst.execute("UPDATE crdt_log SET revision = 9 WHERE org=? AND doc=? AND editor='l'", (ORG, doc))
            dst.execute("UPDATE annotations SET body='{\"annotationId\":' WHERE org=? AND doc=? AND annotation_id='damaged'", (ORG, doc))
            dst.execute("UPDATE annotation_comments SET body='[]' WHERE aid = (SELECT aid FROM annotations WHERE org=? AND doc=? AND annotation_id='damaged')",
                        (ORG, doc))
            dst.execute("UPDATE annotations SET comments='{}' WHERE org=? AND doc=? AND annotation_id='damaged'", (ORG, doc))
            dst.execute("INSERT INTO annotation_comments (aid, position, comment_id, body) VALUES (-1, 1, 1, '{}')")  # a comment without its annotation
            dst.commit()
            dst.close()
        out = subprocess.run([stack.ADMIN, "--db", copy, "check"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertTrue(out.stdout.startswith("FAILED: "), out.stdout)
        self.assertTrue(out.stdout.endswith(", 10 problems\n"), out.stdout)
        where = "%s / %s / %s / " % (tenant, ORG, doc)
        self.maxDiff = None
        self.assertEqual(out.stderr.splitlines(), [
            "folio-admin check: record " + where + "l: log has %d bytes, row says %d" % (logged, logged + 1),
            "folio-admin check: record " + where + "l: a change is logged under revision 9, past the record's 2",
            "folio-admin check: record " + where + "m: map value is not valid JSON: invalid value (at byte 0)",
            "folio-admin check: record " + where + "s: the record has no snapshot (no row in crdt_snapshots)",
            "folio-admin check: record " + where + "t: snapshot does not decode: truncated input at byte %d (removed values)" % removed_at,
            "folio-admin check: snapshot " + where + "o: no record has it",
            "folio-admin check: comment 1 of annotation key -1: no annotation has it",
            "folio-admin check: annotation " + where + "damaged: the comments its row holds are not its comments",
            "folio-admin check: annotation " + where + "damaged: body does not parse: Body is not valid JSON: invalid value (at byte 16).",
            "folio-admin check: comment " + where + "damaged / 1: body is not a JSON object",
        ])


class CrashDurability(unittest.TestCase):
    def test_every_acknowledged_write_survives_sigkill_at_random_moments(self):
        kills = int(os.environ.get("FOLIO_CRASH_KILLS", "20"))
        rng = random.Random(int(os.environ.get("FOLIO_CRASH_SEED", str(int(time.time())))))
        doc = "crash"
        for editor, type_, data in (("t", "text", ""), ("m", "map", {}), ("x", "xml", "<doc/>")):
            ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": editor, "type": type_, "data": data}),
               "CRDT data added successfully.")
        user = {"userId": "u", "name": "U", "email": "u@example.com"}
        status, body = call("/v2/commentannotations/add", {"organizationId": ORG, "documentId": doc, "commentAnnotations": [
            {"annotationId": "thread", "from": user, "commentData": [{"commentText": "start", "from": user}]}]})
        self.assertEqual(status, 200, body)

        def update(editor, value):
            return lambda n: call("/v2/crdt/update", {"organizationId": ORG, "documentId": doc, "editorId": editor, "data": value(n)})

        def comment(n):
            return call("/v2/commentannotations/comments/add", {"organizationId": ORG, "documentId": doc, "annotationId": "thread",
                                                                 "commentData": [{"commentText": "c%d" % n, "from": user}]})

        # Client replicas: folio-cli edits its local copy, saves it, then syncs; an edit whose answer a
        # kill cut off is sent again by the client's next run (never made again under the same op ids).
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "cli", "type": "text", "data": ""}),
           "CRDT data added successfully.")
        states = [os.path.join(STACK.dir, "crash-client-%d.state" % i) for i in range(2)]
        for st in states:
            code, _, stderr = folio_cli(st, "cli", "sync")
            self.assertEqual(code, 0, stderr)

        def client_edit(i):
            def send(n):
                code, _, _ = folio_cli(states[i], "cli", "edit", "--insert", "0", "[c%d.%d]" % (i, n))
                return (200, {"result": {"status": "success"}}) if code == 0 else (None, None)
            return send

        # An array client: its run n inserts {"a": n}, the next {"b": n + 1} above it, the next removes
        # that item again — often before the server answered the insert. Its state then keeps no value
        # for the item (no document encoding keeps removed values), and the insert goes again with an
        # empty one, along with its remove.
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "cli-array", "type": "array", "data": []}),
           "CRDT data added successfully.")
        array_state = os.path.join(STACK.dir, "crash-array-client.state")
        code, _, stderr = folio_cli(array_state, "cli-array", "sync")
        self.assertEqual(code, 0, stderr)

        def array_edit(n):
            if n % 3 == 2:
                edit = ("--delete", "0", "1")
            else:
                edit = ("--insert", "0", json.dumps({"a" if n % 3 == 0 else "b": n}))
            code, _, _ = folio_cli(array_state, "cli-array", "edit", *edit)
            return (200, {"result": {"status": "success"}}) if code == 0 else (None, None)

        writers = {"t": Writer("text", update("t", text_value)), "m": Writer("map", update("m", map_value)),
                   "x": Writer("xml", update("x", xml_value)), "c": Writer("comments", comment),
                   "client0": Writer("client 0", client_edit(0)), "client1": Writer("client 1", client_edit(1)),
                   "client-array": Writer("array client", array_edit)}
        for w in writers.values():
            w.start()
        try:
            for _ in range(kills):
                # Let the writers get going again after the restart, then kill at a random moment.
                start = sum(len(w.acked) for w in writers.values())
                deadline = time.time() + 10
                while sum(len(w.acked) for w in writers.values()) < start + 4 and time.time() < deadline:
                    time.sleep(0.005)
                time.sleep(rng.uniform(0, 0.15))
                kill_responder()
                time.sleep(rng.uniform(0, 0.05))
                STACK.start_fcgi()
        finally:
            for w in writers.values():
                w.stopping.set()
            for w in writers.values():
                w.join(30)

        for key, w in writers.items():
            if key.startswith("client"):  # a folio-cli run is a process (slow under ASan): edits went on
                self.assertGreater(len(w.acked), 0, w.name)
            else:
                self.assertGreater(len(w.acked), kills, w.name)  # writes went on between the kills
        # A record's final value is the last acknowledged attempt's or a later one's (an attempt cut off
        # by a kill may have committed before it could answer); never an earlier one.
        final_text = record_value(self, doc, "t")
        n = final_text.count("\n") - 1
        self.assertEqual(final_text, text_value(n))
        self.assertGreaterEqual(n, writers["t"].acked[-1])
        final_map = record_value(self, doc, "m")
        n = len(final_map) - 1
        self.assertEqual(final_map, map_value(n))
        self.assertGreaterEqual(n, writers["m"].acked[-1])
        paragraphs = ET.fromstring(record_value(self, doc, "x")).findall("p")
        self.assertEqual([(p.get("n"), p.text) for p in paragraphs], [(str(i), "para %d" % i) for i in range(len(paragraphs))])
        self.assertGreaterEqual(len(paragraphs) - 1, writers["x"].acked[-1])
        status, body = call("/v1/commentannotations/get", {"organizationId": ORG, "documentId": doc})
        self.assertEqual(status, 200, body)
        [thread] = [a for a in body["result"]["data"] if a["annotationId"] == "thread"]
        texts = [c["commentText"] for c in thread["comments"]]
        for n in writers["c"].acked:
            self.assertIn("c%d" % n, texts)
        self.assertEqual(len(texts), len(set(texts)))  # no comment stored twice
        ids = [c["commentId"] for c in thread["comments"]]
        self.assertEqual(len(ids), len(set(ids)))
        # Every client syncs twice (the first round pushes what each still holds unsent, the second
        # brings each the others'); then each equals the server, and the server holds every edit a
        # client made (acknowledged or not: each was saved before it was sent), each once.
        values = []
        for _ in range(2):
            values = []
            for st in states:
                code, out, stderr = folio_cli(st, "cli", "sync")
                self.assertEqual(code, 0, stderr)
                values.append(json.loads(out.strip().splitlines()[-1]))
        final_cli = record_value(self, doc, "cli")
        for i, value in enumerate(values):
            self.assertEqual(value, final_cli, "client %d" % i)
        for i in range(len(states)):
            w = writers["client%d" % i]
            for n in range(w.attempts):
                self.assertEqual(final_cli.count("[c%d.%d]" % (i, n)), 1, "client %d edit %d (acknowledged: %s)" % (i, n, n in w.acked))
        # The array client holds, and the server with it, exactly what its runs did (every edit was saved
        # before it was sent): every {"a": n}, newest first, and {"b": n} only if the last run inserted it.
        expected = []
        for n in range(writers["client-array"].attempts):
            if n % 3 == 2:
                expected.pop(0)
            else:
                expected.insert(0, {"a" if n % 3 == 0 else "b": n})
        for _ in range(2):
            code, out, stderr = folio_cli(array_state, "cli-array", "sync")
            self.assertEqual(code, 0, stderr)
        self.assertEqual(json.loads(out.strip().splitlines()[-1]), expected)
        self.assertEqual(record_value(self, doc, "cli-array"), expected)
        # Every record decodes from snapshot + log and passes check_invariants(); SQLite's integrity check holds.
        print("\n%d kills; acknowledged %s; unanswered or refused %s; %s" % (
            kills, {w.name: len(w.acked) for w in writers.values()}, {w.name: w.failed for w in writers.values()}, admin_check(self).strip()),
            file=sys.stderr)


class VersionsUnderKill(unittest.TestCase):
    """Versions taken and restored while the responders are SIGKILLed: one writer thread adds versions,
    restores them and updates the record (with the version it read as baseVersion), one request at a
    time, reading the record and its version list before and after each write; the test kills every
    responder after a random number of the writer's requests started (and a random moment more), then
    starts them again. Each write's outcome is then checked against the reads around it: acknowledged,
    it happened; unacknowledged, it happened whole or not at all (a restore: its backup version AND the
    restored value, or neither)."""

    def setUp(self):
        # No automatic version but the restores' backups (the list must change only by the writer's requests).
        self.restart(["--auto-version-quiet", "86400", "--auto-version-at-most", "86400"])

    def tearDown(self):
        self.restart([])

    def restart(self, args):
        STACK.fcgi.terminate()
        STACK.fcgi.wait()
        STACK.fcgi_args = args
        STACK.start_fcgi()

    def test_versions_and_restores_are_whole_and_kept_across_sigkill(self):
        kills = int(os.environ.get("FOLIO_VERSION_KILLS", "30"))
        seed = int(os.environ.get("FOLIO_CRASH_SEED", str(int(time.time()))))
        rng, writer_rng = random.Random(seed), random.Random(seed + 1)
        ids = {"organizationId": ORG, "documentId": "versions-kill", "editorId": "t"}
        ok(self, call("/v2/crdt/add", dict(ids, type="text", data="value 0\n")), "CRDT data added successfully.")
        started, in_flight = [0], [None]  # the writer's requests started, the last one's path
        counted = threading.Condition()
        values = {}  # versionId -> its value, as versions/get answered it (a version's value never changes)

        def request(path, data):
            with counted:
                started[0] += 1
                in_flight[0] = path
                counted.notify_all()
            try:
                # A kill in the middle of an answer leaves it cut short, and nginx may keep the connection
                # open: no answer in 10 s is an unanswered request (none takes near that long here).
                return call(path, dict(ids, **data), timeout=10)
            except (OSError, http.client.HTTPException):  # the connection cut by the kill
                return None, None

        def answered(res, message):
            status, body = res
            if status == 200 and body["result"]["status"] == "success":
                self.assertEqual(body["result"]["message"], message)
                return body["result"].get("data", {})  # crdt/update answers no data
            self.assertIn(status, (None, 502, 503, 504), body)  # the responder gone (nginx's 502), or not yet back
            return None

        def read():
            """(value, version, [(versionId, kind)] newest first), retried until the responders answer."""
            while True:
                got = answered(request("/v2/crdt/get", {}), "CRDT data retrieved successfully.")
                listed = answered(request("/v2/crdt/versions/get", {"pageSize": 1000}), "Versions fetched successfully.")
                if got is None or listed is None:
                    time.sleep(0.01)  # the responders are not back yet: as the other writers here, a short pause
                    continue
                for v in listed:
                    if v["versionId"] not in values:
                        one = answered(request("/v2/crdt/versions/get", {"versionId": v["versionId"]}), "Version retrieved successfully.")
                        if one is None:
                            break
                        values[v["versionId"]] = one[0]["data"]
                else:
                    return got[0]["data"], got[0]["version"], [(v["versionId"], v["kind"]) for v in listed]

        steps = []  # (op, before, answer or None, after, detail)
        stopping = threading.Event()
        failure = []

        def write():
            n = 0
            try:
                before = read()
                while not stopping.is_set():
                    n += 1
                    value, version, listed = before
                    targets = [vid for vid, _ in listed if values[vid] != value]
                    op = writer_rng.choice(["update", "update", "add", "restore"] if targets else ["update", "add"])
                    if op == "update":
                        detail = value + "value %d\n" % n  # sent with the version just read: merged, it is exactly this
                        answer = answered(request("/v2/crdt/update", {"data": detail, "baseVersion": version}), "CRDT data updated successfully.")
                    elif op == "add":
                        detail = "v%d" % n
                        answer = answered(request("/v2/crdt/versions/add", {"name": detail}), "Version added successfully.")
                    else:
                        detail = writer_rng.choice(targets)
                        answer = answered(request("/v2/crdt/versions/restore", {"versionId": detail}), "Version restored successfully.")
                    after = read()
                    steps.append((op, before, answer, after, detail))
                    before = after
            except Exception:  # reported by the test's thread
                failure.append(traceback.format_exc())
                with counted:
                    counted.notify_all()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            for _ in range(kills):
                with counted:
                    target = started[0] + rng.randint(1, 8)
                    self.assertTrue(counted.wait_for(lambda: started[0] >= target or failure, 60), "the writer stalled in " + str(in_flight[0]))
                time.sleep(rng.uniform(0, 0.02))  # a random moment of the request's course
                kill_responder()
                STACK.start_fcgi()
        finally:
            stopping.set()
            writer.join(120)
        self.assertFalse(failure, failure)
        self.assertFalse(writer.is_alive())

        acked = {op: 0 for op in ("update", "add", "restore")}
        unacked = {op: 0 for op in ("update", "add", "restore")}
        committed_unacked = dict(unacked)
        for op, (value, version, listed), answer, (value_after, version_after, listed_after), detail in steps:
            where = "%s %s (acknowledged: %s)" % (op, detail, answer is not None)
            (acked if answer is not None else unacked)[op] += 1
            new = [v for v in listed_after if v not in listed]
            if answer is None and (new or value_after != value):
                committed_unacked[op] += 1
            self.assertEqual([v for v in listed_after if v in listed], listed, where)  # no version lost
            if op == "update":
                self.assertEqual(new, [], where)
                self.assertIn(value_after, [detail] if answer is not None else [value, detail], where)
            elif op == "add":
                self.assertEqual(value_after, value, where)
                self.assertIn(len(new), (1,) if answer is not None else (0, 1), where)
                if new:
                    self.assertEqual(new[0][1], "named", where)
                    self.assertEqual(values[new[0][0]], value, where)  # the state it was taken of
                if answer is not None:
                    self.assertEqual(new[0][0], answer["versionId"], where)
                    self.assertEqual(answer["name"], detail, where)
            else:
                # Whole or not at all: the backup (an automatic version of the value replaced) and the
                # restored value together, or neither.
                if answer is not None or new:
                    self.assertEqual(len(new), 1, where)
                    self.assertEqual(new[0][1], "auto", where)
                    self.assertEqual(values[new[0][0]], value, where)
                    self.assertEqual(value_after, values[detail], where)
                    if answer is not None:
                        self.assertEqual(new[0][0], answer["backupVersionId"], where)
                        self.assertEqual(version_after, answer["version"], where)
                else:
                    self.assertEqual(value_after, value, where)
        self.assertGreater(acked["add"], 0, acked)
        self.assertGreater(acked["restore"], 0, acked)
        self.assertGreater(sum(unacked.values()), 0, "no kill cut off a write")

        # After the last restart: every version listed has its value, and the version crdt/get answers
        # still merges as baseVersion (an edit made on it, then a write from an older read beside it).
        final, version, listed = read()
        self.assertEqual(len(listed), len(set(listed)))
        for vid, _ in listed:
            got = ok(self, call("/v2/crdt/versions/get", dict(ids, versionId=vid)), "Version retrieved successfully.")
            self.assertEqual(got[0]["data"], values[vid])
        kill_responder()
        STACK.start_fcgi()
        ok(self, call("/v2/crdt/update", dict(ids, data="head\n" + final, baseVersion=version)), "CRDT data updated successfully.")
        ok(self, call("/v2/crdt/update", dict(ids, data=final + "tail\n", baseVersion=version)), "CRDT data updated successfully.")
        self.assertEqual(record_value(self, "versions-kill", "t"), "head\n" + final + "tail\n")
        admin_check(self)
        print("\n%d kills; acknowledged %s; unacknowledged %s, of which committed %s; %d versions" % (
            kills, acked, unacked, committed_unacked, len(listed)), file=sys.stderr)


class LostAnswers(unittest.TestCase):
    def test_an_array_item_removed_before_its_insert_was_answered_is_synced(self):
        # folio-cli inserts an array item and saves, and the answer is lost: the push never reached the
        # server (--offline stands for that), or it did and the client never heard (a copy of the state
        # saved before the sync stands for that client). The next run removes the item, and its answer
        # is lost too (--offline). The saved state keeps no value for the item, so the next sync sends
        # the insert again with an empty value, along with its remove: the server takes it (before, it
        # answered that sync and every later one with 400 "array item is not valid JSON").
        doc = "lost-answers"
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "arr", "type": "array", "data": [{"a": 1}]}),
           "CRDT data added successfully.")
        for reached in (False, True):
            state = os.path.join(STACK.dir, "lost-answer-%s.state" % reached)
            code, _, stderr = folio_cli(state, "arr", "sync", doc=doc)
            self.assertEqual(code, 0, stderr)
            code, _, stderr = folio_cli(state, "arr", "edit", "--insert", "1", '{"b": 2}', "--offline", doc=doc)
            self.assertEqual(code, 0, stderr)
            if reached:
                shutil.copyfile(state, state + ".lost")
                code, _, stderr = folio_cli(state, "arr", "sync", doc=doc)
                self.assertEqual(code, 0, stderr)
                self.assertEqual(record_value(self, doc, "arr"), [{"a": 1}, {"b": 2}])
                state += ".lost"  # the client that never heard the answer; the other copy is dropped
            code, _, stderr = folio_cli(state, "arr", "edit", "--delete", "1", "1", "--offline", doc=doc)
            self.assertEqual(code, 0, stderr)
            for _ in range(2):
                code, out, stderr = folio_cli(state, "arr", "sync", doc=doc)
                self.assertEqual(code, 0, stderr)
                self.assertEqual(json.loads(out.strip().splitlines()[-1]), [{"a": 1}])
            self.assertEqual(record_value(self, doc, "arr"), [{"a": 1}])
        admin_check(self)


class DatabaseDown(unittest.TestCase):
    @unittest.skipUnless(STACK.postgresql, "a PostgreSQL outage (FOLIO_TEST_DB=postgresql)")
    def test_postgresql_stopped_answers_json_503_and_writes_resume_after_its_restart(self):
        ids = {"organizationId": ORG, "documentId": "down", "editorId": "e"}
        ok(self, call("/v2/crdt/add", dict(ids, type="text", data="before")), "CRDT data added successfully.")
        STACK.pg("down")
        try:
            for _ in range(8):  # more requests than workers: each worker meets the outage
                err(self, call("/v2/crdt/update", dict(ids, data="during")), 503, "UNAVAILABLE", "The database is unavailable; retry the request.")
                err(self, call("/v2/crdt/get", ids), 503, "UNAVAILABLE", "The database is unavailable; retry the request.")
            self.assertIsNone(STACK.fcgi.poll())  # no crash
        finally:
            STACK.pg("up")
        for _ in range(8):  # every worker reconnects on its next request, without a restart of folio-fcgi
            ok(self, call("/v2/crdt/update", dict(ids, data="after")), "CRDT data updated successfully.")
        self.assertEqual(record_value(self, "down", "e"), "after")
        admin_check(self)


class FullDisk(unittest.TestCase):
    def restart(self, *args):
        STACK.fcgi.terminate()
        STACK.fcgi.wait()
        STACK.fcgi_args = list(args)
        STACK.start_fcgi()

    def tearDown(self):
        if STACK.fcgi_args:
            self.restart()

    @unittest.skipIf(STACK.postgresql, "SQLite's page cap (--max-db-pages)")
    def test_writes_refused_reads_served_and_writes_back_when_space_returns(self):
        doc = "full"
        ok(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "e", "type": "text", "data": ""}),
           "CRDT data added successfully.")
        with sqlite3.connect(STACK.db) as raw:
            pages = raw.execute("PRAGMA page_count").fetchone()[0] + raw.execute("PRAGMA freelist_count").fetchone()[0]
        self.restart("--max-db-pages", str(pages + 8))
        rng = random.Random(7)
        acked, refused = "", None
        for i in range(300):
            value = acked + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3000))
            res = call("/v2/crdt/update", {"organizationId": ORG, "documentId": doc, "editorId": "e", "data": value})
            if res[0] != 200:
                refused = res
                break
            acked = value
        self.assertIsNotNone(refused, "the capped database never filled")
        err(self, refused, 429, "RESOURCE_EXHAUSTED", "The database is full; the change was not stored.")
        incompressible = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(20000))  # a snapshot compresses "x" * 20000 to bytes
        err(self, call("/v2/crdt/add", {"organizationId": ORG, "documentId": doc, "editorId": "new", "type": "text", "data": incompressible}),
            429, "RESOURCE_EXHAUSTED", "The database is full; the change was not stored.")
        # Reads are served, with the last acknowledged value; readiness reports the cause.
        self.assertEqual(record_value(self, doc, "e"), acked)
        status, body = call("/v1/commentannotations/get", {"organizationId": ORG, "documentId": doc})
        self.assertEqual(status, 200, body)
        err(self, call("/healthz", method="GET", who=None, content_type=None, body=b""), 503, "UNAVAILABLE",
            "Not ready: the database is full (its page cap is reached).")
        self.assertEqual(call("/healthz?live", method="GET", who=None, content_type=None, body=b"")[0], 200)
        admin_check(self)
        # Space returns (the cap lifted, as when the disk is grown): writes succeed again.
        self.restart()
        ok(self, call("/v2/crdt/update", {"organizationId": ORG, "documentId": doc, "editorId": "e", "data": acked + "!"}),
           "CRDT data updated successfully.")
        self.assertEqual(record_value(self, doc, "e"), acked + "!")
        self.assertEqual(call("/healthz", method="GET", who=None, content_type=None, body=b"")[0], 200)
        admin_check(self)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
