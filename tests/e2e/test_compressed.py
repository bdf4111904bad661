"""Compressed inputs (issue 24): `etwd convert` takes the corpus's .etl.zip and .etlgz files (and
a .gz) and writes exactly what converting the unpacked .etl writes (ndjson; Chrome JSON names the
file inside); a damaged archive is a clear error and no temporary file is left. POST
/api/v1/files with a gzip or zip body stores the decompressed .etl (downloaded byte-identical);
a body that decompresses beyond --max-upload (a zip bomb, a gzip bomb) is 413 and leaves nothing;
a damaged archive is 400."""
import glob
import gzip
import io
import os
import shutil
import subprocess
import tempfile
import zipfile

from etwd_harness import Etwd, check, done, BIN, CORPUS

ZIPS = sorted(glob.glob(os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/*.etl.zip")))
ETLGZ = sorted(glob.glob(os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/**/*.etlgz"), recursive=True))


def unpacked(path):
    """(name inside, bytes) of a corpus archive, unpacked by Python's own zipfile/gzip."""
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            n = [i for i in z.namelist() if i.lower().endswith(".etl")][0]
            return os.path.basename(n), z.read(n)
    with gzip.open(path) as g:
        return os.path.basename(path)[:-len("gz")], g.read()


def convert(tmpdir, *args):
    env = dict(os.environ, TMPDIR=tmpdir)
    return subprocess.run([BIN, "convert", "--quiet"] + list(args), capture_output=True, env=env, timeout=300)


def main():
    check(len(ZIPS) == 3 and len(ETLGZ) == 2, "corpus archives: %r %r" % (ZIPS, ETLGZ))
    work = tempfile.mkdtemp(prefix="etwd-compressed-")
    scratch = os.path.join(work, "tmp")
    os.mkdir(scratch)
    try:
        inputs = []
        for a in ZIPS + ETLGZ:
            name, data = unpacked(a)
            plain = os.path.join(work, name)
            with open(plain, "wb") as f:
                f.write(data)
            inputs.append((a, plain))
        # a .gz made here of the smallest zip's .etl
        gz = os.path.join(work, "primitive-types.etl.gz")
        with open(os.path.join(work, "primitive-types.etl"), "rb") as f, gzip.open(gz, "wb") as g:
            g.write(f.read())
        inputs.append((gz, os.path.join(work, "primitive-types.etl")))
        for a, plain in inputs:
            want, got = convert(scratch, plain), convert(scratch, a)
            check(want.returncode == 0 and got.returncode == 0,
                  "convert %s: %d/%d %r" % (a, want.returncode, got.returncode, got.stderr[-500:]))
            check(want.stdout == got.stdout and want.stdout.count(b"\n") > 0,
                  "convert %s differs from the unpacked file (%d vs %d bytes)" % (a, len(got.stdout), len(want.stdout)))
        want = convert(scratch, "--format", "chrome", inputs[2][1])
        got = convert(scratch, "--format", "chrome", inputs[2][0])
        check(want.returncode == 0 and want.stdout == got.stdout, "chrome output of %s differs" % inputs[2][0])
        # damaged archives: a clear error, exit 1
        bad = os.path.join(work, "bad.etlgz")
        with open(ETLGZ[0], "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        r = convert(scratch, bad)
        check(r.returncode == 1 and b"bad.etlgz" in r.stderr and b"gzip" in r.stderr, "damaged gzip: %d %r" % (r.returncode, r.stderr))
        badzip = os.path.join(work, "bad.zip")
        with open(ZIPS[0], "rb") as f:
            data = f.read()
        with open(badzip, "wb") as f:
            f.write(data[:200])
        r = convert(scratch, badzip)
        check(r.returncode == 1 and b"bad.zip" in r.stderr, "damaged zip: %d %r" % (r.returncode, r.stderr))
        check(os.listdir(scratch) == [], "temporary files left: %r" % os.listdir(scratch))

        # uploads
        plain_small = open(inputs[2][1], "rb").read()  # primitive-types.etl, 16 KiB
        with Etwd(args=["--max-upload", "100000"]) as e:
            oct_ = "application/octet-stream"
            for n, body in (("z.etl", open(ZIPS[2], "rb").read()), ("g.etl", open(gz, "rb").read())):
                st, _, j = e.json("POST", "/api/v1/files?name=" + n, body=body, ctype=oct_)
                check(st == 201 and j.get("size") == len(plain_small), "upload %s: %d %r" % (n, st, j))
                st, _, d = e.request("GET", "/api/v1/files/" + n)
                check(st == 200 and d == plain_small, "download of %s is not the unpacked file" % n)
            for n, a, plain in (("cld.etl", inputs[3][0], inputs[3][1]),):
                st, _, j = e.json("POST", "/api/v1/files?name=" + n, body=open(a, "rb").read(), ctype=oct_)
                check(st == 201, "upload of %s: %d %r" % (a, st, j))
                st, _, d = e.request("GET", "/api/v1/files/" + n)
                check(d == open(plain, "rb").read(), "download of %s differs" % n)
            # bombs: a few hundred bytes that decompress beyond --max-upload
            zb = io.BytesIO()
            with zipfile.ZipFile(zb, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("bomb.etl", b"\0" * 5000000)
            gb = gzip.compress(b"\0" * 5000000)
            check(len(zb.getvalue()) < 100000 and len(gb) < 100000, "the bombs are small")
            for n, body in (("zb.etl", zb.getvalue()), ("gb.etl", gb)):
                st, _, j = e.json("POST", "/api/v1/files?name=" + n, body=body, ctype=oct_)
                check(st == 413 and "decompressed" in j.get("detail", ""), "bomb %s: %d %r" % (n, st, j))
            st, _, j = e.json("POST", "/api/v1/files?name=bad.etl", body=open(bad, "rb").read(), ctype=oct_)
            check(st == 400 and "gzip" in j.get("detail", ""), "damaged gzip upload: %d %r" % (st, j))
            st, _, j = e.json("GET", "/api/v1/files")
            names = sorted(f["name"] for f in (j if isinstance(j, list) else j.get("files", [])))
            check(names == ["cld.etl", "g.etl", "z.etl"], "files after the uploads: %r" % names)
            left = [f for f in os.listdir(os.path.join(e.state, "files")) if f.startswith(".")]
            check(left == [], "temporary upload files left: %r" % left)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
