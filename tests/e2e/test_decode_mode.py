"""`--decode fast|reference` (issue 19 item 3): `etwd convert` and `etwd serve` accept the switch
(command line and --config file), refuse other values with a clear message, list it in their help,
and give byte-identical output in both modes — the conversion of corpus traces with and without
manifests, and a file decoded through the API by a server started in each mode. (That reference
mode really takes the plain paths is checked in unit.test_dec_mode.)"""
import os
import subprocess
import tempfile
import zipfile

from etwd_harness import Etwd, check, done, BIN, CORPUS, MANIFESTS

INPUTS = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs")
SIH = os.path.join(CORPUS, "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl")


def convert(args, out):
    r = subprocess.run([BIN, "convert"] + args + ["--quiet", "-o", out], capture_output=True, text=True, timeout=300)
    data = open(out, "rb").read() if os.path.exists(out) else b""
    return r, data


def main():
    tmp = tempfile.mkdtemp(prefix="etwd-decode-")
    traces = [SIH]
    for name in ("net.4.5.2.x64.etl.zip", "gcevents.etl.zip"):
        z = os.path.join(INPUTS, name)
        if os.path.exists(z):
            with zipfile.ZipFile(z) as zf:
                member = [m for m in zf.namelist() if m.endswith(".etl")][0]
                path = os.path.join(tmp, os.path.basename(member))
                with open(path, "wb") as f:
                    f.write(zf.read(member))
                traces.append(path)
    check(len(traces) == 3, "corpus traces found: %r" % traces)

    # convert: both modes, the same bytes (ndjson with and without manifests, csv)
    for t in traces:
        for extra in ([], ["--manifests", MANIFESTS], ["--format", "csv", "--manifests", MANIFESTS]):
            outs = {}
            for mode in ("fast", "reference"):
                r, data = convert([t] + extra + ["--decode", mode], os.path.join(tmp, "out." + mode))
                check(r.returncode == 0, "convert --decode %s %s %r: exit %d %s" % (mode, os.path.basename(t), extra,
                                                                                    r.returncode, r.stderr[-300:]))
                outs[mode] = data
            check(len(outs["fast"]) > 1000 and outs["fast"] == outs["reference"],
                  "convert %s %r: fast and reference byte-identical (%d / %d bytes)" % (
                      os.path.basename(t), extra, len(outs["fast"]), len(outs["reference"])))
    r, data = convert([SIH, "--decode=reference"], os.path.join(tmp, "eq"))
    check(r.returncode == 0 and data.count(b"\n") >= 10, "convert --decode=reference form: %s" % r.stderr[-300:])

    # bad values: usage error (exit 2) naming the value and the choices
    r = subprocess.run([BIN, "convert", SIH, "--decode", "turbo", "-o", os.devnull], capture_output=True, text=True)
    check(r.returncode == 2 and "turbo" in r.stderr and "reference" in r.stderr,
          "convert --decode turbo → exit 2 with a message: %d %r" % (r.returncode, r.stderr))
    r = subprocess.run([BIN, "convert", SIH, "--decode"], capture_output=True, text=True)
    check(r.returncode == 2 and "needs a value" in r.stderr, "convert --decode without a value: %r" % r.stderr)
    r = subprocess.run([BIN, "convert", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--decode" in r.stdout, "convert --help lists --decode")
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    check("--decode fast|reference" in r.stdout, "etwd --help lists --decode")
    state = tempfile.mkdtemp(prefix="etwd-decode-state-")
    r = subprocess.run([BIN, "--state-dir", state, "--listen", "127.0.0.1:1", "--decode", "slow"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "--decode" in r.stderr and "slow" in r.stderr,
          "serve --decode slow refused at start: %d %r" % (r.returncode, r.stderr[-300:]))

    # serve: a file decoded through the API, a server in each mode (reference from a config file)
    data = open(traces[-1], "rb").read()  # (gcevents: small enough for one quick response)
    got = {}
    cfg = os.path.join(tmp, "etwd.conf")
    with open(cfg, "w") as f:
        f.write("decode = reference\n")
    for mode, args in (("fast", ["--decode", "fast"]), ("reference", ["--config", cfg])):
        with Etwd(args=args) as e:
            st, h, j = e.json("POST", "/api/v1/files?name=t.etl", body=data, ctype="application/octet-stream")
            check(st == 201, "%s: upload %d" % (mode, st))
            st, h, body = e.request("GET", "/api/v1/files/t.etl/events", token="reader",
                                    headers={"Accept": "application/x-ndjson"})
            check(st == 200, "%s: decode %d" % (mode, st))
            got[mode] = body
            check(e.stop() == 0, "%s: clean exit" % mode)
    check(got["fast"].count(b"\n") > 20 and got["fast"] == got["reference"],
          "serve: the API's decode is byte-identical in both modes (%d / %d bytes)" % (
              len(got["fast"]), len(got["reference"])))
    done()


if __name__ == "__main__":
    main()
