/* linux_flight.c — flight mode of the Linux backend (mode "flight", POST …/snapshot), and the
 * backend's table of optional operations (lx_ext).
 *
 * A flight session is the session's instance with `options/overwrite` on (the ring buffer keeps
 * the newest events; the kernel has no tracefs snapshot) and tracing on, while its reader
 * threads stay parked: nothing is read, streamed or recorded. A snapshot turns tracing off,
 * drains every CPU's `per_cpu/cpuN/trace_pipe_raw` (its own non-blocking fds, raw pages) into a
 * new trace.dat through linux_tdat.c, and turns tracing on again: events of the drain's duration
 * (milliseconds) are not traced, and what a snapshot wrote is gone from the buffers. With
 * "flight_s" a snapshot keeps only the last flight_s seconds, in whole pages: a CPU's page is
 * dropped when the next page of that CPU began before now - flight_s (a page header's
 * timestamp is its first event's, in the instance's clock: mono), so every event of the window
 * is kept and at most one page per CPU begins before it. What is dropped is gone too.
 * Threads: called by the session manager with the session's lock held (see backend.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tracefs.h>

#include "etwcore/backend.h"
#include "linux/linux_sess.h"

static enum etw_err lx_flight_start(void *s, struct etw_status *st) {
  char *const *sys;
  struct tracefs_instance *in = lx_sess_inst(s, &sys);
  if (!in) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  if (tracefs_option_enable(in, TRACEFS_OPTION_OVERWRITE) < 0 || tracefs_trace_on(in) != 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot start the flight recorder: %s", strerror(errno));
  return ETW_E_OK;
}

/* One CPU's pages (whole pages; EAGAIN: drained) into @t, oldest first. A page is held until
 * the next one is read: it is dropped when that one began before @cut (INT64_MIN: none is). */
static int drain_cpu(struct lx_tdat *t, int cpu, int fd, unsigned char *page, int psz, int64_t cut) {
  unsigned char *held = page + psz; /* (the caller's buffer holds two pages) */
  int have = 0;
  while (read(fd, page, (size_t)psz) > 0) {
    uint64_t ts;
    memcpy(&ts, page, sizeof ts); /* the page header's timestamp */
    if (have && (cut == INT64_MIN || (int64_t)ts >= cut) && lx_tdat_page(t, cpu, held, 0)) return -1;
    memcpy(held, page, (size_t)psz);
    have = 1;
  }
  return have && lx_tdat_page(t, cpu, held, 0) ? -1 : 0;
}

static enum etw_err lx_snapshot(void *s, const char *path, uint64_t *bytes, struct etw_status *st) {
  char *const *sys;
  struct tracefs_instance *in = lx_sess_inst(s, &sys);
  if (!in) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  int psz = getpagesize();
  char err[256] = "";
  unsigned char *page = malloc(2 * (size_t)psz); /* a page read and the one held (drain_cpu) */
  struct lx_tdat *t = page ? lx_tdat_open(path, (int)ncpu, psz, err, sizeof err) : NULL;
  if (!t) {
    free(page);
    return etw_fail(st, ETW_E_IO, NULL, "cannot write the snapshot: %s", err[0] ? err : strerror(ENOMEM));
  }
  tracefs_trace_off(in);
  int64_t win = ((struct lx_sess *)s)->flight_ns;
  int64_t cut = win > 0 ? lx_now_ns(CLOCK_MONOTONIC) - win : INT64_MIN;
  int rc = 0;
  for (int cpu = 0; cpu < ncpu && !rc; cpu++) {
    char f[64];
    snprintf(f, sizeof f, "per_cpu/cpu%d/trace_pipe_raw", cpu);
    int fd = tracefs_instance_file_open(in, f, O_RDONLY | O_NONBLOCK);
    if (fd < 0) continue; /* not a possible CPU */
    rc = drain_cpu(t, cpu, fd, page, psz, cut);
    close(fd);
  }
  tracefs_trace_on(in);
  free(page);
  int e = 0;
  *bytes = lx_tdat_bytes(t);
  int fin = lx_tdat_finish(t, (const char *const *)sys, &e);
  if (rc || fin)
    return etw_fail(st, ETW_E_IO, NULL, "the snapshot could not be written whole: %s", strerror(e ? e : EIO));
  return ETW_E_OK;
}

const struct etw_backend_ext lx_ext = {
    .marker = lx_marker,
    .flight_start = lx_flight_start,
    .snapshot = lx_snapshot,
};
