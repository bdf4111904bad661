"""Security review of the HTTP surface (session 15): what an attacker on the network with no token,
a reader token or the admin token — or a local user who can write into a shared data directory —
tried, end to end against the real binary over real TLS.

Fixed here (each check failed on the code before the fix):
- a symbolic link placed in the data directory was served: a reader downloaded the token file
  through `leak.etl -> ../tokens` (and it was listed, decoded, replayed);
- a gzip/zip upload was decompressed with fopen(…, "wb") into `<tmp>.unpacked` in the data
  directory, following a symbolic link planted there: root overwrote a file of the planter's choice;
  so did a manifest upload, through its temporary file in the manifest directory;
- a sink's (or nats source's) URL with credentials (`nats://user:password@host`) was shown to
  every reader in GET /api/v1/sessions.

Checked and fine (kept here as regressions, cheap): every admin route refuses a reader (403) and
no token (401); odd names in /files/{name}; TLS below 1.2 and renegotiation refused; a WebSocket
upgrade with the page's cookie from a foreign Origin refused; the page's CSP and nosniff."""
import gzip
import os
import shutil
import socket
import subprocess
import tempfile
import time

from etwd_harness import CORPUS, MANIFESTS, Etwd, check, done, free_port, problem

SMALL_ETL = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/"
                                 "SIH.20230422.034724.362.1.etl")


def data_dir(e):
    d = os.path.join(e.state, "files")
    os.makedirs(d, exist_ok=True)
    return d


def test_data_dir_symlink(e):
    """A link in the data directory is neither listed, served, decoded nor replayed: 403 naming it.
    Before: GET /api/v1/files/leak.etl as the reader returned the token file."""
    d = data_dir(e)
    os.symlink(os.path.join(e.state, "tokens"), os.path.join(d, "leak.etl"))
    os.symlink(SMALL_ETL, os.path.join(d, "outside.etl"))  # an ETL file, but outside: refused too
    secret = e.tokens["admin"].encode()
    for name in ("leak.etl", "outside.etl"):
        st, h, data = e.request("GET", "/api/v1/files/" + name, token="reader")
        problem(st, h, data, 403, "GET a link %s" % name)
        check(secret not in data and b"symbolic link" in data, "GET %s: %r" % (name, data[:300]))
        st, h, data = e.request("GET", "/api/v1/files/%s/events" % name, token="reader")
        problem(st, h, data, 403, "decode a link %s" % name)
        st, h, data = e.request("POST", "/api/v1/sessions", {"backend": "etl", "files": [name]})
        problem(st, h, data, 403, "replay a link %s" % name)
    st, h, data = e.request("GET", "/api/v1/files", token="reader")
    check(st == 200 and b"leak.etl" not in data and b"outside.etl" not in data, "listing: %r" % data[:300])
    # a regular file is still served
    shutil.copy(SMALL_ETL, os.path.join(d, "plain.etl"))
    st, h, data = e.request("GET", "/api/v1/files/plain.etl", token="reader")
    check(st == 200 and data == open(SMALL_ETL, "rb").read(), "a regular file: %d" % st)
    for n in ("leak.etl", "outside.etl", "plain.etl"):
        os.unlink(os.path.join(d, n))


def tls_socket(e):
    raw = socket.create_connection(("127.0.0.1", e.port), timeout=30)
    return e.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")


def test_upload_unpack_no_follow(e):
    """A gzip upload is decompressed next to its temporary file (<tmp>.unpacked). A local user who
    can write into the data directory sees the temporary file while the body arrives and plants a
    link at that name: the server must not write through it. Before: the victim file was
    overwritten with the decompressed upload."""
    d = data_dir(e)
    vdir = tempfile.mkdtemp(prefix="etwd-victim-")
    victim = os.path.join(vdir, "victim")
    with open(victim, "wb") as f:
        f.write(b"victim's data\n")
    body = gzip.compress(open(SMALL_ETL, "rb").read())
    s = tls_socket(e)
    s.sendall(("POST /api/v1/files?name=race.etl.gz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/octet-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
               % (e.tokens["admin"], len(body))).encode())
    s.sendall(body[:len(body) // 2])
    tmp, deadline = None, time.time() + 20
    while not tmp and time.time() < deadline:
        tmp = next((n for n in os.listdir(d) if n.startswith(".upload-") and not n.endswith(".unpacked")), None)
        time.sleep(0.01)
    check(tmp is not None, "the upload's temporary file appeared in the data directory")
    if tmp:
        os.symlink(victim, os.path.join(d, tmp + ".unpacked"))
    s.sendall(body[len(body) // 2:])
    resp = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        resp += b
    s.close()
    check(resp.startswith(b"HTTP/1.1 201"), "upload: %r" % resp[:400])
    check(open(victim, "rb").read() == b"victim's data\n", "the planted link was followed: victim rewritten")
    path = os.path.join(d, "race.etl")
    check(os.path.isfile(path) and not os.path.islink(path), "race.etl is a regular file")
    st, h, data = e.request("GET", "/api/v1/files/race.etl", token="reader")
    check(st == 200 and data == open(SMALL_ETL, "rb").read(), "the stored upload: %d %d bytes" % (st, len(data)))
    check(not [n for n in os.listdir(d) if n.startswith(".upload-")], "temporary files left: %r" % os.listdir(d))
    e.request("DELETE", "/api/v1/files/race.etl")
    shutil.rmtree(vdir)


def read_response(s):
    """One HTTP/1.1 response with a Content-Length from socket @s: (status line, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    head, _, body = buf.partition(b"\r\n\r\n")
    n = int(next((l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), b"0"))
    while len(body) < n:
        b = s.recv(65536)
        if not b:
            break
        body += b
    return head.split(b"\r\n")[0], body


def test_manifest_upload_no_follow(e):
    """A manifest is stored through a temporary file .upload-PID-PTR in the upload directory, PTR
    the request's address: the same as an ETL upload's earlier on the same connection, whose
    temporary file a local user can see in the data directory. A link planted at that name in the
    manifest directory must not be written through. Before: open(O_TRUNC) followed it, the victim
    got the manifest and the link was renamed into the manifest's place."""
    d, mdir = data_dir(e), os.path.join(e.state, "manifests")
    os.makedirs(mdir, exist_ok=True)
    vdir = tempfile.mkdtemp(prefix="etwd-victim-")
    victim = os.path.join(vdir, "victim")
    with open(victim, "wb") as f:
        f.write(b"victim's data\n")
    etl = open(SMALL_ETL, "rb").read()
    s = tls_socket(e)
    s.sendall(("POST /api/v1/files?name=learn.etl HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
               % (e.tokens["admin"], len(etl))).encode() + etl[:len(etl) // 2])
    tmp, deadline = None, time.time() + 20
    while not tmp and time.time() < deadline:
        tmp = next((n for n in os.listdir(d) if n.startswith(".upload-")), None)
        time.sleep(0.01)
    check(tmp is not None, "the upload's temporary file appeared in the data directory")
    s.sendall(etl[len(etl) // 2:])
    status, body = read_response(s)
    check(status.startswith(b"HTTP/1.1 201"), "the ETL upload: %r %r" % (status, body[:200]))
    if tmp:
        os.symlink(victim, os.path.join(mdir, tmp))
    man = open(os.path.join(MANIFESTS, "PowerShell+PowerShell/src/PowerShell.Core.Instrumentation/"
                                       "PowerShell.Core.Instrumentation.man"), "rb").read()
    s.sendall(("POST /api/v1/manifests?name=planted.man HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/octet-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
               % (e.tokens["admin"], len(man))).encode() + man)
    status, body = read_response(s)
    s.close()
    check(status.startswith(b"HTTP/1.1 201"), "the manifest upload: %r %r" % (status, body[:200]))
    check(open(victim, "rb").read() == b"victim's data\n", "the planted link was followed: victim rewritten")
    path = os.path.join(mdir, "planted.man")
    check(os.path.isfile(path) and not os.path.islink(path) and open(path, "rb").read() == man,
          "planted.man is the uploaded manifest, a regular file")
    os.unlink(path)
    e.request("DELETE", "/api/v1/files/learn.etl")
    shutil.rmtree(vdir)


def test_nats_url_credentials(e):
    """A broker that wants a user and password, given in the URL: it works, and no reader sees the
    password (the URL reads nats://***@HOST:PORT). Before: GET /api/v1/sessions showed it."""
    port, mport = free_port(), free_port()
    ndir = tempfile.mkdtemp(prefix="etwd-nats-")
    log = open(os.path.join(ndir, "log"), "ab")
    nats = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-m", str(mport),
                             "-sd", os.path.join(ndir, "js"), "--user", "alice", "--pass", "s3cretPW"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        url = "nats://alice:s3cretPW@127.0.0.1:%d" % port
        st, h, j = e.json("POST", "/api/v1/sessions", {
            "name": "to-nats", "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
            "sinks": [{"type": "nats", "url": url, "stream": "SECR", "subject": "secr.{host}.{session}.{provider}"}]})
        check(st == 201, "a sink with credentials in its URL: %d %r" % (st, j))
        sink_id = j.get("id") if isinstance(j, dict) else None
        st, h, j = e.json("POST", "/api/v1/sessions", {
            "name": "from-nats", "backend": "nats", "subjects": ["secr.>"], "nats": {"url": url, "stream": "SECR"}})
        check(st == 201, "a nats source with credentials in its URL: %d %r" % (st, j))
        src_id = j.get("id") if isinstance(j, dict) else None
        deadline = time.time() + 30
        k = {}
        while sink_id and time.time() < deadline:
            k = e.json("GET", "/api/v1/sessions/%d" % sink_id, token="reader")[2]["stats"]["sinks"][0]
            if k.get("connected"):
                break
            time.sleep(0.1)
        check(k.get("connected"), "the sink connected with the URL's credentials: %r" % k)
        for path in ["/api/v1/sessions"] + ["/api/v1/sessions/%d" % i for i in (sink_id, src_id) if i]:
            st, h, data = e.request("GET", path, token="reader")
            check(st == 200 and b"s3cretPW" not in data and b"alice" not in data, "%s shows the credentials" % path)
            check(("nats://***@127.0.0.1:%d" % port).encode() in data, "%s: the URL without them: %r" % (path, data[:600]))
        st, h, data = e.request("GET", "/metrics", token="reader")
        check(b"s3cretPW" not in data, "/metrics shows the password")
        for i in (sink_id, src_id):
            if i:
                e.request("DELETE", "/api/v1/sessions/%d" % i)
        check("s3cretPW" not in e.stderr(), "the log shows the password")
    finally:
        nats.terminate()
        nats.wait(30)
        log.close()
        shutil.rmtree(ndir, ignore_errors=True)


ADMIN_ROUTES = [("POST", "/api/v1/sessions", {}), ("PATCH", "/api/v1/sessions/1", {}),
                ("DELETE", "/api/v1/sessions/1", None), ("POST", "/api/v1/sessions/1/stop", None),
                ("POST", "/api/v1/sessions/1/markers", {"text": "x"}), ("POST", "/api/v1/sessions/1/snapshot", None),
                ("POST", "/api/v1/files?name=a.etl", b"x"), ("DELETE", "/api/v1/files/a.etl", None),
                ("DELETE", "/api/v1/recordings/x", None), ("POST", "/api/v1/manifests?name=x.man", b"x"),
                ("POST", "/api/v1/tokens/rotate", None)]


def test_roles_and_names(e):
    """Checked and fine: the reader gets 403 and no token 401 on every admin route; /metrics needs
    a token; names that could leave the data directory are 400 (or no route at all)."""
    for m, p, body in ADMIN_ROUTES:
        st, h, data = e.request(m, p, body, token="reader")
        problem(st, h, data, 403, "reader %s %s" % (m, p))
        st, h, data = e.request(m, p, body, token=None)
        problem(st, h, data, 401, "no token %s %s" % (m, p))
    st, h, data = e.request("GET", "/metrics", token=None)
    problem(st, h, data, 401, "/metrics without a token")
    for name in ("..%2ftokens", "%2e%2e%2ftokens.etl", "..%5c..%5ctokens.etl", "a%00.etl", "tokens", "cert.pem",
                 "key.pem", ".upload-1.etl", "a%2fb.etl"):
        st, h, data = e.request("GET", "/api/v1/files/" + name, token="reader")
        problem(st, h, data, 400, "GET /api/v1/files/" + name)
    st, h, data = e.request("GET", "/api/v1/files/" + "a" * 300 + ".etl", token="reader")
    problem(st, h, data, 404, "a 300-byte name")


def test_tls_and_browser(e):
    """Checked and fine: TLS 1.1 and client renegotiation refused; the page's cookie opens no
    WebSocket from a foreign Origin; the page has a CSP with frame-ancestors and nosniff."""
    hp = "127.0.0.1:%d" % e.port
    ca = os.path.join(e.state, "cert.pem")
    r = subprocess.run(["openssl", "s_client", "-connect", hp, "-CAfile", ca, "-tls1_1"], input=b"",
                       capture_output=True, timeout=30)
    check(r.returncode != 0 and b"Cipher is (NONE)" in r.stdout, "TLS 1.1 accepted: %r" % r.stdout[-300:])
    p = subprocess.Popen(["openssl", "s_client", "-connect", hp, "-CAfile", ca, "-tls1_2"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1)
    try:
        p.stdin.write(b"R\n")  # s_client: renegotiate
        p.stdin.flush()
        time.sleep(1)
        p.stdin.close()
    except BrokenPipeError:  # s_client has gone already
        pass
    out = p.stdout.read()
    p.wait(30)
    check(b"no renegotiation" in out, "client renegotiation: %r" % out[-400:])
    st, h, data = e.request("POST", "/api/v1/login", token="reader")
    cookie = h.get("set-cookie", "").split(";")[0]
    check(st == 200 and cookie.startswith("etwd_session="), "login: %d %r" % (st, h))
    st, h, j = e.json("POST", "/api/v1/sessions", {"providers": [{"name": "sched", "events": ["sched_switch"]}]})
    import websocket
    kw = {"header": ["Cookie: " + cookie], "timeout": 10, "sslopt": {"ca_certs": ca}}
    for origin, ok in (("https://evil.example", False), ("null", False), ("https://127.0.0.1:%d" % e.port, True)):
        try:
            websocket.create_connection(e.ws_url("/api/v1/sessions/%d/events" % j["id"]), origin=origin, **kw).close()
            got = True
        except websocket.WebSocketBadStatusException as x:
            got = False
            check(x.status_code == 403, "Origin %s: %r" % (origin, x))
        check(got == ok, "WebSocket with the cookie from Origin %s: opened %s" % (origin, got))
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
    st, h, data = e.request("GET", "/", token=None)
    csp = h.get("content-security-policy", "")
    check(st == 200 and "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and
          h.get("x-content-type-options") == "nosniff", "the page's headers: %r" % h)


def main():
    t0 = time.time()
    with Etwd() as e:
        test_data_dir_symlink(e)
        test_upload_unpack_no_follow(e)
        test_manifest_upload_no_follow(e)
        test_nats_url_credentials(e)
        test_roles_and_names(e)
        test_tls_and_browser(e)
    print("%.1f s" % (time.time() - t0))
    done()


if __name__ == "__main__":
    main()
