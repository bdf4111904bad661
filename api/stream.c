/* stream.c — event streams: WebSocket (one JSON array of events per text frame) and chunked
 * ndjson. Each WebSocket client gets a subscriber (bounded queue in the hub) and its own sender
 * thread, so a stalled client only ever blocks itself: on a live session its queue fills, the hub
 * drops and counts for it alone, and it receives a gap record when it catches up; a replay's pass
 * (its own reader, lossless hub) waits for it instead. Released with etw_session_unsubscribe:
 * what its queue held, and a frame whose write failed, count as its loss.
 *
 * civetweb rules followed (stack-notes §1): the sender thread is started in ready_handler and
 * joined in close_handler (the connection is recycled when close_handler returns); each frame is
 * built by hand and sent under mg_lock_connection (over TLS in TLS_PIECE pieces); after a failed
 * write the sender stops writing and lets civetweb close the connection.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#endif

#include "api.h"
#include "etwcore/caps.h"
#include "etwcore/evcsv.h"
#include "etwcore/util.h"
#include "files.h"
#include "log.h"

#define FRAME_MAX (512 * 1024)       /* frames are cut here (one larger event still goes alone) */
#define WRITER_MAX (16u << 20)        /* > the largest encoded event any backend produces */
#define IDLE_WAIT_MS 500              /* senders wake at once on data; this only bounds idling */
#define HEARTBEAT_MS 15000            /* idle ndjson streams send a heartbeat line this often */
#define LINGER_MS 10                  /* a sender writes at most one frame per this, while busy */
#define LINGER_BYTES (FRAME_MAX / 2)  /* ... unless this much is queued */
/* Over TLS civetweb's write time-out (--io-timeout) covers one whole mg_write: SSL_write
 * returns only when the whole buffer is out. So frames and chunks go out in pieces of this size,
 * each with its own time-out: "no progress for --io-timeout", as on plain sockets (whose
 * partial sends already restart it), for readers down to ~0.4 KB/s at 10 s. */
#define TLS_PIECE 4096

struct ws_client {
  struct etwd_server *srv;
  struct mg_connection *conn;
  struct etw_session *sess;
  struct etw_sub *sub;
  pthread_t th;
  int th_started;
  atomic_int stop;
  atomic_int dead;       /* the sender has exited: civetweb should close the connection */
  atomic_int close_sent; /* a close frame went out (ours or the echo): never send a second */
  char who[32];
  int fd; /* the connection's socket where it can be found (Linux), else -1 */
  struct ws_client *next;
};

static int64_t mono_ms(void) { return etw_mono_ns() / 1000000; }

static pthread_mutex_t clients_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ws_client *clients;

/* copy a comma-separated list into names[]; -1 if an entry is empty, too long or too many */
static int name_list(const char *v, char names[][ETW_FILTER_NAME_MAX], uint32_t *n) {
  const char *p = v;
  while (*p) {
    size_t k = strcspn(p, ",");
    if (k == 0 || k >= ETW_FILTER_NAME_MAX || *n >= ETW_FILTER_MAX) return -1;
    memcpy(names[*n], p, k);
    names[(*n)++][k] = 0;
    p += k;
    if (*p) p++;
  }
  return 0;
}

static int parse_u32s(const char *v, uint32_t *out, uint32_t *n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", v);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *end;
    unsigned long x = strtoul(t, &end, 10);
    if (*end || end == t || t[0] == '-' || x > 0xFFFFFFFFul || *n >= ETW_FILTER_MAX) return -1;
    out[(*n)++] = (uint32_t)x;
  }
  return 0;
}

/* mg_get_var: >= 0 found, -1 absent, anything else (too long, bad encoding) is an error */
static int qvar(const char *q, size_t ql, const char *name, char *v, size_t n, char *err, size_t errlen) {
  int r = mg_get_var(q, ql, name, v, n);
  if (r >= 0 && strlen(v) != (size_t)r) { /* %00: a NUL would cut the value short */
    snprintf(err, errlen, "query parameter %s contains a NUL character (%%00)", name);
    return -1;
  }
  if (r >= 0) return 1;
  if (r == -1) return 0;
  snprintf(err, errlen, "query parameter %s is too long or badly encoded", name);
  return -1;
}

int etwd_stream_format(const char *q, char *err, size_t errlen) {
  char v[16];
  int r = q ? qvar(q, strlen(q), "format", v, sizeof v, err, errlen) : 0;
  if (r < 0 || (r && strcmp(v, "ndjson") && strcmp(v, "csv"))) {
    snprintf(err, errlen, "format must be ndjson (the default: one JSON event per line) or csv (a header row, "
                          "then one row per event)");
    return -1;
  }
  return r && !strcmp(v, "csv");
}

const char *etwd_stream_ctype(int csv) { return csv ? "text/csv; charset=utf-8" : "application/x-ndjson"; }

int etwd_sub_filter_from_query(const char *q, struct etw_sub_filter *f, unsigned long long *from,
                               char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  f->max_level = -1;
  *from = 0;
  if (!q) return 0;
  size_t ql = strlen(q);
  char v[1024];
  int r;
  /* a parameter the server does not know would be silently ignored: refuse it (caps.h's table) */
  for (const char *p = q; *p;) {
    size_t k = strcspn(p, "&"), nk = strcspn(p, "=&");
    if (k && !etw_stream_param_known(p, nk)) {
      int n = snprintf(err, errlen, "unknown stream parameter \"%.*s\" (known:", (int)(nk > 64 ? 64 : nk), p);
      for (const struct etw_member *m = etw_members(); m->name && n > 0 && (size_t)n < errlen; m++)
        if (m->kind == ETW_MEMBER_STREAM) n += snprintf(err + n, errlen - (size_t)n, " %s", m->name);
      if (n > 0 && (size_t)n < errlen) snprintf(err + n, errlen - (size_t)n, ")");
      return -1;
    }
    p += k;
    if (*p) p++;
  }
  if ((r = qvar(q, ql, "stackwalk_events", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) { /* a replay's pass (its own reader) for this client; file decodes take it in their spec */
    if (strcmp(v, "true") && strcmp(v, "false")) {
      snprintf(err, errlen, "stackwalk_events must be true or false");
      return -1;
    }
    f->stackwalk_events = !strcmp(v, "true") ? 2 : 1;
  }
  if ((r = qvar(q, ql, "provider", v, sizeof v, err, errlen)) < 0) return -1;
  if (r && name_list(v, f->providers, &f->n_providers)) {
    snprintf(err, errlen, "provider: at most %d comma-separated names of 1-%d bytes", ETW_FILTER_MAX,
             ETW_FILTER_NAME_MAX - 1);
    return -1;
  }
  if ((r = qvar(q, ql, "event", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) { /* names, or numeric event ids */
    const char *p = v;
    while (*p) {
      size_t k = strcspn(p, ",");
      char t[ETW_FILTER_NAME_MAX];
      if (k == 0 || k >= sizeof t) break;
      memcpy(t, p, k);
      t[k] = 0;
      char *end;
      unsigned long x = strtoul(t, &end, 10);
      if (!*end && t[0] != '-' && x <= 0xFFFFFFFFul) {
        if (f->n_ids >= ETW_FILTER_MAX) break;
        f->ids[f->n_ids++] = (uint32_t)x;
      } else {
        if (f->n_names >= ETW_FILTER_MAX) break;
        memcpy(f->names[f->n_names++], t, k + 1);
      }
      p += k;
      if (*p) p++;
    }
    if (*p) {
      snprintf(err, errlen, "event: at most %d names and %d ids, each 1-%d bytes", ETW_FILTER_MAX,
               ETW_FILTER_MAX, ETW_FILTER_NAME_MAX - 1);
      return -1;
    }
  }
  if ((r = qvar(q, ql, "pid", v, sizeof v, err, errlen)) < 0) return -1;
  if (r && parse_u32s(v, f->pids, &f->n_pids)) {
    snprintf(err, errlen, "pid must be a comma-separated list of at most %d process ids", ETW_FILTER_MAX);
    return -1;
  }
  if ((r = qvar(q, ql, "process", v, sizeof v, err, errlen)) < 0) return -1;
  if (r && etw_pname_list(v, f->procs, ETW_FILTER_MAX, &f->n_procs)) {
    snprintf(err, errlen, "process must be a comma-separated list of at most %d process names (ProcessName, "
                          "ASCII case ignored), each 1-%d bytes without control characters, or a name prefix "
                          "followed by * (\"kworker*\")", ETW_FILTER_MAX, ETW_PNAME_PAT_MAX - 1);
    return -1;
  }
  if ((r = qvar(q, ql, "level", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) {
    char *end;
    long l = strtol(v, &end, 10);
    if (*end || end == v || l < 0 || l > 255) {
      snprintf(err, errlen, "level must be an integer 0-255 (events with Level <= it pass)");
      return -1;
    }
    f->max_level = (int)l;
  }
  if ((r = qvar(q, ql, "queue", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) {
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    if (*end || end == v || v[0] == '-' || x < 16 || x > 0x7fffffff) {
      snprintf(err, errlen, "queue must be an integer >= 16 (events; capped by the server's --queue-events)");
      return -1;
    }
    f->queue_events = (uint32_t)x;
  }
  if ((r = qvar(q, ql, "limit", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) {
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || end == v || v[0] == '-' || x == 0) {
      snprintf(err, errlen, "limit must be a positive integer (the stream ends after that many events)");
      return -1;
    }
    f->limit = x;
  }
  if ((r = qvar(q, ql, "from", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) {
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || end == v || v[0] == '-') {
      snprintf(err, errlen, "from must be a sequence number");
      return -1;
    }
    *from = x;
  }
  if ((r = qvar(q, ql, "from_stream_seq", v, sizeof v, err, errlen)) < 0) return -1;
  if (r) {
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || end == v || v[0] == '-' || x == 0 || x > 0x7fffffffffffffffull) {
      snprintf(err, errlen, "from_stream_seq must be a stream sequence number (>= 1)");
      return -1;
    }
    f->from_stream_seq = x;
  }
  if ((r = qvar(q, ql, "from_time", v, sizeof v, err, errlen)) < 0) return -1;
  if (r && etw_rfc3339_ns(v, &f->from_time_ns)) {
    snprintf(err, errlen, "from_time must be an RFC 3339 time like 2026-11-29T05:00:00Z or 2026-11-29T06:00:00.5%%2B01:00");
    return -1;
  }
  if ((*from != 0) + (f->from_stream_seq != 0) + (f->from_time_ns != 0) > 1) {
    snprintf(err, errlen, "give one of from (a session seq), from_stream_seq and from_time");
    return -1;
  }
  return 0;
}

/* 0, or -1 with @err naming the first parameter of @q that the session's backend cannot honour
 * (caps.h's table), or a level= that passes none of its events: every Linux event has Level 4
 * (linux_decode.c), so level=0..3 would be a stream that stays empty without saying why */
static int stream_refused(const char *q, const struct etw_sub_filter *f, struct etw_session *sess, char *err,
                          size_t errlen) {
  const struct etw_backend *b = etw_session_backend(sess);
  if (f->max_level >= 0 && f->max_level < 4 && !strcmp(b->name, "linux")) {
    snprintf(err, errlen, "level=%d passes no event of backend \"linux\": every Linux event has Level 4 "
             "(Informational); leave level out, or give 4 or more", f->max_level);
    return -1;
  }
  for (const char *p = q ? q : ""; *p;) {
    size_t k = strcspn(p, "&"), nk = strcspn(p, "=&");
    const struct etw_member *m = k ? etw_stream_param_refused(b, p, nk) : NULL;
    if (m) {
      snprintf(err, errlen, "backend \"%s\" cannot honour stream parameter %s (%s) — see GET /api/v1/backends",
               b->name, m->name, m->doc);
      return -1;
    }
    p += k;
    if (*p) p++;
  }
  return 0;
}

/* write @n bytes: whole on a plain socket, in TLS_PIECE pieces over TLS; 0 when all went out */
static int write_all(struct mg_connection *c, const char *p, size_t n) {
  const struct mg_request_info *ri = mg_get_request_info(c);
  size_t step = ri && ri->is_ssl ? TLS_PIECE : n;
  while (n) {
    size_t k = n < step ? n : step;
    if (mg_write(c, p, k) != (int)k) return -1;
    p += k;
    n -= k;
  }
  return 0;
}

/* Builds a WebSocket text frame around the payload at w->buf[10..] and sends it under the
 * connection lock (its pieces are never interleaved with civetweb's pongs). */
static int send_frame(struct mg_connection *c, struct etw_jw *w) {
  size_t plen = w->len - 10;
  unsigned char h[10];
  size_t hl;
  h[0] = 0x81; /* FIN + text */
  if (plen < 126) {
    h[1] = (unsigned char)plen;
    hl = 2;
  } else if (plen <= 0xFFFF) {
    h[1] = 126;
    h[2] = (unsigned char)(plen >> 8);
    h[3] = (unsigned char)plen;
    hl = 4;
  } else {
    h[1] = 127;
    for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)((uint64_t)plen >> (56 - 8 * i));
    hl = 10;
  }
  char *start = w->buf + 10 - hl;
  memcpy(start, h, hl);
  mg_lock_connection(c);
  int rc = write_all(c, start, plen + hl);
  mg_unlock_connection(c);
  return rc;
}

/* {"End":{"Reason":…}}: the client's own pass ended by itself (backend nats: the broker no longer
 * has its consumer) — the last record before the stream ends, so it never waits on heartbeats */
static void end_record(struct etw_jw *w, const char *why) {
  etw_jw_lit(w, "{\"End\":{\"Reason\":");
  etw_jw_cs(w, why);
  etw_jw_lit(w, "}}");
}

/* after our close frame: wait up to --io-timeout for the client's answer (ws_data sets stop) */
static int close_answered(struct ws_client *cl) {
  int64_t until = mono_ms() + (int64_t)cl->srv->cfg->io_timeout_s * 1000;
  while (!atomic_load(&cl->stop) && !atomic_load(&cl->srv->stopping) && mono_ms() < until) {
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&cl->stop) || atomic_load(&cl->srv->stopping);
}

static void *ws_sender(void *arg) {
  struct ws_client *cl = arg;
  struct etw_jw w;
  etw_jw_init(&w, WRITER_MAX);
  int cut = 0; /* end the connection ourselves: civetweb would keep a silent client for minutes */
  while (!atomic_load(&cl->stop)) {
    etw_jw_truncate(&w, 0); /* also clears an error of the previous round */
    etw_jw_raw(&w, "          ", 10); /* room for the frame header */
    struct etw_sub_stats s0, s1;
    etw_sub_stats(cl->sub, &s0);
    int n = etw_sub_read(cl->sub, &w, ETW_FMT_JSON_ARRAY, FRAME_MAX, IDLE_WAIT_MS);
    etw_sub_stats(cl->sub, &s1);
    if (n < 0) {
      char bye[2 + 123] = "\x03\xe8session ended", why[240]; /* 1000, or 1011: a lost pass */
      size_t byelen = 15;
      if (!atomic_load(&cl->stop) && etw_sub_end_why(cl->sub, why, sizeof why)) {
        etw_jw_truncate(&w, 0);
        etw_jw_raw(&w, "          [", 11);
        end_record(&w, why);
        etw_jw_ch(&w, ']');
        if (!w.err) send_frame(cl->conn, &w);
        static const char gone[] = "\x03\xf3the pass's stream consumer is gone (see the End record)";
        memcpy(bye, gone, sizeof gone); /* 1011: the server cannot go on with this stream */
        byelen = sizeof gone - 1;
      }
      if (!atomic_load(&cl->stop) && !atomic_exchange(&cl->close_sent, 1)) {
        if (mg_websocket_write(cl->conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, bye, byelen) <= 0) {
          cut = 1;
        } else if (!close_answered(cl)) {
          etwd_log(LOG_INFO, "websocket client did not answer the close within --io-timeout; disconnecting",
                   "who=%s", cl->who);
          cut = 1;
        }
      }
      break;
    }
    if (n == 0) continue;
    if (w.err) { /* out of memory only (WRITER_MAX exceeds any event): say so, then close */
      etwd_log(LOG_ERROR, "websocket frame could not be built; closing", "who=%s", cl->who);
      etw_sub_unsend(cl->sub, s1.delivered - s0.delivered);
      cut = 1;
      break;
    }
    if (atomic_load(&cl->stop) || send_frame(cl->conn, &w)) {
      /* the frame did not (all) reach the client: its events are lost to it, not delivered */
      etw_sub_unsend(cl->sub, s1.delivered - s0.delivered);
      if (atomic_load(&cl->stop)) break;
      /* never write again after a failed write */
      if (atomic_load(&cl->srv->stopping))
        etwd_log(LOG_INFO, "websocket write ended by the server's stop", "who=%s", cl->who);
      else
        etwd_log(LOG_WARN, "websocket write failed (client gone, or it accepted nothing for --io-timeout); disconnecting",
                 "who=%s bytes=%zu", cl->who, w.len);
      cut = 1;
      break;
    }
  }
  /* server shutdown: tell the client it is going away (1001) rather than dropping it */
  if (!cut && atomic_load(&cl->srv->stopping) && !atomic_exchange(&cl->close_sent, 1)) {
    static const char away[] = "\x03\xe9server shutting down";
    mg_websocket_write(cl->conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, away, sizeof away - 1);
  }
#ifdef __linux__
  /* end the connection now: civetweb's read loop would otherwise keep a client that sends
   * nothing (a stalled or frozen one) until its WebSocket pings go unanswered. The socket stays
   * open (and ours to use) until close_handler has joined this thread. */
  if (cut && cl->fd >= 0) shutdown(cl->fd, SHUT_RDWR);
#endif
  etw_jw_free(&w);
  atomic_store(&cl->dead, 1);
  return NULL;
}

static unsigned long long ws_session_id(const struct mg_request_info *ri) {
  const char *u = ri->local_uri;
  const char *pre = "/api/v1/sessions/";
  if (!u || strncmp(u, pre, strlen(pre))) return 0;
  char id[32];
  const char *p = u + strlen(pre);
  size_t k = strcspn(p, "/");
  if (k == 0 || k >= sizeof id || strcmp(p + k, "/events")) return 0;
  memcpy(id, p, k);
  id[k] = 0;
  return etwd_parse_id(id);
}

/* the route of the WebSocket streams (its query parameters) */
static const struct etwd_route *events_route(void) {
  const struct etwd_route *x = etwd_routes;
  while (x->method && x->fn != h_session_events) x++;
  return x;
}

/* The last slots of --max-streams are kept for admin tokens, so that readers holding every
 * stream cannot lock the admin out of watching (and stopping) sessions: an eighth of them, at
 * least one (none when --max-streams is below 3: there the share would be half or all).
 * 1 when a new stream of @role, with @active streams open before it, is over its share;
 * @detail (n >= 200) then says why, for the 429. Any thread (reads the config only). */
static int stream_over(const struct etwd_server *s, enum etwd_role role, unsigned active, char *detail, size_t n) {
  unsigned max = s->cfg->max_streams, kept = max < 3 ? 0 : (max + 7) / 8;
  unsigned cap = role >= ROLE_ADMIN ? max : max - kept;
  if (active < cap) return 0;
  if (cap == max)
    snprintf(detail, n, "too many streaming clients (--max-streams %u)", max);
  else
    snprintf(detail, n,
             "too many streaming clients for a reader token: readers may hold %u of the --max-streams %u "
             "streams, the last %u are reserved for admin tokens",
             cap, max, kept);
  return 1;
}

static int ws_connect(const struct mg_connection *cconn, void *cbdata) {
  struct etwd_server *s = cbdata;
  struct mg_connection *conn = (struct mg_connection *)cconn;
  const struct mg_request_info *ri = mg_get_request_info(conn);
  struct etwd_principal p;
  char q1[300], q2[64];
  etwd_principal_of(s, conn, &p);
  enum etwd_prob prob = ETWD_P_OK;
  const char *detail = NULL;
  char err[512], field[80], full[200];
  struct etw_sub_filter f;
  unsigned long long from;
  if (p.role < ROLE_READER) {
    prob = ETWD_P_UNAUTHORIZED, detail = "WebSocket upgrade needs a token (bearer or cookie)";
  } else if (!etwd_origin_allowed(s, ri, mg_get_header(conn, "Origin"))) {
    prob = ETWD_P_FORBIDDEN_ORIGIN, detail = "WebSocket upgrade from a foreign Origin refused";
  } else if (atomic_load(&s->stopping)) {
    prob = ETWD_P_SHUTTING_DOWN, detail = "the server is stopping";
  } else if (stream_over(s, p.role, atomic_load(&s->active_streams), full, sizeof full)) {
    prob = ETWD_P_LIMIT, detail = full;
  } else if (etwd_query_unknown(events_route(), ri->query_string, field, sizeof field, err, sizeof err) ||
             etwd_sub_filter_from_query(ri->query_string, &f, &from, err, sizeof err)) {
    prob = ETWD_P_INVALID, detail = err;
  } else if (ri->query_string && mg_get_var(ri->query_string, strlen(ri->query_string), "format", err, 16) != -1) {
    prob = ETWD_P_INVALID, detail = "format is a parameter of the HTTP stream: WebSocket frames are JSON arrays";
  } else {
    unsigned long long id = ws_session_id(ri);
    struct etw_session *sess = id ? etw_session_get(s->core, id) : NULL;
    if (!sess)
      prob = ETWD_P_NOT_FOUND, detail = "no such session";
    else if (stream_refused(ri->query_string, &f, sess, err, sizeof err))
      prob = ETWD_P_INVALID, detail = err;
    if (sess) etw_session_put(sess);
  }
  if (prob != ETWD_P_OK) {
    int status = etwd_problem_conn(conn, prob, detail,
                                   prob == ETWD_P_UNAUTHORIZED ? "WWW-Authenticate: Bearer realm=\"etwd\"\r\n" : NULL);
    char q3[500];
    etwd_log(LOG_INFO, "websocket refused", "kind=access path=%s status=%d remote=%s detail=%s",
             etwd_logq(q1, sizeof q1, ri->local_uri), status, etwd_logq(q2, sizeof q2, ri->remote_addr),
             etwd_logq(q3, sizeof q3, detail ? detail : ""));
    return 1;
  }
  return 0;
}

#ifdef __linux__
static int sa_port(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)a)->sin_port);
  if (a->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
  return -1;
}

/* The socket of an HTTP connection, or -1. civetweb does not expose it, so look for the one
 * open TCP socket whose local port and peer address/port are the request's (a pair that is
 * unique while the connection is open, which it is until our handler returns); if there is
 * not exactly one, give up. Read-only use: poll() for the peer's FIN/RST. */
static int conn_socket(const struct mg_request_info *ri) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1, matches = 0, dfd = dirfd(d);
  struct dirent *de;
  while ((de = readdir(d))) {
    char *end;
    long fd = strtol(de->d_name, &end, 10);
    if (*end || end == de->d_name || fd == dfd || fd < 0) continue;
    struct sockaddr_storage la, pa;
    socklen_t ll = sizeof la, pl = sizeof pa;
    if (getsockname((int)fd, (struct sockaddr *)&la, &ll) || getpeername((int)fd, (struct sockaddr *)&pa, &pl))
      continue;
    if (sa_port(&la) != ri->server_port || sa_port(&pa) != ri->remote_port) continue;
    char host[INET6_ADDRSTRLEN] = "";
    if (pa.ss_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)&pa)->sin_addr, host, sizeof host);
    else
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&pa)->sin6_addr, host, sizeof host);
    if (strcmp(host, ri->remote_addr)) continue;
    found = (int)fd;
    matches++;
  }
  closedir(d);
  return matches == 1 ? found : -1;
}

/* 1 when the peer has closed (FIN) or reset the connection */
static int peer_gone(int fd) {
  if (fd < 0) return 0;
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}
#endif

static void ws_ready(struct mg_connection *conn, void *cbdata) {
  struct etwd_server *s = cbdata;
  const struct mg_request_info *ri = mg_get_request_info(conn);
  struct ws_client *cl = calloc(1, sizeof *cl);
  struct etw_sub_filter f;
  unsigned long long from = 0;
  char err[200];
  struct etwd_principal p;
  etwd_principal_of(s, conn, &p);
  unsigned long long id = ws_session_id(ri);
  if (cl) {
    cl->srv = s;
    cl->conn = conn;
#ifdef __linux__
    cl->fd = conn_socket(ri);
#else
    cl->fd = -1;
#endif
    snprintf(cl->who, sizeof cl->who, "%s", p.token_id);
    etwd_sub_filter_from_query(ri->query_string, &f, &from, err, sizeof err);
    cl->sess = etw_session_get(s->core, id);
  }
  int e = 0;
  /* the connect handler's check is early; this one is exact (check-and-increment) */
  int over = stream_over(s, p.role, atomic_fetch_add(&s->active_streams, 1), err, sizeof err);
  if (over) e = ETW_E_LIMIT;
  struct etw_status why; /* a replay's pass or the client's own NATS consumer: why it failed */
  etw_status_clear(&why);
  if (cl && cl->sess && !over) cl->sub = etw_session_subscribe_why(cl->sess, &f, from, &e, &why);
  if (cl && cl->sub) etw_sub_set_linger(cl->sub, LINGER_MS, LINGER_BYTES);
  if (!cl || !cl->sub) {
    atomic_fetch_sub(&s->active_streams, 1);
    static const char busy[] = "\x03\xf5subscriber limit reached";     /* 1013 try again later */
    static const char gone[] = "\x03\xf3session gone or out of memory"; /* 1011 */
    static const char nostream[] = "\x03\xf3" "cannot open a consumer of the session's stream"; /* 1011 */
    char pass[2 + 123];                                                /* 1011 + the file's problem */
    if (why.msg[0] && !f.from_stream_seq && !f.from_time_ns) {
      etwd_hide_dir(&why, s->cfg->data_dir); /* file names only: ASCII (etwd_file_name_valid) */
      pass[0] = '\x03', pass[1] = '\xf3';
      snprintf(pass + 2, sizeof pass - 2, "%s", why.msg);
    }
    if (e == ETW_E_LIMIT)
      mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, busy, sizeof busy - 1);
    else if (why.msg[0] && !f.from_stream_seq && !f.from_time_ns)
      mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, pass, 2 + strlen(pass + 2));
    else if (e == ETW_E_IO || e == ETW_E_INVALID || e == ETW_E_NOT_FOUND)
      mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, nostream, sizeof nostream - 1);
    else
      mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, gone, sizeof gone - 1);
    if (cl && cl->sess) etw_session_put(cl->sess);
    free(cl);
    mg_set_user_connection_data(conn, NULL);
    return;
  }
  pthread_mutex_lock(&clients_mu);
  cl->next = clients;
  clients = cl;
  pthread_mutex_unlock(&clients_mu);
  mg_set_user_connection_data(conn, cl);
  cl->th_started = pthread_create(&cl->th, NULL, ws_sender, cl) == 0;
  char q1[300], q2[64];
  etwd_log(LOG_INFO, "websocket opened", "kind=access path=%s status=101 remote=%s who=%s",
           etwd_logq(q1, sizeof q1, ri->local_uri), etwd_logq(q2, sizeof q2, ri->remote_addr), cl->who);
}

static int ws_data(struct mg_connection *conn, int bits, char *data, size_t len, void *cbdata) {
  (void)cbdata;
  struct ws_client *cl = mg_get_user_connection_data(conn);
  int op = bits & 0x0f;
  if (op == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) {
    if (cl) {
      atomic_store(&cl->stop, 1);
      etw_sub_wake(cl->sub);
    }
    /* echo the client's close (its status code) so it sees a clean close — unless this close
     * is the client's answer to ours */
    if (!cl || !atomic_exchange(&cl->close_sent, 1))
      mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, data, len >= 2 ? 2 : 0);
    return 0;
  }
  /* once our sender has stopped (write failure, end of stream), let civetweb close the
   * connection at the client's next frame (a pong at the latest) */
  if (!cl || atomic_load(&cl->dead)) return 0;
  return 1; /* client messages are otherwise ignored (filters are set at connect time) */
}

static void ws_close(const struct mg_connection *cconn, void *cbdata) {
  struct etwd_server *s = cbdata;
  struct mg_connection *conn = (struct mg_connection *)cconn;
  struct ws_client *cl = mg_get_user_connection_data(conn);
  if (!cl) return;
  atomic_store(&cl->stop, 1);
  etw_sub_wake(cl->sub);
  if (cl->th_started) pthread_join(cl->th, NULL);
  pthread_mutex_lock(&clients_mu);
  for (struct ws_client **pp = &clients; *pp; pp = &(*pp)->next)
    if (*pp == cl) {
      *pp = cl->next;
      break;
    }
  pthread_mutex_unlock(&clients_mu);
  struct etw_sub_stats ss; /* dropped includes what its queue still held: lost to it */
  etw_session_unsubscribe(cl->sess, cl->sub, &ss);
  etwd_log(LOG_INFO, "websocket closed", "kind=access session=%llu delivered=%llu dropped=%llu who=%s",
           (unsigned long long)etw_session_id(cl->sess), (unsigned long long)ss.delivered,
           (unsigned long long)ss.dropped, cl->who);
  etw_session_put(cl->sess);
  mg_set_user_connection_data(conn, NULL);
  free(cl);
  atomic_fetch_sub(&s->active_streams, 1);
}

void etwd_stream_register(struct etwd_server *s) {
  mg_set_websocket_handler(s->mg, "/api/v1/sessions/*/events", ws_connect, ws_ready, ws_data, ws_close, s);
}

void etwd_stream_shutdown(struct etwd_server *s) {
  (void)s; /* s->stopping is already set: senders send close 1001 as they exit */
  pthread_mutex_lock(&clients_mu);
  for (struct ws_client *cl = clients; cl; cl = cl->next) {
    atomic_store(&cl->stop, 1);
    etw_sub_wake(cl->sub);
  }
  pthread_mutex_unlock(&clients_mu);
  /* give the senders up to a second to say goodbye before civetweb stops (a sender blocked on a
   * stalled client is not waited for beyond that; mg_stop aborts its write) */
  for (int i = 0; i < 100; i++) {
    int busy = 0;
    pthread_mutex_lock(&clients_mu);
    for (struct ws_client *cl = clients; cl && !busy; cl = cl->next) busy = !atomic_load(&cl->dead);
    pthread_mutex_unlock(&clients_mu);
    if (!busy) break;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* ?format=csv: what one stream wrote, and what its Gap records said (for the trailer); owned by
 * the stream's worker thread */
struct csv_tally {
  unsigned long long events, dropped, hub, subscriber;
};

/* the ndjson records in @raw as CSV: an event becomes a row appended to @out, a Gap record is
 * counted in @t (a CSV reader would take any row for an event: loss goes into the trailer) */
static void csv_rows(struct etw_jw *out, const struct etw_jw *raw, struct csv_tally *t) {
  static const char GAP[] = "{\"Gap\":{\"Dropped\":", LAYER[] = ",\"Layer\":\"";
  for (const char *p = raw->buf, *end = raw->buf + raw->len; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (!etw_csv_event_row(out, p, n)) {
      t->events++;
    } else if (n > sizeof GAP + sizeof LAYER && !memcmp(p, GAP, sizeof GAP - 1)) {
      char *e; /* the digits end at the ',' before "Layer" */
      unsigned long long d = strtoull(p + sizeof GAP - 1, &e, 10);
      t->dropped += d;
      if ((size_t)(p + n - e) > sizeof LAYER + 4 && !memcmp(e, LAYER, sizeof LAYER - 1))
        *(memcmp(e + sizeof LAYER - 1, "hub\"", 4) ? &t->subscriber : &t->hub) += d;
    }
    p += n + 1;
  }
}

/* the response head (with ?format=csv: and the header row, as the first chunk): 0 when sent */
static int stream_head(struct etwd_req *r, int csv) {
  char head[600];
  int hn = snprintf(head, sizeof head,
      "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n%s"
      "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Accel-Buffering: no\r\n%s\r\n",
      etwd_stream_ctype(csv), csv ? "Trailer: Etwd-Events, Etwd-Dropped, Etwd-Dropped-Layers, Etwd-End\r\n" : "",
      etwd_hsts(r->conn));
  if (csv && hn > 0 && (size_t)hn < sizeof head)
    hn += snprintf(head + hn, sizeof head - (size_t)hn, "%zx\r\n%s\r\n", sizeof ETW_CSV_HEADER - 1, ETW_CSV_HEADER);
  r->status = 200;
  return hn > 0 && (size_t)hn < sizeof head && mg_write(r->conn, head, (size_t)hn) == hn ? 0 : -1;
}

/* the last chunk; with ?format=csv its trailer: the rows written and the events the stream's Gap
 * records reported missing (in all, and by layer), and @why (the pass ended by itself: what the
 * ndjson stream's End record says; a header's text: controls become spaces) */
static void stream_end(struct etwd_req *r, int csv, const struct csv_tally *t, const char *why) {
  char end[600], reason[260] = "";
  if (why) {
    int k = snprintf(reason, sizeof reason, "Etwd-End: %s\r\n", why);
    for (int i = 10; k > 0 && i < k - 2 && reason[i]; i++)
      if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f) reason[i] = ' ';
    if (k < 0 || (size_t)k >= sizeof reason) memcpy(reason + sizeof reason - 3, "\r\n", 3);
  }
  int n = csv ? snprintf(end, sizeof end, "0\r\nEtwd-Events: %llu\r\nEtwd-Dropped: %llu\r\n"
                         "Etwd-Dropped-Layers: hub=%llu, subscriber=%llu\r\n%s\r\n",
                         t->events, t->dropped, t->hub, t->subscriber, reason)
              : snprintf(end, sizeof end, "0\r\n\r\n");
  if (n > 0 && (size_t)n < sizeof end) mg_write(r->conn, end, (size_t)n);
}

void etwd_stream_ndjson(struct etwd_req *r, struct etw_session *sess, const char *query) {
  struct etwd_server *s = r->srv;
  struct etw_sub_filter f;
  unsigned long long from;
  char err[200];
  int csv = etwd_stream_format(query, err, sizeof err);
  if (csv < 0 || etwd_sub_filter_from_query(query, &f, &from, err, sizeof err)) {
    etwd_problem(r, ETWD_P_INVALID, err, csv < 0 ? "format" : NULL, NULL);
    return;
  }
  char why[400]; /* a parameter this session's backend cannot honour (caps.h) */
  if (stream_refused(r->ri->query_string, &f, sess, why, sizeof why)) {
    etwd_problem(r, ETWD_P_INVALID, why, NULL, NULL);
    return;
  }
  char full[200];
  if (stream_over(s, r->who.role, atomic_fetch_add(&s->active_streams, 1), full, sizeof full)) {
    atomic_fetch_sub(&s->active_streams, 1);
    etwd_problem(r, ETWD_P_LIMIT, full, NULL, "Retry-After: 1\r\n");
    return;
  }
  int e = 0;
  struct etw_status st; /* a replay's pass or the client's own NATS consumer: why it failed */
  etw_status_clear(&st);
  struct etw_sub *sub = etw_session_subscribe_why(sess, &f, from, &e, &st);
  if (!sub) {
    atomic_fetch_sub(&s->active_streams, 1);
    if (st.msg[0] && !f.from_stream_seq && !f.from_time_ns) /* a replay: which file, and why */
      etwd_hide_dir(&st, s->cfg->data_dir);
    else if (e == ETW_E_IO || e == ETW_E_INVALID || e == ETW_E_NOT_FOUND)
      etw_fail(&st, (enum etw_err)e, NULL, "cannot open a consumer of the session's stream (is its broker reachable?)");
    else if (e == ETW_E_STATE)
      etw_fail(&st, ETW_E_STATE, NULL, "the session is stopped: from_stream_seq and from_time need a running session");
    etwd_fail(r, e ? (enum etw_err)e : ETW_E_NOMEM, st.msg[0] ? &st : NULL);
    return;
  }
  etw_sub_set_linger(sub, LINGER_MS, LINGER_BYTES);
  int ok = stream_head(r, csv) == 0;
#ifdef __linux__
  int fd = ok ? conn_socket(r->ri) : -1;
#endif
  /* w: the chunk being written; raw (csv only): the ndjson records read, made rows in w */
  struct etw_jw w, raw;
  etw_jw_init(&w, csv ? 3 * WRITER_MAX : WRITER_MAX); /* a CSV cell doubles each '"' of its event */
  etw_jw_init(&raw, WRITER_MAX);
  struct csv_tally tally = {0, 0, 0, 0};
  int64_t last_write = mono_ms();
  char q2[64];
  while (ok && !atomic_load(&s->stopping)) {
    etw_jw_truncate(&w, 0);
    etw_jw_truncate(&raw, 0);
    etw_jw_raw(&w, "0000000000\r\n", 12); /* chunk-size line, rewritten below */
    struct etw_sub_stats s0, s1;
    etw_sub_stats(sub, &s0);
    int n = etw_sub_read(sub, csv ? &raw : &w, ETW_FMT_NDJSON, FRAME_MAX, IDLE_WAIT_MS);
    etw_sub_stats(sub, &s1);
    if (n < 0) break;
    if (n > 0 && csv && !raw.err) csv_rows(&w, &raw, &tally);
    if (w.err || raw.err) { /* out of memory only */
      etw_sub_unsend(sub, s1.delivered - s0.delivered);
      break;
    }
    if (n > 0 && w.len == 12) continue; /* csv: Gap records only (counted for the trailer) */
    if (n == 0) {
#ifdef __linux__
      /* nothing to write: notice a client that has gone within IDLE_WAIT_MS, so its worker
       * thread, stream slot and subscriber are freed at once (the write would fail only at the
       * next event or heartbeat) */
      if (peer_gone(fd)) {
        ok = 0;
        break;
      }
#endif
      /* an idle stream writes a heartbeat line now and then (proxies; and where the socket
       * cannot be watched, the write failing is how a client's departure is noticed); in CSV an
       * empty line, which CSV readers skip */
      if (mono_ms() - last_write < HEARTBEAT_MS) continue;
      if (csv) {
        etw_jw_ch(&w, '\n');
      } else {
        etw_jw_lit(&w, "{\"Heartbeat\":{\"Time\":");
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        etw_jw_unix_ns(&w, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
        etw_jw_lit(&w, "}}\n");
      }
    }
    last_write = mono_ms();
    size_t plen = w.len - 12;
    char hx[16];
    int hl = snprintf(hx, sizeof hx, "%zx\r\n", plen);
    char *start = w.buf + 12 - hl;
    memcpy(start, hx, (size_t)hl);
    etw_jw_lit(&w, "\r\n");
    size_t total = w.len - (size_t)(start - w.buf);
    ok = write_all(r->conn, start, total) == 0;
    r->bytes_out += total;
    if (!ok) /* the chunk did not (all) reach the client: its events are lost to it */
      etw_sub_unsend(sub, s1.delivered - s0.delivered);
    if (!ok)
      etwd_log(LOG_INFO, "ndjson write failed (client gone, or it accepted nothing for --io-timeout); ending the stream",
               "session=%llu remote=%s who=%s bytes=%zu", (unsigned long long)etw_session_id(sess),
               etwd_logq(q2, sizeof q2, r->ri->remote_addr), r->who.token_id, total);
  }
  char lost[240];
  int ended = ok && etw_sub_end_why(sub, lost, sizeof lost);
  if (ended && !csv) {
    etw_jw_truncate(&w, 0);
    end_record(&w, lost);
    etw_jw_ch(&w, '\n');
    char hx[16];
    int hl = snprintf(hx, sizeof hx, "%zx\r\n", w.len);
    ok = !w.err && write_all(r->conn, hx, (size_t)hl) == 0 && write_all(r->conn, w.buf, w.len) == 0 &&
         write_all(r->conn, "\r\n", 2) == 0;
  }
  if (ok) stream_end(r, csv, &tally, ended ? lost : NULL);
  etw_jw_free(&w);
  etw_jw_free(&raw);
  struct etw_sub_stats ss; /* dropped includes what its queue still held: lost to it */
  etw_session_unsubscribe(sess, sub, &ss);
  etwd_log(LOG_INFO, "ndjson stream closed", "kind=access session=%llu format=%s delivered=%llu dropped=%llu who=%s",
           (unsigned long long)etw_session_id(sess), csv ? "csv" : "ndjson", (unsigned long long)ss.delivered,
           (unsigned long long)ss.dropped, r->who.token_id);
  atomic_fetch_sub(&s->active_streams, 1);
}
