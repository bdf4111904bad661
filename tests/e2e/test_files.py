"""ETL files through the API: upload (size limit, name checks), list, download with Range,
decode as ndjson, replay as a session over WebSocket (fast and at recorded speed) through the same
hub and streams as live sessions, delete; `etwd convert` on the CLI. Ground truth: the SIH file's
published expected text (10 records, one string field `Info`)."""
import json
import os
import subprocess
import tempfile
import zipfile

from etwd_harness import Etwd, check, done, ws_events, BIN, CORPUS, MANIFESTS

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def main():
    data = open(SIH, "rb").read()
    expected = open(SIH + ".expected.txt", encoding="utf-8", errors="replace").read()
    with Etwd() as e:
        st, h, j = e.json("POST", "/api/v1/files?name=sih.etl", body=data, ctype="application/octet-stream", expect=201)
        check(j and j.get("size") == len(data), "upload size: %r" % j)
        st, h, j = e.json("POST", "/api/v1/files?name=sih.etl", body=data, ctype="application/octet-stream")
        check(st == 409, "re-upload without overwrite → 409: %d" % st)
        st, h, j = e.json("GET", "/api/v1/files", token="reader", expect=200)
        check([f["name"] for f in j] == ["sih.etl"], "list: %r" % j)
        st, h, d = e.request("GET", "/api/v1/files/sih.etl", token="reader")
        check(st == 200 and d == data, "download is byte-identical")
        st, h, d = e.request("GET", "/api/v1/files/sih.etl", token="reader", headers={"Range": "bytes=100-199"})
        check(st == 206 and d == data[100:200] and h.get("content-range") == "bytes 100-199/%d" % len(data),
              "Range 100-199: %d %r" % (st, h.get("content-range")))
        st, h, d = e.request("GET", "/api/v1/files/sih.etl", token="reader", headers={"Range": "bytes=-10"})
        check(st == 206 and d == data[-10:], "suffix Range")
        st, h, d = e.request("GET", "/api/v1/files/sih.etl", token="reader", headers={"Range": "bytes=%d-" % (len(data) + 5)})
        check(st == 416, "unsatisfiable Range → 416: %d" % st)

        # providers discovered in the data directory's files
        st, h, j = e.json("GET", "/api/v1/providers?backend=etl&q=sih", token="reader", expect=200)
        check(any(p["name"] == "SIHTraceLogging" and p["guid"] == "{9906081d-e45a-4f41-a53f-2ac2e0225de1}" for p in j),
              "TraceLogging provider found in an uploaded file is listed: %r" % j)
        st, h, j = e.json("GET", "/api/v1/providers/SIHTraceLogging?backend=etl", token="reader", expect=200)
        check(j and [x["name"] for x in j.get("events", [])] == ["SIH"], "its event is described: %r" % j)

        # decode as ndjson
        recs = list(e.ndjson("/api/v1/files/sih.etl/events"))
        evs = [r for r in recs if "System" in r]
        check(len(evs) >= 10, "ndjson decode: %d events" % len(evs))
        infos = [r.get("EventData", {}).get("Info") for r in evs if r.get("EventData", {}).get("Info")]
        check(len(infos) == 10, "10 SIH events with Info (%d)" % len(infos))
        # the expected text prints Info="…" with inner quotes backslash-escaped
        check(all(('Info="%s"' % i.replace('"', '\\"')) in expected for i in infos),
              "every Info value appears in the expected text")

        # replay as a session over WebSocket (pending until the first subscriber)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["sih.etl"], "replay": "fast"}, expect=201)
        sid = j["id"]
        check(j["state"] == "pending" and j["backend"] == "etl", "replay waits for a subscriber: %r" % j["state"])
        ws = e.ws("/api/v1/sessions/%d/events" % sid)
        recs = ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=120)
        wevs = [r for r in recs if "System" in r]
        check(len(wevs) == len(evs), "WebSocket replay delivers the same %d events (%d)" % (len(evs), len(wevs)))
        check([r["System"] for r in wevs] == [r["System"] for r in evs], "same System blocks as the ndjson decode")
        check(recs and recs[-1].get("_closed") and not recs[-1].get("_abrupt"), "stream closes cleanly at end of file")
        st, h, j = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
        check(j["state"] == "ended" and j["stats"]["events"] == len(evs), "session ended with stats: %r %r" % (j["state"], j["stats"]["events"]))
        e.request("DELETE", "/api/v1/sessions/%d" % sid)

        # recorded speed: same events
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["sih.etl"], "replay": "recorded"}, expect=201)
        sid = j["id"]
        ws = e.ws("/api/v1/sessions/%d/events" % sid)
        # the SIH file spans a short time; stop it if it takes long and compare what arrived
        recs = ws_events(ws, lambda rs: len([r for r in rs if "System" in r]) >= 1, timeout=120)
        check(any("System" in r for r in recs), "recorded-speed replay delivers events")
        e.request("DELETE", "/api/v1/sessions/%d" % sid)

        # several files replay merged into one time-ordered stream
        WAAS = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl")
        e.json("POST", "/api/v1/files?name=waas.etl", body=open(WAAS, "rb").read(), ctype="application/octet-stream", expect=201)
        n_waas = len([r for r in e.ndjson("/api/v1/files/waas.etl/events") if "System" in r])
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["waas.etl", "sih.etl"]}, expect=201)
        ws = e.ws("/api/v1/sessions/%d/events" % j["id"])
        recs = [r for r in ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=120) if "System" in r]
        check(len(recs) == n_waas + len(evs), "merged replay: %d + %d events (%d)" % (n_waas, len(evs), len(recs)))
        times = [r["System"]["TimeCreated"] for r in recs]
        check(times == sorted(times), "merged replay is in time order")
        e.request("DELETE", "/api/v1/sessions/%d" % j["id"])

        # bad files
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["nosuch.etl"]})
        check(st == 404 and j.get("field") == "/files/0", "replay of a missing file → 404 naming it: %d %r" % (st, j))
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["../x.etl"]})
        check(st == 400 and j.get("field") == "/files/0", "replay of an escaping name → 400: %d %r" % (st, j))
        # junk is refused at upload (test_http_files.py); one put in the data directory by hand
        # is refused at decode
        with open(os.path.join(e.state, "files", "junk.etl"), "wb") as f:
            f.write(b"\x00" * 100)
        st, h, j = e.json("GET", "/api/v1/files/junk.etl/events", token="reader")
        check(st == 422 and "junk.etl" in j.get("detail", "") and e.state not in j.get("detail", ""),
              "junk → 422 naming the file, not the server's path: %d %r" % (st, j))
        e.json("GET", "/api/v1/health", token=None, expect=200)

        st, h, d = e.request("DELETE", "/api/v1/files/sih.etl")
        check(st == 204, "delete → 204")
        st, h, d = e.request("GET", "/api/v1/files/sih.etl", token="reader")
        check(st == 404, "deleted file is gone")

    # a replay's stats count what its events carry: Undecoded (decode_errors) and Unparsed
    # (payload bytes after the schema's fields, delivered rather than cut); net.4.5.2.x64 with the
    # manifests has both kinds (e.g. a template that describes none of the payload)
    with zipfile.ZipFile(NET_ZIP) as z:
        net = z.read([n for n in z.namelist() if n.endswith(".etl")][0])
    with Etwd(args=["--manifests", MANIFESTS, "--queue-events", "262144"]) as e:  # the whole file fits
        e.json("POST", "/api/v1/files?name=net.etl", body=net, ctype="application/octet-stream", expect=201)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["net.etl"], "replay": "fast"}, expect=201)
        sid = j["id"]
        recs = [r for r in e.ndjson("/api/v1/sessions/%d/events?queue=262144" % sid, timeout=300) if "System" in r]
        st, h, j = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
        stats = j["stats"]
        n_unparsed = sum(1 for r in recs if "Unparsed" in r)
        n_undecoded = sum(1 for r in recs if "Undecoded" in r)
        check(stats["events"] == len(recs), "net.etl replay: every event delivered (%d of %d)" % (len(recs), stats["events"]))
        check(n_unparsed > 0 and stats["unparsed"] == n_unparsed,
              "stats.unparsed %r == events with Unparsed %d (> 0)" % (stats.get("unparsed"), n_unparsed))
        check(stats["decode_errors"] == n_undecoded,
              "stats.decode_errors %r == events with Undecoded %d" % (stats.get("decode_errors"), n_undecoded))
        st, h, body = e.request("GET", "/metrics", token="reader")
        mline = [l for l in body.decode().splitlines()
                 if l.startswith("etwd_session_unparsed_events_total{") and 'session="%d"' % sid in l]
        check(len(mline) == 1 and int(float(mline[0].split()[-1])) == n_unparsed, "/metrics: %r" % mline)
        mline = [l for l in body.decode().splitlines()
                 if l.startswith("etwd_session_undecoded_events_total{") and 'session="%d"' % sid in l]
        check(len(mline) == 1 and int(float(mline[0].split()[-1])) == n_undecoded, "/metrics: %r" % mline)
        check(all(u["Unparsed"]["Bytes"] > 0 and u["Unparsed"]["Offset"] >= 0 and u["Unparsed"]["Data"]
                  for u in recs if "Unparsed" in u), "Unparsed members carry offset, length and bytes")
        e.request("DELETE", "/api/v1/sessions/%d" % sid)

    # CLI
    out = tempfile.mktemp(suffix=".ndjson")
    r = subprocess.run([BIN, "convert", SIH, "-o", out], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "etwd convert exit 0: %s" % r.stderr[-500:])
    lines = [json.loads(l) for l in open(out) if l.strip()]
    check(len([l for l in lines if l.get("EventData", {}).get("Info")]) == 10, "convert: 10 SIH events")
    os.unlink(out)
    r = subprocess.run([BIN, "convert"], capture_output=True, text=True)
    check(r.returncode == 2 and r.stderr, "convert without files → usage error exit 2")
    r = subprocess.run([BIN, "convert", "/nonexistent.etl"], capture_output=True, text=True)
    check(r.returncode != 0 and "nonexistent" in r.stderr, "convert of a missing file names it: %r" % r.stderr)
    done()


main()
