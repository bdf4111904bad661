"""etwd convert filters, per-field CSV and Chrome trace-event JSON (issue 20 item 9, issue 22 item
4) on corpus files. Every expectation is computed here from the file's unfiltered ndjson (the
ground truth the filters select from): a filtered run must give exactly the unfiltered lines that
match, byte for byte; per-field CSV columns are the union of the selected events' EventData keys;
the Chrome document holds one instant per event, sorted, with the start/stop pairs the mapping
defines (computed here independently)."""
import csv
import io
import json
import os
import subprocess
from datetime import datetime, timezone

from etwd_harness import BIN, CORPUS, check, done
from test_csv_inject import guarded  # a text cell that would start a formula gets a leading '

FILES = [
    "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
    "microsoft+krabsetw/examples/NativeExamples/powershell.etl",
    "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
    "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl",
]


def convert(path, *args):
    r = subprocess.run([BIN, "convert", path, "--quiet"] + list(args), capture_output=True, timeout=300)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def ticks(tc):
    """TimeCreated ("2023-04-22T10:47:24.4722782Z") as 100 ns ticks since 1970."""
    base, frac = tc.rstrip("Z").split(".") if "." in tc else (tc.rstrip("Z"), "0")
    s = int(datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())
    return s * 10000000 + int(frac.ljust(7, "0")[:7])


def iso(t):
    return datetime.fromtimestamp(t // 10000000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + ".%07dZ" % (t % 10000000)


def expect_lines(name, path, args, lines, pred, limit=None):
    want = [l for l, ev in lines if pred(ev)]
    if limit:
        want = want[:limit]
    rc, out, err = convert(path, *args)
    got = out.splitlines()
    check(rc == 0 and got == want, "%s %s: rc %d, %d lines, want %d%s" % (
        name, " ".join(args), rc, len(got), len(want), (": " + err[-300:]) if err else ""))
    return len(want)


def filters(name, path, lines):
    evs = [ev for _, ev in lines]
    provs = {}
    for ev in evs:
        p = ev["System"]["Provider"]["Name"]
        provs[p] = provs.get(p, 0) + 1
    p = max(provs, key=provs.get)
    n = expect_lines(name, path, ["--provider", p.upper()], lines, lambda ev: ev["System"]["Provider"]["Name"] == p)
    check(n > 0, "%s: provider %s selects events" % (name, p))
    names = [ev["System"].get("EventName") for ev in evs if ev["System"].get("EventName")]
    en = max(set(names), key=names.count)
    expect_lines(name, path, ["--event", en.lower()], lines,
                 lambda ev: (ev["System"].get("EventName") or "").lower() == en.lower())
    eid = evs[-1]["System"]["EventID"]
    expect_lines(name, path, ["--event=%d" % eid], lines, lambda ev: ev["System"]["EventID"] == eid)
    pids = [ev["System"]["Execution"]["ProcessID"] for ev in evs if ev["System"]["Execution"]["ProcessID"] is not None]
    pid = max(set(pids), key=pids.count)
    expect_lines(name, path, ["--pid", "%d,999999999" % pid], lines,
                 lambda ev: ev["System"]["Execution"]["ProcessID"] == pid)
    expect_lines(name, path, ["--provider", p, "--pid", str(pid)], lines,
                 lambda ev: ev["System"]["Provider"]["Name"] == p and ev["System"]["Execution"]["ProcessID"] == pid)
    expect_lines(name, path, ["--provider", p, "--limit", "3"], lines,
                 lambda ev: ev["System"]["Provider"]["Name"] == p, limit=3)
    # time: relative seconds after the first event, and absolute ISO 8601
    ts = [ticks(ev["System"]["TimeCreated"]) for ev in evs]
    t0, span = ts[0], max(ts) - ts[0]
    a, b = span // 4, span * 3 // 4
    rel = ["--from", "%.7f" % (a / 1e7), "--to", "%.7f" % (b / 1e7)]
    expect_lines(name, path, rel, lines, lambda ev: t0 + a <= ticks(ev["System"]["TimeCreated"]) < t0 + b)
    lo, hi = sorted(ts)[len(ts) // 3], sorted(ts)[2 * len(ts) // 3]
    expect_lines(name, path, ["--from", iso(lo), "--to", iso(hi)], lines,
                 lambda ev: lo <= ticks(ev["System"]["TimeCreated"]) < hi)
    expect_lines(name, path, ["--to", iso(hi)], lines, lambda ev: ticks(ev["System"]["TimeCreated"]) < hi)
    return p, en


def csv_fields(name, path, lines, p, en):
    """One event type selected: one column per EventData field (the union, in first-seen order)."""
    sel = [ev for _, ev in lines if ev["System"]["Provider"]["Name"] == p and ev["System"].get("EventName") == en]
    keys = []
    for ev in sel:
        for k in (ev.get("EventData") or {}):
            if k not in keys:
                keys.append(k)
    rc, out, err = convert(path, "--format", "csv", "--provider", p, "--event", en)
    rows = list(csv.reader(io.StringIO(out)))
    common = "seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,ProcessID,ThreadID,ProcessName,Host,ProcessorID".split(",")
    head = [("EventData." + k if k in common else k) for k in keys]
    check(rc == 0 and rows and rows[0] == common + head, "%s csv one type: header %s, want %s" % (name, rows[:1], common + head))
    check(len(rows) == len(sel) + 1, "%s csv one type: %d rows, want %d" % (name, len(rows) - 1, len(sel)))
    bad = 0
    for row, ev in zip(rows[1:], sel):
        d = ev.get("EventData") or {}
        for i, k in enumerate(keys):
            v = d.get(k)
            cell = row[len(common) + i]
            if isinstance(v, (dict, list)):
                same = json.loads(cell) == v
            else:
                same = cell == ("" if v is None else guarded(v) if isinstance(v, str) else
                                "true" if v is True else "false" if v is False else str(v))
            if not same or row[0] != str(ev["seq"]):
                bad += 1
    check(bad == 0, "%s csv one type: %d cells differ from EventData" % (name, bad))
    # several types: the common columns and EventData as JSON
    rc, out, err = convert(path, "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    types = {(ev["System"]["Provider"]["Name"], ev["System"].get("EventName")) for _, ev in lines}
    if len(types) > 1:
        check(rows[0] == common + ["EventData"] and len(rows) == len(lines) + 1,
              "%s csv mixed: %s, %d rows" % (name, rows[0][-2:], len(rows) - 1))
        check(all(json.loads(r[-1]) == (ev.get("EventData") or json.loads(r[-1])) for r, (_, ev) in zip(rows[1:], lines)),
              "%s csv mixed: EventData column" % name)


def pairs(evs):
    """The mapping's start/stop pairs: Opcode 1 then Opcode 2, same provider, Task and ThreadID."""
    open_, n = {}, 0
    for ev in evs:
        s = ev["System"]
        key = (s["Provider"]["Name"], s["Task"], s["Execution"]["ThreadID"] or 0)
        if s["Opcode"] == 1:
            open_[key] = ev
        elif s["Opcode"] == 2 and key in open_:
            del open_[key]
            n += 1
    return n


def chrome(name, path, lines):
    evs = [ev for _, ev in lines]
    rc, out, err = convert(path, "--format", "chrome")
    try:
        doc = json.loads(out)
    except ValueError as e:
        check(False, "%s chrome: not JSON (%s): rc %d %s" % (name, e, rc, err[-300:]))
        return
    te = doc["traceEvents"]
    inst = [e for e in te if e["ph"] == "i"]
    xs = [e for e in te if e["ph"] == "X"]
    meta = [e for e in te if e["ph"] == "M"]
    check(rc == 0 and doc["displayTimeUnit"] == "ns" and doc["otherData"]["producer"] == "etwd"
          and os.path.basename(path) in doc["otherData"]["source"], "%s chrome: document members" % name)
    check(len(inst) == len(evs), "%s chrome: %d instants, want %d" % (name, len(inst), len(evs)))
    check(len(xs) == pairs(evs), "%s chrome: %d X events, want %d" % (name, len(xs), pairs(evs)))
    timed = [e for e in te if e["ph"] != "M"]
    check(all(a["ts"] <= b["ts"] for a, b in zip(timed, timed[1:])), "%s chrome: ts never decreases" % name)
    check(all(e["dur"] >= 0 for e in xs), "%s chrome: X dur >= 0" % name)
    check(all(isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["ts"] >= 0 for e in timed),
          "%s chrome: integer pid/tid, ts >= 0" % name)
    t0 = min(ticks(ev["System"]["TimeCreated"]) for ev in evs)
    by_seq = {e["args"]["seq"]: e for e in inst}
    bad = 0
    for ev in evs:
        e = by_seq.get(ev["seq"])
        s = ev["System"]
        want_name = s.get("EventName") or "%s/%d" % (s["Provider"]["Name"], s["EventID"])
        if (not e or e["name"] != want_name or e["cat"] != s["Provider"]["Name"]
                or abs(e["ts"] - (ticks(s["TimeCreated"]) - t0) / 10.0) > 1e-6
                or e["pid"] != (s["Execution"]["ProcessID"] or 0) or e["tid"] != (s["Execution"]["ThreadID"] or 0)
                or e["args"]["cpu"] != s["Execution"]["ProcessorID"]
                or any(e["args"].get(k) != v for k, v in (ev.get("EventData") or {}).items() if k not in ("seq", "cpu"))):
            bad += 1
    check(bad == 0, "%s chrome: %d instants differ from their events" % (name, bad))
    check(all(m["name"] in ("process_name", "thread_name") and isinstance(m["args"]["name"], str) for m in meta),
          "%s chrome: metadata events" % name)
    # filters apply to the chrome output too
    rc, out, err = convert(path, "--format", "chrome", "--limit", "7")
    check(rc == 0 and len([e for e in json.loads(out)["traceEvents"] if e["ph"] == "i"]) == min(7, len(evs)),
          "%s chrome --limit 7" % name)
    return len(xs), len(meta)


def usage():
    f = os.path.join(CORPUS, FILES[-1])
    for args in (["--from", "yesterday"], ["--limit", "0"], ["--format", "xml"], ["--pid", "x"], ["--to"]):
        rc, out, err = convert(f, *args)
        check(rc == 2 and "etwd convert:" in err, "usage %s: rc %d %s" % (args, rc, err[-200:]))


def main():
    total_x = total_m = 0
    for rel in FILES:
        path = os.path.join(CORPUS, rel)
        name = os.path.basename(path)
        rc, out, err = convert(path)
        check(rc == 0, "%s: unfiltered convert rc %d %s" % (name, rc, err[-300:]))
        lines = [(l, json.loads(l)) for l in out.splitlines()]
        p, en = filters(name, path, lines)
        csv_fields(name, path, lines, p, en)
        x, m = chrome(name, path, lines) or (0, 0)
        total_x += x
        total_m += m
    check(total_x > 0 and total_m > 0, "the corpus files give X events (%d) and metadata (%d)" % (total_x, total_m))
    usage()
    done()


if __name__ == "__main__":
    main()
