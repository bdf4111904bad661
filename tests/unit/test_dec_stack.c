/* test_dec_stack.c — dec_stack.c on hand-built records: the live path (images and methods learnt
 * as they come, an event's own stack-trace extended item rendered and resolved), the file path
 * (a StackWalk/Stack after its event, a KeyUser reference and its later key definition, a
 * reference whose definition never comes, ClrStack/Walk after a CLR event, a profile sample
 * matched by the thread in its payload, an event's STACK_KEY64 item and its later definition), and a
 * writer
 * without room. The expected texts are written out here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_stack.h"
#include "t.h"

static const unsigned char CLR[16] = {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e,
                                      0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4};

static size_t put16(unsigned char *p, const char *s) { /* ASCII → UTF-16LE with its NUL */
  size_t n = strlen(s);
  for (size_t i = 0; i <= n; i++) p[2 * i] = (unsigned char)s[i], p[2 * i + 1] = 0;
  return 2 * (n + 1);
}

static struct etw_rec kernel(uint16_t hook, unsigned char ver, const unsigned char *u, uint32_t n) {
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_SYSTEM;
  r.ptr_size = 8;
  r.hook_id = hook;
  r.desc.opcode = (uint8_t)(hook & 255);
  r.desc.version = ver;
  r.tid = r.pid = 0xFFFFFFFFu;
  r.user_data = u;
  r.user_len = n;
  return r;
}

static uint32_t image(unsigned char *u, uint64_t base, uint64_t size, uint32_t pid, const char *name) {
  memset(u, 0, 56);
  memcpy(u, &base, 8);
  memcpy(u + 8, &size, 8);
  memcpy(u + 16, &pid, 4);
  return 56 + (uint32_t)put16(u + 56, name);
}

static uint32_t method(unsigned char *u, uint64_t start, uint32_t size, const char *ns, const char *name) {
  memset(u, 0, 36);
  memcpy(u + 16, &start, 8);
  memcpy(u + 24, &size, 4);
  size_t o = 36 + put16(u + 36, ns);
  o += put16(u + o, name);
  o += put16(u + o, "void ()");
  return (uint32_t)o;
}

static struct etw_rec clr_event(uint16_t id, uint32_t pid, uint32_t tid, int64_t ts, const unsigned char *u, uint32_t n) {
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_EVENT;
  r.ptr_size = 8;
  memcpy(r.provider_id, CLR, 16);
  r.desc.id = id;
  r.pid = pid;
  r.tid = tid;
  r.timestamp = ts;
  r.user_data = u;
  r.user_len = n;
  return r;
}

/* the event text "{}" with its stack, as attach leaves it */
static char *attach(struct etw_stk *k, const struct etw_rec *r, int *rc) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  etw_jw_lit(&w, "{}");
  *rc = etw_stk_attach(k, r, &w);
  char *s = strdup(etw_jw_cstr(&w));
  etw_jw_free(&w);
  return s;
}

static void live(void) {
  struct etw_stk *k = etw_stk_new(0);
  unsigned char u[512], m[512];
  struct etw_rec r = kernel(0x140A, 3, u, image(u, 0x7ff600000000ull, 0x10000, 1234, "\\Device\\HarddiskVolume2\\x\\app.exe"));
  etw_stk_learn(k, &r);
  unsigned char kimg[512];
  r = kernel(0x1403, 2, kimg, image(kimg, 0xfffff80000000000ull, 0x100000, 0, "\\SystemRoot\\system32\\ntoskrnl.exe"));
  etw_stk_learn(k, &r);
  r = clr_event(143, 1234, 7, 100, m, method(m, 0x20000000, 0x100, "N.S", "M"));
  etw_stk_learn(k, &r);
  /* an event with its own stack (EVENT_ENABLE_PROPERTY_STACK_TRACE): MatchId, then frames */
  unsigned char st[8 + 4 * 8] = {0};
  uint64_t fr[4] = {0xfffff80000000010ull, 0x7ff600000123ull, 0x20000010, 0x5};
  memcpy(st + 8, fr, sizeof fr);
  struct etw_rec ev = clr_event(1, 1234, 7, 200, NULL, 0);
  ev.n_ext = 1;
  ev.ext[0] = (struct etw_ext_item){ETW_EXT_STACK_TRACE64, sizeof st, st};
  int rc;
  char *s = attach(k, &ev, &rc);
  CHECK_EQ(rc, 1);
  CHECK_STR(s, "{,\"Stack\":[{\"Address\":\"0xfffff80000000010\",\"Module\":\"ntoskrnl.exe\",\"Offset\":16},"
               "{\"Address\":\"0x7ff600000123\",\"Module\":\"app.exe\",\"Offset\":291},"
               "{\"Address\":\"0x20000010\",\"Symbol\":\"N.S.M\",\"Offset\":16},{\"Address\":\"0x5\"}]}");
  free(s);
  ev.n_ext = 0; /* no stack: unchanged */
  s = attach(k, &ev, &rc);
  CHECK_EQ(rc, 0);
  CHECK_STR(s, "{}");
  free(s);
  ev.n_ext = 1; /* a writer without room: the event as it was */
  struct etw_jw w;
  etw_jw_init(&w, 40);
  etw_jw_lit(&w, "{}");
  CHECK_EQ(etw_stk_attach(k, &ev, &w), -1);
  CHECK_STR(etw_jw_cstr(&w), "{}");
  CHECK_EQ(w.err, 0);
  etw_jw_free(&w);
  struct etw_stk_counts c;
  etw_stk_counts(k, &c);
  CHECK_EQ(c.walks, 0);
  CHECK_EQ(c.in_event, 2);
  etw_stk_free(k);
}

static void file(void) {
  struct etw_stk *k = etw_stk_new(1);
  unsigned char u[512];
  struct etw_rec r = kernel(0x1403, 3, u, image(u, 0x400000, 0x1000, 42, "C:\\a\\b.dll"));
  etw_stk_learn(k, &r);
  /* StackWalk/Stack of an event at ts 1000 on thread 9 of pid 42 (CPU 3) */
  unsigned char w32[16 + 16];
  uint64_t ts = 1000, f2[2] = {0x400010, 0x400020};
  uint32_t pid = 42, tid = 9;
  memcpy(w32, &ts, 8);
  memcpy(w32 + 8, &pid, 4);
  memcpy(w32 + 12, &tid, 4);
  memcpy(w32 + 16, f2, 16);
  struct etw_rec walk = kernel(0x1820, 2, w32, sizeof w32);
  walk.cpu = 3;
  etw_stk_learn(k, &walk);
  /* KeyUser (38) for ts 2000, then a reference for ts 3000 whose key is never defined, then the
   * first key's definition (KeyCreate, 36) */
  unsigned char ref[24], ref2[24], def[8 + 8];
  uint64_t ts2 = 2000, key = 0xabc, ts3 = 3000, key2 = 0xdef, f1 = 0x400fff;
  memcpy(ref, &ts2, 8);
  memcpy(ref + 8, &pid, 4);
  memcpy(ref + 12, &tid, 4);
  memcpy(ref + 16, &key, 8);
  memcpy(ref2, &ts3, 8);
  memcpy(ref2 + 8, &pid, 4);
  memcpy(ref2 + 12, &tid, 4);
  memcpy(ref2 + 16, &key2, 8);
  memcpy(def, &key, 8);
  memcpy(def + 8, &f1, 8);
  struct etw_rec x = kernel(0x1826, 2, ref, 24);
  etw_stk_learn(k, &x);
  x = kernel(0x1826, 2, ref2, 24);
  etw_stk_learn(k, &x);
  x = kernel(0x1824, 2, def, 16);
  etw_stk_learn(k, &x);
  /* ClrStack/Walk (82) after a CLR event of thread 9 at ts 4000 */
  struct etw_rec ce = clr_event(10, 42, 9, 4000, NULL, 0);
  etw_stk_learn(k, &ce);
  unsigned char cw[8 + 8] = {0};
  uint32_t one = 1;
  uint64_t f3 = 0x400abc;
  memcpy(cw + 4, &one, 4);
  memcpy(cw + 8, &f3, 8);
  struct etw_rec cwr = clr_event(82, 42, 9, 4100, cw, sizeof cw);
  etw_stk_learn(k, &cwr);
  /* StackWalk/Stack of a profile sample at ts 5000 of thread 11, logged on CPU 2 */
  unsigned char w5[16 + 8];
  uint64_t ts5 = 5000, f5 = 0x400100;
  uint32_t tid11 = 11;
  memcpy(w5, &ts5, 8);
  memcpy(w5 + 8, &pid, 4);
  memcpy(w5 + 12, &tid11, 4);
  memcpy(w5 + 16, &f5, 8);
  struct etw_rec walk5 = kernel(0x1820, 2, w5, sizeof w5);
  walk5.cpu = 2;
  etw_stk_learn(k, &walk5);
  /* an event whose stack is in the cache (extended item STACK_KEY64: MatchId, key), defined
   * later by a KeyDelete (34) */
  unsigned char sk[16] = {0}, d34[16];
  uint64_t key3 = 0x777, f6 = 0x400200;
  memcpy(sk + 8, &key3, 8);
  memcpy(d34, &key3, 8);
  memcpy(d34 + 8, &f6, 8);
  struct etw_rec kev = clr_event(5, 42, 12, 6000, NULL, 0);
  kev.provider_id[0] ^= 1; /* not a CLR provider */
  kev.n_ext = 1;
  kev.ext[0] = (struct etw_ext_item){ETW_EXT_STACK_KEY64, sizeof sk, sk};
  etw_stk_learn(k, &kev);
  x = kernel(0x1822, 2, d34, 16);
  etw_stk_learn(k, &x);
  etw_stk_learn_end(k);
  CHECK(etw_stk_is_walk(&walk) && etw_stk_is_walk(&cwr) && !etw_stk_is_walk(&ce) && !etw_stk_is_walk(&r));

  int rc;
  struct etw_rec ev = kernel(0x0301, 3, NULL, 0); /* an event of thread 9 at ts 1000 */
  ev.timestamp = 1000, ev.tid = 9, ev.pid = 42;
  struct etw_rec other = ev; /* another thread at the same time: none */
  other.tid = 10;
  char *s = attach(k, &other, &rc);
  CHECK_EQ(rc, 0);
  free(s);
  s = attach(k, &ev, &rc);
  CHECK_STR(s, "{,\"Stack\":[{\"Address\":\"0x400010\",\"Module\":\"b.dll\",\"Offset\":16},"
               "{\"Address\":\"0x400020\",\"Module\":\"b.dll\",\"Offset\":32}]}");
  free(s);
  s = attach(k, &ev, &rc); /* claimed once */
  CHECK_EQ(rc, 0);
  free(s);
  ev.timestamp = 2000; /* a PerfInfo-like event (no thread): matched by CPU; the key's frames */
  ev.tid = 0xFFFFFFFFu;
  ev.cpu = 0;
  s = attach(k, &ev, &rc);
  CHECK_STR(s, "{,\"Stack\":[{\"Address\":\"0x400fff\",\"Module\":\"b.dll\",\"Offset\":4095}]}");
  free(s);
  ev.timestamp = 3000; /* its key never defined: nothing */
  s = attach(k, &ev, &rc);
  CHECK_EQ(rc, 0);
  free(s);
  s = attach(k, &ce, &rc);
  CHECK_STR(s, "{,\"Stack\":[{\"Address\":\"0x400abc\",\"Module\":\"b.dll\",\"Offset\":2748}]}");
  free(s);
  /* PerfInfo/Sample (no thread in its header) on CPU 5: its payload's thread, 11, takes it */
  unsigned char sp[16] = {0};
  memcpy(sp + 8, &tid11, 4);
  struct etw_rec smp = kernel(0x0F2E, 2, sp, sizeof sp);
  smp.kind = ETW_REC_PERFINFO;
  smp.timestamp = 5000;
  smp.cpu = 5;
  s = attach(k, &smp, &rc);
  CHECK_STR(s, "{,\"Stack\":[{\"Address\":\"0x400100\",\"Module\":\"b.dll\",\"Offset\":256}]}");
  free(s);
  s = attach(k, &kev, &rc);
  CHECK_STR(s, "{,\"Stack\":[{\"Address\":\"0x400200\",\"Module\":\"b.dll\",\"Offset\":512}]}");
  free(s);
  struct etw_stk_counts c;
  etw_stk_counts(k, &c);
  CHECK_EQ(c.walks, 6);
  CHECK_EQ(c.attached, 5);
  CHECK_EQ(c.unattached, 1);
  etw_stk_free(k);
}

/* many cache entries whose keys are reused (the pending-key table is rebuilt many times): each
 * reference still takes its own definition */
static void reuse(void) {
  struct etw_stk *k = etw_stk_new(1);
  uint32_t pid = 7, tid = 99;
  for (uint32_t i = 0; i < 20000; i++) {
    unsigned char ref[24], def[16];
    uint64_t ts = 10000 + i, key = 0x1000 + (i % 700) * 16 + (i / 700) % 3, fr = 0x5000 + i;
    memcpy(ref, &ts, 8);
    memcpy(ref + 8, &pid, 4);
    memcpy(ref + 12, &tid, 4);
    memcpy(ref + 16, &key, 8);
    struct etw_rec x = kernel(0x1826, 2, ref, 24);
    etw_stk_learn(k, &x);
    if (i % 3 == 2 || i == 19999) { /* defined after a few other references */
      memcpy(def, &key, 8);
      memcpy(def + 8, &fr, 8);
      x = kernel(0x1824, 2, def, 16);
      etw_stk_learn(k, &x);
    }
  }
  etw_stk_learn_end(k);
  /* what each reference should get, computed backwards: the next definition of its key */
  static int64_t next_def[700 * 16 + 3], want_fr[20000];
  for (size_t j = 0; j < sizeof next_def / sizeof next_def[0]; j++) next_def[j] = -1;
  for (uint32_t i = 20000; i-- > 0;) {
    uint32_t kx = (i % 700) * 16 + (i / 700) % 3;
    if (i % 3 == 2 || i == 19999) next_def[kx] = 0x5000 + i;
    want_fr[i] = next_def[kx];
  }
  struct etw_rec ev = kernel(0x0301, 3, NULL, 0);
  ev.tid = tid, ev.pid = pid;
  int rc, bad = 0;
  for (uint32_t i = 0; i < 20000; i++) {
    ev.timestamp = 10000 + i;
    char *s = attach(k, &ev, &rc);
    char want[128] = "{}";
    if (want_fr[i] >= 0) snprintf(want, sizeof want, "{,\"Stack\":[{\"Address\":\"0x%llx\"}]}", (long long)want_fr[i]);
    bad += strcmp(s, want) != 0;
    free(s);
  }
  CHECK_EQ(bad, 0);
  etw_stk_free(k);
}

int main(void) {
  live();
  file();
  reuse();
  T_DONE();
}
