/* test_dec_memo.c — the manifest memo's payload compare (dec_memo_eq: the AVX2 writers' inline
 * compare, 64 bytes per step with an overlapping last 32, and the others' memcmp) against memcmp:
 * every length from 1 to 300 and a few up to DEC_EMEMO_PAY, equal and with one byte changed at
 * every position (and two at once: first and last), the two buffers ending right before a page
 * that may not be read (POSIX: mprotect'ed guard pages, so a read past either end faults), and at
 * every offset of the start (0-63: any alignment). */
#include "decode.h"
#include "t.h"
#if !defined(_WIN32)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* A buffer whose last byte is the last of a readable page (the next one: no access), or plain
 * malloc where there is no mprotect. */
static unsigned char *guarded(size_t cap, void **base, size_t *blen) {
#if !defined(_WIN32)
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t body = (cap + pg - 1) / pg * pg;
  unsigned char *m = mmap(NULL, body + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  if (mprotect(m + body, pg, PROT_NONE)) return NULL;
  *base = m;
  *blen = body + pg;
  return m + body; /* the end: callers take end - n */
#else
  unsigned char *m = malloc(cap);
  *base = m;
  *blen = cap;
  return m ? m + cap : NULL;
#endif
}
static void unguard(void *base, size_t blen) {
#if !defined(_WIN32)
  munmap(base, blen);
#else
  (void)blen;
  free(base);
#endif
}

static unsigned rng = 12345u;
static unsigned next(void) {
  rng = rng * 1103515245u + 12345u;
  return rng >> 8;
}

/* @n bytes at the ends of both buffers (so that each ends at its guard page), compared as they
 * are and with changes; both variants against memcmp. */
static void one(unsigned char *ea, unsigned char *eb, size_t n) {
  unsigned char *a = ea - n, *b = eb - n;
  for (size_t i = 0; i < n; i++) a[i] = b[i] = (unsigned char)next();
  for (int v = 0; v < 2; v++) {
    CHECK_EQ(dec_memo_eq(a, b, n, v), 1);
    for (size_t i = 0; i < n; i++) { /* one byte at every position, either buffer */
      unsigned char s = b[i];
      b[i] = (unsigned char)(s ^ (1u << (i % 8)));
      CHECK_EQ(dec_memo_eq(a, b, n, v), 0);
      CHECK_EQ(dec_memo_eq(b, a, n, v), 0);
      b[i] = s;
    }
    a[0] ^= 0x80;
    a[n - 1] ^= 0x01;
    CHECK_EQ(dec_memo_eq(a, b, n, v), !memcmp(a, b, n));
    a[0] ^= 0x80;
    a[n - 1] ^= 0x01;
    CHECK_EQ(dec_memo_eq(a, b, n, v), 1);
  }
}

int main(void) {
  void *ba, *bb;
  size_t la, lb;
  unsigned char *ea = guarded(DEC_EMEMO_PAY + 64, &ba, &la), *eb = guarded(DEC_EMEMO_PAY + 64, &bb, &lb);
  CHECK(ea && eb);
  if (!ea || !eb) T_DONE();
  for (size_t n = 1; n <= 300; n++) one(ea, eb, n);
  static const size_t big[] = {511, 512, 513, 1023, 1024, 1025, 2000, 2047, DEC_EMEMO_PAY};
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) one(ea, eb, big[k]);
  /* starts at every alignment (the ends are the page ends above; here the other way: a's start
   * moves, b's end stays at its guard page) */
  for (size_t off = 0; off < 64; off++)
    for (size_t n = 1; n <= 200; n += 7) {
      unsigned char *a = ea - n - off, *b = eb - n;
      for (size_t i = 0; i < n; i++) a[i] = b[i] = (unsigned char)next();
      for (int v = 0; v < 2; v++) {
        CHECK_EQ(dec_memo_eq(a, b, n, v), 1);
        size_t i = next() % n;
        a[i] ^= 0x10;
        CHECK_EQ(dec_memo_eq(a, b, n, v), 0);
        a[i] ^= 0x10;
      }
    }
  CHECK_EQ(dec_memo_eq(ea, eb, 0, 1), 1); /* (nothing to compare) */
  unguard(ba, la);
  unguard(bb, lb);
  T_DONE();
}
