"""A kernel stack lands on its own event (docs/linux.md "Stacks"): an event that an interrupt
interrupts between its commit and its stack record is followed by the interrupt's event and
stacks, and only then by its own stack. Here a process loops on getppid (raw_syscalls:sys_enter,
stacks) on CPU 0 while another sleeps 1 ms at a time on the same CPU, so the timer interrupt that
wakes it (sched:sched_wakeup, stacks, in the looping process's context) often lands in that gap.
Before, the late sys_enter stack replaced the wakeup's own (a wakeup "called" from
syscall_trace_enter) and the sys_enter went without one. Now each held event keeps the first
kernel and the first user stack that follow it, a second one is orphaned (counted): every
sched_wakeup's kernel stack goes through try_to_wake_up (or wake_up_new_task), every sys_enter's
through syscall_trace_enter, in both stack modes (option: every provider has stacks; trigger: one
without). Before, 7% to more than half of the wakeups had a syscall's stack."""
import subprocess
import sys
import time

import kstack_common
from etwd_harness import check, wait_subscribers, ws_events

SLEEP = "import time\nt = time.time() + %f\nwhile time.time() < t: time.sleep(0.001)\n"
SECONDS = 0.8
WAKE = ("try_to_wake_up", "wake_up_new_task", "ttwu_", "wake_up_q")


def kernel_syms(ev):
    return [f.get("Symbol", "") for f in ev.get("Stack", []) if int(f["Address"], 16) >= 1 << 63]


def run(e, mixed):
    loop = kstack_common.spawn_loop(SECONDS)
    provs = [{"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110", "stacks": True},
             {"name": "sched", "events": ["sched_wakeup"], "stacks": True}]
    sid = kstack_common.create(e, provs, mixed, loop.pid)
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    wait_subscribers(e, sid, 1)
    sleeper = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", SLEEP % SECONDS])
    kstack_common.go(loop)
    recs = []
    deadline = time.time() + SECONDS + 30
    while loop.poll() is None and time.time() < deadline:
        recs += ws_events(ws, lambda rs: len(rs) > 2000, timeout=1)
    loop.wait()
    sleeper.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    recs += ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=60)
    evs = [r for r in recs if "System" in r]
    what = kstack_common.mode(mixed)
    wake = [r for r in evs if r["System"]["EventName"] == "sched_wakeup" and kernel_syms(r)]
    ent = [r for r in evs if r["System"]["EventName"] == "sys_enter" and kernel_syms(r)]
    check(len(wake) >= 100 and len(ent) >= 1000, "%s: wakeups and syscalls with kernel stacks (%d, %d)"
          % (what, len(wake), len(ent)))
    bad_w = [kernel_syms(r)[:4] for r in wake if not any(s.startswith(WAKE) for s in kernel_syms(r))]
    bad_e = [kernel_syms(r)[:4] for r in ent if "syscall_trace_enter" not in kernel_syms(r)]
    check(not bad_w, "%s: every wakeup's kernel stack is a wakeup's: %d of %d are not, e.g. %r"
          % (what, len(bad_w), len(wake), bad_w[:3]))
    check(not bad_e, "%s: every sys_enter's kernel stack is a syscall's: %d of %d are not, e.g. %r"
          % (what, len(bad_e), len(ent), bad_e[:3]))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


kstack_common.main(run)
