"""GET /api/v1/providers?q= matches event names too (as `trace-cmd list -e` does), through the real
binary over real TLS, against the truth read independently:
- linux: the kernel's tracefs directory (events/<system>/<event>/): a system is listed when its
  name or one of its events' names contains q (ASCII case ignored), and "matched_events" is
  exactly, sorted, its events that contain q (absent when none does);
- etl: the providers of the ETL files in the data directory (AMSITrace.etl: TraceLogging) and of
  the manifest directory (PowerShell's, Kernel-Process's), each one's events from
  GET /api/v1/providers/{name}: the same rule."""
import os
import shutil
import tempfile
import urllib.parse

from etwd_harness import Etwd, check, done, CORPUS, MANIFESTS

FILES = {"amsi.etl": "airbus-cert+etl-parser/tests/example/AMSITrace.etl",
         "ps.etl": "microsoft+krabsetw/examples/NativeExamples/powershell.etl"}
MANS = ["lilhoser+etwmanifests/manifests/26100.6899/Microsoft-Windows-PowerShell_a0c1853b-5c40-4b15-8766-3cf1c58f985a.xml",
        "lilhoser+etwmanifests/manifests/26100.6899/Microsoft-Windows-Kernel-Process_22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716.xml"]


def tracefs_events():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        ev = os.path.join(d, "events")
        if os.path.isdir(ev):
            out = {}
            for s in os.listdir(ev):
                p = os.path.join(ev, s)
                if os.path.isdir(p) and s != "ftrace":
                    out[s] = sorted(x for x in os.listdir(p) if os.path.isdir(os.path.join(p, x)))
            return out
    return None


def expected(catalogue, q):
    """{provider: sorted matched events or None}: the documented rule over @catalogue."""
    ql = q.lower()
    out = {}
    for name, evs in catalogue.items():
        m = sorted({e for e in evs if ql in e.lower()})
        if ql in name.lower() or m:
            out[name] = m or None
    return out


def listed(e, backend, q):
    st, h, j = e.json("GET", "/api/v1/providers?backend=%s&q=%s" % (backend, urllib.parse.quote(q)), token="reader")
    check(st == 200 and isinstance(j, list), "providers?q=%s (%s): %d %r" % (q, backend, st, str(j)[:300]))
    if st != 200:
        return {}
    return {p["name"]: (sorted(p["matched_events"]) if "matched_events" in p else None) for p in j}


def test_linux(e):
    cat = tracefs_events()
    check(cat is not None and "syscalls" in cat, "tracefs has the syscalls system")
    if not cat:
        return
    for q in ("openat", "OpenAt", "sched", "sched_switch", "etwd_no_such_event"):
        got, want = listed(e, "linux", q), expected(cat, q)
        check(got == want, "linux q=%s: %r, want %r" % (q, sorted(got.items())[:8], sorted(want.items())[:8]))
    got = listed(e, "linux", "openat")
    check(list(got) == ["syscalls"] and "sys_enter_openat" in (got.get("syscalls") or []),
          "linux q=openat: syscalls with sys_enter_openat (the review's example): %r" % got)


def test_etl(e):
    st, h, j = e.json("GET", "/api/v1/providers?backend=etl", token="reader", expect=200)
    cat = {}
    for p in j:
        st, h, d = e.json("GET", "/api/v1/providers/%s?backend=etl" % urllib.parse.quote(p["name"], safe=""),
                          token="reader", expect=200)
        cat[p["name"]] = [ev["name"] for ev in d.get("events", []) if ev.get("name")]
    check("AmsiTrace" in cat and "AmsiScript" in cat["AmsiTrace"], "etl: AmsiTrace and its AmsiScript event: %r" % cat)
    check(len(cat.get("Microsoft-Windows-PowerShell", [])) > 50, "etl: PowerShell's manifest events: %r" % list(cat))
    queries = {"script", "SCRIPT", "amsi", "Process", "etwd_no_such_event"}
    for evs in cat.values():  # a piece of every event name that its provider's name does not contain
        for ev in evs[:3]:
            queries.add(ev[1:-1] if len(ev) > 3 else ev)
    for q in sorted(queries):
        got, want = listed(e, "etl", q), expected(cat, q)
        check(got == want, "etl q=%s: %r, want %r" % (q, got, want))
    got = listed(e, "etl", "script")
    check(got.get("AmsiTrace") == ["AmsiScript"], "etl q=script: AmsiTrace by its event AmsiScript: %r" % got)


def main():
    data, mans = tempfile.mkdtemp(prefix="etwdps-"), tempfile.mkdtemp(prefix="etwdpsm-")
    for name, rel in FILES.items():
        shutil.copy(os.path.join(CORPUS, rel), os.path.join(data, name))
    for rel in MANS:
        shutil.copy(os.path.join(MANIFESTS, rel), mans)
    try:
        with Etwd(args=["--data-dir", data, "--manifests", mans]) as e:
            test_linux(e)
            test_etl(e)
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(mans, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
