/* linux_marker.c — markers of the Linux backend: POST /api/v1/sessions/{id}/markers.
 *
 * A marker is a write to the session instance's own `trace_marker`: the kernel turns it into
 * an ftrace `print` event (shown by trace-cmd as `tracing_mark_write`) in that instance only, on
 * the writing CPU, in time order with the other events. The readers decode it like any event
 * (the backend loads the "ftrace" system's formats into every session, and the recording's
 * header carries them), so it appears in the stream as provider "ftrace", event "print", field
 * "buf" = the text (the kernel appends a newline when there is none), and in the trace.dat.
 *
 * Threads: called by the session manager with the session's lock held, so the instance is
 * neither stopped nor removed meanwhile. One open/write/close per marker (rare, admin-only).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <tracefs.h>

#include "linux_int.h"

enum etw_err lx_marker(void *s, const char *text, struct etw_status *st) {
  char *const *sys;
  struct tracefs_instance *in = lx_sess_inst(s, &sys);
  if (!in) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  int fd = tracefs_instance_file_open(in, "trace_marker", O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot open the instance's trace_marker: %s", strerror(errno));
  size_t n = strlen(text);
  ssize_t w = write(fd, n ? text : "\n", n ? n : 1); /* the kernel refuses an empty write */
  int e = errno;
  close(fd);
  if (w < 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "the kernel refused the marker: %s", strerror(e));
  return ETW_E_OK;
}
