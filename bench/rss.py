#!/usr/bin/env python3
"""bench/rss.py — does etwd give memory back? (issue 18 item 3)

Spawns a real etwd (give a NON-sanitized build: ASan keeps freed memory in quarantine and
distorts RSS), then measures its VmRSS
  idle       after start-up and a few REST requests,
  decodes    after D full decodes of a corpus file through GET /api/v1/files/{name}/events
             (C at a time, each read to the end by a fast client), and
  sessions   after S busy live sessions (raw_syscalls/sys_enter of a child making getppid()
             syscalls, one ndjson subscriber each, K at a time) were created, read and deleted.
Goal: RSS(decodes) and RSS(sessions) <= 1.2 x RSS(idle) + L, where L is what the configured
limits let etwd hold at that moment. No session, stream or decode is left then; what stays is
per worker thread (OpenSSL's per-thread state, the stack a request touched), and the worker pool
is configured (--max-streams + --max-requests + 4 threads). So L is measured: the growth of RSS
when every worker has served one TLS connection (all at once), before the decodes.

Usage (as root, tracefs mounted):
  python3 bench/rss.py --bin build/rel/server/etwd [--decodes 30] [--sessions 100]
                       [--parallel-decodes 3] [--parallel-sessions 10] [--file PATH]
Prints one line per phase and exits 1 when the goal is missed."""
import argparse
import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))

DEFAULT_FILE = os.path.join(HERE, "..", "..", "shared", "corpus", "microsoft+perfview", "src", "TraceEvent",
                            "TraceEvent.Tests", "inputs", "net.4.5.2.x64.etl.zip")


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def smaps_top(pid, n=12):
    """The @n mappings with the most resident memory: (rss kB, size kB, description)."""
    out, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and "-" in p[0] and ":" not in p[0]:
                cur = [0, 0, " ".join(p[5:]) or "anon"]
                out.append(cur)
            elif p[0] == "Rss:":
                cur[0] = int(p[1])
            elif p[0] == "Size:":
                cur[1] = int(p[1])
    return sorted(out, key=lambda x: -x[0])[:n]


def smaps_kinds(pid):
    """Resident kB by kind of mapping: heap (main arena), arenas (64 MiB reservations of the
    other malloc arenas), stacks (8 MiB thread stacks), files, other anonymous."""
    kinds = {"heap": 0, "arenas": 0, "stacks": 0, "files": 0, "anon": 0}
    for rss, size, what in smaps_top(pid, 1 << 30):
        k = ("heap" if what == "[heap]" else "files" if what.startswith("/") else
             "arenas" if what == "anon" and 60000 <= size <= 65536 else
             "stacks" if what == "anon" and 8180 <= size <= 8200 else "anon")
        kinds[k] += rss
    return kinds


def settle(pid, secs=2.0):
    """RSS once the server is quiet: the lowest of a few samples over @secs."""
    best = rss_kb(pid)
    end = time.time() + secs
    while time.time() < end:
        time.sleep(0.25)
        best = min(best, rss_kb(pid))
    return best


def read_stream(e, path, stop=None):
    """GET an ndjson stream and read it to the end (or until @stop is set); returns (status, bytes, lines)."""
    c = e.conn(timeout=600)
    c.request("GET", path, headers={"Authorization": "Bearer " + e.tokens["reader"],
                                    "Accept": "application/x-ndjson"})
    r = c.getresponse()
    n = lines = 0
    if r.status == 200:
        while not (stop and stop.is_set()):
            b = r.read1(1 << 16)
            if not b:
                break
            n += len(b)
            lines += b.count(b"\n")
    else:
        r.read()
    c.close()
    return r.status, n, lines


def warm_pool(e, n):
    """Use every civetweb worker once: @n TLS connections open at the same time, each making
    requests, so each worker thread has made its per-thread state (OpenSSL's, its stack)."""
    barrier = threading.Barrier(n)

    def one():
        c = e.conn(timeout=120)
        for _ in range(2):
            try:
                c.request("GET", "/api/v1/sessions", headers={"Authorization": "Bearer " + e.tokens["reader"]})
                c.getresponse().read()
            except OSError:
                pass
            try:
                barrier.wait(60)
            except threading.BrokenBarrierError:
                pass
        c.close()
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def decodes(e, name, total, par):
    done, errors, lines = [0], [], [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if done[0] >= total:
                    return
                done[0] += 1
            st, n, ln = read_stream(e, "/api/v1/files/%s/events" % name)
            with lock:
                lines[0] += ln
                if st != 200:
                    errors.append(st)
    ts = [threading.Thread(target=worker) for _ in range(par)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return lines[0], errors


LOAD = ("import os,sys,time\nos.write(1,b'r')\nwhile True:\n"
        "    [os.getppid() for _ in range(200)]\n    time.sleep(0.0005)\n")


def one_session(e, child_pid, secs, out):
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [child_pid]})
    if st != 201:
        out.append(("create", st, j))
        return
    sid = j["id"]
    stop = threading.Event()
    res = []
    t = threading.Thread(target=lambda: res.append(read_stream(e, "/api/v1/sessions/%d/events" % sid, stop)))
    t.start()
    time.sleep(secs)
    st2, h2, j2 = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")
    out.append(("events", j2["stats"]["events"] if st2 == 200 else 0))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    stop.set()
    t.join(60)


def sessions(e, total, par, secs):
    child = subprocess.Popen(["/usr/bin/python3", "-c", LOAD], stdout=subprocess.PIPE)
    child.stdout.read(1)
    out = []
    try:
        left = total
        while left > 0:
            k = min(par, left)
            ts = [threading.Thread(target=one_session, args=(e, child.pid, secs, out)) for _ in range(k)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            left -= k
    finally:
        child.kill()
        child.wait()
    events = sum(x[1] for x in out if x[0] == "events")
    errors = [x for x in out if x[0] != "events"]
    return events, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--file", default=DEFAULT_FILE)
    ap.add_argument("--decodes", type=int, default=30)
    ap.add_argument("--parallel-decodes", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--parallel-sessions", type=int, default=10)
    ap.add_argument("--session-secs", type=float, default=1.0)
    ap.add_argument("--smaps", action="store_true", help="print the biggest mappings after each phase")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for etwd's environment")
    a = ap.parse_args()
    os.environ["ETWD_BIN"] = os.path.abspath(a.bin)
    import etwd_harness as H
    env = dict(kv.split("=", 1) for kv in a.env)
    if a.file.endswith(".zip"):
        z = zipfile.ZipFile(a.file)
        data = z.read([n for n in z.namelist() if n.endswith(".etl")][0])
    else:
        data = open(a.file, "rb").read()
    e = H.Etwd(args=["--log-level", "error", "--max-sessions", str(max(16, a.parallel_sessions))], env=env)
    e.start()
    try:
        pid = e.proc.pid
        e.json("POST", "/api/v1/files?name=bench.etl", body=data, ctype="application/octet-stream", expect=201)
        for _ in range(3):
            e.request("GET", "/api/v1/sessions", token="reader")
            e.request("GET", "/api/v1/version", token="reader")
        idle = settle(pid)
        print("idle: RSS %.1f MB" % (idle / 1024.0), flush=True)
        if a.smaps:
            print("  by kind of mapping, kB:", smaps_kinds(pid))
        st, h, v = e.json("GET", "/api/v1/version", token="reader")
        workers = v["limits"]["max_streams"] + 32 + 4  # --max-streams + --max-requests (default) + 4
        warm_pool(e, workers)
        warm = settle(pid)
        pool = max(0, warm - idle)
        print("after using all %d workers once: RSS %.1f MB, so L = %.1f MB" % (workers, warm / 1024.0, pool / 1024.0),
              flush=True)
        if a.smaps:
            print("  by kind of mapping, kB:", smaps_kinds(pid))
        t0 = time.time()
        lines, errs = decodes(e, "bench.etl", a.decodes, a.parallel_decodes)
        after_dec = settle(pid)
        print("after %d decodes of %s (%.1f MB, %d at a time, %d lines in all, %.0f s%s): RSS %.1f MB"
              % (a.decodes, os.path.basename(a.file), len(data) / 1e6, a.parallel_decodes, lines,
                 time.time() - t0, ", errors %r" % errs if errs else "", after_dec / 1024.0), flush=True)
        t0 = time.time()
        events, errs = sessions(e, a.sessions, a.parallel_sessions, a.session_secs)
        after_ses = settle(pid)
        print("after %d busy sessions deleted (%d at a time, %.1f s each, %d events in all, %.0f s%s): RSS %.1f MB"
              % (a.sessions, a.parallel_sessions, a.session_secs, events, time.time() - t0,
                 ", errors %r" % errs[:3] if errs else "", after_ses / 1024.0), flush=True)
        if a.smaps:
            print("  by kind of mapping, kB:", smaps_kinds(pid))
        limit = 1.2 * idle + pool
        ok = after_dec <= limit and after_ses <= limit and not errs
        print("goal RSS <= 1.2 x idle + L = %.1f MB: %s" % (limit / 1024.0, "met" if ok else "MISSED"))
    finally:
        e.stop()
        e.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
