"""`etwd convert FILE.etl --format chrome`: CPU usage as a Windows perf engineer reads it (WPA's
"CPU Usage (Precise)" and "(Sampled)").

Samples, on the real net.4.5.2.x64.etl (PerfView's test trace: 79,528 PerfInfo/Sample events,
stacks attached): valid Trace Event Format JSON; one instant per sample on its thread's track
(tid = EventData ThreadId, ts its time) — as many as the ndjson has; those with a Stack carry
args.stack, its first 8 frames leaf first as "module+0xoffset"; every thread with samples and a
known process has a thread_name (its process's name).

Thread/CSwitch: no corpus file has one (checked: every .etl of ../shared/corpus), so the test
writes a small 64-bit kernel ETL itself (the record layouts test_etl_synth.c uses: SYSTEM64
records, hook 0x0524 CSwitch v2, 0x0303 Process/DCStart v3, 0x0503 Thread/DCStart v3) on two
CPUs, with a lost switch-out (a thread switched in on CPU 1 while still running on CPU 0) and
threads still running at the end. Checked against the file's own ndjson: the number of "Running"
slices equals the number of CSwitch events with NewThreadId != 0 (each switch-in starts one);
durations >= 0; no two slices overlap on one thread nor on one CPU track; a slice with stop_seq
ends at that CSwitch, which switched its thread out on its CPU; the others (end_inferred) end at
the thread's switch-in elsewhere, at another thread's switch-out of that CPU, or at the input's
last event (still running at the end); pid from Thread/DCStart; thread_name and the CPU tracks
("CPUs" pseudo-process, "CPU n") present."""
import json
import os
import subprocess
import tempfile
import zipfile

from etl_synth import buffer, cswitch, logfile_header, process, thread
from etwd_harness import check, done, BIN, CORPUS

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
CPU_PID = 2147483647


def convert(path, *args):
    r = subprocess.run([BIN, "convert", path, "--quiet"] + list(args), capture_output=True, timeout=600)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def ndjson(path):
    rc, out, err = convert(path)
    check(rc == 0, "ndjson convert %s: rc %d %s" % (path, rc, err[-300:]))
    return [json.loads(l) for l in out.splitlines()]


def chrome(path):
    rc, out, err = convert(path, "--format", "chrome")
    check(rc == 0, "chrome convert %s: rc %d %s" % (path, rc, err[-300:]))
    doc = json.loads(out)  # valid JSON, or the test fails here
    te = doc["traceEvents"]
    check(isinstance(te, list) and doc["displayTimeUnit"] == "ns", "Trace Event Format document")
    check(all(e["ph"] in ("i", "X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
              and (e["ph"] == "M" or (isinstance(e["ts"], (int, float)) and e["ts"] >= 0)) for e in te),
          "every event has ph, integer pid/tid, ts >= 0")
    return te


def thread_names(te):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in te if e["ph"] == "M" and e["name"] == "thread_name"}


def frame(f):
    name = f.get("Module") or f.get("Symbol")
    return "%s+0x%x" % (name, f["Offset"]) if name and "Offset" in f else f["Address"]


def samples():
    with tempfile.TemporaryDirectory(prefix="etwdchrome-") as d:
        with zipfile.ZipFile(NET_ZIP) as z:
            z.extractall(d)
        etl = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".etl")][0]
        evs = [e for e in ndjson(etl) if e["System"].get("EventName") == "PerfInfo/Sample"]
        te = chrome(etl)
    check(len(evs) > 70000, "net.4.5.2: %d samples in the ndjson" % len(evs))
    got = {e["args"]["seq"]: e for e in te if e["ph"] == "i" and e["name"] == "PerfInfo/Sample"}
    check(len(got) == len(evs), "one sample instant per PerfInfo/Sample: %d, want %d" % (len(got), len(evs)))
    bad = stacks = 0
    for ev in evs:
        e = got.get(ev["seq"])
        want_stack = [frame(f) for f in ev.get("Stack", [])[:8]]
        stacks += bool(want_stack)
        if (not e or e["tid"] != ev["EventData"]["ThreadId"] or e["pid"] != (ev["System"]["Execution"]["ProcessID"] or 0)
                or e["args"].get("stack", []) != want_stack):
            bad += 1
    check(bad == 0, "%d samples not on their thread's track or with other frames" % bad)
    check(stacks > 5000, "samples with a stack: %d" % stacks)
    names = thread_names(te)
    pnames = {e["pid"]: e["args"]["name"] for e in te if e["ph"] == "M" and e["name"] == "process_name"}
    tracks = {(e["pid"], e["tid"]) for e in got.values() if e["pid"] in pnames}
    missing = [k for k in tracks if names.get(k) != pnames[k[0]]]
    check(len(tracks) > 20 and not missing, "thread_name on every sampled thread of a named process: %d of %d missing %r"
          % (len(missing), len(tracks), missing[:5]))


# ---- a hand-built kernel trace with context switches (the corpus has none)

PIDS = {1001: 100, 1002: 100, 2001: 200}


def synth(path):
    cpu0 = [logfile_header(3), process(1, 100, b"app.exe"), process(2, 200, b"svc.exe"),
            thread(3, 100, 1001), thread(4, 100, 1002), thread(5, 200, 2001),
            cswitch(100, 1001, 0, 100), cswitch(300, 2001, 1001, 200),  # 1001's switch-out already inferred at 250
            cswitch(500, 0, 2001, 0), cswitch(700, 1002, 0, 100),       # 1002 still running at the end
            cswitch(760, 2001, 1234, 200)]                              # 1234 unknown; 1002's slice ends, inferred
    cpu1 = [cswitch(150, 1002, 0, 100), cswitch(250, 1001, 1002, 100),  # 1001 in on CPU 1 while on CPU 0
            cswitch(400, 0, 1001, 0), cswitch(600, 1001, 0, 100),       # 1001 then runs to the end
            thread(900, 100, 1002)]                                     # (the input's last event: a DCStart)
    with open(path, "wb") as f:
        f.write(buffer(0, 1, cpu0, True) + buffer(1, 2, cpu1))


def overlaps(slices):
    s = sorted(slices, key=lambda e: (e["ts"], e["dur"]))
    return [(a["args"]["start_seq"], b["args"]["start_seq"]) for a, b in zip(s, s[1:]) if a["ts"] + a["dur"] > b["ts"] + 1e-6]


def switches():
    with tempfile.TemporaryDirectory(prefix="etwdchrome-") as d:
        etl = os.path.join(d, "cswitch.etl")
        synth(etl)
        evs = ndjson(etl)
        te = chrome(etl)
    by_seq = {e["seq"]: e for e in evs}
    cs = [e for e in evs if e["System"].get("EventName") == "Thread/CSwitch"]
    check(len(cs) == 9 and all("NewThreadId" in e["EventData"] for e in cs), "the synthetic trace decodes: %d CSwitch" % len(cs))
    inst = {e["args"]["seq"]: e for e in te if e["ph"] == "i"}
    check(len(inst) == len(evs), "every event still an instant: %d of %d" % (len(inst), len(evs)))
    run = [e for e in te if e["ph"] == "X" and e["name"] == "Running"]
    cpu = [e for e in te if e["ph"] == "X" and e["pid"] == CPU_PID]
    ins = [e for e in cs if e["EventData"]["NewThreadId"] != 0]
    check(len(run) == len(ins) == 7, "Running slices %d, switch-ins of a thread %d (want 7)" % (len(run), len(ins)))
    check(len(cpu) == len(run), "one CPU-track slice per Running slice: %d, %d" % (len(cpu), len(run)))
    check(sorted(e["args"]["start_seq"] for e in run) == sorted(e["seq"] for e in ins), "each switch-in starts one slice")
    check(all(e["dur"] >= 0 for e in run + cpu), "durations >= 0")
    for tid in PIDS:
        ov = overlaps([e for e in run if e["tid"] == tid])
        check(not ov, "thread %d: slices overlap %r" % (tid, ov))
    for c in (0, 1):
        ov = overlaps([e for e in cpu if e["tid"] == c])
        check(not ov, "CPU %d: slices overlap %r" % (c, ov))
    last_ts = max(e["ts"] for e in inst.values())
    for e in run:
        start = inst[e["args"]["start_seq"]]
        check(e["ts"] == start["ts"] and e["pid"] == PIDS[e["tid"]] and e["args"]["cpu"] == start["args"]["cpu"],
              "slice %r starts at its switch-in, pid from Thread/DCStart" % e)
        end = e["ts"] + e["dur"]
        if "stop_seq" in e["args"]:
            stop = by_seq[e["args"]["stop_seq"]]
            check(stop["EventData"]["OldThreadId"] == e["tid"] and stop["System"]["Execution"]["ProcessorID"] == e["args"]["cpu"]
                  and abs(inst[stop["seq"]]["ts"] - end) < 1e-6, "slice %r ends at the CSwitch out of it" % e)
        else:
            ends = [i for i in inst.values() if abs(i["ts"] - end) < 1e-6 and i["name"] == "Thread/CSwitch"
                    and ((i["args"]["NewThreadId"] == e["tid"] and i["args"]["cpu"] != e["args"]["cpu"])
                         or (i["args"]["cpu"] == e["args"]["cpu"] and i["args"]["OldThreadId"] != e["tid"]))]
            check(e["args"].get("end_inferred") is True and (ends or abs(end - last_ts) < 1e-6),
                  "slice %r (no stop) ends at a switch-in elsewhere, another's switch-out, or the last event" % e)
    # the expected shape: (tid, cpu, start, end in µs after the first event), computed by hand above
    t0 = 0.0
    got = sorted((e["tid"], e["args"]["cpu"], round(e["ts"] - t0, 3), round(e["ts"] + e["dur"] - t0, 3)) for e in run)
    first = min(inst.values(), key=lambda e: e["ts"])["ts"]
    want = sorted((t, c, round(a / 10.0 - first, 3), round(b / 10.0 - first, 3)) for t, c, a, b in
                  [(1001, 0, 100, 250), (2001, 0, 300, 500), (1002, 0, 700, 760), (2001, 0, 760, 900),
                   (1002, 1, 150, 250), (1001, 1, 250, 400), (1001, 1, 600, 900)])
    check(got == want, "slices %r, want %r" % (got, want))
    names = thread_names(te)
    pn = {e["pid"]: e["args"]["name"] for e in te if e["ph"] == "M" and e["name"] == "process_name"}
    check(pn.get(100) and pn.get(200) and all(names.get((p, t)) == pn[p] for t, p in PIDS.items()),
          "thread names from the process names: %r" % names)
    check(names.get((CPU_PID, 0)) == "CPU 0" and names.get((CPU_PID, 1)) == "CPU 1"
          and any(e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == CPU_PID and e["args"]["name"] == "CPUs" for e in te),
          "CPU tracks named")
    check(sorted(e["name"] for e in cpu if e["tid"] == 0) == sorted([pn.get(100), pn.get(200), pn.get(100), pn.get(200)]),
          "CPU 0's slices named by the process that ran")


def main():
    switches()
    samples()
    done()


main()
