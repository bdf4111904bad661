"""The OpenAPI document (GET /api/v1/openapi.json) against third-party tools and against the real
server: `redocly lint` (recommended-strict rules, tests/openapi/redocly.yaml) must pass, and real
responses of a running etwd — lists, a session, providers, files, version, whoami, errors
(problem+json), a ranged download, metrics, and events from a file decode, a replay session over
WebSocket and a live session — must each be declared by the document for their operation, status
and content type, and accepted by its schema (ajv, JSON Schema 2020-12; tests/openapi/validate.mjs).

Needs the machine's Node.js (>= 20.19, for @redocly/cli 2) and npm; the npm packages
(tests/openapi/package-lock.json) are installed with `npm ci` when missing or older than the lock
file. Neither tool needs the network once installed (checked: lint passes in a network namespace
without network)."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from etwd_harness import Etwd, check, done, ws_events, CORPUS, SRC

SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")
PKG = os.path.join(SRC, "tests/openapi")
ENV = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true", NO_COLOR="1")


def npm_install():
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            check(False, "%s is missing: the OpenAPI checks need Node.js >= 20.19 and npm" % tool)
            return False
    stamp = os.path.join(PKG, "node_modules/.package-lock.json")
    lock = os.path.join(PKG, "package-lock.json")
    if not os.path.exists(stamp) or os.path.getmtime(stamp) < os.path.getmtime(lock):
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PKG, env=ENV,
                           capture_output=True, text=True, timeout=600)
        check(r.returncode == 0, "npm ci in tests/openapi: %s" % (r.stdout + r.stderr)[-2000:])
        return r.returncode == 0
    return True


class Samples:
    """Real responses, each with its route template, status, media type and parsed body."""
    def __init__(self, e):
        self.e = e
        self.items = []

    def add(self, method, template, status, hdrs, body):
        ctype = hdrs.get("content-type", "").split(";")[0].strip()
        if ctype in ("application/json", "application/problem+json"):
            body = json.loads(body) if body else None
        elif ctype == "application/x-ndjson":
            body = [json.loads(x) for x in body.split(b"\n") if x.strip()]
        elif ctype.startswith("text/"):
            body = body.decode()
        else:
            body = None
        self.items.append({"method": method, "path": template, "status": status, "ctype": ctype, "body": body})
        return body

    def req(self, method, template, path=None, want=None, **kw):
        st, h, data = self.e.request(method, path or template, **kw)
        if want is not None:
            check(st == want, "%s %s: %d, want %d: %r" % (method, path or template, st, want, data[:300]))
        return self.add(method, template, st, h, data)


def live_events(e, n=40, timeout=60):
    """A live session of raw_syscalls for a process that keeps making syscalls: n events."""
    busy = subprocess.Popen(["/bin/sh", "-c", "while :; do /bin/true; done"])
    try:
        st, h, j = e.json("POST", "/api/v1/sessions", body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"]}, {"name": "sched"}],
            "pids": [busy.pid]}, expect=201)
        recs = []
        deadline = time.time() + timeout
        for rec in e.ndjson("/api/v1/sessions/%d/events" % j["id"], timeout=timeout):
            recs.append(rec)
            if len(recs) >= n or time.time() > deadline:
                break
        return j["id"], recs
    finally:
        busy.kill()
        busy.wait()


def collect(e):
    s = Samples(e)
    data = open(SIH, "rb").read()
    s.req("GET", "/api/v1/health", token=None, want=200)
    s.req("GET", "/api/v1/version", token="reader", want=200)
    s.req("GET", "/api/v1/whoami", token="reader", want=200)
    s.req("POST", "/api/v1/files", "/api/v1/files?name=sih.etl", body=data, ctype="application/octet-stream", want=201)
    s.req("GET", "/api/v1/files", token="reader", want=200)
    s.req("GET", "/api/v1/files/{name}", "/api/v1/files/sih.etl", token="reader", want=200)
    s.req("GET", "/api/v1/files/{name}", "/api/v1/files/sih.etl", token="reader", headers={"Range": "bytes=10-99"}, want=206)
    s.req("GET", "/api/v1/providers", token="reader", want=200)
    s.req("GET", "/api/v1/providers", "/api/v1/providers?backend=etl", token="reader", want=200)
    s.req("GET", "/api/v1/providers/{name}", "/api/v1/providers/SIHTraceLogging?backend=etl", token="reader", want=200)
    s.req("GET", "/api/v1/providers/{name}", "/api/v1/providers/sched", token="reader", want=200)
    s.req("GET", "/api/v1/os-sessions", token="reader", want=200)
    s.req("GET", "/metrics", token="reader", want=200)
    # sessions: a replay (over WebSocket) and a live one (ndjson)
    rep = s.req("POST", "/api/v1/sessions", body={"name": "replay-1", "files": ["sih.etl"], "replay": "fast"}, want=201)
    ws = e.ws("/api/v1/sessions/%d/events" % rep["id"])
    recs = ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=120)
    ws.close()
    evs = [r for r in recs if "_closed" not in r and "_timeout" not in r]
    check(len(evs) >= 10, "replay over WebSocket: %d records" % len(evs))
    s.items.append({"method": "GET", "path": "/api/v1/sessions/{id}/events", "status": 200,
                    "ctype": "application/x-ndjson", "body": evs})  # the same records as a WebSocket frame's array
    s.req("GET", "/api/v1/files/{name}/events", "/api/v1/files/sih.etl/events", token="reader", want=200)
    sid, live = live_events(e)
    check(len(live) >= 10, "live events: %d" % len(live))
    s.items.append({"method": "GET", "path": "/api/v1/sessions/{id}/events", "status": 200,
                    "ctype": "application/x-ndjson", "body": live})
    s.req("GET", "/api/v1/sessions", token="reader", want=200)
    s.req("GET", "/api/v1/sessions/{id}", "/api/v1/sessions/%d" % sid, token="reader", want=200)
    s.req("GET", "/api/v1/sessions/{id}", "/api/v1/sessions/%d" % rep["id"], token="reader", want=200)
    s.req("PATCH", "/api/v1/sessions/{id}", "/api/v1/sessions/%d" % sid, body={"disable": ["sched"]}, want=200)
    s.req("POST", "/api/v1/sessions/{id}/stop", "/api/v1/sessions/%d/stop" % sid, want=200)
    s.req("GET", "/api/v1/sessions/{id}", "/api/v1/sessions/%d" % sid, token="reader", want=200)
    # errors: problem+json
    s.req("GET", "/api/v1/sessions/{id}", "/api/v1/sessions/999999", token="reader", want=404)
    s.req("GET", "/api/v1/sessions", token=None, want=401)
    s.req("POST", "/api/v1/sessions", body={"providers": [{"name": "x", "bogus": 1}]}, want=400)
    s.req("POST", "/api/v1/sessions", token="reader", body={}, want=403)
    s.req("POST", "/api/v1/files", "/api/v1/files", body=b"x", ctype="application/octet-stream", want=400)
    s.req("GET", "/api/v1/files/{name}", "/api/v1/files/sih.etl", token="reader", headers={"Range": "bytes=999999-"}, want=416)
    s.req("DELETE", "/api/v1/sessions/{id}", "/api/v1/sessions/%d" % sid, want=204)
    return s.items


def main():
    if not npm_install():
        done()
    with Etwd(args=["--manifests", os.environ.get("ETWD_MANIFESTS", "")] if os.environ.get("ETWD_MANIFESTS") else []) as e:
        st, h, doc = e.json("GET", "/api/v1/openapi.json", token=None, expect=200)
        samples = collect(e)
    tmp = tempfile.mkdtemp(prefix="etwd-openapi-")
    try:
        docf, samf = os.path.join(tmp, "openapi.json"), os.path.join(tmp, "samples.json")
        json.dump(doc, open(docf, "w"))
        json.dump(samples, open(samf, "w"))
        check(doc.get("openapi") == "3.1.0", "OpenAPI 3.1.0: %r" % doc.get("openapi"))
        r = subprocess.run([os.path.join(PKG, "node_modules/.bin/redocly"), "lint", "--format=stylish",
                            "--config", os.path.join(PKG, "redocly.yaml"), docf],
                           cwd=PKG, env=ENV, capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        check(r.returncode == 0 and "warning" not in out.split("validating", 1)[-1],
              "redocly lint is clean:\n" + out[-4000:])
        r = subprocess.run(["node", os.path.join(PKG, "validate.mjs"), docf, samf], cwd=PKG, env=ENV,
                           capture_output=True, text=True, timeout=300)
        print(r.stdout.strip())
        check(r.returncode == 0, "real responses match the document:\n" + (r.stderr + r.stdout)[-6000:])
        # the document's own facts the issue named
        up = doc["paths"]["/api/v1/files"]["post"]
        check(any(p["name"] == "name" and p["in"] == "query" and p["required"] for p in up["parameters"]),
              "upload: name is a required query parameter")
        for p in ("/api/v1/files/{name}", "/api/v1/sessions/{id}/file"):
            check("206" in doc["paths"][p]["get"]["responses"], "206 declared for %s" % p)
        check(doc.get("servers"), "servers declared")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
