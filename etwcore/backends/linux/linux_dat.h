/* linux_dat.h — reading a trace.dat (trace-cmd's file format: the ones etwd writes, and those
 * of `trace-cmd record`/`extract`) for `etwd convert` (linux_dat.c; built only on Linux, with
 * Debian's libtracecmd). The events come out in time order (every CPU and buffer instance of the
 * file merged), each encoded by the live stream's decoder (linux_decode.c) into the same
 * `"System":{…},"EventData":{…}}` text, with `,"Stack":[…]` when stack records follow the event
 * (as the live stream joins them). Single-threaded: the convert CLI. */
#ifndef ETWD_LINUX_DAT_H
#define ETWD_LINUX_DAT_H

#include <stddef.h>
#include <stdint.h>

#include "etwcore/event.h"

struct lx_dat;

/* One event: its text (valid until the next lx_dat_next) and its header for filtering. */
struct lx_dat_ev {
  const char *txt; /* `"System":{…},"EventData":{…}[,"Stack":[…]]}` (or `,"Undecoded":…`), not NUL-terminated */
  size_t len;
  struct etw_evref ref; /* provider (the tracefs system), name, ts_ns (UTC), pid, tid, cpu, id */
  int undecoded;        /* 1 = the decoder had no format for it ("Undecoded") */
};

/** lx_dat_open - open the trace.dat at @path; NULL with the reason in @err. @max_bytes bounds
 *  one event's text. */
struct lx_dat *lx_dat_open(const char *path, size_t max_bytes, char *err, size_t errlen);
/** lx_dat_next - the next event in time order: 1, or 0 at the end. Events whose text did not
 *  fit are skipped and counted (lx_dat_dropped). */
int lx_dat_next(struct lx_dat *r, struct lx_dat_ev *ev);
/** lx_dat_dropped - events skipped: their text did not fit @max_bytes or found no memory. */
uint64_t lx_dat_dropped(const struct lx_dat *r);
/** lx_dat_lost - events the kernel lost before they were recorded, as the file's pages say
 *  (ring buffer full); *@unknown: pages that say events were lost without their number. */
uint64_t lx_dat_lost(const struct lx_dat *r, uint64_t *unknown);
/** lx_dat_clock_guessed - 1 when the file's times are not wall-clock times (trace clock mono,
 *  local…) and UTC was taken as the clock's offset on this machine now (right for a recording
 *  made since this boot). */
int lx_dat_clock_guessed(const struct lx_dat *r);
/** lx_dat_other_boot - 1 when the file's boot-based times lie beyond this machine's uptime: it
 *  was recorded before the last boot (or elsewhere), and its guessed times are surely wrong. */
int lx_dat_other_boot(const struct lx_dat *r);
/** lx_dat_damage - NULL, or what is wrong with the file when it was found truncated inside its
 *  CPU data (its events up to the cut are read: lx_dat_check). */
const char *lx_dat_damage(const struct lx_dat *r);
/** lx_dat_stacks - stack records joined to their events, and orphaned (no event to take them:
 *  an interrupted event's, a stream's first), since @r was opened (the process's counters: one
 *  reader at a time). */
void lx_dat_stacks(const struct lx_dat *r, uint64_t *joined, uint64_t *orphaned);
void lx_dat_close(struct lx_dat *r);
/** lx_dat_check - before libtracecmd reads @path (linux_datchk.c): 0 = whole, or not a version
 *  6 file (not checked); 1 = truncated inside its CPU data: *@fd is an anonymous copy whose
 *  tables say only what the file holds (whole events before the cut), @msg says what is missing;
 *  -1 = truncated where nothing can be read, or no copy could be made (@msg says which). */
int lx_dat_check(const char *path, int *fd, char *msg, size_t msglen);

#endif
