#!/usr/bin/env python3
"""Time order's cost on a busy live session (docs/benchmarks.md "Time order's merge"): etwd's
CPU time and the events/s delivered with "order": "none" and with "order": "time", alternating,
on the same workload in one server.

Usage (root, from the repo): bench/order_ab.py BUILD_DIR [PAIRS=3] [SECONDS=5] [RATE=0]
Workload: one python load process per CPU, pinned, calling getppid() (RATE per second each,
0 = as fast as it can) with a 100 µs sleep after every 1000 calls (context switches); the
session traces raw_syscalls:sys_enter and sched:sched_switch of those processes (pids filter),
buffer_kb 8192. One client reads the ndjson stream over TLS on a raw socket, counting records
(no parsing; this process runs at nice -5 so it keeps up). Prints per case: events delivered, events/s, the session's loss, etwd's CPU
seconds (utime+stime from /proc, including threads that ended), CPU µs per event, and the
context switches of etwd's threads during the case by thread name (over 100 only).
PERF=prefix in the environment: `perf record` of etwd during each case into prefix.none/.time
(`perf report -i prefix.time --stdio`)."""
import os, socket, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/e2e"))
import etwd_harness as H

LOAD = ("import os,sys,time\nsys.stdin.readline()\nend=time.time()+%f\nrate=%d\nn=0\nt0=time.time()\n"
        "while time.time()<end:\n    for i in range(1000): os.getppid()\n    n+=1000\n"
        "    time.sleep(max(0.0001, t0+n/rate-time.time()) if rate else 0.0001)\n")


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid):
    """{thread name prefix: context switches (voluntary + not)} over etwd's live threads"""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            st = open("/proc/%d/task/%s/status" % (pid, t)).read().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = st[0].split(None, 1)[1].split("-c")[0] if st[0].startswith("Name:") else "?"
        n = sum(int(l.split()[-1]) for l in st if "ctxt_switches" in l)
        out[name] = out.get(name, 0) + n
    return out


def run_case(e, order, secs, rate):
    ncpu = os.cpu_count()
    kids = [subprocess.Popen(["/usr/bin/python3", "-c", LOAD % (secs, rate)], stdin=subprocess.PIPE,
                             preexec_fn=(lambda c=c: (os.nice(5), os.sched_setaffinity(0, {c})))) for c in range(ncpu)]
    spec = {"providers": [{"name": "raw_syscalls", "events": ["sys_enter"]},
                          {"name": "sched", "events": ["sched_switch"]}],
            "pids": [k.pid for k in kids], "buffer_kb": 8192, "order": order}
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec, expect=201)
    sid = j["id"]
    raw = socket.create_connection(("127.0.0.1", e.port), timeout=60)
    s = e.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(("GET /api/v1/sessions/%d/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
               "Accept: application/x-ndjson\r\n\r\n" % (sid, e.tokens["reader"])).encode())
    time.sleep(0.3)
    c0 = cpu_seconds(e.proc.pid)
    w0 = switches(e.proc.pid)
    perf = None
    if os.environ.get("PERF"):  # PERF=prefix: perf record etwd during the case → prefix.<order>
        perf = subprocess.Popen(["perf", "record", "-q", "-p", str(e.proc.pid), "-o",
                                 "%s.%s" % (os.environ["PERF"], order)], stderr=subprocess.DEVNULL)
        time.sleep(0.3)
    for k in kids:
        k.stdin.write(b"go\n"); k.stdin.flush()
    t0 = time.time()
    got, tail = 0, b""
    s.settimeout(0.2)
    end = t0 + secs + 1.0  # the last events wait up to the order window
    while time.time() < end:
        try:
            d = s.recv(1 << 20)
        except (socket.timeout, TimeoutError):
            continue
        if not d:
            break
        d = tail + d
        got += d.count(b'{"seq":')
        tail = d[-6:]
    c1 = cpu_seconds(e.proc.pid)
    w1 = switches(e.proc.pid)
    if perf:
        perf.send_signal(2)
        perf.wait()
    for k in kids:
        k.wait()
    _, _, sess = e.json("GET", "/api/v1/sessions/%d" % sid)
    s.close()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    loss = {k: v for k, v in sess["stats"]["loss"].items() if v}
    sw = {k: v - w0.get(k, 0) for k, v in w1.items() if v - w0.get(k, 0) > 100}
    return got, got / secs, loss, c1 - c0, sw


def main():
    build = sys.argv[1]
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 5
    rate = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    H.BIN = os.path.join(build, "server/etwd")
    e = H.Etwd(args=["--log-level", "warn"]).start()
    os.nice(-5)  # the client (this process, not etwd nor the load) keeps up on a shared machine
    try:
        print("%d CPUs, %gs per case, load %s getppid/s per CPU" % (os.cpu_count(), secs, rate or "max"))
        for _ in range(pairs):
            for order in ("none", "time"):
                got, rate_s, loss, cpu, sw = run_case(e, order, secs, rate)
                print("order %-4s events %9d  %8.0f/s  etwd CPU %6.2f s  %.3f µs/event  loss %s  "
                      "context switches %s" % (order, got, rate_s, cpu, cpu * 1e6 / got if got else 0,
                                               loss, sw), flush=True)
    finally:
        e.stop()
        e.cleanup()


main()
