"""A broker that hangs (SIGSTOP: its TCP connection stays open, nothing is answered) is shown as
such in the sink's health within ~30 s (issue 23: "the session's state shows the sink's health"):
state "disconnected", connected false, /metrics etwd_session_sink_ok 0 — not "ok" until libnats'
default PING timeout (2 min × 2). When it resumes, the sink reconnects and every event arrives
once."""
import os
import shutil
import signal
import time

import etwd_harness as H
from etwd_harness import Etwd, check, done
from test_nats import require_nats, Nats, TOOL, create, exec_spec, fetch, execs, run_n, session, sink_of, unique_prog, wait_for


def main():
    require_nats()
    nats = Nats("stale").start()
    prog = unique_prog("stale")
    try:
        with Etwd() as e:
            spec = exec_spec("stale", nats, "STALE")
            spec["providers"][0]["filter"] = 'filename ~ "*/%s"' % os.path.basename(prog)
            sid = create(e, spec)["id"]
            H.wait_subscribers(e, sid, 1)
            run_n(prog, 2)
            wait_for("the first events acknowledged", lambda: sink_of(e, sid)["acked"] >= 2)
            nats.proc.send_signal(signal.SIGSTOP)
            t0 = time.time()
            run_n(prog, 3)
            k = wait_for("the hung broker shown in the sink's health",
                         lambda: (lambda k: k if k["state"] == "disconnected" and not k["connected"] else None)(sink_of(e, sid)),
                         timeout=45)
            print("hung broker shown after %.1f s: %r" % (time.time() - t0, k), flush=True)
            st, h, m = e.request("GET", "/metrics", token="reader")
            check('etwd_session_sink_ok{session="%d",sink="0"} 0' % sid in m.decode(), "/metrics: sink_ok 0 while hung")
            nats.proc.send_signal(signal.SIGCONT)
            wait_for("the sink reconnected", lambda: sink_of(e, sid)["connected"], timeout=60)
            e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
            produced = session(e, sid)["stats"]["events"]
            wait_for("everything acknowledged", lambda: sink_of(e, sid)["acked"] == produced, timeout=60)
            k = sink_of(e, sid)
            check(produced == 5 and k["dropped"] == 0 and k["state"] == "ok", "after: %d events, %r" % (produced, k))
            msgs = fetch(nats.url(), "STALE")
            check(sorted(m["data"]["seq"] for m in msgs) == [1, 2, 3, 4, 5] and len(execs(msgs, prog)) == 5,
                  "every event once: %r" % [m["data"].get("seq") for m in msgs])
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
    finally:
        if nats.proc:
            nats.proc.send_signal(signal.SIGCONT)
        nats.cleanup()
        shutil.rmtree(os.path.dirname(prog), ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
