"""`etwd convert --format chrome`: wakeups as flow arrows (Trace Event Format flow events, the
v1 "s"/"f" pair ui.perfetto.dev draws as an arrow: docs/etl.md).

Windows: no corpus ETL has Thread/CSwitch or Thread/ReadyThread, so the test writes a small 64-bit
kernel ETL itself (test_chrome_cpu.py's record layouts, plus hook 0x0532 ReadyThread v2): thread
1001 (CPU 0) readies 2001, which is switched in later on CPU 1; 1001 readies 2001 again, which
is switched in on CPU 0; 1001 readies 1002, never switched in (no arrow; counted). Checked: one
s/f pair per switched-in wakeup with matching id, name and cat; the s on the waker's track at the
ReadyThread's ts, right after its instant; the f ("bp":"e") on the woken thread's track at its
Running slice's ts, right after that X; otherData's counts. And the bound: 66,000 threads
readied, 65,536 wait, the rest are dropped (counted, said on stderr).

Linux: a real recording (an etwd session, mode both: its file, and its live stream to know when
it records; sched_switch + sched_wakeup + sched_wakeup_new) while a child sleeps 10 ms 40 times
(and a nice-19 spinner per CPU keeps the idle task off the CPUs),
converted (the session stopped once the child is done): flows end at the child's Running
slices; every f is at the start of a Running slice of the task its wakeup woke (the
sched_wakeup instant before its s, EventData pid), whose start is the first switch-in of that
task after the wakeup; the counts add up (wakeups = flows + unmatched + dropped).
Both files' ndjson through the web page's export (web/export.js, in Node.js): the same Running
slices, CPU tracks, arrows and counts (one mapping). Every document also passes
`python3 -m json.tool`. Root, real tracefs; Node.js."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from etl_synth import buffer, cswitch, logfile_header, process, ready, thread
from etwd_harness import BIN, SRC, Etwd, check, done


def convert(path, *args):
    r = subprocess.run([BIN, "convert", path, "--quiet"] + list(args), capture_output=True, timeout=300)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def chrome(path):
    rc, out, err = convert(path, "--format", "chrome")
    check(rc == 0, "chrome convert %s: rc %d %s" % (path, rc, err[-300:]))
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(out)
        f.flush()
        t = subprocess.run([sys.executable, "-m", "json.tool", f.name], capture_output=True)
        check(t.returncode == 0, "python3 -m json.tool parses it: %s" % t.stderr[-300:])
    return json.loads(out)


NODE_EXPORT = r"""
const X = require(process.argv[1]);
const list = require('fs').readFileSync(0, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
process.stdout.write(X.chromeText(list, process.argv[2]));
"""


def same_as_page(path, doc):
    """the web page's export (web/export.js in node) of the file's ndjson draws the same Running
    slices, CPU tracks and wakeup arrows (ids, tracks, args) and counts; its times come from
    TimeCreated (100 ns), which can differ from the file's own by one tick"""
    if not check(shutil.which("node"), "node is missing: the page's export is checked in Node.js"):
        return
    rc, nd, err = convert(path)
    check(rc == 0, "ndjson convert: rc %d %s" % (rc, err[-300:]))
    r = subprocess.run(["node", "-e", NODE_EXPORT, os.path.join(SRC, "web/export.js"), doc["otherData"]["source"]],
                       input=nd, capture_output=True, timeout=300)
    if not check(r.returncode == 0, "node export: %s" % r.stderr[-500:]):
        return
    page = json.loads(r.stdout)

    def sel(te):
        out = {}
        for e in te:
            if e["ph"] in ("s", "f") or (e["ph"] in ("X", "M") and (e["name"] == "Running" or e["pid"] == CPU_PID)):
                k = json.dumps({a: b for a, b in e.items() if a not in ("ts", "dur")}, sort_keys=True)
                out.setdefault(k, []).append((e.get("ts", 0), e.get("dur", 0)))
        return out
    a, b = sel(doc["traceEvents"]), sel(page["traceEvents"])
    diff = sorted(set(a) ^ set(b))
    check(not diff, "%s: the page's export draws the same slices and arrows: %d differ, e.g. %s" % (path, len(diff), diff[:3]))
    far = [k for k in a if k in b and (len(a[k]) != len(b[k]) or any(
        abs(x[0] - y[0]) > 0.1001 or abs(x[1] - y[1]) > 0.2001 for x, y in zip(sorted(a[k]), sorted(b[k]))))]
    check(not far, "%s: the page's times agree (to 0.1 µs): %s" % (path, far[:3]))
    check(page["otherData"] == doc["otherData"], "the page's counts: %r vs %r" % (page["otherData"], doc["otherData"]))
    print("%s: the page's export agrees: %d slices/arrows" % (os.path.basename(path), sum(len(v) for v in a.values())))


def flows(te):
    """{id: (index of s, index of f)}; each id has exactly one s and one f"""
    s = [(e["id"], i) for i, e in enumerate(te) if e["ph"] == "s"]
    f = [(e["id"], i) for i, e in enumerate(te) if e["ph"] == "f"]
    check(len({k for k, _ in s}) == len(s) and len({k for k, _ in f}) == len(f), "flow ids unique per phase")
    check(sorted(k for k, _ in s) == sorted(k for k, _ in f), "every s has its f: %r %r" % (s[:5], f[:5]))
    fi = dict(f)
    return {k: (i, fi[k]) for k, i in s}


def before(te, i):
    """the event before te[i] in the document on te[i]'s track (pid, tid)"""
    e = te[i]
    for j in range(i - 1, -1, -1):
        if te[j]["ph"] != "M" and te[j]["pid"] == e["pid"] and te[j]["tid"] == e["tid"]:
            return te[j]
    return None


def check_pair(te, k, si, fi):
    """the s right after its waker's instant, the f right after a Running X, same ts and track"""
    s, f = te[si], te[fi]
    check(s["name"] == f["name"] == "wakeup" and s["cat"] == f["cat"] == "sched" and f.get("bp") == "e",
          "flow %d: name, cat, bp: %r %r" % (k, s, f))
    w, x = before(te, si), before(te, fi)
    check(w and w["ph"] == "i" and w["ts"] == s["ts"], "flow %d: s right after its waker's instant: %r %r" % (k, w, s))
    check(x and x["ph"] == "X" and x["name"] == "Running" and x["ts"] == f["ts"],
          "flow %d: f right after the Running slice it starts: %r %r" % (k, x, f))
    return w, x


# ---- Windows: a hand-built kernel trace (the corpus has no CSwitch/ReadyThread); the record
# builders of etl_synth.py (SYSTEM64 records, a QPC of 10 MHz: a tick is 100 ns)

CPU_PID = 2147483647  # the pseudo-process of the CPUs' tracks


def synth(path):
    cpu0 = [logfile_header(3), process(1, 100, b"app.exe"), process(2, 200, b"svc.exe"),
            thread(3, 100, 1001), thread(4, 100, 1002), thread(5, 200, 2001),
            cswitch(100, 1001, 0, 100),
            ready(200, 2001, 1001, 100),          # → 2001 in on CPU 1 at 400
            ready(250, 1002, 1001, 100),          # 1002 never runs: no arrow
            ready(600, 2001, 1001, 100),          # → 2001 in on CPU 0 at 700
            cswitch(700, 2001, 1001, 200)]
    cpu1 = [cswitch(400, 2001, 0, 200), cswitch(500, 0, 2001, 0), thread(900, 100, 1002)]
    with open(path, "wb") as f:
        f.write(buffer(0, 1, cpu0, True) + buffer(1, 2, cpu1))


def windows():
    with tempfile.TemporaryDirectory(prefix="etwdflows-") as d:
        etl = os.path.join(d, "ready.etl")
        synth(etl)
        rc, out, err = convert(etl)
        check(rc == 0, "ndjson convert: rc %d %s" % (rc, err[-300:]))
        evs = [json.loads(l) for l in out.splitlines()]
        doc = chrome(etl)
        same_as_page(etl, doc)
    te = doc["traceEvents"]
    rd = [e for e in evs if e["System"].get("EventName") == "Thread/ReadyThread"]
    check(len(rd) == 3 and [e["EventData"]["TThreadId"] for e in rd] == [2001, 1002, 2001],
          "the synthetic trace decodes 3 ReadyThread: %r" % [e.get("EventData") for e in rd])
    fl = flows(te)
    check(len(fl) == 2, "2 flows (2 of 3 wakeups switched in): %d" % len(fl))
    first = min(e["ts"] for e in te if e["ph"] != "M")
    got = []
    for k, (si, fi) in sorted(fl.items()):
        w, x = check_pair(te, k, si, fi)
        s, f = te[si], te[fi]
        check(w["name"] == "Thread/ReadyThread" and (s["pid"], s["tid"]) == (w["pid"], w["tid"]) == (100, 1001),
              "flow %d starts at 1001's ReadyThread: %r" % (k, w))
        check((f["pid"], f["tid"]) == (x["pid"], x["tid"]) == (200, w["args"]["TThreadId"]),
              "flow %d ends on the readied thread's track: %r" % (k, x))
        got.append((round(s["ts"] - first, 3), round(f["ts"] - first, 3), x["args"]["cpu"]))
    # (ticks of 100 ns after the first event, the trace header at 0 → µs)
    want = [(a / 10.0, b / 10.0, c) for a, b, c in [(200, 400, 1), (600, 700, 0)]]
    check(got == want, "flows (s ts, f ts, CPU of the slice) %r, want %r" % (got, want))
    od = doc["otherData"]
    check((od.get("wakeups"), od.get("wakeup_flows"), od.get("wakeups_unmatched"), od.get("wakeups_dropped")) == (3, 2, 1, 0),
          "otherData counts: %r" % od)


def overflow():
    """66,000 threads readied, none yet switched in: 65,536 wait (the bound), the rest are
    dropped and counted (otherData, stderr); a waiting one switched in still gets its arrow"""
    n, recs = 66000, [ready(10 + i, 100000 + i, 1001, 100) for i in range(66000)]
    recs.append(cswitch(10 + n, 100000, 0, 100))  # the first readied thread runs: its arrow
    bufs, cur, used = [], [logfile_header(1)], 0x48 + len(logfile_header(1))
    for r in recs:
        if used + len(r) > 4096:
            bufs.append(cur)
            cur, used = [], 0x48
        cur.append(r)
        used += len(r)
    bufs.append(cur)
    with tempfile.TemporaryDirectory(prefix="etwdflows-") as d:
        etl = os.path.join(d, "many.etl")
        with open(etl, "wb") as f:
            f.write(b"".join(buffer(0, i + 1, b, i == 0) for i, b in enumerate(bufs)))
        rc, out, err = convert(etl, "--format", "chrome")
    check(rc == 0, "chrome convert: rc %d %s" % (rc, err[-300:]))
    doc = json.loads(out)
    od = doc["otherData"]
    check((od.get("wakeups"), od.get("wakeup_flows"), od.get("wakeups_unmatched"), od.get("wakeups_dropped"))
          == (n, 1, 65535, n - 65536), "bounded pending wakeups: %r" % od)
    check("%d wakeups" % (n - 65536) in err, "the dropped wakeups said on stderr: %r" % err[-300:])
    te = doc["traceEvents"]
    fl = flows(te)
    check(len(fl) == 1 and all(te[f]["tid"] == 100000 for _, f in fl.values()), "the one arrow: %r" % fl)


# ---- Linux: a real recording

SLEEPER = "import time\nfor _ in range(40):\n    time.sleep(0.01)\n"


def record_linux(tmp):
    with Etwd() as e:
        st, h, data = e.request("POST", "/api/v1/sessions", {
            "providers": [{"name": "sched", "events": ["sched_switch", "sched_wakeup", "sched_wakeup_new"]}],
            "mode": "both", "duration_s": 60})
        check(st == 201, "create: %d %s" % (st, data[:300]))
        loc = h["location"]
        first = threading.Event()

        def read():  # the live stream: its first event says the recording runs (then drained)
            for _ in e.ndjson(loc + "/events", timeout=60):
                first.set()
        t = threading.Thread(target=read)
        t.start()
        check(first.wait(30), "the session's first live event")
        # a spinner at nice 19 on each CPU: the sleeper's switch-ins are then from a task, not from
        # the idle task (this VM's recordings can lack idle → task switches; trace-cmd report too)
        spin = [subprocess.Popen([sys.executable, "-c", "import os\nos.nice(19)\nwhile True: pass"])
                for _ in range(os.cpu_count() or 1)]
        try:
            p = subprocess.Popen([sys.executable, "-c", SLEEPER])
            p.wait(60)
        finally:
            for sp in spin:
                sp.kill()
                sp.wait()
        st, _, data = e.request("POST", loc + "/stop")  # (once the sleeper is done, however slow)
        check(st in (200, 202, 204), "stop: %d %s" % (st, data[:200]))
        st, _, data = e.request("GET", loc + "/file?wait=true", token="reader", timeout=60)
        check(st == 200 and data[:10] == b"\x17\x08\x44tracing", "download: %d %r" % (st, data[:20]))
        t.join(30)
    path = os.path.join(tmp, "rec.dat")
    with open(path, "wb") as f:
        f.write(data)
    return path, p.pid


def linux():
    with tempfile.TemporaryDirectory(prefix="etwdflows-") as d:
        path, pid = record_linux(d)
        doc = chrome(path)
        same_as_page(path, doc)
    te = doc["traceEvents"]
    fl = flows(te)
    ev = [e for e in te if e["ph"] == "i"]
    wakes = [e for e in ev if e["cat"] == "sched" and e["name"] in ("sched_wakeup", "sched_wakeup_new")]
    switches = sorted((e for e in ev if e["name"] == "sched_switch"), key=lambda e: e["args"]["seq"])
    mine = 0
    for k, (si, fi) in fl.items():
        w, x = check_pair(te, k, si, fi)
        if not (w and x):
            continue
        woken = w["args"].get("pid")
        check(w["name"] in ("sched_wakeup", "sched_wakeup_new") and x["tid"] == woken and te[fi]["tid"] == woken,
              "flow %d: from a wakeup of %r to a Running slice of it: %r %r" % (k, woken, w, x))
        # the slice starts at the first switch-in of the woken task after its wakeup, and no other
        # wakeup of it lies between (the latest wakeup before a switch-in gets the arrow)
        nxt = next((s for s in switches if s["args"]["seq"] > w["args"]["seq"] and s["args"]["next_pid"] == woken), None)
        check(nxt and x["args"]["start_seq"] == nxt["args"]["seq"] and x["ts"] == nxt["ts"],
              "flow %d: its slice starts at the first switch-in after the wakeup: %r %r" % (k, x, nxt))
        between = [o for o in wakes if o["args"].get("pid") == woken and nxt
                   and w["args"]["seq"] < o["args"]["seq"] < nxt["args"]["seq"]]
        check(not between, "flow %d: no later wakeup before the switch-in: %r" % (k, between[:2]))
        mine += woken == pid
    od = doc["otherData"]
    n = sum(1 for e in wakes if e["args"].get("pid", 0) > 0)
    print("linux: %d wakeups, %d flows (%d to the sleeper), %s" % (n, len(fl), mine, od))
    check(mine >= 20, "flows to the sleeper's Running slices (40 sleeps): %d" % mine)
    check(od.get("wakeups") == n and od.get("wakeup_flows") == len(fl)
          and od["wakeups"] == od["wakeup_flows"] + od["wakeups_unmatched"] + od["wakeups_dropped"],
          "otherData counts add up: %r (wakeup instants %d, flows %d)" % (od, n, len(fl)))


def main():
    windows()
    overflow()
    linux()
    done()


main()
