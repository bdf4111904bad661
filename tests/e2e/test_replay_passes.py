"""A replay session's state follows all of its passes (each subscriber of a replay gets its own
pass over the files): it stays "running" while any pass still reads, and says "ended" once the
last reading pass is over and one of them read to the end — a fast client finishing first must
not mark the session ended while a slow client's pass still reads. Real TLS, real clients."""
import time

from etwd_harness import Etwd, check, done
from test_lossless import Raw, Count, SHUTDOWN, ground_truth, wait_subs


def state(e, sid):
    st, h, j = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")
    check(st == 200, "GET session %d: %d" % (sid, st))
    return j["state"]


def read_all(r, c, timeout=120):
    t0 = time.time()
    while not r.eof and time.time() - t0 < timeout:
        for line in r.read(65536) or []:
            c.add(line)
    return r.eof


def wait_state(e, sid, want, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if state(e, sid) == want:
            return True
        time.sleep(0.05)
    return False


def test_slow_pass_keeps_running(e, n):
    """a fast client's pass ends while a stalled one's still reads: still running; then ended"""
    st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["shutdown.etl"], "replay": "fast"}, expect=201)
    sid = j["id"]
    slow = Raw(e, "/api/v1/sessions/%d/events" % sid, rcvbuf=4096)  # reads nothing for now
    check(wait_subs(e, sid, 1, 30) is not None, "slow client subscribed")
    fast = Raw(e, "/api/v1/sessions/%d/events" % sid)
    cf = Count()
    check(read_all(fast, cf), "the fast client's stream ends")
    check(cf.whole(n), "the fast client got the whole file: %r (of %d)" % (cf, n))
    time.sleep(0.5)
    s = state(e, sid)
    check(s == "running", "a slow client's pass still reads, the session says %r (want running)" % s)
    cs = Count()
    check(read_all(slow, cs), "the slow client's stream ends")
    check(cs.whole(n), "the slow client got the whole file: %r (of %d)" % (cs, n))
    check(wait_state(e, sid, "ended", 10), "after the last pass the session says ended: %r" % state(e, sid))
    fast.close()
    slow.close()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_left_pass_then_end(e, n):
    """a pass that read to its end, and another whose client left midway: ended when it left"""
    st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["shutdown.etl"], "replay": "fast"}, expect=201)
    sid = j["id"]
    slow = Raw(e, "/api/v1/sessions/%d/events" % sid, rcvbuf=4096)
    check(wait_subs(e, sid, 1, 30) is not None, "slow client subscribed")
    fast = Raw(e, "/api/v1/sessions/%d/events" % sid)
    check(read_all(fast, Count()), "the fast client's stream ends")
    time.sleep(0.3)
    check(state(e, sid) == "running", "still running while the stalled pass waits")
    slow.close()
    check(wait_subs(e, sid, 0, 30) is not None, "the stalled client is gone")
    check(wait_state(e, sid, "ended", 10), "the last reading pass left: ended (%r)" % state(e, sid))
    fast.close()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    n = ground_truth()
    with Etwd(args=["--queue-events", "1024"]) as e:
        e.json("POST", "/api/v1/files?name=shutdown.etl", body=open(SHUTDOWN, "rb").read(),
               ctype="application/octet-stream", expect=201)
        test_slow_pass_keeps_running(e, n)
        test_left_pass_then_end(e, n)
    done()


if __name__ == "__main__":
    main()
