"""Linux stacks under load hold no junk address (docs/linux.md "Stacks", "Junk entries"): a session
with `stacks: true` on every provider (option mode: the instance's options/stacktrace and
userstacktrace) on every process's raw_syscalls:sys_enter while the machine is busy; every frame
of every event's Stack at a kernel-half address lies in kernel text (_stext.._etext of
/proc/kallsyms, or a module of /proc/modules).

Before, about 2 stacks in 1,000 of a loaded machine showed a junk address such as
0x8010000000000000 "after entry_SYSCALL_64_after_hwframe" (the kernel-half frames read as the
kernel stack). It never came from the kernel_stack record (its `size` entries were kernel text in
every one of ~110,000 records read raw on 6.18, no padding): it was the user_stack record's.
The kernel unwinds user stacks by frame pointers; code built without them leaves any value in
%rbp, and the walk takes whatever lies above it for a return address. The load here makes that
certain: a small program makes getppid with %rbp pointing at a frame {0, 0x8010000000000000}
(its every stack had the junk before: the test failed on every run), beside python getppid loops
and short-lived /bin/true processes. Checked as well: that program's events keep their kernel
frames and the one valid user frame (its own code), the session's stats count the dropped entries
(stack_entries_dropped.user, at least one per such event read) and so does /metrics
(etwd_stack_entries_dropped_total); no kernel entry was dropped. About 15 s."""
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from etwd_harness import Etwd, check, done, wait_subscribers, ws_events

VSYSCALL = 0xffffffffff600000  # a user page in the kernel half (x86_64), never a kernel frame
PROG = r"""
#include <stdlib.h>
#include <unistd.h>
/* getppid with %rbp at a frame {next fp 0, return address 0x8010000000000000}, as code built
 * without frame pointers may leave it: the kernel's frame-pointer walk of the user stack takes
 * that address */
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  volatile unsigned long frame[2] = {0, 0x8010000000000000UL};
  for (int i = 0; i < n; i++) {
    long r;
    __asm__ volatile("mov %%rbp, %%r12\n\tmov %1, %%rbp\n\tmov $110, %%eax\n\tsyscall\n\t"
                     "mov %%r12, %%rbp" : "=a"(r) : "r"(frame) : "rcx", "r11", "r12", "memory");
  }
  usleep(100000); /* alive while etwd reads its mappings (/proc/PID/maps) */
  return 0;
}
"""
WANT_EVENTS = 20000  # events read in all
WANT_JUNK = 200      # of them, the program's


def text_ranges():
    """Kernel text: [_stext, _etext) and each module's [base, base + size)."""
    st = et = None
    with open("/proc/kallsyms") as f:
        for ln in f:
            a, t, n = ln.split()[:3]
            if n == "_stext":
                st = int(a, 16)
            elif n == "_etext":
                et = int(a, 16)
    check(st and et and st < et, "_stext and _etext in /proc/kallsyms (root): %r %r" % (st, et))
    r = [(st or 0, et or 0)]
    if os.path.exists("/proc/modules"):
        with open("/proc/modules") as f:
            for ln in f:
                x = ln.split()
                r.append((int(x[5], 16), int(x[5], 16) + int(x[1])))
    return r


def build(d):
    src, exe = os.path.join(d, "junkfp.c"), os.path.join(d, "etwdjunkfp")
    with open(src, "w") as f:
        f.write(PROG)
    r = subprocess.run(["cc", "-O2", "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "build the program: %s" % r.stderr)
    return exe


def load(exe, stop, pids):
    """The program in a loop (its pids in @pids), two python getppid loops, /bin/true spawns."""
    def prog():
        while not stop.is_set():
            p = subprocess.Popen([exe, "300"])
            pids.add(p.pid)
            p.wait()
            time.sleep(0.005)

    def spawn():
        while not stop.is_set():
            subprocess.run(["/bin/true"])
    loops = [subprocess.Popen([sys.executable, "-c", "import os,time\nt=time.time()+60\n"
                               "while time.time()<t:\n  [os.getppid() for _ in range(500)]; os.stat('/')"])
             for _ in range(2)]
    th = [threading.Thread(target=prog), threading.Thread(target=spawn)]
    for t in th:
        t.daemon = True
        t.start()
    return loops, th


def main():
    if os.geteuid() != 0 or platform.machine() != "x86_64":
        check(False, "needs root (tracefs, kallsyms) and x86_64 (the program's syscall)")
        done()
    d = tempfile.mkdtemp(prefix="etwdktail-")
    exe = build(d)
    text = text_ranges()
    in_text = lambda a: any(s <= a < e for s, e in text)
    stop, pids = threading.Event(), set()
    with Etwd() as e:
        st, h, j = e.json("POST", "/api/v1/sessions", expect=201, body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"], "stacks": True}]})
        sid = j["id"]
        with open("/sys/kernel/tracing/instances/%s/options/stacktrace" % j["os_name"]) as f:
            check(f.read().strip() == "1", "option mode: the instance's options/stacktrace is on")
        ws = e.ws("/api/v1/sessions/%d/events" % sid)
        wait_subscribers(e, sid, 1)
        loops, th = load(exe, stop, pids)
        t0 = time.time()
        mine = lambda r: (r.get("Stack") and r["System"]["Execution"]["ProcessID"] in pids
                          and r["EventData"].get("id") == 110)  # (not its loader's syscalls)
        seen = [0, 0]  # records looked at, the program's events among them

        def enough(rs):
            for r in rs[seen[0]:]:
                seen[1] += 1 if "System" in r and mine(r) else 0
            seen[0] = len(rs)
            return len(rs) >= WANT_EVENTS and seen[1] >= WANT_JUNK
        evs = [r for r in ws_events(ws, enough, timeout=60) if "System" in r]
        took = time.time() - t0
        stop.set()
        for p in loops:
            p.kill()
            p.wait()
        for t in th:
            t.join(30)
        e.json("POST", "/api/v1/sessions/%d/stop" % sid, expect=200)
        st, h, s = e.json("GET", "/api/v1/sessions/%d" % sid, token="reader")
        dropped = (s.get("stats") or {}).get("stack_entries_dropped", {})
        st, h, body = e.request("GET", "/metrics", token="reader")
        m = dict(re.findall(r'^etwd_stack_entries_dropped_total\{stack="(\w+)"\} (\d+)$', body.decode(), re.M))
        ws.close()

    stacks = [r for r in evs if r.get("Stack")]
    bad = []
    for r in stacks:
        out = [f["Address"] for f in r["Stack"] if int(f["Address"], 16) >= 1 << 63
               and not in_text(int(f["Address"], 16)) and int(f["Address"], 16) & ~0xfff != VSYSCALL]
        if out:
            bad.append((r["System"]["Execution"]["ProcessID"], out,
                        [f.get("Symbol", f["Address"]) for f in r["Stack"]]))
    print("%d events in %.1fs, %d with stacks, %d of the program; dropped %r, /metrics %r"
          % (len(evs), took, len(stacks), sum(1 for r in evs if mine(r)), dropped, m))
    check(len(stacks) >= WANT_EVENTS * 0.9, "the events carry stacks: %d of %d" % (len(stacks), len(evs)))
    check(not bad, "every kernel-half frame is kernel text: %d of %d stacks are not, e.g. %r"
          % (len(bad), len(stacks), bad[:3]))
    junk = [r for r in evs if mine(r)]
    check(len(junk) >= WANT_JUNK, "the program's events were read: %d" % len(junk))
    def shape_ok(stack):
        """its kernel frames, then one user frame: its own code (a raw address if the process
        was gone before the reader read its mappings)"""
        user = [f for f in stack if int(f["Address"], 16) < 1 << 63]
        return ("do_syscall_64" in [f.get("Symbol") for f in stack] and len(user) == 1
                and int(user[0]["Address"], 16) < 1 << 56 and user[0].get("Module", "etwdjunkfp") == "etwdjunkfp")
    shape = [[f.get("Symbol", f["Address"]) for f in r["Stack"]] for r in junk if not shape_ok(r["Stack"])]
    check(not shape, "the program's stacks: the kernel frames, then its own frame only: %d not, e.g. %r"
          % (len(shape), shape[:2]))
    check(dropped.get("user", 0) >= len(junk) and dropped.get("kernel") == 0,
          "session stats count the dropped entries (user >= %d, kernel 0): %r" % (len(junk), dropped))
    check(int(m.get("user", 0)) >= len(junk) and m.get("kernel") == "0",
          "/metrics counts them: %r" % m)
    shutil.rmtree(d, ignore_errors=True)
    done()


main()
