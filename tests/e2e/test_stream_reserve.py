"""The admin's share of --max-streams (security review, session 15): readers may not take every
stream slot. With --max-streams 3 the last slot is the admin's: two reader streams (a WebSocket and
an ndjson stream) fill what readers may hold, a third reader stream — ndjson or WebSocket — gets 429
problem+json naming the reservation, the admin still gets its stream; when a reader leaves, a reader
can connect again. Before the fix the third reader took the last slot and the admin got 429.
Real binary, real TLS, a real (idle) kernel session."""
import json
import os
import socket
import subprocess
import time

from etwd_harness import Etwd, check, done, hold, problem, wait_subscribers


def idle_session(e):
    """A live session that produces no events: raw_syscalls of a process that only sleeps."""
    sleeper = subprocess.Popen(["/bin/sleep", "300"])
    time.sleep(0.2)  # past its start-up syscalls
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [sleeper.pid]})
    check(st == 201, "create idle session: %d %r" % (st, j))
    return j["id"], sleeper


def wait_streams(e, n, what, timeout=60):
    """Wait until /metrics shows @n open streams (a closed client's slot is freed asynchronously)."""
    want = "\netwd_streams %d\n" % n
    deadline = time.time() + timeout
    while True:
        st, h, m = e.request("GET", "/metrics", token="reader")
        if (st == 200 and want in m.decode()) or time.time() > deadline:
            break
        time.sleep(0.05)
    check(st == 200 and want in m.decode(), what)


def answer(e, path, token, ws):
    """A stream request (a WebSocket upgrade when @ws, else ndjson) on a raw TLS socket: (status,
    headers dict, body) of the answer. A stream that is accepted (101/200) is closed at once
    (body b""): the check fails instead of waiting on it."""
    raw = e.ssl_context().wrap_socket(socket.create_connection(("127.0.0.1", e.port), timeout=30),
                                      server_hostname="127.0.0.1")
    up = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          "Sec-WebSocket-Version: 13\r\n") if ws else "Accept: application/x-ndjson\r\n"
    raw.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sAuthorization: Bearer %s\r\n\r\n"
                 % (path, e.port, up, e.tokens[token])).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = raw.recv(4096)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if len(lines[0].split()) > 1 else 0
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    if status in (101, 200):
        raw.close()
        return status, hdrs, b""
    need = int(hdrs.get("content-length", "0") or 0)
    while len(body) < need:
        d = raw.recv(4096)
        if not d:
            break
        body += d
    raw.close()
    return status, hdrs, body


def test_reserve(e):
    sid, sleeper = idle_session(e)
    path = "/api/v1/sessions/%d/events" % sid
    try:
        ws1 = e.ws(path, token="reader")
        wait_subscribers(e, sid, 1)  # a WebSocket takes its slot after the 101
        nd1, st = hold(e, path, token="reader")
        check(st == 200, "second reader stream (ndjson): %d" % st)
        wait_streams(e, 2, "two reader streams open")
        # readers hold 2 of 3: a third reader stream is refused, naming the reservation
        st, h, data = answer(e, path, "reader", ws=False)
        problem(st, h, data, 429, "third reader stream (ndjson)")
        detail = json.loads(data).get("detail", "") if data else ""
        check("readers may hold 2 of the --max-streams 3" in detail and "reserved for admin" in detail,
              "the 429 names the admin's reservation: %r" % detail)
        st, h, data = answer(e, path, "reader", ws=True)
        problem(st, h, data, 429, "third reader stream (WebSocket)")
        check(b"reserved for admin" in data, "the WebSocket's 429 names the reservation: %r" % data[:300])
        # the admin still gets its stream (before the fix: 429)
        adm, st = hold(e, path, token="admin")
        check(st == 200, "the admin's stream while readers hold their share: %d" % st)
        wait_streams(e, 3, "the admin's stream holds the last slot")
        # every slot is taken now: the admin's second stream gets the plain limit
        st, h, data = answer(e, path, "admin", ws=False)
        problem(st, h, data, 429, "a fourth stream")
        check(b"--max-streams 3" in data, "the plain limit: %r" % data[:300])
        adm.close()
        wait_streams(e, 2, "the admin's stream left")
        # a reader leaves: a reader can connect again (a WebSocket this time)
        ws1.close()
        wait_streams(e, 1, "a reader's WebSocket left")
        ws2 = e.ws(path, token="reader")
        wait_streams(e, 2, "a reader connected again after one left")
        # and the reserved slot is still kept: another reader is refused
        st, h, data = answer(e, path, "reader", ws=False)
        problem(st, h, data, 429, "a reader again beyond its share")
        ws2.close()
        nd1.close()
        wait_streams(e, 0, "every stream left")
    finally:
        sleeper.kill()
        sleeper.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    if os.geteuid() != 0:
        check(False, "stream tests need root (tracefs)")
        done()
    with Etwd(args=["--max-streams", "3"]) as e:
        t0 = time.time()
        test_reserve(e)
        print("test_reserve: %.1f s" % (time.time() - t0), flush=True)
    done()


main()
