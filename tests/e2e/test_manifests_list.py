"""The server's --manifests is a search path like `etwd convert --manifests A:B` (issue 25 item 5):
the first directory listed wins, uploads (POST /api/v1/manifests) and the manifest list go to the
last one, and the default is STATE/manifests-next:STATE/manifests, both installed by
scripts/fetch-manifests.sh (here from a local mirror, ETWD_FETCH_MIRROR, as test_fetch_manifests).

A is a directory with a variant of manifests-next's ClrEtwAll.man (GCHeapStats v2's
GenerationSize4 as a decimal UInt64 instead of HexInt64, TotalPromotedSize4 renamed
TotalPromotedSizePOH); B holds the unchanged manifests-next and the older copies (symlinks).
- etwd --manifests A:B decodes gcevents' two GCHeapStats v2 events with A's type and name (as
  `etwd convert --manifests A:B`), --manifests B:A with B's (hex, TotalPromotedSize4); an upload
  lands in the last directory (listed by GET), nothing in the other (the old server made a
  directory named "A:B").
- fetch-manifests.sh installs STATE/manifests-next next to STATE/manifests (SHA-256 each); with the
  variant added under STATE/manifests-next an etwd without --manifests decodes with it (the
  default lists manifests-next first) and stores uploads in STATE/manifests.
- a --manifests that names no directory (":") is refused at start."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import zipfile

from etwd_harness import Etwd, check, done, BIN, SRC, CORPUS, MANIFESTS
from test_fetch import sources as fetch_sources

MANIFESTS_NEXT = os.environ.get("ETWD_MANIFESTS_NEXT") or os.path.join(os.path.dirname(os.path.abspath(MANIFESTS)),
                                                                       "manifests-next")
GC_ZIP = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/gcevents.etl.zip")
CLR = "{e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}"
NEXT_MAN = "dotnet+runtime/src/coreclr/vm/ClrEtwAll.man"
TINY = (b'<?xml version="1.0"?><instrumentationManifest xmlns="http://schemas.microsoft.com/win/2004/08/events">'
        b'<instrumentation><events><provider name="Etwd-Test-List" guid="{6a1e0c52-9d3e-4b7a-8c11-2f0e5d7a9b31}" '
        b'symbol="T" resourceFileName="t" messageFileName="t"><events><event value="1" version="0" level="win:Informational"/>'
        b'</events></provider></events></instrumentation></instrumentationManifest>')


def heapstats(evs):
    """EventData of the CLR GCHeapStats v2 events (id 4, version 2)"""
    return [e.get("EventData") for e in evs if "System" in e and e["System"]["Provider"].get("Guid") == CLR
            and (e["System"]["EventID"], e["System"]["Version"]) == (4, 2)]


def convert(gc, mdirs):
    r = subprocess.run([BIN, "convert", "--quiet", gc, "--manifests", mdirs], capture_output=True, timeout=300)
    check(r.returncode == 0, "convert --manifests %s: exit %d" % (mdirs, r.returncode))
    return heapstats(json.loads(l) for l in r.stdout.splitlines())


def served(e, gc):
    e.json("POST", "/api/v1/files?name=gc.etl", body=open(gc, "rb").read(), ctype="application/octet-stream", expect=201)
    return heapstats(e.ndjson("/api/v1/files/gc.etl/events", timeout=120))


def hexed(hs):
    """B's schema (manifests-next): both sizes HexInt64"""
    return len(hs) == 2 and all(str(h.get("GenerationSize4", "")).startswith("0x")
                                and str(h.get("TotalPromotedSize4", "")).startswith("0x") for h in hs)


def variant(hs):
    """A's schema: GenerationSize4 a number, TotalPromotedSize4 renamed"""
    return len(hs) == 2 and all(isinstance(h.get("GenerationSize4"), int) and "TotalPromotedSizePOH" in h
                                and "TotalPromotedSize4" not in h for h in hs)


def write_variant(path):
    man = open(os.path.join(MANIFESTS_NEXT, NEXT_MAN), encoding="utf-8").read()
    a = '<data name="GenerationSize4" inType="win:UInt64" outType="win:HexInt64" />'
    b = '<data name="TotalPromotedSize4" inType="win:UInt64" outType="win:HexInt64" />'
    check(man.count(a) == 1 and man.count(b) == 1, "manifests-next's GCHeapStats_V2 fields as expected")
    man = man.replace(a, '<data name="GenerationSize4" inType="win:UInt64" />')
    man = man.replace(b, '<data name="TotalPromotedSizePOH" inType="win:UInt64" outType="win:HexInt64" />')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w", encoding="utf-8").write(man)


def upload(e, where, other):
    st, _, body = e.request("POST", "/api/v1/manifests?name=tiny.man", body=TINY, ctype="application/xml")
    check(st == 201, "upload: %d %s" % (st, body[:200]))
    check(os.path.isfile(os.path.join(where, "tiny.man")), "the upload is in the last directory %s" % where)
    check(not os.path.exists(os.path.join(other, "tiny.man")), "nothing uploaded into the first directory")
    listed = [m["name"] for m in e.json("GET", "/api/v1/manifests", expect=200)[2]]
    mine = sorted(f for f in os.listdir(where) if f.endswith(".man"))
    check("tiny.man" in listed and sorted(listed) == mine, "GET /api/v1/manifests lists the last directory: %r" % listed)


def main():
    check(os.path.isfile(os.path.join(MANIFESTS_NEXT, NEXT_MAN)), "manifests-next at %s" % MANIFESTS_NEXT)
    work = tempfile.mkdtemp(prefix="etwd-mlist-")
    try:
        with zipfile.ZipFile(GC_ZIP) as z:
            n = [m for m in z.namelist() if m.endswith(".etl")][0]
            gc = os.path.join(work, "gcevents.etl")
            open(gc, "wb").write(z.read(n))
        a, b = os.path.join(work, "A"), os.path.join(work, "B")
        write_variant(os.path.join(a, "variant.man"))
        os.makedirs(b)
        os.symlink(os.path.abspath(MANIFESTS), os.path.join(b, "main"))  # uploads must not reach ../shared
        os.symlink(os.path.abspath(MANIFESTS_NEXT), os.path.join(b, "next"))
        want = convert(gc, a + ":" + b)
        check(variant(want) and hexed(convert(gc, b + ":" + a)),
              "convert: the first directory's GCHeapStats v2 schema wins: %r" % want)
        for first, last, ok in ((a, b, variant), (b, a, hexed)):
            with Etwd(args=["--manifests", first + ":" + last]) as e:
                got = served(e, gc)
                check(ok(got), "etwd --manifests %s:%s: GCHeapStats v2 decoded with %s's schema: %r"
                      % (os.path.basename(first), os.path.basename(last), os.path.basename(first), got))
                if first == a:
                    check(got == want, "etwd --manifests A:B decodes as etwd convert --manifests A:B")
                upload(e, last, first)
                if os.path.exists(os.path.join(last, "tiny.man")):
                    os.unlink(os.path.join(last, "tiny.man"))
            check(not os.path.exists(first + ":" + last), "no directory named after the whole search path")

        # fetch-manifests.sh installs both directories; the default --manifests uses them
        state = os.path.join(work, "state")
        mirror = os.environ.get("ETWD_FETCH_MIRROR") or os.path.dirname(os.path.abspath(MANIFESTS))
        env = dict(os.environ, ETWD_FETCH_MIRROR=mirror)
        env.pop("ETWD_STATE_DIR", None)
        r = subprocess.run([os.path.join(SRC, "scripts/fetch-manifests.sh"), state], env=env, capture_output=True,
                           text=True, timeout=300)
        check(r.returncode == 0, "fetch-manifests: rc %d %s" % (r.returncode, r.stderr))
        for sha, size, rel, _ in fetch_sources():
            if rel.startswith(("manifests/", "manifests-next/")):
                p = os.path.join(state, rel)
                check(os.path.isfile(p) and hashlib.sha256(open(p, "rb").read()).hexdigest() == sha,
                      "%s installed intact" % rel)
        check(os.path.isfile(os.path.join(state, "manifests-next", NEXT_MAN)), "manifests-next installed")
        write_variant(os.path.join(state, "manifests-next", "aa-test", "variant.man"))  # sorts before dotnet+runtime
        with Etwd(state=state) as e:
            got = served(e, gc)
            check(got == want, "default --manifests (STATE/manifests-next:STATE/manifests) reads manifests-next first: %r"
                  % got)
            upload(e, os.path.join(state, "manifests"), os.path.join(state, "manifests-next"))

        r = subprocess.run([BIN, "--state-dir", os.path.join(work, "s2"), "--manifests", ":"], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 2 and "--manifests" in r.stderr, "--manifests ':' refused: %d %s" % (r.returncode, r.stderr))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
