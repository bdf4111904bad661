"""`etwd remote snapshot` (issue 20 items 3 and 8) against a spawned etwd over real TLS, on a real
flight session (kernel ring buffers in overwrite mode): the command says which recording it wrote
(name, size, URL on stdout; --json the server's answer), that recording is listed and holds the
exec of a program run before it, and `-o FILE` downloads it byte-identical to the REST download
(trace-cmd reads it). A snapshot of a realtime session is refused (exit 6) with nothing on stdout."""
import json
import os
import re
import shutil
import subprocess
import tempfile

from etwd_harness import BIN, Etwd, check, done, drop_prog, trace_report, unique_prog
from test_remote import remote_ready


def remote(e, args):
    cmd = [BIN, "remote", "--url", "https://127.0.0.1:%d" % e.port, "--token-file", e.tokfile,
           "--fingerprint", e.fp] + args
    p = subprocess.run(cmd, capture_output=True, timeout=120, env=e.env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def recordings(e):
    st, h, j = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    return {r["name"]: r for r in j}


def execs(data, prog):
    return [l for l in trace_report(data) if "sched_process_exec" in l and os.path.basename(prog) in l]


def main():
    tmp = tempfile.mkdtemp(prefix="etwd-audit-snap-")
    p1, p2, p3 = unique_prog("snapone"), unique_prog("snaptwo"), unique_prog("snapthree")
    try:
        with Etwd() as e:
            remote_ready(e, tmp)
            st, h, s = e.json("POST", "/api/v1/sessions", expect=201, body={
                "providers": ["sched:sched_process_exec"], "mode": "flight"})
            sid = s["id"]
            # plain: one line, name TAB size TAB url, of a listed recording holding the exec
            subprocess.run([p1], check=True)
            rc, so, se = remote(e, ["snapshot", str(sid)])
            lines = so.splitlines()
            f = lines[0].split("\t") if len(lines) == 1 else []
            check(rc == 0 and len(f) == 3 and f[2] == "/api/v1/recordings/" + f[0] and f[1].isdigit(),
                  "snapshot prints name, size, url: rc %d %r %s" % (rc, so, se))
            if len(f) == 3:
                recs = recordings(e)
                check(f[0] in recs and recs[f[0]]["size"] == int(f[1]), "the recording is listed, of that size: %r" % recs)
                code, h, data = e.request("GET", f[2], token="reader")
                check(code == 200 and len(execs(data, p1)) == 1, "it holds the program's exec: %d, %d bytes" % (code, len(data)))
            # -o: the download, identical to the REST one
            subprocess.run([p2], check=True)
            out = os.path.join(tmp, "snap.dat")
            rc, so, se = remote(e, ["snapshot", str(sid), "-o", out])
            name = so.split("\t")[0]
            check(rc == 0 and os.path.exists(out) and not os.path.exists(out + ".part"),
                  "snapshot -o downloads: rc %d %r %s" % (rc, so, se))
            code, h, data = e.request("GET", "/api/v1/recordings/%s" % name, token="reader")
            mine = open(out, "rb").read() if os.path.exists(out) else b""
            check(code == 200 and mine == data and len(execs(mine, p2)) == 1 and not execs(mine, p1),
                  "the file equals the REST download and holds the second exec only: %d, %d vs %d bytes"
                  % (code, len(mine), len(data)))
            check(re.search(r"snap\.dat: \d+ bytes", se), "progress on stderr: %s" % se)
            # --json: the server's answer
            subprocess.run([p3], check=True)
            rc, so, se = remote(e, ["--json", "snapshot", str(sid)])
            try:
                j = json.loads(so)
            except ValueError:
                j = {}
            check(rc == 0 and j.get("recording_name") in recordings(e)
                  and j.get("recording_url") == "/api/v1/recordings/%s" % j.get("recording_name"),
                  "snapshot --json: rc %d %r" % (rc, so))
            # a realtime session has no snapshot: exit 6, stdout empty
            st, h, rt = e.json("POST", "/api/v1/sessions", expect=201, body={"providers": ["sched:sched_process_exec"]})
            rc, so, se = remote(e, ["snapshot", str(rt["id"]), "-o", os.path.join(tmp, "no.dat")])
            check(rc == 6 and not so and "409" in se and not os.path.exists(os.path.join(tmp, "no.dat")),
                  "snapshot of a realtime session: rc %d %r %s" % (rc, so, se))
            for i in (sid, rt["id"]):
                e.request("DELETE", "/api/v1/sessions/%d" % i)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in (p1, p2, p3):
            drop_prog(p)
    done()


if __name__ == "__main__":
    main()
