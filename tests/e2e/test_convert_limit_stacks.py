"""`etwd convert --limit N` and the stack walks' summary (review item): a read stopped by the limit
never reaches the events after it, so their walks count as not attached — the summary says so
(`the read stopped at --limit N`) instead of reporting them as walks without an event, and with
--quiet leaves the line out (it is no warning then). Without a cut (no --limit, or one the input
never reaches) the line is as before: on net.4.5.2.x64 every walk attached, no note."""
import os
import re
import subprocess

from etwd_harness import BIN, CORPUS, check, done

NET_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip")
LINE = re.compile(r"etwd convert: (\d+) stack walks: (\d+) attached to their events, (\d+) not attached(.*)")


def convert(*args):
    r = subprocess.run([BIN, "convert", NET_ZIP, "-o", os.devnull] + list(args), capture_output=True, timeout=300)
    err = r.stderr.decode(errors="replace")
    m = LINE.search(err)
    return r.returncode, err, (tuple(int(x) for x in m.groups()[:3]) + (m.group(4),)) if m else None


def main():
    rc, err, full = convert()
    check(rc == 0 and full and full[0] > 1000 and full[2] == 0 and "--limit" not in full[3],
          "without --limit: every walk attached, no note: %r" % err[-400:])
    walks = full[0] if full else 0
    for limit in (100, 20000):
        rc, err, got = convert("--limit", str(limit))
        check(rc == 0 and got and got[0] == walks and got[1] + got[2] == walks and got[2] > 0
              and got[3].startswith(" (the read stopped at --limit %d: the walks of the events after it, never read, "
                                    "are counted here)" % limit),
              "--limit %d: the summary says the limit cut the walks: %r" % (limit, err[-400:]))
        if limit == 20000:
            check(got and got[1] > 0, "--limit 20000: the walks of the events read are attached: %r" % err[-300:])
        rc, err, got = convert("--limit", str(limit), "--quiet")
        check(rc == 0 and "stack walks" not in err, "--limit %d --quiet: no stack walks line: %r" % (limit, err[-300:]))
    rc, err, got = convert("--limit", "100000000")  # never reached: the whole input is read
    check(rc == 0 and got and got[:3] == full[:3] and "--limit" not in got[3],
          "a --limit the input does not reach: the full summary, no note: %r" % err[-400:])
    done()


if __name__ == "__main__":
    main()
