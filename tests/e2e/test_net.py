"""Network and TLS set-up (issue 18 items 10, 12, 19), against the real binary over real sockets:
- --listen with a list: every address HTTPS (plain HTTP is not answered on any of them);
  --insecure-http refused unless EVERY address is loopback, with a clear message and exit code 2;
- slow unauthenticated peers (never starting TLS, or sending a partial head) cannot lock
  authenticated clients out: with 150 of them open, authenticated requests are answered promptly,
  and the slow ones are closed after --head-timeout (not --io-timeout); a per-address cap refuses
  connections beyond it at once, counted in /metrics;
- TLS 1.2 offers ECDHE + AEAD suites only (a CBC-only client is refused), HTTPS responses carry
  Strict-Transport-Security (plain HTTP ones do not), the generated certificate is valid for at
  most 397 days, and an almost-expired generated certificate is replaced at start (logged)."""
import http.client
import os
import re
import socket
import ssl
import subprocess
import threading
import time

from etwd_harness import BIN, Etwd, check, done, free_port


def tls_ok(port, host="127.0.0.1", cafile=None):
    """True if a TLS handshake to host:port succeeds."""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    if not cafile:
        ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            with ctx.wrap_socket(s) as t:
                return t.version() is not None
    except (OSError, ssl.SSLError):
        return False


def plain_answer(port, host="127.0.0.1"):
    """What a plain-HTTP request gets back (b"" if the server does not answer in HTTP)."""
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
            return data
    except OSError:
        return b""


def run_etwd(args, timeout=20):
    """etwd that is expected to refuse to start: (exit code, stderr)."""
    state = "/tmp/etwd-net-%d" % os.getpid()
    try:
        p = subprocess.run([BIN, "--state-dir", state] + args, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return None, "etwd started (and was killed after %d s)" % timeout
    finally:
        subprocess.run(["rm", "-rf", state])


def test_listen_list():
    p1, p2 = free_port(), free_port()
    with Etwd(port=p1, args=["--listen", "127.0.0.1:%d,127.0.0.2:%d" % (p1, p2)]) as e:
        check("https://127.0.0.1:%d/" % p1 in e.stdout and "https://127.0.0.2:%d/" % p2 in e.stdout,
              "banner names both HTTPS addresses: %r" % e.stdout)
        for host, port in (("127.0.0.1", p1), ("127.0.0.2", p2)):
            check(tls_ok(port, host), "TLS handshake on %s:%d" % (host, port))
            ans = plain_answer(port, host)
            check(not ans.startswith(b"HTTP/"), "plain HTTP answered on %s:%d: %r" % (host, port, ans[:80]))
    # --insecure-http: every address must be loopback
    for lst, bad in (("127.0.0.1:%d,0.0.0.0:%d" % (p1, p2), "0.0.0.0:%d" % p2),
                     ("0.0.0.0:%d,127.0.0.1:%d" % (p1, p2), "0.0.0.0:%d" % p1),
                     ("127.evil.example:%d" % p1, "127.evil.example:%d" % p1)):
        rc, err = run_etwd(["--insecure-http", "--listen", lst])
        check(rc == 2 and "only allowed on loopback" in err and bad in err,
              "--insecure-http --listen %s refused with exit 2 naming %s: %d %r" % (lst, bad, rc, err))
    for bad in ("127.0.0.1:%ds" % p1, "127.0.0.1:%d," % p1, "127.0.0.1", "127.0.0.1:0", ",127.0.0.1:%d" % p1):
        rc, err = run_etwd(["--listen", bad])
        check(rc == 2 and "--listen" in err, "--listen %r refused with exit 2: %d %r" % (bad, rc, err))
    # plain HTTP on two loopback addresses is allowed, and both are plain
    with Etwd(port=p1, tls=False, args=["--listen", "127.0.0.1:%d,127.0.0.3:%d" % (p1, p2)]) as e:
        for host, port in (("127.0.0.1", p1), ("127.0.0.3", p2)):
            ans = plain_answer(port, host)
            check(ans.startswith(b"HTTP/1.1 200"), "plain HTTP on %s:%d with --insecure-http: %r" % (host, port, ans[:80]))
            check(b"strict-transport-security" not in ans.lower(), "no HSTS over plain HTTP: %r" % ans)


def hold_plain(port, src, closed, i, up):
    """A peer that connects and never starts TLS; records when the server closes it."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(src, 0))
    except OSError:
        closed[i] = ("connect-failed", 0)
        return
    t0 = time.time()
    up.release()
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    closed[i] = ("closed", time.time() - t0)
    s.close()


def hold_slow_head(port, src, ctx, closed, i, up):
    """A peer that completes the handshake, sends part of a head and waits for the server."""
    try:
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(src, 0)))
        t0 = time.time()
        s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHo")
    except (OSError, ssl.SSLError):
        closed[i] = ("connect-failed", 0)
        return
    up.release()
    try:
        while s.recv(4096):
            pass
    except (OSError, ssl.SSLError):
        pass
    closed[i] = ("closed", time.time() - t0)
    s.close()


def authed_get(e, path="/api/v1/sessions"):
    """One authenticated request on a new TLS connection from 127.0.0.1: (status, seconds)."""
    t0 = time.time()
    try:
        c = http.client.HTTPSConnection("127.0.0.1", e.port, timeout=30, context=e.ssl_context())
        c.request("GET", path, headers={"Authorization": "Bearer " + e.tokens["reader"]})
        r = c.getresponse()
        r.read()
        c.close()
        return r.status, time.time() - t0
    except (OSError, ssl.SSLError) as x:
        return repr(x), time.time() - t0


def test_slow_peers(opts=("--head-timeout", "4")):
    head_s, n = 4, 150
    # --io-timeout stays 10 s: the slow peers must be cut by --head-timeout, far earlier
    with Etwd(args=list(opts) + ["--io-timeout", "10"]) as e:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        closed = [None] * n
        up = threading.Semaphore(0)
        th = []
        for i in range(n):
            src = "127.0.0.%d" % (2 + i % 8)  # 8 addresses, ~19 each: below the per-address cap
            if i % 2:
                th.append(threading.Thread(target=hold_plain, args=(e.port, src, closed, i, up)))
            else:
                th.append(threading.Thread(target=hold_slow_head, args=(e.port, src, ctx, closed, i, up)))
        t0 = time.time()
        for t in th:
            t.start()
        held = sum(1 for _ in range(n) if up.acquire(timeout=max(0.01, t0 + 3 - time.time())))
        check(held == n, "all %d slow peers connected within 3 s: %d" % (n, held))
        lat = [authed_get(e) for _ in range(10)]
        elapsed = time.time() - t0
        check(all(st == 200 for st, _ in lat), "authenticated requests beside %d slow peers: %r" % (n, lat))
        worst = max(s for _, s in lat)
        check(worst < 2.0, "authenticated requests answered promptly beside %d slow peers: worst %.2f s" % (n, worst))
        check(elapsed < head_s, "the authenticated requests ran while the slow peers were held (%.1f s)" % elapsed)
        for t in th:
            t.join(30)
        failed = [c for c in closed if not c or c[0] != "closed"]
        check(not failed, "every slow peer connected and was closed: %d not: %r" % (len(failed), failed[:5]))
        times = sorted(c[1] for c in closed if c and c[0] == "closed")
        if times:
            check(times[-1] < head_s + 3.0, "slow peers closed after --head-timeout %d s (slowest %.1f s; --io-timeout is 10 s)"
                  % (head_s, times[-1]))
            check(times[0] > head_s - 1.0, "slow peers kept until the head deadline (fastest %.1f s)" % times[0])
        st, _ = authed_get(e, "/api/v1/health")
        check(st == 200, "server healthy after the slow peers: %r" % st)


def test_per_address_cap():
    cap = 10
    with Etwd(args=["--max-connections-per-address", str(cap), "--head-timeout", "10"]) as e:
        held = [socket.create_connection(("127.0.0.1", e.port), timeout=10, source_address=("127.0.0.5", 0))
                for _ in range(cap)]
        time.sleep(0.3)
        s = socket.create_connection(("127.0.0.1", e.port), timeout=10, source_address=("127.0.0.5", 0))
        t0 = time.time()
        try:
            got = s.recv(1)
        except OSError:
            got = b""
        dt = time.time() - t0
        check(got == b"" and dt < 3.0, "connection %d from one address closed at once: %r after %.1f s" % (cap + 1, got, dt))
        s.close()
        st, _ = authed_get(e)
        check(st == 200, "another address is served while 127.0.0.5 is at its cap: %r" % st)
        for h in held:
            h.close()
        st, _, body = e.request("GET", "/metrics", token="reader")
        m = re.search(rb'etwd_connections_refused_total\{reason="per_address"\} (\d+)', body)
        check(m and int(m.group(1)) >= 1, "refusals counted in /metrics: %r" % (m and m.group(0)))
        time.sleep(0.5)
        # freed: the address may connect again
        check(tls_ok(e.port), "served again after the held connections closed")
        s3 = socket.create_connection(("127.0.0.1", e.port), timeout=10, source_address=("127.0.0.5", 0))
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            ok = ctx.wrap_socket(s3).version() is not None
        except (OSError, ssl.SSLError):
            ok = False
        check(ok, "127.0.0.5 is admitted again once its connections closed")
        log = e.stderr()
        check("connection refused" in log and "max-connections-per-address" in log, "refusal logged: %r" % log[-800:])
    rc, err = run_etwd(["--max-connections", "50"])
    check(rc == 2 and "--max-connections" in err, "--max-connections below streams + requests + 4 refused: %d %r" % (rc, err))


CBC_ONLY = ("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA256:"
            "ECDHE-ECDSA-AES256-SHA384:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA:AES256-SHA")


def tls12(port, ciphers):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            with ctx.wrap_socket(s) as t:
                return t.cipher()[0]
    except (OSError, ssl.SSLError):
        return None


def cert_days(path):
    d = ssl._ssl._test_decode_cert(path)
    nb, na = ssl.cert_time_to_seconds(d["notBefore"]), ssl.cert_time_to_seconds(d["notAfter"])
    return (na - nb) / 86400.0, (na - time.time()) / 86400.0


def test_tls():
    with Etwd() as e:
        check(tls12(e.port, CBC_ONLY) is None, "TLS 1.2 with CBC-only ciphers refused")
        for c in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"):
            check(tls12(e.port, c) == c, "TLS 1.2 with %s accepted" % c)
        valid, _ = cert_days(os.path.join(e.state, "cert.pem"))
        check(valid <= 397, "generated certificate valid %.2f days (<= 397)" % valid)
        for path in ("/api/v1/health", "/api/v1/no-such-route", "/"):
            st, h, _ = e.request("GET", path, token=None)
            check(h.get("strict-transport-security", "").startswith("max-age="),
                  "HSTS on HTTPS %s (%d): %r" % (path, st, h))
        st, h, _ = e.request("GET", "/api/v1/sessions", token="wrong")
        check(st == 401 and "strict-transport-security" in h, "HSTS on a 401 over HTTPS: %d %r" % (st, h))


def test_cert_renewal():
    state = "/tmp/etwd-net-renew-%d" % os.getpid()
    subprocess.run(["rm", "-rf", state])
    os.makedirs(state, mode=0o700)
    cert, key = os.path.join(state, "cert.pem"), os.path.join(state, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "10", "-subj", "/O=etwd/CN=localhost", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    old_fp = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-fingerprint", "-sha256"],
                            capture_output=True, text=True).stdout
    _, left = cert_days(cert)
    check(left < 11, "the test certificate expires in %.1f days" % left)
    e = Etwd(state=state).start()
    try:
        valid, left = cert_days(cert)
        check(left > 390 and valid <= 397, "renewed certificate: %.1f days left, valid %.1f days" % (left, valid))
        new_fp = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-fingerprint", "-sha256"],
                                capture_output=True, text=True).stdout
        check(new_fp != old_fp, "a new certificate replaced the old one")
        check(new_fp.split("=")[-1].strip() in e.stdout, "the banner shows the new fingerprint: %r" % e.stdout)
        check(tls_ok(e.port, cafile=cert), "the renewed certificate is served")
        check(oct(os.stat(key).st_mode & 0o777) == "0o600", "the new key is 0600")
    finally:
        e.stop()
    check("certificate renewed" in e.stderr(), "renewal logged: %r" % e.stderr()[-600:])
    # a fresh certificate is kept as it is on the next start
    with open(cert) as f:
        before = f.read()
    with Etwd(state=state) as e2:
        pass
    with open(cert) as f:
        check(f.read() == before, "a certificate far from expiry is kept")
    subprocess.run(["rm", "-rf", state])


if __name__ == "__main__":
    test_listen_list()
    test_tls()
    test_cert_renewal()
    test_per_address_cap()
    test_slow_peers()
    done()
