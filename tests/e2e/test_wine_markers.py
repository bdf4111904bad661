"""Markers on the win backend (etwd.exe under wine64; win_marker.c).

Wine's ETW is stubs (stack-notes §4), so no marker can come back through a real-time consumer
here: the marker event's bytes and their decoding are tested on Linux (tests/unit/test_tlw.c,
test_marker_event). This checks what wine can: GET /api/v1/backends lists `markers` for `win`;
a marker for a win session is a clear problem+json, never a crash or a 5xx: without
ETWD_WIN_UNDER_WINE the session itself is a 422 naming wine and the marker a 404; with it (the
backend issues its advapi32 calls against wine's stubs: StartTraceW and EnableTraceEx2 say
yes, EventRegister gives a handle, EventEnabled says no, OpenTraceW fails so only file-mode
sessions are made) a marker reaches the backend, which registers etwd's provider, writes the
event and says that ETW did not enable the provider (400 kernel-rejected); an attached session
(etwd's provider is not enabled in it) would say 501 if wine let one be made;
the route's own checks (1025 bytes, no text) come first; the server stays up and stops in order.

Environment as tests/e2e/test_windows_wine.py (ETWD_WIN_EXE, ETWD_WINEPREFIX). FAILS (never
skips) without wine or the .exe (scripts/build-windows.sh)."""
import shutil

import test_windows_wine as W
from etwd_harness import check, done, problem

GUID = "{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}"  # Microsoft-Windows-Kernel-Process


def marker(e, sid, text, **kw):
    return e.request("POST", "/api/v1/sessions/%d/markers" % sid, body={"text": text}, **kw)


def plain():
    """ETW refused (the default under wine): caps say markers; no session, so 404s."""
    with W.WineEtwd(tls=False) as e:
        st, h, bes = e.json("GET", "/api/v1/backends", token="reader", expect=200)
        caps = {b["name"]: b["capabilities"] for b in (bes if isinstance(bes, list) else bes.get("backends", []))}
        check("markers" in caps.get("win", []) and "markers" not in caps.get("etl", ["markers"]),
              "GET /api/v1/backends: win has markers, etl not: %r" % caps)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "win", "providers": [{"name": GUID}]})
        check(st == 422 and "wine" in (j or {}).get("detail", ""), "a win session under wine: 422 naming wine: %d %r" % (st, j))
        problem(*marker(e, 999999, "x"), 404, "a marker for no session")
        e.json("GET", "/api/v1/health", token=None, expect=200)


def forced():
    """ETWD_WIN_UNDER_WINE=1: the marker reaches win_marker.c and wine's stubs."""
    e = W.WineEtwd(tls=False, env={"ETWD_WIN_UNDER_WINE": "1"})
    e.own_state = False  # read its log after the stop
    with e:
        made = []
        for body in ({"backend": "win", "providers": [{"name": GUID}]},
                     {"backend": "win", "mode": "file", "providers": [{"name": GUID}]}):
            st, h, j = e.json("POST", "/api/v1/sessions", body=body)
            # file mode: wine's StartTraceW/EnableTraceEx2 say yes, 201; real time: its
            # OpenTraceW fails, a clean 4xx problem naming it
            live = body.get("mode") != "file"
            check(st == 201 or (live and 400 <= st < 500 and "OpenTraceW" in (j or {}).get("detail", "")),
                  "a win session under wine with ETWD_WIN_UNDER_WINE=1: %d %r" % (st, j))
            print("win session %s under wine: %d %s" % (body.get("mode", "live"), st, (j or {}).get("detail", "")[:100]))
            if st != 201:
                continue
            sid = j["id"]
            made.append(sid)
            st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
            state = s.get("state")
            texts = ['say "hi" \\ ' + "caf\u00e9 \u2713", "x" * 1024]
            for text in texts:
                st, h, d = marker(e, sid, text)
                if state == "running":
                    problem(st, h, d, 400, "a marker on a running win session under wine (%s)" % body.get("mode", "live"))
                    check(b"did not enable etwd's provider" in d and b"923c4d8b-47a4-5050-333b-e904c11a4b60" in d,
                          "the problem says ETW did not enable etwd's provider: %r" % d[:400])
                else:  # the session did not get to run (wine's OpenTraceW): a clean 409
                    problem(st, h, d, 409, "a marker on a win session in state %s" % state)
            problem(*marker(e, sid, "x" * 1025), 400, "a marker of 1025 bytes")
            problem(*e.request("POST", "/api/v1/sessions/%d/markers" % sid, body={"txt": "a"}), 400, "no text")
            print("win session %s (%s): markers answered with problem+json" % (sid, state))
        # an attached session: etwd's provider is not enabled in it, so no markers (501)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "win", "providers": [{"name": "attach:EventLog-System"}]})
        if st == 201:
            made.append(j["id"])
            st, h, s = e.json("GET", "/api/v1/sessions/%d" % j["id"], token="reader", expect=200)
            st, h, d = marker(e, j["id"], "x")
            if s.get("state") == "running":
                problem(st, h, d, 501, "a marker on an attached win session")
                check(b"takes no markers" in d, "the 501 says why: %r" % d[:300])
            else:
                problem(st, h, d, 409, "a marker on an attached win session in state %s" % s.get("state"))
        else:
            check(st < 500 and (j or {}).get("detail"), "attach under wine: a clear answer: %d %r" % (st, j))
            print("attach under wine: %d %s" % (st, (j or {}).get("detail", "")[:100]))
        check(len(made) >= 1, "sessions made: %r" % made)
        for sid in made:
            st, h, d = e.request("DELETE", "/api/v1/sessions/%d" % sid)
            check(st == 204, "delete of a win session under wine: %d %r" % (st, d[:200]))
        e.json("GET", "/api/v1/health", token=None, expect=200)
    check("msg=stopped" in e.stderr(), "ordered stop after the markers")
    shutil.rmtree(e.state, ignore_errors=True)


def main():
    if not W.wine_ready():
        done()
    plain()
    forced()
    done()


if __name__ == "__main__":
    main()
