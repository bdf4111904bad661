/* dec_proc.c — process context of ETL and Windows live events (issue 20 item 7, issue 23 item 3),
 * per decoder: owned by the decoder's thread, no shared state.
 *
 * - ProcessName: a pid → name table filled from the stream's kernel Process events (Start,
 *   End, DCStart/DCEnd rundown, Defunct: whatever names the pid, in stream order, so a reused
 *   pid takes its new name at its Start). The name is TraceEvent's PName: ImageFileName without
 *   directory and extension ("powershell.exe" → "powershell"). An End keeps the name (later
 *   events of the pid, such as its thread and image rundown, still show it); the entry is only
 *   marked ended, so that a full table evicts ended processes first.
 * - PID/TID of kernel events whose payload names them (what TraceEvent's parsers show, checked
 *   against PerfView's net.4.5.2.x64 baseline): Process and Image events take the payload's
 *   ProcessId and no thread, Thread Start/End/rundown its ProcessId and TThreadId, StackWalk its
 *   StackProcess/StackThread, TcpIp/UdpIp their PID, SystemConfig/Services its ProcessId;
 *   PerfInfo/Sample its ThreadId, Memory/HardFault its TThreadId and DiskIO Read/Write/Flush their
 *   IssuingThreadId, each with that thread's process from a tid → pid table filled by the
 *   Thread events.
 * - Host: the ComputerName of a SystemConfig/CPU event (from that event on) unless
 *   etw_decoder_set_host fixed it.
 *
 * Both tables are bounded (DEC_PROC_MAX pids, DEC_THR_MAX threads): when full, the ended
 * entries are dropped; if none is, the new entry is dropped and counted (proc_dropped). A name
 * that changes tells dec_sys.c, whose cached (pid, name, tid) texts must follow (the fast paths
 * stay byte-identical to etw_event_write_system, which takes dec_proc_name).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/host.h"

#define DEC_PROC_MAX 16384 /* named pids at once */
#define DEC_THR_MAX 65536  /* tid → pid entries at once */
#define PNAME_SRC 23       /* bytes of a name kept: 16 + 2 × 23 + 1 ≤ DEC_PNAME_MAX */

struct pent {
  uint32_t pid;
  uint8_t used, ended, tlen;
  char name[PNAME_SRC * 2 + 1]; /* UTF-8 (ANSI bytes taken as Latin-1) */
  char txt[DEC_PNAME_MAX];      /* `,"ProcessName":"…"` */
};
struct tent {
  uint32_t tid, pid;
  uint8_t used, ended;
};
struct dec_proc {
  struct pent *p;
  uint32_t pcap, pn; /* slots (a power of 2), used */
  struct tent *t;
  uint32_t tcap, tn;
  uint64_t dropped;
};

/* the groups dec_proc_apply looks at (HookId >> 8; EventTrace for its header's ids) */
const unsigned char dec_proc_groups[256] = {[0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x05] = 1, [0x06] = 1,
                                            [0x08] = 1, [0x0B] = 1, [0x0F] = 1, [0x14] = 1, [0x18] = 1};

/* class GUIDs of those groups (Windows byte layout), for classic (live) kernel records */
#define G ETW_GUID_BYTES
static const struct {
  unsigned char group;
  unsigned char guid[16];
} CLASS[] = {
    {0x01, G(0x3d6fa8d4, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c)}, /* DiskIo */
    {0x02, G(0x3d6fa8d3, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c)}, /* PageFault */
    {0x03, G(0x3d6fa8d0, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c)}, /* Process */
    {0x05, G(0x3d6fa8d1, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c)}, /* Thread */
    {0x06, G(0x9a280ac0, 0xc8e0, 0x11d1, 0x84, 0xe2, 0x00, 0xc0, 0x4f, 0xb9, 0x98, 0xa2)}, /* TcpIp */
    {0x08, G(0xbf3a50c5, 0xa9c9, 0x4988, 0xa0, 0x05, 0x2d, 0xf0, 0xb7, 0xc8, 0x0f, 0x80)}, /* UdpIp */
    {0x0B, G(0x01853a65, 0x418f, 0x4f36, 0xae, 0xfc, 0xdc, 0x0f, 0x1d, 0x2f, 0xd2, 0x35)}, /* SystemConfig */
    {0x0F, G(0xce1dbfb4, 0x137e, 0x4da6, 0x87, 0xb0, 0x3f, 0x59, 0xaa, 0x10, 0x2c, 0xbc)}, /* PerfInfo */
    {0x14, G(0x2cb15d1d, 0x5fc1, 0x11d2, 0xab, 0xe1, 0x00, 0xa0, 0xc9, 0x11, 0xf5, 0x18)}, /* Image */
    {0x18, G(0xdef2fe46, 0x7bd6, 0x4b80, 0xbd, 0x94, 0xf5, 0x7f, 0xe2, 0x0d, 0x0c, 0xe3)}, /* StackWalk */
};
#undef G

static uint32_t hash32(uint32_t v) { return v * 2654435761u; }

static struct dec_proc *proc_get(struct etw_decoder *d) {
  if (!d->proc) d->proc = calloc(1, sizeof *d->proc);
  return d->proc;
}

void dec_proc_free(struct etw_decoder *d) {
  if (!d->proc) return;
  free(d->proc->p);
  free(d->proc->t);
  free(d->proc);
  d->proc = NULL;
}

uint64_t etw_decoder_proc_dropped(const struct etw_decoder *d) { return d->proc ? d->proc->dropped : 0; }

static const struct pent *pfind(const struct dec_proc *x, uint32_t pid) {
  if (!x || !x->pn) return NULL;
  uint32_t m = x->pcap - 1;
  for (uint32_t i = hash32(pid) & m;; i = (i + 1) & m) {
    const struct pent *e = &x->p[i];
    if (!e->used) return NULL;
    if (e->pid == pid) return e;
  }
}

unsigned dec_proc_text(const struct etw_decoder *d, uint32_t pid, const char **txt) {
  const struct pent *e = pid == 0xFFFFFFFFu ? NULL : pfind(d->proc, pid);
  *txt = e ? e->txt : "";
  return e ? e->tlen : 0;
}

const char *dec_proc_name(const struct etw_decoder *d, int64_t pid) {
  const struct pent *e = pid < 0 || pid > 0xFFFFFFFEll ? NULL : pfind(d->proc, (uint32_t)pid);
  return e && e->tlen ? e->name : NULL;
}

/* ---- the tables: open addressing, at most half full; rebuilt to grow or to drop ended entries */

/* Put @src (the live entries of the old array) into a new array of @cap slots. */
static int prehash(struct dec_proc *x, uint32_t cap, int drop_ended) {
  struct pent *n = calloc(cap, sizeof *n);
  if (!n) return -1;
  uint32_t k = 0;
  for (uint32_t i = 0; i < x->pcap; i++) {
    const struct pent *e = &x->p[i];
    if (!e->used || (drop_ended && e->ended)) continue;
    uint32_t j = hash32(e->pid) & (cap - 1);
    while (n[j].used) j = (j + 1) & (cap - 1);
    n[j] = *e;
    k++;
  }
  free(x->p);
  x->p = n;
  x->pcap = cap;
  x->pn = k;
  return 0;
}

static int thash(struct dec_proc *x, uint32_t cap, int drop_ended) {
  struct tent *n = calloc(cap, sizeof *n);
  if (!n) return -1;
  uint32_t k = 0;
  for (uint32_t i = 0; i < x->tcap; i++) {
    const struct tent *e = &x->t[i];
    if (!e->used || (drop_ended && e->ended)) continue;
    uint32_t j = hash32(e->tid) & (cap - 1);
    while (n[j].used) j = (j + 1) & (cap - 1);
    n[j] = *e;
    k++;
  }
  free(x->t);
  x->t = n;
  x->tcap = cap;
  x->tn = k;
  return 0;
}

/* The slot of @pid (found, or a free one with room for it), NULL when the table is full of live
 * processes (or no memory). *@evicted: ended entries were dropped (their names are gone). */
static struct pent *pslot(struct dec_proc *x, uint32_t pid, int *evicted) {
  if (x->pn) {
    struct pent *e = (struct pent *)pfind(x, pid);
    if (e) return e;
  }
  if ((x->pn + 1) * 2 > x->pcap) {
    if (x->pcap < 2 * DEC_PROC_MAX) {
      if (prehash(x, x->pcap ? x->pcap * 2 : 256, 0)) return NULL;
    } else {
      if (prehash(x, x->pcap, 1)) return NULL;
      *evicted = 1;
      if ((x->pn + 1) * 2 > x->pcap) return NULL;
    }
  }
  uint32_t m = x->pcap - 1, i = hash32(pid) & m;
  while (x->p[i].used) i = (i + 1) & m;
  x->pn++;
  x->p[i].used = 1;
  x->p[i].pid = pid;
  x->p[i].name[0] = 0;
  x->p[i].tlen = 0;
  return &x->p[i];
}

static void thread_set(struct dec_proc *x, uint32_t tid, uint32_t pid, int ended) {
  if (tid == 0xFFFFFFFFu) return;
  uint32_t m = x->tcap - 1;
  if (x->tn)
    for (uint32_t i = hash32(tid) & m; x->t[i].used; i = (i + 1) & m)
      if (x->t[i].tid == tid) {
        x->t[i].pid = pid;
        x->t[i].ended = (uint8_t)ended;
        return;
      }
  if ((x->tn + 1) * 2 > x->tcap) {
    if (x->tcap < 2 * DEC_THR_MAX) {
      if (thash(x, x->tcap ? x->tcap * 2 : 1024, 0)) return;
    } else if (thash(x, x->tcap, 1) || (x->tn + 1) * 2 > x->tcap) {
      x->dropped++;
      return;
    }
  }
  m = x->tcap - 1;
  uint32_t i = hash32(tid) & m;
  while (x->t[i].used) i = (i + 1) & m;
  x->tn++;
  x->t[i] = (struct tent){.tid = tid, .pid = pid, .used = 1, .ended = (uint8_t)ended};
}

static inline uint32_t thread_pid(const struct dec_proc *x, uint32_t tid) {
  if (!x || !x->tn) return 0xFFFFFFFFu;
  uint32_t m = x->tcap - 1;
  for (uint32_t i = hash32(tid) & m; x->t[i].used; i = (i + 1) & m)
    if (x->t[i].tid == tid) return x->t[i].pid;
  return 0xFFFFFFFFu;
}

/* ---- names */

/* TraceEvent's PName of ImageFileName @s[0..n) (ANSI, maybe a path): the file name without its
 * extension, as UTF-8 (bytes ≥ 0x80 taken as Latin-1, control bytes as '?'), at most PNAME_SRC
 * source bytes. */
static void pname_of(const unsigned char *s, size_t n, char *out) {
  size_t b = 0, e = n;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\\' || s[i] == '/') b = i + 1;
  for (size_t i = n; i > b + 1; i--)
    if (s[i - 1] == '.') {
      e = i - 1;
      break;
    }
  if (e - b > PNAME_SRC) e = b + PNAME_SRC;
  char *o = out;
  for (size_t i = b; i < e; i++) {
    unsigned char c = s[i];
    if (c < 0x20 || c == 0x7f) {
      *o++ = '?';
    } else if (c < 0x80) {
      *o++ = (char)c;
    } else {
      *o++ = (char)(0xC0 | c >> 6);
      *o++ = (char)(0x80 | (c & 0x3F));
    }
  }
  *o = 0;
}

/* @pid is named @name now (ended: the process ended). */
static void name_set(struct etw_decoder *d, uint32_t pid, const char *name, int ended) {
  struct dec_proc *x = proc_get(d);
  if (!x || pid == 0xFFFFFFFFu) return;
  int evicted = 0;
  struct pent *e = pslot(x, pid, &evicted);
  if (evicted) dec_sys_pid_renamed(d, 0, 1);
  if (!e) {
    x->dropped++;
    return;
  }
  e->ended = (uint8_t)ended;
  if (!*name || !strcmp(e->name, name)) return; /* (an event without a name keeps the known one) */
  /* the text with the shared writer, so it is byte for byte what etw_event_write_system writes */
  struct etw_jw w;
  etw_jw_init(&w, 4 * DEC_PNAME_MAX);
  etw_jw_lit(&w, ",\"ProcessName\":");
  etw_jw_cs(&w, name);
  if (!w.err && w.len <= DEC_PNAME_MAX && *name) {
    memcpy(e->txt, w.buf, w.len);
    e->tlen = (uint8_t)w.len;
    memcpy(e->name, name, strlen(name) + 1);
  } else {
    e->tlen = 0;
    e->name[0] = 0;
  }
  etw_jw_free(&w);
  dec_sys_pid_renamed(d, pid, 0);
}

/* ---- payloads */

static uint32_t rd32(const unsigned char *p) { return d_rd32(p); }

/* A Process event's (v2+) ProcessId and ImageFileName: 0, or -1 when the payload is too short. */
static int process_fields(const struct etw_rec *r, uint32_t *pid, const unsigned char **img, size_t *ilen) {
  size_t P = r->ptr_size, n = r->user_len, v = r->desc.version;
  const unsigned char *u = r->user_data;
  if (v < 2 || n < P + 4) return -1;
  *pid = rd32(u + P);
  size_t o = P + 16 + (v >= 3 ? P : 0) + (v >= 4 ? 4 : 0); /* the SID */
  if (o + 4 > n) return -1;
  if (rd32(u + o)) {
    size_t s = o + 2 * P; /* TOKEN_USER, then the SID: 8 + 4 × sub-authorities */
    if (s + 8 > n) return -1;
    o = s + 8 + 4 * (size_t)u[s + 1];
  } else {
    o += 4;
  }
  if (o > n) return -1;
  const unsigned char *z = memchr(u + o, 0, n - o);
  *img = u + o;
  *ilen = z ? (size_t)(z - (u + o)) : n - o;
  return 0;
}

/* The SystemConfig/CPU event's ComputerName (UTF-16 at 20, 256 units) as a host name: the
 * characters etw_host_valid allows, others as '-', at most ETW_HOST_MAX. */
static void cpu_host(struct etw_decoder *d, const struct etw_rec *r) {
  if (d->host_fixed || r->user_len < 22) return;
  char h[ETW_HOST_MAX + 1];
  size_t k = 0, units = (r->user_len - 20) / 2;
  if (units > 256) units = 256;
  for (size_t i = 0; i < units && k < ETW_HOST_MAX; i++) {
    unsigned c = r->user_data[20 + 2 * i] | (unsigned)r->user_data[21 + 2 * i] << 8;
    if (!c) break;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
    h[k++] = ok ? (char)c : '-';
  }
  h[k] = 0;
  const char *s = k ? etw_intern(h) : NULL;
  if (s == d->host) return;
  d->host = s;
  dec_sys_reset(d);
}

int etw_decoder_set_host(struct etw_decoder *d, const char *host) {
  if (host && !etw_host_valid(host)) return -1;
  d->host_fixed = 1;
  const char *s = host ? etw_intern(host) : NULL;
  if (s != d->host) {
    d->host = s;
    dec_sys_reset(d);
  }
  return 0;
}

/* The record's kernel group and type: from the HookId, or for a classic record from its class
 * GUID (a live kernel event); 0 when none of ours. */
static unsigned group_of(const struct etw_rec *r, unsigned *type) {
  if (r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) {
    unsigned g = r->hook_id >> 8;
    *type = r->hook_id & 255;
    if (g == 0x03 && *type == 10) g = 0x14; /* the legacy Image/Load hook */
    return g;
  }
  if (r->kind != ETW_REC_CLASSIC) return 0;
  for (size_t i = 0; i < sizeof CLASS / sizeof CLASS[0]; i++)
    if (!memcmp(r->provider_id, CLASS[i].guid, 16)) {
      *type = r->desc.opcode;
      return CLASS[i].group;
    }
  return 0;
}

/* @r with @pid and @tid: @r itself when they are its own, else @tmp */
static const struct etw_rec *with_ids(const struct etw_rec *r, struct etw_rec *tmp, uint32_t pid, uint32_t tid) {
  if (pid == r->pid && tid == r->tid) return r;
  if (r->n_ext) {
    *tmp = *r;
  } else { /* (no extended data: the items' array, most of the record, is not read) */
    memcpy(tmp, r, offsetof(struct etw_rec, ext));
    memcpy(&tmp->user_data, &r->user_data, sizeof *r - offsetof(struct etw_rec, user_data));
  }
  tmp->pid = pid;
  tmp->tid = tid;
  return tmp;
}

/* PerfInfo/Sample, the most frequent (its own small function: no registers to save for the
 * general one's cases) */
const struct etw_rec *dec_proc_sample(struct etw_decoder *d, const struct etw_rec *r, struct etw_rec *tmp) {
  if (r->user_len < (uint32_t)r->ptr_size + 4) return r;
  uint32_t stid = rd32(r->user_data + r->ptr_size);
  return with_ids(r, tmp, thread_pid(d->proc, stid), stid);
}

const struct etw_rec *dec_proc_apply(struct etw_decoder *d, const struct etw_rec *r, struct etw_rec *tmp) {
  if (r->hook_id == 0x0F2E && r->kind == ETW_REC_PERFINFO) return dec_proc_sample(d, r, tmp);
  const unsigned char *u = r->user_data;
  size_t n = r->user_len, P = r->ptr_size;
  unsigned t = 0, g = group_of(r, &t);
  uint32_t pid = r->pid, tid = r->tid, x;
  /* a kernel header with both ids says which process the thread is in */
  if (r->kind == ETW_REC_SYSTEM && pid != 0xFFFFFFFFu && tid != 0xFFFFFFFFu && tid && proc_get(d))
    thread_set(d->proc, tid, pid, 0);
  switch (g) {
  case 0x03: /* Process */
    if (t == 1 || t == 2 || t == 3 || t == 4 || t == 39) {
      const unsigned char *img;
      size_t il;
      if (process_fields(r, &x, &img, &il)) return r;
      char name[PNAME_SRC * 2 + 1];
      pname_of(img, il, name);
      name_set(d, x, name, t == 2 || t == 4 || t == 39);
    } else if ((t == 11 || t == 32 || t == 33) && n >= 4) {
      x = rd32(u);
    } else {
      return r;
    }
    pid = x;
    tid = 0xFFFFFFFFu;
    break;
  case 0x05: /* Thread */
    if (t < 1 || t > 4 || r->desc.version < 2 || n < 8) return r;
    pid = rd32(u);
    tid = rd32(u + 4);
    if (proc_get(d)) thread_set(d->proc, tid, pid, t == 2 || t == 4);
    break;
  case 0x14: /* Image: Load keeps the loading thread, Unload and the rundown have none */
    if (t == 2 || t == 3 || t == 4 || t == 10) {
      if (r->desc.version < 2 || n < 2 * P + 4) return r;
      pid = rd32(u + 2 * P);
      if (t != 10) tid = 0xFFFFFFFFu;
    } else {
      return r;
    }
    break;
  case 0x18: /* StackWalk: EventTimeStamp, StackProcess, StackThread */
    if ((t != 32 && t != 37 && t != 38) || n < 16) return r;
    pid = rd32(u + 8);
    tid = rd32(u + 12);
    break;
  case 0x06: /* TcpIp */
  case 0x08: /* UdpIp: PID first */
    if (t < 10 || t == 17 || n < 4) return r;
    pid = rd32(u);
    break;
  case 0x0B: /* SystemConfig */
    if (t == 10) cpu_host(d, r);
    if (t != 15 || n < 4) return r;
    pid = rd32(u); /* Services: the service's process */
    break;
  case 0x0F: /* PerfInfo/Sample: InstructionPointer, ThreadId */
    if (t != 46 || n < P + 4) return r;
    tid = rd32(u + P);
    pid = thread_pid(d->proc, tid);
    break;
  case 0x02: /* Memory/HardFault: InitialTime, ReadOffset, VirtualAddress, FileObject, TThreadId */
    if (t != 32 || n < 16 + 2 * P + 4) return r;
    tid = rd32(u + 16 + 2 * P);
    pid = thread_pid(d->proc, tid);
    break;
  case 0x01: /* DiskIO: the IssuingThreadId of version 3 */
    if (r->desc.version < 3) return r;
    if ((t == 10 || t == 11) && n >= 32 + 2 * P + 4) tid = rd32(u + 32 + 2 * P);
    else if (t == 14 && n >= 16 + P + 4) tid = rd32(u + 16 + P);
    else return r;
    pid = thread_pid(d->proc, tid);
    break;
  default:
    return r;
  }
  return with_ids(r, tmp, pid, tid);
}
