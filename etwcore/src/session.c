/* session.c — the session manager (see session.h): lifecycle, table, stats JSON, metrics. */
#include "etwcore/session.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "etwcore/caps.h"
#include "etwcore/nats_src.h"
#include "etwcore/sink.h"
#include "etwcore/spec.h"
#include "etwcore/trigger.h"
#include "etwcore/util.h"

/* S_ARMED: waiting for the start trigger (spec start_when): the backend session is open but not
 * started, so nothing is read, published or recorded until the trigger fires */
enum st { S_RUNNING, S_STOPPED, S_ENDED, S_FAILED, S_PENDING, S_ARMED };
static const char *const state_names[] = {"running", "stopped", "ended", "failed", "pending", "armed"};

struct etw_session {
  atomic_int refs;
  /* 1 while create() sets it up (s->mu held all along, the backend's open writing the kernel's
   * files: seconds when tracefs is busy): the list and /metrics leave it out rather than wait */
  atomic_int creating;
  struct etw_core *core;
  uint64_t id;
  pthread_mutex_t mu;  /* guards spec, bstate; held across backend calls */
  pthread_mutex_t smu; /* guards state, end_msg, stopped_ns, stop_reason, be_stopped, lim_*
                        * (taken by the reader's ended()) */
  pthread_cond_t cv;   /* with smu: the state changed, or lim_quit was set */
  enum st state;
  const char *stop_reason; /* static text, set when the state leaves running */
  int be_stopped;          /* the backend's stop() returned: the recording is complete */
  /* stop limits (spec duration_s, max_events, max_file_mb): the limit thread, started with the
   * backend, stops the session at the first one reached; joined by delete and etw_core_free */
  pthread_t lim_th;
  int lim_started, lim_quit;
  int64_t started_mono; /* CLOCK_MONOTONIC ns when the session began consuming; 0 before */
  /* start_when / stop_when (trigger.h): made before the session enters the table, armed when
   * the session is armed (start) or running (stop), freed (joined) by delete / etw_core_free
   * without s->mu (their fired() takes it) */
  struct etw_trigger *t_start, *t_stop;
  char end_msg[256];
  struct etw_session_spec spec;
  const struct etw_backend *be;
  void *bstate;
  struct etw_hub *hub;
  char os_name[64];
  char *record_path;
  char *record_dir;
  uint32_t n_snapshots;    /* mode flight: snapshots written, and the last one's name (s->mu) */
  char last_snapshot[64];
  int64_t created_ns, stopped_ns;
  struct etw_backend_stats last; /* kept after destroy */
  /* replays (spec.n_files): one pass over the files per subscriber, each with its own backend
   * state (reader thread) and lossless hub, so every subscriber gets the whole file from seq 1
   * whenever it connects. The list and the past totals: s->mu. */
  struct replay_run *runs;
  uint32_t n_runs;
  struct etw_backend_stats runs_bs; /* summed over the runs that are gone */
  struct etw_hub_stats runs_hs;     /* (their provider counts went into s->hub's) */
  /* backend nats: the same list holds the clients' own passes over the stream (?from_stream_seq,
   * ?from_time), each with its own consumer; they re-read the stream, so their counts stay out
   * of the session's (stats.stream_readers instead) */
  uint64_t runs_opened;
  struct etw_sinks *sinks; /* forwarding to NATS (sink.h), subscribed to s->hub; stopped by
                            * destroy_locked */
  uint64_t sink_lost;      /* their loss, kept after they stopped */
  /* a replay's passes still reading (clients' and the sinks' pass over s->hub) and the outcome
   * of those that ended by themselves (the first failure wins): s->smu. The session ends when
   * the last reading pass is over and at least one of them read to its end. */
  uint32_t passes_live;
  int pass_done, main_live; /* main_live: the sinks' pass over s->hub is reading */
  enum etw_err pass_code;
  char pass_msg[256];
};

struct replay_run {
  struct replay_run *next;
  struct etw_session *s;
  int live, ended; /* counted in s->passes_live / it ended by itself (s->smu) */
  struct etw_hub *hub;
  void *bstate;
  struct etw_sub *sub; /* owned by the stream that subscribed; closed by etw_session_unsubscribe */
  /* backend nats: this pass's copies of the session's spec and source, with the client's start
   * and an ephemeral consumer (they outlive its backend state: both go in run_free); a replay
   * client's ?stackwalk_events: the spec's shallow copy with its own stackwalk_events */
  struct etw_session_spec spec;
  struct etw_nats_src src;
};

#define MAX_BACKENDS 4

struct etw_core {
  pthread_mutex_t mu;
  struct etw_core_config cfg;
  struct etw_session **tab;
  uint32_t n, cap;
  uint64_t next_id;         /* the table's sessions: the ids users see */
  uint64_t next_private_id; /* private sessions (trigger watchers, file decodes): their own
                             * count, so they take no visible id; OS names etwd_p<id>_… */
  const struct etw_backend *be[MAX_BACKENDS];
  char be_err[MAX_BACKENDS][256];
  uint32_t nbe;
  int64_t started_ns;
};

/* wait on s->cv (s->smu held) until the monotonic time @until_ns at the latest (winpthreads'
 * condition variables have no clock attribute: there the deadline is turned into real time) */
static void cv_wait_until(struct etw_session *s, int64_t until_ns) {
#ifdef _WIN32
  until_ns += etw_real_ns() - etw_mono_ns();
#endif
  struct timespec ts = {(time_t)(until_ns / 1000000000LL), (long)(until_ns % 1000000000LL)};
  pthread_cond_timedwait(&s->cv, &s->smu, &ts);
}

struct etw_core *etw_core_new(const struct etw_core_config *cfg, struct etw_status *st) {
  struct etw_core *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->cfg = *cfg;
  if (!c->cfg.max_sessions) c->cfg.max_sessions = 16;
  if (!c->cfg.sub_queue_events) c->cfg.sub_queue_events = 65536;
  if (!c->cfg.max_subscribers) c->cfg.max_subscribers = 128;
  pthread_mutex_init(&c->mu, NULL);
  c->next_id = 1;
  c->next_private_id = 1;
  c->started_ns = etw_real_ns();
  const struct etw_backend *const *all = etw_backends();
  for (int i = 0; all[i] && c->nbe < MAX_BACKENDS; i++) {
    const struct etw_backend *b = all[i];
    c->be[c->nbe] = b;
    if (b->init) {
      struct etw_status bst;
      etw_status_clear(&bst);
      if (b->init(&bst) != ETW_E_OK) {
        snprintf(c->be_err[c->nbe], sizeof c->be_err[0], "%.250s", bst.msg[0] ? bst.msg : "init failed");
        if (st) etw_fail(st, bst.code ? bst.code : ETW_E_INTERNAL, NULL, "backend %s: %s", b->name,
                         c->be_err[c->nbe]);
      }
    }
    c->nbe++;
  }
  return c;
}

const char *etw_core_backend_error(struct etw_core *c, const struct etw_backend *b) {
  for (uint32_t i = 0; i < c->nbe; i++)
    if (c->be[i] == b) return c->be_err[i][0] ? c->be_err[i] : NULL;
  return "not compiled in";
}

static void run_free(struct etw_session *s, struct replay_run *r);
static void totals_locked(struct etw_session *s, struct etw_backend_stats *bs, struct etw_hub_stats *hs);

static void session_free(struct etw_session *s) {
  etw_trigger_free(s->t_start); /* (a failed create; delete has freed them already) */
  etw_trigger_free(s->t_stop);
  while (s->runs) { /* defensive: the streams unsubscribe before they let go of the session */
    struct replay_run *r = s->runs;
    s->runs = r->next;
    etw_sub_close(r->sub);
    run_free(s, r);
  }
  etw_hub_free(s->hub);
  etw_spec_free(&s->spec);
  free(s->record_path);
  free(s->record_dir);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->smu);
  pthread_cond_destroy(&s->cv);
  free(s);
  etw_mem_trim(); /* a busy session's batches went back to malloc: give them to the OS */
}

void etw_session_put(struct etw_session *s) {
  if (s && atomic_fetch_sub(&s->refs, 1) == 1) session_free(s);
}

uint64_t etw_session_id(const struct etw_session *s) { return s->id; }

const struct etw_backend *etw_session_backend(const struct etw_session *s) { return s->be; }

/* stop consuming: caller holds s->mu. @why: the stop_reason if this stops a running session. */
static void stop_locked(struct etw_session *s, enum st final, const char *why) {
  etw_trigger_disarm(s->t_start); /* a stopped session's watchers go within 100 ms */
  etw_trigger_disarm(s->t_stop);
  if (s->bstate && s->be->stop) s->be->stop(s->bstate);
  /* a replay's passes end too (each reader ends its hub: its subscriber drains, then ends) */
  for (struct replay_run *r = s->runs; r; r = r->next)
    if (s->be->stop) s->be->stop(r->bstate);
  if (s->bstate && s->be->stats) s->be->stats(s->bstate, &s->last);
  etw_hub_end(s->hub);
  pthread_mutex_lock(&s->smu);
  if (s->state == S_RUNNING || s->state == S_PENDING || s->state == S_ARMED) {
    s->state = final;
    s->stopped_ns = etw_real_ns();
    s->stop_reason = why;
  }
  s->be_stopped = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->smu);
}

/* ---- stop limits */

#define LIMIT_TICK_NS 100000000LL /* events and file size are looked at every 100 ms */

/* events read and bytes recorded so far. Limit thread; s->bstate stays valid while it runs
 * (delete and etw_core_free join it before destroying the backend session). */
static void limit_progress(struct etw_session *s, uint64_t *ev, uint64_t *bytes) {
  *ev = *bytes = 0;
  if (s->be->progress) {
    s->be->progress(s->bstate, ev, bytes);
    return;
  }
  struct etw_backend_stats bs;
  memset(&bs, 0, sizeof bs);
  if (s->be->stats) s->be->stats(s->bstate, &bs);
  *ev = bs.read_events;
  struct stat sb;
  if (s->record_path && stat(s->record_path, &sb) == 0) *bytes = (uint64_t)sb.st_size;
}

/* The limit thread: sleeps until the duration ends (checking events and file size every tick
 * when those limits are set), then stops the session with the reason. Ends when the session
 * stops for any reason or lim_quit is set. */
static void *limit_main(void *arg) {
  struct etw_session *s = arg;
  const char *why = NULL;
  int64_t dur = (int64_t)(s->spec.duration_s * 1e9); /* the limits never change after create */
  uint64_t max_ev = s->spec.max_events, max_b = (uint64_t)s->spec.max_file_mb << 20;
  pthread_mutex_lock(&s->smu);
  int64_t end = dur ? s->started_mono + dur : INT64_MAX;
  while (!s->lim_quit && s->state == S_RUNNING) {
    int64_t now = etw_mono_ns(), wake = end;
    if (now >= end) {
      why = "duration";
      break;
    }
    if (max_ev || max_b) {
      uint64_t ev, b;
      pthread_mutex_unlock(&s->smu);
      limit_progress(s, &ev, &b);
      pthread_mutex_lock(&s->smu);
      if (max_ev && ev >= max_ev) why = "max_events";
      else if (max_b && b >= max_b) why = "max_file_mb";
      if (why) break;
      if (now + LIMIT_TICK_NS < wake) wake = now + LIMIT_TICK_NS;
    }
    if (!s->lim_quit && s->state == S_RUNNING) cv_wait_until(s, wake);
  }
  int quit = s->lim_quit;
  pthread_mutex_unlock(&s->smu);
  if (why && !quit) {
    pthread_mutex_lock(&s->mu);
    stop_locked(s, S_STOPPED, why);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

/* The session began consuming (s->mu held): note when, and start the limit thread if it has
 * limits. 0, or -1 (no thread). */
static int limits_start(struct etw_session *s) {
  int want = s->spec.duration_s > 0 || s->spec.max_events || s->spec.max_file_mb, rc = 0;
  pthread_mutex_lock(&s->smu); /* a concurrent delete may have run limits_join already */
  s->started_mono = etw_mono_ns();
  if (want && !s->lim_quit) {
    rc = pthread_create(&s->lim_th, NULL, limit_main, s) ? -1 : 0;
    s->lim_started = rc == 0;
  }
  pthread_mutex_unlock(&s->smu);
  return rc;
}

/* Before destroying the session: end the trigger threads and watchers (s->mu NOT held: their
 * fired() takes it). Whoever took the session out of the table. */
static void triggers_free(struct etw_session *s) {
  pthread_mutex_lock(&s->mu); /* etw_session_json reads them under s->mu */
  struct etw_trigger *a = s->t_start, *b = s->t_stop;
  s->t_start = s->t_stop = NULL;
  pthread_mutex_unlock(&s->mu);
  etw_trigger_free(a);
  etw_trigger_free(b);
}

/* start consuming (s->mu held): a flight session only fills the OS buffers */
static enum etw_err be_start(struct etw_session *s, struct etw_status *st) {
  if (s->spec.n_files) { /* a replay's sinks' pass: one of its passes (pass_over) */
    pthread_mutex_lock(&s->smu);
    if (!s->main_live) s->passes_live++;
    s->main_live = 1;
    pthread_mutex_unlock(&s->smu);
  }
  if (s->spec.mode & ETW_MODE_FLIGHT) return s->be->ext->flight_start(s->bstate, st);
  return s->be->start(s->bstate, st);
}

static enum etw_err snapshot_locked(struct etw_session *s, char *name, size_t n, uint64_t *bytes,
                                    struct etw_status *st);

/* The start trigger fired (its thread): an armed session starts consuming and arms its stop
 * trigger; a session stopped meanwhile stays stopped. */
static void trig_start_fired(void *ctx) {
  struct etw_session *s = ctx;
  struct etw_status st;
  etw_status_clear(&st);
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&s->smu);
  int armed = s->state == S_ARMED && s->bstate;
  if (armed) s->state = S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  if (armed) {
    enum etw_err e = be_start(s, &st);
    if (!e && limits_start(s)) e = etw_fail(&st, ETW_E_NOMEM, NULL, "cannot start the limit thread");
    if (e) {
      pthread_mutex_lock(&s->smu);
      snprintf(s->end_msg, sizeof s->end_msg, "start trigger: %.200s", st.msg);
      pthread_mutex_unlock(&s->smu);
      stop_locked(s, S_FAILED, "failed");
    } else {
      etw_trigger_arm(s->t_stop);
    }
  }
  pthread_mutex_unlock(&s->mu);
}

/* The stop trigger fired (its thread): a running session stops with stop_reason "trigger". */
static void trig_stop_fired(void *ctx) {
  struct etw_session *s = ctx;
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&s->smu);
  int running = s->state == S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  if (running && (s->spec.mode & ETW_MODE_FLIGHT)) { /* a flight recorder keeps what it holds */
    char name[256];
    uint64_t bytes = 0;
    struct etw_status st;
    etw_status_clear(&st);
    if (snapshot_locked(s, name, sizeof name, &bytes, &st)) {
      pthread_mutex_lock(&s->smu);
      snprintf(s->end_msg, sizeof s->end_msg, "the trigger's snapshot failed: %.200s", st.msg);
      pthread_mutex_unlock(&s->smu);
    }
  }
  if (running) stop_locked(s, S_STOPPED, "trigger");
  pthread_mutex_unlock(&s->mu);
}

/* Before destroying the session: end the limit thread (s->mu NOT held: it may be stopping the
 * session). Called once, by whoever took the session out of the table. */
static void limits_join(struct etw_session *s) {
  pthread_mutex_lock(&s->smu);
  s->lim_quit = 1;
  pthread_cond_broadcast(&s->cv);
  int started = s->lim_started;
  s->lim_started = 0;
  pthread_mutex_unlock(&s->smu);
  if (started) pthread_join(s->lim_th, NULL);
}

static void destroy_locked(struct etw_session *s) {
  if (s->bstate) {
    if (s->be->stats) s->be->stats(s->bstate, &s->last);
    s->be->destroy(s->bstate);
    s->bstate = NULL;
  }
  etw_hub_end(s->hub);
  if (s->sinks) { /* they publish what they hold for up to 2 s, then count the rest as lost */
    s->sink_lost = etw_sinks_stop(s->sinks);
    s->sinks = NULL;
  }
}

/* The end of session @s, which its caller took out of the table (or never put in it): its limit
 * thread and triggers, a stop with reason @why, its backend and sinks; with @drop_empty_dir its
 * recording directory goes if the backend never wrote into it (a recording stays: one under
 * /api/v1/recordings now); then the caller's reference goes. */
static void session_end(struct etw_session *s, const char *why, int drop_empty_dir) {
  limits_join(s);
  triggers_free(s);
  pthread_mutex_lock(&s->mu);
  stop_locked(s, S_STOPPED, why);
  destroy_locked(s);
  if (drop_empty_dir && s->record_dir) rmdir(s->record_dir);
  pthread_mutex_unlock(&s->mu);
  etw_session_put(s);
}

void etw_core_free(struct etw_core *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  struct etw_session **tab = c->tab;
  uint32_t n = c->n;
  c->tab = NULL;
  c->n = c->cap = 0;
  pthread_mutex_unlock(&c->mu);
  for (uint32_t i = 0; i < n; i++) session_end(tab[i], "shutdown", 0);
  free(tab);
  for (uint32_t i = 0; i < c->nbe; i++)
    if (c->be[i]->cleanup) c->be[i]->cleanup();
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* The session ended by itself (a reader's end of file, damage, or a replay pass's max_events):
 * its state says so. Called from a backend's reader thread: never takes s->mu (stop() joins this
 * thread while holding it), only the small state lock. */
static void mark_ended(struct etw_session *s, enum etw_err code, const char *msg) {
  pthread_mutex_lock(&s->smu);
  if (s->state == S_RUNNING) {
    int limited = code == ETW_E_OK && msg && !strcmp(msg, ETW_ENDED_MAX_EVENTS);
    snprintf(s->end_msg, sizeof s->end_msg, "%s", msg ? msg : "");
    s->state = limited ? S_STOPPED : code == ETW_E_OK ? S_ENDED : S_FAILED;
    s->stopped_ns = etw_real_ns();
    s->stop_reason = limited ? "max_events" : code == ETW_E_OK ? "ended" : "failed";
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->smu);
}

/* A replay's pass is over (@ended: by itself, with @code/@msg; else stopped, e.g. its client
 * left): once no pass is reading any more and one of them read to its end, the session's state
 * says so (mark_ended) and s->hub ends — unless the session has sinks, whose own pass publishes
 * into s->hub and ends it itself (so a client's pass cannot cut the sinks' tail off). Called from
 * a reader thread (ended) or under s->mu (run_free): takes only s->smu. */
static void pass_over(struct etw_session *s, int *live, int ended, enum etw_err code, const char *msg) {
  pthread_mutex_lock(&s->smu);
  if (*live) {
    *live = 0;
    s->passes_live--;
  }
  if (ended && (!s->pass_done || (code != ETW_E_OK && s->pass_code == ETW_E_OK))) {
    s->pass_code = code;
    snprintf(s->pass_msg, sizeof s->pass_msg, "%s", msg ? msg : "");
  }
  s->pass_done |= ended;
  int last = s->passes_live == 0 && s->pass_done;
  enum etw_err c = s->pass_code;
  char m[sizeof s->pass_msg];
  memcpy(m, s->pass_msg, sizeof m);
  pthread_mutex_unlock(&s->smu);
  if (!last) return;
  mark_ended(s, c, m);
  if (!s->spec.n_sinks) etw_hub_end(s->hub);
}

/* ended() of a replay client's own pass */
static void on_pass_ended(void *ctx, enum etw_err code, const char *msg) {
  struct replay_run *r = ctx;
  pass_over(r->s, &r->live, 1, code, msg);
}

/* ended() of s->hub's reader: a live session's, or a replay's sinks' pass (one of its passes) */
static void on_ended(void *ctx, enum etw_err code, const char *msg) {
  struct etw_session *s = ctx;
  if (s->spec.n_files) {
    pass_over(s, &s->main_live, 1, code, msg);
    etw_hub_end(s->hub); /* (pass_over leaves it to the sinks' pass: this one) */
    return;
  }
  mark_ended(s, code, msg);
  etw_hub_end(s->hub);
}


/* A recording's directory, <state_dir>/recordings/<UTC start>-s<id>[-N], claimed with mkdir so
 * that no two sessions of any run share one: ids restart at 1 after a restart, and recordings
 * left by an earlier run (SIGTERM, kill -9) must never be overwritten. 0, or -1 with errno. */
static int record_dir_claim(struct etw_core *c, uint64_t id, char *dir, size_t n) {
  char base[4096], stamp[32];
  snprintf(base, sizeof base, "%s/recordings", c->cfg.state_dir);
  if (etw_mkdirs(base)) return -1;
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  for (int k = 1; k < 1000; k++) {
    if (k == 1)
      snprintf(dir, n, "%s/%s-s%llu", base, stamp, (unsigned long long)id);
    else
      snprintf(dir, n, "%s/%s-s%llu-%d", base, stamp, (unsigned long long)id, k);
    if (mkdir(dir, 0700) == 0) return 0;
    if (errno != EEXIST) return -1;
  }
  errno = EEXIST;
  return -1;
}

static struct etw_session **snapshot(struct etw_core *c, uint32_t *n);

/* how many sessions in the table have ended (stopped, ended, failed): they keep a slot of
 * max_sessions until they are deleted, which the limit's message says (c->mu not held) */
static uint32_t count_ended(struct etw_core *c) {
  uint32_t n, k = 0;
  struct etw_session **v = snapshot(c, &n);
  for (uint32_t i = 0; v && i < n; i++) {
    pthread_mutex_lock(&v[i]->smu);
    k += v[i]->state == S_STOPPED || v[i]->state == S_ENDED || v[i]->state == S_FAILED;
    pthread_mutex_unlock(&v[i]->smu);
    etw_session_put(v[i]);
  }
  free(v);
  return k;
}

/* @private: a file decode's session — not in the table (it takes no --max-sessions slot and is
 * invisible to the API), no replay window (nobody else can subscribe to it). */
static enum etw_err create(struct etw_core *c, const cJSON *body, const char *const *files,
                           int private, struct etw_session **out, struct etw_status *st) {
  *out = NULL;
  struct etw_session *s = calloc(1, sizeof *s);
  if (!s) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  atomic_init(&s->refs, 1);
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->smu, NULL);
  etw_cond_init_mono(&s->cv);
  s->core = c;
  enum etw_err e = etw_spec_parse(body, &s->spec, st);
  if (e) goto fail;
  if (files) { /* the API layer resolved the names inside the data directory */
    for (uint32_t i = 0; i < s->spec.n_files && files[i]; i++) {
      free(s->spec.files[i]);
      s->spec.files[i] = strdup(files[i]);
      if (!s->spec.files[i]) {
        e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
        goto fail;
      }
    }
  }
  s->be = etw_backend_find(s->spec.backend);
  const char *berr = s->be ? etw_core_backend_error(c, s->be) : "not compiled into this build";
  if (berr) {
    e = etw_fail(st, ETW_E_UNSUPPORTED, "/backend", "backend \"%s\" is unavailable: %s",
                 s->spec.backend, berr);
    goto fail;
  }
  if ((e = etw_caps_check_spec(s->be, &s->spec, st))) goto fail; /* 400 for what it cannot honour */
  if ((s->spec.mode & ETW_MODE_FILE) && !(s->be->caps & ETW_CAP_FILE)) {
    e = etw_fail(st, ETW_E_INVALID, "/mode", "backend \"%s\" cannot record to a file", s->be->name);
    goto fail;
  }
  if ((s->spec.mode & ETW_MODE_FLIGHT) && !(s->be->caps & ETW_CAP_FLIGHT)) {
    e = etw_fail(st, ETW_E_INVALID, "/mode", "backend \"%s\" has no flight mode (see GET /api/v1/backends)",
                 s->be->name);
    goto fail;
  }
  if (s->spec.n_pids && !(s->be->caps & ETW_CAP_FILTER_PID)) {
    e = etw_fail(st, ETW_E_INVALID, "/pids", "backend \"%s\" does not filter by PID", s->be->name);
    goto fail;
  }
  if (s->spec.max_file_mb && !(s->spec.mode & ETW_MODE_FILE)) { /* every backend: no file, no size */
    e = etw_fail(st, ETW_E_INVALID, "/max_file_mb",
                 "/max_file_mb limits a recording: backend \"%s\" with mode \"realtime\" writes none "
                 "(use mode \"file\" or \"both\"%s)", s->be->name,
                 (s->be->caps & ETW_CAP_FILE) ? "" : ", which this backend cannot");
    goto fail;
  }
  if (s->spec.flight_s > 0 && !(s->spec.mode & ETW_MODE_FLIGHT)) {
    e = etw_fail(st, ETW_E_INVALID, "/flight_s", "/flight_s limits what a flight recorder's snapshot keeps: it "
                 "needs mode \"flight\"");
    goto fail;
  }
  /* the triggers' watchers, before the session is visible (their errors are this create's) */
  if (s->spec.start_when &&
      (e = etw_trigger_new(c, s->spec.backend, s->spec.start_when, "/start_when", trig_start_fired, s,
                           &s->t_start, st)))
    goto fail;
  if (s->spec.stop_when &&
      (e = etw_trigger_new(c, s->spec.backend, s->spec.stop_when, "/stop_when", trig_stop_fired, s,
                           &s->t_stop, st)))
    goto fail;
  struct etw_hub_limits hl = {private ? 0 : c->cfg.replay_bytes, c->cfg.sub_queue_events,
                              private ? 1 : c->cfg.max_subscribers,
                              s->spec.n_files > 0 /* a file is not a live source: lossless */};
  s->hub = etw_hub_new(&hl);
  if (!s->hub) {
    e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    goto fail;
  }
  if (s->spec.order_time && !s->spec.n_files) /* a file's reader merges by time already */
    etw_hub_set_order(s->hub, ETW_ORDER_WINDOW_MS, ETW_ORDER_MAX_EVENTS);
  pthread_mutex_lock(&c->mu);
  if (private) { /* an id for its OS name only; s->mu as the table path holds it below */
    s->id = c->next_private_id++;
    pthread_mutex_lock(&s->mu);
    pthread_mutex_unlock(&c->mu);
    goto setup;
  }
  if (c->n >= c->cfg.max_sessions) {
    pthread_mutex_unlock(&c->mu);
    uint32_t ended = count_ended(c);
    e = ended ? etw_fail(st, ETW_E_LIMIT, NULL,
                         "the server allows at most %u sessions; %u of them have ended and keep their slot "
                         "until they are deleted (DELETE /api/v1/sessions/{id}; their recordings stay)",
                         c->cfg.max_sessions, ended)
              : etw_fail(st, ETW_E_LIMIT, NULL, "the server allows at most %u sessions", c->cfg.max_sessions);
    goto fail;
  }
  if (s->spec.name)
    for (uint32_t i = 0; i < c->n; i++)
      if (c->tab[i]->spec.name && !strcmp(c->tab[i]->spec.name, s->spec.name)) {
        pthread_mutex_unlock(&c->mu);
        e = etw_fail(st, ETW_E_EXISTS, "/name", "a session named \"%s\" already exists", s->spec.name);
        goto fail;
      }
  s->id = c->next_id++;
  if (c->n == c->cap) {
    uint32_t nc = c->cap ? c->cap * 2 : 8;
    struct etw_session **nt = realloc(c->tab, nc * sizeof *nt);
    if (!nt) {
      pthread_mutex_unlock(&c->mu);
      e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
      goto fail;
    }
    c->tab = nt;
    c->cap = nc;
  }
  /* Reserve the slot now so concurrent creates respect max_sessions. s->mu is taken before the
   * session becomes visible, so a concurrent delete or stats read waits until it is set up
   * (lock order: c->mu, then s->mu). */
  pthread_mutex_lock(&s->mu);
  atomic_store(&s->creating, 1);
  c->tab[c->n++] = s;
  atomic_fetch_add(&s->refs, 1); /* the table's reference */
  pthread_mutex_unlock(&c->mu);
setup:

  if (private) /* etwd_p<id>_…: never the name of a visible session */
    etw_os_name_private(s->os_name, sizeof s->os_name, (unsigned long long)s->id);
  else
    etw_os_name_make(s->os_name, sizeof s->os_name, (unsigned long long)s->id);
  if ((s->spec.mode & ETW_MODE_FILE) && c->cfg.state_dir) {
    char dir[4096], path[4200];
    if (record_dir_claim(c, s->id, dir, sizeof dir)) {
      e = etw_fail(st, ETW_E_IO, NULL, "cannot create the recording directory: %s", strerror(errno));
      goto fail_remove;
    }
    snprintf(path, sizeof path, "%s/trace.%s", dir, !strcmp(s->be->name, "linux") ? "dat" : "etl");
    pthread_mutex_lock(&c->mu); /* etw_core_recording_owner reads it under c->mu */
    s->record_dir = strdup(dir);
    pthread_mutex_unlock(&c->mu);
    s->record_path = strdup(path);
    if (!s->record_dir || !s->record_path) {
      e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
      goto fail_remove;
    }
  }
  s->created_ns = etw_real_ns();
  struct etw_backend_args a = {&s->spec, s->hub, s->os_name, s->record_path, on_ended, s};
  e = s->be->open(&a, &s->bstate, st);
  if (e == ETW_E_OK && s->spec.n_sinks) { /* subscribed before the readers start */
    char sess[80], dir[4200];
    snprintf(sess, sizeof sess, "%s", s->spec.name ? s->spec.name : "");
    if (!sess[0]) snprintf(sess, sizeof sess, "%llu", (unsigned long long)s->id);
    snprintf(dir, sizeof dir, "%s/sinks/%s", c->cfg.state_dir ? c->cfg.state_dir : ".", s->os_name);
    struct etw_sink_ctx kc = {sess, s->created_ns, c->cfg.state_dir ? dir : NULL};
    e = etw_sinks_start(s->spec.sinks, s->spec.n_sinks, s->hub, &kc, &s->sinks, st);
  }
  if (e == ETW_E_OK) {
    /* a replay waits for its first subscriber so that nobody misses its beginning (each
     * subscriber then gets its own pass); with sinks, s->hub's pass (the sinks' subscription)
     * starts at once, so that the file's events reach them without a client */
    if (s->spec.n_files && !s->sinks) {
      s->state = S_PENDING;
    } else if (s->t_start) { /* started by trig_start_fired */
      s->state = S_ARMED;
      etw_trigger_arm(s->t_start);
    } else {
      s->state = S_RUNNING; /* no reader thread exists yet */
      e = be_start(s, st);
      if (!e && limits_start(s))
        e = etw_fail(st, ETW_E_NOMEM, NULL, "cannot start the thread of the stop limits");
      if (!e) etw_trigger_arm(s->t_stop);
    }
  }
  if (e) {
    destroy_locked(s);
    goto fail_remove;
  }
  atomic_store(&s->creating, 0);
  pthread_mutex_unlock(&s->mu);
  *out = s; /* the creation reference becomes the caller's */
  return ETW_E_OK;

fail_remove: /* s->mu is held */
  if (s->record_dir) {
    if (s->record_path) unlink(s->record_path);
    rmdir(s->record_dir);
  }
  pthread_mutex_unlock(&s->mu);
  if (private) goto fail;
  int found = 0;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < c->n; i++)
    if (c->tab[i] == s) {
      c->tab[i] = c->tab[--c->n];
      found = 1;
      break;
    }
  pthread_mutex_unlock(&c->mu);
  if (found) etw_session_put(s); /* the table's reference, unless a concurrent delete took it */
fail:
  etw_session_put(s);
  return e;
}

enum etw_err etw_session_create(struct etw_core *c, const cJSON *body, const char *const *files,
                                struct etw_session **out, struct etw_status *st) {
  return create(c, body, files, 0, out, st);
}

enum etw_err etw_session_create_private(struct etw_core *c, const cJSON *body,
                                        const char *const *files, struct etw_session **out,
                                        struct etw_status *st) {
  return create(c, body, files, 1, out, st);
}

void etw_session_discard(struct etw_session *s) {
  if (s) session_end(s, "deleted", 0);
}

struct etw_session *etw_session_get(struct etw_core *c, uint64_t id) {
  struct etw_session *r = NULL;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < c->n; i++)
    if (c->tab[i]->id == id) {
      r = c->tab[i];
      atomic_fetch_add(&r->refs, 1);
      break;
    }
  pthread_mutex_unlock(&c->mu);
  return r;
}

enum etw_err etw_session_stop(struct etw_session *s, struct etw_status *st) {
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&s->smu);
  int running = s->state == S_RUNNING || s->state == S_PENDING || s->state == S_ARMED;
  pthread_mutex_unlock(&s->smu);
  if (!running) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_STATE, NULL, "session %llu is not running", (unsigned long long)s->id);
  }
  stop_locked(s, S_STOPPED, "requested");
  pthread_mutex_unlock(&s->mu);
  return ETW_E_OK;
}

enum etw_err etw_session_marker(struct etw_session *s, const char *text, size_t len,
                                struct etw_status *st) {
  if (!(s->be->caps & ETW_CAP_MARKERS) || !s->be->ext || !s->be->ext->marker)
    return etw_fail(st, ETW_E_UNSUPPORTED, NULL,
                    "backend \"%s\" cannot put markers into a session (see GET /api/v1/backends)",
                    s->be->name);
  if (len > ETW_MARKER_MAX)
    return etw_fail(st, ETW_E_INVALID, "/text", "/text is longer than %d bytes", ETW_MARKER_MAX);
  if (memchr(text, 0, len)) return etw_fail(st, ETW_E_INVALID, "/text", "/text holds a NUL character");
  pthread_mutex_lock(&s->mu); /* the backend's state lives while s->mu is held */
  pthread_mutex_lock(&s->smu);
  int running = s->state == S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  enum etw_err e = running && s->bstate
                       ? s->be->ext->marker(s->bstate, text, st)
                       : etw_fail(st, ETW_E_STATE, NULL, "session %llu is not running",
                                  (unsigned long long)s->id);
  pthread_mutex_unlock(&s->mu);
  return e;
}

/* a flight session's buffers into a new recording (s->mu held); @name gets its name */
static enum etw_err snapshot_locked(struct etw_session *s, char *name, size_t n, uint64_t *bytes,
                                    struct etw_status *st) {
  char dir[4096], path[4200];
  if (record_dir_claim(s->core, s->id, dir, sizeof dir))
    return etw_fail(st, ETW_E_IO, NULL, "cannot create the recording directory: %s", strerror(errno));
  snprintf(path, sizeof path, "%s/trace.%s", dir, !strcmp(s->be->name, "linux") ? "dat" : "etl");
  enum etw_err e = s->be->ext->snapshot(s->bstate, path, bytes, st);
  struct stat sb;
  if (stat(path, &sb) == 0) *bytes = (uint64_t)sb.st_size; /* the file's size, as downloaded */
  else if (e) { /* it wrote nothing: no recording, nothing counted */
    rmdir(dir);
    name[0] = 0;
    return e;
  }
  const char *b = strrchr(dir, '/');
  snprintf(name, n, "%s", b ? b + 1 : dir);
  s->n_snapshots++;
  snprintf(s->last_snapshot, sizeof s->last_snapshot, "%s", name);
  return e; /* (a failed one keeps what it wrote, as a recording) */
}

enum etw_err etw_session_snapshot(struct etw_session *s, char *name, size_t n, uint64_t *bytes,
                                  struct etw_status *st) {
  if (!(s->spec.mode & ETW_MODE_FLIGHT))
    return etw_fail(st, ETW_E_STATE, NULL, "session %llu is not a flight recorder (mode \"flight\")",
                    (unsigned long long)s->id);
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&s->smu);
  int running = s->state == S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  enum etw_err e = running && s->bstate
                       ? snapshot_locked(s, name, n, bytes, st)
                       : etw_fail(st, ETW_E_STATE, NULL, "session %llu is not running", (unsigned long long)s->id);
  pthread_mutex_unlock(&s->mu);
  return e;
}

enum etw_err etw_session_delete(struct etw_core *c, uint64_t id, struct etw_status *st) {
  struct etw_session *s = NULL;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < c->n; i++)
    if (c->tab[i]->id == id) {
      s = c->tab[i];
      c->tab[i] = c->tab[--c->n];
      break;
    }
  pthread_mutex_unlock(&c->mu);
  if (!s) return etw_fail(st, ETW_E_NOT_FOUND, NULL, "no session %llu", (unsigned long long)id);
  session_end(s, "deleted", 1);
  return ETW_E_OK;
}

enum etw_err etw_session_patch(struct etw_session *s, const cJSON *body, struct etw_status *st) {
  if (!cJSON_IsObject(body)) return etw_fail(st, ETW_E_INVALID, "", "the body must be a JSON object");
  for (const cJSON *m = body->child; m; m = m->next)
    if (strcmp(m->string, "enable") && strcmp(m->string, "disable"))
      return etw_fail(st, ETW_E_INVALID, "", "unknown member \"%s\": use \"enable\" and/or \"disable\"",
                      m->string);
  const cJSON *en = cJSON_GetObjectItemCaseSensitive(body, "enable");
  const cJSON *dis = cJSON_GetObjectItemCaseSensitive(body, "disable");
  if ((en && !cJSON_IsArray(en)) || (dis && !cJSON_IsArray(dis)) || (!en && !dis))
    return etw_fail(st, ETW_E_INVALID, "", "give \"enable\": [provider…] and/or \"disable\": [name…]");
  pthread_mutex_lock(&s->mu);
  enum etw_err e = ETW_E_OK;
  pthread_mutex_lock(&s->smu);
  int running = s->state == S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  if (!running || !s->bstate) {
    e = etw_fail(st, ETW_E_STATE, NULL, "session %llu is not running", (unsigned long long)s->id);
    goto out;
  }
  if (!(s->be->caps & ETW_CAP_ENABLE_RUNNING)) {
    e = etw_fail(st, ETW_E_UNSUPPORTED, NULL, "backend %s cannot change providers of a running session",
                 s->be->name);
    goto out;
  }
  int i = 0;
  for (const cJSON *d = dis ? dis->child : NULL; d; d = d->next, i++) {
    char f[32];
    snprintf(f, sizeof f, "/disable/%d", i);
    uint32_t k = 0;
    if (!cJSON_IsString(d)) {
      e = etw_fail(st, ETW_E_INVALID, f, "%s must be a provider name", f);
      goto out;
    }
    while (k < s->spec.n_providers && strcmp(s->spec.providers[k].name, d->valuestring)) k++;
    if (k == s->spec.n_providers) {
      e = etw_fail(st, ETW_E_INVALID, f, "provider \"%s\" is not enabled in this session", d->valuestring);
      goto out;
    }
    if ((e = s->be->disable(s->bstate, d->valuestring, st))) goto out;
    etw_provider_free(&s->spec.providers[k]);
    s->spec.providers[k] = s->spec.providers[--s->spec.n_providers];
  }
  i = 0;
  for (const cJSON *p = en ? en->child : NULL; p; p = p->next, i++) {
    char f[32];
    snprintf(f, sizeof f, "/enable/%d", i);
    struct etw_provider_spec ps;
    if ((e = etw_provider_parse(p, s->be->name, &ps, f, st)) || (e = etw_caps_check_provider(s->be, &ps, f, st))) {
      etw_provider_free(&ps);
      goto out;
    }
    uint32_t k = 0;
    while (k < s->spec.n_providers && strcmp(s->spec.providers[k].name, ps.name)) k++;
    if (k == s->spec.n_providers && k >= ETW_SPEC_MAX_PROVIDERS) {
      etw_provider_free(&ps);
      e = etw_fail(st, ETW_E_LIMIT, f, "at most %d providers per session", ETW_SPEC_MAX_PROVIDERS);
      goto out;
    }
    if ((e = s->be->enable(s->bstate, &ps, st))) {
      /* backend field names are relative to the provider: prefix them */
      if (st && st->field[0] == '/' && strncmp(st->field, "/enable", 7)) {
        char tmp[96];
        snprintf(tmp, sizeof tmp, "%s", st->field);
        const char *rest = strchr(tmp + 1, '/');
        rest = rest ? strchr(rest + 1, '/') : NULL;
        snprintf(st->field, sizeof st->field, "%s%s", f, rest ? rest : "");
      }
      etw_provider_free(&ps);
      goto out;
    }
    if (k < s->spec.n_providers) {
      etw_provider_free(&s->spec.providers[k]);
      s->spec.providers[k] = ps;
    } else {
      struct etw_provider_spec *np =
          realloc(s->spec.providers, (s->spec.n_providers + 1) * sizeof *np);
      if (!np) {
        etw_provider_free(&ps);
        e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
        goto out;
      }
      s->spec.providers = np;
      np[s->spec.n_providers++] = ps;
    }
  }
out:
  pthread_mutex_unlock(&s->mu);
  return e;
}

/* append a literal key (with its leading punctuation) and an unsigned value */
static void kv(struct etw_jw *w, const char *key, uint64_t v) {
  etw_jw_lit(w, key);
  etw_jw_u64(w, v);
}

static void stats_json_locked(struct etw_session *s, struct etw_jw *w) {
  struct etw_backend_stats bs;
  struct etw_hub_stats hs;
  totals_locked(s, &bs, &hs);
  kv(w, "{\"events\":", hs.produced);
  kv(w, ",\"bytes\":", hs.bytes);
  kv(w, ",\"last_seq\":", hs.last_seq);
  kv(w, ",\"read_events\":", bs.read_events);
  kv(w, ",\"read_bytes\":", bs.read_bytes);
  kv(w, ",\"decode_errors\":", bs.decode_errors);
  kv(w, ",\"unparsed\":", bs.unparsed);
  if (bs.stack_walks) {
    kv(w, ",\"stack_walks\":", bs.stack_walks);
    kv(w, ",\"stack_walks_unattached\":", bs.stack_walks_unattached);
    kv(w, ",\"stack_walks_dropped\":", bs.stack_walks_dropped);
    kv(w, ",\"stack_images_dropped\":", bs.stack_images_dropped);
  }
  if (s->spec.n_files || bs.proc_dropped) /* replays: never silent about a missing ProcessName */
    kv(w, ",\"process_table_dropped\":", bs.proc_dropped);
  etw_jw_lit(w, ",\"per_provider\":");
  struct etw_hub_limits nolim = {0, 16, 1, 0};
  struct etw_hub *sum = s->runs && !s->spec.nats ? etw_hub_new(&nolim) : NULL; /* a replay's passes */
  if (sum) {
    etw_hub_add_provider_counts(sum, s->hub);
    for (struct replay_run *r = s->runs; r; r = r->next) etw_hub_add_provider_counts(sum, r->hub);
  }
  etw_hub_provider_counts(sum ? sum : s->hub, w);
  etw_hub_free(sum);
  kv(w, ",\"subscribers\":", hs.subscribers);
  kv(w, ",\"loss\":{\"kernel\":", bs.kernel_lost);
  kv(w, ",\"kernel_overrun\":", bs.kernel_overrun);
  kv(w, ",\"kernel_dropped\":", bs.kernel_dropped);
  kv(w, ",\"hub\":", hs.hub_dropped);
  if (s->spec.order_time && !s->spec.n_files) {
    kv(w, ",\"order_late\":", hs.reorder_late);
    kv(w, ",\"order_early\":", hs.reorder_early);
  }
  kv(w, ",\"subscribers\":", hs.sub_dropped);
  if (s->spec.n_sinks) kv(w, ",\"sink\":", s->sinks ? etw_sinks_lost(s->sinks) : s->sink_lost);
  etw_jw_lit(w, "},\"per_subscriber\":[");
  int first = 1;
  etw_hub_subs_items(s->hub, w, &first);
  for (struct replay_run *r = s->runs; r; r = r->next) etw_hub_subs_items(r->hub, w, &first);
  etw_jw_ch(w, ']');
  if (s->spec.nats) { /* the clients' own passes over the stream (from_stream_seq, from_time) */
    uint64_t ev = s->runs_hs.produced;
    for (struct replay_run *r = s->runs; r; r = r->next) {
      struct etw_hub_stats rh;
      etw_hub_stats(r->hub, &rh);
      ev += rh.produced;
    }
    kv(w, ",\"stream_readers\":{\"active\":", s->n_runs);
    kv(w, ",\"opened\":", s->runs_opened);
    kv(w, ",\"events\":", ev);
    etw_jw_ch(w, '}');
  }
  if (s->spec.n_sinks) {
    etw_jw_lit(w, ",\"sinks\":");
    etw_sinks_json(s->sinks, w);
  }
  if (s->bstate && s->be->stats_json) {
    size_t mark = w->len;
    etw_jw_ch(w, ',');
    size_t after = w->len;
    s->be->stats_json(s->bstate, w);
    if (w->len == after) etw_jw_truncate(w, mark);
  }
  etw_jw_ch(w, '}');
}

static void time_or_null(struct etw_jw *w, int64_t ns) {
  if (ns) etw_jw_unix_ns(w, ns); else etw_jw_lit(w, "null");
}

uint64_t etw_session_lost_before_hub(struct etw_session *s) {
  struct etw_backend_stats bs;
  struct etw_hub_stats hs;
  pthread_mutex_lock(&s->mu);
  totals_locked(s, &bs, &hs);
  pthread_mutex_unlock(&s->mu);
  return bs.kernel_lost + hs.hub_dropped;
}

void etw_session_json(struct etw_session *s, struct etw_jw *w) {
  pthread_mutex_lock(&s->mu);
  kv(w, "{\"id\":", s->id);
  etw_jw_lit(w, ",\"name\":");
  if (s->spec.name) etw_jw_cs(w, s->spec.name); else etw_jw_lit(w, "null");
  etw_jw_lit(w, ",\"backend\":");
  etw_jw_cs(w, s->be->name);
  pthread_mutex_lock(&s->smu);
  etw_jw_lit(w, ",\"state\":");
  etw_jw_cs(w, state_names[s->state]);
  if (s->stop_reason) {
    etw_jw_lit(w, ",\"stop_reason\":");
    etw_jw_cs(w, s->stop_reason);
  }
  if (s->end_msg[0]) {
    etw_jw_lit(w, ",\"message\":");
    etw_jw_cs(w, s->end_msg);
  }
  int64_t stopped = s->stopped_ns;
  pthread_mutex_unlock(&s->smu);
  etw_jw_lit(w, ",\"os_name\":");
  etw_jw_cs(w, s->os_name);
  etw_jw_lit(w, ",\"created\":");
  time_or_null(w, s->created_ns);
  etw_jw_lit(w, ",\"stopped\":");
  time_or_null(w, stopped);
  etw_jw_lit(w, ",\"recording\":");
  etw_jw_bool(w, s->record_path != NULL);
  if (s->record_dir) { /* its name under /api/v1/recordings, which outlives the server */
    etw_jw_lit(w, ",\"recording_name\":");
    etw_jw_cs(w, strrchr(s->record_dir, '/') + 1);
    etw_jw_lit(w, ",\"recording_url\":\"/api/v1/recordings/");
    etw_jw_lit(w, strrchr(s->record_dir, '/') + 1); /* [A-Za-z0-9-]: nothing to escape */
    etw_jw_ch(w, '"');
  }
  if (s->spec.mode & ETW_MODE_FLIGHT) { /* its snapshots are recordings of their own */
    kv(w, ",\"snapshots\":", s->n_snapshots);
    if (s->n_snapshots) {
      etw_jw_lit(w, ",\"last_snapshot\":{\"recording_name\":");
      etw_jw_cs(w, s->last_snapshot);
      etw_jw_lit(w, ",\"recording_url\":\"/api/v1/recordings/");
      etw_jw_lit(w, s->last_snapshot); /* record_dir_claim's [A-Za-z0-9-]: nothing to escape */
      etw_jw_lit(w, "\"}");
    }
  }
  if (s->t_start || s->t_stop) { /* what their watchers see (trigger.h) */
    etw_jw_lit(w, ",\"triggers\":{");
    if (s->t_start) etw_jw_lit(w, "\"start_when\":");
    if (s->t_start) etw_trigger_json(s->t_start, w);
    if (s->t_start && s->t_stop) etw_jw_ch(w, ',');
    if (s->t_stop) etw_jw_lit(w, "\"stop_when\":");
    if (s->t_stop) etw_trigger_json(s->t_stop, w);
    etw_jw_ch(w, '}');
  }
  etw_jw_lit(w, ",\"spec\":");
  etw_spec_json(&s->spec, w);
  etw_jw_lit(w, ",\"stats\":");
  stats_json_locked(s, w);
  etw_jw_ch(w, '}');
  pthread_mutex_unlock(&s->mu);
}

static struct etw_session **snapshot(struct etw_core *c, uint32_t *n) {
  pthread_mutex_lock(&c->mu);
  struct etw_session **v = malloc((c->n + 1) * sizeof *v);
  *n = 0;
  if (v) {
    for (uint32_t i = 0; i < c->n; i++) {
      if (atomic_load(&c->tab[i]->creating)) continue; /* not created yet: no waiting for it */
      v[*n] = c->tab[i];
      atomic_fetch_add(&v[(*n)++]->refs, 1);
    }
  }
  pthread_mutex_unlock(&c->mu);
  /* stable order by id */
  for (uint32_t i = 1; i < *n; i++)
    for (uint32_t j = i; j > 0 && v[j - 1]->id > v[j]->id; j--) {
      struct etw_session *t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v;
}

void etw_core_sessions_json(struct etw_core *c, struct etw_jw *w) {
  uint32_t n;
  struct etw_session **v = snapshot(c, &n);
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; i < n; i++) {
    if (i) etw_jw_ch(w, ',');
    etw_session_json(v[i], w);
    etw_session_put(v[i]);
  }
  etw_jw_ch(w, ']');
  free(v);
}

uint32_t etw_core_session_count(struct etw_core *c) {
  pthread_mutex_lock(&c->mu);
  uint32_t n = c->n;
  pthread_mutex_unlock(&c->mu);
  return n;
}

static void metric(struct etw_jw *w, const char *name, const struct etw_session *s, const char *extra,
                   uint64_t v) {
  etw_jw_lit(w, name);
  kv(w, "{session=\"", s->id);
  etw_jw_ch(w, '"');
  if (extra) etw_jw_lit(w, extra);
  kv(w, "} ", v);
  etw_jw_ch(w, '\n');
}

void etw_core_metrics(struct etw_core *c, struct etw_jw *w) {
  uint32_t n;
  struct etw_session **v = snapshot(c, &n);
  etw_jw_lit(w,
             "# HELP etwd_session_events_total Events published by the session's readers.\n"
             "# TYPE etwd_session_events_total counter\n"
             "# HELP etwd_session_read_events_total Events the session's readers took from the kernel or file "
             "(also those only recorded, mode file).\n"
             "# TYPE etwd_session_read_events_total counter\n"
             "# HELP etwd_session_bytes_total Encoded JSON bytes published.\n"
             "# TYPE etwd_session_bytes_total counter\n"
             "# HELP etwd_session_lost_events_total Events lost, by layer (kernel, hub, subscriber).\n"
             "# TYPE etwd_session_lost_events_total counter\n"
             "# HELP etwd_session_undecoded_events_total Events delivered undecoded (raw payload and reason).\n"
             "# TYPE etwd_session_undecoded_events_total counter\n"
             "# HELP etwd_session_unparsed_events_total Events delivered with payload bytes after their schema's fields.\n"
             "# TYPE etwd_session_unparsed_events_total counter\n"
             "# HELP etwd_session_subscribers Current subscribers.\n"
             "# TYPE etwd_session_subscribers gauge\n"
             "# HELP etwd_session_running 1 while the session is running.\n"
             "# TYPE etwd_session_running gauge\n"
             "# HELP etwd_session_sink_ok 1 while the sink is connected and not in state error (its stream takes the subject; the broker takes its creds and its publishes).\n"
             "# TYPE etwd_session_sink_ok gauge\n"
             "# HELP etwd_session_source_ok 1 while a nats session is connected to its broker and fetches work.\n# TYPE etwd_session_source_ok gauge\n"
             "# HELP etwd_session_stack_walks_dropped_total Stack walks of a replay the stack index did not keep "
             "(its bounds or --stack-index-mb): events without that stack.\n"
             "# TYPE etwd_session_stack_walks_dropped_total counter\n");
  uint64_t tot_ev = 0, tot_lost = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct etw_session *s = v[i];
    struct etw_backend_stats bs;
    struct etw_hub_stats hs;
    pthread_mutex_lock(&s->mu);
    totals_locked(s, &bs, &hs);
    uint64_t sink_lost = s->sinks ? etw_sinks_lost(s->sinks) : s->sink_lost;
    int sink_ok[ETW_SINKS_MAX]; /* -1: stopped */
    for (uint32_t k = 0; k < ETW_SINKS_MAX; k++) sink_ok[k] = etw_sinks_ok(s->sinks, k);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->smu);
    int running = s->state == S_RUNNING;
    pthread_mutex_unlock(&s->smu);
    metric(w, "etwd_session_events_total", s, NULL, hs.produced);
    metric(w, "etwd_session_read_events_total", s, NULL, bs.read_events);
    metric(w, "etwd_session_bytes_total", s, NULL, hs.bytes);
    metric(w, "etwd_session_lost_events_total", s, ",layer=\"kernel\"", bs.kernel_lost);
    metric(w, "etwd_session_lost_events_total", s, ",layer=\"hub\"", hs.hub_dropped);
    metric(w, "etwd_session_lost_events_total", s, ",layer=\"subscriber\"", hs.sub_dropped);
    if (s->spec.n_sinks) metric(w, "etwd_session_lost_events_total", s, ",layer=\"sink\"", sink_lost);
    metric(w, "etwd_session_undecoded_events_total", s, NULL, bs.decode_errors);
    metric(w, "etwd_session_unparsed_events_total", s, NULL, bs.unparsed);
    metric(w, "etwd_session_subscribers", s, NULL, hs.subscribers);
    metric(w, "etwd_session_running", s, NULL, (uint64_t)running);
    for (uint32_t k = 0; k < ETW_SINKS_MAX && sink_ok[k] >= 0; k++) {
      char lab[32];
      snprintf(lab, sizeof lab, ",sink=\"%u\"", k);
      metric(w, "etwd_session_sink_ok", s, lab, (uint64_t)sink_ok[k]);
    }
    if (bs.source) metric(w, "etwd_session_source_ok", s, NULL, bs.source_ok);
    if (bs.stack_walks) metric(w, "etwd_session_stack_walks_dropped_total", s, NULL, bs.stack_walks_dropped);
    tot_ev += hs.produced;
    tot_lost += bs.kernel_lost + hs.hub_dropped + hs.sub_dropped + sink_lost;
    etw_session_put(s);
  }
  free(v);
  kv(w, "# HELP etwd_sessions Sessions in the table.\n# TYPE etwd_sessions gauge\netwd_sessions ", n);
  etw_jw_lit(w, "\n# HELP etwd_events_total Events published by all current sessions.\n"
                "# TYPE etwd_events_total counter\netwd_events_total ");
  etw_jw_u64(w, tot_ev);
  etw_jw_lit(w, "\n# HELP etwd_lost_events_total Events lost at any layer in all current sessions.\n"
                "# TYPE etwd_lost_events_total counter\netwd_lost_events_total ");
  etw_jw_u64(w, tot_lost);
  etw_jw_lit(w, "\n# HELP etwd_uptime_seconds Seconds since start.\n# TYPE etwd_uptime_seconds gauge\n"
                "etwd_uptime_seconds ");
  etw_jw_u64(w, (uint64_t)((etw_real_ns() - c->started_ns) / 1000000000LL));
  etw_jw_ch(w, '\n');
}

static void bs_add(struct etw_backend_stats *a, const struct etw_backend_stats *b) {
  a->kernel_lost += b->kernel_lost;
  a->kernel_overrun += b->kernel_overrun;
  a->kernel_dropped += b->kernel_dropped;
  a->read_events += b->read_events;
  a->read_bytes += b->read_bytes;
  a->decode_errors += b->decode_errors;
  a->unparsed += b->unparsed;
  a->stack_walks += b->stack_walks;
  a->stack_walks_unattached += b->stack_walks_unattached;
  a->proc_dropped += b->proc_dropped;
  a->stack_walks_dropped += b->stack_walks_dropped;
  a->stack_images_dropped += b->stack_images_dropped;
}

static void hs_add(struct etw_hub_stats *a, const struct etw_hub_stats *b) {
  a->produced += b->produced;
  a->bytes += b->bytes;
  a->hub_dropped += b->hub_dropped;
  a->sub_dropped += b->sub_dropped;
  a->subscribers += b->subscribers;
  if (b->last_seq > a->last_seq) a->last_seq = b->last_seq;
}

/* the session's counters: its own backend state and hub, plus a replay's passes (summed);
 * caller holds s->mu */
static void totals_locked(struct etw_session *s, struct etw_backend_stats *bs, struct etw_hub_stats *hs) {
  *bs = s->last;
  if (s->bstate && s->be->stats) s->be->stats(s->bstate, bs);
  etw_hub_stats(s->hub, hs);
  if (s->spec.nats) /* clients' passes re-read the stream: only their subscribers count here */
    hs->sub_dropped += s->runs_hs.sub_dropped;
  else
    bs_add(bs, &s->runs_bs), hs_add(hs, &s->runs_hs);
  for (struct replay_run *r = s->runs; r; r = r->next) {
    struct etw_backend_stats rb;
    struct etw_hub_stats rh;
    memset(&rb, 0, sizeof rb);
    if (s->be->stats) s->be->stats(r->bstate, &rb);
    etw_hub_stats(r->hub, &rh);
    if (s->spec.nats) {
      hs->subscribers += rh.subscribers;
      hs->sub_dropped += rh.sub_dropped;
      continue;
    }
    bs_add(bs, &rb);
    hs_add(hs, &rh);
  }
}

/* stop a pass (its subscriber is closed or about to be), keep its counts, free it; s->mu held */
static void run_free(struct etw_session *s, struct replay_run *r) {
  if (r->bstate) {
    struct etw_backend_stats rb;
    memset(&rb, 0, sizeof rb);
    if (s->be->stop) s->be->stop(r->bstate);
    if (s->be->stats) s->be->stats(r->bstate, &rb);
    bs_add(&s->runs_bs, &rb);
    s->be->destroy(r->bstate);
  }
  pass_over(s, &r->live, 0, ETW_E_OK, NULL); /* stopped before its end (no-op if it ended) */
  struct etw_hub_stats rh;
  etw_hub_stats(r->hub, &rh);
  rh.subscribers = 0;
  hs_add(&s->runs_hs, &rh);
  if (!s->spec.nats) etw_hub_add_provider_counts(s->hub, r->hub);
  etw_hub_free(r->hub);
  free(r);
}

/* a replay's subscriber gets its own pass over the files: a lossless hub with it as the only
 * subscriber, then a reader (the backend opened again) that publishes into it. So does a nats
 * session's subscriber with from_stream_seq / from_time: its reader has a consumer of its own,
 * ephemeral, from that point of the stream, paced by the client (lossless: the broker keeps the
 * rest), deleted when it leaves. At most --max-subscribers passes per session. s->mu is not
 * held on entry (opening indexes the files, or asks the broker). NULL with *err set on failure. */
static struct etw_sub *run_subscribe(struct etw_session *s, const struct etw_sub_filter *f,
                                     uint64_t from_seq, int *err, struct etw_status *why) {
  struct etw_core *c = s->core;
  struct replay_run *r = calloc(1, sizeof *r);
  /* no replay window: the pass has one subscriber from its start (from= is skip_below) */
  struct etw_hub_limits hl = {0, c->cfg.sub_queue_events, 1, 1};
  if (r) r->hub = etw_hub_new(&hl);
  if (r && r->hub) r->sub = etw_hub_subscribe(r->hub, f, from_seq, err);
  struct etw_status st;
  etw_status_clear(&st);
  if (r) r->s = s;
  const struct etw_session_spec *spec = &s->spec;
  if (r && s->spec.nats) { /* shallow copies: what they point to is the session's */
    r->src = *s->spec.nats;
    r->src.start_seq = f->from_stream_seq;
    r->src.start_time_ns = f->from_stream_seq ? 0 : f->from_time_ns;
    r->src.ephemeral = 1;
    r->spec = s->spec;
    r->spec.nats = &r->src;
    spec = &r->spec;
  } else if (r && f->stackwalk_events) { /* ?stackwalk_events= for this pass only */
    r->spec = s->spec;
    r->spec.stackwalk_events = f->stackwalk_events == 2;
    spec = &r->spec;
  }
  struct etw_backend_args a = {spec, r ? r->hub : NULL, s->os_name, NULL, on_pass_ended, r};
  enum etw_err e = r && r->sub ? s->be->open(&a, &r->bstate, &st) : ETW_E_NOMEM;
  pthread_mutex_lock(&s->mu);
  if (!e && s->n_runs >= c->cfg.max_subscribers) e = ETW_E_LIMIT;
  pthread_mutex_lock(&s->smu);
  int stopped = s->state == S_STOPPED || (s->spec.nats && s->state != S_RUNNING);
  int first = !e && !stopped && s->state == S_PENDING;
  if (first) s->state = S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  if (!e && stopped) e = ETW_E_STATE; /* raced with a stop: the caller subscribes to s->hub */
  if (!e) { /* reading from now on (its end may come before start() returns) */
    pthread_mutex_lock(&s->smu);
    r->live = 1;
    s->passes_live++;
    pthread_mutex_unlock(&s->smu);
    e = s->be->start(r->bstate, &st);
  }
  /* the replay's duration_s counts from its first pass (stop_locked ends every pass) */
  if (!e && first && limits_start(s)) e = ETW_E_NOMEM;
  if (e) {
    if (r && r->sub) etw_sub_close(r->sub);
    if (r && r->hub) run_free(s, r);
    else free(r);
    pthread_mutex_unlock(&s->mu);
    if (err) *err = (int)e;
    if (why && st.msg[0]) *why = st; /* the backend's reason (its open) */
    return NULL;
  }
  r->next = s->runs;
  s->runs = r;
  s->n_runs++;
  s->runs_opened++;
  pthread_mutex_unlock(&s->mu);
  return r->sub;
}

struct etw_sub *etw_session_subscribe(struct etw_session *s, const struct etw_sub_filter *f,
                                      uint64_t from_seq, int *err) {
  return etw_session_subscribe_why(s, f, from_seq, err, NULL);
}

struct etw_sub *etw_session_subscribe_why(struct etw_session *s, const struct etw_sub_filter *f,
                                          uint64_t from_seq, int *err, struct etw_status *why) {
  if (s->spec.nats && (f->from_stream_seq || f->from_time_ns)) { /* its own consumer */
    int e = 0;
    struct etw_sub *sub = run_subscribe(s, f, 0, &e, why);
    if (!sub && err) *err = e;
    return sub;
  }
  if (s->spec.n_files) { /* a replay: the whole file for every subscriber, unless stopped */
    pthread_mutex_lock(&s->smu);
    int stopped = s->state == S_STOPPED;
    pthread_mutex_unlock(&s->smu);
    if (!stopped) {
      int e = 0;
      struct etw_sub *sub = run_subscribe(s, f, from_seq, &e, why);
      if (sub || e != ETW_E_STATE) {
        if (!sub && err) *err = e;
        return sub;
      }
    }
  }
  struct etw_sub *sub = etw_hub_subscribe(s->hub, f, from_seq, err);
  if (!sub) return NULL;
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&s->smu);
  int pending = s->state == S_PENDING;
  if (pending) s->state = S_RUNNING;
  pthread_mutex_unlock(&s->smu);
  if (pending && s->bstate) {
    struct etw_status st;
    etw_status_clear(&st);
    if (s->be->start(s->bstate, &st) != ETW_E_OK)
      on_ended(s, st.code ? st.code : ETW_E_INTERNAL, st.msg);
    else if (limits_start(s))
      on_ended(s, ETW_E_NOMEM, "cannot start the thread of the stop limits");
  }
  pthread_mutex_unlock(&s->mu);
  return sub;
}

void etw_session_unsubscribe(struct etw_session *s, struct etw_sub *sub, struct etw_sub_stats *final) {
  pthread_mutex_lock(&s->mu);
  struct replay_run **pp = &s->runs;
  while (*pp && (*pp)->sub != sub) pp = &(*pp)->next;
  struct replay_run *r = *pp;
  if (r) {
    *pp = r->next;
    s->n_runs--;
  }
  /* the pass stops first (its waiting publish is cancelled: what finds no room is counted as
   * dropped), then what the queue holds is counted: delivered + dropped = what the pass published */
  if (r && s->be->stop) s->be->stop(r->bstate);
  etw_sub_close_final(sub, final);
  if (r) run_free(s, r);
  pthread_mutex_unlock(&s->mu);
}

const char *etw_session_record_path(struct etw_session *s) { return s->record_path; }

/* 1 if @name ("<UTC stamp>-s<id>[-N]", record_dir_claim) is a snapshot of the flight session @s:
 * its id, and a stamp not before @s was created (ids restart at 1 in every run, so an earlier
 * run's "-s<id>" is older than this run's session of that id) */
static int is_snapshot_of(const struct etw_session *s, const char *name) {
  const char *p = strstr(name, "-s");
  char *end, stamp[32];
  if (!(s->spec.mode & ETW_MODE_FLIGHT) || !p || p - name != 16) return 0;
  if (atomic_load(&s->creating)) return 0; /* created_ns is set before creating is cleared */
  if (strtoull(p + 2, &end, 10) != s->id || (*end && *end != '-')) return 0;
  time_t t = (time_t)(s->created_ns / 1000000000LL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  return strncmp(name, stamp, 16) >= 0;
}

uint64_t etw_core_recording_owner(struct etw_core *c, const char *name) {
  uint64_t id = 0;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < c->n && !id; i++) {
    const char *d = c->tab[i]->record_dir, *sl = d ? strrchr(d, '/') : NULL;
    if ((sl && !strcmp(sl + 1, name)) || is_snapshot_of(c->tab[i], name)) id = c->tab[i]->id;
  }
  pthread_mutex_unlock(&c->mu);
  return id;
}

uint64_t etw_core_file_change(struct etw_core *c, const char *path, const char *from, int *rc, char *name, size_t n) {
  const struct etw_session *u = NULL;
  pthread_mutex_lock(&c->mu); /* a session being created enters the table before it opens its files */
  for (uint32_t i = 0; i < c->n && !u; i++)
    for (uint32_t k = 0; k < c->tab[i]->spec.n_files && !u; k++)
      if (!strcmp(c->tab[i]->spec.files[k], path)) u = c->tab[i];
  if (u) snprintf(name, n, "%s", u->spec.name ? u->spec.name : ""); else *rc = from ? rename(from, path) : unlink(path);
  uint64_t id = u ? u->id : 0;
  pthread_mutex_unlock(&c->mu);
  return id;
}

int etw_session_is_recording(struct etw_session *s) {
  pthread_mutex_lock(&s->smu);
  int r = s->record_path && !s->be_stopped;
  pthread_mutex_unlock(&s->smu);
  return r;
}

int64_t etw_session_remaining_ms(struct etw_session *s) {
  if (!(s->spec.duration_s > 0)) return -1;
  int64_t dur = (int64_t)(s->spec.duration_s * 1e9);
  pthread_mutex_lock(&s->smu);
  int64_t left = s->started_mono ? s->started_mono + dur - etw_mono_ns() : dur;
  pthread_mutex_unlock(&s->smu);
  return left > 0 ? left / 1000000 : 0;
}

int etw_session_wait_stopped(struct etw_session *s, int64_t timeout_ms, const atomic_int *cancel) {
  int64_t end = etw_mono_ns() + timeout_ms * 1000000LL;
  pthread_mutex_lock(&s->smu);
  int r = 0;
  while (s->state == S_RUNNING || s->state == S_PENDING || s->state == S_ARMED) {
    int64_t now = etw_mono_ns();
    if (now >= end || (cancel && atomic_load(cancel))) {
      r = now >= end ? 1 : 2;
      break;
    }
    int64_t wake = now + 200000000LL; /* look at @cancel 5 times a second */
    cv_wait_until(s, wake < end ? wake : end);
  }
  int finish = !r && !s->be_stopped; /* ended by itself: the backend's stop() completes the file */
  pthread_mutex_unlock(&s->smu);
  if (finish) {
    pthread_mutex_lock(&s->mu);
    stop_locked(s, S_STOPPED, NULL);
    pthread_mutex_unlock(&s->mu);
  }
  return r;
}
