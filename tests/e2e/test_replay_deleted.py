"""A replay session's file cannot be deleted or replaced while the session exists: each subscriber
of a replay gets its own pass, which opens the file again by path, so a file deleted after the
first pass would make every later pass fail while the session still lists the file (and a file
replaced by an upload would give later passes other data than the first). DELETE
/api/v1/files/{name} and POST /api/v1/files?overwrite=true answer 409 problem+json naming the
session; later passes get the whole file; once the session is deleted the file can be deleted.
Real TLS, real clients, a real ETL file."""
from etwd_harness import Etwd, check, done
from test_lossless import SHUTDOWN, LXCORE, Raw, Count, ground_truth, wait_subs


def one_pass(e, sid, n):
    r = Raw(e, "/api/v1/sessions/%d/events" % sid)
    c = Count()
    while not r.eof:
        for line in r.read(65536) or []:
            c.add(line)
    r.close()
    check(c.whole(n), "a pass of session %d: the whole file: %r (of %d)" % (sid, c, n))


def main():
    n = ground_truth()
    with Etwd() as e:
        body = open(SHUTDOWN, "rb").read()
        e.json("POST", "/api/v1/files?name=used.etl", body=body, ctype="application/octet-stream", expect=201)
        st, h, j = e.json("POST", "/api/v1/sessions", body={"name": "keeper", "files": ["used.etl"], "replay": "fast"},
                          expect=201)
        sid = j["id"]
        one_pass(e, sid, n)
        st, h, p = e.json("DELETE", "/api/v1/files/used.etl")
        check(st == 409 and h.get("content-type", "").startswith("application/problem+json"),
              "deleting a file a session replays: 409 problem+json, got %d %r" % (st, p))
        detail = (p or {}).get("detail", "") if isinstance(p, dict) else ""
        check("session %d" % sid in detail and "keeper" in detail and "used.etl" in detail,
              "the problem names the session and the file: %r" % p)
        st, h, p = e.json("POST", "/api/v1/files?name=used.etl&overwrite=true", body=open(LXCORE, "rb").read(),
                          ctype="application/octet-stream")
        check(st == 409 and "session %d" % sid in str(p), "replacing it by an upload: 409 naming the session: %d %r" % (st, p))
        st, h, files = e.json("GET", "/api/v1/files", token="reader")
        check(any(f.get("name") == "used.etl" for f in files), "the file is still listed: %r" % files)
        one_pass(e, sid, n)  # a later pass: the same whole file (the old code: it was deleted, the pass fails)
        two = Raw(e, "/api/v1/sessions/%d/events" % sid, rcvbuf=4096)  # a pass that stays open
        check(wait_subs(e, sid, 1, 30) is not None, "a second client subscribed")
        st, h, p = e.json("DELETE", "/api/v1/files/used.etl")
        check(st == 409, "still refused while a pass reads: %d" % st)
        two.close()
        # another file, not used by any session, is deleted as before
        e.json("POST", "/api/v1/files?name=free.etl", body=body, ctype="application/octet-stream", expect=201)
        st, h, p = e.request("DELETE", "/api/v1/files/free.etl")
        check(st == 204, "an unused file is deleted: %d %r" % (st, p))
        st, h, p = e.request("DELETE", "/api/v1/sessions/%d" % sid)
        check(st == 204, "session deleted: %d" % st)
        st, h, p = e.request("DELETE", "/api/v1/files/used.etl")
        check(st == 204, "without the session the file is deleted: %d %r" % (st, p))
        st, h, p = e.json("POST", "/api/v1/sessions", body={"files": ["used.etl"]})
        check(st == 404, "a session over the deleted file is refused: %d %r" % (st, p))
    done()


if __name__ == "__main__":
    main()
