"""HTTP and WebSocket strictness, over raw TLS sockets (http.client and websocket-client normalise
what is tested here): request smuggling shapes (two Content-Lengths, Content-Length with
Transfer-Encoding) get 400 and a closed connection; HEAD on a stream route sends headers only; a
WebSocket upgrade where there is none, absolute-form targets, OPTIONS * and civetweb's own errors
all get a status line and (errors) problem+json; CORS is granted to --allow-origin origins only;
client WebSocket frames are held to RFC 6455 (masked, known opcodes, no RSV bits, control frames
unfragmented and <= 125 bytes, else close 1002)."""
import json
import os
import socket
import struct
import subprocess
import time
import base64

from etwd_harness import Etwd, check, done, CORPUS

SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")
DASH = "https://dash.example:8443"


def raw(e, timeout=10):
    s = socket.create_connection(("127.0.0.1", e.port), timeout=timeout)
    return e.ssl_context().wrap_socket(s, server_hostname="localhost")


def read_all(s, limit=1 << 20):
    """Everything the server sends until it closes (or times out): bytes."""
    out = b""
    try:
        while len(out) < limit:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, OSError):
        pass
    return out


def parse_head(head):
    """A response head (bytes, without the blank line): (status or None, headers (lower-case
    name -> list of values), the status line)."""
    lines = head.decode(errors="replace").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[0].startswith("HTTP/1.") else None
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs.setdefault(k.strip().lower(), []).append(v.strip())
    return status, hdrs, lines[0]


def read_response(s):
    """One response with a Content-Length body (or none): (status, headers, body, rest)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, {}, b"", buf
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    status, hdrs, first = parse_head(head)
    return status, hdrs, rest, first


def exchange(e, data):
    """Send @data on a new connection, read until the server closes: (status, headers, body, raw)."""
    s = raw(e)
    s.sendall(data)
    got = read_all(s)
    s.close()
    if b"\r\n\r\n" not in got:
        return None, {}, b"", got
    head, body = got.split(b"\r\n\r\n", 1)
    status, hdrs, _ = parse_head(head)
    return status, hdrs, body, got


def is_problem(status, hdrs, body, want):
    if status != want or hdrs.get("content-type", [""])[0] != "application/problem+json":
        return False
    try:
        j = json.loads(body)
    except ValueError:
        return False
    return j.get("status") == want and j.get("type", "").startswith("urn:etwd:problem:")


def test_smuggling(e):
    tok = e.tokens["reader"]
    # two different Content-Lengths: a front proxy and etwd could disagree where the body ends
    st, h, b, r = exchange(e, ("POST /api/v1/logout HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                               "Content-Length: 5\r\nContent-Length: 30\r\n\r\nhelloGET /api/v1/health HTTP/1.1\r\n"
                               "Host: x\r\n\r\n" % tok).encode())
    check(is_problem(st, h, b, 400), "two Content-Lengths → 400 problem+json: %r" % r[:300])
    check(r.count(b"HTTP/1.1") == 1, "… and nothing after it is taken as a request: %r" % r[:600])
    # Content-Length together with Transfer-Encoding
    st, h, b, r = exchange(e, ("POST /api/v1/logout HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                               "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % tok).encode())
    check(is_problem(st, h, b, 400), "Content-Length + Transfer-Encoding → 400 problem+json: %r" % r[:300])
    check(r.count(b"HTTP/1.1") == 1, "… one response, then the connection closes: %r" % r[:600])
    # the same value twice is one length (RFC 9110 8.6): still served
    st, h, b, r = exchange(e, b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                              b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    check(st == 200, "a repeated identical Content-Length is accepted: %r" % r[:300])
    st, h, b, r = exchange(e, b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n")
    check(is_problem(st, h, b, 400), "a Content-Length that is not a number → 400: %r" % r[:300])


def test_head_streams(e):
    st, h, d = e.request("POST", "/api/v1/files?name=sih.etl", body=open(SIH, "rb").read(),
                         ctype="application/octet-stream")
    check(st == 201, "upload sih.etl: %d" % st)
    sid = e.json("POST", "/api/v1/sessions", body={"files": ["sih.etl"], "replay": "fast"}, expect=201)[2]["id"]
    tok = e.tokens["reader"]
    for path in ("/api/v1/files/sih.etl/events", "/api/v1/sessions/%d/events" % sid):
        # HEAD, then a second request on the same connection: the next bytes must be its response
        s = raw(e, timeout=20)
        s.sendall(("HEAD %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                   "GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (path, tok)).encode())
        st, h, rest, line = read_response(s)
        rest += read_all(s)
        s.close()
        check(st == 200, "HEAD %s: %r" % (path, line))
        check(rest.startswith(b"HTTP/1.1 200"), "HEAD %s sends headers only (next: %r)" % (path, rest[:120]))


def test_status_lines(e):
    # a WebSocket upgrade to a route that has no WebSocket
    key = base64.b64encode(os.urandom(16)).decode()
    st, h, b, r = exchange(e, ("GET /api/v1/health HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
                               % key).encode())
    check(st is not None and 400 <= st < 500 and is_problem(st, h, b, st),
          "Upgrade: websocket to a REST route → a status line and problem+json 4xx: %r" % r[:300])
    # absolute-form: another host (etwd is no proxy) and this server's own address
    for target in ("https://example.org/api/v1/health", "https://127.0.0.1:%d/api/v1/health" % e.port):
        st, h, b, r = exchange(e, ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % target).encode())
        check(is_problem(st, h, b, 400), "absolute-form %s → 400 problem+json, not a silent close: %r" % (target, r[:300]))
    # OPTIONS *
    st, h, b, r = exchange(e, b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
    check(st == 204 and "OPTIONS" in h.get("allow", [""])[0] and b == b"", "OPTIONS * → 204 with Allow: %r" % r[:300])
    # civetweb's own refusals: a malformed request line, a HTTP version it does not speak
    st, h, b, r = exchange(e, b"GET /api/v1/health HTTP/3.0\r\nHost: x\r\n\r\n")
    check(is_problem(st, h, b, 505), "HTTP/3.0 → 505 problem+json: %r" % r[:300])
    st, h, b, r = exchange(e, b"GET /api/v1/health\x01 HTTP/1.1\r\nHost: x\r\n\r\n")
    check(is_problem(st, h, b, 400), "control character in the target → 400 problem+json: %r" % r[:300])
    st, h, b, r = exchange(e, b"POST /api/v1/logout HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")
    check(is_problem(st, h, b, 400), "unknown Transfer-Encoding → 400 problem+json: %r" % r[:300])


def test_cors(e):
    def preflight(origin, path="/api/v1/sessions"):
        return exchange(e, ("OPTIONS %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: %s\r\n"
                            "Access-Control-Request-Method: POST\r\n"
                            "Access-Control-Request-Headers: authorization, content-type\r\n"
                            "Connection: close\r\n\r\n" % (path, e.port, origin)).encode())
    st, h, b, r = preflight("https://evil.example")
    check(st == 204 and not any(k.startswith("access-control-") for k in h),
          "preflight from an unlisted Origin: no CORS grant: %r" % r[:500])
    check("POST" in h.get("allow", [""])[0] and "Origin" in h.get("vary", [""])[0],
          "… but Allow and Vary: Origin: %r" % r[:500])
    st, h, b, r = preflight(DASH)
    check(st == 204 and h.get("access-control-allow-origin") == [DASH] and "Origin" in h.get("vary", [""])[0],
          "preflight from the --allow-origin Origin is granted to it alone, with Vary: Origin: %r" % r[:500])
    check("POST" in h.get("access-control-allow-methods", [""])[0] and
          "authorization" in h.get("access-control-allow-headers", [""])[0].lower(), "… methods and headers: %r" % r[:500])
    st, h, b, r = preflight(DASH, "/api/v1/nowhere")
    check(is_problem(st, h, b, 404), "OPTIONS on no route → 404: %r" % r[:300])
    # the actual request: granted to the listed Origin only
    st, hh, d = e.request("GET", "/api/v1/sessions", token="reader", headers={"Origin": DASH})
    check(hh.get("access-control-allow-origin") == DASH and "Origin" in hh.get("vary", ""), "GET from %s: %r" % (DASH, hh))
    st, hh, d = e.request("GET", "/api/v1/sessions", token="reader", headers={"Origin": "https://evil.example"})
    check("access-control-allow-origin" not in hh, "GET from an unlisted Origin: no grant: %r" % hh)


# ---- WebSocket frames built by hand
def ws_open(e, sid):
    s = raw(e, timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    # a filter no event matches: the server sends nothing but control frames
    s.sendall(("GET /api/v1/sessions/%d/events?provider=nothing-matches HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n" % (sid, key, e.tokens["reader"])).encode())
    st, h, rest, line = read_response(s)
    check(st == 101, "WebSocket upgrade: %r" % line)
    return s, rest


def frame(op, payload, fin=True, mask=True, rsv=0):
    b0 = (0x80 if fin else 0) | rsv | op
    n = len(payload)
    if n < 126:
        hdr = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
    else:
        hdr = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
    if not mask:
        return hdr + payload
    k = os.urandom(4)
    return hdr + k + bytes(c ^ k[i & 3] for i, c in enumerate(payload))


def read_frame(s, buf):
    """(opcode, payload, rest) of the next server frame, or (None, b'', buf) at EOF/time-out."""
    def need(n):
        nonlocal buf
        while len(buf) < n:
            try:
                d = s.recv(65536)
            except (socket.timeout, OSError):
                return False
            if not d:
                return False
            buf += d
        return True
    if not need(2):
        return None, b"", buf
    n = buf[1] & 127
    hl = 2 if n < 126 else 4 if n == 126 else 10
    if not need(hl):
        return None, b"", buf
    if n == 126:
        n = struct.unpack("!H", buf[2:4])[0]
    elif n == 127:
        n = struct.unpack("!Q", buf[2:10])[0]
    if not need(hl + n):
        return None, b"", buf
    return buf[0] & 15, buf[hl:hl + n], buf[hl + n:]


def ws_reply(s, buf, want_ops=(8, 10)):
    """The next close or pong frame (others skipped): (opcode, payload)."""
    while True:
        op, p, buf = read_frame(s, buf)
        if op is None or op in want_ops:
            return op, p


def test_ws_frames(e):
    sleeper = subprocess.Popen(["/bin/sleep", "300"])
    try:
        time.sleep(0.2)
        st, h, j = e.json("POST", "/api/v1/sessions", body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}], "pids": [sleeper.pid]})
        check(st == 201, "create an idle session: %d %r" % (st, j))
        sid = j["id"]
        # a well-formed ping is answered with the same payload
        s, buf = ws_open(e, sid)
        s.sendall(frame(9, b"p" * 125))
        op, p = ws_reply(s, buf)
        check(op == 10 and p == b"p" * 125, "a 125-byte ping → a 125-byte pong: %r %d" % (op, len(p)))
        # a fragmented text message with a ping between its fragments is fine (ignored text)
        s.sendall(frame(1, b"he", fin=False) + frame(9, b"mid") + frame(0, b"llo"))
        op, p = ws_reply(s, b"")
        check(op == 10 and p == b"mid", "a ping between the fragments of a message is answered: %r %r" % (op, p))
        s.sendall(frame(8, b"\x03\xe8"))
        op, p = ws_reply(s, b"")
        check(op == 8, "a clean close is echoed: %r" % op)
        s.close()
        bad = [
            ("an unmasked ping", frame(9, b"x", mask=False)),
            ("an unmasked text frame", frame(1, b"hello", mask=False)),
            ("RSV1 set", frame(1, b"hello", rsv=0x40)),
            ("RSV3 set on a ping", frame(9, b"x", rsv=0x10)),
            ("reserved opcode 3", frame(3, b"x")),
            ("reserved opcode 0xB", frame(0xB, b"x")),
            ("a 126-byte ping", frame(9, b"y" * 126)),
            ("a 64 KiB ping", frame(9, b"z" * 65535)),
            ("a fragmented ping", frame(9, b"x", fin=False)),
            ("a 200-byte close", frame(8, b"\x03\xe8" + b"c" * 198)),
            ("a continuation frame outside a message", frame(0, b"x")),
            ("a new text frame inside a fragmented one", frame(1, b"a", fin=False) + frame(1, b"b")),
        ]
        for what, f in bad:
            s, buf = ws_open(e, sid)
            s.sendall(f)
            op, p = ws_reply(s, buf)
            code = struct.unpack("!H", p[:2])[0] if op == 8 and len(p) >= 2 else None
            check(op == 8 and code == 1002, "%s → close 1002: op %r payload %r" % (what, op, p[:80]))
            rest = read_all(s)  # then the server ends the connection
            check(len(rest) < 1024, "%s: the connection ends (%d more bytes)" % (what, len(rest)))
            s.close()
        e.json("DELETE", "/api/v1/sessions/%d" % sid, expect=204)
    finally:
        sleeper.kill()
        sleeper.wait()


def main():
    with Etwd(args=["--allow-origin", DASH]) as e:
        test_smuggling(e)
        test_head_streams(e)
        test_status_lines(e)
        test_cors(e)
        test_ws_frames(e)
        st, h, j = e.json("GET", "/api/v1/health", token=None, expect=200)  # still serving
    done()


if __name__ == "__main__":
    main()
