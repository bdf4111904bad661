/* nats_backend.c — backend "nats": a session whose events come from a JetStream stream that
 * etwd sinks (and anything else publishing the same shape) fill; served through the same hub,
 * WebSocket/ndjson and web page as a live session, so one central etwd shows many hosts.
 *
 * One pull consumer per subject filter (durable name etwd_<os name>_<i>, from the stream's first
 * message or the spec's start_seq / start_time, no acks;
 * deleted when the session is destroyed), one reader thread ("etwd-s<id>-nats") that fetches
 * up to 256 messages per consumer at a time and publishes them to the hub as one batch. A
 * client's own pass (?from_stream_seq / ?from_time, session.c) opens this backend again with
 * src->ephemeral: ephemeral consumers (the server drops them after INACTIVE_S without a fetch,
 * should etwd die) and a lossless hub, cancelled by stop; should the broker lose that consumer
 * (its info says not found), the pass ends by itself: its hub ends with the reason (the
 * client's {"End":…} record, api/stream.c). A
 * message's body is an event as etwd writes it ({"seq":N,…}): its own seq is replaced by this
 * session's, followed by "stream_seq":<the message's stream sequence> (replacing one a central
 * etwd's sink put there), which a client gives as ?from_stream_seq to resume (the event keeps
 * System.Host, so its origin stays visible); the filter header
 * (provider, name, pid, tid, id, level, time, cpu) is read back from the text. A gap message
 * ({"Gap":{"Dropped":N,…}}) is counted as hub loss. Other bodies are skipped and counted.
 * The providers and events the streams have carried (every nats session's, process-wide, at most
 * SEEN_MAX pairs) are this backend's provider listing (GET /api/v1/providers?backend=nats).
 * Health (stats "source", /metrics etwd_session_source_ok): libnats's callbacks keep connected,
 * reconnects and the reason of a disconnection; the reader notes its fetch errors, the time of its
 * last message, the libnats connection status and, every CI_EVERY_MS while connected, its
 * consumers' info (pending, delivered) — all cached, so a stats call never waits for the network
 * (libnats holds its connection's lock while it connects).
 * Ownership: the thread owns the subscriptions while it runs; open/destroy own the connection.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nats/nats.h>

#include "etwcore/backend.h"
#include "etwcore/event.h"
#include "etwcore/nats_src.h"
#include "etwcore/sink.h"
#include "etwcore/util.h"

#define INACTIVE_S 120 /* an ephemeral consumer without fetches for this long is the server's to drop */
#define CI_EVERY_MS 2000 /* the reader asks for its consumers' info this often (1 s wait at most) */

struct ci_cache { /* one consumer's info as the reader last got it */
  uint64_t pending, delivered, ack_pending;
  int64_t at_ns; /* when (0: never) */
};

struct nb {
  const struct etw_nats_src *src;
  struct etw_hub *hub;
  void (*ended)(void *ctx, enum etw_err code, const char *msg);
  void *ctx;
  char os_name[64];
  natsOptions *opts;
  natsConnection *nc;
  jsCtx *js;
  natsSubscription *subs[ETW_NATS_SUBJECTS_MAX];
  uint32_t nsubs;
  pthread_t thread;
  int started;
  atomic_int stop;
  _Atomic uint64_t events, bytes, skipped;
  pthread_mutex_t mu; /* closed, closing, last_error, last_error_ns, ci (written by callbacks and the reader) */
  pthread_cond_t cv;
  int closed;
  int closing;     /* nb_destroy closes the connection: a close before that is libnats giving up */
  atomic_int gone; /* libnats closed the connection for good (e.g. the broker refused the creds on a
                    * reconnect): no more reconnects, state "error" */
  atomic_int connected, fetch_failing, ci_failing, nstatus; /* nstatus: natsConnection_Status as the reader saw it */
  int lost; /* the reader's: a client's pass whose consumer the broker no longer has (it ends) */
  char lost_why[240]; /* the reader's: why, for the client (etw_hub_end_why) */
  _Atomic uint64_t reconnects, disconnects, fetch_errors;
  _Atomic int64_t last_msg_ns, disc_ns; /* wall clock of the last message / of the disconnection */
  char last_error[320];
  int64_t last_error_ns;
  struct ci_cache ci[ETW_NATS_SUBJECTS_MAX];
  int64_t ci_next; /* the reader's: monotonic ms of its next consumer info */
  int64_t skip_before[ETW_NATS_SUBJECTS_MAX]; /* the reader's: start_time_ns until a message at or
                                               * after it came (0: none), see nb_open */
  const char *seen_prov, *seen_name; /* the reader's last event put into the seen table */
  uint16_t seen_id;
};

/* providers/events seen in the streams (any reader thread adds, the API lists; seen_mu): an
 * open-addressing set of interned (provider, event name, id); past SEEN_MAX pairs new ones are
 * not listed, counted in seen_dropped (in the listing: a provider "(unlisted)" with that count) */
#define SEEN_MAX 4096
#define SEEN_SLOTS (2 * SEEN_MAX)
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static struct seen {
  const char *prov, *name;
  uint16_t id;
} seen[SEEN_SLOTS];
static uint32_t seen_order[SEEN_MAX], n_seen; /* slots in the order first seen */
static uint64_t seen_dropped;

static void seen_add(struct nb *b, const struct etw_evref *h) {
  if (h->provider == b->seen_prov && h->name == b->seen_name && h->event_id == b->seen_id && b->seen_prov) return;
  b->seen_prov = h->provider;
  b->seen_name = h->name;
  b->seen_id = h->event_id;
  size_t i = (((uintptr_t)h->provider >> 4) * 31 + ((uintptr_t)h->name >> 4) * 7 + h->event_id) % SEEN_SLOTS;
  pthread_mutex_lock(&seen_mu);
  for (; seen[i].prov; i = (i + 1) % SEEN_SLOTS)
    if (seen[i].prov == h->provider && seen[i].name == h->name && seen[i].id == h->event_id) break;
  if (!seen[i].prov) {
    if (n_seen < SEEN_MAX) {
      seen[i] = (struct seen){h->provider, h->name, h->event_id};
      seen_order[n_seen++] = (uint32_t)i;
    } else {
      seen_dropped++;
    }
  }
  pthread_mutex_unlock(&seen_mu);
}

static int has_nocase(const char *s, const char *q) {
  size_t n = strlen(q);
  for (; *s; s++)
    if (!strncasecmp(s, q, n)) return 1;
  return !n;
}

/* [{"name":P,"events":N}] of the providers seen, first seen first; @q: a part of the name */
static enum etw_err nb_list_providers(const char *q, struct etw_jw *w, struct etw_status *st) {
  (void)st;
  etw_jw_ch(w, '[');
  int first = 1;
  pthread_mutex_lock(&seen_mu);
  for (uint32_t i = 0; i < n_seen; i++) {
    const char *p = seen[seen_order[i]].prov;
    uint32_t events = 0, earlier = 0;
    for (uint32_t j = 0; j < n_seen; j++)
      if (seen[seen_order[j]].prov == p) {
        earlier |= j < i;
        events++;
      }
    if (earlier || (q && !has_nocase(p, q))) continue;
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, p);
    etw_jw_lit(w, ",\"events\":");
    etw_jw_u64(w, events);
    etw_jw_ch(w, '}');
  }
  if (seen_dropped && (!q || has_nocase("(unlisted)", q))) {
    etw_jw_lit(w, first ? "" : ",");
    etw_jw_lit(w, "{\"name\":\"(unlisted)\",\"events\":");
    etw_jw_u64(w, seen_dropped);
    etw_jw_ch(w, '}');
  }
  pthread_mutex_unlock(&seen_mu);
  etw_jw_ch(w, ']');
  return ETW_E_OK;
}

/* {"name":P,"events":[{"id":ID,"name":N,"fields":[]}]}: the events of @name seen (fields are
 * not known: a stream carries decoded events, not their schemas) */
static enum etw_err nb_describe_provider(const char *name, struct etw_jw *w, struct etw_status *st) {
  int found = 0;
  pthread_mutex_lock(&seen_mu);
  for (uint32_t i = 0; i < n_seen; i++) {
    const struct seen *e = &seen[seen_order[i]];
    if (strcmp(e->prov, name)) continue;
    if (!found) {
      etw_jw_lit(w, "{\"name\":");
      etw_jw_cs(w, e->prov);
      etw_jw_lit(w, ",\"events\":[");
    } else {
      etw_jw_ch(w, ',');
    }
    found = 1;
    etw_jw_lit(w, "{\"id\":");
    etw_jw_u64(w, e->id);
    etw_jw_lit(w, ",\"name\":");
    if (e->name) etw_jw_cs(w, e->name); else etw_jw_lit(w, "null");
    etw_jw_lit(w, ",\"fields\":[]}");
  }
  pthread_mutex_unlock(&seen_mu);
  if (!found) return etw_fail(st, ETW_E_NOT_FOUND, NULL, "no provider named \"%.200s\" in the streams read so far", name);
  etw_jw_lit(w, "]}");
  return ETW_E_OK;
}

static int64_t mono_ms(void) { return etw_mono_ns() / 1000000; }

static void set_error(struct nb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct nb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&b->mu);
  vsnprintf(b->last_error, sizeof b->last_error, fmt, ap);
  b->last_error_ns = etw_real_ns();
  pthread_mutex_unlock(&b->mu);
  va_end(ap);
}

/* libnats's callback thread: the broker went away (libnats reconnects, forever) */
static void on_disc(natsConnection *nc, void *closure) {
  struct nb *b = closure;
  const char *txt = NULL;
  natsStatus s = natsConnection_GetLastError(nc, &txt);
  atomic_store(&b->connected, 0);
  atomic_store(&b->disc_ns, etw_real_ns());
  atomic_fetch_add(&b->disconnects, 1);
  set_error(b, "disconnected from the broker (%s%s%.200s); reconnecting", s == NATS_OK ? "connection lost" : natsStatus_GetText(s),
            txt && *txt ? ": " : "", txt ? txt : "");
}

static void on_reconn(natsConnection *nc, void *closure) {
  struct nb *b = closure;
  (void)nc;
  atomic_store(&b->connected, 1);
  atomic_fetch_add(&b->reconnects, 1);
}

static void on_async_err(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure) {
  (void)nc, (void)sub;
  set_error(closure, "async: %s", natsStatus_GetText(s));
}

static void on_closed(natsConnection *nc, void *closure) {
  struct nb *b = closure;
  const char *txt = NULL;
  natsStatus why = natsConnection_GetLastError(nc, &txt);
  pthread_mutex_lock(&b->mu);
  if (!b->closing) {
    atomic_store(&b->gone, 1);
    atomic_store(&b->connected, 0);
    snprintf(b->last_error, sizeof b->last_error,
             "the connection is closed for good: libnats gave up on every server (it does when a broker refuses "
             "the creds); last error: %s%s%.150s", natsStatus_GetText(why), txt && *txt ? ": " : "", txt ? txt : "");
    b->last_error_ns = etw_real_ns();
  }
  b->closed = 1;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* the number after @key in [p, e), or @def */
static int64_t num_after(const char *p, const char *e, const char *key, int64_t def) {
  size_t kl = strlen(key);
  for (const char *q = p; (q = memchr(q, key[0], (size_t)(e - q))) && (size_t)(e - q) > kl; q++)
    if (!memcmp(q, key, kl)) {
      q += kl;
      if (q < e && (*q == '-' || (*q >= '0' && *q <= '9'))) return strtoll(q, NULL, 10);
      return def;
    }
  return def;
}

/* the escaped text of the string after @key (NUL-terminated copy in @out) */
static int str_after(const char *p, const char *e, const char *key, char *out, size_t cap) {
  size_t kl = strlen(key);
  for (const char *q = p; (q = memchr(q, key[0], (size_t)(e - q))) && (size_t)(e - q) > kl; q++)
    if (!memcmp(q, key, kl)) {
      const char *s = q + kl, *t = s;
      while (t < e && *t != '"') t += (*t == '\\') ? 2 : 1;
      size_t n = (size_t)((t > e ? e : t) - s);
      if (n >= cap) n = cap - 1;
      memcpy(out, s, n);
      out[n] = 0;
      return 1;
    }
  out[0] = 0;
  return 0;
}

/* "YYYY-MM-DDTHH:MM:SS.fffffffZ" → UTC ns since 1970 (0 if it is not that) */
static int64_t parse_time(const char *p, const char *e) {
  char t[40];
  if (!str_after(p, e, "\"TimeCreated\":\"", t, sizeof t)) return 0;
  struct tm tm = {0};
  int frac = 0, nd = 0;
  if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec) != 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  for (const char *f = strchr(t, '.'); f && *++f >= '0' && *f <= '9' && nd < 9; nd++) frac = frac * 10 + (*f - '0');
  while (nd++ < 9) frac *= 10;
  return (int64_t)timegm(&tm) * 1000000000LL + frac;
}

/* Is @d one JSON object and nothing else, without a raw control byte? A body goes into clients'
 * frames as it is (ndjson lines, WebSocket arrays), so anything else from a publisher — a second
 * line, trailing text, broken JSON — would inject events or break every viewer's frames. */
static int one_object(const char *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)d[i] < 0x20) return 0;
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(d, n, &end, 0);
  int ok = j && cJSON_IsObject(j) && end == d + n;
  cJSON_Delete(j);
  return ok;
}

/* one message (stream sequence @sseq) into @bt; 1 = an event was added */
static int take(struct nb *b, struct etw_batch *bt, const char *d, size_t n, uint64_t sseq) {
  const char *e = d + n;
  if (n > 8 && !memcmp(d, "{\"Gap\":", 7)) {
    int64_t k = num_after(d, e, "\"Dropped\":", 0);
    if (k > 0) etw_hub_drop(b->hub, (uint64_t)k);
    return 0;
  }
  const char *c = n > 8 && !memcmp(d, "{\"seq\":", 7) ? memchr(d, ',', n) : NULL;
  if (!c || e[-1] != '}' || !one_object(d, n)) {
    atomic_fetch_add(&b->skipped, 1);
    return 0;
  }
  char prov[256], name[256];
  struct etw_evref h;
  memset(&h, 0, sizeof h);
  str_after(c, e, "\"Provider\":{\"Name\":\"", prov, sizeof prov);
  h.provider = etw_intern(prov[0] ? prov : "(none)");
  h.name = str_after(c, e, "\"EventName\":\"", name, sizeof name) ? etw_intern(name) : NULL;
  h.event_id = (uint16_t)num_after(c, e, "\"EventID\":", 0);
  h.level = (uint8_t)num_after(c, e, "\"Level\":", 0);
  h.pid = (uint32_t)num_after(c, e, "\"ProcessID\":", 0);
  h.tid = (uint32_t)num_after(c, e, "\"ThreadID\":", 0);
  h.cpu = (uint16_t)num_after(c, e, "\"ProcessorID\":", 0);
  h.ts_ns = parse_time(c, e);
  size_t mark = bt->data.len;
  const char *rest = c + 1; /* the object without its {"seq":N, (nor a "stream_seq":K, after it) */
  if ((size_t)(e - rest) > 14 && !memcmp(rest, "\"stream_seq\":", 13)) {
    const char *q = rest + 13;
    while (q < e && *q >= '0' && *q <= '9') q++;
    if (q < e && *q == ',' && q > rest + 13) rest = q + 1;
  }
  if (sseq) {
    etw_jw_lit(&bt->data, "\"stream_seq\":");
    etw_jw_u64(&bt->data, sseq);
    etw_jw_ch(&bt->data, ',');
  }
  etw_jw_raw(&bt->data, rest, (size_t)(e - rest));
  if (etw_batch_commit(bt, mark, &h)) {
    etw_hub_drop(b->hub, 1);
    return 0;
  }
  atomic_fetch_add(&b->events, 1);
  atomic_fetch_add(&b->bytes, n);
  seen_add(b, &h);
  return 1;
}

/* the reader, every CI_EVERY_MS while connected: its consumers' info into the cache. A client's
 * pass whose consumer is gone (deleted by an operator, or by the broker after INACTIVE_S without
 * a fetch while the client did not read) sets b->lost: its fetches would only time out, and the
 * client would get heartbeats forever */
static void consumer_info(struct nb *b) {
  if (mono_ms() < b->ci_next || !atomic_load(&b->connected)) return;
  b->ci_next = mono_ms() + CI_EVERY_MS;
  int failed = 0;
  for (uint32_t i = 0; i < b->nsubs && !atomic_load(&b->stop); i++) {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 1000;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = natsSubscription_GetConsumerInfo(&ci, b->subs[i], &jo, &jerr);
    if (s == NATS_NOT_FOUND && b->src->ephemeral && atomic_load(&b->connected)) {
      snprintf(b->lost_why, sizeof b->lost_why, "the broker no longer has this pass's consumer of %.60s (deleted, "
               "or dropped after %d s without a fetch); resume with from_stream_seq", b->src->subjects[i], INACTIVE_S);
      set_error(b, "%s", b->lost_why);
      b->lost = 1;
      return;
    }
    if (s != NATS_OK) {
      failed |= atomic_load(&b->connected); /* e.g. the consumer was deleted */
      set_error(b, "consumer info of %s: %s%s%.200s", b->src->subjects[i], natsStatus_GetText(s),
                nats_GetLastError(NULL) ? ": " : "", nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
      continue;
    }
    pthread_mutex_lock(&b->mu);
    b->ci[i] = (struct ci_cache){ci->NumPending, ci->Delivered.Stream, (uint64_t)ci->NumAckPending, etw_real_ns()};
    pthread_mutex_unlock(&b->mu);
    jsConsumerInfo_Destroy(ci);
  }
  atomic_store(&b->ci_failing, failed);
}

/* one fetch's outcome: errors while connected (a deleted consumer or stream) are the health's */
static void fetched(struct nb *b, uint32_t i, natsStatus s, int count) {
  if (count > 0) atomic_store(&b->last_msg_ns, etw_real_ns());
  if (s == NATS_OK || s == NATS_TIMEOUT) {
    atomic_store(&b->fetch_failing, 0);
    return;
  }
  atomic_fetch_add(&b->fetch_errors, 1);
  if (!atomic_load(&b->connected)) return; /* the disconnection is the reason */
  if (b->src->ephemeral) b->ci_next = 0; /* e.g. "Consumer Deleted": is it gone? (consumer_info) */
  atomic_store(&b->fetch_failing, 1);
  set_error(b, "fetch from %s of stream %s: %s%s%.200s", b->src->subjects[i], b->src->stream, natsStatus_GetText(s),
            nats_GetLastError(NULL) ? ": " : "", nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
}

static void *reader(void *arg) {
  struct nb *b = arg;
  while (!atomic_load(&b->stop)) {
    atomic_store(&b->nstatus, (int)natsConnection_Status(b->nc));
    consumer_info(b);
    if (b->lost) break;
    struct etw_batch *bt = etw_batch_new(256 * ETW_NATS_SUBJECTS_MAX, 16u << 20);
    if (!bt) break;
    for (uint32_t i = 0; i < b->nsubs && bt && !atomic_load(&b->stop); i++) {
      natsMsgList l = {0};
      jsErrCode jerr = 0;
      natsStatus s = natsSubscription_Fetch(&l, b->subs[i], 256, b->nsubs > 1 ? 20 : 100, &jerr);
      fetched(b, i, s, l.Count);
      if (s != NATS_OK && s != NATS_TIMEOUT) {
        struct timespec ts = {0, 100 * 1000000}; /* broker away: libnats reconnects */
        nanosleep(&ts, NULL);
      }
      for (int k = 0; k < l.Count && bt; k++) {
        if (etw_batch_full(bt)) {
          etw_hub_publish(b->hub, bt);
          bt = etw_batch_new(256 * ETW_NATS_SUBJECTS_MAX, 16u << 20);
          if (!bt) {
            etw_hub_drop(b->hub, (uint64_t)(l.Count - k));
            break;
          }
        }
        jsMsgMetaData *md = NULL;
        uint64_t sseq = natsMsg_GetMetaData(&md, l.Msgs[k]) == NATS_OK ? md->Sequence.Stream : 0;
        int early = md && b->skip_before[i] && md->Timestamp < b->skip_before[i];
        if (md && !early) b->skip_before[i] = 0; /* from the first one at/after the time on, all */
        jsMsgMetaData_Destroy(md);
        if (early) continue; /* stored before the start time (in its whole second) */
        take(b, bt, natsMsg_GetData(l.Msgs[k]), (size_t)natsMsg_GetDataLength(l.Msgs[k]), sseq);
      }
      natsMsgList_Destroy(&l);
    }
    if (bt) etw_hub_publish(b->hub, bt); /* consumes it, also when empty */
  }
  /* stopped: a client's pass ends (a session's hub is ended by its stop); lost: with the reason */
  etw_hub_end_why(b->hub, b->lost ? b->lost_why : NULL);
  return NULL;
}

/* libnats' last error, with the secret files named by their file names only (it names a file it
 * cannot read); an error about the creds file is a problem of /nats/creds */
static enum etw_err fail(struct etw_status *st, const char *what, natsStatus s, const struct etw_nats_src *src) {
  const char *paths[4] = {src->creds, src->tls_ca, src->tls_cert, src->tls_key};
  char le[512], tmp[512];
  int creds = 0;
  const char *e = nats_GetLastError(NULL), *at = e && e[0] == '(' ? strstr(e, "): ") : NULL;
  snprintf(tmp, sizeof tmp, "%s", at ? at + 3 : e ? e : ""); /* without libnats' "(file.c:line): " */
  for (int j = 0; j < 4; j++) {
    if (etw_secret_hide(tmp, paths[j], le, sizeof le) && !j) creds = 1;
    snprintf(tmp, sizeof tmp, "%s", le);
  }
  return etw_fail(st, s == NATS_NO_SERVER || s == NATS_TIMEOUT ? ETW_E_IO : ETW_E_INVALID, creds ? "/nats/creds" : "/nats",
                  "nats: %s: %s%s%.200s", what, natsStatus_GetText(s), le[0] ? ": " : "", le);
}

/* the broker refused who we are (a user its operator or account does not know, a seed that does
 * not sign for the JWT, no creds where it needs them): the problem names the creds file by its
 * name only, never its directory or contents */
static enum etw_err auth_fail(struct etw_status *st, const char *creds) {
  const char *le = nats_GetLastError(NULL), *p = le ? strstr(le, "): ") : NULL;
  const char *why = p ? p + 3 : le && *le ? le : "Authorization Violation"; /* without libnats' (file:line) */
  const char *base = creds ? strrchr(creds, '/') : NULL;
  if (!creds) return etw_fail(st, ETW_E_INVALID, "/nats", "nats: the broker refused the connection (no creds given): %.200s", why);
  return etw_fail(st, ETW_E_INVALID, "/nats/creds", "nats: the broker refused the credentials in %s: %.200s",
                  base ? base + 1 : creds, why);
}

static void nb_destroy(void *state);

static enum etw_err nb_open(const struct etw_backend_args *a, void **state, struct etw_status *st) {
  const struct etw_nats_src *src = a->spec->nats;
  if (!src) return etw_fail(st, ETW_E_INVALID, "/nats", "the \"nats\" backend needs /nats and /subjects");
  if (a->spec->n_providers || a->spec->n_pids || a->spec->n_exe_names || (a->spec->mode & ETW_MODE_FILE))
    return etw_fail(st, ETW_E_INVALID, a->spec->n_providers ? "/providers" : a->spec->n_pids ? "/pids" : a->spec->n_exe_names ? "/exe_names" : "/mode",
                    "a nats session reads /subjects of a stream: providers, pids, exe_names and file mode do not apply (filter its clients instead)");
  struct nb *b = calloc(1, sizeof *b);
  if (!b) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->src = src;
  b->hub = a->hub;
  b->ended = a->ended;
  b->ctx = a->ctx;
  snprintf(b->os_name, sizeof b->os_name, "%s", a->os_name);
  *state = b;
  const char *what = "connect";
  natsStatus s = natsOptions_Create(&b->opts);
  if (s != NATS_OK) goto nfail;
  char urls[1100], *save = NULL;
  const char *srv[16];
  int ns = 0;
  snprintf(urls, sizeof urls, "%s", src->url);
  for (char *u = strtok_r(urls, ",", &save); u && ns < 16; u = strtok_r(NULL, ",", &save)) srv[ns++] = u;
  natsOptions_SetServers(b->opts, srv, ns);
  natsOptions_SetMaxReconnect(b->opts, -1);
  natsOptions_SetClosedCB(b->opts, on_closed, b);
  natsOptions_SetDisconnectedCB(b->opts, on_disc, b);
  natsOptions_SetReconnectedCB(b->opts, on_reconn, b);
  natsOptions_SetErrorHandler(b->opts, on_async_err, b);
  natsOptions_SetTimeout(b->opts, 2000);
  natsOptions_SetPingInterval(b->opts, 10000); /* a hung broker (half-open TCP) counts as gone after ~30 s */
  natsOptions_SetMaxPingsOut(b->opts, 2);
  natsOptions_SetName(b->opts, "etwd-nats-backend");
  /* a secured broker: the spec's files, as a sink's (nats_src.h) */
  if (src->tls_ca || src->tls_cert || !strncmp(src->url, "tls://", 6)) natsOptions_SetSecure(b->opts, true);
  if (src->tls_ca && (s = natsOptions_LoadCATrustedCertificates(b->opts, src->tls_ca)) != NATS_OK) {
    what = "tls_ca";
    goto nfail;
  }
  if (src->tls_cert && (s = natsOptions_LoadCertificatesChain(b->opts, src->tls_cert, src->tls_key)) != NATS_OK) {
    what = "tls_cert/tls_key";
    goto nfail;
  }
  if (src->creds && (s = natsOptions_SetUserCredentialsFromFiles(b->opts, src->creds, NULL)) != NATS_OK) {
    what = "creds";
    goto nfail;
  }
  s = natsConnection_Connect(&b->nc, b->opts);
  /* a signature libnats 3.4.1 drops (its first byte 0, 1 in 256): tried again with a new nonce,
   * as a sink's first connect */
  for (int t = 1; t < 3 && src->creds && s == NATS_CONNECTION_AUTH_FAILED; t++)
    s = natsConnection_Connect(&b->nc, b->opts);
  if (s != NATS_OK) goto nfail;
  atomic_store(&b->connected, 1);
  atomic_store(&b->nstatus, NATS_CONN_STATUS_CONNECTED);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 5000;
  if ((s = natsConnection_JetStream(&b->js, b->nc, &jo)) != NATS_OK) goto nfail;
  for (uint32_t i = 0; i < src->n_subjects; i++) {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = src->stream;
    so.Config.AckPolicy = js_AckNone;
    so.Config.DeliverPolicy = js_DeliverAll;
    if (src->start_seq) {
      so.Config.DeliverPolicy = js_DeliverByStartSequence;
      so.Config.OptStartSeq = src->start_seq;
    } else if (src->start_time_ns) {
      /* libnats (3.4) writes OptStartTime's fraction without its leading zeros (…:00.05 goes out
       * as …:00.5, up to 0.9 s late): the broker is asked from the whole second (no fraction to
       * write), and the reader skips what it stored before the time itself */
      int64_t whole = src->start_time_ns - src->start_time_ns % 1000000000LL;
      so.Config.DeliverPolicy = whole ? js_DeliverByStartTime : js_DeliverAll;
      so.Config.OptStartTime = whole;
      b->skip_before[i] = src->start_time_ns;
    }
    char durable[96];
    snprintf(durable, sizeof durable, "%s_%u", b->os_name, i);
    if (src->ephemeral) so.Config.InactiveThreshold = (int64_t)INACTIVE_S * 1000000000LL;
    jsErrCode jerr = 0;
    if ((s = js_PullSubscribe(&b->subs[i], b->js, src->subjects[i], src->ephemeral ? NULL : durable, NULL, &so,
                              &jerr)) != NATS_OK) {
      enum etw_err e = etw_fail(st, s == NATS_NOT_FOUND ? ETW_E_NOT_FOUND : ETW_E_INVALID, "/subjects",
                                "nats: cannot read %s from stream %s: %s %s", src->subjects[i], src->stream,
                                natsStatus_GetText(s), nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
      nb_destroy(b);
      *state = NULL;
      return e;
    }
    b->nsubs++;
  }
  return ETW_E_OK;
nfail:;
  enum etw_err e = s == NATS_CONNECTION_AUTH_FAILED ? auth_fail(st, src->creds) : fail(st, what, s, src);
  nb_destroy(b);
  *state = NULL;
  return e;
}

static enum etw_err nb_start(void *state, struct etw_status *st) {
  struct nb *b = state;
  if (pthread_create(&b->thread, NULL, reader, b)) return etw_fail(st, ETW_E_NOMEM, NULL, "cannot start the reader");
  b->started = 1;
  return ETW_E_OK;
}

static void nb_stop(void *state) {
  struct nb *b = state;
  atomic_store(&b->stop, 1);
  etw_hub_cancel(b->hub); /* a client's pass: a publish waiting for its room returns now */
  if (b->started) pthread_join(b->thread, NULL);
  b->started = 0;
}

static void nb_destroy(void *state) {
  struct nb *b = state;
  nb_stop(b);
  for (uint32_t i = 0; i < b->nsubs; i++) {
    natsSubscription_Unsubscribe(b->subs[i]); /* deletes the consumer the subscribe created */
    natsSubscription_Destroy(b->subs[i]);
  }
  if (b->js) jsCtx_Destroy(b->js);
  int gone = 1;
  if (b->nc) { /* callbacks come from libnats's threads until the closed callback ran */
    pthread_mutex_lock(&b->mu);
    b->closing = 1;
    pthread_mutex_unlock(&b->mu);
    natsConnection_Close(b->nc);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&b->mu);
    while (!b->closed && pthread_cond_timedwait(&b->cv, &b->mu, &until) == 0) {
    }
    gone = b->closed;
    pthread_mutex_unlock(&b->mu);
    natsConnection_Destroy(b->nc);
  }
  if (b->opts) natsOptions_Destroy(b->opts);
  if (gone) {
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
  }
}

static void nb_stats(void *state, struct etw_backend_stats *out) {
  struct nb *b = state;
  memset(out, 0, sizeof *out);
  out->read_events = atomic_load(&b->events);
  out->read_bytes = atomic_load(&b->bytes);
  out->decode_errors = atomic_load(&b->skipped);
  out->source = 1;
  out->source_ok = atomic_load(&b->connected) && !atomic_load(&b->fetch_failing) && !atomic_load(&b->ci_failing);
}

static const char *status_name(int s) {
  static const char *const n[] = {"disconnected", "connecting", "connected", "closed", "reconnecting",
                                  "draining_subs", "draining_pubs"};
  return s >= 0 && s < (int)(sizeof n / sizeof n[0]) ? n[s] : "unknown";
}

static void time_ms(struct etw_jw *w, const char *key, int64_t ns, const char *age_key, int64_t now) {
  etw_jw_lit(w, key);
  if (ns) etw_jw_unix_ns(w, ns); else etw_jw_lit(w, "null");
  if (!age_key) return;
  etw_jw_lit(w, age_key);
  if (ns) etw_jw_u64(w, (uint64_t)(now > ns ? (now - ns) / 1000000 : 0)); else etw_jw_lit(w, "null");
}

/* "source":{…}: the broker's health as the callbacks and the reader left it (no network here) */
static void nb_stats_json(void *state, struct etw_jw *w) {
  struct nb *b = state;
  int64_t now = etw_real_ns();
  int up = atomic_load(&b->connected), failing = atomic_load(&b->fetch_failing) || atomic_load(&b->ci_failing);
  etw_jw_lit(w, "\"source\":{\"type\":\"nats\",\"state\":");
  etw_jw_lit(w, atomic_load(&b->gone) ? "\"error\"" : !up ? "\"disconnected\"" : failing ? "\"error\"" : "\"ok\"");
  etw_jw_lit(w, ",\"connected\":");
  etw_jw_bool(w, up);
  etw_jw_lit(w, ",\"status\":");
  int ns = atomic_load(&b->nstatus); /* the reader's sample may be older than the callbacks' news */
  if (up != (ns == NATS_CONN_STATUS_CONNECTED)) ns = up ? NATS_CONN_STATUS_CONNECTED : NATS_CONN_STATUS_RECONNECTING;
  etw_jw_cs(w, status_name(ns));
  etw_jw_lit(w, ",\"reconnects\":");
  etw_jw_u64(w, atomic_load(&b->reconnects));
  etw_jw_lit(w, ",\"disconnects\":");
  etw_jw_u64(w, atomic_load(&b->disconnects));
  time_ms(w, ",\"disconnected_since\":", up ? 0 : atomic_load(&b->disc_ns), NULL, now);
  etw_jw_lit(w, ",\"fetch_errors\":");
  etw_jw_u64(w, atomic_load(&b->fetch_errors));
  time_ms(w, ",\"last_message_time\":", atomic_load(&b->last_msg_ns), ",\"last_message_age_ms\":", now);
  pthread_mutex_lock(&b->mu);
  etw_jw_lit(w, ",\"last_error\":");
  if (b->last_error[0]) etw_jw_cs(w, b->last_error); else etw_jw_lit(w, "null");
  time_ms(w, ",\"last_error_time\":", b->last_error_ns, NULL, now);
  etw_jw_lit(w, ",\"consumers\":[");
  for (uint32_t i = 0; i < b->nsubs && !b->src->ephemeral; i++) {
    const struct ci_cache *c = &b->ci[i];
    etw_jw_lit(w, i ? ",{\"subject\":" : "{\"subject\":");
    etw_jw_cs(w, b->src->subjects[i]);
    etw_jw_lit(w, ",\"pending\":");
    if (c->at_ns) etw_jw_u64(w, c->pending); else etw_jw_lit(w, "null");
    etw_jw_lit(w, ",\"ack_pending\":");
    if (c->at_ns) etw_jw_u64(w, c->ack_pending); else etw_jw_lit(w, "null");
    etw_jw_lit(w, ",\"delivered_stream_seq\":");
    if (c->at_ns) etw_jw_u64(w, c->delivered); else etw_jw_lit(w, "null");
    time_ms(w, ",\"info_time\":", c->at_ns, ",\"info_age_ms\":", now);
    etw_jw_ch(w, '}');
  }
  pthread_mutex_unlock(&b->mu);
  etw_jw_lit(w, "]}");
}

static enum etw_err nb_enable(void *s, const struct etw_provider_spec *p, struct etw_status *st) {
  (void)s, (void)p;
  return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "a nats session reads subjects, not providers");
}

static enum etw_err nb_disable(void *s, const char *provider, struct etw_status *st) {
  (void)s, (void)provider;
  return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "a nats session reads subjects, not providers");
}

const struct etw_backend etw_backend_nats = {
    .name = "nats",
    .caps = ETW_CAP_NATS_SOURCE | ETW_CAP_SINKS | ETW_CAP_LIST_PROVIDERS, /* built only with libnats */
    .open = nb_open,
    .enable = nb_enable,
    .disable = nb_disable,
    .start = nb_start,
    .stop = nb_stop,
    .destroy = nb_destroy,
    .stats = nb_stats,
    .stats_json = nb_stats_json,
    .list_providers = nb_list_providers,
    .describe_provider = nb_describe_provider,
};
