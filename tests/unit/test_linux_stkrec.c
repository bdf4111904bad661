/* test_linux_stkrec.c — the addresses of Linux stack records (linux_stack.c lx_stk_addrs;
 * docs/linux.md "Stacks"), on record bytes made by hand:
 *
 * - kernel_stack {int size; unsigned long caller[size]}: only `size` entries are frames,
 *   whatever the record's length (ring-buffer padding after them, an array declared larger than
 *   what was written, as caller[8] of the format file) and never more than the record holds;
 * - user_stack {unsigned tgid; unsigned long caller[8]}: the kernel's frame-pointer walk of code
 *   built without frame pointers yields entries that are no user address (0x8010000000000000,
 *   0x30: measured on 6.18 under load): the first one ends the stack, it and those after it are
 *   dropped and counted; 0 and ULONG_MAX end it as before, not counted;
 * - the same records inside a real ring-buffer page through both page walkers (the direct one
 *   and kbuffer) and the stack joiner: the event's "Stack" has exactly the valid frames, the
 *   decoder's counters and /metrics count the dropped entries. Root (tracefs, kallsyms).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <event-parse.h>
#include <tracefs.h>

#include "etwcore/backend.h"
#include "etwcore/linux.h"
#include "linux/linux_int.h"
#include "t.h"

#define J1 0x8010000000000000ull /* the colleague's junk entry */
#define KA 0xffffffff81234560ull  /* kernel-half addresses (symbols are not needed here) */
#define KB 0xffffffff81234570ull
#define KC 0xffffffff81234580ull
#define UA 0x000055d0a0001234ull /* user addresses */
#define UB 0x00007f1200005678ull

/* a stack record: common header, the u32 at 8 (size or tgid), @n entries at 16, @pad bytes of
 * 0xAB after them; its length */
static uint32_t mkrec(unsigned char *r, uint16_t type, uint32_t f8, const uint64_t *e, uint32_t n,
                      uint32_t pad) {
  memset(r, 0, 16);
  memcpy(r, &type, 2);
  memcpy(r + 8, &f8, 4);
  memcpy(r + 16, e, 8 * (size_t)n);
  memset(r + 16 + 8 * (size_t)n, 0xAB, pad);
  return 16 + 8 * n + pad;
}

static uint32_t addrs(const unsigned char *r, uint32_t len, int kern, uint64_t *a, uint32_t max,
                      uint32_t *bad) {
  memset(a, 0, 8 * (size_t)max);
  return lx_stk_addrs(r, len, kern, a, max, bad);
}

static void kernel_records(void) {
  unsigned char r[2048];
  uint64_t a[200], e[200];
  uint32_t bad, n, len;
  const uint64_t k3[3] = {KA, KB, KC};
  /* exact */
  len = mkrec(r, 4, 3, k3, 3, 0);
  n = addrs(r, len, 1, a, 128, &bad);
  CHECK_EQ(n, 3);
  CHECK_EQ(bad, 0);
  CHECK(a[0] == KA && a[1] == KB && a[2] == KC);
  /* the array declared larger than what was written (caller[8]): junk after size entries */
  const uint64_t k8[8] = {KA, KB, KC, J1, KA, 0x30, UINT64_MAX, 0x1234};
  len = mkrec(r, 4, 3, k8, 8, 0);
  n = addrs(r, len, 1, a, 128, &bad);
  CHECK_EQ(n, 3);
  CHECK_EQ(bad, 0); /* not entries: not counted */
  CHECK(a[2] == KC && a[3] == 0);
  /* ring-buffer padding after the entries (4 and 12 bytes) */
  for (uint32_t pad = 4; pad <= 12; pad += 8) {
    len = mkrec(r, 4, 3, k3, 3, pad);
    n = addrs(r, len, 1, a, 128, &bad);
    CHECK_EQ(n, 3);
    CHECK_EQ(bad, 0);
  }
  /* a size larger than the record: only what the record holds (the partial tail ignored) */
  len = mkrec(r, 4, 8, k3, 3, 4);
  n = addrs(r, len, 1, a, 128, &bad);
  CHECK_EQ(n, 3);
  CHECK_EQ(bad, 0);
  /* size 0, a negative size, a record too short for the header */
  len = mkrec(r, 4, 0, k3, 3, 0);
  CHECK_EQ(addrs(r, len, 1, a, 128, &bad), 0);
  len = mkrec(r, 4, UINT32_MAX, k3, 3, 0);
  CHECK_EQ(addrs(r, len, 1, a, 128, &bad), 3);
  CHECK_EQ(addrs(r, 15, 1, a, 128, &bad), 0);
  CHECK_EQ(bad, 0);
  /* ULONG_MAX and 0 end a stack (the old end marker), not counted */
  const uint64_t km[4] = {KA, UINT64_MAX, KB, KC};
  len = mkrec(r, 4, 4, km, 4, 0);
  CHECK_EQ(addrs(r, len, 1, a, 128, &bad), 1);
  CHECK_EQ(bad, 0);
  /* an entry in the user half ends a kernel stack: it and the rest counted */
  const uint64_t kj[5] = {KA, KB, UA, KC, J1 >> 4};
  len = mkrec(r, 4, 5, kj, 5, 0);
  n = addrs(r, len, 1, a, 128, &bad);
  CHECK_EQ(n, 2);
  CHECK_EQ(bad, 3);
  CHECK(a[2] == 0);
  /* at most @max entries */
  for (int i = 0; i < 200; i++) e[i] = KA + 16 * (uint64_t)i;
  len = mkrec(r, 4, 200, e, 200, 0);
  n = addrs(r, len, 1, a, 128, &bad);
  CHECK_EQ(n, 128);
  CHECK_EQ(bad, 0);
  CHECK(a[127] == KA + 16 * 127);
}

static void user_records(void) {
  unsigned char r[256];
  uint64_t a[8];
  uint32_t bad, n, len;
  /* the colleague's record: the innermost frame, then the junk */
  const uint64_t u1[8] = {UA, J1, 0, 0, 0, 0, 0, 0};
  len = mkrec(r, 13, 4242, u1, 8, 0);
  n = addrs(r, len, 0, a, 8, &bad);
  CHECK_EQ(n, 1);
  CHECK_EQ(bad, 1);
  CHECK(a[0] == UA && a[1] == 0);
  /* measured: a small value, then more of the same walk, all dropped */
  const uint64_t u2[8] = {UA, UB, 0x30, 0x7f6fa04c7c70ull, 0x900000000000841full, 0, 0, 0};
  len = mkrec(r, 13, 4242, u2, 8, 0);
  n = addrs(r, len, 0, a, 8, &bad);
  CHECK_EQ(n, 2);
  CHECK_EQ(bad, 3);
  /* ULONG_MAX: the end, not counted */
  const uint64_t u3[8] = {UA, UINT64_MAX, 0, 0, 0, 0, 0, 0};
  len = mkrec(r, 13, 4242, u3, 8, 0);
  CHECK_EQ(addrs(r, len, 0, a, 8, &bad), 1);
  CHECK_EQ(bad, 0);
  /* the bounds: [4 KiB, 2^56) and the vsyscall page */
  const struct { uint64_t v; int ok; } b[] = {
      {4095, 0}, {4096, 1}, {(1ull << 56) - 1, 1}, {1ull << 56, 0}, {1ull << 63, 0},
      {0xffffffff81000000ull, 0}, {0xffffffffff600400ull, 1}, {0xffffffffff601000ull, 0}};
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    const uint64_t u[8] = {UA, b[i].v, UB, 0, 0, 0, 0, 0};
    len = mkrec(r, 13, 4242, u, 8, 0);
    n = addrs(r, len, 0, a, 8, &bad);
    CHECK_EQ(n, b[i].ok ? 3 : 1);
    CHECK_EQ(bad, b[i].ok ? 0 : 2);
  }
  /* the size field is a tgid, never a count: all 8 entries */
  const uint64_t u8[8] = {UA, UB, UA + 1, UB + 1, UA + 2, UB + 2, UA + 3, UB + 3};
  len = mkrec(r, 13, 2, u8, 8, 0);
  CHECK_EQ(addrs(r, len, 0, a, 8, &bad), 8);
}

/* ---- the same records in a ring-buffer page, through the walkers and the stack joiner */

struct page {
  unsigned char *b;
  uint32_t len, cap;
};

/* one data record: type_len = its length / 4 when it fits, else type_len 0 with the length (+4)
 * in the next word (what the kernel writes for records over 112 bytes) */
static void page_rec(struct page *p, const unsigned char *d, uint32_t n, int long_form) {
  uint32_t h, len = (n + 3) & ~3u;
  if (!long_form && len <= 112) {
    h = (len / 4) | (1u << 5);
    memcpy(p->b + 16 + p->len, &h, 4);
    memcpy(p->b + 20 + p->len, d, n);
    p->len += 4 + len;
  } else {
    h = 1u << 5;
    uint32_t a0 = len + 4;
    memcpy(p->b + 16 + p->len, &h, 4);
    memcpy(p->b + 20 + p->len, &a0, 4);
    memcpy(p->b + 24 + p->len, d, n);
    p->len += 8 + len;
  }
  uint64_t commit = p->len;
  memcpy(p->b + 8, &commit, 8);
}

static void flush_none(void *ctx, struct lx_sink *s) {
  (void)ctx;
  (void)s;
}

static uint64_t ksym(const char *name) {
  FILE *f = fopen("/proc/kallsyms", "r");
  char line[512], sym[256], t;
  unsigned long long a;
  uint64_t got = 0;
  while (f && !got && fgets(line, sizeof line, f))
    if (sscanf(line, "%llx %c %255s", &a, &t, sym) == 3 && !strcmp(sym, name)) got = a;
  if (f) fclose(f);
  return got;
}

/* the id of ftrace:@ev (its format file's "ID: ") */
static uint16_t fid(const char *ev) {
  char *t = tracefs_event_file_read(NULL, "ftrace", ev, "format", NULL);
  const char *p = t ? strstr(t, "\nID: ") : NULL;
  int id = p ? atoi(p + 5) : 0;
  free(t);
  CHECK(id > 0);
  return (uint16_t)id;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static uint64_t metric(const char *label) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  etw_linux_metrics(&w);
  char key[128];
  snprintf(key, sizeof key, "etwd_stack_entries_dropped_total{stack=\"%s\"} ", label);
  const char *p = strstr(etw_jw_cstr(&w), key);
  uint64_t v = p ? strtoull(p + strlen(key), NULL, 10) : UINT64_MAX;
  etw_jw_free(&w);
  return v;
}

static void through_pages(void) {
  const char *systems[] = {"raw_syscalls", NULL};
  struct tep_handle *tep = lx_tep_new(systems);
  CHECK(tep != NULL);
  if (!tep) return;
  struct tep_event *se = tep_find_event_by_name(tep, "raw_syscalls", "sys_enter");
  CHECK(se != NULL);
  struct lx_dec d;
  CHECK_EQ(lx_dec_init(&d, tep, 0, 0), 0);
  d.resolve_tgid = 0;
  _Atomic uint8_t *want = calloc(65536, 1);
  if (!se || !want) return;
  atomic_store(&want[se->id], 1); /* stacks from the option (linux_stack.c WANT_OPT) */
  lx_stk_attach(&d, want);
  CHECK(d.stk != NULL);
  uint64_t k0 = ksym("syscall_trace_enter"), k1 = ksym("do_syscall_64"),
           k2 = ksym("entry_SYSCALL_64_after_hwframe");
  CHECK(k0 && k1 && k2);
  uint64_t u0 = (uint64_t)(uintptr_t)&through_pages + 8; /* this program's text */
  uint32_t me = (uint32_t)getpid();
  uint64_t m0 = metric("user"), mk0 = metric("kernel");
  CHECK(m0 != UINT64_MAX && mk0 != UINT64_MAX);
  /* two pages: the kernel stack short (caller[8] declared, 3 written, junk after them) and long
   * (type_len 0, 12 bytes of padding); each with the measured junk user stack */
  for (int form = 0; form < 2; form++) {
    uint32_t ps = (uint32_t)getpagesize();
    struct page p = {calloc(1, ps), 0, ps};
    unsigned char ev[72] = {0}, ks[256], us[128];
    uint16_t t = (uint16_t)se->id;
    int32_t pid = (int32_t)me;
    int64_t id = 110;
    memcpy(ev, &t, 2);
    memcpy(ev + 4, &pid, 4);
    memcpy(ev + 8, &id, 8);
    page_rec(&p, ev, 72, 0);
    const uint64_t kk[8] = {k0 + 0x40, k1 + 0x50, k2 + 0x60, J1, 0x30, k1, 0, 0};
    uint32_t kl = mkrec(ks, fid("kernel_stack"), 3, kk, form ? 3 : 8, form ? 12 : 0);
    page_rec(&p, ks, kl, form);
    const uint64_t uu[8] = {u0, 0x30, 0x7f6fa04c7c70ull, J1, 0, 0, 0, 0};
    uint32_t ul = mkrec(us, fid("user_stack"), me, uu, 8, 0);
    page_rec(&p, us, ul, 0);
    for (int walk = 1; walk >= 0; walk--) {
      d.walk = walk;
      struct lx_sink s = {.b = etw_batch_new(64, 1 << 20), .flush = flush_none};
      lx_dec_page(&d, p.b, &s);
      CHECK_EQ(s.b->n, 1);
      char *got = s.b->n == 1 ? strndup(s.b->data.buf + s.b->ev[0].off, s.b->ev[0].len) : NULL;
      const char *stk = got ? strstr(got, ",\"Stack\":[") : NULL;
      CHECK(stk != NULL);
      /* 3 kernel frames + the user frame; none of the junk */
      CHECK_EQ(count(stk, "\"Address\":"), 4);
      CHECK(stk && strstr(stk, "\"Symbol\":\"do_syscall_64\""));
      CHECK(stk && strstr(stk, "\"Symbol\":\"entry_SYSCALL_64_after_hwframe\""));
      CHECK(stk && !strstr(stk, "\"0x8010000000000000\"") && !strstr(stk, "\"0x30\""));
      if (t_failures) fprintf(stderr, "form %d walk %d: %s\n", form, walk, got ? got : "(none)");
      free(got);
      etw_batch_unref(s.b);
    }
    free(p.b);
  }
  /* per walk and form: 3 user entries dropped (0x30 and the two after it), no kernel entry */
  CHECK_EQ(atomic_load(&d.stk_bad[1]), 4 * 3);
  CHECK_EQ(atomic_load(&d.stk_bad[0]), 0);
  CHECK_EQ(metric("user") - m0, 4 * 3);
  CHECK_EQ(metric("kernel") - mk0, 0);
  lx_dec_fini(&d);
  free((void *)want);
}

int main(void) {
  struct etw_status st;
  if (etw_backend_linux.init(&st) != ETW_E_OK) {
    fprintf(stderr, "init: %s\n", st.msg);
    return 1;
  }
  kernel_records();
  user_records();
  through_pages();
  T_DONE();
}
