"""Scoped client tokens end to end (docs/API.md, "Tenancy and credentials", issue 20): POST /v2/auth/token minted with an API key,
then crdt/get, crdt/sync and crdt/subscribe with "Authorization: Bearer <token>" (and ?token= on
subscribe) through the real nginx + Nchan in front of the real folio-fcgi: the scope (403), bad and
expired tokens (401), key rotation by SIGHUP without a restart, lastUpdatedBy, CORS preflights, and the
token kept out of the access logs.

Run by ctest as:  tokens_e2e.py BUILD_DIR SOURCE_DIR
"""
import base64
import json
import os
import re
import select
import signal
import socket
import sys
import time
import unittest
import urllib.parse
from datetime import datetime, timezone

from stack import *  # noqa: F401,F403
import stack

ORG, DOC = "org tokens", "doc/ü+1"  # a space, a slash, a plus and non-ASCII: the query decoding is exercised
ALLOWED = "http://app.example.test:8000"
STACK.cors_origins = ALLOWED + " https://other.example.test"
TOKEN_RE = re.compile(r"^fct1\.[0-9a-f]{16}\.k[0-9]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$")


def setUpModule():
    stack.setUpModule()
    status, body = call("/v2/crdt/add", dict(ids("e1"), type="text", data="hello"))
    assert status == 200, body
    status, body = call("/v2/crdt/add", dict(ids("e2"), type="text", data="other editor"))
    assert status == 200, body
    status, body = call("/v2/crdt/add", dict(ids("live"), type="text", data="live"))
    assert status == 200, body
    status, body = call("/v2/crdt/add", {"organizationId": ORG, "documentId": "another doc", "editorId": "e1", "type": "text", "data": "x"})
    assert status == 200, body
    for editor in ("expiring", "rotated"):
        status, body = call("/v2/crdt/add", dict(ids(editor), type="text", data=editor))
        assert status == 200, body


tearDownModule = stack.tearDownModule


def ids(editor, doc=DOC, org=ORG):
    return {"organizationId": org, "documentId": doc, "editorId": editor}


def mint(who="a", **data):
    """A client token for ORG/DOC (overridable), user "ana", write access unless told."""
    body = {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "write"}
    body.update(data)
    status, answer = call("/v2/auth/token", {k: v for k, v in body.items() if v is not None}, who=who)
    assert status == 200, answer
    return answer["result"]["data"]["token"]


def bearer(token):
    return {"Authorization": "Bearer " + token}


def tcall(path, data, token, headers=None):
    """A call with a client token instead of the API key headers."""
    return call(path, data, who=None, headers=dict(bearer(token), **(headers or {})))


def pull(editor, token=None, who="a"):
    data = dict(ids(editor), version="AA==")
    return tcall("/v2/crdt/sync", data, token) if token else call("/v2/crdt/sync", data, who=who)


def raw_request(text):
    """Sends raw HTTP/1.1 text; returns (status, headers dict lower-cased, body bytes) of a framed answer,
    or of an EventSource greeting."""
    return raw_answer(text.encode())


def subscribe_text(query_ids, token=None, header_token=None, origin=None, extra=""):
    q = dict(query_ids)
    if token is not None:
        q["token"] = token
    h = "GET /v2/crdt/subscribe?%s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n" % urllib.parse.urlencode(q)
    if header_token:
        h += "Authorization: Bearer %s\r\n" % header_token
    if origin:
        h += "Origin: %s\r\n" % origin
    return h + extra + "\r\n"


class TokenStream(EventStream):
    """An EventSource subscriber with a client token (in the query, or in the Authorization header)."""

    def __init__(self, query_ids, token=None, header_token=None):
        super().__init__(None, request=subscribe_text(query_ids, token, header_token).encode())


def has_event(stream, timeout):
    """Whether `stream` holds a whole event, reading what arrives within `timeout` seconds."""
    if b"\n\n" not in stream.buf and select.select([stream.sock], [], [], timeout)[0]:
        chunk = stream.sock.recv(65536)
        if not chunk:
            raise EOFError("stream closed")
        stream.buf += chunk
    return b"\n\n" in stream.buf


def wait_for_log(event, after, count=1):
    """Waits (bounded) until folio-fcgi's log holds `event` in `count` lines past `after` lines (one per
    node: every node logs to the same file); returns the first."""
    for _ in range(400):
        found = [line for line in log_lines(STACK.fcgi_log)[after:] if json.loads(line).get("event") == event]
        if len(found) >= count:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no %s in folio-fcgi's log:\n%s" % (event, STACK.log_tails()))


def read_file(path):
    with open(path) as f:
        return f.read()


def reload_keys(text):
    """Rewrites the key file and sends folio-fcgi SIGHUP; returns once it has loaded them."""
    with open(STACK.client_keys, "w") as f:
        f.write(text)
    before = len(log_lines(STACK.fcgi_log))
    STACK.fcgi.send_signal(signal.SIGHUP)  # every node's
    return wait_for_log("client_token_keys_loaded", before, len(STACK.nodes))


class Mint(unittest.TestCase):
    def test_answers_a_token_and_its_expiry(self):
        before = time.time()
        status, body = call("/v2/auth/token", {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "read"})
        after = time.time()
        data = ok(self, (status, body), "Client token created.")
        self.assertEqual(sorted(data), ["expiresAt", "token"])
        self.assertRegex(data["token"], TOKEN_RE)
        self.assertEqual(data["token"].split(".")[1], CREDS["a"][0][3:19])  # the tenant, in clear for nginx
        self.assertRegex(data["expiresAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$")
        expires = datetime.strptime(data["expiresAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        self.assertLessEqual(expires, after + 3600)        # the default lifetime, whole seconds, never more
        self.assertGreaterEqual(expires, int(before) + 3600)
        status, body = call("/v2/auth/token", {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "read",
                                               "expiresInSeconds": 86400})
        self.assertEqual(status, 200, body)

    def test_fields_are_checked_and_named(self):
        base = {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "write"}
        cases = [
            ({"organizationId": None}, "Organization ID is required"),
            ({"documentId": ""}, "Document ID is required"),
            ({"userId": None}, "userId is required."),
            ({"userId": 5}, "userId must be a string."),
            ({"userId": "a\nb"}, "userId must not contain control characters."),
            ({"editorId": "x" * 257}, "editorId must be at most 256 bytes."),
            ({"editorId": 1}, "editorId must be a string."),
            ({"access": None}, "access is required."),
            ({"access": "admin"}, 'access must be "read" or "write".'),
            ({"access": True}, 'access must be "read" or "write".'),
            ({"expiresInSeconds": 0}, "expiresInSeconds must be a whole number from 1 to 86400."),
            ({"expiresInSeconds": 86401}, "expiresInSeconds must be a whole number from 1 to 86400."),
            ({"expiresInSeconds": 1.5}, "expiresInSeconds must be a whole number from 1 to 86400."),
            ({"expiresInSeconds": "60"}, "expiresInSeconds must be a whole number from 1 to 86400."),
        ]
        for change, message in cases:
            data = dict(base)
            for k, v in change.items():
                if v is None:
                    data.pop(k)
                else:
                    data[k] = v
            err(self, call("/v2/auth/token", data), 400, "INVALID_ARGUMENT", message)

    def test_unknown_fields_and_nulls_are_refused_by_name(self):
        # Read as absent, each of these minted a token for every editor of the document.
        base = {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "write"}
        listing = "; a client token takes organizationId, documentId, editorId, userId, access and expiresInSeconds."
        for extra, message in [({"editorID": "e1"}, 'Unknown field "editorID"' + listing),
                               ({"editor_id": "e1"}, 'Unknown field "editor_id"' + listing),
                               ({"editorId": None}, "editorId must not be null; leave it out for a token of every editor of the document."),
                               ({"expiresInSeconds": None}, "expiresInSeconds must not be null."),
                               ({"organizationId": None}, "organizationId must not be null.")]:
            err(self, call("/v2/auth/token", dict(base, **extra)), 400, "INVALID_ARGUMENT", message)

    def test_needs_the_api_key(self):
        data = {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "read"}
        for who in (None, "a_expired", "a_revoked", "a_wrong_secret", "a_key_b_token"):
            err(self, call("/v2/auth/token", data, who=who), 401, "UNAUTHENTICATED", "Missing or invalid API key or auth token.")

    def test_a_read_only_auth_token_mints_read_tokens_only(self):
        data = {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "write"}
        err(self, call("/v2/auth/token", data, who="a_ro"), 403, "PERMISSION_DENIED", "This token is read-only; it can mint read client tokens only.")
        token = mint(who="a_ro", access="read")
        self.assertEqual(tcall("/v2/crdt/get", ids("e1"), token)[0], 200)

    def test_a_client_token_cannot_mint(self):
        token = mint()
        err(self, tcall("/v2/auth/token", {"organizationId": ORG, "documentId": DOC, "userId": "x", "access": "write"}, token),
            403, "PERMISSION_DENIED", "A client token opens only /v2/crdt/get, /v2/crdt/sync, /v2/crdt/subscribe, /v2/crdt/versions/get, diff, add and restore, and /v2/presence/set, leave and get.")


class Use(unittest.TestCase):
    def test_get_and_pull_with_a_read_token(self):
        token = mint(access="read")
        data = ok(self, tcall("/v2/crdt/get", ids("e1"), token), "CRDT data retrieved successfully.")
        self.assertEqual(data[0]["data"], "hello")
        # Without editorId: every record of the document (a token without an editor covers them all).
        whole = {"organizationId": ORG, "documentId": DOC}
        data = ok(self, tcall("/v2/crdt/get", whole, token), "CRDT data retrieved successfully.")
        self.assertEqual(data, ok(self, call("/v2/crdt/get", whole), "CRDT data retrieved successfully."))
        self.assertIn("e2", [r["id"] for r in data])
        # "bearer" in any case, more than one space.
        status, _ = call("/v2/crdt/get", ids("e1"), who=None, headers={"Authorization": "bEaReR   " + token})
        self.assertEqual(status, 200)
        pulled = ok(self, pull("e1", token), "CRDT data synced successfully.")
        self.assertEqual(pulled["type"], "text")

    def test_push_with_a_write_token_is_by_the_tokens_user(self):
        # Ops of a record "source" pushed into the empty record "target": a real push whose
        # dependencies are all in the batch.
        call("/v2/crdt/add", dict(ids("source"), type="text", data="pushed text"))
        call("/v2/crdt/add", dict(ids("target"), type="text", data=""))
        ops = ok(self, pull("source"), "CRDT data synced successfully.")["update"]
        write = mint(userId="browser-user")
        first = ok(self, pull("target", write), "CRDT data synced successfully.")
        push = dict(ids("target"), version="AA==", incarnation=first["incarnation"], update=ops)
        read = mint(access="read")
        err(self, tcall("/v2/crdt/sync", push, read), 403, "PERMISSION_DENIED",
            "This token is read-only; sync without an update to only receive changes.")
        err(self, tcall("/v2/crdt/sync", dict(push, userId="someone-else"), write), 403, "PERMISSION_DENIED",
            "The client token acts as its own user; leave userId out or send the token's userId.")
        ok(self, tcall("/v2/crdt/sync", push, write), "CRDT data synced successfully.")
        record = ok(self, call("/v2/crdt/get", ids("target")), "CRDT data retrieved successfully.")[0]
        self.assertEqual(record["data"], "pushed text")
        self.assertEqual(record["lastUpdatedBy"], "browser-user")
        ok(self, tcall("/v2/crdt/sync", dict(push, userId="browser-user"), write), "CRDT data synced successfully.")

    def test_outside_the_scope_is_403(self):
        token = mint(editorId="e1")
        cases = [
            ("/v2/crdt/get", ids("e1", org="another org"), "The client token does not cover this organizationId."),
            ("/v2/crdt/get", ids("e1", doc="another doc"), "The client token does not cover this documentId."),
            ("/v2/crdt/get", ids("e2"), "The client token does not cover this editorId."),
            ("/v2/crdt/get", {"organizationId": ORG, "documentId": DOC}, "The client token covers one editor of the document; send its editorId."),
            ("/v2/crdt/sync", dict(ids("e2"), version="AA=="), "The client token does not cover this editorId."),
            ("/v2/crdt/sync", dict(ids("e1", doc="another doc"), version="AA=="), "The client token does not cover this documentId."),
        ]
        for path, data, message in cases:
            err(self, tcall(path, data, token), 403, "PERMISSION_DENIED", message)
        for path in ("/v2/crdt/update", "/v2/crdt/add", "/v2/crdt/delete", "/v1/commentannotations/get", "/v2/commentannotations/add"):
            err(self, tcall(path, ids("e1"), token), 403, "PERMISSION_DENIED",
                "A client token opens only /v2/crdt/get, /v2/crdt/sync, /v2/crdt/subscribe, /v2/crdt/versions/get, diff, add and restore, and /v2/presence/set, leave and get.")
        self.assertEqual(tcall("/v2/crdt/get", ids("e1"), token)[0], 200)
        # Another tenant's key minting for the same ids opens only its own (absent) records.
        other = mint(who="b")
        self.assertEqual(ok(self, tcall("/v2/crdt/get", ids("e1"), other), "CRDT data retrieved successfully."), [])

    def test_bad_tokens_are_401(self):
        token = mint()
        head, _, mac = token.rpartition(".")
        flipped = mac[:5] + ("A" if mac[5] != "A" else "B") + mac[6:]
        parts = token.split(".")
        forged_claims = base64.urlsafe_b64encode("\n".join([ORG, DOC, "", "mallory", "w", "99999999999"]).encode()).decode().rstrip("=")
        forged = ".".join(parts[:3] + [forged_claims, parts[4]])
        cases = [
            ("abc", "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>."),
            ("", "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>."),
            (token + ".x", "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>."),
            ("fct2" + token[4:], "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>."),
            (head + "." + flipped, "Invalid client token: bad signature."),
            (forged, "Invalid client token: bad signature."),
            (".".join(parts[:2] + ["nokey"] + parts[3:]), "Invalid client token: unknown signing key."),
        ]
        for bad, message in cases:
            err(self, tcall("/v2/crdt/get", ids("e1"), bad), 401, "UNAUTHENTICATED", message)
        # The key headers and a client token together; a scheme other than Bearer is not a client token.
        err(self, call("/v2/crdt/get", ids("e1"), headers=bearer(token)), 401, "UNAUTHENTICATED",
            "Send either the x-folio-api-key and x-folio-auth-token headers or a client token, not both.")
        err(self, call("/v2/crdt/get", ids("e1"), who=None, headers={"Authorization": "Basic " + token}), 401, "UNAUTHENTICATED",
            "Missing or invalid API key or auth token.")
        self.assertEqual(call("/v2/crdt/get", ids("e1"), headers={"Authorization": "Basic eDp5"})[0], 200)

    def test_an_expired_token_is_401(self):
        status, body = call("/v2/auth/token", {"organizationId": ORG, "documentId": DOC, "userId": "ana", "access": "write", "expiresInSeconds": 1})
        data = ok(self, (status, body), "Client token created.")
        expires = datetime.strptime(data["expiresAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        while time.time() < expires + 0.05:  # past the expiry on this machine's clock, which the responder shares
            time.sleep(0.05)
        message = "The client token expired at %s." % data["expiresAt"]
        err(self, tcall("/v2/crdt/get", ids("e1"), data["token"]), 401, "UNAUTHENTICATED", message)
        status, headers, body = raw_request(subscribe_text(ids("e1"), token=data["token"]))
        self.assertEqual(status, 401, body)
        self.assertEqual(json.loads(body)["error"]["message"], message)


class Subscribe(unittest.TestCase):
    def test_query_and_header_tokens_share_the_api_key_subscribers_channel(self):
        read = mint(access="read", editorId="live")
        by_key = EventStream(ids("live"))
        by_query = TokenStream(ids("live"), token=read)
        by_header = TokenStream(ids("live"), header_token=read)
        streams = [by_key, by_query, by_header]
        try:
            # A subscription reaches the channel's owning nginx worker a moment after Nchan's greeting:
            # update until every stream has had a message, then once more, which all three must get.
            waiting = list(streams)
            for i in range(400):
                if not waiting:
                    break
                ok(self, call("/v2/crdt/update", dict(ids("live"), data="live %d" % i)), "CRDT data updated successfully.")
                waiting = [s for s in waiting if not has_event(s, 0.05)]
            self.assertEqual(waiting, [])
            ok(self, call("/v2/crdt/update", dict(ids("live"), data="last", userId="rest-user")), "CRDT data updated successfully.")
            seen = []
            for s in streams:
                message = s.next_data()
                while message.get("lastUpdatedBy") != "rest-user":
                    message = s.next_data()
                seen.append(message)
            self.assertEqual([m["update"] for m in seen], [seen[0]["update"]] * 3)
        finally:
            for s in (by_key, by_query, by_header):
                s.close()

    def test_refusals(self):
        token = mint(editorId="e1")
        cases = [
            (subscribe_text(ids("e2"), token=token), 403, "The client token does not cover this editorId."),
            (subscribe_text(ids("e1", doc="another doc"), token=token), 403, "The client token does not cover this documentId."),
            (subscribe_text(ids("e1"), token=token[:-2]), 401, "Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>."),
            (subscribe_text(ids("e1"), token=token, header_token=token), 401,
             "Send the client token once: in the Authorization header or in the token parameter, not both."),
            (subscribe_text(ids("e1"), token=token, extra="x-folio-api-key: %s\r\nx-folio-auth-token: %s\r\n" % CREDS["a"]), 401,
             "Send either the x-folio-api-key and x-folio-auth-token headers or a client token, not both."),
        ]
        for text, code, message in cases:
            status, headers, body = raw_request(text)
            self.assertEqual(status, code, body)
            self.assertEqual(json.loads(body)["error"]["message"], message)


def warm_up(stream, editor, who="a"):
    """Updates `editor` (as `who`, a CREDS name) until `stream` has had a message (a subscription reaches
    the channel's owning nginx worker a moment after Nchan's greeting), then drops what it read."""
    for i in range(400):
        ok(unittest.TestCase(), call("/v2/crdt/update", dict(ids(editor), data="warm %d" % i), who=who), "CRDT data updated successfully.")
        if has_event(stream, 0.05):
            stream.buf = b""
            return
    raise AssertionError("the stream never had a message")


def revocable_record(test, tenant, who, editor, access):
    """A new API key of `tenant` (its credentials CREDS[who]), the text record `editor` it adds, and a
    client token of `access` it mints for it: (key id, record ids, token)."""
    key = STACK.admin("create-key", tenant)
    kid = key[3:19]
    CREDS[who] = (key, STACK.admin("create-token", kid, "backend"))
    rec = ids(editor)
    ok(test, call("/v2/crdt/add", dict(rec, type="text", data="x"), who=who), "CRDT data added successfully.")
    status, answer = call("/v2/auth/token", dict(rec, userId="ana", access=access), who=who)
    test.assertEqual(status, 200, answer)
    return kid, rec, answer["result"]["data"]["token"]


def received_before_end(stream, marker):
    """Reads `stream` until Nchan ends it (":410: 410 Gone", then the connection closes) or an event holding
    `marker` arrives; whether one did."""
    while marker not in stream.buf:
        try:
            chunk = stream.sock.recv(65536)
        except ConnectionResetError:
            return False
        if not chunk:
            return False
        stream.buf += chunk
    return True


class OpenStreams(unittest.TestCase):
    """Nchan authorizes an EventSource subscriber once, when it opens: a token that expires, or whose key
    is removed, while its stream is open must not keep receiving changes (crdt/publish/token_streams.hpp)."""

    def test_a_stream_ends_before_the_first_change_after_its_token_expired(self):
        status, body = call("/v2/auth/token", {"organizationId": ORG, "documentId": DOC, "editorId": "expiring", "userId": "ana",
                                               "access": "read", "expiresInSeconds": 3})
        data = ok(self, (status, body), "Client token created.")
        expires = datetime.strptime(data["expiresAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        stream = TokenStream(ids("expiring"), token=data["token"])
        by_key = EventStream(ids("expiring"))
        try:
            warm_up(stream, "expiring")
            before = len(log_lines(STACK.fcgi_log))
            while time.time() < expires + 0.05:  # past the expiry on this machine's clock, which the responder shares
                time.sleep(0.05)
            if STACK.cluster:
                # The node that let the token in ends its streams at the expiry; a change through another
                # node in the milliseconds before that deletion has gone could still reach the stream
                # (docs/SECURITY.md "Open streams"). So: after the deletion.
                wait_for_log("token_streams_ended", before)
            ok(self, call("/v2/crdt/update", dict(ids("expiring"), data="after expiry", userId="after-expiry")), "CRDT data updated successfully.")
            self.assertFalse(received_before_end(stream, b"after-expiry"), "an expired token's stream received a change")
            self.assertIn(b":410: 410 Gone", stream.buf)  # ended by Nchan: the channel was deleted
            # The token is refused when the client reconnects; the API key's subscriber was ended too and
            # reconnects (its client syncs then).
            status, headers, body = raw_request(subscribe_text(ids("expiring"), token=data["token"]))
            self.assertEqual(status, 401, body)
            self.assertEqual(json.loads(body)["error"]["message"], "The client token expired at %s." % data["expiresAt"])
            self.assertFalse(received_before_end(by_key, b"after-expiry"))
            self.assertIn(b":410: 410 Gone", by_key.buf)
            # A fresh token's stream gets the next changes, and no channel is ended again for the old one.
            fresh = TokenStream(ids("expiring"), token=mint(access="read", editorId="expiring"))
            try:
                warm_up(fresh, "expiring")
                ok(self, call("/v2/crdt/update", dict(ids("expiring"), data="later", userId="later-user")), "CRDT data updated successfully.")
                self.assertTrue(received_before_end(fresh, b"later-user"))
            finally:
                fresh.close()
        finally:
            stream.close()
            by_key.close()

    def test_a_stream_ends_before_the_first_change_after_its_key_was_removed(self):
        original = read_file(STACK.client_keys)
        try:
            reload_keys(original + "k7 %s\n" % os.urandom(32).hex())
            token = mint(access="read", editorId="rotated")
            self.assertEqual(token.split(".")[2], "k7")
            stream = TokenStream(ids("rotated"), token=token)
            try:
                warm_up(stream, "rotated")
                reload_keys(original)
                ok(self, call("/v2/crdt/update", dict(ids("rotated"), data="after removal", userId="after-removal")),
                   "CRDT data updated successfully.")
                self.assertFalse(received_before_end(stream, b"after-removal"), "a stream of a removed key's token received a change")
                self.assertIn(b":410: 410 Gone", stream.buf)
                status, headers, body = raw_request(subscribe_text(ids("rotated"), token=token))
                self.assertEqual(status, 401, body)
            finally:
                stream.close()
        finally:
            reload_keys(original)


REVOCATION_BOUND = 1.0  # seconds: docs/SECURITY.md "Revocation" (config.hpp revocation_refresh)


def restart_responders():
    """Stops every node's folio-fcgi and starts it again; nginx, and the streams it holds, stay."""
    STACK.fcgi.terminate()
    STACK.fcgi.wait(30)
    STACK.start_fcgi()


def kept_rows(ids_, who="a"):
    """The rows crdt_token_streams keeps for the channel of `ids_` (service/crdt/records.hpp)."""
    return STACK.scalar("SELECT count(*) FROM crdt_token_streams WHERE channel = '%s'" % channel_of(ids_, who))


class OpenStreamsAcrossRestarts(unittest.TestCase):
    """A responder that restarts finds the client-token streams its predecessor let in (crdt_token_streams,
    docs/SECURITY.md "Open streams"): nginx keeps them open, and they still end at their token's expiry
    and at their API key's revocation."""

    def test_a_stream_let_in_before_a_restart_ends_at_its_tokens_expiry(self):
        rec = ids("restart-expiry")
        ok(self, call("/v2/crdt/add", dict(rec, type="text", data="x")), "CRDT data added successfully.")
        # Long enough to open the stream and restart every responder before it expires (asserted below).
        status, body = call("/v2/auth/token", dict(rec, userId="ana", access="read", expiresInSeconds=12))
        data = ok(self, (status, body), "Client token created.")
        expires = datetime.strptime(data["expiresAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        stream = TokenStream(rec, token=data["token"])
        try:
            warm_up(stream, "restart-expiry")
            self.assertEqual(kept_rows(rec), 1)  # kept when it was let in
            before = len(log_lines(STACK.fcgi_log))
            restart_responders()
            self.assertLess(time.time(), expires, "the restart took past the token's expiry: the test proves nothing")
            wait_for_log("token_streams_kept", before, len(STACK.nodes))
            # The new responder ends the channel at the expiry, with no publish to prompt it.
            ended = "channel %s..." % channel_of(rec)[:12]
            wait_until(lambda: any(json.loads(line).get("event") == "token_streams_ended" and ended in json.loads(line)["message"]
                                   for line in log_lines(STACK.fcgi_log)[before:]),
                       seconds=expires - time.time() + 20, what="the kept stream's channel deleted at its token's expiry")
            self.assertGreaterEqual(time.time(), expires)
            ok(self, call("/v2/crdt/update", dict(rec, data="after expiry", userId="after-restart-expiry")), "CRDT data updated successfully.")
            self.assertFalse(received_before_end(stream, b"after-restart-expiry"), "an expired token's stream received a change after a restart")
            self.assertIn(b":410: 410 Gone", stream.buf)
            wait_until(lambda: kept_rows(rec) == 0, what="the ended channel's kept rows deleted")
        finally:
            stream.close()

    def test_a_stream_let_in_before_a_restart_ends_at_its_keys_revocation(self):
        kid, rec, token = revocable_record(self, "tenant-restart-revoked", "restart_revoked", "restart-revoked", "read")
        stream = TokenStream(rec, token=token)
        try:
            warm_up(stream, "restart-revoked", who="restart_revoked")
            self.assertEqual(kept_rows(rec, "restart_revoked"), 1)
            before = len(log_lines(STACK.fcgi_log))
            restart_responders()
            wait_for_log("token_streams_kept", before, len(STACK.nodes))
            STACK.admin("revoke-key", kid)
            # Ended (Nchan's 410) by the new responder at its next read of the revoked keys.
            stream.sock.settimeout(REVOCATION_BOUND + 20)
            self.assertFalse(received_before_end(stream, b"never sent"))
            self.assertIn(b":410: 410 Gone", stream.buf)
            wait_until(lambda: kept_rows(rec, "restart_revoked") == 0, what="the ended channel's kept rows deleted")
        finally:
            stream.close()


class Revocation(unittest.TestCase):
    """Revoking an API key (folio-admin revoke-key) ends the client tokens it minted on every node within
    REVOCATION_BOUND of the revocation's commit, and closes their open streams (server.hpp, api_key_revoked)."""

    def test_a_revoked_keys_tokens_are_refused_on_every_node_and_their_streams_end(self):
        kid, rec, token = revocable_record(self, "tenant-revoked", "revoked_key", "revoked", "write")
        for node in STACK.nodes:
            self.assertEqual(call("/v2/crdt/get", rec, who=None, headers=bearer(token), port=node.port)[0], 200)
        stream = TokenStream(rec, token=token)
        try:
            warm_up(stream, "revoked", who="revoked_key")
            STACK.admin("revoke-key", kid)
            revoked = time.monotonic()  # folio-admin has returned: the revocation is committed
            # Each node, polled until it refuses: any request sent REVOCATION_BOUND or more after the commit is refused.
            refused_after = {}
            deadline = revoked + REVOCATION_BOUND + 20
            while len(refused_after) < len(STACK.nodes):
                self.assertLess(time.monotonic(), deadline, "nodes still serving the token: %s" % STACK.log_tails())
                for n, node in enumerate(STACK.nodes):
                    sent = time.monotonic()
                    status, body = call("/v2/crdt/get", rec, who=None, headers=bearer(token), port=node.port)
                    if status == 200:
                        self.assertNotIn(n, refused_after, "node %d served the token again after refusing it" % n)
                        self.assertLess(sent - revoked, REVOCATION_BOUND, "node %d served a revoked key's token" % n)
                        continue
                    err(self, (status, body), 401, "UNAUTHENTICATED", "Invalid client token: the API key that minted it is revoked.")
                    refused_after.setdefault(n, time.monotonic() - revoked)
                time.sleep(0.02)
            for node in STACK.nodes:  # writes and pulls too, and the auth token
                err(self, call("/v2/crdt/sync", dict(rec, version="AA==", update="AA=="), who=None, headers=bearer(token), port=node.port),
                    401, "UNAUTHENTICATED")
                err(self, call("/v2/auth/token", dict(rec, userId="ana", access="read"), who="revoked_key", port=node.port), 401, "UNAUTHENTICATED")
            # The open stream is ended (Nchan's 410) by the node that let it in, at its next read of the revoked keys.
            stream.sock.settimeout(REVOCATION_BOUND + 20)
            self.assertFalse(received_before_end(stream, b"never sent"))
            self.assertIn(b":410: 410 Gone", stream.buf)
            status, headers, body = raw_request(subscribe_text(rec, token=token))
            self.assertEqual(status, 401, body)
            self.assertEqual(json.loads(body)["error"]["message"], "Invalid client token: the API key that minted it is revoked.")
            print("refused %.0f ms after the revocation (per node: %s)" % (max(refused_after.values()) * 1000,
                  ", ".join("%.0f" % (v * 1000) for _, v in sorted(refused_after.items()))), file=sys.stderr)
        finally:
            stream.close()


class Rotation(unittest.TestCase):
    def test_keys_rotate_without_a_restart(self):
        pid = STACK.fcgi.pid
        original = read_file(STACK.client_keys)
        old_token = mint()
        self.assertEqual(old_token.split(".")[2], "k1")
        try:
            # A second key: it signs from now on, the first still verifies.
            reload_keys(original + "k2 %s\n" % os.urandom(32).hex())
            new_token = mint()
            self.assertEqual(new_token.split(".")[2], "k2")
            for t in (old_token, new_token):
                self.assertEqual(tcall("/v2/crdt/get", ids("e1"), t)[0], 200)
            # A staged key (verify-only) does not sign.
            keys = read_file(STACK.client_keys)
            reload_keys(keys + "k3 %s verify-only\n" % os.urandom(32).hex())
            self.assertEqual(mint().split(".")[2], "k2")
            # The first key removed: its tokens are refused; the new one's are not.
            reload_keys("".join(line + "\n" for line in keys.splitlines() if not line.startswith("k1 ")))
            err(self, tcall("/v2/crdt/get", ids("e1"), old_token), 401, "UNAUTHENTICATED", "Invalid client token: unknown signing key.")
            self.assertEqual(tcall("/v2/crdt/get", ids("e1"), new_token)[0], 200)
            # A key file that does not load keeps the keys in use.
            before = len(log_lines(STACK.fcgi_log))
            with open(STACK.client_keys, "w") as f:
                f.write("k9 tooshort\n")
            STACK.fcgi.send_signal(signal.SIGHUP)
            line = wait_for_log("client_token_keys_failed", before, len(STACK.nodes))
            self.assertIn("line 1: a secret is at least 64 hex digits", line)
            self.assertEqual(tcall("/v2/crdt/get", ids("e1"), new_token)[0], 200)
            self.assertEqual(STACK.fcgi.pid, pid)
            self.assertIsNone(STACK.fcgi.poll())
        finally:
            reload_keys(original)


class Cors(unittest.TestCase):
    def preflight(self, path, origin, method="POST"):
        return raw_request("OPTIONS %s HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\nAccess-Control-Request-Method: %s\r\n"
                           "Access-Control-Request-Headers: authorization, content-type\r\nConnection: close\r\n\r\n" % (path, origin, method))

    def test_preflight_for_allowed_origins(self):
        for path in ("/v2/crdt/get", "/v2/crdt/sync", "/v2/crdt/subscribe?organizationId=o&documentId=d&editorId=e"):
            status, headers, body = self.preflight(path, ALLOWED)
            self.assertEqual(status, 204, (path, body))
            self.assertEqual(headers["access-control-allow-origin"], ALLOWED)
            self.assertIn("Authorization", headers["access-control-allow-headers"])
            self.assertIn("Content-Type", headers["access-control-allow-headers"])
            self.assertIn("POST", headers["access-control-allow-methods"])
            self.assertIn("GET", headers["access-control-allow-methods"])
            self.assertEqual(headers["access-control-max-age"], "86400")
            self.assertIn("Origin", headers["vary"])

    def test_preflight_for_other_origins_and_endpoints(self):
        for path, origin in (("/v2/crdt/get", "http://evil.example.test"), ("/v2/crdt/sync", "http://app.example.test:8001"),
                             ("/v2/crdt/subscribe?organizationId=o&documentId=d&editorId=e", "null")):
            status, headers, body = self.preflight(path, origin)
            self.assertEqual(status, 403, body)
            self.assertNotIn("access-control-allow-origin", headers)
            self.assertEqual(json.loads(body), {"error": {"message": "Cross-origin requests from this origin are not allowed.",
                                                          "status": "PERMISSION_DENIED"}})
        # Minting and every other endpoint are for backends: no preflight answer, no CORS header.
        for path in ("/v2/auth/token", "/v2/crdt/update"):
            status, headers, body = self.preflight(path, ALLOWED)
            self.assertEqual(status, 400, body)
            self.assertNotIn("access-control-allow-origin", headers)

    def test_answers_carry_the_allowed_origin_only(self):
        token = mint(access="read")
        status, body = tcall("/v2/crdt/get", ids("e1"), token, headers={"Origin": ALLOWED})
        self.assertEqual(status, 200)
        conn_headers = self.headers_of("/v2/crdt/get", ids("e1"), token, ALLOWED)
        self.assertEqual(conn_headers["access-control-allow-origin"], ALLOWED)
        self.assertEqual(conn_headers["access-control-expose-headers"], "X-Request-Id")
        self.assertEqual(conn_headers["vary"], "Origin")
        # An error answer is readable by the page too (the client token's 403).
        self.assertEqual(self.headers_of("/v2/crdt/get", ids("e2", doc="another doc"), token, ALLOWED)["access-control-allow-origin"], ALLOWED)
        self.assertNotIn("access-control-allow-origin", self.headers_of("/v2/crdt/get", ids("e1"), token, "http://evil.example.test"))
        self.assertNotIn("access-control-allow-origin", self.headers_of("/v2/auth/token", {}, None, ALLOWED))
        # Subscribe: an allowed origin is let in, with its header; another is refused.
        status, headers, body = raw_request(subscribe_text(ids("e1"), token=token, origin=ALLOWED))
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["access-control-allow-origin"], ALLOWED)  # once: Nchan's (two make browsers refuse it)
        self.assertNotIn("access-control-allow-credentials", headers)  # no credentials mode (Nchan's default is on)
        self.assertIn("x-request-id", headers)
        status, headers, body = raw_request(subscribe_text(ids("e1", doc="another doc"), token=token, origin=ALLOWED))
        self.assertEqual(status, 403, body)
        self.assertEqual(headers["access-control-allow-origin"], ALLOWED)  # the page reads the refusal
        status, headers, body = raw_request(subscribe_text(ids("e1"), token=token, origin="http://evil.example.test"))
        self.assertEqual(status, 403, body)
        self.assertNotIn("access-control-allow-origin", headers)

    def headers_of(self, path, data, token, origin):
        headers = {"Origin": origin, "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        else:
            key, auth = CREDS["a"]
            headers.update({"x-folio-api-key": key, "x-folio-auth-token": auth})
        body = json.dumps({"data": data})
        status, h, _ = raw_request("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                                   % (path, "".join("%s: %s\r\n" % kv for kv in headers.items()), len(body.encode()), body))
        return h


class Logs(unittest.TestCase):
    def test_tokens_stay_out_of_the_logs(self):
        token = mint(access="read", editorId="e1")
        s = TokenStream(ids("e1"), token=token)
        s.close()
        self.assertEqual(raw_request(subscribe_text(ids("e2"), token=token))[0], 403)
        self.assertEqual(tcall("/v2/crdt/get", ids("e1"), token)[0], 200)
        secret_part = token.rpartition(".")[2]
        access_log = os.path.join(STACK.dir, "log", "nginx-access.log")
        # The access line of the refused subscribe is written when nginx has answered it: wait for it.
        for _ in range(200):
            if sum('"/v2/crdt/subscribe"' in line for line in log_lines(access_log)) >= 2:
                break
            time.sleep(0.05)
        for path in (access_log, STACK.fcgi_log, os.path.join(STACK.dir, "log", "nginx-error.log")):
            text = read_file(path)
            self.assertNotIn(secret_part, text, path)
            self.assertNotIn(urllib.parse.quote(secret_part), text, path)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
