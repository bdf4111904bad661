"""Sinks meet main's capability table and per-subscriber replays (the merge of w-nats):
GET /api/v1/backends lists /sinks, /subjects and /nats for every backend (supported where they
are honoured), a linux session refuses /subjects as the table says, and a replay with a NATS
sink publishes every event of its file to JetStream at once, without any client (each client
still gets its own whole pass). Real nats-server (free loopback ports), read back with
tests/nats/etwd_nats_tool."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import etwd_harness as H
from etwd_harness import CORPUS, Etwd, check, done, free_port

TOOL = os.environ.get("ETWD_NATS_TOOL") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(H.BIN))), "tests", "etwd_nats_tool")
SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def start_nats():
    port, mport = free_port(), free_port()
    d = tempfile.mkdtemp(prefix="etwd-natsr-")
    proc = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-m", str(mport),
                             "-sd", os.path.join(d, "js")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/jsz" % mport, timeout=5).read()
            return proc, d, "nats://127.0.0.1:%d" % port
        except Exception:
            time.sleep(0.1)
    raise RuntimeError("nats-server did not start")


def members(e):
    st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
    return {b["name"]: b for b in j["backends"]}


def check_table(e):
    b = members(e)
    for name in ("linux", "etl", "nats"):
        check(name in b and b[name]["available"], "backend %s listed and available: %r" % (name, b.get(name)))
    for name, be in b.items():
        m = {x["member"]: x["supported"] for x in be["members"]}
        nats = name == "nats"
        check(m.get("/sinks") is True, "%s honours /sinks: %r" % (name, m.get("/sinks")))
        check(m.get("/subjects") is nats and m.get("/nats") is nats,
              "%s: /subjects and /nats only for nats: %r %r" % (name, m.get("/subjects"), m.get("/nats")))
    check("nats_source" in b["nats"]["capabilities"] and "sinks" in b["nats"]["capabilities"],
          "nats capabilities: %r" % b["nats"]["capabilities"])
    check("sinks" in b["linux"]["capabilities"] and "nats_source" not in b["linux"]["capabilities"],
          "linux capabilities: %r" % b["linux"]["capabilities"])
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "linux", "providers": ["sched:sched_process_exec"],
                                                         "subjects": ["fleet.>"]})
    check(st == 400 and j.get("field") == "/subjects", "linux with /subjects: %d %r" % (st, j))


def fetch(url, stream):
    r = subprocess.run([TOOL, "fetch", url, stream, stream.lower() + ".>"], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "fetch %s: %s" % (stream, r.stderr[-500:]))
    return [json.loads(l) for l in r.stdout.splitlines()]


def check_replay_sink(e, url):
    want = [r for r in e.ndjson("/api/v1/files/sih.etl/events", timeout=120) if "System" in r]
    check(len(want) > 10, "the file has events: %d" % len(want))
    sink = {"type": "nats", "url": url, "stream": "REPLAY", "subject": "replay.{session}.{provider}"}
    st, h, j = e.json("POST", "/api/v1/sessions", body={"name": "rs", "files": ["sih.etl"], "sinks": [sink]})
    check(st == 201, "replay with a sink: %d %r" % (st, j))
    sid = j["id"]
    # no client: the sinks' own pass runs at once and every event reaches the stream, acknowledged
    deadline = time.time() + 120
    k = {}
    while time.time() < deadline:
        k = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]["stats"]["sinks"][0]
        if k.get("acked", 0) - k.get("gap_records", 0) >= len(want):
            break
        time.sleep(0.2)
    check(k.get("acked", 0) - k.get("gap_records", 0) == len(want) and k.get("dropped") == 0,
          "the sink acknowledged every event of the file without a client: %r (want %d)" % (k, len(want)))
    msgs = [m for m in fetch(url, "REPLAY") if "System" in m["data"]]
    check(len(msgs) == len(want), "JetStream holds the file's %d events: %d" % (len(want), len(msgs)))
    check(sorted(m["data"]["seq"] for m in msgs) == list(range(1, len(want) + 1)),
          "each event once, in the session's numbering")
    # a client still gets its own whole pass from the first event
    got = [r for r in e.ndjson("/api/v1/sessions/%d/events" % sid, timeout=120) if "System" in r]
    check(len(got) == len(want), "a client's pass has the whole file: %d of %d" % (len(got), len(want)))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    if not os.path.exists(TOOL) or not shutil.which("nats-server"):
        check(False, "needs nats-server and %s (scripts/deps.sh installs nats-server libnats-dev)" % TOOL)
        done()
    proc, d, url = start_nats()
    try:
        with Etwd() as e:
            e.json("POST", "/api/v1/files?name=sih.etl", body=open(SIH, "rb").read(),
                   ctype="application/octet-stream", expect=201)
            check_table(e)
            check_replay_sink(e, url)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(d, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
