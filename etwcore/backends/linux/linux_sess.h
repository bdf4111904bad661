/* linux_sess.h — one Linux (tracefs) session: its state (struct lx_sess), its readers' state
 * (struct lx_rd), the backend's tunables, and the functions the session's files share:
 *
 * linux_backend.c  the backend table, init/cleanup, open/start/stop/destroy (instance lifecycle)
 * linux_enable.c   providers in a session: checks, filters, etwd's exclusions, enable/disable
 * linux_reader.c   the reader threads (one per CPU): poll, drain, decode, publish
 * linux_record.c   file mode: the snapshot thread, the reserve, the final trace.dat
 * linux_stats.c    stats, progress, stats_json, the list of tracefs instances
 *
 * Threads and ownership: open/enable/disable/start/stop/destroy are called by the session manager
 * (one at a time per session, any thread); stats/stats_json from any thread before destroy.
 * s->mu guards the systems the readers must know, the instance pointer, the file-mode messages
 * and the snapshot thread; it is never held across kernel writes. Each reader owns its lx_rd
 * (decoder, batch, page); the snapshot thread only reads the spools.
 */
#ifndef ETWD_LINUX_SESS_H
#define ETWD_LINUX_SESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "etwcore/backend.h"
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

struct lx_prov {
  char *name;
  char **events; /* enabled event names (owned) */
  uint32_t n_events;
  char *filter;  /* user's filter or NULL */
  /* events[0..n_filtered) took the filter; the rest lack a field it names and run without it
   * (linux_enable.c write_filters; the session's stats list them: linux_stats.c) */
  uint32_t n_filtered;
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
  int stk_waited; /* the last poll kept the batch back for a held event's stacks (lx_stk_waiting) */
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
  uint64_t buffer_kb; /* per-CPU buffer size the kernel took, read back at open (stats) */
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
  int64_t flight_ns; /* mode flight: a snapshot keeps the pages of the last flight_ns (0 = all) */
  _Atomic uint64_t lim_ev_taken, lim_b_taken, lim_skipped;
  struct lx_stkcfg stk; /* stacks: triggers, userstacktrace, the events that want them */
  /* realtime: the comm table (linux_comm.c) and the task events etwd enabled for it alone,
   * hidden from the stream (LX_HIDE_*; readers pick changes up at their next page) */
  struct lx_comm *cm;
  atomic_uint hide;
};

static inline int64_t lx_now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* linux_backend.c */
void lx_free_list(char **l, uint32_t n);
void lx_stop(void *vs);

/* linux_enable.c (session owner: open, enable, disable) */
/** lx_check_provider - validate names only (no kernel object); @pfx: the provider's pointer. */
enum etw_err lx_check_provider(const struct etw_provider_spec *p, const char *pfx,
                               struct etw_status *st);
/** lx_apply_provider - filters, stacks and enabling of @p's events (validated). */
enum etw_err lx_apply_provider(struct lx_sess *s, const struct etw_provider_spec *p,
                               const char *pfx, struct etw_status *st);
/** lx_sys_add_locked - the readers must load @sys too (caller holds s->mu). */
enum etw_err lx_sys_add_locked(struct lx_sess *s, const char *sys);
/** lx_excl_self_tasks - add every thread of this process to s->excl. */
void lx_excl_self_tasks(struct lx_sess *s);
/** lx_excl_build - the expression that keeps s->excl and s->must out (malloc'd). */
char *lx_excl_build(struct lx_sess *s);
/** lx_task_internal - the comm table's task events on or off after a change of providers. */
void lx_task_internal(struct lx_sess *s);
enum etw_err lx_enable(void *vs, const struct etw_provider_spec *p, struct etw_status *st);
enum etw_err lx_disable(void *vs, const char *provider, struct etw_status *st);

/* linux_reader.c */
/** lx_calib_offset - REALTIME - MONOTONIC in ns. */
int64_t lx_calib_offset(void);
/** lx_reader_main - a reader thread (arg: its struct lx_rd). */
void *lx_reader_main(void *arg);
/** lx_release_readers - let the parked readers go (@go: 1 = read, 2 = quit). */
void lx_release_readers(struct lx_sess *s, int go);
void lx_join_readers(struct lx_sess *s);

/* linux_record.c (file mode) */
/** lx_rec_reserve - room for the final header with every system's formats: 0 or an errno. */
int lx_rec_reserve(struct lx_sess *s);
/** lx_rec_start - start the snapshot thread (after tracing is on). */
void lx_rec_start(struct lx_sess *s);
/** lx_rec_stop - join the snapshot thread and write the final trace.dat (readers joined). */
void lx_rec_stop(struct lx_sess *s);
/** lx_rec_spool_failed - reader @r's spool write failed: the session fails (once). */
void lx_rec_spool_failed(struct lx_rd *r);

/* linux_stats.c */
/** lx_cpu_stats - the kernel's per-CPU counters (caller holds s->mu). */
void lx_cpu_stats(struct lx_sess *s, int cpu, uint64_t *ov, uint64_t *dr, uint64_t *en);
void lx_stats(void *vs, struct etw_backend_stats *o);
void lx_progress(void *vs, uint64_t *events, uint64_t *file_bytes);
void lx_stats_json(void *vs, struct etw_jw *w);
enum etw_err lx_list_os_sessions(struct etw_jw *w, struct etw_status *st);

#endif
