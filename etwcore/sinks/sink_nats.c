/* sink_nats.c — sinks that publish a session's events to NATS JetStream (see sink.h).
 *
 * One thread per sink ("etwd-sink"): reads its hub subscriber (ndjson), pushes every event into
 * the spool, and while the connection is up publishes the spool's first `batch` records with
 * js_PublishMsgAsync and waits for their acknowledgements with js_PublishAsyncComplete in 20 ms
 * steps, draining the hub between steps (so a slow broker delays nothing but this thread). A
 * batch is removed from the spool only when every message was acknowledged; otherwise it is sent
 * again (same Nats-Msg-Id: the stream's duplicate window drops the copies).
 * libnats owns its own threads (reconnects with our back-off, acks); its callbacks only touch
 * the atomics and the error text below, under `mu`.
 * The spool: a FIFO of records in memory (up to spool_memory_kb), then — once that is full, and
 * until it is empty again — an append-only file <spool_dir>/sink<I>.spool (up to spool_disk_mb;
 * emptied and truncated whenever the reader catches up). Order is kept: records enter the file
 * only while it is not empty, and the memory FIFO is refilled from its head.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "etwcore/host.h"
#include "etwcore/sink.h"
#include "etwcore/util.h"

struct rec {
  struct rec *next;
  uint64_t seq;
  int64_t pid;         /* -1: none */
  uint32_t len;        /* payload bytes */
  uint16_t plen, nlen; /* provider, event name (JSON-escaped text as it was in the event) */
  char data[];         /* provider, name, payload */
};
#define REC_HDR offsetof(struct rec, data) /* the file holds records from `seq` on */
#define REC_FILE_OFF offsetof(struct rec, seq)

struct spool {
  struct rec *head, *tail;
  uint64_t n_mem, mem, mem_max;
  int fd;
  char path[4200];
  uint64_t n_disk, wr, rd, disk_max;
};

struct nsink {
  const struct etw_sink_spec *spec;
  struct etw_sub *sub;
  pthread_t thread;
  int started, inited;
  char session[80], msgid_pfx[200];
  natsOptions *opts;
  natsConnection *nc;
  jsCtx *js;
  struct spool sp;
  int stream_ok;
  uint64_t gap_pending; /* dropped since the last gap record went into the spool */
  uint64_t last_seq;    /* the last event seq read from the hub */
  atomic_int quit;      /* 1: publish for up to 2 s more, then count the rest as loss */
  atomic_int connected;
  atomic_int batch_errors;
  _Atomic uint64_t held, acked, published, dropped, spooled, spooled_disk, retries, reconnects, gaps;
  pthread_mutex_t mu; /* guards last_error, closed */
  pthread_cond_t cv;  /* signalled by on_closed */
  int closed;         /* libnats made its last callback: the struct may go */
  char last_error[256];
};

struct etw_sinks {
  uint32_t n;
  struct nsink *k;
};

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_error(struct nsink *k, const char *what, natsStatus s, const char *detail) {
  pthread_mutex_lock(&k->mu);
  snprintf(k->last_error, sizeof k->last_error, "%s: %s%s%.180s", what, natsStatus_GetText(s),
           detail && *detail ? ": " : "", detail ? detail : "");
  pthread_mutex_unlock(&k->mu);
}

/* ---- spool */

static void rec_free_list(struct rec *r) {
  while (r) {
    struct rec *n = r->next;
    free(r);
    r = n;
  }
}

static void mem_append(struct spool *sp, struct rec *r) {
  r->next = NULL;
  if (sp->tail) sp->tail->next = r; else sp->head = r;
  sp->tail = r;
  sp->n_mem++;
  sp->mem += REC_HDR + r->len + r->plen + r->nlen;
}

/* 1 = kept (memory or file), 0 = no room (the caller counts the loss) */
static int spool_push(struct spool *sp, struct rec *r, _Atomic uint64_t *to_disk) {
  size_t sz = REC_HDR + r->len + r->plen + r->nlen;
  if (!sp->n_disk && sp->mem + sz <= sp->mem_max) {
    mem_append(sp, r);
    return 1;
  }
  size_t fsz = sz - REC_FILE_OFF;
  if (sp->fd < 0 || sp->wr + fsz > sp->disk_max) return 0;
  if (pwrite(sp->fd, (const char *)r + REC_FILE_OFF, fsz, (off_t)sp->wr) != (ssize_t)fsz) return 0;
  sp->wr += fsz;
  sp->n_disk++;
  atomic_fetch_add(to_disk, 1);
  free(r);
  return 1;
}

/* move records from the file's head into memory while they fit (at least one) */
static void spool_refill(struct spool *sp) {
  while (sp->n_disk) {
    struct rec h;
    size_t fixed = REC_HDR - REC_FILE_OFF;
    if (pread(sp->fd, (char *)&h + REC_FILE_OFF, fixed, (off_t)sp->rd) != (ssize_t)fixed) break;
    size_t sz = REC_HDR + h.len + h.plen + h.nlen;
    if (sp->n_mem && sp->mem + sz > sp->mem_max) break;
    struct rec *r = malloc(sz);
    if (!r || pread(sp->fd, (char *)r + REC_FILE_OFF, sz - REC_FILE_OFF, (off_t)sp->rd) != (ssize_t)(sz - REC_FILE_OFF)) {
      free(r);
      break;
    }
    sp->rd += sz - REC_FILE_OFF;
    sp->n_disk--;
    mem_append(sp, r);
  }
  if (!sp->n_disk && sp->wr) {
    sp->wr = sp->rd = 0;
    if (ftruncate(sp->fd, 0)) { /* the space comes back at the next truncate */
    }
  }
}

static void spool_pop(struct spool *sp, uint32_t n) {
  for (uint32_t i = 0; i < n && sp->head; i++) {
    struct rec *r = sp->head;
    sp->head = r->next;
    if (!sp->head) sp->tail = NULL;
    sp->n_mem--;
    sp->mem -= REC_HDR + r->len + r->plen + r->nlen;
    free(r);
  }
}

/* ---- events from the hub */

static struct rec *rec_new(uint64_t seq, int64_t pid, const char *prov, size_t plen,
                           const char *name, size_t nlen, const char *payload, size_t len) {
  if (plen > 512) plen = 512;
  if (nlen > 512) nlen = 512;
  struct rec *r = malloc(REC_HDR + plen + nlen + len);
  if (!r) return NULL;
  r->seq = seq;
  r->pid = pid;
  r->plen = (uint16_t)plen;
  r->nlen = (uint16_t)nlen;
  r->len = (uint32_t)len;
  memcpy(r->data, prov, plen);
  memcpy(r->data + plen, name, nlen);
  memcpy(r->data + plen + nlen, payload, len);
  return r;
}

/* the end of the first @key in [p, e), or NULL */
static const char *after(const char *p, const char *e, const char *key) {
  size_t kl = strlen(key);
  for (const char *q = p; (q = memchr(q, key[0], (size_t)(e - q))) && (size_t)(e - q) > kl; q++)
    if (!memcmp(q, key, kl)) return q + kl;
  return NULL;
}

/* the JSON string value after @key in [p, e): its escaped text (no quotes) */
static const char *str_after(const char *p, const char *e, const char *key, size_t *n) {
  const char *s = after(p, e, key), *t = s;
  if (!s) {
    *n = 0;
    return "";
  }
  while (t < e && *t != '"') t += (*t == '\\') ? 2 : 1;
  if (t > e) t = e;
  *n = (size_t)(t - s);
  return s;
}

static void count_drop(struct nsink *k, uint64_t n) {
  atomic_fetch_add(&k->dropped, n);
  k->gap_pending += n;
}

/* put a gap record for the drops not yet reported before the event @seq; 1 = done */
static int push_gap(struct nsink *k, uint64_t seq) {
  char g[160];
  int gl = snprintf(g, sizeof g, "{\"Gap\":{\"Dropped\":%llu,\"Layer\":\"sink\",\"Reason\":\"sink spool full\"}}",
                    (unsigned long long)k->gap_pending);
  struct rec *gr = rec_new(seq | 1ull << 63, -1, "_gap", 4, "", 0, g, (size_t)gl); /* id: gap-SEQ */
  if (!gr) return 0;
  if (!spool_push(&k->sp, gr, &k->spooled_disk)) {
    free(gr);
    return 0;
  }
  k->gap_pending = 0;
  atomic_fetch_add(&k->gaps, 1);
  atomic_fetch_add(&k->spooled, 1);
  return 1;
}

static void keep(struct nsink *k, struct rec *r) {
  if (!r) {
    count_drop(k, 1);
    return;
  }
  k->last_seq = r->seq;
  /* tell the stream's readers first (a gap record may exceed the bound by one) */
  if (k->gap_pending && !push_gap(k, r->seq)) {
    free(r);
    count_drop(k, 1);
    return;
  }
  if (spool_push(&k->sp, r, &k->spooled_disk))
    atomic_fetch_add(&k->spooled, 1);
  else {
    free(r);
    count_drop(k, 1);
  }
}

/* split ndjson from etw_sub_read into records */
static void take_lines(struct nsink *k, const char *p, size_t n) {
  const char *e = p + n;
  while (p < e) {
    const char *nl = memchr(p, '\n', (size_t)(e - p));
    const char *le = nl ? nl : e;
    if (!strncmp(p, "{\"seq\":", 7)) {
      uint64_t seq = strtoull(p + 7, NULL, 10);
      size_t prl, nml;
      const char *pr = str_after(p, le, "\"Provider\":{\"Name\":\"", &prl);
      const char *nm = str_after(p, le, "\"EventName\":\"", &nml);
      const char *pd = after(p, le, "\"ProcessID\":");
      int64_t pid = pd && pd < le && *pd >= '0' && *pd <= '9' ? strtoll(pd, NULL, 10) : -1;
      keep(k, rec_new(seq, pid, pr, prl, nm, nml, p, (size_t)(le - p)));
    }
    /* gap records: our own hub queue overflowed; etw_sub_stats counts that (hub_dropped) */
    p = le + 1;
  }
}

/* ---- NATS */

static void tok(char *o, size_t *at, size_t cap, const char *s, size_t n) {
  if (!n) s = "_", n = 1;
  for (size_t i = 0; i < n && *at + 1 < cap; i++) {
    char c = s[i];
    o[(*at)++] = (c == '.' || c == '*' || c == '>' || c == ' ' || c == '\\' || c == '"' ||
                  (unsigned char)c < 0x21 || (unsigned char)c > 0x7e) ? '_' : c;
  }
}

static void subject_of(struct nsink *k, const struct rec *r, char *o, size_t cap) {
  size_t at = 0;
  const char *h = etw_host_name();
  for (const char *t = k->spec->subject; *t && at + 1 < cap;) {
    if (!strncmp(t, "{host}", 6)) tok(o, &at, cap, h, strlen(h)), t += 6;
    else if (!strncmp(t, "{session}", 9)) tok(o, &at, cap, k->session, strlen(k->session)), t += 9;
    else if (!strncmp(t, "{provider}", 10)) tok(o, &at, cap, r->data, r->plen), t += 10;
    else if (!strncmp(t, "{event}", 7)) tok(o, &at, cap, r->data + r->plen, r->nlen), t += 7;
    else o[at++] = *t++;
  }
  o[at] = 0;
}

static void on_pub_err(jsCtx *js, jsPubAckErr *pae, void *closure) {
  struct nsink *k = closure;
  (void)js;
  atomic_fetch_add(&k->batch_errors, 1);
  set_error(k, "publish", pae->Err, pae->ErrText);
}

static void on_disc(natsConnection *nc, void *closure) {
  struct nsink *k = closure;
  (void)nc;
  atomic_store(&k->connected, 0);
  set_error(k, "connection", NATS_CONNECTION_CLOSED, "disconnected");
}

static void on_conn(natsConnection *nc, void *closure) {
  struct nsink *k = closure;
  (void)nc;
  atomic_store(&k->connected, 1);
  atomic_fetch_add(&k->reconnects, 1);
}

static void on_closed(natsConnection *nc, void *closure) {
  struct nsink *k = closure;
  (void)nc;
  pthread_mutex_lock(&k->mu);
  k->closed = 1;
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->mu);
}

static void on_async_err(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure) {
  (void)nc, (void)sub;
  set_error(closure, "async", s, NULL);
}

static int64_t backoff(natsConnection *nc, int attempts, void *closure) {
  (void)nc, (void)closure;
  int64_t d = 100;
  for (int i = 0; i < attempts && d < 5000; i++) d *= 2;
  return d > 5000 ? 5000 : d; /* 100 ms, doubling, at most 5 s */
}

/* the stream exists (created with the template's subjects, '*' for every placeholder token) */
static int ensure_stream(struct nsink *k) {
  jsErrCode jerr = 0;
  jsStreamInfo *si = NULL;
  natsStatus s = js_GetStreamInfo(&si, k->js, k->spec->stream, NULL, &jerr);
  if (s == NATS_OK) {
    jsStreamInfo_Destroy(si);
    return 1;
  }
  if (s != NATS_NOT_FOUND) {
    set_error(k, "stream info", s, nats_GetLastError(NULL));
    return 0;
  }
  char subj[256];
  size_t at = 0;
  for (const char *t = k->spec->subject; *t && at + 2 < sizeof subj;) {
    const char *dot = strchr(t, '.');
    size_t n = dot ? (size_t)(dot - t) : strlen(t);
    if (memchr(t, '{', n)) subj[at++] = '*';
    else for (size_t i = 0; i < n && at + 2 < sizeof subj; i++) subj[at++] = t[i];
    t += n;
    if (*t == '.') subj[at++] = *t++;
  }
  subj[at] = 0;
  const char *subjects[1] = {subj};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = k->spec->stream;
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = (int64_t)k->spec->replicas;
  s = js_AddStream(&si, k->js, &cfg, NULL, &jerr);
  if (s == NATS_OK) jsStreamInfo_Destroy(si);
  else set_error(k, "create stream", s, nats_GetLastError(NULL));
  return s == NATS_OK;
}

static natsMsg *make_msg(struct nsink *k, const struct rec *r) {
  char subj[512], v[600];
  subject_of(k, r, subj, sizeof subj);
  natsMsg *m = NULL;
  const char *payload = r->data + r->plen + r->nlen;
  if (natsMsg_Create(&m, subj, NULL, payload, (int)r->len) != NATS_OK) return NULL;
  if (r->seq >> 63)
    snprintf(v, sizeof v, "%sgap-%llu", k->msgid_pfx, (unsigned long long)(r->seq & ~(1ull << 63)));
  else
    snprintf(v, sizeof v, "%s%llu", k->msgid_pfx, (unsigned long long)r->seq);
  natsMsgHeader_Set(m, "Nats-Msg-Id", v);
  natsMsgHeader_Set(m, "Etwd-Host", etw_host_name());
  snprintf(v, sizeof v, "%.*s", (int)r->plen, r->data);
  natsMsgHeader_Set(m, "Etwd-Provider", v);
  if (r->nlen) {
    snprintf(v, sizeof v, "%.*s", (int)r->nlen, r->data + r->plen);
    natsMsgHeader_Set(m, "Etwd-Event", v);
  }
  if (r->pid >= 0) {
    snprintf(v, sizeof v, "%lld", (long long)r->pid);
    natsMsgHeader_Set(m, "Etwd-Pid", v);
  }
  return m;
}

static void drain_hub(struct nsink *k, struct etw_jw *buf, int timeout_ms, int *ended) {
  if (*ended) return;
  etw_jw_truncate(buf, 0);
  int r = etw_sub_read(k->sub, buf, ETW_FMT_NDJSON, 1u << 20, timeout_ms);
  if (r < 0) *ended = 1;
  else if (r > 0) take_lines(k, buf->buf, buf->len);
}

/* publish the spool's first records and wait for their acks; 1 = acknowledged and removed */
static int publish_batch(struct nsink *k, struct etw_jw *buf, int *ended) {
  spool_refill(&k->sp);
  uint32_t n = 0;
  atomic_store(&k->batch_errors, 0);
  for (struct rec *r = k->sp.head; r && n < k->spec->batch; r = r->next, n++) {
    natsMsg *m = make_msg(k, r);
    natsStatus s = m ? js_PublishMsgAsync(k->js, &m, NULL) : NATS_NO_MEMORY;
    if (s != NATS_OK) {
      natsMsg_Destroy(m);
      set_error(k, "publish", s, nats_GetLastError(NULL));
      atomic_fetch_add(&k->batch_errors, 1);
      break;
    }
  }
  int64_t deadline = mono_ms() + k->spec->ack_timeout_ms;
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 20;
  natsStatus s;
  while ((s = js_PublishAsyncComplete(k->js, &po)) == NATS_TIMEOUT && mono_ms() < deadline &&
         !atomic_load(&k->batch_errors))
    drain_hub(k, buf, 0, ended); /* keep the hub queue short while the broker answers */
  if (s == NATS_OK && !atomic_load(&k->batch_errors)) {
    spool_pop(&k->sp, n);
    atomic_fetch_add(&k->acked, n);
    atomic_fetch_add(&k->published, n);
    return 1;
  }
  natsMsgList pl = {0};
  if (js_PublishAsyncGetPendingList(&pl, k->js) == NATS_OK) natsMsgList_Destroy(&pl);
  if (s == NATS_TIMEOUT) set_error(k, "ack", s, "no acknowledgement in time");
  atomic_fetch_add(&k->retries, 1);
  k->stream_ok = 0; /* check the stream again (it may have been deleted) */
  return 0;
}

static void *sink_thread(void *arg) {
  struct nsink *k = arg;
  struct etw_jw buf;
  etw_jw_init(&buf, 2u << 20);
  int ended = 0;
  int64_t quit_at = 0, retry_at = 0, wait = 100;
  for (;;) {
    int busy = k->sp.head || k->sp.n_disk;
    int up = atomic_load(&k->connected) && natsConnection_Status(k->nc) == NATS_CONN_STATUS_CONNECTED;
    drain_hub(k, &buf, busy && up && mono_ms() >= retry_at ? 0 : 50, &ended);
    atomic_store(&k->held, k->sp.n_mem + k->sp.n_disk);
    if (ended && k->gap_pending) push_gap(k, k->last_seq + 1); /* drops after the last event */
    busy = k->sp.head || k->sp.n_disk;
    if (ended && !busy) break;
    if (atomic_load(&k->quit)) {
      if (!quit_at) quit_at = mono_ms() + 2000;
      if (mono_ms() >= quit_at) break;
    }
    if (!up || !busy || mono_ms() < retry_at) {
      if (ended && busy) usleep(20000);
      continue;
    }
    if (!k->stream_ok) k->stream_ok = ensure_stream(k);
    if (k->stream_ok && publish_batch(k, &buf, &ended)) {
      atomic_store(&k->held, k->sp.n_mem + k->sp.n_disk);
      wait = 100;
      continue;
    }
    retry_at = mono_ms() + wait; /* back off: 100 ms doubling to 5 s */
    wait = wait * 2 > 5000 ? 5000 : wait * 2;
  }
  /* what is still spooled now is lost: count it (and the file goes) */
  spool_refill(&k->sp);
  uint64_t left = k->sp.n_mem + k->sp.n_disk;
  for (struct rec *r = k->sp.head; r; r = r->next)
    if (r->seq >> 63) left--; /* gap records are not events */
  atomic_fetch_add(&k->dropped, left);
  atomic_store(&k->held, 0);
  etw_jw_free(&buf);
  return NULL;
}

static enum etw_err nats_fail(struct etw_status *st, uint32_t i, const char *what, natsStatus s) {
  return etw_fail(st, ETW_E_INVALID, NULL, "/sinks/%u: %s: %s %s", i, what, natsStatus_GetText(s),
                  nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
}

static enum etw_err start_one(struct nsink *k, uint32_t i, struct etw_hub *hub,
                              const struct etw_sink_ctx *ctx, struct etw_status *st) {
  const struct etw_sink_spec *sp = k->spec;
  natsStatus s;
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, NULL);
  k->inited = 1;
  k->sp.fd = -1;
  k->sp.mem_max = sp->spool_memory_kb * 1024;
  k->sp.disk_max = sp->spool_disk_mb << 20;
  snprintf(k->session, sizeof k->session, "%s", ctx->session);
  snprintf(k->msgid_pfx, sizeof k->msgid_pfx, "%s/%s@%lld/", etw_host_name(), ctx->session,
           (long long)(ctx->started_ns / 1000000));
  if (sp->spool_disk_mb && ctx->spool_dir) {
    if (etw_mkdirs(ctx->spool_dir))
      return etw_fail(st, ETW_E_IO, NULL, "cannot create %s: %s", ctx->spool_dir, strerror(errno));
    snprintf(k->sp.path, sizeof k->sp.path, "%s/sink%u.spool", ctx->spool_dir, i);
    k->sp.fd = open(k->sp.path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (k->sp.fd < 0) return etw_fail(st, ETW_E_IO, NULL, "cannot create %s: %s", k->sp.path, strerror(errno));
  }
  if ((s = natsOptions_Create(&k->opts)) != NATS_OK) return nats_fail(st, i, "options", s);
  { /* "url1,url2,…": the cluster's servers (libnats tries the others when one goes) */
    char urls[1100], *save = NULL;
    const char *srv[16];
    int ns = 0;
    snprintf(urls, sizeof urls, "%s", sp->url);
    for (char *u = strtok_r(urls, ",", &save); u && ns < 16; u = strtok_r(NULL, ",", &save)) srv[ns++] = u;
    if ((s = natsOptions_SetServers(k->opts, srv, ns)) != NATS_OK) return nats_fail(st, i, "url", s);
  }
  natsOptions_SetMaxReconnect(k->opts, -1);
  natsOptions_SetCustomReconnectDelay(k->opts, backoff, k);
  natsOptions_SetRetryOnFailedConnect(k->opts, true, on_conn, k);
  natsOptions_SetDisconnectedCB(k->opts, on_disc, k);
  natsOptions_SetReconnectedCB(k->opts, on_conn, k);
  natsOptions_SetErrorHandler(k->opts, on_async_err, k);
  natsOptions_SetClosedCB(k->opts, on_closed, k);
  natsOptions_SetTimeout(k->opts, 2000);
  natsOptions_SetName(k->opts, "etwd-sink");
  if (sp->tls_ca || sp->tls_cert || !strncmp(sp->url, "tls://", 6)) natsOptions_SetSecure(k->opts, true);
  if (sp->tls_ca && (s = natsOptions_LoadCATrustedCertificates(k->opts, sp->tls_ca)) != NATS_OK)
    return nats_fail(st, i, "tls_ca", s);
  if (sp->tls_cert && (s = natsOptions_LoadCertificatesChain(k->opts, sp->tls_cert, sp->tls_key)) != NATS_OK)
    return nats_fail(st, i, "tls_cert/tls_key", s);
  if (sp->creds && (s = natsOptions_SetUserCredentialsFromFiles(k->opts, sp->creds, NULL)) != NATS_OK)
    return nats_fail(st, i, "creds", s);
  s = natsConnection_Connect(&k->nc, k->opts);
  if (s == NATS_OK) on_conn(k->nc, k);
  else if (s != NATS_NOT_YET_CONNECTED) return nats_fail(st, i, "connect", s);
  else set_error(k, "connect", s, "retrying in the background");
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 2000;
  jo.PublishAsync.MaxPending = (int64_t)sp->batch;
  jo.PublishAsync.ErrHandler = on_pub_err;
  jo.PublishAsync.ErrHandlerClosure = k;
  if ((s = natsConnection_JetStream(&k->js, k->nc, &jo)) != NATS_OK) return nats_fail(st, i, "jetstream", s);
  int err = 0;
  k->sub = etw_hub_subscribe(hub, NULL, 0, &err);
  if (!k->sub) return etw_fail(st, ETW_E_LIMIT, NULL, "/sinks/%u: no subscriber slot left on the session", i);
  if (pthread_create(&k->thread, NULL, sink_thread, k))
    return etw_fail(st, ETW_E_NOMEM, NULL, "/sinks/%u: cannot start its thread", i);
  k->started = 1;
  return ETW_E_OK;
}

/* 0 when libnats may still call back into @k (it must then never be freed) */
static int free_one(struct nsink *k) {
  if (k->started) {
    atomic_store(&k->quit, 1);
    etw_sub_wake(k->sub);
    pthread_join(k->thread, NULL);
  }
  if (k->sub) etw_sub_close(k->sub);
  if (k->js) jsCtx_Destroy(k->js);
  int gone = 1;
  if (k->nc) { /* libnats calls back from its own threads until the closed callback ran */
    natsConnection_Close(k->nc);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&k->mu);
    while (!k->closed && pthread_cond_timedwait(&k->cv, &k->mu, &until) == 0) {
    }
    gone = k->closed;
    pthread_mutex_unlock(&k->mu);
    natsConnection_Destroy(k->nc);
  }
  if (k->opts) natsOptions_Destroy(k->opts);
  rec_free_list(k->sp.head);
  if (k->sp.fd >= 0) {
    close(k->sp.fd);
    unlink(k->sp.path);
    *strrchr(k->sp.path, '/') = 0;
    rmdir(k->sp.path); /* the session's spool directory, once its last sink's file is gone */
  }
  if (k->inited && gone) {
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
  }
  return gone;
}

enum etw_err etw_sinks_start(const struct etw_sink_spec *v, uint32_t n, struct etw_hub *hub,
                             const struct etw_sink_ctx *ctx, struct etw_sinks **out,
                             struct etw_status *st) {
  *out = NULL;
  if (!n) return ETW_E_OK;
  struct etw_sinks *s = calloc(1, sizeof *s);
  if (!s || !(s->k = calloc(n, sizeof *s->k))) {
    free(s);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  for (uint32_t i = 0; i < n; i++) {
    s->k[i].spec = &v[i];
    s->n = i + 1;
    enum etw_err e = start_one(&s->k[i], i, hub, ctx, st);
    if (e) {
      if (st && !st->field[0]) snprintf(st->field, sizeof st->field, "/sinks/%u", i);
      etw_sinks_stop(s);
      return e;
    }
  }
  *out = s;
  return ETW_E_OK;
}

uint64_t etw_sinks_stop(struct etw_sinks *s) {
  if (!s) return 0;
  for (uint32_t i = 0; i < s->n; i++) atomic_store(&s->k[i].quit, 1); /* all flush at once */
  int gone = 1;
  for (uint32_t i = 0; i < s->n; i++) gone &= free_one(&s->k[i]);
  uint64_t lost = etw_sinks_lost(s);
  if (gone) { /* else kept: a late callback finds valid memory (never seen; 10 s is long) */
    free(s->k);
    free(s);
  }
  return lost;
}

uint64_t etw_sinks_lost(struct etw_sinks *s) {
  uint64_t n = 0;
  for (uint32_t i = 0; s && i < s->n; i++) n += atomic_load(&s->k[i].dropped);
  return n;
}

void etw_sinks_json(struct etw_sinks *s, struct etw_jw *w) {
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; s && i < s->n; i++) {
    struct nsink *k = &s->k[i];
    struct etw_sub_stats ss = {0};
    if (k->sub) etw_sub_stats(k->sub, &ss);
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"type\":\"nats\",\"connected\":");
    etw_jw_bool(w, atomic_load(&k->connected));
    etw_jw_lit(w, ",\"acked\":");
    etw_jw_u64(w, atomic_load(&k->acked));
    uint64_t sp = atomic_load(&k->spooled), dr = atomic_load(&k->dropped);
    etw_jw_lit(w, ",\"pending\":"); /* held in the spool, not yet acknowledged */
    etw_jw_u64(w, atomic_load(&k->held));
    etw_jw_lit(w, ",\"spooled\":");
    etw_jw_u64(w, sp);
    etw_jw_lit(w, ",\"spooled_disk\":");
    etw_jw_u64(w, atomic_load(&k->spooled_disk));
    etw_jw_lit(w, ",\"dropped\":");
    etw_jw_u64(w, dr);
    etw_jw_lit(w, ",\"gap_records\":");
    etw_jw_u64(w, atomic_load(&k->gaps));
    etw_jw_lit(w, ",\"hub_dropped\":");
    etw_jw_u64(w, ss.dropped);
    etw_jw_lit(w, ",\"retries\":");
    etw_jw_u64(w, atomic_load(&k->retries));
    etw_jw_lit(w, ",\"connects\":");
    etw_jw_u64(w, atomic_load(&k->reconnects));
    etw_jw_lit(w, ",\"last_error\":");
    pthread_mutex_lock(&k->mu);
    if (k->last_error[0]) etw_jw_cs(w, k->last_error); else etw_jw_lit(w, "null");
    pthread_mutex_unlock(&k->mu);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
}
