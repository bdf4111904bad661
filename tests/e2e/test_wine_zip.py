"""The Windows zip (issue 24): etwd-VERSION-win64.zip, built by scripts/build-windows.sh (target
etwd_zip, cmake/windows_zip.cmake), holds one folder etwd-VERSION-win64/ with exactly etwd.exe, the
OpenSSL 3 DLLs, README-windows.txt (CRLF; administrator, self-test, firewall, service) and the
licences; VERSION is the project's. Every DLL that etwd.exe and the shipped DLLs import (objdump -p)
is shipped or part of Windows, and the DLLs civetweb loads at run time are the shipped ones.
Unpacked, etwd.exe runs under wine: --version, and `selftest` fails its ETW steps with a clear "ETW
not available" while its HTTPS step passes with the zip's DLLs (a certificate made by openssl in
the state directory). FAILS (never skips) without the zip, wine or MinGW's objdump."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile

from etwd_harness import check, done, SRC
import test_windows_wine as W
from test_windows_wine import EXE, wine_env, winpath

SYSTEM_DLLS = {"kernel32.dll", "advapi32.dll", "bcrypt.dll", "crypt32.dll", "msvcrt.dll", "ws2_32.dll",
               "user32.dll", "ntdll.dll"}
RUNTIME_DLLS = {"libssl-3-x64.dll", "libcrypto-3-x64.dll"}  # loaded by civetweb with LoadLibrary


def imports(path):
    r = subprocess.run(["x86_64-w64-mingw32-objdump", "-p", path], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "objdump -p %s: %s" % (path, r.stderr[-300:]))
    return {m.lower() for m in re.findall(r"DLL Name: (\S+)", r.stdout)}


def main():
    version = re.search(r"project\(etwd VERSION ([0-9.]+)", open(os.path.join(SRC, "CMakeLists.txt")).read()).group(1)
    name = "etwd-%s-win64" % version
    zpath = os.environ.get("ETWD_WIN_ZIP") or os.path.join(os.path.dirname(os.path.dirname(EXE)), name + ".zip")
    if not check(os.path.isfile(zpath), "%s is missing: run scripts/build-windows.sh (found: %r)"
                 % (zpath, glob.glob(os.path.join(os.path.dirname(zpath), "etwd-*.zip")))):
        done()
    if not check(shutil.which("x86_64-w64-mingw32-objdump"), "x86_64-w64-mingw32-objdump missing (binutils-mingw-w64-x86-64)"):
        done()
    want = {"etwd.exe", "libssl-3-x64.dll", "libcrypto-3-x64.dll", "README-windows.txt",
            "LICENSE-OpenSSL.txt", "LICENSE-civetweb.txt", "LICENSE-cJSON.txt"}
    with zipfile.ZipFile(zpath) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        check(all(n.startswith(name + "/") for n in z.namelist()), "not all in %s/: %r" % (name, z.namelist()))
        check({n[len(name) + 1:] for n in names} == want, "zip contents: %r" % sorted(names))
        work = tempfile.mkdtemp(prefix="etwd-zip-")
        z.extractall(work)
    d = os.path.join(work, name)
    try:
        readme = open(os.path.join(d, "README-windows.txt"), "rb").read().decode()
        check("\r\n" in readme and "\n" not in readme.replace("\r\n", ""), "README-windows.txt: not CRLF")
        for needle in ("Administrator", "etwd.exe selftest", "netsh advfirewall", "etwd.exe service install",
                       "etwd.exe service uninstall", "service.log"):
            check(needle in readme, "README-windows.txt does not mention %r" % needle)
        shipped = {f.lower() for f in os.listdir(d)}
        for f in ("etwd.exe", "libssl-3-x64.dll", "libcrypto-3-x64.dll"):
            for dll in imports(os.path.join(d, f)):
                check(dll in shipped or dll in SYSTEM_DLLS, "%s imports %s: neither shipped nor a Windows DLL" % (f, dll))
        exe_bytes = open(os.path.join(d, "etwd.exe"), "rb").read()
        for dll in RUNTIME_DLLS:
            check(dll.encode() in exe_bytes and dll in shipped, "%s (loaded at run time) not named or not shipped" % dll)

        if not W.wine_ready(exe=False):  # the zip's own etwd.exe
            done()
        wine = W.WINE
        env = wine_env()
        env.pop("ETWD_WIN_UNDER_WINE", None)
        exe = os.path.join(d, "etwd.exe")
        r = subprocess.run([wine, exe, "--version"], env=env, capture_output=True, text=True, timeout=300)
        check(r.returncode == 0 and version in r.stdout, "--version from the zip: %d %r %r" % (r.returncode, r.stdout, r.stderr[-300:]))
        state = os.path.join(work, "state")
        os.makedirs(state)
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-days", "2", "-subj", "/CN=localhost", "-keyout", os.path.join(state, "key.pem"),
                            "-out", os.path.join(state, "cert.pem")], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "openssl req: %s" % r.stderr[-300:])
        r = subprocess.run([wine, exe, "selftest", "--json", "--state-dir", winpath(state)], env=env,
                           capture_output=True, text=True, timeout=300)
        try:
            steps = {s["step"]: s for s in json.loads(r.stdout)}
        except (ValueError, KeyError, TypeError):
            steps = {}
        check(r.returncode == 1 and steps, "selftest from the zip: rc %d %r %r" % (r.returncode, r.stdout[:600], r.stderr[-600:]))
        etw = steps.get("etw", {})
        check(etw.get("ok") is False and "ETW not available" in etw.get("detail", ""), "etw step: %r" % etw)
        https = steps.get("https", {})
        check(https.get("ok") is True, "https step with the zip's OpenSSL DLLs: %r" % https)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
