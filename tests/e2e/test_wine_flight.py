"""Mode "flight" on the win backend, under wine (issue 20 item 3). The win backend's flight
recorder (etwcore/backends/win/win_flight.c: an ETW session in EVENT_TRACE_BUFFERING_MODE, a
snapshot = ControlTraceW UPDATE with a new log file) cannot be observed here: wine's advapi32 has
stubs that succeed (StartTraceW, EnableTraceEx2, ControlTraceW) and write nothing. With the calls
enabled (ETWD_WIN_UNDER_WINE=1) this checks everything around them: "flight" is a capability of
win; a flight session is created and running, its stats show the ring etw_win_flight_cfg sized;
the refusals name their member (attach, /win settings, a ring too large); flight_s is taken (the
snapshot's file is trimmed to the window: etl_trim.c, unit.test_etl_trim); a snapshot, for which
ETW's stub writes no file, fails with a clear problem naming what was missing — no recording is
left, nothing is counted, the recorder keeps running — and the session is deleted cleanly. What
the calls do on Windows, `etwd selftest`'s "flight" step proves on the user's machine. Like
tests/e2e/test_windows_wine.py it FAILS (never skips) when wine or the .exe is missing:
scripts/build-windows.sh, wine64."""
import json
import os
import shutil
import time

import test_windows_wine as W
from etwd_harness import check, done

GUID = "{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}"


def problem(e, method, path, body, want, field, words):
    st, h, j = e.json(method, path, body=body)
    ctype = h.get("content-type", "")
    check(st == want and ctype.startswith("application/problem+json"),
          "%s %s %s → %d %s, want %d problem+json: %r" % (method, path, json.dumps(body)[:100], st, ctype, want, j))
    j = j or {}
    if field:
        check(j.get("field") == field, "%s: field %r, want %r" % (json.dumps(body)[:100], j.get("field"), field))
    for w in words:
        check(w in (j.get("detail") or ""), "%s: detail %r lacks %r" % (json.dumps(body)[:100], j.get("detail"), w))
    return j


def main():
    if not W.wine_ready():
        done()

    e = W.WineEtwd(tls=False, env={"ETWD_WIN_UNDER_WINE": "1"})
    e.own_state = False  # read its log after the stop
    with e:
        st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
        wins = [b for b in (j if isinstance(j, list) else j.get("backends", [])) if b.get("name") == "win"]
        if check(len(wins) == 1, "GET /api/v1/backends lists win: %r" % j):
            check("flight" in json.dumps(wins[0].get("capabilities")),
                  "win has the flight capability: %r" % wins[0].get("capabilities"))
        # refusals, each naming its member, before any ETW call
        problem(e, "POST", "/api/v1/sessions", {"backend": "win", "mode": "flight", "providers": [{"name": "attach:x"}]},
                400, "/mode", ["read-only", "flight"])
        problem(e, "POST", "/api/v1/sessions",
                {"backend": "win", "mode": "flight", "win": {"min_buffers": 64}, "providers": [{"name": GUID}]},
                400, "/win", ["buffer_kb"])
        problem(e, "POST", "/api/v1/sessions",
                {"backend": "win", "mode": "flight", "buffer_kb": 1 << 21, "providers": [{"name": GUID}]},
                400, "/buffer_kb", ["MB"])
        # a flight recorder: created and running (wine's StartTraceW/EnableTraceEx2 succeed)
        st, h, j = e.json("POST", "/api/v1/sessions",
                          body={"backend": "win", "mode": "flight", "buffer_kb": 1024, "providers": [{"name": GUID}]})
        if not check(st == 201, "a flight session on win under wine: %d %r" % (st, j)):
            done()
        sid = j["id"]
        st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
        check(s.get("state") == "running" and (s.get("spec") or {}).get("mode") == "flight",
              "the flight session runs: %r" % {k: s.get(k) for k in ("state", "spec")})
        fl = ((s.get("stats") or {}).get("etw") or {}).get("flight") or {}
        ring = fl.get("ring_kb")
        check(isinstance(ring, int) and ring >= 1024 and ring % 64 == 0,
              "stats.etw.flight.ring_kb: 1024 KiB per processor in 64 KiB buffers: %r" % fl)
        check(fl.get("snapshots") == 0, "no snapshot yet: %r" % fl)
        # a marker goes into the ring (etwd's provider was enabled at flight_start); under wine
        # EventEnabled stays false, so it is the marker's clear 400, not "not running" or 501
        problem(e, "POST", "/api/v1/sessions/%d/markers" % sid, {"text": "before the snapshot"}, 400, None,
                ["etwd's provider"])
        # a snapshot: ETW's stub "succeeds" and writes nothing: a clear 500 problem, no recording
        t0 = time.time()
        j2 = problem(e, "POST", "/api/v1/sessions/%d/snapshot" % sid, None, 500, None,
                     ["ControlTraceW", "no file appeared", "trace.etl", "wine"])
        check(time.time() - t0 < 30, "the snapshot gave up within its wait (%.1f s)" % (time.time() - t0))
        st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
        check(s.get("state") == "running", "the recorder keeps running after a failed snapshot: %r" % s.get("state"))
        check(not s.get("snapshots") and not s.get("last_snapshot"), "a failed snapshot is not counted: %r" %
              {k: s.get(k) for k in ("snapshots", "last_snapshot")})
        st, h, j = e.json("GET", "/api/v1/recordings", token="reader")
        check(st == 200 and not (j.get("recordings") if isinstance(j, dict) else j),
              "no recording was left by the failed snapshot: %d %r" % (st, j))
        rec_dir = os.path.join(e.state, "recordings")
        check(not os.path.isdir(rec_dir) or os.listdir(rec_dir) == [], "no empty recording directory: %r" %
              (os.listdir(rec_dir) if os.path.isdir(rec_dir) else None))
        st3, h3, d3 = e.request("DELETE", "/api/v1/sessions/%d" % sid)
        check(st3 == 204, "delete: %d %r" % (st3, d3[:200]))
        # flight_s: honoured on win (ETW's file is trimmed to the window, etl_trim.c): the recorder
        # runs, its stats carry the trim's counters, and a snapshot names the file ETW did not write
        st, h, j = e.json("POST", "/api/v1/sessions",
                          body={"backend": "win", "mode": "flight", "flight_s": 5, "providers": [{"name": GUID}]})
        if check(st == 201, "a flight session with flight_s on win under wine: %d %r" % (st, j)):
            sid = j["id"]
            st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
            fl = ((s.get("stats") or {}).get("etw") or {}).get("flight") or {}
            check(fl.get("last_trim") == {"buffers_kept": 0, "buffers_dropped": 0, "events_dropped": 0,
                                          "events_before_window": 0}, "stats.etw.flight.last_trim: %r" % fl)
            problem(e, "POST", "/api/v1/sessions/%d/snapshot" % sid, None, 500, None, ["no file appeared", "trace.etl.full"])
            rec_dir = os.path.join(e.state, "recordings")
            check(not os.path.isdir(rec_dir) or os.listdir(rec_dir) == [], "nothing left by the flight_s snapshot")
            st3, h3, d3 = e.request("DELETE", "/api/v1/sessions/%d" % sid)
            check(st3 == 204, "delete: %d %r" % (st3, d3[:200]))
        problem(e, "POST", "/api/v1/sessions/999/snapshot", None, 404, None, [])
        st, h, j = e.json("GET", "/api/v1/sessions", token="reader", expect=200)
        check(j == [], "no session left: %r" % j)
        e.json("GET", "/api/v1/health", token=None, expect=200)
    check("msg=stopped" in e.stderr(), "ordered stop after the flight requests")
    shutil.rmtree(e.state, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
