"""Issue 18 item 3: file decodes are bounded — at most --max-decodes at once (429 problem+json
beyond, the slot back when a stream ends), documented in --help and /version — and RSS does not
grow with the number of decodes. Real etwd, real TLS; unread streams held on raw sockets.
RSS itself is measured by bench/rss.py on a release build: under ASan (which the e2e suite
runs) RSS grows ~1 MB a decode in ASan's own allocator regions even with a 1 MB quarantine,
while the release build stays flat (19 -> 23 MB over 80 decodes), so no RSS check here; what
is checked is that the server runs with glibc's per-thread cache off (the bench's finding)."""
import json
import os
import subprocess
import sys
import time
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import BIN, CORPUS, Etwd, check, done, hold  # noqa: E402

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
SPD = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl")
SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def big_etl():
    z = zipfile.ZipFile(NET_ZIP)
    return z.read([n for n in z.namelist() if n.endswith(".etl")][0])


def decode(e, name):
    """One whole decode read to its end: (status, headers, events)."""
    c = e.conn(timeout=120)
    c.request("GET", "/api/v1/files/%s/events" % name, headers={"Authorization": "Bearer " + e.tokens["reader"]})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def test_option_documented():
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
    check("--max-decodes" in out, "--help documents --max-decodes")
    r = subprocess.run([BIN, "--max-decodes", "0"], capture_output=True, text=True)
    check(r.returncode == 2 and "max-decodes" in r.stderr, "--max-decodes 0 refused: %d %r" % (r.returncode, r.stderr))


def test_decode_limit():
    with Etwd(args=["--max-decodes", "2", "--io-timeout", "120"]) as e:
        e.json("POST", "/api/v1/files?name=net.etl", body=big_etl(), ctype="application/octet-stream", expect=201)
        e.json("POST", "/api/v1/files?name=sih.etl", body=open(SIH, "rb").read(), ctype="application/octet-stream",
               expect=201)
        st, h, j = e.json("GET", "/api/v1/version", token="reader", expect=200)
        check(j["limits"].get("max_decodes") == 2, "/version shows max_decodes: %r" % j.get("limits"))
        a, sa = hold(e, "/api/v1/files/net.etl/events")
        b, sb = hold(e, "/api/v1/files/net.etl/events")
        check((sa, sb) == (200, 200), "two unread decodes within the limit: %r" % ((sa, sb),))
        st, h, data = decode(e, "sih.etl")
        check(st == 429, "a third decode beyond --max-decodes 2: %d" % st)
        check(h.get("content-type", "").startswith("application/problem+json") and h.get("retry-after") == "1",
              "429 is problem+json with Retry-After: %r" % h)
        try:
            p = json.loads(data)
            check(p.get("type", "").endswith("limit-reached") and "max-decodes" in p.get("detail", ""),
                  "problem names the limit: %r" % p)
        except ValueError:
            check(False, "429 body is JSON: %r" % data[:200])
        # a live stream that ends gives its slot back: close one unread decode, then decode again
        a.close()
        deadline = time.time() + 60
        while True:
            st, h, data = decode(e, "sih.etl")
            if st == 200 or time.time() > deadline:
                break
            time.sleep(0.2)
        n = len([ln for ln in data.splitlines() if ln.strip() and "System" in json.loads(ln)]) if st == 200 else 0
        check(st == 200 and n >= 10, "slot freed when a stream ended: %d, %d events" % (st, n))
        # a decode that ran to its end gives its slot back at once: back to back, one slot left
        codes = [decode(e, "sih.etl")[0] for _ in range(8)]
        check(codes == [200] * 8, "8 decodes back to back with one slot free: %r" % codes)
        b.close()


def server_env(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        return dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)


def test_tcache_off():
    # glibc's per-thread cache pins pages in every worker (bench/rss.py): the server runs without
    # it, having executed itself again with the tunable (ld.so rewrites the variable in place, so
    # /proc/PID/environ shows a preset value only in part: the operator's case is not checked)
    with Etwd() as e:
        env = server_env(e.proc.pid)
        check(env.get(b"GLIBC_TUNABLES") == b"glibc.malloc.tcache_count=0", "tcache off: %r" % env.get(b"GLIBC_TUNABLES"))
        check(e.request("GET", "/api/v1/health", token=None)[0] == 200, "serves after re-executing itself")


if __name__ == "__main__":
    test_option_documented()
    test_decode_limit()
    test_tcache_off()
    done()
