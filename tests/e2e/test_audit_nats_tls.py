"""A fleet on a secured broker (issue 23 audit): nats-server with TLS that also requires client
certificates (--tlsverify; a CA, server and client certificates made here with openssl). An agent
etwd publishes exec events through a sink (tls://, tls_ca, tls_cert/tls_key); a central etwd reads
the stream with backend "nats" over the same TLS (tls_ca, tls_cert/tls_key in /nats, files inside
--sink-secrets-dir) and serves them to a WebSocket client: exact count, System.Host kept. GET
shows whether TLS is used, never the paths; files outside the secrets directory, a lone tls_cert
and a missing client certificate are 4xx naming /nats."""
import json
import os
import shutil
import subprocess
import tempfile

import etwd_harness as H
from etwd_harness import Etwd, check, done, free_port
from test_nats import require_nats, Nats, create, run_n, sink_of, session, unique_prog, wait_for


def openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "openssl %s: %s" % (args[0], r.stderr[-300:]))


def make_pki(d):
    """ca.pem; srv.pem/srv.key for 127.0.0.1; client.pem/client.key — all signed by the CA"""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=etwd-test-ca", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    with open(os.path.join(d, "srv.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for name, ext in (("srv", ["-extfile", "srv.ext"]), ("client", [])):
        openssl("req", *ec, "-subj", "/CN=" + name, "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-out", name + ".pem", *ext, cwd=d)


def main():
    require_nats()
    pki = tempfile.mkdtemp(prefix="etwd-natstls-")
    make_pki(pki)
    sec = os.path.join(pki, "secrets")
    os.makedirs(sec)
    for f in ("ca.pem", "client.pem", "client.key"):
        shutil.copy(os.path.join(pki, f), sec)
    nats = Nats(extra=["--tlsverify", "--tlscert", os.path.join(pki, "srv.pem"), "--tlskey",
                       os.path.join(pki, "srv.key"), "--tlscacert", os.path.join(pki, "ca.pem")]).start()
    url = "tls://127.0.0.1:%d" % nats.port
    tls = {"tls_ca": "ca.pem", "tls_cert": "client.pem", "tls_key": "client.key"}
    prog = unique_prog("natstls")
    N = 15
    try:
        with Etwd(args=["--host-name", "tls-agent", "--sink-secrets-dir", sec]) as a, \
                Etwd(args=["--host-name", "central", "--sink-secrets-dir", sec]) as c:
            sink = dict(tls, type="nats", url=url, stream="TLSX", subject="tlsx.{host}.{session}.{provider}")
            j = create(a, {"name": "ex", "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
                           "sinks": [sink]})
            aid = j["id"]
            H.wait_subscribers(a, aid, 1)
            wait_for("the agent's sink connected over TLS", lambda: sink_of(a, aid)["connected"])
            pids = run_n(prog, N)
            a.json("POST", "/api/v1/sessions/%d/stop" % aid, expect=200)
            produced = session(a, aid)["stats"]["events"]
            wait_for("the agent's events acknowledged", lambda: sink_of(a, aid)["acked"] == produced)

            base = {"backend": "nats", "subjects": ["tlsx.>"]}
            for nats_spec, field in (({"url": url, "stream": "TLSX", "tls_ca": "/etc/ssl/certs/ca-certificates.crt"}, "/nats/tls_ca"),
                                     ({"url": url, "stream": "TLSX", "tls_ca": "ca.pem", "tls_cert": "client.pem"}, "/nats"),
                                     ({"url": url, "stream": "TLSX", "tls_ca": 5}, "/nats"),
                                     ({"url": url, "stream": "TLSX", "tls_ca": "ca.pem"}, "/nats"),  # no client certificate
                                     ({"url": "https://127.0.0.1:1", "stream": "TLSX"}, "/nats/url")):
                st, h, jj = c.json("POST", "/api/v1/sessions", body=dict(base, nats=nats_spec))
                check(400 <= st < 500 and (jj or {}).get("field") == field
                      and h.get("content-type", "").startswith("application/problem+json"),
                      "%r → 4xx problem naming %s: %d %r" % (nats_spec, field, st, jj))
            j = create(c, dict(base, name="central", nats=dict(tls, url=url, stream="TLSX")))
            cid = j["id"]
            n = j["spec"]["nats"]
            check(n.get("tls") is True and n.get("creds") is False and "ca.pem" not in json.dumps(j["spec"]),
                  "the spec shows that TLS is used, not the files: %r" % n)
            ws = c.ws("/api/v1/sessions/%d/events?event=sched_process_exec&from=1" % cid)

            def mine(rs):
                return [r for r in rs if "System" in r and r.get("EventData", {}).get("filename") == prog]
            got = mine(H.ws_events(ws, lambda rs: len(mine(rs)) >= N, timeout=60))
            check(len(got) == N and sorted(r["EventData"]["pid"] for r in got) == sorted(pids),
                  "central over TLS: %d of %d executions" % (len(got), N))
            check(all(r["System"].get("Host") == "tls-agent" for r in got), "System.Host of the agent kept")
            ws.close()
            c.request("DELETE", "/api/v1/sessions/%d" % cid)
            a.request("DELETE", "/api/v1/sessions/%d" % aid)
    finally:
        nats.cleanup()
        shutil.rmtree(pki, ignore_errors=True)
        shutil.rmtree(os.path.dirname(prog), ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
