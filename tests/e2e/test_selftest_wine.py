"""`etwd.exe selftest` under wine (issue 24): wine has no ETW, so the etw step fails with a clear
"ETW not available" reason naming wine, the steps that need ETW say so instead of crashing, and
the exit code is 1; the human form and --json agree. The https step passes with OpenSSL's DLLs
beside etwd.exe, else it says which DLLs are missing. Like tests/e2e/test_windows_wine.py it FAILS
(never skips) when wine or the .exe is missing: scripts/build-windows.sh, wine64."""
import json
import os
import shutil
import subprocess
import tempfile

from test_windows_wine import EXE, PREFIX, wine_env, winpath
from etwd_harness import check, done

STEPS = ["privileges", "etw", "session", "tracelogging", "kernel_process", "cleanup", "https"]


def main():
    wine = shutil.which("wine") or shutil.which("wine64")
    if not check(wine is not None, "wine is not installed (apt-get install wine64)"):
        done()
    if not check(os.path.isfile(EXE), "%s is missing: run scripts/build-windows.sh" % EXE):
        done()
    os.makedirs(PREFIX, exist_ok=True)
    env = wine_env()
    env.pop("ETWD_WIN_UNDER_WINE", None)
    if not os.path.exists(os.path.join(PREFIX, "system.reg")):
        subprocess.run([wine, "wineboot", "-i"], env=env, timeout=600,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["wineserver", "-w"], env=env, timeout=600)
    state = tempfile.mkdtemp(prefix="etwd-selftest-wine-")
    try:
        r = subprocess.run([wine, EXE, "selftest", "--json", "--state-dir", winpath(state)], env=env,
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 1, "selftest under wine exited %d (1 expected): %s %s" % (r.returncode, r.stdout, r.stderr[-1000:]))
        try:
            steps = json.loads(r.stdout)
        except ValueError:
            steps = []
            check(False, "--json output is not JSON: %r" % r.stdout[:1000])
        check([s.get("step") for s in steps] == STEPS, "steps: %r" % steps)
        d = {s.get("step"): s for s in steps}
        etw = d.get("etw", {})
        check(etw.get("ok") is False and etw.get("detail", "").startswith("ETW not available: ")
              and "wine" in etw.get("detail", ""), "etw step: %r" % etw)
        for name in ("session", "tracelogging", "kernel_process", "cleanup"):
            s = d.get(name, {})
            check(s.get("ok") is False and "ETW not available" in s.get("detail", ""), "step %s: %r" % (name, s))
        h = d.get("https", {})
        check(h.get("ok") is True or "libssl-3-x64.dll" in h.get("detail", ""), "https step: %r" % h)

        r = subprocess.run([wine, EXE, "selftest", "--state-dir", winpath(state)], env=env,
                           capture_output=True, text=True, timeout=300)
        lines = [l.rstrip("\r") for l in r.stdout.splitlines()]
        check(r.returncode == 1 and any(l.startswith("etw ") and "FAIL" in l and "ETW not available" in l for l in lines),
              "human output: %d %r" % (r.returncode, r.stdout))
        check(lines[-1:] and lines[-1].startswith("FAIL: "), "summary: %r" % lines[-1:])
    finally:
        shutil.rmtree(state, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
