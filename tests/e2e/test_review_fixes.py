"""Defects found by following README.md as a new user (the review of 2026-11-29), each checked
against a spawned etwd over real TLS, on the real kernel's tracefs:
- etwd remote: `system:a,b` (one PROVIDER argument, events separated by ',', as the server's
  provider strings) becomes two events, not one event named "a,b".
- GET /sessions/{id}/file?wait=true of a session that has stopped already serves the file (it
  was a 400 "no end to wait for" when the session had no duration_s).
- A full --max-sessions whose sessions have ended says so (they keep their slot until DELETE),
  since the README's one-call recording used to leave its session behind.
- A stream that ended at its ?limit=N counts no subscriber loss (the README's first stream,
  limit=3, used to leave loss.subscribers > 0: what its queue held after the limit).
- etwd remote record's progress and `remote sessions` count a file session's events read (they
  showed stats.events, always 0 for mode file).
- The start-up banner's "`etwd tokens` shows them" names --state-dir when the state directory is
  not the default one (`etwd tokens` alone showed another directory's tokens).
- An upload named like PerfView's `x.etl.zip` (or `x.etl.gz`, `x.etlgz`) is stored as `x.etl`
  (it was a 400 "not a valid file name", though zip and gzip bodies are unpacked).
- The recordings list names the flight session a snapshot belongs to (it said "session": null
  while the session was still there).
- A refused WebSocket upgrade's log line says why (it gave only the status: a bearer client of
  websocket-client, which sends `Origin: http://HOST` by default, could not tell what was wrong).
- `etwd convert` (and an upload) of a Linux recording says it is a trace-cmd file, not just
  "bad first buffer header".
- `etwd convert` with filters that match nothing says so on stderr (it wrote nothing, silently).
- /metrics has etwd_session_read_events_total: a file-mode session's events_total is always 0.
- A flight session shows `snapshots` and `last_snapshot` (the recording its stop trigger wrote
  was findable only by listing every recording).
- An unknown spec member close to a known one says which was likely meant ("duration" →
  "duration_s").
- A linux provider string (`sched:sched_switch`) in an etl replay's spec says it is the linux
  form (it said only "Level must be 0-255").
- An `etwd convert` usage error prints the error and the synopsis, not all 30 lines of --help.
- The harness's trace_report reads trace-cmd's output whatever its bytes (a program path that is
  not UTF-8 made test_onecall fail now and then with UnicodeDecodeError).
- etwd remote's argument errors say what is wrong ("-o FILE is required"), not "wrong arguments".
- The page's upload picker offers .zip/.gz/.etlgz files too (the server unpacks them).
- etwd remote snapshot prints the recording it made (and downloads it with -o FILE): it said
  only "done", so the CLI could neither name nor fetch the snapshot.
- A replay whose file was deleted from the data directory answers a new subscriber with the
  file's problem (it said "cannot open a consumer of the session's stream (is its broker
  reachable?)", a NATS message, for an etl session)."""
import json
import os
import re
import shutil
import subprocess
import time

from etwd_harness import BIN, CORPUS, Etwd, check, done


def remote(e, args, timeout=120):
    """`etwd remote …` against @e (its certificate as the CA); returns (rc, stdout, stderr)."""
    tok = os.path.join(e.state, "tokens")
    cmd = [BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", tok,
           "--cacert", os.path.join(e.state, "cert.pem")]
    p = subprocess.run(cmd + args, capture_output=True, timeout=timeout, env=e.env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def test_remote_event_list(e):
    """README: PROVIDER is `system:event` …; the server's provider strings take
    `system:event[,event…]`. The remote CLI used to send events ["a,b"] (400 unknown event)."""
    p = subprocess.run([BIN, "remote", "record", "sched:sched_switch,sched_wakeup", "sched:sched_waking",
                        "--duration", "2", "--dry-run"], capture_output=True, timeout=60)
    want = {"providers": [{"name": "sched", "events": ["sched_switch", "sched_wakeup", "sched_waking"]}],
            "mode": "file", "duration_s": 2}
    check(p.returncode == 0 and json.loads(p.stdout or b"null") == want,
          "remote system:a,b: %s %s" % (p.stdout, p.stderr))
    p = subprocess.run([BIN, "remote", "stream", "sched:,", "--dry-run"], capture_output=True, timeout=60)
    check(p.returncode == 2 and b"no event name" in p.stderr, "remote sched:, refused: %d %s" % (p.returncode, p.stderr))
    # against the server: the stream's session is created (it was a 400) and gets an exec
    proc = subprocess.Popen([BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file",
                             os.path.join(e.state, "tokens"), "--cacert", os.path.join(e.state, "cert.pem"),
                             "stream", "sched:sched_process_exec,sched_process_exit", "--limit", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e.env)
    deadline = time.time() + 60
    while proc.poll() is None and time.time() < deadline:
        subprocess.run(["/bin/true"])
        time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    so, se = proc.communicate()
    ev = json.loads(so.splitlines()[0]) if so.strip() else {}
    check(proc.returncode == 0 and ev.get("System", {}).get("EventName") in ("sched_process_exec", "sched_process_exit"),
          "remote stream sched:a,b: rc %s %s %s" % (proc.returncode, so[:300], se[-300:]))


def test_wait_on_stopped(e):
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"], "mode": "file"},
                      expect=201)
    sid = d["id"]
    subprocess.run(["/bin/true"])
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % sid, token="reader")
    check(st == 200 and data[:10] == b"\x17\x08\x44tracing", "wait=true on a stopped session: %d %r" % (st, data[:200]))
    # a running one without duration_s still needs timeout_s
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"], "mode": "file"},
                      expect=201)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % d["id"], token="reader")
    check(st == 400 and b"timeout_s" in data, "wait=true on a running session without duration_s: %d %r" % (st, data[:200]))
    e.json("DELETE", "/api/v1/sessions/%d" % d["id"], expect=204)
    e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)


def test_limit_names_ended():
    with Etwd(args=["--max-sessions", "2"]) as e:
        for _ in range(2):
            st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"],
                                                           "mode": "file", "duration_s": 0.2}, expect=201)
            st, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % d["id"], token="reader")
            check(st == 200, "one-call recording: %d" % st)
        st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"]})
        detail = (d or {}).get("detail", "") if isinstance(d, dict) else ""
        check(st == 429 and "2 of them have ended" in detail and "DELETE" in detail,
              "429 names the ended sessions: %d %r" % (st, d))
        e.json("DELETE", "/api/v1/sessions/1", expect=204)
        st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"]}, expect=201)


def test_limit_no_loss(e):
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    try:
        st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_switch,sched_wakeup,sched_waking"]},
                          expect=201)
        sid = d["id"]
        for n in (3, 500):
            got = [r for r in e.ndjson("/api/v1/sessions/%d/events?limit=%d" % (sid, n))]
            check(len([r for r in got if "seq" in r]) == n, "limit=%d: %d records" % (n, len(got)))
        time.sleep(0.5)
        st, h, d = e.json("GET", "/api/v1/sessions/%d" % sid, expect=200)
        check(d["stats"]["loss"]["subscribers"] == 0, "loss after limit streams: %r" % d["stats"]["loss"])
        e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)
    finally:
        for p in busy:
            p.kill()
            p.wait()


def test_remote_file_events(e):
    tmp = os.path.join(e.state, "rec.dat")
    busy = subprocess.Popen(["sh", "-c", "while :; do /bin/true; done"])
    try:
        rc, so, se = remote(e, ["record", "sched:sched_switch,sched_process_exec", "--duration", "2", "-o", tmp, "--keep"])
    finally:
        busy.kill()
        busy.wait()
    counts = [int(n) for n in re.findall(r"record: session \d+ \w+, \d+ s, (\d+) events", se)]
    check(rc == 0 and counts and counts[-1] > 0, "record progress counts the events read: %d %r" % (rc, se[-600:]))
    m = re.search(r"record: session (\d+)", se)
    rc, so, se2 = remote(e, ["sessions"])
    row = [l.split("\t") for l in so.splitlines() if m and l.startswith(m.group(1) + "\t")]
    check(rc == 0 and row and row[0][2] == "file" and int(row[0][4]) > 0, "sessions: events of a file session: %r" % so)


def test_banner_tokens_hint(e):
    m = re.search(r"^tokens: .*`(etwd tokens[^`]*)` shows them", e.stdout, re.M)
    check(m and m.group(1) == "etwd tokens --state-dir " + e.state, "banner hint: %r" % e.stdout)
    if m:  # the hint, run as printed, shows this server's admin token
        p = subprocess.run([BIN] + m.group(1).split()[1:], capture_output=True, timeout=60, env=e.env)
        check(e.tokens["admin"] in p.stdout.decode(), "the hint shows the tokens: %r" % p.stdout)
    # with ETWD_STATE_DIR naming it, the state dir is the default one: no --state-dir needed
    env = dict(os.environ, ETWD_STATE_DIR=e.state)
    with Etwd(state=e.state, env=env) as e2:
        check("`etwd tokens` shows them" in e2.stdout, "banner with ETWD_STATE_DIR: %r" % e2.stdout)


def test_upload_archive_names(e):
    gc = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/gcevents.etl.zip")
    cld = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/programs/OneDrive/Local/Microsoft/"
                       "OneDrive/logs/Personal/CldFlt0-2025-12-21-121418.etlgz")
    for path, name, want in ((gc, "gc.etl.zip", "gc.etl"), (gc, "GC2.ETL.ZIP", "GC2.ETL"), (cld, "cld.etlgz", "cld.etl")):
        with open(path, "rb") as f:
            st, h, d = e.json("POST", "/api/v1/files?name=" + name, f.read(), ctype="application/octet-stream")
        check(st == 201 and isinstance(d, dict) and d.get("name") == want, "upload %s: %d %r" % (name, st, d))
        st, h, data = e.request("GET", "/api/v1/files/%s/events?limit=1" % want, token="reader")
        check(st == 200 and b'"seq":1' in data, "decode of %s: %d %r" % (want, st, data[:200]))
    st, h, d = e.json("POST", "/api/v1/files?name=x.zip", b"PK", ctype="application/octet-stream")
    check(st == 400 and "name" in str(d), "x.zip still refused: %d %r" % (st, d))


def test_snapshot_owner(e):
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"], "mode": "flight"},
                      expect=201)
    sid = d["id"]
    names = []
    for _ in range(2):
        subprocess.run(["/bin/true"])
        st, h, d = e.json("POST", "/api/v1/sessions/%d/snapshot" % sid, expect=201)
        names.append((d or {}).get("recording_name"))
    st, h, recs = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    owners = {r["name"]: r["session"] for r in recs if r["name"] in names}
    check(owners == {n: sid for n in names}, "snapshots' session: %r (want %d)" % (owners, sid))
    e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)
    st, h, recs = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    owners = {r["name"]: r["session"] for r in recs if r["name"] in names}
    check(owners == {n: None for n in names}, "snapshots of a deleted session: %r" % owners)


def test_ws_refusal_logged(e):
    import websocket
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"]}, expect=201)
    # what websocket-client sends unless told otherwise: Origin http://HOST:PORT (not https)
    try:
        e.ws("/api/v1/sessions/%d/events" % d["id"], origin="http://127.0.0.1:%d" % e.port).close()
        check(False, "a foreign Origin was accepted")
    except websocket.WebSocketBadStatusException as ex:
        check(ex.status_code == 403, "refusal status %d" % ex.status_code)
    deadline = time.time() + 10
    while time.time() < deadline and "detail=\"WebSocket upgrade from a foreign Origin" not in e.stderr():
        time.sleep(0.1)
    line = [l for l in e.stderr().splitlines() if "websocket refused" in l]
    check(line and "detail=\"WebSocket upgrade from a foreign Origin refused\"" in line[-1], "log line: %r" % line[-1:])
    e.json("DELETE", "/api/v1/sessions/%d" % d["id"], expect=204)


def test_convert_trace_dat(e):
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"], "mode": "file",
                                                   "duration_s": 0.3}, expect=201)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file?wait=true" % d["id"], token="reader")
    path = os.path.join(e.state, "linux.dat")
    with open(path, "wb") as f:
        f.write(data)
    p = subprocess.run([BIN, "convert", path], capture_output=True, timeout=60)
    # convert now reads a Linux trace.dat itself (e2e.test_convert_dat covers its output)
    lines = p.stdout.decode(errors="replace").splitlines()
    check(p.returncode == 0 and all(json.loads(l).get("System") for l in lines),
          "convert trace.dat: %d %r %r" % (p.returncode, p.stderr[-300:], p.stdout[:200]))
    st, h, d = e.json("POST", "/api/v1/files?name=linux.etl", data, ctype="application/octet-stream")
    check(st == 415 and "trace-cmd" in str(d), "upload of a trace.dat: %d %r" % (st, d))


def test_convert_no_match():
    amsi = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/AMSITrace.etl")
    p = subprocess.run([BIN, "convert", amsi, "--provider", "NoSuchProvider"], capture_output=True, timeout=60)
    check(p.returncode == 0 and not p.stdout and b"no event matched the filters" in p.stderr,
          "convert, no match: %d %r %r" % (p.returncode, p.stdout[:100], p.stderr))
    p = subprocess.run([BIN, "convert", amsi, "--provider", "AmsiTrace", "--limit", "1"], capture_output=True, timeout=60)
    check(p.returncode == 0 and p.stdout.count(b"\n") == 1 and b"no event matched" not in p.stderr,
          "convert, a match: %d %r" % (p.returncode, p.stderr))
    p = subprocess.run([BIN, "convert", amsi, "--provider", "NoSuchProvider", "--quiet"], capture_output=True, timeout=60)
    check(p.returncode == 0 and not p.stderr, "convert --quiet, no match: %r" % p.stderr)


def test_metrics_read_events(e):
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_switch"], "mode": "file",
                                                   "duration_s": 0.5}, expect=201)
    sid = d["id"]
    e.request("GET", "/api/v1/sessions/%d/file?wait=true" % sid, token="reader")
    st, h, body = e.request("GET", "/metrics", token="reader")
    text = body.decode()
    m = re.search(r'^etwd_session_read_events_total\{session="%d"\} (\d+)$' % sid, text, re.M)
    ev = re.search(r'^etwd_session_events_total\{session="%d"\} (\d+)$' % sid, text, re.M)
    check(m and int(m.group(1)) > 0 and ev and ev.group(1) == "0",
          "read_events_total of a file session: %r %r" % (m and m.group(0), ev and ev.group(0)))
    check("# TYPE etwd_session_read_events_total counter" in text, "its TYPE line")
    e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)


def test_flight_last_snapshot(e):
    prog = os.path.join(e.state, "etwd-review-trigger")
    shutil.copy("/bin/true", prog)
    spec = {"providers": ["sched:sched_process_exec"], "mode": "flight",
            "stop_when": {"provider": "sched", "event": "sched_process_exec", "filter": {"filename": prog}}}
    st, h, d = e.json("POST", "/api/v1/sessions", spec, expect=201)
    sid = d["id"]
    check(d.get("snapshots") == 0 and "last_snapshot" not in d, "a new flight session: %r" % d)
    st, h, snap = e.json("POST", "/api/v1/sessions/%d/snapshot" % sid, expect=201)
    st, h, d = e.json("GET", "/api/v1/sessions/%d" % sid, expect=200)
    check(d.get("snapshots") == 1 and d.get("last_snapshot") == {"recording_name": snap["recording_name"],
                                                                  "recording_url": snap["recording_url"]},
          "after a snapshot: %r vs %r" % (d.get("last_snapshot"), snap))
    deadline = time.time() + 30
    while time.time() < deadline and d.get("state") == "running":
        subprocess.run([prog])
        time.sleep(0.3)
        st, h, d = e.json("GET", "/api/v1/sessions/%d" % sid, expect=200)
    last = d.get("last_snapshot") or {}
    check(d.get("stop_reason") == "trigger" and d.get("snapshots") == 2 and last.get("recording_name") not in
          (None, snap["recording_name"]), "after the trigger: %r" % d)
    st, h, data = e.request("GET", last.get("recording_url", "/x"), token="reader")
    check(st == 200 and prog.encode() in data, "the trigger's snapshot holds the exec: %d, %d bytes" % (st, len(data)))
    e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"]}, expect=201)
    check("snapshots" not in d, "a realtime session has no snapshots member: %r" % d)
    e.json("DELETE", "/api/v1/sessions/%d" % d["id"], expect=204)


def test_unknown_member_hint(e):
    for body, want in (({"providers": ["sched"], "duration": 3}, 'unknown member "duration" at / (did you mean "duration_s"?)'),
                       ({"provider": ["sched"]}, '(did you mean "providers"?)'),
                       ({"providers": [{"name": "sched", "event": ["sched_switch"]}]}, '(did you mean "events"?)'),
                       ({"providers": ["sched"], "zzz": 1}, 'unknown member "zzz" at /')):
        st, h, d = e.json("POST", "/api/v1/sessions", body)
        detail = d.get("detail", "") if isinstance(d, dict) else ""
        check(st == 400 and want in detail and (want.endswith("?)") or "did you mean" not in detail),
              "hint for %r: %d %r" % (body, st, detail))
    with open(os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/lxcore_kernel.etl"), "rb") as f:
        e.json("POST", "/api/v1/files?name=lx.etl", f.read(), ctype="application/octet-stream", expect=201)
    st, h, d = e.json("POST", "/api/v1/sessions", {"files": ["lx.etl"], "providers": ["sched:sched_switch"]})
    check(st == 400 and "linux backend's form" in d.get("detail", ""), "etl + system:event: %d %r" % (st, d))
    st, h, d = e.json("POST", "/api/v1/sessions", {"files": ["lx.etl"], "providers": ["X:abc:1"]})
    check(st == 400 and "Level must be" in str(d) and "linux" not in str(d), "etl + bad level: %d %r" % (st, d))


def test_convert_usage_error():
    amsi = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/AMSITrace.etl")
    p = subprocess.run([BIN, "convert", amsi, "--limit", "0"], capture_output=True, timeout=60)
    err = p.stderr.decode()
    check(p.returncode == 2 and "--limit 0: want a positive number" in err and "--help" in err
          and len(err.splitlines()) <= 6, "usage error: %d %r" % (p.returncode, err))
    p = subprocess.run([BIN, "convert", "--help"], capture_output=True, timeout=60)
    check(p.returncode == 0 and b"--stackwalk-events  also write" in p.stdout, "--help: %d %r" % (p.returncode, p.stdout[-300:]))


def test_trace_report_bytes(e):
    from etwd_harness import trace_report
    d = os.path.join(e.state.encode(), b"\xe9t\xe9")
    os.mkdir(d)
    prog = os.path.join(d, b"true")
    shutil.copy(b"/bin/true", prog)
    st, h, s = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"], "mode": "file"},
                      expect=201)
    subprocess.run([prog])
    e.json("POST", "/api/v1/sessions/%d/stop" % s["id"], expect=200)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file" % s["id"], token="reader")
    try:
        lines = trace_report(data)
        check(any("\ufffdt\ufffd/true" in l for l in lines), "the exec is in the report: %r" % lines[:5])
    except UnicodeDecodeError as ex:
        check(False, "trace_report: %s" % ex)
    e.json("DELETE", "/api/v1/sessions/%d" % s["id"], expect=204)


def test_remote_usage_messages():
    base = [BIN, "remote", "--url", "https://127.0.0.1:1", "--token-file", "/nonexistent"]
    for args, want in ((["record", "sched"], "record: -o FILE is required"),
                       (["record", "-o", "x.dat"], "record: give at least one PROVIDER"),
                       (["stream"], "stream: give PROVIDER... or --session ID"),
                       (["stream", "sched", "--session", "3"], "not both"),
                       (["stop"], "stop: want a session ID"),
                       (["marker", "3"], "marker: want a session ID and a TEXT"),
                       (["sessions", "x"], "sessions: takes no arguments")):
        p = subprocess.run(base + args, capture_output=True, timeout=60)
        err = p.stderr.decode()
        check(p.returncode == 2 and want in err and "wrong arguments" not in err, "remote %s: %d %r" % (args, p.returncode, err))


def test_remote_snapshot(e):
    st, h, d = e.json("POST", "/api/v1/sessions", {"providers": ["sched:sched_process_exec"], "mode": "flight"},
                      expect=201)
    sid = d["id"]
    subprocess.run(["/bin/true"])
    rc, so, se = remote(e, ["snapshot", str(sid)])
    row = so.strip().split("\t")
    check(rc == 0 and len(row) == 3 and row[2] == "/api/v1/recordings/" + row[0] and int(row[1]) > 0,
          "snapshot prints the recording: %d %r %r" % (rc, so, se))
    out = os.path.join(e.state, "snap.dat")
    subprocess.run(["/bin/true"])
    rc, so, se = remote(e, ["--json", "snapshot", str(sid), "-o", out])
    j = json.loads(so) if rc == 0 and so.strip() else {}
    st, h, data = e.request("GET", j.get("recording_url", "/x"), token="reader")
    check(rc == 0 and st == 200 and os.path.exists(out) and open(out, "rb").read() == data and data[:3] == b"\x17\x08\x44",
          "snapshot -o: rc %d %r, %d bytes" % (rc, se[-300:], len(data)))
    e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)


def test_replay_deleted_file(e):
    with open(os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/lxcore_kernel.etl"), "rb") as f:
        e.json("POST", "/api/v1/files?name=gone.etl", f.read(), ctype="application/octet-stream", expect=201)
    st, h, d = e.json("POST", "/api/v1/sessions", {"files": ["gone.etl"]}, expect=201)
    sid = d["id"]
    got = [r for r in e.ndjson("/api/v1/sessions/%d/events?limit=1" % sid)]
    check(len(got) == 1, "first pass: %r" % got)
    e.json("DELETE", "/api/v1/files/gone.etl", expect=409)  # the API refuses while a session replays it
    os.unlink(os.path.join(e.state, "files", "gone.etl"))  # removed behind the server's back
    st, h, data = e.request("GET", "/api/v1/sessions/%d/events?limit=1" % sid, token="reader")
    text = data.decode(errors="replace")
    check(st in (404, 422, 500) and "gone.etl" in text and "broker" not in text and e.state not in text,
          "a pass over a deleted file: %d %s" % (st, text[:300]))
    ws = e.ws("/api/v1/sessions/%d/events" % sid)  # over a WebSocket: the close frame's reason
    op, data = ws.recv_data(control_frame=True)
    ws.close()
    check(op == 8 and data[:2] == b"\x03\xf3" and b"gone.etl" in data and b"broker" not in data
          and e.state.encode() not in data, "WebSocket close: %r %r" % (op, data))
    e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)


def main():
    test_remote_usage_messages()
    test_convert_usage_error()
    test_convert_no_match()
    test_limit_names_ended()
    with Etwd() as e:
        test_remote_event_list(e)
        test_wait_on_stopped(e)
        test_limit_no_loss(e)
        test_remote_file_events(e)
    with Etwd() as e:
        test_banner_tokens_hint(e)
        test_upload_archive_names(e)
        st, h, page = e.request("GET", "/", token=None)
        check(st == 200 and b'id="upload-file" accept=".etl,.zip,.gz,.etlgz"' in page, "upload picker: %r" %
              re.findall(rb'<input type="file"[^>]*>', page))
        test_snapshot_owner(e)
        test_ws_refusal_logged(e)
        test_convert_trace_dat(e)
        test_metrics_read_events(e)
        test_flight_last_snapshot(e)
        test_unknown_member_hint(e)
        test_trace_report_bytes(e)
        test_remote_snapshot(e)
        test_replay_deleted_file(e)
    done()


if __name__ == "__main__":
    main()
