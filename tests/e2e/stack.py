"""The stack the end-to-end tests run against: the real nginx in front of the real folio-fcgi on
loopback, in a temporary directory (database, socket, nginx prefix, logs; FOLIO_E2E_KEEP=1 keeps it),
and the helpers that speak HTTP to it.

A test module runs as:  <module>.py BUILD_DIR SOURCE_DIR  and does
    from stack import *  (setUpModule/tearDownModule included)

FOLIO_TEST_DB=postgresql runs folio-fcgi (and folio-admin) on a PostgreSQL database instead of a SQLite
file: a private cluster for the module (scripts/pg-test-cluster), stopped and removed with the stack.

FOLIO_TEST_NODES=N (N > 1) runs the stack as scripts/cluster runs Folio: N nodes (folio-fcgi + nginx each)
on one PostgreSQL database and one Redis (scripts/redis-private: Nchan's channels, and presence through
folio-fcgi --presence-redis), behind a front nginx
that passes requests to the nodes in turn (scripts/front-start); STACK.port is the front's. The first
node lives in the stack's directory as the single node does, the others in node<i>/ beside it; every
node writes the same log files (log/), so a test reads "the service's log" either way. STACK.fcgi and
STACK.nginx act on every node's process at once (stop the service, start it again); STACK.nodes has
each node. Tests of what only one process shows (a second folio-fcgi on the same socket, nginx's own
sockets) are marked single_node and skipped in a cluster; tests/e2e/cluster_e2e.py tests what only a
cluster has.
"""
import collections
import hashlib
import hmac
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

__all__ = ["STACK", "CREDS", "setUpModule", "tearDownModule", "call", "ok", "err", "log_lines", "RESPONDER_MAX_BODY",
           "subscription_request", "answer_complete", "read_answer", "raw_answer", "EventStream", "single_node",
           "channel_of", "Subscribing", "read_all", "responses", "wait_until", "metric_total", "publish_failures", "redis_stall"]

BUILD, SOURCE = sys.argv[1], sys.argv[2]
FCGI = os.path.join(BUILD, "service", "folio-fcgi")
ADMIN = os.path.join(BUILD, "tools", "folio-admin")
RESPONDER_MAX_BODY = 3 * 1024 * 1024  # below nginx's 4 MiB, so both limits can be seen
NODES = int(os.environ.get("FOLIO_TEST_NODES") or 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """One kind of process of every node (each node's folio-fcgi, or each node's nginx), acted on at once,
    as a test acts on the single node's: with one node it is that node's process."""

    def __init__(self, stack, kind):
        self.stack, self.kind = stack, kind

    def each(self):
        return [p for p in (getattr(n, self.kind) for n in self.stack.nodes) if p is not None]

    @property
    def pid(self):
        return getattr(self.stack.nodes[0], self.kind).pid

    def poll(self):
        """None while every node's process runs, else the exit status of the first that ended."""
        for p in self.each():
            if p.poll() is not None:
                return p.poll()
        return None

    def send_signal(self, sig):
        for p in self.each():
            if p.poll() is None:
                p.send_signal(sig)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout=None):
        codes = [p.wait(timeout) for p in self.each()]
        return next((c for c in codes if c != 0), 0)


class Node:
    """One folio-fcgi and its nginx, in `dir` (run/, nginx/; log/ is the stack's), on `port`."""

    def __init__(self, directory, port):
        self.dir, self.port = directory, port
        self.fcgi = None
        self.nginx = None
        self.publish_socket = os.path.join(directory, "run", "nginx-publish.sock")
        self.socket = os.path.join(directory, "run", "folio.sock")


class Stack:
    """folio-fcgi + nginx in a temporary directory; with FOLIO_TEST_NODES=N, N of them and a front."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="folio-e2e-")
        self.db = os.path.join(self.dir, "folio.db")
        self.pg_state = None
        if os.environ.get("FOLIO_TEST_DB") == "postgresql" or NODES > 1:
            self.pg_state = os.path.join(self.dir, "pg")
            subprocess.run([os.path.join(SOURCE, "scripts", "pg-test-cluster"), "start", self.pg_state], check=True)
            with open(os.path.join(self.pg_state, "conninfo")) as f:
                self.db = f.read().strip()
        self.port = free_port()
        self.redis_dir = os.path.join(self.dir, "redis") if NODES > 1 else None
        os.makedirs(os.path.join(self.dir, "log"), exist_ok=True)
        self.nodes = [Node(self.dir, self.port if NODES == 1 else free_port())]
        for i in range(1, NODES):
            node = Node(os.path.join(self.dir, "node%d" % i), free_port())
            os.makedirs(os.path.join(node.dir, "run"))
            os.symlink(os.path.join(self.dir, "log"), os.path.join(node.dir, "log"))  # one set of log files
            self.nodes.append(node)
        self.front = None
        self.fcgi = Processes(self, "fcgi")
        self.nginx = Processes(self, "nginx")
        self.secret = os.path.join(self.dir, "channel.secret")  # shared by folio-fcgi and nginx-conf
        with open(self.secret, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        for node in self.nodes[1:]:
            shutil.copy(self.secret, os.path.join(node.dir, "channel.secret"))
        self.publish_socket = self.nodes[0].publish_socket
        self.rate = 100000      # nginx's limit_req rate (requests per second per client address)
        self.fcgi_args = []     # extra folio-fcgi flags (e.g. --max-db-pages)
        self.fcgi_log = os.path.join(self.dir, "log", "folio-fcgi.log")
        # The client-token signing keys (folio-fcgi --client-token-keys), as scripts/run makes them.
        self.client_keys = os.path.join(self.dir, "client-token.keys")
        with open(os.open(self.client_keys, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("k1 %s\n" % os.urandom(32).hex())
        self.cors_origins = ""  # nginx's FOLIO_CORS_ORIGINS (scripts/nginx-conf)

    @property
    def postgresql(self):
        return self.pg_state is not None

    @property
    def cluster(self):
        return len(self.nodes) > 1

    def pg(self, command):
        """scripts/pg-test-cluster COMMAND (down, up) on the stack's PostgreSQL cluster."""
        subprocess.run([os.path.join(SOURCE, "scripts", "pg-test-cluster"), command, self.pg_state], check=True)

    def redis(self, command):
        """scripts/redis-private COMMAND (down, up) on the cluster's Redis."""
        subprocess.run([os.path.join(SOURCE, "scripts", "redis-private"), command, self.redis_dir], check=True)

    def redis_url(self):
        """redis://:PASSWORD@127.0.0.1:PORT of the cluster's Redis."""
        return subprocess.run([os.path.join(SOURCE, "scripts", "redis-private"), "url", self.redis_dir], check=True,
                              capture_output=True, text=True).stdout.strip()

    def scalar(self, sql):
        """The one value `sql` selects, read from the stack's database (SQLite file or PostgreSQL)."""
        if self.postgresql:
            out = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql, self.db], check=True, capture_output=True, text=True)
            return int(out.stdout.strip())
        import sqlite3
        with sqlite3.connect(self.db) as db:
            return db.execute(sql).fetchone()[0]

    def admin(self, *args, check=True):
        """folio-admin's stdout, stripped; with check=False, the whole CompletedProcess (any exit status)."""
        r = subprocess.run([ADMIN, "--db", self.db, *args], check=check, capture_output=True, text=True)
        return r.stdout.strip() if check else r

    def start_fcgi(self):
        """Starts the folio-fcgi of every node whose responder is not running."""
        for node in self.nodes:
            if node.fcgi is None or node.fcgi.poll() is not None:
                self.start_node_fcgi(node)

    def start_node_fcgi(self, node):
        os.makedirs(os.path.join(node.dir, "run"), exist_ok=True)
        if os.path.exists(node.socket):
            os.unlink(node.socket)
        shared = []
        if self.cluster:  # presence shared through the cluster's Redis, as scripts/cluster runs it
            self.start_redis()
            with open(os.path.join(self.redis_dir, "port")) as f:
                shared = ["--presence-redis", "127.0.0.1:" + f.read().strip(),
                          "--presence-redis-password-file", os.path.join(self.redis_dir, "password")]
        with open(self.fcgi_log, "a") as log:
            node.fcgi = subprocess.Popen([FCGI, "--socket", node.socket, "--db", self.db, "--workers", "4",
                                          "--max-body", str(RESPONDER_MAX_BODY), "--channel-secret-file", self.secret,
                                          "--publish-socket", node.publish_socket, "--client-token-keys", self.client_keys,
                                          *shared, *self.fcgi_args], stderr=log)
        for _ in range(200):  # the socket's file appears at bind(), before listen(): connect to know it listens
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(node.socket)
                    return
                except OSError:
                    time.sleep(0.05)
        raise RuntimeError("folio-fcgi did not start")

    def start_redis(self):
        """The cluster's Redis (Nchan's channels, and presence: folio-fcgi --presence-redis), unless it runs."""
        if not os.path.exists(os.path.join(self.redis_dir, "port")):
            subprocess.run([os.path.join(SOURCE, "scripts", "redis-private"), "start", self.redis_dir, str(free_port())], check=True)

    def start_nginx(self):
        """Each node's nginx that is not running, as scripts/run starts it (scripts/nginx-start: render,
        remove stale sockets, exec nginx); in a cluster, with Redis, and the front when it is not running."""
        env = dict(os.environ, FOLIO_CORS_ORIGINS=self.cors_origins)
        if self.cluster:
            self.start_redis()
            env.update(FOLIO_REDIS_URL=self.redis_url(), FOLIO_TRUSTED_PROXY="127.0.0.1",
                       FOLIO_ACCESS_LOG=os.path.join(self.dir, "log", "nginx-access.log") + " folio_json")
        restarted = False
        for node in self.nodes:
            if node.nginx is None or node.nginx.poll() is not None:
                restarted = restarted or node.nginx is not None
                node.nginx = subprocess.Popen([os.path.join(SOURCE, "scripts", "nginx-start"), node.dir, str(node.port), str(self.rate)], env=env)
                self.wait_listening(node.port, node.nginx)
        if self.cluster and restarted and self.front is not None and self.front.poll() is None:
            self.wait_front_routes()
        if self.cluster and (self.front is None or self.front.poll() is not None):
            front_dir = os.path.join(self.dir, "front")
            os.makedirs(front_dir, exist_ok=True)
            self.front = subprocess.Popen([os.path.join(SOURCE, "scripts", "front-start"), front_dir, str(self.port),
                                           *["127.0.0.1:%d" % n.port for n in self.nodes]])
            self.wait_listening(self.port, self.front)

    def wait_front_routes(self, seconds=15):
        """Waits until the front passes a request to a node again. A node whose nginx was down while
        clients kept asking (subscribers reconnecting) is left out by the front for its fail_timeout
        (scripts/front-start: max_fails=3 fail_timeout=5s): with every node down, the front answers
        503 for up to 5 s after they are back, as it would in production."""
        deadline = time.time() + seconds
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/healthz")
                status = c.getresponse().status
                c.close()
                if status == 200:
                    return
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("the front routes to no node %d s after the nodes' nginx started\n" % seconds + self.log_tails())
            time.sleep(0.1)

    def wait_listening(self, port, process):
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                if process.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError("nginx did not start\n" + self.log_tails())

    def log_tails(self, lines=8):
        """The last lines of folio-fcgi's and nginx's error logs, for a failure message."""
        out = []
        for path in (self.fcgi_log, os.path.join(self.dir, "log", "nginx-error.log")):
            try:
                with open(path, errors="replace") as f:
                    out.append("--- %s:\n%s" % (os.path.basename(path), "".join(collections.deque(f, lines))))
            except OSError as e:
                out.append("--- %s: %s" % (os.path.basename(path), e))
        return "\n".join(out)

    def stop(self):
        for p in [self.front] + [n.nginx for n in self.nodes] + [n.fcgi for n in self.nodes]:
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        if self.redis_dir:
            subprocess.run([os.path.join(SOURCE, "scripts", "redis-private"), "stop", self.redis_dir], check=False)
        if self.pg_state:
            subprocess.run([os.path.join(SOURCE, "scripts", "pg-test-cluster"), "stop", self.pg_state], check=False)


def channel_of(ids, who="a"):
    """The channel id of the record `ids` for tenant `who` (service/crdt/publish/nchan.hpp)."""
    with open(STACK.secret) as f:
        secret = f.readline().strip().encode()
    text = "\n".join([CREDS[who][0][3:19], ids["organizationId"], ids["documentId"], ids["editorId"]])
    return hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()


class Subscribing:
    """In a cluster, Nchan greets a subscriber a few milliseconds before its node's Redis subscription
    to the channel is live (docs/OPERATIONS.md "Running N nodes"); a test that publishes at once could
    lose the race. Made before the subscribe, done() waits until Redis counts one more subscription to
    the channel (or 2 s, when that node's worker was subscribed already). Nothing on one node."""

    def __init__(self, ids, who="a"):
        self.key = "{channel:/%s}:pubsub" % channel_of(ids, who) if STACK.cluster and ids else None
        self.before = self.count() if self.key else 0

    def count(self):
        port = open(os.path.join(STACK.redis_dir, "port")).read().strip()
        with open(os.path.join(STACK.redis_dir, "password")) as f:
            env = dict(os.environ, REDISCLI_AUTH=f.read().strip())
        out = subprocess.run(["redis-cli", "-p", port, "PUBSUB", "NUMSUB", self.key], capture_output=True, text=True, env=env).stdout.split()
        return int(out[1]) if len(out) == 2 else 0

    def done(self):
        deadline = time.time() + 2
        while self.key and self.count() <= self.before and time.time() < deadline:
            time.sleep(0.01)


def read_all(s):
    """Every byte `s` receives until the peer closes."""
    chunks = []
    while True:
        c = s.recv(65536)
        if not c:
            return b"".join(chunks)
        chunks.append(c)


def responses(raw):
    """(status, body) of each HTTP/1.1 response in `raw` (Content-Length framed)."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = int([line.split(b":", 1)[1] for line in lines if line.lower().startswith(b"content-length:")][0])
        out.append((int(lines[0].split()[1]), rest[:length]))
        raw = rest[length:]
    return out


def single_node(test):
    """Marks a test of what only one node's processes show (skipped in a cluster: FOLIO_TEST_NODES)."""
    import unittest
    return unittest.skipIf(NODES > 1, "a test of one node's processes; tests/e2e/cluster_e2e.py covers a cluster's")(test)


STACK = Stack()  # its processes start in setUpModule
CREDS = {}


def setUpModule():
    """Tenants a and b with keys and tokens (a also read-only, expired, revoked and mismatched ones),
    then folio-fcgi and nginx. Test modules import it as their own setUpModule."""
    s = STACK
    subprocess.run([ADMIN, "--db", s.db, "list"], check=True, capture_output=True)
    for tenant in ("a", "b"):
        key = s.admin("create-key", "tenant-" + tenant)
        kid = key[3:19]
        CREDS[tenant] = (key, s.admin("create-token", kid, "subject-" + tenant))
        if tenant == "a":
            CREDS["a_ro"] = (key, s.admin("create-token", kid, "reader", "--read-only"))
            CREDS["a_expired"] = (key, s.admin("create-token", kid, "old", "--expires", "2020-01-01T00:00:00.000Z"))
            revoked = s.admin("create-token", kid, "gone")
            s.admin("revoke-token", revoked[3:19])
            CREDS["a_revoked"] = (key, revoked)
            CREDS["a_wrong_secret"] = (key, CREDS["a"][1][:-1] + ("0" if CREDS["a"][1][-1] != "0" else "1"))
    CREDS["a_key_b_token"] = (CREDS["a"][0], CREDS["b"][1])
    try:
        s.start_fcgi()
        s.start_nginx()
    except Exception:
        s.stop()  # unittest skips tearDownModule when setUpModule fails
        raise


def tearDownModule():
    STACK.stop()
    if os.environ.get("FOLIO_E2E_KEEP"):
        print("e2e files kept in", STACK.dir)
    else:
        shutil.rmtree(STACK.dir, ignore_errors=True)


def wait_until(predicate, seconds=30, what="the condition"):
    """Polls `predicate` every 0.1 s until it holds; fails with the services' log tails after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("%s did not hold within %d s\n%s" % (what, seconds, STACK.log_tails()))


def metric_total(name):
    """The metric `name` (a counter or gauge without labels) summed over the nodes' /metrics."""
    total = 0
    for node in STACK.nodes:
        status, raw = call("/metrics", who=None, method="GET", body=b"", content_type=None, raw=True, port=node.port)
        assert status == 200, raw
        total += sum(int(float(line.rsplit(" ", 1)[1])) for line in raw.decode().splitlines() if line.rsplit(" ", 1)[0] == name)
    return total


def publish_failures():
    """folio_publish_failures_total summed over the nodes' /metrics."""
    return metric_total("folio_publish_failures_total")


def redis_stall(test, update):
    """Stops the cluster's Redis (SIGSTOP) while `update()` commits changes through the front, then resumes
    it (SIGCONT): six updates before, updates until every node's publishes have failed six times more
    (each waits past its timeout), six after. Each node's nginx releases what it held at the resume, the
    nodes' interleaved. No clock decides when to resume: the failures counted do."""
    with open(os.path.join(STACK.redis_dir, "redis.pid")) as f:
        redis_pid = int(f.read())
    for _ in range(6):
        update()
    failures = publish_failures()
    os.kill(redis_pid, signal.SIGSTOP)
    try:
        deadline = time.time() + 20
        while publish_failures() - failures < 6:
            test.assertLess(time.time(), deadline, "publishes did not fail with Redis stopped")
            update()
        for _ in range(6):
            update()
    finally:
        os.kill(redis_pid, signal.SIGCONT)


def log_lines(path):
    """A log file's whole non-empty lines. A line still being written is left out: a reader can see the
    first pages of a writer's append before the rest (a batch of lines is one write of up to 64 KiB)."""
    with open(path) as f:
        text = f.read()
    return [line for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]


def unique_keys(pairs):
    """json.loads hook: an object with a key twice is a defect (Python's json would keep the last silently)."""
    dup = sorted(k for k, n in collections.Counter(k for k, _ in pairs).items() if n > 1)
    if dup:
        raise AssertionError(f"answer has duplicate keys {dup}")
    return dict(pairs)


def call(path, data=None, who="a", body=None, method="POST", content_type="application/json", headers=None, raw=False, source="127.0.0.1",
         port=None, timeout=60):
    """Returns (http status, parsed JSON body), or (http status, the body's bytes) with raw=True; sent
    from the loopback address `source` (nginx's rate limit is per address) to the stack, or to one node's
    nginx (`port`: STACK.nodes[i].port); `timeout`: seconds without a byte before it gives up (OSError)."""
    conn = http.client.HTTPConnection("127.0.0.1", port or STACK.port, timeout=timeout, source_address=(source, 0))
    h = {"Content-Type": content_type} if content_type else {}
    if who:
        key, token = CREDS[who]
        h["x-folio-api-key"] = key
        h["x-folio-auth-token"] = token
    h.update(headers or {})
    if body is None:
        body = json.dumps({"data": data if data is not None else {}})
    if isinstance(body, str):
        body = body.encode()
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    answer = r.read()
    conn.close()
    if raw:
        return r.status, answer
    try:
        return r.status, json.loads(answer, object_pairs_hook=unique_keys)
    except ValueError:
        return r.status, answer


def ok(test, res, message):
    status, body = res
    test.assertEqual(status, 200, body)
    test.assertEqual(body["result"]["status"], "success")
    test.assertEqual(body["result"]["message"], message)
    return body["result"].get("data")


def err(test, res, http, status, message=None):
    code, body = res
    test.assertEqual(code, http, body)
    test.assertEqual(body["error"]["status"], status, body)
    if message is not None:
        test.assertEqual(body["error"]["message"], message)
    return body["error"]["message"]


def subscription_request(ids, who="a"):
    """The bytes of an EventSource subscribe to the record `ids` (organizationId, documentId, editorId)."""
    key, token = CREDS[who]
    return ("GET /v2/crdt/subscribe?%s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nx-folio-api-key: %s\r\n"
            "x-folio-auth-token: %s\r\n\r\n" % (urllib.parse.urlencode(ids), key, token)).encode()


def answer_complete(buf):
    """Whether `buf` holds an EventSource greeting, or a whole Content-Length framed answer."""
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    if head.startswith(b"HTTP/1.1 200"):
        return b": hi\n" in body
    lengths = [line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    return bool(lengths) and len(body) >= int(lengths[0])


def read_answer(sock):
    """The bytes of one answer on `sock`: a framed answer, or an EventSource greeting."""
    buf = b""
    while not answer_complete(buf):
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def raw_answer(request, source="127.0.0.1"):
    """(status, headers lower-cased, body) of nginx's answer to raw request bytes; a repeated header's
    values are joined with ", " (so a test sees that it was repeated)."""
    with socket.create_connection(("127.0.0.1", STACK.port), timeout=30, source_address=(source, 0)) as s:
        s.sendall(request)
        buf = read_answer(s)
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        k = k.strip().lower()
        headers[k] = headers[k] + ", " + v.strip() if k in headers else v.strip()
    return int(lines[0].split()[1]), headers, body


class EventStream:
    """One raw EventSource subscriber, greeted by Nchan (subscribed) when constructed; `request` (raw
    bytes) replaces the API-key subscription of `ids`; `port` is one node's nginx (default: the stack)."""

    def __init__(self, ids, who="a", source="127.0.0.1", request=None, port=None):
        subscribing = Subscribing(ids if request is None else None, who)
        self.sock = socket.create_connection(("127.0.0.1", port or STACK.port), timeout=30, source_address=(source, 0))
        self.sock.sendall(request if request is not None else subscription_request(ids, who))
        self.buf = read_answer(self.sock)
        if not (self.buf.startswith(b"HTTP/1.1 200") and b": hi\n" in self.buf):
            self.sock.close()
            raise AssertionError("subscriber not greeted: %r" % self.buf[:400])
        self.buf = self.buf.partition(b": hi\n")[2]
        subscribing.done()

    def next_data(self):
        """The next event's data, parsed JSON."""
        while b"\n\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("stream closed")
            self.buf += chunk
        event, _, self.buf = self.buf.partition(b"\n\n")
        lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
        return json.loads(b"".join(lines)) if lines else self.next_data()

    def close(self):
        self.sock.close()
