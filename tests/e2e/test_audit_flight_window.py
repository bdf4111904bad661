"""Flight recorder of "the last S seconds" (issue 20 item 3: "a circular recording of the last N MB
or S seconds"; the test "flight mode + snapshot produces a file with the events of the last
seconds only"), through the real server on the real kernel (root):
- two flight sessions on the same events of this test's processes (pids), one with
  "flight_s": 2 and one without, both with buffers far larger than the load; on CPU 0 a program
  runs, then a syscall load that fills pages after it, then 4 s of quiet, then a second program;
  the snapshot of the windowed session holds the second exec but not the first, the other one
  both (so it is the time window, not the buffer size, that dropped it); trace-cmd reads both;
- a stop trigger on a windowed flight session writes its snapshot with the same window;
- flight_s is shown in the spec, refused without mode flight (400 /flight_s), refused out of
  range, and listed by GET /api/v1/backends (linux honours it, etl not)."""
import os
import subprocess
import time

from etwd_harness import Etwd, check, done, drop_prog, session, trace_report, unique_prog, wait_state

PIN = ["taskset", "-c", "0"]
LOAD = PIN + ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=20000"]  # ~20k sys_enter: many pages


def execs(data, prog):
    return [l for l in trace_report(data) if "sched_process_exec" in l and os.path.basename(prog) in l]


def snapshot(e, sid):
    st, h, j = e.json("POST", "/api/v1/sessions/%d/snapshot" % sid, expect=201)
    code, h, data = e.request("GET", j["recording_url"], token="reader")
    check(code == 200 and len(data) == j["size"], "snapshot of %d downloads: %d" % (sid, code))
    return data


def spec(extra):
    s = {"providers": [{"name": "sched", "events": ["sched_process_exec"]}, {"name": "raw_syscalls", "events": ["sys_enter"]}],
         "mode": "flight", "buffer_kb": 8192, "pids": [os.getpid()]}
    s.update(extra)
    return s


def test_window(e):
    old, new = unique_prog("fwold"), unique_prog("fwnew")
    st, h, w = e.json("POST", "/api/v1/sessions", body=spec({"flight_s": 2}), expect=201)
    st, h, a = e.json("POST", "/api/v1/sessions", body=spec({}), expect=201)
    check(w["spec"].get("flight_s") == 2 and "flight_s" not in a["spec"], "the spec shows flight_s: %r" % w["spec"])
    subprocess.run(PIN + [old], check=True)
    subprocess.run(LOAD, check=True, stderr=subprocess.DEVNULL)  # pages after the old exec's
    time.sleep(4)
    subprocess.run(PIN + [new], check=True)
    dw, da = snapshot(e, w["id"]), snapshot(e, a["id"])
    check(len(execs(da, old)) == 1 and len(execs(da, new)) == 1,
          "without flight_s the snapshot holds both execs (the buffers kept them): %d %d" % (len(execs(da, old)), len(execs(da, new))))
    check(len(execs(dw, new)) == 1, "with flight_s 2 the snapshot holds the last exec: %d" % len(execs(dw, new)))
    check(not execs(dw, old), "but not the one 4 s before: %r" % execs(dw, old))
    check(len(dw) < len(da), "and is smaller: %d vs %d bytes" % (len(dw), len(da)))
    print("flight_s 2: snapshot %d bytes, without it %d bytes" % (len(dw), len(da)))
    for i in (w["id"], a["id"]):
        e.request("DELETE", "/api/v1/sessions/%d" % i)
    drop_prog(old)
    drop_prog(new)


def test_trigger_window(e):
    old, new, stop = unique_prog("ftold"), unique_prog("ftnew"), unique_prog("ftstop")
    body = spec({"flight_s": 2, "stop_when": {"provider": "sched", "event": "sched_process_exec",
                                              "filter": {"filename": stop}}})
    st, h, j = e.json("POST", "/api/v1/sessions", body=body, expect=201)
    st, h, recs = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    before = {r["name"] for r in recs}
    time.sleep(0.5)
    subprocess.run(PIN + [old], check=True)
    subprocess.run(LOAD, check=True, stderr=subprocess.DEVNULL)  # pages after the old exec's
    time.sleep(4)
    subprocess.run(PIN + [new], check=True)
    subprocess.run([stop], check=True)
    s = wait_state(e, j["id"], ("stopped", "failed"), timeout=15)
    check(s["state"] == "stopped" and s.get("stop_reason") == "trigger", "the trigger stopped it: %r" % s["state"])
    st, h, recs = e.json("GET", "/api/v1/recordings", token="reader", expect=200)
    added = [r["name"] for r in recs if r["name"] not in before]
    check(len(added) == 1, "one recording written: %r" % added)
    if added:
        code, h, data = e.request("GET", "/api/v1/recordings/%s" % added[0], token="reader")
        check(len(execs(data, new)) == 1 and not execs(data, old),
              "the trigger's snapshot keeps the window: new %d, old %d" % (len(execs(data, new)), len(execs(data, old))))
    e.request("DELETE", "/api/v1/sessions/%d" % j["id"])
    for p in (old, new, stop):
        drop_prog(p)


def test_refusals(e):
    base = {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]}
    for extra, why in (({"flight_s": 5}, "realtime"), ({"mode": "file", "flight_s": 5}, "file"),
                       ({"mode": "flight", "flight_s": 0}, "zero"), ({"mode": "flight", "flight_s": "5"}, "a string"),
                       ({"mode": "flight", "flight_s": 86401}, "too long")):
        st, h, j = e.json("POST", "/api/v1/sessions", body=dict(base, **extra))
        check(st == 400 and j.get("field") == "/flight_s" and "flight_s" in j.get("detail", ""),
              "flight_s with %s: 400 naming /flight_s: %d %r" % (why, st, j))
    st, h, j = e.json("GET", "/api/v1/backends", token="reader", expect=200)
    m = {b["name"]: [x for x in b["members"] if x["member"] == "/flight_s"] for b in j["backends"]}
    check(len(m.get("linux", [])) == 1 and m["linux"][0]["supported"] is True, "linux lists flight_s: %r" % m.get("linux"))
    check(len(m.get("etl", [])) == 1 and m["etl"][0]["supported"] is False, "etl does not honour it: %r" % m.get("etl"))


def main():
    if os.geteuid() != 0:
        check(False, "these tests need root (tracefs)")
        done()
    with Etwd() as e:
        test_refusals(e)
        test_window(e)
        test_trigger_window(e)
    done()


if __name__ == "__main__":
    main()
