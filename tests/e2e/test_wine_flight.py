"""Mode "flight" on the win backend, under wine (issue 20 item 3). The Windows flight recorder is
not implemented (docs/windows.md, "Flight mode": its portable half, etw_win_flight_cfg, is
unit-tested in unit.test_win_flight; the snapshot's Win32 half is not written), so the win backend
has no "flight" capability and every flight request must get a clear problem+json — never a
crash, a 5xx or a session left behind — also when the backend makes its advapi32 calls against
wine's stubs (ETWD_WIN_UNDER_WINE=1). Like tests/e2e/test_windows_wine.py it FAILS (never skips)
when wine or the .exe is missing: scripts/build-windows.sh, wine64."""
import json
import os
import shutil
import subprocess

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


def main():
    W.WINE = shutil.which("wine") or shutil.which("wine64")
    if not check(W.WINE is not None, "wine is not installed (apt-get install wine64)"):
        done()
    if not check(os.path.isfile(W.EXE), "%s is missing: run scripts/build-windows.sh" % W.EXE):
        done()
    os.makedirs(W.PREFIX, exist_ok=True)
    if not os.path.exists(os.path.join(W.PREFIX, "system.reg")):
        subprocess.run([W.WINE, "wineboot", "-i"], env=W.wine_env(), timeout=600,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["wineserver", "-w"], env=W.wine_env(), timeout=600)

    e = W.WineEtwd(tls=False, env={"ETWD_WIN_UNDER_WINE": "1"})
    e.own_state = False  # read its log after the stop
    with e:
        st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
        wins = [b for b in (j if isinstance(j, list) else j.get("backends", [])) if b.get("name") == "win"]
        if check(len(wins) == 1, "GET /api/v1/backends lists win: %r" % j):
            check("flight" not in json.dumps(wins[0].get("capabilities")),
                  "win claims no flight capability: %r" % wins[0].get("capabilities"))
        # mode flight: refused before any ETW call, naming /mode
        problem(e, "POST", "/api/v1/sessions", {"backend": "win", "mode": "flight", "providers": [{"name": GUID}]},
                400, "/mode", ["win", "flight"])
        # with a size, as on Linux: the same answer
        problem(e, "POST", "/api/v1/sessions",
                {"backend": "win", "mode": "flight", "buffer_kb": 1024, "providers": [{"name": GUID}]},
                400, "/mode", ["flight"])
        # flight_s: a member the win backend cannot honour, named
        problem(e, "POST", "/api/v1/sessions",
                {"backend": "win", "mode": "flight", "flight_s": 10, "providers": [{"name": GUID}]},
                400, "/flight_s", [])
        # a snapshot of a session that is not a flight recorder (wine's stubs let StartTraceW
        # succeed, so the real-time session may exist): a clear 4xx, then it is deleted
        st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "win", "providers": [{"name": GUID}]})
        check(st < 500 and (st == 201 or (j or {}).get("detail")), "a real-time win session under wine: %d %r" % (st, j))
        if st == 201:
            sid = j["id"]
            st2, h2, j2 = e.json("POST", "/api/v1/sessions/%d/snapshot" % sid)
            check(400 <= st2 < 500 and "flight" in (j2 or {}).get("detail", ""),
                  "snapshot of a real-time win session: %d %r" % (st2, j2))
            st3, h3, d3 = e.request("DELETE", "/api/v1/sessions/%d" % sid)
            check(st3 == 204, "delete: %d %r" % (st3, d3[:200]))
        problem(e, "POST", "/api/v1/sessions/999/snapshot", None, 404, None, [])
        st, h, j = e.json("GET", "/api/v1/sessions", token="reader", expect=200)
        check(j == [], "no session left: %r" % j)
        st, h, j = e.json("GET", "/api/v1/recordings", token="reader")
        check(st == 200 and not (j.get("recordings") if isinstance(j, dict) else j),
              "no recording was made: %d %r" % (st, j))
        e.json("GET", "/api/v1/health", token=None, expect=200)
    check("msg=stopped" in e.stderr(), "ordered stop after the flight requests")
    shutil.rmtree(e.state, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
