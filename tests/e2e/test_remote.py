"""etwd remote (issue 20 item 8): the command-line client against a spawned etwd over real TLS —
a one-call recording of a live Linux session (trace-cmd reads it, it holds the exec of a program
run meanwhile, it is byte-identical to the REST download), a download broken by a real TCP cut
and resumed, providers/sessions/stream (--limit, --session, csv, Ctrl-C), stop, marker/snapshot,
and the exit codes and messages for wrong fingerprint, wrong CA, bad token, unreachable host and
usage errors."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from etwd_harness import BIN, Etwd, check, done, forward, free_port


def remote_ready(e, tmp):
    """Sets e.fp (the server's certificate fingerprint, from its banner) and e.tokfile (a file in
    @tmp holding the admin token) for remote()."""
    e.fp = re.search(r"fingerprint: ([0-9A-F:]+)", e.stdout).group(1)
    e.tokfile = os.path.join(tmp, "token")
    with open(e.tokfile, "w") as f:
        f.write(e.tokens["admin"] + "\n")


def remote(e, args, fp=None, token=None, url=None, timeout=120, cacert=None):
    """Run `etwd remote …`; returns (rc, stdout, stderr)."""
    cmd = [BIN, "remote", "--url", url or "https://127.0.0.1:%d" % e.port, "--token-file", token or e.tokfile]
    if cacert:
        cmd += ["--cacert", cacert]
    elif fp is not False:
        cmd += ["--fingerprint", fp or e.fp]
    p = subprocess.run(cmd + args, capture_output=True, timeout=timeout, env=e.env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


class CutProxy:
    """A TCP forwarder to 127.0.0.1:@port that closes the first connection once it has passed
    @cut bytes from the server to the client (a real broken download; TLS passes through)."""

    def __init__(self, port, cut):
        self.port, self.cut, self.cuts = port, cut, 0
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.lport = self.ls.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        first = True
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self.pipe, args=(c, s, None), daemon=True).start()
            threading.Thread(target=self.pipe, args=(s, c, self.cut if first else None), daemon=True).start()
            first = False

    def pipe(self, a, b, cut):
        if forward(a, b, cut=cut):
            self.cuts += 1
        a.close()
        b.close()

def run_marker_program(tmp, name, stop):
    """Copies /bin/true to a file named @name and runs it every 0.2 s until @stop is set."""
    prog = os.path.join(tmp, name)
    shutil.copy("/bin/true", prog)
    while not stop.is_set():
        subprocess.run([prog])
        time.sleep(0.2)


def session_id(stderr):
    m = re.search(r"session (\d+)", stderr)
    return int(m.group(1)) if m else -1


def test_record(e, tmp):
    out = os.path.join(tmp, "rec.dat")
    stop = threading.Event()
    t = threading.Thread(target=run_marker_program, args=(tmp, "etwdremotemark", stop))
    t.start()
    rc, so, se = remote(e, ["record", "sched:sched_process_exec", "--duration", "3s", "-o", out, "--keep"])
    stop.set()
    t.join()
    check(rc == 0, "record: rc %d: %s" % (rc, se))
    sid = session_id(se)
    check("recording for 3 s" in se and re.search(r"rec\.dat: \d+ bytes", se), "record: progress on stderr: %s" % se)
    check(not os.path.exists(out + ".part"), "record: the .part file is renamed")
    rep = subprocess.run(["trace-cmd", "report", out], capture_output=True, timeout=120)
    text = rep.stdout.decode(errors="replace")
    check(rep.returncode == 0, "trace-cmd report: %s" % rep.stderr[-500:])
    check("etwdremotemark" in text and "sched_process_exec" in text,
          "the recording holds the marker program's exec: %s" % text[-1500:])
    st, h, body = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader")
    with open(out, "rb") as f:
        mine = f.read()
    check(st == 200 and body == mine, "record: the file equals the REST download (%d, %d vs %d bytes)"
          % (st, len(mine), len(body)))
    return sid, mine


def test_resume(e, tmp, size):
    """A download cut by the network resumes with Range + If-Range and gives the same bytes."""
    cut = 60000  # (a trace.dat of a 1 s recording is over 100 kB: its headers and per-CPU pages)
    px = CutProxy(e.port, cut)
    out = os.path.join(tmp, "resumed.dat")
    rc, so, se = remote(e, ["record", "sched:sched_process_exec", "--duration", "1", "-o", out, "--keep"],
                        url="https://127.0.0.1:%d" % px.lport)
    check(rc == 0, "resume: rc %d: %s" % (rc, se))
    check(px.cuts == 1 and "resuming" in se, "resume: the connection was cut once and resumed: cuts %d, %s"
          % (px.cuts, se))
    sid = session_id(se)
    st, h, body = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader")
    with open(out, "rb") as f:
        mine = f.read()
    log = e.stderr()
    check(re.search(r"path=/api/v1/sessions/%d/file status=206" % sid, log),
          "resume: the second request was a Range request answered 206: %s" % log[-1500:])
    check(st == 200 and body == mine, "resume: the same bytes as the REST download "
          "(%d vs %d bytes, cut at %d)" % (len(mine), len(body), cut))
    px.ls.close()


def test_record_interrupted(e, tmp):
    """Ctrl-C during a recording stops it early; the file is still downloaded (exit 0)."""
    out = os.path.join(tmp, "early.dat")
    p = subprocess.Popen([BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", e.tokfile,
                          "--fingerprint", e.fp, "record", "sched:sched_process_exec", "--duration", "120",
                          "-o", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e.env)
    first = p.stderr.readline()  # "session N recording for 120 s"
    time.sleep(1)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    try:
        so, se = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
    se = first.decode(errors="replace") + se.decode(errors="replace")
    rep = subprocess.run(["trace-cmd", "report", out], capture_output=True, timeout=120)
    check(p.returncode == 0 and time.time() - t0 < 30 and rep.returncode == 0,
          "record + Ctrl-C: rc %r after %.1f s, trace-cmd rc %d: %s" % (p.returncode, time.time() - t0, rep.returncode, se))
    sid = session_id(se)
    check(sid > 0 and sid not in live_ids(e), "record + Ctrl-C: the session %d is deleted after the download" % sid)


def test_lists(e, sid):
    rc, so, se = remote(e, ["providers", "sched"])
    check(rc == 0 and re.search(r"^sched\t\d+\tlinux", so, re.M), "providers sched: %d %s %s" % (rc, so, se))
    rc, so, se = remote(e, ["--json", "providers"])
    check(rc == 0 and any(p["name"] == "syscalls" for p in json.loads(so)), "providers --json: %s" % so[:300])
    rc, so, se = remote(e, ["sessions"])
    check(rc == 0 and re.search(r"^%d\tstopped\tfile\tlinux\t\d+\tsched$" % sid, so, re.M), "sessions: %s" % so)


def live_ids(e):
    st, h, d = e.json("GET", "/api/v1/sessions", token="reader")
    return [s["id"] for s in (d if isinstance(d, list) else d.get("sessions", []))]


def test_stream(e):
    rc, so, se = remote(e, ["stream", "sched:sched_switch", "--limit", "5"])
    lines = so.splitlines()
    check(rc == 0 and len(lines) == 5, "stream --limit 5: rc %d, %d lines: %s" % (rc, len(lines), se))
    evs = [json.loads(l) for l in lines]
    check(all(ev["System"]["EventName"] == "sched_switch" for ev in evs), "stream: sched_switch events only")
    sid = session_id(se)
    check(sid > 0 and sid not in live_ids(e), "stream: its own session %d is deleted at the end" % sid)

    rc, so, se = remote(e, ["stream", "sched:sched_switch", "--limit", "3", "--format", "csv"])
    rows = so.splitlines()
    check(rc == 0 and len(rows) == 4 and rows[0].startswith("seq,TimeCreated,Provider,EventName")
          and all(',"sched","sched_switch",' in r for r in rows[1:]), "stream csv: %s" % so)

    # attach to a session made with REST, with a stream filter; the session stays
    st, h, s = e.json("POST", "/api/v1/sessions", {"providers": [{"name": "sched"}], "mode": "realtime"}, expect=201)
    rc, so, se = remote(e, ["stream", "--session", str(s["id"]), "--filter", "event=sched_wakeup", "--limit", "3"])
    evs = [json.loads(l) for l in so.splitlines()]
    check(rc == 0 and len(evs) == 3 and all(ev["System"]["EventName"] == "sched_wakeup" for ev in evs),
          "stream --session --filter: rc %d %s" % (rc, so[:500]))
    check(s["id"] in live_ids(e), "stream --session leaves the session alone")
    e.request("DELETE", "/api/v1/sessions/%d" % s["id"])

    # the reader of stdout goes away (`| head -3`): the stream ends, its session is deleted, exit 0
    p = subprocess.Popen([BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", e.tokfile,
                          "--fingerprint", e.fp, "stream", "sched:sched_switch"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e.env)
    got = [p.stdout.readline() for _ in range(3)]
    p.stdout.close()
    try:
        err = p.stderr.read().decode(errors="replace")
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    sid = session_id(err)
    check(all(g.startswith(b'{"seq":') for g in got) and p.returncode == 0 and sid > 0 and sid not in live_ids(e),
          "stream | head -3: rc %r, session %d gone: %s" % (p.returncode, sid, err))

    # Ctrl-C: the stream ends, its session is deleted, exit 0
    p = subprocess.Popen([BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", e.tokfile,
                          "--fingerprint", e.fp, "stream", "sched:sched_switch"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e.env)
    first = p.stdout.readline()
    p.send_signal(signal.SIGINT)
    try:
        rest, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
    err = err.decode(errors="replace")
    check(first.startswith(b'{"seq":') and p.returncode == 0, "Ctrl-C: rc %r, first %r, %s" % (p.returncode, first[:80], err))
    sid = session_id(err)
    check(sid > 0 and sid not in live_ids(e), "Ctrl-C: the stream's session %d is deleted" % sid)


def test_actions(e, sid):
    st, h, s = e.json("POST", "/api/v1/sessions", {"providers": [{"name": "sched", "events": ["sched_process_exec"]}],
                                                   "mode": "realtime"}, expect=201)
    st, h, api = e.json("GET", "/api/v1/openapi.json", token="reader")
    paths = api.get("paths", {}) if isinstance(api, dict) else {}
    for cmd, route, word in (("marker", "markers", "markers"), ("snapshot", "snapshot", "snapshots")):
        args = [cmd, str(s["id"])] + (["hello from etwd remote"] if cmd == "marker" else [])
        rc, so, se = remote(e, args)
        if "/api/v1/sessions/{id}/%s" % route in paths:  # (a realtime session may have no snapshot: 4xx)
            check(rc == 0 or (cmd == "snapshot" and rc == 6), "%s on a server with the route: rc %d %s" % (cmd, rc, se))
        else:
            check(rc == 6 and "this server has no %s" % word in se, "%s without the route: rc %d %s" % (cmd, rc, se))
    rc, so, se = remote(e, ["marker", "999999", "x"])
    check(rc == 6 and "has no markers" not in se and "answered 404" in se,
          "marker on a missing session: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["stop", str(s["id"])])
    st, h, got = e.json("GET", "/api/v1/sessions/%d" % s["id"], token="reader")
    check(rc == 0 and got["state"] == "stopped", "stop: rc %d, state %s, %s" % (rc, got.get("state"), se))
    rc, so, se = remote(e, ["stop", "999999"])
    check(rc == 6 and "404" in se, "stop on a missing session: rc %d %s" % (rc, se))
    e.request("DELETE", "/api/v1/sessions/%d" % s["id"])


def test_errors(e, tmp):
    bad_fp = "00" + e.fp[2:] if not e.fp.startswith("00") else "11" + e.fp[2:]
    rc, so, se = remote(e, ["sessions"], fp=bad_fp)
    check(rc == 4 and "fingerprint" in se and e.fp in se, "wrong fingerprint: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["sessions"], fp=False)  # the system CAs do not know etwd's certificate
    check(rc == 4 and "TLS verification failed" in se, "unknown CA: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["sessions"], cacert=os.path.join(e.state, "cert.pem"))
    check(rc == 0, "--cacert with the server's certificate: rc %d %s" % (rc, se))
    badtok = os.path.join(tmp, "badtoken")
    with open(badtok, "w") as f:
        f.write("not-a-token\n")
    rc, so, se = remote(e, ["sessions"], token=badtok)
    check(rc == 5 and "authentication failed (401)" in se, "bad token: rc %d %s" % (rc, se))
    rdr = os.path.join(tmp, "reader")
    with open(rdr, "w") as f:
        f.write(e.tokens["reader"] + "\n")
    rc, so, se = remote(e, ["stop", "1"], token=rdr)
    check(rc == 5 and "authentication failed (403)" in se, "reader token stopping: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["sessions"], url="https://127.0.0.1:%d" % free_port())
    check(rc == 3 and "cannot reach" in se, "unreachable: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["record", "sched:sched_process_exec", "--duration", "1"])  # no -o
    check(rc == 2, "usage: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["frobnicate"])
    check(rc == 2 and "unknown command" in se, "unknown command: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["stream", "--session", "999999", "--limit", "1"])
    check(rc == 6 and "answered 404: " in se and not so, "stream of a missing session: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["stream", "nosuchprovider:ev", "--limit", "1"])
    check(rc == 6 and "400" in se, "unknown provider refused: rc %d %s" % (rc, se))


def test_provider_strings():
    """PROVIDER arguments become the JSON spec (--dry-run prints it and sends nothing)."""
    args = ["sched:sched_switch", "sched:sched_wakeup", "Microsoft-Windows-Kernel-File:0x4:12,14:0x10:0x3",
            "{9E814AAD-3204-11D2-9A82-006008A86939}:5", "syscalls:*", "Foo::7", "irq"]
    p = subprocess.run([BIN, "remote", "record"] + args + ["--duration", "2m", "--dry-run"], capture_output=True, timeout=60)
    want = {"providers": [{"name": "sched", "events": ["sched_switch", "sched_wakeup"]},
                          {"name": "Microsoft-Windows-Kernel-File", "level": 4, "event_ids": [12, 14],
                           "keywords_any": "0x10", "keywords_all": "0x3"},
                          {"name": "{9E814AAD-3204-11D2-9A82-006008A86939}", "level": 5},
                          {"name": "syscalls"}, {"name": "Foo", "event_ids": [7]}, {"name": "irq"}],
            "mode": "file", "duration_s": 120}
    check(p.returncode == 0 and json.loads(p.stdout) == want, "provider strings: %s %s" % (p.stdout, p.stderr))
    for bad in ("Name:300", "Name:1:x", "Name:1:2:3:4:5", "a:b:c"):
        p = subprocess.run([BIN, "remote", "stream", bad, "--dry-run"], capture_output=True, timeout=60)
        check(p.returncode == 2 and b"provider" in p.stderr, "bad provider string %s: rc %d %s" % (bad, p.returncode, p.stderr))


def main():
    test_provider_strings()
    tmp = tempfile.mkdtemp(prefix="etwd-remote-")
    try:
        with Etwd() as e:
            remote_ready(e, tmp)
            sid, data = test_record(e, tmp)
            test_resume(e, tmp, len(data))
            test_record_interrupted(e, tmp)
            test_lists(e, sid)
            test_stream(e)
            test_actions(e, sid)
            test_errors(e, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
