"""Every event that asked for stacks gets them when its writer is preempted between the event's
commit and its stack records (docs/linux.md "Stacks"): syscall tracepoints are preemptible, so the
CPU's reader (pinned there, nice -10) can wake in that gap, read the page with the event and no
stack yet; before, it published the event at once and the stacks that came next were orphaned
(~7 events a second here). Now the reader keeps such an event for one more poll. A process loops
on getppid on CPU 0 (syscalls:sys_enter_getppid and sys_exit_getppid with stacks; a provider
without stacks makes it trigger mode) for 3 s: /metrics counts two stack records attached per
event of the session, none orphaned or dropped (the reader attaches stacks whether or not anyone
streams, so nothing is streamed: ~100k events)."""
import re
import time

import kstack_common
from etwd_harness import check

SECONDS = 3.0


def records(e):
    """etwd_stack_records_total by result."""
    st, h, body = e.request("GET", "/metrics", token="reader")
    return {k: int(v) for k, v in re.findall(r'^etwd_stack_records_total\{result="(\w+)"\} (\d+)$', body.decode(), re.M)}


def stat(e, sid):
    st, h, j = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")
    return j.get("stats", {})


def run(e, mixed):
    p = kstack_common.spawn_loop(SECONDS)
    provs = [{"name": "syscalls", "events": ["sys_enter_getppid", "sys_exit_getppid"], "stacks": True}]
    sid = kstack_common.create(e, provs, mixed, p.pid)
    m0 = records(e)
    kstack_common.go(p)
    p.wait(timeout=SECONDS + 60)
    time.sleep(0.1)
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    m1 = records(e)
    n = stat(e, sid).get("events", 0)
    what = kstack_common.mode(mixed)
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in ("attached", "orphaned", "dropped")}
    check(n >= 10000, "%s: getppid events (%d)" % (what, n))
    check(d["orphaned"] == 0 and d["dropped"] == 0 and d["attached"] == 2 * n,
          "%s: every event got its kernel and user stack: %d events, stack records %r" % (what, n, d))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


kstack_common.main(run)
