"""`etwd.exe selftest` under wine (issue 24). The Windows steps run the server's own session code
(a private real-time session through the win backend, etwd's TraceLogging provider, Kernel-Process
enabled on the running session, a flight recorder's two snapshots, delete and a check that ETW
forgot the session); wine has no ETW,
so each of them fails with "ETW not available: " and what wine's stubs returned (StartTraceW and
EnableTraceEx2 succeed, OpenTraceW fails with error 5, EventRegister/EventWriteTransfer return 0,
ControlTraceW(QUERY) still answers 0 after the stop) — never a crash or a hang — and the exit code
is 1. The non-ETW steps pass: privileges (wine runs elevated) and a real HTTPS request verified
against the state's certificate (OpenSSL's DLLs on wine's PATH); without the DLLs the https step
names them. The human form and --json agree. Like tests/e2e/test_windows_wine.py it FAILS (never
skips) when wine or the .exe is missing: scripts/build-windows.sh, wine64."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid

import test_windows_wine as W
from test_windows_wine import EXE, wine_env, winpath
from etwd_harness import check, done, SRC

STEPS = ["privileges", "etw", "session", "tracelogging", "kernel_process", "flight", "cleanup", "https"]
NA = "ETW not available: "


def provider_guid_is_name_hash():
    """etwd's provider GUID (tlw.h) is the EventSource/TraceLogging hash of its name."""
    text = open(os.path.join(SRC, "etwcore/include/etwcore/tlw.h")).read()
    name = re.search(r'#define ETW_TLW_PROVIDER "([^"]+)"', text).group(1)
    guid = re.search(r'#define ETW_TLW_PROVIDER_GUID "\{([0-9a-f-]+)\}"', text).group(1)
    ns = bytes.fromhex("482C2DB2C39047C887F81A15BFC130FB")
    h = bytearray(hashlib.sha1(ns + name.upper().encode("utf-16-be")).digest()[:16])
    h[7] = (h[7] & 0x0F) | 0x50
    check(str(uuid.UUID(bytes_le=bytes(h))) == guid, "provider GUID %s is not the hash of %r" % (guid, name))


def run(wine, env, state, *args):
    t0 = time.time()
    r = subprocess.run([wine, EXE, "selftest"] + list(args) + ["--state-dir", winpath(state)], env=env,
                       capture_output=True, text=True, timeout=300)
    return r, time.time() - t0


def main():
    provider_guid_is_name_hash()
    if not W.wine_ready():
        done()
    wine = W.WINE
    ssl_dir = os.environ.get("ETWD_WIN_OPENSSL_DIR") or os.path.join(os.path.dirname(os.path.dirname(EXE)), "openssl")
    check(os.path.isfile(os.path.join(ssl_dir, "libssl-3-x64.dll")),
          "OpenSSL DLLs missing in %s: run scripts/build-windows-openssl.sh" % ssl_dir)
    env = wine_env()
    env.pop("ETWD_WIN_UNDER_WINE", None)
    state = tempfile.mkdtemp(prefix="etwd-selftest-wine-")
    try:
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", os.path.join(state, "key.pem"), "-out", os.path.join(state, "cert.pem")],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "openssl req: %s" % r.stderr[-300:])
        ssl_env = dict(env, WINEPATH=winpath(ssl_dir))
        r, took = run(wine, ssl_env, state, "--json")
        check(r.returncode == 1, "selftest under wine exited %d (1 expected): %s %s" % (r.returncode, r.stdout, r.stderr[-1000:]))
        check(took < 60, "selftest under wine took %.1f s (its ETW steps must not wait for events that cannot come)" % took)
        try:
            steps = json.loads(r.stdout)
        except ValueError:
            steps = []
            check(False, "--json output is not JSON: %r" % r.stdout[:1000])
        check([s.get("step") for s in steps] == STEPS, "steps: %r" % steps)
        d = {s.get("step"): s for s in steps}

        def step(name, ok, *needles, start=None):
            s = d.get(name, {})
            det = s.get("detail", "")
            check(s.get("ok") is ok and (start is None or det.startswith(start)) and all(n in det for n in needles),
                  "step %s (ok %s, starting %r, with %r): %r" % (name, ok, start, needles, s))
            return det

        step("privileges", True, "elevated")
        step("etw", False, "wine", start=NA)
        det = step("session", False, "creating the session etwd_p1_", "OpenTraceW", "Win32 error 5", "(wine ",
                   "not a privilege problem", start=NA)
        name = re.search(r"etwd_p1_\d+", det)
        step("tracelogging", False, "EventRegister returned 0, EventWriteTransfer 0 (EventEnabled: no)",
             "nothing can be read back", "OpenTraceW", start=NA)
        step("kernel_process", False, "Microsoft-Windows-Kernel-Process", "OpenTraceW", start=NA)
        # the flight recorder: wine's StartTraceW "succeeds", the marker goes nowhere, and its
        # ControlTraceW(UPDATE) writes no snapshot file; the step says both and leaves nothing
        step("flight", False, "marker A was refused", "ControlTraceW UPDATE", "no file appeared", "trace.etl",
             "wine's ControlTraceW is a stub", start=NA)
        check(sorted(os.listdir(state)) == ["cert.pem", "key.pem"] or "selftest-flight" not in " ".join(os.listdir(state)),
              "the flight step removed its directory: %r" % os.listdir(state))
        step("cleanup", False, "ControlTraceW(QUERY) of %s answered 0" % (name.group(0) if name else "?"),
             "wine's stub", start=NA)
        step("https", True, "GET https://127.0.0.1:", "/api/v1/health: 200, certificate verified against", "cert.pem")

        # the human form: the same verdicts, one line each, and the summary
        r, took = run(wine, ssl_env, state)
        lines = [l.rstrip("\r") for l in r.stdout.splitlines()]
        for s in steps:
            check(any(l.split()[:2] == [s["step"], "ok" if s["ok"] else "FAIL"] for l in lines if l.split()),
                  "human line of %s: %r" % (s["step"], r.stdout))
        check(r.returncode == 1 and lines[-1:] == ["FAIL: 2 of 8 steps passed"], "summary: %d %r" % (r.returncode, lines[-1:]))

        # without the OpenSSL DLLs the https step says which are missing
        r, took = run(wine, env, state, "--json")
        try:
            h = {s["step"]: s for s in json.loads(r.stdout)}.get("https", {})
        except (ValueError, KeyError, TypeError):
            h = {}
        check(r.returncode == 1 and h.get("ok") is False and "libssl-3-x64.dll" in h.get("detail", ""),
              "https step without the DLLs: %r" % h)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
