"""etwd remote, recordings and deletes (review of the remote CLI): against a spawned etwd over
real TLS, `recordings` lists what GET /api/v1/recordings holds (name, size, session or -, created
from the name), `--header` puts the column names first on every tab-separated list, `get NAME -o
FILE` downloads a recording byte for byte (also through a connection cut once: resumed), `delete
ID` deletes a session (its recording stays), `delete-recording NAME` refuses a recording still
being written (exit 6) and deletes it once stopped, and the exit codes of missing names, bad ids,
a reader token and missing arguments."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from etwd_harness import BIN, Etwd, check, done, wait_state
from test_remote import CutProxy, remote, remote_ready


def read(path):
    """The bytes of @path, or b"" when it is not there."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def recordings(e):
    st, h, d = e.json("GET", "/api/v1/recordings", token="reader")
    return d


def file_session(e, duration=None):
    spec = {"providers": [{"name": "sched", "events": ["sched_switch"]}], "mode": "file"}
    if duration:
        spec["duration_s"] = duration
    st, h, s = e.json("POST", "/api/v1/sessions", spec, expect=201)
    return s["id"]


def rec_of(e, sid):
    return [r for r in recordings(e) if r.get("session") == sid]


def test_list(e, sid):
    recs = rec_of(e, sid)
    check(len(recs) == 1, "one recording of session %d: %r" % (sid, recordings(e)))
    r = recs[0]
    rc, so, se = remote(e, ["recordings"])
    m = re.match(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z", r["name"])
    created = "%s-%s-%sT%s:%s:%sZ" % m.groups()
    want = "%s\t%d\t%d\t%s" % (r["name"], r["size"], sid, created)
    check(rc == 0 and want in so.splitlines(), "recordings: rc %d, want %r in %r %s" % (rc, want, so, se))
    check(len(so.splitlines()) == len(recordings(e)), "recordings: one line each: %r" % so)
    rc, so, se = remote(e, ["--header", "recordings"])
    lines = so.splitlines()
    check(rc == 0 and lines[0] == "name\tsize\tsession\tcreated" and want in lines[1:],
          "recordings --header: %r" % so)
    rc, so, se = remote(e, ["--json", "recordings"])
    check(rc == 0 and json.loads(so) == recordings(e), "recordings --json: the server's answer: %s" % so[:300])
    rc, so, se = remote(e, ["--json", "--header", "recordings"])
    check(rc == 0 and isinstance(json.loads(so), list), "--json wins over --header: %s" % so[:200])
    # --header on the other lists
    rc, so, se = remote(e, ["--header", "providers", "sched"])
    lines = so.splitlines()
    check(rc == 0 and lines[0] == "name\tevents\tbackend\tguid" and any(re.match(r"sched\t\d+\tlinux", l) for l in lines[1:]),
          "providers --header: %r" % so[:300])
    rc, so, se = remote(e, ["--header", "sessions"])
    lines = so.splitlines()
    check(rc == 0 and lines[0] == "id\tstate\tmode\tbackend\tevents\tproviders"
          and any(l.startswith("%d\t" % sid) for l in lines[1:]), "sessions --header: %r" % so)
    rc, so, se = remote(e, ["sessions"])
    check(rc == 0 and not so.startswith("id\t"), "no header without --header: %r" % so[:100])
    return r


def test_get(e, tmp, r):
    out = os.path.join(tmp, "got.dat")
    st, h, body = e.request("GET", r["url"], token="reader")
    rc, so, se = remote(e, ["get", r["name"], "-o", out])
    mine = read(out)
    check(rc == 0 and st == 200 and mine == body and not os.path.exists(out + ".part"),
          "get: rc %d, %d vs %d bytes: %s" % (rc, len(mine), len(body), se))
    check(re.search(r"got\.dat: %d bytes" % len(body), se), "get: says the size on stderr: %s" % se)
    # a connection cut once in the middle: resumed with Range + If-Range, the same bytes
    cut = len(body) // 2
    px = CutProxy(e.port, cut)
    out2 = os.path.join(tmp, "got2.dat")
    rc, so, se = remote(e, ["get", r["name"], "-o", out2], url="https://127.0.0.1:%d" % px.lport)
    px.ls.close()
    mine = read(out2)
    check(rc == 0 and px.cuts == 1 and "resuming" in se and mine == body,
          "get through a cut: rc %d, cuts %d, %d vs %d bytes: %s" % (rc, px.cuts, len(mine), len(body), se))
    check(re.search(r"path=%s status=206" % re.escape(r["url"]), e.stderr()),
          "get: the second request was a Range request answered 206")
    # errors
    missing = os.path.join(tmp, "missing.dat")
    rc, so, se = remote(e, ["get", "20000101T000000Z-s999", "-o", missing])
    check(rc == 6 and "404" in se and not os.path.exists(missing) and not os.path.exists(missing + ".part"),
          "get of a missing recording: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["get", "../../tokens", "-o", missing])
    check(rc == 6 and not os.path.exists(missing), "get of a path: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["get", r["name"]])
    check(rc == 2 and "-o FILE is required" in se, "get without -o: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["get", "-o", missing])
    check(rc == 2 and "recording NAME" in se, "get without a name: rc %d %s" % (rc, se))


def test_delete(e, tmp):
    sid = file_session(e)  # recording until deleted
    rec = rec_of(e, sid)
    check(len(rec) == 1 and rec[0]["writing"], "the running session's recording is being written: %r" % rec)
    name = rec[0]["name"]
    rc, so, se = remote(e, ["delete-recording", name])
    check(rc == 6 and "still writing" in se and rec_of(e, sid), "delete-recording while written: rc %d %s" % (rc, se))
    rdr = os.path.join(tmp, "reader")
    with open(rdr, "w") as f:
        f.write(e.tokens["reader"] + "\n")
    rc, so, se = remote(e, ["delete", str(sid)], token=rdr)
    check(rc == 5 and "403" in se, "delete with a reader token: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["delete", str(sid)])
    st, h, d = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")
    check(rc == 0 and st == 404 and "delete: session %d: deleted" % sid in se, "delete: rc %d, GET %d, %s" % (rc, st, se))
    names = [r["name"] for r in recordings(e)]
    check(name in names, "delete: the session's recording stays: %r" % names)
    rc, so, se = remote(e, ["recordings"])
    line = [l for l in so.splitlines() if l.startswith(name + "\t")]
    check(rc == 0 and len(line) == 1 and line[0].split("\t")[2] == "-", "a recording without session: %r" % so)
    rc, so, se = remote(e, ["delete", str(sid)])
    check(rc == 6 and "404" in se, "delete of a deleted session: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["delete", "abc"])
    check(rc == 2 and "not a session id" in se, "delete abc: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["delete-recording", name], token=rdr)
    check(rc == 5, "delete-recording with a reader token: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["-q", "delete-recording", name])
    check(rc == 0 and name not in [r["name"] for r in recordings(e)] and not se,
          "delete-recording: rc %d, still listed? %s" % (rc, se))
    rc, so, se = remote(e, ["delete-recording", name])
    check(rc == 6 and "404" in se, "delete-recording of a deleted one: rc %d %s" % (rc, se))
    rc, so, se = remote(e, ["delete-recording"])
    check(rc == 2, "delete-recording without a name: rc %d %s" % (rc, se))


def test_help():
    p = subprocess.run([BIN, "remote", "--help"], capture_output=True, text=True, timeout=60)
    for w in ("recordings", "get NAME -o FILE", "delete ID", "delete-recording NAME", "--header"):
        check(p.returncode == 0 and w in p.stdout, "remote --help names %r: %s" % (w, p.stdout))


def main():
    test_help()
    tmp = tempfile.mkdtemp(prefix="etwd-remote-more-")
    try:
        with Etwd() as e:
            remote_ready(e, tmp)
            sid = file_session(e, duration=1)
            s = wait_state(e, sid, ("stopped", "ended", "failed"), timeout=60)
            check(s["state"] == "stopped", "the recording session stopped: %r" % s)
            r = test_list(e, sid)
            test_get(e, tmp, r)
            test_delete(e, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
