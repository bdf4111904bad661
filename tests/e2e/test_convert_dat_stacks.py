#!/usr/bin/env python3
"""etwd convert of a trace.dat recorded with stacks: a real recording (mode both, the live ndjson
stream of the same session alongside) of test_stacks.py's program (main → outer → inner →
getppid, built with frame pointers, pinned to one CPU) with raw_syscalls:sys_enter and
"stacks": true. Convert attaches the ftrace kernel_stack/user_stack records that follow each event
to it ("Stack", as the live stream: kernel frames symbolised by this machine's kallsyms — the file
was recorded since this boot — user frames as addresses, the file keeping no process mappings)
and leaves none as an event of its own; folded and Chrome output carry the stacks. Truncated
copies of the file (cut inside a CPU's data) are reported as damaged (exit status 1) and keep the
events before the cut. Also: the records rearranged as an interrupt leaves them (the owner rule),
another kernel's addresses (no symbols), a file of trace-cmd's own with stacks. Root, real
tracefs, x86_64."""
import ast
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time

from etwd_harness import BIN, Etwd, check, done, wait_subscribers

CALLS = 40
KERNEL = 1 << 63


def prog_source():
    """test_stacks.py's PROG (read from its source: importing it would run its tests)."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_stacks.py")
    with open(src) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PROG" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("no PROG in test_stacks.py")


def build(d):
    src = os.path.join(d, "stk.c")
    exe = os.path.join(d, "etwd_dstk_prog")
    with open(src, "w") as f:
        f.write(prog_source().replace("CALLS", str(CALLS)))
    r = subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "test program builds: %s" % r.stderr)
    return exe


def convert(path, *args):
    r = subprocess.run([BIN, "convert", path] + list(args), capture_output=True, timeout=300)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def ndjson(out):
    return [json.loads(l) for l in out.decode().splitlines() if l.strip()]


def record(tmp, exe):
    """One session (mode both, stacks) while the program makes its syscalls: (trace.dat path, the
    live stream's events)."""
    p = subprocess.Popen(["taskset", "-c", "0", exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    check(p.stdout.read(1) == b"r", "test program started")
    live = []
    with Etwd() as e:
        st, h, j = e.json("POST", "/api/v1/sessions", body={
            "providers": [{"name": "raw_syscalls", "events": ["sys_enter"], "filter": "id == 110", "stacks": True}],
            "pids": [p.pid], "mode": "both"})
        check(st == 201, "create: %d %r" % (st, j))
        sid = j["id"]
        loc = "/api/v1/sessions/%d" % sid

        def read():
            for ev in e.ndjson(loc + "/events", timeout=60):
                live.append(ev)
        t = threading.Thread(target=read)
        t.start()
        wait_subscribers(e, sid, 1)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        check(p.stdout.read(1) == b"d", "test program made its syscalls")
        deadline = time.time() + 60
        while time.time() < deadline and len([x for x in live if "System" in x]) < CALLS:
            time.sleep(0.05)
        p.stdin.close()
        p.wait()
        e.json("POST", loc + "/stop", expect=200)
        st, _, data = e.request("GET", loc + "/file?wait=true", token="reader", timeout=60)
        check(st == 200 and data[:10] == b"\x17\x08\x44tracing", "download: %d %r" % (st, data[:20]))
        t.join(30)
        e.request("DELETE", loc)
    path = os.path.join(tmp, "stk.dat")
    with open(path, "wb") as f:
        f.write(data)
    return path, [x for x in live if "System" in x]


def split(stack):
    k = [f for f in stack if int(f["Address"], 16) >= KERNEL]
    u = [f for f in stack if int(f["Address"], 16) < KERNEL]
    return k, u


def check_ndjson(path, exe, live):
    rc, out, err = convert(path, "--quiet")
    check(rc == 0 and "orphaned" not in err, "convert: rc %d %s" % (rc, err[-500:]))
    evs = ndjson(out)
    rc, _, err = convert(path, "-o", os.devnull)
    check(rc == 0 and "%d stack records: %d joined to their events, 0 orphaned\n" % (2 * CALLS, 2 * CALLS) in err,
          "the stack records are counted: %s" % err)
    check(not [e for e in evs if e["System"]["Provider"]["Name"] == "ftrace"],
          "no ftrace stack record is an event of its own: %s" % sorted({e["System"]["EventName"] for e in evs}))
    conv = [e for e in evs if e["System"]["EventName"] == "sys_enter"]
    check(len(conv) == CALLS and len(live) == CALLS, "%d sys_enter converted and live: %d, %d" % (CALLS, len(conv), len(live)))
    live = sorted(live, key=lambda e: e["System"]["TimeCreated"])
    for c, l in zip(conv, live):
        cs, ls = c.get("Stack"), l.get("Stack")
        if not check(isinstance(cs, list) and cs and isinstance(ls, list) and ls, "both carry a Stack: %s / %s" % (c, l)):
            continue
        check(c["EventData"] == l["EventData"] and c["System"]["Execution"] == l["System"]["Execution"],
              "the same event: %s vs %s" % (c["System"], l["System"]))
        ck, cu = split(cs)
        lk, lu = split(ls)
        check(ck and ck == lk, "kernel frames equal the live stream's (symbolised): %s vs %s" % (ck, lk))
        check(any(f.get("Symbol") in ("entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe", "do_syscall_64")
                  for f in ck), "the kernel stack has the syscall entry: %s" % ck)
        check([f["Address"] for f in cu] == [f["Address"] for f in lu] and all(list(f) == ["Address"] for f in cu),
              "user frames: the live stream's addresses, address only: %s vs %s" % (cu, lu))
        names = [f.get("Symbol") for f in lu]
        i = names.index("inner") if "inner" in names else -1
        check(i >= 0 and names[i:i + 3] == ["inner", "outer", "main"] and
              [f["Address"] for f in cu[i:i + 3]] == [f["Address"] for f in lu[i:i + 3]],
              "inner, outer, main's addresses are there in order: %s" % names)
        check(cs.index(ck[0]) < cs.index(cu[0]) if ck and cu else False, "kernel frames first, then user frames")
    return evs, conv


def check_outputs(path, conv):
    rc, out, err = convert(path, "--format", "folded")
    check(rc == 0, "folded: rc %d %s" % (rc, err[-300:]))
    lines = out.decode().splitlines()
    # (a folded line: frames root first, `;`-separated, then the count)
    mine = [l for l in lines if "entry_SYSCALL_64" in l and conv and conv[0]["Stack"][-1]["Address"] in l]
    check(mine and sum(int(l.rsplit(" ", 1)[1]) for l in mine) == CALLS,
          "folded: the %d stacks, root (the outermost user address) to leaf: %s" % (CALLS, lines[:3]))
    check("%d events, %d with a stack" % (len(ndjson(convert(path, "--quiet")[1])), CALLS) in err,
          "folded: the summary counts the stacks: %s" % err)
    rc, out, err = convert(path, "--quiet", "--format", "chrome")
    check(rc == 0, "chrome: rc %d %s" % (rc, err[-300:]))
    inst = [e for e in json.loads(out)["traceEvents"] if e.get("name") == "sys_enter"]
    check(len(inst) == CALLS and all(e["args"].get("stack") for e in inst), "chrome: the events carry args.stack: %s" % inst[:1])


def data_range(d):
    """(start, end) of the CPU data of an etwd trace.dat (v6: the flyrecord table after the options)."""
    i = d.index(b"flyrecord\x00") + 10
    ncpu = struct.unpack_from("<I", d, d.index(b"options  \x00") - 4)[0]
    spans = [struct.unpack_from("<QQ", d, i + 16 * c) for c in range(ncpu)]
    spans = [(o, o + s) for o, s in spans if s]
    return min(o for o, _ in spans), max(e for _, e in spans)


def check_truncated(tmp, path, evs):
    with open(path, "rb") as f:
        d = f.read()
    lo, hi = data_range(d)
    page = os.sysconf("SC_PAGE_SIZE")
    cuts = sorted({hi - 1, hi - page // 2, lo + (hi - lo) // 2, lo + page + 100, lo + 100})
    # (an event by its CPU, name and payload: the times of two conversions may differ by the
    # clock offset measured at each)
    key = lambda e: (e["System"]["Execution"]["ProcessorID"], e["System"]["EventName"], json.dumps(e["EventData"]))
    full = [key(e) for e in evs]
    for cut in cuts:
        tp = os.path.join(tmp, "cut%d.dat" % cut)
        with open(tp, "wb") as f:
            f.write(d[:cut])
        rc, out, err = convert(tp, "--quiet")
        got = ndjson(out)
        check(rc == 1 and "damaged" in err and "truncated" in err and "events written before the damage" in err,
              "cut at %d of %d: damage reported, exit status 1: rc %d %s" % (cut, len(d), rc, err[-400:]))
        kept = [key(e) for e in got]
        # (the program ran on CPU 0 only: its events are one stream, kept up to the cut; a cut
        # inside the last page may leave every event: the page's unused tail is gone)
        mine = lambda ks: [k for k in ks if k[0] == 0]
        check(0 < len(kept) <= len(full) and (len(kept) < len(full) or cut > hi - page) and
              all(k in full for k in kept) and mine(kept) == mine(full)[:len(mine(kept))],
              "cut at %d: the events before the cut are kept (%d of %d)" % (cut, len(kept), len(full)))
        check([e["seq"] for e in got] == list(range(1, len(got) + 1)), "cut at %d: seq 1..N" % cut)
        check(not [e for e in got if e["System"]["Provider"]["Name"] == "ftrace"], "cut at %d: no stack records" % cut)
    hp = os.path.join(tmp, "head.dat")  # cut inside the header (the event formats)
    with open(hp, "wb") as f:
        f.write(d[:lo // 2])
    rc, out, err = convert(hp, "--quiet")
    check(rc == 1 and not out and "damaged trace.dat: truncated inside its header" in err,
          "cut in the header: exit 1, no events, said: rc %d %s" % (rc, err[-300:]))
    # a CPU whose data would begin inside the header and run past the end (no writer does that:
    # repairing the copy would write into the header: tests/fuzz/fuzz_dat.c checks every repair)
    ip = os.path.join(tmp, "inside.dat")
    b = bytearray(d)
    struct.pack_into("<QQ", b, b.index(b"flyrecord\x00") + 10, 64, len(d))
    with open(ip, "wb") as f:
        f.write(b)
    rc, out, err = convert(ip, "--quiet")
    check(rc == 1 and not out and "data of CPU 0 begins inside the file's header" in err,
          "CPU data inside the header: exit 1, no events, said: rc %d %s" % (rc, err[-300:]))
    rc, out, err = convert(path, "--quiet")
    check(rc == 0 and "damaged" not in err, "the whole file is not damaged: rc %d %s" % (rc, err))


def records(d, start, page):
    """(offset, size, common_type, data offset) of the records of the ring-buffer page at @start (time extends
    and padding: common_type None), in order."""
    commit = struct.unpack_from("<Q", d, start + 8)[0] & ((1 << 27) - 1)
    pos, end, out = start + 16, start + 16 + commit, []
    while pos + 4 <= end:
        h = struct.unpack_from("<I", d, pos)[0]
        tl = h & 31
        a0 = struct.unpack_from("<I", d, pos + 4)[0] if tl in (0, 29) else 0
        size = 4 + ((a0 + 3) & ~3) if tl == 0 else 4 + a0 if tl == 29 else 8 if tl >= 30 else 4 + 4 * tl
        data = pos + 8 if tl == 0 else pos + 4
        out.append((pos, size, struct.unpack_from("<H", d, data)[0] if tl < 29 else None, data))
        pos += size
    return out


def event_id(sys, ev):
    with open("/sys/kernel/tracing/events/%s/%s/format" % (sys, ev)) as f:
        return int(re.search(r"^ID: (\d+)", f.read(), re.M).group(1))


def check_interrupted(tmp, path, conv):
    """The owner rule of the live reader (linux_stack.c): an event whose stack records come after
    another event's (an interrupt between the event and its stacks: E1 E2 S2 S2 S1 S1 on one CPU)
    gets none — the second event takes the stacks that follow it, the first one's are orphaned.
    The recording's records rearranged so: convert attaches as the live stream would."""
    with open(path, "rb") as f:
        d = bytearray(f.read())
    lo, hi = data_range(bytes(d))
    page = os.sysconf("SC_PAGE_SIZE")
    stk = {event_id("ftrace", "kernel_stack"), event_id("ftrace", "user_stack")}
    ev = event_id("raw_syscalls", "sys_enter")
    recs = records(d, lo, page)
    kinds = "".join("E" if t == ev else "S" if t in stk else "x" for _, _, t, _ in recs)
    i = kinds.find("ESSESS")
    if not check(i >= 0, "the first page has two events with their two stacks each: %s" % kinds[:40]):
        return
    r = recs[i:i + 6]
    piece = lambda k: bytes(d[r[k][0]:r[k][0] + r[k][1]])
    moved = b"".join(piece(k) for k in (0, 3, 4, 5, 1, 2))  # E1 E2 S2 S2 S1 S1
    d[r[0][0]:r[0][0] + len(moved)] = moved
    ip = os.path.join(tmp, "irq.dat")
    with open(ip, "wb") as f:
        f.write(d)
    rc, out, err = convert(ip, "--quiet")
    got = [e for e in ndjson(out) if e["System"]["EventName"] == "sys_enter"]
    check(rc == 0 and len(got) == CALLS, "rearranged file: rc %d, %d events %s" % (rc, len(got), err[-300:]))
    check("%d stack records: %d joined to their events, 2 orphaned (" % (2 * CALLS, 2 * CALLS - 2) in err,
          "the orphaned records are counted on stderr (even with --quiet): %s" % err)
    # (the pattern's first event is the kinds.count("E") before it)
    n = kinds[:i].count("E")
    if len(got) == CALLS and len(conv) == CALLS:
        check("Stack" not in got[n], "the interrupted event gets no stack: %s" % got[n].get("Stack"))
        check(got[n + 1].get("Stack") == conv[n + 1]["Stack"], "the interrupting event keeps its own stack")
        check(all(got[k].get("Stack") == conv[k]["Stack"] for k in range(CALLS) if k not in (n, n + 1)),
              "the others keep theirs")
    check(not [e for e in ndjson(out) if e["System"]["Provider"]["Name"] == "ftrace"], "the orphans are no events")


def check_other_kernel(tmp, path, conv):
    """Kernel addresses of another kernel (another boot's KASLR offset, another machine): the
    recording's kernel stacks moved by 1 GiB. Their first stack's innermost frame is then no
    tracing function by this machine's kallsyms, so every kernel frame is written as its address
    only (never another kernel's symbols), the user frames as before."""
    with open(path, "rb") as f:
        d = bytearray(f.read())
    lo, hi = data_range(bytes(d))
    page = os.sysconf("SC_PAGE_SIZE")
    kid = event_id("ftrace", "kernel_stack")
    shift = 1 << 30
    for p in range(lo, hi, page):
        for pos, size, t, data in records(d, p, page):
            if t != kid:
                continue
            cnt = struct.unpack_from("<I", d, data + 8)[0]
            for k in range(min(cnt, (pos + size - data - 16) // 8)):
                a = struct.unpack_from("<Q", d, data + 16 + 8 * k)[0]
                if a >> 63:
                    struct.pack_into("<Q", d, data + 16 + 8 * k, a + shift)
    op = os.path.join(tmp, "other.dat")
    with open(op, "wb") as f:
        f.write(d)
    rc, out, err = convert(op, "--quiet")
    got = [e for e in ndjson(out) if e["System"]["EventName"] == "sys_enter"]
    check(rc == 0 and len(got) == CALLS == len(conv), "another kernel's stacks: rc %d, %d events" % (rc, len(got)))
    for g, c in zip(got, conv):
        gk, gu = split(g.get("Stack", []))
        ck, cu = split(c["Stack"])
        # (untrimmed now: the tracing machinery's frames are not known as such without symbols)
        check(gk and all(list(f) == ["Address"] for f in gk) and
              {int(f["Address"], 16) - shift for f in gk} >= {int(f["Address"], 16) for f in ck},
              "kernel frames: addresses only, every one of the stack there: %s" % gk[:3])
        check(gu == cu, "user frames as before")


def check_trace_cmd(tmp, exe):
    """A file of trace-cmd's own (`trace-cmd extract` of a tracefs instance with the stacktrace
    and userstacktrace options on, as `trace-cmd record -T --user-stack` sets them; record itself
    cannot enable ftrace on the test VM): its events get their stacks too."""
    inst = "etwdtest_dstk_%d" % os.getpid()
    d = "/sys/kernel/tracing/instances/" + inst
    p = subprocess.Popen(["taskset", "-c", "0", exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    check(p.stdout.read(1) == b"r", "test program started")
    os.mkdir(d)
    try:
        ev = d + "/events/raw_syscalls/sys_enter/"
        for f, v in ((ev + "filter", "id == 110 && common_pid == %d" % p.pid), (ev + "enable", "1"),
                     (d + "/options/stacktrace", "1"), (d + "/options/userstacktrace", "1"), (d + "/tracing_on", "1")):
            with open(f, "w") as fh:
                fh.write(v)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        check(p.stdout.read(1) == b"d", "test program made its syscalls")
        with open(d + "/tracing_on", "w") as fh:
            fh.write("0")
        path = os.path.join(tmp, "tc.dat")
        r = subprocess.run(["trace-cmd", "extract", "-B", inst, "-o", path], capture_output=True, timeout=120)
        check(r.returncode == 0, "trace-cmd extract: %d %s" % (r.returncode, r.stderr[-300:]))
    finally:
        p.stdin.close()
        p.wait()
        if os.path.isdir(d):
            os.rmdir(d)
    rc, out, err = convert(path, "--quiet")
    evs = ndjson(out)
    got = [e for e in evs if e["System"]["EventName"] == "sys_enter"]
    check(rc == 0 and len(got) == CALLS, "trace-cmd's file: rc %d, %d sys_enter %s" % (rc, len(got), err[-300:]))
    check(not [e for e in evs if e["System"]["Provider"]["Name"] == "ftrace"], "trace-cmd's file: no stack records")
    for e in got:
        k, u = split(e.get("Stack", []))
        check(any(f.get("Symbol") in ("entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe", "do_syscall_64") for f in k)
              and not [f for f in k if f.get("Symbol", "").startswith(("trace_", "ftrace_", "__ftrace_"))],
              "trace-cmd's file: the kernel stack, symbolised and trimmed: %s" % [f.get("Symbol") for f in k])
        check(len(u) >= 3 and all(list(f) == ["Address"] for f in u), "trace-cmd's file: user addresses: %s" % u)


def main():
    if os.geteuid() != 0 or platform.machine() != "x86_64":
        check(False, "needs root (tracefs) and x86_64 (getppid is syscall 110)")
        done()
    tmp = tempfile.mkdtemp(prefix="etwd-dstk-")
    try:
        exe = build(tmp)
        path, live = record(tmp, exe)
        evs, conv = check_ndjson(path, exe, live)
        check_outputs(path, conv)
        check_interrupted(tmp, path, conv)
        check_other_kernel(tmp, path, conv)
        check_truncated(tmp, path, evs)
        check_trace_cmd(tmp, exe)
    finally:
        shutil.rmtree(tmp)
    done()


if __name__ == "__main__":
    main()
