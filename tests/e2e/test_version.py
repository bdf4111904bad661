"""Version and provenance (issue 24): `etwd --version` prints the version, the git commit the
binary was built from and its build options; the OpenAPI document's info.version and
GET /api/v1/version carry the same version."""
import json
import re
import subprocess

from etwd_harness import Etwd, check, done, SRC, BIN


def main():
    r = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "etwd --version exited %d" % r.returncode)
    lines = r.stdout.splitlines()
    m = re.fullmatch(r"etwd (\d+\.\d+\.\d+)", lines[0] if lines else "")
    check(m is not None, "first line is not 'etwd X.Y.Z': %r" % r.stdout)
    version = m.group(1) if m else "?"
    with open(SRC + "/CMakeLists.txt") as f:
        pv = re.search(r"project\(etwd VERSION (\S+)", f.read())
    check(pv and pv.group(1) == version, "--version says %s, CMakeLists.txt %s" % (version, pv and pv.group(1)))
    c = re.fullmatch(r"commit ([0-9a-f]{40})(-dirty)?|commit unknown", lines[1] if len(lines) > 1 else "")
    check(c is not None, "second line is not 'commit SHA': %r" % r.stdout)
    head = subprocess.run(["git", "-C", SRC, "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0 and c:
        check(c.group(1) == head.stdout.strip(),
              "built from %s, the source is at %s (rebuild?)" % (c.group(1), head.stdout.strip()))
    opts = lines[2] if len(lines) > 2 else ""
    for word in ("build type", "sanitizers", "compiler"):
        check(word in opts, "build options line lacks %r: %r" % (word, opts))
    with Etwd() as e:
        st, _, body = e.request("GET", "/api/v1/openapi.json", token="reader")
        check(st == 200 and json.loads(body)["info"]["version"] == version,
              "openapi info.version differs from %s" % version)
        st, _, body = e.request("GET", "/api/v1/version", token="reader")
        check(st == 200 and json.loads(body)["version"] == version, "/api/v1/version differs: %s" % body[:200])
    done()


if __name__ == "__main__":
    main()
