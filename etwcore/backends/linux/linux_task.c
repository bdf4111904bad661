/* linux_task.c — who an event's task is, for the System block's Execution: its ProcessID (tgid)
 * and ProcessName (comm), per reader (struct lx_dec: the bounded tgid cache filled from
 * /proc/<tid>/status, the kernel's saved_cmdlines for tasks already gone, and the id-text slots
 * the encoder copies). Reader threads only, each on its own lx_dec; the hot lookup (task_get)
 * stays inline in linux_decode.c and calls lx_task_slow here on a miss. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tracefs.h>

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

/* Tgid of @tid from /proc/<tid>/status, or 0 (gone, unreadable); its Name (the kernel's comm,
 * as /proc escapes it) into @comm ("" when not found) */
static int32_t proc_tgid(int32_t tid, char comm[16]) {
  comm[0] = 0;
  char path[48], buf[512];
  snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  if (!strncmp(buf, "Name:\t", 6)) { /* the first line */
    size_t k = strcspn(buf + 6, "\n");
    if (k > 15) k = 15;
    memcpy(comm, buf + 6, k);
    comm[k] = 0;
  }
  const char *t = strstr(buf, "\nTgid:");
  return t ? (int32_t)atoi(t + 7) : 0;
}

/* the comm of @tid in the kernel's saved_cmdlines (re-read when older than LX_CMDL_EVERY at
 * @ts) into @comm, "" when it has none: a task that exited before its events were decoded */
static void cmdl_comm(struct lx_dec *d, int32_t tid, uint64_t ts, char comm[16]) {
  comm[0] = 0;
  if (!d->cmdl || ts - d->cmdl_t >= LX_CMDL_EVERY) {
    const char *dir = tracefs_tracing_dir();
    char path[512];
    if (!dir || (size_t)snprintf(path, sizeof path, "%s/saved_cmdlines", dir) >= sizeof path) return;
    if (!d->cmdl && !(d->cmdl = malloc(LX_CMDL_MAX + 2))) return;
    d->cmdl_t = ts;
    d->cmdl[0] = '\n'; /* every entry then starts with "\n<pid> " */
    d->cmdl_len = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n;
    while (d->cmdl_len < LX_CMDL_MAX &&
           (n = read(fd, d->cmdl + d->cmdl_len, LX_CMDL_MAX - d->cmdl_len)) > 0)
      d->cmdl_len += (size_t)n;
    close(fd);
    d->cmdl[d->cmdl_len] = 0;
  }
  char key[24];
  int kn = snprintf(key, sizeof key, "\n%d ", (int)tid);
  const char *hit = memmem(d->cmdl, d->cmdl_len, key, (size_t)kn);
  if (!hit) return;
  hit += kn;
  size_t k = strcspn(hit, "\n");
  if (k > 15) k = 15;
  memcpy(comm, hit, k);
  comm[k] = 0;
}

/* ProcessID of @tid (see struct lx_dec); *t receives the time the answer was made, from which
 * it stays valid for LX_TGID_TTL (the time of its cache entry, or @ts when there is none);
 * *comm_out the task's comm from the same answer ("" = unknown) */
static int32_t tgid_of(struct lx_dec *d, int32_t tid, uint64_t ts, uint64_t *t_out,
                       const char **comm_out) {
  *t_out = ts;
  *comm_out = "";
  if (!d->resolve_tgid || tid <= 0 || !d->tg) return tid;
  struct lx_tgid *e = &d->tg[(uint32_t)tid & (LX_TGID_SLOTS - 1)];
  if (e->tid == tid && ts - e->t < LX_TGID_TTL) {
    *t_out = e->t;
    *comm_out = e->comm;
    return e->tgid;
  }
  if (ts - d->tg_win >= 1000000000ULL) {
    d->tg_win = ts;
    d->tg_left = LX_TGID_LOOKUPS;
  }
  int32_t tg = 0;
  uint64_t t = ts;
  e->comm[0] = 0;
  if (d->tg_left > 0) {
    d->tg_left--;
    tg = proc_tgid(tid, e->comm);
  } else {
    t = ts - LX_TGID_TTL + 100000000ULL; /* over budget: assume, retry in 100 ms */
  }
  if (tg <= 0) { /* gone already: single-threaded processes have tgid == tid anyway */
    tg = tid;
    if (d->tg_left > 0) cmdl_comm(d, tid, ts, e->comm);
  }
  e->tid = tid;
  e->tgid = tg;
  e->t = t;
  *t_out = t;
  *comm_out = e->comm;
  return tg;
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

/* The id-text slot of @tid with its ProcessID, when the slot holds another task or its answer
 * expired: the tgid cache (tgid_of), then the slot's text if the task or its ProcessID changed.
 * The same answers as tgid_of for every event (see struct lx_dec). */
struct lx_idtxt *lx_task_slow(struct lx_dec *d, int32_t tid, uint64_t ts) {
  uint64_t t;
  const char *comm;
  int32_t pid = tgid_of(d, tid, ts, &t, &comm);
  struct lx_idtxt *x = &d->ids[(uint32_t)tid % LX_IDS];
  if (x->key != (uint32_t)tid || x->pid != (uint32_t)pid || !x->len ||
      strncmp(x->comm, comm, 16))
    idtxt_build(d, x, pid, tid, comm);
  x->key = (uint32_t)tid;
  x->t = t;
  return x;
}
