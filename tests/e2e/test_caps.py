"""Provider strings and "say no to what won't happen" (issue 20 items 4-5), through the real
server: real kernel (tracefs), real HTTPS, real ndjson and WebSocket clients.

- A provider given as a string (tracefs's system:event on linux, goetw's Name:Level:… on etw/etl)
  creates the same session as its object form; GET shows the object (JSON) form.
- GET /api/v1/backends lists what each backend honours; every member it says a backend does not
  support is refused (400 naming it) at a non-default value and accepted at its default — the
  check is generated from that list, so a new member is covered as soon as it is listed.
- ?limit=N ends a stream cleanly after exactly N events (ndjson and WebSocket); an unknown stream
  parameter is 400 naming it."""
import json
import os
import shutil
import subprocess
import time
import zipfile

from etwd_harness import Etwd, check, done, CORPUS, MANIFESTS, session, unique_prog

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def wait_events(e, sid, n, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = session(e, sid)
        if s["stats"]["events"] >= n:
            return s["stats"]["events"]
        time.sleep(0.05)
    return session(e, sid)["stats"]["events"]


def events_of(recs):
    return [r for r in recs if "System" in r]


def backends(e):
    st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
    return {b["name"]: b for b in j["backends"]}


def check_backends_doc(e):
    b = backends(e)
    check("linux" in b and "etl" in b, "linux and etl backends are listed: %r" % list(b))
    lx = {m["member"]: m for m in b["linux"]["members"]}
    for m in ("/providers/*/level", "/providers/*/keywords_any", "/providers/*/keywords_all"):
        check(m in lx and lx[m]["supported"] is False, "linux does not honour %s: %r" % (m, lx.get(m)))
    check(lx["/providers/*/stacks"]["supported"] is True, "linux honours stacks (test_stacks.py)")
    check(lx["/providers/*/level"].get("default") == 5, "level's default is listed: %r" % lx["/providers/*/level"])
    check(lx["/providers/*/filter"]["supported"] and lx["/pids"]["supported"], "linux honours filter and pids")
    params = {p["parameter"]: p for p in b["linux"]["stream_parameters"]}
    check(params.get("limit", {}).get("supported") is True, "limit is a stream parameter: %r" % sorted(params))
    check(b["linux"]["provider_strings"][1] == "system:*", "linux string forms: %r" % b["linux"]["provider_strings"])
    check(b["linux"]["limits"]["buffer_kb"]["max"] > b["linux"]["limits"]["buffer_kb"]["min"] > 0,
          "linux buffer_kb range: %r" % b["linux"]["limits"])
    check(b["etl"]["provider_strings"][0].startswith("Name[:Level"), "etl string forms: %r" % b["etl"]["provider_strings"])
    # the OpenAPI document lists the route and the limit parameter
    st, h, j = e.json("GET", "/api/v1/openapi.json", token=None, expect=200)
    check("/api/v1/backends" in j["paths"], "openapi has /api/v1/backends")
    qs = [p["name"] for p in j["paths"]["/api/v1/sessions/{id}/events"]["get"]["parameters"]]
    check("limit" in qs, "openapi lists ?limit: %r" % qs)
    return b


def set_member(spec, member, value):
    """Put @value at @member (a pointer from /backends: /x or /providers/*/x) of @spec."""
    parts = member.strip("/").split("/")
    if parts[0] == "providers" and len(parts) == 3:
        spec["providers"][0][parts[2]] = value
        return "/providers/0/" + parts[2]
    spec[parts[0]] = value
    return "/" + parts[0]


def check_generated_refusals(e, b):
    """Every member /backends says a backend does not support: 400 naming it at its example
    value, accepted at its default."""
    base = {
        "linux": {"backend": "linux", "providers": [{"name": "sched", "events": ["sched_process_exec"]}]},
        "etl": {"backend": "etl", "files": ["sih.etl"], "providers": [{"name": "SIHTraceLogging"}]},
    }
    tried = 0
    for name, be in b.items():
        if not be["available"] or name not in base:
            continue
        for m in be["members"]:
            if m["supported"]:
                continue
            spec = json.loads(json.dumps(base[name]))
            field = set_member(spec, m["member"], m["example"])
            st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
            tried += 1
            ok = check(st == 400 and j.get("field") == field and h.get("content-type", "").startswith("application/problem+json"),
                       "%s %s=%r: want 400 naming %s, got %d %r" % (name, m["member"], m["example"], field, st, j))
            if st == 201:
                e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
            if ok and m["member"] != "/backend":
                check(name in j.get("detail", "") or field in j.get("detail", ""), "the detail says why: %r" % j)
            if "default" in m:
                spec = json.loads(json.dumps(base[name]))
                set_member(spec, m["member"], m["default"])
                st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
                check(st == 201, "%s %s at its default %r is accepted: %d %r" % (name, m["member"], m["default"], st, j))
                if st == 201:
                    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
    check(tried >= 12, "the generated check tried the unsupported members (%d)" % tried)
    # stream parameters: each listed one is taken with its example value, any other is refused
    st, h, j = e.json("POST", "/api/v1/sessions", body=base["linux"], expect=201)
    sid = j["id"]
    for p in b["linux"]["stream_parameters"]:
        status = stream_status(e, "/api/v1/sessions/%d/events?%s=%s" % (sid, p["parameter"], p["example"]))
        want = 200 if p["supported"] else 400  # (stackwalk_events: file decodes only)
        check(status == want, "stream parameter %s=%s: want %d, got %d" % (p["parameter"], p["example"], want, status))
        status = stream_status(e, "/api/v1/sessions/%d/events?%sx=%s" % (sid, p["parameter"], p["example"]))
        check(status == 400, "stream parameter %sx is refused: %d" % (p["parameter"], status))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def stream_status(e, path):
    """The status of an ndjson stream request (the stream itself is not read)."""
    c = e.conn(30)
    c.request("GET", path, headers={"Authorization": "Bearer " + e.tokens["reader"], "Accept": "application/x-ndjson"})
    r = c.getresponse()
    c.close()
    return r.status


def check_linux_strings(e):
    prog = unique_prog("str")
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "linux", "providers": ["sched:sched_process_exec"],
                                                        "pids": [os.getpid()]})  # our children only
    check(st == 201, "a provider string creates a linux session: %d %r" % (st, j))
    if st != 201:
        return
    sid = j["id"]
    p0 = j["spec"]["providers"][0]
    check(p0["name"] == "sched" and p0["events"] == ["sched_process_exec"], "GET shows the JSON form: %r" % p0)
    for _ in range(8):
        subprocess.run([prog], check=True)
    n = wait_events(e, sid, 8)
    check(n >= 8, "the execs were recorded: %d events" % n)
    # limit on ndjson: the replay holds >= 8 events; exactly 5 come, then the stream ends cleanly
    t0 = time.time()
    recs = list(e.ndjson("/api/v1/sessions/%d/events?from=1&limit=5" % sid, timeout=60))
    evs = events_of(recs)
    check(len(evs) == 5, "?limit=5 delivered %d events" % len(evs))
    check(sum(1 for r in evs if r["EventData"].get("filename") == prog) == 5,
          "they are our program's execs: %r" % [r["EventData"].get("filename") for r in evs])
    check(time.time() - t0 < 30, "the stream ended by itself after the limit (%.1fs)" % (time.time() - t0))
    # a live stream with a limit ends once that many new events came
    import threading
    got = []
    th = threading.Thread(target=lambda: got.extend(e.ndjson("/api/v1/sessions/%d/events?limit=2" % sid, timeout=60)))
    th.start()
    from etwd_harness import wait_subscribers
    wait_subscribers(e, sid, 1)
    for _ in range(4):
        subprocess.run([prog], check=True)
    th.join(60)
    check(not th.is_alive() and len(events_of(got)) == 2, "a live ?limit=2 stream ended after 2: %d" % len(events_of(got)))
    # PATCH takes strings too; what the backend cannot honour is refused there as well
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid, body={"enable": ["sched:sched_process_fork"]})
    check(st == 200 and any(p["name"] == "sched" and p["events"] == ["sched_process_fork"] for p in j["spec"]["providers"]),
          "PATCH enable with a string: %d %r" % (st, j))
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid, body={"enable": [{"name": "irq", "level": 2}]})
    check(st == 400 and j.get("field") == "/enable/0/level", "PATCH level on linux: %d %r" % (st, j))
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid, body={"enable": ["irq:a:b"]})
    check(st == 400 and j.get("field") == "/enable/0", "PATCH with a malformed string: %d %r" % (st, j))
    # unknown stream parameters: 400 naming them (ndjson and WebSocket)
    st, h, j = e.json("GET", "/api/v1/sessions/%d/events?provider=sched&bogus=1" % sid, token="reader",
                      headers={"Accept": "application/x-ndjson"})
    check(st == 400 and "bogus" in j.get("detail", ""), "?bogus=1: %d %r" % (st, j))
    st, h, j = e.json("GET", "/api/v1/sessions/%d/events?limit=0" % sid, token="reader",
                      headers={"Accept": "application/x-ndjson"})
    check(st == 400 and "limit" in j.get("detail", ""), "?limit=0: %d %r" % (st, j))
    import websocket
    try:
        ws = e.ws("/api/v1/sessions/%d/events?nosuch=2" % sid)
        ws.close()
        check(False, "a WebSocket with ?nosuch=2 was accepted")
    except websocket.WebSocketBadStatusException as x:
        check(x.status_code == 400, "WebSocket ?nosuch=2: %r" % x)  # (this websocket-client hides the body)
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    shutil.rmtree(os.path.dirname(prog), ignore_errors=True)


def check_refusals(e):
    # level on linux: 400 naming the member (level 2 would otherwise still deliver level 4 events)
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "linux", "providers": [{"name": "sched", "level": 2}]})
    check(st == 400 and j.get("field") == "/providers/0/level", "level on linux: %d %r" % (st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "linux", "providers": ["sched", {"name": "irq", "stacks": True}]})
    check(st == 201, "stacks on linux are honoured: %d %r" % (st, j))
    if st == 201:
        e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
    # malformed strings name the element and say what is wrong
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "linux", "providers": ["sched", "Name:0x10:4"]})
    check(st == 400 and j.get("field") == "/providers/1" and "':'" in j.get("detail", ""), "goetw form on linux: %d %r" % (st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["sih.etl"], "providers": ["SIHTraceLogging:5:1,x"]})
    check(st == 400 and j.get("field") == "/providers/0" and "EventIDs" in j.get("detail", ""), "bad EventIDs: %d %r" % (st, j))
    # a file's decode takes the same stream parameters
    recs = list(e.ndjson("/api/v1/files/sih.etl/events?limit=3", timeout=60))
    check(len(events_of(recs)) == 3, "/files/sih.etl/events?limit=3: %d events" % len(events_of(recs)))
    st, h, j = e.json("GET", "/api/v1/files/sih.etl/events?lmit=3", token="reader", headers={"Accept": "application/x-ndjson"})
    check(st == 400 and "lmit" in j.get("detail", ""), "/files/sih.etl/events?lmit=3: %d %r" % (st, j))
    # goetw strings on etl: the name filters the replay; GET shows the object form
    st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["sih.etl"], "providers": ["SIHTraceLogging:5"]})
    check(st == 201 and j["spec"]["providers"][0]["name"] == "SIHTraceLogging" and j["spec"]["providers"][0]["level"] == 5,
          "an etl provider string: %d %r" % (st, j))
    if st == 201:
        # limit on a WebSocket: exactly 3 of the file's events, then a clean close (1000)
        ws = e.ws("/api/v1/sessions/%d/events?limit=3" % j["id"])
        recs, code = [], None
        deadline = time.time() + 60
        while time.time() < deadline:
            op, data = ws.recv_data()
            if op == 8:
                code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
                break
            if op == 1:
                recs.extend(json.loads(data))
        ws.close()
        evs = events_of(recs)
        check(len(evs) == 3 and all(r["System"]["Provider"]["Name"] == "SIHTraceLogging" for r in evs),
              "WebSocket ?limit=3: %d events %r" % (len(evs), [r["System"]["Provider"]["Name"] for r in evs]))
        check(code == 1000, "the WebSocket closed cleanly: %r" % code)
        e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def etl_passes(ev, level=5, kany=0, kall=0, ids=(), exclude=False, names=()):
    """What README says an etl provider's level/keywords/event_ids/events let through."""
    s = ev["System"]
    kw = int(s["Keywords"], 16)
    if 0 < level < 5 and s["Level"] and s["Level"] > level:
        return False
    if kw and ((kany and not kw & kany) or kw & kall != kall):
        return False
    if ids and (s["EventID"] in ids) == exclude:
        return False
    return not names or s.get("EventName") in names


def check_etl_filters():
    """The etl backend honours level, keywords, event IDs and event names: each replay delivers
    exactly the events of the whole file's decode that the rule lets through, in order."""
    with zipfile.ZipFile(NET_ZIP) as z:
        net = z.read([n for n in z.namelist() if n.endswith(".etl")][0])
    prov = "Microsoft-Windows-DotNETRuntime"
    with Etwd(args=["--manifests", MANIFESTS, "--queue-events", "262144"]) as e:  # a whole replay fits
        e.json("POST", "/api/v1/files?name=net.etl", body=net, ctype="application/octet-stream", expect=201)
        every = [r for r in e.ndjson("/api/v1/files/net.etl/events?provider=" + prov, timeout=300) if "System" in r]
        key = lambda r: (r["System"]["TimeCreated"], r["System"]["EventID"], r["System"]["Level"], r["System"]["Keywords"])
        names = sorted({r["System"].get("EventName") for r in every if r["System"].get("EventName")})
        check(len(every) > 10000 and len(names) > 5, "the file has %d %s events, %d names" % (len(every), prov, len(names)))
        cases = [
            (prov + ":4", dict(level=4)),
            (prov + "::1;10,23", dict(ids=(1, 10, 23))),
            (prov + ":::0x30", dict(kany=0x30)),
            ({"name": prov, "event_ids": [10, 82], "event_ids_exclude": True, "keywords_all": "0x1"},
             dict(ids=(10, 82), exclude=True, kall=1)),
            ({"name": prov, "events": names[:2], "level": 4}, dict(names=names[:2], level=4)),
        ]
        for p, rule in cases:
            st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["net.etl"], "providers": [p]})
            if not check(st == 201, "etl session with %r: %d %r" % (p, st, j)):
                continue
            got = list(e.ndjson("/api/v1/sessions/%d/events?queue=262144" % j["id"], timeout=300))
            want = [key(r) for r in every if etl_passes(r, **rule)]
            check(not any("Gap" in r for r in got), "no gaps")
            evs = [key(r) for r in got if "System" in r]
            check(0 < len(want) < len(every) and evs == want,
                  "etl %r: %d events, want %d of %d" % (p, len(evs), len(want), len(every)))
            e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def main():
    data = open(SIH, "rb").read()
    with Etwd() as e:
        e.json("POST", "/api/v1/files?name=sih.etl", body=data, ctype="application/octet-stream", expect=201)
        b = check_backends_doc(e)
        check_refusals(e)
        check_linux_strings(e)
        check_generated_refusals(e, b)
        st, h, j = e.json("GET", "/api/v1/sessions", token="reader", expect=200)
        check(j == [], "every session the test made was deleted: %r" % [s["id"] for s in j])
    check_etl_filters()
    done()


if __name__ == "__main__":
    main()
