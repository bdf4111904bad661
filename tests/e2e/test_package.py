"""The Debian package (issue 24), as root on this machine: build etwd_VERSION_ARCH.deb with cpack from
a non-sanitized Release build (build directory `pkg` inside the tested build's, incremental), install
it with apt-get, check its files (binary, man page made from --help, systemd unit, default config),
run `systemd-analyze verify` on the unit, start etwd the way the unit's ExecStart does (no systemd
is PID 1 here: by hand, with the unit's capability bounding set, no-new-privileges, umask and
state directory) and check /health and a live tracefs session under those capabilities, then
purge the package and check that no file is left."""
import json
import os
import re
import shlex
import signal
import ssl
import subprocess
import sys
import time
import http.client

from etwd_harness import check, done, free_port, SRC, BIN

UNIT = "/lib/systemd/system/etwd.service"
STATE = "/var/lib/etwd"


def run(cmd, timeout=900, quiet=False, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if r.returncode and not quiet:
        print("$ %s\n%s%s" % (" ".join(cmd), r.stdout[-3000:], r.stderr[-3000:]), file=sys.stderr)
    return r


def build_deb():
    tested = os.path.dirname(os.path.dirname(os.path.abspath(BIN)))
    third = None
    try:
        with open(os.path.join(tested, "CMakeCache.txt")) as f:
            m = re.search(r"^ETWD_THIRD_PARTY:PATH=(.*)$", f.read(), re.M)
            third = m and m.group(1)
    except OSError:
        pass
    pkg = os.path.join(tested, "pkg")
    cfg = ["cmake", "-S", SRC, "-B", pkg, "-DCMAKE_BUILD_TYPE=Release", "-DETWD_TESTS=OFF",
           "-DETWD_SANITIZE=OFF"] + (["-DETWD_THIRD_PARTY=" + third] if third else [])
    if not check(run(cfg).returncode == 0, "cmake for the package failed"):
        return None
    if not check(run(["cmake", "--build", pkg, "-j%d" % (os.cpu_count() or 2)], timeout=1800).returncode == 0,
                 "the Release build failed"):
        return None
    for old in os.listdir(pkg):
        if old.endswith(".deb"):
            os.unlink(os.path.join(pkg, old))
    if not check(run(["cpack", "-G", "DEB"], cwd=pkg).returncode == 0, "cpack failed"):
        return None
    debs = [f for f in os.listdir(pkg) if f.endswith(".deb")]
    check(len(debs) == 1 and re.fullmatch(r"etwd_\d+\.\d+\.\d+_amd64\.deb", debs[0] if debs else ""),
          "expected one etwd_VERSION_amd64.deb, got %s" % debs)
    return pkg, debs[0] if debs else None


def unit_settings(path):
    """Key -> list of values of the [Service] section of a unit file."""
    out, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif line and not line.startswith("#") and "=" in line and section == "[Service]":
                k, v = line.split("=", 1)
                out.setdefault(k, []).append(v)
    return out


def start_like_unit(port):
    """ExecStart by hand: the unit's bounding set, no-new-privs, umask and StateDirectory."""
    s = unit_settings(UNIT)
    argv = shlex.split(s["ExecStart"][0]) + ["--listen", "127.0.0.1:%d" % port]
    caps = s.get("CapabilityBoundingSet", [""])[0].split()
    check(caps == ["CAP_SYS_NICE"], "the unit's CapabilityBoundingSet is %s" % caps)
    check(s.get("ProtectSystem") == ["strict"] and s.get("StateDirectory") == ["etwd"],
          "the unit lacks ProtectSystem=strict or StateDirectory=etwd")
    os.makedirs(STATE, mode=0o700, exist_ok=True)  # what StateDirectory=etwd does
    bset = ",".join(["-all"] + ["+" + c[4:].lower() for c in caps])
    cmd = ["setpriv", "--bounding-set=" + bset, "--inh-caps=-all"]
    if s.get("NoNewPrivileges") == ["yes"]:
        cmd.append("--no-new-privs")
    umask = int(s.get("UMask", ["0022"])[0], 8)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    p = subprocess.Popen(cmd + ["--"] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         preexec_fn=lambda: os.umask(umask))
    out = ""
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stdout.readline().decode(errors="replace")
        if not line:
            break
        out += line
        if line.startswith("tokens:"):
            break
    return p, out


def https(port, method, path, token=None, body=None, headers=None):
    ctx = ssl.create_default_context(cafile=os.path.join(STATE, "cert.pem"))
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    if body is not None:
        h["Content-Type"] = "application/json"
        body = json.dumps(body)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    return r.status, r.read()


def check_running(p, port):
    st, body = https(port, "GET", "/api/v1/health")
    check(st == 200, "/api/v1/health: %d %s" % (st, body[:200]))
    with open("/proc/%d/status" % p.pid) as f:
        capbnd = re.search(r"^CapBnd:\s*(\w+)", f.read(), re.M).group(1)
    check(int(capbnd, 16) == 1 << 23, "etwd runs with bounding set %s, not CAP_SYS_NICE only" % capbnd)
    token = None
    with open(os.path.join(STATE, "tokens")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[1] == "admin":
                token = parts[2]
    st, body = https(port, "POST", "/api/v1/sessions", token,
                     {"providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
    check(st == 201, "a live tracefs session with CAP_SYS_NICE only: %d %s" % (st, body[:300]))
    if st != 201:
        return
    sid = json.loads(body)["id"]
    curl = subprocess.Popen(["curl", "-sS", "--fail-with-body", "-N", "--max-time", "60", "--cacert",
                             os.path.join(STATE, "cert.pem"), "-H", "Authorization: Bearer " + token,
                             "-H", "Accept: application/x-ndjson",
                             "https://127.0.0.1:%d/api/v1/sessions/%d/events?limit=1" % (port, sid)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    for _ in range(3):
        subprocess.run(["/bin/true"])
    out, err = curl.communicate(timeout=90)
    check(curl.returncode == 0 and '"sched_process_exec"' in out,
          "no exec event from the packaged etwd: rc %d %s %s" % (curl.returncode, out[:300], err[:300]))
    st, _ = https(port, "DELETE", "/api/v1/sessions/%d" % sid, token)
    check(st in (200, 204), "DELETE session: %d" % st)


def main():
    check(os.geteuid() == 0, "test_package.py needs root (apt-get, /var/lib/etwd)")
    if run(["dpkg-query", "-W", "etwd"], quiet=True).returncode == 0:  # left by an earlier, interrupted run
        run(["apt-get", "purge", "-y", "-qq", "etwd"])
    if not check(not os.path.exists(STATE), "%s exists but the package is not installed: not touching it" % STATE):
        done()
    built = build_deb()
    if not built or not built[1]:
        done()
    pkg, deb = built
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = run(["apt-get", "install", "-y", "-qq", "./" + deb], cwd=pkg, env=env)
    check(r.returncode == 0, "apt-get install ./%s failed" % deb)
    files = [l for l in run(["dpkg", "-L", "etwd"]).stdout.splitlines() if os.path.isfile(l)]
    for need in ("/usr/bin/etwd", "/usr/share/man/man1/etwd.1.gz", UNIT, "/etc/etwd/etwd.conf"):
        check(need in files, "the package lacks %s (has %s)" % (need, files))
    conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "etwd"]).stdout
    check("/etc/etwd/etwd.conf" in conffiles, "etwd.conf is not a conffile: %r" % conffiles)
    shlibs = run(["dpkg-query", "-W", "-f=${Depends}", "etwd"]).stdout
    check("libssl3" in shlibs and "libasan" not in shlibs, "Depends: %r" % shlibs)
    # the man page is the --help text: every option of --help is in it
    help_text = run(["/usr/bin/etwd", "--help"]).stdout
    man = run(["sh", "-c", "gzip -dc /usr/share/man/man1/etwd.1.gz"]).stdout.replace("\\-", "-")
    for opt in sorted(set(re.findall(r"--[a-z][a-z-]*[a-z]", help_text))):
        check(opt in man, "the man page lacks %s" % opt)
    v = run(["/usr/bin/etwd", "--version"]).stdout
    check("sanitizers none" in v and "build type Release" in v, "the packaged binary: %r" % v)
    r = run(["systemd-analyze", "verify", UNIT])
    check(r.returncode == 0 and "etwd.service" not in r.stdout + r.stderr,
          "systemd-analyze verify: %d %s %s" % (r.returncode, r.stdout, r.stderr))

    port = free_port()
    p, out = start_like_unit(port)
    if check(p.poll() is None and "listening" in out, "etwd did not start as the unit does: %s %s"
             % (out, p.stderr.read().decode() if p.poll() is not None else "")):
        try:
            check_running(p, port)
        finally:
            p.send_signal(signal.SIGTERM)
            rc = p.wait(60)
            check(rc == 0, "etwd exited %d after SIGTERM" % rc)
    else:
        p.kill()
        p.wait()

    r = run(["apt-get", "purge", "-y", "-qq", "etwd"], env=env)
    check(r.returncode == 0, "apt-get purge etwd failed")
    left = [f for f in files + ["/etc/etwd", STATE] if os.path.exists(f)]
    check(not left, "left after purge: %s" % left)
    done()


if __name__ == "__main__":
    main()
