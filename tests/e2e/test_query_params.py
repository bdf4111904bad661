"""Query parameters on every route, through the real binary over real TLS. The routes and their
documented parameters come from the server's own OpenAPI document (generated from the route
table), so a new route or parameter is covered as soon as it exists:
- every route (and method) refuses a parameter it does not know with 400 problem+json
  (invalid-argument) whose field and detail name it, before it acts (a refused DELETE deletes
  nothing, a refused token rotation rotates nothing); a known one given twice or without a value
  is refused too; the WebSocket stream refuses an unknown one;
- every documented parameter, sent with the document's example value, is not refused (no 400),
  except the stream parameters the session's backend cannot honour (GET /api/v1/backends says
  which), which are refused with that reason;
- the stream routes document every stream parameter some backend lists."""
import json
import os
import shutil
import tempfile
import urllib.parse

from etwd_harness import Etwd, check, done, CORPUS

AMSI = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/AMSITrace.etl")
BOGUS = "etwd_no_such_param"


def call(e, method, path, body=None, ctype=None, token="admin", accept=None):
    """(status, problem JSON or None); a success's body is not read (streams are closed at once)."""
    h = {"Authorization": "Bearer " + e.tokens[token]} if token else {}
    if accept:
        h["Accept"] = accept
    if body is not None:
        h["Content-Type"] = ctype or "application/json"
    c = e.conn(60)
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        if r.status < 400:
            return r.status, None
        data = r.read(65536)
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, {"raw": data[:300]}
    finally:
        c.close()


def routes(e):
    st, h, doc = e.json("GET", "/api/v1/openapi.json", token=None, expect=200)
    out = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            q = [p for p in op.get("parameters", []) if p["in"] == "query"]
            out.append((method.upper(), path, op, q))
    return out


def fill(path, sid):
    """A real object for each path parameter (a missing one is fine too: the query is checked first)."""
    p = path.replace("{id}", str(sid))
    if p.startswith("/api/v1/providers/"):
        return p.replace("{name}", "AmsiTrace")
    if p.startswith("/api/v1/files/"):
        return p.replace("{name}", "amsi.etl")
    return p.replace("{name}", "etwd-none.etl")


def body_of(method, op, etl):
    rb = op.get("requestBody", {}).get("content", {})
    if "application/json" in rb:
        return b"{}", "application/json"
    if "application/octet-stream" in rb:
        return etl, "application/octet-stream"
    return None, None


def query(params):
    return "&".join("%s=%s" % (k, urllib.parse.quote(v, safe="")) for k, v in params)


def check_unknown(e, rts, sid, etl):
    for method, path, op, qp in rts:
        url = fill(path, sid)
        body, ctype = body_of(method, op, etl)
        req = [(p["name"], p["example"]) for p in qp if p.get("required")]
        accept = "application/x-ndjson" if path.endswith("/events") else None
        st, j = call(e, method, url + "?" + query(req + [(BOGUS, "1")]), body, ctype, accept=accept)
        what = "%s %s?%s=1" % (method, path, BOGUS)
        check(st == 400 and j.get("type") == "urn:etwd:problem:invalid-argument" and j.get("field") == BOGUS
              and BOGUS in j.get("detail", ""), "%s: %d %r" % (what, st, j))
        # every documented parameter is listed in the refusal
        check(all(p["name"] in (j or {}).get("detail", "") for p in qp), "%s lists the route's parameters: %r" % (what, j))
    # nothing was done: the file, the session and the tokens are all still there
    check(call(e, "GET", "/api/v1/files/amsi.etl")[0] == 200, "a refused DELETE kept the file")
    check(call(e, "GET", "/api/v1/sessions/%d" % sid)[0] == 200, "a refused DELETE kept the session")
    check(call(e, "GET", "/api/v1/whoami", token="reader")[0] == 200, "a refused rotation kept the tokens")


def check_documented(e, rts, sid, etl, refused):
    n = 0
    for method, path, op, qp in rts:
        url = fill(path, sid)
        required = [(p["name"], p["example"]) for p in qp if p.get("required")]
        accept = "application/x-ndjson" if path.endswith("/events") else None
        for p in qp:
            if p.get("required") and len(qp) > 1:
                continue  # sent with each optional one
            check("example" in p, "%s %s: parameter %s has an example" % (method, path, p["name"]))
            params = required + ([] if p.get("required") else [(p["name"], p.get("example", "1"))])
            body, ctype = body_of(method, op, etl)
            st, j = call(e, method, url + "?" + query(params), body, ctype, accept=accept)
            n += 1
            what = "%s %s?%s" % (method, path, query(params))
            if path.endswith("/events") and p["name"] in refused:
                check(st == 400 and "cannot honour" in j.get("detail", "") and p["name"] in j.get("detail", ""),
                      "%s: refused as the etl backend cannot honour it: %d %r" % (what, st, j))
            else:
                check(st != 400, "%s: a documented parameter is not refused: %d %r" % (what, st, j))
            if method == "POST" and path == "/api/v1/files" and st == 201:
                call(e, "DELETE", "/api/v1/files/" + dict(params)["name"])
    check(n >= 20, "%d documented parameters tried" % n)


def check_malformed(e, sid):
    for q, name in (("q=a&q=b", "q"), ("q", "q"), ("backend=etl&q=x&backend=linux", "backend")):
        st, j = call(e, "GET", "/api/v1/providers?" + q, token="reader")
        check(st == 400 and j.get("field") == name, "GET /api/v1/providers?%s: %d %r" % (q, st, j))
    st, j = call(e, "GET", "/api/v1/sessions/%d/events?limit=1&limit=2" % sid, token="reader",
                 accept="application/x-ndjson")
    check(st == 400 and j.get("field") == "limit", "a stream's limit twice: %d %r" % (st, j))
    st, j = call(e, "GET", "/api/v1/sessions?state=running", token="reader")
    check(st == 400 and j.get("field") == "state" and "takes none" in j.get("detail", ""),
          "GET /api/v1/sessions?state=running (the review's example): %d %r" % (st, j))
    import websocket
    for q in (BOGUS + "=1", "limit=1&limit=2"):
        try:
            ws = e.ws("/api/v1/sessions/%d/events?%s" % (sid, q))
            ws.close()
            check(False, "a WebSocket with ?%s was accepted" % q)
        except websocket.WebSocketBadStatusException as x:
            check(x.status_code == 400, "WebSocket ?%s: %r" % (q, x))


def main():
    data = tempfile.mkdtemp(prefix="etwdqp-")
    shutil.copy(AMSI, os.path.join(data, "amsi.etl"))
    with open(AMSI, "rb") as f:
        etl = f.read()
    try:
        with Etwd(args=["--data-dir", data]) as e:
            st, h, j = e.json("POST", "/api/v1/sessions", {"files": ["amsi.etl"]}, expect=201)
            sid = j["id"]
            st, h, b = e.json("GET", "/api/v1/backends", token="reader", expect=200)
            params = {}
            for be in b["backends"]:
                for p in be["stream_parameters"]:
                    params.setdefault(p["parameter"], set()).add((be["name"], p["supported"]))
            refused = {k for k, v in params.items() if ("etl", False) in v}
            rts = routes(e)
            check(len(rts) >= 30, "%d routes in the OpenAPI document" % len(rts))
            for method, path, op, qp in rts:
                if path == "/api/v1/sessions/{id}/events":
                    missing = set(params) - {p["name"] for p in qp}
                    check(not missing, "%s documents every stream parameter; missing %r" % (path, sorted(missing)))
            check_documented(e, rts, sid, etl, refused)
            check_malformed(e, sid)
            check_unknown(e, rts, sid, etl)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
