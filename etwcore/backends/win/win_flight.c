/* win_flight.c — flight mode of the win backend (mode "flight", POST …/snapshot), and the
 * backend's table of optional operations (win_ext).
 *
 * A flight session is an ETW session in EVENT_TRACE_BUFFERING_MODE: no real-time consumer, no
 * file; ETW keeps the newest events in a ring of MinimumBuffers × BufferSize in memory
 * (etw_win_flight_cfg sizes it from buffer_kb per processor). win_open starts it empty;
 * flight_start enables the providers (so an armed recorder records nothing before its trigger).
 *
 * A snapshot is ControlTraceW(EVENT_TRACE_CONTROL_UPDATE) with a new LogFileName: the documented
 * way to "flush a buffering mode trace to a new log file" (ControlTrace, LogFileNameOffset;
 * xperf -flush; WPR's memory mode saves its snapshots so, and "does not flush the content of the
 * in-memory buffer space when you save the content": the session goes on in memory and a later
 * snapshot holds the older events again if they are still in the ring — unlike Linux, where a
 * snapshot drains the buffers). Every other member of the block is the session's own (the
 * same EnableFlags, LogFileMode, FlushTimer), so the update changes only the file.
 * The file is taken as complete when ETW's call has returned, its size has stopped changing and
 * the project's ETL reader reads it to the end without damage (SNAP_WAIT_MS at most); otherwise
 * the snapshot fails with what was seen. With "flight_s" ETW writes to "<path>.full" and
 * etw_etl_trim keeps the buffers holding events of the last flight_s seconds (now, by the system
 * clock, minus flight_s; the reader's event times are UTC from the file's own clock reference)
 * in <path>, then "<path>.full" is removed: whole buffers, so up to one buffer per processor
 * begins before the window, as the Linux recorder's pages.
 * None of this has been observed on Windows (no machine here): `etwd selftest` has a "flight"
 * step that proves or refutes it on the user's machine. Under wine ControlTraceW is a stub that
 * writes nothing, so a snapshot fails there with "no file" (tests/e2e/test_wine_flight.py).
 *
 * Threads: flight_start and snapshot are called by the session manager with the session's lock
 * held; s->mu orders them against stop (win_backend.c).
 */
#ifdef _WIN32
#include <windows.h>
#include <evntrace.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "etwcore/etl.h"
#include "etwcore/winprov.h"
#include "etwcore/winreq.h"
#include "win_marker.h"
#include "win_sess.h"

#define SNAP_WAIT_MS 5000 /* for the snapshot file to be complete after ControlTraceW returned */
#define SNAP_POLL_MS 100

static enum etw_err win_flight_start(void *sv, struct etw_status *st) {
  struct win_sess *s = sv;
  pthread_mutex_lock(&s->mu);
  enum etw_err e = s->started ? etw_fail(st, ETW_E_STATE, NULL, "already started") : win_sess_enable_all(s, st);
  if (!e) {
    s->started = 1;
    s->joined = 1; /* no consumer thread: ETW keeps the events in its ring */
  }
  pthread_mutex_unlock(&s->mu);
  return e;
}

static long long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* read @path to the end with the ETL reader: its event count, or -1 with the reason in @why */
static long long etl_events(const char *path, char *why, size_t n) {
  struct etw_status st;
  etw_status_clear(&st);
  struct etw_etl_reader *r = etw_etl_reader_new();
  long long k = -1;
  if (!r) snprintf(why, n, "out of memory");
  else if (etw_etl_reader_add_file(r, path, &st)) snprintf(why, n, "%.300s", st.msg);
  else {
    const struct etw_rec *rec;
    int rc;
    k = 0;
    while ((rc = etw_etl_reader_next_ref(r, &rec, &st)) == 1) k++;
    if (rc < 0) {
      snprintf(why, n, "%.300s", st.msg);
      k = -1;
    }
  }
  etw_etl_reader_free(r);
  return k;
}

/* wait until ETW's file @path is complete: a stable size and a clean read; its events or -1 */
static long long wait_complete(const char *path, char *why, size_t n) {
  long long last = -2, events = -1;
  snprintf(why, n, "no file appeared");
  for (int t = 0; t <= SNAP_WAIT_MS; t += SNAP_POLL_MS) {
    long long sz = file_size(path);
    if (sz > 0 && sz == last && (events = etl_events(path, why, n)) >= 0) return events;
    if (sz >= 0 && sz == last) {
      char r[320];
      snprintf(r, sizeof r, "%.300s", why);
      snprintf(why, n, "the file stays at %lld bytes but does not read whole: %s", sz, r);
    }
    last = sz;
    Sleep(SNAP_POLL_MS);
  }
  return -1;
}

/* flight_s: keep the buffers of @full holding events of the last @win_s seconds in @path */
static enum etw_err trim_window(struct win_sess *s, const char *full, const char *path, double win_s,
                                long long *events, struct etw_status *st) {
  FILETIME ft;
  GetSystemTimeAsFileTime(&ft);
  uint64_t now = (uint64_t)ft.dwHighDateTime << 32 | ft.dwLowDateTime;
  uint64_t w = (uint64_t)(win_s * 1e7);
  enum etw_err e = etw_etl_trim(full, path, now > w ? now - w : 0, &s->trim, st);
  if (!e) *events = (long long)s->trim.events_kept;
  return e;
}

static enum etw_err win_snapshot(void *sv, const char *path, uint64_t *bytes, struct etw_status *st) {
  struct win_sess *s = sv;
  pthread_mutex_lock(&s->mu);
  double win_s = s->args.spec->flight_s;
  char full[4200], file[ETW_WIN_PATH_MAX * 3], why[400];
  snprintf(full, sizeof full, "%s.full", path);
  const char *target = win_s > 0 ? full : path; /* with flight_s ETW's file is trimmed into @path */
  if (snprintf(file, sizeof file, "%s", target) >= (int)sizeof file) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_INVALID, NULL, "the snapshot's path is too long for ETW");
  }
  for (char *p = file; *p; p++)
    if (*p == '/') *p = '\\';
  unsigned char *q = malloc(ETW_ETP_MAX);
  size_t len = 0;
  enum etw_err e = q ? etw_win_props_build(q, ETW_ETP_MAX, &s->cfg, win_ncpu(), s->name, file, &len, st)
                     : etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  if (!e) {
    ULONG rc = ControlTraceW(s->h, NULL, (EVENT_TRACE_PROPERTIES *)q, EVENT_TRACE_CONTROL_UPDATE);
    if (rc != ERROR_SUCCESS) e = etw_win_error(rc, "ControlTraceW(UPDATE with the snapshot's file)", s->kernel, st);
  }
  free(q);
  long long events = e ? -1 : wait_complete(target, why, sizeof why);
  if (!e && events < 0)
    e = etw_fail(st, ETW_E_IO, NULL,
                 "ETW accepted the snapshot (ControlTraceW UPDATE returned success) but %s at %s within %d s%s", why,
                 target, SNAP_WAIT_MS / 1000,
                 etw_win_wine_version() ? " (wine's ControlTraceW is a stub: no ETW file is ever written there)" : "");
  if (!e && win_s > 0) e = trim_window(s, full, path, win_s, &events, st);
  if (win_s > 0) remove(full);
  if (!e) {
    s->n_snapshots++;
    s->last_snapshot_events = (uint64_t)events;
    *bytes = (uint64_t)file_size(path);
  }
  pthread_mutex_unlock(&s->mu);
  return e;
}

static enum etw_err win_marker(void *sv, const char *text, struct etw_status *st) {
  return etw_win_marker_write(((struct win_sess *)sv)->mk, text, st);
}

const struct etw_backend_ext win_ext = {
    .marker = win_marker,
    .flight_start = win_flight_start,
    .snapshot = win_snapshot,
};

#endif /* _WIN32 */
