"""The provider listing of backend "nats" shows what the streams have carried (issue 23 item 2,
audit): before any nats session nothing; after a central session read an agent's sched and
syscalls events, GET /api/v1/providers?backend=nats lists both (events = distinct events seen,
?q= filters) and GET /api/v1/providers/sched?backend=nats names sched_process_exec; a provider
never seen is 404."""
import os
import shutil
import subprocess

import etwd_harness as H
from etwd_harness import Etwd, check, done
from test_nats import require_nats, Nats, create, run_n, sink_of, session, unique_prog, wait_for


def main():
    require_nats()
    nats = Nats("prov").start()
    prog = unique_prog("prov")
    try:
        with Etwd(args=["--host-name", "agent"]) as a, Etwd(args=["--host-name", "central"]) as c:
            st, h, j = c.json("GET", "/api/v1/providers?backend=nats", token="reader")
            check(st == 200 and j == [], "nothing seen yet: %d %r" % (st, j))
            child = subprocess.Popen(["/usr/bin/python3", "-c", "import os,sys\nsys.stdin.readline()\n"
                                      "[os.getppid() for _ in range(50)]\nos.execv(sys.argv[1], sys.argv[1:])\n", prog],
                                     stdin=subprocess.PIPE)  # then it becomes prog: its exec event
            sink = {"type": "nats", "url": nats.url(), "stream": "PROV", "subject": "prov.{host}.{session}.{provider}"}
            aid = create(a, {"name": "ex", "pids": [child.pid],
                             "providers": [{"name": "sched", "events": ["sched_process_exec"],
                                            "filter": 'filename ~ "*/%s"' % os.path.basename(prog)},
                                           {"name": "syscalls", "events": ["sys_enter_getppid"]}],
                             "sinks": [sink]})["id"]
            H.wait_subscribers(a, aid, 1)
            wait_for("the sink connected", lambda: sink_of(a, aid)["connected"])
            child.stdin.write(b"go\n")
            child.stdin.close()
            child.wait()
            a.json("POST", "/api/v1/sessions/%d/stop" % aid, expect=200)
            produced = session(a, aid)["stats"]["events"]
            wait_for("the agent's events acknowledged", lambda: sink_of(a, aid)["acked"] == produced)
            cid = create(c, {"name": "central", "backend": "nats", "subjects": ["prov.>"],
                             "nats": {"url": nats.url(), "stream": "PROV"}})["id"]
            wait_for("the central session read the stream", lambda: session(c, cid)["stats"]["events"] == produced)
            per = session(c, cid)["stats"]["per_provider"]
            st, h, j = c.json("GET", "/api/v1/providers?backend=nats", token="reader")
            names = {p["name"]: p for p in j or []}
            check(st == 200 and set(names) == set(per) and all(p["backend"] == "nats" for p in j or []),
                  "the listing has the providers the stream carried %r: %d %r" % (sorted(per), st, j))
            check(set(per) == {"sched", "syscalls"} and names.get("syscalls", {}).get("events") == 1 and names.get("sched", {}).get("events") == 1,
                  "sched and syscalls, one event each: %r" % names)
            st, h, j = c.json("GET", "/api/v1/providers?backend=nats&q=SYSC", token="reader")
            check(st == 200 and [p["name"] for p in j] == ["syscalls"], "?q= filters: %r" % j)
            st, h, j = c.json("GET", "/api/v1/providers/syscalls?backend=nats", token="reader")
            check(st == 200 and j.get("name") == "syscalls" and [e["name"] for e in j.get("events", [])] == ["sys_enter_getppid"],
                  "the provider's events: %d %r" % (st, j))
            st, h, j = c.json("GET", "/api/v1/providers/never-seen?backend=nats", token="reader")
            check(st == 404, "a provider never seen: %d %r" % (st, j))
            c.request("DELETE", "/api/v1/sessions/%d" % cid)
            a.request("DELETE", "/api/v1/sessions/%d" % aid)
    finally:
        nats.cleanup()
        shutil.rmtree(os.path.dirname(prog), ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
