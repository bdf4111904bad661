"""What tests/e2e/test_kstack_owner.py and test_kstack_preempt.py share: a getppid loop pinned on
CPU 0 that waits for "go", a live session on it in option mode (every provider has stacks) or
trigger mode (one more provider without), and a main that runs a test in both modes."""
import os
import platform
import subprocess
import sys

from etwd_harness import Etwd, check, done

# (user-space work between the syscalls keeps the event rate, and the test's own cost, down)
LOOP = "import os, sys, time\nsys.stdin.readline()\nt = time.time() + %f\nwhile time.time() < t:\n" \
       "    os.getppid()\n    sum(range(3000))\n"


def spawn_loop(seconds):
    """A process on CPU 0 that calls getppid for `seconds` once go() is called on it."""
    return subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", LOOP % seconds], stdin=subprocess.PIPE)


def go(p):
    p.stdin.write(b"go\n")
    p.stdin.close()


def create(e, provs, mixed, pid):
    """A session on pid with provs (all with stacks); mixed adds one without (trigger mode)."""
    if mixed:
        provs = provs + [{"name": "signal", "events": ["signal_deliver"]}]
    st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": provs, "pids": [pid]})
    check(st == 201, "create: %d %r" % (st, j))
    return j["id"]


def mode(mixed):
    return "trigger mode" if mixed else "option mode"


def main(run):
    """run(e, mixed) in option mode, then trigger mode, on one etwd (root and x86_64 only:
    getppid is syscall 110 there)."""
    if os.geteuid() != 0 or platform.machine() != "x86_64":
        check(False, "needs root (tracefs) and x86_64 (getppid is syscall 110)")
        done()
    with Etwd() as e:
        run(e, False)
        run(e, True)
    done()
