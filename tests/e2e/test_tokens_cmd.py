"""`etwd tokens` (README: shows both tokens): on a state directory an etwd made it shows the
tokens the server takes; a missing state directory is an error that names --state-dir, and
`etwd tokens` never creates it (it used to make /var/lib/etwd/tokens, which then looked like an
installed etwd to the package's checks)."""
import os
import subprocess
import tempfile

from etwd_harness import BIN, Etwd, check, done


def main():
    tmp = tempfile.mkdtemp(prefix="etwd-tokens-")
    missing = os.path.join(tmp, "never")
    r = subprocess.run([BIN, "tokens", "--state-dir", missing], capture_output=True, timeout=30)
    check(r.returncode == 1 and b"no state directory" in r.stderr and b"--state-dir" in r.stderr,
          "tokens on a missing dir: %d %r" % (r.returncode, r.stderr))
    check(not os.path.exists(missing), "tokens made %s" % missing)
    with Etwd() as e:
        r = subprocess.run([BIN, "tokens", "--state-dir", e.state], capture_output=True, timeout=30)
        out = r.stdout.decode()
        adm = [l.split()[1] for l in out.splitlines() if l.startswith("admin:")]
        check(r.returncode == 0 and adm, "tokens on the server's dir: %d %r" % (r.returncode, out))
        if adm:
            st, h, d = e.request("GET", "/api/v1/sessions", token=None,
                                 headers={"Authorization": "Bearer " + adm[0]})
            check(st == 200, "the shown admin token is taken: %d" % st)
    done()


if __name__ == "__main__":
    main()
