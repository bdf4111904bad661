#!/usr/bin/env python3
"""?format=csv on the HTTP event streams (GET /api/v1/files/{name}/events and
GET /api/v1/sessions/{id}/events), through the real binary over real TLS:

* a file decode as CSV (text/csv; charset=utf-8) parses with Python's csv module: the header row
  is `etwd convert --format csv`'s mixed form (Host included), and the rows match the ndjson
  stream of the same file event for event (count, seq, times, provider, event names, ids, the
  EventData cell as JSON); the body is byte for byte `etwd convert --format csv` of the file
  (where convert writes the mixed form: one shared writer, etwcore/evcsv.h), whose columns are
  its own ndjson's too (Task was the ETL header's event group for classic kernel events, where
  System says 0); stream parameters still apply (provider=, limit=);
* the chunked body's trailer says what the stream wrote and lost (Etwd-Events, Etwd-Dropped,
  Etwd-Dropped-Layers); a CSV client that stalls on a busy live session sees no gap rows, only
  events, and the trailer's Etwd-Dropped equals the loss the session counted for it;
* a replay session and a live session stream as CSV, row for row as their ndjson streams;
* an idle CSV stream's heartbeat is an empty line (every 15 s), which CSV readers skip;
* format=bogus is a 400 problem naming `format` (both routes, and the WebSocket upgrade, where
  format means nothing); HEAD answers text/csv; an explicit format= decides the representation
  (Accept is not consulted then), without it an Accept that excludes ndjson is 406 naming format=csv."""
import csv
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import BIN, CORPUS, Etwd, check, done, problem  # noqa: E402

COLS = ["seq", "TimeCreated", "Provider", "EventName", "EventID", "Version", "Level", "Task", "Opcode",
        "Keywords", "ProcessID", "ThreadID", "ProcessName", "Host", "ProcessorID", "EventData"]
FILES = {
    "amsi.etl": "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
    "lxcore.etl": "airbus-cert+etl-parser/tests/example/lxcore_kernel.etl",
    "ps.etl": "microsoft+krabsetw/examples/NativeExamples/powershell.etl",
    "shutdown.etl": "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
    "sih.etl": "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl",
    "selfdesc.etl": "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/Regression/SelfDescribingSingleEvent.etl",
}


def raw_get(e, path, accept="text/csv", rcvbuf=None, stall=0.0, on_head=None):
    """GET @path over a raw TLS socket, reading the chunked body by hand: (status, head text,
    body bytes, trailer dict). @stall: seconds to read nothing after the head (a slow client), or
    a function that returns when the client may read; @on_head: called once the head has arrived."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(60)
    s.connect(("127.0.0.1", e.port))
    s = e.ssl_context().wrap_socket(s, server_hostname="127.0.0.1")
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: %s\r\nAuthorization: Bearer %s\r\n"
               "TE: trailers\r\n\r\n" % (path, e.port, accept, e.tokens["reader"])).encode())
    f = s.makefile("rb")
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = f.readline()
        if not line:
            break
        head += line
    status = int(head.split(b" ")[1]) if head else 0
    if on_head:
        on_head()
    if callable(stall):
        stall()
    elif stall:
        time.sleep(stall)
    body, trailer = b"", {}
    if b"transfer-encoding: chunked" in head.lower():
        while True:
            size = int(f.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                break
            body += f.read(size)
            f.read(2)
        for line in iter(f.readline, b"\r\n"):
            if not line:
                break
            k, v = line.decode().split(":", 1)
            trailer[k.strip()] = v.strip()
    else:
        n = [int(x.split(b":")[1]) for x in head.lower().split(b"\r\n") if x.startswith(b"content-length:")]
        body = f.read(n[0]) if n else b""
    f.close()
    s.close()
    return status, head.decode(errors="replace"), body, trailer


def ndjson_events(e, path):
    return [r for r in e.ndjson(path, timeout=120) if "seq" in r]


def rows_of(body):
    """The CSV body as a header and a list of row dicts (csv module; blank lines skipped)."""
    r = csv.reader(io.StringIO(body.decode("utf-8"), newline=""))
    header = next(r)
    return header, [dict(zip(header, row)) for row in r if row]


def cell(v):
    """What the CSV cell of a JSON member holds: strings as they are, null/absent empty."""
    return "" if v is None else v if isinstance(v, str) else json.dumps(v)


def data_of(ev):
    """The EventData cell's JSON: EventData (or Undecoded) with the members after it merged in."""
    keys = [k for k in ev if k not in ("seq", "System", "stream_seq")]
    if not keys:
        return None
    first = ev[keys[0]]
    if not isinstance(first, dict) or len(keys) == 1:
        return first if len(keys) == 1 else None
    d = dict(first)
    for k in keys[1:]:
        d[k] = ev[k]
    return d


def same_events(what, evs, rows):
    """Rows match the ndjson events one for one."""
    check(len(rows) == len(evs) and len(evs) > 0, "%s: %d rows, %d ndjson events" % (what, len(rows), len(evs)))
    bad = 0
    for ev, row in zip(evs, rows):
        sy, ex = ev["System"], ev["System"].get("Execution", {})
        want = {"seq": str(ev["seq"]), "TimeCreated": sy["TimeCreated"], "Provider": sy["Provider"]["Name"],
                "EventName": sy.get("EventName", ""), "EventID": str(sy["EventID"]),
                "Version": str(sy["Version"]), "Level": str(sy["Level"]), "Task": str(sy["Task"]),
                "Opcode": str(sy["Opcode"]), "Keywords": sy["Keywords"], "ProcessID": cell(ex.get("ProcessID")),
                "ThreadID": cell(ex.get("ThreadID")), "ProcessName": cell(ex.get("ProcessName")),
                "Host": cell(sy.get("Host")), "ProcessorID": cell(ex.get("ProcessorID"))}
        got = {k: row.get(k) for k in want}
        data = json.loads(row["EventData"]) if row.get("EventData") else None
        if got != want or data != data_of(ev):
            bad += 1
            if bad <= 3:
                check(False, "%s seq %s: row %r\n  want %r\n  EventData %r want %r"
                      % (what, ev["seq"], got, want, data, data_of(ev)))
    check(bad == 0, "%s: %d rows differ from their ndjson event" % (what, bad))


def check_files(e, data):
    compared = []
    for name in FILES:
        path = "/api/v1/files/%s/events" % name
        evs = ndjson_events(e, path)
        st, head, body, trailer = raw_get(e, path + "?format=csv")
        check(st == 200 and "content-type: text/csv; charset=utf-8" in head.lower(), "%s csv: %d %s" % (name, st, head))
        header, rows = rows_of(body)
        check(header == COLS, "%s: header %r" % (name, header))
        same_events(name, evs, rows)
        check(trailer.get("Etwd-Events") == str(len(rows)) and trailer.get("Etwd-Dropped") == "0"
              and trailer.get("Etwd-Dropped-Layers") == "hub=0, subscriber=0",
              "%s: trailer %r (%d rows)" % (name, trailer, len(rows)))
        # byte for byte etwd convert's CSV, where convert writes the mixed form
        conv = subprocess.run([BIN, "convert", os.path.join(data, name), "--format", "csv"], capture_output=True,
                              timeout=300).stdout
        # and convert's own CSV says what its ndjson says (Task of a classic kernel event: System's 0,
        # not the header's event group)
        cnd = subprocess.run([BIN, "convert", os.path.join(data, name)], capture_output=True, timeout=300).stdout
        cevs = [json.loads(x) for x in cnd.splitlines() if x.strip()]
        chead, crows = rows_of(conv)
        if chead == COLS:
            same_events("etwd convert " + name, cevs, crows)
        if conv.startswith(b",".join(c.encode() for c in COLS) + b"\n"):
            check(conv == body, "%s: the server's CSV is etwd convert's (%d vs %d bytes)" % (name, len(body), len(conv)))
            compared.append(name)
        print("%s: %d events as CSV rows (%d bytes)" % (name, len(rows), len(body)), flush=True)
    check(len(compared) >= 4, "compared with etwd convert's mixed form: %r" % compared)
    # stream parameters still apply
    evs = ndjson_events(e, "/api/v1/files/amsi.etl/events?limit=7&provider=amsitrace")
    st, head, body, trailer = raw_get(e, "/api/v1/files/amsi.etl/events?limit=7&format=csv&provider=amsitrace")
    same_events("amsi limit=7 provider=amsitrace", evs, rows_of(body)[1])
    check(len(evs) == 7 and trailer.get("Etwd-Events") == "7", "limit=7: %d, %r" % (len(evs), trailer))


def check_replay(e):
    st, h, j = e.json("POST", "/api/v1/sessions", {"files": ["ps.etl"]}, expect=201)
    sid = j["id"]
    path = "/api/v1/sessions/%d/events" % sid
    evs = ndjson_events(e, path)
    st, head, body, trailer = raw_get(e, path + "?format=csv")
    check(st == 200 and "text/csv" in head, "replay csv: %d %s" % (st, head))
    header, rows = rows_of(body)
    check(header == COLS, "replay header %r" % header)
    same_events("replay session", evs, rows)
    e.request("DELETE", path[:-7])


def live_session(e, code):
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110"}],
        "pids": [child.pid]})
    check(st == 201, "create live: %d %r" % (st, j))
    return j["id"], child


def stats(e, sid):
    return e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]["stats"]


def check_live(e):
    """A live session's events from the replay window (from=1), as ndjson and as CSV."""
    sid, child = live_session(e, "import os,sys\nsys.stdin.readline()\nfor _ in range(300): os.getppid()\n"
                                 "sys.stdin.readline()\n")
    try:
        child.stdin.write(b"go\n")
        child.stdin.flush()
        t0 = time.time()
        while stats(e, sid)["events"] < 300 and time.time() - t0 < 30:
            time.sleep(0.05)
        path = "/api/v1/sessions/%d/events?from=1&limit=300" % sid
        evs = ndjson_events(e, path)
        st, head, body, trailer = raw_get(e, path + "&format=csv")
        header, rows = rows_of(body)
        check(header == COLS, "live header %r" % header)
        same_events("live session", evs, rows)
        check(all(r["Provider"] == "raw_syscalls" and r["EventName"] == "sys_enter" and r["Host"] for r in rows),
              "live rows: raw_syscalls sys_enter with a Host: %r" % rows[:1])
        check(trailer.get("Etwd-Events") == "300", "live trailer %r" % trailer)
    finally:
        child.kill()
        child.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def check_loss(e):
    """A CSV client that stalls on a busy live session: the hub drops for it; its rows are events
    only, and the trailer says how many were lost — what the session counted for it."""
    sid, child = live_session(e, "import os,sys,time\nsys.stdin.readline()\n"
                                 "while True:\n    for _ in range(300): os.getppid()\n    time.sleep(0.005)\n")
    try:
        def go():
            child.stdin.write(b"go\n")
            child.stdin.flush()

        def stalled():
            # read nothing until the hub has dropped events for this client (its socket buffers
            # full, its queue of 16 too), then stop the session (the stream's clean end) and read
            t0 = time.time()
            while stats(e, sid)["loss"]["subscribers"] == 0 and time.time() - t0 < 20:
                time.sleep(0.1)
            time.sleep(0.3)
            e.request("POST", "/api/v1/sessions/%d/stop" % sid)
        st, head, body, trailer = raw_get(e, "/api/v1/sessions/%d/events?format=csv&queue=16" % sid,
                                          rcvbuf=4096, stall=stalled, on_head=go)
        check(st == 200, "loss stream: %d %s" % (st, head))
        header, rows = rows_of(body)
        check(header == COLS, "loss header %r" % header)
        check(all(r["seq"].isdigit() and r["Provider"] == "raw_syscalls" and r["EventName"] == "sys_enter"
                  for r in rows), "every row is an event (no gap rows)")
        seqs = [int(r["seq"]) for r in rows]
        check(seqs == sorted(set(seqs)), "seq increasing")
        s = stats(e, sid)
        dropped = int(trailer.get("Etwd-Dropped", "-1"))
        check(dropped > 0 and dropped == s["loss"]["subscribers"],
              "the trailer's Etwd-Dropped %d is the session's subscriber loss %r" % (dropped, s["loss"]))
        check(trailer.get("Etwd-Dropped-Layers") == "hub=0, subscriber=%d" % dropped, "layers %r" % trailer)
        check(trailer.get("Etwd-Events") == str(len(rows)), "Etwd-Events %r, %d rows" % (trailer, len(rows)))
        # the seq numbers skipped are the events lost (every event of the session matched)
        check(seqs and seqs[-1] - seqs[0] + 1 - len(seqs) <= dropped, "gaps in seq %d..%d, %d rows, %d dropped"
              % (seqs[0] if seqs else 0, seqs[-1] if seqs else 0, len(seqs), dropped))
        print("stalled CSV client: %d rows, %d dropped (trailer)" % (len(rows), dropped), flush=True)
    finally:
        child.kill()
        child.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def check_heartbeat(e, out):
    """An idle CSV stream sends an empty line after 15 s without events (CSV readers skip it); it
    ends cleanly, with the trailer, when the session stops. Runs beside the other checks."""
    sleeper = subprocess.Popen(["/bin/sleep", "300"])
    try:
        time.sleep(0.2)  # past its start-up syscalls
        st, h, j = e.json("POST", "/api/v1/sessions", body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [sleeper.pid]})
        sid = j["id"]
        stop = lambda: e.request("POST", "/api/v1/sessions/%d/stop" % sid)  # noqa: E731
        t0 = time.time()
        st, head, body, trailer = raw_get(e, "/api/v1/sessions/%d/events?format=csv" % sid,
                                          on_head=lambda: threading.Timer(19, stop).start())
        out.update(status=st, body=body, trailer=trailer, took=time.time() - t0)
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
    finally:
        sleeper.kill()
        sleeper.wait()


def check_refusals(e):
    st, h, j = e.json("POST", "/api/v1/sessions", {"files": ["amsi.etl"]}, expect=201)
    sid = j["id"]
    for path in ("/api/v1/files/amsi.etl/events", "/api/v1/sessions/%d/events" % sid):
        for q in ("format=bogus", "format=CSV", "format=", "format=csv&format=ndjson"):
            st, hd, data = e.request("GET", path + "?" + q, token="reader", headers={"Accept": "*/*"})
            problem(st, hd, data, 400, "%s?%s" % (path, q))
            j = json.loads(data or b"{}")
            check(j.get("field") == "format" and "format" in j.get("detail", ""), "%s?%s: %r" % (path, q, j))
        st, hd, data = e.request("HEAD", path + "?format=csv", token="reader")
        check(st == 200 and hd.get("content-type") == "text/csv; charset=utf-8", "HEAD ?format=csv: %d %r" % (st, hd))
        st, hd, data = e.request("GET", path + "?format=ndjson&limit=1", token="reader",
                                 headers={"Accept": "application/x-ndjson"})
        check(st == 200 and hd.get("content-type") == "application/x-ndjson" and data.startswith(b'{"seq":'),
              "format=ndjson is the default form: %d %r %r" % (st, hd, data[:40]))
    # an explicit format= decides; without it, an Accept that excludes ndjson is 406 (and says format=csv)
    st, hd, data = e.request("GET", "/api/v1/sessions/%d/events?format=csv&limit=1" % sid, token="reader",
                             headers={"Accept": "application/x-ndjson"})
    check(st == 200 and hd.get("content-type") == "text/csv; charset=utf-8" and data.startswith(b"seq,"),
          "format=csv with Accept: application/x-ndjson: %d %r" % (st, hd))
    st, hd, data = e.request("GET", "/api/v1/sessions/%d/events?limit=1" % sid, token="reader",
                             headers={"Accept": "text/csv"})
    problem(st, hd, data, 406, "Accept: text/csv without format=")
    check(b"format=csv" in data, "the 406 says format=csv: %r" % data)
    import websocket
    for q in ("format=csv", "format=bogus"):
        try:
            ws = e.ws("/api/v1/sessions/%d/events?%s" % (sid, q))
            ws.close()
            check(False, "a WebSocket with ?%s was accepted" % q)
        except websocket.WebSocketBadStatusException as x:
            check(x.status_code == 400, "WebSocket ?%s: %r" % (q, x))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    data = tempfile.mkdtemp(prefix="etwdcsv-")
    for name, rel in FILES.items():
        shutil.copy(os.path.join(CORPUS, rel), os.path.join(data, name))
    try:
        with Etwd(args=["--data-dir", data, "--io-timeout", "30"]) as e:  # the stalled client: < 21 s
            hb = {}
            th = threading.Thread(target=check_heartbeat, args=(e, hb)) if os.geteuid() == 0 else None
            if th:
                th.start()
            check_refusals(e)
            check_files(e, data)
            check_replay(e)
            if os.geteuid() == 0:
                check_live(e)
                check_loss(e)
                th.join()
                header = ",".join(COLS).encode() + b"\n"
                body = hb.get("body", b"")
                check(hb.get("status") == 200 and body.startswith(header) and len(body) > len(header)
                      and body[len(header):] == b"\n" * (len(body) - len(header)),
                      "idle CSV stream: the header row, then empty lines only: %r" % hb)
                check(rows_of(body)[1] == [] and hb.get("trailer", {}).get("Etwd-Events") == "0",
                      "idle CSV stream: no rows, trailer %r" % hb.get("trailer"))
            else:
                check(False, "the live checks need root (tracefs)")
    finally:
        shutil.rmtree(data, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
