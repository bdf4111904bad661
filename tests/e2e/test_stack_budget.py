"""The server-wide budget of the ETL stack indexes (`--stack-index-mb`, dec_stack.c), on
net.4.5.2.x64 (24,342 stack walks; one index needs ≈ 9 MiB of it):
* `etwd convert --stack-index-mb 1`: every event is written (the same lines once their "Stack" is
  taken off), fewer carry a Stack — at most as many as the dropped walks it reports on stderr —
  and the exit status is 1, as for dropped events; `--stack-index-mb 16` gives the default's bytes
  and status 0; a bad value is a usage error (2);
* a replay session of a server with `--stack-index-mb 12` (room for one pass, not four) and four
  concurrent subscribers (four passes, four indexes): each gets every event; the events that lose
  their Stack are counted: their sum is > 0 and at most the session stats' `stack_walks_dropped`,
  which /metrics shows too (per session, and the process-wide `etwd_stack_walks_dropped_total`);
  the indexes never held more than the budget (`etwd_stack_index_peak_bytes`) and give it all
  back when their passes end (`etwd_stack_index_bytes` 0);
* with the default budget the same replay, two subscribers at once, gives each exactly convert's
  events with all their stacks, and nothing dropped;
* a replay's stream takes ?stackwalk_events=true|false for its own pass (each pass has its own
  reader): with true convert --stackwalk-events's events while a neighbour's pass of the same
  session goes without the rows; false on a session whose spec says true leaves them out; any
  other value is a 400 problem."""
import os
import re
import subprocess
import tempfile
import threading
import time
import zipfile

from etwd_harness import check, done, BIN, CORPUS, MANIFESTS, Etwd, wait_subscribers

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
SEQ = re.compile(rb'^\{"seq":\d+,')
STACK = re.compile(rb',"Stack":\[.*\]\}$')
BUDGET_MB = 12
SLACK = 4 * (64 << 10)  # each index's first tables (≈ 45 KiB) are counted but never refused


def convert(etl, *args):
    r = subprocess.run([BIN, "convert", "--manifests", MANIFESTS, etl] + list(args), capture_output=True, timeout=600)
    return r.returncode, r.stdout.splitlines(), r.stderr.decode()


def bare(line):
    return SEQ.sub(b"", line)


def unstacked(line):
    return STACK.sub(b"}", bare(line))


def lost_stacks(lines, full):
    """events of @full with a Stack that have none in @lines, and the reverse"""
    lost = sum(1 for a, b in zip(lines, full) if b'"Stack":[' in b and b'"Stack":[' not in a)
    extra = sum(1 for a, b in zip(lines, full) if b'"Stack":[' in a and b'"Stack":[' not in b)
    return lost, extra


def metrics(e):
    st, h, body = e.request("GET", "/metrics")
    check(st == 200, "/metrics: %d" % st)
    m = {}
    for l in body.decode().splitlines():
        if l and not l.startswith("#"):
            k, v = l.rsplit(" ", 1)
            m[k] = int(v)
    return m


def test_convert(etl, full, walks):
    rc, lines, err = convert(etl, "--stack-index-mb", "1")
    m = re.search(r"(\d+) stack walks dropped", err)
    dropped = int(m.group(1)) if m else 0
    check(rc == 1 and dropped > 0, "convert --stack-index-mb 1: exit %d (want 1), dropped walks %d: %r" % (rc, dropped, err[-600:]))
    check("--stack-index-mb 1" in err, "the summary names the budget: %r" % err[-600:])
    check(len(lines) == len(full) and [unstacked(l) for l in lines] == [unstacked(l) for l in full],
          "every event written, the same but for its Stack (%d lines, want %d)" % (len(lines), len(full)))
    lost, extra = lost_stacks(lines, full)
    check(0 < lost <= dropped and extra == 0, "events without their stack: %d (dropped walks %d), with one not "
          "in the default output: %d" % (lost, dropped, extra))
    m = re.search(r"(\d+) stack walks: (\d+) attached to their events, (\d+) not attached", err)
    check(m and int(m.group(1)) == walks and int(m.group(3)) >= dropped, "the walks' summary counts the dropped as not attached: %r" % err[-600:])
    rc, lines, err = convert(etl, "--stack-index-mb", "16")
    check(rc == 0 and lines == full and "dropped" not in err, "--stack-index-mb 16: the default's output (%d, %r)" % (rc, err[-300:]))
    for bad in ("0", "x", "-1"):
        rc, lines, err = convert(etl, "--stack-index-mb", bad)
        check(rc == 2 and "--stack-index-mb" in err, "--stack-index-mb %s: usage error: %d %r" % (bad, rc, err[-200:]))


def replay(e, n, queries=None, spec=None):
    """a replay session of net.etl (@spec's members added) and @n subscribers (their query
    strings: @queries) connected before any reads: their lines"""
    body = {"files": ["net.etl"], "replay": "fast"}
    body.update(spec or {})
    st, h, j = e.json("POST", "/api/v1/sessions", body=body, expect=201)
    sid = j["id"]
    conns = []
    for i in range(n):
        c = e.conn(timeout=300)
        c.request("GET", "/api/v1/sessions/%d/events%s" % (sid, queries[i] if queries else ""),
                  headers={"Authorization": "Bearer " + e.tokens["reader"], "Accept": "application/x-ndjson"})
        r = c.getresponse()
        check(r.status == 200, "subscribe: %d" % r.status)
        conns.append((c, r))
    wait_subscribers(e, sid, n)
    out = [None] * n
    peak = [0]
    busy = [True]

    def read(i):
        c, r = conns[i]
        data = r.read()  # (chunked: to the stream's end)
        c.close()
        out[i] = [l for l in data.split(b"\n") if l.strip()]

    def watch():  # the indexes' bytes while the passes run
        while busy[0]:
            peak[0] = max(peak[0], metrics(e).get("etwd_stack_index_bytes", 0))
            time.sleep(0.05)
    ts = [threading.Thread(target=read, args=(i,)) for i in range(n)]
    w = threading.Thread(target=watch)
    w.start()
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    busy[0] = False
    w.join()
    wait_subscribers_gone(e, sid)
    stats = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]["stats"]
    return sid, out, stats, peak[0]


def wait_subscribers_gone(e, sid, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]["stats"]["subscribers"] == 0:
            return
        time.sleep(0.05)
    check(False, "session %d: the subscribers did not leave" % sid)


def test_server_budget(etl, full, walks):
    with Etwd(args=["--manifests", MANIFESTS, "--stack-index-mb", str(BUDGET_MB)]) as e:
        e.json("POST", "/api/v1/files?name=net.etl", body=open(etl, "rb").read(), ctype="application/octet-stream", expect=201)
        sid, outs, stats, seen = replay(e, 4)
        lost = 0
        for i, lines in enumerate(outs):
            check(lines is not None and len(lines) == len(full), "subscriber %d: %d events, want %d" % (i, len(lines or []), len(full)))
            check([unstacked(l) for l in lines] == [unstacked(l) for l in full], "subscriber %d: the same events but for their stacks" % i)
            l, extra = lost_stacks(lines, full)
            check(extra == 0, "subscriber %d: %d events with a stack the default does not give" % (i, extra))
            lost += l
        dropped = stats.get("stack_walks_dropped")
        check(stats.get("stack_walks") == 4 * walks, "stats stack_walks: %r, want %d" % (stats.get("stack_walks"), 4 * walks))
        check(dropped is not None and 0 < lost <= dropped and stats["stack_walks_unattached"] >= dropped,
              "events without their stack %d, stats stack_walks_dropped %r, unattached %r" % (lost, dropped, stats.get("stack_walks_unattached")))
        m = metrics(e)
        budget = BUDGET_MB << 20
        check(m.get("etwd_stack_index_budget_bytes") == budget, "budget gauge: %r" % m.get("etwd_stack_index_budget_bytes"))
        check(m.get('etwd_session_stack_walks_dropped_total{session="%d"}' % sid) == dropped,
              "/metrics per session: %r, stats %r" % (m.get('etwd_session_stack_walks_dropped_total{session="%d"}' % sid), dropped))
        check(m.get("etwd_stack_walks_dropped_total") == dropped and m.get("etwd_stack_index_refused_total", 0) > 0,
              "/metrics process-wide: dropped %r refused %r" % (m.get("etwd_stack_walks_dropped_total"), m.get("etwd_stack_index_refused_total")))
        check(0 < seen <= m["etwd_stack_index_peak_bytes"] <= budget + SLACK,
              "the indexes held at most the budget: peak %d, seen %d, budget %d" % (m["etwd_stack_index_peak_bytes"], seen, budget))
        check(m.get("etwd_stack_index_bytes") == 0, "all given back once the passes ended: %r" % m.get("etwd_stack_index_bytes"))
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        check(e.stop() == 0, "clean exit")


def test_stackwalk_per_pass(e, full, with_walks):
    """?stackwalk_events= of a replay's stream: this client's pass only, either way"""
    sid, outs, stats, seen = replay(e, 2, ["?stackwalk_events=true", ""])
    check([bare(l) for l in outs[0]] == [bare(l) for l in with_walks],
          "?stackwalk_events=true: convert --stackwalk-events's events (%d lines, want %d)" % (len(outs[0]), len(with_walks)))
    check([bare(l) for l in outs[1]] == [bare(l) for l in full], "its neighbour's pass without the rows: %d lines" % len(outs[1]))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    sid, outs, stats, seen = replay(e, 1, ["?stackwalk_events=false"], {"stackwalk_events": True})
    check([bare(l) for l in outs[0]] == [bare(l) for l in full],
          "spec true, ?stackwalk_events=false: without the rows (%d lines, want %d)" % (len(outs[0]), len(full)))
    for bad in ("yes", "1", ""):
        st, h, body = e.request("GET", "/api/v1/sessions/%d/events?stackwalk_events=%s" % (sid, bad), token="reader",
                                headers={"Accept": "application/x-ndjson"})
        check(st == 400 and b"stackwalk_events must be true or false" in body and
              h.get("content-type", "").startswith("application/problem+json"), "?stackwalk_events=%s: %d %r" % (bad, st, body[:200]))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_server_default(etl, full, walks, with_walks):
    with Etwd(args=["--manifests", MANIFESTS]) as e:
        e.json("POST", "/api/v1/files?name=net.etl", body=open(etl, "rb").read(), ctype="application/octet-stream", expect=201)
        sid, outs, stats, seen = replay(e, 2)
        want = [bare(l) for l in full]
        for i, lines in enumerate(outs):
            check([bare(l) for l in lines or []] == want, "default budget, subscriber %d: convert's events and stacks (%d lines, want %d)"
                  % (i, len(lines or []), len(want)))
        check((stats.get("stack_walks"), stats.get("stack_walks_unattached"), stats.get("stack_walks_dropped")) == (2 * walks, 0, 0),
              "default budget stats: %r" % {k: v for k, v in stats.items() if k.startswith("stack")})
        m = metrics(e)
        check(m.get("etwd_stack_index_budget_bytes") == 1024 << 20 and m.get("etwd_stack_index_refused_total") == 0
              and m.get("etwd_stack_walks_dropped_total") == 0, "default budget /metrics: %r" % {k: v for k, v in m.items() if "stack" in k})
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        test_stackwalk_per_pass(e, full, with_walks)
        check(e.stop() == 0, "clean exit")


def main():
    with tempfile.TemporaryDirectory(prefix="etwdstkb-") as d:
        with zipfile.ZipFile(NET_ZIP) as z:
            z.extractall(d)
        etl = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".etl")][0]
        rc, full, err = convert(etl)
        m = re.search(r"(\d+) stack walks: (\d+) attached to their events, (\d+) not attached", err)
        check(rc == 0 and m and m.group(1) == m.group(2) and "dropped" not in err, "convert, default budget: %d %r" % (rc, err[-300:]))
        walks = int(m.group(1)) if m else 0
        check(sum(b'"Stack":[' in l for l in full) > 20000, "the default output has stacks")
        test_convert(etl, full, walks)
        t0 = time.time()
        test_server_budget(etl, full, walks)
        t1 = time.time()
        rc, with_walks, err = convert(etl, "--stackwalk-events")
        check(rc == 0 and len(with_walks) > len(full) + walks, "convert --stackwalk-events: %d, %d lines" % (rc, len(with_walks)))
        test_server_default(etl, full, walks, with_walks)
        print("server budget %.1fs, default %.1fs" % (t1 - t0, time.time() - t1))
    done()


main()
