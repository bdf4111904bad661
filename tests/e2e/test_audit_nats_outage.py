"""Broker down for 20 s (issue 23 audit, its literal test; test_nats.py's outage is ~10 s, which
ends before the sink's reconnect back-off reaches its 5 s cap): executions keep coming during the
whole outage; the spool stays within its bounds (2 KiB memory, then 1 MiB disk) and drops nothing;
after the restart the sink reconnects within a few back-off steps and every seq 1..N arrives
exactly once. Also: without --host-name, System.Host is the machine's name. And a hung broker
(SIGSTOP: TCP open, nothing read or acknowledged) under a burst of ~30k events never slows the
session's other subscriber: a WebSocket client gets every event, no kernel or hub loss."""
import os
import shutil
import signal
import socket
import subprocess
import time

import etwd_harness as H
from etwd_harness import Etwd, check, done
from test_nats import require_nats, Nats, TOOL, create, exec_spec, fetch, execs, run_n, session, sink_of, unique_prog, wait_for


def test_hung_broker():
    """the sink is one more subscriber with its own queue: a broker that hangs holds up only it"""
    N = 30000
    nats = Nats("hung").start()
    child = None
    try:
        with Etwd(args=["--queue-events", "262144"]) as e:
            child = subprocess.Popen(["/usr/bin/python3", "-c", "import os,sys\nsys.stdin.readline()\n"
                                      "[os.getppid() for _ in range(%d)]\nsys.stdin.readline()\n" % N],
                                     stdin=subprocess.PIPE)
            j = create(e, {"name": "hung", "providers": [{"name": "syscalls", "events": ["sys_enter_getppid"]}],
                           "pids": [child.pid], "buffer_kb": 8192,
                           "sinks": [{"type": "nats", "url": nats.url(), "stream": "HUNG",
                                      "subject": "hung.{host}.{session}.{provider}"}]})
            sid = j["id"]
            ws = e.ws("/api/v1/sessions/%d/events" % sid)
            H.wait_subscribers(e, sid, 2)
            wait_for("the sink connected", lambda: sink_of(e, sid)["connected"])
            nats.proc.send_signal(signal.SIGSTOP)
            t0 = time.time()
            child.stdin.write(b"go\n")
            child.stdin.flush()

            def calls(rs):
                return [r for r in rs if r.get("System", {}).get("EventName") == "sys_enter_getppid"]
            got = calls(H.ws_events(ws, lambda rs: len(calls(rs)) >= N, timeout=120))
            took = time.time() - t0
            s = session(e, sid)["stats"]
            k = s["sinks"][0]
            print("hung broker: %d events at the WebSocket in %.1f s; sink %r" % (len(got), took, k), flush=True)
            check(len(got) == N, "the WebSocket client got %d of %d events while the broker hung" % (len(got), N))
            ws_sub = [p for p in s["per_subscriber"] if p["delivered"] >= N and p["dropped"] == 0]
            check(s["loss"]["kernel"] == 0 and s["loss"]["hub"] == 0 and ws_sub,
                  "no kernel, hub or WebSocket loss: %r %r" % (s["loss"], s["per_subscriber"]))
            check(k["acked"] < N, "the broker really hung (acked %d)" % k["acked"])
            ws.close()
            child.stdin.write(b"end\n")
            child.stdin.flush()
            st = e.request("DELETE", "/api/v1/sessions/%d" % sid, timeout=60)[0]
            check(st == 204, "DELETE: %d" % st)
    finally:
        if child:
            child.kill()
            child.wait()
        if nats.proc:
            nats.proc.send_signal(signal.SIGCONT)
        nats.cleanup()


def main():
    require_nats()
    nats = Nats().start()
    prog = unique_prog("outage20")
    try:
        with Etwd() as e:  # no --host-name: the machine's name
            spec = exec_spec("out20", nats, "OUT20", spool_memory_kb=2, spool_disk_mb=1)
            # only this test's executions (the machine's other execs could fill 1 MiB in 20 s)
            spec["providers"][0]["filter"] = 'filename ~ "*/%s"' % os.path.basename(prog)
            j = create(e, spec)
            sid = j["id"]
            H.wait_subscribers(e, sid, 1)
            run_n(prog, 3)
            wait_for("the first events acknowledged", lambda: sink_of(e, sid)["acked"] >= 3)
            nats.stop()
            t0 = time.time()
            wait_for("the sink sees the broker gone", lambda: not sink_of(e, sid)["connected"])
            n, peak_mem, peak_disk = 0, 0, 0
            while time.time() - t0 < 20:
                run_n(prog, 2)
                n += 2
                k = sink_of(e, sid)
                peak_mem, peak_disk = max(peak_mem, k["memory_bytes"]), max(peak_disk, k["disk_bytes"])
                check(not k["connected"] and k["dropped"] == 0, "during the outage: %r" % k)
                time.sleep(0.25)
            k = sink_of(e, sid)
            check(k["pending"] >= n and k["spooled_disk"] > 0, "after 20 s the spool holds the %d executions: %r" % (n, k))
            check(peak_mem <= 2 * 1024 and 0 < peak_disk <= 1024 * 1024,
                  "the spool stayed within 2 KiB memory / 1 MiB disk: peaks %d / %d" % (peak_mem, peak_disk))
            nats.start()
            t1 = time.time()
            wait_for("the sink reconnected", lambda: sink_of(e, sid)["connected"], timeout=30)
            check(time.time() - t1 < 15, "reconnected %.1f s after the restart (back-off capped at 5 s)" % (time.time() - t1))
            e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
            produced = session(e, sid)["stats"]["events"]
            wait_for("everything acknowledged", lambda: sink_of(e, sid)["acked"] == produced, timeout=90)
            k = sink_of(e, sid)
            check(k["pending"] == 0 and k["dropped"] == 0 and k["connects"] >= 2, "health: %r" % k)
            msgs = fetch(nats.url(), "OUT20")
            other = [m["data"] for m in msgs if "seq" not in m["data"]]
            check(not other, "only events in the stream: %r" % other[:3])
            seqs = [m["data"]["seq"] for m in msgs if "seq" in m["data"]]
            check(sorted(seqs) == list(range(1, produced + 1)), "every seq 1..%d exactly once (%d messages, %d distinct)"
                  % (produced, len(seqs), len(set(seqs))))
            mine = execs(msgs, prog)
            check(len(mine) == n + 3 == produced, "all %d executions arrived: %d of %d events" % (n + 3, len(mine), produced))
            host = socket.gethostname()
            check(all(m["data"]["System"].get("Host") == host and m["hdr"].get("Etwd-Host") == host for m in mine),
                  "System.Host and Etwd-Host default to the machine's name %s: %r" % (host, mine[0]["data"]["System"].get("Host")))
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
    finally:
        nats.cleanup()
        shutil.rmtree(os.path.dirname(prog), ignore_errors=True)
    test_hung_broker()
    done()


if __name__ == "__main__":
    main()
