#!/usr/bin/env python3
"""CSV formula injection (OWASP "CSV Injection"): every CSV etwd writes puts a single quote in
front of a text cell that starts with = + - @ TAB or CR (unless the cell is a plain number), so a
spreadsheet shows the text instead of running it; numbers stay numbers. Real kernel events, real
binaries, real TLS:

* one process exec's itself through symlinks named `=HYPERLINK("e")`, `+cmd|x`, `-2+3`, `@SUM(1)`,
  TAB+`TAB`, CR+`CR` and `-1.5e3` (relative paths, so sched_process_exec's `filename` is the name,
  and the process's comm — the ProcessName column — is too), each stage failing to open missing
  files (raw_syscalls sys_exit with ret -2), in a live session (mode both) limited to its pid;
* `?format=csv` of the session over HTTP, `etwd remote stream --session ID --format csv` (the
  server's body passed through) and `etwd convert --format csv` of the session's recording (the
  mixed form, and the per-field form of sched_process_exec and of sys_exit) all parse with
  Python's csv module; the ProcessName / filename cells are the names with a leading `'` (inside
  the quoted cell, `"'=HYPERLINK(""e"")"` in the bytes) — but `-1.5e3`, a plain number, as it is;
  no cell of any of them starts a formula; the negative `ret` of sys_exit is a plain `-2` (its own
  cell in the per-field form, a JSON number in the mixed form's EventData). Root, real tracefs."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import BIN, Etwd, check, done, wait_subscribers  # noqa: E402
from test_http_csv import raw_get  # noqa: E402
from test_remote import remote_ready  # noqa: E402
from test_remote_csv import remote_bytes  # noqa: E402

RISKY = ['=HYPERLINK("e")', "+cmd|x", "-2+3", "@SUM(1)", "\tTAB", "\rCR"]
NUMBER = "-1.5e3"  # starts with '-' but is a plain number: no quote
NAMES = RISKY + [NUMBER]
PLAIN_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?\Z")
HEADER = ("seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,ProcessID,ThreadID,"
          "ProcessName,Host,ProcessorID").split(",")
CHAIN = """import os, sys
NAMES = %r
d, i = os.path.dirname(os.path.abspath(__file__)), int(sys.argv[1])
if i == 0:
    sys.stdin.readline()
for k in range(3):  # ENOENT: sys_exit ret -2
    try:
        open(os.path.join(d, "missing-%%d" %% k))
    except OSError:
        pass
if i < len(NAMES):  # a relative path: the exec's filename (and the new comm) is the name
    os.chdir(d)
    os.execv(NAMES[i], [os.path.join(d, NAMES[i]), os.path.join(d, "chain.py"), str(i + 1)])
"""


def formula(cell):
    """Would a spreadsheet take @cell for a formula? (OWASP's first characters; a plain number is a number.)"""
    return cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not PLAIN_NUMBER.match(cell)


def guarded(text):
    """The cell etwd writes for the text @text: a formula's text after a single quote."""
    return "'" + text if formula(text) else text


def want_cell(name):
    check(formula(name) == (name in RISKY), "the test's names: %r" % name)
    return guarded(name)


def parse(what, data):
    """The CSV bytes as rows (csv module; empty lines skipped): header, rows as dicts."""
    try:
        rows = [r for r in csv.reader(io.StringIO(data.decode("utf-8"), newline="")) if r]
    except (csv.Error, UnicodeDecodeError) as x:
        check(False, "%s: not CSV: %s" % (what, x))
        return [], []
    check(rows and all(len(r) == len(rows[0]) for r in rows), "%s: rows of %d cells: %r" % (what, len(rows[0]) if rows else 0,
                                                                   [r for r in rows if len(r) != len(rows[0])][:2]))
    return rows[0] if rows else [], [dict(zip(rows[0], r)) for r in rows[1:]]


def no_formulas(what, header, rows):
    bad = [(k, v) for r in rows for k, v in r.items() if formula(v)] + [(h, h) for h in header if formula(h)]
    check(not bad, "%s: %d cells start a formula, e.g. %r" % (what, len(bad), bad[:4]))


def exec_cells(what, rows, col):
    """The @col cells of the sched_process_exec rows are the exec'd names, guarded (a live
    stream's rows from two CPUs need not be in time order: compared as sorted lists)."""
    got = sorted(r[col] for r in rows if r.get("EventName") == "sched_process_exec")
    want = sorted(want_cell(n) for n in NAMES)
    check(got == want, "%s: %s of the execs %r, want %r" % (what, col, got, want))


def check_mixed(what, data):
    """A mixed-form CSV (the server's ?format=csv, convert without one event type)."""
    header, rows = parse(what, data)
    check(header == HEADER + ["EventData"], "%s: header %r" % (what, header))
    no_formulas(what, header, rows)
    exec_cells(what, rows, "ProcessName")
    check(b'"\'=HYPERLINK(""e"")"' in data and b"\"'\rCR\"" in data and b"\"'\tTAB\"" in data
          and b',"-1.5e3",' in data, "%s: the quote is inside the quoted cell: %r" % (what, data[:600]))
    # every stage's own events carry its name too; ret -2 stays a JSON number in EventData
    for n in NAMES:
        check(sum(1 for r in rows if r["EventName"] == "sys_exit" and r["ProcessName"] == want_cell(n)) >= 3,
              "%s: the sys_exit rows of %r" % (what, n))
    rets = [json.loads(r["EventData"])["ret"] for r in rows if r["EventName"] == "sys_exit"]
    check(len(rets) >= 3 * len(NAMES) and set(rets) == {-2}, "%s: EventData ret %r" % (what, sorted(set(rets))))
    return rows


def session_csv(e, prog):
    """The live session: the HTTP ?format=csv body and `remote stream --format csv`'s stdout (both
    subscribed before the chain runs), and the session's recording."""
    child = subprocess.Popen([sys.executable, prog, "0"], stdin=subprocess.PIPE)
    try:
        st, h, j = e.json("POST", "/api/v1/sessions", body={
            "providers": [{"name": "sched", "events": ["sched_process_exec"]},
                          {"name": "raw_syscalls", "events": ["sys_exit"], "filter": "ret == -2"}],
            "pids": [child.pid], "mode": "both"})
        check(st == 201, "create: %d %r" % (st, j))
        sid = j["id"]
        out = {}
        http = threading.Thread(target=lambda: out.update(http=raw_get(e, "/api/v1/sessions/%d/events?format=csv" % sid)))
        rem = threading.Thread(target=lambda: out.update(remote=remote_bytes(
            e, ["stream", "--session", str(sid), "--format", "csv"])))
        http.start()
        rem.start()
        wait_subscribers(e, sid, 2)
        child.stdin.write(b"go\n")
        child.stdin.flush()
        check(child.wait(timeout=60) == 0, "the exec chain failed")
        # every exec read, then the count still for 0.5 s (the last stage's events read too)
        t0, last = time.time(), -1
        while time.time() - t0 < 30:
            stats = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]["stats"]
            if stats["per_provider"].get("sched", 0) >= len(NAMES) and stats["events"] == last:
                break
            last = stats["events"]
            time.sleep(0.5)
        e.request("POST", "/api/v1/sessions/%d/stop" % sid)
        http.join(60)
        rem.join(60)
        st, _, rec = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % sid, token="reader", timeout=60)
        check(st == 200 and rec[:10] == b"\x17\x08\x44tracing", "recording: %d %r" % (st, rec[:20]))
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        return out.get("http"), out.get("remote"), rec
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def convert(path, *args):
    r = subprocess.run([BIN, "convert", path, "--format", "csv"] + list(args), capture_output=True, timeout=120)
    check(r.returncode == 0, "convert %r: rc %d %s" % (args, r.returncode, r.stderr[-300:]))
    return r.stdout


def check_convert(path):
    check_mixed("convert (mixed)", convert(path))
    data = convert(path, "--provider", "sched", "--event", "sched_process_exec")
    header, rows = parse("convert sched_process_exec", data)
    check(header[:len(HEADER)] == HEADER and "filename" in header, "per-field header %r" % header)
    no_formulas("convert sched_process_exec", header, rows)
    exec_cells("convert sched_process_exec", rows, "filename")
    exec_cells("convert sched_process_exec", rows, "ProcessName")
    check(b',"\'=HYPERLINK(""e"")",' in data and b',"-1.5e3",' in data, "per-field bytes: %r" % data[:600])
    # a negative number of its own column: -2 as it is, unquoted
    data = convert(path, "--provider", "raw_syscalls", "--event", "sys_exit")
    header, rows = parse("convert sys_exit", data)
    check(header[-2:] == ["id", "ret"] and len(rows) >= 3 * len(NAMES) and {r["ret"] for r in rows} == {"-2"},
          "sys_exit per field: %r, ret %r" % (header, sorted({r.get("ret") for r in rows})))
    lines = data.split(b"\n")[1:-1]
    check(lines and all(l.endswith(b",-2") for l in lines), "ret is a bare -2: %r" % lines[:3])
    no_formulas("convert sys_exit", header, rows)


def main():
    if os.geteuid() != 0:
        check(False, "needs root (tracefs)")
        done()
    tmp = tempfile.mkdtemp(prefix="etwdcsvinj-")
    exe = os.path.realpath(sys.executable)
    for n in NAMES:
        os.symlink(exe, os.path.join(tmp, n))
    prog = os.path.join(tmp, "chain.py")
    with open(prog, "w") as f:
        f.write(CHAIN % NAMES)
    try:
        with Etwd() as e:
            remote_ready(e, tmp)
            http, rem, rec = session_csv(e, prog)
            if http:
                st, head, body, trailer = http
                check(st == 200 and "text/csv" in head, "?format=csv: %d %s" % (st, head))
                check_mixed("?format=csv", body)
                print("?format=csv: %d rows (trailer %r)" % (body.count(b"\n") - 1, trailer), flush=True)
            else:
                check(False, "no ?format=csv body")
            if rem:
                rc, out, err = rem
                check(rc == 0, "remote stream: rc %d %s" % (rc, err))
                check_mixed("remote stream --format csv", out)
                if http and "Etwd-Dropped: 0 " in err and http[3].get("Etwd-Dropped") == "0":
                    check(out == http[2], "remote stream's CSV is the server's body (%d vs %d bytes)" % (len(out), len(http[2])))
                    print("remote stream --format csv: the server's body, %d bytes" % len(out), flush=True)
            else:
                check(False, "no remote stream output")
            path = os.path.join(tmp, "rec.dat")
            with open(path, "wb") as f:
                f.write(rec)
            check_convert(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
