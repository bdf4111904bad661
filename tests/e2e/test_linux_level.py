"""A stream's level= on a Linux session (review item): every Linux event has Level 4, so level=0…3
would be a stream that stays empty without a word; it is refused with a 400 problem that says
why (ndjson and WebSocket alike), while level=4 or more streams as before. An ETL replay's events
have real levels: level=3 there is accepted and passes exactly the events with Level <= 3 (SIH's
trace: Levels 0, 3 and 4)."""
import json
import os

from etwd_harness import CORPUS, Etwd, check, done, problem

SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def head(e, path):
    """GET @path as an ndjson stream: (status, headers, body) — the body only of a refusal (a
    stream that is answered 200 is closed at once)."""
    c = e.conn(30)
    c.request("GET", path, headers={"Authorization": "Bearer " + e.tokens["reader"], "Accept": "application/x-ndjson"})
    r = c.getresponse()
    body = r.read() if r.status != 200 else b""
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, hdrs, body


def test_linux(e):
    st, h, s = e.json("POST", "/api/v1/sessions", {"providers": [{"name": "sched", "events": ["sched_switch"]}],
                                                   "mode": "realtime"}, expect=201)
    sid = s["id"]
    for lv in (0, 2, 3):
        st, h, body = head(e, "/api/v1/sessions/%d/events?level=%d" % (sid, lv))
        problem(st, h, body, 400, "ndjson level=%d on a Linux session" % lv)
        d = json.loads(body or b"{}").get("detail", "")
        check("Level 4" in d and "level=%d" % lv in d, "level=%d: the detail says why: %r" % (lv, d))
    import websocket
    try:
        ws = e.ws("/api/v1/sessions/%d/events?level=1" % sid)
        ws.close()
        check(False, "WebSocket level=1 on a Linux session: accepted")
    except websocket.WebSocketBadStatusException as x:
        check(x.status_code == 400, "WebSocket level=1: status %d" % x.status_code)
    for lv in (4, 5):
        evs = list(e.ndjson("/api/v1/sessions/%d/events?level=%d&limit=3" % (sid, lv)))
        evs = [ev for ev in evs if "seq" in ev]
        check(len(evs) == 3 and all(ev["System"]["Level"] == 4 for ev in evs), "level=%d streams: %r" % (lv, evs[:1]))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_etl(e):
    e.json("POST", "/api/v1/files?name=sih.etl", body=open(SIH, "rb").read(),
           ctype="application/octet-stream", expect=201)
    st, h, s = e.json("POST", "/api/v1/sessions", {"files": ["sih.etl"], "replay": "fast"}, expect=201)
    everything = [ev for ev in e.ndjson("/api/v1/sessions/%d/events" % s["id"], timeout=120) if "seq" in ev]
    low = [ev for ev in e.ndjson("/api/v1/sessions/%d/events?level=3" % s["id"], timeout=120) if "seq" in ev]
    want = [ev["seq"] for ev in everything if ev["System"]["Level"] <= 3]
    check(everything and 0 < len(want) < len(everything), "the replay has events above and below Level 3: %d of %d"
          % (len(want), len(everything)))
    check([ev["seq"] for ev in low] == want, "replay level=3: %d events, want %d" % (len(low), len(want)))
    e.request("DELETE", "/api/v1/sessions/%d" % s["id"])


def main():
    with Etwd() as e:
        test_linux(e)
        test_etl(e)
    done()


if __name__ == "__main__":
    main()
