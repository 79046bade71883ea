"""One run of bench/cluster.sh: N nodes on PostgreSQL (tests/e2e/stack.py's stack: with N > 1 a front nginx
and Redis, as scripts/cluster runs them; with N = 1 one node, no front), loaded with wrk through the stack's
port, printing one line per workload:
    RESULT <workload> <nodes> <req/s> <p50_ms> <p99_ms> <requests> <errors> <fcgi_ms> <node_nginx_ms> <front_ms>
           <postgres_ms> <redis_ms> <hit_rate>
where the *_ms figures are CPU time (user + system, /proc) per request answered, summed over the processes of
that kind (every node's folio-fcgi; every node's nginx, master and workers; the front; PostgreSQL's server
processes; Redis), and hit_rate is the document cache's hits / (hits + misses) over the run, all nodes.

Run as:  cluster_load.py BUILD_DIR SOURCE_DIR NODES SECONDS
"""
import json
import os
import subprocess
import sys
import tempfile

build, source, nodes, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.environ["FOLIO_TEST_NODES"] = str(nodes)
os.environ["FOLIO_TEST_DB"] = "postgresql"
sys.argv = [sys.argv[0], build, source]
sys.path.insert(0, os.path.join(source, "tests", "e2e"))
import stack  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ms(pid):
    """CPU time of `pid` and its children (one level: nginx's workers, PostgreSQL's backends), in ms."""
    total = 0
    for p in [pid] + children(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total * 1000.0 / TICKS


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def postmaster():
    with open(os.path.join(stack.STACK.pg_state, "dir")) as f:
        with open(os.path.join(f.read().strip(), "data", "postmaster.pid")) as g:
            return int(g.readline())


def redis_pid():
    if not stack.STACK.redis_dir:
        return None
    with open(os.path.join(stack.STACK.redis_dir, "redis.pid")) as f:
        return int(f.read())


def sample():
    s = stack.STACK
    out = {
        "fcgi": sum(cpu_ms(n.fcgi.pid) for n in s.nodes),
        "nginx": sum(cpu_ms(n.nginx.pid) for n in s.nodes),
        "front": cpu_ms(s.front.pid) if s.front else 0.0,
        "postgres": cpu_ms(postmaster()),
        "redis": cpu_ms(redis_pid()) if redis_pid() else 0.0,
        "hits": 0, "misses": 0,
    }
    for n in s.nodes:
        text = subprocess.run(["curl", "-s", "http://127.0.0.1:%d/metrics" % n.port], capture_output=True, text=True).stdout
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name == "folio_doc_cache_hits_total":
                out["hits"] += float(value)
            elif name == "folio_doc_cache_misses_total":
                out["misses"] += float(value)
    return out


def wrk(name, target, threads, connections, bodies):
    """wrk for `seconds`; each thread sends its own group of bodies in turn (one record per connection
    for updates)."""
    key, token = stack.CREDS["a"]
    lua = os.path.join(source, "bench", "support", "bodies.lua")
    before = sample()
    out = subprocess.run(["wrk", "-t%d" % threads, "-c%d" % connections, "-d%ds" % seconds, "--timeout", "30s", "-s", lua,
                          "http://127.0.0.1:%d" % stack.STACK.port], env=dict(os.environ, BODIES=bodies, TARGET=target, FOLIO_API_KEY=key, FOLIO_AUTH_TOKEN=token),
                         capture_output=True, text=True, check=True).stdout
    after = sample()
    rps, p50, p99, errors, requests = [line.split()[1:] for line in out.splitlines() if line.startswith("RESULT")][0]
    n = max(1, int(requests))
    per = {k: (after[k] - before[k]) / n for k in ("fcgi", "nginx", "front", "postgres", "redis")}
    looked = (after["hits"] - before["hits"]) + (after["misses"] - before["misses"])
    hit_rate = (after["hits"] - before["hits"]) / looked if looked else 0.0
    print("RESULT %s %d %s %s %s %s %s %.3f %.3f %.3f %.3f %.3f %.3f" % (name, nodes, rps, p50, p99, requests, errors, per["fcgi"], per["nginx"],
                                                                       per["front"], per["postgres"], per["redis"], hit_rate), flush=True)


def main():
    stack.STACK.rate = 10000000  # nginx's rate limit out of the way
    stack.setUpModule()
    try:
        work = stack.STACK.dir

        def body(name, d):
            path = os.path.join(work, name)
            with open(path, "w") as f:
                json.dump({"data": d}, f)
            return path

        base = {"organizationId": "org", "documentId": "load"}
        status, answer = stack.call("/v2/crdt/add", dict(base, editorId="small", type="text", data="x" * 1024))
        assert status == 200, answer
        get1k = body("get1k.json", dict(base, editorId="small"))
        groups = []
        for i in range(4):
            status, answer = stack.call("/v2/crdt/add", dict(base, editorId="w%d" % i, type="text", data="y" * 1024))
            assert status == 200, answer
            a = body("w%d-a.json" % i, dict(base, editorId="w%d" % i, data="y" * 1024))
            b = body("w%d-b.json" % i, dict(base, editorId="w%d" % i, data="y" * 512 + "!" + "y" * 512))
            groups.append(a + "," + b)
        wrk("get1k", "/v2/crdt/get", 2, 16, get1k)
        wrk("update1k", "/v2/crdt/update", 4, 4, ";".join(groups))
    finally:
        stack.tearDownModule()


if __name__ == "__main__":
    main()
