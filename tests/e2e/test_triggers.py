"""Markers and triggers (issue 20 item 3), through the real server on the real kernel (root), over
real TLS:
- POST /api/v1/sessions/{id}/markers puts a marker into the live stream (provider "ftrace", event
  "print", EventData.buf = the text) and into the recording (`trace-cmd report` of the
  downloaded trace.dat shows it as a `print:` line with the text); bad bodies, too-long texts, stopped
  sessions, readers and backends without markers are refused with problem+json."""
import json
import os
import subprocess
import tempfile
import threading
import time

from etwd_harness import Etwd, check, done, CORPUS

SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def report(data):
    """`trace-cmd report` of a trace.dat (Debian's trace-cmd): its lines."""
    d = tempfile.mkdtemp(prefix="etwdtrig-")
    path = os.path.join(d, "trace.dat")
    with open(path, "wb") as f:
        f.write(data)
    r = subprocess.run(["trace-cmd", "report", "-i", path], capture_output=True, text=True, timeout=120)
    os.unlink(path)
    os.rmdir(d)
    check(r.returncode == 0, "trace-cmd report reads the recording: rc %d %s" % (r.returncode, r.stderr[-300:]))
    return r.stdout.splitlines()


def session(e, sid):
    return e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]


def marker(e, sid, text, token="admin"):
    return e.request("POST", "/api/v1/sessions/%d/markers" % sid, body={"text": text}, token=token)


def problem(st, h, data, status, what):
    check(st == status and h.get("content-type", "").startswith("application/problem+json"),
          "%s: %d %s, want %d problem+json: %r" % (what, st, h.get("content-type"), status, data[:300]))


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
    bufs = [r["EventData"].get("buf", "").rstrip("\n") for r in got]
    check(bufs == texts, "the stream has the markers, in order: %r" % bufs)
    check(all(r["System"]["Provider"]["Name"] == "ftrace" and r["System"].get("EventName") == "print" for r in got),
          "as ftrace/print events: %r" % [r["System"] for r in got][:1])
    st, h, _ = e.request("POST", "/api/v1/sessions/%d/stop" % sid)
    code, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true&timeout_s=60" % sid, token="reader", timeout=120)
    check(code == 200, "the recording downloads: %d %r" % (code, data[:300]))
    lines = report(data)
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


def main():
    if os.geteuid() != 0:
        check(False, "these tests need root (tracefs)")
        done()
    with Etwd() as e:
        test_markers(e)
    done()


if __name__ == "__main__":
    main()
