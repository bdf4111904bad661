#!/usr/bin/env python3
"""Fan-out cost: etwd's CPU time for the same kernel workload with 1 WebSocket subscriber and
with N (default 100), in one run. Clients are raw TLS sockets doing the WebSocket handshake and
then only counting bytes (no JSON parsing) in one selector loop, so they stay cheap.

Usage (root, from the repo): bench/fanout.py BUILD_DIR [N] [SECONDS] [RATE]
Workload: a child making RATE getppid() syscalls per second, traced via raw_syscalls:sys_enter
with a PID filter. Prints server CPU seconds (utime+stime from /proc, 10 ms ticks) per case, the
same summed over etwd's threads in nanoseconds (/proc/PID/task/*/schedstat), the threads'
voluntary context switches ("sleeps": mostly one per sender per frame), and the ratios.
Goal (issue 3): ratio <= 2. PLAIN=1 runs the same over plain HTTP on loopback (no TLS).
The machine's other load moves these numbers by +-25 %: compare builds in alternating runs."""
import base64, json, os, selectors, socket, ssl, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/e2e"))
import etwd_harness as H


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def task_counters(pid):
    """(run time in s, voluntary context switches = sleeps) summed over the live threads: /proc/PID/task/*/schedstat
    counts nanoseconds (utime+stime above is in 10 ms ticks); the threads that matter (readers,
    senders, workers) live through a whole case."""
    ns = sw = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            ns += int(open("/proc/%d/task/%s/schedstat" % (pid, t)).read().split()[0])
            for line in open("/proc/%d/task/%s/status" % (pid, t)):
                if line.startswith("voluntary_ctxt_switches:"):  # sleeps (not preemptions)
                    sw += int(line.split()[-1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return ns / 1e9, sw


def open_ws(e, path, ctx):
    s = socket.create_connection(("127.0.0.1", e.port))
    t = ctx.wrap_socket(s, server_hostname="127.0.0.1") if ctx else s
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
           % (path, e.port, key, e.tokens["reader"]))
    t.sendall(req.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += t.recv(1)
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(head)
    t.setblocking(False)
    return t


def rate_child(rate, seconds):
    code = ("import os,sys,time\nsys.stdin.readline()\nend=time.time()+%f\nn=%d//100\n"
            "while time.time()<end:\n    [os.getppid() for _ in range(n)]\n    time.sleep(0.01)\n" % (seconds, rate))
    return subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE)


def run_case(e, nsubs, seconds, rate):
    child = rate_child(rate, seconds)
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [child.pid], "buffer_kb": 8192})
    sid = j["id"]
    ctx = e.ssl_context() if e.tls else None
    socks = [open_ws(e, "/api/v1/sessions/%d/events" % sid, ctx) for _ in range(nsubs)]
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    got = 0
    c0 = cpu_seconds(e.proc.pid)
    t0 = task_counters(e.proc.pid)
    child.stdin.write(b"go\n"); child.stdin.flush()
    end = time.time() + seconds + 1.0
    while time.time() < end:
        for key, _ in sel.select(0.05):
            try:
                while True:
                    d = key.fileobj.recv(1 << 20)
                    if not d:
                        break
                    got += len(d)
            except (ssl.SSLWantReadError, BlockingIOError):
                pass
    child.wait()
    c1 = cpu_seconds(e.proc.pid)
    t1 = task_counters(e.proc.pid)
    _, _, s = e.json("GET", "/api/v1/sessions/%d" % sid)
    for sk in socks:
        sk.close()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    return c1 - c0, t1[0] - t0[0], t1[1] - t0[1], s["stats"]["events"], s["stats"]["loss"], got


def main():
    build = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 5
    rate = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    H.BIN = os.path.join(build, "server/etwd")
    plain = os.environ.get("PLAIN") == "1"
    e = H.Etwd(tls=not plain, args=["--log-level", "warn", "--max-streams", str(n + 8), "--max-subscribers", str(n + 8)]).start()
    try:
        r1 = run_case(e, 1, secs, rate)
        rn = run_case(e, n, secs, rate)
    finally:
        e.stop()
        e.cleanup()
    print("%s, events/s target %d, %gs each; server CPU seconds:" % ("plain ws://" if plain else "wss://", rate, secs))
    fmt = "cpu %.3f s (threads %.3f s, %d sleeps), events %d, loss %s, bytes to clients %d"
    print("  1 subscriber:    " + fmt % r1)
    print("  %d subscribers: " % n + fmt % rn)
    print("ratio (N/1): %.2f, threads %.2f   (goal <= 2)" % (rn[0] / r1[0] if r1[0] else float("inf"),
                                                  rn[1] / r1[1] if r1[1] else float("inf")))


main()
