#!/usr/bin/env python3
"""etwd convert of a Linux trace.dat (recognised by its magic): a one-call recording of the real
kernel by etwd (mode both: the live ndjson stream of the same session alongside) while a known
program runs, converted to ndjson, CSV and Chrome trace-event JSON; the counts equal
`trace-cmd report`'s; a file written by trace-cmd itself (`trace-cmd extract` of a tracefs
instance: `trace-cmd record` cannot enable ftrace on this VM, EPERM on
/proc/sys/kernel/ftrace_enabled); filters; refused options; garbage inputs. Root, real tracefs."""
import calendar
import collections
import csv
import io
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time

from etwd_harness import BIN, Etwd, check, done, drop_prog, trace_report, unique_prog, wait_subscribers

PAGE = os.sysconf("SC_PAGE_SIZE")  # the ring buffer's page (etwd writes whole pages)
CPU_PID = 2147483647  # the Chrome document's pseudo-process of the CPUs' tracks (etl_chrome.c)
REPORT_EV = re.compile(r"\[\d+\]\s+\d+\.\d+:\s+(\w+):")


def convert(path, *args):
    r = subprocess.run([BIN, "convert", path] + list(args), capture_output=True, timeout=300)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def ndjson(out):
    return [json.loads(l) for l in out.decode().splitlines() if l.strip()]


def secs(e):
    """TimeCreated (`2026-11-29T13:59:51.7237388Z`) as seconds since 1970."""
    t = e["System"]["TimeCreated"]
    return calendar.timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) + int(t[20:-1]) / 10 ** (len(t) - 21)


def report_lines(path):
    with open(path, "rb") as f:
        return trace_report(f.read())


def report_counts(path, lines=None):
    c = collections.Counter()
    for l in lines if lines is not None else report_lines(path):
        m = REPORT_EV.search(l)
        if m:
            c[m.group(1)] += 1
    return c


def record_with_etwd(tmp, prog):
    """A 2-s recording (one POST, one GET) of sched_switch and sched_process_exec while @prog runs
    three times, a marker, and the session's live exec events. Returns (path, live events)."""
    live = []
    with Etwd() as e:
        st, h, data = e.request("POST", "/api/v1/sessions", {
            "providers": [{"name": "sched", "events": ["sched_switch", "sched_process_exec"]}],
            "mode": "both", "duration_s": 2})
        check(st == 201, "create: %d %s" % (st, data[:300]))
        loc = h["location"]
        sid = int(loc.rsplit("/", 1)[1])

        def read():
            for ev in e.ndjson(loc + "/events?event=sched_process_exec", timeout=60):
                live.append(ev)
        t = threading.Thread(target=read)
        t.start()
        wait_subscribers(e, sid, 1)
        for _ in range(3):
            subprocess.run([prog], check=True)
        st, _, data = e.request("POST", loc + "/markers", {"text": "convert \"dat\" marker"})
        check(st == 204, "marker: %d %s" % (st, data[:200]))
        st, _, data = e.request("GET", loc + "/file?wait=true", token="reader", timeout=60)
        check(st == 200 and data[:10] == b"\x17\x08\x44tracing", "download: %d %r" % (st, data[:20]))
        t.join(30)
    path = os.path.join(tmp, "rec.bin")  # not named .dat: found by its magic
    with open(path, "wb") as f:
        f.write(data)
    return path, live


def check_ndjson(path, prog, live):
    t0 = time.time()
    rc, out, err = convert(path, "--quiet")
    check(rc == 0, "convert ndjson: rc %d %s" % (rc, err[-500:]))
    evs = ndjson(out)
    print("ndjson: %d events in %.1f s" % (len(evs), time.time() - t0))
    check([e["seq"] for e in evs] == list(range(1, len(evs) + 1)), "seq numbers 1..N")
    times = [e["System"]["TimeCreated"] for e in evs]
    check(times == sorted(times), "events in time order")
    got = collections.Counter(e["System"]["EventName"] for e in evs)
    lines = report_lines(path)
    want = report_counts(path, lines)
    check(got == want, "counts equal trace-cmd report's: %s vs %s" % (dict(got), dict(want)))
    base = os.path.basename(prog)
    execs = [e for e in evs if e["System"]["EventName"] == "sched_process_exec"
             and e["EventData"]["filename"] == prog]
    check(len(execs) == 3, "the program's 3 execs: %d" % len(execs))
    for x in execs:
        ex = x["System"]["Execution"]
        check(x["System"]["Provider"]["Name"] == "sched", "provider: %s" % x["System"])
        check(ex.get("ProcessName") == base[:15], "exec's ProcessName is its comm: %s" % ex)
        check(ex["ProcessID"] == ex["ThreadID"] == x["EventData"]["pid"], "exec's pid: %s %s" % (ex, x["EventData"]))
    # the same event JSON as the live stream of the same session
    lmine = [e for e in live if e.get("EventData", {}).get("filename") == prog]
    check(len(lmine) == 3, "the live stream's 3 execs: %d" % len(lmine))
    bypid = {e["EventData"]["pid"]: e for e in lmine}  # (the live stream is in per-CPU order)
    for x in execs:
        a, b = json.loads(json.dumps(bypid.get(x["EventData"]["pid"], {}))), json.loads(json.dumps(x))
        if not check(a, "the live stream has the exec of %d" % x["EventData"]["pid"]):
            continue
        ta, tb = a["System"].pop("TimeCreated"), b["System"].pop("TimeCreated")
        a.pop("seq")
        b.pop("seq")
        check(a == b, "converted = live: %s vs %s" % (b, a))
        check(ta[:19] == tb[:19], "times agree to the second: %s %s" % (ta, tb))
    marks = [e for e in evs if e["System"]["EventName"] == "print"]
    check(len(marks) == 1 and marks[0]["EventData"]["buf"] == "convert \"dat\" marker\n", "marker: %s" % marks)
    # the marker's writer (an etwd thread) changed no comm in the file: its name is the file's
    # saved cmdlines' (trace-cmd report's comm; "<...>" = not kept: no ProcessName)
    rm = [re.match(r"^\s*(.*)-(\d+)\s+\[\d+\]", l) for l in lines if re.search(r"\]\s+[\d.]+:\s+print:", l)]
    if check(len(rm) == 1 and rm[0] and marks, "report's marker line"):
        comm = rm[0].group(1)
        check(marks[0]["System"]["Execution"].get("ProcessName") == (None if comm == "<...>" else comm),
              "marker's ProcessName from saved cmdlines: %s vs report %s" % (marks[0]["System"]["Execution"], comm))
    return evs, execs


def check_filters(path, evs, execs):
    pid = execs[0]["EventData"]["pid"]
    rc, out, err = convert(path, "--quiet", "--provider", "SCHED", "--event", "sched_process_exec", "--pid", str(pid))
    sel = ndjson(out)
    check(rc == 0 and len(sel) == 1 and sel[0]["seq"] == execs[0]["seq"], "--provider/--event/--pid: %s" % sel)
    rc, out, err = convert(path, "--quiet", "--limit", "5")
    check(rc == 0 and [e["seq"] for e in ndjson(out)] == [1, 2, 3, 4, 5], "--limit 5")
    rc, out, err = convert(path, "--quiet", "--from", "0.5", "--to", "1.0")
    sel = [e["seq"] for e in ndjson(out)]
    # (the times of two conversions may differ by the clock offset measured at each: compare the
    # selection with the seconds after the first event of the full conversion)
    rel = [secs(e) - secs(evs[0]) for e in evs]  # rel[seq - 1]
    eps = 2e-7
    ok = rc == 0 and sel and sel == list(range(sel[0], sel[-1] + 1))
    ok = ok and all(0.5 - eps <= rel[q - 1] <= 1.0 + eps for q in sel)
    ok = ok and (sel[0] == 1 or rel[sel[0] - 2] < 0.5 + eps) and (sel[-1] == len(evs) or rel[sel[-1]] >= 1.0 - eps)
    check(ok, "--from 0.5 --to 1.0: seq %s..%s" % (sel[:1], sel[-1:]))
    rc, out, err = convert(path, "--quiet", "--format", "csv")
    # (rows by the csv module: str.splitlines() also splits at \x1c-\x1e, \x85, \u2028 inside a
    # cell, which a process name or a file name may hold)
    rows = list(csv.reader(io.StringIO(out.decode(), newline="")))
    check(rc == 0 and rows[0][:4] == ["seq", "TimeCreated", "Provider", "EventName"] and len(rows) == len(evs) + 1,
          "csv: rc %d, %d rows for %d events" % (rc, len(rows), len(evs)))
    rc, out, err = convert(path, "--quiet", "--format", "csv", "--event", "sched_process_exec")
    rows = out.decode().splitlines()
    check(rc == 0 and rows[0].endswith(',"filename","pid","old_pid"'), "per-field csv: %s" % rows[:1])
    for args, name in ((["--decode", "reference"], "--decode"), (["--no-stacks"], "--no-stacks"),
                       (["--manifests", "/tmp"], "--manifests")):
        rc, out, err = convert(path, *args)
        check(rc == 2 and name in err and "trace.dat" in err, "%s refused by name: rc %d %s" % (args, rc, err))


def check_chrome(path, prog, execs):
    rc, out, err = convert(path, "--quiet", "--format", "chrome")
    check(rc == 0, "convert chrome: rc %d %s" % (rc, err[-500:]))
    doc = json.loads(out)
    evs = doc["traceEvents"]
    check(doc.get("displayTimeUnit") == "ns" and isinstance(evs, list) and evs, "trace event format document")
    for e in evs:
        if not (e.get("ph") in ("M", "i", "X") and isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)
                and isinstance(e.get("name"), str)):
            check(False, "event shape: %s" % e)
            break
    pid = execs[0]["EventData"]["pid"]
    base = os.path.basename(prog)[:15]
    meta = {(e["name"], e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["ph"] == "M"}
    check(meta.get(("thread_name", pid, pid)) == base, "the program's thread is named: %s" % meta.get(("thread_name", pid, pid)))
    check(meta.get(("process_name", pid, 0)) == base, "the program's process is named")
    check(meta.get(("process_name", CPU_PID, 0)) == "CPUs", "the CPUs' pseudo-process")
    xs = [e for e in evs if e["ph"] == "X"]
    check(all(e["ts"] >= 0 and e["dur"] >= 0 for e in xs), "slices have non-negative ts and dur")
    tracks = collections.defaultdict(list)
    for e in xs:
        tracks[(e["pid"], e["tid"])].append(e)
    overlaps = 0
    for k, sl in tracks.items():
        sl.sort(key=lambda e: e["ts"])
        overlaps += sum(1 for a, b in zip(sl, sl[1:]) if b["ts"] < a["ts"] + a["dur"] - 0.002)
    check(overlaps == 0, "slices on one track do not overlap: %d overlaps" % overlaps)
    cpus = [k for k in tracks if k[0] == CPU_PID]
    check(cpus and all(meta.get(("thread_name", CPU_PID, k[1])) == "CPU %d" % k[1] for k in cpus), "CPU tracks named")
    mine = tracks.get((pid, pid), [])
    check(mine and all(e["name"] == "Running" and e["cat"] == "sched" for e in mine),
          "the program has Running slices on its thread: %s" % mine[:2])
    oncpu = [e for k in cpus for e in tracks[k] if e["args"]["tid"] == pid]
    check(any(e["name"] == base for e in oncpu), "and slices named by its comm on a CPU track: %s" % oncpu[:3])
    marks = [e for e in evs if e.get("cat") == "ftrace" and e["ph"] == "i"]
    check(len(marks) == 1 and marks[0]["name"] == "convert \"dat\" marker", "marker instant: %s" % marks)
    inst = [e for e in evs if e["ph"] == "i" and e["name"] == "sched_process_exec" and e["args"].get("filename") == prog]
    check(len(inst) == 3 and all(e["pid"] == e["args"]["pid"] for e in inst), "exec instants with args")
    ts = [e["ts"] for e in evs if e["ph"] != "M"]
    check(ts == sorted(ts), "sorted by ts")


def trace_cmd_file(tmp, prog):
    """A trace.dat written by trace-cmd itself: `trace-cmd extract` of a tracefs instance that
    recorded while @prog ran (a v7 file with a buffer instance)."""
    inst = "etwdtest_dat_%d" % os.getpid()
    d = "/sys/kernel/tracing/instances/" + inst
    os.mkdir(d)
    try:
        for ev in ("sched_switch", "sched_process_exec"):
            with open(d + "/events/sched/%s/enable" % ev, "w") as f:
                f.write("1")
        with open(d + "/tracing_on", "w") as f:
            f.write("1")
        subprocess.run([prog], check=True)
        with open(d + "/tracing_on", "w") as f:
            f.write("0")
        path = os.path.join(tmp, "tc.dat")
        r = subprocess.run(["trace-cmd", "extract", "-B", inst, "-o", path], capture_output=True, timeout=120)
        check(r.returncode == 0, "trace-cmd extract: %d %s" % (r.returncode, r.stderr[-300:]))
        return path
    finally:
        if os.path.isdir(d):
            os.rmdir(d)


def check_trace_cmd(tmp, prog):
    path = trace_cmd_file(tmp, prog)
    rc, out, err = convert(path, "--quiet")
    check(rc == 0, "convert trace-cmd's file: rc %d %s" % (rc, err[-500:]))
    evs = ndjson(out)
    got = collections.Counter(e["System"]["EventName"] for e in evs)
    want = report_counts(path)
    check(got == want and got["sched_process_exec"] >= 1, "trace-cmd's file: counts %s vs report %s" % (dict(got), dict(want)))
    ex = [e for e in evs if e["System"]["EventName"] == "sched_process_exec" and e["EventData"]["filename"] == prog]
    check(len(ex) == 1 and ex[0]["System"]["Execution"].get("ProcessName") == os.path.basename(prog)[:15],
          "trace-cmd's file: the program's exec %s" % ex)
    rc, out, err = convert(path, "--quiet", "--format", "chrome")
    check(rc == 0 and json.loads(out)["traceEvents"], "trace-cmd's file as chrome: rc %d %s" % (rc, err[-300:]))


def pages(d):
    """(offset of each page) of an etwd trace.dat (v6: the flyrecord table after the options)."""
    i = d.index(b"flyrecord\x00") + 10
    ncpu = struct.unpack_from("<I", d, d.index(b"options  \x00") - 4)[0]
    for c in range(ncpu):
        off, size = struct.unpack_from("<QQ", d, i + 16 * c)
        for p in range(off, off + size, PAGE):
            yield p


def check_pages(tmp, path):
    """The file's own statements: a page that says the kernel lost 1234 events before it (as the
    kernel marks it: commit flags MISSED_EVENTS | MISSED_STORED and the count after the data);
    times beyond this boot's uptime (every page's base time moved 30 days on)."""
    with open(path, "rb") as f:
        d = bytearray(f.read())
    lost = bytearray(d)
    for p in pages(lost):
        ts, commit = struct.unpack_from("<QQ", lost, p)
        ln = commit & ((1 << 27) - 1)
        if ln + 8 <= PAGE - 16:
            struct.pack_into("<Q", lost, p + 8, commit | (1 << 31) | (1 << 30))
            struct.pack_into("<Q", lost, p + 16 + ln, 1234)
            break
    lp = os.path.join(tmp, "lost.dat")
    with open(lp, "wb") as f:
        f.write(lost)
    check(any("[1234 EVENTS DROPPED]" in l for l in trace_report(bytes(lost))), "trace-cmd report sees the loss")
    rc, out, err = convert(lp, "--quiet", "-o", os.devnull)
    check(rc == 0 and "the kernel lost 1234 events before they were recorded" in err, "loss said: rc %d %s" % (rc, err))
    rc, out, err = convert(path, "--quiet", "-o", os.devnull)
    check(rc == 0 and "lost" not in err, "no loss said for the file as recorded: %s" % err)
    later = bytearray(d)
    for p in pages(later):
        ts, = struct.unpack_from("<Q", later, p)
        struct.pack_into("<Q", later, p, ts + 30 * 86400 * 10**9)
    op = os.path.join(tmp, "later.dat")
    with open(op, "wb") as f:
        f.write(later)
    rc, out, err = convert(op, "--quiet", "--limit", "1")
    check(rc == 0 and "recorded before this machine's last boot" in err, "another boot said: rc %d %s" % (rc, err))


def check_garbage(tmp):
    g = os.path.join(tmp, "garbage.dat")
    with open(g, "wb") as f:
        f.write(b"not a trace at all" * 100)
    rc, out, err = convert(g)
    check(rc == 1 and "garbage.dat" in err and not out, "garbage: rc %d %s" % (rc, err))
    g2 = os.path.join(tmp, "torn.dat")
    with open(g2, "wb") as f:
        f.write(b"\x17\x08\x44tracing6\x00" + b"\xff" * 300)
    rc, out, err = convert(g2)
    check(rc == 1 and "torn.dat" in err and "trace.dat" in err and not out, "torn trace.dat: rc %d %s" % (rc, err))


def main():
    tmp = tempfile.mkdtemp(prefix="etwd-dat-")
    prog = unique_prog("dat")
    try:
        path, live = record_with_etwd(tmp, prog)
        evs, execs = check_ndjson(path, prog, live)
        if execs:
            check_filters(path, evs, execs)
            check_chrome(path, prog, execs)
        check_pages(tmp, path)
        check_trace_cmd(tmp, prog)
        check_garbage(tmp)
    finally:
        drop_prog(prog)
        shutil.rmtree(tmp)
    done()


if __name__ == "__main__":
    main()
