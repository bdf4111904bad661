"""?from_stream_seq and ?from_time on a session of backend "nats" (issue 23, item 2): a client of a
central etwd reads the JetStream stream from a stream sequence or from a time through an
ephemeral consumer of its own — beyond the session's replay window (here --replay-kb 0: none) —
and the consumer is deleted when the client leaves (checked with the JetStream API). Events
carry their stream sequence ("stream_seq"); a backend that cannot honour the parameters refuses
them (400 problem+json). Real nats-server (test_nats.Nats); the events are published directly
over the NATS protocol, in the form an agent's sink writes them."""
import json
import socket
import time
import urllib.parse

import websocket

from etwd_harness import Etwd, check, done
from test_nats import Nats, create, session, wait_for
from test_nats_hardening import js_request

STREAM = "FROMS"


def publish(nats, first, last):
    """events first..last (EventData.i = their number), in order on one connection; returns
    once the stream holds them"""
    s = socket.create_connection(("127.0.0.1", nats.port), timeout=10)
    f = s.makefile("rb")
    f.readline()  # INFO
    out = [b'CONNECT {"verbose":false}\r\n']
    for i in range(first, last + 1):
        ev = {"seq": i, "System": {"Provider": {"Name": "fromtest"}, "EventID": 1, "EventName": "tick",
                                   "Host": "host%d" % (i % 2), "TimeCreated": "2026-11-29T05:00:00.0000000Z",
                                   "Execution": {"ProcessID": 7, "ThreadID": 7}}, "EventData": {"i": i}}
        body = json.dumps(ev, separators=(",", ":")).encode()
        out.append(b"PUB froms.host.s.fromtest %d\r\n%s\r\n" % (len(body), body))
    s.sendall(b"".join(out) + b"PING\r\n")
    while not f.readline().startswith(b"PONG"):
        pass
    s.close()
    wait_for("%d messages in the stream" % last, lambda: nats.stream_msgs(STREAM) == last)


def consumers(nats):
    r = js_request(nats, "$JS.API.CONSUMER.NAMES." + STREAM, {"offset": 0})
    return sorted(r.get("consumers") or [])


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int((t % 1) * 1e6)


def ndjson_all(e, path, n, limit_s=60):
    """up to n + 5 records of an ndjson stream, for at most limit_s seconds (a pass that delivers
    only heartbeats must fail the check quickly, not hold the test for many minutes)"""
    recs = []
    deadline = time.time() + limit_s
    for r in e.ndjson(path, timeout=60):
        recs.append(r)
        if len(recs) >= n + 5 or time.time() > deadline:
            break
    return recs


def problem(e, path):
    st, h, body = e.request("GET", path, token="reader", headers={"Accept": "application/x-ndjson"})
    j = json.loads(body) if body else {}
    return st, h.get("content-type", ""), j


def test_refused_elsewhere(e):
    """a linux session: both parameters are refused with 400 problem+json naming them (ndjson and
    WebSocket); GET /api/v1/backends says so"""
    sid = create(e, {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]})["id"]
    for q in ("from_stream_seq=1", "from_time=2026-11-29T05:00:00Z"):
        st, ct, j = problem(e, "/api/v1/sessions/%d/events?%s" % (sid, q))
        name = q.split("=")[0]
        check(st == 400 and ct.startswith("application/problem+json") and name in j.get("detail", "")
              and "linux" in j.get("detail", ""), "linux session, ?%s: 400 naming it: %d %s %r" % (q, st, ct, j))
        try:
            e.ws("/api/v1/sessions/%d/events?%s" % (sid, q)).close()
            check(False, "linux session: WebSocket with ?%s was accepted" % q)
        except websocket.WebSocketBadStatusException as x:
            check(x.status_code == 400, "linux session: WebSocket with ?%s: %d" % (q, x.status_code))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    b = {x["name"]: x for x in e.json("GET", "/api/v1/backends", token="reader")[2]["backends"]}
    for name, want in (("linux", False), ("nats", True)):
        ps = {p["parameter"]: p["supported"] for p in b[name]["stream_parameters"]}
        check(ps.get("from_stream_seq") is want and ps.get("from_time") is want,
              "backends: %s supports from_stream_seq/from_time: %r" % (name, ps))


def test_from(e, nats, cid, t_mid, n1, n2, own):
    """@own: the session's own (durable) consumer, the only one without a client"""
    base = "/api/v1/sessions/%d/events" % cid
    # bad values and combinations
    for q in ("from_stream_seq=0", "from_stream_seq=x", "from_stream_seq=-3", "from_time=yesterday",
              "from_time=2026-11-29T05:00:00", "from=1&from_stream_seq=2", "from_stream_seq=1&from_time=2026-11-29T05:00:00Z"):
        st, ct, j = problem(e, base + "?" + q)
        check(st == 400 and ct.startswith("application/problem+json"), "?%s: 400 problem+json: %d %r" % (q, st, j))
    n = n1 + n2
    # the session's own events carry stream_seq; with no replay window from=1 cannot give them back
    first = next(e.ndjson(base + "?from=1", timeout=60))
    check(first.get("Gap", {}).get("Dropped") == n, "no replay window: from=1 gives a gap: %r" % first)
    # from a stream sequence: exactly K..N, in order, with their stream_seq, ending at the limit
    K = 7
    recs = ndjson_all(e, base + "?from_stream_seq=%d&limit=%d" % (K, n - K + 1), n - K + 1)
    got = [(r.get("stream_seq"), r.get("EventData", {}).get("i")) for r in recs]
    check(got == [(i, i) for i in range(K, n + 1)], "from_stream_seq=%d: events %d..%d: %r" % (K, K, n, got[:5]))
    check([r["seq"] for r in recs] == list(range(1, n - K + 2)), "the pass numbers its own seqs from 1")
    check(all(r["System"]["Host"] in ("host0", "host1") for r in recs), "events keep System.Host")
    wait_for("the ndjson client's consumer is deleted", lambda: consumers(nats) == own)
    # from a time (with an offset, %2B-encoded): the same events as after it in UTC
    q2 = urllib.parse.quote(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_mid + 3600)) +
                            ".%06d+01:00" % int((t_mid % 1) * 1e6), safe="")
    recs = ndjson_all(e, base + "?from_time=%s&limit=%d" % (q2, n2), n2)
    got = [r.get("EventData", {}).get("i") for r in recs]
    check(got == list(range(n1 + 1, n + 1)), "from_time=%s (+01:00): events %d..%d: %r; first records %.600r; "
          "session stats %.1500r" % (q2, n1 + 1, n, got, recs[:3], session(e, cid)["stats"]))
    wait_for("the second ndjson client's consumer is deleted", lambda: consumers(nats) == own)
    # over WebSocket, from a time: the events stored after it, then live ones through the same
    # consumer; the consumer exists while the client is connected and goes with it
    ws = e.ws(base + "?from_time=" + rfc3339(t_mid))
    wait_for("the WebSocket client's consumer", lambda: len(consumers(nats)) == 2)
    st = wait_for("the client's pass is listed", lambda: (lambda s: s if s["stream_readers"]["active"] else None)(
        session(e, cid)["stats"]))
    check(st["stream_readers"]["active"] == 1 and st["stream_readers"]["opened"] == 3,
          "stats.stream_readers while one client reads: %r" % st["stream_readers"])
    recs = []
    deadline = time.time() + 60
    while len([r for r in recs if "EventData" in r]) < n2 and time.time() < deadline:
        ws.settimeout(max(0.1, deadline - time.time()))
        recs.extend(json.loads(ws.recv()))
    publish(nats, n + 1, n + 5)
    while len([r for r in recs if "EventData" in r]) < n2 + 5 and time.time() < deadline:
        ws.settimeout(max(0.1, deadline - time.time()))
        recs.extend(json.loads(ws.recv()))
    ws.settimeout(1.0)
    try:  # a wrong extra event would show up now
        recs.extend(json.loads(ws.recv()))
    except websocket.WebSocketTimeoutException:
        pass
    got = [(r.get("stream_seq"), r.get("EventData", {}).get("i")) for r in recs]
    check(got == [(i, i) for i in range(n1 + 1, n + 6)], "ws from_time: events %d..%d: %r" % (n1 + 1, n + 5, got))
    ws.close()
    wait_for("the WebSocket client's consumer is deleted", lambda: consumers(nats) == own)
    wait_for("no stream reader left", lambda: session(e, cid)["stats"]["stream_readers"]["active"] == 0)
    # the session's own counts are the stream's, not inflated by the clients' passes
    st = wait_for("the session read every message", lambda: (lambda s: s if s["events"] == n + 5 else None)(
        session(e, cid)["stats"]))
    check(st["per_provider"] == {"fromtest": n + 5} and st["stream_readers"]["events"] == (n - K + 1) + n2 + n2 + 5,
          "session counts: %r %r" % (st["per_provider"], st["stream_readers"]))


def test_bound(nats, n):
    """--max-subscribers bounds the passes of a session: one more is refused (problem+json), and
    the consumer it made is deleted at once"""
    with Etwd(args=["--max-subscribers", "1"]) as e:
        cid = create(e, {"backend": "nats", "subjects": ["froms.>"], "nats": {"url": nats.url(), "stream": STREAM}})["id"]
        own = wait_for("the session's consumer", lambda: consumers(nats))
        ws = e.ws("/api/v1/sessions/%d/events?from_stream_seq=1" % cid)
        wait_for("the first pass", lambda: session(e, cid)["stats"]["stream_readers"]["active"] == 1)
        st, ct, j = problem(e, "/api/v1/sessions/%d/events?from_stream_seq=2" % cid)
        check(st in (429, 503) and ct.startswith("application/problem+json"), "a second pass is refused: %d %r" % (st, j))
        check(len(consumers(nats)) == 2, "the refused pass left no consumer: %r" % consumers(nats))
        got = []
        deadline = time.time() + 60
        while len(got) < n and time.time() < deadline:
            ws.settimeout(max(0.1, deadline - time.time()))
            got += [r["stream_seq"] for r in json.loads(ws.recv()) if "stream_seq" in r]
        check(got == list(range(1, n + 1)), "the first pass reads the whole stream: %d events" % len(got))
        ws.close()
        wait_for("its consumer is deleted", lambda: consumers(nats) == own)
        e.request("DELETE", "/api/v1/sessions/%d" % cid)
        wait_for("every consumer is gone with the session", lambda: consumers(nats) == [])


def main():
    nats = Nats().start()
    try:
        r = js_request(nats, "$JS.API.STREAM.CREATE." + STREAM, {
            "name": STREAM, "subjects": ["froms.>"], "storage": "file", "retention": "limits", "max_consumers": -1,
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "num_replicas": 1, "discard": "old"})
        check("error" not in r, "stream created: %r" % r)
        n1, n2 = 20, 20
        publish(nats, 1, n1)
        time.sleep(0.3)
        t_mid = time.time()
        time.sleep(0.3)
        publish(nats, n1 + 1, n1 + n2)
        with Etwd(args=["--replay-kb", "0"]) as e:
            test_refused_elsewhere(e)
            cid = create(e, {"name": "central", "backend": "nats", "subjects": ["froms.>"],
                             "nats": {"url": nats.url(), "stream": STREAM}})["id"]
            wait_for("the central session read the stream", lambda: session(e, cid)["stats"]["events"] == n1 + n2)
            own = consumers(nats)
            check(len(own) == 1, "the session's own durable consumer: %r" % own)
            test_from(e, nats, cid, t_mid, n1, n2, own)
            e.request("DELETE", "/api/v1/sessions/%d" % cid)
            wait_for("every consumer is gone with the session", lambda: consumers(nats) == [])
        test_bound(nats, n1 + n2 + 5)
    finally:
        nats.cleanup()
    done()


if __name__ == "__main__":
    main()
