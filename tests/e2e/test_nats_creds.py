"""NATS `creds` end to end (a sink's and a `nats` session's), against a nats-server in operator
mode that this test sets up itself. Debian has no nsc/nkeys tooling, so the test makes its own
from the published formats: nkeys (Ed25519; base32 of prefix byte(s) + key + CRC-16/XMODEM,
little-endian), NATS JWT v2 (header typ JWT / alg ed25519-nkey, claims signed by the issuer's
nkey, jti = base32(SHA-256 of the claims without it)) and the .creds file (the user's JWT and
seed between BEGIN/END markers). The server trusts one operator; account CRED (JetStream
enabled by its JWT's limits) is preloaded with `resolver: MEMORY`.

Checked: a sink with creds delivers every event into a JetStream stream (the broker's count); a
`nats` session with creds reads them; wrong creds (a user of an account the operator never
signed, a seed that does not match the JWT, a file that is no creds file) are a clear 4xx naming
/creds and the authorization failure; a user whose JWT denies publishing to the sink's subject shows up in the sink's state
(error, permissions); creds refused after the session began (a broker that was away at create,
one that came back under another operator) put the sink and the nats session in state "error"
("closed for good": libnats stops reconnecting); the creds file's path and contents are never
echoed (GET, errors, the log); a first connect whose nonce signature libnats drops (one whose
first byte is 0: 1 connect in 256) is tried again instead of being taken for refused creds."""
import base64
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import etwd_harness as H
from etwd_harness import Etwd, check, done, free_port
from test_nats import require_nats, create, run_n, sink_of, session, unique_prog, wait_for

# ---- nkeys: the public key is base32(prefix byte + 32-byte key + CRC16), the seed has two
# prefix bytes (the seed marker and the key's type spread over them)
PREFIX = {"seed": 18 << 3, "operator": 14 << 3, "account": 0, "user": 20 << 3}


def crc16_xmodem(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def b32(raw):
    return base64.b32encode(raw).decode().rstrip("=")


def nkey_encode(prefix, key):
    raw = bytes(prefix) + key
    return b32(raw + crc16_xmodem(raw).to_bytes(2, "little"))


class NKey:
    def __init__(self, kind):
        self.priv = Ed25519PrivateKey.generate()
        seed = self.priv.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())
        pub = self.priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        p = PREFIX[kind]
        self.public = nkey_encode([p], pub)
        self.seed = nkey_encode([PREFIX["seed"] | (p >> 5), (p & 31) << 3], seed)


def b64url(raw):
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def jwt(issuer, subject, name, nats):
    """a NATS JWT v2 of @subject (a public key) signed by @issuer (an NKey)"""
    claims = {"jti": "", "iat": int(time.time()), "iss": issuer.public, "name": name, "sub": subject,
              "nats": dict(nats, version=2)}
    claims["jti"] = b32(hashlib.sha256(json.dumps(claims, separators=(",", ":")).encode()).digest())
    head = b64url(b'{"typ":"JWT","alg":"ed25519-nkey"}')
    body = b64url(json.dumps(claims, separators=(",", ":")).encode())
    return head + "." + body + "." + b64url(issuer.priv.sign((head + "." + body).encode()))


def creds_text(user_jwt, seed):
    return ("-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n\n"
            "*************************************************************\n") % (user_jwt, seed)


UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
             "conn": -1, "leaf": -1}


def user_jwt(account, user, name, pub=None):
    return jwt(account, user.public, name, {"type": "user", "pub": pub or {}, "sub": {},
                                            "subs": -1, "data": -1, "payload": -1})


class OperatorNats:
    """nats-server in operator mode: one operator, account CRED with JetStream, a system account,
    both preloaded (resolver MEMORY); users are made by user()."""

    def __init__(self, port=None):
        self.dir = tempfile.mkdtemp(prefix="etwd-natscreds-")
        self.port, self.mport = port or free_port(), free_port()
        self.op, self.acc, self.sys = NKey("operator"), NKey("account"), NKey("account")
        js = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
        accounts = {self.acc.public: jwt(self.op, self.acc.public, "CRED",
                                         {"type": "account", "limits": dict(UNLIMITED, **js)}),
                    self.sys.public: jwt(self.op, self.sys.public, "SYS", {"type": "account", "limits": UNLIMITED})}
        conf = os.path.join(self.dir, "server.conf")
        with open(conf, "w") as f:
            f.write("listen: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\nserver_name: creds1\n" % (self.port, self.mport))
            f.write("operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n"
                    % (jwt(self.op, self.op.public, "etwd-test-operator", {"type": "operator"}), self.sys.public))
            for k, v in accounts.items():
                f.write("  %s: %s\n" % (k, v))
            f.write("}\njetstream: {store_dir: \"%s\"}\n" % os.path.join(self.dir, "js"))
        self.logpath = os.path.join(self.dir, "log")
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(["nats-server", "-c", conf], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("nats-server (operator mode) answers", self.ready, timeout=30)

    def ready(self):
        try:
            return self.jsz() is not None
        except Exception:
            return None

    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def jsz(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/jsz?accounts=true&streams=true" % self.mport,
                                    timeout=5) as r:
            return json.loads(r.read())

    def stream_msgs(self, stream):
        for acc in self.jsz().get("account_details") or []:
            for s in acc.get("stream_detail") or []:
                if s["name"] == stream:
                    return s["state"]["messages"]
        return None

    def server_log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def exec_sink(name, nats, stream, creds):
    return {"name": name, "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
            "sinks": [{"type": "nats", "url": nats.url(), "stream": stream, "creds": creds,
                       "subject": stream.lower() + ".{host}.{session}.{provider}"}]}


def test_sink_and_reader(a, c, nats, secrets):
    """(1) a sink with creds fills a stream: the broker counts every event; (2) a nats session
    with creds reads them all"""
    prog = unique_prog("creds")
    N = 12
    j = create(a, exec_sink("ex", nats, "CREDS", "good.creds"))
    aid = j["id"]
    k = j["spec"]["sinks"][0]
    check("good.creds" not in json.dumps(j) and secrets not in json.dumps(j),
          "the created session does not show the creds file: %r" % k)
    H.wait_subscribers(a, aid, 1)
    wait_for("the sink connected with creds", lambda: sink_of(a, aid)["connected"])
    pids = run_n(prog, N)
    a.json("POST", "/api/v1/sessions/%d/stop" % aid, expect=200)
    produced = session(a, aid)["stats"]["events"]
    wait_for("every event acknowledged", lambda: sink_of(a, aid)["acked"] == produced)
    k = sink_of(a, aid)
    check(k["dropped"] == 0 and k["last_error"] is None and k["state"] == "ok", "sink health: %r" % k)
    check(produced >= N and nats.stream_msgs("CREDS") == produced,
          "the broker's stream CREDS (account CRED) holds %r messages, the session produced %d"
          % (nats.stream_msgs("CREDS"), produced))

    j = create(c, {"name": "central", "backend": "nats", "subjects": ["creds.>"],
                   "nats": {"url": nats.url(), "stream": "CREDS", "creds": "good.creds"}})
    cid = j["id"]
    check(j["spec"]["nats"].get("creds") is True and "good.creds" not in json.dumps(j),
          "the nats session shows that creds are used, not the file: %r" % j["spec"]["nats"])
    ws = c.ws("/api/v1/sessions/%d/events?event=sched_process_exec&from=1" % cid)

    def mine(rs):
        return [r for r in rs if "System" in r and r.get("EventData", {}).get("filename") == prog]
    got = mine(H.ws_events(ws, lambda rs: len(mine(rs)) >= N, timeout=30))
    check(len(got) == N and sorted(r["EventData"]["pid"] for r in got) == sorted(pids),
          "the nats session read %d of the %d executions through creds" % (len(got), N))
    ws.close()
    wait_for("the central session counted the whole stream",
             lambda: session(c, cid)["stats"]["events"] >= produced)
    s = session(c, cid)
    check(s["stats"]["events"] == produced and s["stats"]["source"]["state"] == "ok",
          "central: %d events of %d, source %r" % (s["stats"]["events"], produced, s["stats"]["source"]))
    for e in (a, c):
        st, h, body = e.request("GET", "/api/v1/sessions", token="reader")
        check(st == 200 and b".creds" not in body and secrets.encode() not in body,
              "GET /sessions does not name the creds file")
    c.request("DELETE", "/api/v1/sessions/%d" % cid)
    a.request("DELETE", "/api/v1/sessions/%d" % aid)
    shutil.rmtree(os.path.dirname(prog), ignore_errors=True)


def test_wrong_creds(a, c, nats, secrets):
    """(3) a user of an account the operator never signed, a seed that does not belong to the JWT,
    a file that is no creds file at all: a sink's and a nats session's create answer a 4xx problem
    naming the creds (and the authorization failure), with the file's name only"""
    for f in ("alien.creds", "badseed.creds", "garbage.creds"):
        for e, body, field in ((a, exec_sink("bad-" + f.split(".")[0], nats, "BAD", f), "/sinks/0/creds"),
                               (c, {"backend": "nats", "subjects": ["creds.>"],
                                    "nats": {"url": nats.url(), "stream": "CREDS", "creds": f}}, "/nats/creds")):
            t0 = time.time()
            st, h, j = e.json("POST", "/api/v1/sessions", body=body)
            text = json.dumps(j)
            check(400 <= st < 500 and h.get("content-type", "").startswith("application/problem+json")
                  and (j or {}).get("field") == field and f in (j or {}).get("detail", "")
                  and (f == "garbage.creds" or "authorization violation" in text.lower()
                       and "refused the credentials in %s" % f in j["detail"]),
                  "%s at %s → 4xx naming the field, the file and the authorization failure: %d %s"
                  % (f, field, st, text))
            check(secrets not in text and "BEGIN" not in text and "conn.c" not in text,
                  "the error names the file only: %s" % text)
            check(time.time() - t0 < 10, "the refusal is prompt (%.1f s)" % (time.time() - t0))
    st, h, j = a.json("GET", "/api/v1/sessions", token="reader")
    check(not [x for x in (j if isinstance(j, list) else j.get("sessions", [])) if x["name"].startswith("bad")],
          "no session was left behind by a refused create: %r" % j)


class NonceProxy:
    """A TCP forwarder to the broker that, on the connections numbered in @swap (from 0), replaces
    the nonce in the broker's INFO by @nonce (the client signs that one, the broker checks its own:
    refused) and records each CONNECT line; other connections pass unchanged. cut() closes the
    live ones (a broken network: the client reconnects)."""

    def __init__(self, port, nonce, swap=(0,)):
        self.port, self.nonce, self.swap, self.connects, self.socks = port, nonce, swap, [], []
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        threading.Thread(target=self.accept, daemon=True).start()

    def url(self):
        return "nats://127.0.0.1:%d" % self.ls.getsockname()[1]

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            self.connects.append(None)
            i = len(self.connects) - 1
            threading.Thread(target=self.serve, args=(c, i, i in self.swap), daemon=True).start()

    def serve(self, c, i, swap):
        s = socket.create_connection(("127.0.0.1", self.port))
        self.socks += [c, s]
        info = b""
        while not info.endswith(b"\r\n"):
            d = s.recv(1)
            if not d:
                return
            info += d
        if swap:
            info = re.sub(rb'"nonce":"[^"]*"', b'"nonce":"' + self.nonce.encode() + b'"', info)
        c.sendall(info)
        line = b""
        while b"\r\n" not in line:
            d = c.recv(65536)
            if not d:
                return
            line += d
        self.connects[i] = line.split(b"\r\n")[0].decode(errors="replace")
        s.sendall(line)
        threading.Thread(target=H.forward, args=(s, c), daemon=True).start()
        H.forward(c, s)

    def cut(self):
        for x in self.socks:
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.ls.close()
        self.cut()


def zero_sig_nonce(user):
    """a nonce (as nats-server makes them: 11 random bytes, base64url) whose Ed25519 signature by
    @user begins with a 0 byte"""
    while True:
        nonce = b64url(os.urandom(11))
        if user.priv.sign(nonce.encode())[0] == 0:
            return nonce


def test_zero_signature(a, c, nats, good):
    """a signature whose first byte is 0: libnats 3.4.1 leaves it out of CONNECT and the broker
    refuses the connection (1 connect in 256, the cause of a rare failure of this test). A sink's
    and a nats session's first connect try again with a new nonce, so good creds are not refused"""
    for e, body in ((a, lambda u: exec_sink("zero", u, "ZERO", "good.creds")),
                    (c, lambda u: {"name": "zero", "backend": "nats", "subjects": ["creds.>"],
                                   "nats": {"url": u.url(), "stream": "CREDS", "creds": "good.creds"}})):
        proxy = NonceProxy(nats.port, zero_sig_nonce(good))
        try:
            st, h, j = e.json("POST", "/api/v1/sessions", body=body(proxy))
            check(st == 201, "good creds after a first connect refused for its nonce's signature: %d %s" % (st, j))
            check(len(proxy.connects) >= 2 and '"jwt"' in (proxy.connects[0] or ""),
                  "the first connect was refused and another was made: %d connects" % len(proxy.connects))
            print("libnats sent %s signature for a signature whose first byte is 0"
                  % ("no" if '"sig"' not in (proxy.connects[0] or "") else "a"))
            if st == 201:
                e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
        finally:
            proxy.close()
    # a reconnect refused once for the same reason is not taken for refused creds: libnats closes a
    # connection for good only after the same authorization error twice in a row
    proxy = NonceProxy(nats.port, zero_sig_nonce(good), swap=(1,))
    try:
        aid = create(a, exec_sink("zero-re", proxy, "ZERO", "good.creds"))["id"]
        wait_for("the sink connected", lambda: sink_of(a, aid)["connected"])
        proxy.cut()
        wait_for("the sink reconnected after a reconnect refused for its nonce's signature",
                 lambda: len(proxy.connects) >= 3 and sink_of(a, aid)["connected"], timeout=30)
        k = sink_of(a, aid)
        check(k["connected"] and k["state"] == "ok" and len(proxy.connects) >= 3,
              "after a refused reconnect the sink connects again: %r, %d connects" % (k, len(proxy.connects)))
        a.request("DELETE", "/api/v1/sessions/%d" % aid)
    finally:
        proxy.close()


def test_denied_subject(a, nats):
    """(4) a user whose JWT denies publishing to the sink's subject: the sink reports it"""
    j = create(a, exec_sink("deny", nats, "DENY", "deny.creds"))
    aid = j["id"]
    H.wait_subscribers(a, aid, 1)
    prog = unique_prog("deny")
    run_n(prog, 3)
    k = wait_for("the sink's state says the broker denies the publish",
                 lambda: (lambda k: k if k["state"] == "error" and k["pending"] >= 3 else None)(sink_of(a, aid)),
                 timeout=20)
    k = k or sink_of(a, aid)
    check("not permit" in (k["error"] or "") and '"deny.creds-agent.deny.sched"' in (k["error"] or "")
          and k["acked"] == 0 and k["pending"] >= 3 and k["dropped"] == 0,
          "the sink says which publish the broker does not permit, and keeps the events: %r" % k)
    st, h, m = a.request("GET", "/metrics", token="reader")
    check('etwd_session_sink_ok{session="%d",sink="0"} 0' % aid in m.decode(),
          "/metrics: the sink is not ok: %s" % [l for l in m.decode().splitlines() if "sink_ok" in l])
    check(not nats.stream_msgs("DENY"), "nothing reached the stream")
    a.request("DELETE", "/api/v1/sessions/%d" % aid)
    shutil.rmtree(os.path.dirname(prog), ignore_errors=True)


def test_refused_later(a):
    """a sink created while its broker is away, whose creds the broker refuses once it is up:
    libnats closes the connection for good; the sink's state says so (not "disconnected")"""
    port = free_port()
    j = create(a, {"name": "later", "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
                   "sinks": [{"type": "nats", "url": "nats://127.0.0.1:%d" % port, "stream": "LATER",
                              "subject": "later.{host}.{session}.{provider}", "creds": "alien.creds"}]})
    aid = j["id"]
    check(sink_of(a, aid)["state"] == "disconnected", "no broker yet: %r" % sink_of(a, aid))
    late = OperatorNats(port)
    try:
        k = wait_for("the sink's state says the broker refused its creds for good",
                     lambda: (lambda k: k if k["state"] == "error" else None)(sink_of(a, aid)), timeout=20)
        k = k or sink_of(a, aid)
        check("closed for good" in (k["error"] or "") and "refuses the creds" in (k["error"] or "")
              and not k["connected"], "the sink's error: %r" % k)
        check("authentication error" in late.server_log(), "the broker did refuse the creds")
        st, h, m = a.request("GET", "/metrics", token="reader")
        check('etwd_session_sink_ok{session="%d",sink="0"} 0' % aid in m.decode(), "/metrics: the sink is not ok")
    finally:
        late.cleanup()
    a.request("DELETE", "/api/v1/sessions/%d" % aid)


def test_accounts_changed(a, c, nats, servers):
    """the broker comes back under another operator (the creds' account is unknown now): libnats
    gives up on its reconnects; the sink and the nats session say so (state "error")"""
    j = create(a, exec_sink("again", nats, "CREDS", "good.creds"))
    aid = j["id"]
    j = create(c, {"name": "again", "backend": "nats", "subjects": ["creds.>"],
                   "nats": {"url": nats.url(), "stream": "CREDS", "creds": "good.creds"}})
    cid = j["id"]
    wait_for("both connected", lambda: sink_of(a, aid)["state"] == "ok"
             and session(c, cid)["stats"]["source"]["state"] == "ok")
    nats.stop()
    servers.append(OperatorNats(nats.port))
    k = wait_for("the sink says its connection is closed for good",
                 lambda: (lambda k: k if k["state"] == "error" else None)(sink_of(a, aid)), timeout=30)
    check(k and "closed for good" in k["error"], "the sink's state: %r" % (k or sink_of(a, aid)))
    src = wait_for("the nats session says its connection is closed for good",
                   lambda: (lambda x: x if x["state"] == "error" else None)(session(c, cid)["stats"]["source"]),
                   timeout=30)
    check(src and "closed for good" in src["last_error"] and not src["connected"],
          "the nats session's source: %r" % (src or session(c, cid)["stats"]["source"]))
    check("authentication error" in servers[-1].server_log(), "the new broker refused the creds")
    a.request("DELETE", "/api/v1/sessions/%d" % aid)
    c.request("DELETE", "/api/v1/sessions/%d" % cid)


def main():
    require_nats()
    nats = OperatorNats()
    servers = [nats]
    secrets = os.path.join(nats.dir, "secrets")
    os.makedirs(secrets)
    good, alien_acc, other = NKey("user"), NKey("account"), NKey("user")
    files = {"good.creds": creds_text(user_jwt(nats.acc, good, "good"), good.seed),
             "alien.creds": creds_text(user_jwt(alien_acc, other, "alien"), other.seed),
             "badseed.creds": creds_text(user_jwt(nats.acc, good, "badseed"), other.seed),
             "garbage.creds": "this is not a creds file\n",
             "deny.creds": creds_text(user_jwt(nats.acc, other, "deny", pub={"deny": ["deny.>"]}), other.seed)}
    for name, text in files.items():
        with open(os.path.join(secrets, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(secrets, name), 0o600)
    try:
        with Etwd(args=["--host-name", "creds-agent", "--sink-secrets-dir", secrets]) as a, \
                Etwd(args=["--host-name", "central", "--sink-secrets-dir", secrets]) as c:
            test_sink_and_reader(a, c, nats, secrets)
            test_zero_signature(a, c, nats, good)
            test_wrong_creds(a, c, nats, secrets)
            test_denied_subject(a, nats)
            test_refused_later(a)
            test_accounts_changed(a, c, nats, servers)
            for e in (a, c):
                log = e.stderr()
                check(not any(t.split("\n")[1] in log for t in files.values() if "BEGIN" in t) and "NKEY" not in log,
                      "etwd's log never shows a creds file's contents")
    finally:
        if H.FAILURES:
            print(nats.server_log()[-3000:])
        for n in servers:
            n.cleanup()
    done()


if __name__ == "__main__":
    main()
