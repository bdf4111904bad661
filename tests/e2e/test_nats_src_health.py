"""The broker's health in a "nats" session's stats (stats.source) and /metrics
(etwd_session_source_ok), against a real nats-server: connected while the broker runs (with the
time of the last message and the consumer's pending/delivered state); the broker SIGKILLed →
within seconds "disconnected" with a reason, /metrics 0, and the session stays running; the
broker restarted on the same port (same store) → reconnected, the reconnection counted, new
events reach the session and a WebSocket client that stayed connected. The stats call itself
never waits for the broker: it answers at once while the broker is away. A consumer deleted under
the session (connected, reading fails) shows as "error" with the reason."""
import json
import signal
import time

from etwd_harness import Etwd, check, done
from test_nats import Nats, create, require_nats, session, wait_for
from test_nats_hardening import js_request
from test_nats_from import STREAM, publish


def source(e, sid):
    return session(e, sid)["stats"].get("source") or {}


def metric_ok(e, sid):
    st, h, m = e.request("GET", "/metrics", token="reader")
    for line in m.decode().splitlines():
        if line.startswith('etwd_session_source_ok{session="%d"}' % sid):
            return int(line.split()[-1])
    return None


def ws_items(ws, n, timeout=30):
    got, deadline = [], time.time() + timeout
    while len(got) < n and time.time() < deadline:
        ws.settimeout(max(0.1, deadline - time.time()))
        try:
            got += [r["EventData"]["i"] for r in json.loads(ws.recv()) if "EventData" in r]
        except Exception:
            break
    return got


def main():
    require_nats()
    nats = Nats("health").start()
    try:
        r = js_request(nats, "$JS.API.STREAM.CREATE." + STREAM, {
            "name": STREAM, "subjects": ["froms.>"], "storage": "file", "retention": "limits", "max_consumers": -1,
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "num_replicas": 1, "discard": "old"})
        check("error" not in r, "stream created: %r" % r)
        publish(nats, 1, 5)
        with Etwd() as e:
            sid = create(e, {"name": "central", "backend": "nats", "subjects": ["froms.>"],
                             "nats": {"url": nats.url(), "stream": STREAM}})["id"]
            wait_for("the session read the stream", lambda: session(e, sid)["stats"]["events"] == 5)
            src = wait_for("the consumer's info", lambda: (lambda s: s if s.get("consumers") and
                                                           s["consumers"][0].get("delivered_stream_seq") == 5 else None)(
                source(e, sid)), timeout=15)
            check(src and src["state"] == "ok" and src["connected"] is True and src["status"] == "connected"
                  and src["reconnects"] == 0, "broker up: source ok, connected: %r" % src)
            c = (src or {}).get("consumers", [{}])[0]
            check(c.get("subject") == "froms.>" and c.get("pending") == 0 and isinstance(c.get("info_age_ms"), int),
                  "the consumer: nothing pending, delivered up to 5: %r" % c)
            check(src and src["last_message_time"] and isinstance(src["last_message_age_ms"], int),
                  "the last message's time and age: %r" % src)
            check(metric_ok(e, sid) == 1, "/metrics etwd_session_source_ok 1 while connected")
            ws = e.ws("/api/v1/sessions/%d/events" % sid)
            wait_for("the WebSocket client", lambda: session(e, sid)["stats"]["subscribers"] >= 1)

            nats.stop(signal.SIGKILL)
            t0 = time.time()
            src = wait_for("stats say disconnected", lambda: (lambda s: s if s.get("connected") is False else None)(
                source(e, sid)), timeout=15)
            took = time.time() - t0
            check(took < 8, "the disconnection shows within seconds (%.1f s)" % took)
            check(src and src["state"] == "disconnected" and "disconnected" in (src.get("last_error") or "")
                  and src.get("disconnected_since") and src.get("last_error_time"),
                  "broker gone: state disconnected with a reason: %r" % src)
            t1 = time.time()
            s = session(e, sid)
            check(time.time() - t1 < 1.0, "a stats call does not wait for the broker (%.2f s)" % (time.time() - t1))
            check(s["state"] == "running", "the session stays alive: %r" % s["state"])
            check(metric_ok(e, sid) == 0, "/metrics etwd_session_source_ok 0 while disconnected")
            time.sleep(1.0)
            check(source(e, sid).get("connected") is False, "still disconnected while the broker is away")

            nats.start()  # the same port and store: the stream and the session's durable consumer are back
            src = wait_for("stats say reconnected", lambda: (lambda s: s if s.get("connected") else None)(
                source(e, sid)), timeout=30)
            check(src and src["reconnects"] >= 1 and src["disconnects"] >= 1, "the reconnection is counted: %r" % src)
            publish(nats, 6, 10)
            wait_for("events flow again", lambda: session(e, sid)["stats"]["events"] == 10, timeout=30)
            src = source(e, sid)
            check(src.get("state") == "ok" and src.get("status") == "connected" and src.get("disconnected_since") is None,
                  "after the restart: ok: %r" % src)
            check((src.get("last_message_age_ms") or 10**9) < 30000, "a recent last message: %r" % src)
            check(wait_for("/metrics 1 again", lambda: metric_ok(e, sid) == 1, timeout=10),
                  "/metrics etwd_session_source_ok 1 again")
            got = ws_items(ws, 5)
            check(got == [6, 7, 8, 9, 10], "the WebSocket client that stayed gets the new events: %r" % got)
            ws.close()
            # the consumer deleted under the session (an operator's act): connected, but reading
            # fails → state "error" naming it, /metrics 0, the session still running
            names = js_request(nats, "$JS.API.CONSUMER.NAMES." + STREAM, {"offset": 0}).get("consumers") or []
            check(len(names) == 1, "the session's durable consumer: %r" % names)
            r = js_request(nats, "$JS.API.CONSUMER.DELETE.%s.%s" % (STREAM, names[0]), {})
            check(r.get("success") is True, "consumer deleted: %r" % r)
            src = wait_for("stats say error", lambda: (lambda s: s if s.get("state") == "error" else None)(
                source(e, sid)), timeout=15)
            check(src and src["connected"] is True and "froms.>" in (src.get("last_error") or ""),
                  "a deleted consumer: state error, connected, the error names the subject: %r" % src)
            check(metric_ok(e, sid) == 0, "/metrics etwd_session_source_ok 0 while reading fails")
            check(session(e, sid)["state"] == "running", "the session stays alive")
            e.request("DELETE", "/api/v1/sessions/%d" % sid)
    finally:
        nats.cleanup()
    done()


if __name__ == "__main__":
    main()
