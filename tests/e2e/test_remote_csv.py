#!/usr/bin/env python3
"""`etwd remote stream --format csv` asks the server for ?format=csv, through the real binaries
over real TLS:

* a replay session (each client gets its own pass from seq 1, so two clients see the same events):
  the CLI's stdout is byte for byte the body of GET /api/v1/sessions/{id}/events?format=csv (the
  columns of `etwd convert --format csv`, not the CLI's own older 12), and the server's trailer
  is said on stderr at the end (`stream: Etwd-Dropped: 0 (hub=0, subscriber=0)`), with the
  event count from Etwd-Events;
* --limit N is the server's ?limit=N: the body of ?format=csv&limit=N, byte for byte;
* a --filter goes along with format=csv (provider=… of a replay);
* a live session (root): a header row and --limit rows of sched_switch, the session deleted.
The fallback to the local writer (a server older than ?format=csv answers 400 naming `format`)
needs an older server and is not exercised here."""
import collections
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import BIN, CORPUS, Etwd, check, done  # noqa: E402
from test_remote import live_ids, remote_ready, session_id  # noqa: E402

HEADER = (b"seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,ProcessID,"
          b"ThreadID,ProcessName,Host,ProcessorID,EventData\n")
PS = "microsoft+krabsetw/examples/NativeExamples/powershell.etl"


def server_csv(e, sid, query=""):
    st, h, body = e.request("GET", "/api/v1/sessions/%d/events?format=csv%s" % (sid, query), token="reader",
                            headers={"Accept": "text/csv"}, timeout=120)
    check(st == 200 and h.get("content-type", "").startswith("text/csv"), "server csv: %d %r" % (st, h))
    return body


def remote_bytes(e, args):
    """`etwd remote …` with stdout as bytes (the CSV is compared byte for byte)."""
    cmd = [BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", e.tokfile,
           "--fingerprint", e.fp] + args
    p = subprocess.run(cmd, capture_output=True, timeout=120, env=e.env)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def check_replay(e):
    st, h, j = e.json("POST", "/api/v1/sessions", {"files": ["ps.etl"]}, expect=201)
    sid = j["id"]
    want = full = server_csv(e, sid)
    rows = want.count(b"\n") - 1
    check(want.startswith(HEADER) and rows > 10, "the server's csv: %d rows, %r" % (rows, want[:200]))
    rc, out, err = remote_bytes(e, ["stream", "--session", str(sid), "--format", "csv"])
    check(rc == 0 and out == want, "remote stream --format csv is the server's body byte for byte: rc %d, "
          "%d vs %d bytes, head %r; %s" % (rc, len(out), len(want), out[:200], err))
    check("stream: Etwd-Dropped: 0 (hub=0, subscriber=0)" in err,
          "the server's loss trailer is said on stderr: %r" % err)
    check("stream: %d events" % rows in err, "the count comes from the trailer: %r" % err)

    want = server_csv(e, sid, "&limit=7")
    check(want.count(b"\n") == 8, "the server's csv with limit=7: %r" % want[:300])
    rc, out, err = remote_bytes(e, ["stream", "--session", str(sid), "--format", "csv", "--limit", "7"])
    check(rc == 0 and out == want, "--limit 7 is the server's ?limit=7: rc %d %r %s" % (rc, out[:300], err))
    check("stream: 7 events" in err and "Etwd-Dropped: 0" in err, "--limit 7 stderr: %r" % err)

    rows = list(csv.reader(io.StringIO(full.decode())))[1:]
    prov = collections.Counter(r[2] for r in rows).most_common(1)[0][0]  # (it has 3 events at least)
    want = server_csv(e, sid, "&provider=%s&limit=3" % urllib.parse.quote(prov))
    rc, out, err = remote_bytes(e, ["stream", "--session", str(sid), "--filter", "provider=" + prov, "--format",
                                    "csv", "--limit", "3"])
    check(rc == 0 and out == want and want.count(b"\n") == 4, "--filter with csv: rc %d %r vs %r %s" %
          (rc, out[:300], want[:300], err))
    check(sid in live_ids(e), "stream --session leaves the session alone")
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def check_live(e):
    rc, out, err = remote_bytes(e, ["stream", "sched:sched_switch", "--limit", "3", "--format", "csv"])
    lines = out.split(b"\n")
    check(rc == 0 and out.startswith(HEADER) and len(lines) == 5 and lines[4] == b""
          and all(b',"sched","sched_switch",' in r for r in lines[1:4]), "live csv: rc %d %r %s" % (rc, out, err))
    check("Etwd-Dropped: " in err, "live: the trailer on stderr: %r" % err)
    sid = session_id(err)
    check(sid > 0 and sid not in live_ids(e), "live: the stream's session %d is deleted at the end" % sid)


def main():
    data = tempfile.mkdtemp(prefix="etwdrcsv-")
    tmp = tempfile.mkdtemp(prefix="etwdrcsv-t-")
    shutil.copy(os.path.join(CORPUS, PS), os.path.join(data, "ps.etl"))
    try:
        with Etwd(args=["--data-dir", data]) as e:
            remote_ready(e, tmp)
            check_replay(e)
            if os.geteuid() == 0:
                check_live(e)
            else:
                check(False, "the live check needs root (tracefs)")
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
