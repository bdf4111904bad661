/* linux_backend.c — the Linux backend: tracing sessions on tracefs instances.
 *
 * One session = one tracefs instance named args->os_name (ETW_SESSION_PREFIX + id), created by
 * open() and removed by destroy() on every path. Readers: one thread per online CPU, created by
 * open() (so their thread ids can be excluded by the kernel filters before any event is enabled)
 * and released by start(). Each thread polls its own per_cpu/cpuN/trace_pipe_raw fd (O_NONBLOCK,
 * 20 ms timeout), drains it with non-blocking tracefs_cpu_read, walks the pages directly (kbuffer
 * as fallback) and decodes with its own tep_handle (linux_decode.c), publishing batches to the
 * session's hub when full or at least every 20 ms. In file mode the raw pages also go to per-CPU
 * spools that linux_tdat.c assembles into a trace.dat, refreshed about every second while small
 * and written for good at stop.
 *
 * Choices (see docs/linux.md):
 *  - overwrite off: when a per-CPU buffer is full the kernel drops the NEW events and counts them
 *    in per_cpu/cpuN/stats "dropped events"; what is in the buffer is never clobbered while we
 *    read it. Loss = overrun + dropped, summed over CPUs, reported by stats().
 *  - trace_clock "mono" (CLOCK_MONOTONIC); UTC = mono + (REALTIME - MONOTONIC), calibrated at
 *    start and re-calibrated by every reader each second (a clock step moves the offset).
 *  - etwd's own threads are excluded by the kernel filter, ANDed with the user's filter: the
 *    threads in /proc/self/task at open (which include the session's readers) as runs of
 *    consecutive ids, `(common_pid < a || common_pid > b)`, at most LX_MAX_EXCL_TERMS terms,
 *    the readers' and the main thread's runs first. Each term costs the kernel time on every
 *    event, hence runs instead of one `!=` per thread. The list is read again at every enable();
 *    threads created after that are not excluded.
 *  - reader threads run at nice ETW_LINUX_READER_NICE_DEFAULT (-10; etw_linux_set_reader_nice)
 *    and are pinned to their CPU (etw_linux_set_reader_pinning): at nice 0 or free to migrate, a
 *    CPU-saturating workload starves them and the kernel drops events (docs/linux.md).
 *  - PID filter: set_event_pid with every thread of each listed process, plus option event-fork
 *    so tasks they create later are traced too.
 *
 *  - buffer 4 MiB per CPU unless the spec says otherwise (the kernel's 1408 KiB lasts < 20 ms
 *    at 1 M events/s per CPU).
 *
 * Threads: open/enable/disable/start/stop/destroy are called by the session manager (one at a
 * time per session, any thread); stats/stats_json from any thread before destroy. The session
 * mutex guards the systems the readers must know, the instance pointer and the snapshot thread;
 * it is never held across kernel writes. Reader threads own their decoder and batch; the
 * snapshot thread (file mode) only reads the spools.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>
#include <tracefs.h>

#include "etwcore/backend.h"
#include "etwcore/linux.h"
#include "etwcore/util.h"
#include "linux/linux_int.h"

#define LX_BUF_KB_MIN 4
#define LX_BUF_KB_MAX 262144
/* 0 in the spec: 4 MiB per CPU. The kernel's own default (1408 KiB) holds only ~19 ms of events
 * at 1 M events/s per CPU: less than one poll period, so any stall would lose events. */
#define LX_BUF_KB_DEFAULT 4096
#define LX_MAX_EXCL 4096 /* our thread ids considered for the exclusion filter */
#define LX_MAX_EXCL_TERMS 8 /* each term costs ~3 ns per event in the kernel (docs/linux.md) */
#define LX_MAX_CPUS 256
#define LX_BATCH_EVENTS 512
#define LX_BATCH_BYTES (256u * 1024)
#define LX_FLUSH_NS 20000000LL
#define LX_POLL_MS 20
#define LX_MAX_PIDS_TIDS 1024
#define LX_SNAPSHOT_MAX (64ull << 20) /* refresh the trace.dat while recording up to this size */
#define LX_SNAPSHOT_MS 1000

static atomic_int g_reader_nice = ETW_LINUX_READER_NICE_DEFAULT;

void etw_linux_set_reader_nice(int nice) {
  if (nice < -20) nice = -20;
  if (nice > 19) nice = 19;
  atomic_store(&g_reader_nice, nice);
}

int etw_linux_reader_nice(void) { return atomic_load(&g_reader_nice); }

static atomic_int g_reader_pin = 1;

void etw_linux_set_reader_pinning(int on) { atomic_store(&g_reader_pin, on ? 1 : 0); }

struct lx_prov {
  char *name;
  char **events; /* enabled event names (owned) */
  uint32_t n_events;
  char *filter;  /* user's filter or NULL */
  int enabled;
  int stacks;    /* its events record stacks (linux_stack.c) */
};

struct lx_sess;

struct lx_rd {
  struct lx_sess *s;
  int cpu;
  pthread_t th;
  int th_ok;
  pid_t tid;
  int fd;
  struct tracefs_cpu *tcpu;
  struct lx_dec dec;
  int dec_ok;
  struct lx_sink sink;
  int64_t batch_t0;
  unsigned gen_seen;
  char **loaded; /* systems parsed into this thread's tep */
  uint32_t n_loaded;
  unsigned char *page;
  _Atomic uint64_t raw_events, raw_bytes, pages;
  unsigned read_errors;  /* consecutive failed reads (not EAGAIN) */
  unsigned hide_seen;    /* the session's hide mask this reader applies */
};

struct lx_sess {
  struct tracefs_instance *inst;
  char *name;
  struct etw_hub *hub;
  unsigned mode;
  void (*ended)(void *ctx, enum etw_err code, const char *msg);
  void *ctx;
  int page_size;
  int ncpu;
  struct lx_rd *rd;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go;           /* 1 = start reading, 2 = quit without reading */
  int ready;        /* readers that reported their tid */
  int prep;         /* 1 = providers applied: readers build their decoders */
  int prepared;     /* readers whose decoder is built */
  atomic_int stopping;
  atomic_int ended_called;
  _Atomic unsigned gen; /* bumped when a system is added */
  int started, stopped;
  struct lx_prov prov[ETW_SPEC_MAX_PROVIDERS];
  uint32_t n_prov;
  char *systems[ETW_SPEC_MAX_PROVIDERS + 1]; /* systems the readers must load (NULL-ended) */
  uint32_t n_sys;
  pid_t *excl;        /* our thread ids (LX_MAX_EXCL) */
  uint32_t n_excl;
  pid_t must[LX_MAX_CPUS + 1]; /* the readers and the main thread: always excluded */
  uint32_t n_must;
  char *excl_str;     /* the exclusion expression, built once at open ("" = none) */
  _Atomic int64_t mono_to_real;
  struct lx_tdat *tdat;
  char *record_path;
  uint64_t file_bytes, file_lost_pages, file_events;
  atomic_int file_failed;    /* a spool write failed: the recording is frozen (file_msg says why) */
  int file_done;             /* the final trace.dat is written (file_error: how it went) */
  char file_msg[256];        /* the failure, as the session's state reports it */
  char file_error[192];      /* the final write's problem ("" = none) */
  char snap_note[128];       /* why snapshots are paused ("" = they are not) */
  pthread_t snap_th;
  int snap_started, snap_quit;
  pthread_cond_t snap_cv;
  /* per-CPU kernel counters saved when the instance is removed: {overrun, dropped, entries} */
  uint64_t (*saved)[3];
  /* the spec's stop limits (0 = none): the readers take pages until one is reached (the page
   * that crosses it included) and drop the rest, counted in limit_skipped, until the core's
   * limit thread stops the session (within 100 ms) */
  uint64_t lim_events, lim_bytes;
  _Atomic uint64_t lim_ev_taken, lim_b_taken, lim_skipped;
  struct lx_stkcfg stk; /* stacks: triggers, userstacktrace, the events that want them */
  /* realtime: the comm table (linux_comm.c) and the task events etwd enabled for it alone,
   * hidden from the stream (LX_HIDE_*; readers pick changes up at their next page) */
  struct lx_comm *cm;
  atomic_uint hide;
};

/* ---- small helpers */

static int64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* REALTIME - MONOTONIC, from the tightest of a few bracketed samples */
static int64_t calib_offset(void) {
  int64_t best = INT64_MAX, off = 0;
  for (int i = 0; i < 5; i++) {
    int64_t m1 = now_ns(CLOCK_MONOTONIC);
    int64_t r = now_ns(CLOCK_REALTIME);
    int64_t m2 = now_ns(CLOCK_MONOTONIC);
    if (m2 - m1 < best) {
      best = m2 - m1;
      off = r - (m1 + (m2 - m1) / 2);
    }
  }
  return off;
}

static void free_list(char **l, uint32_t n) {
  if (!l) return;
  for (uint32_t i = 0; i < n; i++) free(l[i]);
  free(l);
}

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
}

/* ---- init / cleanup */

static int tracefs_mounted(void) {
  FILE *f = fopen("/proc/mounts", "re");
  if (!f) return 0;
  char line[1024];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    char dev[256], dir[512], type[64];
    if (sscanf(line, "%255s %511s %63s", dev, dir, type) == 3 && !strcmp(type, "tracefs")) {
      found = 1;
      break;
    }
  }
  fclose(f);
  return found;
}

static void reap_prefixed(void) {
  char **names = tracefs_instances(NULL);
  for (int i = 0; names && names[i]; i++) {
    if (!etw_os_name_is_stale(names[i])) continue; /* not ours, or its etwd is alive */
    struct tracefs_instance *in = tracefs_instance_alloc(NULL, names[i]);
    if (!in) continue;
    /* rmdir fails with EBUSY while a reader still holds it open: right after a kill -9 the
     * owner's group leader is a zombie before its last threads have closed their
     * trace_pipe_raw files, so try again for up to 2 s (a reader of another process keeps it) */
    for (int t = 0; tracefs_instance_destroy(in) && errno == EBUSY && t < 100; t++)
      usleep(20000);
    tracefs_instance_free(in);
  }
  tracefs_list_free(names);
}

static enum etw_err lx_init(struct etw_status *st) {
  if (!tracefs_mounted()) {
    mkdir("/sys/kernel/tracing", 0755);
    if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) != 0)
      return etw_fail(st, errno == EPERM ? ETW_E_PERM : ETW_E_IO, NULL,
                      "cannot mount tracefs at /sys/kernel/tracing: %s", strerror(errno));
  }
  if (!tracefs_tracing_dir())
    return etw_fail(st, ETW_E_IO, NULL, "tracefs is mounted but libtracefs cannot find it");
  reap_prefixed();
  return ETW_E_OK;
}

/* Instances of this process, for cleanup() at exit. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct lx_sess *g_live[256];

static void g_add(struct lx_sess *s) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < 256; i++)
    if (!g_live[i]) {
      g_live[i] = s;
      break;
    }
  pthread_mutex_unlock(&g_mu);
}

static void g_del(struct lx_sess *s) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < 256; i++)
    if (g_live[i] == s) g_live[i] = NULL;
  pthread_mutex_unlock(&g_mu);
}

static void lx_stop(void *vs);
static void remove_instance(struct lx_sess *s);
static void cpu_stats(struct lx_sess *s, int cpu, uint64_t *ov, uint64_t *dr, uint64_t *en);

/* At exit: stop and remove every instance this process still has. Memory stays valid: the core
 * may still call destroy() afterwards, which then only frees. */
static void lx_cleanup(void) {
  for (;;) {
    struct lx_sess *s = NULL;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < 256 && !s; i++) s = g_live[i];
    pthread_mutex_unlock(&g_mu);
    if (!s) break;
    lx_stop(s);
    remove_instance(s);
    g_del(s);
  }
}

/* ---- filters and enabling */

static int cmp_pid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return x < y ? -1 : x > y;
}

static void excl_add(struct lx_sess *s, pid_t t) {
  if (s->excl && s->n_excl < LX_MAX_EXCL) s->excl[s->n_excl++] = t;
}

static void excl_self_tasks(struct lx_sess *s) {
  excl_add(s, getpid());
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)))
    if (isdigit((unsigned char)de->d_name[0])) excl_add(s, (pid_t)atoi(de->d_name));
  closedir(d);
}

/* Build the expression that keeps etwd's own threads out, as few terms as possible: our thread
 * ids sorted into runs of consecutive ids (threads created together get consecutive ids); a run
 * becomes `(common_pid < a || common_pid > b)`, a single id `common_pid != a`. Runs holding a
 * reader or the main thread come first; then the longest, up to LX_MAX_EXCL_TERMS terms. */
static char *excl_build(struct lx_sess *s) {
  for (uint32_t i = 0; i < s->n_must; i++) excl_add(s, s->must[i]);
  if (!s->n_excl) return strdup("");
  qsort(s->excl, s->n_excl, sizeof *s->excl, cmp_pid);
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n_excl; i++)
    if (!n || s->excl[n - 1] != s->excl[i]) s->excl[n++] = s->excl[i];
  s->n_excl = n;
  struct run {
    pid_t a, b;
    int must;
  } *runs = calloc(n, sizeof *runs);
  if (!runs) return strdup("");
  uint32_t nr = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (nr && runs[nr - 1].b + 1 == s->excl[i])
      runs[nr - 1].b = s->excl[i];
    else
      runs[nr++] = (struct run){s->excl[i], s->excl[i], 0};
  }
  for (uint32_t i = 0; i < nr; i++)
    for (uint32_t k = 0; k < s->n_must; k++)
      if (s->must[k] >= runs[i].a && s->must[k] <= runs[i].b) runs[i].must = 1;
  /* selection: must-runs first, then by length (simple selection, nr is small) */
  size_t cap = LX_MAX_EXCL_TERMS * 64 + 16;
  char *out = calloc(1, cap);
  size_t len = 0;
  int terms = 0;
  for (int pass = 0; pass < 2 && out; pass++) {
    for (;;) {
      int best = -1;
      for (uint32_t i = 0; i < nr; i++) {
        if (runs[i].a == 0) continue; /* taken */
        if (pass == 0 && !runs[i].must) continue;
        if (best < 0 || runs[i].b - runs[i].a > runs[best].b - runs[best].a) best = (int)i;
      }
      if (best < 0 || (pass == 1 && terms >= LX_MAX_EXCL_TERMS)) break;
      struct run *r = &runs[best];
      if (r->a == r->b)
        len += (size_t)snprintf(out + len, cap - len, "%scommon_pid != %d", terms ? " && " : "",
                                (int)r->a);
      else
        len += (size_t)snprintf(out + len, cap - len, "%s(common_pid < %d || common_pid > %d)",
                                terms ? " && " : "", (int)r->a, (int)r->b);
      terms++;
      r->a = 0;
      if (len + 80 > cap) break;
    }
  }
  free(runs);
  return out ? out : strdup("");
}

/* Write @filter to sys:ev's filter file; on rejection return the kernel's own text. */
static int write_filter(struct lx_sess *s, const char *sys, const char *ev, const char *filter,
                        char *err, size_t errlen) {
  if (tracefs_event_file_write(s->inst, sys, ev, "filter", filter) >= 0) return 0;
  int e = errno;
  int sz = 0;
  char *txt = tracefs_event_file_read(s->inst, sys, ev, "filter", &sz);
  if (txt) {
    trim(txt);
    snprintf(err, errlen, "%s", txt);
    free(txt);
  } else {
    snprintf(err, errlen, "%s", strerror(e));
  }
  return -1;
}

static enum etw_err ensure_system_locked(struct lx_sess *s, const char *sys) {
  for (uint32_t i = 0; i < s->n_sys; i++)
    if (!strcmp(s->systems[i], sys)) return ETW_E_OK;
  if (s->n_sys >= ETW_SPEC_MAX_PROVIDERS) return ETW_E_LIMIT;
  char *c = strdup(sys);
  if (!c) return ETW_E_NOMEM;
  s->systems[s->n_sys++] = c;
  s->systems[s->n_sys] = NULL;
  atomic_fetch_add(&s->gen, 1);
  return ETW_E_OK;
}

/* Validate names only (no kernel object needed). @pfx: JSON pointer of the provider object. */
static enum etw_err check_provider(const struct etw_provider_spec *p, const char *pfx,
                                   struct etw_status *st) {
  char field[96];
  if (!p->name || !lx_system_exists(p->name)) {
    snprintf(field, sizeof field, "%s/name", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "unknown provider '%s': no tracepoint system of that name",
                    p->name ? p->name : "(null)");
  }
  if (p->n_events > ETW_SPEC_MAX_EVENTS) {
    snprintf(field, sizeof field, "%s/events", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "at most %d events per provider", ETW_SPEC_MAX_EVENTS);
  }
  for (uint32_t j = 0; j < p->n_events; j++) {
    if (!p->events[j] || !lx_event_exists(p->name, p->events[j])) {
      snprintf(field, sizeof field, "%s/events/%u", pfx, j);
      return etw_fail(st, ETW_E_INVALID, field, "unknown event '%s' in provider '%s'",
                      p->events[j] ? p->events[j] : "(null)", p->name);
    }
  }
  if (p->filter && strlen(p->filter) > 2048) {
    snprintf(field, sizeof field, "%s/filter", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "filter longer than 2048 bytes");
  }
  return ETW_E_OK;
}

static struct lx_prov *prov_find(struct lx_sess *s, const char *name) {
  for (uint32_t i = 0; i < s->n_prov; i++)
    if (!strcmp(s->prov[i].name, name)) return &s->prov[i];
  return NULL;
}

/* the filter written to a provider's events: the user's @filter and etwd's own exclusions */
static char *combined_filter(const struct lx_sess *s, const char *filter) {
  const char *x = s->excl_str ? s->excl_str : "";
  size_t n = (filter ? strlen(filter) : 0) + strlen(x) + 16;
  char *c = malloc(n);
  if (c && filter && *filter && *x) snprintf(c, n, "(%s) && (%s)", filter, x);
  else if (c) snprintf(c, n, "%s", filter && *filter ? filter : *x ? x : "0");
  return c;
}

/* A provider without stacks joined a session in option mode (linux_stack.c): triggers from now
 * on. Best effort: on failure the option stays (the readers drop the extra stacks, counted). */
static void stacks_to_triggers(struct lx_sess *s) {
  enum etw_err rc = ETW_E_OK;
  for (uint32_t i = 0; i < s->n_prov && !rc; i++) {
    struct lx_prov *q = &s->prov[i];
    if (!q->enabled || !q->stacks) continue;
    char *comb = combined_filter(s, q->filter);
    if (!comb) return;
    rc = lx_stk_to_triggers(&s->stk, s->inst, q->name, q->events, q->n_events, comb, "", NULL);
    free(comb);
  }
  if (!rc) lx_stk_opt_off(&s->stk, s->inst);
}

/* Apply filters and enable the events of @p (validated). Called by the session owner (open,
 * enable: never concurrently); takes s->mu only to publish a new system to the readers. */
static enum etw_err apply_provider(struct lx_sess *s, const struct etw_provider_spec *p,
                                   const char *pfx, struct etw_status *st) {
  char field[96];
  char **evs = NULL;
  uint32_t nev = 0;
  enum etw_err rc = ETW_E_OK;
  if (p->n_events) {
    evs = calloc(p->n_events, sizeof *evs);
    if (!evs) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    for (uint32_t j = 0; j < p->n_events; j++) {
      evs[nev] = strdup(p->events[j]);
      if (!evs[nev]) {
        free_list(evs, nev);
        return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
      }
      nev++;
    }
  } else {
    char **all = tracefs_system_events(NULL, p->name);
    uint32_t n = 0;
    while (all && all[n]) n++;
    evs = calloc(n ? n : 1, sizeof *evs);
    if (!evs) {
      tracefs_list_free(all);
      return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    }
    for (uint32_t j = 0; j < n; j++)
      if ((evs[nev] = strdup(all[j]))) nev++;
    tracefs_list_free(all);
  }
  char *comb = combined_filter(s, p->filter);
  char kerr[400];
  if (!comb) {
    free_list(evs, nev);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  /* the provider's previous events (re-enable on a running session) */
  struct lx_prov *old = prov_find(s, p->name);
  if (old && old->enabled) tracefs_event_disable(s->inst, p->name, NULL);
  for (uint32_t j = 0; j < nev; j++) {
    if (p->filter && *p->filter &&
        write_filter(s, p->name, evs[j], p->filter, kerr, sizeof kerr) != 0) {
      snprintf(field, sizeof field, "%s/filter", pfx);
      rc = etw_fail(st, ETW_E_KERNEL, field, "the kernel rejected the filter for %s:%s: %s",
                    p->name, evs[j], kerr);
      break;
    }
    if (write_filter(s, p->name, evs[j], comb, kerr, sizeof kerr) != 0) {
      snprintf(field, sizeof field, "%s/filter", pfx);
      rc = etw_fail(st, ETW_E_KERNEL, field, "the kernel rejected the filter for %s:%s: %s",
                    p->name, evs[j], kerr);
      break;
    }
  }
  /* stacks: the old events' triggers off, the new ones' on (with the events' own filter) */
  if (!rc && old && old->stacks)
    lx_stk_set(&s->stk, s->inst, p->name, old->events, old->n_events, 0, NULL, pfx, NULL);
  if (!rc && p->stacks) rc = lx_stk_set(&s->stk, s->inst, p->name, evs, nev, 1, comb, pfx, st);
  free(comb);
  if (!rc) {
    pthread_mutex_lock(&s->mu);
    rc = ensure_system_locked(s, p->name);
    pthread_mutex_unlock(&s->mu);
    if (rc) etw_fail(st, rc, pfx, "too many providers");
  }
  for (uint32_t j = 0; !rc && j < nev; j++) {
    if (tracefs_event_enable(s->inst, p->name, evs[j]) != 0) {
      snprintf(field, sizeof field, "%s/events/%u", pfx, j);
      rc = etw_fail(st, ETW_E_KERNEL, field, "cannot enable %s:%s: %s", p->name, evs[j],
                    strerror(errno));
    }
  }
  if (rc) {
    tracefs_event_disable(s->inst, p->name, NULL);
    lx_stk_set(&s->stk, s->inst, p->name, evs, nev, 0, NULL, pfx, NULL);
    free_list(evs, nev);
    if (old) old->enabled = 0;
    return rc;
  }
  if (!old) {
    if (s->n_prov >= ETW_SPEC_MAX_PROVIDERS) {
      free_list(evs, nev);
      return etw_fail(st, ETW_E_LIMIT, pfx, "at most %d providers", ETW_SPEC_MAX_PROVIDERS);
    }
    old = &s->prov[s->n_prov++];
    memset(old, 0, sizeof *old);
    old->name = strdup(p->name);
  } else {
    free_list(old->events, old->n_events);
    free(old->filter);
  }
  old->events = evs;
  old->n_events = nev;
  old->filter = p->filter ? strdup(p->filter) : NULL;
  old->enabled = 1;
  old->stacks = p->stacks;
  return ETW_E_OK;
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
  r->batch_t0 = now_ns(CLOCK_MONOTONIC);
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

/* A spool write failed (disk full, EIO): the session fails at once, with the reason in its state,
 * and the snapshot thread writes the final trace.dat (everything spooled before the failure). */
static void file_failed(struct lx_rd *r) {
  struct lx_sess *s = r->s;
  if (atomic_exchange(&s->file_failed, 1)) return;
  int e = lx_tdat_error(s->tdat);
  pthread_mutex_lock(&s->mu);
  snprintf(s->file_msg, sizeof s->file_msg,
           "writing the recording failed on cpu%d: %s, after %llu bytes of pages; the session "
           "stopped and the trace.dat keeps every event written before",
           r->cpu, strerror(e), (unsigned long long)lx_tdat_bytes(s->tdat));
  pthread_cond_broadcast(&s->snap_cv);
  pthread_mutex_unlock(&s->mu);
  if (s->ended && !atomic_exchange(&s->ended_called, 1)) s->ended(s->ctx, ETW_E_IO, s->file_msg);
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
      if (r->sink.b && r->sink.b->n && now_ns(CLOCK_MONOTONIC) - r->batch_t0 >= LX_FLUSH_NS)
        publish(r);
    } else {
      ne = lx_count_page(&r->dec, r->page);
    }
    atomic_fetch_add_explicit(&r->raw_events, ne, memory_order_relaxed);
    /* after decoding (which only reads the page), so the page's event count goes with it */
    if (s->tdat && !atomic_load_explicit(&s->file_failed, memory_order_relaxed) &&
        lx_tdat_page(s->tdat, r->cpu, r->page, ne) != 0 && lx_tdat_error(s->tdat))
      file_failed(r);
  }
  return pages;
}

static void *reader_main(void *arg) {
  struct lx_rd *r = arg;
  struct lx_sess *s = r->s;
  pthread_mutex_lock(&s->mu);
  r->tid = (pid_t)syscall(SYS_gettid);
  { /* "etwd-s<session>-c<cpu>" in top -H, ps -L and /proc/<pid>/task/<tid>/comm */
    unsigned sid = 0;
    char tn[16];
    if (s->name) sscanf(s->name, "etwd_%u_", &sid);
    snprintf(tn, sizeof tn, "etwd-s%u-c%d", sid % 10000, r->cpu % 1000);
    pthread_setname_np(pthread_self(), tn);
  }
  if (atomic_load(&g_reader_pin)) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(r->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  int nice = atomic_load(&g_reader_nice);
  if (nice) setpriority(PRIO_PROCESS, (id_t)r->tid, nice); /* best effort */
  s->ready++;
  pthread_cond_broadcast(&s->cv);
  /* phase 1 (still inside open): once the providers are applied, build the decoder so that
   * start() finds every reader ready to read at once (a big system such as `syscalls` takes
   * tens of ms to parse, and events must not wait for that) */
  while (!s->go && !s->prep) pthread_cond_wait(&s->cv, &s->mu);
  if (s->go == 2) {
    pthread_mutex_unlock(&s->mu);
    return NULL;
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
  int64_t last_cal = now_ns(CLOCK_MONOTONIC);
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
    int64_t left = period - now_ns(CLOCK_MONOTONIC) % period; /* 1 ns .. 20 ms */
    struct timespec to = {0, (long)left};
    int woke = ppoll(pfd, 2, &to, NULL) > 0;
    if (woke && (pfd[1].revents & POLLIN)) { /* a poke: read now, as after a time-out */
      uint64_t v;
      if (read(pfd[1].fd, &v, sizeof v) < 0) v = 0;
      woke = (pfd[0].revents & POLLIN) != 0;
    }
    /* "order": "time": everything this CPU's buffer holds from before now is read by the drain
     * (1 ms less: an event reserved just before may be committed just after) */
    int64_t wm_mono = now_ns(CLOCK_MONOTONIC) - 1000000;
    int64_t wm = wm_mono + r->dec.mono_to_real;
    drain(r, 1 << 20);
    lx_comm_applied(s->cm, r->cpu, (uint64_t)wm_mono); /* the comm table: all of it decoded */
    int64_t t = now_ns(CLOCK_MONOTONIC);
    /* (no batch: an allocation failed; publish() retries it and reports the dropped events) */
    if (!r->sink.b || (r->sink.b->n && (!woke || t - r->batch_t0 >= LX_FLUSH_NS / 2))) publish(r);
    if (s->hub) etw_hub_tick(s->hub, (uint32_t)r->cpu, wm); /* "order": "time" */
    if (t - last_cal > 1000000000) {
      r->dec.mono_to_real = calib_offset();
      last_cal = t;
    }
  }
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

/* Room for a snapshot of @bytes beside @path: it needs a copy of the spools, and must leave as
 * much again for the spools to grow (else the refresh itself would fill the disk). */
static int snapshot_fits(const char *path, uint64_t bytes) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *sl = strrchr(dir, '/');
  if (sl) *sl = 0;
  struct statvfs v;
  if (statvfs(sl ? dir : ".", &v) != 0) return 1;
  uint64_t need = 2 * (bytes + (4u << 20)); /* + a generous header (the formats of syscalls) */
  return (uint64_t)v.f_bavail * v.f_frsize >= need;
}

/* The final write of a recording that failed: tracing off (nothing more can be kept), then the
 * trace.dat with everything spooled before the failure. Snapshot thread; s->mu not held. */
static void finalize_failed(struct lx_sess *s, char *const *sys) {
  pthread_mutex_lock(&s->mu);
  struct tracefs_instance *in = s->inst; /* removed only after stop() joined this thread */
  pthread_mutex_unlock(&s->mu);
  if (in) tracefs_trace_off(in);
  int e = 0, rc = lx_tdat_final(s->tdat, (const char *const *)sys, &e);
  pthread_mutex_lock(&s->mu);
  s->file_done = 1;
  if (rc)
    snprintf(s->file_error, sizeof s->file_error, "%s: %s",
             rc > 0 ? "the disk could not hold every page spooled (the file keeps the first ones)"
                    : "writing the trace.dat failed",
             strerror(e));
  pthread_mutex_unlock(&s->mu);
}

/* File mode: keep room for the final trace.dat's header with the formats of every system the
 * session has (linux_tdat.c). Any thread but the readers; s->mu not held. 0 or an errno. */
static int reserve_room(struct lx_sess *s) {
  if (!s->tdat) return 0;
  char *sys[ETW_SPEC_MAX_PROVIDERS + 1];
  uint32_t n = 0;
  pthread_mutex_lock(&s->mu);
  for (uint32_t i = 0; i < s->n_sys; i++)
    if ((sys[n] = strdup(s->systems[i]))) n++;
  sys[n] = NULL;
  pthread_mutex_unlock(&s->mu);
  int e = lx_tdat_reserve(s->tdat, (const char *const *)sys);
  for (uint32_t i = 0; i < n; i++) free(sys[i]);
  return e;
}

/* File mode: refresh the trace.dat about every second while it is small, so that it can be
 * downloaded during the recording; and write it for good as soon as a spool write fails. Never
 * touches the readers' hot path. */
static void *snapshot_main(void *arg) {
  struct lx_sess *s = arg;
  uint64_t last = 0;
  pthread_mutex_lock(&s->mu);
  while (!s->snap_quit) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += LX_SNAPSHOT_MS / 1000;
    if (!atomic_load(&s->file_failed)) pthread_cond_timedwait(&s->snap_cv, &s->mu, &dl);
    if (s->snap_quit) break;
    char *sys[ETW_SPEC_MAX_PROVIDERS + 1];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_sys; i++)
      if ((sys[n] = strdup(s->systems[i]))) n++;
    sys[n] = NULL;
    struct lx_tdat *t = s->tdat;
    pthread_mutex_unlock(&s->mu);
    int failed = atomic_load(&s->file_failed);
    if (t && failed) {
      finalize_failed(s, sys);
    } else if (t) {
      uint64_t b = lx_tdat_bytes(t);
      int e = 0;
      const char *note = NULL;
      if (b != last && b <= LX_SNAPSHOT_MAX) {
        if (!snapshot_fits(s->record_path, b))
          note = "paused: too little free disk space for a copy of the recording";
        else if (lx_tdat_snapshot(t, (const char *const *)sys, &e) == 0)
          last = b;
        else
          note = "failed";
      }
      pthread_mutex_lock(&s->mu);
      if (note)
        snprintf(s->snap_note, sizeof s->snap_note, "%s%s%s", note, e ? ": " : "", e ? strerror(e) : "");
      else if (b == last)
        s->snap_note[0] = 0;
      pthread_mutex_unlock(&s->mu);
    }
    for (uint32_t i = 0; i < n; i++) free(sys[i]);
    pthread_mutex_lock(&s->mu);
    if (failed) break;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ---- session lifecycle */

static void sess_free(struct lx_sess *s) {
  for (uint32_t i = 0; i < s->n_prov; i++) {
    free(s->prov[i].name);
    free_list(s->prov[i].events, s->prov[i].n_events);
    free(s->prov[i].filter);
  }
  for (uint32_t i = 0; i < s->n_sys; i++) free(s->systems[i]);
  lx_comm_free(s->cm);
  if (s->rd) {
    for (int i = 0; i < s->ncpu; i++) {
      struct lx_rd *r = &s->rd[i];
      if (r->dec_ok) lx_dec_fini(&r->dec);
      free_list(r->loaded, r->n_loaded);
      free(r->page);
    }
    free(s->rd);
  }
  if (s->tdat) lx_tdat_abort(s->tdat);
  lx_stkcfg_free(&s->stk); /* after the readers' decoders (they point into it) */
  free(s->saved);
  free(s->excl);
  free(s->excl_str);
  free(s->record_path);
  free(s->name);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  pthread_cond_destroy(&s->snap_cv);
  free(s);
}

/* Release the readers with @go (1 = read, 2 = quit) and, for quit, join them. */
static void release_readers(struct lx_sess *s, int go) {
  pthread_mutex_lock(&s->mu);
  if (!s->go) s->go = go;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void join_readers(struct lx_sess *s) {
  for (int i = 0; i < s->ncpu; i++) {
    struct lx_rd *r = &s->rd[i];
    if (r->th_ok) pthread_join(r->th, NULL);
    r->th_ok = 0;
  }
}

static void close_fds(struct lx_sess *s) {
  for (int i = 0; i < s->ncpu; i++) {
    struct lx_rd *r = &s->rd[i];
    if (r->tcpu) tracefs_cpu_free_fd(r->tcpu);
    r->tcpu = NULL;
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
  }
}

static void remove_instance(struct lx_sess *s) {
  if (!s->inst) return;
  tracefs_trace_off(s->inst);
  tracefs_event_disable(s->inst, NULL, NULL);
  close_fds(s);
  pthread_mutex_lock(&s->mu);
  s->saved = calloc((size_t)s->ncpu, sizeof *s->saved);
  for (int i = 0; s->saved && i < s->ncpu; i++)
    cpu_stats(s, i, &s->saved[i][0], &s->saved[i][1], &s->saved[i][2]);
  struct tracefs_instance *in = s->inst;
  s->inst = NULL; /* stats() now reports the saved values */
  pthread_mutex_unlock(&s->mu);
  for (int tries = 0; tries < 50; tries++) {
    if (tracefs_instance_destroy(in) == 0 || !tracefs_instance_exists(s->name)) break;
    usleep(10000);
  }
  tracefs_instance_free(in);
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > LX_MAX_CPUS) n = LX_MAX_CPUS;
  return (int)n;
}

/* The comm table's sources (realtime sessions): task:task_newtask and task:task_rename — every
 * new task and every comm change, a record per fork, exec or rename — enabled in the instance
 * without a filter unless the user's own `task` provider has them; those etwd enabled for
 * itself are hidden from the stream (s->hide). Called by the session owner after any change to
 * the providers; best effort (without them names come from /proc). */
static void task_internal(struct lx_sess *s) {
  static const char *const ev[2] = {"task_newtask", "task_rename"};
  if (!s->cm || !s->inst || !lx_event_exists("task", ev[0])) return;
  pthread_mutex_lock(&s->mu);
  struct lx_prov *p = prov_find(s, "task");
  unsigned hide = 0;
  for (int i = 0; i < 2; i++) {
    int user = p && p->enabled && !p->n_events;
    for (uint32_t j = 0; p && p->enabled && j < p->n_events; j++)
      user |= !strcmp(p->events[j], ev[i]);
    if (user) continue;
    char kerr[64];
    write_filter(s, "task", ev[i], "0", kerr, sizeof kerr);
    if (tracefs_event_enable(s->inst, "task", ev[i]) == 0) hide |= 1u << i;
  }
  if (hide) ensure_system_locked(s, "task");
  atomic_store(&s->hide, hide);
  pthread_mutex_unlock(&s->mu);
}

static enum etw_err lx_open(const struct etw_backend_args *a, void **state, struct etw_status *st) {
  const struct etw_session_spec *sp = a->spec;
  *state = NULL;
  if (!a->os_name || strncmp(a->os_name, ETW_SESSION_PREFIX, strlen(ETW_SESSION_PREFIX)) ||
      !lx_valid_name(a->os_name))
    return etw_fail(st, ETW_E_INVALID, NULL, "bad instance name");
  if (sp->buffer_kb && (sp->buffer_kb < LX_BUF_KB_MIN || sp->buffer_kb > LX_BUF_KB_MAX))
    return etw_fail(st, ETW_E_INVALID, "/buffer_kb", "buffer_kb must be %d..%d (KiB per CPU), got %u",
                    LX_BUF_KB_MIN, LX_BUF_KB_MAX, sp->buffer_kb);
  if (!(sp->mode & (ETW_MODE_REALTIME | ETW_MODE_FILE | ETW_MODE_FLIGHT)))
    return etw_fail(st, ETW_E_INVALID, "/mode", "mode must be realtime, file, both or flight");
  if ((sp->mode & ETW_MODE_FILE) && !a->record_path)
    return etw_fail(st, ETW_E_INVALID, "/mode", "file mode needs a recording path");
  if (sp->n_providers > ETW_SPEC_MAX_PROVIDERS)
    return etw_fail(st, ETW_E_INVALID, "/providers", "at most %d providers", ETW_SPEC_MAX_PROVIDERS);
  if (sp->n_pids > ETW_SPEC_MAX_PIDS)
    return etw_fail(st, ETW_E_INVALID, "/pids", "at most %d pids", ETW_SPEC_MAX_PIDS);
  if (sp->n_exe_names)
    return etw_fail(st, ETW_E_UNSUPPORTED, "/exe_names", "the linux backend does not filter by executable name");
  for (uint32_t i = 0; i < sp->n_providers; i++) {
    char pfx[48];
    snprintf(pfx, sizeof pfx, "/providers/%u", i);
    enum etw_err rc = check_provider(&sp->providers[i], pfx, st);
    if (rc) return rc;
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(sp->providers[k].name, sp->providers[i].name)) {
        snprintf(pfx, sizeof pfx, "/providers/%u/name", i);
        return etw_fail(st, ETW_E_INVALID, pfx, "provider '%s' listed twice", sp->providers[i].name);
      }
  }
  /* pid list → task ids (all threads of each process) */
  char *pidlist = NULL;
  size_t pl_len = 0, pl_cap = 0;
  uint32_t ntids = 0;
  for (uint32_t i = 0; i < sp->n_pids; i++) {
    char path[64], field[32];
    snprintf(path, sizeof path, "/proc/%u/task", sp->pids[i]);
    DIR *d = sp->pids[i] ? opendir(path) : NULL;
    if (!d) {
      free(pidlist);
      snprintf(field, sizeof field, "/pids/%u", i);
      return etw_fail(st, ETW_E_INVALID, field, "no process with pid %u", sp->pids[i]);
    }
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!isdigit((unsigned char)de->d_name[0]) || ntids >= LX_MAX_PIDS_TIDS) continue;
      if (pl_len + 24 > pl_cap) {
        size_t nc = pl_cap ? pl_cap * 2 : 256;
        char *np = realloc(pidlist, nc);
        if (!np) break;
        pidlist = np;
        pl_cap = nc;
      }
      pl_len += (size_t)snprintf(pidlist + pl_len, pl_cap - pl_len, "%s ", de->d_name);
      ntids++;
    }
    closedir(d);
  }

  struct lx_sess *s = calloc(1, sizeof *s);
  if (!s) {
    free(pidlist);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  etw_cond_init_mono(&s->snap_cv);
  s->name = strdup(a->os_name);
  s->hub = a->hub;
  s->mode = sp->mode;
  s->lim_events = sp->max_events;
  s->lim_bytes = (sp->mode & ETW_MODE_FILE) ? (uint64_t)sp->max_file_mb << 20 : 0;
  s->ended = a->ended;
  s->ctx = a->ctx;
  s->page_size = getpagesize();
  s->ncpu = online_cpus();
  s->rd = calloc((size_t)s->ncpu, sizeof *s->rd);
  s->excl = calloc(LX_MAX_EXCL, sizeof *s->excl);
  if (sp->mode & ETW_MODE_REALTIME) s->cm = lx_comm_new(s->ncpu); /* NULL: names from /proc */
  enum etw_err rc = ETW_E_OK;
  if (!s->name || !s->rd || !s->excl) {
    rc = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    goto fail;
  }
  for (int i = 0; i < s->ncpu; i++) s->rd[i].fd = -1;
  if (tracefs_instance_exists(a->os_name)) {
    rc = etw_fail(st, ETW_E_EXISTS, NULL, "tracefs instance %s already exists", a->os_name);
    goto fail;
  }
  s->inst = tracefs_instance_create(a->os_name);
  if (!s->inst) {
    rc = etw_fail(st, errno == EPERM || errno == EACCES ? ETW_E_PERM : ETW_E_KERNEL, NULL,
                  "cannot create tracefs instance %s: %s", a->os_name, strerror(errno));
    goto fail;
  }
  g_add(s);
  ensure_system_locked(s, "ftrace"); /* markers (linux_marker.c): ftrace/print, decoded and recorded */
  tracefs_trace_off(s->inst);
  if (tracefs_instance_file_write(s->inst, "trace_clock", "mono") < 0) {
    rc = etw_fail(st, ETW_E_KERNEL, NULL, "cannot set trace_clock=mono: %s", strerror(errno));
    goto fail;
  }
  tracefs_option_disable(s->inst, TRACEFS_OPTION_OVERWRITE);
  uint32_t bkb = sp->buffer_kb ? sp->buffer_kb : LX_BUF_KB_DEFAULT;
  if (tracefs_instance_set_buffer_size(s->inst, bkb, -1) < 0) {
    rc = etw_fail(st, ETW_E_KERNEL, "/buffer_kb", "cannot set buffer_size_kb=%u: %s", bkb,
                  strerror(errno));
    goto fail;
  }
  if (pidlist) {
    tracefs_option_enable(s->inst, TRACEFS_OPTION_EVENT_FORK);
    if (tracefs_instance_file_write(s->inst, "set_event_pid", pidlist) < 0) {
      rc = etw_fail(st, ETW_E_KERNEL, "/pids", "the kernel rejected set_event_pid: %s", strerror(errno));
      goto fail;
    }
  }
  if (sp->mode & ETW_MODE_FILE) {
    char err[256];
    s->record_path = strdup(a->record_path);
    s->tdat = lx_tdat_open(a->record_path, s->ncpu, s->page_size, err, sizeof err);
    if (!s->tdat || !s->record_path) {
      rc = etw_fail(st, ETW_E_IO, NULL, "cannot record to the file: %s", err);
      goto fail;
    }
  }
  /* per-CPU fds, then the reader threads (parked until start) */
  for (int i = 0; i < s->ncpu; i++) {
    struct lx_rd *r = &s->rd[i];
    char f[64];
    r->s = s;
    r->cpu = i;
    snprintf(f, sizeof f, "per_cpu/cpu%d/trace_pipe_raw", i);
    r->fd = tracefs_instance_file_open(s->inst, f, O_RDONLY | O_NONBLOCK);
    if (r->fd < 0 || !(r->tcpu = tracefs_cpu_alloc_fd(r->fd, s->page_size, true))) {
      rc = etw_fail(st, ETW_E_KERNEL, NULL, "cannot open %s: %s", f, strerror(errno));
      goto fail;
    }
  }
  for (int i = 0; i < s->ncpu; i++) {
    if (pthread_create(&s->rd[i].th, NULL, reader_main, &s->rd[i]) != 0) {
      rc = etw_fail(st, ETW_E_NOMEM, NULL, "cannot create reader thread");
      goto fail;
    }
    s->rd[i].th_ok = 1;
  }
  pthread_mutex_lock(&s->mu);
  while (s->ready < s->ncpu) pthread_cond_wait(&s->cv, &s->mu);
  s->must[s->n_must++] = getpid();
  for (int i = 0; i < s->ncpu; i++) s->must[s->n_must++] = s->rd[i].tid;
  excl_self_tasks(s);
  s->excl_str = excl_build(s);
  pthread_mutex_unlock(&s->mu);
  if (!s->excl_str) {
    rc = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    goto fail;
  }
  s->stk.opt = sp->n_providers > 0; /* every provider wants stacks: option mode (linux_stack.c) */
  for (uint32_t i = 0; i < sp->n_providers; i++) s->stk.opt &= !!sp->providers[i].stacks;
  for (uint32_t i = 0; i < sp->n_providers && !rc; i++) {
    char pfx[48];
    snprintf(pfx, sizeof pfx, "/providers/%u", i);
    rc = apply_provider(s, &sp->providers[i], pfx, st);
  }
  if (rc) goto fail;
  task_internal(s);
  int re = reserve_room(s);
  if (re) {
    rc = etw_fail(st, ETW_E_IO, "/mode", "no room beside %s for the recording: %s", a->record_path,
                  strerror(re));
    goto fail;
  }
  /* let the readers build their decoders now, in parallel, and wait for them */
  pthread_mutex_lock(&s->mu);
  s->prep = 1;
  pthread_cond_broadcast(&s->cv);
  while (s->prepared < s->ncpu) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  free(pidlist);
  *state = s;
  return ETW_E_OK;
fail:
  free(pidlist);
  release_readers(s, 2);
  join_readers(s);
  remove_instance(s);
  g_del(s);
  sess_free(s);
  return rc;
}

static enum etw_err lx_enable(void *vs, const struct etw_provider_spec *p, struct etw_status *st) {
  struct lx_sess *s = vs;
  /* (a NULL instance would mean the top-level tracing instance to libtracefs: never) */
  if (s->stopped || !s->inst) return etw_fail(st, ETW_E_STATE, NULL, "the session is stopped");
  /* field pointers as for providers[0]; the session manager rewrites the prefix */
  enum etw_err rc = check_provider(p, "/providers/0", st);
  if (rc) return rc;
  /* etwd's threads are re-read: workers started since open are excluded from these events too */
  s->n_excl = 0;
  excl_self_tasks(s);
  char *ex = excl_build(s);
  if (ex) {
    free(s->excl_str);
    s->excl_str = ex;
  }
  /* no session lock across the kernel writes (enabling all of `syscalls` takes ~1 s): the
   * readers only take it briefly to learn new systems */
  rc = apply_provider(s, p, "/providers/0", st);
  if (!rc && !p->stacks && lx_stk_can_trigger(&s->stk)) stacks_to_triggers(s);
  if (!strcmp(p->name, "task")) task_internal(s);
  /* a new system's formats go into the final header: keep room for them (best effort: without
   * it the final write makes room by removing the last snapshot) */
  if (!rc) reserve_room(s);
  return rc;
}

static enum etw_err lx_disable(void *vs, const char *provider, struct etw_status *st) {
  struct lx_sess *s = vs;
  if (!s->inst) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  pthread_mutex_lock(&s->mu);
  struct lx_prov *p = provider ? prov_find(s, provider) : NULL;
  if (!p || !p->enabled) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_NOT_FOUND, NULL, "provider '%s' is not enabled in this session",
                    provider ? provider : "(null)");
  }
  int r = tracefs_event_disable(s->inst, provider, NULL);
  if (p->stacks) lx_stk_set(&s->stk, s->inst, provider, p->events, p->n_events, 0, NULL, "", NULL);
  p->enabled = p->stacks = 0;
  pthread_mutex_unlock(&s->mu);
  if (!strcmp(provider, "task")) task_internal(s);
  if (r != 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot disable %s: %s", provider, strerror(errno));
  return ETW_E_OK;
}

static enum etw_err lx_start(void *vs, struct etw_status *st) {
  struct lx_sess *s = vs;
  if (s->started) return etw_fail(st, ETW_E_STATE, NULL, "the session was already started");
  if (s->stopped || !s->inst) return etw_fail(st, ETW_E_STATE, NULL, "the session was stopped");
  s->started = 1;
  atomic_store(&s->mono_to_real, calib_offset());
  if (tracefs_trace_on(s->inst) != 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot turn tracing on: %s", strerror(errno));
  release_readers(s, 1);
  if (s->tdat && pthread_create(&s->snap_th, NULL, snapshot_main, s) == 0) s->snap_started = 1;
  return ETW_E_OK;
}

static void lx_stop(void *vs) {
  struct lx_sess *s = vs;
  if (s->stopped) return;
  s->stopped = 1;
  if (s->inst) tracefs_trace_off(s->inst);
  atomic_store_explicit(&s->stopping, 1, memory_order_release);
  release_readers(s, 2);
  join_readers(s);
  if (s->snap_started) {
    pthread_mutex_lock(&s->mu);
    s->snap_quit = 1;
    pthread_cond_broadcast(&s->snap_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->snap_th, NULL);
    s->snap_started = 0;
  }
  if (s->tdat) {
    struct lx_tdat *t = s->tdat;
    int e = 0, rc = lx_tdat_final(t, (const char *const *)s->systems, &e);
    pthread_mutex_lock(&s->mu);
    s->file_bytes = lx_tdat_bytes(t);
    s->file_lost_pages = lx_tdat_lost_pages(t);
    s->file_events = lx_tdat_events(t);
    s->tdat = NULL;
    if (rc && !s->file_done)
      snprintf(s->file_error, sizeof s->file_error, "%s: %s",
               rc > 0 ? "the disk could not hold every page spooled (the file keeps the first ones)"
                      : "writing the trace.dat failed",
               strerror(e));
    s->file_done = 1;
    pthread_mutex_unlock(&s->mu);
    lx_tdat_abort(t);
  }
}

static void lx_destroy(void *vs) {
  struct lx_sess *s = vs;
  if (!s) return;
  lx_stop(s);
  remove_instance(s);
  g_del(s);
  sess_free(s);
}

/* per_cpu/cpuN/stats: "overrun: N", "dropped events: N", "entries: N"; after the instance was
 * removed, the values saved at removal. Caller holds s->mu. */
static void cpu_stats(struct lx_sess *s, int cpu, uint64_t *ov, uint64_t *dr, uint64_t *en) {
  char f[64];
  *ov = *dr = *en = 0;
  if (!s->inst) {
    if (s->saved) {
      *ov = s->saved[cpu][0];
      *dr = s->saved[cpu][1];
      *en = s->saved[cpu][2];
    }
    return;
  }
  snprintf(f, sizeof f, "per_cpu/cpu%d/stats", cpu);
  char *txt = tracefs_instance_file_read(s->inst, f, NULL);
  if (!txt) return;
  char *save = NULL;
  for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    unsigned long long v;
    if (sscanf(line, "overrun: %llu", &v) == 1) *ov = v;
    else if (sscanf(line, "dropped events: %llu", &v) == 1) *dr = v;
    else if (sscanf(line, "entries: %llu", &v) == 1) *en = v;
  }
  free(txt);
}

static void lx_stats(void *vs, struct etw_backend_stats *o) {
  struct lx_sess *s = vs;
  memset(o, 0, sizeof *o);
  pthread_mutex_lock(&s->mu); /* cpu_stats reads the instance; cleanup() may remove it */
  for (int i = 0; i < s->ncpu; i++) {
    uint64_t ov, dr, en;
    cpu_stats(s, i, &ov, &dr, &en);
    o->kernel_overrun += ov;
    o->kernel_dropped += dr;
    o->read_events += atomic_load(&s->rd[i].raw_events);
    o->read_bytes += atomic_load(&s->rd[i].raw_bytes);
    o->decode_errors += atomic_load(&s->rd[i].dec.undecoded);
  }
  pthread_mutex_unlock(&s->mu);
  o->kernel_lost = o->kernel_overrun + o->kernel_dropped;
}

/* events read and page bytes recorded: atomics only (the core's limit thread asks every 100 ms;
 * stats() reads the kernel's per-CPU files) */
static void lx_progress(void *vs, uint64_t *events, uint64_t *file_bytes) {
  struct lx_sess *s = vs;
  uint64_t n = 0;
  for (int i = 0; i < s->ncpu; i++) n += atomic_load_explicit(&s->rd[i].raw_events, memory_order_relaxed);
  *events = n;
  pthread_mutex_lock(&s->mu); /* lx_stop clears s->tdat under it before freeing it */
  *file_bytes = s->tdat ? lx_tdat_bytes(s->tdat) : s->file_bytes;
  pthread_mutex_unlock(&s->mu);
}

static void lx_stats_json(void *vs, struct etw_jw *w) {
  struct lx_sess *s = vs;
  pthread_mutex_lock(&s->mu);
  etw_jw_lit(w, "\"per_cpu\":[");
  for (int i = 0; i < s->ncpu; i++) {
    uint64_t ov, dr, en;
    cpu_stats(s, i, &ov, &dr, &en);
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"cpu\":");
    etw_jw_u64(w, (uint64_t)i);
    etw_jw_lit(w, ",\"overrun\":");
    etw_jw_u64(w, ov);
    etw_jw_lit(w, ",\"dropped\":");
    etw_jw_u64(w, dr);
    etw_jw_lit(w, ",\"entries\":");
    etw_jw_u64(w, en);
    etw_jw_lit(w, ",\"read_events\":");
    etw_jw_u64(w, atomic_load(&s->rd[i].raw_events));
    etw_jw_lit(w, ",\"read_bytes\":");
    etw_jw_u64(w, atomic_load(&s->rd[i].raw_bytes));
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
  if (s->cm) { /* Execution.ProcessName: the comm table and what it cost */
    uint64_t in = 0;
    for (int i = 0; i < s->ncpu; i++) in += atomic_load(&s->rd[i].dec.internal);
    pthread_mutex_lock(&s->cm->mu);
    uint64_t ch = s->cm->changes, ev = s->cm->evicted;
    pthread_mutex_unlock(&s->cm->mu);
    etw_jw_lit(w, ",\"comm_table\":{\"internal_events\":");
    etw_jw_u64(w, in);
    etw_jw_lit(w, ",\"changes\":");
    etw_jw_u64(w, ch);
    etw_jw_lit(w, ",\"evicted\":");
    etw_jw_u64(w, ev);
    etw_jw_lit(w, ",\"waits\":");
    etw_jw_u64(w, atomic_load(&s->cm->waits));
    etw_jw_lit(w, ",\"wait_timeouts\":");
    etw_jw_u64(w, atomic_load(&s->cm->wait_timeouts));
    etw_jw_ch(w, '}');
  }
  if (s->lim_events || s->lim_bytes) {
    etw_jw_lit(w, ",\"limit_skipped\":");
    etw_jw_u64(w, atomic_load(&s->lim_skipped));
  }
  if (s->record_path) {
    etw_jw_lit(w, ",\"trace_clock\":\"mono\",\"file_bytes\":");
    etw_jw_u64(w, s->tdat ? lx_tdat_bytes(s->tdat) : s->file_bytes);
    etw_jw_lit(w, ",\"file_lost_pages\":");
    etw_jw_u64(w, s->tdat ? lx_tdat_lost_pages(s->tdat) : s->file_lost_pages);
    etw_jw_lit(w, ",\"file_events\":");
    etw_jw_u64(w, s->tdat ? lx_tdat_events(s->tdat) : s->file_events);
    etw_jw_lit(w, ",\"file_complete\":");
    etw_jw_bool(w, s->file_done);
    if (s->file_msg[0]) {
      etw_jw_lit(w, ",\"file_failure\":");
      etw_jw_cs(w, s->file_msg);
    }
    if (s->file_error[0]) {
      etw_jw_lit(w, ",\"file_error\":");
      etw_jw_cs(w, s->file_error);
    }
    if (s->snap_note[0]) {
      etw_jw_lit(w, ",\"file_snapshots\":");
      etw_jw_cs(w, s->snap_note);
    }
  }
  pthread_mutex_unlock(&s->mu);
}

/* every tracefs instance, ours ("etwd": true, with its owner's liveness) and others' */
static enum etw_err lx_list_os_sessions(struct etw_jw *w, struct etw_status *st) {
  (void)st;
  char **names = tracefs_instances(NULL);
  etw_jw_ch(w, '[');
  for (int i = 0; names && names[i]; i++) {
    int ours = !strncmp(names[i], ETW_SESSION_PREFIX, strlen(ETW_SESSION_PREFIX));
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, names[i]);
    etw_jw_lit(w, ",\"etwd\":");
    etw_jw_bool(w, ours);
    if (ours) {
      etw_jw_lit(w, ",\"owner_alive\":");
      etw_jw_bool(w, !etw_os_name_is_stale(names[i]));
    }
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
  tracefs_list_free(names);
  return ETW_E_OK;
}

const struct etw_backend etw_backend_linux = {
    .name = "linux",
    .caps = ETW_CAP_LIVE | ETW_CAP_FILE | ETW_CAP_LIST_PROVIDERS | ETW_CAP_FILTER_PID |
            ETW_CAP_FILTER_EXPR | ETW_CAP_ENABLE_RUNNING | ETW_CAP_EVENT_NAMES | ETW_CAP_BUFFER_SIZE |
            ETW_CAP_ORDER_TIME | LX_CAPS_EXT | ETW_CAP_STACKS | ETW_CAP_SINKS_BUILT,
    .buffer_kb_min = LX_BUF_KB_MIN,
    .buffer_kb_max = LX_BUF_KB_MAX,
    .init = lx_init,
    .open = lx_open,
    .enable = lx_enable,
    .disable = lx_disable,
    .start = lx_start,
    .stop = lx_stop,
    .destroy = lx_destroy,
    .stats = lx_stats,
    .stats_json = lx_stats_json,
    .list_providers = lx_list_providers,
    .describe_provider = lx_describe_provider,
    .cleanup = lx_cleanup,
    .list_os_sessions = lx_list_os_sessions,
    .progress = lx_progress,
    .ext = &lx_ext,
};
struct tracefs_instance *lx_sess_inst(void *s, char *const **sys) { *sys = ((struct lx_sess *)s)->systems; return ((struct lx_sess *)s)->inst; }
