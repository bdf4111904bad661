"""ETL stacks (issue 21 item 3) on net.4.5.2.x64.etl, with the manifests directory.

Every check is computed here from the trace's own events, written with --stackwalk-events (the
stack walk rows delivered as well as attached):
* the stack walks (StackWalk/Stack, StackWalk/KeyKernel, StackWalk/KeyUser, ClrStack/Walk) counted
  in the rows equal the summary's count, and attached + not attached = that count;
* each walk's frames (a key reference's: those of the NEXT KeyCreate/KeyRundown/KeyDelete of its
  key) appear, as one run, in the Stack of an earlier event of its thread (ClrStack/Walk: the
  nearest earlier CLR event of its thread; PerfInfo/Sample: its sampled thread); such walks number
  exactly the attached ones;
* every frame is resolved as the Image and Method events of the trace say: an address inside an
  image of its process (the kernel's for kernel addresses) has that image's file name and offset;
  inside a JIT-compiled method (Method/LoadVerbose, DCStartVerbose, DCStopVerbose) its
  Namespace.Name and offset; CLR events' frames are ≥ 90 % resolved, with clr.dll and ntdll.dll;
* without --stackwalk-events no walk row is written, the other events are the same with the same
  stacks; --decode reference writes the same bytes; the file given twice gives every event
  twice with the same stack;
* the server: a file decode gives the same events (?stackwalk_events=true: with the walk rows);
  a replay session's stats count the walks and the unattached ones; stackwalk_events is refused
  where it cannot be honoured (a linux session, a bad value; a replay's stream takes it for its own
  pass: test_stack_budget)."""
import bisect
import collections
import json
import os
import re
import subprocess
import tempfile
import zipfile

import time

from etwd_harness import check, done, BIN, CORPUS, MANIFESTS, Etwd

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
WALKS = {"StackWalk/Stack", "StackWalk/KeyKernel", "StackWalk/KeyUser", "ClrStack/Walk"}
DEFS = {"StackWalk/KeyCreate", "StackWalk/KeyRundown", "StackWalk/KeyDelete"}
CLR = "Microsoft-Windows-DotNETRuntime"


def convert(etl, *args):
    r = subprocess.run([BIN, "convert", "--manifests", MANIFESTS, etl] + list(args), capture_output=True, timeout=600)
    check(r.returncode == 0, "convert %s: %d %s" % (args, r.returncode, r.stderr[-300:]))
    return r.stdout, r.stderr.decode()


def summary(err):
    m = re.search(r"(\d+) stack walks: (\d+) attached to their events, (\d+) not attached", err)
    check(m is not None, "stack summary on stderr: %r" % err[-300:])
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def ranges(evs):
    """per pid: sorted [(start, end, kind, name)] from Image and Method events"""
    per = collections.defaultdict(set)
    for e in evs:
        n, d = e["System"].get("EventName", ""), e.get("EventData") or {}
        if n.startswith("Image/") and "ImageBase" in d and "FileName" in d:
            b = int(d["ImageBase"], 16)
            per[d["ProcessId"]].add((b, b + int(d["ImageSize"]), "Module", re.split(r"[\\/]", d["FileName"])[-1]))
        elif n in ("Method/LoadVerbose", "Method/DCStartVerbose", "Method/DCStopVerbose") and "MethodStartAddress" in d:
            b, sz = int(d["MethodStartAddress"], 16), int(d["MethodSize"], 16)
            name = (d["MethodNamespace"] + "." if d["MethodNamespace"] else "") + d["MethodName"]
            per[e["System"]["Execution"]["ProcessID"]].add((b, b + sz, "Symbol", name))
    return {p: sorted(v) for p, v in per.items()}


def lookup(rs, a):
    if not rs:
        return None
    i = bisect.bisect_right(rs, (a, float("inf"))) - 1
    while i >= 0 and i >= len(rs) - 10**9:
        if rs[i][0] <= a < rs[i][1]:
            return rs[i]
        if a - rs[i][0] > 1 << 32:
            break
        i -= 1
    return None


def main():
    with tempfile.TemporaryDirectory(prefix="etwdstk-") as d:
        with zipfile.ZipFile(NET_ZIP) as z:
            z.extractall(d)
        etl = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".etl")][0]
        sw_out, sw_err = convert(etl, "--stackwalk-events")
        # --no-stacks: nothing attached, no summary, every walk row written as it is
        ns_out, ns_err = convert(etl, "--no-stacks")
        ns = [json.loads(l) for l in ns_out.splitlines()]
        check(not any("Stack" in e for e in ns) and "stack walks" not in ns_err,
              "--no-stacks: no event carries a Stack, no stack summary")
        check([e["System"].get("EventName") for e in ns] ==
              [json.loads(l)["System"].get("EventName") for l in sw_out.splitlines()],
              "--no-stacks writes the same events as --stackwalk-events, walk rows included")
        del ns, ns_out
        evs = [json.loads(l) for l in sw_out.splitlines()]
        names = [e["System"].get("EventName") for e in evs]
        nwalk = sum(n in WALKS for n in names)
        walks, att, unatt = summary(sw_err)
        check(nwalk > 20000 and walks == nwalk, "walk rows %d = summary's stack walks %d" % (nwalk, walks))
        check(att + unatt == walks and unatt <= walks // 100, "attached %d + not attached %d = %d" % (att, unatt, walks))

        # the frames of each walk; key references get their key's next definition
        frames = {}
        pending = collections.defaultdict(list)
        for i, e in enumerate(evs):
            n, dt = names[i], e.get("EventData") or {}
            if n in ("StackWalk/Stack", "ClrStack/Walk"):
                frames[i] = [int(a, 16) for a in dt["Stack"]]
            elif n in ("StackWalk/KeyKernel", "StackWalk/KeyUser"):
                pending[dt["StackKey"]].append(i)
            elif n in DEFS:
                for j in pending.pop(dt["StackKey"], []):
                    frames[j] = [int(a, 16) for a in dt["Stack"]]
        stacks = {i: [int(f["Address"], 16) for f in e["Stack"]] for i, e in enumerate(evs) if "Stack" in e}
        check(all(names[i] not in WALKS for i in stacks), "no walk row carries a Stack of its own")
        found = 0
        for i, fr in frames.items():
            e, dt = evs[i], evs[i].get("EventData") or {}
            clr = names[i] == "ClrStack/Walk"
            for j in range(i - 1, max(-1, i - 20000), -1):
                x = evs[j]["System"]
                if names[j] in WALKS or names[j] in DEFS:
                    continue
                ex = x["Execution"]
                if clr:
                    mine = x["Provider"]["Name"] == CLR and ex["ThreadID"] == e["System"]["Execution"]["ThreadID"]
                elif names[j] == "PerfInfo/Sample":  # no thread in its header: the sampled one
                    mine = evs[j]["EventData"]["ThreadId"] == dt["StackThread"]
                else:  # the walk's thread, or its CPU: events whose ids are their payload's (Thread/Start:
                    # the new thread; Process: none) were logged by the walk's thread on its CPU
                    mine = ex["ThreadID"] == dt["StackThread"] or ex["ProcessorID"] == e["System"]["Execution"]["ProcessorID"]
                if not mine or j not in stacks:
                    if clr and mine:
                        break  # the previous CLR event of the thread has no stack
                    continue
                s = stacks[j]
                if fr and any(s[k:k + len(fr)] == fr for k in range(len(s) - len(fr) + 1)):
                    found += 1
                    break
                if clr:
                    break
        check(found == att, "walks whose frames are in the Stack of their event: %d (attached: %d)" % (found, att))

        # resolution against the trace's Image and Method events
        rs = ranges(evs)
        kern = rs.get(0) or rs.get(4)
        tot = res = wrong = jit = 0
        mods = collections.Counter()
        for i, s in stacks.items():
            e = evs[i]
            pid = e["System"]["Execution"]["ProcessID"]
            is_clr = e["System"]["Provider"]["Name"] == CLR
            for f in e["Stack"]:
                a = int(f["Address"], 16)
                r = lookup(kern if a >= 0xFFFF800000000000 else rs.get(pid), a)
                if r is None and a < 0xFFFF800000000000 and pid not in (0, 4):
                    r = None
                want = {"Address": f["Address"]}
                if r:
                    want[r[2]] = r[3]
                    want["Offset"] = a - r[0]
                got_r = "Module" in f or "Symbol" in f
                if r and f != want:
                    wrong += 1
                if "Symbol" in f and f == want:
                    jit += 1
                if is_clr:
                    tot += 1
                    res += got_r
                    mods[f.get("Module")] += 1
        check(wrong == 0, "frames resolved otherwise than the Image/Method events say: %d" % wrong)
        check(tot > 100000 and res >= 0.9 * tot, "CLR events' frames resolved: %d of %d" % (res, tot))
        check(mods["clr.dll"] > 1000 and mods["ntdll.dll"] > 100, "clr.dll, ntdll.dll frames: %r" % mods.most_common(5))
        check(jit > 1000, "JIT-compiled frames named by the trace's method events: %d" % jit)

        # the default: no walk rows, the same events and stacks
        out, err = convert(etl)
        check(summary(err) == (walks, att, unatt), "same counts without --stackwalk-events")
        lines = out.splitlines()
        strip = [re.sub(rb'^\{"seq":\d+,', b"", l) for l in sw_out.splitlines()]
        keep = [l for l, n in zip(strip, names) if n not in WALKS and n not in DEFS]
        check(len(lines) == len(keep), "rows without the walks: %d, want %d" % (len(lines), len(keep)))
        check([re.sub(rb'^\{"seq":\d+,', b"", l) for l in lines] == keep, "the other events are the same")
        check(all(json.loads(l)["seq"] == k + 1 for k, l in enumerate(lines[:1000])), "seq numbers without gaps")
        ref, _ = convert(etl, "--decode", "reference")
        check(ref == out, "--decode reference writes the same bytes")
        # the file given twice (two files merged, every time tied): each copy's events get their own
        # stacks, the same as alone
        two, err2 = convert(etl, etl)
        check(summary(err2) == (2 * walks, 2 * att, 2 * unatt), "twice: %r" % (summary(err2),))
        one = collections.Counter(re.sub(rb'^\{"seq":\d+,', b"", l) for l in lines)
        both = collections.Counter(re.sub(rb'^\{"seq":\d+,', b"", l) for l in two.splitlines())
        check(both == collections.Counter({k: 2 * v for k, v in one.items()}), "twice: every event twice, with the same stack")
        server(etl, lines, len(evs), (walks, unatt))
    done()


def server(etl, lines, n_sw, counts):
    def bare(l):
        return re.sub(rb'^\{"seq":\d+,', b"", l.rstrip(b"\n"))
    with Etwd(args=["--manifests", MANIFESTS]) as e:
        st, h, j = e.json("POST", "/api/v1/files?name=net.etl", body=open(etl, "rb").read(), ctype="application/octet-stream")
        check(st == 201, "upload: %d" % st)
        st, h, body = e.request("GET", "/api/v1/files/net.etl/events", token="reader", headers={"Accept": "application/x-ndjson"})
        got = [bare(l) for l in body.splitlines() if l.strip()]
        check(st == 200 and got == [bare(l) for l in lines], "file decode = convert's events with their stacks (%d / %d)" % (len(got), len(lines)))
        st, h, body = e.request("GET", "/api/v1/files/net.etl/events?stackwalk_events=true&provider=Windows%20Kernel",
                                token="reader", headers={"Accept": "application/x-ndjson"})
        check(st == 200 and b"StackWalk/KeyUser" in body, "?stackwalk_events=true: the walk rows (%d)" % st)
        st, h, body = e.request("GET", "/api/v1/files/net.etl/events?stackwalk_events=true", token="reader",
                                headers={"Accept": "application/x-ndjson"})
        check(st == 200 and body.count(b"\n") == n_sw, "?stackwalk_events=true: %d rows, want %d" % (body.count(b"\n"), n_sw))
        st, h, body = e.request("GET", "/api/v1/files/net.etl/events?stackwalk_events=1", token="reader",
                                headers={"Accept": "application/x-ndjson"})
        check(st == 400 and b"stackwalk_events" in body, "stackwalk_events=1: 400 (%d %r)" % (st, body[:200]))
        st, h, j = e.json("POST", "/api/v1/sessions", body={"files": ["net.etl"], "stackwalk_events": True}, expect=201)
        sid = j["id"]
        check(j["spec"].get("stackwalk_events") is True, "spec shows stackwalk_events: %r" % j["spec"])
        st, h, body = e.request("GET", "/api/v1/sessions/%d/events?stackwalk_events=1" % sid, token="reader",
                                headers={"Accept": "application/x-ndjson"})
        check(st == 400 and b"stackwalk_events" in body, "a session stream refuses ?stackwalk_events=1: %d %r" % (st, body[:200]))
        n = sum(1 for _ in e.ndjson("/api/v1/sessions/%d/events" % sid, timeout=120))
        check(n == n_sw, "replay with stackwalk_events: %d events, want %d" % (n, n_sw))
        stats = {}
        for _ in range(100):
            stats = e.json("GET", "/api/v1/sessions/%d" % sid)[2].get("stats", {})
            if stats.get("stack_walks_unattached") is not None:
                break
            time.sleep(0.1)
        check((stats.get("stack_walks"), stats.get("stack_walks_unattached")) == counts,
              "session stats: %r, want %r" % ({k: stats.get(k) for k in ("stack_walks", "stack_walks_unattached")}, counts))
        st, h, j = e.json("POST", "/api/v1/sessions", body={"backend": "linux", "providers": ["sched"], "stackwalk_events": True})
        check(st == 400 and "/stackwalk_events" in json.dumps(j), "linux refuses stackwalk_events: %d %r" % (st, j))
        check(e.stop() == 0, "clean exit")


main()
