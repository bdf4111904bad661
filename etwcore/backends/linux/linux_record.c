/* linux_record.c — file mode of a Linux session, around the trace.dat writer (linux_tdat.c):
 * the snapshot thread, which rewrites the trace.dat about once a second while it is small
 * (LX_SNAPSHOT_MAX) so that it can be downloaded during the recording; the reserve that keeps
 * room for the final header; the failure of a spool write (disk full: the session fails and the
 * final trace.dat is written at once); and the final write at stop.
 *
 * Threads and ownership: the session owns the lx_tdat (s->tdat; the readers append pages to it,
 * one writer per CPU). The snapshot thread (one per file-mode session, started by start(),
 * joined by stop() before the final write) only reads the spools; it and the readers set the
 * file-mode messages (file_msg, file_error, snap_note, file_done) under s->mu, where stats_json
 * reads them. stop() clears s->tdat under s->mu before freeing it.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include <tracefs.h>

#include "etwcore/util.h"
#include "linux/linux_sess.h"

/* A spool write failed (disk full, EIO): the session fails at once, with the reason in its state,
 * and the snapshot thread writes the final trace.dat (everything spooled before the failure).
 * Reader thread. */
void lx_rec_spool_failed(struct lx_rd *r) {
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

/* file_error from lx_tdat_final's result @rc (not 0) and errno @e. Caller holds s->mu. */
static void final_error(struct lx_sess *s, int rc, int e) {
  snprintf(s->file_error, sizeof s->file_error, "%s: %s",
           rc > 0 ? "the disk could not hold every page spooled (the file keeps the first ones)"
                  : "writing the trace.dat failed",
           strerror(e));
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
  if (rc) final_error(s, rc, e);
  pthread_mutex_unlock(&s->mu);
}

/* File mode: keep room for the final trace.dat's header with the formats of every system the
 * session has (linux_tdat.c). Any thread but the readers; s->mu not held. 0 or an errno. */
int lx_rec_reserve(struct lx_sess *s) {
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

/* One refresh: rewrite the trace.dat if it grew (*@last: the size of the last snapshot) and is
 * still small, and say in snap_note why it was not. Snapshot thread; s->mu not held. */
static void snapshot_once(struct lx_sess *s, struct lx_tdat *t, char *const *sys, uint64_t *last) {
  uint64_t b = lx_tdat_bytes(t);
  int e = 0;
  const char *note = NULL;
  if (b != *last && b <= LX_SNAPSHOT_MAX) {
    if (!snapshot_fits(s->record_path, b))
      note = "paused: too little free disk space for a copy of the recording";
    else if (lx_tdat_snapshot(t, (const char *const *)sys, &e) == 0)
      *last = b;
    else
      note = "failed";
  }
  pthread_mutex_lock(&s->mu);
  if (note)
    snprintf(s->snap_note, sizeof s->snap_note, "%s%s%s", note, e ? ": " : "", e ? strerror(e) : "");
  else if (b == *last)
    s->snap_note[0] = 0;
  pthread_mutex_unlock(&s->mu);
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
    if (t && failed)
      finalize_failed(s, sys);
    else if (t)
      snapshot_once(s, t, sys, &last);
    for (uint32_t i = 0; i < n; i++) free(sys[i]);
    pthread_mutex_lock(&s->mu);
    if (failed) break;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* start(): the snapshot thread of a file-mode session (none: the file is written at stop). */
void lx_rec_start(struct lx_sess *s) {
  if (s->tdat && pthread_create(&s->snap_th, NULL, snapshot_main, s) == 0) s->snap_started = 1;
}

/* stop(), after the readers are joined: the snapshot thread ends, the final trace.dat is written
 * (unless a spool failure wrote it already) and s->tdat freed; its counters stay for stats. */
void lx_rec_stop(struct lx_sess *s) {
  if (s->snap_started) {
    pthread_mutex_lock(&s->mu);
    s->snap_quit = 1;
    pthread_cond_broadcast(&s->snap_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->snap_th, NULL);
    s->snap_started = 0;
  }
  if (!s->tdat) return;
  struct lx_tdat *t = s->tdat;
  int e = 0, rc = lx_tdat_final(t, (const char *const *)s->systems, &e);
  pthread_mutex_lock(&s->mu);
  s->file_bytes = lx_tdat_bytes(t);
  s->file_lost_pages = lx_tdat_lost_pages(t);
  s->file_events = lx_tdat_events(t);
  s->tdat = NULL;
  if (rc && !s->file_done) final_error(s, rc, e);
  s->file_done = 1;
  pthread_mutex_unlock(&s->mu);
  lx_tdat_abort(t);
}
