"""Linux kernel stacks start where the kernel code was (docs/linux.md "Stacks", "Tracing frames"):
the leading frames of the tracing machinery (trace_event_raw_event_*, ftrace_syscall_*,
__traceiter_* …) are left out; `"stacks": "raw"` keeps the stack exactly as the kernel recorded
it. Two sessions trace the same process at the same time: T (stacks: true; every provider has
stacks, so the stacktrace option records them) and R (stacks: "raw", with a provider without
stacks, so per-event triggers do). The process makes getppid syscalls, then execs a copy of
/bin/true. Checked on every pair of the same event: T's kernel frames are R's with R's leading
tracing frames removed, nothing else (R has at least one; T's first is not one); the user frames
are the same; the exec's stack keeps bprm_execve and do_execveat_common; the syscalls keep
do_syscall_64. The stacks folded for a flame graph (the page's rule) have no tracing leaf. The
spec echoes "raw"; another string is a 400 naming /providers/0/stacks."""
import os
import platform
import subprocess
import sys

from etwd_harness import (Etwd, check, done, drop_prog, folded_name, unique_prog, wait_subscribers,
                          ws_events)

# the documented rule (docs/linux.md "Tracing frames"), repeated here to judge the frames
TRACING = ("trace_event_raw_event_", "perf_trace_", "perf_syscall_", "__traceiter_", "__probestub_",
           "__do_trace_", "__bpf_trace_", "bpf_trace_run", "trace_call_bpf", "ftrace_", "__ftrace_",
           "trace_buffer_unlock_commit", "trace_event_buffer_commit", "event_triggers_",
           "stacktrace_trigger", "stacktrace_count_trigger", "stack_trace_save", "arch_stack_walk")
CALLS = 5


def tracing(fr):
    return any(fr.get("Symbol", "").startswith(p) for p in TRACING)


def kernel(stack):
    return [f for f in stack if int(f["Address"], 16) >= 1 << 63]


def user(stack):
    return [f for f in stack if int(f["Address"], 16) < 1 << 63]


def names(frames):
    return [f.get("Symbol", f["Address"]) for f in frames]


def providers(stacks):
    return [{"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110", "stacks": stacks},
            {"name": "syscalls", "events": ["sys_enter_getppid", "sys_exit_getppid"], "stacks": stacks},
            {"name": "sched", "events": ["sched_process_exec"], "stacks": stacks}]


def create(e, spec):
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
    check(st == 201, "create %r: %d %r" % (spec, st, j))
    return j["id"]


def record(e, prog):
    """Both sessions on one process: its getppid calls, then its exec of @prog. The events of
    each session, by session."""
    code = ("import os, sys\nsys.stdin.readline()\nfor _ in range(%d): os.getppid()\n"
            "os.execv(%r, [%r])\n" % (CALLS, prog, prog))
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    sids = [create(e, {"providers": providers(True), "pids": [p.pid]}),
            create(e, {"providers": providers("raw") + [{"name": "signal", "events": ["signal_deliver"]}],
                       "pids": [p.pid]})]
    wss = [e.ws("/api/v1/sessions/%d/events" % sid) for sid in sids]
    for sid in sids:
        wait_subscribers(e, sid, 1)
    p.stdin.write(b"go\n")
    p.stdin.close()
    check(p.wait(timeout=60) == 0, "the traced process ran")
    out = []
    for sid, ws in zip(sids, wss):
        evs = lambda rs: [r for r in rs if "System" in r]
        got = ws_events(ws, lambda rs: len([r for r in evs(rs) if r["System"]["EventName"] == "sched_process_exec"]),
                        timeout=60)
        e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
        got += ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=60)
        out.append(evs(got))
    return sids, out


def pairs(t, r):
    """The events of T and R paired by name and order (the same process, the same calls)."""
    by = lambda evs: {n: [x for x in evs if x["System"]["EventName"] == n]
                      for n in ("sys_enter", "sys_enter_getppid", "sys_exit_getppid", "sched_process_exec")}
    bt, br = by(t), by(r)
    for n in bt:
        want = 1 if n == "sched_process_exec" else CALLS
        check(len(bt[n]) == want and len(br[n]) == want,
              "%s: %d events in each session (%d, %d)" % (n, want, len(bt[n]), len(br[n])))
    return [(n, a, b) for n in bt for a, b in zip(bt[n], br[n])]


def check_pair(n, a, b):
    """False when one of them has no kernel stack (then nothing to compare)."""
    sa, sb = a.get("Stack"), b.get("Stack")
    if not (sa and sb and kernel(sa) and kernel(sb)):
        return False
    ka, kb = kernel(sa), kernel(sb)
    k = 0
    while k < len(kb) and tracing(kb[k]):
        k += 1
    check(k >= 1, "%s raw: starts with the tracing frames, as the kernel recorded it: %r" % (n, names(kb)))
    check(not tracing(ka[0]), "%s trimmed: the first kernel frame is not a tracing frame: %r" % (n, names(ka)))
    check(ka == kb[k:], "%s trimmed = raw without its %d leading tracing frames, nothing else:\n  %r\n  %r"
          % (n, k, names(ka), names(kb)))
    check(user(sa) == user(sb), "%s: the user frames are the same" % n)
    s = names(ka)
    check("do_syscall_64" in s, "%s: do_syscall_64 survives: %r" % (n, s))
    if n == "sched_process_exec":
        check("bprm_execve" in s and any(x.startswith("do_execveat_common") for x in s),
              "exec: bprm_execve and do_execveat_common survive: %r" % s)
    return True


def folded(evs):
    """The stacks as the page folds them for a flame graph: root first, leaf last."""
    lines = []
    for x in evs:
        if x.get("Stack"):
            lines.append(";".join(folded_name(f) for f in reversed(x["Stack"])))
    return lines


def test_spec(e, sids):
    st, h, j = e.json("GET", "/api/v1/sessions/%d" % sids[1], token="reader")
    spec = j.get("spec", j)
    provs = spec.get("providers", [])
    check([p.get("stacks") for p in provs] == ["raw", "raw", "raw", False],
          "the raw session's spec echoes \"stacks\":\"raw\": %r" % [p.get("stacks") for p in provs])
    st, h, j = e.json("GET", "/api/v1/sessions/%d" % sids[0], token="reader")
    spec = j.get("spec", j)
    check([p.get("stacks") for p in spec.get("providers", [])] == [True] * 3, "the other's echoes true")
    st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "sched", "stacks": "full"}]})
    check(st == 400 and j.get("field") == "/providers/0/stacks",
          "\"stacks\":\"full\": 400 naming the field: %d %r" % (st, j))


def main():
    if os.geteuid() != 0 or platform.machine() != "x86_64":
        check(False, "needs root (tracefs) and x86_64 (getppid is syscall 110)")
        done()
    prog = unique_prog("kstk")
    try:
        with Etwd() as e:
            sids, (t, r) = record(e, prog)
            # (a syscall event whose writer is preempted between its commit and its stack records
            # and does not run again within the reader's next poll, on a loaded machine, can lose
            # its stacks: test_kstack_preempt.py; at most one such pair passes, never the exec's)
            both = [n for n, a, b in pairs(t, r) if check_pair(n, a, b)]
            check(len(both) >= 3 * CALLS and "sched_process_exec" in both,
                  "the pairs that both carry a kernel stack, the exec's among them: %d of %d"
                  % (len(both), 3 * CALLS + 1))
            fl = folded(t)
            check(len(fl) >= 3 * CALLS, "the events fold (%d lines)" % len(fl))
            leaves = [ln.rsplit(";", 1)[-1] for ln in fl]
            check(not [x for x in leaves if any(x.startswith("kernel!" + p) for p in TRACING)],
                  "no folded stack ends in a tracing frame: %r" % sorted(set(leaves)))
            test_spec(e, sids)
    finally:
        drop_prog(prog)
    done()


main()
