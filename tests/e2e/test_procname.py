"""Execution.ProcessName on Linux events (issue 20 item 7), through the real server on the real
kernel (root), over real TLS:
- a copy of /bin/dd under a unique name, pinned to CPU 0, that has exited before its events are
  decoded: its sys_enter_write events and its sched_process_exec carry that name (from the
  kernel's saved_cmdlines, /proc no longer has it), none the name of the python3 it was forked as;
- a python3 child renames itself with prctl(PR_SET_NAME) (task:task_rename), pinned to CPU 1:
  every write of it after the rename shows the new name (the reader that decodes the rename asks
  again at once instead of keeping its cached answer for up to 2 s);
- ProcessID stays the process id."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from etwd_harness import ws_events, Etwd, check, done

NCPU = os.cpu_count()


def collect(e, sid, pid, until, timeout=30):
    """Records of @pid from the session's start (replay window) until until(recs) or timeout."""
    ws = e.ws("/api/v1/sessions/%d/events?from=1&pid=%d" % (sid, pid))
    try:
        recs = ws_events(ws, lambda rs: until([r for r in rs if "System" in r]), timeout)
    finally:
        ws.close()
    return [r for r in recs if "System" in r]


def name_of(r):
    return r["System"]["Execution"].get("ProcessName")


def session(e):
    spec = {"name": "pname", "buffer_kb": 1024, "providers": [
        {"name": "sched", "events": ["sched_process_exec"]},
        {"name": "task", "events": ["task_rename"]},
        {"name": "syscalls", "events": ["sys_enter_write"]}]}
    st, h, body = e.json("POST", "/api/v1/sessions", spec, expect=201)
    return body["id"]


def test_exec(e, sid):
    d = tempfile.mkdtemp(prefix="etwdpn-")
    name = "etwdpn%d" % (os.getpid() % 100000)  # < 16 bytes: the whole comm
    prog = os.path.join(d, name)
    shutil.copy("/bin/dd", prog)
    n = 3000
    p = subprocess.Popen([prog, "if=/dev/zero", "of=/dev/null", "bs=1", "count=%d" % n],
                         stderr=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    p.wait()
    shutil.rmtree(d)  # the process is gone before its events are decoded: saved_cmdlines has it
    recs = collect(e, sid, p.pid, lambda rs: sum(r["System"]["EventName"] == "sys_enter_write" for r in rs) >= n)
    writes = [r for r in recs if r["System"]["EventName"] == "sys_enter_write"]
    check(len(writes) >= n, "exec: %d of the program's %d writes seen" % (len(writes), n))
    execs = [r for r in recs if r["System"]["EventName"] == "sched_process_exec"]
    check(len(execs) == 1, "exec: one sched_process_exec of pid %d, got %d" % (p.pid, len(execs)))
    if execs:
        check(name_of(execs[0]) == name, "the exec event shows the new comm %r: %r" % (name, name_of(execs[0])))
        after = [r for r in writes if r["seq"] > execs[0]["seq"] and r["System"]["Execution"]["ProcessorID"] == 0]
        bad = [name_of(r) for r in after if name_of(r) != name]
        check(after and not bad, "exec: every write after the exec on CPU 0 shows %r (%d writes, %d others: %r)"
              % (name, len(after), len(bad), bad[:3]))
    check(all(r["System"]["Execution"]["ProcessID"] == p.pid for r in recs), "exec: ProcessID is the pid")
    print("exec: %d writes, names %r" % (len(writes), sorted(set(map(name_of, writes)), key=str)), flush=True)


def test_rename(e, sid):
    new = "etwdrn%d" % (os.getpid() % 100000)
    cpu = 1 if NCPU > 1 else 0
    code = ("import ctypes, os, time\n"
            "libc = ctypes.CDLL(None)\n"
            "fd = os.open('/dev/null', os.O_WRONLY)\n"
            "for i in range(200): os.write(fd, b'a')\n"
            "libc.prctl(15, %r)\n"
            "for i in range(2000): os.write(fd, b'b')\n" % new.encode())
    p = subprocess.Popen([sys.executable, "-c", code], preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    p.wait()
    check(p.returncode == 0, "the renaming child ran: rc %s" % p.returncode)
    recs = collect(e, sid, p.pid, lambda rs: sum(name_of(r) == new for r in rs) >= 2000)
    allren = [r for r in recs if r["System"]["EventName"] == "task_rename"]
    ren = [r for r in allren if r["EventData"].get("newcomm") == new]
    check(len(ren) == 1, "rename: the prctl's task_rename of pid %d seen: %r" % (p.pid, [r["EventData"] for r in allren]))
    if ren:
        after = [r for r in recs if r["seq"] > ren[0]["seq"] and r["System"]["EventName"] == "sys_enter_write"
                 and r["System"]["Execution"]["ProcessorID"] == cpu]
        bad = [name_of(r) for r in after if name_of(r) != new]
        check(len(after) >= 2000 and not bad, "rename: every write after prctl on CPU %d shows %r (%d writes, %d others: %r)"
              % (cpu, new, len(after), len(bad), bad[:3]))
        before = [name_of(r) for r in recs if r["seq"] < ren[0]["seq"] and r["System"]["EventName"] == "sys_enter_write"]
        print("rename: before the prctl the writes show %r" % sorted(set(before), key=str), flush=True)


def main():
    with Etwd() as e:
        sid = session(e)
        time.sleep(0.3)
        test_exec(e, sid)
        test_rename(e, sid)
        st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader", expect=200)
        check(s["stats"]["loss"]["subscribers"] == 0 if isinstance(s["stats"].get("loss"), dict) else True,
              "no subscriber loss: %r" % s["stats"].get("loss"))
        e.json("DELETE", "/api/v1/sessions/%d" % sid)
    done()


if __name__ == "__main__":
    main()
