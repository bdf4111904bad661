"""`etwd selftest [--json]` (issue 24): as root on this machine every step passes (exit 0) and
no tracefs instance is left; as an unprivileged user the privileges step fails with a clear
reason and the exit code is 1; as root without CAP_SYS_ADMIN in a mount namespace whose
/sys/kernel/tracing is an empty tmpfs, the tracefs step fails saying mounting was refused.
The human output has one line per step with ok/FAIL and the same details as --json."""
import json
import os
import shutil
import subprocess
import tempfile

from etwd_harness import check, done, BIN

STEPS = ["privileges", "tracefs", "session", "exec_event", "trace_marker", "cleanup", "https"]
INSTANCES = "/sys/kernel/tracing/instances"


def run(argv, timeout=120):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def parse_json(r, what):
    try:
        steps = json.loads(r.stdout)
    except ValueError:
        check(False, "%s: --json output is not JSON: %r %r" % (what, r.stdout[:500], r.stderr[-500:]))
        return []
    check([s.get("step") for s in steps] == STEPS, "%s: steps %r" % (what, [s.get("step") for s in steps]))
    for s in steps:
        check(isinstance(s.get("ok"), bool) and isinstance(s.get("detail"), str) and s["detail"],
              "%s: step without ok/detail: %r" % (what, s))
    return steps


def own_instances():
    return {n for n in os.listdir(INSTANCES) if n.startswith("etwd_0_")} if os.path.isdir(INSTANCES) else set()


def main():
    state = tempfile.mkdtemp(prefix="etwd-selftest-")
    try:
        before = own_instances()
        # root on this machine: every step passes, human form and --json
        r = run([BIN, "selftest", "--state-dir", state])
        check(r.returncode == 0, "selftest as root exited %d:\n%s%s" % (r.returncode, r.stdout, r.stderr[-2000:]))
        lines = r.stdout.splitlines()
        for name in STEPS:
            hit = [l for l in lines if l.split()[:2] == [name, "ok"]]
            check(len(hit) == 1, "no 'ok' line for step %s in:\n%s" % (name, r.stdout))
        check(lines and lines[-1] == "ok: 7 of 7 steps passed", "summary line: %r" % lines[-1:])
        r = run([BIN, "selftest", "--json", "--state-dir", state])
        check(r.returncode == 0, "selftest --json exited %d: %s" % (r.returncode, r.stdout))
        steps = parse_json(r, "root")
        check(all(s["ok"] for s in steps), "a step failed as root: %r" % steps)
        d = {s["step"]: s["detail"] for s in steps}
        check("sched_process_exec" in d.get("exec_event", ""), "exec_event detail: %r" % d.get("exec_event"))
        check("read it back" in d.get("trace_marker", ""), "trace_marker detail: %r" % d.get("trace_marker"))
        check("certificate verified" in d.get("https", "") and state in d.get("https", ""),
              "https detail: %r" % d.get("https"))
        check(own_instances() == before, "instances left behind: %r" % (own_instances() - before))

        # an unprivileged user: the privileges step says why, later tracing steps are not run
        nobody = tempfile.mkdtemp(prefix="etwd-selftest-nobody-")
        os.chown(nobody, 65534, 65534)
        try:
            r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     BIN, "selftest", "--json", "--state-dir", nobody])
            check(r.returncode == 1, "selftest as nobody exited %d: %s %s" % (r.returncode, r.stdout, r.stderr[-1000:]))
            steps = parse_json(r, "nobody")
            d = {s["step"]: s for s in steps}
            p = d.get("privileges", {})
            check(p.get("ok") is False and "not root" in p.get("detail", "") and "CAP_SYS_ADMIN" in p.get("detail", ""),
                  "privileges step as nobody: %r" % p)
            for name in ("tracefs", "session", "exec_event", "trace_marker", "cleanup"):
                check(d.get(name, {}).get("ok") is False and "not run" in d[name]["detail"],
                      "step %s as nobody: %r" % (name, d.get(name)))
            check(d.get("https", {}).get("ok") is True, "https as nobody: %r" % d.get("https"))
        finally:
            shutil.rmtree(nobody, ignore_errors=True)

        # no tracefs and no right to mount it: the tracefs step fails and says why
        r = run(["unshare", "-m", "sh", "-c",
                 "mount --make-rprivate / && mount -t tmpfs none /sys/kernel/tracing && "
                 "exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin \"$0\" selftest --state-dir \"$1\"",
                 BIN, state])
        check(r.returncode == 1, "selftest without tracefs exited %d: %s %s" % (r.returncode, r.stdout, r.stderr[-1000:]))
        line = [l for l in r.stdout.splitlines() if l.startswith("tracefs ")]
        check(line and "FAIL" in line[0] and "mounting it at /sys/kernel/tracing failed" in line[0]
              and "Operation not permitted" in line[0], "tracefs line without tracefs: %r" % line)
        check(r.stdout.splitlines()[-1:] == ["FAIL: 2 of 7 steps passed"], "summary: %r" % r.stdout)

        # a usage error is exit code 2
        r = run([BIN, "selftest", "--bogus"])
        check(r.returncode == 2 and "usage: etwd selftest" in r.stderr, "usage error: %d %r" % (r.returncode, r.stderr))
    finally:
        shutil.rmtree(state, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
