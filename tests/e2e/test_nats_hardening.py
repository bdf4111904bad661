"""Sinks into NATS JetStream under hostile or failing brokers (review of issue 23), against real
nats-server processes (helpers from test_nats.py): a message the broker always refuses is dropped
and counted instead of blocking the rest; deleting a session whose broker hangs is prompt; the
disk spool gives space back during partial drains; drops of the sink's own hub queue reach the
stream as gap records; a server-wide cap bounds all sinks' spools; credential and TLS files must
lie inside the sink secrets directory."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import etwd_harness as H
from etwd_harness import Etwd, check, done, free_port
from test_nats import (require_nats, HOST, TOOL, Nats, create, exec_spec, execs, fetch, run_n, session, sink_of,
                       unique_prog, wait_for)


def js_request(nats, subject, body):
    """One JetStream API request over the plain NATS protocol (Python has no NATS client here)."""
    s = socket.create_connection(("127.0.0.1", nats.port), timeout=10)
    f = s.makefile("rb")
    f.readline()  # INFO
    data = json.dumps(body).encode()
    s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _INBOX.hard 1\r\n'
              b"PUB %s _INBOX.hard %d\r\n%s\r\n" % (subject.encode(), len(data), data))
    while True:
        line = f.readline()
        if line.startswith(b"PING"):
            s.sendall(b"PONG\r\n")
        elif line.startswith(b"MSG"):
            reply = json.loads(f.read(int(line.split()[-1]) + 2))
            s.close()
            return reply


def spawn_syscalls(n, rate=None):
    """A child that calls getppid @n times after a line on stdin (@rate per second, or at once)."""
    code = ("import os,sys,time\nsys.stdin.readline()\nn,r=%d,%r\nt0=time.time()\n"
            "for i in range(n):\n    os.getppid()\n"
            "    if r and i %% 10 == 9: time.sleep(max(0, t0 + (i + 1) / r - time.time()))\n" % (n, rate))
    return subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE)


def go(child):
    child.stdin.write(b"go\n")
    child.stdin.flush()


def syscall_spec(name, child, sink):
    return {"name": name, "providers": [{"name": "syscalls", "events": ["sys_enter_getppid"]}],
            "pids": [child.pid], "sinks": [sink]}


def long_prog(length):
    """/bin/true copied to a path of about @length characters (directories of 200)."""
    d = tempfile.mkdtemp(prefix="etwdlong-")
    while len(d) < length - 220:
        d = os.path.join(d, "d" * 200)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "p" * max(1, length - len(d) - 1))
    shutil.copy("/bin/true", p)
    return p


def gaps(msgs, layer):
    return [m["data"]["Gap"] for m in msgs if "Gap" in m["data"] and m["data"]["Gap"]["Layer"] == layer]


def test_refused(e, nats):
    """A message over the stream's max_msg_size (refused by every ack) and one over the server's
    max_payload: both dropped and counted as sink loss with a gap record; the executions before
    and after them all arrive."""
    r = js_request(nats, "$JS.API.STREAM.CREATE.REF", {
        "name": "REF", "subjects": ["ref.>"], "storage": "file", "retention": "limits", "max_consumers": -1,
        "max_msgs": -1, "max_bytes": -1, "max_age": 0, "max_msg_size": 1500, "num_replicas": 1, "discard": "old"})
    check("error" not in r, "stream REF with max_msg_size 1500: %r" % r)
    prog, mid, big = unique_prog("ref"), long_prog(1100), long_prog(3000)
    j = create(e, exec_spec("ref", nats, "REF", batch=8))
    sid = j["id"]
    H.wait_subscribers(e, sid, 1)
    run_n(prog, 3)
    run_n(mid, 1)
    run_n(big, 1)
    run_n(prog, 3)
    k = wait_for("both refused messages dropped", lambda: sink_of(e, sid).get("refused", 0) >= 2 and sink_of(e, sid), timeout=40)
    check(k and k["refused"] == 2 and k["dropped"] == 2, "two refused, two dropped: %r" % k)
    if not k:
        return
    run_n(prog, 2)
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    s = session(e, sid)
    produced = s["stats"]["events"]
    wait_for("the rest acknowledged", lambda: sink_of(e, sid)["pending"] == 0 and sink_of(e, sid)["acked"] + 2 == sink_of(e, sid)["spooled"])
    s = session(e, sid)
    k = s["stats"]["sinks"][0]
    msgs = fetch(nats.url(), "REF")
    seqs = {m["data"]["seq"] for m in msgs if "seq" in m["data"]}
    check(len(seqs) + 2 == produced, "stream events %d + 2 refused == produced %d" % (len(seqs), produced))
    check(len(execs(msgs, prog)) == 8 and not execs(msgs, mid) and not execs(msgs, big),
          "the 8 normal executions arrived, the two refused did not")
    g = gaps(msgs, "sink")
    check(sum(x["Dropped"] for x in g) == 2 and all("refused" in x["Reason"] for x in g), "gap records: %r" % g)
    check(s["stats"]["loss"]["sink"] == 2, "loss.sink: %r" % s["stats"]["loss"])
    m = e.request("GET", "/metrics", token="reader")[2].decode()
    check('etwd_session_lost_events_total{session="%d",layer="sink"} 2' % sid in m, "/metrics counts the sink loss")
    check("max_payload" in (k["last_error"] or "") or "exceeds" in (k["last_error"] or ""), "last_error says why: %r" % k)
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_delete_hung_broker(e):
    """The broker hangs (SIGSTOP) with a batch in flight and ack_timeout_ms 60 s, then it is gone:
    DELETE is prompt anyway (the unacknowledged events are counted as sink loss)."""
    nats = Nats("hung").start()
    try:
        j = create(e, exec_spec("hung", nats, "HUNG", ack_timeout_ms=60000))
        sid = j["id"]
        H.wait_subscribers(e, sid, 1)
        prog = unique_prog("hung")
        run_n(prog, 2)
        wait_for("the first events acknowledged", lambda: sink_of(e, sid)["acked"] >= 2)
        nats.proc.send_signal(signal.SIGSTOP)
        run_n(prog, 3)
        wait_for("a batch in flight", lambda: sink_of(e, sid)["pending"] >= 3)
        time.sleep(0.5)
        t0 = time.time()
        st = e.request("DELETE", "/api/v1/sessions/%d" % sid, timeout=150)[0]
        took = time.time() - t0
        print("DELETE with a hung broker took %.1f s" % took, flush=True)
        check(st == 204 and took < 8, "DELETE with a hung broker: %d after %.1f s (at most 8)" % (st, took))
        t0 = time.time()
        e.json("GET", "/api/v1/sessions", token="reader", expect=200)
        check(time.time() - t0 < 5, "the server answers after the delete")
        nats.proc.send_signal(signal.SIGCONT)
        nats.stop()  # now nobody listens there: the sink reconnects with back-off
        j = create(e, exec_spec("gone", nats, "HUNG", ack_timeout_ms=60000))
        sid = j["id"]
        H.wait_subscribers(e, sid, 1)
        run_n(prog, 3)
        wait_for("the events spooled", lambda: sink_of(e, sid)["pending"] >= 3)
        t0 = time.time()
        st = e.request("DELETE", "/api/v1/sessions/%d" % sid, timeout=150)[0]
        took = time.time() - t0
        check(st == 204 and took < 8, "DELETE with the broker gone: %d after %.1f s (at most 8)" % (st, took))
    finally:
        if nats.proc:
            nats.proc.send_signal(signal.SIGCONT)
        nats.cleanup()


class Throttle:
    """A TCP proxy to @port that passes the server's bytes (acks) at @rate bytes/s: the sink can
    drain its spool only that fast."""

    def __init__(self, port, rate):
        self.port, self.rate = port, rate
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(4)
        self.url = "nats://127.0.0.1:%d" % self.ls.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=H.forward, args=(c, u), daemon=True).start()
            threading.Thread(target=H.forward, args=(u, c, self.rate), daemon=True).start()

    def close(self):
        self.ls.close()


def test_spool_reclaim(e, nats):
    """Acks come slower than events (a throttled link): the disk spool (1 MiB, no memory part)
    (32 KiB in memory, then 1 MiB on disk) never empties while far more than 1 MiB passes through it, and nothing is dropped."""
    th = Throttle(nats.port, 12000)
    child = spawn_syscalls(4000, rate=220)
    try:
        j = create(e, syscall_spec("reclaim", child, {
            "type": "nats", "url": th.url, "stream": "RECLAIM", "subject": "reclaim.{host}.{session}.{provider}",
            "batch": 50, "ack_timeout_ms": 10000, "spool_memory_kb": 32, "spool_disk_mb": 1}))
        sid = j["id"]
        H.wait_subscribers(e, sid, 1)
        wait_for("the sink connected", lambda: sink_of(e, sid)["connected"])
        go(child)
        most = 0
        while child.poll() is None:
            most = max(most, sink_of(e, sid).get("disk_bytes", 0))
            time.sleep(0.2)
        k = sink_of(e, sid)
        print("reclaim: at most %d bytes on disk; %r" % (most, k), flush=True)
        check(k["spooled_disk"] * 430 > 1 << 20 and k["dropped"] == 0,
              "more than 1 MiB went through the disk spool, nothing dropped: %r" % k)
        check(0 < most <= 1 << 20, "the disk spool stayed within its 1 MiB: at most %d bytes" % most)
        e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
        produced = session(e, sid)["stats"]["events"]
        wait_for("all acknowledged", lambda: sink_of(e, sid)["acked"] == produced, timeout=90)
        k = sink_of(e, sid)
        check(k["dropped"] == 0 and k["disk_bytes"] == 0 and produced == 4000, "all 4000 sent: %r" % k)
        seqs = {m["data"]["seq"] for m in fetch(nats.url(), "RECLAIM") if "seq" in m["data"]}
        check(seqs == set(range(1, produced + 1)), "every seq 1..%d in the stream" % produced)
        spool = os.path.join(e.state, "sinks", j["os_name"])
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        check(not os.path.exists(spool), "the spool directory is removed")
    finally:
        child.kill()
        th.close()


def test_hub_gaps(nats):
    """The sink's hub queue (--queue-events 64) overflows under a burst: the stream gets gap
    records (layer subscriber) for exactly what the queue dropped."""
    with Etwd(args=["--host-name", HOST, "--queue-events", "64"]) as e:
        child = spawn_syscalls(300000)
        j = create(e, syscall_spec("burst", child, {"type": "nats", "url": nats.url(), "stream": "BURST",
                                                    "subject": "burst.{host}.{session}.{provider}"}))
        sid = j["id"]
        H.wait_subscribers(e, sid, 1)
        wait_for("the sink connected", lambda: sink_of(e, sid)["connected"])
        go(child)
        child.wait(timeout=120)
        time.sleep(1)
        e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
        wait_for("all sent", lambda: sink_of(e, sid)["pending"] == 0 and sink_of(e, sid)["acked"] == sink_of(e, sid)["spooled"], timeout=120)
        s = session(e, sid)
        k = s["stats"]["sinks"][0]
        check(k["hub_dropped"] > 0, "the burst overflowed the sink's 64-event queue: %r" % k)
        msgs = fetch(nats.url(), "BURST")
        g = gaps(msgs, "subscriber")
        events = {m["data"]["seq"] for m in msgs if "seq" in m["data"]}
        check(sum(x["Dropped"] for x in g) == k["hub_dropped"],
              "gap records (layer subscriber) sum %d == hub_dropped %d" % (sum(x["Dropped"] for x in g), k["hub_dropped"]))
        check(len(events) + k["hub_dropped"] == s["stats"]["events"] and k["dropped"] == 0,
              "stream events %d + queue drops %d == produced %d" % (len(events), k["hub_dropped"], s["stats"]["events"]))
        check(k["gap_records"] == len(g) and s["stats"]["loss"]["subscribers"] >= k["hub_dropped"],
              "counted: %r, loss %r" % (k, s["stats"]["loss"]))
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def accounted(k):
    """events the sink took in: spooled (gap records aside) or dropped"""
    return k["spooled"] - k["gap_records"] + k["dropped"]


def test_global_cap():
    """--sink-spool-memory-mb 1 across two sessions whose own spools (4 MiB each) would hold
    everything: together they hold at most 1 MiB, the rest is counted as sink loss exactly."""
    port = free_port()  # no broker there
    with Etwd(args=["--host-name", HOST, "--sink-spool-memory-mb", "1", "--sink-spool-disk-mb", "0"]) as e:
        child = spawn_syscalls(8000)
        sids = [create(e, syscall_spec("cap%d" % i, child, {
            "type": "nats", "url": "nats://127.0.0.1:%d" % port, "spool_memory_kb": 4096,
            "spool_disk_mb": 64}))["id"] for i in range(2)]
        for sid in sids:
            H.wait_subscribers(e, sid, 1)
        go(child)
        child.wait(timeout=60)
        for sid in sids:
            wait_for("the sink read everything", lambda: accounted(sink_of(e, sid)) == session(e, sid)["stats"]["events"] > 0)
        ks = [sink_of(e, sid) for sid in sids]
        check(sum(k["memory_bytes"] for k in ks) <= 1 << 20 and sum(k["disk_bytes"] for k in ks) == 0,
              "both spools together within 1 MiB: %r" % ks)
        check(all(k["dropped"] > 0 for k in ks) and sum(k["pending"] for k in ks) > 1000,
              "the cap dropped, and held what fit: %r" % ks)
        for sid in sids:
            s = session(e, sid)
            check(s["stats"]["loss"]["sink"] == s["stats"]["sinks"][0]["dropped"], "loss.sink: %r" % s["stats"])
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
        r = subprocess.run([H.BIN, "--sink-spool-memory-mb", "x"], capture_output=True, text=True, timeout=10)
        check(r.returncode != 0 and "--sink-spool-memory-mb" in r.stderr, "a bad value is refused: %r" % r.stderr)


def test_secret_paths(e):
    """creds/tls_* must name files inside --sink-secrets-dir (default STATE/sink-secrets): other
    paths, .. and symlinks out of it are 400 naming the member; a file inside is accepted."""
    sec = os.path.join(e.state, "sink-secrets")
    check(os.path.isdir(sec), "the default secrets directory exists")
    os.makedirs(sec, exist_ok=True)
    with open(os.path.join(sec, "agent.creds"), "w") as f:
        f.write("-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n")
    os.symlink("/etc/passwd", os.path.join(sec, "evil"))
    os.makedirs(os.path.join(sec, "sub"))
    url = "nats://127.0.0.1:%d" % free_port()
    for member, path in (("creds", "/etc/passwd"), ("creds", "../tokens"), ("creds", "sub/../../tokens"),
                         ("creds", "evil"), ("creds", os.path.join(sec, "evil")), ("creds", "sub"),
                         ("tls_ca", "/etc/ssl/certs/ca-certificates.crt"), ("creds", "missing.creds")):
        st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "sched"}],
                                                             "sinks": [{"type": "nats", "url": url, member: path}]})
        check(st == 400 and "/sinks/0/%s" % member in json.dumps(j) and h.get("content-type", "").startswith("application/problem+json"),
              "%s=%s → 400 problem+json naming /sinks/0/%s: %d %r" % (member, path, member, st, j))
    for path in ("agent.creds", os.path.join(sec, "agent.creds"), "sub/../agent.creds"):
        j = create(e, {"providers": [{"name": "sched"}], "sinks": [{"type": "nats", "url": url, "creds": path}]})
        e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def main():
    require_nats()
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write("max_payload: 3000\n")
    conf.close()
    nats = Nats(extra=["-c", conf.name]).start()
    only = os.environ.get("ETWD_NATS_ONLY", "")  # e.g. "reclaim" while working on one part
    try:
        with Etwd(args=["--host-name", HOST]) as e:
            for name, t in (("secret", test_secret_paths), ("refused", test_refused),
                            ("hung", test_delete_hung_broker), ("reclaim", test_spool_reclaim)):
                if only in name:
                    t(*((e, nats) if t in (test_refused, test_spool_reclaim) else (e,)))
        if only in "hub_gaps":
            test_hub_gaps(nats)
        if only in "global_cap":
            test_global_cap()
    finally:
        nats.cleanup()
        os.unlink(conf.name)
    done()


if __name__ == "__main__":
    main()
