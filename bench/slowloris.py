#!/usr/bin/env python3
"""Slow unauthenticated peers vs an authenticated client (issue 18 item 12).

SLOW peers (a separate process, one thread each) keep connections open from 127.0.0.2…
(ADDRS loopback addresses, round robin): half never start TLS, half finish the handshake and then
send a request head one byte every 0.5 s. A peer the server closes (head deadline, connection
cap) reconnects after 0.2 s, so the pressure stays on for the whole run. Meanwhile an
authenticated client on 127.0.0.1 sends `GET /api/v1/sessions` (bearer token) for SECONDS, each on
a NEW TLS connection (the worst case: it needs a free worker for its handshake), and reports
latency p50/p99/max and failures. Goal: p99 < 200 ms with 500 slow peers.

Usage: bench/slowloris.py ETWD_BINARY [SLOW=500] [ADDRS=10] [SECONDS=20] [-- extra etwd args]
Use a non-sanitized build (e.g. cmake -B build/rel -DETWD_SANITIZE=OFF)."""
import os, signal, socket, ssl, subprocess, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/e2e"))
import etwd_harness as H

HEAD = b"GET /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 4000 + b"\r\n\r\n"


def slow_peer(port, src, tls, ctx, stats, stop):
    """One slow peer: hold a connection as long as the server lets it, then come back."""
    while not stop.is_set():
        s = None
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(src, 0))
            if tls:
                s = ctx.wrap_socket(s, server_hostname="localhost")
            stats["open"] += 1
            try:
                if tls:
                    for i in range(len(HEAD)):
                        if stop.wait(0.5):
                            break
                        s.send(HEAD[i:i + 1])
                else:
                    s.settimeout(None)
                    while not stop.is_set() and s.recv(1):
                        pass  # never sends a byte: wait for the server to close it
            finally:
                stats["open"] -= 1
        except (OSError, ssl.SSLError):
            pass
        finally:
            if s:
                s.close()
            stats["cycles"] += 1
        stop.wait(0.2)


def run_slow(port, n, addrs, seconds):
    """The slow peers' process: n threads; prints how many were open each second."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    stats = {"open": 0, "cycles": 0}
    stop = threading.Event()
    th = [threading.Thread(target=slow_peer, daemon=True,
                           args=(port, "127.0.%d.%d" % divmod(2 + i % addrs, 256), i % 2 == 0, ctx, stats, stop))
          for i in range(n)]
    for t in th:
        t.start()
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(1)
        print("slow open %d connects %d" % (stats["open"], stats["cycles"] + stats["open"]), flush=True)
    stop.set()


def pct(v, p):
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--slow-process":
        run_slow(*[int(x) for x in sys.argv[2:6]])
        return
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    H.BIN = os.path.abspath(args[0])
    n = int(args[1]) if len(args) > 1 else 500
    addrs = int(args[2]) if len(args) > 2 else 10
    secs = float(args[3]) if len(args) > 3 else 20
    e = H.Etwd(args=["--log-level", "error"] + extra).start()
    try:
        slow = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--slow-process",
                                 str(e.port), str(n), str(addrs), str(int(secs + 8))],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(5)  # let the slow peers connect and settle
        ctx = e.ssl_context()
        lat, fails = [], 0
        end = time.time() + secs
        while time.time() < end:
            t0 = time.time()
            try:
                import http.client
                c = http.client.HTTPSConnection("127.0.0.1", e.port, timeout=15, context=ctx,
                                                source_address=("127.0.0.1", 0))
                c.request("GET", "/api/v1/sessions", headers={"Authorization": "Bearer " + e.tokens["reader"]})
                r = c.getresponse()
                r.read()
                c.close()
                if r.status != 200:
                    raise OSError("status %d" % r.status)
                lat.append((time.time() - t0) * 1000)
            except (OSError, ssl.SSLError):
                fails += 1
            time.sleep(0.02)
        slow.send_signal(signal.SIGTERM)
        out = slow.communicate(timeout=30)[0].strip().splitlines()
        lat.sort()
        print("slow peers: %d from %d addresses; last: %s" % (n, addrs, out[-1] if out else "?"))
        print("authenticated GET /api/v1/sessions (new TLS connection each): %d ok, %d failed; "
              "p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (len(lat), fails, pct(lat, 50), pct(lat, 99),
                                                          lat[-1] if lat else float("nan")))
    finally:
        e.stop()
        e.cleanup()


if __name__ == "__main__":
    main()
