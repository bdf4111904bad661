"""Data-dir ETL files are opened without following symbolic links (security review, session 15).
The API refuses a link by lstat before it replays or decodes a file, but a link swapped in after
that check was followed by the ETL reader's open; now every server reader of a data-dir file opens
with O_NOFOLLOW (tests/unit/test_etl_nofollow.c checks the reader itself). Here, end to end:
- the provider catalog (GET /api/v1/providers?backend=etl) reads the data directory's .etl files
  with no lstat check before: a link to an ETL file outside was read (its provider listed); now
  it is not, while a regular copy still is;
- `etwd convert` (a local CLI on the user's own paths) still follows a link: same output as the
  file itself."""
import os
import shutil
import subprocess

from etwd_harness import BIN, CORPUS, Etwd, check, done

SMALL_ETL = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/"
                                 "SIH.20230422.034724.362.1.etl")


def catalog(place):
    """The etl providers a fresh server lists with SMALL_ETL placed in its data dir by @place."""
    with Etwd() as e:
        d = os.path.join(e.state, "files")
        os.makedirs(d, exist_ok=True)
        place(SMALL_ETL, os.path.join(d, "x.etl"))
        st, h, j = e.json("GET", "/api/v1/providers?backend=etl", token="reader")
        check(st == 200 and isinstance(j, list), "providers: %d %r" % (st, j))
        return {p["name"] for p in j} if isinstance(j, list) else set()


def test_catalog():
    copied = catalog(shutil.copy)
    linked = catalog(os.symlink)
    check("SIHTraceLogging" in copied, "a regular data-dir file's provider is listed: %s" % sorted(copied))
    check("SIHTraceLogging" not in linked, "a link in the data dir is not read by the catalog: %s" % sorted(linked))


def test_convert_follows():
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "etwd-nofollow-%d" % os.getpid())
    os.makedirs(d, exist_ok=True)
    link = os.path.join(d, "link.etl")
    os.symlink(SMALL_ETL, link)
    try:
        a = subprocess.run([BIN, "convert", SMALL_ETL], capture_output=True, timeout=120)
        b = subprocess.run([BIN, "convert", link], capture_output=True, timeout=120)
        check(a.returncode == 0 and a.stdout, "convert the file: rc %d %r" % (a.returncode, a.stderr[-300:]))
        check(b.returncode == 0 and b.stdout == a.stdout,
              "convert follows a link (the user's own path): rc %d %r" % (b.returncode, b.stderr[-300:]))
    finally:
        os.unlink(link)
        os.rmdir(d)


def main():
    test_catalog()
    test_convert_follows()
    done()


main()
