"""Rate rules stay right under overload: when events come faster than a trigger's watcher parses
them, its queue drops, and the rule must count the dropped events too (issue 20 item 3) — a
rate_above limit well under the real rate fires, a rate_below limit well under it does not fire.
The session shows what the watcher sees (`triggers`: last window's rate, seen, dropped).

Real kernel: a busy loop of getppid() with syscalls:sys_enter_getppid enabled; a small
--queue-events makes the watcher's queue overflow. The real rate is measured first by a session
without triggers (its hub has no subscriber, so it counts every event the readers decoded)."""
import os
import time

from etwd_harness import Etwd, check, done

EV = {"provider": "syscalls", "event": "sys_enter_getppid"}
PROVS = [{"name": "syscalls", "events": ["sys_enter_getppid"]}]


def busy(seconds):
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(20000):
            os.getppid()


def session(e, sid):
    st, h, j = e.json("GET", "/api/v1/sessions/%d" % sid)
    check(st == 200, "GET session %d: %d" % (sid, st))
    return j


def offered(e, sid):
    st = session(e, sid)["stats"]
    return st["events"] + st["loss"]["kernel"]


def real_rate(e):
    """the workload's rate under the same load as the tests below: a session of the event with a
    watcher of its own (a rule that never fires), so two instances record it and two sets of
    readers compete with the workload for the CPUs"""
    st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
        "providers": PROVS, "stop_when": dict(EV, rate_above=1e9, for_s=1)})
    sid = j["id"]
    time.sleep(0.5)
    n0, t0 = offered(e, sid), time.time()
    busy(3)
    n1, t1 = offered(e, sid), time.time()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    return (n1 - n0) / (t1 - t0)


def main():
    with Etwd(args=["--queue-events", "64"]) as e:
        rate = real_rate(e)
        check(rate > 3000, "the workload makes events: %.0f/s" % rate)
        limit = rate / 3
        # rate_above a third of the real rate: fires (before the fix the parsed share stayed under it)
        rule = dict(EV, rate_above=limit, for_s=1)
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={"providers": PROVS, "stop_when": rule})
        sid = j["id"]
        time.sleep(0.5)
        t0 = time.time()
        s = session(e, sid)
        while time.time() - t0 < 10 and s["state"] == "running":
            busy(0.5)
            s = session(e, sid)
        trig = s.get("triggers", {}).get("stop_when", {})
        print("real rate %.0f/s, rate_above %.0f: %s after %.1f s, watcher %r"
              % (rate, limit, s["state"], time.time() - t0, trig), flush=True)
        check(s["state"] == "stopped" and s.get("stop_reason") == "trigger",
              "rate_above %.0f (real %.0f/s) stopped it: %r %r" % (limit, rate, s["state"], s.get("stop_reason")))
        check(trig.get("met") is True and trig.get("seen", 0) > 0, "the session shows the watcher's view: %r" % trig)
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
        # rate_below the same limit while the real rate is three times it: must not fire
        rule = dict(EV, rate_below=limit, for_s=1)
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={"providers": PROVS, "stop_when": rule})
        sid = j["id"]
        time.sleep(0.5)
        busy(4)
        s = session(e, sid)
        trig = s.get("triggers", {}).get("stop_when", {})
        print("rate_below %.0f during the load: %s, watcher %r" % (limit, s["state"], trig), flush=True)
        check(s["state"] == "running", "rate_below %.0f does not fire at %.0f/s: %r" % (limit, rate, s["state"]))
        check(trig.get("rate", 0) > limit, "the watcher's rate (%r) is above the limit %.0f" % (trig.get("rate"), limit))
        check(trig.get("rate", 0) > rate / 2,
              "the watcher's rate (%r) is near the workload's (%.0f/s)" % (trig.get("rate"), rate))
        if not trig.get("dropped"):
            print("note: the watcher kept up (no drops): the overload path was not exercised", flush=True)
        # and once the load stops, the rate falls below it: fires
        s = session(e, sid)
        t0 = time.time()
        while time.time() - t0 < 10 and s["state"] == "running":
            time.sleep(0.2)
            s = session(e, sid)
        check(s["state"] == "stopped" and s.get("stop_reason") == "trigger",
              "after the load the rate_below rule fires: %r" % s["state"])
        e.request("DELETE", "/api/v1/sessions/%d" % sid)
    done()


if __name__ == "__main__":
    main()
