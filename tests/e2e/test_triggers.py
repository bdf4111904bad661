"""Markers and triggers (issue 20 item 3), through the real server on the real kernel (root), over
real TLS:
- POST /api/v1/sessions/{id}/markers puts a marker into the live stream (provider "ftrace", event
  "print", EventData.buf = the text) and into the recording (`trace-cmd report` of the
  downloaded trace.dat shows it as a `print:` line with the text); bad bodies, too-long texts, stopped
  sessions, readers and backends without markers are refused with problem+json;
- a stop trigger (stop_when) on the exec of a uniquely named copy of /bin/true stops the session
  with stop_reason "trigger" no earlier than after_s and within after_s + 1 s of the exec, and
  not on another program's exec; a rate rule (rate_above for_s) stops one too;
- a start trigger (start_when) arms the session: state "armed", nothing read or delivered (a
  program run meanwhile is not in the stream), until its program runs: then "running" and the
  stream delivers what follows;
- flight mode: nothing is read until POST …/snapshot writes what the ring buffers (overwrite
  mode) hold to a new recording: it has the exec of a program run just before, not the exec of
  one run before a load that overwrote the buffers; a stop trigger on a flight session writes a
  snapshot and stops it;
- malformed triggers, unknown providers in them and backends that cannot have them are 400s
  naming the member."""
import json
import os
import subprocess
import threading
import time

from etwd_harness import Etwd, check, done, CORPUS, drop_prog, problem, session, trace_report, unique_prog, wait_state

SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def marker(e, sid, text, token="admin"):
    return e.request("POST", "/api/v1/sessions/%d/markers" % sid, body={"text": text}, token=token)


def test_markers(e):
    """markers reach the stream and the recording, in the instance of their session only."""
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "both"})
    sid = j["id"]
    st, h, other = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
    texts = ["etwd marker %d \u00e9 \"quoted\"" % i for i in range(3)]
    got = []

    def reader():
        for r in e.ndjson("/api/v1/sessions/%d/events?provider=ftrace&limit=3" % sid, timeout=60):
            got.append(r)
    th = threading.Thread(target=reader)
    th.start()
    deadline = time.time() + 30
    while session(e, sid)["stats"]["subscribers"] < 1 and time.time() < deadline:
        time.sleep(0.02)
    for t in texts:
        st, h, data = marker(e, sid, t)
        check(st == 204, "POST markers: %d %r" % (st, data[:300]))
    th.join(60)
    # (each CPU has its reader: across CPUs the stream is in delivery order, their times in order)
    bufs = [r["EventData"].get("buf", "").rstrip("\n") for r in sorted(got, key=lambda r: r["System"]["TimeCreated"])]
    check(bufs == texts, "the stream has the markers, in time order: %r" % bufs)
    check(all(r["System"]["Provider"]["Name"] == "ftrace" and r["System"].get("EventName") == "print" for r in got),
          "as ftrace/print events: %r" % [r["System"] for r in got][:1])
    st, h, _ = e.request("POST", "/api/v1/sessions/%d/stop" % sid)
    code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true&timeout_s=60" % sid, token="reader", timeout=120)
    check(code == 200, "the recording downloads: %d %r" % (code, data[:300]))
    lines = trace_report(data)
    marks = [l for l in lines if " print: " in l]  # (no kallsyms in the file: the ip stays an address)
    check(len(marks) == 3 and all(t in m for t, m in zip(texts, marks)),
          "trace-cmd report shows the 3 markers: %r" % marks)
    print("markers: %d in the stream, %d in trace-cmd report" % (len(got), len(marks)))
    # the other session saw none of them
    got2 = []
    e.request("POST", "/api/v1/sessions/%d/stop" % other["id"])
    for r in e.ndjson("/api/v1/sessions/%d/events?provider=ftrace&from=1" % other["id"], timeout=30):
        got2.append(r)
    check(not got2, "another session's stream has none of them: %r" % got2[:1])
    # refusals
    problem(*marker(e, sid, "late"), 409, "a marker for a stopped session")
    st, h, j2 = e.json("POST", "/api/v1/sessions", expect=201, body={"providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
    problem(*marker(e, j2["id"], "x" * 1025), 400, "a marker of 1025 bytes")
    st, h, data = marker(e, j2["id"], "x" * 1024)
    check(st == 204, "a marker of 1024 bytes: %d" % st)
    problem(*e.request("POST", "/api/v1/sessions/%d/markers" % j2["id"], body={"txt": "a"}), 400, "no text")
    problem(*e.request("POST", "/api/v1/sessions/%d/markers" % j2["id"], body='{"text":"a\\u0000b"}'), 400, "a NUL")
    st, h, data = marker(e, j2["id"], "r", token="reader")
    check(st == 403, "a reader may not write markers: %d" % st)
    problem(*marker(e, 999999, "x"), 404, "no such session")
    # a backend without markers (an etl replay): 501, and the capability list says so
    with open(SIH, "rb") as f:
        e.json("POST", "/api/v1/files?name=trig.etl", body=f.read(), ctype="application/octet-stream", expect=201)
    st, h, j3 = e.json("POST", "/api/v1/sessions", expect=201, body={"backend": "etl", "files": ["trig.etl"]})
    problem(*marker(e, j3["id"], "x"), 501, "a marker for an etl replay")
    st, h, bes = e.json("GET", "/api/v1/backends", token="reader", expect=200)
    caps = {b["name"]: b["capabilities"] for b in (bes if isinstance(bes, list) else bes.get("backends", []))}
    check("markers" in caps.get("linux", []) and "markers" not in caps.get("etl", ["markers"]),
          "GET /api/v1/backends: linux has markers, etl not: %r" % caps)
    for i in (sid, other["id"], j2["id"], j3["id"]):
        e.request("DELETE", "/api/v1/sessions/%d" % i)


def utc(ts):
    """an ISO UTC time of the API ("…T05:33:45.123456789Z") as seconds since the epoch"""
    import calendar
    base, frac = ts.rstrip("Z").split(".") if "." in ts else (ts.rstrip("Z"), "0")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + float("0." + frac)


def test_stop_trigger(e):
    """stop_when on the exec of a marker program: stopped by "trigger" within after_s + 1 s."""
    prog, other = unique_prog("stop"), unique_prog("other")
    after = 1.0
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
        "stop_when": {"provider": "sched", "event": "sched_process_exec", "filter": {"filename": prog},
                      "after_s": after}})
    sid = j["id"]
    check(j["state"] == "running" and j["spec"].get("stop_when", {}).get("filter") == {"filename": prog},
          "running, and the spec shows stop_when: %r %r" % (j["state"], j["spec"].get("stop_when")))
    time.sleep(0.5)  # the watcher's readers are running
    subprocess.run([other], check=True)
    time.sleep(after + 1.5)
    s = session(e, sid)
    check(s["state"] == "running", "another program's exec does not stop it: %r" % s["state"])
    t_exec = time.time()
    subprocess.run([prog], check=True)
    s = wait_state(e, sid, ("stopped", "failed"), timeout=after + 10)
    check(s["state"] == "stopped" and s.get("stop_reason") == "trigger",
          "the stop trigger stopped it: %r %r" % (s["state"], s.get("stop_reason")))
    took = utc(s["stopped"]) - t_exec if s.get("stopped") else 99
    check(after - 0.1 <= took <= after + 1.0, "stopped %.2f s after the exec (after_s %.1f, want <= %.1f)"
          % (took, after, after + 1.0))
    print("stop trigger: stopped %.2f s after the exec (after_s %.1f)" % (took, after))
    time.sleep(0.5)  # the fired trigger's watcher (its own tracefs instance) is gone, and the stopped session's
    ours = [n for n in os.listdir("/sys/kernel/tracing/instances") if n.endswith("_%d" % e.proc.pid)]
    check(len(ours) == 0, "no instance is left once the session stopped: %r" % ours)
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    # a rate rule: more than 5 execs/s of the program for 1 s (other helpers' execs do not count)
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exit"]}],
        "stop_when": {"provider": "sched", "event": "sched_process_exec", "filter": {"filename": prog},
                      "rate_above": 5, "for_s": 1}})
    sid = j["id"]
    time.sleep(2.5)
    check(session(e, sid)["state"] == "running", "before the program runs the rate is 0")
    t0 = time.time()
    while time.time() - t0 < 8 and session(e, sid)["state"] == "running":
        for _ in range(5):
            subprocess.run([prog], check=True)
        time.sleep(0.1)
    s = session(e, sid)
    check(s["state"] == "stopped" and s.get("stop_reason") == "trigger",
          "the rate rule stopped it: %r %r after %.1f s" % (s["state"], s.get("stop_reason"), time.time() - t0))
    print("rate rule: stopped %.1f s after the execs began" % (time.time() - t0))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    drop_prog(prog)
    drop_prog(other)


def test_start_trigger(e):
    """start_when arms the session (nothing read or delivered) until its program runs."""
    prog, before, after = unique_prog("start"), unique_prog("before"), unique_prog("after")
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "both",
        "start_when": {"provider": "sched", "event": "sched_process_exec", "filter": {"filename": prog}}})
    sid = j["id"]
    check(j["state"] == "armed", "a session with start_when is armed: %r" % j["state"])
    got = []

    def reader():
        for r in e.ndjson("/api/v1/sessions/%d/events?provider=sched" % sid, timeout=60):
            got.append(r)
            if after in r.get("EventData", {}).get("filename", ""):
                break
    th = threading.Thread(target=reader)
    th.start()
    deadline = time.time() + 30
    while session(e, sid)["stats"]["subscribers"] < 1 and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    subprocess.run([before], check=True)
    time.sleep(1.0)
    s = session(e, sid)
    check(s["state"] == "armed" and s["stats"]["read_events"] == 0,
          "still armed, nothing read: %r %r" % (s["state"], s["stats"]["read_events"]))
    subprocess.run([prog], check=True)
    s = wait_state(e, sid, ("running", "stopped", "failed"), timeout=10)
    check(s["state"] == "running", "the start trigger fired: %r %r" % (s["state"], s.get("message")))
    time.sleep(0.3)
    subprocess.run([after], check=True)
    th.join(30)
    names = [r.get("EventData", {}).get("filename", "") for r in got]
    check(after in names, "the stream delivers what follows the trigger: %r" % names)
    check(before not in names, "and nothing of the armed time: %r" % names)
    st, h, _ = e.request("POST", "/api/v1/sessions/%d/stop" % sid)
    code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true&timeout_s=60" % sid, token="reader", timeout=120)
    lines = trace_report(data)
    check(any(after in l for l in lines) and not any(before in l for l in lines),
          "the recording holds the exec after the trigger, not the one before: %d lines" % len(lines))
    # stopping an armed session works, and it never starts afterwards
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
        "start_when": {"provider": "sched", "event": "sched_process_exec", "filter": {"filename": prog}}})
    st, h, s = e.json("POST", "/api/v1/sessions/%d/stop" % j["id"], expect=200)
    check(s["state"] == "stopped" and s.get("stop_reason") == "requested", "an armed session stops: %r" % s["state"])
    subprocess.run([prog], check=True)
    time.sleep(1.0)
    check(session(e, j["id"])["state"] == "stopped", "and stays stopped when its trigger would fire")
    for i in (sid, j["id"]):
        e.request("DELETE", "/api/v1/sessions/%d" % i)
    for p in (prog, before, after):
        drop_prog(p)


def recording_names(e):
    return {r["name"] for r in e.json("GET", "/api/v1/recordings", token="reader", expect=200)[2]}


def test_flight(e):
    """mode flight keeps the last events in the kernel; a snapshot writes them to a recording."""
    old, new, stop = unique_prog("old"), unique_prog("new"), unique_prog("fstop")
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}, {"name": "raw_syscalls", "events": ["sys_enter"]}],
        "mode": "flight", "buffer_kb": 512})
    sid = j["id"]
    check(j["state"] == "running" and j["spec"]["mode"] == "flight", "a flight session runs: %r" % j["state"])
    pin = ["taskset", "-c", "0"]  # one CPU's buffer: the load overwrites what the old program left there
    subprocess.run(pin + [old], check=True)
    subprocess.run(pin + ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000"], check=True, stderr=subprocess.DEVNULL)
    subprocess.run(pin + [new], check=True)
    t0 = time.time()
    st, h, snap = e.json("POST", "/api/v1/sessions/%d/snapshot" % sid, expect=201)
    took = time.time() - t0
    name = snap.get("recording_name") if isinstance(snap, dict) else None
    check(name and snap.get("recording_url") == "/api/v1/recordings/%s" % name and name in recording_names(e),
          "the snapshot is a listed recording: %r" % snap)
    code, h, data = e.request("GET", "/api/v1/recordings/%s" % name, token="reader")
    check(code == 200 and len(data) == snap.get("size"), "downloads, of the size it said: %d %d %r" % (code, len(data), snap.get("size")))
    lines = trace_report(data)
    execs = [l for l in lines if "sched_process_exec" in l]
    check(any(os.path.basename(new) in l for l in execs), "the snapshot has the last program's exec: %r" % execs[-3:])
    check(not any(os.path.basename(old) in l for l in execs), "not the overwritten one's: %r" % execs[:3])
    s = session(e, sid)
    check(s["stats"]["read_events"] == 0 and s["state"] == "running",
          "nothing was read or streamed; the recorder goes on: %r %r" % (s["stats"]["read_events"], s["state"]))
    print("flight: snapshot of %d bytes (%d report lines) in %.2f s" % (len(data), len(lines), took))
    problem(*e.request("POST", "/api/v1/sessions/999999/snapshot"), 404, "a snapshot of no session")
    st, h, rt = e.json("POST", "/api/v1/sessions", expect=201, body={"providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
    problem(*e.request("POST", "/api/v1/sessions/%d/snapshot" % rt["id"]), 409, "a snapshot of a realtime session")
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "etl", "files": ["trig.etl"], "mode": "flight"})
    check(st == 400 and j.get("field") == "/mode", "an etl replay has no flight mode: %d %r" % (st, j))
    # a stop trigger on a flight session keeps what the buffers hold, then stops it
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "flight",
        "stop_when": {"provider": "sched", "event": "sched_process_exec", "filter": {"filename": stop}}})
    before = recording_names(e)
    time.sleep(0.5)
    subprocess.run([new], check=True)
    subprocess.run([stop], check=True)
    s = wait_state(e, j["id"], ("stopped", "failed"), timeout=10)
    check(s["state"] == "stopped" and s.get("stop_reason") == "trigger", "the trigger stopped it: %r" % s["state"])
    added = recording_names(e) - before
    check(len(added) == 1, "and wrote one recording: %r" % added)
    if added:
        code, h, data = e.request("GET", "/api/v1/recordings/%s" % added.pop(), token="reader")
        check(any(os.path.basename(new) in l for l in trace_report(data)), "holding the exec before the trigger")
    for i in (sid, rt["id"], j["id"]):
        e.request("DELETE", "/api/v1/sessions/%d" % i)
    for p in (old, new, stop):
        drop_prog(p)


def test_trigger_refusals(e):
    base = {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]}
    cases = [
        ({"stop_when": "sched"}, "/stop_when"),
        ({"stop_when": {"provider": "sched", "colour": 1}}, "/stop_when/colour"),
        ({"start_when": {"event": "x"}}, "/start_when/provider"),
        ({"stop_when": {"provider": "sched", "after_s": -1}}, "/stop_when/after_s"),
        ({"stop_when": {"provider": "sched", "rate_above": 1, "rate_below": 2}}, "/stop_when/rate_below"),
        ({"stop_when": {"provider": "sched", "for_s": 2}}, "/stop_when/for_s"),
        ({"stop_when": {"provider": "sched", "filter": {"a": [1]}}}, "/stop_when/filter"),
        ({"stop_when": {"provider": "etwd_no_such_system"}}, "/stop_when"),
    ]
    for extra, field in cases:
        body = dict(base, **extra)
        st, h, j = e.json("POST", "/api/v1/sessions", body=body)
        check(st == 400 and isinstance(j, dict) and j.get("field") == field,
              "%r: 400 naming %s, got %d %r" % (extra, field, st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "etl", "files": ["trig.etl"],
                                                        "stop_when": {"provider": "SIHTraceLogging"}})
    check(st == 400 and j.get("field") == "/stop_when", "an etl replay cannot have triggers: %d %r" % (st, j))


def main():
    if os.geteuid() != 0:
        check(False, "these tests need root (tracefs)")
        done()
    with Etwd() as e:
        test_markers(e)
        test_stop_trigger(e)
        test_start_trigger(e)
        test_trigger_refusals(e)
        test_flight(e)
    done()


if __name__ == "__main__":
    main()
