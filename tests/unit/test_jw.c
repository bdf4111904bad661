/* test_jw.c — the JSON writer: escaping, invalid UTF-8, UTF-16 with surrogates, integers at the
 * ends of their range, GUIDs both ways, times (FILETIME and ns, before 1970 and at the int64
 * ends), base64, and the hard maximum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etwcore/jw.h"
#include "t.h"

static const char *w1(void (*f)(struct etw_jw *, const void *), const void *arg) {
  static char out[512];
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  f(&w, arg);
  snprintf(out, sizeof out, "%s", etw_jw_cstr(&w));
  etw_jw_free(&w);
  return out;
}
static void f_str(struct etw_jw *w, const void *a) { etw_jw_cs(w, a); }
static void f_i64(struct etw_jw *w, const void *a) { etw_jw_i64(w, *(const int64_t *)a); }
static void f_u64(struct etw_jw *w, const void *a) { etw_jw_u64(w, *(const uint64_t *)a); }
static void f_ns(struct etw_jw *w, const void *a) { etw_jw_unix_ns(w, *(const int64_t *)a); }
static void f_ft(struct etw_jw *w, const void *a) { etw_jw_filetime(w, *(const uint64_t *)a); }

/* UTF-16 → JSON reference, one unit at a time from the rules in jw.h: returns the text length. */
static size_t ref16(char *o, const uint16_t *u, size_t n, size_t *used) {
  size_t k = 0, i = 0;
  o[k++] = '"';
  for (; i < n && u[i]; i++) {
    uint32_t c = u[i];
    if (c == '"' || c == '\\') {
      o[k++] = '\\';
      o[k++] = (char)c;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      o[k++] = '\\';
      o[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
    } else if (c < 0x20 || c == 0x7F) {
      k += (size_t)sprintf(o + k, "\\u%04x", c);
    } else if (c < 0x80) {
      o[k++] = (char)c;
    } else {
      if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
        c = 0x10000 + ((c - 0xD800) << 10) + (u[i + 1] - 0xDC00u);
        i++;
      } else if (c >= 0xD800 && c <= 0xDFFF) {
        c = 0xFFFD;
      }
      if (c < 0x800) {
        o[k++] = (char)(0xC0 | c >> 6);
      } else if (c < 0x10000) {
        o[k++] = (char)(0xE0 | c >> 12);
        o[k++] = (char)(0x80 | (c >> 6 & 0x3F));
      } else {
        o[k++] = (char)(0xF0 | c >> 18);
        o[k++] = (char)(0x80 | (c >> 12 & 0x3F));
        o[k++] = (char)(0x80 | (c >> 6 & 0x3F));
      }
      o[k++] = (char)(0x80 | (c & 0x3F));
    }
  }
  o[k++] = '"';
  *used = i;
  return k;
}

/* etw_jw_str16n (SIMD where available) and its scalar fallback against the reference: every unit
 * class at every position of runs up to five SIMD blocks long, with and without a NUL after it. */
static void str16_all(void) {
  static const uint16_t units[] = {'a', 'Z', ' ', '~', 0x7F, '"', '\\', '\n', '\r', '\t', 1, 0x1F, 0x08,
                                   0xE9, 0x20AC, 0xD83D, 0xDE00, 0xDC00, 0xDBFF, 0xFFFF, 0x80, 0x7FF,
                                   0x800, 0x100, 0xFF20, 0};
  const size_t nu = sizeof units / sizeof units[0];
  uint16_t u[48];
  unsigned char b[96];
  char want[48 * 6 + 8];
  struct etw_jw a, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  size_t cases = 0, bad = 0;
  for (size_t len = 0; len <= 41; len++) {
    for (size_t pos = 0; pos < len || (len == 0 && pos == 0); pos++) {
      for (size_t k = 0; k < nu; k++) {
        for (size_t i = 0; i < len; i++) {
          u[i] = i == pos ? units[k] : (uint16_t)('A' + i % 26);
          if (i == pos + 1 && units[k] == 0xD83D) u[i] = 0xDE00; /* a valid pair too */
          if (i == pos + 3 && k % 2) u[i] = (uint16_t)units[(k * 7) % nu]; /* a second class */
          b[2 * i] = (unsigned char)u[i];
          b[2 * i + 1] = (unsigned char)(u[i] >> 8);
        }
        size_t used, wl = ref16(want, u, len, &used);
        a.len = c.len = 0;
        size_t ga = etw_jw_str16n(&a, b, len), gc = etw_jw_str16n_scalar(&c, b, len);
        cases++;
        if (ga != used || gc != used || a.len != wl || c.len != wl || memcmp(a.buf, want, wl) ||
            memcmp(c.buf, want, wl)) {
          if (bad++ < 3) fprintf(stderr, "str16 len %zu pos %zu unit %04x: %s\n", len, pos, units[k], etw_jw_cstr(&a));
        }
      }
    }
  }
  CHECK(cases > 10000);
  CHECK_EQ(bad, 0);
  /* a writer in error writes nothing but still reports the length up to the NUL */
  etw_jw_free(&a);
  etw_jw_init(&a, 8);
  memcpy(b, "a\0b\0c\0\0\0d\0", 10);
  CHECK_EQ(etw_jw_str16n(&a, b, 5), 3);
  CHECK(a.err == 1 && a.len == 0);
  etw_jw_free(&a);
  etw_jw_free(&c);
}

/* Paths: backslashes and quotes (escaped inside the SIMD loop, which then goes on with the next
 * block) anywhere, in runs, at block ends, with other specials and a NUL after; UTF-16 (SIMD vs
 * scalar vs the reference) and 8-bit (SIMD vs scalar), strings up to 100 units, into writers
 * just large enough too. */
static void paths_all(void) {
  static const uint16_t sp[] = {'\\', '"', '\\', '\\', '"', '\n', 0xE9, 0x20AC, 0xD83D, 0x7F, 0};
  uint64_t r = 88172645463325252ull;
  uint16_t u[128];
  unsigned char b[256];
  char want[128 * 6 + 8];
  struct etw_jw a, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  size_t cases = 0, bad = 0;
  for (int rep = 0; rep < 20000; rep++) {
    size_t len = (size_t)(rep % 101);
    unsigned dens = 1 + (unsigned)(rep / 101 % 8); /* one special in 2..16 */
    for (size_t i = 0; i < len; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      unsigned k = (unsigned)(r % (2 * dens));
      u[i] = k < 2 ? sp[(r >> 8) % (rep & 1 ? 5 : 11)] : (uint16_t)('A' + (r >> 16) % 26);
      if (u[i] == 0 && i + 1 < len) u[i] = '\\';
    }
    for (size_t i = 0; i < len; i++) {
      b[2 * i] = (unsigned char)u[i];
      b[2 * i + 1] = (unsigned char)(u[i] >> 8);
    }
    size_t units = len + (rep & 2 ? 1 : 0); /* a NUL after, or the string ends the data */
    b[2 * len] = b[2 * len + 1] = 0;
    u[len] = 0;
    size_t used, wl = ref16(want, u, units, &used);
    a.len = c.len = 0;
    size_t ga = etw_jw_str16n(&a, b, units), gc = etw_jw_str16n_scalar(&c, b, units);
    struct etw_jw x;
    etw_jw_init(&x, units * 6 + 2);
    size_t gx = etw_jw_str16n(&x, b, units);
    cases++;
    if (ga != used || gc != used || gx != used || a.len != wl || c.len != wl || x.len != wl || x.err ||
        memcmp(a.buf, want, wl) || memcmp(c.buf, want, wl) || memcmp(x.buf, want, wl)) {
      if (bad++ < 3) fprintf(stderr, "paths16 rep %d len %zu: %s\nwant %.*s\n", rep, len, etw_jw_cstr(&a), (int)wl, want);
    }
    etw_jw_free(&x);
    /* the same as bytes (8-bit strings) */
    char s8[128];
    for (size_t i = 0; i < len; i++) s8[i] = u[i] < 0x80 && u[i] ? (char)u[i] : (char)(u[i] ? 0xE9 : '\\');
    a.len = c.len = 0;
    etw_jw_str(&a, s8, len);
    etw_jw_str_scalar(&c, s8, len);
    etw_jw_init(&x, len * 6 + 2);
    etw_jw_str(&x, s8, len);
    if (a.len != c.len || memcmp(a.buf, c.buf, a.len) || x.err || x.len != c.len || memcmp(x.buf, c.buf, c.len)) {
      if (bad++ < 3) fprintf(stderr, "paths8 rep %d len %zu: %s\n", rep, len, etw_jw_cstr(&a));
    }
    etw_jw_free(&x);
  }
  CHECK(cases == 20000);
  CHECK_EQ(bad, 0);
  etw_jw_free(&a);
  etw_jw_free(&c);
}

/* etw_jw_str (16-byte blocks) against etw_jw_str_scalar: every byte class at every position of
 * strings up to 41 bytes, a second special byte after it, invalid UTF-8, into exact writers too */
static void str_all(void) {
  static const unsigned char cls[] = {'a', 'Z', ' ', '~', 0x7F, '"', '\\', '\n', '\r', '\t', '\b', '\f', 1, 0x1F,
                                      0x80, 0xC3, 0xE2, 0xF0, 0xFF, 0xC0, 0xED};
  static const unsigned char follow[] = {0xA9, 0x82, 0xAC, 0x9F, 0x98, 0x80};
  const size_t nc = sizeof cls;
  char b[64];
  struct etw_jw a, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  size_t bad = 0, cases = 0;
  for (size_t len = 0; len <= 41; len++) {
    for (size_t pos = 0; pos < len || (len == 0 && pos == 0); pos++) {
      for (size_t k = 0; k < nc; k++) {
        for (size_t i = 0; i < len; i++) b[i] = (char)('A' + i % 26);
        if (len) b[pos] = (char)cls[k];
        for (size_t j = 1; j <= 3 && pos + j < len && cls[k] >= 0xC0; j++) b[pos + j] = (char)follow[(k + j) % 6];
        if (pos + 5 < len && k % 2) b[pos + 5] = (char)cls[(k * 7) % nc];
        a.len = c.len = 0;
        etw_jw_str(&a, b, len);
        etw_jw_str_scalar(&c, b, len);
        cases++;
        if (a.len != c.len || memcmp(a.buf, c.buf, a.len)) {
          if (bad++ < 3) fprintf(stderr, "str len %zu pos %zu byte %02x: %s\n", len, pos, cls[k], etw_jw_cstr(&a));
        }
        struct etw_jw x; /* a writer just large enough for the worst case */
        etw_jw_init(&x, len * 6 + 2);
        etw_jw_str(&x, b, len);
        if (x.err || x.len != c.len || memcmp(x.buf, c.buf, x.len)) bad++;
        etw_jw_free(&x);
      }
    }
  }
  CHECK(cases > 1000);
  CHECK_EQ(bad, 0);
  etw_jw_free(&a);
  etw_jw_free(&c);
}

/* base64 of every length 0..300 and every 7th to 800 (etw_jw_base64: the 6-byte steps and each
 * tail) of random bytes, every byte value and two other cycles, against a plain encoder,
 * into a writer exactly as large as the text and from an input at the end of its block */
static void base64_all(void) {
  static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  enum { N = 800 };
  static char want[N / 3 * 4 + 16];
  for (int round = 0; round < 4; round++) { /* random, every byte value, two more cycles */
    unsigned char *in = malloc(N);
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
      x = x * 1103515245u + 12345u;
      in[i] = round == 0 ? (unsigned char)(x >> 16)
              : round == 1 ? (unsigned char)i
              : round == 2 ? (unsigned char)(255 - (i * 7 & 255))
                           : (unsigned char)(i * 37 + (i >> 8));
    }
    for (size_t n = 0; n <= N; n += (n < 300 ? 1 : 7)) {
      /* the input at the end of its block (a read past it: ASan builds catch it) */
      unsigned char *b = malloc(n ? n : 1);
      memcpy(b, in, n);
      size_t k = 0;
      want[k++] = '"';
      for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        want[k++] = A[v >> 18];
        want[k++] = A[v >> 12 & 63];
        want[k++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        want[k++] = i + 2 < n ? A[v & 63] : '=';
      }
      want[k++] = '"';
      want[k] = 0;
      struct etw_jw w;
      etw_jw_init(&w, k + 1);
      etw_jw_base64(&w, b, n);
      CHECK(!w.err);
      CHECK_STR(etw_jw_cstr(&w), want);
      etw_jw_free(&w);
      free(b);
    }
    free(in);
  }
}

/* UTF-16 string u[0..@len) (≤ 64 units) as little-endian bytes in a heap block of exactly its size,
 * rendered by etw_jw_put_str16 into a heap block of exactly 6 bytes per unit + 1 (ASan builds
 * catch a byte past either), against ref16: 1 (and the first 3 printed with @tag, @x, @y) when it
 * differs. */
static size_t str16_bad;
static int str16_case(const uint16_t *u, size_t len, const char *tag, size_t x, size_t y) {
  unsigned char *b = malloc(len ? 2 * len : 1);
  for (size_t i = 0; i < len; i++) {
    b[2 * i] = (unsigned char)u[i];
    b[2 * i + 1] = (unsigned char)(u[i] >> 8);
  }
  char want[64 * 6 + 8];
  size_t used, wl = ref16(want, u, len, &used);
  char *o = malloc(6 * len + 1), *e;
  size_t conv = 0;
  e = etw_jw_put_str16(o, b, len, &conv);
  int bad = conv != used || (size_t)(e - o) != wl - 1 || memcmp(o, want + 1, wl - 1);
  if (bad && str16_bad++ < 3)
    fprintf(stderr, "str16 %s %zu %zu: %.*s\nwant %.*s\n", tag, x, y, (int)(e - o), o, (int)wl, want);
  free(o);
  free(b);
  return bad;
}

/* etw_jw_put_str16's short strings (8–15 units: the first and the last 8 as one block) and its
 * last 3–15 units (one block of the string's last 16 units, those already converted shifted
 * out): strings of 0–48 units with one or two special units (escapes, controls, non-ASCII,
 * surrogates, NUL) at every position or none, the input and the output in buffers of exactly
 * their size (6 bytes per unit + 1 out; ASan builds catch a byte past either), against the
 * reference. */
static void str16_tail(void) {
  static const uint16_t sp[] = {'"', '\\', '\n', 1, 0x7F, 0xE9, 0x20AC, 0xD83D, 0xDC00, 0xFFFF, 0x100, 0};
  const size_t ns = sizeof sp / sizeof sp[0];
  size_t cases = 0, bad = 0;
  for (size_t len = 0; len <= 48; len++)
    for (size_t pos = 0; pos <= len; pos++) /* pos == len: none */
      for (size_t k = 0; k < ns; k += (pos == len ? ns : 1)) {
        uint16_t u[49];
        for (size_t i = 0; i < len; i++) {
          u[i] = (uint16_t)('a' + (i * 7 + k) % 26);
          if (i == pos) u[i] = sp[k];
          if (k % 3 == 1 && i + 2 == pos) u[i] = '\\'; /* a second one before it */
        }
        u[len] = 0;
        cases++;
        bad += (size_t)str16_case(u, len, "tail len, pos", len, pos);
      }
  CHECK(cases > 5000);
  CHECK_EQ(bad, 0);
}

/* UTF-16 blocks dense in quotes and backslashes (escaped inside the 16-unit block, each one's
 * rest of the block stored again one byte further): strings of 16–64 units where every unit is
 * a backslash, a quote or a letter (random, up to all escapes), some with a control, a
 * non-ASCII unit or a NUL after the escapes; the input and the output in heap blocks of exactly
 * their size (6 bytes per unit + 1), against the reference. */
static void str16_dense(void) {
  uint64_t r = 0x9E3779B97F4A7C15ull;
  size_t cases = 0, bad = 0;
  for (int rep = 0; rep < 30000; rep++) {
    size_t len = 16 + (size_t)(rep % 49);
    unsigned dens = (unsigned)(rep / 49 % 4); /* 0: all escapes … 3: one in 4 */
    uint16_t u[65];
    for (size_t i = 0; i < len; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      u[i] = (r >> 20) % (dens + 1) ? (uint16_t)('a' + (r >> 8) % 26) : (r >> 4) & 1 ? '\\' : '"';
    }
    if (rep % 5 == 1) u[(r >> 32) % len] = (uint16_t)((r >> 40) % 3 == 0 ? 0 : (r >> 40) % 3 == 1 ? '\n' : 0xE9);
    u[len] = 0;
    cases++;
    bad += (size_t)str16_case(u, len, "dense rep, len", (size_t)rep, len);
  }
  CHECK(cases == 30000);
  CHECK_EQ(bad, 0);
}

/* etw_jw_str's short strings (4–15 bytes: two overlapping loads) and 16-byte blocks: strings of
 * 0–48 bytes with one or two special bytes (escapes, controls, DEL, UTF-8 leads, continuations,
 * invalid) at every position or none, each in a heap block of exactly its size, into a writer
 * whose buffer holds exactly the reservation (ASan builds catch a byte read or written past
 * either), against the scalar code. */
static void str8_tail(void) {
  static const unsigned char sp[] = {'"', '\\', '\n', 1, 0x7F, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xFF, 0x80, 0};
  const size_t ns = sizeof sp / sizeof sp[0];
  size_t cases = 0, bad = 0;
  for (size_t len = 0; len <= 48; len++)
    for (size_t pos = 0; pos <= len; pos++)
      for (size_t k = 0; k < ns; k += (pos == len ? ns : 1)) {
        char *b = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++) {
          b[i] = (char)('a' + (i * 5 + k) % 26);
          if (i == pos) b[i] = (char)sp[k];
          if (k % 3 == 1 && i + 2 == pos) b[i] = '"';
          if (k == 5 && i == pos + 1) b[i] = (char)0xA9; /* a valid 2-byte sequence */
        }
        struct etw_jw x, c;
        x.cap = 6 * len + 3;
        x.buf = malloc(x.cap);
        x.len = 0;
        x.max = x.cap;
        x.err = 0;
        etw_jw_init(&c, 0);
        etw_jw_str(&x, b, len);
        etw_jw_str_scalar(&c, b, len);
        cases++;
        if (x.err || c.err || x.len != c.len || memcmp(x.buf, c.buf, c.len)) {
          if (bad++ < 3) fprintf(stderr, "str8 tail len %zu pos %zu byte %02x\n", len, pos, sp[k]);
        }
        free(x.buf);
        etw_jw_free(&c);
        free(b);
      }
  CHECK(cases > 5000);
  CHECK_EQ(bad, 0);
}

int main(void) {
  CHECK_STR(w1(f_str, "a\"b\\c\n\t\x01"), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  CHECK_STR(w1(f_str, "caf\xc3\xa9 \xff x"), "\"caf\xc3\xa9 \xef\xbf\xbd x\""); /* invalid byte → U+FFFD */
  CHECK_STR(w1(f_str, "\xed\xa0\x80"), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* encoded surrogate */
  int64_t mn = INT64_MIN, mx = INT64_MAX;
  uint64_t umx = UINT64_MAX;
  CHECK_STR(w1(f_i64, &mn), "-9223372036854775808");
  CHECK_STR(w1(f_i64, &mx), "9223372036854775807");
  CHECK_STR(w1(f_u64, &umx), "18446744073709551615");

  struct etw_jw w;
  etw_jw_init(&w, 4096);
  const unsigned char u16[] = {'A', 0, 0x3D, 0xD8, 0x00, 0xDE, 0x00, 0xDC, '"', 0, 0, 0, 'Z', 0};
  etw_jw_str16(&w, u16, 7); /* A, U+1F600, lone low surrogate, quote, then NUL stops */
  CHECK_STR(etw_jw_cstr(&w), "\"A\xf0\x9f\x98\x80\xef\xbf\xbd\\\"\"");
  str16_all();
  str16_tail();
  str16_dense();
  str8_tail();
  paths_all();
  etw_jw_truncate(&w, 0);
  unsigned char g[16], g2[16];
  CHECK_EQ(etw_parse_guid("{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}", g), 0);
  etw_jw_guid(&w, g);
  CHECK_STR(etw_jw_cstr(&w), "\"{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}\"");
  CHECK_EQ(etw_parse_guid("22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716", g2), 0);
  CHECK(!memcmp(g, g2, 16));
  CHECK(etw_parse_guid("{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e71}", g2) != 0);
  etw_jw_truncate(&w, 0);
  etw_jw_base64(&w, (const unsigned char *)"foob", 4);
  CHECK_STR(etw_jw_cstr(&w), "\"Zm9vYg==\"");
  base64_all();
  str_all();
  etw_jw_truncate(&w, 0);
  etw_jw_hexw(&w, 0x10, 16);
  etw_jw_ch(&w, ',');
  etw_jw_hex(&w, 0);
  CHECK_STR(etw_jw_cstr(&w), "\"0x0000000000000010\",\"0x0\"");
  etw_jw_free(&w);

  int64_t t0 = 0, t1 = -1, t2 = 1700000000123456789LL, t3 = INT64_MIN, t4 = INT64_MAX;
  CHECK_STR(w1(f_ns, &t0), "\"1970-01-01T00:00:00.0000000Z\"");
  CHECK_STR(w1(f_ns, &t1), "\"1969-12-31T23:59:59.9999999Z\""); /* floor, not truncation */
  CHECK_STR(w1(f_ns, &t2), "\"2023-11-14T22:13:20.1234567Z\"");
  CHECK_STR(w1(f_ns, &t3), "\"1677-09-21T00:12:43.1452241Z\"");
  CHECK_STR(w1(f_ns, &t4), "\"2262-04-11T23:47:16.8547758Z\"");
  uint64_t ft = 116444736000000000ull, ft1 = 1, ftbig = UINT64_MAX;
  CHECK_STR(w1(f_ft, &ft), "\"1970-01-01T00:00:00.0000000Z\"");
  CHECK_STR(w1(f_ft, &ft1), "\"1601-01-01T00:00:00.0000001Z\"");
  CHECK_STR(w1(f_ft, &ftbig), "null");

  /* the hard maximum: appends beyond it set err and change nothing; truncate clears it */
  etw_jw_init(&w, 16);
  etw_jw_lit(&w, "0123456789");
  etw_jw_lit(&w, "0123456789");
  CHECK(w.err == 1);
  CHECK_EQ(w.len, 10);
  etw_jw_truncate(&w, 0);
  CHECK(w.err == 0);
  etw_jw_lit(&w, "ok");
  CHECK_STR(etw_jw_cstr(&w), "ok");
  etw_jw_free(&w);
  T_DONE();
}
