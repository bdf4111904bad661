/* linux_backend.c — the Linux backend: tracing sessions on tracefs instances. This file holds the
 * backend's table, init/cleanup and the instance lifecycle (open/start/stop/destroy); the rest of
 * a session is in linux_enable.c (providers), linux_reader.c (reader threads), linux_record.c
 * (file mode) and linux_stats.c (stats); linux_sess.h holds the session's state.
 *
 * One session = one tracefs instance named args->os_name (ETW_SESSION_PREFIX + id), created by
 * open() and removed by stop() (after the readers' final drain and the final trace.dat: a
 * stopped session holds no kernel buffers), else by destroy() on every path (and by cleanup()
 * at exit: g_live lists this process's instances). open() creates the instance, the per-CPU fds
 * and the reader threads (parked), applies the providers and waits until every reader has built
 * its decoder; start() turns tracing on and releases the readers; stop() turns it off, joins
 * them, finishes the recording and removes the instance (its loss counters saved for stats).
 *
 * Choices (see docs/linux.md):
 *  - overwrite off: when a per-CPU buffer is full the kernel drops the NEW events and counts them
 *    (linux_stats.c); what is in the buffer is never clobbered while we read it.
 *  - trace_clock "mono" (CLOCK_MONOTONIC); UTC = mono + (REALTIME - MONOTONIC), calibrated at
 *    start and re-calibrated by every reader each second (linux_reader.c).
 *  - etwd's own threads are excluded by the kernel filter, ANDed with the user's filter
 *    (linux_enable.c): the readers exist before any event is enabled for that.
 *  - PID filter: set_event_pid with every thread of each listed process, plus option event-fork
 *    so tasks they create later are traced too.
 *  - buffer 4 MiB per CPU unless the spec says otherwise (the kernel's 1408 KiB lasts < 20 ms
 *    at 1 M events/s per CPU).
 *
 * Threads: open/enable/disable/start/stop/destroy are called by the session manager (one at a
 * time per session, any thread); cleanup() at exit. The session mutex guards what linux_sess.h
 * says; it is never held across kernel writes.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tracefs.h>

#include "etwcore/util.h"
#include "linux/linux_sess.h"

void lx_free_list(char **l, uint32_t n) {
  if (!l) return;
  for (uint32_t i = 0; i < n; i++) free(l[i]);
  free(l);
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

static void remove_instance(struct lx_sess *s);

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

/* ---- session lifecycle */

static void sess_free(struct lx_sess *s) {
  for (uint32_t i = 0; i < s->n_prov; i++) {
    free(s->prov[i].name);
    lx_free_list(s->prov[i].events, s->prov[i].n_events);
    free(s->prov[i].filter);
  }
  for (uint32_t i = 0; i < s->n_sys; i++) free(s->systems[i]);
  lx_comm_free(s->cm);
  if (s->rd) {
    for (int i = 0; i < s->ncpu; i++) {
      struct lx_rd *r = &s->rd[i];
      if (r->dec_ok) lx_dec_fini(&r->dec);
      lx_free_list(r->loaded, r->n_loaded);
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

static void close_fds(struct lx_sess *s) {
  for (int i = 0; i < s->ncpu; i++) {
    struct lx_rd *r = &s->rd[i];
    if (r->tcpu) tracefs_cpu_free_fd(r->tcpu);
    r->tcpu = NULL;
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
  }
}

/* Tracing off, fds closed, the kernel's counters saved for stats(), the instance removed. */
static void remove_instance(struct lx_sess *s) {
  if (!s->inst) return;
  tracefs_trace_off(s->inst);
  tracefs_event_disable(s->inst, NULL, NULL);
  close_fds(s);
  pthread_mutex_lock(&s->mu);
  s->saved = calloc((size_t)s->ncpu, sizeof *s->saved);
  for (int i = 0; s->saved && i < s->ncpu; i++)
    lx_cpu_stats(s, i, &s->saved[i][0], &s->saved[i][1], &s->saved[i][2]);
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

/* ---- open */

/* The spec and the arguments, before anything is created. */
static enum etw_err check_spec(const struct etw_backend_args *a, struct etw_status *st) {
  const struct etw_session_spec *sp = a->spec;
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
    enum etw_err rc = lx_check_provider(&sp->providers[i], pfx, st);
    if (rc) return rc;
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(sp->providers[k].name, sp->providers[i].name)) {
        snprintf(pfx, sizeof pfx, "/providers/%u/name", i);
        return etw_fail(st, ETW_E_INVALID, pfx, "provider '%s' listed twice", sp->providers[i].name);
      }
  }
  return ETW_E_OK;
}

/* pid list → task ids (all threads of each process), as set_event_pid takes them: *@out is
 * "tid tid … " (malloc'd) or NULL (no pids). */
static enum etw_err pid_list(const struct etw_session_spec *sp, char **out, struct etw_status *st) {
  char *pidlist = NULL;
  size_t pl_len = 0, pl_cap = 0;
  uint32_t ntids = 0;
  *out = NULL;
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
  *out = pidlist;
  return ETW_E_OK;
}

/* A new session's memory (no kernel object yet); NULL only if the struct itself failed. */
static struct lx_sess *sess_new(const struct etw_backend_args *a) {
  const struct etw_session_spec *sp = a->spec;
  struct lx_sess *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  etw_cond_init_mono(&s->snap_cv);
  s->name = strdup(a->os_name);
  s->hub = a->hub;
  s->mode = sp->mode;
  s->lim_events = sp->max_events;
  s->flight_ns = (int64_t)(sp->flight_s * 1e9);
  s->lim_bytes = (sp->mode & ETW_MODE_FILE) ? (uint64_t)sp->max_file_mb << 20 : 0;
  s->ended = a->ended;
  s->ctx = a->ctx;
  s->page_size = getpagesize();
  s->ncpu = online_cpus();
  s->rd = calloc((size_t)s->ncpu, sizeof *s->rd);
  s->excl = calloc(LX_MAX_EXCL, sizeof *s->excl);
  if (sp->mode & ETW_MODE_REALTIME) s->cm = lx_comm_new(s->ncpu); /* NULL: names from /proc */
  return s;
}

/* The instance: created (in g_live), tracing off, clock mono, overwrite off, buffer size, pids;
 * in file mode the recording's spools. */
static enum etw_err instance_setup(struct lx_sess *s, const struct etw_backend_args *a,
                                   const char *pidlist, struct etw_status *st) {
  const struct etw_session_spec *sp = a->spec;
  if (tracefs_instance_exists(a->os_name))
    return etw_fail(st, ETW_E_EXISTS, NULL, "tracefs instance %s already exists", a->os_name);
  s->inst = tracefs_instance_create(a->os_name);
  if (!s->inst)
    return etw_fail(st, errno == EPERM || errno == EACCES ? ETW_E_PERM : ETW_E_KERNEL, NULL,
                    "cannot create tracefs instance %s: %s", a->os_name, strerror(errno));
  g_add(s);
  lx_sys_add_locked(s, "ftrace"); /* markers (linux_marker.c): ftrace/print, decoded and recorded */
  tracefs_trace_off(s->inst);
  if (tracefs_instance_file_write(s->inst, "trace_clock", "mono") < 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot set trace_clock=mono: %s", strerror(errno));
  tracefs_option_disable(s->inst, TRACEFS_OPTION_OVERWRITE);
  uint32_t bkb = sp->buffer_kb ? sp->buffer_kb : LX_BUF_KB_DEFAULT;
  if (tracefs_instance_set_buffer_size(s->inst, bkb, -1) < 0)
    return etw_fail(st, ETW_E_KERNEL, "/buffer_kb", "cannot set buffer_size_kb=%u: %s", bkb,
                    strerror(errno));
  ssize_t got = tracefs_instance_get_buffer_size(s->inst, 0); /* what the kernel made of it */
  s->buffer_kb = got > 0 ? (uint64_t)got : bkb;
  if (pidlist) {
    tracefs_option_enable(s->inst, TRACEFS_OPTION_EVENT_FORK);
    if (tracefs_instance_file_write(s->inst, "set_event_pid", pidlist) < 0)
      return etw_fail(st, ETW_E_KERNEL, "/pids", "the kernel rejected set_event_pid: %s", strerror(errno));
  }
  if (sp->mode & ETW_MODE_FILE) {
    char err[256];
    s->record_path = strdup(a->record_path);
    s->tdat = lx_tdat_open(a->record_path, s->ncpu, s->page_size, err, sizeof err);
    if (!s->tdat || !s->record_path)
      return etw_fail(st, ETW_E_IO, NULL, "cannot record to the file: %s", err);
  }
  return ETW_E_OK;
}

/* Per-CPU fds, then the reader threads (parked until start); once every reader has told its
 * thread id, the expression that keeps etwd's threads out of the filters. */
static enum etw_err readers_create(struct lx_sess *s, struct etw_status *st) {
  for (int i = 0; i < s->ncpu; i++) {
    struct lx_rd *r = &s->rd[i];
    char f[64];
    r->s = s;
    r->cpu = i;
    snprintf(f, sizeof f, "per_cpu/cpu%d/trace_pipe_raw", i);
    r->fd = tracefs_instance_file_open(s->inst, f, O_RDONLY | O_NONBLOCK);
    if (r->fd < 0 || !(r->tcpu = tracefs_cpu_alloc_fd(r->fd, s->page_size, true)))
      return etw_fail(st, ETW_E_KERNEL, NULL, "cannot open %s: %s", f, strerror(errno));
  }
  for (int i = 0; i < s->ncpu; i++) {
    if (pthread_create(&s->rd[i].th, NULL, lx_reader_main, &s->rd[i]) != 0)
      return etw_fail(st, ETW_E_NOMEM, NULL, "cannot create reader thread");
    s->rd[i].th_ok = 1;
  }
  pthread_mutex_lock(&s->mu);
  while (s->ready < s->ncpu) pthread_cond_wait(&s->cv, &s->mu);
  s->must[s->n_must++] = getpid();
  for (int i = 0; i < s->ncpu; i++) s->must[s->n_must++] = s->rd[i].tid;
  lx_excl_self_tasks(s);
  s->excl_str = lx_excl_build(s);
  pthread_mutex_unlock(&s->mu);
  if (!s->excl_str) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  return ETW_E_OK;
}

/* The spec's providers, the comm table's task events, the recording's reserve. */
static enum etw_err providers_setup(struct lx_sess *s, const struct etw_backend_args *a,
                                    struct etw_status *st) {
  const struct etw_session_spec *sp = a->spec;
  enum etw_err rc = ETW_E_OK;
  s->stk.opt = sp->n_providers > 0; /* every provider wants stacks: option mode (linux_stack.c) */
  for (uint32_t i = 0; i < sp->n_providers; i++) /* (a list of stack events: triggers) */
    s->stk.opt &= sp->providers[i].stacks && !sp->providers[i].n_stack_events;
  for (uint32_t i = 0; i < sp->n_providers && !rc; i++) {
    char pfx[48];
    snprintf(pfx, sizeof pfx, "/providers/%u", i);
    rc = lx_apply_provider(s, &sp->providers[i], pfx, st);
  }
  if (rc) return rc;
  lx_task_internal(s);
  int re = lx_rec_reserve(s);
  if (re)
    return etw_fail(st, ETW_E_IO, "/mode", "no room beside %s for the recording: %s", a->record_path,
                    strerror(re));
  return ETW_E_OK;
}

static enum etw_err lx_open(const struct etw_backend_args *a, void **state, struct etw_status *st) {
  *state = NULL;
  enum etw_err rc = check_spec(a, st);
  if (rc) return rc;
  char *pidlist = NULL;
  rc = pid_list(a->spec, &pidlist, st);
  if (rc) return rc;
  struct lx_sess *s = sess_new(a);
  if (!s) {
    free(pidlist);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  if (!s->name || !s->rd || !s->excl) {
    rc = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    goto fail;
  }
  for (int i = 0; i < s->ncpu; i++) s->rd[i].fd = -1;
  if ((rc = instance_setup(s, a, pidlist, st)) || (rc = readers_create(s, st)) ||
      (rc = providers_setup(s, a, st)))
    goto fail;
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
  lx_release_readers(s, 2);
  lx_join_readers(s);
  remove_instance(s);
  g_del(s);
  sess_free(s);
  return rc;
}

/* ---- start, stop, destroy */

static enum etw_err lx_start(void *vs, struct etw_status *st) {
  struct lx_sess *s = vs;
  if (s->started) return etw_fail(st, ETW_E_STATE, NULL, "the session was already started");
  if (s->stopped || !s->inst) return etw_fail(st, ETW_E_STATE, NULL, "the session was stopped");
  s->started = 1;
  atomic_store(&s->mono_to_real, lx_calib_offset());
  if (tracefs_trace_on(s->inst) != 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot turn tracing on: %s", strerror(errno));
  lx_release_readers(s, 1);
  lx_rec_start(s);
  return ETW_E_OK;
}

void lx_stop(void *vs) {
  struct lx_sess *s = vs;
  if (s->stopped) return;
  s->stopped = 1;
  if (s->inst) tracefs_trace_off(s->inst);
  atomic_store_explicit(&s->stopping, 1, memory_order_release);
  lx_release_readers(s, 2);
  lx_join_readers(s); /* each reader drained its CPU's buffer (tracing off) before it ended */
  lx_rec_stop(s);
  /* nothing needs the kernel's buffers any more (a stopped session cannot start, enable,
   * take markers or snapshots): free them now, not at delete; stats() keeps the counters */
  remove_instance(s);
}

static void lx_destroy(void *vs) {
  struct lx_sess *s = vs;
  if (!s) return;
  lx_stop(s);
  remove_instance(s);
  g_del(s);
  sess_free(s);
}

const struct etw_backend etw_backend_linux = {
    .name = "linux",
    .caps = ETW_CAP_LIVE | ETW_CAP_FILE | ETW_CAP_LIST_PROVIDERS | ETW_CAP_FILTER_PID |
            ETW_CAP_FILTER_EXPR | ETW_CAP_ENABLE_RUNNING | ETW_CAP_EVENT_NAMES | ETW_CAP_BUFFER_SIZE |
            ETW_CAP_ORDER_TIME | LX_CAPS_EXT | ETW_CAP_STACKS | ETW_CAP_STACK_EVENTS | ETW_CAP_SINKS_BUILT,
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
