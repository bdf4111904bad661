/* win_sess.h — the win backend's session state, shared by win_backend.c (open, consumer, stop,
 * stats) and win_flight.c (mode "flight": flight_start, snapshot). Windows builds only.
 * Ownership: win_backend.c creates and frees a struct win_sess; the session manager calls every
 * entry point with the session's lock held (backend.h), and s->mu orders them against stop. */
#ifndef ETWCORE_WIN_SESS_H
#define ETWCORE_WIN_SESS_H

#include <windows.h>
#include <evntrace.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "etwcore/backend.h"
#include "etwcore/etl.h"
#include "etwcore/winreq.h"

struct win_prov {
  GUID guid;
  char name[256];
  struct etw_win_enable en;
};

/* (provider, id, version) → schema looked up with TDH already (found or not) */
struct tried {
  unsigned char guid[16];
  uint16_t id;
  uint8_t version, used;
};

struct win_sess {
  struct etw_backend_args args;
  char name[ETW_WIN_NAME_MAX];       /* UTF-8 */
  wchar_t wname[ETW_WIN_NAME_MAX];
  int attach, created, kernel;       /* kernel: the session carries kernel events */
  uint32_t kflags;                   /* the kernel flags asked for (EnableFlags or system providers) */
  int mk;                            /* etwd's provider's keyword bit + 1 (win_marker.c), 0: none */
  struct etw_win_session_cfg cfg;
  TRACEHANDLE h;                     /* from StartTraceW (created only) */
  TRACEHANDLE ph;                    /* from OpenTraceW */
  struct win_prov *prov;
  uint32_t n_prov;
  pthread_mutex_t mu;
  pthread_t th, flusher;
  int started, joined, flusher_on;
  atomic_int stop, os_stopped;
  /* consumer-thread state */
  struct etw_decoder *dec;
  struct etw_stk *stk; /* images/methods seen, and the events' own stack-trace items (`stacks`) */
  struct etw_batch *b;
  struct tried *tried;
  uint32_t n_tried;
  unsigned char *tei;
  /* counters */
  atomic_uint_fast64_t events, bytes, errors, tdh_misses, unparsed, proc_dropped;
  struct etw_win_props_stats last; /* at stop */
  int have_last;
  /* mode "flight" (win_flight.c; written under s->mu, read by stats_json) */
  uint32_t n_snapshots;
  uint64_t last_snapshot_events;   /* events in the last snapshot, as the ETL reader read them */
  struct etw_etl_trim_stats trim;  /* the last snapshot's "flight_s" trim (flight_s > 0) */
};

/** win_sess_enable_all - enable etwd's marker provider, the spec's providers and the system
 *  providers of kernel events in the created session @s (open for the other modes; flight_start
 *  for mode "flight", so that an armed flight recorder records nothing). s->mu held or the
 *  session not yet visible. */
enum etw_err win_sess_enable_all(struct win_sess *s, struct etw_status *st);

/** win_ncpu - the machine's processors (all groups), as the backend counted them at init. */
uint32_t win_ncpu(void);

/** the backend's table of optional operations (win_flight.c): markers, flight, snapshot */
extern const struct etw_backend_ext win_ext;

#endif
