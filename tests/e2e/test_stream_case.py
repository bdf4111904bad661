"""A stream's provider= and event= compare names without ASCII case, as `etwd convert --provider
--event` does, through the real binary over real TLS on replays of corpus files (AMSITrace.etl:
AmsiTrace/AmsiScript and Windows Kernel/EventTrace…; powershell.etl): for names in the file's own
case, all lower case and all upper case, the ndjson stream of a replay session, a WebSocket, and a
file decode (GET /api/v1/files/{name}/events) deliver exactly the unfiltered stream's events whose
names match that way (never none for a name only spelled differently), and as many as convert
selects with the same names."""
import json
import os
import shutil
import subprocess
import tempfile
import urllib.parse

from etwd_harness import Etwd, check, done, ws_events, BIN, CORPUS

FILES = {"amsi.etl": "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
         "ps.etl": "microsoft+krabsetw/examples/NativeExamples/powershell.etl"}


def low(s):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def up(s):
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in s)


def events_of(recs):
    return [r for r in recs if "System" in r]


def pick(r, key):
    return r["System"]["Provider"]["Name"] if key == "provider" else r["System"].get("EventName") or ""


def convert_count(path, key, names):
    p = subprocess.run([BIN, "convert", path, "--" + key, ",".join(names)], capture_output=True, timeout=120)
    check(p.returncode == 0, "convert --%s %s: exit %d %s" % (key, names, p.returncode, p.stderr[-300:]))
    return sum(1 for line in p.stdout.splitlines() if line.strip())


def check_file(e, name, path):
    st, h, j = e.json("POST", "/api/v1/sessions", {"files": [name]}, expect=201)
    sid = j["id"]
    everything = events_of(e.ndjson("/api/v1/sessions/%d/events" % sid, timeout=120))
    check(len(everything) > 10, "%s: %d events unfiltered" % (name, len(everything)))
    for key in ("provider", "event"):
        names = sorted({pick(r, key) for r in everything if not pick(r, key).startswith("EventID(")})
        for variant in (low, up, lambda s: s):
            for subset in ([names[0]], names[-2:]):
                given = [variant(n) for n in subset]
                want = [r for r in everything if low(pick(r, key)) in {low(n) for n in given}]
                q = "%s=%s" % (key, urllib.parse.quote(",".join(given), safe=","))
                what = "%s %s" % (name, q)
                got = events_of(e.ndjson("/api/v1/sessions/%d/events?%s" % (sid, q), timeout=120))
                check(want and got == want, "%s: %d events, want the %d whose %s matches without case"
                      % (what, len(got), len(want), key))
                got = events_of(e.ndjson("/api/v1/files/%s/events?%s" % (name, q), timeout=120))
                check([r["System"] for r in got] == [r["System"] for r in want],
                      "file decode %s: %d events, want %d" % (what, len(got), len(want)))
                n = convert_count(path, key, given)
                check(n == len(want), "convert --%s %s: %d events, the stream %d" % (key, ",".join(given), n, len(want)))
    # a WebSocket takes the same filter
    prov = everything[-1]["System"]["Provider"]["Name"]
    want = [r for r in everything if low(pick(r, "provider")) == low(prov)]
    ws = e.ws("/api/v1/sessions/%d/events?provider=%s" % (sid, urllib.parse.quote(up(prov))))
    try:
        got = events_of(ws_events(ws, lambda rs: len(events_of(rs)) >= len(want), timeout=60))
    finally:
        ws.close()
    check(got == want, "%s WebSocket provider=%s: %d events, want %d" % (name, up(prov), len(got), len(want)))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    data = tempfile.mkdtemp(prefix="etwdsc-")
    for name, rel in FILES.items():
        shutil.copy(os.path.join(CORPUS, rel), os.path.join(data, name))
    try:
        with Etwd(args=["--data-dir", data]) as e:
            for name in FILES:
                check_file(e, name, os.path.join(data, name))
            # the review's example
            st, h, j = e.json("POST", "/api/v1/sessions", {"files": ["amsi.etl"]}, expect=201)
            got = events_of(e.ndjson("/api/v1/sessions/%d/events?provider=amsitrace" % j["id"], timeout=120))
            check(len(got) == 19 and all(r["System"]["Provider"]["Name"] == "AmsiTrace" for r in got),
                  "provider=amsitrace: the 19 AmsiTrace events (%d)" % len(got))
    finally:
        shutil.rmtree(data, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
