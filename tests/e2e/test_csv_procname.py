"""The ProcessName column of CSV (review item: CSV had none). `etwd convert --format csv` of
net.4.5.2.x64 (PerfView's trace, with Process events that name the processes): the header has
ProcessName right after ProcessID and ThreadID, and each row's cell is that event's
System.Execution.ProcessName in the file's ndjson (empty where the event has none), in the
mixed form and in the per-field form (one event type). `etwd remote stream --format csv` against a
spawned etwd: the same column, holding the name of a program run meanwhile (selected by the
stream's process= filter, so the cell must be that name)."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading

from etwd_harness import BIN, CORPUS, Etwd, check, done
from test_remote import run_marker_program

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
COMMON = ["seq", "TimeCreated", "Provider", "EventName", "EventID", "Version", "Level", "Task", "Opcode", "Keywords",
          "ProcessID", "ThreadID", "ProcessName", "Host", "ProcessorID"]


def convert(*args):
    r = subprocess.run([BIN, "convert", NET_ZIP, "--quiet", "--no-stacks"] + list(args), capture_output=True, timeout=300)
    check(r.returncode == 0, "convert %s: rc %d %s" % (args, r.returncode, r.stderr[-300:]))
    return r.stdout.decode(errors="replace")


def rows_of(text):
    csv.field_size_limit(1 << 30)
    return list(csv.reader(io.StringIO(text)))


def test_convert():
    evs = [json.loads(l) for l in convert().splitlines()]
    names = {e["seq"]: e["System"].get("Execution", {}).get("ProcessName") for e in evs}
    check(sum(1 for v in names.values() if v) > len(evs) // 2, "most events of the trace have a ProcessName")
    rows = rows_of(convert("--format", "csv"))
    check(rows[0] == COMMON + ["EventData"], "convert csv header: %s" % rows[0])
    ip = COMMON.index("ProcessName")
    bad = [r[0] for r in rows[1:] if r[ip] != (names.get(int(r[0])) or "")]
    check(len(rows) == len(evs) + 1 and not bad, "convert csv: %d of %d ProcessName cells differ from the ndjson (seq %s)"
          % (len(bad), len(rows) - 1, bad[:5]))
    # one event type (per-field columns): the same common columns
    rows = rows_of(convert("--format", "csv", "--provider", "Microsoft-Windows-DotNETRuntime", "--event", "GarbageCollection/GCAllocationTick"))
    bad = [r[0] for r in rows[1:] if r[ip] != (names.get(int(r[0])) or "")]
    check(len(rows) > 1 and rows[0][:len(COMMON)] == COMMON and not bad,
          "convert csv one type: header %s, %d rows, %d cells differ" % (rows[0][:16], len(rows) - 1, len(bad)))
    check(any(r[ip] for r in rows[1:]), "convert csv one type: names in the column")


def test_remote_stream(e, tmp):
    fp = re.search(r"fingerprint: ([0-9A-F:]+)", e.stdout).group(1)
    tok = os.path.join(tmp, "token")
    with open(tok, "w") as f:
        f.write(e.tokens["admin"] + "\n")
    stop = threading.Event()
    t = threading.Thread(target=run_marker_program, args=(tmp, "etwdcsvmark", stop))
    t.start()
    try:
        p = subprocess.run([BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", tok,
                            "--fingerprint", fp, "stream", "sched:sched_process_exec", "--filter", "process=etwdcsvmark",
                            "--format", "csv", "--limit", "2"], capture_output=True, timeout=120, env=e.env)
    finally:
        stop.set()
        t.join()
    rows = rows_of(p.stdout.decode(errors="replace"))
    want = COMMON + ["EventData"]  # the server's ?format=csv rows, as etwd convert writes them
    check(p.returncode == 0 and rows and rows[0] == want, "remote stream csv header: rc %d %s %s"
          % (p.returncode, rows[:1], p.stderr[-300:]))
    check(len(rows) == 3 and all(r[want.index("ProcessName")] == "etwdcsvmark" and r[3] == "sched_process_exec" for r in rows[1:]),
          "remote stream csv: the ProcessName column: %r" % rows)


def main():
    test_convert()
    tmp = tempfile.mkdtemp(prefix="etwd-csvpn-")
    try:
        with Etwd() as e:
            test_remote_stream(e, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
