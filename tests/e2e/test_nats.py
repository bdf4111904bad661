"""Sinks into NATS JetStream and System.Host, against real nats-server processes that this test
starts (free loopback ports, their own -sd directories) and kills at the end. Messages are read
back with tests/nats/etwd_nats_tool (libnats; Python has no NATS client here) and the stream
counts from the servers' monitoring ports (/jsz?streams=true). Every check is exact: counts,
sequence numbers, headers, loss accounting."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import etwd_harness as H
from etwd_harness import Etwd, check, done, free_port

TOOL = os.environ.get("ETWD_NATS_TOOL") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(H.BIN))), "tests", "etwd_nats_tool")
HOST = "agent-one"


class Nats:
    """One nats-server with JetStream; @routes makes it a node of a loopback cluster."""

    def __init__(self, name="n1", cluster_port=None, routes=None, extra=()):
        self.name, self.extra = name, list(extra)
        self.port, self.mport = free_port(), free_port()
        self.cluster_port, self.routes = cluster_port, routes
        self.dir = tempfile.mkdtemp(prefix="etwd-nats-")
        self.proc = None

    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def start(self):
        cmd = ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.mport),
               "-n", self.name, "-sd", os.path.join(self.dir, "js")]
        if self.cluster_port:
            cmd += ["--cluster_name", "c1", "--cluster", "nats://127.0.0.1:%d" % self.cluster_port,
                    "--routes", self.routes]
        cmd += self.extra
        self.log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                self.jsz()
                return self
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("nats-server %s did not start" % self.name)

    def jsz(self, q=""):
        with urllib.request.urlopen("http://127.0.0.1:%d/jsz%s" % (self.mport, q), timeout=5) as r:
            return json.loads(r.read())

    def stream_msgs(self, stream):
        for acc in self.jsz("?streams=true").get("account_details") or []:
            for s in acc.get("stream_detail") or []:
                if s["name"] == stream:
                    return s["state"]["messages"]
        return None

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self.proc = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def fetch(url, stream):
    """Every message of @stream: [{"sseq","subject","hdr","data"}]."""
    for attempt in range(3):  # a cluster that just lost a node may time out an API request
        r = subprocess.run([TOOL, "fetch", url, stream, stream.lower() + ".>"], capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            break
    check(r.returncode == 0, "fetch %s: %s" % (stream, r.stderr[-500:]))
    return [json.loads(l) for l in r.stdout.splitlines()]


def require_nats():
    """The NATS tests' prerequisites (root for tracefs, nats-server, the client tool): fail with
    how to get them, never skip."""
    if os.geteuid() != 0:
        check(False, "live tests need root (tracefs)")
        done()
    if not os.path.exists(TOOL) or not shutil.which("nats-server"):
        check(False, "needs nats-server and %s (scripts/deps.sh installs nats-server libnats-dev)" % TOOL)
        done()


def unique_prog(tag):
    d = tempfile.mkdtemp(prefix="etwdnats-")
    p = os.path.join(d, "etwdtest_%s_%d" % (tag, os.getpid()))
    shutil.copy("/bin/true", p)
    return p


def run_n(prog, n):
    pids = []
    for _ in range(n):
        pr = subprocess.Popen([prog])
        pids.append(pr.pid)
        pr.wait()
    return pids


def create(e, spec, expect=201):
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
    check(st == expect, "create: %d, want %d: %r" % (st, expect, j))
    return j


def session(e, sid):
    return e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]


def sink_of(e, sid):
    return session(e, sid)["stats"]["sinks"][0]


def settled(e, sid, produced):
    """the sink accounted for every event the session produced: acknowledged or dropped"""
    k = sink_of(e, sid)
    return k["acked"] == k["spooled"] and k["spooled"] - k["gap_records"] + k["dropped"] == produced


def wait_for(what, cond, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    check(False, "timed out waiting for " + what)
    return None


def execs(msgs, prog):
    return [m for m in msgs if m["data"].get("System", {}).get("EventName") == "sched_process_exec"
            and m["data"]["EventData"].get("filename") == prog]


def exec_spec(name, nats, stream, **sink):
    k = {"type": "nats", "url": nats.url(), "stream": stream,
         "subject": stream.lower() + ".{host}.{session}.{provider}"}  # streams' subjects must not overlap
    k.update(sink)
    return {"name": name, "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "sinks": [k]}


def test_invalid(e):
    for sinks, word in (([{"type": "kafka", "url": "nats://x:1"}], "/sinks/0/type"),
                        ([{"type": "nats"}], "/sinks/0/url"),
                        ([{"type": "nats", "url": "nats://x:1", "subject": "etwd.>"}], "/sinks/0/subject"),
                        ([{"type": "nats", "url": "nats://x:1", "subject": "a.{pid}"}], "/sinks/0/subject"),
                        ([{"type": "nats", "url": "nats://x:1", "bogus": 1}], "bogus"),
                        ([{"type": "nats", "url": "nats://x:1", "batch": 0}], "/sinks/0/batch"),
                        ({"type": "nats"}, "/sinks must be an array")):
        st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "sched"}], "sinks": sinks})
        check(st == 400 and word in json.dumps(j), "sinks %r → 400 naming %s: %d %r" % (sinks, word, st, j))
    r = subprocess.run([H.BIN, "--host-name", "bad name"], capture_output=True, text=True, timeout=10)
    check(r.returncode != 0 and "--host-name" in r.stderr, "a bad --host-name is refused: %r" % r.stderr)


def test_unreachable(e):
    """A broker that is not there: the session runs, the sink says so, delete is prompt and the
    spooled events are counted as sink loss."""
    port = free_port()
    j = create(e, {"name": "nowhere", "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
                   "sinks": [{"type": "nats", "url": "nats://127.0.0.1:%d" % port}]})
    sid = j["id"]
    prog = unique_prog("nowhere")
    run_n(prog, 5)
    k = wait_for("the executions spooled", lambda: sink_of(e, sid)["pending"] >= 5 and sink_of(e, sid))
    check(k and not k["connected"] and k["acked"] == 0 and "connect" in (k["last_error"] or ""), "health: %r" % k)
    t0 = time.time()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    check(time.time() - t0 < 15, "delete with an unreachable broker took %.1f s" % (time.time() - t0))


def test_exec_exact(e, nats):
    """N executions → N messages with the right subject, headers, message ids and content; the
    events carry System.Host on the WebSocket too."""
    prog = unique_prog("exec")
    j = create(e, exec_spec("ex", nats, "EXEC"))
    sid = j["id"]
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    H.wait_subscribers(e, sid, 2)  # the sink and the WebSocket
    N = 25
    pids = run_n(prog, N)
    recs = H.ws_events(ws, lambda rs: len([r for r in rs if "System" in r and r.get("EventData", {}).get("filename") == prog]) >= N)
    mine = [r for r in recs if "System" in r and r.get("EventData", {}).get("filename") == prog]
    check(len(mine) == N and all(r["System"].get("Host") == HOST for r in mine),
          "WebSocket events carry System.Host %s: %r" % (HOST, [r["System"].get("Host") for r in mine][:3]))
    ws.close()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    produced = session(e, sid)["stats"]["events"]
    wait_for("every event acknowledged", lambda: sink_of(e, sid)["acked"] == produced)
    k = sink_of(e, sid)
    check(k["connected"] and k["dropped"] == 0 and k["pending"] == 0 and k["last_error"] is None,
          "sink health after the run: %r" % k)
    check(nats.stream_msgs("EXEC") == produced, "/jsz: stream EXEC holds %r messages, session produced %d"
          % (nats.stream_msgs("EXEC"), produced))
    msgs = fetch(nats.url(), "EXEC")
    check(len(msgs) == produced, "fetched %d messages, want %d" % (len(msgs), produced))
    check(sorted(m["data"]["seq"] for m in msgs) == list(range(1, produced + 1)), "seq 1..%d, each once" % produced)
    got = execs(msgs, prog)
    check(len(got) == N, "%d exec messages of %s, want %d" % (len(got), prog, N))
    check(sorted(m["data"]["EventData"]["pid"] for m in got) == sorted(pids), "the executions' pids")
    started = None
    for m in got:
        hd, d = m["hdr"], m["data"]
        check(m["subject"] == "exec.%s.ex.sched" % HOST, "subject %r" % m["subject"])
        check(hd.get("Etwd-Provider") == "sched" and hd.get("Etwd-Event") == "sched_process_exec"
              and hd.get("Etwd-Pid") == str(d["System"]["Execution"]["ProcessID"]) and hd.get("Etwd-Host") == HOST,
              "headers %r" % hd)
        mid = hd.get("Nats-Msg-Id", "").split("/")
        check(len(mid) == 3 and mid[0] == HOST and mid[1].startswith("ex@") and mid[2] == str(d["seq"]),
              "Nats-Msg-Id HOST/SESSION@START/SEQ: %r" % hd.get("Nats-Msg-Id"))
        started = started or mid[1]
        check(d["System"]["Host"] == HOST, "System.Host in the stream")
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_outage(e, nats):
    """Broker down ~10 s: events wait in the spool (memory, then the disk file), and all of them
    arrive after the restart, each seq once."""
    prog = unique_prog("outage")
    j = create(e, exec_spec("out", nats, "OUT", spool_memory_kb=2, spool_disk_mb=16))
    sid = j["id"]
    H.wait_subscribers(e, sid, 1)
    run_n(prog, 3)
    wait_for("the first events acknowledged", lambda: sink_of(e, sid)["acked"] >= 3)
    nats.stop()
    t0 = time.time()
    wait_for("the sink sees the broker gone", lambda: not sink_of(e, sid)["connected"])
    N = 40
    run_n(prog, N)
    time.sleep(max(0.0, 10 - (time.time() - t0)))
    k = sink_of(e, sid)
    check(k["pending"] >= N and k["spooled_disk"] > 0 and k["dropped"] == 0,
          "during the outage the spool holds the events, on disk beyond 2 KiB: %r" % k)
    check(k["last_error"] is not None, "the sink reports its last error: %r" % k)
    spool = [f for f in os.listdir(os.path.join(e.state, "sinks")) if f.startswith("etwd_")]
    check(len(spool) == 1, "the disk spool lives under the state dir: %r" % spool)
    nats.start()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    produced = session(e, sid)["stats"]["events"]
    wait_for("everything acknowledged after the restart", lambda: sink_of(e, sid)["acked"] == produced, timeout=90)
    k = sink_of(e, sid)
    check(k["connected"] and k["pending"] == 0 and k["dropped"] == 0 and k["connects"] >= 2, "health: %r" % k)
    msgs = fetch(nats.url(), "OUT")
    seqs = [m["data"]["seq"] for m in msgs]
    check(sorted(set(seqs)) == list(range(1, produced + 1)), "every seq 1..%d arrived (%d messages, %d distinct)"
          % (produced, len(seqs), len(set(seqs))))
    check(len(seqs) == len(set(seqs)), "the stream's duplicate window removed resent copies")
    check(len({m["data"]["seq"] for m in execs(msgs, prog)}) == N + 3, "all %d executions arrived" % (N + 3))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    check(not os.path.exists(os.path.join(e.state, "sinks", j["os_name"], "sink0.spool")), "the spool file is removed")


def test_tiny_spool(e, nats):
    """Broker down with a spool of 1 KiB and no disk: the overflow is counted exactly as loss layer
    "sink" (stats, /metrics) and a gap record in the stream says how many."""
    prog = unique_prog("tiny")
    j = create(e, exec_spec("tiny", nats, "TINY", spool_memory_kb=1, spool_disk_mb=0))
    sid = j["id"]
    H.wait_subscribers(e, sid, 1)
    run_n(prog, 1)
    wait_for("the first event acknowledged", lambda: sink_of(e, sid)["acked"] >= 1)
    nats.stop()
    wait_for("the sink sees the broker gone", lambda: not sink_of(e, sid)["connected"])
    N = 30
    run_n(prog, N)
    wait_for("the sink read the executions", lambda: sink_of(e, sid)["dropped"] >= N - 3)
    nats.start()
    wait_for("the spool drained", lambda: sink_of(e, sid)["connected"] and sink_of(e, sid)["pending"] == 0, timeout=90)
    run_n(prog, 1)  # the gap record goes out before the next event
    time.sleep(0.5)
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    s = session(e, sid)
    produced, k = s["stats"]["events"], s["stats"]["sinks"][0]
    wait_for("everything kept acknowledged", lambda: settled(e, sid, produced), timeout=60)
    s = session(e, sid)
    k, loss = s["stats"]["sinks"][0], s["stats"]["loss"]
    def gaps_reported():  # the last gap record follows the session's end
        ms = fetch(nats.url(), "TINY")
        return ms if sum(m["data"]["Gap"]["Dropped"] for m in ms if "Gap" in m["data"]) == k["dropped"] else None
    msgs = wait_for("gap records for every drop", gaps_reported, timeout=30) or fetch(nats.url(), "TINY")
    ev = [m for m in msgs if "seq" in m["data"]]
    gaps = [m["data"]["Gap"] for m in msgs if "Gap" in m["data"]]
    distinct = {m["data"]["seq"] for m in ev}
    check(k["dropped"] > 0 and k["hub_dropped"] == 0, "a 1 KiB spool overflowed: %r" % k)
    check(len(distinct) + k["dropped"] == produced,
          "stream events %d + sink loss %d == produced %d exactly" % (len(distinct), k["dropped"], produced))
    check(loss["sink"] == k["dropped"], "stats.loss.sink %r == the sink's dropped %r" % (loss, k["dropped"]))
    check(sum(g["Dropped"] for g in gaps) == k["dropped"] and all(g["Layer"] == "sink" for g in gaps),
          "gap records in the stream count the loss: %r" % gaps)
    st, h, m = e.request("GET", "/metrics", token="reader")
    check('etwd_session_lost_events_total{session="%d",layer="sink"} %d' % (sid, k["dropped"]) in m.decode(),
          "/metrics reports the sink loss")
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_fleet(nats):
    """Two agents (different --host-name) publish; one central etwd with backend "nats" serves
    both hosts' events to a WebSocket client: exact counts per host."""
    prog = unique_prog("fleet")
    N = 20
    sink = {"type": "nats", "url": nats.url(), "stream": "FLEET", "subject": "fleet.{host}.{session}.{provider}"}
    with Etwd(args=["--host-name", "agent-a"]) as a, Etwd(args=["--host-name", "agent-b"]) as b, \
            Etwd(args=["--host-name", "central"]) as c:
        ids = {}
        for e in (a, b):
            j = create(e, {"name": "ex", "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
                           "sinks": [dict(sink)]})
            ids[e] = j["id"]
            H.wait_subscribers(e, j["id"], 1)
        run_n(prog, 1)  # the sinks create the stream
        wait_for("the stream exists", lambda: nats.stream_msgs("FLEET"))
        for bad, field in (({"backend": "nats", "subjects": ["fleet.>"]}, "/nats"),
                           ({"backend": "nats", "nats": {"url": nats.url()}}, "/subjects"),
                           ({"backend": "nats", "subjects": ["a.>.b"], "nats": {"url": nats.url()}}, "/subjects/0"),
                           ({"subjects": ["fleet.>"], "providers": [{"name": "sched"}]}, "/subjects"),
                           ({"backend": "nats", "subjects": ["fleet.>"], "nats": {"url": nats.url(), "stream": "NONE"}}, "/subjects")):
            st, h, j = c.json("POST", "/api/v1/sessions", body=bad)
            check(st in (400, 404) and (j or {}).get("field") == field, "%r → 4xx naming %s: %d %r" % (bad, field, st, j))
        j = create(c, {"name": "fleet", "backend": "nats", "subjects": ["fleet.>"],
                       "nats": {"url": nats.url(), "stream": "FLEET"}})
        cid = j["id"]
        check(j.get("backend") == "nats" and j["spec"].get("subjects") == ["fleet.>"], "central session: %r" % j)
        ws = c.ws("/api/v1/sessions/%d/events?event=sched_process_exec&from=1" % cid)  # from its first event
        H.wait_subscribers(c, cid, 1)
        # a second central session that begins after what the stream holds now: new events only
        wait_for("both agents' first execution in the stream", lambda: len(execs(fetch(nats.url(), "FLEET"), prog)) == 2)
        j2 = create(c, {"name": "later", "backend": "nats", "subjects": ["fleet.*.*.sched"],
                        "nats": {"url": nats.url(), "stream": "FLEET", "start_seq": nats.stream_msgs("FLEET") + 1}})
        ws2 = c.ws("/api/v1/sessions/%d/events?from=1" % j2["id"])
        H.wait_subscribers(c, j2["id"], 1)
        # a hostile publisher: a second line, trailing text, broken JSON — each skipped and
        # counted, never passed into the clients' frames (a broken frame fails ws_events below)
        fake = '{"seq":9,"System":{"Provider":{"Name":"sched"},"EventName":"sched_process_exec"},' \
               '"EventData":{"filename":"%s"}}' % prog
        for evil in ('{"seq":1,"a":"x"}\n' + fake, '{"seq":1,"a":1}},"b":{"c":2}', '{"seq":1,"a":"x}'):
            r = subprocess.run([TOOL, "body", nats.url(), "fleet.evil.1.sched", evil], capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 0, "hostile message published: %s" % r.stderr[-300:])
        pids = run_n(prog, N)

        def mine(rs):
            return [r for r in rs if "System" in r and r.get("EventData", {}).get("filename") == prog]
        recs = H.ws_events(ws, lambda rs: len(mine(rs)) >= 2 * (N + 1), timeout=120)
        time.sleep(1.0)  # a wrong extra event would show up now
        ws.settimeout(0.5)
        try:
            recs.extend(json.loads(ws.recv()))
        except Exception:
            pass
        got = mine(recs)
        for host in ("agent-a", "agent-b"):
            hs = [r for r in got if r["System"].get("Host") == host]
            check(len(hs) == N + 1, "central: %d events of %s from %s, want %d" % (len(hs), prog, host, N + 1))
            check(set(pids) <= {r["EventData"]["pid"] for r in hs}, "central: %s's executions by pid" % host)
        later = mine(H.ws_events(ws2, lambda rs: len(mine(rs)) >= 2 * N, timeout=60))
        check(sorted(r["System"]["Host"] for r in later) == ["agent-a"] * N + ["agent-b"] * N,
              "start_seq: the later session has exactly the %d new executions per host (%d)" % (N, len(later)))
        ws2.close()
        st, h, j = c.json("POST", "/api/v1/sessions", body={"backend": "nats", "subjects": ["fleet.>"],
                                                            "nats": {"url": nats.url(), "start_time": "yesterday"}})
        check(st == 400 and j.get("field") == "/nats/start_time", "a bad start_time → 400: %d %r" % (st, j))
        seqs = [r["seq"] for r in recs if "seq" in r]
        check(seqs == sorted(seqs) and len(seqs) == len(set(seqs)), "the central session numbers its own seqs")
        s = session(c, cid)
        check(s["stats"]["per_provider"].get("sched", 0) >= 2 * (N + 1), "provider counts: %r" % s["stats"]["per_provider"])
        check(not [r for r in got if "Host" not in r["System"]], "no injected event reached the client")
        check(s["stats"].get("decode_errors", 0) >= 3, "the 3 hostile messages are counted: %r" % s["stats"])
        ws.close()
        c.request("DELETE", "/api/v1/sessions/%d" % cid)
        for e in (a, b):
            e.request("DELETE", "/api/v1/sessions/%d" % ids[e])


def test_cluster():
    """Three nodes, stream replicas 3, ~10k events/s: SIGKILL one node while the session publishes
    → no loss (every seq present once after de-dup), the session never blocks; the restarted node
    catches up."""
    cports = [free_port() for _ in range(3)]
    routes = ",".join("nats://127.0.0.1:%d" % p for p in cports)
    nodes = [Nats("n%d" % (i + 1), cports[i], routes) for i in range(3)]
    try:
        for n in nodes:  # each answers its monitoring port before the cluster has formed
            n.start()
        wait_for("a JetStream meta leader", lambda: all((n.jsz().get("meta_cluster") or {}).get("leader") for n in nodes))
        with Etwd(args=["--host-name", HOST, "--queue-events", "262144"]) as e:
            url = ",".join(n.url() for n in nodes)
            rate_child = subprocess.Popen(
                ["/usr/bin/python3", "-c",
                 "import os,sys,time\nsys.stdin.readline()\nfor _ in range(60):\n"
                 "    t=time.time()\n    [os.getppid() for _ in range(1000)]\n"
                 "    time.sleep(max(0,0.1-(time.time()-t)))\n"], stdin=subprocess.PIPE)
            j = create(e, {"name": "load", "providers": [{"name": "syscalls", "events": ["sys_enter_getppid"]}],
                           "pids": [rate_child.pid], "buffer_kb": 8192,
                           "sinks": [{"type": "nats", "url": url, "stream": "LOAD", "replicas": 3,
                                      "subject": "load.{host}.{session}.{provider}"}]})
            sid = j["id"]
            H.wait_subscribers(e, sid, 1)
            wait_for("the sink connected", lambda: sink_of(e, sid)["connected"])
            rate_child.stdin.write(b"go\n")
            rate_child.stdin.flush()
            time.sleep(2.0)
            t0 = time.time()
            nodes[0].stop(signal.SIGKILL)
            r = e.request("GET", "/api/v1/sessions/%d" % sid, token="reader")
            check(r[0] == 200 and time.time() - t0 < 5, "the session answers at once after the kill")
            rate_child.wait(timeout=120)
            time.sleep(0.5)
            e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
            s = session(e, sid)
            produced = s["stats"]["events"]
            check(produced >= 50000, "about 10k events/s for 6 s were produced: %d" % produced)
            wait_for("all acknowledged by the surviving nodes", lambda: sink_of(e, sid)["acked"] >= produced, timeout=120)
            k = sink_of(e, sid)
            check(k["dropped"] == 0 and k["hub_dropped"] == 0 and s["stats"]["loss"]["hub"] == 0,
                  "no sink or hub loss: %r" % k)
            msgs = fetch(nodes[1].url(), "LOAD")
            seqs = {m["data"]["seq"] for m in msgs}
            check(seqs == set(range(1, produced + 1)), "every seq 1..%d present (%d distinct of %d messages)"
                  % (produced, len(seqs), len(msgs)))
            nodes[0].start()
            want = nodes[1].stream_msgs("LOAD")
            wait_for("the restarted node caught up", lambda: nodes[0].stream_msgs("LOAD") == want, timeout=120)
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
    finally:
        for n in nodes:
            n.cleanup()


def main():
    require_nats()
    only = os.environ.get("ETWD_NATS_ONLY", "")  # e.g. "cluster" while working on one part
    nats = Nats().start()
    try:
        if only == "cluster":
            raise StopIteration
        with Etwd(args=["--host-name", HOST]) as e:
            test_invalid(e)
            test_unreachable(e)
            test_exec_exact(e, nats)
            test_outage(e, nats)
            test_tiny_spool(e, nats)
        test_fleet(nats)
    except StopIteration:
        pass
    finally:
        nats.cleanup()
    if only in ("", "cluster"):
        test_cluster()
    done()


if __name__ == "__main__":
    main()
