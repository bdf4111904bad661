"""README.md works as written (issue 24): every shell block marked `<!-- readme-test -->` is run,
in order and in one bash (so that variables and functions carry over, as in a user's terminal),
against a real etwd started with a throwaway state directory on a free port. The blocks read
ETWD_STATE and ETWD_URL (defaults: etwd's own); this test sets them. Any non-zero exit fails.
Also: the README's claims about who prints the token hold (run.sh passes --print-token, the
binary prints the token only with it)."""
import os
import re
import subprocess
import sys
import tempfile

from etwd_harness import Etwd, check, done, SRC, BIN

MARK = "<!-- readme-test -->"


def marked_blocks(text):
    """The fenced ```sh blocks that directly follow a MARK line (blank lines allowed between)."""
    blocks = []
    for m in re.finditer(re.escape(MARK) + r"\s*\n```(?:sh|bash)\n(.*?)\n```", text, re.S):
        blocks.append(m.group(1))
    return blocks


def main():
    with open(os.path.join(SRC, "README.md")) as f:
        text = f.read()
    blocks = marked_blocks(text)
    check(len(blocks) >= 4, "expected at least 4 marked blocks in README.md, found %d" % len(blocks))
    check(text.count(MARK) == len(blocks), "a %s mark is not followed by a ```sh block" % MARK)
    for i, b in enumerate(blocks):
        check(not re.search(r"\bsudo\b", b), "block %d uses sudo (a root Debian 12 has none)" % i)
        check("..." not in b and "\u2026" not in b, "block %d has a literal ellipsis" % i)

    # the token: run.sh passes --print-token; without it the binary prints only the file
    with open(os.path.join(SRC, "scripts/run.sh")) as f:
        check("--print-token" in f.read(), "scripts/run.sh no longer passes --print-token")

    work = tempfile.mkdtemp(prefix="etwd-readme-")
    with Etwd(args=["--print-token"]) as e:
        line = e.proc.stdout.readline().decode()  # the harness stops reading at "tokens:"
        check(line == "admin token: %s\n" % e.tokens["admin"], "--print-token printed %r" % line)
        script = ["set -eo pipefail"]
        for i, b in enumerate(blocks):
            script.append(b)
            script.append("echo 'readme-test: block %d ok' >&2" % i)
        env = dict(os.environ, ETWD_STATE=e.state, ETWD_URL="https://127.0.0.1:%d" % e.port)
        try:
            r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env,
                               capture_output=True, text=True, timeout=120)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as t:
            rc, out, err = "timeout", t.stdout, t.stderr
        oks = (err or "").count("readme-test: block")
        print(out[-3000:] if isinstance(out, str) else out)
        check(rc == 0, "README block %d failed (exit %r):\n%s\n--- block:\n%s"
              % (oks, rc, (err or "")[-3000:], blocks[oks] if oks < len(blocks) else ""))
        check(oks == len(blocks), "only %d of %d blocks ran" % (oks, len(blocks)))
        if rc == 0:
            check('"sched_process_exec"' in out, "the stream block printed no sched_process_exec event")
            dat = os.path.join(work, "trace.dat")
            check(os.path.isfile(dat) and os.path.getsize(dat) > 0, "no trace.dat was downloaded")
    subprocess.run(["rm", "-rf", work])
    done()


if __name__ == "__main__":
    main()
