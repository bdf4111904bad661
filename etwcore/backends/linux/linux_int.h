/* linux_int.h — internal types shared by the files of the Linux (tracefs) backend.
 *
 * linux_backend.c  the backend table, init/cleanup, instance lifecycle (open/start/stop/destroy)
 * linux_enable.c   a session's providers: checks, filters, etwd's exclusions, enable/disable
 * linux_reader.c   the reader threads (one per CPU): poll, drain, decode, publish
 * linux_record.c   file mode: the snapshot thread, the reserve, the final trace.dat
 * linux_stats.c    stats, progress, stats_json, the list of tracefs instances
 * linux_sess.h     the session's state (struct lx_sess, lx_rd) shared by the five above
 * linux_decode.c   per-event field descriptors and the hot decode+encode loop (one per thread)
 * linux_task.c     the task of an event: tgid cache (/proc), its comm as of the event, id-text slots
 * linux_comm.c     the session's comm table (tid → comm changes by trace time), shared by readers
 * linux_tdat.c     trace.dat (v6) writer for file mode: per-CPU spools assembled at stop
 * linux_marker.c   markers: writes to the instance's trace_marker
 * linux_flight.c   flight mode (overwrite, snapshot drains into a trace.dat) and lx_ext
 * linux_prov.c     providers API (list, describe) and the name checks
 * linux_stack.c    stacks: stacktrace triggers and userstacktrace (control), and the stack
 *                  records joined to their event (reader threads)
 * linux_sym.c      stack symbolisation: kallsyms, /proc/PID/maps, ELF symbols (linux_sym.h)
 * linux_uaddr.h    the user address range of a stack entry (arm64: pointer-auth bits stripped)
 * linux_dat.c      `etwd convert` of a trace.dat: libtracecmd's records through the decoder,
 *                  stack records joined by linux_stack.c (linux_dat.h; with libtracecmd only)
 * linux_datchk.c   a v6 trace.dat's CPU table checked before libtracecmd reads it (a cut file
 *                  read through a repaired copy, the damage reported)
 *
 * Nothing here is public: the only exported symbol of the backend is etw_backend_linux.
 */
#ifndef ETWD_LINUX_INT_H
#define ETWD_LINUX_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "etwcore/err.h"
#include "etwcore/event.h"
#include "etwcore/jw.h"

struct tep_handle;
struct tep_event;
struct kbuffer;
struct tracefs_instance;
struct lx_stk;

/* Field kinds of the generic decoder. */
enum lx_kind {
  LX_U8, LX_U16, LX_U32, LX_U64,
  LX_S8, LX_S16, LX_S32, LX_S64,
  LX_PTR,      /* pointer: "0x…" string */
  LX_STR,      /* fixed char array: JSON string up to the first NUL */
  LX_DSTR,     /* __data_loc char[]: JSON string */
  LX_ARR,      /* fixed array of integers: JSON array */
  LX_DARR,     /* __data_loc array of integers: JSON array */
  LX_BYTES,    /* anything else: base64 string */
  LX_AU64,     /* encoder step only: fixed array of u64, one step (its last 8 unrolled) */
  LX_LIT,      /* encoder step only: literal, no value */
  LX_END,      /* encoder step only: the last literal (`}}`, `]}}`); ends the steps */
  LX_STR16     /* encoder step only: char[16] (comms), its opening quote in the literal */
};

#define LX_KEY_MAX 96 /* key text is at most LX_KEY_MAX - 32 bytes: 16-byte block copies */

struct lx_field {
  char key[LX_KEY_MAX]; /* `,"name":` (no comma for the first field of an event) */
  uint16_t key_len;     /* including the leading comma */
  uint8_t kind;
  uint8_t rel;          /* __rel_loc: offset relative to the end of the field */
  uint8_t elem;         /* element size for arrays (1, 2, 4, 8) */
  uint8_t esigned;      /* array elements are signed */
  uint32_t off, size;
};

/* One step of an event's fast encoder: a literal of at most 16 bytes (copied as one 16-byte
 * block), then one value read at `off` in the record. Keys longer than 16 bytes are split into
 * LX_LIT steps; arrays of up to LX_ARR_UNROLL elements become one step per element. */
struct lx_op {
  char lit[16];
  uint64_t lit_len; /* 64-bit: added to the output pointer straight from memory */
  uint64_t off;     /* the value's offset in the record */
  uint32_t size;
  uint16_t n;       /* LX_AU64: elements; LX_DSTR/LX_DARR: __rel_loc */
  uint16_t fi;      /* the field (e->f[fi]) behind this step */
  uint8_t kind;     /* enum lx_kind */
  uint8_t elem;     /* arrays: element size */
  uint8_t esigned;  /* arrays: signed elements */
};

/* Everything the hot loop needs for one event id, built once per reader thread. */
struct lx_evdesc {
  const char *provider, *name; /* interned */
  uint16_t id;
  uint16_t nf;
  struct lx_field *f;
  /* System block template (produced by etw_event_write_system with marker values):
   * t0 <time> t1 <pid> t2 <tid> t3, followed by `,"EventData":{` */
  char *tmpl;
  uint16_t t_off[4], t_len[4];
  int tmpl_ok;
  uint32_t min_size; /* records at least this long hold every fixed field */
  int dyn;           /* has __data_loc fields */
  size_t max_out;    /* worst-case output without __data_loc payloads */
  /* fast encoder: `head` is the System block up to `"ProcessID":` (t0, the time, t1) with the
   * date part of the reader's cached second (d->secpfx); then the id text (pid, ThreadID, ProcessorID
   * and `,"EventData":{`, shared by every event id of the reader); then the steps. */
  int fast;          /* head + ops built and t2/t3 are the reader's: the fast encoder applies */
  /* comms in the payload (linux_task.c, lx_task_desc): cm is LX_CM_* (0: none); up to two
   * (pid, comm) field pairs; LX_CM_EXEC: cm_comm[0] is the filename's __data_loc; LX_CM_RENAME:
   * cm_comm[1] is oldcomm. cm_hide: the bit of d->hide that hides this event (etwd enabled it
   * for the comm table only) */
  uint8_t cm, ncm, cm_hide;
  uint32_t cm_pid[2], cm_comm[2];
  char *head;        /* hlen (<= 256) bytes + slack: copied as 256 bytes */
  uint16_t hlen, hpos; /* hpos: the time's opening quote */
  struct lx_op *ops; /* ending with an LX_END step */
  uint32_t nops;
  /* the hot path's checks, folded: records of fmin .. fmin + fspan bytes take the fast encoder
   * (fspan 0 and fmin 0: never); it reserves max_out + dyn_mul * size */
  uint32_t fmin, fspan, dyn_mul;
  uint64_t evtail; /* etw_evref's event_id, level and cpu (and padding) as they lie in memory */
};

#define LX_IDS 256 /* id-text slots per reader (64 KB) */
#define LX_TGID_SLOTS 4096
#define LX_TGID_TTL 2000000000ULL  /* ns of trace time */
#define LX_TGID_LOOKUPS 2000       /* per second per reader: two small /proc reads each */
#define LX_TICK_NS 10000000ULL    /* /proc's start times are in ticks of at most this */
#define LX_IDTXT_MAX 224 /* id text: 11 + 17 + 6 * 15 + 12 + 11 + 42 bytes at most, + copy slack */

/* Per-thread decoder state. Owned by one reader thread (or a test / benchmark). */
struct lx_dec {
  struct tep_handle *tep;
  struct kbuffer *kbuf;
  int cpu;
  int walk;             /* 1 = direct page walker, 0 = kbuffer */
  uint32_t page_size;
  int64_t mono_to_real; /* add to a trace timestamp (clock "mono") to get UTC ns */
  uint32_t type_off, type_size, pid_off;
  struct lx_evdesc **cache; /* by event id: 65536 entries (pages never written stay unmapped),
                             * or NULL (no memory: every event takes the checked path) */
  uint32_t cache_cap;
  struct lx_evdesc **built; /* the descriptors in cache, nbuilt of them */
  uint32_t nbuilt, built_cap;
  /* time: secpfx is `"YYYY-MM-DDTHH:MM:SS.` of the UTC ns [sec_ns, sec_ns + sec_span);
   * sec_span is 0 while nothing is cached. sec_gen counts the changes of secpfx. The minute
   * part (`"YYYY-MM-DDTHH:MM:`) is cached too, so a new second only writes two digits. */
  int64_t sec_ns;
  uint64_t sec_span;
  uint32_t sec_gen;
  int min_ok;
  int64_t min_sec;
  char secpfx[32];
  char minpfx[32];
  /* the core's `,"ThreadID":` (t2) and `,"ProcessorID":<cpu>}},"EventData":{` (t3) */
  char t2[32], t3[64];
  uint8_t t2_len, t3_len;
  int std_hdr; /* common_type is the u16 at 0 and common_pid the s32 at 4 */
  uint32_t hdr_min; /* 8 with std_hdr, else UINT32_MAX: smaller records skip the hot path */
  /* the id text of a task: `<pid>[,"ProcessName":"<comm>"],"ThreadID":<tid>,"ProcessorID":<cpu>}},"EventData":{`, len
   * bytes, in one of LX_IDS slots direct-mapped by tid (tasks that take turns on a CPU keep
   * their text). key is the tid (as uint32) or UINT64_MAX (empty); pid is its ProcessID, valid
   * for LX_TGID_TTL of trace time from t, exactly as the tgid cache entry it was made from (a
   * tgid slot can only change through a task of the same id-text slot: LX_IDS divides
   * LX_TGID_SLOTS). */
  struct lx_idtxt {
    uint64_t key, t;
    uint32_t pid, tid; /* as etw_evref holds them */
    uint32_t len;
    uint32_t cseq;           /* the comm table's seq of this tid when the name was found */
    uint16_t nm_off, nm_len; /* `,"ProcessName":"<comm>"` inside txt (nm_len 0: comm unknown) */
    char comm[16];           /* the comm the text was made with */
    char txt[LX_IDTXT_MAX];  /* len <= LX_IDTXT_MAX - 32 (copy slack) */
  } ids[LX_IDS];
  /* decimal text of the last ProcessID / ThreadID (16 bytes + slack: put_i64 writes up to 17) */
  int32_t last_pid, last_tid;
  uint8_t pid_len, tid_len;
  char pid_txt[48], tid_txt[48];
  /* ThreadID → ProcessID: tracefs records only the thread id (common_pid). A direct-mapped
   * cache filled from /proc/<tid>/status, entries valid for LX_TGID_TTL of trace time; at most
   * LX_TGID_LOOKUPS lookups per second (beyond: ProcessID = ThreadID, retried soon). */
  int resolve_tgid; /* 0 = ProcessID is the thread id (tests) */
  struct lx_tgid { int32_t tid, tgid; uint64_t t, start; char comm[16]; } *tg; /* comm: the
   * thread's Name from the same /proc read ("" = unknown); start: when the task now at that
   * tid started (trace ns, to LX_TICK_NS; 0 = unknown) */
  uint64_t tg_win;
  int tg_left;
  /* the session's comm table (linux_comm.c; NULL: names from /proc only) and its per-tid change
   * counters (a zero array without a table): an id-text slot is stale once its tid's changed */
  struct lx_comm *cm;
  _Atomic uint32_t *cseq;
  /* a trace.dat's tep (linux_dat.c; NULL live): its saved cmdlines name the tasks that the comm
   * table does not know, as /proc does live */
  struct tep_handle *cmdlines;
  uint64_t cw_win; /* the second of trace time whose waiting cw_left (ns) counts down */
  int64_t cw_left;
  /* events etwd enabled for the comm table only (LX_HIDE_*): not delivered, not counted */
  uint8_t hide;
  uint16_t hide_id[2];
  uint64_t last_ts; /* the time of the last record of the last page walked */
  /* counters (read by stats() from other threads) */
  _Atomic uint64_t events, undecoded, enc_dropped, internal;
  _Atomic uint64_t stk_bad[2]; /* stack entries that are no code address: kernel, user */
  /* stacks (linux_stack.c): NULL until the session asks for stacks; then every record of a
   * page goes through lx_stk_record */
  struct lx_stk *stk;
};

/** lx_tep_new - a tep handle with the header page and the formats of @systems (NULL-ended);
 *  no kallsyms/printk/cmdlines (not needed for field decoding). Caller frees (tep_free). */
struct tep_handle *lx_tep_new(const char *const *systems);
/** lx_tep_add_system - parse the formats of one more system into @tep. */
int lx_tep_add_system(struct tep_handle *tep, const char *sys);

/** lx_dec_init - set up @d for @cpu; @tep is owned by @d from now on (freed by lx_dec_fini). */
int lx_dec_init(struct lx_dec *d, struct tep_handle *tep, int cpu, int64_t mono_to_real);
void lx_dec_fini(struct lx_dec *d);
/** lx_dec_reset - forget cached descriptors (after new formats were parsed into the tep). */
void lx_dec_reset(struct lx_dec *d);
/** lx_task_slow - the id-text slot of @tid (its ProcessID and ProcessName) when the slot holds
 *  another task or its answer expired at @ts (linux_task.c; the encoder's task_get calls it). */
struct lx_idtxt *lx_task_slow(struct lx_dec *d, int32_t tid, uint64_t ts);
/** lx_task_forget - @tid's comm changed (exec, rename): ask /proc again at its next event. */
void lx_task_forget(struct lx_dec *d, int32_t tid);
/** lx_task_desc - find the comm fields of @ev for @e (e->cm …); @ev is a struct tep_event. */
void lx_task_desc(struct lx_evdesc *e, struct tep_event *ev);
/** lx_task_cm - the id-text slot of an event whose payload names tasks (e->cm): records the
 *  changes it reports in the comm table and names its own task from it when it can. NULL: the
 *  event is hidden (d->hide), counted in d->internal, not to be encoded. */
struct lx_idtxt *lx_task_cm(struct lx_dec *d, const struct lx_evdesc *e,
                            const unsigned char *data, uint32_t size, int32_t tid, uint64_t ts);
/** lx_task_hide - hide the events of @mask (LX_HIDE_*) from now on (their ids from d->tep). */
void lx_task_hide(struct lx_dec *d, unsigned mask);
/** lx_cseq_none - the change counters of a reader without a comm table (all zero) */
extern _Atomic uint32_t lx_cseq_none[];
#define LX_HIDE_NEWTASK 1u
#define LX_HIDE_RENAME 2u
enum { LX_CM_PAIRS = 1, LX_CM_BIRTH, LX_CM_FORK, LX_CM_RENAME, LX_CM_EXEC };

/* ---- the comm table (linux_comm.c) */
#define LX_COMM_SLOTS 8192           /* direct-mapped by tid: ~1 MiB per realtime session */
#define LX_COMM_HIST 3               /* changes kept per tid */
#define LX_COMM_WAIT_NS 20000000LL   /* a lookup waits at most this for the other readers */
#define LX_COMM_WAIT_BUDGET 100000000LL /* and a reader at most this per second of trace time */
enum { LX_COMM_UNKNOWN, LX_COMM_KNOWN, LX_COMM_BORN, LX_COMM_LATER };
struct lx_comm_slot {
  int32_t tid;
  uint32_t n;
  char old[16]; /* the comm before h[0] ("" = unknown) */
  struct { uint64_t ts; char comm[16]; uint8_t birth; } h[LX_COMM_HIST];
};
struct lx_comm {
  pthread_mutex_t mu; /* guards slot[], changes, evicted */
  int mu_ok, ncpu;
  struct lx_comm_slot *slot;
  _Atomic uint64_t *applied; /* per CPU: trace ns up to which its reader has decoded */
  int *wake;                 /* per CPU: an eventfd its reader polls (-1: none) */
  uint64_t changes, evicted;
  _Atomic uint64_t waits, wait_timeouts;
  _Atomic uint32_t seq[LX_COMM_SLOTS]; /* per slot, bumped on every change */
};
struct lx_comm *lx_comm_new(int ncpu);
void lx_comm_free(struct lx_comm *c);
/** lx_comm_set - @tid's comm is @comm (at most @max bytes) from trace time @ts on; @old: its
 *  comm before (a rename's oldcomm) or NULL; @birth: @ts is the task's creation. */
void lx_comm_set(struct lx_comm *c, int32_t tid, uint64_t ts, const char *comm, size_t max,
                 const char *old, int birth);
/** lx_comm_get - @tid's comm at @ts into @out (LX_COMM_KNOWN / BORN: from the change at *@when);
 *  LX_COMM_LATER: it changed after @ts and what it was is not known; LX_COMM_UNKNOWN. */
int lx_comm_get(struct lx_comm *c, int32_t tid, uint64_t ts, char out[16], uint64_t *when);
/** lx_comm_applied - the reader of @cpu has decoded everything up to trace time @ts. */
void lx_comm_applied(struct lx_comm *c, int cpu, uint64_t ts);
/** lx_comm_horizon - the time up to which every reader but @cpu's has decoded (-1: none). */
uint64_t lx_comm_horizon(struct lx_comm *c, int cpu);
/** lx_comm_wait - wait (at most @max_ns) until every other reader has applied @ts (the reader of
 *  @cpu has decoded everything before @ts: it calls this at an event); 1 = they have (a lookup
 *  at @ts is complete), 0 = timed out; *@waited: the ns spent. */
int lx_comm_wait(struct lx_comm *c, int cpu, uint64_t ts, int64_t max_ns, int64_t *waited);

/* The sink the decoder appends to. `flush` is called when the batch is full; it must publish
 * the batch and install a fresh one in *bp (or leave NULL: further events are dropped+counted). */
struct lx_sink {
  struct etw_batch *b;
  void (*flush)(void *ctx, struct lx_sink *s);
  void *ctx;
};

/** lx_dec_page - decode every event of one ring-buffer page into @s. Returns events decoded. */
uint64_t lx_dec_page(struct lx_dec *d, void *page, struct lx_sink *s);
/** lx_count_page - number of events in one page (no decoding: file-only mode). */
uint64_t lx_count_page(struct lx_dec *d, void *page);
/** lx_dec_event - decode one raw event (record data, size, trace ts) into @s's batch. */
void lx_dec_event(struct lx_dec *d, const unsigned char *data, uint32_t size, uint64_t ts,
                  struct lx_sink *s);

/* ---- providers API and name checks (linux_prov.c) */
int lx_valid_name(const char *s);
int lx_system_exists(const char *sys);
int lx_event_exists(const char *sys, const char *ev);
enum etw_err lx_list_providers(const char *q, struct etw_jw *w, struct etw_status *st);
enum etw_err lx_describe_provider(const char *name, struct etw_jw *w, struct etw_status *st);

/* ---- stacks (linux_stack.c) */
/* A session's stack configuration, owned by the control thread (open/enable/disable); the
 * readers only read `want` (published once, freed after they are joined). */
struct lx_stkcfg {
  _Atomic uint8_t *_Atomic want; /* by event id: not 0 = that event records stacks (linux_stack.c) */
  uint32_t nwant;                /* events that want stacks */
  uint32_t ntrig;                /* events with a stacktrace trigger */
  int ustack;                    /* options/userstacktrace is on */
  int opt;   /* kernel stacks from options/stacktrace for new events, no triggers */
  int kopt;  /* options/stacktrace is on */
};
/** lx_stk_set - (un)set the stacktrace trigger of @nev events of @sys (in option mode, c->opt:
 *  no trigger) and their want flags (@on: 1, ETW_STACKS_RAW, 0 = off); options/userstacktrace (and in option mode
 *  options/stacktrace) is on while any event wants stacks. @cond: the events' filter as
 *  written to them ("0" or NULL: none), repeated in the trigger (see linux_stack.c). Field
 *  errors under @pfx. */
enum etw_err lx_stk_set(struct lx_stkcfg *c, struct tracefs_instance *inst, const char *sys,
                        char *const *evs, uint32_t nev, int on, const char *cond,
                        const char *pfx, struct etw_status *st);
/* at most this many stacktrace triggers per session (each costs an RCU grace period, ~70 ms,
 * when removed): beyond it, option mode */
#define LX_STK_TRIGGERS_MAX 64u
/** lx_stk_can_trigger - option mode, and its events few enough for triggers. */
int lx_stk_can_trigger(const struct lx_stkcfg *c);
/** lx_stk_to_triggers - leave option mode (c->opt): the stacktrace trigger (@cond) on each
 *  of @nev events of @sys that wants stacks; call for every provider with stacks, then
 *  lx_stk_opt_off. */
enum etw_err lx_stk_to_triggers(struct lx_stkcfg *c, struct tracefs_instance *inst,
                                const char *sys, char *const *evs, uint32_t nev,
                                const char *cond, const char *pfx, struct etw_status *st);
void lx_stk_opt_off(struct lx_stkcfg *c, struct tracefs_instance *inst);
void lx_stkcfg_free(struct lx_stkcfg *c);
/** lx_stk_attach - reader: from now on @d joins stack records to their events (idempotent). */
void lx_stk_attach(struct lx_dec *d, _Atomic uint8_t *want);
/** lx_stk_attach_file - the same for a decoder of a trace.dat (linux_dat.c; nothing when the
 *  file has no stack record formats): the stack records' ids from the file's tep (d->tep), user frames written as addresses only (the file keeps no
 *  process mappings), kernel frames as *@ksyms says (shared by the file's decoders; start it at
 *  -1: the first kernel stack decides whether this machine's kallsyms fit, else 0 = addresses;
 *  0 = addresses only from the start). */
void lx_stk_attach_file(struct lx_dec *d, _Atomic uint8_t *want, int *ksyms);
/** lx_stk_want_all - a want table (for lx_stk_attach*) in which every event wants its stacks:
 *  a trace.dat says not which did; free() it after the decoders. NULL: no memory. */
_Atomic uint8_t *lx_stk_want_all(void);
/** lx_stk_record - reader: one raw record; a stack record goes onto the held event, anything
 *  else is decoded by lx_dec_event (and held when its event wants stacks). */
void lx_stk_record(struct lx_dec *d, const unsigned char *data, uint32_t size, uint64_t ts,
                   struct lx_sink *s);
void lx_stk_free(struct lx_dec *d);
/** lx_stk_waiting - reader: the last event of @s's batch is held and still lacks its kernel or
 *  user stack (its writer was preempted between the event and its stack records: syscall
 *  tracepoints are preemptible), so publishing the batch now would orphan them. */
int lx_stk_waiting(const struct lx_dec *d, const struct lx_sink *s);
/** lx_stk_addrs - the addresses of a stack record into @a (at most @max): kernel_stack
 *  {int size; unsigned long caller[size]} (the record may be longer: padding), user_stack
 *  {unsigned tgid; unsigned long caller[8]} (0-terminated). An entry that cannot be a code
 *  address of its side (kernel: the upper half; user: user space by linux_uaddr.h, arm64's
 *  PAC bits stripped — the stripped address is what @a gets) ends the stack: it and the
 *  entries after it are dropped, their number in *@bad. */
uint32_t lx_stk_addrs(const unsigned char *data, uint32_t size, int kernel, uint64_t *a,
                      uint32_t max, uint32_t *bad);
/** lx_stk_is - 1 if the record is a stack record (not an event: left out of event counts). */
int lx_stk_is(const struct lx_dec *d, const unsigned char *data, uint32_t size);

/* ---- trace.dat writer (linux_tdat.c) */
/* ---- markers (linux_marker.c) */
struct tracefs_instance;
/** lx_sess_inst - the tracefs instance of backend session @s and (*@sys) the systems whose
 *  formats it records, NULL-ended (linux_backend.c). */
struct tracefs_instance *lx_sess_inst(void *s, char *const **sys);
/** lx_marker - the backend's marker(): write @text to the instance's trace_marker. */
enum etw_err lx_marker(void *s, const char *text, struct etw_status *st);
/** lx_ext - the backend's optional operations: markers, flight mode (linux_flight.c). */
extern const struct etw_backend_ext lx_ext;
#define LX_CAPS_EXT (ETW_CAP_MARKERS | ETW_CAP_FLIGHT)

struct lx_tdat;
/** lx_tdat_open - prepare to record @ncpu CPUs into @path; spools live beside it (unlinked). */
struct lx_tdat *lx_tdat_open(const char *path, int ncpu, int page_size, char *err, size_t errlen);
/** lx_tdat_page - append one raw page of @cpu holding @nev events (one writer per CPU). 0, or -1:
 *  not spooled (counted as lost; after a write error, see lx_tdat_error, nothing more is). */
int lx_tdat_page(struct lx_tdat *t, int cpu, const void *page, uint64_t nev);
/** lx_tdat_reserve - (re)size the reserve that guarantees the final write room for its header
 *  with the formats of @systems, even on a full disk. 0, or the errno (no room). */
int lx_tdat_reserve(struct lx_tdat *t, const char *const *systems);
/** lx_tdat_snapshot - rewrite @path (atomically, via rename) with everything spooled so far.
 *  0, or -1 with *@err = errno (the spools are untouched). */
int lx_tdat_snapshot(struct lx_tdat *t, const char *const *systems, int *err);
/** lx_tdat_final - write @path for good (once; later calls return the first result): freezes the
 *  spools, needs almost no free space (see linux_tdat.c). 0 = complete, 1 = the disk could not
 *  hold it all (the file keeps what fitted), -1 = failed; *@err = errno when not 0. */
int lx_tdat_final(struct lx_tdat *t, const char *const *systems, int *err);
/** lx_tdat_finish - lx_tdat_final, then free @t. */
int lx_tdat_finish(struct lx_tdat *t, const char *const *systems, int *err);
/** lx_tdat_abort - free without writing. */
void lx_tdat_abort(struct lx_tdat *t);
/** lx_tdat_bytes - page bytes spooled (after the final write: in the file). */
uint64_t lx_tdat_bytes(struct lx_tdat *t);
/** lx_tdat_events - events in the pages spooled. */
uint64_t lx_tdat_events(struct lx_tdat *t);
/** lx_tdat_error - errno of the first failed spool write, 0 if none. */
int lx_tdat_error(struct lx_tdat *t);
/** lx_tdat_lost_pages - pages that could not be spooled (disk full, size limit). */
uint64_t lx_tdat_lost_pages(struct lx_tdat *t);

#endif
