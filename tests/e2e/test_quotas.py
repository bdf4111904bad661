"""Issue 18 item 13: a reader token cannot lock the admin out — file decodes take no session slot,
cookie slots are per role (reader logins never evict an admin cookie), and part of the REST
concurrency limit is the admin's alone. Real etwd, real TLS, raw sockets where a client must hold
a request open without reading."""
import json
import os
import sys
import time
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import CORPUS, Etwd, check, done, hold  # noqa: E402

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")


def big_etl():
    z = zipfile.ZipFile(NET_ZIP)
    return z.read([n for n in z.namelist() if n.endswith(".etl")][0])


def test_decodes_take_no_session_slot():
    # one session slot in all: before the fix an unread decode held it (and 16 of them every slot)
    with Etwd(args=["--max-sessions", "1", "--max-decodes", "3", "--io-timeout", "120"]) as e:
        e.json("POST", "/api/v1/files?name=net.etl", body=big_etl(), ctype="application/octet-stream", expect=201)
        held = [hold(e, "/api/v1/files/net.etl/events") for _ in range(5)]
        codes = sorted(c for _, c in held)
        check(codes == [200, 200, 200, 429, 429], "5 unread decodes with --max-decodes 3: %r" % codes)
        st, h, j = e.json("GET", "/api/v1/sessions", token="reader")
        check(st == 200 and j == [], "decodes are not in the session table: %r" % j)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["net.etl"], "replay": "fast"})
        check(st == 201, "admin creates a session while readers hold every decode slot: %d %r" % (st, j))
        if st == 201:
            e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
        for s, _ in held:
            s.close()


def test_reader_logins_keep_admin_cookie():
    with Etwd() as e:
        st, h, j = e.json("POST", "/api/v1/login", token="admin", expect=200)
        admin_cookie = h.get("set-cookie", "").split(";")[0]
        check(admin_cookie.startswith("etwd_session="), "admin cookie: %r" % h.get("set-cookie"))
        c = e.conn()
        hdr = {"Authorization": "Bearer " + e.tokens["reader"]}
        t0 = time.time()
        ok = 0
        for _ in range(1100):  # more than the old table's 1,024 slots, on one keep-alive connection
            c.request("POST", "/api/v1/login", headers=hdr)
            r = c.getresponse()
            r.read()
            ok += r.status == 200
        c.close()
        check(ok == 1100, "1,100 reader logins: %d answered 200" % ok)
        print("1,100 reader logins in %.1f s" % (time.time() - t0))
        st, h, j = e.json("GET", "/api/v1/whoami", token=None, headers={"Cookie": admin_cookie})
        check(st == 200 and j.get("role") == "admin", "admin cookie still valid after 1,100 reader logins: %d %r" % (st, j))
        st, h, j = e.json("POST", "/api/v1/logout", token=None, headers={"Cookie": admin_cookie,
                                                                      "Origin": "https://127.0.0.1:%d" % e.port})
        check(st == 204, "admin logs out with the cookie: %d %r" % (st, j))


def test_admin_request_capacity():
    # 4 concurrent REST requests; a reader may hold 3 of them (here: downloads it does not read)
    with Etwd(args=["--max-requests", "4", "--io-timeout", "120"]) as e:
        big = os.path.join(e.state, "files", "big.etl")
        with open(big, "wb") as f:
            f.write(os.urandom(1 << 20) * 48)  # far more than the socket buffers hold
        held = [hold(e, "/api/v1/files/big.etl") for _ in range(4)]
        codes = [c for _, c in held]
        check(codes == [200, 200, 200, 429], "4 unread reader downloads with --max-requests 4: %r" % codes)
        st, h, j = e.json("GET", "/api/v1/sessions", token="admin")
        check(st == 200, "admin's request is served while a reader holds its share: %d %r" % (st, j))
        st, h, data = e.request("GET", "/api/v1/health", token=None)
        check(st == 200, "health: %d" % st)
        for s, _ in held:
            s.close()
        # the reader's share comes back when its downloads end
        deadline = time.time() + 60
        while True:
            st, h, data = e.request("GET", "/api/v1/sessions", token="reader")
            if st == 200 or time.time() > deadline:
                break
            time.sleep(0.2)
        check(st == 200, "reader served again after its downloads closed: %d %s" % (st, data[:200]))


if __name__ == "__main__":
    test_decodes_take_no_session_slot()
    test_reader_logins_keep_admin_cookie()
    test_admin_request_capacity()
    done()
