"""Linux live backend through the real server: real kernel (tracefs), real HTTPS, real WebSocket
and ndjson clients. Each check states what must hold exactly (counts, PIDs, filenames, loss
accounting), never how fast."""
import glob
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

import etwd_harness as H
from etwd_harness import Etwd, check, done, ws_events, wait_subscribers, session, unique_prog

TRACEFS = "/sys/kernel/tracing"


def instances():
    """Instances named etwd_<id>_<pid> whose owner is alive or dead (other live processes'
    instances, e.g. a benchmark running beside the tests, are not ours to judge)."""
    out = []
    for p in glob.glob(TRACEFS + "/instances/etwd_*"):
        n = os.path.basename(p)
        owner = n.rsplit("_", 1)[-1]
        if owner.isdigit() and os.path.exists("/proc/" + owner) and int(owner) not in OURS:
            continue
        out.append(n)
    return sorted(out)


OURS = set()  # pids of the etwd processes this test started


def run_n(prog, n):
    pids = []
    for _ in range(n):
        pr = subprocess.Popen([prog])
        pids.append(pr.pid)
        pr.wait()
    return pids


def create(e, spec, expect=201):
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
    check(st == expect, "create %r: %d %r" % (spec, st, j))
    if st == 201:
        check(h.get("location") == "/api/v1/sessions/%d" % j["id"], "Location header %r" % h.get("location"))
    return j


def exec_events(recs, prog):
    return [r for r in recs if "System" in r and r["System"].get("EventName") == "sched_process_exec"
            and r["EventData"].get("filename") == prog]


def busy_child(seconds, burst=1000, pause=0.0, count=0):
    """A child that makes getppid() syscalls after it is told to start: bursts of @burst calls,
    each followed by a sleep of @pause seconds, for @seconds — or, with @count, until it has made
    exactly @count calls (so the amount does not depend on how loaded the machine is)."""
    if count:
        loop = ("left=%d\nwhile left>0:\n    k=min(%d,left)\n    [os.getppid() for _ in range(k)]\n"
                "    left-=k\n    %s\n" % (count, burst, "time.sleep(%f)" % pause if pause else "pass"))
        code = READY + loop
    else:
        code = (READY + "end=time.time()+%f\n"
                "while time.time()<end:\n    [os.getppid() for _ in range(%d)]\n    %s\n"
                % (seconds, burst, "time.sleep(%f)" % pause if pause else "pass"))
    child = subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # returned only once the child is asleep in its read of stdin, its start-up over: a session
    # made now sees none of the interpreter's start-up syscalls, only what follows "go"
    check(child.stdout.read(1) == b"r", "busy child started")
    deadline = time.time() + 60
    while time.time() < deadline:
        with open("/proc/%d/stat" % child.pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                break
        time.sleep(0.01)
    return child


# the child says it is ready, then blocks reading stdin until the test writes "go"
READY = "import os,sys,time\nos.write(1, b'r')\nsys.stdin.readline()\n"


def test_exec_exact(e):
    prog = unique_prog("exec")
    j = create(e, {"name": "exec", "providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
    sid = j["id"]
    ws = e.ws("/api/v1/sessions/%d/events?provider=sched&event=sched_process_exec" % sid)
    nd_recs = []
    def nd_reader():
        for r in e.ndjson("/api/v1/sessions/%d/events" % sid):
            nd_recs.append(r)
    t = threading.Thread(target=nd_reader, daemon=True)
    t.start()
    wait_subscribers(e, sid, 2)  # both streams receive before the first exec
    N = 25
    pids = run_n(prog, N)
    recs = ws_events(ws, lambda rs: len(exec_events(rs, prog)) >= N, timeout=120)
    time.sleep(1.0)  # let a wrong extra event show up if there is one
    ws.settimeout(0.5)
    try:
        recs.extend(json.loads(ws.recv()))
    except Exception:
        pass
    got = exec_events(recs, prog)
    check(len(got) == N, "WebSocket: exactly %d exec events, got %d" % (N, len(got)))
    check(sorted(r["EventData"]["pid"] for r in got) == sorted(pids), "WebSocket: exec PIDs match")
    check(all(r["System"]["Execution"]["ProcessID"] == r["EventData"]["pid"] for r in got), "header PID = payload pid")
    check(all(r["System"]["Provider"]["Name"] == "sched" for r in got), "provider name")
    seqs = [r["seq"] for r in recs if "seq" in r]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq strictly increasing on one stream")
    # a late subscriber resumes from a seq inside the replay window
    first = min(r["seq"] for r in got)
    ws3 = e.ws("/api/v1/sessions/%d/events?from=%d&event=sched_process_exec" % (sid, first))
    rep = ws_events(ws3, lambda rs: len(exec_events(rs, prog)) >= N, timeout=120)
    check([r["seq"] for r in exec_events(rep, prog)] == [r["seq"] for r in got],
          "from=<seq> replays the same events with the same seq numbers")
    ws3.close()
    # per-subscriber pid filter on the server side
    ws4 = e.ws("/api/v1/sessions/%d/events?from=%d&pid=%d" % (sid, first, pids[3]))
    rep = ws_events(ws4, lambda rs: len(rs) >= 1, timeout=120)
    time.sleep(0.3)
    ws4.settimeout(0.5)
    try:
        rep.extend(json.loads(ws4.recv()))
    except Exception:
        pass
    check([r["EventData"]["pid"] for r in rep if "System" in r] == [pids[3]], "?pid= keeps exactly that process's exec")
    ws4.close()
    name = session(e, sid)["os_name"]
    check(name in instances(), "instance exists while the session runs")
    st, h, osl = e.json("GET", "/api/v1/os-sessions", token="reader", expect=200)
    mine = [x for x in osl.get("linux", []) if x["name"] == name]
    check(len(mine) == 1 and mine[0]["etwd"] and mine[0]["owner_alive"], "os-sessions lists our instance: %r" % mine)
    # stop ends both streams cleanly
    st, h, j = e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    check(j["state"] == "stopped", "state after stop: %r" % j["state"])
    tail = ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=120)
    check(any(r.get("_closed") for r in tail), "WebSocket closed by the server after stop")
    t.join(120)
    check(not t.is_alive(), "ndjson stream ended after stop")
    nd = exec_events(nd_recs, prog)
    check(len(nd) == N, "ndjson: exactly %d exec events, got %d" % (N, len(nd)))
    check(sorted(r["EventData"]["pid"] for r in nd) == sorted(pids), "ndjson: exec PIDs match")
    s = session(e, sid)
    check(s["stats"]["per_provider"].get("sched", 0) >= N, "per-provider count: %r" % s["stats"]["per_provider"])
    check(name not in instances(), "stop removes the tracefs instance")
    st, h, d = e.request("DELETE", "/api/v1/sessions/%d" % sid)
    check(st == 204, "delete → 204: %d" % st)
    st, h, d = e.request("GET", "/api/v1/sessions/%d" % sid, token="reader")
    check(st == 404, "deleted session is gone: %d" % st)


def test_filters(e):
    progA, progB = unique_prog("fa"), unique_prog("fb")
    # tracefs filter expression on the filename
    j = create(e, {"providers": [{"name": "sched", "events": ["sched_process_exec"],
                                  "filter": 'filename ~ "*etwdtest_fa_*"'}]})
    sid = j["id"]
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    wait_subscribers(e, sid, 1)
    run_n(progA, 5)
    run_n(progB, 5)
    recs = ws_events(ws, lambda rs: len(exec_events(rs, progA)) >= 5, timeout=120)
    time.sleep(0.5)
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    recs += ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=120)
    execs = [r for r in recs if "System" in r]
    check(len(exec_events(recs, progA)) == 5, "filter expression keeps the 5 matching execs")
    check(all(r["EventData"]["filename"] == progA for r in execs), "filter expression drops everything else: %r" %
          sorted(set(r["EventData"]["filename"] for r in execs)))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)

    # PID filter: syscalls from one child only
    child = busy_child(1.0)
    j = create(e, {"providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [child.pid]})
    sid = j["id"]
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    wait_subscribers(e, sid, 1)
    child.stdin.write(b"go\n")
    child.stdin.flush()
    child.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    recs = ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=120)
    evs = [r for r in recs if "System" in r]
    check(len(evs) > 100, "PID filter: the child's syscalls arrive (%d)" % len(evs))
    check(all(r["System"]["Execution"]["ProcessID"] == child.pid for r in evs),
          "PID filter: only the child's events (%r)" % sorted(set(r["System"]["Execution"]["ProcessID"] for r in evs))[:10])
    # per-subscriber server-side filter: pid=
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_enable_running(e):
    j = create(e, {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
    sid = j["id"]
    ws = e.ws("/api/v1/sessions/%d/events?provider=signal" % sid)
    wait_subscribers(e, sid, 1)
    sleeper = subprocess.Popen(["sleep", "30"])
    os.kill(sleeper.pid, signal.SIGUSR1)  # before enabling: must not appear
    sleeper.wait()
    time.sleep(0.3)
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid,
                      body={"enable": [{"name": "signal", "events": ["signal_generate"]}]}, expect=200)
    check(any(p["name"] == "signal" for p in j["spec"]["providers"]), "PATCH shows the new provider")
    s2 = subprocess.Popen(["sleep", "30"])
    os.kill(s2.pid, signal.SIGUSR2)
    s2.wait()
    recs = ws_events(ws, lambda rs: any(r.get("EventData", {}).get("pid") == s2.pid for r in rs), timeout=120)
    sig = [r for r in recs if "System" in r and r["System"]["Provider"]["Name"] == "signal"]
    check(any(r["EventData"].get("pid") == s2.pid and r["EventData"].get("sig") == signal.SIGUSR2 for r in sig),
          "enabled provider's events start (signal_generate for pid %d)" % s2.pid)
    check(not any(r["EventData"].get("pid") == sleeper.pid for r in sig), "nothing from before the enable")
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid, body={"disable": ["signal"]}, expect=200)
    check(not any(p["name"] == "signal" for p in j["spec"]["providers"]), "PATCH disable")
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid, body={"enable": [{"name": "nosuchsystem"}]})
    check(st == 400 and j.get("field", "").startswith("/enable/0"), "PATCH with unknown provider → 400: %r" % j)
    ws.close()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_invalid(e):
    cases = [
        ({"providers": [{"name": "nosuchsystem"}]}, "/providers/0/name"),
        ({"providers": [{"name": "sched", "events": ["sched_switch", "nosuchevent"]}]}, "/providers/0/events/1"),
        ({"providers": [{"name": "sched", "events": ["sched_switch"], "filter": "prev_pid >>>= 3"}]}, "/providers/0/filter"),
        ({"providers": [{"name": "sched"}], "buffer_kb": 1}, "/buffer_kb"),
        ({"providers": [{"name": "sched"}], "mode": "sometimes"}, "/mode"),
        ({"providers": []}, "/providers"),
    ]
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "win", "providers": [{"name": "x"}]})
    check(st == 422 and j.get("field") == "/backend", "a win session on Linux → 422 naming /backend: %d %r" % (st, j))
    before = instances()
    for spec, field in cases:
        st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
        check(st == 400 and h.get("content-type") == "application/problem+json" and j.get("field") == field,
              "invalid spec %r → 400 field %s: %d %r" % (spec, field, st, j))
        if field.endswith("filter"):
            check("filter" in j.get("detail", "").lower() or "parse" in j.get("detail", "").lower()
                  or "error" in j.get("detail", "").lower(), "kernel's message passed on: %r" % j.get("detail"))
    check(instances() == before, "failed creates leave no instance behind")
    e.json("GET", "/api/v1/health", token=None, expect=200)


def test_loss_tiny_buffer(e):
    child = busy_child(2.0)
    j = create(e, {"providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "buffer_kb": 4,
                   "pids": [child.pid]})
    sid = j["id"]
    name = j["os_name"]
    # no subscriber needed: the reader drains into the hub; a tiny buffer overflows in the kernel
    child.stdin.write(b"go\n")
    child.stdin.flush()
    child.wait()
    time.sleep(0.3)
    kern = 0  # the kernel's counts (the child is gone: they no longer change); stop removes the files
    for f in glob.glob("%s/instances/%s/per_cpu/cpu*/stats" % (TRACEFS, name)):
        d = dict(l.split(":", 1) for l in open(f).read().splitlines() if ":" in l)
        kern += int(d.get("overrun", 0)) + int(d.get("dropped events", 0))
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    s = session(e, sid)
    loss = s["stats"]["loss"]
    check(loss["kernel"] > 0, "tiny buffer under a busy loop reports kernel loss (%r)" % loss)
    check(loss["kernel"] == kern, "reported kernel loss %d == per-CPU stats %d" % (loss["kernel"], kern))
    st, h, m = e.request("GET", "/metrics", token="reader")
    m = m.decode()
    check('etwd_session_lost_events_total{session="%d",layer="kernel"} %d' % (sid, kern) in m,
          "metrics report the kernel loss")
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_slow_subscriber(e):
    # <= ~20k events/s: within what one Python client parses; 80k in all: far beyond what a
    # stalled client's queue and socket buffers take
    child = busy_child(0, burst=20, pause=0.001, count=80000)
    j = create(e, {"providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [child.pid],
                   "buffer_kb": 8192})
    sid = j["id"]
    fast = e.ws("/api/v1/sessions/%d/events" % sid)
    slow = e.ws("/api/v1/sessions/%d/events?queue=64" % sid)  # a small queue of its own
    wait_subscribers(e, sid, 2)  # both subscribed before the first syscall: exact accounting
    child.stdin.write(b"go\n")
    child.stdin.flush()
    fast_recs = []
    def read_fast():
        fast_recs.extend(ws_events(fast, lambda rs: any(r.get("_closed") for r in rs), timeout=600))
    t = threading.Thread(target=read_fast, daemon=True)
    t.start()
    # The slow client reads nothing until the server has counted a loss for it (its socket and
    # queue are full), then drains to the end. Its stall is ended by that condition, not by how
    # long this machine takes to produce and deliver 80,000 events: a write that stays blocked
    # for civetweb's request_timeout_ms (10 s) cuts the connection without a close frame.
    deadline = time.time() + 300
    while time.time() < deadline and child.poll() is None and session(e, sid)["stats"]["loss"]["subscribers"] == 0:
        time.sleep(0.05)
    slow_recs = []
    def read_slow():
        slow_recs.extend(ws_events(slow, lambda rs: any(r.get("_closed") for r in rs), timeout=600))
    ts = threading.Thread(target=read_slow, daemon=True)
    ts.start()
    child.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    t.join(600)
    ts.join(600)
    s = session(e, sid)
    produced = s["stats"]["events"]
    fast_events = [r for r in fast_recs if "System" in r]
    fast_gaps = sum(r["Gap"]["Dropped"] for r in fast_recs if "Gap" in r)
    check(produced >= 80000, "the child's 80,000 syscalls were all traced (%d events)" % produced)
    check(len(fast_events) == produced and fast_gaps == 0,
          "fast subscriber got everything: %d of %d, gaps %d" % (len(fast_events), produced, fast_gaps))
    slow_events = [r for r in slow_recs if "System" in r]
    slow_dropped = sum(r["Gap"]["Dropped"] for r in slow_recs if "Gap" in r)
    check(slow_recs and slow_recs[-1].get("_closed") and not slow_recs[-1].get("_abrupt"), "stalled subscriber's stream ends cleanly: %r" % slow_recs[-1:])
    check(slow_dropped > 0, "stalled subscriber lost events (in-band gap records): %d" % slow_dropped)
    check(len(slow_events) + slow_dropped == produced,
          "stalled: delivered %d + dropped %d == produced %d" % (len(slow_events), slow_dropped, produced))
    check(s["stats"]["loss"]["subscribers"] == slow_dropped, "session stats count the subscriber loss: %r" % s["stats"]["loss"])
    check(s["stats"]["loss"]["kernel"] == 0, "no kernel loss with a big buffer: %r" % s["stats"]["loss"])
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_file_mode(e):
    prog = unique_prog("file")
    j = create(e, {"providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "both"})
    sid = j["id"]
    pids = run_n(prog, 7)
    # download while recording, with a Range
    st, h, part = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader", headers={"Range": "bytes=0-15"})
    check(st == 206 and len(part) == 16, "Range download while recording: %d %d" % (st, len(part)))
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader")
    check(st == 200 and data[:16] == part, "full download starts with the ranged bytes")
    d = tempfile.mkdtemp()
    path = os.path.join(d, "trace.dat")
    open(path, "wb").write(data)
    r = subprocess.run(["trace-cmd", "report", "-i", path], capture_output=True, text=True, timeout=60)
    lines = [l for l in r.stdout.splitlines() if "sched_process_exec" in l and prog in l]
    check(r.returncode == 0, "trace-cmd report opens the recording: rc %d %s" % (r.returncode, r.stderr[-500:]))
    check(len(lines) == 7, "trace-cmd report shows the 7 exec events (%d)" % len(lines))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_kill9_reaps():
    e = Etwd().start()
    OURS.add(e.proc.pid)
    j = create(e, {"providers": [{"name": "sched", "events": ["sched_switch"]}]})
    name = j["os_name"]
    check(name in instances(), "instance created")
    e.proc.kill()
    e.proc.wait()
    e.proc.stdout.close()
    e.proc = None
    check(name in instances(), "kill -9 leaves the instance (the kernel object outlives us)")
    e2 = Etwd(state=e.state).start()
    check(name not in instances(), "restart reaps stale etwd_ instances")
    rc = e2.stop()
    check(rc == 0, "exit 0")
    e.cleanup()


def test_sigterm_cleans():
    e = Etwd().start()
    OURS.add(e.proc.pid)
    j = create(e, {"providers": [{"name": "sched", "events": ["sched_switch"]}]})
    ws = e.ws("/api/v1/sessions/%d/events" % j["id"])
    wait_subscribers(e, j["id"], 1)  # a live client (its subscriber exists), not one mid-handshake
    rc = e.stop()
    check(rc == 0, "SIGTERM with a live session and a client → exit 0 (%r)" % rc)
    code = None
    ws.settimeout(60)
    try:
        while True:
            op, data = ws.recv_data(control_frame=True)
            if op == 8:
                code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
                break
    except Exception:
        pass
    check(code == 1001, "the client is told the server is going away (close 1001): %r" % code)
    check(j["os_name"] not in instances(), "SIGTERM removes our instances")
    e.cleanup()


def test_providers(e):
    st, h, j = e.json("GET", "/api/v1/providers?q=SCHE", token="reader", expect=200)
    names = [p["name"] for p in j if p["backend"] == "linux"]
    check("sched" in names and all("sche" in p["name"].lower() or p.get("matched_events") and
                                   all("sche" in x.lower() for x in p["matched_events"]) for p in j),
          "?q= search (the name or an event's name): %r" % names)
    # the "ftrace" system holds the tracer's internal records, not enableable events
    systems = sorted(os.path.basename(p) for p in glob.glob(TRACEFS + "/events/*") if os.path.isdir(p) and not p.endswith("/ftrace"))
    st, h, j = e.json("GET", "/api/v1/providers?backend=linux", token="reader", expect=200)
    check(sorted(p["name"] for p in j) == systems, "every tracepoint system is a provider")
    st, h, j = e.json("GET", "/api/v1/providers/sched", token="reader", expect=200)
    ev = [x for x in j["events"] if x["name"] == "sched_process_exec"][0]
    fmt = open(TRACEFS + "/events/sched/sched_process_exec/format").read()
    check("ID: %d" % ev["id"] in fmt, "event id from the format file")
    for f in ev["fields"]:
        check("%s;\toffset:%d;\tsize:%d;\tsigned:%d;" % (f["name"], f["offset"], f["size"], int(f["signed"])) in fmt,
              "field %r matches the format file" % f)
    check(len(ev["fields"]) == fmt.count("offset:"), "all fields listed")
    st, h, j = e.json("GET", "/api/v1/providers/nosuchsystem", token="reader")
    check(st == 404 and "nosuchsystem" in j.get("detail", ""), "unknown provider → 404: %r" % j)


def reader_threads(pid, sid):
    """{tid: (cpu-suffix, nice, allowed-cpus)} of session @sid's reader threads, found by name."""
    out = {}
    for t in glob.glob("/proc/%d/task/*" % pid):
        try:
            comm = open(t + "/comm").read().strip()
            if not comm.startswith("etwd-s%d-c" % sid):
                continue
            stat = open(t + "/stat").read().rsplit(")", 1)[1].split()
            allowed = [l.split(":", 1)[1].strip() for l in open(t + "/status") if l.startswith("Cpus_allowed_list")][0]
            out[int(os.path.basename(t))] = (int(comm.rsplit("-c", 1)[1]), int(stat[16]), allowed)
        except (OSError, IndexError, ValueError):
            pass
    return out


def test_reader_flags():
    """--reader-nice and --reader-pinning reach the per-CPU reader threads (named
    etwd-s<session>-c<cpu>); defaults: nice -10, pinned to their CPU."""
    ncpu = os.cpu_count()
    for args, nice, pinned in (([], -10, True), (["--reader-nice", "5", "--reader-pinning", "no"], 5, False)):
        with Etwd(args=args) as e:
            OURS.add(e.proc.pid)
            j = create(e, {"providers": [{"name": "sched", "events": ["sched_switch"]}]})
            rd = {}
            deadline = time.time() + 120
            while time.time() < deadline and len(rd) < ncpu:
                rd = reader_threads(e.proc.pid, j["id"])
                time.sleep(0.05)
            check(sorted(c for c, _, _ in rd.values()) == list(range(ncpu)),
                  "%r: one named reader per CPU: %r" % (args, rd))
            check(all(n == nice for _, n, _ in rd.values()), "%r: readers at nice %d: %r" % (args, nice, rd))
            if pinned:
                check(all(a == str(c) for c, _, a in rd.values()), "%r: reader n pinned to CPU n: %r" % (args, rd))
            else:
                own = [l.split(":", 1)[1].strip() for l in open("/proc/%d/status" % e.proc.pid)
                       if l.startswith("Cpus_allowed_list")][0]
                check(all(a == own for _, _, a in rd.values()), "%r: readers keep the process's CPUs %s: %r" % (args, own, rd))
            e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
    for bad, word in ((["--reader-nice", "30"], "between -20 and 19"), (["--reader-pinning", "maybe"], "yes or no")):
        r = subprocess.run([H.BIN] + bad, capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and word in r.stderr, "%r → exit 2 with a clear message: %r" % (bad, r.stderr))


def main():
    if os.geteuid() != 0:
        check(False, "live tests need root (tracefs)")
        done()
    with Etwd(args=["--queue-events", "262144"]) as e:  # ample slack for the fast clients
        OURS.add(e.proc.pid)
        test_providers(e)
        test_invalid(e)
        test_exec_exact(e)
        test_filters(e)
        test_enable_running(e)
        test_loss_tiny_buffer(e)
        test_slow_subscriber(e)
        test_file_mode(e)
    test_reader_flags()
    test_kill9_reaps()
    test_sigterm_cleans()
    check(instances() == [], "no etwd instances left: %r" % instances())
    done()


main()
