"""`etwd convert --format folded` (issue 21 item 5): the collapsed-stack text equals the folding
of the same file's ndjson events done here (every event with a top-level "Stack", frames
reversed to root first, named Module!Symbol, else Module+0xOFFSET, else the Address), line for
line and count for count; the summary on stderr counts the same events. On net.4.5.2.x64.etl,
whose stack walks are attached to their events: > 20,000 events with stacks, modules and methods."""
import collections
import json
import os
import re
import subprocess
import tempfile
import zipfile

from etwd_harness import check, done, BIN, CORPUS, folded_name as name

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")


def main():
    with tempfile.TemporaryDirectory(prefix="etwdfold-") as d:
        with zipfile.ZipFile(NET_ZIP) as z:
            z.extractall(d)
        etl = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".etl")][0]
        nd = subprocess.run([BIN, "convert", "--quiet", etl], capture_output=True, timeout=600)
        check(nd.returncode == 0, "ndjson convert: %d %s" % (nd.returncode, nd.stderr[-300:]))
        want = collections.Counter()
        events = 0
        for line in nd.stdout.splitlines():
            events += 1
            if b'"Stack":[' not in line:
                continue
            st = json.loads(line).get("Stack")
            if isinstance(st, list) and st:
                want[";".join(name(f) for f in reversed(st))] += 1
        fo = subprocess.run([BIN, "convert", "--format", "folded", etl], capture_output=True, timeout=600)
        check(fo.returncode == 0, "folded convert: %d %s" % (fo.returncode, fo.stderr[-300:]))
        lines = fo.stdout.decode().splitlines()
        check(all(re.fullmatch(r"\S+ [1-9]\d*", l) for l in lines), "every line is `frames COUNT`: %r" % lines[:3])
        got = collections.Counter({l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1]) for l in lines})
        check(len(got) == len(lines), "one line per distinct stack")
        # the trace's stack walks are attached to their events (test_etl_stacks.py): real content
        check(sum(want.values()) > 20000 and len(want) > 1000, "events with a stack: %d, distinct %d" % (sum(want.values()), len(want)))
        check(any(";clr.dll+0x" in k or k.startswith("clr.dll") for k in want) and any("ntoskrnl.exe" in k for k in want),
              "frames named by module (clr.dll, ntoskrnl.exe)")
        check(any(re.search(r";System\.[A-Za-z.]+\.[A-Za-z_]+", k) for k in want), "JIT-compiled frames named by method")
        check(got == want, "folded output equals the folding of the ndjson events (%d vs %d stacks, %d vs %d events)" %
              (len(got), len(want), sum(got.values()), sum(want.values())))
        check(lines == sorted(lines, key=lambda l: l.rsplit(" ", 1)[0].encode()), "lines sorted by stack")
        m = re.search(rb"(\d+) events, (\d+) with a stack, (\d+) distinct stacks", fo.stderr)
        check(m and int(m.group(1)) == events and int(m.group(2)) == sum(want.values()) and int(m.group(3)) == len(want),
              "summary: %r (events %d, with a stack %d)" % (fo.stderr[-200:], events, sum(want.values())))
        bad = subprocess.run([BIN, "convert", "--format", "flame", etl], capture_output=True, timeout=60)
        check(bad.returncode == 2 and b"ndjson, csv, chrome or folded" in bad.stderr, "unknown format: %r" % bad.stderr)
    done()


main()
