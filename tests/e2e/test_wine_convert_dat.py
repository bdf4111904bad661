#!/usr/bin/env python3
"""`etwd.exe convert` of a Linux trace.dat under wine64: the Windows build has no trace.dat
reader (libtracecmd is Linux's), so it says so clearly — the file named, exit status 1, nothing
on stdout — instead of a confusing ETL error. The trace.dat is a real one, written by trace-cmd
(test_convert_dat.trace_cmd_file: root, real tracefs). Environment as
tests/e2e/test_windows_wine.py (ETWD_WIN_EXE, ETWD_WINEPREFIX). FAILS (never skips) without wine
or the .exe (scripts/build-windows.sh)."""
import os
import shutil
import subprocess
import tempfile

import test_convert_dat as D
import test_windows_wine as W
from etwd_harness import check, done, drop_prog, unique_prog


def main():
    W.WINE = shutil.which("wine") or shutil.which("wine64")
    if not check(W.WINE is not None, "wine is not installed (apt-get install wine64)"):
        done()
    if not check(os.path.isfile(W.EXE), "%s is missing: run scripts/build-windows.sh" % W.EXE):
        done()
    os.makedirs(W.PREFIX, exist_ok=True)
    if not os.path.exists(os.path.join(W.PREFIX, "system.reg")):  # (a new prefix: made once, as the others do)
        subprocess.run([W.WINE, "wineboot", "-i"], env=W.wine_env(), timeout=600,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["wineserver", "-w"], env=W.wine_env(), timeout=600)
    tmp = tempfile.mkdtemp(prefix="etwd-windat-")
    prog = unique_prog("windat")
    try:
        path = D.trace_cmd_file(tmp, prog)
        for args in ([], ["--format", "chrome"]):
            r = subprocess.run([W.WINE, W.EXE, "convert", W.winpath(path)] + args, env=W.wine_env(),
                               capture_output=True, timeout=300)
            err = r.stderr.decode(errors="replace")
            check(r.returncode == 1 and not r.stdout and "tc.dat is a trace.dat" in err and ".etl files only" in err,
                  "etwd.exe convert %s: rc %d, %d bytes out, %s" % (args, r.returncode, len(r.stdout), err[-400:]))
    finally:
        drop_prog(prog)
        shutil.rmtree(tmp)
    done()


if __name__ == "__main__":
    main()
