"""etwd_harness — spawn the real etwd binary on loopback with a throwaway state directory and
talk to it with real clients: http.client over verified TLS (the server's generated certificate
is the trust anchor) and websocket-client (Debian's python3-websocket) for WebSocket streams.

Every test file uses this module; nothing here is mocked."""
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import shutil
import sys

BIN = os.environ.get("ETWD_BIN") or os.path.join(os.path.dirname(__file__), "../../build/server/etwd")
SRC = os.environ.get("ETWD_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))


def _data_dir(env, sub):
    """ETL test data: $ETWD_CORPUS / $ETWD_MANIFESTS, else ../shared beside the source tree,
    else tests/data (scripts/fetch-corpus.sh fills it)."""
    if os.environ.get(env):
        return os.environ[env]
    shared = os.path.join(SRC, "../shared", sub)
    return shared if os.path.isdir(shared) else os.path.join(SRC, "tests/data", sub)


CORPUS = _data_dir("ETWD_CORPUS", "corpus")
MANIFESTS = _data_dir("ETWD_MANIFESTS", "manifests")
NO_DATA_HELP = ("run scripts/fetch-corpus.sh (it downloads the pinned public .etl files and manifests "
                "listed in tests/data-sources.txt into tests/data/), or set ETWD_CORPUS and ETWD_MANIFESTS")


def _need_data():
    """A test that reads the ETL corpus fails at once, saying how to get it, when it is absent
    (never a silent skip)."""
    try:
        with open(sys.argv[0]) as f:
            uses = re.search(r"\b(CORPUS|MANIFESTS)\b", f.read())
    except OSError:
        return
    for name, d in (("ETWD_CORPUS", CORPUS), ("ETWD_MANIFESTS", MANIFESTS)):
        if uses and not os.path.isdir(d):
            print("FAILED: no ETL test data at %s (%s): %s" % (d, name, NO_DATA_HELP), file=sys.stderr)
            sys.exit(1)


_need_data()

FAILURES = []


def check(cond, msg):
    """Record a failure (the test goes on) — like tests/unit/t.h's CHECK."""
    if not cond:
        FAILURES.append(msg)
        print("CHECK FAILED:", msg, file=sys.stderr, flush=True)
    return cond


def done():
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES), file=sys.stderr)
        sys.exit(1)
    print("ok")
    sys.exit(0)


def forward(a, b, rate=0, cut=None):
    """Copies socket @a's bytes to @b until either ends (at @rate bytes/s when given; at most @cut
    bytes when given), then shuts both down: one direction of the tests' TCP proxies. Returns True
    when it stopped at @cut."""
    n, stopped = 0, False
    try:
        while True:
            d = a.recv(256 if rate else 65536)
            if not d:
                break
            if cut is not None and n + len(d) >= cut:
                b.sendall(d[:cut - n])
                stopped = True
                break
            b.sendall(d)
            n += len(d)
            if rate:
                time.sleep(len(d) / rate)
    except OSError:
        pass
    for x in (a, b):
        try:
            x.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    return stopped


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Etwd:
    def __init__(self, args=(), state=None, tls=True, port=None, env=None):
        self.own_state = state is None
        self.state = state or tempfile.mkdtemp(prefix="etwd-test-")
        self.own_port = port is None  # free_port() can race with another process: retry on EADDRINUSE
        self.port = port or free_port()
        self.tls = tls
        self.args = list(args)
        self.env = dict(os.environ)
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        if env:
            self.env.update(env)
        self.proc = None
        self.stdout = ""

    def start(self, timeout=120):
        for attempt in range(5):
            cmd = [BIN, "--listen", "127.0.0.1:%d" % self.port, "--state-dir", self.state] + self.args
            if not self.tls:
                cmd.append("--insecure-http")
            try:
                return self.launch(cmd, self.env, timeout, "etwd")
            except RuntimeError:
                # the free port we picked was taken by someone else before etwd bound it
                if not (self.own_port and "Address already in use" in self.stderr()) or attempt == 4:
                    raise
                self.proc.wait()
                self.proc.stdout.close()
                self.errf.close()
                os.unlink(os.path.join(self.state, "stderr.log"))
                self.port = free_port()

    def launch(self, cmd, env, timeout, what):
        """Spawn @cmd, wait for its start-up lines (URL, fingerprint, tokens) and read the tokens."""
        self.errf = open(os.path.join(self.state, "stderr.log"), "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.errf, env=env)
        deadline = time.time() + timeout
        lines = []
        while time.time() < deadline:
            line = self.proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            lines.append(line)
            if line.startswith("tokens:"):
                break
        self.stdout = "".join(lines)
        if self.proc.poll() is not None or "listening" not in self.stdout:
            raise RuntimeError("%s did not start: %s\n%s" % (what, self.stdout, self.stderr()))
        self.tokens = {}
        with open(os.path.join(self.state, "tokens")) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                tid, role, secret = line.split()
                self.tokens[role] = secret
                self.tokens[role + "_id"] = tid
        return self

    def stderr(self):
        try:
            with open(os.path.join(self.state, "stderr.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=120):
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            check(False, "etwd did not exit within %ds of signal %d" % (timeout, sig))
        self.proc.stdout.close()
        self.errf.close()
        err = self.stderr()
        check("ERROR: AddressSanitizer" not in err and "runtime error:" not in err,
              "sanitizer report in etwd's stderr:\n" + err[-4000:])
        self.proc = None
        return rc

    def cleanup(self):
        if self.own_state:
            shutil.rmtree(self.state, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        if self.proc:
            rc = self.stop()
            check(rc == 0, "etwd exited with %r after SIGTERM" % rc)
        self.cleanup()

    # ---- clients
    def ssl_context(self, minv=None, maxv=None):
        ctx = ssl.create_default_context(cafile=os.path.join(self.state, "cert.pem"))
        if minv:
            ctx.minimum_version = minv
        if maxv:
            ctx.maximum_version = maxv
        return ctx

    def conn(self, timeout=30):
        if self.tls:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context())
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, token="admin", headers=None, ctype="application/json",
                timeout=30):
        """Returns (status, headers dict (lower-case), body bytes)."""
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + self.tokens.get(token, token)
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode()
            if ctype:
                h["Content-Type"] = ctype
        c = self.conn(timeout)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, data

    def json(self, method, path, body=None, token="admin", expect=None, **kw):
        st, h, data = self.request(method, path, body, token, **kw)
        if expect is not None:
            check(st == expect, "%s %s: status %d, want %d: %s" % (method, path, st, expect, data[:500]))
        try:
            return st, h, json.loads(data) if data else None
        except ValueError:
            return st, h, data

    def ws_url(self, path):
        return ("wss" if self.tls else "ws") + "://127.0.0.1:%d%s" % (self.port, path)

    def ws(self, path, token="reader", origin=None, timeout=60):
        import websocket
        hdr = []
        if token:
            hdr.append("Authorization: Bearer " + self.tokens.get(token, token))
        sslopt = {"ca_certs": os.path.join(self.state, "cert.pem")} if self.tls else None
        kw = {"header": hdr, "timeout": timeout}
        if sslopt:
            kw["sslopt"] = sslopt
        if origin:
            kw["origin"] = origin
        else:
            kw["suppress_origin"] = True
        return websocket.create_connection(self.ws_url(path), **kw)

    def ndjson(self, path, token="reader", timeout=30):
        """Generator of parsed ndjson records from a streaming GET (http.client reads chunked)."""
        c = self.conn(timeout)
        c.request("GET", path, headers={"Authorization": "Bearer " + self.tokens[token],
                                        "Accept": "application/x-ndjson"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("ndjson %s: %d %s" % (path, r.status, r.read()[:300]))
        buf = b""
        try:
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            c.close()


def wait_subscribers(e, sid, n, timeout=120):
    """Wait until session @sid has at least @n subscribers (stats.subscribers): a WebSocket's
    subscriber is made only after the 101 reached the client, an ndjson stream's just before its
    headers, so "connected" does not yet mean "receiving". Returns the count seen last."""
    deadline = time.time() + timeout
    got = -1
    while True:
        st, h, data = e.request("GET", "/api/v1/sessions/%d" % sid, token="reader")
        if st == 200:
            got = json.loads(data)["stats"]["subscribers"]
            if got >= n:
                return got
        if time.time() >= deadline:
            check(False, "session %d: %d subscriber(s) within %ds, saw %d (status %d)" % (sid, n, timeout, got, st))
            return got
        time.sleep(0.02)


def ws_events(ws, until, timeout=60):
    """Read frames (JSON arrays) until until(records) is true or timeout; returns records."""
    import websocket
    recs = []
    deadline = time.time() + timeout
    while time.time() < deadline and not until(recs):
        ws.settimeout(max(0.1, deadline - time.time()))
        try:
            op, data = ws.recv_data()
        except websocket.WebSocketTimeoutException:
            recs.append({"_timeout": True})
            break
        except websocket.WebSocketConnectionClosedException:
            recs.append({"_closed": True, "_abrupt": True})
            break
        if op == 8:  # close
            recs.append({"_closed": True})
            break
        if op == 1:
            recs.extend(json.loads(data))
    return recs


# ---- helpers shared by the test files (each used by several)

def session(e, sid):
    """GET /api/v1/sessions/@sid as the reader: the session's JSON."""
    return e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")[2]


def wait_state(e, sid, states, timeout=30):
    """Poll session @sid until its state is one of @states or @timeout passes; returns it last seen."""
    deadline = time.time() + timeout
    s = session(e, sid)
    while s["state"] not in states and time.time() < deadline:
        time.sleep(0.05)
        s = session(e, sid)
    return s


def problem(st, h, data, status, what):
    """Check that a response (status, headers, body) is a problem+json with @status."""
    check(st == status and h.get("content-type", "").startswith("application/problem+json"),
          "%s: %d %s, want %d problem+json: %r" % (what, st, h.get("content-type"), status, data[:300]))


def unique_prog(tag):
    """A copy of /bin/true at a path of its own (etwdtest_@tag_<pid>), to find its exec in a trace."""
    d = tempfile.mkdtemp(prefix="etwdprog-")
    p = os.path.join(d, "etwdtest_%s_%d" % (tag, os.getpid()))
    shutil.copy("/bin/true", p)
    os.chmod(p, 0o755)
    return p


def drop_prog(p):
    os.unlink(p)
    os.rmdir(os.path.dirname(p))


def trace_report(data):
    """`trace-cmd report` of a trace.dat (Debian's trace-cmd): its lines."""
    d = tempfile.mkdtemp(prefix="etwdrep-")
    path = os.path.join(d, "trace.dat")
    with open(path, "wb") as f:
        f.write(data)
    r = subprocess.run(["trace-cmd", "report", "-i", path], capture_output=True, text=True, errors="replace",
                       timeout=120)  # comm names and paths may be any bytes
    os.unlink(path)
    os.rmdir(d)
    check(r.returncode == 0, "trace-cmd report reads the recording: rc %d %s" % (r.returncode, r.stderr[-300:]))
    return r.stdout.splitlines()


def hold(e, path, token="reader"):
    """Send GET @path on a raw TLS socket and read only the status line: the server's answer
    (an ndjson stream or a big download) then stays blocked on a client that does not read.
    Returns (socket, status)."""
    raw = socket.create_connection(("127.0.0.1", e.port), timeout=60)
    s = e.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
               "Accept: application/x-ndjson\r\n\r\n" % (path, e.tokens[token])).encode())
    head = b""
    while len(head) < 12:
        b = s.recv(12 - len(head))
        if not b:
            break
        head += b
    return s, int(head[9:12]) if head.startswith(b"HTTP/1.1 ") else 0


def folded_name(fr):
    """A stack frame's name as folded-stack text writes it (the server's rule)."""
    if isinstance(fr, str):
        n = fr
    elif fr.get("Symbol"):
        n = (fr["Module"] + "!" if fr.get("Module") else "") + fr["Symbol"]
    elif fr.get("Module"):
        n = fr["Module"] + ("+0x%x" % fr["Offset"] if isinstance(fr.get("Offset"), int) else "")
    else:
        n = fr.get("Address", "?")
    return re.sub(r"[;\x00- ]", "_", n)
