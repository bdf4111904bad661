/* etl_chrome.c — `etwd convert --format chrome`: Chrome trace-event JSON (ui.perfetto.dev,
 * chrome://tracing), the mapping the web page's export uses too (docs/etl.md):
 *   every event → an instant {"name","cat","ph":"i","s":"t","ts","pid","tid","args"} (ts: µs since
 *   the earliest exported event, ns kept as 3 decimals; args: EventData + seq + cpu);
 *   an Opcode 1 event followed by an Opcode 2 event of the same provider, Task and ThreadID →
 *   also one "X" (named as the start event, dur in µs, args start_seq/stop_seq);
 *   process_name / thread_name metadata ("M") from Execution.ProcessName/ThreadName, and from
 *   EventData ProcessName (or ImageFileName) of process start/rundown events, ThreadName;
 *   events sorted by ts, then seq.
 * Linux events (a trace.dat's, e->lx; docs/linux.md "Converting a trace.dat"): an ftrace print
 *   (marker) is named by its text; sched_switch also closes the slice of the task it switches
 *   out and opens one for the task it switches in: an X "Running" on the task's thread track and
 *   an X named by its comm on the CPU's track (pseudo-process LX_CPU_PID "CPUs", thread = CPU);
 *   an event of another task than the one switched in means switches are missing (etwd leaves
 *   its own threads out): the slice ends at its task's last event there, the event's task starts
 *   one (args start_inferred / end_inferred), as do slices still open at the end; thread_name
 *   from ProcessName (the comm) and sched_switch's comms, process_name from the comm of a task
 *   whose pid is its tid.
 * Windows kernel events (docs/etl.md): Thread/CSwitch (EventData NewThreadId/OldThreadId, on the
 *   record's CPU) ends the slice running on that CPU and starts one for NewThreadId (none for 0,
 *   the idle thread), the same X pair as Linux ("Running" on the thread, the process name on the
 *   CPU's track); the slices are written at the end, when every thread's process is known (from
 *   Thread events' ProcessId/TThreadId and the events' Execution); an event with a "Stack" gets
 *   args.stack: its first CHROME_FRAMES frames (leaf first) as "module+0xoffset" text.
 * Wakeups (both): Thread/ReadyThread (EventData TThreadId: the thread made ready) and
 *   sched:sched_wakeup / sched_wakeup_new (EventData pid: the woken task) → a flow arrow from the
 *   waker's instant to the woken thread's next Running slice: "ph":"s" (same ts, pid, tid as the
 *   waker's instant, right after it) and "ph":"f","bp":"e" (same ts, pid, tid as the Running X,
 *   right after it), "name":"wakeup","cat":"sched", one "id" per flow. Both are written when the
 *   slice is, so a wakeup without a later switch-in of its thread (or replaced by a later wakeup
 *   of it before one, or of a thread running then, or followed by a slice that only starts
 *   inferred) gets none; counts in otherData. One pending wakeup per thread, at most MAP_MAX
 *   threads (more: dropped, counted).
 * The events' text is kept in memory (at most etw_convert_chrome_max bytes) with a small index
 * that is sorted at the end. Single-threaded (the convert CLI). */
#include <stdlib.h>
#include <string.h>

#include "etl_conv.h"
#include "etwcore/jw.h"

size_t etw_convert_chrome_max = (size_t)1 << 30;

enum { MAP_MAX = 1 << 16 }; /* start events waiting for their stop; named processes; threads */
#define LX_CPU_PID 2147483647 /* the pseudo-process whose threads are the CPUs (above any Linux pid) */
enum { LX_CPUS = 1 << 16 };   /* CPU numbers are 16-bit */
enum { CHROME_FRAMES = 8 };   /* frames of an event's stack kept in args.stack */

/* a wakeup waiting for its thread's switch-in: the waker's instant (sort key and track) */
struct wake { int64_t ft, pid, tid; uint64_t seq; uint32_t idx; uint8_t on; };

/* a Windows thread's Running slice, from its CSwitch in to the CSwitch out of it (stop_seq), or
 * (stop_seq 0, args.end_inferred) to its switch-in elsewhere, a CSwitch of another thread out of
 * its CPU (events lost), or the last event of the input; w: the wakeup that led to it */
struct wslice { int64_t ft0, ft1, tid; uint64_t seq0, seq1; unsigned cpu; struct wake w; };

/* the task running on one CPU since its last sched_switch (Linux events) */
struct lx_run {
  int64_t ft, last, tid, pid; /* since; its latest event on this CPU; who */
  uint64_t seq;         /* the event that started it (a sched_switch, or its first event) */
  char comm[100];       /* its comm as JSON string text */
  uint8_t on;           /* 1 = a task (not idle) is running since ft */
  uint8_t seen;         /* the CPU had a sched_switch (its track is named) */
  uint8_t inferred;     /* started by the task's own event, its switch missing */
  struct wake w;        /* the wakeup that led to this slice's switch-in (w.on), else none */
};

struct item {
  int64_t ft;       /* FILETIME of the event (an X: of its start) */
  uint64_t seq;     /* (an X: its start's) */
  uint32_t idx;     /* arrival order of the instant (an X: its start's) */
  uint8_t x;        /* 1 = the X of a pair (after its start's instant) */
  size_t off;       /* text: head (up to `"ts":`) then tail, in c->txt */
  uint32_t head, len;
};

/* open addressing map from (p, a, b) to an index (bounded: MAP_MAX keys) */
struct kent { const void *p; int64_t a, b; uint32_t v; };
struct kmap { struct kent *e; uint32_t n; };

struct start { int64_t ft; uint64_t seq; uint32_t idx, open; int64_t pid, tid; size_t name_off; uint32_t name_len; };
struct pname { int64_t pid, tid; char *name; }; /* name: JSON string text */

struct conv_chrome {
  struct etw_jw txt;
  struct item *it;
  size_t n, cap;
  uint32_t arrivals;
  int64_t ft0;
  int any;
  struct kmap pairs, procs, threads;
  struct start *st;
  struct pname *pn, *tn;
  uint32_t nst, npn, ntn;
  struct lx_run *run; /* Linux: per CPU [LX_CPUS], made at the first sched_switch (or CSwitch) */
  int64_t ft_last;    /* the latest event's time */
  /* Windows: the CSwitch slices (written at the end); thread → process (tpid: index into tp) */
  struct wslice *ws;
  size_t nws, capws;
  unsigned ncpu;      /* CPUs with a CSwitch: 0..ncpu-1 at most */
  struct kmap tpid;
  struct { int64_t pid, tid; uint8_t used; } *tp; /* [MAP_MAX]; pid -1 = unknown; used: on a track */
  uint32_t ntp;
  /* wakeups (both): the pending one per woken thread (wkmap: tid → index into wk [MAP_MAX]) */
  struct kmap wkmap;
  struct wake *wk;
  struct kmap oncpu;  /* tid → the CPU it was last switched in on + 1 (checked against run[]) */
  uint32_t nwk;
  uint64_t wakeups, wake_flows, wake_unmatched, wake_dropped;
  unsigned maxcpu;    /* CPUs with a switch (both): 0..maxcpu-1 at most */
};

static uint32_t *kmap_get(struct kmap *m, const void *p, int64_t a, int64_t b, uint32_t next) {
  if (next == UINT32_MAX && !m->e) return NULL; /* (a look-up) */
  if (!m->e && !(m->e = calloc(2 * MAP_MAX, sizeof *m->e))) return NULL;
  uint64_t h = ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)a * 0xC2B2AE3D27D4EB4Full) ^
               ((uint64_t)b * 0x165667B19E3779F9ull);
  for (uint32_t i = (uint32_t)(h >> 40) & (2 * MAP_MAX - 1);; i = (i + 1) & (2 * MAP_MAX - 1)) {
    struct kent *e = &m->e[i];
    if (e->v && e->p == p && e->a == a && e->b == b) return &e->v;
    if (!e->v) {
      if (next == UINT32_MAX || m->n >= MAP_MAX) return NULL; /* absent (a look-up); full */ /* full: this key is not tracked */
      e->p = p;
      e->a = a;
      e->b = b;
      e->v = next + 1; /* stored + 1 (0 = empty) */
      m->n++;
      return &e->v;
    }
  }
}

struct conv_chrome *conv_chrome_new(void) {
  struct conv_chrome *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  etw_jw_init(&c->txt, etw_convert_chrome_max);
  c->st = calloc(MAP_MAX, sizeof *c->st);
  c->pn = calloc(MAP_MAX, sizeof *c->pn);
  c->tn = calloc(MAP_MAX, sizeof *c->tn);
  c->tp = calloc(MAP_MAX, sizeof *c->tp);
  c->wk = calloc(MAP_MAX, sizeof *c->wk);
  if (!c->st || !c->pn || !c->tn || !c->tp || !c->wk) {
    conv_chrome_finish(c, NULL, NULL);
    return NULL;
  }
  return c;
}

static int push(struct conv_chrome *c, struct item *x) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 4096;
    struct item *p = realloc(c->it, cap * sizeof *p);
    if (!p) return -1;
    c->it = p;
    c->cap = cap;
  }
  c->it[c->n++] = *x;
  return 0;
}

/* ASCII case-insensitive substring */
static int has_ci(const char *s, const char *w) {
  for (; *s; s++) {
    size_t i = 0;
    while (w[i] && s[i] && (s[i] | 32) == (w[i] | 32)) i++;
    if (!w[i]) return 1;
  }
  return 0;
}

/* Records @name (a JSON value's text) for (pid, tid) in @tab (last one wins, first-seen order). */
static void set_name(struct conv_chrome *c, struct kmap *m, struct pname *tab, uint32_t *n, int64_t pid,
                     int64_t tid, const char *v, size_t vl) {
  uint32_t *slot = kmap_get(m, NULL, pid, tid, *n);
  if (!slot) return;
  uint32_t k = *slot - 1;
  int str = v[0] == '"';
  char *s = malloc(vl + 3);
  if (!s) return;
  snprintf(s, vl + 3, "%s%.*s%s", str ? "" : "\"", (int)vl, v, str ? "" : "\"");
  if (k == *n) { /* new */
    tab[k].pid = pid;
    tab[k].tid = tid;
    (*n)++;
  } else {
    free(tab[k].name);
  }
  tab[k].name = s;
  (void)c;
}

/* a number member of the event's System object (Opcode, Task); -1 if none */
static int64_t sys_int(const struct conv_ev *e, const char *key) {
  size_t vl;
  const char *v = conv_json_member(e->sys, e->sys_len, key, &vl);
  return conv_json_int(v, vl);
}

static void names(struct conv_chrome *c, const struct conv_ev *e, const char *name, int64_t pid, int64_t tid) {
  size_t xl, vl;
  const char *x = conv_json_member(e->sys, e->sys_len, "Execution", &xl), *v;
  if (x && (v = conv_json_member(x, xl, "ProcessName", &vl)) && strncmp(v, "null", 4))
    set_name(c, &c->procs, c->pn, &c->npn, pid, 0, v, vl);
  if (x && (v = conv_json_member(x, xl, "ThreadName", &vl)) && strncmp(v, "null", 4))
    set_name(c, &c->threads, c->tn, &c->ntn, pid, tid, v, vl);
  if (!e->data) return;
  int64_t op = sys_int(e, "Opcode");
  if ((v = conv_json_member(e->data, e->data_len, "ProcessName", &vl)) == NULL)
    v = conv_json_member(e->data, e->data_len, "ImageFileName", &vl);
  if (v && (op == 1 || op == 3 || op == 4 || has_ci(name, "start") || has_ci(name, "rundown"))) {
    size_t pl;
    const char *p = conv_json_member(e->data, e->data_len, "ProcessID", &pl);
    if (!p) p = conv_json_member(e->data, e->data_len, "ProcessId", &pl);
    int64_t ppid = p ? conv_json_int(p, pl) : pid;
    set_name(c, &c->procs, c->pn, &c->npn, ppid < 0 ? 0 : ppid, 0, v, vl);
  }
  if ((v = conv_json_member(e->data, e->data_len, "ThreadName", &vl)) && vl > 2) /* (not "") */
    set_name(c, &c->threads, c->tn, &c->ntn, pid, tid, v, vl);
}

/* `,"dur":` and @d100 (100 ns units) as µs with 3 decimals */
static void put_dur(struct etw_jw *w, int64_t d100) {
  int64_t d = d100 * 100; /* ns */
  char dur[48];
  snprintf(dur, sizeof dur, ",\"dur\":%s%lld.%03lld", d < 0 ? "-" : "", (long long)(d < 0 ? -d : d) / 1000,
           (long long)(d < 0 ? -d : d) % 1000);
  etw_jw_lit(w, dur);
}

/* ---- Linux events */

/* EventData member @key of @e as an integer; -1 if none (or negative) */
static int64_t data_int(const struct conv_ev *e, const char *key) {
  size_t vl;
  const char *v = e->data ? conv_json_member(e->data, e->data_len, key, &vl) : NULL;
  return v ? conv_json_int(v, vl) : -1;
}

/* EventData member @key of @e when it is a JSON string (its text, quotes included), else NULL */
static const char *data_str(const struct conv_ev *e, const char *key, size_t *vl) {
  const char *v = e->data ? conv_json_member(e->data, e->data_len, key, vl) : NULL;
  return v && v[0] == '"' ? v : NULL;
}

/* thread_name from Execution.ProcessName (a Linux task's comm); process_name too when the task
 * is its process's first thread (pid == tid) */
static void lx_names(struct conv_chrome *c, const struct conv_ev *e, int64_t pid, int64_t tid) {
  size_t xl, vl;
  const char *x = conv_json_member(e->sys, e->sys_len, "Execution", &xl), *v;
  if (!x || tid <= 0 || !(v = conv_json_member(x, xl, "ProcessName", &vl)) || v[0] != '"') return;
  set_name(c, &c->threads, c->tn, &c->ntn, pid, tid, v, vl);
  if (pid == tid) set_name(c, &c->procs, c->pn, &c->npn, pid, 0, v, vl);
}

/* ---- which CPU a thread runs on (both): a map, not a scan of every CPU per event (a file may
 * name CPUs up to 65535) */

static void note_on(struct conv_chrome *c, unsigned cpu, int64_t tid) {
  uint32_t *v = kmap_get(&c->oncpu, NULL, tid, 0, cpu);
  if (v) *v = cpu + 1; /* (a full map: running_on scans) */
}

/* the CPU @tid is running on (its slice open there), or -1 */
static long running_on(const struct conv_chrome *c, int64_t tid) {
  if (!c->run) return -1;
  uint32_t *v = kmap_get((struct kmap *)&c->oncpu, NULL, tid, 0, UINT32_MAX);
  if (v) {
    const struct lx_run *r = &c->run[*v - 1];
    return r->on && r->tid == tid ? (long)*v - 1 : -1;
  }
  if (c->oncpu.n < MAP_MAX) return -1; /* never switched in */
  for (unsigned k = 0; k < c->maxcpu; k++)
    if (c->run[k].on && c->run[k].tid == tid) return (long)k;
  return -1;
}

/* ---- wakeups (both) */

/* a wakeup of @woken by the event whose instant is (@ft, @seq, @idx) on (@pid, @tid): it waits
 * for @woken's next switch-in (a pending one of @woken is replaced: counted as unmatched) */
static void wake_note(struct conv_chrome *c, int64_t woken, int64_t ft, uint64_t seq, uint32_t idx, int64_t pid,
                      int64_t tid) {
  c->wakeups++;
  if (running_on(c, woken) >= 0) { /* it runs: no switch-in follows this wakeup */
    c->wake_unmatched++;
    return;
  }
  uint32_t *slot = kmap_get(&c->wkmap, NULL, woken, 0, c->nwk);
  if (!slot) {
    c->wake_dropped++;
    return;
  }
  uint32_t k = *slot - 1;
  if (k == c->nwk) c->nwk++;
  if (c->wk[k].on) c->wake_unmatched++;
  c->wk[k] = (struct wake){ft, pid, tid, seq, idx, 1};
}

/* @tid's pending wakeup, taken (none: w.on == 0) */
static struct wake wake_take(struct conv_chrome *c, int64_t tid) {
  struct wake w = {0};
  uint32_t *k = kmap_get(&c->wkmap, NULL, tid, 0, UINT32_MAX);
  if (k && c->wk[*k - 1].on) {
    w = c->wk[*k - 1];
    c->wk[*k - 1].on = 0;
  }
  return w;
}

/* one flow item: `{"name":"wakeup","cat":"sched","ph":@ph,"id":@id,"ts":…,"pid":@pid,"tid":@tid}`
 * sorted right after the item (@ft, @seq, @idx) */
static int flow_item(struct conv_chrome *c, const char *ph, uint64_t id, int64_t ft, uint64_t seq, uint32_t idx,
                     int64_t pid, int64_t tid) {
  struct etw_jw *w = &c->txt;
  struct item y = {ft, seq, idx, 2, w->len, 0, 0};
  etw_jw_lit(w, "{\"name\":\"wakeup\",\"cat\":\"sched\",\"ph\":");
  etw_jw_lit(w, ph);
  etw_jw_lit(w, ",\"id\":");
  etw_jw_u64(w, id);
  etw_jw_lit(w, ",\"ts\":");
  y.head = (uint32_t)(w->len - y.off);
  etw_jw_lit(w, ",\"pid\":");
  etw_jw_i64(w, pid);
  etw_jw_lit(w, ",\"tid\":");
  etw_jw_i64(w, tid);
  etw_jw_ch(w, '}');
  if (w->err) return -1;
  y.len = (uint32_t)(w->len - y.off);
  return push(c, &y);
}

/* the flow of the wakeup that led to r's slice, whose Running X is item (r->ft, r->seq, @idx):
 * "s" at the waker's instant, "f" (binding to the enclosing slice: the Running X) at its start */
static int wake_flow(struct conv_chrome *c, const struct lx_run *r, uint32_t idx) {
  if (!r->w.on) return 0;
  uint64_t id = ++c->wake_flows;
  if (flow_item(c, "\"s\"", id, r->w.ft, r->w.seq, r->w.idx, r->w.pid, r->w.tid)) return -1;
  return flow_item(c, "\"f\",\"bp\":\"e\"", id, r->ft, r->seq, idx, r->pid, r->tid);
}

/* the slices of the task that ran on @cpu from r->ft to @ft: "Running" on its thread, its comm
 * (as it left the CPU) on the CPU's track. @stop: the sched_switch that ended it, or 0: it ended
 * at its last event seen here (args.end_inferred; the switch is not in the input) */
static int lx_slices(struct conv_chrome *c, const struct lx_run *r, unsigned cpu, int64_t ft, uint64_t stop) {
  struct etw_jw *w = &c->txt;
  for (int k = 0; k < 2; k++) {
    struct item y = {r->ft, r->seq, c->arrivals++, 1, w->len, 0, 0};
    etw_jw_lit(w, "{\"name\":");
    if (k == 0) etw_jw_lit(w, "\"Running\"");
    else etw_jw_lit(w, r->comm);
    etw_jw_lit(w, ",\"cat\":\"sched\",\"ph\":\"X\",\"ts\":");
    y.head = (uint32_t)(w->len - y.off);
    put_dur(w, ft - r->ft);
    etw_jw_lit(w, ",\"pid\":");
    etw_jw_i64(w, k == 0 ? r->pid : LX_CPU_PID);
    etw_jw_lit(w, ",\"tid\":");
    etw_jw_i64(w, k == 0 ? r->tid : (int64_t)cpu);
    etw_jw_lit(w, ",\"args\":{\"cpu\":");
    etw_jw_u64(w, cpu);
    if (k == 1) {
      etw_jw_lit(w, ",\"pid\":");
      etw_jw_i64(w, r->pid);
      etw_jw_lit(w, ",\"tid\":");
      etw_jw_i64(w, r->tid);
    }
    etw_jw_lit(w, ",\"start_seq\":");
    etw_jw_u64(w, r->seq);
    if (r->inferred) etw_jw_lit(w, ",\"start_inferred\":true");
    if (stop) {
      etw_jw_lit(w, ",\"stop_seq\":");
      etw_jw_u64(w, stop);
    } else {
      etw_jw_lit(w, ",\"end_inferred\":true");
    }
    etw_jw_lit(w, "}}");
    if (w->err) return -1;
    y.len = (uint32_t)(w->len - y.off);
    if (push(c, &y) || (k == 0 && wake_flow(c, r, y.idx))) return -1;
  }
  return 0;
}

/* the slice on @cpu ends at its task's last event there (the switch away is not in the input: a
 * recording leaves etwd's own threads out, so their switches are missing); none when that was
 * its first */
static int lx_close_inferred(struct conv_chrome *c, struct lx_run *r, unsigned cpu) {
  int rc = r->on && r->last > r->ft ? lx_slices(c, r, cpu, r->last, 0) : 0;
  if (r->on && r->last <= r->ft && r->w.on) c->wake_unmatched++; /* (no slice: no flow) */
  r->on = 0;
  return rc;
}

/* starts the slice of @tid (comm: JSON string text @nm) on @cpu at @ft */
static void lx_start(struct lx_run *r, int64_t ft, int64_t pid, int64_t tid, uint64_t seq, const char *nm,
                     size_t nl, int inferred) {
  r->ft = r->last = ft;
  r->pid = pid;
  r->tid = tid;
  r->seq = seq;
  r->on = 1;
  r->inferred = (uint8_t)inferred;
  r->w.on = 0;
  if (nm && nl < sizeof r->comm) {
    memcpy(r->comm, nm, nl);
    r->comm[nl] = 0;
  } else {
    snprintf(r->comm, sizeof r->comm, "\"%lld\"", (long long)tid);
  }
}

/* any other Linux event on a CPU that had a sched_switch: its task runs there now; a task other
 * than the one the last switch put there means switches are missing: the slice of that one ends
 * at its last event, this task's starts here (args.start_inferred) */
static int lx_task_event(struct conv_chrome *c, const struct conv_ev *e, int64_t ft, int64_t pid, int64_t tid) {
  unsigned cpu = e->rec->cpu;
  struct lx_run *r = c->run ? &c->run[cpu] : NULL;
  if (!r || !r->seen) return 0;
  if (r->on && r->tid == tid) {
    r->last = ft;
    return 0;
  }
  if (lx_close_inferred(c, r, cpu)) return -1;
  if (tid > 0) {
    size_t xl, vl = 0;
    const char *x = conv_json_member(e->sys, e->sys_len, "Execution", &xl), *v;
    v = x ? conv_json_member(x, xl, "ProcessName", &vl) : NULL;
    lx_start(r, ft, pid, tid, e->seq, v && v[0] == '"' ? v : NULL, vl, 1);
    note_on(c, cpu, tid);
    if (wake_take(c, tid).on) c->wake_unmatched++; /* its switch-in is not in the input */
  }
  return 0;
}

/* sched_switch: ends the slice of prev (its switch to it seen, or inferred from its events),
 * starts next's */
static int lx_switch(struct conv_chrome *c, const struct conv_ev *e, int64_t ft, int64_t pid, int64_t tid) {
  if (!c->run && !(c->run = calloc(LX_CPUS, sizeof *c->run))) return 0; /* (no slices then) */
  unsigned cpu = e->rec->cpu;
  struct lx_run *r = &c->run[cpu];
  int64_t prev = data_int(e, "prev_pid"), next = data_int(e, "next_pid");
  if (cpu >= c->maxcpu) c->maxcpu = cpu + 1;
  size_t pl = 0, nl = 0;
  const char *pc = data_str(e, "prev_comm", &pl), *nc = data_str(e, "next_comm", &nl);
  if (r->on && r->tid == prev && ft >= r->ft) {
    if (prev == tid) r->pid = pid; /* (the event runs in prev's context: its ProcessID) */
    if (pc && pl < sizeof r->comm) { /* its comm as it leaves (an exec while it ran renamed it) */
      memcpy(r->comm, pc, pl);
      r->comm[pl] = 0;
    }
    if (lx_slices(c, r, cpu, ft, e->seq)) return -1;
    r->on = 0;
  } else if (lx_close_inferred(c, r, cpu)) {
    return -1;
  }
  r->seen = 1;
  if (next > 0 && nc) {
    lx_start(r, ft, next, next, e->seq, nc, nl, 0);
    note_on(c, cpu, next);
    r->w = wake_take(c, next);
    set_name(c, &c->threads, c->tn, &c->ntn, next, next, nc, nl);
  }
  if (prev > 0 && pc) set_name(c, &c->threads, c->tn, &c->ntn, prev, prev, pc, pl);
  return 0;
}

/* the name of a Linux event: an ftrace print (a marker) is named by its text, without the
 * newline the kernel adds (JSON text into @w); 0 when it is not one */
static int lx_print_name(struct etw_jw *w, const struct conv_ev *e) {
  size_t vl;
  const char *v;
  if (strcmp(e->ref->provider, "ftrace") || !e->ref->name || strcmp(e->ref->name, "print") ||
      !(v = data_str(e, "buf", &vl)) || vl < 2)
    return 0;
  size_t n = vl - 1; /* without the closing quote */
  if (n >= 3 && !memcmp(v + n - 2, "\\n", 2) && v[n - 3] != '\\') n -= 2;
  etw_jw_raw(w, v, n);
  etw_jw_ch(w, '"');
  return 1;
}

/* ---- Windows kernel events */

/* the thread table's entry of @tid (made at first sight, its process unknown); -1 when full */
static int tp_slot(struct conv_chrome *c, int64_t tid) {
  uint32_t *slot = kmap_get(&c->tpid, NULL, tid, 0, c->ntp);
  if (!slot) return -1;
  uint32_t k = *slot - 1;
  if (k == c->ntp) {
    c->tp[k].pid = -1;
    c->tp[k].tid = tid;
    c->ntp++;
  }
  return (int)k;
}

/* what an event tells of a thread's process: Thread events' ProcessId/TThreadId (last wins), else
 * the first Execution ids seen; @track: the event's thread gets a track (a sample) */
static void win_threads(struct conv_chrome *c, const struct conv_ev *e, int64_t pid, int64_t tid, int track) {
  int64_t p = data_int(e, "ProcessId"), t = data_int(e, "TThreadId");
  int k;
  if (p >= 0 && t > 0 && (k = tp_slot(c, t)) >= 0) c->tp[k].pid = p;
  if (e->pid >= 0 && e->tid >= 0 && (k = tp_slot(c, tid)) >= 0) {
    if (c->tp[k].pid < 0) c->tp[k].pid = pid;
    if (track) c->tp[k].used = 1;
  }
}

/* the slice of r->tid on @cpu from r->ft to @ft (@stop: the CSwitch out of it, or 0: inferred) */
static int win_slice(struct conv_chrome *c, const struct lx_run *r, unsigned cpu, int64_t ft, uint64_t stop) {
  if (c->nws == c->capws) {
    size_t cap = c->capws ? c->capws * 2 : 4096;
    struct wslice *p = realloc(c->ws, cap * sizeof *p);
    if (!p) return -1;
    c->ws = p;
    c->capws = cap;
  }
  c->ws[c->nws++] = (struct wslice){r->ft, ft < r->ft ? r->ft : ft, r->tid, r->seq, stop, cpu, r->w};
  return 0;
}

/* Thread/CSwitch on the record's CPU: OldThreadId's slice there ends (end_inferred when another
 * thread was running there: switches were lost), NewThreadId's starts (its slice still open on
 * another CPU ends here, inferred); thread 0 (idle) gets none */
static int win_switch(struct conv_chrome *c, const struct conv_ev *e, int64_t ft) {
  if (!c->run && !(c->run = calloc(LX_CPUS, sizeof *c->run))) return 0; /* (no slices then) */
  unsigned cpu = e->rec->cpu;
  struct lx_run *r = &c->run[cpu];
  int64_t nw = data_int(e, "NewThreadId"), old = data_int(e, "OldThreadId");
  if (cpu >= c->ncpu) c->ncpu = cpu + 1;
  if (cpu >= c->maxcpu) c->maxcpu = cpu + 1;
  if (r->on && win_slice(c, r, cpu, ft, r->tid == old ? e->seq : 0)) return -1;
  r->on = 0;
  r->seen = 1;
  if (nw <= 0) return 0;
  long k0 = running_on(c, nw);
  if (k0 >= 0 && (unsigned)k0 != cpu) { /* its slice still open on another CPU ends here */
    struct lx_run *o = &c->run[k0];
    if (win_slice(c, o, (unsigned)k0, ft, 0)) return -1;
    o->on = 0;
  }
  r->on = 1;
  r->tid = nw;
  note_on(c, cpu, nw);
  r->ft = ft;
  r->seq = e->seq;
  r->w = wake_take(c, nw);
  int k = tp_slot(c, nw);
  if (k >= 0) c->tp[k].used = 1;
  return 0;
}

/* the process name of @pid (JSON string text), or NULL */
static const char *proc_name(struct conv_chrome *c, int64_t pid) {
  uint32_t *k = kmap_get(&c->procs, NULL, pid, 0, UINT32_MAX);
  return k ? c->pn[*k - 1].name : NULL;
}

/* at the end: slices still open end at the last event (inferred); every slice → its X pair (pid
 * and process name known now); a thread on a track without a thread_name is named as its process */
static int win_finish(struct conv_chrome *c) {
  for (unsigned cpu = 0; c->run && cpu < c->ncpu; cpu++)
    if (c->run[cpu].on) {
      if (win_slice(c, &c->run[cpu], cpu, c->ft_last, 0)) return -1;
      c->run[cpu].on = 0;
    }
  for (size_t i = 0; i < c->nws; i++) {
    const struct wslice *s = &c->ws[i];
    struct lx_run r = {.ft = s->ft0, .tid = s->tid, .seq = s->seq0, .w = s->w};
    uint32_t *k = kmap_get(&c->tpid, NULL, s->tid, 0, UINT32_MAX);
    r.pid = k && c->tp[*k - 1].pid > 0 ? c->tp[*k - 1].pid : 0;
    const char *pn = proc_name(c, r.pid);
    if (pn && strlen(pn) < sizeof r.comm) strcpy(r.comm, pn);
    else snprintf(r.comm, sizeof r.comm, "\"%lld\"", (long long)s->tid);
    if (lx_slices(c, &r, s->cpu, s->ft1, s->seq1)) return -1;
  }
  for (uint32_t i = 0; i < c->ntp; i++) {
    int64_t pid = c->tp[i].pid > 0 ? c->tp[i].pid : 0, tid = c->tp[i].tid;
    const char *pn = proc_name(c, pid);
    if (c->tp[i].used && pn && !kmap_get(&c->threads, NULL, pid, tid, UINT32_MAX))
      set_name(c, &c->threads, c->tn, &c->ntn, pid, tid, pn, strlen(pn));
  }
  return 0;
}

/* `"stack":[…],` — the first CHROME_FRAMES frames of the event's Stack (leaf first): "Module+0xOffset"
 * (or "Symbol+0xOffset"), else its Address */
static void put_stack(struct etw_jw *w, const char *s, size_t n) {
  etw_jw_lit(w, "\"stack\":[");
  size_t pos = 1, fl, vl, ol;
  for (int i = 0; i < CHROME_FRAMES && pos < n; i++) {
    while (pos < n && (s[pos] == ',' || s[pos] == ' ')) pos++;
    if (pos >= n || s[pos] != '{' || !(fl = conv_json_span(s + pos, n - pos))) break;
    const char *f = s + pos, *v, *o = conv_json_member(f, fl, "Offset", &ol);
    if (i) etw_jw_ch(w, ',');
    if (((v = conv_json_member(f, fl, "Module", &vl)) || (v = conv_json_member(f, fl, "Symbol", &vl))) &&
        v[0] == '"' && vl >= 2 && o) {
      char off[32];
      snprintf(off, sizeof off, "+0x%llx\"", (unsigned long long)conv_json_int(o, ol));
      etw_jw_raw(w, v, vl - 1);
      etw_jw_lit(w, off);
    } else if ((v = conv_json_member(f, fl, "Address", &vl)) && v[0] == '"') {
      etw_jw_raw(w, v, vl);
    } else {
      etw_jw_lit(w, "\"?\"");
    }
    pos += fl;
  }
  etw_jw_lit(w, "],");
}

int conv_chrome_event(struct conv_chrome *c, const struct conv_ev *e) {
  struct etw_jw *w = &c->txt;
  int64_t pid = e->pid < 0 ? 0 : e->pid, tid = e->tid < 0 ? 0 : e->tid;
  int64_t ft = (int64_t)e->rec->filetime;
  if (!c->any || ft < c->ft0) c->ft0 = ft;
  if (!c->any || ft > c->ft_last) c->ft_last = ft;
  c->any = 1;
  struct item x = {ft, e->seq, c->arrivals++, 0, w->len, 0, 0};
  etw_jw_lit(w, "{\"name\":");
  size_t name_off = w->len;
  char nm[300];
  if (e->ref->name) snprintf(nm, sizeof nm, "%s", e->ref->name);
  else snprintf(nm, sizeof nm, "%s/%u", e->ref->provider, e->rec->desc.id);
  if (!e->lx || !lx_print_name(w, e)) etw_jw_cs(w, nm);
  size_t name_len = w->len - name_off;
  etw_jw_lit(w, ",\"cat\":");
  etw_jw_cs(w, e->ref->provider);
  etw_jw_lit(w, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
  x.head = (uint32_t)(w->len - x.off);
  etw_jw_lit(w, ",\"pid\":");
  etw_jw_i64(w, pid);
  etw_jw_lit(w, ",\"tid\":");
  etw_jw_i64(w, tid);
  etw_jw_lit(w, ",\"args\":{");
  if (e->data && e->data_len > 2) {
    etw_jw_raw(w, e->data + 1, e->data_len - 2);
    etw_jw_ch(w, ',');
  }
  if (e->stack && e->stack_len > 2 && e->stack[0] == '[') put_stack(w, e->stack, e->stack_len);
  etw_jw_lit(w, "\"seq\":");
  etw_jw_u64(w, e->seq);
  etw_jw_lit(w, ",\"cpu\":");
  etw_jw_u64(w, e->rec->cpu);
  etw_jw_lit(w, "}}");
  if (w->err) return -1;
  x.len = (uint32_t)(w->len - x.off);
  if (push(c, &x)) return -1;
  if (e->ref->name && e->data) { /* a wakeup: waits for its thread's switch-in */
    int64_t woken = -1;
    if (e->lx && !strcmp(e->ref->provider, "sched") &&
        (!strcmp(e->ref->name, "sched_wakeup") || !strcmp(e->ref->name, "sched_wakeup_new")))
      woken = data_int(e, "pid");
    else if (!e->lx && !strcmp(nm, "Thread/ReadyThread"))
      woken = data_int(e, "TThreadId");
    if (woken > 0) wake_note(c, woken, ft, e->seq, x.idx, pid, tid);
  }
  if (e->lx) {
    lx_names(c, e, pid, tid);
    if (e->ref->name && !strcmp(e->ref->name, "sched_switch") && !strcmp(e->ref->provider, "sched"))
      return lx_switch(c, e, ft, pid, tid);
    return lx_task_event(c, e, ft, pid, tid);
  }
  names(c, e, nm, pid, tid);
  win_threads(c, e, pid, tid, !strcmp(nm, "PerfInfo/Sample"));
  if (!strcmp(nm, "Thread/CSwitch") && e->data && win_switch(c, e, ft)) return -1;
  /* start/stop pairs: Opcode 1 then Opcode 2 of the same provider, Task and ThreadID */
  int64_t op = sys_int(e, "Opcode");
  if (op != 1 && op != 2) return 0;
  uint32_t *slot = kmap_get(&c->pairs, e->ref->provider, sys_int(e, "Task"), tid, c->nst);
  if (!slot) return 0;
  uint32_t k = *slot - 1;
  if (k == c->nst) c->nst++;
  struct start *s = &c->st[k];
  if (op == 1) {
    *s = (struct start){ft, e->seq, x.idx, 1, pid, tid, name_off, (uint32_t)name_len};
    return 0;
  }
  if (!s->open) return 0;
  s->open = 0;
  if (etw_jw_reserve(w, s->name_len + 16)) return -1; /* the start's name is copied from w itself */
  struct item y = {s->ft, s->seq, s->idx, 1, w->len, 0, 0};
  etw_jw_lit(w, "{\"name\":");
  memmove(w->buf + w->len, w->buf + s->name_off, s->name_len);
  w->len += s->name_len;
  etw_jw_lit(w, ",\"cat\":");
  etw_jw_cs(w, e->ref->provider);
  etw_jw_lit(w, ",\"ph\":\"X\",\"ts\":");
  y.head = (uint32_t)(w->len - y.off);
  put_dur(w, ft - s->ft);
  etw_jw_lit(w, ",\"pid\":");
  etw_jw_i64(w, s->pid);
  etw_jw_lit(w, ",\"tid\":");
  etw_jw_i64(w, s->tid);
  etw_jw_lit(w, ",\"args\":{\"start_seq\":");
  etw_jw_u64(w, s->seq);
  etw_jw_lit(w, ",\"stop_seq\":");
  etw_jw_u64(w, e->seq);
  etw_jw_lit(w, "}}");
  if (w->err) return -1;
  y.len = (uint32_t)(w->len - y.off);
  return push(c, &y);
}

static int by_time(const void *pa, const void *pb) {
  const struct item *a = pa, *b = pb;
  if (a->ft != b->ft) return a->ft < b->ft ? -1 : 1;
  if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
  if (a->idx != b->idx) return a->idx < b->idx ? -1 : 1;
  return (int)a->x - (int)b->x;
}

int conv_chrome_finish(struct conv_chrome *c, FILE *out, const char *source) {
  int rc = 0;
  if (out && win_finish(c)) { /* (the document is still written, without the rest of them) */
    fprintf(stderr, "etwd convert: chrome: memory maximum (%llu MiB) reached writing the CSwitch slices: some are missing\n",
            (unsigned long long)(etw_convert_chrome_max >> 20));
    rc = -1;
  }
  for (unsigned cpu = 0; out && c->run && cpu < LX_CPUS; cpu++) /* Linux: slices open at the end */
    if (lx_close_inferred(c, &c->run[cpu], cpu)) rc = -1;
  if (out) {
    qsort(c->it, c->n, sizeof *c->it, by_time);
    fputs("{\"traceEvents\":[", out);
    int first = 1;
    if (c->run) { /* the CPUs' tracks */
      fprintf(out, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"CPUs\"}}",
              LX_CPU_PID);
      first = 0;
      for (unsigned cpu = 0; cpu < LX_CPUS; cpu++)
        if (c->run[cpu].seen)
          fprintf(out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"CPU %u\"}}",
                  LX_CPU_PID, cpu, cpu);
    }
    for (uint32_t i = 0; i < c->npn; i++, first = 0)
      fprintf(out, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"args\":{\"name\":%s}}",
              first ? "" : ",", (long long)c->pn[i].pid, c->pn[i].name);
    for (uint32_t i = 0; i < c->ntn; i++, first = 0)
      fprintf(out, "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"name\":%s}}",
              first ? "" : ",", (long long)c->tn[i].pid, (long long)c->tn[i].tid, c->tn[i].name);
    for (size_t i = 0; i < c->n; i++, first = 0) {
      const struct item *x = &c->it[i];
      int64_t ns = (x->ft - c->ft0) * 100;
      fputs(first ? "\n" : ",\n", out);
      fwrite(c->txt.buf + x->off, 1, x->head, out);
      fprintf(out, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
      fwrite(c->txt.buf + x->off + x->head, 1, x->len - x->head, out);
    }
    struct etw_jw s;
    etw_jw_init(&s, 4096);
    etw_jw_cs(&s, source ? source : "");
    for (uint32_t i = 0; i < c->nwk; i++) /* wakeups whose thread was not switched in after them */
      if (c->wk[i].on) c->wake_unmatched++;
    fprintf(out, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"etwd\",\"source\":%s", etw_jw_cstr(&s));
    if (c->wakeups)
      fprintf(out, ",\"wakeups\":%llu,\"wakeup_flows\":%llu,\"wakeups_unmatched\":%llu,\"wakeups_dropped\":%llu",
              (unsigned long long)c->wakeups, (unsigned long long)c->wake_flows,
              (unsigned long long)c->wake_unmatched, (unsigned long long)c->wake_dropped);
    fputs("}}\n", out);
    if (c->wake_dropped)
      fprintf(stderr, "etwd convert: chrome: %llu wakeups of threads beyond the first %d woken ones have no flow arrow\n",
              (unsigned long long)c->wake_dropped, MAP_MAX);
    etw_jw_free(&s);
  }
  for (uint32_t i = 0; i < c->npn; i++) free(c->pn[i].name);
  for (uint32_t i = 0; i < c->ntn; i++) free(c->tn[i].name);
  free(c->pn);
  free(c->tn);
  free(c->st);
  free(c->pairs.e);
  free(c->procs.e);
  free(c->threads.e);
  free(c->run);
  free(c->ws);
  free(c->tp);
  free(c->tpid.e);
  free(c->wk);
  free(c->wkmap.e);
  free(c->oncpu.e);
  free(c->it);
  etw_jw_free(&c->txt);
  free(c);
  return rc;
}
