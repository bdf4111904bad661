/* linux_reader.c — the reader threads of a Linux session: one per online CPU, created parked by
 * open() (so their thread ids can be excluded by the kernel filters before any event is
 * enabled), building their decoders once the providers are applied, released by start().
 *
 * Each thread polls its own per_cpu/cpuN/trace_pipe_raw fd (O_NONBLOCK, 20 ms timeout), drains
 * it with non-blocking tracefs_cpu_read, walks the pages directly (kbuffer as fallback) and
 * decodes with its own tep_handle (linux_decode.c), publishing batches to the session's hub when
 * full or at least every 20 ms. In file mode the raw pages also go to the per-CPU spools of
 * linux_tdat.c (linux_record.c refreshes and finishes the trace.dat).
 *
 * Readers run at nice ETW_LINUX_READER_NICE_DEFAULT (-10; etw_linux_set_reader_nice) and are
 * pinned to their CPU (etw_linux_set_reader_pinning): at nice 0 or free to migrate, a
 * CPU-saturating workload starves them and the kernel drops events (docs/linux.md). The clock
 * offset (UTC = mono + (REALTIME - MONOTONIC)) is calibrated at start and again by every reader
 * each second (a clock step moves the offset).
 *
 * Threads and ownership: a reader owns its struct lx_rd (decoder, batch, page, loaded systems);
 * it takes s->mu only while parked and to learn the systems added since its last look. Its
 * counters are atomics read by stats(). The session owner releases (lx_release_readers) and
 * joins them (lx_join_readers).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <tracefs.h>

#include "etwcore/linux.h"
#include "etwcore/util.h"
#include "linux/linux_sess.h"

static atomic_int g_reader_nice = ETW_LINUX_READER_NICE_DEFAULT;

void etw_linux_set_reader_nice(int nice) {
  if (nice < -20) nice = -20;
  if (nice > 19) nice = 19;
  atomic_store(&g_reader_nice, nice);
}

int etw_linux_reader_nice(void) { return atomic_load(&g_reader_nice); }

static atomic_int g_reader_pin = 1;

void etw_linux_set_reader_pinning(int on) { atomic_store(&g_reader_pin, on ? 1 : 0); }

/* REALTIME - MONOTONIC, from the tightest of a few bracketed samples */
int64_t lx_calib_offset(void) {
  int64_t best = INT64_MAX, off = 0;
  for (int i = 0; i < 5; i++) {
    int64_t m1 = lx_now_ns(CLOCK_MONOTONIC);
    int64_t r = lx_now_ns(CLOCK_REALTIME);
    int64_t m2 = lx_now_ns(CLOCK_MONOTONIC);
    if (m2 - m1 < best) {
      best = m2 - m1;
      off = r - (m1 + (m2 - m1) / 2);
    }
  }
  return off;
}

/* ---- reader threads */

static void publish(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  uint64_t drop = atomic_exchange(&r->dec.enc_dropped, 0);
  if (drop && s->hub) etw_hub_drop(s->hub, drop);
  if (r->sink.b && r->sink.b->n) {
    if (s->hub)
      etw_hub_publish(s->hub, r->sink.b);
    else
      etw_batch_unref(r->sink.b);
    r->sink.b = NULL;
  }
  if (!r->sink.b) {
    r->sink.b = etw_batch_new(LX_BATCH_EVENTS, LX_BATCH_BYTES);
    /* one allocation per batch instead of doubling from empty */
    if (r->sink.b) etw_jw_reserve(&r->sink.b->data, LX_BATCH_BYTES / 2);
  }
  r->batch_t0 = lx_now_ns(CLOCK_MONOTONIC);
}

static void sink_flush(void *ctx, struct lx_sink *sk) {
  (void)sk;
  publish((struct lx_rd *)ctx);
}

/* Load formats of systems added since this thread's last look. */
static void sync_systems(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  unsigned g = atomic_load(&s->gen);
  if (g == r->gen_seen) return;
  pthread_mutex_lock(&s->mu);
  char *todo[ETW_SPEC_MAX_PROVIDERS];
  uint32_t nt = 0;
  for (uint32_t i = 0; i < s->n_sys; i++) {
    int have = 0;
    for (uint32_t j = 0; j < r->n_loaded; j++)
      if (!strcmp(r->loaded[j], s->systems[i])) have = 1;
    if (!have) todo[nt++] = strdup(s->systems[i]);
  }
  r->gen_seen = g;
  pthread_mutex_unlock(&s->mu);
  for (uint32_t i = 0; i < nt; i++) {
    if (!todo[i]) continue;
    lx_tep_add_system(r->dec.tep, todo[i]);
    char **nl = realloc(r->loaded, (r->n_loaded + 1) * sizeof *nl);
    if (nl) {
      r->loaded = nl;
      r->loaded[r->n_loaded++] = todo[i];
    } else {
      free(todo[i]);
    }
  }
}

/* A per-CPU read that keeps failing (not EAGAIN) ends the session, once, through args->ended. */
static void read_failed(struct lx_rd *r, int err) {
  struct lx_sess *s = r->s;
  if (++r->read_errors < 50) return;
  if (atomic_exchange(&s->ended_called, 1)) return;
  char msg[160];
  snprintf(msg, sizeof msg, "reading per_cpu/cpu%d/trace_pipe_raw keeps failing: %s", r->cpu,
           strerror(err));
  if (s->ended) s->ended(s->ctx, ETW_E_IO, msg);
}

/* The stop limits: 1 if the page just read is taken; 0 if a limit was reached before it (the
 * page is dropped, its events counted in limit_skipped). At most one page per CPU crosses. */
static int take_page(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  uint64_t ne = lx_count_page(&r->dec, r->page);
  int over = 0;
  if (s->lim_events && atomic_fetch_add(&s->lim_ev_taken, ne) >= s->lim_events) over = 1;
  if (s->lim_bytes && atomic_fetch_add(&s->lim_b_taken, (uint64_t)s->page_size) >= s->lim_bytes) over = 1;
  if (over) atomic_fetch_add_explicit(&s->lim_skipped, ne, memory_order_relaxed);
  return !over;
}

/* Read every page available now (bounded by @max_pages). Returns pages read. */
static int drain(struct lx_rd *r, int max_pages) {
  struct lx_sess *s = r->s;
  int pages = 0;
  while (pages < max_pages) {
    if (s->tdat) memset(r->page, 0, (size_t)s->page_size);
    errno = 0;
    int n = tracefs_cpu_read(r->tcpu, r->page, true);
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) read_failed(r, errno);
      break;
    }
    r->read_errors = 0;
    pages++;
    atomic_fetch_add_explicit(&r->pages, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->raw_bytes, (uint64_t)n, memory_order_relaxed);
    if (!r->dec.stk && atomic_load(&s->stk.want)) /* the session asked for stacks */
      lx_stk_attach(&r->dec, atomic_load(&s->stk.want));
    if ((s->lim_events || s->lim_bytes) && !take_page(r)) continue;
    uint64_t ne;
    if (s->mode & ETW_MODE_REALTIME) {
      sync_systems(r);
      unsigned hm = atomic_load_explicit(&s->hide, memory_order_relaxed);
      if (hm != r->hide_seen) lx_task_hide(&r->dec, r->hide_seen = hm);
      ne = lx_dec_page(&r->dec, r->page, &r->sink);
      lx_comm_applied(s->cm, r->cpu, r->dec.last_ts);
      if (r->sink.b && r->sink.b->n && lx_now_ns(CLOCK_MONOTONIC) - r->batch_t0 >= LX_FLUSH_NS &&
          !lx_stk_waiting(&r->dec, &r->sink)) /* (its stacks are on the next page) */
        publish(r);
    } else {
      ne = lx_count_page(&r->dec, r->page);
    }
    atomic_fetch_add_explicit(&r->raw_events, ne, memory_order_relaxed);
    /* after decoding (which only reads the page), so the page's event count goes with it */
    if (s->tdat && !atomic_load_explicit(&s->file_failed, memory_order_relaxed) &&
        lx_tdat_page(s->tdat, r->cpu, r->page, ne) != 0 && lx_tdat_error(s->tdat))
      lx_rec_spool_failed(r);
  }
  return pages;
}


/* "etwd-s<session>-c<cpu>" ("etwd-p<id>-c<cpu>" for a private session: a trigger's watcher) in
 * top -H, ps -L and /proc/<pid>/task/<tid>/comm; the CPU pinning and the priority. Reader
 * thread, s->mu held. */
static void reader_ident(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  r->tid = (pid_t)syscall(SYS_gettid);
  unsigned sid = 0;
  char tn[16], kind = 's';
  if (s->name && sscanf(s->name, "etwd_%u_", &sid) != 1 && sscanf(s->name, "etwd_p%u_", &sid) == 1) kind = 'p';
  snprintf(tn, sizeof tn, "etwd-%c%u-c%d", kind, sid % 10000, r->cpu % 1000);
  pthread_setname_np(pthread_self(), tn);
  if (atomic_load(&g_reader_pin)) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(r->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  int nice = atomic_load(&g_reader_nice);
  if (nice) setpriority(PRIO_PROCESS, (id_t)r->tid, nice); /* best effort */
}

/* Phase 1 (still inside open; called with s->mu held, returns with it released): once the
 * providers are applied, build the decoder so that start() finds every reader ready to read at
 * once (a big system such as `syscalls` takes tens of ms to parse, and events must not wait for
 * that). 0: the session quit before. */
static int reader_build(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  while (!s->go && !s->prep) pthread_cond_wait(&s->cv, &s->mu);
  if (s->go == 2) {
    pthread_mutex_unlock(&s->mu);
    return 0;
  }
  char *sys[ETW_SPEC_MAX_PROVIDERS + 1];
  uint32_t nsys = 0;
  for (uint32_t i = 0; i < s->n_sys; i++) {
    char **nl = realloc(r->loaded, (r->n_loaded + 1) * sizeof *nl);
    char *c = strdup(s->systems[i]);
    if (!nl || !c) {
      free(c);
      if (nl) r->loaded = nl;
      continue;
    }
    r->loaded = nl;
    r->loaded[r->n_loaded++] = c;
    sys[nsys++] = c;
  }
  sys[nsys] = NULL;
  r->gen_seen = atomic_load(&s->gen);
  pthread_mutex_unlock(&s->mu);
  struct tep_handle *tep = lx_tep_new((const char *const *)sys);
  if (lx_dec_init(&r->dec, tep, r->cpu, 0) == 0) r->dec_ok = 1;
  if (s->cm) {
    r->dec.cm = s->cm;
    r->dec.cseq = s->cm->seq;
  }
  lx_task_hide(&r->dec, r->hide_seen = atomic_load(&s->hide));
  r->page = calloc(1, (size_t)s->page_size);
  r->sink.flush = sink_flush;
  r->sink.ctx = r;
  return 1;
}

/* Read until stop: poll, drain, publish, tell the hub and the comm table how far it read. */
static void reader_loop(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  int64_t last_cal = lx_now_ns(CLOCK_MONOTONIC);
  /* [1]: the comm table's wake-up (lx_comm_wait: another reader needs this CPU read now) */
  struct pollfd pfd[2] = {{.fd = r->fd, .events = POLLIN},
                          {.fd = s->cm ? s->cm->wake[r->cpu] : -1, .events = POLLIN}};
  while (!atomic_load_explicit(&s->stopping, memory_order_acquire)) {
    /* poll wakes early only when buffer_percent (50 %) is reached, i.e. at high rates; a
     * timeout means a low rate: publish at once so an event waits at most ~20 ms */
    /* the timeout ends on the next multiple of LX_POLL_MS of the monotonic clock, the same
     * instants for every reader: the CPUs' batches of a quiet session are published together,
     * so a sleeping sender wakes about once per period, not once per CPU */
    const int64_t period = (int64_t)LX_POLL_MS * 1000000;
    int64_t left = period - lx_now_ns(CLOCK_MONOTONIC) % period; /* 1 ns .. 20 ms */
    struct timespec to = {0, (long)left};
    int woke = ppoll(pfd, 2, &to, NULL) > 0;
    if (woke && (pfd[1].revents & POLLIN)) { /* a poke: read now, as after a time-out */
      uint64_t v;
      if (read(pfd[1].fd, &v, sizeof v) < 0) v = 0;
      woke = (pfd[0].revents & POLLIN) != 0;
    }
    /* "order": "time": everything this CPU's buffer holds from before now is read by the drain
     * (1 ms less: an event reserved just before may be committed just after) */
    int64_t wm_mono = lx_now_ns(CLOCK_MONOTONIC) - 1000000;
    int64_t wm = wm_mono + r->dec.mono_to_real;
    drain(r, 1 << 20);
    lx_comm_applied(s->cm, r->cpu, (uint64_t)wm_mono); /* the comm table: all of it decoded */
    int64_t t = lx_now_ns(CLOCK_MONOTONIC);
    /* (no batch: an allocation failed; publish() retries it and reports the dropped events) */
    int due = r->sink.b && r->sink.b->n && (!woke || t - r->batch_t0 >= LX_FLUSH_NS / 2);
    /* a held event whose writer was preempted before its stacks: kept back for one poll (the
     * writer runs again once this reader sleeps), with the watermark before the batch */
    int hold = due && !r->stk_waited && lx_stk_waiting(&r->dec, &r->sink);
    r->stk_waited = hold;
    if (!r->sink.b || (due && !hold)) publish(r);
    if (hold && r->sink.b->ev[0].ts_ns - 1 < wm) wm = r->sink.b->ev[0].ts_ns - 1;
    if (s->hub) etw_hub_tick(s->hub, (uint32_t)r->cpu, wm); /* "order": "time" */
    if (t - last_cal > 1000000000) {
      r->dec.mono_to_real = lx_calib_offset();
      last_cal = t;
    }
  }
}

void *lx_reader_main(void *arg) {
  struct lx_rd *r = arg;
  struct lx_sess *s = r->s;
  pthread_mutex_lock(&s->mu);
  reader_ident(r);
  s->ready++;
  pthread_cond_broadcast(&s->cv);
  if (!reader_build(r)) return NULL;
  /* "order": "time": the hub holds the other CPUs' events until this reader has spoken */
  if (s->hub) etw_hub_tick(s->hub, (uint32_t)r->cpu, INT64_MIN);
  /* phase 2: wait for start (or quit) */
  pthread_mutex_lock(&s->mu);
  s->prepared++;
  pthread_cond_broadcast(&s->cv);
  while (!s->go) pthread_cond_wait(&s->cv, &s->mu);
  int go = s->go;
  pthread_mutex_unlock(&s->mu);
  if (go != 1) {
    lx_comm_applied(s->cm, r->cpu, UINT64_MAX); /* no reader waits for this one */
    return NULL;
  }
  r->dec.mono_to_real = atomic_load(&s->mono_to_real);
  publish(r); /* allocates the first batch */
  if (!r->dec_ok || !r->page) {
    lx_comm_applied(s->cm, r->cpu, UINT64_MAX);
    if (s->ended && !atomic_exchange(&s->ended_called, 1))
      s->ended(s->ctx, ETW_E_NOMEM, "reader setup failed");
    return NULL;
  }
  reader_loop(r);
  /* final drain: tracing is off, so this ends; bounded anyway */
  drain(r, 1 << 22);
  lx_comm_applied(s->cm, r->cpu, UINT64_MAX);
  publish(r);
  if (r->sink.b) {
    etw_batch_unref(r->sink.b);
    r->sink.b = NULL;
  }
  return NULL;
}

/* Release the parked readers with @go (1 = read, 2 = quit); lx_join_readers joins them. */
void lx_release_readers(struct lx_sess *s, int go) {
  pthread_mutex_lock(&s->mu);
  if (!s->go) s->go = go;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void lx_join_readers(struct lx_sess *s) {
  for (int i = 0; s->rd && i < s->ncpu; i++) { /* no array: its allocation failed in open */
    struct lx_rd *r = &s->rd[i];
    if (r->th_ok) pthread_join(r->th, NULL);
    r->th_ok = 0;
  }
}
