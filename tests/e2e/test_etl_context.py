"""Process context of ETL events (issue 20 item 7, issue 23 item 3), on corpus files, through the
real binary (`etwd convert`) and the real server (a replay session's ndjson stream over TLS):
- Execution.ProcessName: every event's name is the one the file's own Process events (Start,
  End, DCStart/DCEnd rundown, Defunct) gave its pid last, before it (TraceEvent's PName: the
  ImageFileName without directory and extension), computed here from the decoded EventData; no
  event has a name no Process event gave, none lacks one that was given; PerfView's published
  baseline agrees (the Test.x64 process);
- PID/TID from the payload: StackWalk (StackProcess/StackThread), Thread (ProcessId/TThreadId),
  Process and Image (ProcessId), PerfInfo/Sample (ThreadId, and the process the file's Thread
  events put that thread in);
- System.Host: the ComputerName of the trace's SystemConfig/CPU event, on that event and every
  later one (none before it, none in a file without it);
- `--decode reference` writes the same bytes; csv's ProcessID/ThreadID columns are the events';
  `--pid` (convert) and `pid=` (stream) select the re-attributed events."""
import csv
import io
import json
import os
import re
import subprocess
import tempfile
import zipfile

from etwd_harness import Etwd, check, done, BIN, CORPUS

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
NET_BASE = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.baseline.txt")
SHUTDOWN = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl")
POWERSHELL = os.path.join(CORPUS, "microsoft+krabsetw/examples/NativeExamples/powershell.etl")
PROC_OPS = {1, 2, 3, 4, 39}


def convert(path, *args):
    p = subprocess.run([BIN, "convert", path, "--quiet"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    check(p.returncode == 0, "convert %s %r: exit %d %s" % (path, args, p.returncode, p.stderr[-300:]))
    return p.stdout


def events(raw):
    return [json.loads(l) for l in raw.splitlines() if l.strip()]


def kernel(e, name):
    s = e["System"]
    return s["Provider"]["Name"] == "Windows Kernel" and s.get("EventName") == name


def pname(image):
    """TraceEvent's PName of an ImageFileName (written independently of the C code)."""
    base = re.split(r"[\\/]", image)[-1]
    dot = base.rfind(".")
    return base[:dot] if dot > 0 else base


def check_names(evs, what):
    """Names against the file's own Process events; returns (named events, pids named)."""
    names = {}
    wrong = missing = invented = named = 0
    for e in evs:
        s = e["System"]
        ed = e.get("EventData") or {}
        if (s["Provider"]["Name"] == "Windows Kernel" and s.get("Task") == 0 and s.get("Opcode") in PROC_OPS
                and s.get("EventName", "").startswith("Process/") and ed.get("ImageFileName")):
            names[ed["ProcessId"]] = pname(ed["ImageFileName"])
        x = s["Execution"]
        got, want = x.get("ProcessName"), names.get(x["ProcessID"])
        if got is not None:
            named += 1
        if want is None and got is not None:
            invented += 1
        elif want is not None and got is None:
            missing += 1
        elif got != want:
            wrong += 1
            if wrong <= 3:
                print("%s: seq %d pid %r: %r, want %r" % (what, e["seq"], x["ProcessID"], got, want))
    check(wrong == 0, "%s: %d events with another name than their pid's last Process event" % (what, wrong))
    check(missing == 0, "%s: %d events lack the name a Process event gave their pid" % (what, missing))
    check(invented == 0, "%s: %d events have a name no Process event gave" % (what, invented))
    check(named > 0 and len(names) > 0, "%s: %d named events, %d pids" % (what, named, len(names)))
    print("%s: %d of %d events named, %d pids named" % (what, named, len(evs), len(names)), flush=True)
    return named, names


def check_pids(evs, what):
    threads = {}  # tid -> pid, from the file's Thread events
    n = {"stack": 0, "thread": 0, "sample": 0, "sample_known": 0, "process": 0, "image": 0}
    bad = []
    for e in evs:
        s, x, ed = e["System"], e["System"]["Execution"], e.get("EventData") or {}
        name = s.get("EventName", "")
        if s["Provider"]["Name"] != "Windows Kernel" or "Undecoded" in e:
            continue
        if name in ("StackWalk/Stack", "StackWalk/KeyKernel", "StackWalk/KeyUser"):
            n["stack"] += 1
            if (x["ProcessID"], x["ThreadID"]) != (ed["StackProcess"], ed["StackThread"]):
                bad.append(e)
        elif name.startswith("Thread/") and s["Opcode"] in (1, 2, 3, 4):
            n["thread"] += 1
            threads[ed["TThreadId"]] = ed["ProcessId"]
            if (x["ProcessID"], x["ThreadID"]) != (ed["ProcessId"], ed["TThreadId"]):
                bad.append(e)
        elif name == "PerfInfo/Sample":
            n["sample"] += 1
            if x["ThreadID"] != ed["ThreadId"]:
                bad.append(e)
            if ed["ThreadId"] in threads:
                n["sample_known"] += 1
                if x["ProcessID"] != threads[ed["ThreadId"]]:
                    bad.append(e)
        elif name.startswith("Process/") and s["Opcode"] in PROC_OPS:
            n["process"] += 1
            if (x["ProcessID"], x["ThreadID"]) != (ed["ProcessId"], None):
                bad.append(e)
        elif name.startswith("Image/") and "ProcessId" in ed:
            n["image"] += 1
            if x["ProcessID"] != ed["ProcessId"]:
                bad.append(e)
    for e in bad[:3]:
        print("%s: bad ids: %s" % (what, json.dumps(e)[:400]))
    check(not bad, "%s: %d kernel events whose ProcessID/ThreadID are not their payload's" % (what, len(bad)))
    print("%s: ids checked %r" % (what, n), flush=True)
    return n


def test_net(tmp):
    with zipfile.ZipFile(NET_ZIP) as z:
        member = [m for m in z.namelist() if m.endswith(".etl")][0]
        path = os.path.join(tmp, "net.etl")
        with open(path, "wb") as f:
            f.write(z.read(member))
    raw = convert(path)
    check(raw == convert(path, "--decode", "reference"), "net: --decode reference writes other bytes")
    evs = events(raw)
    named, names = check_names(evs, "net")
    check(names.get(3676) == "Test.x64" and names.get(0) == "Idle" and names.get(4) == "System",
          "net: Process events name 3676 Test.x64, 0 Idle, 4 System: %r" % {k: names.get(k) for k in (0, 4, 3676)})
    # the stack walk rows are attached to their events unless asked for: their own ids are checked here
    walks = convert(path, "--stackwalk-events")
    check(walks == convert(path, "--stackwalk-events", "--decode", "reference"),
          "net --stackwalk-events: --decode reference writes other bytes")
    n = check_pids(events(walks), "net")
    check(n["stack"] > 9000 and n["thread"] > 1000 and n["sample"] == 79528 and n["sample_known"] > 70000
          and n["process"] >= 60 and n["image"] > 3000, "net: too few events of each kind checked: %r" % n)
    # PerfView's baseline (TraceEvent's PName): every Test.x64 line with a known pid carries that name
    base = [l for l in open(NET_BASE, encoding="utf-8", errors="replace") if l.startswith("EVENT ") and "PID=3676;" in l]
    check(base and all("PName=Test.x64;" in l for l in base), "baseline: pid 3676 is Test.x64 (%d lines)" % len(base))
    mine = [e for e in evs if e["System"]["Execution"]["ProcessID"] == 3676]
    start = min(x["seq"] for x in evs if kernel(x, "Process/Start"))
    check(mine and all(e["System"]["Execution"].get("ProcessName") == "Test.x64" for e in mine if e["seq"] >= start),
          "net: pid 3676's events from its Process/Start on are Test.x64")
    # Host: the SystemConfig/CPU event's ComputerName, from that event on
    cpu = [i for i, e in enumerate(evs) if kernel(e, "SystemConfig/CPU")]
    check(len(cpu) == 1, "net: one SystemConfig/CPU event, got %d" % len(cpu))
    if cpu:
        host = evs[cpu[0]]["EventData"]["ComputerName"]
        check(host == "BRIANROB-W8", "net: ComputerName %r" % host)
        check(all(e["System"].get("Host") == host for e in evs[cpu[0]:]), "net: every event from the CPU event on has Host")
        check(not any("Host" in e["System"] for e in evs[:cpu[0]]), "net: no Host before the CPU event")
        print("net: Host %s on %d of %d events" % (host, len(evs) - cpu[0], len(evs)), flush=True)
        # the member sits after Provider, as on Linux events
        line = raw.splitlines()[cpu[0]].decode()
        check('"Guid":"{01853a65-418f-4f36-aefc-dc0f1d2fd235}"},"Host":"BRIANROB-W8","EventID":' in line,
              "net: Host after Provider: %s" % line[:200])
    # csv: the ProcessID/ThreadID columns are the events' (they were the headers' before)
    csv.field_size_limit(1 << 30)
    rows = list(csv.reader(io.StringIO(convert(path, "--format", "csv").decode())))
    ip, it = rows[0].index("ProcessID"), rows[0].index("ThreadID")
    txt = lambda v: "" if v is None else str(v)
    diff = sum((r[ip], r[it]) != (txt(e["System"]["Execution"]["ProcessID"]), txt(e["System"]["Execution"]["ThreadID"]))
               for r, e in zip(rows[1:], evs))
    check(len(rows) == len(evs) + 1 and diff == 0, "csv: %d rows, %d with other ids than the ndjson events" % (len(rows) - 1, diff))
    # --pid selects the re-attributed events (samples of Test.x64 had no ProcessID before)
    sel = events(convert(path, "--pid", "3676"))
    check([e["seq"] for e in sel] == [e["seq"] for e in mine], "convert --pid 3676: %d events, want %d" % (len(sel), len(mine)))
    check(sum(kernel(e, "PerfInfo/Sample") for e in sel) > 1000, "convert --pid 3676 holds Test.x64's samples")
    return path, mine


def test_shutdown():
    raw = convert(SHUTDOWN)
    check(raw == convert(SHUTDOWN, "--decode", "reference"), "shutdown: --decode reference writes other bytes")
    evs = events(raw)
    check_names(evs, "shutdown")
    check_pids(evs, "shutdown")
    check(not any("Host" in e["System"] for e in evs), "shutdown: no SystemConfig/CPU, no Host")


def test_no_kernel():
    evs = events(convert(POWERSHELL))
    check(evs and not any("ProcessName" in e["System"]["Execution"] or "Host" in e["System"] for e in evs),
          "powershell.etl (no kernel events): no ProcessName, no Host")


def test_stream(path, mine):
    """The replay session's stream with pid= selects the same events, names and hosts included."""
    with Etwd() as e:
        e.json("POST", "/api/v1/files?name=net.etl", body=open(path, "rb").read(),
               ctype="application/octet-stream", expect=201)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["net.etl"], "replay": "fast"}, expect=201)
        recs = [r for r in e.ndjson("/api/v1/sessions/%d/events?pid=3676" % j["id"], timeout=120) if "System" in r]
        check(len(recs) == len(mine), "stream pid=3676: %d events, want %d" % (len(recs), len(mine)))
        check([r["System"]["Execution"] for r in recs] == [m["System"]["Execution"] for m in mine],
              "stream pid=3676: the Execution members of convert's")
        check(sum(r["System"].get("Host") == "BRIANROB-W8" for r in recs) == sum(m["System"].get("Host") == "BRIANROB-W8" for m in mine),
              "stream pid=3676: Host as in convert")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path, mine = test_net(tmp)
        test_shutdown()
        test_no_kernel()
        test_stream(path, mine)
    done()


if __name__ == "__main__":
    main()
