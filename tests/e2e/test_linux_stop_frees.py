"""A stopped Linux session frees its kernel buffers (user review, Linux stop), through the real
server on the real kernel (root), over real TLS:
- stop (the call, and a duration_s limit) removes the session's tracefs instance
  (/sys/kernel/tracing/instances/<os_name>) once the readers have drained it and the final
  trace.dat is written; the session's kernel loss counts stay exactly what the kernel said just
  before; the recording is complete (trace-cmd reads every event the stats count);
- what needed the instance after stop is refused clearly: a marker, a flight snapshot (409);
- the per-CPU buffer size the kernel took is stats.buffer_kb (read back from the instance; the
  spec keeps what was asked, 0 = default), still there after stop;
- a trigger's watcher takes no session id: user sessions get consecutive ids around a session
  with triggers, and the watchers' instances are named etwd_p<n>_…"""
import glob
import os
import subprocess
import time

from etwd_harness import Etwd, check, done, problem, session, trace_report, wait_state

TRACEFS = "/sys/kernel/tracing"
READY = "import os,sys,time\nos.write(1, b'r')\nsys.stdin.readline()\n"


def busy_child(count):
    """A child that makes exactly @count getppid() calls once told "go" (then exits)."""
    code = READY + "for _ in range(%d): os.getppid()\n" % count
    child = subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    check(child.stdout.read(1) == b"r", "busy child started")
    deadline = time.time() + 60
    while time.time() < deadline:  # asleep in its read of stdin: its start-up is over
        with open("/proc/%d/stat" % child.pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                break
        time.sleep(0.01)
    return child


def kernel_counts(name):
    """The instance's per-CPU kernel counters: {cpu: (overrun, dropped)}."""
    out = {}
    for f in glob.glob("%s/instances/%s/per_cpu/cpu*/stats" % (TRACEFS, name)):
        d = dict(l.split(":", 1) for l in open(f).read().splitlines() if ":" in l)
        cpu = int(f.split("/per_cpu/cpu")[1].split("/")[0])
        out[cpu] = (int(d.get("overrun", 0)), int(d.get("dropped events", 0)))
    return out


def test_stop_call(e):
    """stop: the instance goes, the loss counts stay, the recording holds what was read."""
    child = busy_child(300000)
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "buffer_kb": 4,
        "pids": [child.pid], "mode": "both"})
    sid, name = j["id"], j["os_name"]
    check(os.path.isdir("%s/instances/%s" % (TRACEFS, name)), "the running session has its instance %s" % name)
    child.stdin.write(b"go\n")
    child.stdin.flush()
    child.wait()
    time.sleep(0.5)  # the child is gone: the kernel's counters no longer change
    kern = kernel_counts(name)
    before = session(e, sid)["stats"]
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    check(not os.path.exists("%s/instances/%s" % (TRACEFS, name)),
          "stop removed the instance %s: %r" % (name, os.listdir(TRACEFS + "/instances")))
    after = session(e, sid)["stats"]
    lost = sum(o + d for o, d in kern.values())
    check(lost > 0, "a 4 KiB buffer under 300000 syscalls lost events in the kernel (%r)" % kern)
    check(after["loss"]["kernel"] == lost == before["loss"]["kernel"],
          "kernel loss unchanged by the removal: kernel said %d, before stop %d, after %d"
          % (lost, before["loss"]["kernel"], after["loss"]["kernel"]))
    got = {c["cpu"]: (c["overrun"], c["dropped"]) for c in after["per_cpu"]}
    check(all(got.get(c) == v for c, v in kern.items()), "per-CPU counters kept: %r vs kernel %r" % (got, kern))
    again = session(e, sid)["stats"]
    check(again["per_cpu"] == after["per_cpu"] and again["loss"] == after["loss"], "and they stay put")
    check(after["file_complete"] is True, "the recording is complete: %r" % after.get("file_complete"))
    code, h, data = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader", timeout=120)
    check(code == 200, "the trace.dat downloads: %d" % code)
    lines = [l for l in trace_report(data) if "sys_enter" in l]
    check(len(lines) == after["file_events"] > 0, "trace-cmd reads all %d recorded events: %d"
          % (after["file_events"], len(lines)))
    check(after["file_events"] + lost >= 300000,
          "recorded + lost covers the child's 300000 calls: %d + %d" % (after["file_events"], lost))
    st, h, d = e.request("POST", "/api/v1/sessions/%d/markers" % sid, body={"text": "late"})
    problem(st, h, d, 409, "a marker into a stopped session")
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    print("stop: instance removed, kernel loss %d kept, %d events recorded" % (lost, after["file_events"]))


def test_duration(e):
    """a one-call recording: its duration ends it, and its instance with it."""
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "file", "duration_s": 1})
    sid, name = j["id"], j["os_name"]
    code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % sid, token="reader", timeout=120)
    check(code == 200, "?wait=true serves the file: %d" % code)
    trace_report(data)
    s = wait_state(e, sid, ("stopped",))
    check(s["state"] == "stopped" and s.get("stop_reason") == "duration", "stopped by its duration: %r" % s["state"])
    check(not os.path.exists("%s/instances/%s" % (TRACEFS, name)), "the duration's stop removed %s" % name)
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_flight(e):
    """a stopped flight session: its instance is gone, a snapshot is refused clearly."""
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "flight"})
    sid, name = j["id"], j["os_name"]
    e.json("POST", "/api/v1/sessions/%d/snapshot" % sid, expect=201)
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    check(not os.path.exists("%s/instances/%s" % (TRACEFS, name)), "stop removed the flight instance %s" % name)
    st, h, d = e.request("POST", "/api/v1/sessions/%d/snapshot" % sid)
    problem(st, h, d, 409, "a snapshot of a stopped flight session")
    check(b"not running" in d, "it says why: %r" % d[:200])
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def kernel_kb(name):
    with open("%s/instances/%s/per_cpu/cpu0/buffer_size_kb" % (TRACEFS, name)) as f:
        return int(f.read().split()[0])


def test_buffer_kb(e):
    """stats.buffer_kb: what the kernel took, default or asked; kept after stop."""
    for ask, least in ((None, 4096), (10, 10)):  # the kernel rounds up (4096 → 4099 here)
        spec = {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]}
        if ask:
            spec["buffer_kb"] = ask
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body=spec)
        sid, name = j["id"], j["os_name"]
        k = kernel_kb(name)
        check(j["spec"]["buffer_kb"] == (ask or 0), "the spec echoes what was asked: %r" % j["spec"]["buffer_kb"])
        check(j["stats"].get("buffer_kb") == k and least <= k < least + 64,
              "buffer_kb %r: stats say %r, the kernel %d" % (ask, j["stats"].get("buffer_kb"), k))
        e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
        check(session(e, sid)["stats"].get("buffer_kb") == k, "stats.buffer_kb stays after stop")
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        print("buffer_kb %r: the kernel took %d KiB per CPU" % (ask, k))


def test_ids(e):
    """a session with triggers between two others: three consecutive ids."""
    ev = {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]}
    a = e.json("POST", "/api/v1/sessions", expect=201, body=ev)[2]
    trig = dict(ev, start_when={"provider": "sched", "event": "sched_process_exec", "filter": {"filename": "/none/x"}},
                stop_when={"provider": "sched", "event": "sched_process_exec", "filter": {"filename": "/none/y"}})
    b = e.json("POST", "/api/v1/sessions", expect=201, body=trig)[2]
    ours = sorted(n for n in os.listdir(TRACEFS + "/instances") if n.endswith("_%d" % e.proc.pid))
    watchers = [n for n in ours if n.startswith("etwd_p")]
    check(len(watchers) == 2, "the two watchers' instances are etwd_p<n>_…: %r" % ours)
    c = e.json("POST", "/api/v1/sessions", expect=201, body=ev)[2]
    check([a["id"], b["id"], c["id"]] == [a["id"], a["id"] + 1, a["id"] + 2],
          "consecutive ids around a session with triggers: %r" % [a["id"], b["id"], c["id"]])
    ids = sorted(s["id"] for s in e.json("GET", "/api/v1/sessions", token="reader", expect=200)[2])
    check(ids == [a["id"], b["id"], c["id"]], "the list shows exactly them: %r" % ids)
    for s in (a, b, c):
        e.request("DELETE", "/api/v1/sessions/%d" % s["id"])


def main():
    if os.geteuid() != 0:
        check(False, "live tests need root (tracefs)")
        done()
    with Etwd() as e:
        test_stop_call(e)
        test_duration(e)
        test_flight(e)
        test_buffer_kb(e)
    with Etwd() as e:  # a server of its own: its first sessions
        test_ids(e)
    done()


main()
