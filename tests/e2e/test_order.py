"""Time-ordered streams (issue 20 item 6), through the real server on the real kernel (root), over
real TLS:
- a live session with "order": "time", under a load pinned to every CPU (processes making
  getppid syscalls): TimeCreated never goes backwards across the stream and seq increases by one
  from event to event; both CPUs' events are in it; the session's spec says order time;
- the same load in a session without it: the steps backwards are shown (printed, not asserted:
  they depend on the kernel's and the readers' timing), and the latency both add, measured as
  receipt time minus TimeCreated (printed; docs/benchmarks.md);
- "order" values other than "none"/"time" are a 400 naming /order, and GET /api/v1/backends lists
  the member with the backends that honour it;
- replays and GET /api/v1/files/{name}/events are in time order (the ETL reader merges its CPU
  streams by time), with "order": "time" accepted on a replay."""
import json
import os
import subprocess
import sys
import time

from etwd_harness import Etwd, check, done, CORPUS

NCPU = os.cpu_count()
PS = os.path.join(CORPUS, "microsoft+krabsetw/examples/NativeExamples/powershell.etl")
# about 100 syscalls per ms per CPU: a steady multi-CPU load that leaves the machine time to stream
LOAD = "import os, time\nt = time.time() + %f\nwhile time.time() < t:\n    for i in range(100): os.getppid()\n    time.sleep(0.001)\n"


def iso_ns(s):
    """TimeCreated "YYYY-MM-DDTHH:MM:SS.fffffffZ" → ns since the epoch (UTC)."""
    import calendar
    sec = calendar.timegm(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S"))
    return sec * 1000000000 + int(s[20:27]) * 100


def loads(seconds):
    return [subprocess.Popen([sys.executable, "-c", LOAD % seconds],
                             preexec_fn=(lambda c=c: os.sched_setaffinity(0, {c})))
            for c in range(NCPU)]


def run(e, order, seconds=2.5):
    """Stream a session (order given or not) while the load runs; returns (records, latencies)."""
    spec = {"name": "order-%s" % (order or "none"), "buffer_kb": 2048,
            "providers": [{"name": "syscalls", "events": ["sys_enter_getppid"]}]}
    if order:
        spec["order"] = order
    st, h, body = e.json("POST", "/api/v1/sessions", spec, expect=201)
    sid = body["id"]
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    import websocket
    procs = loads(seconds)
    recs, lat = [], []
    t_end = time.time() + seconds + 1.0
    while time.time() < t_end:
        ws.settimeout(max(0.1, t_end - time.time()))
        try:
            op, data = ws.recv_data()
        except websocket.WebSocketTimeoutException:
            break
        if op != 1:
            break
        now = time.time_ns()
        for r in json.loads(data):
            recs.append(r)
            if "System" in r:
                lat.append((now - iso_ns(r["System"]["TimeCreated"])) / 1e6)
    ws.close()
    for p in procs:
        p.wait()
    st, h, sess = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
    e.json("DELETE", "/api/v1/sessions/%d" % sid)
    return recs, lat, sess


def backwards(evs):
    return sum(1 for a, b in zip(evs, evs[1:]) if b["System"]["TimeCreated"] < a["System"]["TimeCreated"])


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def test_live(e):
    recs, lat, sess = run(e, "time")
    evs = [r for r in recs if "System" in r]
    gaps = [r for r in recs if "System" not in r]
    check(len(evs) > 1000, "order=time: %d events streamed" % len(evs))
    check(backwards(evs) == 0, "order=time: TimeCreated never goes backwards (%d steps back in %d events)"
          % (backwards(evs), len(evs)))
    seqs = [r["seq"] for r in evs]
    check(all(b > a for a, b in zip(seqs, seqs[1:])), "order=time: seq increases")
    # a gap record (the client fell behind: its queue dropped a batch) skips seqs, never reorders
    check(gaps or all(b == a + 1 for a, b in zip(seqs, seqs[1:])), "order=time: without gaps, seq increases by one")
    cpus = set(r["System"]["Execution"]["ProcessorID"] for r in evs)
    check(len(cpus) == NCPU, "order=time: events of every CPU (%r)" % sorted(cpus))
    check(sess["spec"].get("order") == "time", "the session's spec says order time: %r" % sess["spec"])
    loss = sess["stats"]["loss"]
    check("order_late" in loss and "order_early" in loss, "stats.loss has order_late/order_early: %r" % loss)
    print("order=time: %d events (%d gap records), %d CPUs, latency ms p50 %.1f p99 %.1f max %.1f, late %s early %s"
          % (len(evs), len(gaps), len(cpus), pct(lat, 0.5), pct(lat, 0.99), max(lat or [0]),
             loss.get("order_late"), loss.get("order_early")), flush=True)
    recs, lat, sess = run(e, None)
    evs = [r for r in recs if "System" in r]
    print("no order: %d events, %d steps backwards in TimeCreated, latency ms p50 %.1f p99 %.1f max %.1f"
          % (len(evs), backwards(evs), pct(lat, 0.5), pct(lat, 0.99), max(lat or [0])), flush=True)
    check("order" not in sess["spec"], "a session without order shows none: %r" % sess["spec"])


def test_refusals(e):
    for bad in ("random", 1, None, "TIME"):
        st, h, j = e.json("POST", "/api/v1/sessions", {"providers": ["sched"], "order": bad})
        check(st == 400 and "/order" in json.dumps(j), "order %r: 400 naming /order: %d %r" % (bad, st, j))
    st, h, j = e.json("GET", "/api/v1/sessions/1/events?order=time", token="reader")
    check(st in (400, 404), "order is not a stream parameter: %d %r" % (st, j))
    st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
    for b in j["backends"]:
        m = [x for x in b.get("members", []) if x.get("member") == "/order"]
        check(len(m) == 1, "backend %s lists /order: %r" % (b.get("name"), m))
        if m and b.get("name") in ("linux", "etl"):
            check(m[0]["supported"] is True, "backend %s honours /order" % b["name"])


def test_files(e):
    with open(PS, "rb") as f:
        data = f.read()
    e.json("POST", "/api/v1/files?name=ps.etl", body=data, ctype="application/octet-stream", expect=201)
    evs = [r for r in e.ndjson("/api/v1/files/ps.etl/events", timeout=120) if "System" in r]
    check(len(evs) > 100 and backwards(evs) == 0, "file events in time order: %d events, %d steps back"
          % (len(evs), backwards(evs)))
    cpus = set(r["System"]["Execution"]["ProcessorID"] for r in evs)
    st, h, j = e.json("POST", "/api/v1/sessions", {"files": ["ps.etl"], "order": "time"}, expect=201)
    rp = [r for r in e.ndjson("/api/v1/sessions/%d/events" % j["id"], timeout=120) if "System" in r]
    check(len(rp) == len(evs) and backwards(rp) == 0, "replay with order time: %d events (file %d), %d steps back"
          % (len(rp), len(evs), backwards(rp)))
    print("files: %d events from CPUs %r in time order" % (len(evs), sorted(cpus, key=str)), flush=True)


def main():
    with Etwd() as e:
        test_refusals(e)
        test_live(e)
        test_files(e)
    done()


if __name__ == "__main__":
    main()
