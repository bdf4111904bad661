#!/usr/bin/env python3
"""Event streams and their clients' departures, end to end (real kernel session, real TLS and
plain TCP clients on loopback).

* An ndjson client that closes its socket on an idle session is noticed within about a second
  (not at the next event or the 15 s heartbeat): its subscriber leaves the session stats and
  /metrics, and its --max-streams slot is free again — while another client on the same session
  keeps streaming.
* The same for a WebSocket client that drops its TCP connection without a close frame.
* Fan-out: several WebSocket clients on one busy session each get every event in seq order, one
  copy each, with no loss (every subscriber: delivered + dropped = produced)."""
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import Etwd, check, done  # noqa: E402

GONE_WITHIN = 10.0  # seconds; the stream notices within ~0.5 s, the rest is slack for a busy box
SUBSCRIBED_WITHIN = 10.0


def idle_session(e):
    """A live session that produces no events: raw_syscalls of a process that only sleeps."""
    sleeper = subprocess.Popen(["/bin/sleep", "300"])
    time.sleep(0.2)  # past its start-up syscalls
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [sleeper.pid]})
    check(st == 201, "create idle session: %d %r" % (st, j))
    return j["id"], sleeper


def stats(e, sid):
    return e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]["stats"]


def metric_subscribers(e, sid):
    st, h, body = e.request("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("etwd_session_subscribers{") and ('session="%d"' % sid) in line:
            return int(float(line.split()[-1]))
    return None


def raw_conn(e):
    s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
    return e.ssl_context().wrap_socket(s, server_hostname="127.0.0.1") if e.tls else s


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    return head


def open_ndjson(e, sid):
    """A streaming GET over a raw socket; returns (socket, status line)."""
    s = raw_conn(e)
    s.sendall(("GET /api/v1/sessions/%d/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Accept: application/x-ndjson\r\nAuthorization: Bearer %s\r\n\r\n"
               % (sid, e.port, e.tokens["reader"])).encode())
    return s, read_head(s).split(b"\r\n")[0]


def open_ws(e, sid):
    s = raw_conn(e)
    s.sendall(("GET /api/v1/sessions/%d/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
               % (sid, e.port, e.tokens["reader"])).encode())
    return s, read_head(s).split(b"\r\n")[0]


def wait_subscribers(e, sid, want, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if stats(e, sid)["subscribers"] == want:
            return time.time() - t0
        time.sleep(0.05)
    return None


def test_ndjson_departure(e):
    sid, sleeper = idle_session(e)
    try:
        a, sta = open_ndjson(e, sid)
        b, stb = open_ndjson(e, sid)
        check(b" 200 " in sta and b" 200 " in stb, "ndjson streams open: %r %r" % (sta, stb))
        check(wait_subscribers(e, sid, 2, SUBSCRIBED_WITHIN) is not None, "2 subscribers while both are connected")
        check(metric_subscribers(e, sid) == 2, "/metrics shows 2 subscribers")
        # --max-streams is 2: a third stream is refused while both slots are taken
        c, stc = open_ndjson(e, sid)
        check(b" 429 " in stc, "third stream refused with 429 (--max-streams 2): %r" % stc)
        c.close()
        time.sleep(1.0)  # the session is idle: nothing is written to either client
        t_close = time.time()
        a.close()  # the client goes away without a word
        took = wait_subscribers(e, sid, 1, GONE_WITHIN)
        check(took is not None, "a closed ndjson client on an idle session is removed within %.0f s "
              "(was: only at the 15 s heartbeat)" % GONE_WITHIN)
        print("ndjson (%s): departure noticed after %.2f s" % ("tls" if e.tls else "plain",
                                                              time.time() - t_close), flush=True)
        check(metric_subscribers(e, sid) == 1, "/metrics shows 1 subscriber after the departure")
        # its stream slot is free again: a new stream is accepted at once
        d, std = open_ndjson(e, sid)
        check(b" 200 " in std, "stream slot released: a new stream gets 200, got %r" % std)
        check(wait_subscribers(e, sid, 2, SUBSCRIBED_WITHIN) is not None, "the new stream subscribed")
        d.close()
        check(wait_subscribers(e, sid, 1, GONE_WITHIN) is not None, "second departure noticed too")
        # the client that stayed is still being served: it is not mistaken for gone
        b.settimeout(0.3)
        try:
            got = b.recv(4096)
            check(got != b"", "the remaining stream was not closed by the server")
        except (socket.timeout, ssl.SSLError, TimeoutError):
            pass  # nothing to read on an idle session: fine, the connection is open
        check(stats(e, sid)["subscribers"] == 1, "the remaining client is still subscribed")
        b.close()
        check(wait_subscribers(e, sid, 0, GONE_WITHIN) is not None, "last departure noticed")
    finally:
        sleeper.kill()
        sleeper.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_ws_departure(e):
    sid, sleeper = idle_session(e)
    try:
        a, sta = open_ws(e, sid)
        check(b" 101 " in sta, "websocket upgrade: %r" % sta)
        check(wait_subscribers(e, sid, 1, SUBSCRIBED_WITHIN) is not None, "websocket subscribed")
        time.sleep(0.5)
        a.close()  # no close frame: the TCP connection just ends
        check(wait_subscribers(e, sid, 0, GONE_WITHIN) is not None,
              "a websocket client that drops its connection is removed within %.0f s" % GONE_WITHIN)
    finally:
        sleeper.kill()
        sleeper.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def ws_frames(s, until):
    """Yields the text payloads of unmasked server frames from socket @s until @until."""
    buf = b""
    s.settimeout(0.5)
    while time.time() < until:
        while True:
            if len(buf) >= 2:
                ln = buf[1] & 0x7F
                hl = 2 + (2 if ln == 126 else 8 if ln == 127 else 0)
                if len(buf) >= hl:
                    if ln == 126:
                        ln = int.from_bytes(buf[2:4], "big")
                    elif ln == 127:
                        ln = int.from_bytes(buf[2:10], "big")
                    if len(buf) >= hl + ln:
                        op, payload, buf = buf[0] & 0x0F, buf[hl:hl + ln], buf[hl + ln:]
                        if op == 8:
                            return
                        if op == 1:
                            yield payload
                        continue
            break
        try:
            d = s.recv(1 << 16)
        except (socket.timeout, ssl.SSLError, TimeoutError):
            continue
        if not d:
            return
        buf += d


def test_fanout_exact(e):
    """6 clients on one session with a known number of events: each gets all of them."""
    n_calls = 3000
    code = ("import os,sys\nsys.stdin.readline()\nfor _ in range(%d): os.getppid()\n"
            "sys.stdout.write('x'); sys.stdout.flush(); sys.stdin.readline()\n" % n_calls)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"],
                       "filter": "id == %d" % 110}], "pids": [child.pid]})  # getppid on x86-64
    check(st == 201, "create: %d %r" % (st, j))
    sid = j["id"]
    clients = [open_ws(e, sid)[0] for _ in range(6)]
    check(wait_subscribers(e, sid, 6, SUBSCRIBED_WITHIN) is not None, "6 websocket subscribers")
    child.stdin.write(b"go\n")
    child.stdin.flush()
    child.stdout.read(1)
    # the readers drain the kernel's buffers within a poll period; wait for all the calls
    t0 = time.time()
    while stats(e, sid)["events"] < n_calls and time.time() - t0 < 20:
        time.sleep(0.05)
    produced = stats(e, sid)["events"]
    check(produced >= n_calls, "the session saw the %d getppid calls: %d" % (n_calls, produced))
    for i, s in enumerate(clients):
        seqs = []
        for payload in ws_frames(s, time.time() + 20):
            for ev in json.loads(payload):
                if "seq" in ev:
                    seqs.append(ev["seq"])
            if len(seqs) >= produced:
                break
        check(seqs == sorted(set(seqs)), "client %d: seq strictly increasing" % i)
        check(len(seqs) == produced, "client %d got %d of %d events" % (i, len(seqs), produced))
        s.close()
    s = stats(e, sid)
    check(s["loss"]["subscribers"] == 0, "no subscriber loss: %r" % s["loss"])
    child.stdin.write(b"end\n")
    child.stdin.flush()
    child.wait()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_stalled_client_timeout(e):
    """--io-timeout 2: a WebSocket client that stops reading on a busy session receives nothing
    more once the socket buffers are full; the hub drops and counts for it alone; after 2 s
    without progress the server disconnects it (logged, counted) while a reading client on the
    same session keeps streaming."""
    code = ("import os,sys,time\nsys.stdin.readline()\n"
            "while True:\n    for _ in range(300): os.getppid()\n    time.sleep(0.005)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    st, h, j = e.json("POST", "/api/v1/sessions", body={
        "providers": [{"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110"}],
        "pids": [child.pid]})
    check(st == 201, "create: %d %r" % (st, j))
    sid = j["id"]
    try:
        stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.settimeout(10)
        stalled.connect(("127.0.0.1", e.port))
        if e.tls:
            stalled = e.ssl_context().wrap_socket(stalled, server_hostname="127.0.0.1")
        stalled.sendall(("GET /api/v1/sessions/%d/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                         "Authorization: Bearer %s\r\n\r\n" % (sid, e.port, e.tokens["reader"])).encode())
        check(b" 101 " in read_head(stalled).split(b"\r\n")[0], "stalled client upgraded")
        reader, str_ = open_ws(e, sid)
        check(b" 101 " in str_, "reading client upgraded")
        check(wait_subscribers(e, sid, 2, SUBSCRIBED_WITHIN) is not None, "2 subscribers")
        child.stdin.write(b"go\n")
        child.stdin.flush()
        # the reading client reads (and discards) everything in its own thread, never held up
        # by the stats polling below; the stalled one reads nothing
        rd = {"bytes": 0, "eof": False, "stop": False}

        def read_all():
            reader.settimeout(0.2)
            while not rd["stop"]:
                try:
                    d = reader.recv(1 << 16)
                except (socket.timeout, ssl.SSLError, TimeoutError):
                    continue
                except OSError:
                    d = b""
                if not d:
                    rd["eof"] = True
                    return
                rd["bytes"] += len(d)
        th = threading.Thread(target=read_all)
        th.start()
        try:
            t0, gone_after = time.time(), None
            while time.time() - t0 < 60 and gone_after is None and not rd["eof"]:
                if stats(e, sid)["subscribers"] == 1:
                    gone_after = time.time() - t0
                else:
                    time.sleep(0.1)
            check(gone_after is not None, "the stalled client was disconnected (subscribers 2 -> 1)")
            # by the io-timeout (buffers fill in well under a second, then 2 s), not by civetweb's
            # 30 s WebSocket read time-out (a stalled client sends nothing that would end it sooner)
            check(gone_after is not None and gone_after < 20, "disconnected by --io-timeout, after %r s" % gone_after)
            s = stats(e, sid)
            check(s["loss"]["subscribers"] > 0, "events were dropped (and counted) for the stalled client: %r"
                  % s["loss"])
            check("websocket write failed" in e.stderr(), "the disconnect is logged")
            before, t1 = rd["bytes"], time.time()
            while rd["bytes"] == before and not rd["eof"] and time.time() - t1 < 20:
                time.sleep(0.1)
            check(rd["bytes"] > before, "the reading client still receives events after the disconnect")
            check(not rd["eof"], "the reading client's connection stays open")
        finally:
            rd["stop"] = True
            th.join()
        print("stalled client disconnected after %.1f s (io-timeout 2 s); reader got %d bytes"
              % (gone_after or -1, rd["bytes"]), flush=True)
        reader.close()
        stalled.close()
    finally:
        child.kill()
        child.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_frozen_client_after_end(e):
    """--io-timeout 2: when the session ends, a WebSocket client that answers nothing (not even
    our close frame) is disconnected after ~2 s, freeing its subscriber and stream slot (was:
    held by civetweb until its pings went unanswered, over a minute)."""
    sid, sleeper = idle_session(e)
    try:
        frozen, st = open_ws(e, sid)
        check(b" 101 " in st, "frozen client upgraded: %r" % st)
        check(wait_subscribers(e, sid, 1, SUBSCRIBED_WITHIN) is not None, "frozen client subscribed")
        st, h, j = e.json("POST", "/api/v1/sessions/%d/stop" % sid)
        check(st == 200, "stop: %d %r" % (st, j))
        t0 = time.time()
        took = wait_subscribers(e, sid, 0, 20)
        check(took is not None, "a client that does not answer the close is disconnected after --io-timeout")
        print("frozen client released %.1f s after the session ended (io-timeout 2 s)" % (time.time() - t0),
              flush=True)
        check("did not answer the close" in e.stderr(), "the disconnect is logged")
        frozen.close()
    finally:
        sleeper.kill()
        sleeper.wait()
        e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    if os.geteuid() != 0:
        check(False, "stream tests need root (tracefs)")
        done()
    if os.uname().machine != "x86_64":
        print("skipping test_fanout_exact and test_stalled_client_timeout (getppid's syscall id): not x86-64")
    for tls in (True, False):
        with Etwd(tls=tls, args=["--max-streams", "2"]) as e:
            test_ndjson_departure(e)
            test_ws_departure(e)
    with Etwd(args=["--io-timeout", "2", "--queue-events", "4096"]) as e:
        if os.uname().machine == "x86_64":  # the getppid syscall id in its filter
            test_stalled_client_timeout(e)
        test_frozen_client_after_end(e)
    with Etwd(args=["--queue-events", "262144"]) as e:
        if os.uname().machine == "x86_64":
            test_fanout_exact(e)
    done()


main()
