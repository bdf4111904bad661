/* netguard.c — connection caps and the head deadline (see netguard.h).
 *
 * civetweb 1.15 gives each connection a worker thread for its whole life, before anything about
 * the peer is known. So a peer that opens connections and then dawdles (never starts TLS, sends
 * its head a byte at a time) holds workers that authenticated clients need. Bounds:
 *  - the TLS handshake and every request head must finish within --head-timeout (civetweb's
 *    sslize and read_message read etwd_cw_head_timeout_ms);
 *  - at most --max-connections-per-address connections from one peer address;
 *  - at most --max-connections in all, which is also civetweb's worker pool: a connection is
 *    only admitted when a worker is free for it, so none waits in civetweb's queue behind slow
 *    peers; one over a cap is closed at once (the client sees a reset), counted in /metrics
 *    and logged (at most one line per 10 s, with the count since the last line);
 *  - workers are started on demand: `prespawn` with the server, then one more whenever the open
 *    connections outnumber them (each thread costs ~100 KiB: static TLS of the decoders, zeroed
 *    at creation), so an idle server stays small; they stay until the server stops.
 *
 * Threads: etwd_cw_admit runs on civetweb's master thread (after accept), etwd_cw_release on the
 * worker that served the connection; both take g.mu. The table holds one entry per peer address
 * with connections open (so at most --max-connections entries), in an array searched linearly:
 * few distinct peers in practice, and a compare per entry costs nanoseconds.
 */
#include "netguard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

#include "log.h"

/* defined in etwd's patched civetweb.c (CMakeLists.txt, "connection guard") */
extern unsigned (*etwd_cw_admit)(const struct sockaddr *peer);
extern unsigned etwd_cw_prespawn;
extern void (*etwd_cw_release)(const struct sockaddr *peer);
extern unsigned etwd_cw_head_timeout_ms;

#define LOG_EVERY_S 10

struct peer {
  unsigned char addr[16]; /* IPv4 in the first 4 bytes, the rest 0; or IPv6 */
  unsigned char v6;
  unsigned open;
};

static struct {
  pthread_mutex_t mu;
  struct peer *peers; /* [0, n) in use; capacity max_total */
  unsigned n, open, max_total, max_per;
  atomic_ullong refused_addr, refused_total; /* since start, for /metrics */
  unsigned long long logged;                 /* refusals already reported in the log (under mu) */
  time_t last_log;                           /* under mu */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int key_of(const struct sockaddr *sa, struct peer *k) {
  memset(k, 0, sizeof *k);
  if (sa->sa_family == AF_INET) {
    memcpy(k->addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    return 0;
  }
  if (sa->sa_family == AF_INET6) {
    memcpy(k->addr, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    k->v6 = 1;
    return 0;
  }
  return -1; /* not an IP peer: counted in the total only */
}

static struct peer *find(const struct peer *k) {
  for (unsigned i = 0; i < g.n; i++)
    if (g.peers[i].v6 == k->v6 && !memcmp(g.peers[i].addr, k->addr, 16)) return &g.peers[i];
  return NULL;
}

/* one log line for refusals, at most every LOG_EVERY_S seconds; called without g.mu */
static void log_refusal(const struct peer *k, const char *reason) {
  time_t now = time(NULL);
  unsigned long long total = atomic_load(&g.refused_addr) + atomic_load(&g.refused_total);
  pthread_mutex_lock(&g.mu);
  int due = now - g.last_log >= LOG_EVERY_S;
  unsigned long long since = total - g.logged;
  if (due) {
    g.last_log = now;
    g.logged = total;
  }
  pthread_mutex_unlock(&g.mu);
  if (!due) return;
  char a[64] = "?";
  inet_ntop(k->v6 ? AF_INET6 : AF_INET, k->addr, a, sizeof a);
  etwd_log(LOG_WARN, "connection refused",
           "reason=%s remote=%s refused_since_last=%llu max_connections=%u max_per_address=%u", reason,
           a, since, g.max_total, g.max_per);
}

/* 0 = refused, else the number of open connections with this one (civetweb starts workers up to it) */
static unsigned admit(const struct sockaddr *sa) {
  struct peer k;
  int ip = key_of(sa, &k) == 0;
  const char *why = NULL;
  int per_addr = 0;
  unsigned open = 0;
  pthread_mutex_lock(&g.mu);
  struct peer *p = ip ? find(&k) : NULL;
  if (g.open >= g.max_total) {
    why = "max-connections";
  } else if (p && p->open >= g.max_per) {
    why = "max-connections-per-address";
    per_addr = 1;
  } else {
    if (ip && !p) {
      p = &g.peers[g.n++]; /* room: n <= open < max_total */
      *p = k;
    }
    if (p) p->open++;
    open = ++g.open;
  }
  pthread_mutex_unlock(&g.mu);
  if (!why) return open;
  atomic_fetch_add(per_addr ? &g.refused_addr : &g.refused_total, 1);
  log_refusal(&k, why);
  return 0;
}

static void release(const struct sockaddr *sa) {
  struct peer k;
  int ip = key_of(sa, &k) == 0;
  pthread_mutex_lock(&g.mu);
  struct peer *p = ip ? find(&k) : NULL;
  if (p && --p->open == 0) *p = g.peers[--g.n];
  if (g.open) g.open--;
  pthread_mutex_unlock(&g.mu);
}

int etwd_netguard_start(unsigned max_total, unsigned prespawn, unsigned max_per_address,
                        unsigned head_timeout_s) {
  free(g.peers);
  g.peers = calloc(max_total ? max_total : 1, sizeof *g.peers);
  if (!g.peers) return -1;
  g.n = g.open = 0;
  g.max_total = max_total;
  g.max_per = max_per_address;
  g.logged = 0;
  g.last_log = 0;
  atomic_store(&g.refused_addr, 0);
  atomic_store(&g.refused_total, 0);
  etwd_cw_head_timeout_ms = head_timeout_s * 1000u;
  etwd_cw_prespawn = prespawn;
  etwd_cw_release = release;
  etwd_cw_admit = admit;
  return 0;
}

void etwd_netguard_stop(void) {
  etwd_cw_admit = NULL;
  etwd_cw_release = NULL;
  etwd_cw_head_timeout_ms = 0;
  etwd_cw_prespawn = 0;
  free(g.peers);
  g.peers = NULL;
}

void etwd_netguard_metrics(struct etw_jw *w) {
  pthread_mutex_lock(&g.mu);
  unsigned open = g.open;
  pthread_mutex_unlock(&g.mu);
  etw_jw_lit(w, "# HELP etwd_connections Open client connections (TLS handshake, request head, "
                "request, keep-alive or stream).\n# TYPE etwd_connections gauge\netwd_connections ");
  etw_jw_u64(w, open);
  etw_jw_lit(w, "\n# HELP etwd_connections_refused_total Connections closed at accept: over "
                "--max-connections-per-address or --max-connections.\n"
                "# TYPE etwd_connections_refused_total counter\n"
                "etwd_connections_refused_total{reason=\"per_address\"} ");
  etw_jw_u64(w, atomic_load(&g.refused_addr));
  etw_jw_lit(w, "\netwd_connections_refused_total{reason=\"total\"} ");
  etw_jw_u64(w, atomic_load(&g.refused_total));
  etw_jw_ch(w, '\n');
}
