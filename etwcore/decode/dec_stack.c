/* dec_stack.c — stacks of ETL / Windows events (dec_stack.h). Owned by one reader/consumer thread.
 *
 * Why a learning pass instead of a hold: the stack cache's definitions (StackWalk/KeyDelete,
 * KeyRundown, KeyCreate: key + frames) come when the kernel evicts a cache entry or at the
 * trace's rundown — in net.4.5.2.x64 a median of 63,731 events after the KeyKernel/KeyUser
 * reference that names the event (EventTimeStamp, StackProcess, StackThread, StackKey). A bounded
 * hold of events could attach none of those, so a file is read once before its events are
 * written (etw_stk_prepass) and the stacks are indexed by the event they belong to.
 *
 * The index: entries (file, raw timestamp, thread, CPU, pid, kind, frames), in (file, timestamp)
 * order once learnt; events come in time order, so a cursor per file walks it forward (an event
 * earlier than the cursor — a clock anomaly — is found by binary search). An event claims, per part (kernel, user, CLR), the first unclaimed entry with its
 * file and timestamp whose thread is its thread (PerfInfo/Sample: the sampled thread of its
 * payload; another event without a thread in its header: the entries logged on its CPU); kernel
 * parts render before user parts, each innermost first. A key reference refers to the
 * NEXT definition of its key (keys are reused once an entry is evicted). ClrStack/Walk belongs to
 * the previous event of a CLR provider on its thread (TraceEvent's rule).
 *
 * Resolution: per process, address ranges of images (kernel Image Load/DCStart/DCEnd: base,
 * size, pid, file name) and of JIT-compiled methods (CLR MethodLoadVerbose, MethodDCStart/
 * EndVerbose: start, size, namespace, name); kernel addresses against the images of pid 0
 * (the kernel and drivers). A frame is {"Address","Module","Offset"} (offset from the image's
 * base), {"Address","Symbol","Offset"} (a method; offset from its start) or {"Address"}.
 *
 * Memory: every table of an index is bounded on its own (STK_MAX_*) and all indexes of the
 * process together by one byte budget (etw_stk_budget_set, `--stack-index-mb`): an index
 * reserves from it (one atomic counter) before it grows and gives back what it holds when freed.
 * A refused reservation stops that index growing for good; what it could not keep from then on
 * (walks, images and methods, like what is beyond its own bounds) is counted: `dropped`.
 */
#include "dec_stack.h"

#include "decode.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STK_MAX_ENTRIES (1u << 21) /* stack walks indexed */
#define STK_MAX_FRAMES (1u << 24)  /* frames stored (128 MiB) */
#define STK_MAX_RANGES (1u << 21)  /* images and methods */
#define STK_MAX_POOL (64u << 20)   /* bytes of names */
#define STK_MAX_PROCS 65536
#define STK_MAX_RENDER 1024        /* frames rendered per stack part */

enum { K_KERNEL = 0, K_USER = 1, K_CLR = 2, K_PARTS }; /* the order parts render in */

struct ent {
  uint64_t ts, key;
  uint32_t file, tid, pid;
  uint32_t off, n;               /* frames[off..off+n) */
  uint32_t pnext;                /* pending key references: next with the same key (index + 1) */
  uint16_t cpu;
  uint8_t part, state;           /* state: 0 ready, 1 waiting for its key's definition, 2 claimed,
                                    3 dropped (its frames not kept: never attached) */
};

struct range {
  uint64_t start, end;
  uint64_t maxend; /* the highest end of the ranges up to this one (sorted): stops the scan back */
  uint32_t frag, fraglen; /* `,"Module":"name","Offset":` (or "Symbol") rendered, in the pool */
};

struct proc {
  uint32_t pid, n, cap, sorted, last; /* last: the range found last (frames repeat a module) */
  struct range *r;
};

struct pend { uint64_t key; uint32_t head; uint8_t st; }; /* key → first waiting reference (index + 1); st: 0 empty, 1 live, 2 removed */
struct last { uint32_t tid, file; uint64_t ts; uint16_t cpu; uint8_t used; }; /* CLR event per (file, thread) */

struct etw_stk {
  struct ent *e;
  uint32_t ne, cap_e;
  uint32_t *ord, nord;   /* entry indexes in (file, ts, index) order (learn_end) */
  uint32_t fstart[ETW_ETL_MAX_FILES + 1], cur[ETW_ETL_MAX_FILES]; /* per file: its run of ord, cursor */
  uint64_t *fr;
  uint32_t nfr, cap_fr;
  struct proc *procs; /* open addressing by pid; pid 0xFFFFFFFF = empty */
  uint32_t pmask, nprocs, nranges;
  char *pool;
  uint32_t npool, cap_pool;
  struct pend *pend;
  uint32_t pdmask, npend;
  struct last *last;
  uint32_t lmask;
  uint64_t walks, attached, in_event;
  uint64_t dropped, rdropped; /* walks / images and methods not kept (bounds, budget) */
  uint64_t held;   /* bytes reserved from the budget */
  int full;        /* a reservation was refused: the index grows no more */
  int index_walks; /* 0: live (events are published before their walks come): images, methods only */
};

/* the kernel's Image class 2cb15d1d-5fc1-11d2-abe1-00a0c911f518 (classic records of relogged traces) */
static const unsigned char IMAGE_GUID[16] = {0x1d, 0x5d, 0xb1, 0x2c, 0xc1, 0x5f, 0xd2, 0x11,
                                             0xab, 0xe1, 0x00, 0xa0, 0xc9, 0x11, 0xf5, 0x18};
static int ord_build(struct etw_stk *k);

static const unsigned char CLR_RUNDOWN[16] = {0x1c, 0x02, 0x69, 0xa6, 0x50, 0xc4, 0x09, 0x46,
                                              0xa0, 0x35, 0x5a, 0xf5, 0x9a, 0xf4, 0xdf, 0x18};

static uint64_t rd(const unsigned char *p, unsigned sz) {
  if (sz == 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
  }
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint32_t mix(uint64_t a, uint64_t b) {
  uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xFF51AFD7ED558CCDull;
  return (uint32_t)(h ^ (h >> 32));
}

/* ---- the budget of all indexes of the process (any thread: atomics only) */

static _Atomic uint64_t g_limit = (uint64_t)ETW_STK_BUDGET_DEFAULT_MB << 20;
static _Atomic uint64_t g_used, g_peak, g_refused, g_wdropped, g_rdropped;

void etw_stk_budget_set(uint64_t bytes) { atomic_store(&g_limit, bytes); }

void etw_stk_budget_get(struct etw_stk_budget *b) {
  b->limit = atomic_load(&g_limit);
  b->used = atomic_load(&g_used);
  b->peak = atomic_load(&g_peak);
  b->refused = atomic_load(&g_refused);
  b->walks_dropped = atomic_load(&g_wdropped);
  b->images_dropped = atomic_load(&g_rdropped);
}

static void peak_note(uint64_t now) {
  uint64_t p = atomic_load(&g_peak);
  while (now > p && !atomic_compare_exchange_weak(&g_peak, &p, now)) {
  }
}

/* reserves @n more bytes for @k: 0, or -1 (refused: @k is full from now on) */
static int budget_take(struct etw_stk *k, size_t n) {
  if (k->full) return -1;
  uint64_t cur = atomic_load(&g_used);
  do {
    if (cur + n > atomic_load(&g_limit) || cur + n < cur) {
      k->full = 1;
      atomic_fetch_add(&g_refused, 1);
      return -1;
    }
  } while (!atomic_compare_exchange_weak(&g_used, &cur, cur + n));
  k->held += n;
  peak_note(cur + n);
  return 0;
}

static void budget_give(struct etw_stk *k, size_t n) {
  k->held -= n;
  atomic_fetch_sub(&g_used, n);
}

static void drop_walks(struct etw_stk *k, uint64_t n) {
  k->dropped += n;
  atomic_fetch_add(&g_wdropped, n);
}

static void drop_range(struct etw_stk *k) {
  k->rdropped++;
  atomic_fetch_add(&g_rdropped, 1);
}

struct etw_stk *etw_stk_new(int index_walks) {
  struct etw_stk *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->index_walks = index_walks;
  k->pmask = 63;
  k->pdmask = 1023;
  k->lmask = 1023;
  /* the first tables (≈ 45 KiB) are counted but never refused: an index always exists */
  k->held = sizeof *k + (k->pmask + 1) * sizeof *k->procs + (k->pdmask + 1) * sizeof *k->pend +
            (k->lmask + 1) * sizeof *k->last;
  peak_note(atomic_fetch_add(&g_used, k->held) + k->held);
  k->procs = malloc((k->pmask + 1) * sizeof *k->procs);
  k->pend = calloc(k->pdmask + 1, sizeof *k->pend);
  k->last = calloc(k->lmask + 1, sizeof *k->last);
  if (!k->procs || !k->pend || !k->last) {
    etw_stk_free(k);
    return NULL;
  }
  for (uint32_t i = 0; i <= k->pmask; i++) k->procs[i] = (struct proc){.pid = 0xFFFFFFFFu};
  return k;
}

void etw_stk_free(struct etw_stk *k) {
  if (!k) return;
  if (k->procs)
    for (uint32_t i = 0; i <= k->pmask; i++) free(k->procs[i].r);
  free(k->procs);
  free(k->e);
  free(k->ord);
  free(k->fr);
  free(k->pool);
  free(k->pend);
  free(k->last);
  atomic_fetch_sub(&g_used, k->held);
  free(k);
}

/* ---- growable arrays (bounded) */

/* @p holds *@cap elements of @el bytes; room for @need, at most @max: reserves @acc bytes per
 * element added from the budget (@acc >= @el: the entries' sort order is reserved with them) */
static int grow(struct etw_stk *k, void **p, uint32_t *cap, uint32_t need, size_t el, size_t acc, uint32_t max) {
  if (need <= *cap) return 0;
  if (need > max) return -1;
  uint32_t nc = *cap ? *cap : 256;
  while (nc < need) nc = nc > max / 2 ? max : nc * 2;
  size_t more = (size_t)(nc - *cap) * acc;
  if (budget_take(k, more)) return -1;
  void *q = realloc(*p, (size_t)nc * el);
  if (!q) {
    budget_give(k, more);
    return -1;
  }
  *p = q;
  *cap = nc;
  return 0;
}

static uint32_t pool_add(struct etw_stk *k, const char *s, size_t n) {
  if (grow(k, (void **)&k->pool, &k->cap_pool, k->npool + (uint32_t)n + 1, 1, 1, STK_MAX_POOL)) return UINT32_MAX;
  uint32_t at = k->npool;
  memcpy(k->pool + at, s, n);
  k->pool[at + n] = 0;
  k->npool += (uint32_t)n + 1;
  return at;
}

/* UTF-16LE (NUL-terminated or to @units) → UTF-8 in @out (at most @cap - 1 bytes), after the
 * last '\' when @base. Returns the length. */
static size_t utf16_name(const unsigned char *s, size_t units, char *out, size_t cap, int base) {
  size_t o = 0;
  for (size_t i = 0; i < units; i++) {
    uint32_t c = (uint32_t)s[2 * i] | (uint32_t)s[2 * i + 1] << 8;
    if (!c) break;
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < units) {
      uint32_t lo = (uint32_t)s[2 * i + 2] | (uint32_t)s[2 * i + 3] << 8;
      if (lo >= 0xDC00 && lo < 0xE000) {
        c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
        i++;
      }
    }
    if (base && (c == '\\' || c == '/')) {
      o = 0;
      continue;
    }
    unsigned char b[4];
    size_t nb;
    if (c < 0x80) b[0] = (unsigned char)c, nb = 1;
    else if (c < 0x800) b[0] = (unsigned char)(0xC0 | c >> 6), b[1] = (unsigned char)(0x80 | (c & 63)), nb = 2;
    else if (c < 0x10000) {
      b[0] = (unsigned char)(0xE0 | c >> 12), b[1] = (unsigned char)(0x80 | ((c >> 6) & 63));
      b[2] = (unsigned char)(0x80 | (c & 63)), nb = 3;
    } else {
      b[0] = (unsigned char)(0xF0 | c >> 18), b[1] = (unsigned char)(0x80 | ((c >> 12) & 63));
      b[2] = (unsigned char)(0x80 | ((c >> 6) & 63)), b[3] = (unsigned char)(0x80 | (c & 63)), nb = 4;
    }
    if (o + nb >= cap) break;
    memcpy(out + o, b, nb);
    o += nb;
  }
  out[o] = 0;
  return o;
}

/* the number of UTF-16 units of the NUL-terminated string at @p (bounded by @n bytes) */
static size_t str16_units(const unsigned char *p, size_t n) {
  size_t u = 0;
  while (2 * u + 1 < n && (p[2 * u] || p[2 * u + 1])) u++;
  return u;
}

/* ---- processes and ranges */

static struct proc *proc_get(struct etw_stk *k, uint32_t pid, int make) {
  if (pid == 0xFFFFFFFFu) return NULL;
  uint32_t i = mix(pid, 0) & k->pmask;
  while (k->procs[i].pid != 0xFFFFFFFFu) {
    if (k->procs[i].pid == pid) return &k->procs[i];
    i = (i + 1) & k->pmask;
  }
  if (!make || k->nprocs >= STK_MAX_PROCS) return NULL;
  if ((k->nprocs + 1) * 2 > k->pmask + 1) { /* rehash */
    uint32_t nm = k->pmask * 2 + 1;
    size_t more = (size_t)(nm - k->pmask) * sizeof *k->procs;
    if (budget_take(k, more)) return NULL;
    struct proc *np = malloc((nm + 1) * sizeof *np);
    if (!np) {
      budget_give(k, more);
      return NULL;
    }
    for (uint32_t j = 0; j <= nm; j++) np[j] = (struct proc){.pid = 0xFFFFFFFFu};
    for (uint32_t j = 0; j <= k->pmask; j++) {
      if (k->procs[j].pid == 0xFFFFFFFFu) continue;
      uint32_t x = mix(k->procs[j].pid, 0) & nm;
      while (np[x].pid != 0xFFFFFFFFu) x = (x + 1) & nm;
      np[x] = k->procs[j];
    }
    free(k->procs);
    k->procs = np;
    k->pmask = nm;
    return proc_get(k, pid, make);
  }
  k->procs[i] = (struct proc){.pid = pid};
  k->nprocs++;
  return &k->procs[i];
}

static void range_add(struct etw_stk *k, uint32_t pid, uint64_t start, uint64_t size, const char *name,
                      size_t nl, int method) {
  if (!size || start + size < start) return;
  struct proc *p = proc_get(k, pid, 1);
  if (!p) {
    drop_range(k);
    return;
  }
  for (uint32_t i = p->n; i-- > 0 && i + 8 >= p->n;) /* a rundown repeating a load: once */
    if (p->r[i].start == start && p->r[i].end == start + size) return;
  if (k->nranges >= STK_MAX_RANGES ||
      grow(k, (void **)&p->r, &p->cap, p->n + 1, sizeof *p->r, sizeof *p->r, STK_MAX_RANGES)) {
    drop_range(k);
    return;
  }
  struct etw_jw t; /* the frame's text after its address, rendered once */
  etw_jw_init(&t, 4096);
  etw_jw_lit(&t, method ? ",\"Symbol\":" : ",\"Module\":");
  etw_jw_str(&t, name, nl);
  etw_jw_lit(&t, ",\"Offset\":");
  uint32_t at = t.err ? UINT32_MAX : pool_add(k, t.buf, t.len);
  uint32_t tl = (uint32_t)t.len;
  etw_jw_free(&t);
  if (at == UINT32_MAX) {
    drop_range(k);
    return;
  }
  p->r[p->n++] = (struct range){start, start + size, 0, at, tl};
  p->sorted = 0;
  k->nranges++;
}

static int range_cmp(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start ? 1 : (x->end > y->end) - (x->end < y->end);
}

static void proc_sort(struct proc *p) {
  if (p->sorted) return;
  if (p->n) qsort(p->r, p->n, sizeof *p->r, range_cmp); /* (none: r may be NULL, its growth refused) */
  uint32_t o = 0; /* identical ranges once (a DCStart and a DCEnd of one image) */
  for (uint32_t i = 0; i < p->n; i++)
    if (!o || p->r[o - 1].start != p->r[i].start || p->r[o - 1].end != p->r[i].end) p->r[o++] = p->r[i];
  p->n = o;
  for (uint32_t i = 0; i < o; i++) p->r[i].maxend = i && p->r[i - 1].maxend > p->r[i].end ? p->r[i - 1].maxend : p->r[i].end;
  p->last = 0;
  p->sorted = 1;
}

/* the range of @p holding @a: the one with the highest start ≤ a that contains it */
static const struct range *range_find(struct proc *p, uint64_t a) {
  if (!p || !p->n) return NULL;
  proc_sort(p);
  if (p->last < p->n && a >= p->r[p->last].start && a < p->r[p->last].end) {
    uint32_t nx = p->last + 1; /* (a later range nested in it would win below: rare, checked) */
    if (nx == p->n || p->r[nx].start > a) return &p->r[p->last];
  }
  uint32_t lo = 0, hi = p->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (p->r[mid].start <= a) lo = mid + 1;
    else hi = mid;
  }
  for (uint32_t i = lo, steps = 0; i-- > 0 && p->r[i].maxend > a && steps < 256; steps++) /* (bounded: nested ranges) */
    if (a < p->r[i].end) {
      p->last = i;
      return &p->r[i];
    }
  return NULL;
}

/* Image Load (10), Unload (2), DCStart (3), DCEnd (4), v2/v3; the legacy 0x030A hook */
static void learn_image(struct etw_stk *k, const struct etw_rec *r) {
  unsigned P = r->ptr_size;
  if (r->desc.version < 2 || r->user_len < 3 * P + 34) return;
  const unsigned char *u = r->user_data;
  uint64_t base = rd(u, P), size = rd(u + P, P);
  uint32_t pid;
  memcpy(&pid, u + 2 * P, 4);
  char name[512];
  size_t nl = utf16_name(u + 3 * P + 32, (r->user_len - (3 * P + 32)) / 2, name, sizeof name, 1);
  range_add(k, pid, base, size, name, nl, 0);
}

/* CLR MethodLoadVerbose / MethodDCStartVerbose / MethodDCEndVerbose (143–146): MethodID,
 * ModuleID, MethodStartAddress (UInt64), MethodSize, MethodToken, MethodFlags (UInt32),
 * MethodNamespace, MethodName, MethodSignature (UTF-16) */
static void learn_method(struct etw_stk *k, const struct etw_rec *r) {
  const unsigned char *u = r->user_data;
  uint32_t n = r->user_len;
  if (n < 40) return;
  uint64_t start = rd(u + 16, 8);
  uint32_t size;
  memcpy(&size, u + 24, 4);
  size_t nsu = str16_units(u + 36, n - 36);
  if (36 + 2 * nsu + 2 > n) return;
  const unsigned char *nm = u + 36 + 2 * nsu + 2;
  size_t nmu = str16_units(nm, n - (size_t)(nm - u));
  char buf[1024];
  size_t l = utf16_name(u + 36, nsu, buf, sizeof buf - 2, 0);
  if (l) buf[l++] = '.';
  l += utf16_name(nm, nmu, buf + l, sizeof buf - l, 0);
  range_add(k, r->pid, start, size, buf, l, 1);
}

/* ---- the index of stack walks */

static struct ent *ent_add(struct etw_stk *k, uint32_t file, uint64_t ts, uint32_t tid, uint32_t pid,
                           uint16_t cpu, uint8_t part) {
  k->walks++;
  if (file >= ETW_ETL_MAX_FILES || k->ne >= STK_MAX_ENTRIES ||
      grow(k, (void **)&k->e, &k->cap_e, k->ne + 1, sizeof *k->e, sizeof *k->e + sizeof *k->ord, STK_MAX_ENTRIES)) {
    drop_walks(k, 1);
    return NULL;
  }
  struct ent *e = &k->e[k->ne++];
  *e = (struct ent){.ts = ts, .file = file, .tid = tid, .pid = pid, .cpu = cpu, .part = part};
  return e;
}

/* stores @n frames of @ptr bytes each; the offset, or UINT32_MAX beyond the bound */
static uint32_t frames_add(struct etw_stk *k, const unsigned char *p, uint32_t n, unsigned ptr) {
  if (grow(k, (void **)&k->fr, &k->cap_fr, k->nfr + n, sizeof *k->fr, sizeof *k->fr, STK_MAX_FRAMES)) return UINT32_MAX;
  uint32_t at = k->nfr;
  for (uint32_t i = 0; i < n; i++) k->fr[at + i] = rd(p + (size_t)i * ptr, ptr);
  k->nfr += n;
  return at;
}

static struct pend *pend_slot(struct etw_stk *k, uint64_t key, int make) {
  uint32_t i = mix(key, 1) & k->pdmask, free_at = UINT32_MAX;
  for (; k->pend[i].st; i = (i + 1) & k->pdmask) {
    if (k->pend[i].st == 1 && k->pend[i].key == key) return &k->pend[i];
    if (k->pend[i].st == 2 && free_at == UINT32_MAX) free_at = i;
  }
  if (!make) return NULL;
  if (free_at != UINT32_MAX) i = free_at;
  else if ((k->npend + 1) * 2 > k->pdmask + 1) { /* rebuild without the removed slots; grow
                                                       * only when a quarter is live */
    uint32_t live = 0;
    for (uint32_t j = 0; j <= k->pdmask; j++) live += k->pend[j].st == 1;
    uint32_t nm = (live + 1) * 4 > k->pdmask + 1 ? k->pdmask * 2 + 1 : k->pdmask;
    size_t more = (size_t)(nm - k->pdmask) * sizeof *k->pend;
    if (more && budget_take(k, more)) return NULL;
    struct pend *np = calloc(nm + 1, sizeof *np);
    if (!np) {
      if (more) budget_give(k, more);
      return NULL;
    }
    live = 0;
    for (uint32_t j = 0; j <= k->pdmask; j++) {
      if (k->pend[j].st != 1) continue;
      uint32_t x = mix(k->pend[j].key, 1) & nm;
      while (np[x].st) x = (x + 1) & nm;
      np[x] = k->pend[j];
      live++;
    }
    free(k->pend);
    k->pend = np;
    k->pdmask = nm;
    k->npend = live;
    return pend_slot(k, key, make);
  } else k->npend++;
  k->pend[i] = (struct pend){key, 0, 1};
  return &k->pend[i];
}

/* a reference to a key of the stack cache (the definition comes later): an entry waiting for it */
static void key_ref(struct etw_stk *k, struct ent *e, uint64_t key) {
  e->key = key;
  e->state = 1;
  struct pend *pd = pend_slot(k, key, 1);
  if (!pd) { /* no room to wait for the key: never attached */
    e->state = 3;
    drop_walks(k, 1);
    return;
  }
  e->pnext = pd->head;
  pd->head = (uint32_t)(e - k->e) + 1;
}

/* Kernel StackWalk group records: 32 Stack, 34–36 key definitions, 37/38 key references */
static void learn_walk(struct etw_stk *k, const struct etw_rec *r) {
  unsigned P = r->ptr_size, op = r->desc.opcode;
  const unsigned char *u = r->user_data;
  uint32_t n = r->user_len;
  if (op == 32 || op == 37 || op == 38) {
    if (n < 16 + (op == 32 ? 0 : P)) return;
    uint64_t ts = rd(u, 8);
    uint32_t pid, tid;
    memcpy(&pid, u + 8, 4);
    memcpy(&tid, u + 12, 4);
    uint32_t nf = op == 32 ? (n - 16) / P : 0;
    int kern = op == 37 || (op == 32 && nf && rd(u + 16, P) >= (P == 8 ? 0xFFFF800000000000ull : 0x80000000ull));
    struct ent *e = ent_add(k, r->file_index, ts, tid, pid, r->cpu, kern ? K_KERNEL : K_USER);
    if (!e) return;
    if (op == 32) {
      e->off = frames_add(k, u + 16, nf, P);
      e->n = nf;
      if (e->off == UINT32_MAX) e->off = e->n = 0, e->state = 3, drop_walks(k, 1);
      return;
    }
    key_ref(k, e, rd(u + 16, P));
  } else if (op >= 34 && op <= 36) {
    if (n < P) return;
    uint64_t key = rd(u, P);
    struct pend *pd = pend_slot(k, key, 0);
    if (!pd) return;
    uint32_t nf = (n - P) / P, off = frames_add(k, u + P, nf, P);
    for (uint32_t i = pd->head; i; i = k->e[i - 1].pnext) {
      struct ent *e = &k->e[i - 1];
      if (off == UINT32_MAX) { /* the references' frames not kept */
        e->state = 3;
        drop_walks(k, 1);
        continue;
      }
      e->off = off;
      e->n = nf;
      e->state = 0;
    }
    pd->head = 0; /* the key may be reused by the next cache entry */
    pd->st = 2;
  }
}

static int clr_provider(const struct etw_rec *r) {
  return !memcmp(r->provider_id, DEC_GUID_CLR_RUNTIME, 16) || !memcmp(r->provider_id, CLR_RUNDOWN, 16);
}

static int clr_walk(const struct etw_rec *r) {
  return r->kind == ETW_REC_EVENT && ((r->desc.id == 82 && !memcmp(r->provider_id, DEC_GUID_CLR_RUNTIME, 16)) ||
                                      (r->desc.id == 0 && !memcmp(r->provider_id, CLR_RUNDOWN, 16)));
}

static struct last *last_slot(struct etw_stk *k, uint32_t file, uint32_t tid) {
  return &k->last[mix(tid, 2 + file) & k->lmask]; /* a collision forgets the older thread's event */
}

int etw_stk_is_walk(const struct etw_rec *r) {
  if (r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) return (r->hook_id >> 8) == 0x18;
  return clr_walk(r);
}

void etw_stk_learn(struct etw_stk *k, const struct etw_rec *r) {
  if (r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) {
    unsigned g = r->hook_id >> 8, t = r->hook_id & 255;
    if (g == 0x18) {
      if (k->index_walks) learn_walk(k, r);
    }
    else if ((g == 0x14 && (t == 2 || t == 3 || t == 4 || t == 10)) || r->hook_id == 0x030A) learn_image(k, r);
    return;
  }
  if (r->kind == ETW_REC_CLASSIC && !memcmp(r->provider_id, IMAGE_GUID, 16)) {
    unsigned t = r->desc.opcode;
    if (t == 2 || t == 3 || t == 4 || t == 10) learn_image(k, r);
    return;
  }
  if (r->kind != ETW_REC_EVENT) return;
  for (uint16_t i = 0; k->index_walks && i < r->n_ext; i++) { /* the event's stack in the cache */
    const struct etw_ext_item *x = &r->ext[i];
    unsigned P = x->type == ETW_EXT_STACK_KEY64 ? 8 : 4;
    if ((x->type != ETW_EXT_STACK_KEY32 && x->type != ETW_EXT_STACK_KEY64) || x->len < 8 + P) continue;
    struct ent *e = ent_add(k, r->file_index, (uint64_t)r->timestamp, r->tid, r->pid, r->cpu, K_USER);
    if (e) key_ref(k, e, rd(x->data + 8, P));
  }
  if (!clr_provider(r)) return;
  if (r->desc.id >= 143 && r->desc.id <= 146) learn_method(k, r);
  if (!k->index_walks) return;
  struct last *l = last_slot(k, r->file_index, r->tid);
  if (!clr_walk(r)) {
    *l = (struct last){r->tid, r->file_index, r->timestamp, r->cpu, 1};
    return;
  }
  unsigned P = r->ptr_size;
  if (r->user_len < 8) return;
  uint32_t nf;
  memcpy(&nf, r->user_data + 4, 4);
  if (nf > (r->user_len - 8) / P) nf = (r->user_len - 8) / P;
  if (!l->used || l->tid != r->tid || l->file != r->file_index) { /* no event of this thread before it */
    k->walks++;
    return;
  }
  struct ent *e = ent_add(k, l->file, l->ts, r->tid, r->pid, l->cpu, K_CLR);
  l->used = 0; /* one walk per event */
  if (!e) return;
  e->off = frames_add(k, r->user_data + 8, nf, P);
  e->n = nf;
  if (e->off == UINT32_MAX) e->off = e->n = 0, e->state = 3, drop_walks(k, 1);
}

void etw_stk_learn_end(struct etw_stk *k) {
  if (k->ne) ord_build(k);
  for (uint32_t i = 0; i <= k->pmask; i++)
    if (k->procs[i].pid != 0xFFFFFFFFu) proc_sort(&k->procs[i]);
}

int etw_stk_prepass(struct etw_stk *k, const char *const *files, int nf, _Atomic int *stop, int nofollow) {
  struct etw_etl_reader *rd_ = etw_etl_reader_new();
  struct etw_status st;
  etw_status_clear(&st);
  if (!rd_) return -1;
  etw_etl_reader_set_nofollow(rd_, nofollow);
  for (int i = 0; i < nf; i++)
    if (etw_etl_reader_add_file(rd_, files[i], &st)) {
      etw_etl_reader_free(rd_);
      return -1;
    }
  const struct etw_rec *recs[512];
  int n;
  while ((n = etw_etl_reader_next_batch(rd_, recs, 512, &st)) > 0) {
    if (stop && *stop) {
      etw_etl_reader_free(rd_);
      return -1;
    }
    for (int i = 0; i < n; i++) {
      const struct etw_rec *r = recs[i];
      /* only the records learn looks at (a cheap test first) */
      if (r->kind == ETW_REC_EVENT ? r->n_ext || clr_provider(r) : r->kind != ETW_REC_WPP) etw_stk_learn(k, r);
    }
  }
  etw_etl_reader_free(rd_);
  etw_stk_learn_end(k);
  return 0;
}

/* ---- rendering */

/* one frame, `{"Address":"0x…"` + the range's text and offset + `}`, with one reservation (the
 * numbers by the decoder's writers: dec_put_hex needs 20 bytes of room, dec_put_u64 20) */
static void put_frame(struct etw_stk *k, struct etw_jw *w, struct proc *p, struct proc *kp, uint64_t a, int comma) {
  const struct range *g = range_find(p, a);
  if (!g && kp != p) g = range_find(kp, a);
  if (etw_jw_reserve(w, 64 + (g ? g->fraglen : 0))) return;
  char *o = w->buf + w->len;
  if (comma) *o++ = ',';
  memcpy(o, "{\"Address\":", 11);
  o = dec_put_hex(o + 11, a);
  if (g) {
    memcpy(o, k->pool + g->frag, g->fraglen);
    o = dec_put_u64(o + g->fraglen, a - g->start);
  }
  *o++ = '}';
  w->len = (size_t)(o - w->buf);
}

/* (qsort has no context argument: one sort at a time per thread; the reader threads of a
 * replay's passes sort at the same moments) */
static _Thread_local const struct ent *g_sort_e;

static int ord_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  const struct ent *ex = &g_sort_e[x], *ey = &g_sort_e[y];
  if (ex->file != ey->file) return ex->file < ey->file ? -1 : 1;
  if (ex->ts != ey->ts) return ex->ts < ey->ts ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* the (file, ts) order of the entries and each file's run of it; 0, or -1 without memory */
static int ord_build(struct etw_stk *k) {
  free(k->ord);
  k->nord = 0;
  k->ord = malloc((k->ne ? k->ne : 1) * sizeof *k->ord);
  if (!k->ord) return -1;
  for (uint32_t i = 0; i < k->ne; i++) k->ord[i] = i;
  g_sort_e = k->e;
  qsort(k->ord, k->ne, sizeof *k->ord, ord_cmp);
  k->nord = k->ne;
  uint32_t i = 0;
  for (uint32_t f = 0; f <= ETW_ETL_MAX_FILES; f++) { /* fstart[f]: the first entry of file ≥ f */
    while (i < k->nord && k->e[k->ord[i]].file < f) i++;
    k->fstart[f] = i;
  }
  for (uint32_t f = 0; f < ETW_ETL_MAX_FILES; f++) k->cur[f] = k->fstart[f];
  return 0;
}

/* The entries of @r's event, at most one per part: of several candidates (two events of one
 * thread with the same timestamp) the one indexed first, which is the first event's. */
static int find_claim(struct etw_stk *k, const struct etw_rec *r, uint32_t got[K_PARTS]) {
  /* (KernelTraceControl's schema records of a relogged trace carry the time and thread of the
   * first event of their type, just before it: never an event of a stack) */
  if (!k->ne || r->file_index >= ETW_ETL_MAX_FILES || etw_stk_is_walk(r) ||
      (r->kind == ETW_REC_CLASSIC && !memcmp(r->provider_id, DEC_GUID_KTC_METADATA, 16)))
    return 0;
  if (k->nord != k->ne && ord_build(k)) return 0; /* (learnt since the last sort) */
  uint32_t f = r->file_index, lo = k->fstart[f], hi = k->fstart[f + 1], c = k->cur[f];
  uint64_t ts = (uint64_t)r->timestamp;
  if (c > lo && k->e[k->ord[c - 1]].ts >= ts) { /* behind the cursor: binary search */
    uint32_t a = lo, b = c;
    while (a < b) {
      uint32_t m = a + (b - a) / 2;
      if (k->e[k->ord[m]].ts < ts) a = m + 1;
      else b = m;
    }
    c = a;
  } else {
    while (c < hi && k->e[k->ord[c]].ts < ts) c++;
    k->cur[f] = c;
  }
  if (c >= hi || k->e[k->ord[c]].ts != ts) return 0;
  int clr = r->kind == ETW_REC_EVENT && clr_provider(r);
  uint32_t tid = r->tid;
  if (r->kind == ETW_REC_PERFINFO && r->hook_id == 0x0F2E && r->user_len >= r->ptr_size + 4u)
    memcpy(&tid, r->user_data + r->ptr_size, 4); /* PerfInfo/Sample: the sampled thread */
  uint32_t best[K_PARTS] = {0};
  for (; c < hi && k->e[k->ord[c]].ts == ts; c++) { /* (index order within one ts) */
    uint32_t i = k->ord[c] + 1;
    const struct ent *e = &k->e[i - 1];
    if (e->state) continue;
    if (tid != 0xFFFFFFFFu ? e->tid != tid : e->cpu != r->cpu) continue;
    if (e->part == K_CLR && !clr) continue;
    if (!best[e->part]) best[e->part] = i;
  }
  int ng = 0;
  for (int p = 0; p < K_PARTS; p++)
    if (best[p]) {
      k->e[best[p] - 1].state = 2;
      k->attached++;
      got[ng++] = best[p] - 1;
    }
  return ng;
}

void etw_stk_claim(struct etw_stk *k, const struct etw_rec *r) {
  uint32_t got[K_PARTS];
  find_claim(k, r, got);
}

int etw_stk_attach(struct etw_stk *k, const struct etw_rec *r, struct etw_jw *w) {
  uint32_t got[K_PARTS];
  int ng = find_claim(k, r, got), ext = -1;
  for (uint16_t i = 0; i < r->n_ext; i++)
    if ((r->ext[i].type == ETW_EXT_STACK_TRACE64 || r->ext[i].type == ETW_EXT_STACK_TRACE32) && r->ext[i].len > 8) ext = i;
  if (!ng && ext < 0) return 0;
  size_t end = w->len;
  if (!end || w->buf[end - 1] != '}') return 0;
  w->len = end - 1;
  etw_jw_lit(w, ",\"Stack\":[");
  int comma = 0;
  struct proc *kp = proc_get(k, 0, 0); /* the kernel's images: pid 0 (else System's, 4) */
  if (!kp || !kp->n) kp = proc_get(k, 4, 0);
  if (ext >= 0) {
    k->in_event++;
    unsigned P = r->ext[ext].type == ETW_EXT_STACK_TRACE64 ? 8 : 4;
    uint32_t nf = (uint32_t)(r->ext[ext].len - 8) / P;
    struct proc *p = proc_get(k, r->pid, 0);
    for (uint32_t f = 0; f < nf && f < STK_MAX_RENDER; f++, comma = 1)
      put_frame(k, w, p, kp, rd(r->ext[ext].data + 8 + (size_t)f * P, P), comma);
  }
  for (int g = 0; g < ng; g++) { /* (in part order) */
    const struct ent *e = &k->e[got[g]];
    struct proc *p = proc_get(k, e->pid, 0);
    for (uint32_t f = 0; f < e->n && f < STK_MAX_RENDER; f++, comma = 1)
      put_frame(k, w, p, kp, k->fr[e->off + f], comma);
  }
  etw_jw_lit(w, "]}");
  if (w->err) { /* no room: the event as it was */
    etw_jw_truncate(w, end - 1);
    etw_jw_ch(w, '}');
    return -1;
  }
  return 1;
}

void etw_stk_counts(const struct etw_stk *k, struct etw_stk_counts *c) {
  c->walks = k->walks;
  c->attached = k->attached;
  c->unattached = k->walks - k->attached;
  c->in_event = k->in_event;
  c->dropped = k->dropped;
  c->images_dropped = k->rdropped;
}
