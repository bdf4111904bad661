"""A sink's JetStream stream that cannot take its subject, against a real nats-server (helpers
from test_nats.py / test_nats_hardening.py): at session creation a stream that exists with
subjects that cannot take the sink's subject (or that cannot be created because another stream
holds them) is refused with a 400 problem naming stream, subjects and subject, an unreachable
broker is not; at run time a deleted or edited stream puts the sink in state "error" with the
reason (session JSON and /metrics), the events wait in the spool (its overflow counted exactly),
the sink never re-creates the deleted stream itself, and it recovers on its own once the stream
is back: every event not dropped arrives once, the drops are gap records."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import etwd_harness as H
from etwd_harness import Etwd, check, done, free_port
from test_nats import require_nats, HOST, TOOL, Nats, create, fetch, session, sink_of, wait_for
from test_nats_hardening import js_request

SYSCALLS = {"name": "syscalls", "events": ["sys_enter_getppid"]}


def stream_config(name, subjects):
    return {"name": name, "subjects": subjects, "storage": "file", "retention": "limits", "max_consumers": -1,
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "num_replicas": 1, "discard": "old"}


def add_stream(nats, name, subjects, verb="CREATE"):
    r = js_request(nats, "$JS.API.STREAM.%s.%s" % (verb, name), stream_config(name, subjects))
    check("error" not in r, "stream %s %s %r: %r" % (verb.lower(), name, subjects, r))


def stream_exists(nats, name):
    r = js_request(nats, "$JS.API.STREAM.INFO." + name, {})
    return "error" not in r


def refused(e, spec, words):
    st, h, body = e.request("POST", "/api/v1/sessions", spec)
    H.problem(st, h, body, 400, "sink %r" % spec["sinks"])
    j = json.loads(body) if body else {}
    check(j.get("type") == "urn:etwd:problem:sink-stream-mismatch",
          "problem type sink-stream-mismatch: %r" % j)
    for w in words:
        check(w in j.get("detail", ""), "the detail names %s: %r" % (w, j.get("detail")))


def test_create(e, nats):
    """create-time checks: refusals with the reason, acceptance of what can work"""
    add_stream(nats, "OTHER", ["other.>"])
    add_stream(nats, "DC01", ["hosts.dc01.>"])
    add_stream(nats, "PART", ["part.*.ok.sched"])
    url = nats.url()
    sink = {"type": "nats", "url": url}
    idle = subprocess.Popen(["sleep", "120"])  # the sessions trace only it: no events
    try:
        test_create_specs(e, nats, sink, [idle.pid])
    finally:
        idle.kill()
        idle.wait()


def test_create_specs(e, nats, sink, pids):
    n0 = len(e.json("GET", "/api/v1/sessions", token="reader")[2])
    # the stream exists, its subjects take nothing of etwd.agent-one.refused.*
    refused(e, {"name": "refused", "providers": [SYSCALLS], "pids": pids, "sinks": [dict(sink, stream="OTHER")]},
            ['"OTHER"', "other.>", "etwd.%s.refused.*" % HOST])
    # {host} is known: a stream for another host
    refused(e, {"name": "h", "providers": [SYSCALLS], "pids": pids,
                "sinks": [dict(sink, stream="DC01", subject="hosts.{host}.{provider}")]},
            ['"DC01"', "hosts.dc01.>", "hosts.%s.*" % HOST])
    # {session} is known too: session "no" cannot match, "ok" can (for provider sched)
    refused(e, {"name": "no", "providers": [SYSCALLS], "pids": pids,
                "sinks": [dict(sink, stream="PART", subject="part.{host}.{session}.{provider}")]},
            ['"PART"', "part.*.ok.sched", "part.%s.no.*" % HOST])
    # the stream is missing and cannot be created: another stream holds the subjects
    refused(e, {"name": "overlap", "providers": [SYSCALLS], "pids": pids,
                "sinks": [dict(sink, stream="NEWONE", subject="other.{host}.{provider}")]},
            ['"NEWONE"', "other.*.*", "overlap"])
    check(not stream_exists(nats, "NEWONE"), "no stream NEWONE was made")
    n1 = len(e.json("GET", "/api/v1/sessions", token="reader")[2])
    check(n1 == n0, "refused sessions leave nothing behind: %d sessions, was %d" % (n1, n0))
    ok = []
    # a stream whose subjects take some of the sink's subjects, and a missing one (created at once)
    for name, k in (("ok", dict(sink, stream="PART", subject="part.{host}.{session}.{provider}")),
                    ("fresh", dict(sink, stream="FRESH", subject="fresh.{host}.{session}.{provider}"))):
        j = create(e, {"name": name, "providers": [SYSCALLS], "pids": pids, "sinks": [k]})
        ok.append(j["id"])
        wait_for("sink state ok", lambda: sink_of(e, j["id"])["state"] == "ok", timeout=20)
    check(stream_exists(nats, "FRESH"), "the missing stream FRESH was created with the session")
    # an unreachable broker is no reason to refuse: the spool rides it out
    t0 = time.time()
    j = create(e, {"name": "away", "providers": [SYSCALLS], "pids": pids,
                   "sinks": [{"type": "nats", "url": "nats://127.0.0.1:%d" % free_port(), "stream": "OTHER"}]})
    check(time.time() - t0 < 6, "creation with an unreachable broker took %.1f s" % (time.time() - t0))
    k = sink_of(e, j["id"])
    check(k["state"] == "disconnected" and k["error"] is None and not k["connected"], "unreachable: %r" % k)
    ok.append(j["id"])
    # a broker without JetStream: not refused either (its setup may change), but the sink says so
    port = free_port()
    plain = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("nats-server without JetStream", lambda: subprocess.run(
            ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/%d" % port], capture_output=True).returncode == 0)
        j = create(e, {"name": "nojs", "providers": [SYSCALLS], "pids": pids,
                       "sinks": [{"type": "nats", "url": "nats://127.0.0.1:%d" % port}]})
        ok.append(j["id"])
        k = sink_of(e, j["id"])
        check(k["state"] == "error" and "does not answer JetStream requests" in (k["error"] or ""),
              "no JetStream: %r" % k)
        check(metric(e, j["id"]) == 0, "/metrics: etwd_session_sink_ok 0 without JetStream")
    finally:
        for sid in ok:
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
        plain.kill()
        plain.wait()


class Child:
    """A process that makes N getppid calls for each line N on its stdin, then says 'ok'."""

    def __init__(self):
        code = ("import os,sys\nfor l in sys.stdin:\n    [os.getppid() for _ in range(int(l))]\n"
                "    print('ok', flush=True)\n")
        self.p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.total = 0

    def calls(self, n):
        self.p.stdin.write(b"%d\n" % n)
        self.p.stdin.flush()
        check(self.p.stdout.readline() == b"ok\n", "the child made its calls")
        self.total += n

    def close(self):
        self.p.kill()
        self.p.wait()


def accounted(k):
    return k["spooled"] - k["gap_records"] + k["dropped"]


def metric(e, sid):
    text = e.request("GET", "/metrics", token="reader")[2].decode()
    m = re.search(r'^etwd_session_sink_ok\{session="%d",sink="0"\} (\d+)$' % sid, text, re.M)
    return int(m.group(1)) if m else None


def test_runtime(e, nats):
    """Stream RT deleted, then re-created; then edited to other subjects, then fixed: session A
    (large spool) loses nothing, session B (16 KiB spool, no disk) counts exactly what it dropped."""
    child = Child()
    sids = {}
    try:
        for name, extra in (("rta", {}), ("rtb", {"spool_memory_kb": 16, "spool_disk_mb": 0})):
            k = dict({"type": "nats", "url": nats.url(), "stream": "RT", "subject": "rt.{host}.{session}.{provider}"}, **extra)
            sids[name] = create(e, {"name": name, "providers": [SYSCALLS], "pids": [child.p.pid], "sinks": [k]})["id"]
            H.wait_subscribers(e, sids[name], 1)
        a, b = sids["rta"], sids["rtb"]
        check(stream_exists(nats, "RT"), "stream RT made at the sessions' creation")

        def all_read(n):
            return all(accounted(sink_of(e, s)) == n for s in (a, b))

        def delivered(n):  # every event read, and all of it acknowledged or dropped
            return all(accounted(sink_of(e, s)) == n and sink_of(e, s)["pending"] == 0 for s in (a, b))

        child.calls(20)
        wait_for("the first 20 acknowledged", lambda: delivered(20), timeout=30)
        check(all(sink_of(e, s)["state"] == "ok" and sink_of(e, s)["error"] is None for s in (a, b)),
              "healthy: %r" % sink_of(e, a))
        check(metric(e, a) == 1, "/metrics: etwd_session_sink_ok 1 while healthy")

        # 1. deleted while the sinks run
        check("error" not in js_request(nats, "$JS.API.STREAM.DELETE.RT", {}), "stream RT deleted")
        child.calls(200)
        wait_for("state error: stream missing",
                 lambda: all(sink_of(e, s)["state"] == "error" for s in (a, b)), timeout=30)
        wait_for("all 220 read by both sinks", lambda: all_read(220), timeout=30)
        ka, kb = sink_of(e, a), sink_of(e, b)
        print("stream deleted: %s" % ka["error"], flush=True)
        check('stream "RT" does not exist' in ka["error"] and "rt.%s.rta." % HOST in ka["error"],
              "the error says why: %r" % ka["error"])
        check(ka["pending"] == 200 and ka["dropped"] == 0, "A holds the 200 events: %r" % ka)
        check(kb["dropped"] > 0 and kb["pending"] < 200, "B's small spool dropped some: %r" % kb)
        check(metric(e, a) == 0, "/metrics: etwd_session_sink_ok 0 while the stream is missing")
        time.sleep(3)  # several checks of the stream later: still not re-created by the sinks
        check(not stream_exists(nats, "RT"), "the sinks do not re-create a stream that was deleted")
        add_stream(nats, "RT", ["rt.>"])
        wait_for("recovered after the stream was re-created", lambda: delivered(220), timeout=30)
        check(all(sink_of(e, s)["state"] == "ok" for s in (a, b)), "state ok again: %r" % sink_of(e, a))
        check(metric(e, a) == 1, "/metrics: etwd_session_sink_ok 1 again")

        # 2. edited: its subjects no longer take the sinks' subjects
        add_stream(nats, "RT", ["elsewhere.>"], "UPDATE")
        child.calls(5)
        wait_for("state error: subject not taken",
                 lambda: all(sink_of(e, s)["state"] == "error" for s in (a, b)), timeout=30)
        ka = sink_of(e, a)
        print("stream edited: %s" % ka["error"], flush=True)
        check('stream "RT" (subjects: elsewhere.>) does not take subject rt.%s.rta.' % HOST in ka["error"],
              "the error names the stream, its subjects and the subject: %r" % ka["error"])
        add_stream(nats, "RT", ["rt.>"], "UPDATE")
        wait_for("recovered after the stream was fixed", lambda: delivered(225), timeout=30)
        child.calls(10)
        wait_for("the last 10 delivered", lambda: delivered(235), timeout=30)

        for s in (a, b):
            e.json("POST", "/api/v1/sessions/%d/stop" % s, expect=200)
        msgs = fetch(nats.url(), "RT")
        for s, name in ((a, "rta"), (b, "rtb")):
            st = session(e, s)["stats"]
            k = st["sinks"][0]
            mine = [m for m in msgs if m["subject"].startswith("rt.%s.%s." % (HOST, name))]
            seqs = [m["data"]["seq"] for m in mine if "seq" in m["data"]]
            gaps = [m["data"]["Gap"] for m in mine if "Gap" in m["data"]]
            check(st["events"] == 235 and k["state"] == "ok", "%s: 235 events, state ok: %d %r" % (name, st["events"], k))
            check(len(seqs) == len(set(seqs)) and set(seqs) <= set(range(21, 236)),
                  "%s: events after the deletion, each once" % name)
            check(len(seqs) + k["dropped"] == 215, "%s: %d in the stream + %d dropped == 215"
                  % (name, len(seqs), k["dropped"]))
            check(sum(g["Dropped"] for g in gaps) == k["dropped"] == st["loss"]["sink"],
                  "%s: gap records %r, dropped %d, loss.sink %d" % (name, gaps, k["dropped"], st["loss"]["sink"]))
            print("%s: %d delivered after the deletion, %d dropped (gap records %d)"
                  % (name, len(seqs), k["dropped"], len(gaps)), flush=True)
        check(sink_of(e, a)["dropped"] == 0 and len([m for m in msgs if m["subject"].startswith("rt.%s.rta." % HOST)]) == 215,
              "A: nothing dropped, all 215 in the stream")
        for s in (a, b):
            e.request("DELETE", "/api/v1/sessions/%d" % s)
    finally:
        child.close()


def main():
    require_nats()
    nats = Nats().start()
    try:
        with Etwd(args=["--host-name", HOST]) as e:
            test_create(e, nats)
            test_runtime(e, nats)
    finally:
        nats.cleanup()
    done()


if __name__ == "__main__":
    main()
