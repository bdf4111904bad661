"""Linux live stacks through the real server (real kernel, real HTTPS, real WebSocket): a small C
program built here with frame pointers calls main → outer → inner, and inner makes the getppid
syscall through a helper and libc's syscall(2). Its raw_syscalls:sys_enter events (stacks: true)
carry "Stack" with the kernel's syscall entry and then the user stack: libc's syscall (the
instruction pointer; it keeps no frame of its own, so the helper's frame, holding the return
address into inner, is the first one walked and the helper itself is not listed), then inner,
outer, main in that order with the test program as their module; its
syscalls:sys_enter_getppid events (stacks: false) carry no Stack; /metrics counts the symbol
caches."""
import json
import os
import platform
import re
import subprocess
import tempfile
import time

from etwd_harness import Etwd, check, done, ws_events, wait_subscribers

PROG = r"""
#include <sys/syscall.h>
#include <unistd.h>
/* libc's syscall(2) keeps no frame: the kernel walks from this helper's, into inner */
static long __attribute__((noinline)) call_getppid(void) { return syscall(SYS_getppid); }
static long __attribute__((noinline)) inner(int n) {
  long r = 0;
  for (int i = 0; i < n; i++) r += call_getppid();
  return r;
}
static long __attribute__((noinline)) outer(int n) { return inner(n) + 1; }
int main(int argc, char **argv) {
  char b[8];
  if (argc > 1) { /* stage 2, after the exec: the same calls from the new image */
    long r = outer(CALLS);
    if (write(1, "e", 1) != 1) return 1;
    (void)!read(0, b, sizeof b);
    return (int)(r & 0);
  }
  if (write(1, "r", 1) != 1 || read(0, b, sizeof b) <= 0) return 1;
  long r = outer(CALLS);
  if (write(1, "d", 1) != 1) return 1;
  /* stays alive until the test has read its events; "x" = exec itself into stage 2 */
  if (read(0, b, sizeof b) > 0 && b[0] == 'x') execl(argv[0], argv[0], "2", (char *)0);
  return (int)(r & 0);
}
"""
CALLS = 5


def build(d):
    src = os.path.join(d, "stk.c")
    exe = os.path.join(d, "etwd_stk_prog")
    with open(src, "w") as f:
        f.write(PROG.replace("CALLS", str(CALLS)))
    r = subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "test program builds: %s" % r.stderr)
    return exe


def start(exe):
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    check(p.stdout.read(1) == b"r", "test program started")
    return p


def create(e, spec):
    st, h, j = e.json("POST", "/api/v1/sessions", body=spec)
    check(st == 201, "create %r: %d %r" % (spec, st, j))
    return j["id"]


def syms(stack):
    return [f.get("Symbol") for f in stack]


def metrics(e):
    st, h, body = e.request("GET", "/metrics", token="reader")
    return {k: int(v) for k, v in re.findall(r'^(etwd_(?:symcache|stack_records)_\w+(?:\{[^}]*\})?) (\d+)$',
                                             body.decode(), re.M)}


OURS = ["inner", "outer", "main"]
WITHIN = 5  # libc's syscall and perhaps the helper come first; the kernel keeps at most 8


def ours_in_order(stack, exe):
    """The test program's own functions, innermost first, one after the other, each with the
    test program as its module, among the first WITHIN user frames (user addresses: below the
    kernel's half). Not at fixed places: what precedes inner (libc's syscall(2), perhaps the
    helper) is the C library's business."""
    user = [f for f in stack if int(f.get("Address", "0xffffffffffffffff"), 16) < 1 << 63][:WITHIN]
    got = [(f.get("Symbol"), f.get("Module")) for f in user]
    want = [(n, os.path.basename(exe)) for n in OURS]
    return any(got[k:k + len(want)] == want for k in range(len(got)))


def test_exec(e, exe):
    """An exec makes the symboliser read the process's mappings again (sched_process_exec in the
    session): the new image's stacks resolve, through a second read of /proc/PID/maps. The
    program is pinned to one CPU, so its exec and its later events reach the same reader in
    order."""
    p = subprocess.Popen(["taskset", "-c", "0", exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    check(p.stdout.read(1) == b"r", "test program started")
    sid = create(e, {"providers": [
        {"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110", "stacks": True},
        {"name": "sched", "events": ["sched_process_exec"]}], "pids": [p.pid]})
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    wait_subscribers(e, sid, 1)
    m0 = metrics(e)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    check(p.stdout.read(1) == b"d", "stage 1 made its syscalls")
    ev = lambda rs: [r for r in rs if "System" in r]
    recs = ws_events(ws, lambda rs: len(ev(rs)) >= CALLS, timeout=60)
    m1 = metrics(e)
    p.stdin.write(b"x\n")
    p.stdin.flush()
    check(p.stdout.read(1) == b"e", "stage 2 (after the exec) made its syscalls")
    recs += ws_events(ws, lambda rs: len(ev(rs)) >= CALLS + 1, timeout=60)
    p.stdin.close()
    p.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    recs += ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=60)
    m2 = metrics(e)
    evs = ev(recs)
    raw = [r for r in evs if r["System"].get("EventName") == "sys_enter"]
    execs = [r for r in evs if r["System"].get("EventName") == "sched_process_exec"]
    check(len(raw) == 2 * CALLS and len(execs) == 1, "%d sys_enter before and after 1 exec (%d, %d)" %
          (2 * CALLS, len(raw), len(execs)))
    check(raw and all(ours_in_order(r.get("Stack", []), exe) for r in raw),
          "both images' stacks resolve: %r" % [syms(r.get("Stack", [])) for r in raw])
    pm = 'etwd_symcache_misses_total{cache="processes"}'
    check(m1[pm] - m0[pm] == 1 and m2[pm] - m1[pm] == 1,
          "the mappings are read once per image: %d, %d" % (m1[pm] - m0[pm], m2[pm] - m1[pm]))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def test_stacks(e, exe):
    p = start(exe)
    sid = create(e, {"providers": [
        {"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == %d" % 110, "stacks": True},
        {"name": "syscalls", "events": ["sys_enter_getppid"]}], "pids": [p.pid]})
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    wait_subscribers(e, sid, 1)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    check(p.stdout.read(1) == b"d", "test program made its syscalls")
    ev = lambda rs: [r for r in rs if "System" in r]
    recs = ws_events(ws, lambda rs: len(ev(rs)) >= 2 * CALLS, timeout=60)
    p.stdin.close()
    p.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    recs += ws_events(ws, lambda rs: any(r.get("_closed") for r in rs), timeout=60)
    evs = ev(recs)
    raw = [r for r in evs if r["System"]["EventName"] == "sys_enter"]
    gp = [r for r in evs if r["System"]["EventName"] == "sys_enter_getppid"]
    check(len(raw) == CALLS and len(gp) == CALLS, "%d sys_enter and %d sys_enter_getppid events (%d, %d)" %
          (CALLS, CALLS, len(raw), len(gp)))
    check(not [r for r in recs if r.get("System", {}).get("Provider", {}).get("Name") in ("ftrace", "tracefs")],
          "no stack record is delivered as an event of its own")
    check(all("Stack" not in r for r in gp), "stacks:false events carry no Stack")
    for r in raw:
        st = r.get("Stack")
        check(isinstance(st, list) and st, "sys_enter carries a Stack: %r" % r)
        if not st:
            continue
        check(all(re.fullmatch(r"0x[0-9a-f]+", f["Address"]) for f in st), "every frame has its Address")
        s = syms(st)
        kern = [f for f in st if f.get("Module") == "kernel"]
        user = [f for f in st if f.get("Module") == os.path.basename(exe)]
        check(any(x in ("entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe", "do_syscall_64") for x in s),
              "the kernel stack has the syscall entry: %r" % s)
        check(ours_in_order(st, exe), "the user stack has inner, outer, main in that order, module %s: %r"
              % (os.path.basename(exe), [(f.get("Symbol"), f.get("Module")) for f in st]))
        check(kern and st.index(kern[0]) < st.index(user[0]) if kern and user else False,
              "kernel frames first, then user frames (innermost first)")
        check(all(isinstance(f.get("Offset"), int) for f in kern + user), "module frames have an Offset")
        check(st[-1].get("Module", "").startswith("libc"), "the outermost frame is in libc: %r" % st[-1])
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    st, h, body = e.request("GET", "/metrics", token="reader")
    text = body.decode()
    m = dict(re.findall(r'^(etwd_(?:symcache|stack_records)_\w+(?:\{[^}]*\})?) (\d+)$', text, re.M))
    check(int(m.get('etwd_symcache_misses_total{cache="frames"}', 0)) > 0, "/metrics: frames resolved: %r" % m)
    check(int(m.get('etwd_symcache_hits_total{cache="frames"}', 0)) > 0, "/metrics: frames reused: %r" % m)
    check(int(m.get('etwd_symcache_misses_total{cache="processes"}', 0)) >= 1, "/metrics: process maps read")
    check('etwd_symcache_evictions_total{cache="files"}' in m, "/metrics: evictions counted")
    # exactly the traced events' stacks reached the reader: a kernel and a user stack for each
    # sys_enter, a user stack (dropped) after each sys_enter_getppid — none for other processes'
    # syscalls (an unconditional stacktrace trigger would record one at every hit) or etwd's own
    check(int(m.get('etwd_stack_records_total{result="attached"}', -1)) == 2 * CALLS, "/metrics: stacks attached: %r" % m)
    check(int(m.get('etwd_stack_records_total{result="dropped"}', -1)) == CALLS,
          "/metrics: only the user stacks of the stacks:false events dropped: %r" % m)
    check(int(m.get('etwd_stack_records_total{result="orphaned"}', -1)) == 0, "/metrics: no orphaned stacks")


def test_file(e, exe):
    """A recording (mode both) keeps the stack records, with their formats: trace-cmd report shows
    a kernel and a user stack after each traced event."""
    p = start(exe)
    sid = create(e, {"providers": [
        {"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110", "stacks": True}],
        "pids": [p.pid], "mode": "both"})
    p.stdin.write(b"go\n")
    p.stdin.flush()
    check(p.stdout.read(1) == b"d", "test program made its syscalls")
    time.sleep(0.3)
    p.stdin.close()
    p.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader")
    check(st == 200, "recording downloaded: %d" % st)
    with tempfile.TemporaryDirectory(prefix="etwdstkf-") as d:
        path = os.path.join(d, "trace.dat")
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run(["trace-cmd", "report", "-i", path], capture_output=True, text=True, timeout=60)
    out = r.stdout
    check(r.returncode == 0, "trace-cmd report opens the recording: %s" % r.stderr[-300:])
    check(out.count("sys_enter:") == CALLS, "the %d events (%d)" % (CALLS, out.count("sys_enter:")))
    check(out.count("kernel_stack:") == CALLS and out.count("user_stack:") == CALLS,
          "a kernel and a user stack each: %d, %d" % (out.count("kernel_stack:"), out.count("user_stack:")))
    e.request("DELETE", "/api/v1/sessions/%d" % sid)


def main():
    if os.geteuid() != 0 or platform.machine() != "x86_64":
        check(False, "stack tests need root (tracefs) and x86_64 (getppid is syscall 110, the kernel's "
              "entry is entry_SYSCALL_64)")
        done()
    with tempfile.TemporaryDirectory(prefix="etwdstk-") as d:
        exe = build(d)
        with Etwd() as e:
            test_stacks(e, exe)
            test_exec(e, exe)
            test_file(e, exe)
    done()


main()
