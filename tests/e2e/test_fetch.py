"""scripts/fetch-corpus.sh (issue 24): the ETL test data fetched from its pinned sources, here from
a local mirror (ETWD_FETCH_MIRROR, the folder that holds corpus/ and manifests/, by default the one
the tests use), so the checksums and the layout are tested without network: every file of
tests/data-sources.txt arrives byte for byte; a corrupted mirror file is refused (exit 1, named,
not written) while the others arrive; a damaged file already in place is replaced; an ETL test
without data fails at once and says how to get it."""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from etwd_harness import check, done, SRC, CORPUS, MANIFESTS

FETCH = os.path.join(SRC, "scripts/fetch-corpus.sh")


def sources():
    out = []
    with open(os.path.join(SRC, "tests/data-sources.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                sha, size, rel, url = line.split()
                out.append((sha, int(size), rel, url))
    return out


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetch(dest, mirror):
    return subprocess.run([FETCH, dest], env=dict(os.environ, ETWD_FETCH_MIRROR=mirror),
                          capture_output=True, text=True, timeout=300)


def main():
    mirror = os.environ.get("ETWD_FETCH_MIRROR") or os.path.dirname(os.path.abspath(CORPUS))
    check(os.path.dirname(os.path.abspath(MANIFESTS)) == mirror or "ETWD_FETCH_MIRROR" in os.environ,
          "corpus and manifests are not in one folder: set ETWD_FETCH_MIRROR")
    src = sources()
    check(len(src) >= 40, "tests/data-sources.txt lists only %d files" % len(src))
    for s, size, rel, url in src:
        check(url.startswith("https://github.com/") and "/raw/" in url, "%s: not a pinned GitHub URL: %s" % (rel, url))
        check(rel.split("/")[0] in ("corpus", "manifests", "manifests-next"),
              "%s: not under corpus/, manifests/ or manifests-next/" % rel)
    work = tempfile.mkdtemp(prefix="etwd-fetch-")
    try:
        # 1. a good mirror: every file arrives with its checksum and size
        dest = os.path.join(work, "good")
        r = fetch(dest, mirror)
        check(r.returncode == 0, "fetch from %s failed: %s" % (mirror, r.stderr))
        for s, size, rel, url in src:
            p = os.path.join(dest, rel)
            check(os.path.isfile(p) and os.path.getsize(p) == size and sha(p) == s, "%s did not arrive intact" % rel)
        # a damaged file already in place is fetched again; the good ones are kept
        victim = next(rel for s, size, rel, url in src if rel.endswith("smallEtlFile.etl"))
        with open(os.path.join(dest, victim), "r+b") as f:
            f.write(b"X")
        r = fetch(dest, mirror)
        check(r.returncode == 0 and "(1 fetched" in r.stderr, "re-fetch: %s" % r.stderr)
        check(sha(os.path.join(dest, victim)) == next(s for s, _, rel, _ in src if rel == victim),
              "the damaged file was not replaced")
        # 2. a corrupted mirror (symlinks to the good one, one file altered): refused
        bad = os.path.join(work, "badmirror")
        for s, size, rel, url in src:
            os.makedirs(os.path.dirname(os.path.join(bad, rel)), exist_ok=True)
            os.symlink(os.path.join(mirror, rel), os.path.join(bad, rel))
        os.unlink(os.path.join(bad, victim))
        with open(os.path.join(mirror, victim), "rb") as f:
            data = bytearray(f.read())
        data[100] ^= 1
        with open(os.path.join(bad, victim), "wb") as f:
            f.write(data)
        dest2 = os.path.join(work, "fromBad")
        r = fetch(dest2, bad)
        check(r.returncode == 1, "a corrupted mirror file was accepted (exit %d)" % r.returncode)
        check("SHA-256 mismatch" in r.stderr and victim in r.stderr, "no clear refusal: %s" % r.stderr)
        check(not os.path.exists(os.path.join(dest2, victim)), "the corrupted file was written")
        check(len([1 for _, _, rel, _ in src if os.path.isfile(os.path.join(dest2, rel))]) == len(src) - 1,
              "the other files did not arrive")
        # 3. without data an ETL test fails at once with a message that says how to get it
        env = dict(os.environ, ETWD_CORPUS=os.path.join(work, "none/corpus"),
                   ETWD_MANIFESTS=os.path.join(work, "none/manifests"))
        r = subprocess.run([sys.executable, os.path.join(SRC, "tests/e2e/test_files.py")], env=env,
                           capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and "scripts/fetch-corpus.sh" in r.stderr,
              "an ETL test without data did not fail with the fetch hint: rc %d %s" % (r.returncode, r.stderr[-500:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
