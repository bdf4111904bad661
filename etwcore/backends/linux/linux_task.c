/* linux_task.c — who an event's task is, for the System block's Execution: its ProcessID (tgid)
 * and ProcessName (the kernel's comm as of the event), per reader (struct lx_dec: the bounded
 * tgid cache filled from /proc/<tid>/status and /proc/<tid>/stat, the session's comm table
 * (linux_comm.c) fed from the events that carry comms, and the id-text slots the encoder
 * copies). Reader threads only, each on its own lx_dec (the comm table is shared and locked);
 * the hot lookup (task_get) stays inline in linux_decode.c and calls lx_task_slow here on a
 * miss, and events whose payload names tasks (e->cm) go through lx_task_cm. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <traceevent/event-parse.h>

#include "linux/linux_int.h"

/* a ProcessID / ThreadID value as the core writes it: negative is null */
static char *id_text(char *p, int32_t v) {
  if (v < 0) {
    memcpy(p, "null", 4);
    return p + 4;
  }
  char b[16];
  int n = snprintf(b, sizeof b, "%d", (int)v);
  memcpy(p, b, (size_t)n);
  return p + n;
}

/* The start of /proc/<tid>/@file (one read, at most @size - 1 bytes) into @buf, NUL-terminated:
 * its length, or <= 0 (gone, unreadable, empty) */
static ssize_t proc_read(int32_t tid, const char *file, char *buf, size_t size) {
  char path[48];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)tid, file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n > 0) buf[n] = 0;
  return n;
}

/* When the task now at @tid started, as trace (CLOCK_MONOTONIC) ns rounded down to /proc's
 * tick (field 22 of /proc/<tid>/stat: clock ticks since boot, CLOCK_BOOTTIME); 0 = unknown */
static uint64_t proc_start(int32_t tid) {
  char buf[1024];
  if (proc_read(tid, "stat", buf, sizeof buf) <= 0) return 0;
  const char *p = strrchr(buf, ')'); /* the comm may hold spaces and parentheses */
  for (int f = 2; p && f < 22; f++) p = strchr(p + 1, ' '); /* to field 22 */
  if (!p) return 0;
  unsigned long long ticks = strtoull(p + 1, NULL, 10);
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec b, m;
  clock_gettime(CLOCK_BOOTTIME, &b);
  clock_gettime(CLOCK_MONOTONIC, &m);
  int64_t susp = ((int64_t)b.tv_sec - m.tv_sec) * 1000000000LL + (b.tv_nsec - m.tv_nsec);
  int64_t st = (int64_t)(ticks * (1000000000ULL / (unsigned long long)(hz > 0 ? hz : 100))) - susp;
  return st > 0 ? (uint64_t)st : 1;
}

/* Tgid of @tid from /proc/<tid>/status, or 0 (gone, unreadable); its Name (the kernel's comm,
 * as /proc escapes it) into @comm ("" when not found); *start: proc_start */
static int32_t proc_tgid(int32_t tid, char comm[16], uint64_t *start) {
  comm[0] = 0;
  *start = proc_start(tid);
  char buf[512];
  if (proc_read(tid, "status", buf, sizeof buf) <= 0) return 0;
  if (!strncmp(buf, "Name:\t", 6)) { /* the first line */
    size_t k = strcspn(buf + 6, "\n");
    if (k > 15) k = 15;
    memcpy(comm, buf + 6, k);
    comm[k] = 0;
  }
  const char *t = strstr(buf, "\nTgid:");
  return t ? (int32_t)atoi(t + 7) : 0;
}

/* ProcessID of @tid (see struct lx_dec); *t receives the time the answer was made, from which
 * it stays valid for LX_TGID_TTL (the time of its cache entry, or @ts when there is none);
 * *e_out the cache entry (its comm and start from the same /proc read), or NULL */
static int32_t tgid_of(struct lx_dec *d, int32_t tid, uint64_t ts, uint64_t *t_out,
                       const struct lx_tgid **e_out) {
  *t_out = ts;
  *e_out = NULL;
  if (!d->resolve_tgid || tid <= 0 || !d->tg) return tid;
  struct lx_tgid *e = &d->tg[(uint32_t)tid & (LX_TGID_SLOTS - 1)];
  *e_out = e;
  if (e->tid == tid && ts - e->t < LX_TGID_TTL) {
    *t_out = e->t;
    return e->tgid;
  }
  if (ts - d->tg_win >= 1000000000ULL) {
    d->tg_win = ts;
    d->tg_left = LX_TGID_LOOKUPS;
  }
  int32_t tg = 0;
  uint64_t t = ts;
  e->comm[0] = 0;
  e->start = 0;
  if (d->tg_left > 0) {
    d->tg_left--;
    tg = proc_tgid(tid, e->comm, &e->start);
    if (tg > 0 && e->start > ts) { /* the pid was reused since the event: not that task */
      tg = 0;
      e->comm[0] = 0;
      t = ts - LX_TGID_TTL + 100000000ULL; /* ask again in 100 ms */
    }
  } else {
    t = ts - LX_TGID_TTL + 100000000ULL; /* over budget: assume, retry in 100 ms */
  }
  if (tg <= 0) { /* gone already: single-threaded processes have tgid == tid anyway */
    tg = tid;
    e->start = 0;
  }
  e->tid = tid;
  e->tgid = tg;
  e->t = t;
  *t_out = t;
  return tg;
}

/* The comm of @tid at @ts into @out ("" = unknown): the comm table as of @ts, complete once
 * the other readers have caught up (lx_comm_wait); else /proc's Name, only if the task now at
 * @tid surely existed at @ts (started a tick before it) and changed no name after @ts. */
static void name_at(struct lx_dec *d, int32_t tid, uint64_t ts, const struct lx_tgid *pe,
                    char out[16]) {
  memset(out, 0, 16);
  int proc_ok = pe && pe->start && pe->start + LX_TICK_NS <= ts && pe->comm[0];
  if (d->cm && tid > 0) {
    /* waiting is bounded per reader: LX_COMM_WAIT_BUDGET ns per second of trace time (a
     * workload of many threads must not slow the reader down); beyond it, no wait */
    if (ts - d->cw_win >= 1000000000ULL) {
      d->cw_win = ts;
      d->cw_left = LX_COMM_WAIT_BUDGET;
    }
    int sure = lx_comm_horizon(d->cm, d->cpu) >= ts;
    if (!sure && d->cw_left > 0) {
      int64_t waited = 0;
      sure = lx_comm_wait(d->cm, d->cpu, ts, d->cw_left < LX_COMM_WAIT_NS ? d->cw_left : LX_COMM_WAIT_NS, &waited);
      d->cw_left -= waited;
    }
    uint64_t when;
    char c[16];
    int r = lx_comm_get(d->cm, tid, ts, c, &when);
    if (r == LX_COMM_KNOWN || r == LX_COMM_BORN) {
      /* not sure: a later life of the tid, or a later change, may not be recorded yet; the
       * task alive now that was alive at the change and still has that name is the same */
      if (sure || (pe && pe->start && pe->start <= when && !strncmp(pe->comm, c, 16)))
        memcpy(out, c, 16);
      return;
    }
    if (r == LX_COMM_LATER) return; /* /proc has the name from after the change */
  }
  if (proc_ok) {
    memcpy(out, pe->comm, 16);
  } else if (d->cmdlines && tid > 0) { /* a file's saved cmdlines (no change of it recorded) */
    const char *n = tep_data_comm_from_pid(d->cmdlines, tid);
    if (n && strcmp(n, "<...>")) strncpy(out, n, 15);
  }
}

/* a sched_process_exec / task_rename of @tid: its comm changes, so this reader asks /proc again
 * at its next event (other readers' answers expire within LX_TGID_TTL) */
void lx_task_forget(struct lx_dec *d, int32_t tid) {
  if (tid <= 0) return;
  if (d->tg && d->tg[(uint32_t)tid & (LX_TGID_SLOTS - 1)].tid == tid)
    d->tg[(uint32_t)tid & (LX_TGID_SLOTS - 1)].tid = 0;
  d->ids[(uint32_t)tid % LX_IDS].key = UINT64_MAX;
}

/* `,"ProcessName":"<comm>"` at p (at most 17 + 6 * 15 bytes): every byte that is not printable
 * ASCII, and the quote and backslash, as \u00XX (so the text is JSON whatever the comm holds) */
static char *put_pname(char *p, const char *comm) {
  static const char hex[] = "0123456789abcdef";
  memcpy(p, ",\"ProcessName\":\"", 16);
  p += 16;
  for (size_t i = 0; i < 15 && comm[i]; i++) {
    unsigned char c = (unsigned char)comm[i];
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      memcpy(p, "\\u00", 4);
      p[4] = hex[c >> 4];
      p[5] = hex[c & 15];
      p += 6;
    } else {
      *p++ = (char)c;
    }
  }
  *p++ = '"';
  return p;
}

/* the id text of @x for pid/tid/comm (at most 11 + 107 + 12 + 11 + 42 bytes, + 16 of copy
 * slack); no ProcessName when the comm is unknown ("") */
static void idtxt_build(struct lx_dec *d, struct lx_idtxt *x, int32_t pid, int32_t tid,
                        const char *comm) {
  char *p = x->txt;
  p = id_text(p, pid);
  x->nm_off = (uint16_t)(p - x->txt);
  if (comm[0]) p = put_pname(p, comm);
  x->nm_len = (uint16_t)(p - x->txt - x->nm_off);
  if (comm[0]) /* comm points to 16 bytes, or to "" */
    memcpy(x->comm, comm, 16);
  else
    memset(x->comm, 0, 16);
  memcpy(p, d->t2, 16); /* t2_len <= 12 */
  p += d->t2_len;
  p = id_text(p, tid);
  memcpy(p, d->t3, 48); /* t3_len <= 42 */
  p += d->t3_len;
  x->pid = (uint32_t)pid;
  x->tid = (uint32_t)tid;
  x->len = (uint32_t)(p - x->txt);
}

/* the slot of @tid made current: ProcessID @pid (valid from @t), name @comm, table seq @sq */
static struct lx_idtxt *slot_put(struct lx_dec *d, int32_t tid, int32_t pid, uint64_t t,
                                 const char comm[16], uint32_t sq) {
  struct lx_idtxt *x = &d->ids[(uint32_t)tid % LX_IDS];
  if (x->key != (uint32_t)tid || x->pid != (uint32_t)pid || !x->len ||
      strncmp(x->comm, comm, 16))
    idtxt_build(d, x, pid, tid, comm);
  x->key = (uint32_t)tid;
  x->t = t;
  x->cseq = sq;
  return x;
}

static uint32_t seq_of(struct lx_dec *d, int32_t tid) {
  return atomic_load_explicit(&d->cseq[(uint32_t)tid & (LX_COMM_SLOTS - 1)], memory_order_acquire);
}

/* The id-text slot of @tid with its ProcessID and its name as of @ts, when the slot holds
 * another task, its answer expired or the comm table changed for its tid (see struct lx_dec). */
struct lx_idtxt *lx_task_slow(struct lx_dec *d, int32_t tid, uint64_t ts) {
  uint64_t t;
  const struct lx_tgid *pe;
  uint32_t sq = seq_of(d, tid); /* first: a change recorded during the lookup makes it stale */
  int32_t pid = tgid_of(d, tid, ts, &t, &pe);
  char comm[16];
  name_at(d, tid, ts, pe, comm);
  return slot_put(d, tid, pid, t, comm, sq);
}

/* ---- events that carry comms */

static int32_t ld_pid(const unsigned char *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* the comm at @off (16 bytes in a record of @size), NULL if it is not inside */
static const char *comm_at(const unsigned char *data, uint32_t size, uint32_t off) {
  return (uint64_t)off + 16 <= size ? (const char *)data + off : NULL;
}

/* sched_process_exec: the comm exec gives, the file's name (kbasename(bprm->filename), 15 bytes);
 * "" when exec took it from the opened file instead (execveat of a descriptor: "/dev/fd/N") */
static void exec_comm(const struct lx_evdesc *e, const unsigned char *data, uint32_t size,
                      char out[16]) {
  out[0] = 0;
  if ((uint64_t)e->cm_comm[0] + 4 > size) return;
  uint32_t v;
  memcpy(&v, data + e->cm_comm[0], 4);
  uint32_t off = v & 0xffff, len = v >> 16;
  if ((uint64_t)off + len > size || !len) return;
  const char *f = (const char *)data + off;
  size_t n = strnlen(f, len);
  if (n >= 8 && !memcmp(f, "/dev/fd/", 8)) return;
  const char *b = f + n;
  while (b > f && b[-1] != '/') b--;
  size_t k = (size_t)(f + n - b);
  if (k > 15) k = 15;
  memcpy(out, b, k);
  out[k] = 0;
}

/* the comm of the pair whose pid is the event's own task */
static void self_of(char self[16], const char *c0, int32_t p0, const char *c1, int32_t p1,
                    int32_t tid) {
  if (c0 && p0 == tid) memcpy(self, c0, 15);
  else if (c1 && p1 == tid) memcpy(self, c1, 15);
}

_Atomic uint32_t lx_cseq_none[LX_COMM_SLOTS];

struct lx_idtxt *lx_task_cm(struct lx_dec *d, const struct lx_evdesc *e,
                            const unsigned char *data, uint32_t size, int32_t tid, uint64_t ts) {
  char self[16] = {0};
  const char *c0 = e->ncm > 0 ? comm_at(data, size, e->cm_comm[0]) : NULL;
  const char *c1 = e->ncm > 1 ? comm_at(data, size, e->cm_comm[1]) : NULL;
  int32_t p0 = c0 && e->cm_pid[0] + 4 <= size ? ld_pid(data + e->cm_pid[0]) : -1;
  int32_t p1 = c1 && e->cm_pid[1] + 4 <= size ? ld_pid(data + e->cm_pid[1]) : -1;
  switch (e->cm) {
    case LX_CM_EXEC: /* the table has it from the task_rename just before; the file's name */
      exec_comm(e, data, size, self);
      if (self[0]) lx_comm_set(d->cm, tid, ts, self, 16, NULL, 0);
      if (!d->cm) lx_task_forget(d, tid);
      break;
    case LX_CM_RENAME: /* pair 0: pid, newcomm; comm 1: oldcomm */
      if (c0 && p0 > 0) {
        lx_comm_set(d->cm, p0, ts, c0, 16, e->ncm > 1 ? c1 : NULL, 0);
        if (!d->cm) lx_task_forget(d, p0);
        if (p0 == tid) memcpy(self, c0, 15);
      }
      break;
    case LX_CM_BIRTH: /* task_newtask: the new task (pair 0) has its creator's comm */
      if (c0 && p0 > 0) {
        lx_comm_set(d->cm, p0, ts, c0, 16, NULL, 1);
        memcpy(self, c0, 15);
      }
      break;
    case LX_CM_FORK: /* sched_process_fork: pair 0 the parent, pair 1 the child */
      if (c1 && p1 > 0) lx_comm_set(d->cm, p1, ts, c1, 16, NULL, 1);
      self_of(self, c0, p0, c1, p1, tid); /* the parent's comm names this event */
      break;
    default:
      self_of(self, c0, p0, c1, p1, tid);
  }
  if (e->cm_hide & d->hide) {
    atomic_store_explicit(&d->internal, atomic_load_explicit(&d->internal, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return NULL;
  }
  struct lx_idtxt *x = &d->ids[(uint32_t)tid % LX_IDS];
  uint32_t sq = seq_of(d, tid);
  int hit = x->key == (uint32_t)tid && ts - x->t < LX_TGID_TTL && x->cseq == sq;
  if (!self[0] || tid <= 0) return hit ? x : lx_task_slow(d, tid, ts);
  if (hit && !memcmp(x->comm, self, 16)) return x; /* (the usual case: sched_switch's prev) */
  uint64_t t;
  const struct lx_tgid *pe;
  int32_t pid = tgid_of(d, tid, ts, &t, &pe);
  return slot_put(d, tid, pid, t, self, sq);
}

/* the field @name of @ev if it is a comm (char[16]) / a pid (4 bytes); its offset or -1 */
static int64_t fld(struct tep_event *ev, const char *name, int size) {
  struct tep_format_field *f = tep_find_field(ev, name);
  return f && f->size == size && f->offset >= 0 ? f->offset : -1;
}

void lx_task_desc(struct lx_evdesc *e, struct tep_event *ev) {
  static const char *const pre[] = {"", "prev_", "next_", "parent_", "child_", NULL};
  int64_t pid, cm;
  e->ncm = 0;
  e->cm = 0;
  if (!strcmp(e->provider, "sched") && !strcmp(e->name, "sched_process_exec")) {
    struct tep_format_field *f = tep_find_field(ev, "filename");
    if (f && (f->flags & TEP_FIELD_IS_DYNAMIC) && f->offset >= 0) {
      e->cm = LX_CM_EXEC;
      e->cm_comm[0] = (uint32_t)f->offset;
    }
    return;
  }
  int ren = !strcmp(e->provider, "task") && !strcmp(e->name, "task_rename");
  if (ren && (pid = fld(ev, "pid", 4)) >= 0 && (cm = fld(ev, "newcomm", 16)) >= 0) {
    e->cm = LX_CM_RENAME;
    e->cm_hide = LX_HIDE_RENAME;
    e->cm_pid[0] = e->cm_pid[1] = (uint32_t)pid;
    e->cm_comm[0] = (uint32_t)cm;
    e->ncm = 1;
    if ((cm = fld(ev, "oldcomm", 16)) >= 0) {
      e->cm_comm[1] = (uint32_t)cm;
      e->ncm = 2;
    }
    return;
  }
  for (int k = 0; pre[k] && e->ncm < 2; k++) {
    char a[24], b[24];
    snprintf(a, sizeof a, "%spid", pre[k]);
    snprintf(b, sizeof b, "%scomm", pre[k]);
    if ((pid = fld(ev, a, 4)) < 0 || (cm = fld(ev, b, 16)) < 0) continue;
    e->cm_pid[e->ncm] = (uint32_t)pid;
    e->cm_comm[e->ncm++] = (uint32_t)cm;
  }
  if (!e->ncm) return;
  e->cm = LX_CM_PAIRS;
  if (!strcmp(e->provider, "task") && !strcmp(e->name, "task_newtask")) {
    e->cm = LX_CM_BIRTH;
    e->cm_hide = LX_HIDE_NEWTASK;
  } else if (!strcmp(e->provider, "sched") && !strcmp(e->name, "sched_process_fork") &&
             e->ncm == 2) {
    e->cm = LX_CM_FORK;
  }
}

void lx_task_hide(struct lx_dec *d, unsigned mask) {
  static const char *const nm[2] = {"task_newtask", "task_rename"};
  d->hide = 0;
  for (int i = 0; i < 2; i++) {
    struct tep_event *ev = d->tep && (mask & (1u << i)) ? tep_find_event_by_name(d->tep, "task", nm[i]) : NULL;
    d->hide_id[i] = ev ? (uint16_t)ev->id : 0xffff;
    if (ev) d->hide |= (uint8_t)(1u << i);
  }
}
