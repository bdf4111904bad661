/* test_etl_xpress.c — etw_xpress_decompress (its whole-word fast path and checked loop) against
 * a byte-at-a-time reference: every compressed
 * buffer of the compressed corpus files, whole and cut at every length near the fast paths'
 * margins (input and output), with random bytes changed, and random item streams. Same return
 * value and the same output bytes every time. On POSIX systems each call also runs with its
 * input and output placed against inaccessible pages (before and after), so any read or write
 * outside them faults (also without ASan).
 */
#include <stdint.h>

#include "t.h"
#include "test_etl_util.h"

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define XT_GUARD 1
#endif

#define PV "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/"
#define S4 "jtmoon79+super-speedy-syslog-searcher/logs/"

static uint64_t rnd = 0x9E3779B97F4A7C15ull;
static uint32_t rnext(uint32_t n) {
  rnd ^= rnd << 13;
  rnd ^= rnd >> 7;
  rnd ^= rnd << 17;
  return n ? (uint32_t)(rnd >> 11) % n : 0;
}

#ifdef XT_GUARD
/* @n bytes with an inaccessible page before and after, placed against the end (@at_end) or
 * the start of the accessible pages; *base / *len for xt_unmap. */
static unsigned char *xt_map(size_t n, int at_end, void **base, size_t *len) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
  if (!body) body = pg;
  *len = body + 2 * pg;
  unsigned char *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  mprotect(m, pg, PROT_NONE);
  mprotect(m + pg + body, pg, PROT_NONE);
  *base = m;
  return at_end ? m + pg + body - n : m + pg;
}
#endif

static size_t cases, bad;

/* etw_xpress_decompress and the reference on @in[0..ni) into @no bytes: the same result and
 * bytes; with guard pages around input and output (both placements). */
static void xt_one(const unsigned char *in, size_t ni, size_t no, const char *what, size_t at) {
  unsigned char *r = malloc(no ? no : 1), *a = malloc(no ? no : 1), *ic = malloc(ni ? ni : 1);
  if (!r || !a || !ic) {
    CHECK(0);
    free(r), free(a), free(ic);
    return;
  }
  memcpy(ic, in, ni);
  long gr = tu_xpress_ref(ic, ni, r, no);
  long ga = etw_xpress_decompress(ic, ni, a, no);
  cases++;
  int ok = ga == gr && (gr <= 0 || !memcmp(a, r, (size_t)gr));
#ifdef XT_GUARD
  for (int place = 0; place < 2 && ok; place++) {
    void *bi, *bo;
    size_t li, lo;
    unsigned char *gi = xt_map(ni, place, &bi, &li), *go = xt_map(no, !place, &bo, &lo);
    if (gi && go) {
      memcpy(gi, in, ni);
      long g = etw_xpress_decompress(gi, ni, go, no);
      if (g != gr || (gr > 0 && memcmp(go, r, (size_t)gr))) ok = 0;
    }
    if (gi) munmap(bi, li);
    if (go) munmap(bo, lo);
  }
#endif
  if (!ok && bad++ < 5)
    fprintf(stderr, "xpress %s (%zu): in %zu out %zu: got %ld, reference %ld\n", what, at, ni, no, ga, gr);
  free(r), free(a), free(ic);
}

static const char *const FILES[] = {
    PV "inputs/net.4.5.2.x64.etl.zip!*.etl",
    PV "inputs/gcevents.etl.zip!*.etl",
    PV "inputs/primitive-types.etl.zip!*.etl",
    "airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl",
    "microsoft+krabsetw/examples/NativeExamples/powershell.etl",
    S4 "programs/OneDrive/Local/Microsoft/OneDrive/logs/Personal/CldFlt0-2025-12-21-121418.etlgz",
};

/* Output lengths near the margins: the fast loop's 512, 32 × 24 + 32 (a margin of the removed
 * assembly loops, kept as an edge case), the roomy loop's 32 × 279 + 32, the first 8 KiB; input
 * near the 360-byte margin. */
static const size_t OUT_CUT[] = {1, 2, 31, 32, 33, 63, 64, 65, 511, 512, 513, 799, 800, 801, 802, 8959, 8960, 8961, 8962};
static const size_t IN_CUT[] = {1, 2, 3, 4, 5, 47, 48, 49, 100, 358, 359, 360, 361, 362, 500};

static void test_corpus_buffers(void) {
  size_t bufs = 0;
  for (size_t fi = 0; fi < sizeof FILES / sizeof FILES[0]; fi++) {
    size_t n;
    unsigned char *img = tu_corpus_file(FILES[fi], &n);
    CHECK(img != NULL);
    if (!img) continue;
    size_t k = 0;
    for (size_t off = 0; off + 0x48 <= n; k++) {
      const unsigned char *h = img + off;
      uint32_t bsize = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
      if (bsize < 0x48 || bsize > n - off) break;
      uint32_t saved = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
      if ((h[0x34] & 0x40) && saved > 0x48 && saved <= (1u << 24)) {
        const unsigned char *in = h + 0x48;
        size_t ni = bsize - 0x48, full = saved - 0x48;
        bufs++;
        xt_one(in, ni, full, "whole", off);
        xt_one(in, ni, full + 100, "longer output", off);
        /* every buffer: a few cuts; every 8th (and the last ones): all of them */
        int all = k % 8 == 0 || fi > 0;
        for (size_t i = 0; i < sizeof OUT_CUT / sizeof OUT_CUT[0]; i++) {
          if (OUT_CUT[i] < full && (all || i % 4 == 0)) xt_one(in, ni, full - OUT_CUT[i], "output cut", off);
          if (OUT_CUT[i] < full && all) xt_one(in, ni, OUT_CUT[i], "output short", off);
        }
        if (all)
          for (size_t v = 8192 - 40; v < 8192 + 40 && v < full; v += 3) xt_one(in, ni, v, "output near 8 KiB", off);
        for (size_t i = 0; i < sizeof IN_CUT / sizeof IN_CUT[0]; i++)
          if (IN_CUT[i] < ni && (all || i % 4 == 0)) xt_one(in, ni - IN_CUT[i], full, "input cut", off);
        xt_one(in, rnext((uint32_t)ni), full, "input cut (random)", off);
        xt_one(in, ni, 1 + rnext((uint32_t)full), "output cut (random)", off);
        /* random bytes changed (tokens, flags, lengths: bad distances and lengths too) */
        unsigned char *m = malloc(ni);
        if (m) {
          for (int t = 0; t < (all ? 6 : 2); t++) {
            memcpy(m, in, ni);
            int flips = 1 + (int)rnext(t < 3 ? 4 : 64);
            for (int j = 0; j < flips; j++) m[rnext((uint32_t)ni)] = (unsigned char)rnext(256);
            xt_one(m, ni, full, "mutated", off);
          }
          free(m);
        }
      }
      off += bsize;
    }
    free(img);
  }
  CHECK(bufs >= 359);
}

/* Random item streams: literal runs of every length up to 40 (the 16- and 32-byte literal
 * copies), matches of every distance class (1..15 one by one, 16..79 (the 16- and 32-byte
 * copies, the 64-byte turns), 16..8192) and length form
 * (3..9, nibbles, a byte, 2 and 4 bytes), also distances past the output written so far. */
static size_t xt_gen(unsigned char *in, size_t cap, size_t *plain, int bad_dist) {
  size_t k = 0, op = 0, fpos = 0, half = (size_t)-1;
  uint32_t flags = 0;
  int items = 32;
  size_t run = 0;
  while (k + 64 < cap) {
    if (items == 32) {
      if (fpos || k) {
        for (int i = 0; i < 4; i++) in[fpos + (size_t)i] = (unsigned char)(flags >> (8 * i));
      }
      fpos = k;
      k += 4;
      flags = 0;
      items = 0;
    }
    if (!run && (op == 0 || rnext(100) < 30)) run = rnext(100) < 90 ? 1 + rnext(3) : 1 + rnext(40);
    if (run) {
      in[k++] = (unsigned char)("abcab\0\0xyz"[rnext(10)] + (rnext(8) == 0 ? rnext(200) : 0));
      op++;
      run--;
    } else {
      flags |= 1u << (31 - items);
      uint32_t dk = rnext(100);
      size_t off = dk < 30 ? 1 + rnext(15) : dk < 40 ? 16 + rnext(64) : 1 + rnext(8192);
      if (off > op && !(bad_dist && rnext(50) == 0)) off = op;
      uint32_t lk = rnext(100);
      size_t m = lk < 50 ? rnext(7) : lk < 75 ? 7 + rnext(15) : lk < 95 ? 22 + rnext(255) :
                 lk < 99 ? 277 + rnext(3000) : 65500 + rnext(3000);
      tu_xpress_put_match(in, &k, &half, off, m);
      op += m + 3;
    }
    items++;
  }
  for (int i = 0; i < 4; i++) in[fpos + (size_t)i] = (unsigned char)(flags >> (8 * i));
  *plain = op;
  return k;
}

static void test_random_streams(void) {
  size_t cap = 24000;
  unsigned char *in = malloc(cap);
  CHECK(in != NULL);
  if (!in) return;
  for (int round = 0; round < 400; round++) {
    size_t plain, n = xt_gen(in, 400 + rnext((uint32_t)cap - 400), &plain, round % 4 == 3);
    size_t lim = plain < 300000 ? plain : 300000;
    xt_one(in, n, lim, "random", (size_t)round);
    xt_one(in, n, 1 + rnext((uint32_t)lim), "random, output cut", (size_t)round);
    xt_one(in, n - rnext(n < 400 ? (uint32_t)n : 400), lim, "random, input cut", (size_t)round);
    if (round % 8 == 0) { /* garbage */
      for (size_t i = 0; i < n; i++) in[i] = (unsigned char)rnext(256);
      xt_one(in, n, 1 + rnext(70000), "garbage", (size_t)round);
    }
  }
  free(in);
}

/* Item writer for hand-made streams: literal bytes and matches, 32 flags a word. */
struct xw {
  unsigned char *b;
  size_t k, fpos;
  uint32_t flags;
  int items;
};
static void xw_item(struct xw *w, int match) {
  if (w->items == 32) {
    for (int i = 0; i < 4; i++) w->b[w->fpos + (size_t)i] = (unsigned char)(w->flags >> (8 * i));
    w->fpos = w->k;
    w->k += 4;
    w->flags = 0;
    w->items = 0;
  }
  if (match) w->flags |= 1u << (31 - w->items);
  w->items++;
}
static void xw_lit(struct xw *w, unsigned char c) {
  xw_item(w, 0);
  w->b[w->k++] = c;
}
static void xw_match(struct xw *w, size_t dist, size_t len) { /* len 3..9 or 10..24 */
  xw_item(w, 1);
  size_t tok = (dist - 1) << 3 | (len - 3 < 7 ? len - 3 : 7);
  w->b[w->k++] = (unsigned char)tok;
  w->b[w->k++] = (unsigned char)(tok >> 8);
  if (len - 3 >= 7) w->b[w->k++] = (unsigned char)(len - 10);
}
static size_t xw_end(struct xw *w) {
  for (int i = 0; i < 4; i++) w->b[w->fpos + (size_t)i] = (unsigned char)(w->flags >> (8 * i));
  return w->k;
}

/* Distances exactly reaching the output's start (valid) and one past it (malformed, -1) after
 * every number of literals near the start and up to 8 KiB (the distance-checked loops), every
 * length class and distance class, in outputs that take the roomy, medium and tail loops;
 * also right after 1 or 2 matches without literals between. */
static void test_distance_edge(void) {
  static const size_t POS[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1000, 4095, 4096, 8000, 8190, 8191, 8192, 8193};
  static const size_t LEN[] = {3, 9, 10, 24};
  static const size_t OUT[] = {600, 3000, 20000};
  size_t cap = 40000;
  unsigned char *in = malloc(cap);
  CHECK(in != NULL);
  if (!in) return;
  for (size_t oi = 0; oi < sizeof OUT / sizeof OUT[0]; oi++)
    for (size_t pi = 0; pi < sizeof POS / sizeof POS[0]; pi++)
      for (size_t li = 0; li < sizeof LEN / sizeof LEN[0]; li++)
        for (int over = 0; over < 2; over++)
          for (size_t pre = 0; pre < 3; pre++) {
            /* pre: 3-byte matches from distance 9 right before it (no literals between: an
             * empty literal run before the match) */
            size_t pos = POS[pi], no = OUT[oi];
            if (pos + 100 > no || (pre && pos < 9)) continue;
            struct xw w = {in, 0, 0, 0, 32};
            for (size_t i = 0; i < pos; i++) xw_lit(&w, (unsigned char)(i * 37 + 11));
            for (size_t i = 0; i < pre; i++) xw_match(&w, 9, 3);
            xw_match(&w, pos + 3 * pre + (size_t)over, LEN[li]);
            while (w.k + 16 < cap && w.k < no + 400) xw_lit(&w, (unsigned char)(w.k * 13));
            size_t n = xw_end(&w);
            xt_one(in, n, no, over ? "distance past the start" : "distance to the start", pos);
          }
  free(in);
}

/* Item writer with shared length nibbles (tu_xpress_put_match), for the end-of-buffer cases. */
struct xg {
  unsigned char *b;
  size_t k, fpos, half, op;
  uint32_t flags;
  int items;
};
static void xg_item(struct xg *g, int match) {
  if (g->items == 32) {
    for (int i = 0; i < 4; i++) g->b[g->fpos + (size_t)i] = (unsigned char)(g->flags >> (8 * i));
    g->fpos = g->k;
    g->k += 4;
    g->flags = 0;
    g->items = 0;
  }
  if (match) g->flags |= 1u << (31 - g->items);
  g->items++;
}
static void xg_lit(struct xg *g) {
  xg_item(g, 0);
  g->b[g->k++] = (unsigned char)("abcab\0\0xyz"[rnext(10)] + rnext(4));
  g->op++;
}
static void xg_match(struct xg *g, size_t off, size_t len) {
  xg_item(g, 1);
  tu_xpress_put_match(g->b, &g->k, &g->half, off, len - 3);
  g->op += len;
}

/* The ends of the input and the output: after ~1,500 items (the fast loops), a run of 0..40
 * literals (the 16- and 32-byte literal copies) and one match of each length form as the last
 * items, with the input and the output cut at every length near them: the tail loops' limits per
 * step (input and output), their hand-over to the C loop, the long matches checked near the end
 * (guard pages around both). */
static void test_tail_edge(void) {
  static const size_t RUN[] = {0, 1, 15, 16, 17, 31, 32, 33, 40};
  static const size_t LEN[] = {3, 10, 25, 65, 280, 70000};
  size_t cap = 16000;
  unsigned char *in = malloc(cap);
  CHECK(in != NULL);
  if (!in) return;
  for (size_t ri = 0; ri < sizeof RUN / sizeof RUN[0]; ri++)
    for (size_t li = 0; li < sizeof LEN / sizeof LEN[0]; li++) {
      struct xg g = {in, 4, 0, (size_t)-1, 0, 0, 0};
      for (int i = 0; i < 1500; i++) {
        if (g.op < 300 || rnext(3) == 0)
          xg_lit(&g);
        else
          xg_match(&g, 32 + rnext(150), 3 + rnext(30));
      }
      for (size_t i = 0; i < RUN[ri]; i++) xg_lit(&g);
      xg_match(&g, 40, LEN[li]);
      for (int i = 0; i < 4; i++) in[g.fpos + (size_t)i] = (unsigned char)(g.flags >> (8 * i));
      size_t n = g.k, plain = g.op, at = ri * 100 + li;
      for (size_t cut = 0; cut < 50 && cut < n; cut++) xt_one(in, n - cut, plain, "tail edge, input cut", at);
      for (size_t c = 1; c < 70; c += 4) xt_one(in, n, plain - c, "tail edge, output cut", at);
    }
  free(in);
}

/* A deliberately wrong output must be noticed (the comparison can fail). */
static void test_self(void) {
  unsigned char in[8] = {0, 0, 0, 0, 'a', 'b', 'c', 'd'}, out[4];
  CHECK_EQ(tu_xpress_ref(in, sizeof in, out, 4), 4);
  CHECK(!memcmp(out, "abcd", 4));
}

int main(void) {
  test_self();
  test_distance_edge();
  test_tail_edge();
  test_corpus_buffers();
  test_random_streams();
  fprintf(stderr, "xpress cases: %zu\n", cases);
  CHECK(cases > 9000);
  CHECK_EQ(bad, 0);
  T_DONE();
}
