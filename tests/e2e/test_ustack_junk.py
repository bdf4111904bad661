"""Linux user stacks of code built WITHOUT frame pointers (docs/linux.md "Stacks"): the kernel
walks a user stack by %rbp, and code built with -fomit-frame-pointer uses %rbp as an ordinary
register. A real program built here with -O2 -fomit-frame-pointer keeps, in %rbp at its getppid
syscall, a pointer to one of its stack objects (`struct node {struct node *up; void *payload;}`
laid out as a frame record): the walk reads the payload — a heap block, a stack object, a .bss
or a .data object, one kind per call — for a return address, then follows `up` to a node whose
payload is code again (main). Every such address lies in user space, so only the process's
executable mappings tell it from code. The raw kernel records (checked here too, through a
"mode":"both" recording and trace-cmd report) hold the junk entry; the events delivered must not:
every user frame lies inside an r-xp/--xp mapping of /proc/PID/maps (read while the program
waits), the walk is cut at the junk (the code entry after it goes too: a walk gone astray does
not come back) and the session's stack_entries_dropped.user and /metrics
etwd_stack_entries_dropped_total{stack="user"} count at least 2 per event. x86-64 (the syscall is
made with inline asm). About 5 s."""
import os
import platform
import re
import subprocess
import tempfile

from etwd_harness import Etwd, check, done, ws_events, wait_subscribers, trace_report

PROG = r"""
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void);
struct node { struct node *up; void *payload; }; /* the shape of an x86-64 frame record */
static char g_bss[256];
static char g_data[256] = {1};
/* getppid with %rbp holding @n (what -fomit-frame-pointer code may leave there: any pointer) */
static long __attribute__((noinline)) ppid_with(struct node *n) {
  long r;
  __asm__ volatile("mov %%rbp, %%r12\n\tmov %2, %%rbp\n\tsyscall\n\tmov %%r12, %%rbp"
                   : "=a"(r) : "0"((long)SYS_getppid), "r"(n) : "rcx", "r11", "r12", "memory");
  return r;
}
static long __attribute__((noinline)) walk(void *junk, int depth) {
  struct node top = {0, (void *)(uintptr_t)&main}, mid = {&top, junk};
  if (depth > 0) return walk(junk, depth - 1) + 1; /* a deeper call chain, then the call */
  return ppid_with(&mid);
}
int main(void) {
  char b[8], local[64] = {2};
  char *heap = malloc(4096);
  if (!heap || write(1, "r", 1) != 1 || read(0, b, sizeof b) <= 0) return 1;
  void *junk[4] = {heap + 64, local, g_bss + 8, g_data + 8};
  long r = 0;
  for (int i = 0; i < CALLS; i++) r += walk(junk[i % 4], i % 3);
  if (write(1, "d", 1) != 1) return 1;
  (void)!read(0, b, sizeof b); /* alive until the test has read its maps */
  free(heap);
  return (int)(r & 0) + local[0] - 2;
}
"""
CALLS = 8


def build(d):
    src = os.path.join(d, "junk.c")
    exe = os.path.join(d, "etwd_ujunk_prog")
    with open(src, "w") as f:
        f.write(PROG.replace("CALLS", str(CALLS)))
    r = subprocess.run(["cc", "-O2", "-fomit-frame-pointer", "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "test program builds: %s" % r.stderr)
    return exe


def maps(pid):
    """[(start, end, executable)] of /proc/PID/maps"""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            rng, perm = line.split()[:2]
            s, e = (int(x, 16) for x in rng.split("-"))
            out.append((s, e, perm[2] == "x"))
    return out


def where(a, mp):
    for s, e, x in mp:
        if s <= a < e:
            return "code" if x else "data"
    return "none"


def dropped(e, sid):
    st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")
    u = (s.get("stats") or {}).get("stack_entries_dropped", {}).get("user", 0)
    st, h, body = e.request("GET", "/metrics", token="reader")
    m = re.search(r'^etwd_stack_entries_dropped_total\{stack="user"\} (\d+)$', body.decode(), re.M)
    return u, int(m.group(1)) if m else -1


def run(e, exe):
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    check(p.stdout.read(1) == b"r", "test program started")
    st, h, j = e.json("POST", "/api/v1/sessions", body={"providers": [
        {"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110", "stacks": True}],
        "pids": [p.pid], "mode": "both"})
    check(st == 201, "session created: %d %r" % (st, j))
    sid = j["id"]
    ws = e.ws("/api/v1/sessions/%d/events" % sid)
    wait_subscribers(e, sid, 1)
    m0 = dropped(e, sid)[1]
    p.stdin.write(b"go\n")
    p.stdin.flush()
    check(p.stdout.read(1) == b"d", "test program made its syscalls")
    mp = maps(p.pid)
    evs = [r for r in ws_events(ws, lambda rs: len([r for r in rs if "System" in r]) >= CALLS, timeout=60)
           if "System" in r]
    p.stdin.close()
    p.wait()
    e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
    u, m1 = dropped(e, sid)
    st, h, data = e.request("GET", "/api/v1/sessions/%d/file" % sid, token="reader")
    check(st == 200, "recording downloaded: %d" % st)
    ws.close()
    e.request("DELETE", "/api/v1/sessions/%d" % sid)
    return evs, mp, u, m1 - m0, data


def raw_user_stacks(data):
    """the user stacks of the recording as trace-cmd report prints them (`user_stack: => 0x…`, then
    one `=> 0x…` line per entry): lists of addresses, the 0 entries left out"""
    out, cur = [], None
    for line in trace_report(data):
        if "user_stack:" in line:
            cur = []
            out.append(cur)
        elif cur is None or not line.strip().startswith("=> "):
            cur = None
            continue
        m = re.search(r"=> 0x([0-9a-f]+)\s*$", line)
        if m and int(m.group(1), 16):
            cur.append(int(m.group(1), 16))
    return out


def main():
    if os.geteuid() != 0 or platform.machine() != "x86_64":
        check(False, "needs root (tracefs) and x86_64 (the test program's inline syscall)")
        done()
    with tempfile.TemporaryDirectory(prefix="etwdujunk-") as d:
        exe = build(d)
        with Etwd() as e:
            evs, mp, u, m, data = run(e, exe)
    check(len(evs) == CALLS, "%d sys_enter events (%d)" % (CALLS, len(evs)))
    raw = raw_user_stacks(data)
    kinds = [[where(a, mp) for a in s] for s in raw]
    check(len(raw) == CALLS and all("data" in k for k in kinds),
          "the kernel's records hold an address inside a non-executable mapping of the process in "
          "every user stack (the walk read a heap/stack/data pointer): %r" % kinds)
    for r in evs:
        user = [int(f["Address"], 16) for f in r.get("Stack", []) if int(f["Address"], 16) < 1 << 63]
        bad = [hex(a) for a in user if where(a, mp) != "code"]
        check(user and not bad, "every user frame of the event lies in an executable mapping: %s of %s"
              % (bad, [hex(a) for a in user]))
        mains = [f for f in r.get("Stack", []) if f.get("Symbol") == "main"]
        check(not mains, "the code address after the junk is dropped with it: %r" % mains)
    check(u >= 2 * CALLS, "stats stack_entries_dropped.user counts the junk and what follows: %d" % u)
    check(m >= 2 * CALLS, "/metrics etwd_stack_entries_dropped_total{stack=\"user\"} went up by %d" % m)
    done()


main()
