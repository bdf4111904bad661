"""?from_time on a session of backend "nats" lands on the right message whatever the time's
fraction of a second (CI's rare e2e.test_nats_from failure: a pass from a time delivered no event,
only heartbeats). libnats writes a consumer's OptStartTime with its fraction's leading zeros
dropped (05:00:00.05 went to the broker as 05:00:00.5), so a time within the first 100 ms of a
second asked the broker for up to 0.9 s later and the pass skipped every message stored in
between. Here the start times are the stored times of messages (read back with the JetStream
API, to the nanosecond) chosen in the first 100 ms of their second, so the check is
deterministic: from a message's time exactly → that message on; one nanosecond later → the next
one on; also in the +01:00 form, and for a session's own "start_time" (its durable consumer).
A pass whose consumer the broker deletes under it (an operator, or inactive_threshold while its
client did not read) used to wait for ever, the client getting heartbeats; now it ends: an
{"End":{"Reason":…}} record, then the stream's end (ndjson) or a close 1011 (WebSocket), and the
session goes on. Real nats-server (test_nats.Nats); events published over the NATS protocol."""
import base64
import calendar
import csv
import io
import json
import socket
import threading
import time
import urllib.parse

import websocket

from etwd_harness import Etwd, check, done
from test_nats import Nats, create, session, wait_for
from test_nats_hardening import js_request
from test_http_csv import raw_get

STREAM = "FROMR"


def publish_spread(nats, first, n, gap_s):
    """events first..first+n-1 (EventData.i = their number), one every @gap_s seconds, each
    stored before the next is sent (PING/PONG after each); returns the last number"""
    s = socket.create_connection(("127.0.0.1", nats.port), timeout=10)
    f = s.makefile("rb")
    f.readline()  # INFO
    s.sendall(b'CONNECT {"verbose":false}\r\n')
    for i in range(first, first + n):
        ev = {"seq": i, "System": {"Provider": {"Name": "racetest"}, "EventID": 1, "EventName": "tick",
                                   "TimeCreated": "2026-11-29T05:00:00.0000000Z",
                                   "Execution": {"ProcessID": 7, "ThreadID": 7}}, "EventData": {"i": i}}
        body = json.dumps(ev, separators=(",", ":")).encode()
        s.sendall(b"PUB fromr.s.racetest %d\r\n%s\r\nPING\r\n" % (len(body), body))
        while not f.readline().startswith(b"PONG"):
            pass
        time.sleep(gap_s)
    s.close()
    last = first + n - 1
    wait_for("%d messages in the stream" % last, lambda: nats.stream_msgs(STREAM) == last)
    return last


def stored_ns(nats, seq):
    """the time the broker stored message @seq at (UTC ns, exact) and its EventData.i"""
    m = js_request(nats, "$JS.API.STREAM.MSG.GET." + STREAM, {"seq": seq})["message"]
    t = m["time"]  # RFC 3339 with up to 9 digits, Z
    sec, frac = (t[:-1].split(".") + [""])[:2] if "." in t else (t[:-1], "")
    ns = calendar.timegm(time.strptime(sec, "%Y-%m-%dT%H:%M:%S")) * 1000000000 + int((frac + "000000000")[:9])
    return ns, json.loads(base64.b64decode(m["data"]))["EventData"]["i"]


def rfc3339_ns(ns, offset_h=0):
    """@ns as RFC 3339 with 9 digits, in UTC (Z) or at +HH:00"""
    sec, frac = divmod(ns, 1000000000)
    txt = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec + offset_h * 3600)) + ".%09d" % frac
    return txt + ("+%02d:00" % offset_h if offset_h else "Z")


def events(e, path, want, limit_s=20):
    """the EventData.i of an ndjson stream's events: stops at @want events, at its end, or after
    @limit_s seconds (the old bug: heartbeats only)"""
    got = []
    deadline = time.time() + limit_s
    for r in e.ndjson(path, timeout=limit_s + 5):
        if "EventData" in r:
            got.append(r["EventData"]["i"])
        if len(got) >= want or time.time() > deadline:
            break
    return got


def early_pick(times):
    """a message stored in the first 100 ms of its second, after a message of the same second
    (which the pass must not give), or None: [(seq, ns)] in stream order"""
    for k in range(1, len(times) - 2):
        seq, ns = times[k]
        if 0 < ns % 1000000000 < 100000000 and times[k - 1][1] // 1000000000 == ns // 1000000000:
            return k
    return None


def consumers(nats):
    return sorted(js_request(nats, "$JS.API.CONSUMER.NAMES." + STREAM, {"offset": 0}).get("consumers") or [])


def new_consumer(nats, own):
    return wait_for("the pass's consumer", lambda: (lambda c: c[0] if len(c) == 1 else None)(
        [x for x in consumers(nats) if x not in own]))


def delete_consumer(nats, name):
    r = js_request(nats, "$JS.API.CONSUMER.DELETE.%s.%s" % (STREAM, name), {})
    check(r.get("success") is True, "consumer %s deleted: %r" % (name, r))


def test_lost(e, nats, cid, n):
    """a pass whose consumer is deleted under it ends with a reason, over WebSocket, ndjson and CSV;
    the session and its own consumer go on"""
    own = wait_for("only the session's consumer", lambda: (lambda c: c if len(c) == 1 else None)(consumers(nats)))
    base = "/api/v1/sessions/%d/events?from_stream_seq=1" % cid
    ws = e.ws(base)
    recs, deadline = [], time.time() + 30
    while len([r for r in recs if "EventData" in r]) < n and time.time() < deadline:
        ws.settimeout(max(0.1, deadline - time.time()))
        recs += json.loads(ws.recv())
    check(len(recs) == n, "ws: the pass read the stream: %d records" % len(recs))
    t0 = time.time()
    delete_consumer(nats, new_consumer(nats, own))
    end, code, reason = None, None, ""
    ws.settimeout(15)  # the reader notices within its 2 s consumer check
    try:
        while code is None:
            op, fr = ws.recv_data_frame(True)
            if op == websocket.ABNF.OPCODE_TEXT:
                end = [r for r in json.loads(fr.data) if "End" in r] or end
            elif op == websocket.ABNF.OPCODE_CLOSE:
                code, reason = int.from_bytes(fr.data[:2], "big"), fr.data[2:].decode()
    except (websocket.WebSocketTimeoutException, websocket.WebSocketConnectionClosedException) as x:
        check(False, "ws: no end after the consumer was deleted: %r" % x)
    print("  ws: ended %.1f s after the deletion: %r, close %r %r" % (time.time() - t0, end, code, reason))
    check(end and "consumer" in end[0]["End"]["Reason"] and "from_stream_seq" in end[0]["End"]["Reason"],
          "ws: an End record with the reason: %r" % end)
    check(code == 1011 and "consumer" in reason, "ws: close 1011 with the reason: %r %r" % (code, reason))
    ws.close()
    # ndjson: the End record is the last line, then the response ends
    got, ended, t0 = [], True, None
    try:
        for r in e.ndjson(base, timeout=20):
            got.append(r)
            if len(got) == n:
                t0 = time.time()
                delete_consumer(nats, new_consumer(nats, own))
            if len(got) > n + 3 or (t0 and time.time() - t0 > 20):
                ended = False
                break
    except OSError:  # a timeout: heartbeats at most, no end
        ended = False
    tail = got[n:]
    print("  ndjson: ended %.1f s after the deletion: %r" % (time.time() - t0, tail))
    check(ended and len(tail) == 1 and "consumer" in tail[0].get("End", {}).get("Reason", ""),
          "ndjson: one End record with the reason, then the end: %r (ended %r)" % (tail, ended))
    # ?format=csv: the rows, then the end; the reason in the trailer (Etwd-End), as no row can hold it
    wait_for("no stream reader left", lambda: session(e, cid)["stats"]["stream_readers"]["active"] == 0)
    ev0 = session(e, cid)["stats"]["stream_readers"]["events"]

    def kill():  # once the pass has read the n events (the client takes them as they come)
        name = new_consumer(nats, own)
        wait_for("the csv pass read %d events" % n,
                 lambda: session(e, cid)["stats"]["stream_readers"]["events"] >= ev0 + n)
        delete_consumer(nats, name)
    killer = threading.Thread(target=kill)
    st, head, body, trailer = raw_get(e, base + "&format=csv", on_head=killer.start)
    killer.join()
    rows = list(csv.reader(io.StringIO(body.decode(), newline="")))
    print("  csv: %d rows, trailer %r" % (len(rows) - 1, trailer))
    check(st == 200 and "Etwd-End" in head and len(rows) == n + 1 and trailer.get("Etwd-Events") == str(n),
          "csv: the header and %d rows: %d %d %r" % (n, st, len(rows), trailer))
    check("consumer" in trailer.get("Etwd-End", "") and "from_stream_seq" in trailer.get("Etwd-End", ""),
          "csv: the trailer's Etwd-End says why the pass ended: %r" % trailer)
    wait_for("no stream reader left", lambda: session(e, cid)["stats"]["stream_readers"]["active"] == 0)
    check(consumers(nats) == own, "the session's own consumer is still there: %r" % consumers(nats))
    publish_spread(nats, n + 1, 1, 0)
    st = wait_for("the session goes on", lambda: (lambda s: s if s["stats"]["events"] == n + 1 else None)(session(e, cid)))
    check(st["state"] == "running", "the session is running: %r" % st["state"])


def main():
    nats = Nats().start()
    try:
        r = js_request(nats, "$JS.API.STREAM.CREATE." + STREAM, {
            "name": STREAM, "subjects": ["fromr.>"], "storage": "file", "retention": "limits", "max_consumers": -1,
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "num_replicas": 1, "discard": "old"})
        check("error" not in r, "stream created: %r" % r)
        # messages every ~15 ms for a bit over a second, until one is stored in the first 100 ms of
        # its second right after one of the same second (a loaded machine may need more rounds)
        n, times, k = 0, [], None
        for _ in range(6):
            n = publish_spread(nats, n + 1, 80, 0.015)
            times = [(q, stored_ns(nats, q)[0]) for q in range(1, n + 1)]
            k = early_pick(times)
            if k is not None:
                break
        check(k is not None, "a message stored in the first 100 ms of a second, after one of the same second")
        seq_k, t_k = times[k]
        check(stored_ns(nats, seq_k)[1] == seq_k, "EventData.i is the stream sequence")
        print("  message %d of %d stored at %s (%d ms into its second; message %d at %s)" % (
            seq_k, n, rfc3339_ns(t_k), t_k % 1000000000 // 1000000, seq_k - 1, rfc3339_ns(times[k - 1][1])))
        with Etwd() as e:
            cid = create(e, {"name": "central", "backend": "nats", "subjects": ["fromr.>"],
                             "nats": {"url": nats.url(), "stream": STREAM}})["id"]
            wait_for("the central session read the stream", lambda: session(e, cid)["stats"]["events"] == n)
            base = "/api/v1/sessions/%d/events" % cid
            cases = ((t_k, 0, seq_k), (t_k, 1, seq_k), (t_k + 1, 0, seq_k + 1), (t_k + 1, 5, seq_k + 1),
                     (t_k - 1, 0, seq_k))
            for ns, off, first in cases:
                q = urllib.parse.quote(rfc3339_ns(ns, off), safe="")
                want = list(range(first, n + 1))
                got = events(e, base + "?from_time=%s&limit=%d" % (q, len(want)), len(want))
                check(got == want, "from_time=%s: events %d..%d, got %d: %r" % (
                    rfc3339_ns(ns, off), first, n, len(got), got[:8]))
            test_lost(e, nats, cid, n)
            e.request("DELETE", "/api/v1/sessions/%d" % cid)
            n += 1
            # a session's own start_time: its durable consumer begins at the same message
            sid = create(e, {"name": "from-time", "backend": "nats", "subjects": ["fromr.>"],
                             "nats": {"url": nats.url(), "stream": STREAM, "start_time": rfc3339_ns(t_k)}})["id"]
            want = list(range(seq_k, n + 1))
            got = events(e, base.replace("/%d/" % cid, "/%d/" % sid) + "?from=1&limit=%d" % len(want), len(want))
            check(got == want, "a session with start_time %s: events %d..%d, got %d: %r" % (
                rfc3339_ns(t_k), seq_k, n, len(got), got[:8]))
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
    finally:
        nats.cleanup()
    done()


if __name__ == "__main__":
    main()
