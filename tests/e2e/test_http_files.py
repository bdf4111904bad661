"""Downloads, uploads and names over HTTP, as raw clients send them (issue 18, items 9, 11, 15, 16,
17): strong validators (ETag, Last-Modified), If-None-Match/If-Match/If-Range on a file replaced
meanwhile; Range per RFC 9110 (unit case, lists and unknown units give the whole file, only an
unsatisfiable range 416); uploads kept only when complete and an ETL file (raw sockets: a declared
Content-Length then a close, a cut chunked body); NUL (%00, \\u0000) refused in paths, query
values and JSON strings; cookie-authenticated changes refused by Sec-Fetch-Site without Origin."""
import os
import socket
import time

from etwd_harness import Etwd, check, done, CORPUS

SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")
WAAS = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl")
def raw(e, data, close_after=True, timeout=30):
    """Send @data on a fresh TLS connection; with @close_after, close right after sending (the
    client goes away). Else read the reply until the server closes or @timeout. Returns bytes."""
    s = e.ssl_context().wrap_socket(socket.create_connection(("127.0.0.1", e.port), timeout=timeout),
                                    server_hostname="127.0.0.1")
    s.sendall(data)
    if close_after:
        s.close()
        return b""
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, OSError):
        pass
    s.close()
    return out


def files(e):
    st, h, j = e.json("GET", "/api/v1/files", token="reader", expect=200)
    return {f["name"]: f["size"] for f in j}


def download(e, name, headers=None):
    return e.request("GET", "/api/v1/files/" + name, token="reader", headers=headers)


def upload(e, name, data, overwrite=False, ctype="application/octet-stream"):
    q = "/api/v1/files?name=%s%s" % (name, "&overwrite=true" if overwrite else "")
    return e.json("POST", q, body=data, ctype=ctype)


def audit_results(e, action):
    return [l for l in e.stderr().splitlines() if "kind=audit" in l and "action=%s" % action in l]


def test_uploads(e, good, other):
    st, h, j = upload(e, "good.etl", good)
    check(st == 201 and j["size"] == len(good), "a whole ETL upload → 201: %d %r" % (st, j))
    head = ("POST /api/v1/files?name=%%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/octet-stream\r\n" % e.tokens["admin"])
    # declared 100,000 bytes, sent 5,000 (the real file's start), then gone
    raw(e, ((head % "cut.etl") + "Content-Length: 100000\r\n\r\n").encode() + other[:5000])
    raw(e, ((head % "good.etl&overwrite=true") + "Content-Length: %d\r\n\r\n" % len(other)).encode() + other[:5000])
    # a chunked body cut after its first chunk
    raw(e, ((head % "cutchunk.etl") + "Transfer-Encoding: chunked\r\n\r\n").encode() +
        b"%x\r\n" % 5000 + other[:5000] + b"\r\n")
    def cut_lines():
        ls = audit_results(e, "uploadFile")
        return ([l for l in ls if 'detail="upload cut.etl"' in l or 'detail="upload cutchunk.etl"' in l] +
                [l for l in ls if 'detail="upload good.etl"' in l][1:])  # the first is the whole upload
    deadline = time.time() + 60
    while time.time() < deadline and len(cut_lines()) < 3:
        time.sleep(0.2)
    cut = cut_lines()
    check(len(cut) == 3 and all("result=refused" in l and "status=400" in l for l in cut),
          "the three cut uploads are audited as refused (400): %r" % cut)
    names = files(e)
    check("cut.etl" not in names and "cutchunk.etl" not in names, "no file is kept of a cut upload: %r" % names)
    check(names.get("good.etl") == len(good), "a cut overwrite leaves the good file: %r" % names)
    st, h, d = download(e, "good.etl")
    check(st == 200 and d == good, "the good file's bytes are unchanged")
    check(not [n for n in os.listdir(os.path.join(e.state, "files")) if n.startswith(".upload")],
          "no temporary upload file is left")
    # a whole chunked upload is kept
    body = b"".join(b"%x\r\n" % len(other[i:i + 7000]) + other[i:i + 7000] + b"\r\n"
                    for i in range(0, len(other), 7000)) + b"0\r\n\r\n"
    resp = raw(e, ((head % "chunked.etl") + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode() + body,
               close_after=False)
    check(resp.startswith(b"HTTP/1.1 201"), "a whole chunked upload → 201: %r" % resp[:200])
    check(files(e).get("chunked.etl") == len(other), "the chunked upload is kept whole")
    # not ETL files: refused at upload, with problem+json
    st, h, j = upload(e, "passwd.etl", open("/etc/passwd", "rb").read())
    check(st == 415 and "application/problem+json" in h.get("content-type", "") and j.get("type", "").endswith("not-etl"),
          "/etc/passwd → 415 not-etl: %d %r" % (st, j))
    mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.etl\"\r\n"
          b"Content-Type: application/octet-stream\r\n\r\n" + good + b"\r\n--XyZ--\r\n")
    st, h, j = upload(e, "multi.etl", mp, ctype="multipart/form-data; boundary=XyZ")
    check(st == 415 and "application/problem+json" in h.get("content-type", ""), "multipart upload → 415: %d %r" % (st, j))
    st, h, j = upload(e, "zeros.etl", b"\x00" * 100)
    check(st == 415, "100 zero bytes → 415: %d %r" % (st, j))
    names = files(e)
    check(not {"passwd.etl", "multi.etl", "zeros.etl"} & set(names), "no refused upload is kept: %r" % names)


def test_ranges(e, good):
    n = len(good)
    cases = [  # (Range, status, (first, last) of a 206)
        ("bytes=0-9", 206, (0, 9)),
        ("BYTES=0-9", 206, (0, 9)),
        ("Bytes=10-19", 206, (10, 19)),
        ("bytes=-5", 206, (n - 5, n - 1)),
        ("bytes=%d-" % (n - 3), 206, (n - 3, n - 1)),
        ("bytes=0-%d" % (n + 1000), 206, (0, n - 1)),
        ("bytes=0-1,5-6", 200, None),
        ("bytes=0-9, 20-29", 200, None),
        ("items=0-9", 200, None),
        ("bytes=5-2", 200, None),
        ("bytes=abc", 200, None),
        ("BYTES=", 200, None),
        ("bytes=0-0", 206, (0, 0)),
        ("bytes=%d-" % n, 416, None),
        ("bytes=-0", 416, None),
        ("bytes=%d-,%d-" % (n, n + 10), 416, None),
    ]
    for rng, want, span in cases:
        st, h, d = download(e, "good.etl", {"Range": rng})
        ok = st == want
        if want == 206:
            a, b = span
            ok = ok and d == good[a:b + 1] and h.get("content-range") == "bytes %d-%d/%d" % (a, b, n)
        elif want == 200:
            ok = ok and d == good and "content-range" not in h
        else:
            ok = ok and h.get("content-range") == "bytes */%d" % n and "problem+json" in h.get("content-type", "")
        check(ok, "Range %r → %d (got %d, %d bytes, %r)" % (rng, want, st, len(d), h.get("content-range")))


def test_validators(e, good, other):
    st, h, d = download(e, "good.etl")
    etag, lm = h.get("etag", ""), h.get("last-modified", "")
    check(st == 200 and etag.startswith('"') and etag.endswith('"') and lm.endswith(" GMT"),
          "download has a strong ETag and Last-Modified: %r %r" % (etag, lm))
    st2, h2, _ = e.request("HEAD", "/api/v1/files/good.etl", token="reader")
    check(h2.get("etag") == etag, "HEAD gives the same ETag")
    st, h, d = download(e, "good.etl", {"If-None-Match": etag})
    check(st == 304 and d == b"" and h.get("etag") == etag, "If-None-Match with the ETag → 304: %d" % st)
    st, h, d = download(e, "good.etl", {"If-None-Match": 'W/' + etag})
    check(st == 304, "If-None-Match compares weakly: %d" % st)
    st, h, d = download(e, "good.etl", {"If-Modified-Since": lm})
    check(st == 304, "If-Modified-Since Last-Modified → 304: %d" % st)
    st, h, d = download(e, "good.etl", {"Range": "bytes=0-99", "If-Range": etag})
    check(st == 206 and d == good[:100], "If-Range with the current ETag → 206: %d" % st)
    st, h, d = download(e, "good.etl", {"If-Match": etag, "Range": "bytes=0-9"})
    check(st == 206, "If-Match with the current ETag → served: %d" % st)
    # the file is replaced (a new version): the old ETag no longer matches
    st, h, j = upload(e, "good.etl", other, overwrite=True)
    check(st == 201, "overwrite → 201: %d" % st)
    st, h, d = download(e, "good.etl", {"Range": "bytes=100-", "If-Range": etag})
    check(st == 200 and d == other and "content-range" not in h and h.get("etag") != etag,
          "resume with the old ETag after a change → 200 and the whole new file: %d %d" % (st, len(d)))
    st, h, d = download(e, "good.etl", {"Range": "bytes=100-", "If-Range": lm})
    check(st == 200 and d == other, "If-Range with a date → the whole file: %d" % st)
    st, h, d = download(e, "good.etl", {"If-Match": etag})
    check(st == 412 and "problem+json" in h.get("content-type", ""), "If-Match with the old ETag → 412: %d" % st)
    st, h, d = download(e, "good.etl", {"If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"})
    check(st == 412, "If-Unmodified-Since before the change → 412: %d" % st)
    st, h, d = download(e, "good.etl", {"If-None-Match": etag})
    check(st == 200 and d == other, "If-None-Match with the old ETag → 200: %d" % st)
    # the same bytes rewritten in place (same inode, new mtime) get a new ETag too
    path = os.path.join(e.state, "files", "good.etl")
    new_etag = h.get("etag")
    t = time.time() + 5
    os.utime(path, (t, t))
    st, h, d = download(e, "good.etl")
    check(h.get("etag") not in (new_etag, etag), "a new mtime → a new ETag: %r %r" % (h.get("etag"), new_etag))


def test_nul(e, good):
    st, h, j = upload(e, "ps.etl", good)
    check(st == 201, "ps.etl uploaded: %d" % st)
    st, h, d = e.request("DELETE", "/api/v1/files/ps.etl%00.junk")
    check(st == 400 and b"problem" in d, "DELETE ps.etl%%00.junk → 400: %d %r" % (st, d[:200]))
    check("ps.etl" in files(e), "ps.etl is still there")
    st, h, j = e.json("GET", "/api/v1/files/ps.etl%00.junk", token="reader")
    check(st == 400, "GET with %%00 → 400: %d" % st)
    st, h, j = upload(e, "x.etl%00.junk", good)
    check(st == 400 and j.get("field") == "name", "upload name with %%00 → 400 naming it: %d %r" % (st, j))
    check("x.etl" not in files(e), "nothing uploaded under the cut name")
    st, h, j = e.json("GET", "/api/v1/providers?q=sch%00ed", token="reader")
    check(st == 400 and j.get("field") == "q", "query value with %%00 → 400 naming it: %d %r" % (st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body='{"name":"a\\u0000b","files":["good.etl"]}')
    check(st == 400 and j.get("field") == "/name", "session name with \\u0000 → 400 naming /name: %d %r" % (st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body='{"files":["good.etl\\u0000x"]}')
    check(st == 400 and j.get("field") == "/files/0", "file name with \\u0000 → 400 naming /files/0: %d %r" % (st, j))
    st, h, j = e.json("POST", "/api/v1/sessions",
                      body='{"name":"x","providers":[{"name":"sched","events":["a","b\\u0000"]}]}')
    check(st == 400 and j.get("field") == "/providers/0/events/1", "nested \\u0000 → 400 naming its pointer: %d %r" % (st, j))
    st, h, j = e.json("POST", "/api/v1/sessions", body='{"files":["good.etl"],"na\\u0000me":"x"}')
    check(st == 400 and j.get("field") is None and "NUL" in j.get("detail", ""), "\\u0000 in a key → 400: %d %r" % (st, j))
    st, h, j = e.request("POST", "/api/v1/sessions", body=b'{"name":"a\x00b","files":["good.etl"]}')
    check(st == 400, "a raw NUL byte in a JSON body → 400: %d" % st)
    st, h, j = e.json("POST", "/api/v1/sessions", body='{"name":"a\\\\u0000b","files":["good.etl"],"replay":"fast"}')
    check(st == 400 and j.get("field") == "/name" and "NUL" not in j.get("detail", ""),
          "an escaped backslash before u0000 is no NUL (the name check refuses the backslash): %d %r" % (st, j))


def test_session_file(e):
    """a live recording (tracefs, mode both): the same validators on /sessions/{id}/file"""
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201,
                      body={"providers": [{"name": "sched", "events": ["sched_switch"]}], "mode": "both"})
    sid = j["id"]
    url = "/api/v1/sessions/%d/file" % sid
    # while recording, the trace.dat is replaced by a new snapshot about every second: a resume
    # with the first version's ETag gets that version's bytes (206) until it changes, then the
    # whole new version (200), never a mix
    deadline = time.time() + 60
    st, h, first = e.request("GET", url, token="reader")
    while st != 200 and time.time() < deadline:
        time.sleep(0.2)
        st, h, first = e.request("GET", url, token="reader")
    e1 = h.get("etag")
    check(st == 200 and e1 and len(first) > 10, "the live recording downloads: %d %r" % (st, e1))
    changed = False
    while time.time() < deadline and not changed:
        os.listdir("/proc")  # some scheduler activity
        st, h, d = e.request("GET", url, token="reader", headers={"Range": "bytes=10-", "If-Range": e1})
        if st == 206:
            check(h.get("etag") == e1 and d == first[10:], "206 only for the first version, with its bytes")
        else:
            changed = True
            check(st == 200 and h.get("etag") != e1 and len(d) == int(h.get("content-length", -1)) and "content-range" not in h,
                  "after a snapshot the resume gets the whole new version: %d %r" % (st, h.get("etag")))
        time.sleep(0.3)
    check(changed, "the live recording changed within 60 s")
    st, h, j = e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    st, h, d = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader")
    etag = h.get("etag", "")
    check(st == 200 and etag.startswith('"') and h.get("last-modified"), "recording download has an ETag: %d %r" % (st, etag))
    st, h, d2 = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader", headers={"If-None-Match": etag})
    check(st == 304 and not d2, "recording If-None-Match → 304: %d" % st)
    st, h, d2 = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader",
                          headers={"Range": "bytes=0-15", "If-Range": etag})
    check(st == 206 and d2 == d[:16], "recording If-Range with its ETag → 206: %d" % st)
    st, h, d2 = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader",
                          headers={"Range": "bytes=0-15", "If-Range": '"0-0-0"'})
    check(st == 200 and d2 == d, "recording If-Range with another ETag → 200 and the whole file: %d" % st)
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_ws_nul(e):
    import websocket
    st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["good.etl"]}, expect=201)
    try:
        ws = e.ws("/api/v1/sessions/%d/events?provider=a%%00b" % j["id"])
        ws.close()
        check(False, "WebSocket filter with %00 accepted")
    except websocket.WebSocketBadStatusException as ex:
        check(ex.status_code == 400, "WebSocket filter with %%00 → 400: %d" % ex.status_code)
    st, h, d = e.request("GET", "/api/v1/sessions/%d/events?provider=a%%00b" % j["id"], token="reader",
                         headers={"Accept": "application/x-ndjson"})
    check(st == 400, "ndjson filter with %%00 → 400: %d" % st)
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def test_cookie_csrf(e):
    st, h, j = e.json("POST", "/api/v1/login", token="admin", expect=200)
    cookie = h.get("set-cookie", "").split(";")[0]
    origin = "https://127.0.0.1:%d" % e.port
    for extra, want in (({"Sec-Fetch-Site": "cross-site"}, 403), ({"Sec-Fetch-Site": "same-site"}, 403),
                        ({"Sec-Fetch-Site": "same-origin"}, 404), ({"Sec-Fetch-Site": "none"}, 404),
                        ({}, 404), ({"Origin": origin, "Sec-Fetch-Site": "same-origin"}, 404),
                        ({"Origin": "https://evil.example"}, 403)):
        hdrs = dict(extra, Cookie=cookie, Host="127.0.0.1:%d" % e.port)
        st, h, d = e.request("DELETE", "/api/v1/sessions/999999", token=None, headers=hdrs)
        check(st == want and (want != 403 or b"forbidden-origin" in d),
              "cookie DELETE with %r → %d: %d %r" % (extra, want, st, d[:120]))
    # a bearer token is not a cookie: Sec-Fetch-Site does not matter
    st, h, d = e.request("DELETE", "/api/v1/sessions/999999", headers={"Sec-Fetch-Site": "cross-site"})
    check(st == 404, "bearer DELETE with Sec-Fetch-Site cross-site → 404: %d" % st)


def main():
    good = open(SIH, "rb").read()
    other = open(WAAS, "rb").read()
    with Etwd() as e:
        test_uploads(e, good, other)
        test_ranges(e, good)
        test_validators(e, good, other)
        test_nul(e, good)
        test_ws_nul(e)
        test_session_file(e)
        test_cookie_csrf(e)
        st, h, j = e.json("GET", "/api/v1/health", token=None, expect=200)
    done()


if __name__ == "__main__":
    main()
