/* bench_tls_floor.c — the floor under the fan-out benchmark (bench/fanout.py): the CPU it takes
 * just to send the same bytes to N clients over loopback TCP (with TLS: encrypted for each
 * client under its own keys), and nothing else — no tracing, decoding, JSON, hub, threads or
 * wake-ups. One thread sends one frame of FRAME_BYTES to every client every INTERVAL_MS for
 * SECONDS; a child process plays the N clients (reads and discards). Prints the sender's CPU
 * (getrusage: user + system, which on loopback includes the receive-side TCP processing the
 * kernel does in the sender's context).
 *
 * usage: bench_tls_floor N SECONDS FRAME_BYTES INTERVAL_MS [plain]
 * e.g.   bench_tls_floor 100 5 7200 10   (~ fanout.py's per-client stream at 2,000 events/s)
 *
 * Against fanout.py's "1 subscriber" etwd CPU for the same per-client stream, N clients' floor
 * bounds the fan-out ratio from below: no sender design can cost less than this. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tls.h"

#define NMAX 1000

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "bench_tls_floor: %s: %s\n", what, strerror(errno));
  ERR_print_errors_fp(stderr);
  exit(1);
}

/* the clients: connect n sockets (TLS handshakes if @ctx), then read and discard until EOF */
static void clients(int port, int n, SSL_CTX *ctx) {
  static int fd[NMAX];
  static SSL *ssl[NMAX];
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; i++) {
    fd[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (fd[i] < 0 || connect(fd[i], (struct sockaddr *)&a, sizeof a)) die("connect");
    if (ctx) {
      ssl[i] = SSL_new(ctx);
      SSL_set_fd(ssl[i], fd[i]);
      if (SSL_connect(ssl[i]) != 1) die("SSL_connect");
    }
  }
  static struct pollfd p[NMAX];
  static char buf[1 << 16];
  int open_n = n;
  for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = fd[i], .events = POLLIN};
  while (open_n > 0) {
    if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR) die("poll");
    for (int i = 0; i < n; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int got;
      do { /* drain what TLS has already decrypted too */
        got = ctx ? SSL_read(ssl[i], buf, sizeof buf) : (int)read(fd[i], buf, sizeof buf);
      } while (got > 0 && ctx && SSL_pending(ssl[i]) > 0);
      if (got <= 0) {
        p[i].fd = -1;
        open_n--;
      }
    }
  }
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s N SECONDS FRAME_BYTES INTERVAL_MS [plain]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), secs = atoi(argv[2]), frame = atoi(argv[3]), every_ms = atoi(argv[4]);
  int tls = !(argc > 5 && !strcmp(argv[5], "plain"));
  if (n < 1 || n > NMAX || secs < 1 || frame < 1 || every_ms < 1) {
    fprintf(stderr, "bench_tls_floor: N 1..%d, SECONDS, FRAME_BYTES, INTERVAL_MS >= 1\n", NMAX);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  SSL_CTX *sctx = NULL, *cctx = NULL;
  if (tls) {
    char dir[] = "/tmp/etwd-tls-floor-XXXXXX", cert[600] = "", key[600] = "", fp[96], err[256];
    if (!mkdtemp(dir)) die("mkdtemp");
    if (etwd_tls_prepare(dir, cert, sizeof cert, key, sizeof key, fp, err, sizeof err)) {
      fprintf(stderr, "bench_tls_floor: %s\n", err);
      return 1;
    }
    sctx = SSL_CTX_new(TLS_server_method());
    if (!sctx || etwd_tls_init_ctx(sctx, cert, key) != 1) die("server TLS context");
    cctx = SSL_CTX_new(TLS_client_method());
    unlink(cert);
    unlink(key);
    rmdir(dir);
  }
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, NMAX) ||
      getsockname(ls, (struct sockaddr *)&a, &al))
    die("listen");
  alarm((unsigned)secs + 120); /* never hang (a client that failed its handshake, say) */
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    close(ls);
    clients(ntohs(a.sin_port), n, cctx);
  }
  static int fd[NMAX];
  static SSL *ssl[NMAX];
  for (int i = 0; i < n; i++) {
    fd[i] = accept(ls, NULL, NULL);
    if (fd[i] < 0) die("accept");
    int one = 1;
    setsockopt(fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* as etwd (tcp_nodelay) */
    if (tls) {
      ssl[i] = SSL_new(sctx);
      SSL_set_fd(ssl[i], fd[i]);
      if (SSL_accept(ssl[i]) != 1) die("SSL_accept");
    }
  }
  /* a frame of JSON-like text (what the bytes are does not matter to AES-GCM or TCP) */
  char *buf = malloc((size_t)frame);
  static const char ev[] = "{\"seq\":123456,\"System\":{\"Provider\":{\"Name\":\"raw_syscalls\"},"
                           "\"EventID\":17,\"Level\":4,\"TimeCreated\":\"2026-11-25T18:00:00.123456789Z\"},"
                           "\"EventData\":{\"id\":110,\"args\":[0,0,0,0,0,0]}},";
  for (int i = 0; i < frame; i++) buf[i] = ev[i % (sizeof ev - 1)];
  double c0 = cpu_s(), t0 = now_s(), next = t0;
  unsigned long long sent = 0, frames = 0;
  while (now_s() - t0 < secs) {
    for (int i = 0; i < n; i++) {
      int w = tls ? SSL_write(ssl[i], buf, frame) : (int)write(fd[i], buf, (size_t)frame);
      if (w != frame) die("write");
      sent += (unsigned long long)w;
    }
    frames++;
    next += every_ms / 1000.0;
    double d = next - now_s();
    if (d > 0) {
      struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
  double cpu = cpu_s() - c0, wall = now_s() - t0;
  for (int i = 0; i < n; i++) {
    if (tls) {
      SSL_shutdown(ssl[i]);
      SSL_free(ssl[i]);
    }
    close(fd[i]);
  }
  waitpid(child, NULL, 0);
  free(buf);
  close(ls);
  SSL_CTX_free(sctx);
  SSL_CTX_free(cctx);
  printf("clients=%d transport=%s frame=%d every_ms=%d frames=%llu bytes=%llu wall_s=%.2f cpu_s=%.3f "
         "ns_per_byte=%.2f\n",
         n, tls ? "tls" : "plain", frame, every_ms, frames, sent, wall, cpu, cpu * 1e9 / (double)sent);
  return 0;
}
