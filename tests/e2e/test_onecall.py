"""One-call recordings and recordings that outlive their sessions (issue 20 items 1 and 2), through
the real server on the real kernel (root), over real TLS:
- POST a session with duration_s, then one GET .../file?wait=true returns the complete trace.dat
  (trace-cmd report reads it and finds the exec of a program run meanwhile); the session says
  stopped, stop_reason duration;
- deleting the session keeps its recording: still listed (/api/v1/recordings and /api/v1/files,
  kind recording), downloadable with Range, deletable on its own;
- max_events and max_file_mb stop sessions with their reasons, on Linux at most a page per CPU
  past the limit; an etl replay honours duration_s and max_events (exactly);
- members a backend or mode cannot honour, and bad wait parameters, are 400s naming them; a wait
  that outlasts timeout_s is a 504 problem; a waiting download does not hold up shutdown."""
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

from etwd_harness import Etwd, check, done, CORPUS, drop_prog, session, trace_report, unique_prog, wait_state

NCPU = os.cpu_count()
PAGE_EVENTS = 4096 // 16  # a ring-buffer page holds fewer sys_enter records than this
PS = os.path.join(CORPUS, "microsoft+krabsetw/examples/NativeExamples/powershell.etl")
SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def test_duration(e):
    """record 3 s, then download: one POST and one GET; the recording outlives the session."""
    prog = unique_prog("dur")
    t0 = time.time()
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec", "sched_process_exit"]}],
        "mode": "file", "duration_s": 3})
    sid = j["id"]
    name = j.get("recording_name")
    check(j.get("spec", {}).get("duration_s") == 3, "the spec shows duration_s: %r" % j.get("spec"))
    check(bool(name) and j.get("recording_url") == "/api/v1/recordings/%s" % name,
          "the session links its recording: %r %r" % (name, j.get("recording_url")))

    def runs():  # the program runs while the session records
        for _ in range(5):
            subprocess.run([prog], check=True)
            time.sleep(0.2)
    th = threading.Thread(target=runs)
    th.start()
    code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % sid, token="reader", timeout=120)
    took = time.time() - t0
    th.join()
    check(code == 200, "?wait=true serves the file: %d %r" % (code, data[:300]))
    check(2.5 <= took < 15, "it came when the 3 s were over: %.1f s after the POST" % took)
    lines = trace_report(data)
    execs = [l for l in lines if "sched_process_exec" in l and os.path.basename(prog) in l]
    check(len(execs) == 5, "the trace.dat holds the program's 5 execs: %d" % len(execs))
    s = session(e, sid)
    check(s["state"] == "stopped" and s.get("stop_reason") == "duration",
          "the session stopped by its duration: %r %r" % (s["state"], s.get("stop_reason")))
    check(s["stats"].get("file_complete") is True, "the file was complete when served: %r" % s["stats"].get("file_complete"))
    print("duration_s 3: served %.2f s after the POST, %d bytes, %d report lines" % (took, len(data), len(lines)))
    # the recording is deletable on its own once the session stopped...
    st, h, recs = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    rec = [r for r in recs if r["name"] == name]
    check(rec and rec[0]["session"] == sid and rec[0]["writing"] is False,
          "listed with its (stopped) session, not being written: %r" % rec)
    # ...and deleting the session never deletes it
    st, h, _ = e.request("DELETE", "/api/v1/sessions/%d" % sid)
    check(st == 204, "delete the session: %d" % st)
    st, h, recs = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    rec = [r for r in recs if r["name"] == name]
    check(rec and rec[0]["session"] is None and rec[0]["size"] == len(data),
          "after the session's delete the recording is still listed, whole: %r" % rec)
    code, h, again = e.request("GET", "/api/v1/recordings/%s" % name, token="reader")
    check(code == 200 and again == data, "and downloads unchanged: %d %d bytes" % (code, len(again)))
    code, h, part = e.request("GET", "/api/v1/recordings/%s" % name, token="reader", headers={"Range": "bytes=100-199"})
    check(code == 206 and part == data[100:200], "with Range: %d" % code)
    # the files area lists it too, after the uploads, with its kind and where it lives
    st, h, files = e.json("GET", "/api/v1/files", token="reader", expect=200)
    f = [x for x in files if x["name"] == name]
    check(f and f[0]["kind"] == "recording" and f[0]["url"] == "/api/v1/recordings/%s" % name and f[0]["size"] == len(data),
          "GET /api/v1/files lists the recording: %r" % f)
    check(all(x["kind"] == "upload" and x["url"] == "/api/v1/files/" + x["name"] for x in files if x["name"].endswith(".etl")),
          "uploads say their kind: %r" % files)
    st, h, _ = e.request("DELETE", f[0]["url"])
    check(st == 204, "the recording is deleted at its url: %d" % st)
    st, h, files = e.json("GET", "/api/v1/files", token="reader", expect=200)
    check(all(x["name"] != name for x in files), "and is gone")
    drop_prog(prog)


def test_max_events(e):
    """max_events stops a realtime session and a recording, with the reason."""
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "max_events": 2000})
    load = subprocess.Popen(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000000"], stderr=subprocess.DEVNULL)
    try:
        s = wait_state(e, j["id"], ("stopped", "ended", "failed"))
        check(s["state"] == "stopped" and s.get("stop_reason") == "max_events",
              "max_events stops a realtime session: %r %r" % (s["state"], s.get("stop_reason")))
        n = s["stats"]["read_events"]
        check(2000 <= n <= 2000 + NCPU * PAGE_EVENTS, "after 2000 events and at most a page per CPU more: %d" % n)
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "mode": "both", "max_events": 5000})
        code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true&timeout_s=60" % j["id"], token="reader", timeout=120)
    finally:
        load.kill()
        load.wait()
    check(code == 200, "?wait=true&timeout_s serves a max_events recording: %d %r" % (code, data[:300]))
    s = session(e, j["id"])
    check(s["state"] == "stopped" and s.get("stop_reason") == "max_events", "stopped by max_events: %r" % s.get("stop_reason"))
    n = sum(1 for l in trace_report(data) if "sys_enter" in l)
    check(5000 <= n <= 5000 + NCPU * PAGE_EVENTS and n == s["stats"]["file_events"],
          "the file holds 5000 events and at most a page per CPU more: %d (file_events %d)" % (n, s["stats"]["file_events"]))
    print("max_events 5000: %d events read, %d in the file, %d dropped past the limit" % (
        s["stats"]["read_events"], n, s["stats"].get("limit_skipped", -1)))
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def test_max_file_mb(e):
    """max_file_mb 1 under a syscall load: the recording stops at about 1 MiB of pages."""
    load = subprocess.Popen(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000000"], stderr=subprocess.DEVNULL)
    try:
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "mode": "file", "max_file_mb": 1,
            "duration_s": 60})
        code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % j["id"], token="reader", timeout=120)
    finally:
        load.kill()
        load.wait()
    check(code == 200, "the max_file_mb recording is served: %d %r" % (code, data[:300]))
    s = session(e, j["id"])
    fb = s["stats"].get("file_bytes", 0)
    check(s["state"] == "stopped" and s.get("stop_reason") == "max_file_mb", "stopped by max_file_mb: %r" % s.get("stop_reason"))
    check(1 << 20 <= fb <= (1 << 20) + NCPU * 4096 and len(data) >= fb,
          "1 MiB of pages and at most a page per CPU more: %d bytes, file %d" % (fb, len(data)))
    check(len(trace_report(data)) > 1000, "trace-cmd reads it")
    print("max_file_mb 1: %d bytes of pages, file %d bytes, %d events dropped past the limit" % (
        fb, len(data), s["stats"].get("limit_skipped", -1)))
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def test_replay_duration(e):
    """an etl replay at recorded speed (SIH: 12 events over 21 s) honours duration_s."""
    st, h, j = e.json("POST", "/api/v1/files?name=onecall.etl", body=open(SIH, "rb").read(),
                      ctype="application/octet-stream", expect=201)
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201,
                      body={"files": ["onecall.etl"], "replay": "recorded", "duration_s": 1})
    t0 = time.time()
    recs = list(e.ndjson("/api/v1/sessions/%d/events" % j["id"], timeout=60))
    took = time.time() - t0
    s = session(e, j["id"])
    check(s["state"] == "stopped" and s.get("stop_reason") == "duration" and took < 10,
          "the replay stopped after its duration_s: %r %r after %.1f s" % (s["state"], s.get("stop_reason"), took))
    check(len([r for r in recs if "System" in r]) < 12, "before the file's end: %d events" % len(recs))
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def test_replay_max_events(e):
    """an etl replay (fast) stops after exactly max_events events (powershell.etl has 114)."""
    st, h, j = e.json("POST", "/api/v1/files?name=onecall_ps.etl", body=open(PS, "rb").read(),
                      ctype="application/octet-stream", expect=201)
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={"files": ["onecall_ps.etl"], "max_events": 50})
    recs = [r for r in e.ndjson("/api/v1/sessions/%d/events" % j["id"], timeout=60) if "System" in r]
    s = session(e, j["id"])
    check(s["state"] == "stopped" and s.get("stop_reason") == "max_events" and len(recs) == 50,
          "the replay stopped after max_events: %r %r, %d events" % (s["state"], s.get("stop_reason"), len(recs)))
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def test_refusals(e):
    """what cannot be honoured is a 400 naming the member or parameter; a timed-out wait a 504."""
    sched = [{"name": "sched", "events": ["sched_switch"]}]
    for body, field in (({"providers": sched, "max_file_mb": 1}, "/max_file_mb"),  # realtime: no file
                        ({"files": ["onecall.etl"], "max_file_mb": 1}, "/max_file_mb"),  # etl: records nothing
                        ({"providers": sched, "duration_s": 0}, "/duration_s"),
                        ({"providers": sched, "duration_s": "3"}, "/duration_s"),
                        ({"providers": sched, "max_events": -1}, "/max_events"),
                        ({"providers": sched, "max_events": 1.5}, "/max_events"),
                        ({"providers": sched, "mode": "file", "max_file_mb": 0}, "/max_file_mb")):
        st, h, j = e.json("POST", "/api/v1/sessions", body=body)
        check(st == 400 and j.get("field") == field and field[1:] in j.get("detail", ""),
              "%r → 400 naming %s: %d %r" % (body, field, st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": sched, "mode": "file"}, expect=201)
    sid = j["id"]
    base = "/api/v1/sessions/%d/file" % sid
    st, h, j = e.json("GET", base + "?wait=true", token="reader")
    check(st == 400 and j.get("field") == "timeout_s", "no duration_s and no timeout_s → 400 naming timeout_s: %d %r" % (st, j))
    for q, field in (("wait=maybe", "wait"), ("wait=true&timeout_s=0", "timeout_s"), ("wait=true&timeout_s=x", "timeout_s")):
        st, h, j = e.json("GET", base + "?" + q, token="reader")
        check(st == 400 and j.get("field") == field, "?%s → 400 naming %s: %d %r" % (q, field, st, j))
    t0 = time.time()
    st, h, j = e.json("GET", base + "?wait=true&timeout_s=1", token="reader")
    took = time.time() - t0
    check(st == 504 and h.get("content-type") == "application/problem+json" and j.get("type") == "urn:etwd:problem:timeout"
          and "still running" in j.get("detail", ""), "a wait that times out → 504 problem: %d %r" % (st, j))
    check(0.9 <= took < 5, "after timeout_s: %.1f s" % took)
    st, h, j = e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    check(j.get("stop_reason") == "requested", "a stop by request says so: %r" % j.get("stop_reason"))
    code, h, data = e.request("GET", base + "?wait=true&timeout_s=1", token="reader")
    check(code == 200, "a stopped session's file is served at once with wait: %d" % code)
    # a stopped session's recording can be deleted on its own; the session's file is then a 404
    name = session(e, sid)["recording_name"]
    st, h, _ = e.request("DELETE", "/api/v1/recordings/%s" % name)
    check(st == 204, "delete a stopped session's recording: %d" % st)
    st, h, j = e.json("GET", base, token="reader")
    check(st == 404 and "deleted" in j.get("detail", ""), "then GET .../file → 404 saying so: %d %r" % (st, j))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_failed_recording():
    """a recording whose session failed (disk full) can be deleted on its own (the session is
    stopped for good first, so its final write is over)."""
    mnt = tempfile.mkdtemp(prefix="etwd-onecall-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt], check=True)
    e = load = None
    try:
        e = Etwd(state=mnt).start()
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "mode": "file", "duration_s": 60})
        load = subprocess.Popen(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=1000000000"], stderr=subprocess.DEVNULL)
        s = wait_state(e, j["id"], ("stopped", "ended", "failed"))
        load.kill()
        load.wait()
        load = None
        check(s["state"] == "failed" and s.get("stop_reason") == "failed", "a full disk fails the session: %r" % s["state"])
        st, h, _ = e.request("DELETE", "/api/v1/recordings/%s" % j["recording_name"])
        check(st == 204, "the failed session's recording is deleted on its own: %d" % st)
        st = session(e, j["id"])["stats"]
        check(st.get("file_complete") is True, "after its final write: %r" % st.get("file_complete"))
        code, h, pj = e.json("GET", "/api/v1/sessions/%d/file?wait=true" % j["id"], token="reader", timeout=60)
        check(code == 404 and isinstance(pj, dict) and "deleted" in pj.get("detail", ""),
              "then ?wait=true says it was deleted: %d %r" % (code, str(pj)[:300]))
        check(e.stop() == 0, "exit 0")
    finally:
        if load:
            load.kill()
            load.wait()
        if e and e.proc:
            e.stop()
        subprocess.run(["umount", mnt])
        os.rmdir(mnt)


def test_shutdown_during_wait():
    """SIGTERM while a download waits for a 60 s session: etwd exits at once, the recording is kept."""
    e = Etwd().start()
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "file", "duration_s": 60})
    name = j["recording_name"]
    res = {}

    def waiter():
        try:
            res["r"] = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % j["id"], token="reader", timeout=120)
        except Exception as x:  # the connection may be closed instead of answered
            res["r"] = x
    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(1.0)
    t0 = time.time()
    rc = e.stop()
    took = time.time() - t0
    th.join(30)
    check(rc == 0 and took < 10, "SIGTERM during a waiting download: exit %r after %.1f s" % (rc, took))
    r = res.get("r")
    check(not isinstance(r, tuple) or r[0] == 503, "the waiting request was answered 503 or closed: %r" % (r,))
    check(os.path.exists(os.path.join(e.state, "recordings", name, "trace.dat")), "the recording is kept")
    e.cleanup()


def main():
    if os.geteuid() != 0:
        check(False, "these tests need root (tracefs)")
        done()
    with Etwd() as e:
        test_duration(e)
        test_max_events(e)
        test_max_file_mb(e)
        test_replay_duration(e)
        test_replay_max_events(e)
        test_refusals(e)
    test_failed_recording()
    test_shutdown_during_wait()
    done()


if __name__ == "__main__":
    main()
