"""The README's Figures section, made from one results file of scripts/bench: every number in it is
read from that file, so the README quotes one run and nothing else.

  figures_md.py RESULTS_FILE                prints the section (Markdown)
  figures_md.py RESULTS_FILE README.md      replaces the part of README.md between the markers
                                            <!-- figures:begin --> and <!-- figures:end -->
"""
import re
import sys
import textwrap

BEGIN, END = "<!-- figures:begin (scripts/bench writes this part from its results file) -->", "<!-- figures:end -->"


def sections(text):
    """{command: its output} for each "==== command ====" section, plus "header"; the sections of one
    command run twice (bench/browser.sh: its engine part, then its live part) are joined."""
    parts = re.split(r"^==== (.+?) ====$", text, flags=re.M)
    out = {"header": parts[0]}
    for cmd, body in zip(parts[1::2], parts[2::2]):
        key = cmd.split(" ")[0]
        out[key] = out.get(key, "") + body
    return out


def find(pattern, text, what, flags=re.M):
    m = re.search(pattern, text, flags)
    if not m:
        raise SystemExit("figures_md.py: no %s in the results file" % what)
    return m


def md(verdict):
    """A printed target and verdict as Markdown: <= becomes ≤, 8x becomes 8×."""
    return re.sub(r"(\d)x\b", "\\1×", verdict.strip().replace("<=", "≤").replace(">=", "≥"))


def num(x, digits=0):
    return "{:,.{}f}".format(float(x), digits)


def trace_block(out, trace):
    block = find(r"^%s: gap buffer replays (\d+) patches in ([0-9.]+) ms.*?(?=\n\n|\Z)" % re.escape(trace), out, trace, re.M | re.S).group(0)
    rows = {}
    for m in re.finditer(r"^  (local replay|remote merge|remote keys|decode\+zstd|decode|encode\+zstd|encode) +([0-9.]+) ms +([0-9.]+)x *(.*)$", block, re.M):
        rows[m.group(1)] = (m.group(3), m.group(4))
    for m in re.finditer(r"^  (encoded size|zstd size) +([0-9.]+) KB +(.*?) *\(final", block, re.M):
        rows[m.group(1)] = (m.group(2), m.group(3))
    m = find(r"^  heap held +([0-9.]+) MB +(.*?) {3}\(\d+ runs", block, "heap held")
    rows["heap held"] = (m.group(1), m.group(2))
    base = re.match(r".*?(\d+) patches in ([0-9.]+) ms", block)
    return base.group(1), base.group(2), rows


def main():
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
    s = sections(text)
    for cmd in ("bench/trace_bench", "bench/record_bench", "bench/json_bench", "bench/peers.sh", "bench/browser.sh", "bench/load.sh",
                "bench/annotations_load.sh", "bench/live.sh"):
        if cmd not in s:
            raise SystemExit("figures_md.py: the results file has no %s section (run scripts/bench without a part)" % cmd)
    date = find(r"^date: +(\S+)", s["header"], "date").group(1)
    commit = find(r"^commit: +(\S+)", s["header"], "commit").group(1)
    start = find(r"^load average at the start: (\S+)(.*)$", s["header"], "load average").groups()
    end = find(r"^load average at the end: (\S+)", text, "load average at the end").group(1)
    machine = find(r"^machine: +(.*)$", s["header"], "machine").group(1)
    m = re.search(r"^Wall-clock / CPU time of the figures above: up to ([0-9.]+)x", s["bench/trace_bench"], re.M)
    sharing = m.group(1) if m else None  # results files from before 2026-11-24's harness lack it
    name = sys.argv[1].split("/")[-1]
    o = []
    w = o.append
    cores = int(find(r"^(\d+) cores", machine, "cores").group(1))
    busy = float(start[0]) > cores / 4 or (sharing is not None and float(sharing) > 1.1)
    cpu = "" if sharing is None else "; trace_bench's wall-clock time was up to %s× its CPU time" % sharing
    w("The figures below are those of [bench/results/%s](bench/results/%s) (%s, commit %s; %s), " % (name, name, date, commit, machine))
    if busy:
        w("**on a machine shared with other work** (load average %s at the start, %s at the end%s): times are inflated and ratios "
          "noisy; they are to be regenerated on a quiet machine.\n" % (start[0], end, cpu))
    else:
        w("on a quiet machine (load average %s at the start%s).\n" % (start[0], cpu))
    parts = re.findall(r"^---- scripts/bench (\S+) ----$", text, re.M)
    if parts:  # a file joined from the parts of one run (scripts/bench engine, then http)
        starts = re.findall(r"^load average at the start: (\S+)", text, re.M)
        ends = re.findall(r"^load average at the end: (\S+)", text, re.M)
        w("The parts ran one after the other: %s.\n" % "; ".join(
            "%s load average %s at the start, %s at the end (its own work included%s)" % (
                part, a, z, "; above twice the cores, so other work ran too and its figures may be inflated" if float(z) > 2 * cores else "")
            for part, a, z in zip(["engine"] + parts, starts, ends)))

    tb = s["bench/trace_bench"]
    patches, gap, r = trace_block(tb, "automerge-paper")
    w("\nEditing traces (`bench/trace_bench`, fastest of 5; automerge-paper, %s patches, ratios to a gap buffer replaying the same "
      "patches, %s ms in this run):\n\n" % (num(patches), gap))
    w("| figure | ratio to the gap buffer / size | target: verdict |\n|---|---|---|\n")
    for key, label in (("local replay", "local replay, one op per patch"), ("remote merge", "merge of the whole op log into an empty replica"),
                       ("remote keys", "every patch as its own encoded batch, applied in turn (a client's keystrokes)"),
                       ("decode", "decode to a ready document"), ("decode+zstd", "decode to a ready document, with zstd")):
        w("| %s | %s× | %s |\n" % (label, r[key][0], md(r[key][1])))
    w("| encoded document, full causal history | %s KB | %s |\n" % (r["encoded size"][0], md(r["encoded size"][1])))
    w("| the same with zstd | %s KB | %s |\n" % (r["zstd size"][0], md(r["zstd size"][1])))
    w("| heap held by the document | %s MB | %s |\n" % (r["heap held"][0], md(r["heap held"][1])))
    _, sgap, sr = trace_block(tb, "seph-blog1")
    w("\nOn seph-blog1 (no targets; gap buffer %s ms): local replay %s×, merge %s×, decode %s× (%s× with zstd), %s KB (%s KB with zstd), "
      "%s MB held.\n" % (sgap, sr["local replay"][0], sr["remote merge"][0], sr["decode"][0], sr["decode+zstd"][0], sr["encoded size"][0],
                          sr["zstd size"][0], sr["heap held"][0]))

    pe = s["bench/peers.sh"]
    peers = {}
    for trace in ("automerge-paper", "seph-blog1"):
        block = find(r"^%s: ratios to the C\+\+ gap buffer.*?(?=\n\n|\Z)" % re.escape(trace), pe, "peers " + trace, re.M | re.S).group(0)
        rows = {}
        for m in re.finditer(r"^  (folio|diamond-types \S+|yjs \S+) +([0-9.]+) ms +([0-9.]+)x +([0-9.]+) ms +([0-9.]+)x +([0-9.]+) KB +(.*)$", block, re.M):
            rows[m.group(1).split(" ")[0]] = (m.group(1), m.group(3), m.group(5), m.group(6), m.group(7).strip())
        also = find(r"one transaction ([0-9.]+) ms \(([0-9.]+)x\); diamond-types through Doc.ins/del ([0-9.]+) ms \(([0-9.]+)x\)", block, "peers' also line")
        # Remote keystrokes (bench/peers.sh prints them since 2026-11-29; older results files lack the line, and the column is left out).
        keys = re.search(r"^  remote keystrokes, (\d+) updates applied one by one: folio ([0-9.]+) ms \(([0-9.]+)x\); diamond-types ([0-9.]+) ms "
                         r"\(([0-9.]+)x\), through Doc.mergeBytes ([0-9.]+) ms \(([0-9.]+)x\); yjs ([0-9.]+) ms \(([0-9.]+)x\)$", block, re.M)
        peers[trace] = (rows, also, keys and {"updates": keys.group(1), "folio": keys.group(3), "diamond-types": keys.group(5),
                                              "diamond-types doc": keys.group(7), "yjs": keys.group(9)})
    rows, also, keys = peers["automerge-paper"]
    w("\nAgainst peer libraries on the same traces (`bench/peers.sh` on the trace_bench run above: Yjs as an ES module with a fixed "
      "clientID and one transaction per trace transaction, diamond-types through `OpLog` with the text checked out, each in its own "
      "Node process, fastest of 5 runs after 2 warm-up runs; ratios to the same gap buffer; reference figures, no target)%s:\n\n" % (
          "" if not keys else ". Remote keystrokes is trace_bench's remote keys in each library: every patch as a remote update of its own "
          "(%s on automerge-paper), applied in turn by a fresh receiver — Folio `document::apply` per batch, diamond-types "
          "`OpLog.addFromBytes` per `getPatchSince` patch with one checkout at the end (also `Doc.mergeBytes` per patch, which keeps the "
          "text current), Yjs `Y.applyUpdate` per transaction's v1 update as `doc.on('update')` gives it" % num(keys["updates"])))
    w("| automerge-paper | local replay | merge whole log |%s encoded (compressed) |\n|---|---|---|%s---|\n" % (
        " remote keystrokes |" if keys else "", "---|" if keys else ""))
    for lib in ("folio", "diamond-types", "yjs"):
        label, local, merge, enc, comp = rows[lib]
        label = {"folio": "Folio", "yjs": label.replace("yjs", "Yjs")}.get(lib, label)
        local = "%s× (%s× in one transaction)" % (local, also.group(2)) if lib == "yjs" else local + "×"
        key = "" if not keys else " %s× |" % keys[lib] if lib != "diamond-types" else " %s× (%s× with `Doc.mergeBytes`) |" % (keys[lib], keys["diamond-types doc"])
        w("| %s | %s | %s× |%s %s KB%s |\n" % (label, local, merge, key, enc, "" if comp == "-" else " (%s)" % comp))
    rows, _, keys = peers["seph-blog1"]
    k = (lambda lib: "") if not keys else (lambda lib: "%s× / " % keys[lib])
    w("\nOn seph-blog1: Folio %s× / %s× / %s%s KB, diamond-types %s× / %s× / %s%s KB, Yjs %s× / %s× / %s%s KB (%s).\n" % (
        rows["folio"][1], rows["folio"][2], k("folio"), rows["folio"][3], rows["diamond-types"][1], rows["diamond-types"][2], k("diamond-types"),
        rows["diamond-types"][3], rows["yjs"][1], rows["yjs"][2], k("yjs"), rows["yjs"][3], rows["yjs"][4]))

    br = s["bench/browser.sh"]
    head = find(r"^automerge-paper in (.+?) \(headless, puppeteer-core\): (\d+) patches.*?fastest and median of (\d+) runs after (\d+) warm-up runs.*?"
                r"\(trace_bench, ([0-9.]+) ms, baseline\)$", br, "browser replay")
    browser, _, reps, warmup, native = head.groups()
    w("\nIn a browser (`bench/browser.sh`, %s, headless): automerge-paper's patches as local edits in a page through each library's "
      "JavaScript API — Folio's JavaScript client (its engine, `Replica.insert`/`delete` at code-point positions), diamond-types-web "
      "(`OpLog` + checkout), Yjs (the ES module, fixed clientID, one transaction per trace transaction) — a fresh browser per library, fastest and "
      "median of %s runs after %s warm-up runs, each result checked against the trace's end text; ratios to Folio's native local "
      "replay of the same run (%s ms):\n\n" % (browser, reps, warmup, native))
    w("| automerge-paper in Chromium | fastest | median | ratio to native Folio |\n|---|---|---|---|\n")
    for m in re.finditer(r"^  (folio \(clients/js, wasm\)|diamond-types-web \S+|yjs \S+) +([0-9.]+) ms +([0-9.]+) ms +([0-9.]+)x$", br, re.M):
        label = {"folio": "Folio (JavaScript client, wasm)", "yjs": m.group(1).replace("yjs", "Yjs")}.get(m.group(1).split(" ")[0], m.group(1))
        w("| %s | %s ms | %s ms | %s× |\n" % (label, m.group(2), m.group(3), m.group(4)))
    also = find(r"one transaction ([0-9.]+) ms \(([0-9.]+)x\); diamond-types through Doc.ins/del ([0-9.]+) ms \(([0-9.]+)x\)", br, "browser's also line")
    goal = find(r"folio / the faster peer \((\S+)\): ([0-9.]+) +faster than both peers in the browser \(issue 20\): (\S+)", br, "browser goal")
    w("\nAlso: Yjs with the whole trace in one transaction %s ms, diamond-types through `Doc.ins`/`del` %s ms. Folio ÷ the faster peer "
      "(%s): %s; faster than both peers in the browser (issue 20): %s.\n" % (also.group(1), also.group(3), goal.group(1), goal.group(2), goal.group(3)))
    w("\nWhat a page downloads to use each library (`bench/browser.sh`; bytes, gzip -9; JavaScript as one minified ES module by esbuild, "
      "the same settings for each; as published, each module file compressed one by one, in brackets; no target):\n\n")
    w("| library | WebAssembly | JavaScript minified (as published) | total | total, brotli | ratio to Folio |\n|---|---|---|---|---|---|\n")
    for m in re.finditer(r"^  (folio \(clients/js \S+\)|diamond-types-web \S+|yjs \S+) +([0-9,]+|-) +([0-9,]+) \( *(\d+) files\) +([0-9,]+) +([0-9,]+) +([0-9,]+) +([0-9.]+)x$", br, re.M):
        label = {"folio": "Folio (JavaScript client + engine)", "yjs": m.group(1).replace("yjs", "Yjs")}.get(m.group(1).split(" ")[0], m.group(1))
        w("| %s | %s | %s (%s in %s file%s) | %s | %s | %s× |\n" % (label, m.group(2), m.group(5), m.group(3), m.group(4), "" if m.group(4) == "1" else "s",
                                                               m.group(6), m.group(7), m.group(8)))
    lv = find(r"^REST update -> the change visible.*?\((.+?), headless\): (\d+) updates per receiver after (\d+) warm-up", br, "browser live")
    rows = {m.group(1).split(" ")[0]: m.groups()[1:] for m in re.finditer(
        r"^  (REST update's own round trip \(baseline\)|Node\.js client \(.*?\)|page \(.*?\)) +([0-9.]+) ms +([0-9.]+ ms|-) +(\d+) +([0-9.]+)x$", br, re.M)}
    pn = find(r"^  page / Node\.js client: p50 ([0-9.]+)x, p99 ([0-9.]+)x", br, "page / node")
    w("\nA REST update to the change visible in a page (`bench/browser.sh live`: a page connected through the JavaScript client with a client "
      "token, its textarea bound to a text record; %s updates, one at a time, 10 ms apart; from sending the update to the textarea showing it, "
      "reported to the driver through DevTools): p50 %s ms, p99 %s (%s samples), against the update's own round trip p50 %s ms, p99 %s "
      "(%s samples; the page's p50 is %s× it) and a Node.js client (the same JavaScript client, on a second record; the updates alternate "
      "between the two) p50 %s ms, p99 %s (the page ÷ Node: p50 %s×, p99 %s×); no target.\n" % (
          lv.group(2), rows["page"][0], rows["page"][1], rows["page"][2], rows["REST"][0], rows["REST"][1], rows["REST"][2], rows["page"][3],
          rows["Node.js"][0], rows["Node.js"][1], pn.group(1), pn.group(2)))

    rb = s["bench/record_bench"]
    x = {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in re.finditer(r"^  ((?:xml|map)/\w+) +([0-9.]+) ms +([0-9.]+)x +(.*)$", rb, re.M)}
    xe = find(r"replace emits (\d+) ops; encoded record ([0-9.]+) KB vs ([0-9.]+) KB of XML \(([0-9.]+)x\)", rb, "xml encoded size")
    me = find(r"replace emits (\d+) ops; encoded record ([0-9.]+) KB vs ([0-9.]+) KB of JSON \(([0-9.]+)x\)", rb, "map encoded size")
    w("\nMap and xml records (`bench/record_bench`, fastest of 3; what an iteration builds is freed outside the timed region):\n\n")
    w("| replace-by-value, one small change | time | ratio to the baseline | target: verdict | ops emitted | encoded record vs its text |\n"
      "|---|---|---|---|---|---|\n")
    w("| 1 MiB XML record, one word | %s ms | %s× pugixml parsing the new markup (%s ms) | %s | %s | %s KB vs %s KB XML (%s×) |\n" % (
        x["xml/replace"][0], x["xml/replace"][1], x["xml/pugixml_parse"][0], md(x["xml/replace"][2]), xe.group(1), xe.group(2), xe.group(3), xe.group(4)))
    w("| 10,000-key map, one value | %s ms | %s× copying the map (%s ms) | %s | %s | %s KB vs %s KB JSON (%s×) |\n" % (
        x["map/replace"][0], x["map/replace"][1], x["map/copy"][0], md(x["map/replace"][2]), me.group(1), me.group(2), me.group(3), me.group(4)))
    mem = find(r"1 MiB XML record +([0-9.]+) MB \((\d+) ops\) vs pugixml's DOM ([0-9.]+) MB \(baseline\): ([0-9.]+)x +(.*)$", rb, "xml memory")
    mp = find(r"map, 50 keys x 1,000 +([0-9.]+) MB, ([0-9.]+) B per op \((\d+) ops\) vs its encoding ([0-9.]+) kB, ([0-9.]+) B per op \(([0-9.]+)x\)", rb, "map memory")
    w("\nAgainst the same pugixml parse: the strict parse %s× (%s; it checks what pugixml lets through), loading the 1 MiB record "
      "into an empty one %s× (%s ms; %s), decoding it %s× (%s ms; %s), serialising it %s× (%s). In memory (heap bytes) the 1 MiB XML "
      "record holds %s MB, %s× pugixml's DOM of the same markup (%s MB; %s); a map whose 50 keys were given new values 1,000 times "
      "holds %s bytes per op, %s× its encoding (%s bytes per op).\n" % (
          x["xml/markup_parse"][1], md(x["xml/markup_parse"][2]), x["xml/load"][1], x["xml/load"][0], md(x["xml/load"][2]),
          x["xml/decode"][1], x["xml/decode"][0], md(x["xml/decode"][2]), x["xml/serialize"][1], md(x["xml/serialize"][2]),
          mem.group(1), mem.group(4), mem.group(3), md(mem.group(5)), mp.group(2), mp.group(6), mp.group(5)))

    jb = s["bench/json_bench"]
    w("\nRequest JSON (`bench/json_bench`, fastest of 5; ratios to RapidJSON's own validating DOM parse and its writer on the same "
      "1 MiB bodies; no target):\n\n| body | parse_json | canonical_json |\n|---|---|---|\n")
    for key, label in (("numbers", "a map of numbers"), ("threads", "100 threads of 100 comments"), ("text", "one text value, non-ASCII")):
        m = find(r"^  %s +\d+ +[0-9.]+ ms +[0-9.]+ ms +([0-9.]+)x +[0-9.]+ ms +[0-9.]+ ms +([0-9.]+)x" % key, jb, "json " + key)
        w("| %s | %s× | %s× |\n" % (label, m.group(1), m.group(2)))

    lb = s["bench/load.sh"]
    def load_row(label):
        # req/s, requests, p50, p99, errors, [cpu_ms/req: results from before it was printed lack it], ratio, verdict
        m = find(r"^  %s +([0-9.]+) +(\d+) +([0-9.]+) +(\S+) +(\d+) +(?:[0-9.]+ +(?=[0-9.]+ ))?([0-9.]+) +(.*)$" % re.escape(label), lb, "load.sh " + label)
        return m.groups()
    def load_ratio(label):
        m = find(r"^  %s +(\S+) +(.*)$" % re.escape(label), lb, "load.sh " + label)
        return m.group(1), md(m.group(2))
    g = load_row("crdt/get, 1 KB text, 16 conns")
    # crdt/get's ratio: the median of rounds that measured it and the ceiling by turns (load.sh prints it since 2026-11-28).
    gr = re.search(r"crdt/get's is the median of (\d+) rounds that measured\s+the two by turns, each after a warm-up, of ratios ([0-9.]+)-([0-9.]+)", lb)
    g_how = "; the median of %s rounds measured by turns with the ceiling, each after a warm-up: %s–%s" % gr.groups() if gr else ""
    # A get of a 100 KB text against hello-fcgi answering the very same bytes (load.sh prints it since 2026-11-28).
    g100 = re.search(r"^  crdt/get, 100 KB text, 16 conns +([0-9.]+) +(\d+) +\S+ +\S+ +\d+ +[0-9.]+ +([0-9.]+) +\(vs hello-fcgi answering the same "
                     r"(\d+) KB: median of (\d+) rounds by turns, ([0-9.]+)-([0-9.]+); no target\)$", lb, re.M)
    g100_text = ("; of a 100 KB text %s req/s (%s requests), %s of hello-fcgi answering the same %s KB (the median of %s rounds by turns: %s–%s; "
                 "no target)" % (num(g100.group(1)), num(g100.group(2)), *g100.groups()[2:])) if g100 else ""
    one, four = load_ratio("update p99 / get p99, one writer (the fresh 100 KB record)"), load_ratio("update p99 / get p99, 4 writers on 4 records")
    thr = load_ratio("update throughput, 4 writers / one writer")
    h50, h99 = load_ratio("history / fresh update, p50"), load_ratio("history / fresh update, p99")
    # The machine's busy cores in the update runs (results from before it was printed lack the line).
    busy = re.search(r"^    cores busy: one writer ([0-9.]+), 4 writers ([0-9.]+), of (\d+): .* <= ([0-9.]+) here$", lb, re.M)
    # The bound from the four writers' own CPU per update (load.sh prints it since 2026-11-27; older files
    # printed cores / one writer's busy cores, which four writers sharing commits could beat: computed here).
    bound = ("; four writers kept %s of the %s cores busy (wrk, nginx, folio-fcgi, the kernel), so with every core busy at their CPU per "
             "update they can reach at most %.2f× one writer's throughput on this machine"
             % (busy.group(2), busy.group(3), float(thr[0]) * int(busy.group(3)) / float(busy.group(2)))) if busy else ""
    w("\nHTTP through nginx (`bench/load.sh 10`, wrk; ratios to hello-fcgi answering behind the same nginx, same run): `crdt/get` of a "
      "1 KB text %s req/s (%s requests), %s of the ceiling (%s%s)%s; update p99 ÷ get p99 %s with one writer (%s) and %s with four on four "
      "records (%s), four writers' throughput %s× one writer's (%s%s); an update on the automerge-paper full-history record ÷ the same on "
      "a fresh record: p50 %s (%s), p99 %s (%s).\n" % (num(g[0]), num(g[1]), g[5], md(g[6]), g_how, g100_text, one[0], one[1], four[0], four[1], thr[0], thr[1],
                                                        bound, h50[0], h50[1], h99[0], h99[1]))

    ab = s["bench/annotations_load.sh"]
    a1 = find(r"^  1 connection +([0-9.]+) +(\d+) +([0-9.]+) +(\S+) +(\d+) +p50 ([0-9.]+)x the bare SQLite transaction \(p50 ([0-9.]+) ms of (\d+)\)", ab, "add, 1 connection")
    a4 = find(r"^  4 connections +([0-9.]+) +(\d+) +([0-9.]+) +(\S+) +(\d+) +(\d+) annotations/s", ab, "add, 4 connections")
    w("\nComment annotations through nginx (`bench/annotations_load.sh 5`, wrk; a run that measures fewer than 200 requests is "
      "lengthened, and a p99 from fewer is not printed): `add` of 100 annotations with 200 comments, one connection, p50 %s ms (%s "
      "requests) = %s× the bare SQLite transaction writing the same rows with the same pragmas (%s ms, p50 of %s); %s annotations/s "
      "on 4 connections (no target). v1 get on a document of 10,000 annotations, 8 connections, throughput against hello-fcgi "
      "answering the very same bytes behind the same nginx%s:\n\n" % (a1.group(3), num(a1.group(2)), a1.group(6), a1.group(7), a1.group(8), num(a4.group(6)),
         # annotations_load.sh measures each filter and hello-fcgi by turns since 2026-11-28 (a range column)
         "; the median of %s rounds that measured the two by turns, each after a warm-up, with the rounds' range"
         % find(r"the median of (\d+) rounds that measured the two by turns", ab, "annotation rounds").group(1) if "rounds that measured" in ab else ""))
    w("| filter | results | response | req/s | requests | p50 | p99 | errors | folio-fcgi CPU / request (hello-fcgi's) | vs same bytes: target, verdict |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n")
    names = {"v1-all": "none", "v1-location": "`locationIds` (1)", "v1-user": "`userIds` (1)", "v1-location-user": "`locationIds` + `userIds`",
             "v1-ids": "`annotationIds` (100 + 5 missing)", "v1-location-ids": "`locationIds` + `annotationIds`", "v2-page-status": "v2, `statusIds`, page of 1,000"}
    for m in re.finditer(r"^  (v[12]-\S+) +(\d+) +(\d+) +([0-9.]+) +(\d+) +([0-9.]+) +(\S+) +(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+)(?: +([0-9.]+)-([0-9.]+))? +(.*)$", ab, re.M):
        key, results, kb, rps, n, p50, p99, err, cpu, same_cpu, ratio, lo, hi, verdict = m.groups()
        if lo: ratio += " (%s–%s)" % (lo, hi)
        size = "%.1f MB" % (int(kb) / 1024) if int(kb) >= 1024 else "%s KB" % kb
        w("| %s | %s | %s | %s | %s | %s ms | %s | %s | %s ms (%s ms) | %s: %s |\n" % (
            names.get(key, key), num(results), size, num(rps, 1 if float(rps) < 100 else 0), num(n), p50, p99 if p99 == "-" else p99 + " ms", err,
            cpu, same_cpu, ratio, md(verdict)))

    lv = s["bench/live.sh"]
    rounds = find(r"\((\d+) updates per row", lv, "live rounds").group(1)
    base = find(r"^0 +- +- +- +([0-9.]+) ms", lv, "live baseline").group(1)
    w("\nLive push through nginx + Nchan (`bench/live.sh %s`: %s updates of a text record per row, each fanned out to every "
      "EventSource subscriber; latency from sending the update to the event being read; the update's own latency against the same "
      "updates with no subscriber, %s ms, same run):\n\n" % (rounds, rounds, base))
    w("| subscribers | deliveries | delivery p50 | delivery p99 | update p50 | vs no subscribers |\n|---|---|---|---|---|---|\n")
    for m in re.finditer(r"^(\d+) +([0-9.]+) ms +([0-9.]+ ms|-) +(\d+) +([0-9.]+) ms +([0-9.]+)x", lv, re.M):
        w("| %s | %s | %s ms | %s | %s ms | %s× |\n" % (num(m.group(1)), num(m.group(4)), m.group(2), m.group(3), m.group(5), m.group(6)))
    upd = find(r"update with 1,000 subscribers / with none: ([0-9.]+)x +(.*)$", lv, "live update verdict")
    dl = re.search(r"delivery p99 with 1,000 subscribers: ([0-9.]+) ms +(.*)$", lv, re.M)
    w("\nWith 1,000 subscribers: %sthe update %s× its no-subscriber latency (%s). The update answers once the change is committed and "
      "queued for its channel; sender threads hand it to Nchan off the request path, so the update does not wait for the fan-out.\n" % (
          "delivery p99 %s ms (%s), " % (dl.group(1), md(dl.group(2))) if dl else "", upd.group(1), md(upd.group(2))))
    order = re.search(r"^Delivery order: (.*?)   (.*)$", lv, re.M)
    if order:
        w("\nDelivery order under concurrent updates: %s (%s).\n" % (order.group(1), md(order.group(2))))
    sy = find(r"answer's update: (\d+) bytes; whole HTTP answer: (\d+) bytes\n +full encoded document: (\d+) bytes +-> update / document = ([0-9.]+), "
              r"answer / document = ([0-9.]+)", lv, "sync size")
    ops = find(r"Sync of a client 10,000 of (\d+) operations behind", lv, "sync ops").group(1)
    w("\nA client 10,000 operations behind on the automerge-paper record (%s operations) syncs with a %.1f KB batch (%.1f KB of HTTP answer) "
      "— %s of the record's full encoded document (%.1f KB; %s for the whole answer; no target).\n" % (
          num(ops), int(sy.group(1)) / 1000, int(sy.group(2)) / 1000, sy.group(4), int(sy.group(3)) / 1000, sy.group(5)))

    wh = s.get("bench/webhooks.sh")  # results files from before issue 52 have none
    if wh:
        m = find(r"^Summary: (\d+) deliveries/s \(replayed backlog\), (\d+) end to end; crdt/update with three endpoints / none: "
                 r"p50 ([0-9.]+), p99 ([0-9.]+) \((.*?)\); every update an event: p50 ([0-9.]+), p99 ([0-9.]+)$", wh, "webhooks summary")
        w("\nWebhooks (`bench/webhooks.sh 5`, a receiver on loopback answering at once): %s deliveries/s from a replayed backlog of "
          "failed deliveries (the sender alone), %s/s for events written and delivered end to end; `crdt/update` with three endpoints "
          "subscribed ÷ none, 4 writers, by turns: p50 %s, p99 %s (%s); with every update an event (`--webhook-coalesce 1`, three "
          "deliveries each) p50 %s, p99 %s (no target).\n" % (num(m.group(1)), num(m.group(2)), m.group(3), m.group(4), md(m.group(5)),
                                                             m.group(6), m.group(7)))

    # Paragraphs wrapped as the README's are; tables as they are.
    section = "\n\n".join(p if p.startswith("|") else textwrap.fill(p, 104, break_long_words=False, break_on_hyphens=False)
                            for p in "".join(o).strip("\n").split("\n\n")) + "\n"
    if len(sys.argv) > 2:
        readme = open(sys.argv[2]).read()
        if BEGIN not in readme or END not in readme:
            raise SystemExit("figures_md.py: %s has no figures markers" % sys.argv[2])
        head, rest = readme.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        open(sys.argv[2], "w").write(head + BEGIN + "\n" + section + END + tail)
    else:
        sys.stdout.write(section)


main()
