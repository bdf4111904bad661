"""Every error goes through the one table (api/problem.h, issue 19 item 7): a problem type has one
status and one title wherever it is raised — by the router, a handler's own check, a core error
(etwd_fail) or a WebSocket refusal — and the body's status is the response's."""
import json
import socket

from etwd_harness import Etwd, check, done


def ws_refusal(e):
    """A WebSocket upgrade without a token, over a raw TLS socket: (status, problem)."""
    s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
    s = e.ssl_context().wrap_socket(s, server_hostname="localhost")
    s.sendall(b"GET /api/v1/sessions/1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n")
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
            head, _, body = out.partition(b"\r\n\r\n")
            n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if n and len(body) >= n[0]:
                break
    except (socket.timeout, OSError):
        pass
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    try:
        return int(head.split(b" ")[1]), json.loads(body)
    except (IndexError, ValueError):
        return 0, {"raw": out[:300].decode(errors="replace")}


def main():
    with Etwd() as e:
        # (what, status, problem) of errors raised in different places
        seen = []

        def req(what, want, name, method, path, body=None, token="admin", **kw):
            st, h, j = e.json(method, path, body, token, **kw)
            check(h.get("content-type") == "application/problem+json", "%s: problem+json: %r" % (what, h))
            seen.append((what, st, j if isinstance(j, dict) else {"raw": j}))
            check(st == want and isinstance(j, dict) and j.get("type") == "urn:etwd:problem:" + name,
                  "%s: want %d %s, got %d %r" % (what, want, name, st, j))

        req("no such route (router)", 404, "not-found", "GET", "/api/v1/nosuch")
        req("no such session (handler)", 404, "not-found", "GET", "/api/v1/sessions/999999")
        req("no such provider (core error)", 404, "not-found", "GET", "/api/v1/providers/NoSuchProviderXyz")
        req("unknown ?backend= (handler)", 400, "invalid-argument", "GET", "/api/v1/providers?backend=nope")
        req("a spec without providers (core error)", 400, "invalid-argument", "POST", "/api/v1/sessions", body={})
        req("a NUL in the query (router)", 400, "invalid-argument", "GET", "/api/v1/sessions?x=%00")
        req("broken JSON (router)", 400, "malformed-json", "POST", "/api/v1/sessions", body="{")
        req("no token (router)", 401, "unauthorized", "GET", "/api/v1/sessions", token=None)
        req("reader on an admin route (router)", 403, "forbidden", "POST", "/api/v1/tokens/rotate", token="reader")
        req("wrong method (router)", 405, "method-not-allowed", "PUT", "/api/v1/sessions", body={})
        st, j = ws_refusal(e)
        seen.append(("WebSocket without a token (stream)", st, j))
        check(st == 401 and j.get("type") == "urn:etwd:problem:unauthorized", "WebSocket refusal: %d %r" % (st, j))

        by_type = {}
        for what, st, j in seen:
            check(j.get("status") == st, "%s: the body's status %r is the response's %d" % (what, j.get("status"), st))
            check(isinstance(j.get("title"), str) and j.get("title"), "%s: a title: %r" % (what, j))
            by_type.setdefault(j.get("type"), []).append((what, st, j.get("title")))
        for t, occ in sorted(by_type.items(), key=lambda kv: str(kv[0])):
            check(len({(st, title) for _, st, title in occ}) == 1,
                  "%s: one status and one title wherever it is raised: %r" % (t, occ))
    done()


main()
