/* linux_flight.c — flight mode of the Linux backend (mode "flight", POST …/snapshot), and the
 * backend's table of optional operations (lx_ext).
 *
 * A flight session is the session's instance with `options/overwrite` on (the ring buffer keeps
 * the newest events; the kernel has no tracefs snapshot) and tracing on, while its reader
 * threads stay parked: nothing is read, streamed or recorded. A snapshot turns tracing off,
 * drains every CPU's `per_cpu/cpuN/trace_pipe_raw` (its own non-blocking fds, raw pages) into a
 * new trace.dat through linux_tdat.c, and turns tracing on again: events of the drain's duration
 * (milliseconds) are not traced, and what a snapshot wrote is gone from the buffers.
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
#include "linux_int.h"

static enum etw_err lx_flight_start(void *s, struct etw_status *st) {
  char *const *sys;
  struct tracefs_instance *in = lx_sess_inst(s, &sys);
  if (!in) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  if (tracefs_option_enable(in, TRACEFS_OPTION_OVERWRITE) < 0 || tracefs_trace_on(in) != 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot start the flight recorder: %s", strerror(errno));
  return ETW_E_OK;
}

static enum etw_err lx_snapshot(void *s, const char *path, uint64_t *bytes, struct etw_status *st) {
  char *const *sys;
  struct tracefs_instance *in = lx_sess_inst(s, &sys);
  if (!in) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  int psz = getpagesize();
  char err[256] = "";
  unsigned char *page = malloc((size_t)psz);
  struct lx_tdat *t = page ? lx_tdat_open(path, (int)ncpu, psz, err, sizeof err) : NULL;
  if (!t) {
    free(page);
    return etw_fail(st, ETW_E_IO, NULL, "cannot write the snapshot: %s", err[0] ? err : strerror(ENOMEM));
  }
  tracefs_trace_off(in);
  int rc = 0;
  for (int cpu = 0; cpu < ncpu && !rc; cpu++) {
    char f[64];
    snprintf(f, sizeof f, "per_cpu/cpu%d/trace_pipe_raw", cpu);
    int fd = tracefs_instance_file_open(in, f, O_RDONLY | O_NONBLOCK);
    if (fd < 0) continue; /* not a possible CPU */
    ssize_t n;
    while ((n = read(fd, page, (size_t)psz)) > 0) /* whole pages; EAGAIN: this CPU is drained */
      if (lx_tdat_page(t, cpu, page, 0)) {
        rc = -1;
        break;
      }
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
