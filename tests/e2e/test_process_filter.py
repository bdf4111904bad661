"""Process-name filters and the ETL process table's drops, through the real binary over real TLS:
- a stream's `process=` (names, ASCII case ignored, `NAME*` a prefix) on a live Linux session (a
  copy of /bin/dd under a unique name, traced with its parent, this python3) and on a replay of a
  corpus file (ShutdownPerfDiagLogger.etl, kernel events named from its Process events), over
  ndjson and WebSocket, and on a file decode (GET /api/v1/files/{name}/events): exactly the events of the unfiltered stream whose
  System.Execution.ProcessName matches, as this file's own rule (written here) selects them;
- `etwd convert --process` on the same file: exactly the unfiltered output's matching lines;
- bad values: 400 problem+json (stream), exit 2 with a message (convert);
- a crafted .etl with 16,484 live processes (Process/Start records) overflows the decoder's process
  table (16,384 pids): the replay session's stats.process_table_dropped and convert's stderr say
  100, and exactly those 100 processes' events go without ProcessName."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

from etl_synth import header_record, packed_buffer
from etwd_harness import Etwd, check, done, problem, wait_state, session, ws_events, BIN, CORPUS

SHUTDOWN = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl")
PATTERNS = ["svchost", "EXPLORER", "Microsoft*"]  # exact, another case, a prefix


def ascii_lower(s):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def matches(rec, patterns):
    """The documented rule: the ProcessName equals a pattern, or starts with a NAME* pattern's NAME,
    ASCII letters compared without case; no ProcessName matches nothing."""
    name = rec["System"]["Execution"].get("ProcessName")
    if name is None:
        return False
    n = ascii_lower(name)
    for p in patterns:
        p = ascii_lower(p)
        if (p.endswith("*") and n.startswith(p[:-1])) or n == p:
            return True
    return False


def query(patterns):
    return "process=" + urllib.parse.quote(",".join(patterns), safe=",*")


def events_of(recs):
    return [r for r in recs if "System" in r]


RENAMED = '''
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, sys.argv[1].encode("latin-1"), 0, 0, 0)  # PR_SET_NAME
fd = os.open("/dev/null", os.O_WRONLY)
for _ in range(100):
    os.write(fd, b"x")
'''


def test_live(e):
    """Live Linux: the dd copy's events only, the same as the unfiltered stream's matching ones."""
    d = tempfile.mkdtemp(prefix="etwdpf-")
    name = "etwdpf%d" % (os.getpid() % 100000)  # < 16 bytes: the whole comm
    prog = os.path.join(d, name)
    shutil.copy("/bin/dd", prog)
    spec = {"name": "pf", "buffer_kb": 1024, "pids": [os.getpid()], "providers": [
        {"name": "syscalls", "events": ["sys_enter_write"]}, {"name": "sched", "events": ["sched_process_exec"]}]}
    st, h, j = e.json("POST", "/api/v1/sessions", spec, expect=201)
    sid = j["id"]
    wait_state(e, sid, ["running"])
    n = 300
    odd = 'pf"\xe9%d' % (os.getpid() % 100000)  # as the stream shows it: U+00E9 for the byte 0xE9
    try:
        fd = os.open("/dev/null", os.O_WRONLY)
        for _ in range(50):  # events of this python3: the filter must leave them out
            os.write(fd, b"x")
        p = subprocess.run([prog, "if=/dev/zero", "of=/dev/null", "bs=1", "count=%d" % n],
                           stderr=subprocess.DEVNULL, timeout=60)
        for _ in range(50):
            os.write(fd, b"x")
        os.close(fd)
        # a comm with a quote and a Latin-1 byte (JSON: \u0022, \u00e9): named by prctl, then 100 writes
        r = subprocess.run([sys.executable, "-c", RENAMED, odd], timeout=60)
        check(r.returncode == 0, "live: the renamed child exited %d" % r.returncode)
        check(p.returncode == 0, "live: %s exited %d" % (name, p.returncode))
    finally:
        shutil.rmtree(d)
    # the dd's events are decoded once its last write is in the replay window; stop drains the rest
    ws = e.ws("/api/v1/sessions/%d/events?from=1&%s" % (sid, query([name.upper()])))
    try:
        seen = ws_events(ws, lambda rs: sum(r.get("System", {}).get("EventName") == "sys_enter_write"
                                            for r in rs) >= n, timeout=60)
    finally:
        ws.close()
    check(sum(r.get("System", {}).get("EventName") == "sys_enter_write" for r in seen) >= n,
          "live: %d writes of %s arrived live with process=%s" % (len(seen), name, name.upper()))
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    wait_state(e, sid, ["stopped"])
    everything = events_of(e.ndjson("/api/v1/sessions/%d/events?from=1" % sid, timeout=60))
    for pats in ([name.upper()], [name[:-2] + "*"], [name, "etwd-no-such-name"]):
        got = events_of(e.ndjson("/api/v1/sessions/%d/events?from=1&%s" % (sid, query(pats)), timeout=60))
        want = [r for r in everything if matches(r, pats)]
        check([r["seq"] for r in got] == [r["seq"] for r in want] and got == want,
              "live %s: %d events, want the unfiltered stream's %d matching ones" % (pats, len(got), len(want)))
        check(all(r["System"]["Execution"].get("ProcessName") == name for r in got),
              "live %s: only %s's events" % (pats, name))
        writes = [r for r in got if r["System"]["EventName"] == "sys_enter_write"]
        check(len(writes) >= n and any(r["System"]["EventName"] == "sched_process_exec" for r in got),
              "live %s: the exec and >= %d writes of %s, got %d writes" % (pats, n, name, len(writes)))
    up = odd.replace("pf", "PF")  # ASCII letters match in any case, others exactly
    for pats, want_n in (([up], 100), ([up[:3] + "*"], 100), ([odd.replace("\xe9", "\xc9")], 0)):
        got = events_of(e.ndjson("/api/v1/sessions/%d/events?from=1&%s" % (sid, query(pats)), timeout=60))
        want = [r for r in everything if matches(r, pats)]
        writes = [r for r in got if r["System"]["EventName"] == "sys_enter_write"]
        check(got == want and len(writes) == want_n and all(r["System"]["Execution"]["ProcessName"] == odd for r in got),
              "live %r: %d events (%d writes), want the unfiltered stream's %d matching ones with %d writes"
              % (pats, len(got), len(writes), len(want), want_n))
    others = [r for r in everything if r["System"]["Execution"].get("ProcessName") != name]
    check(len(others) >= 100, "live: the unfiltered stream has this python3's writes too (%d other events)" % len(others))
    e.json("DELETE", "/api/v1/sessions/%d" % sid)


def replay(e, name, path):
    with open(path, "rb") as f:
        e.json("POST", "/api/v1/files?name=%s" % name, body=f.read(), ctype="application/octet-stream", expect=201)
    st, h, j = e.json("POST", "/api/v1/sessions", body={"files": [name], "replay": "fast"}, expect=201)
    return j["id"]


def test_replay(e):
    """ETL replay: ndjson and WebSocket streams with process= against the unfiltered stream."""
    sid = replay(e, "sd.etl", SHUTDOWN)
    everything = events_of(e.ndjson("/api/v1/sessions/%d/events" % sid, timeout=120))
    want = [r for r in everything if matches(r, PATTERNS)]
    names = {r["System"]["Execution"]["ProcessName"] for r in want}
    check(len(everything) > 10000 and 1000 < len(want) < len(everything) and
          {"svchost", "explorer"} <= names and len([x for x in names if x.startswith("Microsoft")]) >= 2,
          "replay: the file's events and the chosen names (%d of %d events: %s)" % (len(want), len(everything), sorted(names)))
    got = events_of(e.ndjson("/api/v1/sessions/%d/events?%s" % (sid, query(PATTERNS)), timeout=120))
    check(got == want, "replay ndjson %s: %d events, want the unfiltered stream's %d matching ones"
          % (PATTERNS, len(got), len(want)))
    ws = e.ws("/api/v1/sessions/%d/events?%s" % (sid, query(PATTERNS)))
    try:
        recs = ws_events(ws, lambda rs: rs and "_closed" in rs[-1], timeout=120)
    finally:
        ws.close()
    check(events_of(recs) == want, "replay WebSocket %s: %d events, want %d" % (PATTERNS, len(events_of(recs)), len(want)))
    # a file decode (GET /api/v1/files/{name}/events) takes it too
    decoded = events_of(e.ndjson("/api/v1/files/sd.etl/events", timeout=120))
    got = events_of(e.ndjson("/api/v1/files/sd.etl/events?%s" % query(PATTERNS), timeout=120))
    want_d = [r for r in decoded if matches(r, PATTERNS)]
    check(got == want_d and len(want_d) == len(want), "file decode %s: %d events, want %d" % (PATTERNS, len(got), len(want_d)))
    # with another filter: both must hold
    got = events_of(e.ndjson("/api/v1/sessions/%d/events?%s&event=Thread/DCStart" % (sid, query(["svchost"])), timeout=120))
    want2 = [r for r in everything if matches(r, ["svchost"]) and r["System"].get("EventName") == "Thread/DCStart"]
    check(got == want2 and len(want2) > 10, "replay process=svchost&event=Thread/DCStart: %d events, want %d" % (len(got), len(want2)))
    s = session(e, sid)
    check(s["stats"].get("process_table_dropped") == 0, "replay stats: process_table_dropped 0: %r" % s["stats"])
    return sid


def convert(*args):
    return subprocess.run([BIN, "convert"] + list(args), capture_output=True, timeout=300)


def test_convert():
    all_lines = convert(SHUTDOWN, "--quiet").stdout.splitlines()
    want = [l for l in all_lines if matches(json.loads(l), PATTERNS)]
    r = convert(SHUTDOWN, "--quiet", "--process", ",".join(PATTERNS))
    check(r.returncode == 0, "convert --process: exit %d %s" % (r.returncode, r.stderr[-300:]))
    got = r.stdout.splitlines()
    check(got == want and len(want) > 1000, "convert --process %s: %d lines, want the %d matching lines of the "
          "unfiltered output" % (",".join(PATTERNS), len(got), len(want)))
    r = convert(SHUTDOWN, "--quiet", "--process=svchost", "--pid", "4")  # both must hold
    want = [l for l in all_lines if matches(json.loads(l), ["svchost"]) and
            json.loads(l)["System"]["Execution"]["ProcessID"] == 4]
    check(r.returncode == 0 and r.stdout.splitlines() == want,
          "convert --process svchost --pid 4: %d lines, want %d" % (len(r.stdout.splitlines()), len(want)))


BAD = ["", "a,", ",a", "*", "a*b", "*a", "a\x01b", "a" * 128, ",".join("n%d" % i for i in range(17))]


def test_bad(e, sid):
    for v in BAD:
        path = "/api/v1/sessions/%d/events?process=%s" % (sid, urllib.parse.quote(v, safe=","))
        st, h, data = e.request("GET", path, token="reader", headers={"Accept": "application/x-ndjson"})
        problem(st, h, data, 400, "process=%r" % v)
        check(b"process" in data, "process=%r: the problem names the parameter: %r" % (v, data[:300]))
    for v in BAD[:-1]:  # (convert takes up to 64 names)
        r = convert(SHUTDOWN, "--quiet", "--process", v)
        check(r.returncode == 2 and b"--process" in r.stderr and not r.stdout,
              "convert --process %r: exit %d, stderr %r" % (v, r.returncode, r.stderr[-300:]))
    r = convert(SHUTDOWN, "--process")
    check(r.returncode == 2 and b"needs a value" in r.stderr, "convert --process without a value: exit %d" % r.returncode)


# ---- the process table at its bound: a crafted file

def write_etl(path, records, t0=1000):
    """A minimal 64-bit ETL file (QPC clock at 10 MHz): the header buffer (SYSTEM64 logfile header
    record) and buffers of at most ~60 KB of the given records."""
    out, body = [packed_buffer(header_record(t0, 132999000000000000, 133000000000000000), 0)], bytearray()
    for rec in records:
        if len(body) + len(rec) > 60000:
            out.append(packed_buffer(bytes(body), len(out)))
            body = bytearray()
        body += rec
    out.append(packed_buffer(bytes(body), len(out)))
    with open(path, "wb") as f:
        f.write(b"".join(out))


def process_start(ts, pid, image):
    """A kernel Process/Start (SYSTEM64 header, hook 0x0301, v4 payload: key, pid, parent, session,
    exit status, DTB, flags, no SID, ANSI image name, three empty UTF-16 strings)."""
    p = bytearray(36)
    struct.pack_into("<I", p, 8, pid)
    p += b"\0\0\0\0" + image.encode() + b"\0" + b"\0" * 6
    rec = bytearray(0x20)
    struct.pack_into("<HBBHHIIQII", rec, 0, 4, 2, 0xC0, 0x20 + len(p), 0x0301, 0, 4, ts, 0, 0)
    return bytes(rec + p + b"\0" * (-(len(rec) + len(p)) % 8))


TABLE = 16384  # dec_proc.c's DEC_PROC_MAX
EXTRA = 100


def test_table_full(e, tmp):
    path = os.path.join(tmp, "procs.etl")
    write_etl(path, [process_start(2000 + i, 1000 + 4 * i, "p%d.exe" % i) for i in range(TABLE + EXTRA)])
    sid = replay(e, "procs.etl", path)
    recs = events_of(e.ndjson("/api/v1/sessions/%d/events" % sid, timeout=120))
    starts = [r for r in recs if r["System"].get("EventName") == "Process/Start"]
    unnamed = [r["EventData"]["ProcessId"] for r in starts if "ProcessName" not in r["System"]["Execution"]]
    check(len(starts) == TABLE + EXTRA and unnamed == [1000 + 4 * i for i in range(TABLE, TABLE + EXTRA)],
          "crafted file: %d starts, the last %d without ProcessName: %d unnamed" % (len(starts), EXTRA, len(unnamed)))
    st = None
    for _ in range(100):  # the pass's counters join the session's when its stream has ended
        st = session(e, sid)["stats"]
        if st.get("process_table_dropped"):
            break
        time.sleep(0.05)
    check(st.get("process_table_dropped") == EXTRA, "replay stats: process_table_dropped %d: %r" % (EXTRA, st))
    r = convert(path, "--quiet")
    check(r.returncode == 0 and b"etwd convert: %d process names or thread owners not kept" % EXTRA in r.stderr,
          "convert's summary counts the %d names not kept: exit %d %r" % (EXTRA, r.returncode, r.stderr[-400:]))
    r = convert(SHUTDOWN, "--quiet")
    check(b"not kept" not in r.stderr, "convert of a file that fits the table: no such line: %r" % r.stderr[-300:])


def main():
    with tempfile.TemporaryDirectory() as tmp, Etwd() as e:
        t0 = time.time()
        test_live(e)
        t1 = time.time()
        sid = test_replay(e)
        test_convert()
        t2 = time.time()
        test_bad(e, sid)
        test_table_full(e, tmp)
        print("live %.1f s, replay+convert %.1f s, bad+table %.1f s" % (t1 - t0, t2 - t1, time.time() - t2))
    done()


if __name__ == "__main__":
    main()
