#!/usr/bin/env python3
"""Kernel event → client latency at ~RATE events/s: one WebSocket client (websocket-client)
records, for every event, its arrival time minus the event's TimeCreated (kernel timestamp
converted to UTC by etwd). Prints p50/p90/p99/max in ms. Goal (issue 3): p99 < 50 ms.
Usage (root): bench/latency.py BUILD_DIR [RATE] [SECONDS]
ORDER=time in the environment: the session has "order": "time" (docs/benchmarks.md)."""
import datetime, json, os, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tests/e2e"))
import etwd_harness as H


def parse_ts(s):
    # "2026-11-22T01:27:38.5109403Z" → seconds since epoch (float, 100 ns)
    main, frac = s[:-1].split(".")
    dt = datetime.datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp() + int(frac) / 1e7


def main():
    build = sys.argv[1]
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 5
    H.BIN = os.path.join(build, "server/etwd")
    e = H.Etwd(args=["--log-level", "warn"]).start()
    try:
        code = ("import os,sys,time\nsys.stdin.readline()\nend=time.time()+%f\nn=%d//200\n"
                "while time.time()<end:\n    [os.getppid() for _ in range(n)]\n    time.sleep(0.005)\n" % (secs, rate))
        child = subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE)
        spec = {"providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [child.pid]}
        if os.environ.get("ORDER"):
            spec["order"] = os.environ["ORDER"]
        st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
        ws = e.ws("/api/v1/sessions/%d/events" % j["id"])
        child.stdin.write(b"go\n"); child.stdin.flush()
        lat = []
        end = time.time() + secs + 0.5
        while time.time() < end:
            ws.settimeout(0.5)
            try:
                data = ws.recv()
            except Exception:
                continue
            now = time.time()
            for ev in json.loads(data):
                if "System" in ev:
                    lat.append(now - parse_ts(ev["System"]["TimeCreated"]))
        child.wait()
        ws.close()
    finally:
        e.stop()
        e.cleanup()
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    print("events %d (%.0f/s): latency ms p50 %.1f p90 %.1f p99 %.1f max %.1f  (goal p99 < 50)"
          % (len(lat), len(lat) / secs, q(0.5), q(0.9), q(0.99), lat[-1] * 1000))


main()
