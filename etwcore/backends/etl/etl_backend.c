/* etl_backend.c — the "etl" backend: replays recorded .etl files as a session.
 *
 * open() opens and indexes the files (so a missing or non-ETL file fails the request early);
 * start() runs one reader thread that reads, merges, decodes and encodes events into batches
 * (≤ 256 events / 256 KiB) and publishes them to the hub — as fast as possible, or at recorded
 * speed (replay_realtime), publishing at least every 20 ms. At the end (or at the first damage,
 * after everything readable) it calls args->ended and etw_hub_end (after stop() only
 * etw_hub_end). The core gives it a lossless hub, so a publish may wait for a slow client's room;
 * stop() cancels that wait (etw_hub_cancel), is idempotent and joins. Providers: list/describe
 * what the files in the data directory and the manifests directory define (scanned once, then
 * cached by file name, size and mtime).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "dec_stack.h"
#include "decode.h"
#include "etwcore/backend.h"
#include "etwcore/etl.h"
#include "etwcore/util.h"

#define BATCH_EVENTS 256
#define BATCH_BYTES (256u << 10)    /* publish once this much JSON is pending */
#define BATCH_MAX_BYTES (4u << 20)  /* hard cap: one event (≤ 64 KiB of payload) always fits */
#define FLUSH_NS 20000000LL

/* ---- directories */
static pthread_mutex_t dirs_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_data_dir, *g_manifest_dir;

void etw_etl_set_dirs(const char *data_dir, const char *manifest_dir) {
  pthread_mutex_lock(&dirs_mu);
  if (data_dir) {
    char *c = strdup(data_dir);
    if (c) {
      free(g_data_dir);
      g_data_dir = c;
    }
  }
  if (manifest_dir) {
    char *c = strdup(manifest_dir);
    if (c) {
      free(g_manifest_dir);
      g_manifest_dir = c;
    }
  }
  pthread_mutex_unlock(&dirs_mu);
}

char *etw_etl_manifest_dir(void) {
  pthread_mutex_lock(&dirs_mu);
  char *c = g_manifest_dir ? strdup(g_manifest_dir) : NULL;
  pthread_mutex_unlock(&dirs_mu);
  return c;
}

static char *data_dir_copy(void) {
  pthread_mutex_lock(&dirs_mu);
  char *c = g_data_dir ? strdup(g_data_dir) : NULL;
  pthread_mutex_unlock(&dirs_mu);
  return c;
}

static void sleep_ns(int64_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
  nanosleep(&ts, NULL);
}

/* ---- the stack indexes' budget (dec_stack.c holds it) */
void etw_etl_set_stack_index_mb(uint64_t mb) { etw_stk_budget_set(mb << 20); }

static void metric(struct etw_jw *w, const char *help, const char *name, const char *type, uint64_t v) {
  etw_jw_lit(w, "# HELP ");
  etw_jw_lit(w, name);
  etw_jw_ch(w, ' ');
  etw_jw_lit(w, help);
  etw_jw_lit(w, "\n# TYPE ");
  etw_jw_lit(w, name);
  etw_jw_ch(w, ' ');
  etw_jw_lit(w, type);
  etw_jw_ch(w, '\n');
  etw_jw_lit(w, name);
  etw_jw_ch(w, ' ');
  etw_jw_u64(w, v);
  etw_jw_ch(w, '\n');
}

void etw_etl_metrics(struct etw_jw *w) {
  struct etw_stk_budget b;
  etw_stk_budget_get(&b);
  metric(w, "Bytes all ETL stack indexes may hold together (--stack-index-mb).", "etwd_stack_index_budget_bytes",
         "gauge", b.limit);
  metric(w, "Bytes the ETL stack indexes hold now.", "etwd_stack_index_bytes", "gauge", b.used);
  metric(w, "The most bytes the ETL stack indexes held at once.", "etwd_stack_index_peak_bytes", "gauge", b.peak);
  metric(w, "Stack index reservations refused by the budget (each stopped one index growing).",
         "etwd_stack_index_refused_total", "counter", b.refused);
  metric(w, "Stack walks the stack indexes did not keep (their bounds or the budget): events without that stack.",
         "etwd_stack_walks_dropped_total", "counter", b.walks_dropped);
  metric(w, "Images and JIT methods the stack indexes did not keep: frames in them show their Address only.",
         "etwd_stack_images_dropped_total", "counter", b.images_dropped);
}

/* ---- session */
struct etl_sess {
  struct etw_backend_args args;
  struct etw_etl_reader *rd;
  struct etw_decoder *dec;
  struct etw_stk *stk; /* the files' stacks: made by start (a session's own state, never
                        * started when it has passes, holds none), learnt by the reader thread
                        * before its first event */
  pthread_t th;
  int started, joined;
  atomic_int stop;
  atomic_uint_fast64_t proc_dropped; /* the decoder's count, copied once per batch of records */
  atomic_uint_fast64_t events, bytes, errors, unparsed, walks, walks_unattached, walks_dropped, images_dropped;
  pthread_mutex_t mu;
  const struct etw_provider_spec **want; /* the spec's providers (names/GUID text): a filter */
  uint32_t n_want;
};

/* The filters ETW applies when it enables a provider, applied to the recorded events as the
 * stream shows them (Level, EventID, EventName; keywords from the header): an event passes at
 * Level 0 or <= the provider's level (0 and 5, the default, pass every level: a replay shows
 * everything unless asked otherwise); an event with keywords needs one of keywords_any (when set)
 * and all of keywords_all; event_ids include (or exclude); events by name. */
static int passes(const struct etw_provider_spec *p, const struct etw_rec *rec, const struct etw_evref *ref) {
  if (p->level && p->level < 5 && ref->level && ref->level > p->level) return 0;
  if (rec->desc.keyword) {
    if (p->keywords_any && !(rec->desc.keyword & p->keywords_any)) return 0;
    if ((rec->desc.keyword & p->keywords_all) != p->keywords_all) return 0;
  }
  if (p->n_event_ids) {
    int in = 0;
    for (uint32_t i = 0; i < p->n_event_ids && !in; i++) in = p->event_ids[i] == ref->event_id;
    if (in == p->event_ids_exclude) return 0;
  }
  if (p->n_events) {
    int in = 0;
    for (uint32_t i = 0; i < p->n_events && !in && ref->name; i++) in = !strcmp(p->events[i], ref->name);
    if (!in) return 0;
  }
  return 1;
}

static int wanted(const struct etl_sess *s, const char *prov, const struct etw_rec *rec,
                  const struct etw_evref *ref) {
  if (!s->n_want) return 1;
  char g[39];
  etw_format_guid(g, rec->provider_id);
  for (uint32_t i = 0; i < s->n_want; i++) {
    const char *w = s->want[i]->name;
    if (!strcasecmp(w, prov) || !strncasecmp(w, g + 1, 36) || !strncasecmp(w, g, 38))
      return passes(s->want[i], rec, ref);
  }
  return 0;
}

static void *reader_main(void *arg) {
  struct etl_sess *s = arg;
  struct etw_hub *hub = s->args.hub;
  struct etw_batch *b = NULL;
  const struct etw_rec *recs[64];
  struct etw_status st;
  etw_status_clear(&st);
  int64_t last_pub = etw_mono_ns(), wall0 = 0;
  uint64_t ft0 = 0;
  uint64_t done0 = 0;
  int rc = 0, n = 0, ri = 0, limited = 0;
  /* one read of the files first: the stack walks indexed by their events (dec_stack.h) */
  if (etw_stk_prepass(s->stk, (const char *const *)s->args.spec->files, (int)s->args.spec->n_files, &s->stop, 1) == 0) {
    struct etw_stk_counts kc;
    etw_stk_counts(s->stk, &kc);
    atomic_store(&s->walks, kc.walks);
    atomic_store(&s->walks_dropped, kc.dropped); /* (final: the index is not grown afterwards) */
    atomic_store(&s->images_dropped, kc.images_dropped);
  }
  /* the records come in batches (pointers into the reader, valid until the next call); the
   * reader only reads buffers inside that call, so its progress is taken once per batch */
  while (!atomic_load(&s->stop)) {
    if (ri == n) {
      if ((rc = etw_etl_reader_next_batch(s->rd, recs, sizeof recs / sizeof recs[0], &st)) <= 0) break;
      n = rc;
      ri = 0;
      uint64_t done, total;
      etw_etl_reader_progress(s->rd, &done, &total);
      atomic_fetch_add(&s->bytes, done - done0);
      done0 = done;
      atomic_store_explicit(&s->proc_dropped, etw_decoder_proc_dropped(s->dec), memory_order_relaxed);
    }
    const struct etw_rec *rec = recs[ri++];
    atomic_fetch_add(&s->events, 1);
    if (!s->args.spec->stackwalk_events && etw_stk_is_walk(rec)) { /* only attached: its names read */
      const char *pn, *en;
      etw_decoder_names(s->dec, rec, &pn, &en);
      continue;
    }
    if (s->args.spec->replay_realtime) {
      if (!wall0) {
        wall0 = etw_mono_ns();
        ft0 = rec->filetime;
      } else if (rec->filetime > ft0) {
        int64_t due = wall0 + (int64_t)(rec->filetime - ft0) * 100;
        /* sleep in ≤ 20 ms steps, publishing what is pending, so stop stays responsive */
        while (!atomic_load(&s->stop) && etw_mono_ns() < due) {
          if (b && b->n) {
            etw_hub_publish(hub, b);
            b = NULL;
            last_pub = etw_mono_ns();
          }
          int64_t left = due - etw_mono_ns();
          sleep_ns(left > FLUSH_NS ? FLUSH_NS : left);
        }
      }
    }
    if (!b) {
      b = etw_batch_new(BATCH_EVENTS, BATCH_MAX_BYTES);
      if (!b) {
        etw_hub_drop(hub, 1);
        continue;
      }
    }
    size_t mark = b->data.len;
    struct etw_evref ref;
    if (!etw_decoder_write(s->dec, rec, &b->data, &ref)) atomic_fetch_add(&s->errors, 1);
    etw_stk_attach(s->stk, rec, &b->data); /* (no room: the event without its stack) */
    if (s->dec->unparsed != atomic_load_explicit(&s->unparsed, memory_order_relaxed)) /* the stats' copy */
      atomic_store_explicit(&s->unparsed, s->dec->unparsed, memory_order_relaxed);
    if (s->n_want && !wanted(s, ref.provider, rec, &ref)) {
      etw_jw_truncate(&b->data, mark);
    } else if (etw_batch_commit(b, mark, &ref)) {
      etw_hub_drop(hub, 1);
    }
    int full = b->n >= BATCH_EVENTS || b->data.len >= BATCH_BYTES;
    if (full || (b->n & 15) == 0) { /* the clock is read every 16 events */
      int64_t t = etw_mono_ns();
      if (full || t - last_pub >= FLUSH_NS) {
        if (b->n) {
          etw_hub_publish(hub, b);
          b = NULL;
        }
        last_pub = t;
      }
    }
    if (s->args.spec->max_events && atomic_load(&s->events) >= s->args.spec->max_events) {
      limited = 1; /* the spec's max_events: nothing more is read, this pass ends here */
      break;
    }
  }
  atomic_store(&s->proc_dropped, etw_decoder_proc_dropped(s->dec));
  if (b) {
    if (b->n) etw_hub_publish(hub, b);
    else etw_batch_unref(b);
  }
  if (rc >= 0 && !limited && !atomic_load(&s->stop)) { /* the whole file was read */
    struct etw_stk_counts kc;
    etw_stk_counts(s->stk, &kc);
    atomic_store(&s->walks_unattached, kc.unattached);
  }
  etw_stk_free(s->stk); /* its share of the stack index budget back at once, not when the client leaves */
  s->stk = NULL;
  /* ended() reports a session that ends by itself (end of file, damage), not a stop() */
  if (s->args.ended && !atomic_load(&s->stop)) {
    if (rc < 0) s->args.ended(s->args.ctx, st.code ? st.code : ETW_E_CORRUPT, st.msg);
    else s->args.ended(s->args.ctx, ETW_E_OK, limited ? ETW_ENDED_MAX_EVENTS : "end of file");
  }
  etw_hub_end(hub);
  return NULL;
}

static enum etw_err etl_open(const struct etw_backend_args *a, void **state, struct etw_status *st) {
  const struct etw_session_spec *spec = a->spec;
  if (!spec || !spec->n_files)
    return etw_fail(st, ETW_E_INVALID, "/files", "the etl backend needs at least one file");
  if (spec->n_files > ETW_ETL_MAX_FILES)
    return etw_fail(st, ETW_E_LIMIT, "/files", "at most %d files", ETW_ETL_MAX_FILES);
  struct etl_sess *s = calloc(1, sizeof *s);
  if (!s) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  s->args = *a;
  pthread_mutex_init(&s->mu, NULL);
  s->rd = etw_etl_reader_new();
  /* the files are the server's data-dir files (the API resolves names there and refuses links
   * by lstat): opened without following a link swapped in since that check */
  if (s->rd) etw_etl_reader_set_nofollow(s->rd, 1);
  char *md = etw_etl_manifest_dir();
  s->dec = etw_decoder_new(md);
  free(md);
  enum etw_err e = ETW_E_OK;
  if (!s->rd || !s->dec) e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  for (uint32_t i = 0; !e && i < spec->n_files; i++) {
    e = etw_etl_reader_add_file(s->rd, spec->files[i], st);
    if (e && st) snprintf(st->field, sizeof st->field, "/files/%u", i);
  }
  if (!e && spec->n_providers) {
    s->want = calloc(spec->n_providers, sizeof *s->want);
    if (!s->want) e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    for (uint32_t i = 0; !e && i < spec->n_providers; i++)
      if (spec->providers[i].name) s->want[s->n_want++] = &spec->providers[i];
  }
  if (e) {
    etw_etl_reader_free(s->rd);
    etw_decoder_free(s->dec);
    free(s->want);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return e;
  }
  *state = s;
  return ETW_E_OK;
}

static enum etw_err etl_enable(void *sv, const struct etw_provider_spec *p, struct etw_status *st) {
  (void)sv;
  (void)p;
  return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "a replayed file cannot enable providers; filter with the session's providers or a subscription filter");
}

static enum etw_err etl_disable(void *sv, const char *provider, struct etw_status *st) {
  (void)sv;
  (void)provider;
  return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "a replayed file cannot disable providers");
}

static enum etw_err etl_start(void *sv, struct etw_status *st) {
  struct etl_sess *s = sv;
  pthread_mutex_lock(&s->mu);
  if (s->started) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_STATE, NULL, "already started");
  }
  if (!s->stk && !(s->stk = etw_stk_new(1))) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  if (pthread_create(&s->th, NULL, reader_main, s)) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_INTERNAL, NULL, "cannot start the reader thread");
  }
  s->started = 1;
  pthread_mutex_unlock(&s->mu);
  return ETW_E_OK;
}

static void etl_stop(void *sv) {
  struct etl_sess *s = sv;
  atomic_store(&s->stop, 1);
  etw_hub_cancel(s->args.hub); /* a publish waiting for a slow client's room returns now */
  pthread_mutex_lock(&s->mu);
  if (s->started && !s->joined) {
    pthread_join(s->th, NULL);
    s->joined = 1;
  }
  pthread_mutex_unlock(&s->mu);
}

static void etl_destroy(void *sv) {
  struct etl_sess *s = sv;
  if (!s) return;
  etl_stop(s);
  etw_etl_reader_free(s->rd);
  etw_decoder_free(s->dec);
  etw_stk_free(s->stk);
  free(s->want);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static void etl_stats(void *sv, struct etw_backend_stats *out) {
  struct etl_sess *s = sv;
  memset(out, 0, sizeof *out);
  out->read_events = atomic_load(&s->events);
  out->read_bytes = atomic_load(&s->bytes);
  out->decode_errors = atomic_load(&s->errors);
  out->unparsed = atomic_load(&s->unparsed);
  out->stack_walks = atomic_load(&s->walks);
  out->stack_walks_unattached = atomic_load(&s->walks_unattached);
  out->proc_dropped = atomic_load(&s->proc_dropped);
  out->stack_walks_dropped = atomic_load(&s->walks_dropped);
  out->stack_images_dropped = atomic_load(&s->images_dropped);
}

/* ---- provider catalog: manifests + the files in the data directory */
#define CAT_MAX_FILES 256
#define CAT_MAX_RECORDS 500000u    /* records scanned per file */
#define CAT_MAX_TOTAL 4000000u     /* records scanned per refresh (bounds the API call) */

struct catfile {
  char *name;
  long long size, mtime;
};

static pthread_mutex_t cat_mu = PTHREAD_MUTEX_INITIALIZER;
static struct etw_decoder *cat_dec;
static struct catfile cat_files[CAT_MAX_FILES];
static int cat_nfiles;
static char *cat_mdir;

static int cat_known(const char *name, long long size, long long mtime) {
  for (int i = 0; i < cat_nfiles; i++)
    if (!strcmp(cat_files[i].name, name) && cat_files[i].size == size && cat_files[i].mtime == mtime) return 1;
  return 0;
}

/* Bring the catalog up to date; caller holds cat_mu. */
static void cat_refresh(void) {
  char *md = etw_etl_manifest_dir();
  if (!cat_dec || (md && (!cat_mdir || strcmp(md, cat_mdir))) || (!md && cat_mdir)) {
    etw_decoder_free(cat_dec);
    for (int i = 0; i < cat_nfiles; i++) free(cat_files[i].name);
    cat_nfiles = 0;
    free(cat_mdir);
    cat_mdir = md;
    md = NULL;
    cat_dec = etw_decoder_new(NULL);
    if (cat_dec && cat_mdir) dec_manifest_scan_dir(cat_dec, cat_mdir);
    if (cat_dec) cat_dec->manifests_scanned = 1;
  }
  free(md);
  if (!cat_dec) return;
  char *dd = data_dir_copy();
  DIR *dp = dd ? opendir(dd) : NULL;
  struct dirent *de;
  uint32_t budget = CAT_MAX_TOTAL;
  while (dp && budget && (de = readdir(dp))) {
    size_t l = strlen(de->d_name);
    if (l < 5 || strcasecmp(de->d_name + l - 4, ".etl")) continue;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dd, de->d_name) >= sizeof path) continue;
    struct stat sb;
    if (stat(path, &sb) || !S_ISREG(sb.st_mode)) continue;
    if (cat_known(de->d_name, (long long)sb.st_size, (long long)sb.st_mtime)) continue;
    if (cat_nfiles >= CAT_MAX_FILES) break;
    struct etw_etl_reader *r = etw_etl_reader_new();
    if (!r) break;
    etw_etl_reader_set_nofollow(r, 1); /* a link in the data directory is not read */
    struct etw_status st;
    etw_status_clear(&st);
    if (!etw_etl_reader_add_file(r, path, &st)) {
      struct etw_rec rec;
      const char *pn, *en;
      for (uint32_t n = 0; n < CAT_MAX_RECORDS && budget && etw_etl_reader_next(r, &rec, &st) == 1; n++, budget--)
        etw_decoder_names(cat_dec, &rec, &pn, &en);
    }
    etw_etl_reader_free(r);
    cat_files[cat_nfiles].name = strdup(de->d_name);
    cat_files[cat_nfiles].size = (long long)sb.st_size;
    cat_files[cat_nfiles].mtime = (long long)sb.st_mtime;
    if (cat_files[cat_nfiles].name) cat_nfiles++;
  }
  if (dp) closedir(dp);
  free(dd);
}

static enum etw_err etl_list_providers(const char *q, struct etw_jw *w, struct etw_status *st) {
  (void)st;
  pthread_mutex_lock(&cat_mu);
  cat_refresh();
  if (cat_dec) etw_decoder_providers_json(cat_dec, q, w);
  else etw_jw_lit(w, "[]");
  pthread_mutex_unlock(&cat_mu);
  return ETW_E_OK;
}

static void write_event_schema(struct etw_jw *w, const struct dec_event *e) {
  etw_jw_lit(w, "{\"id\":");
  etw_jw_u64(w, e->id);
  etw_jw_lit(w, ",\"version\":");
  etw_jw_u64(w, e->version);
  etw_jw_lit(w, ",\"name\":");
  etw_jw_cs(w, e->name);
  etw_jw_lit(w, ",\"level\":");
  etw_jw_u64(w, e->level);
  etw_jw_lit(w, ",\"task\":");
  etw_jw_u64(w, e->task);
  etw_jw_lit(w, ",\"opcode\":");
  etw_jw_u64(w, e->opcode);
  etw_jw_lit(w, ",\"fields\":[");
  for (uint32_t i = 0; i < e->nf; i++) {
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, e->f[i].name);
    etw_jw_lit(w, ",\"inType\":");
    etw_jw_u64(w, e->f[i].in);
    etw_jw_ch(w, '}');
  }
  etw_jw_lit(w, "]}");
}

static enum etw_err etl_describe_provider(const char *name, struct etw_jw *w, struct etw_status *st) {
  pthread_mutex_lock(&cat_mu);
  cat_refresh();
  struct dec_provider *p = NULL;
  unsigned char g[16];
  int by_guid = name && !etw_parse_guid(name, g);
  for (uint32_t i = 0; cat_dec && i < cat_dec->prov_cap && !p; i++) {
    struct dec_provider *x = cat_dec->prov[i];
    if (!x) continue;
    if (by_guid ? !memcmp(x->guid, g, 16) : (x->name && name && !strcasecmp(x->name, name))) p = x;
  }
  if (!p) {
    pthread_mutex_unlock(&cat_mu);
    return etw_fail(st, ETW_E_NOT_FOUND, NULL, "no provider '%s' in the data or manifests directory", name ? name : "");
  }
  etw_jw_lit(w, "{\"name\":");
  etw_jw_cs(w, p->name ? p->name : "");
  etw_jw_lit(w, ",\"guid\":");
  etw_jw_guid(w, p->guid);
  etw_jw_lit(w, ",\"source\":");
  etw_jw_cs(w, p->source ? p->source : "");
  etw_jw_lit(w, ",\"events\":[");
  int first = 1;
  for (uint32_t i = 0; i < p->ev_cap; i++) {
    if (!p->ev[i]) continue;
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    write_event_schema(w, p->ev[i]);
  }
  for (uint32_t i = 0; i < p->n_tl; i++) { /* TraceLogging: names seen; fields travel per event */
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, p->tl_names[i]);
    etw_jw_lit(w, ",\"selfDescribing\":true}");
  }
  etw_jw_lit(w, "]}");
  pthread_mutex_unlock(&cat_mu);
  return ETW_E_OK;
}

const struct etw_backend etw_backend_etl = {
    .name = "etl",
    .caps = ETW_CAP_REPLAY | ETW_CAP_LIST_PROVIDERS | ETW_CAP_LEVEL_KEYWORDS | ETW_CAP_EVENT_IDS |
            ETW_CAP_EVENT_NAMES | ETW_CAP_ORDER_TIME | ETW_CAP_SINKS_BUILT, /* a file's events always are in time order */
    .init = NULL,
    .open = etl_open,
    .enable = etl_enable,
    .disable = etl_disable,
    .start = etl_start,
    .stop = etl_stop,
    .destroy = etl_destroy,
    .stats = etl_stats,
    .stats_json = NULL,
    .list_providers = etl_list_providers,
    .describe_provider = etl_describe_provider,
    .cleanup = NULL,
};
