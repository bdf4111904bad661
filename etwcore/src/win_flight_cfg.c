/* win_flight_cfg.c — the portable half of mode "flight" on Windows (winreq.h): how a flight
 * spec maps onto an ETW session kept in memory only. Pure function; compiled on every OS and
 * unit-tested on Linux (tests/unit/test_win_flight.c).
 *
 * The documented ETW behaviour it relies on (Microsoft Learn, Win32 ETW reference):
 * - "Logging Mode Constants": EVENT_TRACE_BUFFERING_MODE (0x400) — the session keeps its events
 *   in memory, the newest overwriting the oldest (xperf's "InBuffer" sessions, "Xperf Profile
 *   Overview": "save data in memory, overwriting the oldest data … must be saved to a snapshot
 *   file"; wpr's "Memory" logging mode).
 * - "Configuring and Starting an AutoLogger Session", LogFileMode: with
 *   EVENT_TRACE_BUFFERING_MODE the system ignores MaximumBuffers: the ring is MinimumBuffers ×
 *   BufferSize. Hence min_buffers carries the size and max_buffers = min_buffers.
 * - A ring of a size, not of a time: nothing in these pages bounds the ring by age, so
 *   "flight_s" does not size it; the snapshot keeps the last flight_s seconds of what the ring
 *   held, in whole buffers (etw_etl_trim, win_flight.c).
 * The Win32 half (flight_start, the snapshot) is etwcore/backends/win/win_flight.c.
 */
#include <string.h>

#include "etwcore/winreq.h"

enum etw_err etw_win_flight_cfg(const struct etw_session_spec *s, uint32_t ncpu, struct etw_win_session_cfg *c,
                                struct etw_status *st) {
  memset(c, 0, sizeof *c);
  if (s->mode != ETW_MODE_FLIGHT)
    return etw_fail(st, ETW_E_INVALID, "/mode", "etw_win_flight_cfg needs mode \"flight\"");
  if (s->win.set && (s->win.min_buffers || s->win.max_buffers || s->win.max_file_mb || s->win.circular))
    return etw_fail(st, ETW_E_INVALID, "/win",
                    "a flight session's ring is sized by buffer_kb: /win buffers and file settings do not apply");
  uint64_t n = ncpu ? ncpu : 1;
  uint64_t per_cpu_kb = s->buffer_kb ? s->buffer_kb : ETW_WIN_FLIGHT_KB_DEFAULT;
  uint64_t total_kb = per_cpu_kb * n;
  if (total_kb > (uint64_t)ETW_WIN_FLIGHT_TOTAL_MB_MAX * 1024)
    return etw_fail(st, ETW_E_INVALID, "/buffer_kb",
                    "/buffer_kb %llu × %llu processors exceeds the flight ring's %u MB (ETW buffers are "
                    "non-paged memory)",
                    (unsigned long long)per_cpu_kb, (unsigned long long)n, ETW_WIN_FLIGHT_TOTAL_MB_MAX);
  uint64_t nbuf = (total_kb + ETW_WIN_FLIGHT_BUF_KB - 1) / ETW_WIN_FLIGHT_BUF_KB;
  if (nbuf < 2 * n) nbuf = 2 * n; /* the system minimum: 2 buffers per processor */
  c->buffer_kb = ETW_WIN_FLIGHT_BUF_KB;
  c->min_buffers = (uint32_t)nbuf;
  c->max_buffers = (uint32_t)nbuf;
  c->buffering = 1;
  c->clock = 1;
  if (s->win.set) {
    c->flush_s = s->win.flush_s;
    if (s->win.clock) c->clock = s->win.clock;
  }
  return ETW_E_OK;
}
