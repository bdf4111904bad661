#!/usr/bin/env python3
"""Stacks on some events of a provider only: `"stacks": ["sched_switch"]` (linux: event names, as
in "events"; win: event IDs, as in "event_ids" — the win descriptor is tested by
unit.test_winreq), through the real server on the real kernel (root):

* a session of the whole `sched` system (every sched event enabled) with stacks on
  sched_switch only: its sched_switch events carry "Stack" (kernel frames, the scheduler's), its
  other sched events (sched_wakeup, sched_waking, sched_stat_*, …) carry none;
* the session's spec echoes the list (GET /api/v1/sessions/{id});
* PATCH enable on a running session takes the list too (stacks on the listed event only);
* 400 problems naming /providers/N/stacks/K: an event not among the provider's "events", an
  event the system does not have, an ID on linux, an entry listed twice, an empty list;
* GET /api/v1/backends: linux has the capability stack_events and lists the member; the etl
  backend cannot honour stacks and refuses a list by name."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from etwd_harness import CORPUS, Etwd, check, done, problem  # noqa: E402

PS = "microsoft+krabsetw/examples/NativeExamples/powershell.etl"


def load(stop):
    """context switches and wakeups: a child that sleeps briefly in a loop"""
    p = subprocess.Popen(["sh", "-c", "while :; do sleep 0.01; done"])
    stop.wait()
    p.kill()
    p.wait()


def events(e, sid, n):
    """the first @n events of session @sid (from its replay window), within 60 s"""
    out = []
    for rec in e.ndjson("/api/v1/sessions/%d/events?from=1&limit=%d" % (sid, n), timeout=60):
        if "System" in rec:
            out.append(rec)
    return out


def split(evs):
    sw = [ev for ev in evs if ev["System"]["EventName"] == "sched_switch"]
    other = [ev for ev in evs if ev["System"]["EventName"] != "sched_switch"]
    return sw, other


def check_session(e):
    spec = {"providers": [{"name": "sched", "stacks": ["sched_switch"]}], "mode": "realtime"}
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
    check(st == 201, "sched with stacks on sched_switch: %d %r" % (st, j))
    if st != 201:
        return
    sid = j["id"]
    st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, expect=200)
    check(s["spec"]["providers"][0]["stacks"] == ["sched_switch"], "the spec echoes the list: %r" % s["spec"])
    evs = events(e, sid, 1500)
    sw, other = split(evs)
    with_stack = [ev for ev in sw if ev.get("Stack")]
    names = sorted({ev["System"]["EventName"] for ev in other})
    check(len(sw) >= 20 and len(other) >= 20, "both kinds of events came: %d sched_switch, %d others %r" %
          (len(sw), len(other), names))
    # a stack record can be orphaned on a loaded machine (docs/linux.md "Stacks"): nearly all
    check(len(with_stack) >= 0.9 * len(sw), "sched_switch events carry Stack: %d of %d" % (len(with_stack), len(sw)))
    check(any("schedule" in (f.get("Symbol") or "") for ev in with_stack for f in ev["Stack"]),
          "the kernel stacks of sched_switch hold the scheduler: %r" % (with_stack[:1],))
    bad = [ev["System"]["EventName"] for ev in other if "Stack" in ev]
    check(not bad, "no other sched event carries Stack: %r" % bad[:10])
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def check_patch(e):
    """a running session (without stacks) gets a provider with stacks on one of its events"""
    st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "task"}]}, expect=201)
    sid = j["id"]
    st, h, j = e.json("PATCH", "/api/v1/sessions/%d" % sid, body={"enable": [
        {"name": "sched", "events": ["sched_switch", "sched_wakeup"], "stacks": ["sched_wakeup"]}]})
    check(st in (200, 204), "PATCH enable with a stacks list: %d %r" % (st, j))
    st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, expect=200)
    ps = [p for p in s["spec"]["providers"] if p["name"] == "sched"]
    check(ps and ps[0]["stacks"] == ["sched_wakeup"], "PATCH: the spec echoes the list: %r" % s["spec"]["providers"])
    evs = [ev for ev in events(e, sid, 600) if ev["System"]["Provider"]["Name"] == "sched"]
    wk = [ev for ev in evs if ev["System"]["EventName"] == "sched_wakeup"]
    sw = [ev for ev in evs if ev["System"]["EventName"] == "sched_switch"]
    check(len(wk) >= 5 and len(sw) >= 5, "PATCH: both events came: %d wakeups, %d switches" % (len(wk), len(sw)))
    # not every wakeup gets one: the kernel writes no stack record for many (an instance with
    # options/stacktrace, its own `trace` text over 2 s here: 211 stack traces for 371
    # sched_wakeup); etwd counted no orphaned record while 3-60 % of wakeups came without one
    # (CI saw 40 % once). So: some do, each with the wakeup path in its
    # frames (try_to_wake_up, ttwu_*: its own stack, not a neighbour's); the switches never
    withs = [ev for ev in wk if ev.get("Stack")]
    own = [ev for ev in withs if any(w in (f.get("Symbol") or "") for f in ev["Stack"][:6] for w in ("wake", "ttwu"))]
    check(withs and len(own) == len(withs), "PATCH: sched_wakeup carries its Stack: %d of %d, %d of them with a wake "
          "frame first: %r" % (len(withs), len(wk), len(own), [[f.get("Symbol") for f in ev["Stack"][:6]]
                                                           for ev in withs if ev not in own][:3]))
    check(not any("Stack" in ev for ev in sw), "PATCH: sched_switch carries none")
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def check_refusals(e):
    cases = [
        ({"name": "sched", "events": ["sched_switch", "sched_wakeup"], "stacks": ["sched_wakeup", "sched_waking"]},
         "/providers/0/stacks/1", "sched_waking"),
        ({"name": "sched", "stacks": ["sched_switch", "etwd_no_such_event"]}, "/providers/0/stacks/1",
         "etwd_no_such_event"),
        ({"name": "sched", "stacks": [1]}, "/providers/0/stacks/0", "names"),
        ({"name": "sched", "stacks": ["sched_switch", 3]}, "/providers/0/stacks/1", "event"),
        ({"name": "sched", "stacks": ["sched_switch", "sched_switch"]}, "/providers/0/stacks/1", "twice"),
        ({"name": "sched", "stacks": []}, "/providers/0/stacks", "list"),
        ({"name": "sched", "stacks": "sched_switch"}, "/providers/0/stacks", "list"),
    ]
    for prov, field, word in cases:
        st, h, raw = e.request("POST", "/api/v1/sessions", body={"providers": [{"name": "task"}, prov]})
        j = json.loads(raw) if raw else {}
        field = field.replace("/providers/0/", "/providers/1/")
        problem(st, h, raw, 400, "stacks %r" % (prov,))
        check(isinstance(j, dict) and j.get("field") == field and word in j.get("detail", ""),
              "stacks %r: 400 naming %s (%r): %r" % (prov["stacks"], field, word, j))
        if st == 201:
            e.request("DELETE", "/api/v1/sessions/%d" % j["id"])


def check_backends(e):
    st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
    b = {x["name"]: x for x in j["backends"]}
    check("stack_events" in b["linux"]["capabilities"], "linux has stack_events: %r" % b["linux"]["capabilities"])
    check("stack_events" not in b["etl"]["capabilities"], "etl has no stack_events")
    rows = [m for m in b["linux"]["members"] if m["member"] == "/providers/*/stacks" and isinstance(m["example"], list)]
    check(rows and rows[0]["supported"] is True and "stack_events" in rows[0]["needs"],
          "the members list the stacks list: %r" % rows)
    st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "etl", "files": ["ps.etl"],
                                                        "providers": [{"name": "P", "stacks": [1]}]})
    check(st == 400 and j.get("field") == "/providers/0/stacks" and "etl" in j.get("detail", ""),
          "etl refuses a stacks list by name: %d %r" % (st, j))


def main():
    if os.geteuid() != 0:
        check(False, "stack tests need root (tracefs)")
        done()
    stop = threading.Event()
    th = threading.Thread(target=load, args=(stop,))
    th.start()
    data = tempfile.mkdtemp(prefix="etwdstkev-")
    shutil.copy(os.path.join(CORPUS, PS), os.path.join(data, "ps.etl"))
    try:
        with Etwd(args=["--data-dir", data]) as e:
            check_backends(e)
            check_refusals(e)
            check_session(e)
            check_patch(e)
    finally:
        stop.set()
        th.join()
        shutil.rmtree(data, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
