"""`etwd convert` after the merge of main's filters and formats (w-cli), --decode (i19-split) and
--format folded (w-stacks): the options work together. On net.4.5.2.x64.etl: folded with
--pid equals the folding of the ndjson events that --pid selects, and its summary counts them;
folded, chrome and CSV (also per-field) are the same bytes with --decode reference as with fast; the
usage and the unknown-format message name every format."""
import collections
import json
import os
import subprocess
import tempfile
import zipfile

from etwd_harness import check, done, BIN, CORPUS, folded_name as name

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")


def convert(args):
    r = subprocess.run([BIN, "convert"] + args, capture_output=True, timeout=600)
    check(r.returncode == 0, "convert %r: exit %d %s" % (args, r.returncode, r.stderr[-300:]))
    return r


def main():
    with tempfile.TemporaryDirectory(prefix="etwdmerged-") as d:
        with zipfile.ZipFile(NET_ZIP) as z:
            z.extractall(d)
        etl = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".etl")][0]
        # the busiest process, then only its events (net.etl's stacks are StackWalk events'
        # EventData, not a top-level "Stack": the folding is empty, the counts are not)
        pids, types, n = collections.Counter(), collections.Counter(), 0
        for line in convert(["--quiet", etl]).stdout.splitlines():
            ev = json.loads(line)
            n += 1
            if ev["System"].get("EventName") and ev.get("EventData"):
                types[(ev["System"]["Provider"]["Name"], ev["System"]["EventName"])] += 1
            if ev["System"]["Execution"]["ProcessID"] is not None:
                pids[ev["System"]["Execution"]["ProcessID"]] += 1
        pid = str(pids.most_common(1)[0][0])
        want, events = collections.Counter(), 0
        for line in convert(["--quiet", etl, "--pid", pid]).stdout.splitlines():
            events += 1
            st = json.loads(line).get("Stack")
            if isinstance(st, list) and st:
                want[";".join(name(f) for f in reversed(st))] += 1
        check(0 < events < n, "--pid %s selects some of the %d events: %d" % (pid, n, events))
        fo = convert(["--format", "folded", "--pid", pid, etl])
        got = collections.Counter({l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1])
                                   for l in fo.stdout.decode().splitlines()})
        check(got == want, "folded --pid %s equals the folding of ndjson --pid %s (%d vs %d stacks)" % (pid, pid, len(got), len(want)))
        check(b"etwd convert: %d events, %d with a stack" % (events, sum(want.values())) in fo.stderr,
              "folded --pid summary counts the %d selected events: %r" % (events, fo.stderr[-200:]))
        # --decode reference: the same bytes in every format, with filters
        for args in (["--format", "folded", "--pid", pid], ["--format", "chrome", "--limit", "3000"],
                     ["--format", "csv", "--event", "1", "--limit", "500"],
                     ["--format", "csv", "--provider", types.most_common(1)[0][0][0],
                      "--event", types.most_common(1)[0][0][1], "--limit", "500"]):
            fast = convert(["--quiet", etl] + args).stdout
            ref = convert(["--quiet", etl, "--decode", "reference"] + args).stdout
            if args[-3] == types.most_common(1)[0][0][1]:
                check(not fast.split(b"\n", 1)[0].endswith(b",EventData"), "one type: per-field CSV: %r" % fast[:300])
            check(fast == ref and (len(fast) > 100 or args[1] == "folded"), "%r: fast and reference the same (%d / %d bytes)" % (args, len(fast), len(ref)))
    r = subprocess.run([BIN, "convert", "x.etl", "--format", "flame"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "ndjson, csv, chrome or folded" in r.stderr, "unknown format: %r" % r.stderr)
    r = subprocess.run([BIN, "convert", "--help"], capture_output=True, text=True, timeout=60)
    check(all(w in r.stdout for w in ("chrome|folded", "--decode", "--pid", "--limit", "--quiet")),
          "convert --help lists formats, filters and --decode: %r" % r.stdout)
    done()


if __name__ == "__main__":
    main()
