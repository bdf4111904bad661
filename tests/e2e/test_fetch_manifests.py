"""scripts/fetch-manifests.sh (issue 24): the provider manifests of tests/data-sources.txt (pinned
source and SHA-256 each, licence files included) installed into a state directory's manifests
folder, here from a local mirror (ETWD_FETCH_MIRROR, the folder holding manifests/), so the
checksums and the layout are tested without network: every manifests/ entry arrives byte for byte
and nothing of the corpus; a new state directory is private (0700); ETWD_STATE_DIR is the default
destination; a corrupted mirror file is refused (exit 1, named, not written). Then an etwd started
on that state directory (no --manifests: its default STATE/manifests) decodes the krabsetw
PowerShell trace completely — 112 events named, none undecoded."""
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile

from etwd_harness import Etwd, check, done, SRC, CORPUS, MANIFESTS
from test_fetch import sources as fetch_sources

FETCH = os.path.join(SRC, "scripts/fetch-manifests.sh")
PS_ETL = os.path.join(CORPUS, "microsoft+krabsetw/examples/NativeExamples/powershell.etl")
PS_GUID = "{a0c1853b-5c40-4b15-8766-3cf1c58f985a}"


def sources():
    return [(sha, size, rel) for sha, size, rel, url in fetch_sources()]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetch(args, mirror, **env):
    e = dict(os.environ, ETWD_FETCH_MIRROR=mirror)
    e.pop("ETWD_STATE_DIR", None)
    e.update(env)
    return subprocess.run([FETCH] + args, env=e, capture_output=True, text=True, timeout=300)


def main():
    mirror = os.environ.get("ETWD_FETCH_MIRROR") or os.path.dirname(os.path.abspath(MANIFESTS))
    src = sources()
    mans = [s for s in src if s[2].startswith(("manifests/", "manifests-next/"))]  # both, issue 25
    check(len(mans) >= 20 and any(s[2].endswith("PowerShell.Core.Instrumentation.man") for s in mans),
          "tests/data-sources.txt lists %d manifests" % len(mans))
    work = tempfile.mkdtemp(prefix="etwd-fetchman-")
    try:
        state = os.path.join(work, "state")
        r = fetch([state], mirror)
        check(r.returncode == 0 and "fetch-manifests: %d files" % len(mans) in r.stderr,
              "fetch from %s: rc %d %s" % (mirror, r.returncode, r.stderr))
        check(stat.S_IMODE(os.stat(state).st_mode) == 0o700, "the new state directory is not 0700")
        for s, size, rel in mans:
            p = os.path.join(state, rel)
            check(os.path.isfile(p) and os.path.getsize(p) == size and sha(p) == s, "%s did not arrive intact" % rel)
        got = [os.path.relpath(os.path.join(d, f), state) for d, _, fs in os.walk(state) for f in fs]
        check(sorted(got) == sorted(rel for _, _, rel in mans), "files other than the manifests: %r"
              % sorted(set(got) - {rel for _, _, rel in mans}))
        # ETWD_STATE_DIR is the default destination; an existing state directory keeps its mode
        other = os.path.join(work, "other")
        os.makedirs(other, mode=0o750)
        os.chmod(other, 0o750)
        r = fetch([], mirror, ETWD_STATE_DIR=other)
        check(r.returncode == 0 and os.path.isfile(os.path.join(other, mans[0][2])), "ETWD_STATE_DIR: %s" % r.stderr)
        check(stat.S_IMODE(os.stat(other).st_mode) == 0o750, "an existing state directory's mode was changed")
        # a corrupted mirror file is refused and named
        bad = os.path.join(work, "badmirror")
        victim = next(rel for _, _, rel in mans if rel.endswith("PowerShell.Core.Instrumentation.man"))
        for _, _, rel in mans:
            os.makedirs(os.path.dirname(os.path.join(bad, rel)), exist_ok=True)
            if rel != victim:
                os.symlink(os.path.join(mirror, rel), os.path.join(bad, rel))
        data = bytearray(open(os.path.join(mirror, victim), "rb").read())
        data[200] ^= 1
        open(os.path.join(bad, victim), "wb").write(data)
        st2 = os.path.join(work, "state2")
        r = fetch([st2], bad)
        check(r.returncode == 1 and "fetch-manifests: " + victim in r.stderr and "SHA-256 mismatch" in r.stderr,
              "a corrupted manifest: rc %d %s" % (r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(st2, victim)), "the corrupted manifest was written")

        # etwd on that state directory decodes the PowerShell trace with the installed manifests
        with Etwd(state=state) as e:
            e.json("POST", "/api/v1/files?name=ps.etl", body=open(PS_ETL, "rb").read(),
                   ctype="application/octet-stream", expect=201)
            ps = [x for x in e.ndjson("/api/v1/files/ps.etl/events", timeout=120)
                  if "System" in x and x["System"]["Provider"]["Guid"] == PS_GUID]
            check(len(ps) == 112 and not any("Undecoded" in x for x in ps)
                  and all(x["System"]["Provider"]["Name"] == "Microsoft-Windows-PowerShell" for x in ps),
                  "PowerShell trace with the fetched manifests: %d events, %d undecoded"
                  % (len(ps), sum("Undecoded" in x for x in ps)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
