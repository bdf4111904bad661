"""/metrics (issue 24): a live scrape passes `promtool check metrics` (Debian's prometheus package),
idle and with two sessions and a stream subscriber; docs/grafana-etwd.json is valid and every
metric and label its queries use is in that scrape (sessions, rates, loss by layer, subscribers)."""
import json
import os
import re
import subprocess
import threading
import time

from etwd_harness import Etwd, check, done, wait_subscribers, SRC


def promtool(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def scrape(e):
    st, h, body = e.request("GET", "/metrics", token="reader")
    check(st == 200 and h.get("content-type", "").startswith("text/plain; version=0.0.4"),
          "/metrics: %d %s" % (st, h.get("content-type")))
    rc, out = promtool(body)
    check(rc == 0, "promtool check metrics failed (%d): %s\n%s" % (rc, out, body.decode()[:3000]))
    return body.decode()


def main():
    # promtool really checks: a malformed exposition is refused
    rc, _ = promtool(b"# TYPE x counter\n# TYPE x gauge\nx 1\n")
    check(rc != 0, "promtool accepted a malformed exposition")
    with open(os.path.join(SRC, "docs/grafana-etwd.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    check(len(exprs) >= 10, "the dashboard has only %d queries" % len(exprs))
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("sessions", "rate", "loss by layer", "subscribers"):
        check(topic in titles, "the dashboard has no panel about %s" % topic)

    with Etwd() as e:
        scrape(e)  # idle
        sids = []
        for name in ("m1", "m2"):
            st, _, body = e.request("POST", "/api/v1/sessions",
                                    {"name": name, "providers": [{"name": "sched", "events": ["sched_process_exec"]}]})
            check(st == 201, "POST session: %d %s" % (st, body[:200]))
            sids.append(json.loads(body)["id"])
        got = []
        t = threading.Thread(target=lambda: got.extend(e.ndjson("/api/v1/sessions/%d/events" % sids[0], timeout=60)))
        t.start()
        wait_subscribers(e, sids[0], 1)
        for _ in range(3):
            subprocess.run(["/bin/true"])
        time.sleep(0.5)
        text = scrape(e)
        check(re.search(r"^etwd_sessions 2$", text, re.M), "etwd_sessions is not 2")
        check(re.search(r'^etwd_session_subscribers\{session="%d"\} 1$' % sids[0], text, re.M),
              "session %d does not show its subscriber" % sids[0])
        for layer in ("kernel", "hub", "subscriber"):
            check('layer="%s"' % layer in text, "no loss counter for layer %s" % layer)
        families = set(re.findall(r"^# TYPE (\w+) ", text, re.M))
        labels = set(re.findall(r"(\w+)=\"", text))
        for expr in exprs:
            for m in set(re.findall(r"\betwd_\w+", expr)):
                check(m in families, "the dashboard queries %s, which /metrics does not have" % m)
            for grp in re.findall(r"by \(([^)]*)\)", expr):
                for lab in grp.split(","):
                    check(lab.strip() in labels, "the dashboard groups by %s, no such label" % lab.strip())
        for sid in sids:
            st, _, _ = e.request("DELETE", "/api/v1/sessions/%d" % sid)
            check(st in (200, 204), "DELETE %d: %d" % (sid, st))
        t.join(60)
        check(not t.is_alive(), "the stream did not end with its session")
        scrape(e)
    done()


if __name__ == "__main__":
    main()
