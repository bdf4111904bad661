#!/usr/bin/env python3
"""bench/nats_latency.py — kernel event → central subscriber latency through NATS JetStream.

A single-node nats-server (JetStream, its own -sd dir, free ports); an agent etwd whose live
session (raw_syscalls:sys_enter of a child making getppid() calls at ~RATE/s) has a sink; a
central etwd with a session of backend "nats" on that stream; one WebSocket client of the
central etwd records, per event, its arrival time minus the event's TimeCreated (the kernel's
timestamp). Prints p50/p90/p99/max in ms.
Usage (root): bench/nats_latency.py [BUILD_DIR (build/rel)] [RATE (10000)] [SECONDS (5)]"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "rel"))
RATE = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
SECS = float(sys.argv[3]) if len(sys.argv) > 3 else 5
os.environ["ETWD_BIN"] = os.path.join(BUILD, "server", "etwd")
import etwd_harness as H  # noqa: E402


def parse_ts(s):
    import datetime
    main, frac = s[:-1].split(".")
    dt = datetime.datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp() + int(frac) / 1e7


def main():
    port, mport = H.free_port(), H.free_port()
    d = tempfile.mkdtemp(prefix="etwd-nats-lat-")
    ns = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-m", str(mport),
                           "-sd", os.path.join(d, "js")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "nats://127.0.0.1:%d" % port
    lat = []
    try:
        time.sleep(1.0)
        with H.Etwd(args=["--host-name", "agent", "--log-level", "warn"]) as a, \
                H.Etwd(args=["--host-name", "central", "--log-level", "warn"]) as c:
            code = ("import os,sys,time\nsys.stdin.readline()\nend=time.time()+%f\nn=%d//200\n"
                    "while time.time()<end:\n    [os.getppid() for _ in range(n)]\n    time.sleep(0.005)\n" % (SECS, RATE))
            child = subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE)
            st, h, j = a.json("POST", "/api/v1/sessions", body={
                "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [child.pid],
                "sinks": [{"type": "nats", "url": url, "stream": "LAT", "subject": "lat.{host}.{session}.{provider}"}]})
            assert st == 201, j
            child.stdin.write(b"go\n")  # its first events make the sink create the stream
            child.stdin.flush()
            deadline = time.time() + 30
            while True:
                st, h, j = c.json("POST", "/api/v1/sessions", body={
                    "backend": "nats", "subjects": ["lat.>"], "nats": {"url": url, "stream": "LAT"}})
                if st == 201 or time.time() > deadline:
                    break
                time.sleep(0.1)
            assert st == 201, j
            ws = c.ws("/api/v1/sessions/%d/events" % j["id"])
            t_live = time.time() + 0.5  # events older than this were read from the stream's start
            end = time.time() + SECS
            while time.time() < end:
                ws.settimeout(0.5)
                try:
                    data = ws.recv()
                except Exception:
                    continue
                now = time.time()
                for ev in json.loads(data):
                    if "System" in ev and parse_ts(ev["System"]["TimeCreated"]) >= t_live:
                        lat.append(now - parse_ts(ev["System"]["TimeCreated"]))
            child.wait()
            ws.close()
    finally:
        ns.terminate()
        ns.wait()
        shutil.rmtree(d, ignore_errors=True)
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    print("events %d (%.0f/s): kernel → central subscriber latency ms p50 %.1f p90 %.1f p99 %.1f max %.1f"
          % (len(lat), len(lat) / (SECS - 1.0), q(0.5), q(0.9), q(0.99), lat[-1] * 1000))


main()
