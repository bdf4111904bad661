"""Foundation tests against the spawned binary over real TLS: the auth matrix generated from the
route table (the OpenAPI document is generated from it; we also parse the table in api/router.c
so a route missing from the document fails), bad input → problem+json, limits, TLS versions,
state reuse across restarts, cookies, WebSocket upgrade refusals, SIGTERM."""
import json
import os
import signal
import re
import socket
import ssl
import stat
import subprocess
import time

from etwd_harness import Etwd, check, done, BIN, SRC
import etwd_harness as H


def routes_from_source():
    src = open(os.path.join(SRC, "api/router.c")).read()
    out = []
    for m in re.finditer(r'\{"(GET|POST|PATCH|DELETE|PUT)", "([^"]+)", ROLE_(NONE|READER|ADMIN)', src):
        out.append((m.group(1), m.group(2), m.group(3).lower()))
    return out


def is_problem(h, body):
    if h.get("content-type") != "application/problem+json":
        return False
    try:
        j = json.loads(body)
    except ValueError:
        return False
    return j.get("type", "").startswith("urn:etwd:problem:") and isinstance(j.get("status"), int)


def main():
    routes = routes_from_source()
    check(len(routes) >= 20, "route table parsed: %d routes" % len(routes))
    with Etwd() as e:
        # --- start-up output, health, version
        check("certificate SHA-256 fingerprint:" in e.stdout, "fingerprint printed")
        st, h, j = e.json("GET", "/api/v1/health", token=None, expect=200)
        check(j == {"status": "ok"}, "health is minimal: %r" % j)
        st, h, j = e.json("GET", "/api/v1/version", token="reader", expect=200)
        names = [b["name"] for b in j["backends"]]
        check("linux" in names and "etl" in names, "backends listed: %r" % names)
        check(all(isinstance(b["capabilities"], list) for b in j["backends"]), "capabilities")

        # --- OpenAPI document vs the router's table
        st, h, doc = e.json("GET", "/api/v1/openapi.json", token=None, expect=200)
        check(doc.get("openapi", "").startswith("3."), "OpenAPI 3 document")
        doc_ops = set()
        for path, ops in doc["paths"].items():
            for m, o in ops.items():
                doc_ops.add((m.upper(), path, o["x-etwd-role"].replace("none", "none")))
                check((o["security"] == []) == (o["x-etwd-role"] == "none"), "security matches role for %s %s" % (m, path))
        table = set((m, p, r) for m, p, r in routes)
        check(doc_ops == table, "OpenAPI operations == route table; diff %r" % (doc_ops ^ table))
        # every $ref resolves
        refs = re.findall(r'"\$ref": ?"#/components/schemas/([A-Za-z]+)"', json.dumps(doc))
        for r in set(refs):
            check(r in doc["components"]["schemas"], "$ref %s resolves" % r)

        # --- auth matrix: every route x {none, bad, reader, admin}
        def concrete(p):
            return p.replace("{id}", "999999").replace("{name}", "nosuchfile.etl")
        for method, path, role in routes:
            url = concrete(path)
            for who in ("none", "bad", "reader", "admin"):
                token = None if who == "none" else ("etwd_a_" + "0" * 64 if who == "bad" else who)
                body = {} if method in ("POST", "PATCH") else None
                hdrs = {"Accept": "application/x-ndjson"} if path.endswith("/events") else {}
                if path == "/api/v1/files" and method == "POST":
                    url2, body, ctype = url + "?name=matrix.etl", b"x" * 100, "application/octet-stream"
                else:
                    url2, ctype = url, "application/json"
                if path == "/api/v1/tokens/rotate" and who == "admin":
                    continue  # exercised below, it changes the tokens
                st, h, data = e.request(method, url2, body=body, token=token, headers=hdrs, ctype=ctype)
                if role == "none":
                    ok = st not in (401, 403)
                elif who in ("none", "bad"):
                    ok = st == 401 and "bearer" in h.get("www-authenticate", "").lower()
                elif who == "reader" and role == "admin":
                    ok = st == 403
                else:
                    ok = st not in (401, 403)
                check(ok, "auth matrix %s %s as %s: status %d" % (method, url2, who, st))
                if st >= 400:
                    check(is_problem(h, data), "problem+json for %s %s as %s: %r %r" % (method, url2, who, h.get("content-type"), data[:200]))

        # --- bad input
        st, h, d = e.request("POST", "/api/v1/sessions", body="{not json", token="admin")
        check(st == 400 and is_problem(h, d) and b"malformed-json" in d, "malformed JSON → 400: %d %r" % (st, d))
        st, h, d = e.request("POST", "/api/v1/sessions", body="name=x", token="admin", ctype="application/x-www-form-urlencoded")
        check(st == 415 and is_problem(h, d), "wrong content type → 415: %d" % st)
        big = json.dumps({"name": "x" * (2 << 20)})
        st, h, d = e.request("POST", "/api/v1/sessions", body=big, token="admin")
        check(st == 413 and is_problem(h, d), "oversized body → 413: %d" % st)
        st, h, d = e.request("GET", "/api/v1/nope", token="admin")
        check(st == 404 and is_problem(h, d), "unknown route → 404: %d" % st)
        st, h, d = e.request("PUT", "/api/v1/sessions", token="admin", body={})
        check(st == 405 and is_problem(h, d) and "GET" in h.get("allow", "") and "POST" in h.get("allow", ""),
              "wrong method → 405 with Allow: %d %r" % (st, h.get("allow")))
        st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "sched"}], "bogus": 1})
        check(st == 400 and "bogus" in j.get("detail", ""), "unknown member → 400 naming it: %r" % j)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "sched", "level": 999}]})
        check(st == 400 and j.get("field") == "/providers/0/level", "field pointer in problem: %r" % j)
        st, h, j = e.json("GET", "/api/v1/files/..%2F..%2Fetc%2Fpasswd", token="reader")
        check(st == 400, "path escape refused with 400: %d" % st)
        st, h, j = e.json("GET", "/api/v1/health", token=None, expect=200)  # still serving

        # --- cookie login
        st, h, j = e.json("POST", "/api/v1/login", token="reader", expect=200)
        sc = h.get("set-cookie", "")
        check("HttpOnly" in sc and "Secure" in sc and "SameSite=Strict" in sc, "cookie flags: %r" % sc)
        cookie = sc.split(";")[0]
        st, h, j = e.json("GET", "/api/v1/whoami", token=None, headers={"Cookie": cookie}, expect=200)
        check(j and j.get("role") == "reader" and j.get("via_cookie") is True, "cookie auth: %r" % j)
        st, h, d = e.request("DELETE", "/api/v1/sessions/1", token=None, headers={"Cookie": cookie})
        check(st == 403, "reader cookie cannot delete: %d" % st)
        st, h, j = e.json("POST", "/api/v1/login", token="admin", expect=200)
        acookie = h.get("set-cookie", "").split(";")[0]
        st, h, d = e.request("POST", "/api/v1/sessions", body={"providers": [{"name": "sched"}]}, token=None,
                             headers={"Cookie": acookie, "Origin": "https://evil.example"})
        check(st == 403 and b"forbidden-origin" in d, "cookie request from foreign Origin refused: %d %r" % (st, d[:200]))

        # --- WebSocket upgrade refusals
        import websocket
        for tok, origin, want in ((None, None, 401), ("reader", "https://evil.example", 403)):
            try:
                ws = e.ws("/api/v1/sessions/1/events", token=tok, origin=origin)
                ws.close()
                check(False, "WebSocket upgrade token=%s origin=%s accepted" % (tok, origin))
            except websocket.WebSocketBadStatusException as ex:
                check(ex.status_code == want, "WebSocket refusal status %d, want %d" % (ex.status_code, want))

        # --- files: names that leave the data directory
        for bad in ("..%2Fx.etl", ".hidden.etl", "a%2Fb.etl", "x.txt"):
            st, h, d = e.request("POST", "/api/v1/files?name=" + bad, body=b"abc", token="admin", ctype="application/octet-stream")
            check(st == 400 and is_problem(h, d), "upload name %s refused: %d" % (bad, st))

        # --- TLS versions
        import warnings; warnings.simplefilter("ignore", DeprecationWarning)
        for maxv, ok in ((ssl.TLSVersion.TLSv1, False), (ssl.TLSVersion.TLSv1_1, False),
                         (ssl.TLSVersion.TLSv1_2, True), (ssl.TLSVersion.TLSv1_3, True)):
            ctx = e.ssl_context()
            ctx.minimum_version = maxv
            ctx.maximum_version = maxv
            try:
                ctx.set_ciphers("ALL:@SECLEVEL=0")
            except ssl.SSLError:
                pass
            got = None
            try:
                with socket.create_connection(("127.0.0.1", e.port), timeout=10) as s:
                    with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                        got = t.version()
            except (ssl.SSLError, OSError) as ex:
                got = None
            check(bool(got) == ok, "TLS %s accepted=%s (got %r)" % (maxv, ok, got))

        # --- state files
        key = os.path.join(e.state, "key.pem")
        check(stat.S_IMODE(os.stat(key).st_mode) == 0o600, "key file is 0600")
        check(stat.S_IMODE(os.stat(os.path.join(e.state, "tokens")).st_mode) == 0o600, "token file is 0600")
        fp1 = [l for l in e.stdout.splitlines() if "fingerprint" in l]
        tokens1 = dict(e.tokens)
        # tokens never logged
        err = e.stderr()
        check(tokens1["admin"] not in err and tokens1["reader"] not in err, "tokens never logged")
        check("kind=audit" in err and "action=login" in err, "audit log lines present")
        check("kind=access" in err, "access log lines present")

        # --- rotation: old tokens stop working, the new ones work
        st, h, j = e.json("POST", "/api/v1/tokens/rotate", token="admin", expect=200)
        st2, _, _ = e.request("GET", "/api/v1/whoami", token=tokens1["admin"])
        check(st2 == 401, "old admin token refused after rotation: %d" % st2)
        st3, _, j3 = e.json("GET", "/api/v1/whoami", token=j["admin"])
        check(st3 == 200 and j3["role"] == "admin", "new admin token works")
        state = e.state
        rc = e.stop()
        check(rc == 0, "SIGTERM → exit 0 (%r)" % rc)
        # restart reuses certificate and tokens
        e2 = Etwd(state=state).start()
        fp2 = [l for l in e2.stdout.splitlines() if "fingerprint" in l]
        check(fp1 == fp2, "restart reuses the certificate: %r vs %r" % (fp1, fp2))
        check(e2.tokens["admin"] == j["admin"], "restart reuses the tokens")
        rc = e2.stop(signal.SIGINT)
        check(rc == 0, "SIGINT → exit 0 (%r)" % rc)

    # --- CLI errors
    r = subprocess.run([BIN, "--insecure-http", "--listen", "0.0.0.0:9"], capture_output=True, text=True)
    check(r.returncode == 2 and "loopback" in r.stderr, "plain HTTP off loopback refused: %r" % r.stderr)
    r = subprocess.run([BIN, "--max-sessions", "zero"], capture_output=True, text=True)
    check(r.returncode == 2 and "max-sessions" in r.stderr, "bad flag value: %r" % r.stderr)
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--listen" in r.stdout and "convert" in r.stdout, "--help")
    r = subprocess.run([BIN, "--cert", "/nonexistent.pem", "--key", "/nonexistent.key", "--state-dir", "/tmp/etwd-badcert", "--listen", "127.0.0.1:%d" % H.free_port()],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "TLS" in r.stderr, "TLS failure at start-up is fatal and clear: %r" % r.stderr)
    done()


main()
