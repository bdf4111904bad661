#!/usr/bin/env python3
"""bench/nats_sink.py — events/s into NATS JetStream with acknowledgements, from one etwd agent.

Starts a single-node nats-server (JetStream, file storage, its own -sd dir on free ports) and a
release etwd, then:
  1. broker alone: tests/nats/etwd_nats_tool publishes N messages of the mean event size with
     async publishes, an ack wait every 1024 (what the sink does) — the broker's ceiling here;
  2. one agent: a live session on raw_syscalls:sys_enter of a child making getppid() calls as
     fast as it can, with a sink; measured from "go" until the sink's acked == the session's
     events: events/s, etwd's CPU seconds (all its threads: readers, hub, sink, libnats) per
     event, and the stream's bytes per message (/jsz).
Usage: bench/nats_sink.py [BUILD_DIR (default build/rel)] [EVENTS (default 300000)]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "rel"))
EVENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 300000
os.environ["ETWD_BIN"] = os.path.join(BUILD, "server", "etwd")
TOOL = os.path.join(BUILD, "tests", "etwd_nats_tool")
import etwd_harness as H  # noqa: E402  (after ETWD_BIN is set)


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def jsz_stream(mport, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/jsz?streams=true" % mport) as r:
        j = json.loads(r.read())
    for acc in j.get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] == name:
                return s["state"]
    return None


def main():
    port, mport = H.free_port(), H.free_port()
    d = tempfile.mkdtemp(prefix="etwd-nats-bench-")
    ns = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-m", str(mport),
                           "-sd", os.path.join(d, "js")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "nats://127.0.0.1:%d" % port
    try:
        time.sleep(1.0)
        with H.Etwd(args=["--host-name", "bench-agent", "--queue-events", "1048576"]) as e:
            child = subprocess.Popen(["/usr/bin/python3", "-c",
                                      "import os,sys\nsys.stdin.readline()\n"
                                      "for _ in range(%d): os.getppid()\n" % EVENTS], stdin=subprocess.PIPE)
            st, h, j = e.json("POST", "/api/v1/sessions", body={
                "name": "bench", "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}],
                "pids": [child.pid], "buffer_kb": 16384,
                "sinks": [{"type": "nats", "url": url, "stream": "BENCH", "subject": "bench.{host}.{session}.{provider}"}]})
            assert st == 201, j
            sid = j["id"]
            c0, t0 = cpu_s(e.proc.pid), time.time()
            child.stdin.write(b"go\n")
            child.stdin.flush()
            child.wait()
            time.sleep(0.3)
            e.json("POST", "/api/v1/sessions/%d/stop" % sid)
            while True:
                s = e.json("GET", "/api/v1/sessions/%d" % sid)[2]["stats"]
                k = s["sinks"][0]
                if k["acked"] >= s["events"] or time.time() - t0 > 300:
                    break
                time.sleep(0.05)
            t1, c1 = time.time(), cpu_s(e.proc.pid)
            js = jsz_stream(mport, "BENCH")
            agent = {"events": s["events"], "acked": k["acked"], "seconds": round(t1 - t0, 3),
                     "events_per_s": round(s["events"] / (t1 - t0)), "etwd_cpu_s": round(c1 - c0, 3),
                     "events_per_cpu_s": round(s["events"] / max(c1 - c0, 1e-9)),
                     "kernel_loss": s["loss"]["kernel"], "sink_loss": s["loss"].get("sink"),
                     "stream_bytes_per_msg": round(js["bytes"] / max(js["messages"], 1)),
                     "json_bytes_per_event": round(s["bytes"] / max(s["events"], 1))}
            print(json.dumps({"agent": agent}))
        size = agent["json_bytes_per_event"]
        r = subprocess.run([TOOL, "pub", url, "RAW", "raw.x", "200000", str(size), "1024"],
                           capture_output=True, text=True, timeout=600)
        b = json.loads(r.stdout)
        print(json.dumps({"broker": {"msgs": b["msgs"], "size": size, "seconds": b["seconds"],
                                     "msgs_per_s": round(b["msgs"] / b["seconds"])}}))
    finally:
        ns.terminate()
        ns.wait()
        shutil.rmtree(d, ignore_errors=True)


main()
