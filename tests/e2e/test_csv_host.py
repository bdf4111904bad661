"""The Host column of CSV (review item: events carry System.Host, but CSV had no column for it, so
a merged CSV of several hosts could not tell them apart). `etwd convert --format csv`: the header
has Host right after ProcessName, and each row's cell is that event's System.Host in the ndjson of
the same input (empty where the event has none): net.4.5.2.x64 (Host from its SystemConfig event
on), in the mixed form and in the per-field form (one event type; a field named Host would be
prefixed), and a merge of net with smallEtlFile (a host and no host in one file). `etwd remote
stream --format csv` of a central session (backend nats) fed by two agents with different
--host-name through a real nats-server: both hosts' rows, each with its own Host cell."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import etwd_harness as H
from etwd_harness import BIN, CORPUS, Etwd, check, done
from test_nats import Nats, create

TESTS = os.path.join(CORPUS, "microsoft+perfview/src/TraceEvent/TraceEvent.Tests")
NET_ZIP = os.path.join(TESTS, "inputs/net.4.5.2.x64.etl.zip")
SMALL = os.path.join(TESTS, "smallEtlFile.etl")
COMMON = ["seq", "TimeCreated", "Provider", "EventName", "EventID", "Version", "Level", "Task", "Opcode", "Keywords",
          "ProcessID", "ThreadID", "ProcessName", "Host", "ProcessorID"]
REMOTE = COMMON + ["EventData"]  # etwd remote stream --format csv: the server's ?format=csv rows


def convert(files, *args):
    r = subprocess.run([BIN, "convert"] + files + ["--quiet", "--no-stacks"] + list(args), capture_output=True,
                       timeout=300)
    check(r.returncode == 0, "convert %s: rc %d %s" % (args, r.returncode, r.stderr[-300:]))
    return r.stdout.decode(errors="replace")


def rows_of(text):
    csv.field_size_limit(1 << 30)
    return list(csv.reader(io.StringIO(text)))


def hosts_of(files):
    """seq → System.Host ("" when none) of the input's ndjson"""
    return {e["seq"]: e["System"].get("Host", "") for e in map(json.loads, convert(files).splitlines())}


def check_hosts(what, rows, hosts, want_header):
    check(rows and rows[0][:len(want_header)] == want_header, "%s: header %s" % (what, rows[:1] and rows[0][:16]))
    ih = COMMON.index("Host")
    bad = [r[0] for r in rows[1:] if len(r) <= ih or r[ih] != hosts.get(int(r[0]))]
    check(len(rows) > 1 and not bad, "%s: %d of %d Host cells differ from the ndjson's System.Host (seq %s)"
          % (what, len(bad), len(rows) - 1, bad[:5]))
    return [r[ih] for r in rows[1:]]


def test_convert():
    hosts = hosts_of([NET_ZIP])
    check(set(hosts.values()) == {"", "BRIANROB-W8"}, "net: Host values %s" % set(hosts.values()))
    rows = rows_of(convert([NET_ZIP], "--format", "csv"))
    cells = check_hosts("net csv", rows, hosts, COMMON + ["EventData"])
    check(len(rows) == len(hosts) + 1, "net csv: %d rows, %d events" % (len(rows) - 1, len(hosts)))
    check(cells.count("BRIANROB-W8") == 44095 and cells.count("") == len(hosts) - 44095,
          "net csv: 44,095 rows of BRIANROB-W8, the rest empty: %d" % cells.count("BRIANROB-W8"))
    # one event type: per-field columns after the same common columns
    rows = rows_of(convert([NET_ZIP], "--format", "csv", "--provider", "Windows Kernel", "--event", "Thread/DCStop"))
    cells = check_hosts("net csv one type", rows, hosts, COMMON)
    check(rows and "Host" not in rows[0][len(COMMON):], "net csv one type: the fields: %s" % rows[:1])
    check(cells and set(cells) == {"BRIANROB-W8"}, "net csv one type: Thread/DCStop (after SystemConfig) all "
          "carry the host: %s" % set(cells))
    # a merge: one file with a host, one without
    files = [NET_ZIP, SMALL]
    hosts = hosts_of(files)
    rows = rows_of(convert(files, "--format", "csv"))
    cells = check_hosts("merged csv", rows, hosts, COMMON + ["EventData"])
    check(len(rows) == len(hosts) + 1 and "BRIANROB-W8" in cells and "" in cells, "merged csv: both kinds of rows")


def test_remote_fleet(tmp):
    """two agents → JetStream → a central session; `remote stream --format csv` of it"""
    if not shutil.which("nats-server"):
        check(False, "needs nats-server (scripts/deps.sh installs it)")
        return
    prog = os.path.join(tmp, "hcsv%d" % (os.getpid() % 100000))
    shutil.copy("/bin/true", prog)
    name, N = os.path.basename(prog), 3
    nats = Nats().start()
    try:
        sink = {"type": "nats", "url": nats.url(), "stream": "HCSV", "subject": "hcsv.{host}.{session}.{provider}"}
        with Etwd(args=["--host-name", "agent-a"]) as a, Etwd(args=["--host-name", "agent-b"]) as b:
            for e in (a, b):
                j = create(e, {"name": "ex", "providers": [{"name": "sched", "events": ["sched_process_exec"]}],
                               "sinks": [sink]})
                H.wait_subscribers(e, j["id"], 1)
            cid = create(a, {"name": "central", "backend": "nats", "subjects": ["hcsv.>"],
                             "nats": {"url": nats.url(), "stream": "HCSV"}})["id"]
            for _ in range(N):
                subprocess.run([prog], check=True)
            fp = re.search(r"fingerprint: ([0-9A-F:]+)", a.stdout).group(1)
            tok = os.path.join(tmp, "token")
            with open(tok, "w") as f:
                f.write(a.tokens["admin"] + "\n")
            t0 = time.time()
            p = subprocess.run([BIN, "remote", "--url", "https://127.0.0.1:%d" % a.port, "--token-file", tok,
                                "--fingerprint", fp, "stream", "--session", str(cid), "--filter", "from=1",
                                "--filter", "process=" + name, "--format", "csv", "--limit", str(2 * N)],
                               capture_output=True, timeout=120, env=a.env)
            rows = rows_of(p.stdout.decode(errors="replace"))
            check(p.returncode == 0 and rows and rows[0] == REMOTE, "remote stream csv header: rc %d %s %s"
                  % (p.returncode, rows[:1], p.stderr[-300:]))
            ih, ip = REMOTE.index("Host"), REMOTE.index("ProcessName")
            got = sorted(r[ih] for r in rows[1:] if len(r) == len(REMOTE) and r[ip] == name)
            check(got == ["agent-a"] * N + ["agent-b"] * N, "remote stream csv: the Host cells of %s's %d executions "
                  "seen by each agent: %s (%.1f s)" % (name, N, got, time.time() - t0))
    finally:
        nats.cleanup()


def main():
    test_convert()
    tmp = tempfile.mkdtemp(prefix="etwd-csvhost-")
    try:
        test_remote_fleet(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
