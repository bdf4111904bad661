/* sink_nats.c — sinks that publish a session's events to NATS JetStream (see sink.h).
 *
 * One thread per sink ("etwd-sink"): reads its hub subscriber (ndjson), pushes every event into
 * the spool, and while the connection is up publishes the spool's first `batch` records with
 * js_PublishMsgAsync and waits for their acknowledgements with js_PublishAsyncComplete in 20 ms
 * steps, draining the hub between steps (so a slow broker delays nothing but this thread). When
 * every message of a batch was answered, the acknowledged ones leave the spool; the rest is sent
 * again (same Nats-Msg-Id: the stream's duplicate window drops the copies). A message the broker
 * refuses outright (an error ack naming the message, not a timeout or an unavailable cluster)
 * is dropped after TRIES_MAX refusals, one larger than the server's max_payload at once: both
 * count as loss "sink" (gap record, stats) and the messages behind it go on.
 * The stream (check_stream): at start (the creating thread, when connected) a stream that exists
 * and cannot take the template's subjects refuses the session, a missing one is created; later
 * a publish nobody answers ("no responders": the stream is gone or its subjects changed) makes
 * the thread check it again with back-off, in state "error" with the reason meanwhile; the
 * events wait in the spool, and publishing resumes once the stream takes them again.
 * Stop (etw_sinks_stop) gives every sink ETW_SINK_FLUSH_MS: every wait (acks, stream requests,
 * the hub) ends by then, and whatever is not acknowledged is counted as loss "sink".
 * libnats owns its own threads (reconnects with our back-off, acks); its callbacks only touch
 * the atomics, the error texts (last_error, denied, gone_err), the refused seqs and the
 * no-responders subject, under `mu`. Credentials: the first connect is made without retries, so
 * creds the broker refuses refuse the session (400 /sinks/N/creds); a permissions violation
 * (the user may not publish the subject) and libnats giving up for good (it does after refused
 * creds on a reconnect) put the sink in state "error".
 * The spool: a FIFO of records in memory (up to spool_memory_kb), then — once that is full, and
 * until it is empty again — segment files <spool_dir>/sink<I>.<N>.spool (up to spool_disk_mb in
 * all; a segment is deleted as soon as it has been read back, so space returns during partial
 * drains). Order is kept: records go to disk only while it holds some, and the memory FIFO is
 * refilled from its head. The sum of all sinks' spools is capped server-wide
 * (etw_sinks_configure); beyond it events are dropped and counted like a full spool.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
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
  uint32_t tries;      /* publishes the broker refused (not in the file: 0 when read back) */
  uint64_t seq;        /* the event's seq; gap records: 1 << 63 | their number */
  int64_t pid;         /* -1: none */
  uint32_t len;        /* payload bytes */
  uint16_t plen, nlen; /* provider, event name (JSON-escaped text as it was in the event) */
  char data[];         /* provider, name, payload */
};
#define REC_HDR offsetof(struct rec, data) /* the file holds records from `seq` on */
#define REC_FILE_OFF offsetof(struct rec, seq)
#define REC_SIZE(r) (REC_HDR + (r)->len + (r)->plen + (r)->nlen)
#define GAP_BIT (1ull << 63)
#define TRIES_MAX 5 /* a record the broker refused this often is dropped */
#define CHECK_START_MS 1000 /* session creation waits this long (per request) for the stream */
/* a broker that stops answering with its connection open (hung, stopped, half-open TCP) is taken
 * for gone after PING_MS × (PINGS_OUT + 1) without a PONG (~30 s, not libnats' 2 min × 2):
 * "disconnected" in the sink's health, reconnects with back-off, the batch is sent again */
#define PING_MS 10000
#define PINGS_OUT 2
enum { ST_OK, ST_UNKNOWN, ST_BAD }; /* check_stream */

/* The disk part is a chain of segment files <base>.<N>.spool, each at most seg_max bytes: the
 * writer appends to segment wseg, the reader reads segment rseg from offset rd; a segment read to
 * its end is deleted, so an outage with partial drains never holds more than disk_max bytes of
 * records not yet sent (plus the read part of one segment). No files while n_disk is 0. */
struct spool {
  struct rec *head, *tail;
  uint64_t n_mem, mem, mem_max;
  char base[4200]; /* empty: no disk spool */
  int wfd, rfd;
  uint64_t wseg, rseg, wr, rd;
  uint64_t n_disk, disk, disk_max, seg_max; /* disk: bytes in the segment files */
};

/* the sum over every sink of every session (server-wide caps: etw_sinks_configure) */
static _Atomic uint64_t g_mem, g_disk;

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
  int stream_ok;            /* the stream was found taking our subjects (sink thread's) */
  int stream_seen;          /* it existed once: a missing stream is an error, not re-created */
  char check_subj[512];     /* the subject a publish found no stream for (thread's) */
  uint64_t gap_pending;     /* sink drops since the last gap record went into the spool */
  const char *gap_reason;   /* why the latest of them was dropped */
  uint64_t sub_gap_pending; /* hub drops for our queue (layer "subscriber") not yet in the spool */
  uint64_t gap_no;          /* gap records made (their message ids: gap-N) */
  _Atomic int64_t stop_by;  /* stopping: publish until this (monotonic ms), then count the rest
                             as loss; 0 while running */
  atomic_int connected;
  _Atomic uint64_t held, acked, published, dropped, spooled, spooled_disk, retries, reconnects, gaps;
  _Atomic uint64_t refused, held_mem, held_disk;
  pthread_mutex_t mu; /* guards last_error, stream_err, denied, gone_err, closing, closed, failed */
  pthread_cond_t cv;  /* signalled by on_closed */
  int closed;         /* libnats made its last callback: the struct may go */
  int closing;        /* free_one closes the connection (a close before that is libnats giving up) */
  char last_error[256];
  char stream_err[512];  /* why the stream does not take our events (state "error"); "" = none */
  char denied[320];      /* the broker denies our user a publish (state "error") until an ack */
  char gone_err[320];    /* libnats closed the connection for good, e.g. refused creds ("error") */
  int no_route;          /* a publish found no stream (no responders): nr_subj is its subject */
  char nr_subj[512];
  uint64_t failed[64]; /* seqs of the current batch the broker refused (on_pub_err) */
  uint32_t n_failed;
  int unsure; /* the current batch had an error not in failed[] (transient, no id, list full):
               * none of it counts as acknowledged, the whole batch is sent again (the broker
               * de-duplicates by Nats-Msg-Id) */
};

struct etw_sinks {
  uint32_t n;
  struct nsink *k;
};

static int64_t mono_ms(void) { return etw_mono_ns() / 1000000; }

/* stopping and its flush time is over: every wait ends */
static int out_of_time(struct nsink *k) {
  int64_t t = atomic_load(&k->stop_by);
  return t && mono_ms() >= t;
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

/* reserve @n bytes of a server-wide cap (0 = none) */
static int g_take(_Atomic uint64_t *g, uint64_t n, uint64_t cap) {
  if (atomic_fetch_add(g, n) + n <= cap) return 1;
  atomic_fetch_sub(g, n);
  return 0;
}

static void mem_append(struct spool *sp, struct rec *r) {
  r->next = NULL;
  if (sp->tail) sp->tail->next = r; else sp->head = r;
  sp->tail = r;
  sp->n_mem++;
  sp->mem += REC_SIZE(r);
}

/* unlink the record after @prev (NULL: the head) and free it */
static void mem_remove(struct spool *sp, struct rec *prev) {
  struct rec *r = prev ? prev->next : sp->head;
  if (prev) prev->next = r->next; else sp->head = r->next;
  if (sp->tail == r) sp->tail = prev;
  sp->n_mem--;
  sp->mem -= REC_SIZE(r);
  atomic_fetch_sub(&g_mem, REC_SIZE(r));
  free(r);
}

static void seg_path(const struct spool *sp, uint64_t n, char *o, size_t cap) {
  snprintf(o, cap, "%s.%llu.spool", sp->base, (unsigned long long)n);
}

static int seg_open(struct spool *sp, uint64_t n) {
  char p[4300];
  seg_path(sp, n, p, sizeof p);
  return open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

/* delete segment @n (its fd @fd) and give its bytes back */
static void seg_drop(struct spool *sp, uint64_t n, int fd, uint64_t bytes) {
  char p[4300];
  if (fd >= 0) close(fd);
  seg_path(sp, n, p, sizeof p);
  unlink(p);
  sp->disk -= bytes;
  atomic_fetch_sub(&g_disk, bytes);
}

/* 1 = kept (memory or file), 0 = no room (the caller counts the loss) */
static int spool_push(struct spool *sp, struct rec *r, _Atomic uint64_t *to_disk) {
  size_t sz = REC_SIZE(r);
  if (!sp->n_disk && sp->mem + sz <= sp->mem_max && g_take(&g_mem, sz, etw_sinks_total_bytes(0))) {
    mem_append(sp, r);
    return 1;
  }
  size_t fsz = sz - REC_FILE_OFF;
  if (!sp->base[0] || sp->disk + fsz > sp->disk_max || !g_take(&g_disk, fsz, etw_sinks_total_bytes(1)))
    return 0;
  int ok = 1;
  if (sp->wfd < 0) { /* the first record on disk */
    sp->wseg = sp->rseg = sp->rseg + 1;
    sp->wr = sp->rd = 0;
    ok = (sp->wfd = seg_open(sp, sp->wseg)) >= 0 && (sp->rfd = dup(sp->wfd)) >= 0;
    if (!ok && sp->wfd >= 0) {
      seg_drop(sp, sp->wseg, sp->wfd, 0);
      sp->wfd = -1;
    }
  } else if (sp->wr && sp->wr + fsz > sp->seg_max) { /* the next segment */
    int fd = seg_open(sp, sp->wseg + 1);
    if ((ok = fd >= 0)) {
      close(sp->wfd); /* the reader has its own descriptor (dup) */
      sp->wfd = fd;
      sp->wseg++;
      sp->wr = 0;
    }
  }
  if (!ok || pwrite(sp->wfd, (const char *)r + REC_FILE_OFF, fsz, (off_t)sp->wr) != (ssize_t)fsz) {
    atomic_fetch_sub(&g_disk, fsz);
    return 0;
  }
  sp->wr += fsz;
  sp->disk += fsz;
  sp->n_disk++;
  atomic_fetch_add(to_disk, 1);
  free(r);
  return 1;
}

/* move records from the disk's head into memory while they fit (at least one) */
static void spool_refill(struct spool *sp) {
  while (sp->n_disk) {
    struct rec h;
    size_t fixed = REC_HDR - REC_FILE_OFF;
    ssize_t got = pread(sp->rfd, (char *)&h + REC_FILE_OFF, fixed, (off_t)sp->rd);
    if (got == 0 && sp->rseg < sp->wseg) { /* this segment is read: delete it, go on */
      seg_drop(sp, sp->rseg, sp->rfd, sp->rd);
      sp->rseg++;
      if (sp->rseg == sp->wseg) sp->rfd = dup(sp->wfd);
      else {
        char p[4300];
        seg_path(sp, sp->rseg, p, sizeof p);
        sp->rfd = open(p, O_RDONLY | O_CLOEXEC);
      }
      sp->rd = 0;
      continue;
    }
    if (got != (ssize_t)fixed) break;
    size_t sz = REC_HDR + h.len + h.plen + h.nlen;
    if (sp->n_mem && sp->mem + sz > sp->mem_max) break;
    if (!g_take(&g_mem, sz, etw_sinks_total_bytes(0))) {
      if (sp->n_mem) break;
      atomic_fetch_add(&g_mem, sz); /* one record always, so that the spool moves */
    }
    struct rec *r = malloc(sz);
    if (!r || pread(sp->rfd, (char *)r + REC_FILE_OFF, sz - REC_FILE_OFF, (off_t)sp->rd) != (ssize_t)(sz - REC_FILE_OFF)) {
      atomic_fetch_sub(&g_mem, sz);
      free(r);
      break;
    }
    r->tries = 0;
    sp->rd += sz - REC_FILE_OFF;
    sp->n_disk--;
    mem_append(sp, r);
  }
  if (!sp->n_disk && sp->wfd >= 0) { /* all read: the last segment goes too */
    close(sp->rfd);
    seg_drop(sp, sp->wseg, sp->wfd, sp->disk);
    sp->wfd = sp->rfd = -1;
  }
}

/* stop: delete every segment file left */
static void spool_close(struct spool *sp) {
  if (sp->wfd < 0) return;
  close(sp->rfd);
  close(sp->wfd);
  for (uint64_t n = sp->rseg; n <= sp->wseg; n++) seg_drop(sp, n, -1, 0);
  atomic_fetch_sub(&g_disk, sp->disk);
  sp->disk = 0;
  sp->wfd = sp->rfd = -1;
}

/* ---- events from the hub */

static struct rec *rec_new(uint64_t seq, int64_t pid, const char *prov, size_t plen,
                           const char *name, size_t nlen, const char *payload, size_t len) {
  if (plen > 512) plen = 512;
  if (nlen > 512) nlen = 512;
  struct rec *r = malloc(REC_HDR + plen + nlen + len);
  if (!r) return NULL;
  r->tries = 0;
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

static void count_drop(struct nsink *k, uint64_t n, const char *why) {
  atomic_fetch_add(&k->dropped, n);
  k->gap_pending += n;
  k->gap_reason = why;
}

/* put one gap record into the spool; 1 = done */
static int push_gap(struct nsink *k, uint64_t n, const char *layer, const char *why) {
  char g[200];
  int gl = snprintf(g, sizeof g, "{\"Gap\":{\"Dropped\":%llu,\"Layer\":\"%s\",\"Reason\":\"%s\"}}",
                    (unsigned long long)n, layer, why);
  struct rec *gr = rec_new(GAP_BIT | (k->gap_no + 1), -1, "_gap", 4, "", 0, g, (size_t)gl);
  if (!gr) return 0;
  if (!spool_push(&k->sp, gr, &k->spooled_disk)) {
    free(gr);
    return 0;
  }
  k->gap_no++;
  atomic_fetch_add(&k->gaps, 1);
  atomic_fetch_add(&k->spooled, 1);
  return 1;
}

/* the gap records not yet in the spool: drops of our hub queue (counted by the hub as loss
 * "subscribers"), then the sink's own (loss "sink"); 1 = none left */
static int flush_gaps(struct nsink *k) {
  if (k->sub_gap_pending &&
      push_gap(k, k->sub_gap_pending, "subscriber", "the sink's hub queue was full"))
    k->sub_gap_pending = 0;
  if (k->gap_pending && push_gap(k, k->gap_pending, "sink", k->gap_reason ? k->gap_reason : "sink spool full"))
    k->gap_pending = 0;
  return !k->sub_gap_pending && !k->gap_pending;
}

static void keep(struct nsink *k, struct rec *r) {
  if (!r) {
    count_drop(k, 1, "out of memory");
    return;
  }
  /* tell the stream's readers first (a gap record may exceed the bound by one) */
  if (!flush_gaps(k)) {
    free(r);
    count_drop(k, 1, "sink spool full");
    return;
  }
  if (spool_push(&k->sp, r, &k->spooled_disk))
    atomic_fetch_add(&k->spooled, 1);
  else {
    free(r);
    count_drop(k, 1, "sink spool full");
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
    } else if (!strncmp(p, "{\"Gap\":{\"Dropped\":", 18)) {
      /* our own hub queue overflowed (the hub counts it: hub_dropped, loss.subscribers); the
       * stream's readers get a gap record for it where the events are missing */
      k->sub_gap_pending += strtoull(p + 18, NULL, 10);
      flush_gaps(k);
    }
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

/* the template's text [t, e) with its placeholders expanded; @r NULL: no event (the caller
 * gives {provider} and {event} tokens a '*') */
static void expand(struct nsink *k, const struct rec *r, const char *t, const char *e, char *o,
                   size_t *at, size_t cap) {
  const char *h = etw_host_name();
  while (t < e && *at + 1 < cap) {
    if (!strncmp(t, "{host}", 6)) tok(o, at, cap, h, strlen(h)), t += 6;
    else if (!strncmp(t, "{session}", 9)) tok(o, at, cap, k->session, strlen(k->session)), t += 9;
    else if (r && !strncmp(t, "{provider}", 10)) tok(o, at, cap, r->data, r->plen), t += 10;
    else if (r && !strncmp(t, "{event}", 7)) tok(o, at, cap, r->data + r->plen, r->nlen), t += 7;
    else o[(*at)++] = *t++;
  }
}

static void subject_of(struct nsink *k, const struct rec *r, char *o, size_t cap) {
  size_t at = 0;
  expand(k, r, k->spec->subject, k->spec->subject + strlen(k->spec->subject), o, &at, cap);
  o[at] = 0;
}

/* the subjects this sink can publish to: {host} and {session} expanded, a token with
 * {provider} or {event} is '*' (etwd.agent-one.sec.*); with @all_wild every placeholder
 * token is '*' (the subjects of a stream the sink creates: etwd.*.*.*) */
static void pattern_of(struct nsink *k, int all_wild, char *o, size_t cap) {
  size_t at = 0;
  for (const char *t = k->spec->subject; *t && at + 2 < cap;) {
    size_t n = strcspn(t, ".");
    const char *e = t + n;
    int wild = 0;
    for (const char *q = t; q < e && (q = memchr(q, '{', (size_t)(e - q))); q++)
      wild |= all_wild || !strncmp(q, "{provider}", 10) || !strncmp(q, "{event}", 7);
    if (wild) o[at++] = '*';
    else expand(k, NULL, t, e, o, &at, cap - 1);
    t = e;
    if (*t == '.') o[at++] = *t++;
  }
  o[at] = 0;
}

/* NATS subject matching: does the stream subject @f ('*' one token, '>' one or more) take
 * subject @p, whose '*' tokens stand for any token — @all 1: every subject @p stands for, 0:
 * at least one */
static int takes(const char *f, const char *p, int all) {
  for (;;) {
    size_t fl = strcspn(f, "."), pl = strcspn(p, ".");
    if (fl == 1 && *f == '>') return pl > 0; /* '>' takes the rest, wildcards too */
    int fw = fl == 1 && *f == '*', pw = pl == 1 && *p == '*';
    if (!(fw || (pw ? !all : fl == pl && !memcmp(f, p, fl)))) return 0;
    f += fl, p += pl;
    if (!*f || !*p) return !*f && !*p;
    f++, p++;
  }
}

/* errors the broker may stop giving without anything changing in the message */
static int transient(jsErrCode c) {
  return !c || c == JSClusterNotAvailErr || c == JSClusterNotLeaderErr ||
         c == JSInsufficientResourcesErr || c == JSMemoryResourcesExceededErr ||
         c == JSStorageResourcesExceededErr || c == JSStreamOfflineErr;
}

/* libnats' thread: a message of the batch was refused; a refusal of the message itself (not a
 * timeout or an unavailable cluster) is noted by its seq, parsed back from its Nats-Msg-Id */
static void on_pub_err(jsCtx *js, jsPubAckErr *pae, void *closure) {
  struct nsink *k = closure;
  const char *id = NULL;
  (void)js;
  set_error(k, "publish", pae->Err, pae->ErrText);
  if (pae->Err == NATS_NO_RESPONDERS) { /* no stream takes its subject: check_stream says why */
    pthread_mutex_lock(&k->mu);
    k->no_route = 1;
    snprintf(k->nr_subj, sizeof k->nr_subj, "%s", pae->Msg ? natsMsg_GetSubject(pae->Msg) : "");
    pthread_mutex_unlock(&k->mu);
  }
  if (transient(pae->ErrCode) || !pae->Msg || natsMsgHeader_Get(pae->Msg, "Nats-Msg-Id", &id) != NATS_OK) {
    pthread_mutex_lock(&k->mu);
    k->unsure = 1;
    pthread_mutex_unlock(&k->mu);
    return;
  }
  const char *t = strrchr(id, '/');
  t = t ? t + 1 : id;
  uint64_t seq = !strncmp(t, "gap-", 4) ? GAP_BIT | strtoull(t + 4, NULL, 10) : strtoull(t, NULL, 10);
  pthread_mutex_lock(&k->mu);
  if (k->n_failed < sizeof k->failed / sizeof k->failed[0]) k->failed[k->n_failed++] = seq;
  else k->unsure = 1; /* more in one batch: all of it is sent again, the others noted then */
  pthread_mutex_unlock(&k->mu);
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
  const char *txt = NULL;
  natsStatus why = natsConnection_GetLastError(nc, &txt);
  pthread_mutex_lock(&k->mu);
  if (!k->closing) /* libnats gave up (it does after refused credentials): no more reconnects */
    snprintf(k->gone_err, sizeof k->gone_err,
             "the connection is closed for good: libnats gave up on every server (it does when a broker "
             "refuses the creds); last error: %s%s%.150s", natsStatus_GetText(why), txt && *txt ? ": " : "", txt ? txt : "");
  k->closed = 1;
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->mu);
}

static void on_async_err(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure) {
  struct nsink *k = closure;
  const char *txt = NULL;
  (void)sub;
  natsConnection_GetLastError(nc, &txt); /* the server's words, e.g. which subject it denies */
  set_error(k, "async", s, txt);
  if (s != NATS_NOT_PERMITTED) return;
  pthread_mutex_lock(&k->mu);
  snprintf(k->denied, sizeof k->denied, "the broker does not permit this user (creds) to publish: %.250s",
           txt && *txt ? txt : natsStatus_GetText(s));
  pthread_mutex_unlock(&k->mu);
}

static int64_t backoff(natsConnection *nc, int attempts, void *closure) {
  (void)nc, (void)closure;
  int64_t d = 100;
  for (int i = 0; i < attempts && d < 5000; i++) d *= 2;
  return d > 5000 ? 5000 : d; /* 100 ms, doubling, at most 5 s */
}

static void set_stream_err(struct nsink *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* the stream cannot take our events: the sink's state is "error" with this text (also
 * last_error) until a check finds it fixed */
static void set_stream_err(struct nsink *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&k->mu);
  vsnprintf(k->stream_err, sizeof k->stream_err, fmt, ap);
  snprintf(k->last_error, sizeof k->last_error, "%s", k->stream_err);
  pthread_mutex_unlock(&k->mu);
  va_end(ap);
}

/* create the missing stream: subjects = the template with '*' for every placeholder token */
static int create_stream(struct nsink *k, jsOptions *jo) {
  char subj[256];
  pattern_of(k, 1, subj, sizeof subj);
  const char *subjects[1] = {subj};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = k->spec->stream;
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = (int64_t)k->spec->replicas;
  jsErrCode jerr = 0;
  jsStreamInfo *si = NULL;
  natsStatus s = js_AddStream(&si, k->js, &cfg, jo, &jerr);
  if (s == NATS_OK) {
    jsStreamInfo_Destroy(si);
    return ST_OK;
  }
  if (jerr == JSStreamSubjectOverlapErr) { /* another stream has them: a setup error */
    set_stream_err(k, "JetStream stream \"%s\" does not exist and cannot be created with subjects %s: %.200s",
                   k->spec->stream, subj, nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
    return ST_BAD;
  }
  set_error(k, "create stream", s, nats_GetLastError(NULL));
  return ST_UNKNOWN;
}

/* Does the sink's stream take @subj (NULL: at least one subject of the template's pattern,
 * pattern_of)? A missing stream is created if the sink never found it before (its start);
 * once it existed, its deletion is the operator's: reported, never undone. ST_OK clears the
 * stream error, ST_BAD sets it (set_stream_err; start_one refuses the session), ST_UNKNOWN (no
 * answer within @wait_ms, no connection) notes last_error — or the stream error when the
 * broker has no JetStream, which is not refused either. Called by start_one, then by the sink
 * thread only. */
static int check_stream(struct nsink *k, const char *subj, int64_t wait_ms) {
  jsErrCode jerr = 0;
  jsStreamInfo *si = NULL;
  jsOptions jo; /* while stopping, the requests wait only until stop_by */
  jsOptions_Init(&jo);
  int64_t by = atomic_load(&k->stop_by), now = mono_ms();
  if (by && by - now < 50) return ST_UNKNOWN;
  jo.Wait = by && by - now < wait_ms ? by - now : wait_ms;
  natsStatus s = js_GetStreamInfo(&si, k->js, k->spec->stream, &jo, &jerr);
  char pat[512], list[300];
  pattern_of(k, 0, pat, sizeof pat);
  if (s == NATS_NOT_FOUND && !k->stream_seen) {
    int r = create_stream(k, &jo);
    k->stream_seen = r == ST_OK;
    if (r != ST_OK) return r;
  } else if (s == NATS_NOT_FOUND) {
    set_stream_err(k, "JetStream stream \"%s\" does not exist (it was deleted; etwd creates a missing stream only when the sink starts): create it with subjects that take %s",
                   k->spec->stream, subj ? subj : pat);
    return ST_BAD;
  } else if (s == NATS_NO_RESPONDERS) { /* shown, not refused: the broker's setup may change */
    set_stream_err(k, "JetStream stream \"%s\": the broker does not answer JetStream requests (JetStream not enabled for this account?)",
                   k->spec->stream);
    return ST_UNKNOWN;
  } else if (s != NATS_OK) {
    set_error(k, "stream info", s, nats_GetLastError(NULL));
    return ST_UNKNOWN;
  } else {
    k->stream_seen = 1;
    int ok = 0;
    size_t at = 0;
    list[0] = 0;
    for (int i = 0; si->Config && i < si->Config->SubjectsLen; i++) {
      const char *f = si->Config->Subjects[i];
      ok |= takes(f, subj ? subj : pat, 0);
      if (at < sizeof list - 1) at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", f);
    }
    if (at >= sizeof list - 1) strcpy(list + sizeof list - 4, "...");
    jsStreamInfo_Destroy(si);
    if (!ok) {
      set_stream_err(k, "JetStream stream \"%s\" (subjects: %s) does not take subject %s%s", k->spec->stream,
                     list[0] ? list : "none", subj ? subj : pat,
                     subj ? "" : " (the sink's subject; * stands for any provider or event)");
      return ST_BAD;
    }
  }
  pthread_mutex_lock(&k->mu);
  k->stream_err[0] = 0;
  pthread_mutex_unlock(&k->mu);
  return ST_OK;
}

static void set_hdr(natsMsg *m, const char *key, const char *v, size_t *bytes) {
  natsMsgHeader_Set(m, key, v);
  *bytes += strlen(key) + strlen(v) + 4; /* "key: value\r\n" */
}

/* the message of @r; *@bytes: its size as the server counts it against max_payload */
static natsMsg *make_msg(struct nsink *k, const struct rec *r, size_t *bytes) {
  char subj[512], v[600];
  subject_of(k, r, subj, sizeof subj);
  natsMsg *m = NULL;
  const char *payload = r->data + r->plen + r->nlen;
  if (natsMsg_Create(&m, subj, NULL, payload, (int)r->len) != NATS_OK) return NULL;
  *bytes = r->len + 12; /* "NATS/1.0\r\n" … "\r\n" */
  if (r->seq & GAP_BIT)
    snprintf(v, sizeof v, "%sgap-%llu", k->msgid_pfx, (unsigned long long)(r->seq & ~GAP_BIT));
  else
    snprintf(v, sizeof v, "%s%llu", k->msgid_pfx, (unsigned long long)r->seq);
  set_hdr(m, "Nats-Msg-Id", v, bytes);
  set_hdr(m, "Etwd-Host", etw_host_name(), bytes);
  snprintf(v, sizeof v, "%.*s", (int)r->plen, r->data);
  set_hdr(m, "Etwd-Provider", v, bytes);
  if (r->nlen) {
    snprintf(v, sizeof v, "%.*s", (int)r->nlen, r->data + r->plen);
    set_hdr(m, "Etwd-Event", v, bytes);
  }
  if (r->pid >= 0) {
    snprintf(v, sizeof v, "%lld", (long long)r->pid);
    set_hdr(m, "Etwd-Pid", v, bytes);
  }
  return m;
}

static void show_held(struct nsink *k) {
  atomic_store(&k->held, k->sp.n_mem + k->sp.n_disk);
  atomic_store(&k->held_mem, k->sp.mem);
  atomic_store(&k->held_disk, k->sp.disk);
}

static void drain_hub(struct nsink *k, struct etw_jw *buf, int timeout_ms, int *ended) {
  if (*ended) return;
  etw_jw_truncate(buf, 0);
  int r = etw_sub_read(k->sub, buf, ETW_FMT_NDJSON, 1u << 20, timeout_ms);
  if (r < 0) *ended = 1;
  else if (r > 0) {
    take_lines(k, buf->buf, buf->len);
    show_held(k);
  }
}

/* after a batch of @n: remove what was acknowledged (all but the refused ones, when @complete),
 * count a refusal for the refused ones and drop those refused TRIES_MAX times; 1 = all sent */
static int settle(struct nsink *k, uint32_t n, int complete) {
  uint64_t failed[64];
  pthread_mutex_lock(&k->mu);
  uint32_t nf = k->n_failed;
  memcpy(failed, k->failed, nf * sizeof failed[0]);
  k->n_failed = 0;
  if (k->unsure) complete = 0; /* an error we cannot pin on a message: nothing is known sent */
  k->unsure = 0;
  pthread_mutex_unlock(&k->mu);
  uint32_t bad = 0, done = 0;
  struct rec *prev = NULL;
  for (uint32_t i = 0; i < n; i++) {
    struct rec *r = prev ? prev->next : k->sp.head;
    int refused = r->tries >= TRIES_MAX; /* larger than the server takes: at once */
    for (uint32_t j = 0; j < nf && !refused; j++) refused = failed[j] == r->seq;
    if (refused && ++r->tries >= TRIES_MAX) {
      if (!(r->seq & GAP_BIT)) count_drop(k, 1, "refused by the broker");
      atomic_fetch_add(&k->refused, 1);
      mem_remove(&k->sp, prev);
    } else if (refused || !complete) {
      bad += refused;
      prev = r;
    } else {
      mem_remove(&k->sp, prev);
      done++;
    }
  }
  atomic_fetch_add(&k->acked, done);
  atomic_fetch_add(&k->published, done);
  if (done) {
    pthread_mutex_lock(&k->mu);
    k->denied[0] = 0; /* the broker takes our publishes (again) */
    pthread_mutex_unlock(&k->mu);
  }
  return complete && !bad;
}

/* publish the spool's first records and wait for their acks; 1 = all acknowledged */
static int publish_batch(struct nsink *k, struct etw_jw *buf, int *ended) {
  spool_refill(&k->sp);
  pthread_mutex_lock(&k->mu);
  k->n_failed = 0;
  k->unsure = 0;
  pthread_mutex_unlock(&k->mu);
  uint32_t n = 0;
  int sent_all = 1;
  int64_t maxp = natsConnection_GetMaxPayload(k->nc);
  for (struct rec *r = k->sp.head; r && n < k->spec->batch; r = r->next, n++) {
    size_t bytes = 0;
    natsMsg *m = make_msg(k, r, &bytes);
    if (m && maxp > 0 && bytes > (uint64_t)maxp) { /* the server would refuse it (and close) */
      natsMsg_Destroy(m);
      set_error(k, "publish", NATS_MAX_PAYLOAD, "a message larger than the server's max_payload was dropped");
      r->tries = TRIES_MAX;
      continue;
    }
    natsStatus s = m ? js_PublishMsgAsync(k->js, &m, NULL) : NATS_NO_MEMORY;
    if (s != NATS_OK) {
      natsMsg_Destroy(m);
      set_error(k, "publish", s, nats_GetLastError(NULL));
      sent_all = 0;
      break;
    }
  }
  int64_t deadline = mono_ms() + k->spec->ack_timeout_ms;
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 20;
  natsStatus s;
  /* every ack or refusal, unless the time is up or the session is being deleted */
  while ((s = js_PublishAsyncComplete(k->js, &po)) == NATS_TIMEOUT && mono_ms() < deadline &&
         !out_of_time(k))
    drain_hub(k, buf, 0, ended); /* keep the hub queue short while the broker answers */
  if (s != NATS_OK) {
    natsMsgList pl = {0};
    if (js_PublishAsyncGetPendingList(&pl, k->js) == NATS_OK) natsMsgList_Destroy(&pl);
    if (s == NATS_TIMEOUT) set_error(k, "ack", s, "no acknowledgement in time");
  }
  if (settle(k, n, s == NATS_OK && sent_all)) return 1;
  atomic_fetch_add(&k->retries, 1);
  pthread_mutex_lock(&k->mu);
  int no_route = k->no_route;
  if (no_route) snprintf(k->check_subj, sizeof k->check_subj, "%s", k->nr_subj);
  k->no_route = 0;
  pthread_mutex_unlock(&k->mu);
  if (s != NATS_OK || !sent_all || no_route) k->stream_ok = 0; /* check the stream again */
  return 0;
}

static void *sink_thread(void *arg) {
  struct nsink *k = arg;
  struct etw_jw buf;
  etw_jw_init(&buf, 2u << 20);
  int ended = 0;
  int64_t retry_at = 0, wait = 100;
  for (;;) {
    int busy = k->sp.head || k->sp.n_disk;
    int up = atomic_load(&k->connected) && natsConnection_Status(k->nc) == NATS_CONN_STATUS_CONNECTED;
    drain_hub(k, &buf, busy && up && mono_ms() >= retry_at ? 0 : 50, &ended);
    if (k->gap_pending || k->sub_gap_pending) flush_gaps(k); /* e.g. refused, or after the last event */
    show_held(k);
    busy = k->sp.head || k->sp.n_disk;
    if ((ended && !busy) || out_of_time(k)) break;
    if (!up || !busy || mono_ms() < retry_at) {
      if (ended && busy) usleep(20000);
      continue;
    }
    if (!k->stream_ok) /* until it is fixed, the events stay in the spool (within its bounds) */
      k->stream_ok = check_stream(k, k->check_subj[0] ? k->check_subj : NULL, 2000) == ST_OK;
    if (k->stream_ok && publish_batch(k, &buf, &ended)) {
      show_held(k);
      wait = 100;
      continue;
    }
    retry_at = mono_ms() + wait; /* back off: 100 ms doubling to 5 s */
    wait = wait * 2 > 5000 ? 5000 : wait * 2;
  }
  /* what is still spooled or queued for us now is lost: count it (the files go at free_one) */
  uint64_t left = 0;
  for (spool_refill(&k->sp); k->sp.head; spool_refill(&k->sp))
    while (k->sp.head) {
      left += !(k->sp.head->seq & GAP_BIT); /* gap records are not events */
      mem_remove(&k->sp, NULL);
    }
  atomic_fetch_add(&k->dropped, left);
  show_held(k);
  etw_jw_free(&buf);
  return NULL;
}

/* libnats' last error without the secret files' directory (it names a file it cannot read);
 * returns which of them it named: 1 creds, 2 a TLS file, 0 none */
static int hidden_error(const struct etw_sink_spec *sp, char *out, size_t n) {
  const char *paths[4] = {sp->creds, sp->tls_ca, sp->tls_cert, sp->tls_key};
  char tmp[512];
  int which = 0;
  const char *le = nats_GetLastError(NULL), *at = le && le[0] == '(' ? strstr(le, "): ") : NULL;
  snprintf(tmp, sizeof tmp, "%s", at ? at + 3 : le ? le : ""); /* without libnats' "(file.c:line): " */
  for (int j = 0; j < 4; j++) {
    if (etw_secret_hide(tmp, paths[j], out, n) && !which) which = j ? 2 : 1;
    snprintf(tmp, sizeof tmp, "%s", out);
  }
  return which;
}

static enum etw_err nats_fail(struct etw_status *st, uint32_t i, const char *what, natsStatus s,
                              const struct etw_sink_spec *sp) {
  char le[512];
  hidden_error(sp, le, sizeof le);
  return etw_fail(st, ETW_E_INVALID, NULL, "/sinks/%u: %s: %s %s", i, what, natsStatus_GetText(s), le);
}

/* the first connect: refused credentials are a setup error, refused now (libnats, retrying in the
 * background, would close the connection for good after them, and its last error is overwritten
 * by then), so the first attempt is made without retries; only a broker that is not there (or
 * not yet) gets the background retries. The problem names the creds file by its name only. */
static enum etw_err first_connect(struct nsink *k, uint32_t i, struct etw_status *st) {
  natsOptions_SetRetryOnFailedConnect(k->opts, false, NULL, NULL);
  natsStatus s = natsConnection_Connect(&k->nc, k->opts);
  /* libnats 3.4.1 leaves the nonce's signature out of CONNECT when its first byte is 0 (1 connect
   * in 256 with creds); the broker answers "Authorization Violation". A new connect signs a new
   * nonce: refused creds are taken as refused after 3 tries (docs/fleet.md) */
  for (int t = 1; t < 3 && k->spec->creds && s == NATS_CONNECTION_AUTH_FAILED; t++)
    s = natsConnection_Connect(&k->nc, k->opts);
  if (s == NATS_OK) {
    on_conn(k->nc, k);
    return ETW_E_OK;
  }
  if (s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED) {
    const char *le = nats_GetLastError(NULL), *p = le ? strstr(le, "): ") : NULL; /* skip "(file:line): " */
    const char *why = p ? p + 3 : le && *le ? le : natsStatus_GetText(s);
    const char *c = k->spec->creds, *base = c ? strrchr(c, '/') : NULL;
    char f[48];
    if (!c) {
      snprintf(f, sizeof f, "/sinks/%u", i);
      return etw_fail(st, ETW_E_INVALID, f, "/sinks/%u: the broker refused the connection (no creds given): %.200s", i, why);
    }
    snprintf(f, sizeof f, "/sinks/%u/creds", i);
    return etw_fail(st, ETW_E_INVALID, f, "/sinks/%u: the broker refused the credentials in %s: %.200s", i,
                    base ? base + 1 : c, why);
  }
  char le[512];
  if (hidden_error(k->spec, le, sizeof le) == 1) { /* libnats cannot read or parse the creds file */
    char f[48];
    snprintf(f, sizeof f, "/sinks/%u/creds", i);
    return etw_fail(st, ETW_E_INVALID, f, "/sinks/%u: the creds file cannot be used: %s", i, le);
  }
  k->nc = NULL;
  natsOptions_SetRetryOnFailedConnect(k->opts, true, on_conn, k);
  s = natsConnection_Connect(&k->nc, k->opts);
  if (s == NATS_OK) on_conn(k->nc, k);
  else if (s != NATS_NOT_YET_CONNECTED) return nats_fail(st, i, "connect", s, k->spec);
  else set_error(k, "connect", s, "retrying in the background");
  return ETW_E_OK;
}

static enum etw_err start_one(struct nsink *k, uint32_t i, struct etw_hub *hub,
                              const struct etw_sink_ctx *ctx, struct etw_status *st) {
  const struct etw_sink_spec *sp = k->spec;
  natsStatus s;
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, NULL);
  k->inited = 1;
  k->sp.wfd = k->sp.rfd = -1;
  k->sp.mem_max = sp->spool_memory_kb * 1024;
  k->sp.disk_max = sp->spool_disk_mb << 20;
  k->sp.seg_max = k->sp.disk_max / 8 > (64u << 10) ? k->sp.disk_max / 8 : (64u << 10);
  snprintf(k->session, sizeof k->session, "%s", ctx->session);
  snprintf(k->msgid_pfx, sizeof k->msgid_pfx, "%s/%s@%lld/", etw_host_name(), ctx->session,
           (long long)(ctx->started_ns / 1000000));
  if (sp->spool_disk_mb && ctx->spool_dir) {
    if (etw_mkdirs(ctx->spool_dir))
      return etw_fail(st, ETW_E_IO, NULL, "cannot create %s: %s", ctx->spool_dir, strerror(errno));
    snprintf(k->sp.base, sizeof k->sp.base, "%s/sink%u", ctx->spool_dir, i);
    int fd = seg_open(&k->sp, 0); /* fail now, not at the first outage */
    if (fd < 0) return etw_fail(st, ETW_E_IO, NULL, "cannot create %s.0.spool: %s", k->sp.base, strerror(errno));
    seg_drop(&k->sp, 0, fd, 0);
  }
  if ((s = natsOptions_Create(&k->opts)) != NATS_OK) return nats_fail(st, i, "options", s, sp);
  { /* "url1,url2,…": the cluster's servers (libnats tries the others when one goes) */
    char urls[1100], *save = NULL;
    const char *srv[16];
    int ns = 0;
    snprintf(urls, sizeof urls, "%s", sp->url);
    for (char *u = strtok_r(urls, ",", &save); u && ns < 16; u = strtok_r(NULL, ",", &save)) srv[ns++] = u;
    if ((s = natsOptions_SetServers(k->opts, srv, ns)) != NATS_OK) return nats_fail(st, i, "url", s, sp);
  }
  natsOptions_SetMaxReconnect(k->opts, -1);
  natsOptions_SetCustomReconnectDelay(k->opts, backoff, k);
  natsOptions_SetDisconnectedCB(k->opts, on_disc, k);
  natsOptions_SetReconnectedCB(k->opts, on_conn, k);
  natsOptions_SetErrorHandler(k->opts, on_async_err, k);
  natsOptions_SetClosedCB(k->opts, on_closed, k);
  natsOptions_SetTimeout(k->opts, 2000);
  natsOptions_SetPingInterval(k->opts, PING_MS);
  natsOptions_SetMaxPingsOut(k->opts, PINGS_OUT);
  natsOptions_SetName(k->opts, "etwd-sink");
  if (sp->tls_ca || sp->tls_cert || !strncmp(sp->url, "tls://", 6)) natsOptions_SetSecure(k->opts, true);
  if (sp->tls_ca && (s = natsOptions_LoadCATrustedCertificates(k->opts, sp->tls_ca)) != NATS_OK)
    return nats_fail(st, i, "tls_ca", s, sp);
  if (sp->tls_cert && (s = natsOptions_LoadCertificatesChain(k->opts, sp->tls_cert, sp->tls_key)) != NATS_OK)
    return nats_fail(st, i, "tls_cert/tls_key", s, sp);
  if (sp->creds && (s = natsOptions_SetUserCredentialsFromFiles(k->opts, sp->creds, NULL)) != NATS_OK)
    return nats_fail(st, i, "creds", s, sp);
  enum etw_err ce = first_connect(k, i, st);
  if (ce) return ce;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 2000;
  jo.PublishAsync.MaxPending = (int64_t)sp->batch;
  jo.PublishAsync.ErrHandler = on_pub_err;
  jo.PublishAsync.ErrHandlerClosure = k;
  if ((s = natsConnection_JetStream(&k->js, k->nc, &jo)) != NATS_OK) return nats_fail(st, i, "jetstream", s, sp);
  if (atomic_load(&k->connected)) {
    /* a stream that exists and cannot take our subjects is a setup error, refused now; no
     * answer in time is not (the thread checks again while the spool holds the events) */
    int r = check_stream(k, NULL, CHECK_START_MS);
    if (r == ST_BAD) {
      char f[48];
      snprintf(f, sizeof f, "/sinks/%u/stream", i);
      return etw_fail(st, ETW_E_SINK_STREAM, f, "/sinks/%u: %s", i, k->stream_err);
    }
    k->stream_ok = r == ST_OK;
  }
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
    etw_sub_wake(k->sub);
    pthread_join(k->thread, NULL);
  }
  if (k->sub) etw_sub_close(k->sub);
  if (k->js) jsCtx_Destroy(k->js);
  int gone = 1;
  if (k->nc) { /* libnats calls back from its own threads until the closed callback ran */
    pthread_mutex_lock(&k->mu);
    k->closing = 1;
    pthread_mutex_unlock(&k->mu);
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
  atomic_fetch_sub(&g_mem, k->sp.mem);
  rec_free_list(k->sp.head);
  spool_close(&k->sp);
  if (k->sp.base[0]) {
    *strrchr(k->sp.base, '/') = 0;
    rmdir(k->sp.base); /* the session's spool directory, once its last sink's files are gone */
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
  int64_t by = mono_ms() + ETW_SINK_FLUSH_MS;
  for (uint32_t i = 0; i < s->n; i++) { /* all flush at once, until @by */
    atomic_store(&s->k[i].stop_by, by);
  }
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

/* why the sink is in state "error", NULL if it is not; the caller holds k->mu */
static const char *sink_error(const struct nsink *k) {
  return k->gone_err[0] ? k->gone_err : k->denied[0] ? k->denied : k->stream_err[0] ? k->stream_err : NULL;
}

void etw_sinks_json(struct etw_sinks *s, struct etw_jw *w) {
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; s && i < s->n; i++) {
    struct nsink *k = &s->k[i];
    struct etw_sub_stats ss = {0};
    if (k->sub) etw_sub_stats(k->sub, &ss);
    if (i) etw_jw_ch(w, ',');
    pthread_mutex_lock(&k->mu);
    const char *bad = sink_error(k);
    etw_jw_lit(w, "{\"type\":\"nats\",\"state\":"); /* see etw_sinks_ok */
    etw_jw_lit(w, bad ? "\"error\"" : atomic_load(&k->connected) ? "\"ok\"" : "\"disconnected\"");
    etw_jw_lit(w, ",\"error\":");
    if (bad) etw_jw_cs(w, bad); else etw_jw_lit(w, "null");
    pthread_mutex_unlock(&k->mu);
    etw_jw_lit(w, ",\"connected\":");
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
    etw_jw_lit(w, ",\"memory_bytes\":");
    etw_jw_u64(w, atomic_load(&k->held_mem));
    etw_jw_lit(w, ",\"disk_bytes\":");
    etw_jw_u64(w, atomic_load(&k->held_disk));
    etw_jw_lit(w, ",\"refused\":");
    etw_jw_u64(w, atomic_load(&k->refused));
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

int etw_sinks_ok(struct etw_sinks *s, uint32_t i) {
  if (!s || i >= s->n) return -1;
  struct nsink *k = &s->k[i];
  pthread_mutex_lock(&k->mu);
  int ok = !sink_error(k) && atomic_load(&k->connected);
  pthread_mutex_unlock(&k->mu);
  return ok;
}
