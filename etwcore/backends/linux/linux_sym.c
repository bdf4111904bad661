/* linux_sym.c — stack addresses → module, symbol and offset (see linux_sym.h).
 *
 * Ownership and threads: one cache for the whole server (g), every field guarded by g.mu; the
 * reader threads of every session call lx_sym_frames with a stack's addresses and the cache
 * fills itself. Everything is bounded:
 *   - kernel: /proc/kallsyms read once at the first kernel frame (text symbols, sorted);
 *   - processes: SYM_PROCS entries (LRU), each with at most SYM_MAPS executable mappings of
 *     /proc/PID/maps (files; [vdso], [vsyscall] and anonymous code too, without a file: they
 *     tell lx_sym_uframes what is code), read when the process's first stack is resolved and again on a miss (at
 *     most every SYM_REREAD_NS per process); a process that is gone keeps the mappings seen;
 *   - files: SYM_FILES ELF files (LRU) keyed by device, inode and build-id, each with at most
 *     SYM_FSYMS function symbols of at most SYM_NAME_MAX bytes each, within SYM_FILE_BYTES,
 *     bounded while the table is read (what is cut is counted: g_cut); all files together at
 *     most SYM_FILE_BYTES; a mapping is bound to its file once, through the object the process
 *     really maps (/proc/PID/map_files/…) when that can be opened, else its path if that is the
 *     mapped inode (opened without following a symlink or blocking, a regular file only): a
 *     cached entry of the same inode whose build-id differs from the mapped object's is loaded
 *     again. Files are opened and read OUTSIDE g.mu (bind_file): the lookup under the lock
 *     stops at the first mapping that needs its file, the file is read unlocked (read(2), never
 *     a mapping: a file rewritten in place meanwhile would raise SIGBUS), its result published
 *     under the lock, and the lookup starts again (at most SYM_BIND_ROUNDS times);
 *   - frames: SYM_FRAMES resolved frames (direct-mapped by process generation and address).
 */
#include "linux_sym.h"

#include "etwcore/linux.h"
#include "etwcore/util.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define SYM_PROCS 256
#define SYM_MAPS 512
#define SYM_FILES 64
#define SYM_FSYMS (1u << 20)
#define SYM_FILE_BYTES ((size_t)256 << 20) /* symbols and names of all cached files */
#define SYM_FRAMES 8192
#define SYM_FRAME_TXT 232
#define SYM_REREAD_NS 100000000LL
#define SYM_NAME_MAX 1024 /* bytes of a symbol name kept (C++ names can be long; a file can lie) */
#define SYM_RAW_MAX ((uint64_t)512 << 20) /* a symbol or string table read into memory */
#define SYM_BIND_ROUNDS 8 /* files read per lx_sym_frames call (a stack has at most 8 user frames) */

/* symbols cut while loading: 0 over the count, 1 over the bytes, 2 names shortened */
static _Atomic uint64_t g_cut[3];

/* ---- kallsyms */

struct ksym {
  uint64_t a;
  uint32_t name, mod; /* offsets in pool; mod 0 = core kernel */
};
struct lx_ksyms {
  struct ksym *v;
  uint32_t n;
  char *pool;
};

static int ksym_cmp(const void *x, const void *y) {
  const struct ksym *a = x, *b = y;
  return a->a < b->a ? -1 : a->a > b->a;
}

/* append @s (n bytes) + NUL to a growing pool; the offset, or 0 on ENOMEM (offset 0 is "") */
static uint32_t pool_add(char **pool, size_t *len, size_t *cap, const char *s, size_t n) {
  size_t need = *len + n + 1 + (*len ? 0 : 1); /* (the first call also writes the "" at 0) */
  if (need > *cap) {
    size_t nc = *cap ? *cap * 2 : 65536;
    while (nc < need) nc *= 2;
    if (nc > UINT32_MAX) return 0;
    char *np = realloc(*pool, nc);
    if (!np) return 0;
    *pool = np;
    *cap = nc;
  }
  if (!*len) (*pool)[(*len)++] = 0;
  uint32_t off = (uint32_t)*len;
  memcpy(*pool + *len, s, n);
  (*pool)[*len + n] = 0;
  *len += n + 1;
  return off;
}

struct lx_ksyms *lx_ksyms_load(const char *path) {
  FILE *f = fopen(path, "re");
  if (!f) return NULL;
  struct lx_ksyms *k = calloc(1, sizeof *k);
  size_t cap = 0, plen = 0, pcap = 0;
  char line[512];
  while (k && fgets(line, sizeof line, f)) {
    char *e;
    uint64_t a = strtoull(line, &e, 16);
    if (e == line || e[0] != ' ' || !e[1] || e[2] != ' ') continue;
    char t = e[1];
    if (t != 't' && t != 'T' && t != 'w' && t != 'W') continue;
    char *name = e + 3, *end = name + strcspn(name, " \t\n");
    if (end == name || !a) continue;
    char *mod = NULL, *mend = NULL;
    if (*end == '\t' || *end == ' ') {
      mod = strchr(end, '[');
      if (mod && (mend = strchr(mod, ']'))) mod++;
      else mod = NULL;
    }
    if (k->n == cap) {
      size_t nc = cap ? cap * 2 : 65536;
      struct ksym *nv = realloc(k->v, nc * sizeof *nv);
      if (!nv) break;
      k->v = nv;
      cap = nc;
    }
    struct ksym *s = &k->v[k->n];
    s->a = a;
    s->name = pool_add(&k->pool, &plen, &pcap, name, (size_t)(end - name));
    s->mod = mod ? pool_add(&k->pool, &plen, &pcap, mod, (size_t)(mend - mod)) : 0;
    if (s->name) k->n++;
  }
  fclose(f);
  if (!k) return NULL;
  if (!k->n) {
    lx_ksyms_free(k);
    return NULL;
  }
  qsort(k->v, k->n, sizeof *k->v, ksym_cmp);
  return k;
}

void lx_ksyms_free(struct lx_ksyms *k) {
  if (!k) return;
  free(k->v);
  free(k->pool);
  free(k);
}

uint32_t lx_ksyms_count(const struct lx_ksyms *k) { return k ? k->n : 0; }

const char *lx_ksyms_find(const struct lx_ksyms *k, uint64_t addr, const char **mod,
                          uint64_t *off) {
  if (!k || !k->n || addr < k->v[0].a) return NULL;
  uint32_t lo = 0, hi = k->n; /* last entry with a <= addr */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (k->v[mid].a <= addr) lo = mid;
    else hi = mid;
  }
  const struct ksym *s = &k->v[lo];
  *mod = s->mod ? k->pool + s->mod : NULL;
  *off = addr - s->a;
  return k->pool + s->name;
}

/* ---- ELF files */

struct esym {
  uint64_t v, sz;
  uint32_t name;
};
struct eload {
  uint64_t off, vaddr, filesz;
};
struct lx_elf {
  struct esym *s;
  uint32_t ns;
  char *pool;
  size_t mem; /* bytes of s and pool */
  struct eload ld[16];
  uint32_t nld;
  uint8_t bid[64];
  uint32_t bid_len;
  int cut; /* symbols were left out: an unsized symbol no longer runs to the next one */
};

static int esym_cmp(const void *x, const void *y) {
  const struct esym *a = x, *b = y;
  if (a->v != b->v) return a->v < b->v ? -1 : 1;
  return a->sz > b->sz ? -1 : a->sz < b->sz; /* the sized one first at equal addresses */
}

static void elf_notes(struct lx_elf *e, Elf_Scn *scn) {
  Elf_Data *d = elf_getdata(scn, NULL);
  if (!d) return;
  GElf_Nhdr nh;
  size_t off = 0, noff, doff;
  while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        !memcmp((char *)d->d_buf + noff, "GNU", 4) && nh.n_descsz <= sizeof e->bid) {
      memcpy(e->bid, (char *)d->d_buf + doff, nh.n_descsz);
      e->bid_len = nh.n_descsz;
      return;
    }
  }
}

/* the function symbols of one table, bounded WHILE they are read: at most @max_syms of them,
 * their array and names within @max_bytes (the growth that would pass it is not made), each
 * name at most SYM_NAME_MAX bytes; what does not fit is counted in g_cut */
static void elf_syms(struct lx_elf *e, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                     uint32_t max_syms, size_t max_bytes) {
  Elf_Data *d = elf_getdata(scn, NULL);
  if (!d || !sh->sh_entsize) return;
  size_t n = sh->sh_size / sh->sh_entsize, cap = 0, plen = 0, pcap = 0;
  uint64_t cut[3] = {0, 0, 0};
  for (size_t i = 0; i < n && i <= INT32_MAX; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(d, (int)i, &sym)) break;
    int t = GELF_ST_TYPE(sym.st_info);
    if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
      continue;
    const char *nm = elf_strptr(elf, sh->sh_link, sym.st_name);
    if (!nm || !*nm) continue;
    if (e->ns >= max_syms) {
      cut[0]++;
      continue;
    }
    size_t nl = strnlen(nm, SYM_NAME_MAX + 1);
    if (nl > SYM_NAME_MAX) {
      nl = SYM_NAME_MAX;
      cut[2]++;
    }
    size_t nc = cap, pc = pcap; /* what the arrays grow to for this symbol */
    if (e->ns == cap) nc = cap ? cap * 2 : 1024;
    if (plen + nl + 2 > pcap)
      for (pc = pcap ? pcap : 65536; pc < plen + nl + 2;) pc *= 2;
    if (nc * sizeof *e->s + pc > max_bytes) {
      cut[1]++;
      continue;
    }
    if (nc != cap) {
      struct esym *nv = realloc(e->s, nc * sizeof *nv);
      if (!nv) break;
      e->s = nv;
      cap = nc;
    }
    uint32_t o = pool_add(&e->pool, &plen, &pcap, nm, nl);
    if (!o) break;
    e->s[e->ns++] = (struct esym){sym.st_value, sym.st_size, o};
  }
  for (int k = 0; k < 3; k++)
    if (cut[k]) atomic_fetch_add_explicit(&g_cut[k], cut[k], memory_order_relaxed);
  e->cut = cut[0] || cut[1];
  e->mem = cap * sizeof *e->s + pcap;
  if (e->ns) qsort(e->s, e->ns, sizeof *e->s, esym_cmp);
}

/* a symbol table and its names that libelf may read into memory for elf_syms (the file's size
 * bounds them too); a larger table is not read (counted as cut: bytes) */
static int table_fits(Elf *elf, const GElf_Shdr *sh) {
  GElf_Shdr str;
  Elf_Scn *s = elf_getscn(elf, sh->sh_link);
  if (sh->sh_size <= SYM_RAW_MAX && s && gelf_getshdr(s, &str) && str.sh_size <= SYM_RAW_MAX)
    return 1;
  atomic_fetch_add_explicit(&g_cut[1], 1, memory_order_relaxed);
  return 0;
}

/* the ELF file open at @fd (left open): its load segments and build-id, and with @max_syms its
 * function symbols (elf_syms' bounds). Read with read(2), never through a mapping: a mapped file
 * that someone truncates meanwhile (rewritten in place) would raise SIGBUS; a short read is an
 * error here (nothing, or less, loaded). */
static struct lx_elf *elf_load_fd(int fd, uint32_t max_syms, size_t max_bytes) {
  elf_version(EV_CURRENT);
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  struct lx_elf *e = NULL;
  size_t np = 0;
  if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &np) != 0) goto out;
  if (!(e = calloc(1, sizeof *e))) goto out;
  for (size_t i = 0; i < np && e->nld < 16; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
      e->ld[e->nld++] = (struct eload){ph.p_offset, ph.p_vaddr, ph.p_filesz};
  }
  Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
  GElf_Shdr sh, sh_sym, sh_dyn;
  while ((scn = elf_nextscn(elf, scn))) {
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type == SHT_SYMTAB) symtab = scn, sh_sym = sh;
    else if (sh.sh_type == SHT_DYNSYM) dynsym = scn, sh_dyn = sh;
    else if (sh.sh_type == SHT_NOTE && !e->bid_len) elf_notes(e, scn);
  }
  if (max_syms && symtab && table_fits(elf, &sh_sym))
    elf_syms(e, elf, symtab, &sh_sym, max_syms, max_bytes);
  if (max_syms && !e->ns && dynsym && table_fits(elf, &sh_dyn))
    elf_syms(e, elf, dynsym, &sh_dyn, max_syms, max_bytes);
out:
  if (elf) elf_end(elf);
  return e;
}

int lx_elf_open(const char *path, int follow, uint64_t dev, uint64_t ino) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (ino && ((uint64_t)st.st_ino != ino ||
               (((uint64_t)major(st.st_dev) << 32) | minor(st.st_dev)) != dev))) {
    close(fd);
    return -1;
  }
  return fd;
}

struct lx_elf *lx_elf_load_max(const char *path, uint32_t max_syms, size_t max_bytes) {
  int fd = lx_elf_open(path, 1, 0, 0);
  if (fd < 0) return NULL;
  struct lx_elf *e = elf_load_fd(fd, max_syms, max_bytes);
  close(fd);
  return e;
}

struct lx_elf *lx_elf_load(const char *path) {
  return lx_elf_load_max(path, SYM_FSYMS, SYM_FILE_BYTES);
}

void lx_elf_free(struct lx_elf *e) {
  if (!e) return;
  free(e->s);
  free(e->pool);
  free(e);
}

int lx_elf_vaddr(const struct lx_elf *e, uint64_t fileoff, uint64_t *vaddr) {
  for (uint32_t i = 0; i < e->nld; i++)
    if (fileoff >= e->ld[i].off && fileoff - e->ld[i].off < e->ld[i].filesz) {
      *vaddr = fileoff - e->ld[i].off + e->ld[i].vaddr;
      return 0;
    }
  return -1;
}

const char *lx_elf_find(const struct lx_elf *e, uint64_t vaddr, uint64_t *off) {
  if (!e->ns || vaddr < e->s[0].v) return NULL;
  uint32_t lo = 0, hi = e->ns;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (e->s[mid].v <= vaddr) lo = mid;
    else hi = mid;
  }
  while (lo > 0 && e->s[lo - 1].v == e->s[lo].v) lo--; /* the sized one of equal addresses */
  const struct esym *s = &e->s[lo];
  uint64_t end = s->sz || e->cut ? s->v + (s->sz ? s->sz : 1)
                                 : (lo + 1 < e->ns ? e->s[lo + 1].v : s->v + 1);
  if (vaddr >= end) return NULL;
  *off = vaddr - s->v;
  return e->pool + s->name;
}

uint32_t lx_elf_nsyms(const struct lx_elf *e) { return e->ns; }
size_t lx_elf_mem(const struct lx_elf *e) { return e->mem; }

const uint8_t *lx_elf_build_id(const struct lx_elf *e, uint32_t *n) {
  *n = e->bid_len;
  return e->bid;
}

/* ---- the shared cache */

struct pmap {
  uint64_t start, end, off, dev, ino;
  uint32_t path;  /* in the process's pool */
  int32_t file;   /* slot in g.files, -1 = not bound yet, -2 = no ELF, -3 = no file ([vdso]…) */
  uint32_t fgen;  /* g.files[file].gen when bound */
};
struct proc {
  uint32_t pid, gen; /* gen: 0 = empty slot */
  uint64_t used;
  int64_t read_ns;
  int gone; /* the last read of its maps failed (exited): lx_sym_uframes drops nothing */
  struct pmap *m;
  uint32_t nm;
  char *pool;
};
struct file {
  struct lx_elf *e; /* NULL = empty */
  uint64_t dev, ino, used;
  uint32_t gen;
};
struct frame {
  uint64_t key_a;
  uint32_t key_pid, key_gen; /* key_gen 0 = empty (kernel frames use gen 1) */
  uint16_t len;
  uint8_t key_first;         /* the innermost frame (looked up at its address, not - 1) */
  uint8_t tracing;           /* a kernel frame of the tracing machinery (lx_sym_is_tracing) */
  uint8_t code;              /* resolve's *code: in an executable mapping, or not known */
  char txt[SYM_FRAME_TXT];
};
enum { C_PROC, C_FILE, C_FRAME, C_N };
static struct {
  pthread_mutex_t mu;
  int k_tried;
  struct lx_ksyms *k;
  struct proc procs[SYM_PROCS];
  struct file files[SYM_FILES];
  struct frame *frames;
  int frames_tried;
  uint64_t tick;
  uint32_t gen;
  size_t file_bytes; /* the mem of every cached file */
  uint64_t hits[C_N], misses[C_N], evictions[C_N];
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Atomic uint64_t g_stk[5]; /* records: attached, orphaned, dropped; entries dropped (k, u) */

void lx_stk_count(int what, uint64_t n) {
  if (what >= 0 && what < 5) atomic_fetch_add_explicit(&g_stk[what], n, memory_order_relaxed);
}

uint64_t lx_stk_counted(int what) {
  return what >= 0 && what < 5 ? atomic_load_explicit(&g_stk[what], memory_order_relaxed) : 0;
}

static void proc_clear(struct proc *p) {
  free(p->m);
  free(p->pool);
  memset(p, 0, sizeof *p);
}

/* (re)read the executable mappings of p->pid; -1 (mappings kept, p->gone) when it cannot be read */
static int proc_read(struct proc *p) {
  char fn[64], line[4096 + 128];
  snprintf(fn, sizeof fn, "/proc/%u/maps", p->pid);
  p->read_ns = etw_mono_ns();
  FILE *f = fopen(fn, "re");
  p->gone = !f;
  if (!f) return -1;
  struct pmap *m = calloc(SYM_MAPS, sizeof *m);
  char *pool = NULL;
  size_t plen = 0, pcap = 0;
  uint32_t n = 0;
  while (m && n < SYM_MAPS && fgets(line, sizeof line, f)) {
    unsigned long long s, e, off, ino;
    unsigned maj, min;
    char perm[8];
    int pos = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perm, &off, &maj, &min, &ino,
               &pos) < 7 || perm[2] != 'x')
      continue;
    char *path = line + pos;
    path[strcspn(path, "\n")] = 0;
    if (path[0] != '/') { /* code without a file: [vdso], [vsyscall], anonymous (a JIT's) */
      m[n++] = (struct pmap){s, e, off, 0, 0, 0, -3, 0};
      continue;
    }
    uint32_t po = pool_add(&pool, &plen, &pcap, path, strlen(path));
    if (!po) break;
    m[n++] = (struct pmap){s, e, off, ((uint64_t)maj << 32) | min, ino, po, -1, 0};
  }
  fclose(f);
  if (!m) {
    free(pool);
    p->gone = 0;
    return -1;
  }
  free(p->m);
  free(p->pool);
  p->m = m;
  p->nm = n;
  p->pool = pool;
  do p->gen = ++g.gen; /* never 0 (empty) or 1 (the kernel's frames) */
  while (p->gen <= 1);
  return 0;
}

static struct proc *proc_get(uint32_t pid) {
  struct proc *free_slot = NULL, *lru = NULL;
  for (int i = 0; i < SYM_PROCS; i++) {
    struct proc *p = &g.procs[i];
    if (p->gen && p->pid == pid) {
      g.hits[C_PROC]++;
      p->used = ++g.tick;
      return p;
    }
    if (!p->gen) {
      if (!free_slot) free_slot = p;
    } else if (!lru || p->used < lru->used) {
      lru = p;
    }
  }
  g.misses[C_PROC]++;
  struct proc *p = free_slot;
  if (!p) {
    p = lru;
    g.evictions[C_PROC]++;
    proc_clear(p);
  }
  p->pid = pid;
  if (proc_read(p) != 0) {
    proc_clear(p);
    return NULL;
  }
  p->used = ++g.tick;
  return p;
}

static int bid_eq(const struct lx_elf *a, const struct lx_elf *b) {
  return a->bid_len == b->bid_len && !memcmp(a->bid, b->bid, a->bid_len);
}

/* a mapping whose file is to be read (outside g.mu): which process generation and mapping */
struct bindreq {
  uint32_t pid, gen;
  uint64_t start, end, dev, ino;
  int pending;
  char path[4096];
};

/* the cached file of @dev/@ino with @id's build-id (without @id: any); its slot or -1 */
static int32_t file_find(uint64_t dev, uint64_t ino, const struct lx_elf *id) {
  for (int i = 0; i < SYM_FILES; i++) {
    struct file *f = &g.files[i];
    if (f->e && f->dev == dev && f->ino == ino && (!id || bid_eq(f->e, id))) return (int32_t)i;
  }
  return -1;
}

/* @fresh into the cache (lock held), evicting the least recently used files until it fits;
 * its slot, or -2 (alone over the budget: module+offset) */
static int32_t file_insert(struct lx_elf *fresh, uint64_t dev, uint64_t ino) {
  if (fresh->mem > SYM_FILE_BYTES) { /* (the load's bounds keep it below) */
    lx_elf_free(fresh);
    return -2;
  }
  struct file *f = NULL;
  for (int i = 0; i < SYM_FILES; i++) /* a free slot, else the least recently used */
    if (!g.files[i].e ? (!f || f->e) : (!f || (f->e && g.files[i].used < f->used))) f = &g.files[i];
  for (;;) {
    struct file *v = f->e ? f : NULL;
    if (!v && g.file_bytes + fresh->mem > SYM_FILE_BYTES)
      for (int i = 0; i < SYM_FILES; i++)
        if (g.files[i].e && (!v || g.files[i].used < v->used)) v = &g.files[i];
    if (!v) break;
    g.evictions[C_FILE]++;
    g.file_bytes -= v->e->mem;
    lx_elf_free(v->e);
    v->e = NULL;
    v->gen++;
    if (g.file_bytes + fresh->mem <= SYM_FILE_BYTES && !f->e) break;
  }
  g.file_bytes += fresh->mem;
  f->e = fresh;
  f->dev = dev;
  f->ino = ino;
  f->gen++;
  f->used = ++g.tick;
  return (int32_t)(f - g.files);
}

/* bind the mapping of @rq to @slot (lock held), if the process still has it unbound */
static void req_publish(const struct bindreq *rq, int32_t slot) {
  for (int i = 0; i < SYM_PROCS; i++) {
    struct proc *p = &g.procs[i];
    if (!p->gen || p->pid != rq->pid || p->gen != rq->gen) continue;
    for (uint32_t k = 0; k < p->nm; k++) {
      struct pmap *m = &p->m[k];
      if (m->start != rq->start || m->end != rq->end || m->file != -1) continue;
      m->file = slot;
      if (slot >= 0) m->fgen = g.files[slot].gen;
    }
  }
}

/* Read the file of @rq's mapping and publish it. Called WITHOUT g.mu (file I/O never holds it).
 * The object really mapped is /proc/PID/map_files/… (needs root); else the path, opened
 * without following a symlink or blocking (a FIFO swapped in), a regular file of the mapped
 * device and inode only. A cached file of the same inode is taken with the mapped object's
 * build-id (any, when neither can be opened); else the symbols are read, unlocked too. */
static void bind_file(const struct bindreq *rq) {
  char obj[96];
  snprintf(obj, sizeof obj, "/proc/%u/map_files/%llx-%llx", rq->pid,
           (unsigned long long)rq->start, (unsigned long long)rq->end);
  int fd = lx_elf_open(obj, 1, 0, 0);
  if (fd < 0) fd = lx_elf_open(rq->path, 0, rq->dev, rq->ino);
  struct lx_elf *id = fd >= 0 ? elf_load_fd(fd, 0, 0) : NULL; /* segments, build-id: cheap */
  pthread_mutex_lock(&g.mu);
  int32_t slot = file_find(rq->dev, rq->ino, id);
  if (slot >= 0 || !id) {
    if (slot >= 0) {
      g.hits[C_FILE]++;
      g.files[slot].used = ++g.tick;
    } else {
      g.misses[C_FILE]++;
      slot = -2;
    }
    req_publish(rq, slot);
    pthread_mutex_unlock(&g.mu);
    lx_elf_free(id);
    if (fd >= 0) close(fd);
    return;
  }
  g.misses[C_FILE]++;
  pthread_mutex_unlock(&g.mu);
  struct lx_elf *fresh = elf_load_fd(fd, SYM_FSYMS, SYM_FILE_BYTES);
  close(fd);
  lx_elf_free(id);
  pthread_mutex_lock(&g.mu);
  slot = -2;
  if (fresh) {
    int32_t again = file_find(rq->dev, rq->ino, fresh); /* another reader was quicker */
    if (again >= 0) {
      lx_elf_free(fresh);
      slot = again;
    } else {
      slot = file_insert(fresh, rq->dev, rq->ino);
    }
  }
  req_publish(rq, slot);
  pthread_mutex_unlock(&g.mu);
}

static struct pmap *map_find(struct proc *p, uint64_t a) {
  for (uint32_t i = 0; i < p->nm; i++)
    if (a >= p->m[i].start && a < p->m[i].end) return &p->m[i];
  return NULL;
}

static void put_frame(struct etw_jw *w, uint64_t a, const char *mod, size_t modlen,
                      const char *sym, int has_off, uint64_t off) {
  etw_jw_lit(w, "{\"Address\":");
  etw_jw_hex(w, a);
  if (mod) {
    etw_jw_lit(w, ",\"Module\":");
    etw_jw_str(w, mod, modlen);
  }
  if (sym) {
    etw_jw_lit(w, ",\"Symbol\":");
    etw_jw_cs(w, sym);
  }
  if (has_off) {
    etw_jw_lit(w, ",\"Offset\":");
    etw_jw_u64(w, off);
  }
  etw_jw_ch(w, '}');
}

/* The code that runs between a tracepoint and the kernel's stack unwinder, by symbol prefix
 * (docs/linux.md "Tracing frames"; measured on 6.18: trace_event_raw_event_<class> or
 * ftrace_syscall_enter/exit, then __traceiter_<event>; the others are the same path on other
 * kernels and configurations: perf, BPF, the trigger and the unwinder themselves). */
static const char *const k_tracing[] = {
    "trace_event_raw_event_", "perf_trace_", "perf_syscall_", "__traceiter_", "__probestub_",
    "__do_trace_", "__bpf_trace_", "bpf_trace_run", "trace_call_bpf", "ftrace_", "__ftrace_",
    "trace_buffer_unlock_commit", "trace_event_buffer_commit", "event_triggers_",
    "stacktrace_trigger", "stacktrace_count_trigger", "stack_trace_save", "arch_stack_walk"};

int lx_sym_is_tracing(const char *sym) {
  for (size_t i = 0; sym && i < sizeof k_tracing / sizeof k_tracing[0]; i++)
    if (!strncmp(sym, k_tracing[i], strlen(k_tracing[i]))) return 1;
  return 0;
}

/* resolve one frame into @w (lock held); @la is the lookup address (a - 1 for return addresses);
 * *@tr: a kernel frame of the tracing machinery; *@code: 0 when @la is in no executable mapping
 * of a process whose maps are known (lx_sym_uframes), else 1.
 * 0: done; 1: its mapping's file must be read first (*@rq filled; @w holds nothing useful);
 * 2: done without its file (no @rq: no more reads in this call): not to be cached */
static int resolve(struct etw_jw *w, struct proc *p, uint64_t a, uint64_t la,
                   struct bindreq *rq, uint8_t *tr, uint8_t *code) {
  *tr = 0;
  *code = 1;
  if (!p) { /* the kernel */
    const char *mod = NULL;
    uint64_t off = 0;
    const char *s = lx_ksyms_find(g.k, la, &mod, &off);
    if (!s || off > (1u << 24)) {
      put_frame(w, a, NULL, 0, NULL, 0, 0);
      return 0;
    }
    put_frame(w, a, mod ? mod : "kernel", strlen(mod ? mod : "kernel"), s, 1, off + (a - la));
    *tr = (uint8_t)lx_sym_is_tracing(s);
    return 0;
  }
  struct pmap *m = map_find(p, la);
  if (!m && etw_mono_ns() - p->read_ns >= SYM_REREAD_NS && proc_read(p) == 0) m = map_find(p, la);
  if (!m || m->file == -3) {
    *code = m || p->gone;
    put_frame(w, a, NULL, 0, NULL, 0, 0);
    return 0;
  }
  uint64_t fo = la - m->start + m->off;
  if (m->file >= 0 && g.files[m->file].gen != m->fgen) m->file = -1; /* evicted since */
  const char *path = p->pool + m->path, *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (m->file == -1 && rq) { /* its file is read outside the lock, then this starts again */
    *rq = (struct bindreq){p->pid, p->gen, m->start, m->end, m->dev, m->ino, 1, {0}};
    snprintf(rq->path, sizeof rq->path, "%s", path);
    return 1;
  }
  if (m->file < 0) {
    put_frame(w, a, base, strlen(base), NULL, 1, fo + (a - la));
    return m->file == -1 ? 2 : 0;
  }
  struct file *f = &g.files[m->file];
  f->used = ++g.tick;
  uint64_t va, off = 0;
  if (lx_elf_vaddr(f->e, fo, &va) != 0) {
    put_frame(w, a, base, strlen(base), NULL, 1, fo + (a - la));
    return 0;
  }
  const char *s = lx_elf_find(f->e, va, &off);
  if (s)
    put_frame(w, a, base, strlen(base), s, 1, off + (a - la));
  else
    put_frame(w, a, base, strlen(base), NULL, 1, va + (a - la));
  return 0;
}

/* one pass over the frames under g.mu; 1 when it stopped at a mapping whose file must be read
 * first (*rq; @w then holds a partial text). With @trim (a kernel stack), the leading frames of
 * the tracing machinery are not written, counted in *@cut. With @junk (a user stack,
 * lx_sym_uframes), the first frame after the innermost that is no code of the process ends it:
 * that frame and the rest are not written, their number in *@junk. */
static int frames_locked(struct etw_jw *w, uint32_t tgid, const uint64_t *a, uint32_t n,
                         int comma, struct bindreq *rq, int trim, uint32_t *cut,
                         uint32_t *junk) {
  if (!tgid && !g.k_tried) {
    g.k_tried = 1;
    g.k = lx_ksyms_load("/proc/kallsyms");
  }
  if (!g.frames_tried) {
    g.frames_tried = 1;
    g.frames = calloc(SYM_FRAMES, sizeof *g.frames);
  }
  struct proc *p = tgid ? proc_get(tgid) : NULL;
  for (uint32_t i = 0; i < n; i++) {
    size_t start = w->len; /* (before the comma: a trimmed frame goes with it) */
    if (comma || i > *cut) etw_jw_ch(w, ',');
    uint64_t la = i ? a[i] - 1 : a[i];
    if (tgid && !p) { /* a process never seen and already gone: the raw address */
      put_frame(w, a[i], NULL, 0, NULL, 0, 0);
      continue;
    }
    uint32_t gen = p ? p->gen : 1;
    uint8_t first = i == 0;
    struct frame *fr = NULL;
    if (g.frames) {
      uint64_t h = (a[i] ^ ((uint64_t)gen << 40) ^ first) * 0x9E3779B97F4A7C15ULL;
      fr = &g.frames[(h >> 40) & (SYM_FRAMES - 1)];
      if (fr->key_gen == gen && fr->key_pid == tgid && fr->key_a == a[i] &&
          fr->key_first == first) {
        g.hits[C_FRAME]++;
        if (junk && p && !fr->code && i) {
          etw_jw_truncate(w, start);
          *junk = n - i;
          return 0;
        }
        if (junk && !fr->code) junk = NULL; /* the innermost is no code: stale maps */
        etw_jw_raw(w, fr->txt, fr->len);
        if (trim && *cut == i && fr->tracing) {
          etw_jw_truncate(w, start);
          ++*cut;
        }
        continue;
      }
    }
    size_t mark = w->len;
    uint8_t tr, code;
    int r = resolve(w, p, a[i], la, rq, &tr, &code);
    if (r == 1) return 1;
    if (fr) g.misses[C_FRAME]++;
    /* (a re-read of the mappings in resolve gave the process a new generation: the frame is
     * cached under that one, so frames resolved from the old mappings are never reused) */
    if (fr && r == 0 && !w->err && w->len - mark <= SYM_FRAME_TXT) {
      if (fr->key_gen) g.evictions[C_FRAME]++;
      fr->key_gen = p ? p->gen : 1;
      fr->key_pid = tgid;
      fr->key_a = a[i];
      fr->key_first = first;
      fr->tracing = tr;
      fr->code = code;
      fr->len = (uint16_t)(w->len - mark);
      memcpy(fr->txt, w->buf + mark, fr->len);
    }
    if (trim && *cut == i && tr) {
      etw_jw_truncate(w, start);
      ++*cut;
    }
    if (junk && p && !code && i) { /* (the frame is cached first: its next stack hits) */
      etw_jw_truncate(w, start);
      *junk = n - i;
      return 0;
    }
    if (junk && !code) junk = NULL;
  }
  return 0;
}

/* lx_sym_frames, and lx_sym_uframes with @junk */
static void user_frames(struct etw_jw *w, uint32_t tgid, const uint64_t *a, uint32_t n, int comma,
                        uint32_t *junk) {
  size_t mark = w->len;
  struct bindreq rq;
  for (int round = 0;; round++) {
    struct bindreq *q = round < SYM_BIND_ROUNDS ? &rq : NULL; /* NULL: no more file reads */
    rq.pending = 0;
    uint32_t cut = 0;
    if (junk) *junk = 0;
    pthread_mutex_lock(&g.mu);
    int again = frames_locked(w, tgid, a, n, comma, q, 0, &cut, junk);
    pthread_mutex_unlock(&g.mu);
    if (!again) break;
    etw_jw_truncate(w, mark);
    bind_file(&rq);
  }
}

void lx_sym_frames(struct etw_jw *w, uint32_t tgid, const uint64_t *a, uint32_t n, int comma) {
  user_frames(w, tgid, a, n, comma, NULL);
}

uint32_t lx_sym_uframes(struct etw_jw *w, uint32_t tgid, const uint64_t *a, uint32_t n) {
  uint32_t junk = 0;
  user_frames(w, tgid, a, n, 0, &junk);
  return junk;
}

uint32_t lx_sym_kframes(struct etw_jw *w, const uint64_t *a, uint32_t n, int trim) {
  size_t mark = w->len;
  uint32_t cut = 0;
  pthread_mutex_lock(&g.mu); /* (kernel frames read no file: one pass) */
  frames_locked(w, 0, a, n, 0, NULL, trim, &cut, NULL);
  if (n && cut == n) { /* nothing but tracing frames: kept whole */
    etw_jw_truncate(w, mark);
    cut = 0;
    frames_locked(w, 0, a, n, 0, NULL, 0, &cut, NULL);
  }
  pthread_mutex_unlock(&g.mu);
  return cut;
}

void lx_sym_addrs(struct etw_jw *w, const uint64_t *a, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (i) etw_jw_ch(w, ',');
    put_frame(w, a[i], NULL, 0, NULL, 0, 0);
  }
}

int lx_sym_ktracing(uint64_t a) {
  pthread_mutex_lock(&g.mu);
  if (!g.k_tried) {
    g.k_tried = 1;
    g.k = lx_ksyms_load("/proc/kallsyms");
  }
  const char *mod = NULL;
  uint64_t off = 0;
  const char *s = g.k ? lx_ksyms_find(g.k, a, &mod, &off) : NULL;
  int r = s && off <= (1u << 24) && lx_sym_is_tracing(s);
  pthread_mutex_unlock(&g.mu);
  return r;
}

void lx_sym_forget(uint32_t tgid) {
  pthread_mutex_lock(&g.mu);
  for (int i = 0; i < SYM_PROCS; i++)
    if (g.procs[i].gen && g.procs[i].pid == tgid) proc_clear(&g.procs[i]);
  pthread_mutex_unlock(&g.mu);
}

/* three lines `<head><label i>"} <counter i>` of one labelled counter (@head: its name and `{label="`) */
static void labelled3(struct etw_jw *w, const char *head, const char *const label[3],
                      _Atomic uint64_t *v) {
  for (int i = 0; i < 3; i++) {
    etw_jw_lit(w, head);
    etw_jw_lit(w, label[i]);
    etw_jw_lit(w, "\"} ");
    etw_jw_u64(w, atomic_load_explicit(&v[i], memory_order_relaxed));
    etw_jw_ch(w, '\n');
  }
}

static void metric3(struct etw_jw *w, const char *name, const char *help, const uint64_t v[C_N]) {
  static const char *const cache[C_N] = {"processes", "files", "frames"};
  etw_jw_lit(w, "# HELP etwd_symcache_");
  etw_jw_lit(w, name);
  etw_jw_lit(w, "_total ");
  etw_jw_lit(w, help);
  etw_jw_lit(w, "\n# TYPE etwd_symcache_");
  etw_jw_lit(w, name);
  etw_jw_lit(w, "_total counter\n");
  for (int i = 0; i < C_N; i++) {
    etw_jw_lit(w, "etwd_symcache_");
    etw_jw_lit(w, name);
    etw_jw_lit(w, "_total{cache=\"");
    etw_jw_lit(w, cache[i]);
    etw_jw_lit(w, "\"} ");
    etw_jw_u64(w, v[i]);
    etw_jw_ch(w, '\n');
  }
}

void etw_linux_metrics(struct etw_jw *w) {
  uint64_t h[C_N], m[C_N], e[C_N], ks;
  pthread_mutex_lock(&g.mu);
  memcpy(h, g.hits, sizeof h);
  memcpy(m, g.misses, sizeof m);
  memcpy(e, g.evictions, sizeof e);
  ks = lx_ksyms_count(g.k);
  pthread_mutex_unlock(&g.mu);
  metric3(w, "hits", "Stack symbolisation cache hits (processes, ELF files, resolved frames).", h);
  metric3(w, "misses", "Stack symbolisation cache misses (a read of /proc/PID/maps, an ELF file, a frame resolved).", m);
  metric3(w, "evictions", "Stack symbolisation cache entries evicted to stay within bounds.", e);
  etw_jw_lit(w, "# HELP etwd_symcache_kernel_symbols Text symbols loaded from /proc/kallsyms.\n"
                "# TYPE etwd_symcache_kernel_symbols gauge\netwd_symcache_kernel_symbols ");
  etw_jw_u64(w, ks);
  etw_jw_lit(w, "\n# HELP etwd_symcache_symbols_cut_total ELF function symbols left out while "
                "loading (over the per-file count or bytes) or names shortened (over 1024 bytes).\n"
                "# TYPE etwd_symcache_symbols_cut_total counter\n");
  static const char *const why[3] = {"count", "bytes", "name"};
  labelled3(w, "etwd_symcache_symbols_cut_total{reason=\"", why, g_cut);
  etw_jw_lit(w, "# HELP etwd_stack_records_total Linux stack records: attached to their event, "
                "orphaned (the event was already published), dropped (the event did not ask).\n"
                "# TYPE etwd_stack_records_total counter\n");
  static const char *const what[3] = {"attached", "orphaned", "dropped"};
  labelled3(w, "etwd_stack_records_total{result=\"", what, g_stk);
  etw_jw_lit(w, "# HELP etwd_stack_entries_dropped_total Linux stack entries that are no code "
                "address (a user stack's frame-pointer walk gone astray: outside user space, or "
                "outside the process's executable mappings), dropped with those after them.\n# TYPE etwd_stack_entries_dropped_total counter\n"
                "etwd_stack_entries_dropped_total{stack=\"kernel\"} ");
  etw_jw_u64(w, atomic_load_explicit(&g_stk[3], memory_order_relaxed));
  etw_jw_lit(w, "\netwd_stack_entries_dropped_total{stack=\"user\"} ");
  etw_jw_u64(w, atomic_load_explicit(&g_stk[4], memory_order_relaxed));
  etw_jw_ch(w, '\n');
}
