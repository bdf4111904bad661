"""Linux live stacks under load, through the real server (real kernel, real HTTPS, WebSocket and
ndjson): the server must neither die nor stop answering.

- sessions with stacks: true on EVERY process (raw_syscalls, sched), created and deleted while
  clients read them (WebSocket and ndjson, some reading, some stalled, some closing abruptly);
- meanwhile short-lived processes make syscalls from a shared library that another thread keeps
  rewriting IN PLACE (truncated to one page, then written back whole, same inode): the
  symboliser reads that library for their user stacks, and a file read through a memory mapping
  raises SIGBUS when it shrinks underneath (etwd died of it before linux_sym.c read files with
  read(2); unit.test_linux_symtrunc is the deterministic twin);
- first, a GET /api/v1/sessions made while a slow session (`syscalls`) is being created is
  answered at once, without that session (it waited for the creation before);
- every GET /api/v1/sessions is answered within 30 s (ANSWER_S), the server is alive at the end, stacks
  were attached, and it exits cleanly on SIGTERM without sanitizer reports (the harness).

About 25 s."""
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import http.client
import json
import re

import websocket

from etwd_harness import Etwd, check, done

DURATION = 18
# a request not answered within this is a hang (generous: a session's create and delete write
# the kernel's trigger files under its lock, and the kernel serialises every instance's
# changes machine-wide, so they wait for each other's tracefs work)
ANSWER_S = 30

LIB = r"""
#include <sys/syscall.h>
#include <unistd.h>
FILLER
/* getppid through libc's syscall(2): the user stack is libc's syscall, then lib_spin (this
 * helper's frame holds the return address into it), so the symboliser reads this library */
static long __attribute__((noinline)) lib_getppid(void) { return syscall(SYS_getppid); }
long __attribute__((noinline)) lib_spin(int n) {
  long r = 0;
  for (int i = 0; i < n; i++) r += lib_getppid();
  return r;
}
"""
PROG = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) return 0; /* caught mid-rewrite: nothing to do */
  long (*spin)(int) = (long (*)(int))dlsym(h, "lib_spin");
  if (!spin) return 0;
  long r = spin(50);
  usleep(100000); /* alive while etwd resolves its stacks (/proc/PID/maps) */
  return (int)((r + spin(50)) & 0);
}
"""


def build(d):
    """the program, and the library with a build-id of 20 bytes 0x01 (the rewriter replaces it
    at each rewrite, so the symboliser's file cache misses and reads the symbol table again)"""
    with open(os.path.join(d, "lib.c"), "w") as f:  # a few thousand functions: a longer read
        f.write(LIB.replace("FILLER", "".join("int f%d(int x) { return x + %d; }\n" % (i, i) for i in range(3000))))
    with open(os.path.join(d, "prog.c"), "w") as f:
        f.write(PROG)
    lib, prog = os.path.join(d, "libspin.so"), os.path.join(d, "spinprog")
    for cmd in (["cc", "-shared", "-fPIC", "-O0", "-fno-omit-frame-pointer", "-Wl,--build-id=0x" + "01" * 20,
                 "-o", lib, os.path.join(d, "lib.c")],
                ["cc", "-O0", "-fno-omit-frame-pointer", "-o", prog, os.path.join(d, "prog.c"), "-ldl"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode == 0, "build %s: %s" % (cmd[-1], r.stderr))
    return lib, prog


def list_while_creating(e):
    """GET /api/v1/sessions answers at once while another session is still being created (its
    backend writing the kernel's files for every event of `syscalls`: seconds), leaving it out;
    it waited for that creation to end before."""
    res = {}

    def create():
        t0 = time.time()
        res["create"] = e.json("POST", "/api/v1/sessions", body={"providers": [{"name": "syscalls"}]}, timeout=120)
        res["create_s"] = time.time() - t0
    t = threading.Thread(target=create)
    t.start()
    time.sleep(0.3)
    t0 = time.time()
    st, h, body = e.request("GET", "/api/v1/sessions", token="reader", timeout=120)
    took, busy = time.time() - t0, t.is_alive()
    t.join()
    sid = res["create"][2]["id"]
    check(st == 200 and took < 2.0, "GET /api/v1/sessions during a creation: %d in %.1fs (the creation took %.1fs)"
          % (st, took, res["create_s"]))
    if busy:
        check(sid not in [x["id"] for x in json.loads(body)], "the session being created is not listed yet")
    st, h, body = e.request("GET", "/api/v1/sessions", token="reader")
    check(sid in [x["id"] for x in json.loads(body)], "the session is listed once created")
    e.request("DELETE", "/api/v1/sessions/%d" % sid, timeout=120)
    print("list during a creation: %.2fs (creation %.1fs, %s)" % (took, res["create_s"], "overlapped" if busy else "done first"))


def main():
    d = tempfile.mkdtemp(prefix="etwdstkload-")
    lib, prog = build(d)
    with open(lib, "rb") as f:
        img = bytearray(f.read())
    bid = img.find(b"\x01" * 20)
    check(bid > 0, "the library's build-id found")
    copy = os.path.join(d, "libspin-live.so")  # the one rewritten in place
    shutil.copy(lib, copy)
    stop = threading.Event()
    sids = []
    lock = threading.Lock()
    stats = {"created": 0, "deleted": 0, "ws": 0, "nd": 0, "runs": 0, "rewrites": 0, "slow": []}

    def pick():
        with lock:
            return random.choice(sids) if sids else None

    def rewriter():
        fd = os.open(copy, os.O_WRONLY)
        while not stop.is_set():
            os.ftruncate(fd, 4096)
            time.sleep(0.001)  # short for a while, as while a copy is being written
            img[bid:bid + 20] = os.urandom(20)  # a new build-id: a new file to the symboliser
            os.pwrite(fd, img, 0)
            stats["rewrites"] += 1
            time.sleep(0.001)
        os.close(fd)

    def runner():
        while not stop.is_set():
            subprocess.run([prog, copy], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            stats["runs"] += 1

    def churn(e, spec, hold):
        while not stop.is_set():
            st, h, j = e.json("POST", "/api/v1/sessions", body=spec, timeout=60)
            if st != 201:
                time.sleep(0.2)
                continue
            stats["created"] += 1
            with lock:
                sids.append(j["id"])
            stop.wait(hold)
            with lock:
                sids.remove(j["id"])
            e.request("DELETE", "/api/v1/sessions/%d" % j["id"], timeout=60)  # during load
            stats["deleted"] += 1

    def ws_client(e):
        while not stop.is_set():
            sid = pick()
            if sid is None:
                time.sleep(0.05)
                continue
            try:
                ws = e.ws("/api/v1/sessions/%d/events" % sid, timeout=5)
                stats["ws"] += 1
                mode = random.choice(["read", "stall", "close"])
                t_end = time.time() + random.uniform(0.2, 2)
                while mode != "close" and time.time() < t_end and not stop.is_set():
                    if mode == "stall":
                        time.sleep(0.1)
                        continue
                    ws.settimeout(1)
                    try:
                        if ws.recv_data()[0] == 8:
                            break
                    except websocket.WebSocketTimeoutException:
                        pass
                (ws.close if random.random() < 0.5 else ws.sock.close)()
            except (websocket.WebSocketException, OSError, ValueError):
                time.sleep(0.05)

    def nd_client(e):
        while not stop.is_set():
            sid = pick()
            if sid is None:
                time.sleep(0.05)
                continue
            try:
                c = e.conn(5)
                c.request("GET", "/api/v1/sessions/%d/events" % sid,
                          headers={"Authorization": "Bearer " + e.tokens["reader"],
                                   "Accept": "application/x-ndjson"})
                r = c.getresponse()
                stats["nd"] += 1
                stall = random.random() < 0.3
                t_end = time.time() + random.uniform(0.2, 2)
                while time.time() < t_end and not stop.is_set():
                    if stall:
                        time.sleep(0.1)
                    elif not r.read1(65536):
                        break
                c.close()
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)

    with Etwd(args=["--io-timeout", "3"]) as e:
        list_while_creating(e)
        specs = [({"providers": [{"name": "raw_syscalls", "stacks": True}]}, 3.0),
                 ({"providers": [{"name": "raw_syscalls", "events": ["sys_enter"], "stacks": True},
                                 {"name": "sched", "events": ["sched_switch", "sched_process_exec"],
                                  "stacks": True}]}, 1.5)]
        th = [threading.Thread(target=rewriter), ] + [threading.Thread(target=runner) for _ in range(6)]
        th += [threading.Thread(target=churn, args=(e,) + s) for s in specs]
        th += [threading.Thread(target=ws_client, args=(e,)) for _ in range(3)]
        th += [threading.Thread(target=nd_client, args=(e,)) for _ in range(2)]
        for t in th:
            t.daemon = True
            t.start()
        t_end = time.time() + DURATION
        while time.time() < t_end:
            t0 = time.time()
            try:
                st, h, body = e.request("GET", "/api/v1/sessions", token="reader", timeout=ANSWER_S)
                check(st == 200, "GET /api/v1/sessions: %d" % st)
            except (OSError, http.client.HTTPException) as x:
                check(False, "GET /api/v1/sessions during the load: %r; etwd %s" %
                      (x, "alive" if e.proc.poll() is None else "exited with %r" % e.proc.returncode))
                break
            if time.time() - t0 > 5:
                stats["slow"].append(round(time.time() - t0, 1))
            time.sleep(0.5)
        stop.set()
        for t in th:
            t.join(90)
            check(not t.is_alive(), "load thread %s ended" % t.name)
        check(e.proc.poll() is None, "etwd is alive after the load (exit %r)" % e.proc.returncode)
        if e.proc.poll() is None:
            st, h, body = e.request("GET", "/metrics", token="reader")
            m = re.search(r'^etwd_stack_records_total\{result="attached"\} (\d+)$', body.decode(), re.M)
            check(st == 200 and m and int(m.group(1)) > 0, "stacks were attached: %r" % (m and m.group(0)))
            f = re.search(r'^etwd_symcache_misses_total\{cache="files"\} (\d+)$', body.decode(), re.M)
            stats["file_misses"] = f and int(f.group(1))
        print("load: %r" % stats)
        check(stats["created"] >= 2 and stats["deleted"] >= 2 and stats["runs"] > 10 and stats["rewrites"] > 10,
              "the load ran: %r" % stats)
    shutil.rmtree(d, ignore_errors=True)
    done()


main()
