"""`etwd service install|uninstall|start|stop` (issue 24, server/win/svcctl.c) under wine's Service
Control Manager (wine has services.exe): install checks the options first (a bad one: exit 2,
nothing installed) and registers `etwd.exe service run OPTIONS`; a second install is a clear
error; start waits until the service runs and it answers /api/v1/health; start again, stop twice,
uninstall twice give clear errors; stop is the ordered stop (exit code 0, service.log); uninstall
of a running service stops it first. `etwd service` without a command and `service run` from a
console exit 2 with usage. On Linux `etwd service` exits 2 and points at the systemd unit. Like
the other wine tests it FAILS (never skips) without wine or the .exe (scripts/build-windows.sh)."""
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import etwd_harness as H
from etwd_harness import check, done, BIN
import test_windows_wine as W
from test_windows_wine import EXE, wine_env, winpath, glob_service_logs


def health(port):
    try:
        return urllib.request.urlopen("http://127.0.0.1:%d/api/v1/health" % port, timeout=5).status == 200
    except OSError:
        return False


def wine_run(cmd, env, timeout):
    """Run a wine command; (rc, stdout, stderr). Its output goes to files, not pipes: when this
    command is the one that starts the wine session (the keeper below has not yet), wineserver,
    services.exe and the service inherit its stdout and stay while the keeper runs, so reading a
    pipe to its end would wait for the timeout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        r = subprocess.run(cmd, env=env, stdout=out, stderr=err, timeout=timeout)
        out.seek(0)
        err.seek(0)
        return (r.returncode, out.read().decode(errors="replace").replace("\r", ""),
                err.read().decode(errors="replace").replace("\r", ""))


def main():
    r = subprocess.run([BIN, "service", "install"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "Windows only" in r.stderr and "systemctl enable --now etwd" in r.stderr,
          "Linux: etwd service → exit 2 naming the systemd unit: %d %r" % (r.returncode, r.stderr))

    if not W.wine_ready():
        done()
    wine = W.WINE
    name = "etwdsvc%d" % os.getpid()
    env = wine_env()
    env["ETWD_SERVICE_NAME"] = name

    def etwd(*args):
        return wine_run([wine, EXE, "service"] + list(args), env, 300)

    def query():
        return wine_run([wine, "sc", "query", name], env, 120)[1]

    state = tempfile.mkdtemp(prefix="etwd-wine-svcctl-")
    port = H.free_port()
    # a batch file keeps one wine session (services.exe and the service) alive between the commands
    flag = os.path.join(state, "end.flag")
    bat = os.path.join(state, "keep.bat")
    with open(bat, "w") as f:
        f.write("\r\n".join(["@echo off", ":wait", "if exist %s goto end" % winpath(flag),
                             "ping -n 2 127.0.0.1 >nul", "goto wait", ":end", ""]))
    keeper = subprocess.Popen([wine, "cmd", "/c", winpath(bat)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for log in glob_service_logs():
            open(log, "w").close()
        rc, out, err = etwd()
        check(rc == 2 and "usage: etwd service install" in err, "no command: %d %r" % (rc, err))
        rc, out, err = etwd("run", "--insecure-http")
        check(rc == 2 and "only the Service Control Manager" in err, "run from a console: %d %r" % (rc, err))
        rc, out, err = etwd("install", "--max-sessions", "lots")
        check(rc == 2 and "max-sessions" in err, "install with a bad option: %d %r" % (rc, err))
        check("SERVICE_NAME" not in query(), "a bad install registered the service")

        opts = ["--insecure-http", "--listen", "127.0.0.1:%d" % port, "--state-dir", winpath(os.path.join(state, "st"))]
        t = time.time()
        rc, out, err = etwd("install", *opts)
        check(rc == 0 and "installed" in out and " service run --insecure-http --listen 127.0.0.1:%d" % port in out,
              "install: %d %r %r" % (rc, out, err))
        q = query()
        check("STOPPED" in q and "WIN32_OWN_PROCESS" in q, "installed, stopped: %r" % q)
        rc, out, err = etwd("install", *opts)
        check(rc == 1 and "installed already" in err, "install twice: %d %r" % (rc, err))

        rc, out, err = etwd("start")
        check(rc == 0 and "running" in out, "start: %d %r %r" % (rc, out, err))
        deadline = time.time() + 120
        while not health(port) and time.time() < deadline:
            time.sleep(0.5)
        check(health(port), "the started service answers /api/v1/health")
        check("RUNNING" in query(), "sc query: RUNNING")
        rc, out, err = etwd("start")
        check(rc == 1 and "running already" in err, "start twice: %d %r" % (rc, err))

        rc, out, err = etwd("stop")
        check(rc == 0 and "stopped (exit code 0)" in out, "stop: %d %r %r" % (rc, out, err))
        q = query()
        check("STOPPED" in q and "WIN32_EXIT_CODE    : 0" in q, "stopped with exit code 0: %r" % q)
        check(not health(port), "the stopped service still answers")
        logs = "".join(open(f, errors="replace").read() for f in glob_service_logs())
        check("msg=started" in logs and "msg=stopped" in logs, "service.log shows the ordered stop: %r" % logs[-600:])
        rc, out, err = etwd("stop")
        check(rc == 1 and "not running" in err, "stop twice: %d %r" % (rc, err))

        rc, out, err = etwd("start")
        deadline = time.time() + 120
        while rc == 0 and not health(port) and time.time() < deadline:
            time.sleep(0.5)
        check(rc == 0 and health(port), "start again: %d %r" % (rc, err))
        rc, out, err = etwd("uninstall")
        check(rc == 0 and "stopped" in out and "removed" in out, "uninstall a running service: %d %r %r" % (rc, out, err))
        check("SERVICE_NAME" not in query() and not health(port), "uninstalled: the service is gone")
        rc, out, err = etwd("uninstall")
        check(rc == 1 and "not installed" in err, "uninstall twice: %d %r" % (rc, err))
        print("service commands under wine: %.1f s" % (time.time() - t))
    finally:
        open(flag, "w").close()
        try:
            keeper.wait(timeout=120)
        except subprocess.TimeoutExpired:
            keeper.kill()
        wine_run([wine, "sc", "delete", name], env, 120)
        shutil.rmtree(state, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
