"""A state directory whose path contains ':' (such as /tmp/a:b) works with the default --manifests,
STATE/manifests-next then STATE/manifests: the server built that search path by joining the two
with ':' and split it again at every ':', so uploads went to a directory relative to its working
directory ("b/manifests") and the decoder looked in the wrong places.

- etwd --state-dir WORK/st:ate starts; POST /api/v1/manifests stores the upload in
  STATE/manifests (nothing anywhere else), GET lists it, and a decode of gcevents.etl uses it
  (GCHeapStats v2 with the uploaded variant's field names).
- a manifest put in STATE/manifests-next wins over the upload (the default lists it first).
- an explicit --manifests gives a ':' inside a directory's name as "\\:" (said in --help)."""
import os
import shutil
import subprocess
import tempfile
import zipfile

from etwd_harness import Etwd, check, done, BIN
from test_manifests_list import GC_ZIP, MANIFESTS_NEXT, NEXT_MAN, TINY, heapstats, hexed, variant, write_variant


def decoded(e):
    return heapstats(e.ndjson("/api/v1/files/gc.etl/events", timeout=120))


def upload(e, name, body, where):
    st, _, d = e.request("POST", "/api/v1/manifests?name=" + name, body=body, ctype="application/xml")
    check(st == 201, "upload %s: %d %s" % (name, st, d[:200]))
    check(os.path.isfile(os.path.join(where, name)), "the upload %s is in %s: %r" % (name, where, os.listdir(os.path.dirname(where))))
    listed = [m["name"] for m in e.json("GET", "/api/v1/manifests", expect=200)[2]]
    check(listed == [name], "GET /api/v1/manifests lists the upload: %r" % listed)


def main():
    work = tempfile.mkdtemp(prefix="etwd-colon-")
    cwd = os.getcwd()
    os.chdir(work)  # the old server created its upload directory relative to here
    try:
        with zipfile.ZipFile(GC_ZIP) as z:
            gc = z.read([m for m in z.namelist() if m.endswith(".etl")][0])
        write_variant(os.path.join(work, "variant.man"))
        state = os.path.join(work, "st:ate")
        os.makedirs(state, mode=0o700)
        with Etwd(state=state) as e:
            upload(e, "variant.man", open(os.path.join(work, "variant.man"), "rb").read(),
                   os.path.join(state, "manifests"))
            e.json("POST", "/api/v1/files?name=gc.etl", body=gc, ctype="application/octet-stream", expect=201)
            got = decoded(e)
            check(variant(got), "the decode uses the uploaded manifest: %r" % got)
            os.makedirs(os.path.join(state, "manifests-next"), exist_ok=True)
            shutil.copy(os.path.join(MANIFESTS_NEXT, NEXT_MAN), os.path.join(state, "manifests-next", "clr.man"))
            got = decoded(e)
            check(hexed(got), "STATE/manifests-next wins over STATE/manifests: %r" % got)
        check(sorted(os.listdir(work)) == ["st:ate", "variant.man"], "nothing made outside the state directory: %r"
              % sorted(os.listdir(work)))

        mdir = os.path.join(work, "man:x")
        with Etwd(args=["--manifests", mdir.replace(":", "\\:")]) as e:
            upload(e, "tiny.man", TINY, mdir)
        check(not os.path.exists(os.path.join(work, "man")), "--manifests DIR\\:X is one directory")
        r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=60)
        check("\\:" in r.stdout, "--help says how to write a ':' in a --manifests directory")
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
