"""`etwd convert` of several .etl files recorded side by side (issue 25 items 2 and 3), and the
manifests search path with ../shared/manifests-next (item 5).

Names (item 2): a merged conversion names every event as the conversion of its own file alone
does, whatever the order of the files and of their records. The corpus has no set of files from
one recording, so the diagnostics-hub case is rebuilt from corpus bytes: a "kernel" part-file
that carries only KernelTraceControl MetaData records (the 85 EventInfo / EventMapInfo blobs of
net.4.5.2.x64.etl, copied byte for byte, among them the CLR Runtime and Rundown schemas that name
events `GarbageCollection/Start`, `CLRLoaderRundown/ModuleDCEnd`, …), recorded just before the
user-mode CLR files gcevents.etl and smallEtlFile.etl. With --manifests the CLR events take the
manifest's names (`GC/Start`, `Loader/ModuleDCStop`) alone and merged, in both orders.

Clocks (item 3): files of one boot (same BootTime and QPC frequency) are aligned on their raw
QPC values, not on each header's StartTime; other files keep their own header's alignment, and
the summary says which. Built from a corpus file and copies of it whose header fields are
rewritten in a temp dir (StartTime moved by some µs while the raw QPC values stay, or a copy
from another boot).
"""
import base64
import collections
import datetime
import json
import os
import struct
import subprocess
import tempfile
import zipfile

from etl_synth import classic_record, header_record, packed_buffer
from etwd_harness import check, done, BIN, CORPUS, MANIFESTS

INPUTS = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs")
SMALL = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl")
KTC_METADATA = "{bbccf6c1-6cd1-48c4-80ff-839482e37671}"
CLR = ("{e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}", "{a669021c-c450-4609-a035-5af59af4df18}")
EPOCH = datetime.datetime(1601, 1, 1, tzinfo=datetime.timezone.utc)


def convert(args, want_rc=0):
    r = subprocess.run([BIN, "convert"] + args, capture_output=True, timeout=600)
    check(r.returncode == want_rc, "convert %r: exit %d %s" % (args, r.returncode, r.stderr[-400:]))
    return r


def events(args):
    return [json.loads(l) for l in convert(["--quiet"] + args).stdout.splitlines()]


def unzip(name, d):
    with zipfile.ZipFile(os.path.join(INPUTS, name)) as z:
        n = [m for m in z.namelist() if m.endswith(".etl")][0]
        p = os.path.join(d, os.path.basename(n))
        with open(p, "wb") as f:
            f.write(z.read(n))
    return p


def filetime(iso):
    """'2023-03-14T00:46:36.6946549Z' -> FILETIME (100 ns since 1601)."""
    s, frac = iso.rstrip("Z").split(".")
    t = datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return ((t - EPOCH).days * 86400 + (t - EPOCH).seconds) * 10**7 + int(frac.ljust(7, "0"))


def write_etl(path, start_ft, boot_ft, records, t0=1000, freq=10**7):
    """A minimal uncompressed 64-bit ETL file: the header buffer (SYSTEM64 logfile header record,
    QPC clock) and one buffer of FULL64 classic records [(ts, guid bytes, opcode, payload)]."""
    body = b"".join(classic_record(ts, guid, opcode, payload) for ts, guid, opcode, payload in records)
    with open(path, "wb") as f:
        f.write(packed_buffer(header_record(t0, boot_ft, start_ft, freq), 0) + packed_buffer(body, 1))


def guid_bytes(g):
    import uuid
    return uuid.UUID(g.strip("{}")).bytes_le


def names(evs):
    c = collections.Counter()
    for e in evs:
        s = e["System"]
        c[(s["Provider"].get("Guid") or s["Provider"].get("Name"), s.get("EventName"), s["EventID"], s["Version"])] += 1
    return c


def test_names(d):
    net = unzip("net.4.5.2.x64.etl.zip", d)
    gc = unzip("gcevents.etl.zip", d)
    blobs = [e for e in events([net, "--provider", "KernelTraceControl", "--event",
                                "MetaData/EventInfo,MetaData/EventMapInfo"])]
    check(len(blobs) == 85, "net.4.5.2.x64 carries 85 MetaData blobs: %d" % len(blobs))
    clr_blobs = sum(1 for e in blobs if e["EventData"].get("ProviderGuid") in CLR)
    check(clr_blobs > 40, "among them the CLR schemas: %d" % clr_blobs)
    recs = [(1000 + 10 * (i + 1), guid_bytes(KTC_METADATA), e["System"]["Opcode"], base64.b64decode(e["EventData"]["Blob"]))
            for i, e in enumerate(blobs)]
    cases = []
    for label, clr in (("gcevents", gc), ("smallEtlFile", SMALL)):
        first = events([clr, "--limit", "1"])[0]["System"]["TimeCreated"]
        meta = os.path.join(d, "kernel-%s.etl" % label)
        start = filetime(first) - 10**7  # one second before the user-mode file's session starts
        write_etl(meta, start, start - 3600 * 10**7, recs)
        cases.append((label, clr, meta))
    singles = {}
    for _, clr, meta in cases:
        for f in (clr, meta):
            singles[f] = names(events([f, "--manifests", MANIFESTS]))
    for label, clr, meta in cases:
        clr_names = {k[1] for k in singles[clr] if k[0] in CLR}
        check(clr_names and not any(n.startswith(("GarbageCollection/", "CLRLoaderRundown/")) for n in clr_names),
              "%s alone: the manifest's names %s" % (label, sorted(clr_names)))
        for order in ((meta, clr), (clr, meta)):
            evs = events(list(order) + ["--manifests", MANIFESTS])
            got, want = names(evs), singles[clr] + singles[meta]
            diff = {k: (want[k], got[k]) for k in set(got) | set(want) if got[k] != want[k]}
            check(not diff, "%s merged with the metadata file (%s first): every event named as alone; "
                  "differences (alone, merged): %s" % (label, os.path.basename(order[0]), sorted(diff.items())[:6]))
            check(evs[0]["System"]["Provider"]["Name"] == "Windows Kernel" and
                  any(e["System"].get("EventName") == "MetaData/EventInfo" for e in evs[:90]),
                  "%s: the metadata file's blobs come before the CLR events" % label)
    # all four files in one merge, both orders; and --decode reference gives the same bytes
    files = [cases[0][1], cases[0][2], cases[1][1], cases[1][2]]
    want = sum((singles[f] for f in files), collections.Counter())
    for fl in (files, files[::-1]):
        got = names(events(fl + ["--manifests", MANIFESTS]))
        check(got == want, "4 files merged (%s first): every event named as alone" % os.path.basename(fl[0]))
    fast = convert(["--quiet"] + files + ["--manifests", MANIFESTS]).stdout
    ref = convert(["--quiet"] + files + ["--manifests", MANIFESTS, "--decode", "reference"]).stdout
    check(fast == ref and len(fast) > 1000, "4 files merged: fast and reference decode the same bytes")


def rewrite_header(src, dst, start=0, t0=0, boot=0):
    """A copy of @src whose logfile header has StartTime += @start and BootTime += @boot (100 ns
    ticks) and whose header record's raw timestamp (T0) += @t0; every other byte (every other
    record's raw QPC value) unchanged."""
    b = bytearray(open(src, "rb").read())
    rec = 0x48
    is64 = b[rec + 2] == 2
    body = rec + 0x20
    o = body + (0x48 if is64 else 0x40) + 176
    for off, add in ((rec + 0x10, t0), (o, boot), (o + 16, start)):
        struct.pack_into("<Q", b, off, struct.unpack_from("<Q", b, off)[0] + add)
    with open(dst, "wb") as f:
        f.write(b)


def key(e):
    s = e["System"]
    return (s["TimeCreated"], s["Provider"].get("Name"), s.get("EventName"), s["EventID"], s["Execution"]["ThreadID"])


def is_header(e):
    return e["System"]["Provider"].get("Name") == "Windows Kernel" and e["System"].get("EventName") == "EventTrace"


def test_clocks(d):
    for src in (os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl"), SMALL):
        name = os.path.basename(src)
        a = events([src])
        hdr = a[0]["EventData"]
        freq = hdr["PerfFreq"]
        check(len(a) > 1 and hdr["ReservedFlags"] == 1, "%s: QPC clock, %d events" % (name, len(a)))
        # one boot, same raw QPC values, StartTime 35.2 µs off (the headers disagreeing)
        b = os.path.join(d, "b-" + name)
        rewrite_header(src, b, start=352)
        # one boot, started 1 s later on the same counter, StartTime 4.8 µs off
        c = os.path.join(d, "c-" + name)
        rewrite_header(src, c, start=10**7 + 48, t0=freq)
        # another boot (BootTime differs), else as b: its own header aligns it
        x = os.path.join(d, "x-" + name)
        rewrite_header(src, x, start=352, boot=1)
        want = collections.Counter(key(e) for e in a if not is_header(e))
        for files in ((src, b), (b, src), (c, src), (src, c, b)):
            m = events(list(files))
            got = collections.Counter(key(e) for e in m if not is_header(e))
            check(got == collections.Counter({k: v * len(files) for k, v in want.items()}),
                  "%s: %s merged: every event at the time of the original's (raw QPC alignment)" %
                  (name, [os.path.basename(f)[:2] for f in files]))
        r = convert([src, c, x])
        err = r.stderr.decode()
        check("aligned on the raw timestamps with %s's header: %s %s" % (src, src, c) in err and
              "no clock shared with another input, aligned by its own header's StartTime: %s" % x in err,
              "%s: the summary says how the clocks were aligned: %r" % (name, err))
        m = [json.loads(l) for l in r.stdout.splitlines()]
        shifted = collections.Counter()
        for k, v in want.items():
            iso = k[0]
            ft = filetime(iso) + 352
            shifted[(iso_of(ft),) + k[1:]] += v
        got = collections.Counter(key(e) for e in m if not is_header(e))
        check(got == want + want + shifted, "%s: the file of another boot keeps its header's alignment (+35.2 µs)" % name)
        check(convert(["--quiet", src, c, x]).stdout == convert(["--quiet", src, c, x, "--decode", "reference"]).stdout,
              "%s: merged, fast and reference decode the same bytes" % name)


def iso_of(ft):
    t = EPOCH + datetime.timedelta(seconds=ft // 10**7)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%07dZ" % (ft % 10**7)


MANIFESTS_NEXT = os.environ.get("ETWD_MANIFESTS_NEXT") or os.path.join(os.path.dirname(os.path.abspath(MANIFESTS)),
                                                                       "manifests-next")
NEW_GC = {(4, 2), (10, 4), (205, 4), (208, 0), (209, 0)}  # what only manifests-next / built-ins know


def test_manifests_next(d):
    """Issue 25 item 5: --manifests takes a search path, manifests-next first; the built-in
    schemas decode the .NET 5+ GC events of gcevents.etl without any manifest."""
    check(os.path.isfile(os.path.join(MANIFESTS_NEXT, "dotnet+runtime/src/coreclr/vm/ClrEtwAll.man")),
          "manifests-next at %s (ETWD_MANIFESTS_NEXT; scripts/fetch-corpus.sh)" % MANIFESTS_NEXT)
    gc = os.path.join(d, "PerfViewData.etl")
    if not os.path.exists(gc):
        gc = unzip("gcevents.etl.zip", d)
    both = events([gc, "--manifests", MANIFESTS_NEXT + ":" + MANIFESTS])
    main = events([gc, "--manifests", MANIFESTS])
    bare = events([gc])
    nxt = events([gc, "--manifests", MANIFESTS_NEXT])
    check(len(both) == len(main) == len(bare) == len(nxt) == 71, "gcevents: 71 events each way")
    clr = [i for i, e in enumerate(both) if e["System"]["Provider"]["Guid"] == CLR[0]]
    check(len(clr) == 69 and all("EventData" in both[i] for i in clr),
          "manifests-next:manifests: every CLR event of gcevents decoded")
    for i in clr:
        check(both[i] == nxt[i], "event %d: the search path decodes as manifests-next (its schemas first)" % i)
    hs = [both[i] for i in clr if (both[i]["System"]["EventID"], both[i]["System"]["Version"]) == (4, 2)]
    check(len(hs) == 2 and all(str(e.get("EventData", {}).get("GenerationSize4")).startswith("0x") for e in hs),
          "GCHeapStats v2: GenerationSize4 as manifests-next's HexInt64: %r" % [e.get("EventData", {}).get("GenerationSize4") for e in hs])
    n = 0
    for a, b, m in zip(bare, both, main):
        k = (a["System"]["EventID"], a["System"]["Version"])
        if a["System"]["Provider"]["Guid"] != CLR[0] or k not in NEW_GC:
            continue
        n += 1
        check(a.get("EventData") == b.get("EventData") == m.get("EventData") and a["System"]["EventName"] == b["System"]["EventName"],
              "%r without manifests (built in) decodes as with the manifests: %r / %r" % (k, a.get("EventData", a.get("Undecoded")), b.get("EventData")))
    check(n == 18, "gcevents: 18 events of the built-in layouts (GCHeapStats v2, GCAllocationTick v4, "
          "GCGlobalHeapHistory v4, GCLOHCompact, GCFitBucketInfo): %d" % n)
    for args in ([gc], [gc, "--manifests", MANIFESTS_NEXT + ":" + MANIFESTS]):
        check(convert(["--quiet"] + args).stdout == convert(["--quiet", "--decode", "reference"] + args).stdout,
              "%r: fast and reference decode the same bytes" % args[1:])
    # a missing or empty element of the search path is skipped
    again = events([gc, "--manifests", ":" + os.path.join(d, "none") + ":" + MANIFESTS_NEXT + "::" + MANIFESTS])
    check(again == both, "a missing directory and empty elements in the search path are skipped")


def main():
    with tempfile.TemporaryDirectory(prefix="etwdmerge-") as d:
        test_names(d)
        test_clocks(d)
        test_manifests_next(d)
    done()


if __name__ == "__main__":
    main()
