"""End-to-end tests of what one record can hold (docs/API.md, "What a record holds"; issue 49, items 1
and 3): hostile but well-formed sequences of writes near each limit, sent through nginx as an API key
or a browser's write token would send them, then a restart of folio-fcgi, every record read back, and
`folio-admin check` clean.

- The issue's write-token sequence: on a 100,000-character text, 1,100 removes of the whole removed
  text (21 bytes each; 110 million seqs of the client's, past what a text may hold had each removed
  item counted): all stored, one unit each; after a restart the record reads, syncs and takes the
  owner's update.
- An array replaced by value until it holds the most units an array can (2^22: folio::document::max_units):
  every update up to the limit is stored, the next is refused with 400 FAILED_PRECONDITION; after a
  restart the record reads and syncs.
- A write token's removes whose Lamport values climb by their (removed) length each push: refused (the
  Lamport headroom rule keeps the clock within the record's changed units plus 1,024, once), and the
  owner's update goes on.
- A text filled to exactly its limit by inserts (and one remove), then stored past it (as an earlier
  build let one be): `folio-admin check` names it, `export` prints its value and `repair` gives it a
  fresh history; then it reads back and checks clean.

The pushes are a text client's batches of one op (replica 77, its own items), written here byte by byte
as the engine's encoder writes them (include/folio/encoding.hpp, sequence_op_format: the single-op
reading, read_single_op_text). The sizes come from the limits' definitions, so that each sequence
crosses its limit in a few dozen to a hundred requests.

Run by ctest (tests/CMakeLists.txt) as:  limits_e2e.py BUILD_DIR SOURCE_DIR
"""
import base64
import os
import sqlite3
import subprocess
import sys
import unittest

import stack
from stack import *  # noqa: F401,F403 (the stack, its credentials and HTTP helpers)
from varints import varint

TEXT_MAX_UNITS = 1 << 26   # folio::document::max_units(text): folio::text::default_max_ops
ARRAY_MAX_UNITS = 1 << 22  # folio::document::max_units(array): folio::array::default_max_ops
LAMPORT_SLACK = 1024       # folio::document::lamport_slack
MAX_COUNTER = (1 << 31) - 1
CLIENT = 77                # the pushing client's replica id
ORG, DOC = "limits-org", "limits-doc"
CHUNK = 2_250_000          # characters of one insert push: its base64 stays below stack.RESPONDER_MAX_BODY


def zigzag(n):
    return (n << 1) if n >= 0 else ((-n) << 1) - 1


HEADER = b"Fo\x01B\x01"  # "Fo", format version 1, a batch, of text


def insert_batch(seq, lamport, text):
    """Client's insert of `text` at the document start: its ops seq.., Lamport values lamport.."""
    data = text.encode()
    n = len(text)
    flags = 0x02 | 0x04 | 0x08 | (0x10 if n != 1 else 0) | 0x20  # replica, seq, Lamport, length, reference replica
    body = b"\x01" + varint(CLIENT) + b"\x01" + bytes([flags]) + b"\x00" + varint(seq) + varint(zigzag(lamport))
    body += (varint(n) if n != 1 else b"") + b"\x00" + varint(len(data)) + data  # reference replica 0: the document start
    return HEADER + body


def remove_batch(seq, lamport, first, n):
    """Client's remove (op seq.., Lamport values lamport..) of its own items first..first+n-1."""
    flags = 0x01 | 0x02 | 0x04 | 0x08 | (0x10 if n != 1 else 0)  # remove, replica, seq, Lamport, length
    body = b"\x01" + varint(CLIENT) + b"\x01" + bytes([flags]) + b"\x00" + varint(seq) + varint(zigzag(lamport))
    body += (varint(n) if n != 1 else b"") + varint(zigzag(first - (seq - 1))) + b"\x00"
    return HEADER + body


def ids(editor):
    return {"organizationId": ORG, "documentId": DOC, "editorId": editor}


def mint():
    status, answer = call("/v2/auth/token", {"organizationId": ORG, "documentId": DOC, "userId": "tab", "access": "write"})
    assert status == 200, answer
    return answer["result"]["data"]["token"]


class Client:
    """A browser's write token pushing its own batches to one text record."""

    def __init__(self, test, editor):
        self.test, self.editor, self.token, self.incarnation = test, editor, mint(), None
        ok(test, call("/v2/crdt/add", dict(ids(editor), type="text", data="")), "CRDT data added successfully.")
        status, answer = self.sync(None, "AA==")
        test.assertEqual(status, 200, answer)
        self.incarnation = answer["result"]["data"]["incarnation"]
        self.version = answer["result"]["data"]["version"]

    def sync(self, update, version=None):
        data = dict(ids(self.editor), version=version or self.version)
        if self.incarnation:
            data["incarnation"] = self.incarnation
        if update is not None:
            data["update"] = base64.b64encode(update).decode()
        return call("/v2/crdt/sync", data, who=None, headers={"Authorization": "Bearer " + self.token})

    def push(self, batch):
        """(HTTP status, answer); on success the client's version is the server's (nothing to pull)."""
        status, answer = self.sync(batch)
        if status == 200:
            self.version = answer["result"]["data"]["version"]
        return status, answer


def restart():
    STACK.fcgi.terminate()
    STACK.fcgi.wait()
    STACK.start_fcgi()


def value(test, editor):
    status, answer = call("/v2/crdt/get", ids(editor))
    test.assertEqual(status, 200, answer)
    return answer["result"]["data"][0]["data"]


def admin_check(test):
    out = subprocess.run([stack.ADMIN, "--db", STACK.db, "check"], capture_output=True, text=True)
    test.assertEqual(out.returncode, 0, out.stdout + out.stderr)
    return out.stdout


def past_limit(test, res):
    status, answer = res
    test.assertEqual(status, 400, answer)
    test.assertEqual(answer["error"]["status"], "FAILED_PRECONDITION", answer)
    test.assertIn("add the record's value as a new record", answer["error"]["message"].replace("Add its value", "add the record's value"))


class WhatARecordHolds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A cache that keeps these records (a full text record is about 100 MB decoded; one over a
        # quarter of --cache-mb is decoded again on every request, docs/OPERATIONS.md "Memory"), so that
        # each push integrates into the cached record: the limits are what is tested, not the decoder.
        STACK.fcgi_args = ["--cache-mb", "2048"]
        restart()

    @classmethod
    def tearDownClass(cls):
        STACK.fcgi_args = []
        restart()

    def test_removes_of_removed_text_hold_one_unit_each_and_the_record_reads_back_after_a_restart(self):
        # The browser-token reproduction: each push removes the whole (removed) 100,000-character
        # text again. Counted by the items it names, each added 100,000 units and the 670th filled the
        # record; a remove now holds one unit, however long its range.
        n = 100_000
        c = Client(self, "removed-again")
        self.assertEqual(c.push(insert_batch(0, 1, "a" * n))[0], 200)
        self.assertEqual(c.push(remove_batch(n, n + 1, 0, n))[0], 200)
        seq = 2 * n
        for i in range(1100):
            batch = remove_batch(seq, 1, 0, n)  # a low Lamport value: the headroom rule allows it
            self.assertLess(len(batch), 40)  # a few dozen bytes however long its range
            status, answer = c.push(batch)
            self.assertEqual(status, 200, (i, answer))
            seq += n
        self.assertGreater(seq, TEXT_MAX_UNITS)
        restart()
        self.assertEqual(value(self, "removed-again"), "")
        status, answer = c.sync(None, "AA==")
        self.assertEqual(status, 200, answer)
        ok(self, call("/v2/crdt/update", dict(ids("removed-again"), data="x")), "CRDT data updated successfully.")
        self.assertEqual(c.push(remove_batch(seq, 1, 0, n))[0], 200)
        restart()
        self.assertEqual(value(self, "removed-again"), "x")
        admin_check(self)

    def test_an_array_replaced_until_the_limit_is_refused_and_reads_back_after_a_restart(self):
        # The API-key reproduction: 40,000 objects replaced by others, 40,000 inserted units
        # and the removes of the old ones each time.
        n = 40_000
        editor = "replaced"
        ok(self, call("/v2/crdt/add", dict(ids(editor), type="array", data=[{"i": k} for k in range(n)])), "CRDT data added successfully.")
        accepted, refused, last = 0, None, "i"
        for k in range(ARRAY_MAX_UNITS // n + 2):
            name = "j" if k % 2 == 0 else "i"
            res = call("/v2/crdt/update", dict(ids(editor), data=[{name: v} for v in range(n)]))
            if res[0] != 200:
                refused = res
                break
            accepted, last = accepted + 1, name
        past_limit(self, refused)
        # "This record holds H operations (...) and the change would take it to A, past the L an array
        # record can hold": every update added A - H units, and the record holds what they added.
        words = refused[1]["error"]["message"].split()
        held, after = int(words[words.index("holds") + 1]), int(words[words.index("to") + 1].rstrip(","))
        self.assertLessEqual(held, ARRAY_MAX_UNITS)
        self.assertGreater(after, ARRAY_MAX_UNITS)
        self.assertEqual(held, n + accepted * (after - held), refused)
        self.assertLess(after - held, 2 * n)  # the removes count one each, not one per element
        restart()
        got = value(self, editor)
        self.assertEqual(len(got), n)
        self.assertEqual(got[-1], {last: n - 1})
        status, answer = call("/v2/crdt/sync", dict(ids(editor), version="AA=="))
        self.assertEqual(status, 200, answer)
        admin_check(self)

    def test_a_write_token_cannot_climb_the_clock_with_removes_of_removed_text(self):
        # Each remove's Lamport value one above the record's clock, over the whole removed text: before,
        # the clock rose by the text's length each push and reached 2^31 - 1 (the owner's updates then
        # failed). Only units that change the record count now, plus the documented slack.
        n = 1_500_000
        c = Client(self, "climb")
        seq = clock = 0
        for _ in range(4):
            self.assertEqual(c.push(insert_batch(seq, clock + 1, "b" * n))[0], 200)
            seq, clock = seq + n, clock + n
        # The four inserts are one run each, in the order pushed: remove them with one op each, as typed.
        # Items of insert i are seqs i*n .. i*n+n-1.
        for i in range(4):
            self.assertEqual(c.push(remove_batch(seq, clock + 1, i * n, n))[0], 200)
            seq, clock = seq + n, clock + n
        climbs = 0
        while clock + 1 + n - 1 <= MAX_COUNTER and climbs < 2000:
            status, answer = c.push(remove_batch(seq, clock + 1, 0, n))
            climbs += 1
            if status == 200:  # what a build without the rule does: the clock jumps by n
                seq, clock = seq + n, clock + n
                continue
            self.assertEqual(status, 400, answer)
            self.assertEqual(answer["error"]["status"], "INVALID_ARGUMENT", answer)
            self.assertIn("the Lamport headroom rule", answer["error"]["message"])
            break
        self.assertLess(clock, 8 * n + LAMPORT_SLACK, "the clock climbed")
        # The clock equals the record's changed units (8n: each item inserted and removed once). Up to
        # them plus the slack, a remove of removed items is taken once (a concurrent remove of the same
        # text), not once a push.
        self.assertEqual(c.push(remove_batch(seq, clock + 1, 0, LAMPORT_SLACK))[0], 200)
        seq, clock = seq + LAMPORT_SLACK, clock + LAMPORT_SLACK
        status, answer = c.push(remove_batch(seq, clock + 1, 0, 1))
        self.assertEqual(status, 400, answer)
        self.assertIn("the Lamport headroom rule", answer["error"]["message"])
        # A push raises the clock by at most the units it changes now: a one-character insert one up,
        # not two (else 2^31 such pushes would spend it).
        status, answer = c.push(insert_batch(seq, clock + 2, "x"))
        self.assertEqual(status, 400, answer)
        self.assertIn("plus the 1 unit operations of the batch that change the record", answer["error"]["message"])
        self.assertEqual(c.push(insert_batch(seq, clock + 1, "x"))[0], 200)
        ok(self, call("/v2/crdt/update", dict(ids("climb"), data="owner's")), "CRDT data updated successfully.")
        restart()
        self.assertEqual(value(self, "climb"), "owner's")
        ok(self, call("/v2/crdt/update", dict(ids("climb"), data="owner's again")), "CRDT data updated successfully.")
        admin_check(self)

    @single_node
    def test_a_record_stored_past_the_limit_is_named_by_check_and_repaired_by_folio_admin(self):
        if STACK.postgresql:
            self.skipTest("writes the SQLite file directly")
        editor = "stored-past"
        c = Client(self, editor)
        # Exactly to the limit: x's inserted in pushes of CHUNK, "ok" (two units), then one remove of
        # every x (one unit).
        xs = TEXT_MAX_UNITS - 3
        seq = 0
        while seq < xs:
            take = min(CHUNK, xs - seq)
            status, answer = c.push(insert_batch(seq, seq + 1, "x" * take))
            self.assertEqual(status, 200, answer)
            seq += take
        self.assertEqual(c.push(insert_batch(seq, seq + 1, "ok"))[0], 200)
        self.assertEqual(c.push(remove_batch(seq + 2, seq + 3, 0, xs))[0], 200)
        seq += 2 + xs
        batch = remove_batch(seq, 1, 0, xs)  # one unit more: refused
        past_limit(self, c.push(batch))
        # What an earlier build stored: the refused batch logged as a change of the record.
        STACK.fcgi.terminate()
        STACK.fcgi.wait()
        tenant = STACK.scalar("SELECT tenant FROM crdt_records WHERE editor='%s'" % editor)
        with sqlite3.connect(STACK.db) as db:
            rev = db.execute("SELECT revision FROM crdt_records WHERE editor=?", (editor,)).fetchone()[0]
            db.execute("INSERT INTO crdt_log (tenant, org, doc, editor, revision, batch) VALUES (?,?,?,?,?,?)", (tenant, ORG, DOC, editor, rev + 1, batch))
            db.execute("UPDATE crdt_records SET log_len=log_len+1, log_bytes=log_bytes+?, revision=? WHERE editor=?", (len(batch), rev + 1, editor))
        STACK.start_fcgi()
        out = subprocess.run([stack.ADMIN, "--db", STACK.db, "check"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn(editor + ": holds", out.stderr)
        self.assertIn("folio-admin repair", out.stderr)
        exported = STACK.admin("export", tenant, ORG, DOC, editor)
        self.assertEqual(exported, '"ok"')
        repaired = STACK.admin("repair", tenant, ORG, DOC, editor)
        self.assertIn("repaired", repaired)
        admin_check(self)
        self.assertEqual(value(self, editor), "ok")
        status, answer = c.sync(None)  # the client's state is of the old history
        self.assertEqual(status, 409, answer)
        self.assertEqual(answer["error"]["status"], "ABORTED")
        ok(self, call("/v2/crdt/update", dict(ids(editor), data="ok again")), "CRDT data updated successfully.")
        restart()
        self.assertEqual(value(self, editor), "ok again")
        admin_check(self)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
