/* jw.c — the hand-written JSON writer (see etwcore/jw.h). Hot path: keep it branch-light. */
#include "etwcore/jw.h"
#include "cc.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "simd.h"

#if SIMD_VEC
#define JW_SSE2 1 /* the block-at-a-time string paths (simd.h's kernels) */
#endif

#define JW_DEFAULT_MAX ((size_t)64 << 20)

void etw_jw_init(struct etw_jw *w, size_t max) {
  w->buf = NULL;
  w->len = w->cap = 0;
  w->max = max ? max : JW_DEFAULT_MAX;
  w->err = 0;
}

void etw_jw_free(struct etw_jw *w) {
  free(w->buf);
  w->buf = NULL;
  w->len = w->cap = 0;
  w->err = 0;
}

int etw_jw_grow(struct etw_jw *w, size_t extra) {
  if (w->err) return -1;
  size_t need = w->len + extra + 1;
  if (need > w->max + 1 || need < w->len) {
    w->err = 1;
    return -1;
  }
  size_t nc = w->cap ? w->cap : 256;
  while (nc < need) nc *= 2;
  if (nc > w->max + 1) nc = w->max + 1;
  char *nb = realloc(w->buf, nc);
  if (!nb) {
    w->err = 2;
    return -1;
  }
  w->buf = nb;
  w->cap = nc;
  return 0;
}

const char *etw_jw_cstr(struct etw_jw *w) {
  if (!w->buf) return "";
  w->buf[w->len] = 0; /* cap > len always holds after a successful reserve */
  return w->buf;
}

char *etw_jw_steal(struct etw_jw *w, size_t *len) {
  if (!w->buf && etw_jw_grow(w, 0)) return NULL;
  w->buf[w->len] = 0;
  char *b = w->buf;
  if (len) *len = w->len;
  w->buf = NULL;
  w->len = w->cap = 0;
  return b;
}

static const char hexd[] = "0123456789abcdef";

/* escape class: 0 = copy, 1 = needs escape (control, quote, backslash), 2 = non-ASCII */
static const unsigned char cls[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

/* Length of a valid UTF-8 sequence starting at s (n bytes available), or 0 if invalid. */
static size_t utf8_valid(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogates */
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;
    if (c == 0xF4 && s[1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}

#if ETW_GNUC
#define JW_STR_INLINE static inline __attribute__((always_inline))
#else
#define JW_STR_INLINE static inline
#endif

#ifdef JW_SSE2
/* the lowest set bit of @e (≠ 0) as a size_t */
JW_STR_INLINE size_t jw_low(size_t e) { return (size_t)(unsigned)etw_ctz64(e); }
/* UTF-16 unit @i of @s (x86: little-endian, one 16-bit load) */
static inline uint32_t jw_u16(const unsigned char *s, size_t i) {
  uint16_t u;
  memcpy(&u, s + 2 * i, 2);
  return u;
}
#endif
/* @simd: plain runs (0x20..0x7E but '"' and '\\') copied 16 bytes at a time (SSE2) */
JW_STR_INLINE void str_body(struct etw_jw *w, const char *str, size_t n, int simd) {
  const unsigned char *s = (const unsigned char *)str;
  /* worst case: every byte becomes \u00XX (6) or U+FFFD (3) */
  if (etw_jw_reserve(w, n * 6 + 2)) return;
  char *p = w->buf + w->len;
  *p++ = '"';
  size_t i = 0;
  (void)simd;
#ifdef JW_SSE2
  /* 4–15 bytes, all plain (file and PDB names, addresses): two overlapping loads of 8 (or 4)
   * bytes, the first and the last ones, and two stores */
  if (simd && n - 4 < 12) {
    uint64_t a, b;
    size_t h = n >= 8 ? 8 : 4;
    if (h == 8) {
      memcpy(&a, s, 8);
      memcpy(&b, s + n - 8, 8);
    } else {
      uint32_t a4, b4;
      memcpy(&a4, s, 4);
      memcpy(&b4, s + n - 4, 4);
      a = b = (uint64_t)a4 | (uint64_t)b4 << 32;
    }
    unsigned char ab[16];
    memcpy(ab, &a, 8);
    memcpy(ab + 8, &b, 8);
    if (!simd_nonplain16(ab, NULL)) {
      if (h == 8) {
        memcpy(p, &a, 8);
        memcpy(p + n - 8, &b, 8);
      } else {
        memcpy(p, &a, 4);
        memcpy(p + n - 4, (const char *)&a + 4, 4);
      }
      p += n;
      i = n;
    }
  }
#endif
  while (i < n) {
#ifdef JW_SSE2
    if (simd && n - i >= 16) { /* (the reservation holds the 16-byte store: ≥ 6 bytes per byte left) */
      unsigned m = simd_nonplain16(s + i, NULL);
      simd_copy16(p, s + i);
      if (!m) {
        p += 16;
        i += 16;
        continue;
      }
      size_t good = (size_t)(unsigned)etw_ctz32(m);
      p += good;
      i += good; /* s[i] is not plain: below */
      if (s[i] == '\\' || s[i] == '"') { /* (paths: escaped here, then the next block) */
        p[0] = '\\';
        p[1] = (char)s[i];
        p += 2;
        i++;
        continue;
      }
    }
#endif
    unsigned char c = s[i];
    unsigned k = cls[c];
    if (k == 0) {
      *p++ = (char)c;
      i++;
    } else if (k == 1) {
      *p++ = '\\';
      switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        default:
          *p++ = 'u';
          *p++ = '0';
          *p++ = '0';
          *p++ = hexd[c >> 4];
          *p++ = hexd[c & 15];
      }
      i++;
    } else {
      size_t l = utf8_valid(s + i, n - i);
      if (l) {
        memcpy(p, s + i, l);
        p += l;
        i += l;
      } else {
        *p++ = (char)0xEF;
        *p++ = (char)0xBF;
        *p++ = (char)0xBD;
        i++;
      }
    }
  }
  *p++ = '"';
  w->len = (size_t)(p - w->buf);
}

void etw_jw_str(struct etw_jw *w, const char *str, size_t n) {
#ifdef JW_SSE2
  str_body(w, str, n, 1);
#else
  str_body(w, str, n, 0);
#endif
}

void etw_jw_str_scalar(struct etw_jw *w, const char *str, size_t n) { str_body(w, str, n, 0); }

static char *put_utf8(char *p, uint32_t cp) {
  if (cp < 0x80) {
    *p++ = (char)cp;
  } else if (cp < 0x800) {
    *p++ = (char)(0xC0 | (cp >> 6));
    *p++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *p++ = (char)(0xE0 | (cp >> 12));
    *p++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *p++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *p++ = (char)(0xF0 | (cp >> 18));
    *p++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *p++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *p++ = (char)(0x80 | (cp & 0x3F));
  }
  return p;
}

/* UTF-16LE → quoted JSON string. Plain ASCII (0x20–0x7E except '"' and '\\') is converted 16
 * units at a time with SSE2 (when @simd; 8–15-unit strings and a string's last 3–15 units as one
 * block; the room holds 6 bytes per remaining unit, so the 16-byte store always fits); everything
 * else takes the scalar path: \" \\ \n \r \t, \u00XX for
 * other controls and 0x7F, UTF-8 for the rest, unpaired surrogates → U+FFFD. The first NUL unit
 * ends the string. Returns the units converted. */
#if ETW_GNUC
#define JW_INLINE static inline __attribute__((always_inline))
#else
#define JW_INLINE static inline
#endif
/* The string's text and the closing quote at @p (room for 6 bytes per unit + 1); *@conv = the
 * units converted. */
JW_INLINE char *str16_put(char *p, const unsigned char *s, size_t units, size_t *conv, int simd) {
  size_t i = 0;
  (void)simd;
#ifdef JW_SSE2
  if (simd && units - 8 < 8) {
    /* 8–15 units (short names, versions): the first 8 and the last 8 as one block (units 0–7
     * in bytes 0–7, units − 8 … units − 1 in bytes 8–15), both halves stored where they belong;
     * the plain units before the first other one taken (the rest below) */
    unsigned char x[16];
    unsigned m = ~simd_narrow8x2(x, s, s + 2 * units - 16, NULL) & 0xFFFFu;
    unsigned mu = (m & 0xFFu) | (m >> 8) << (units - 8); /* by unit: bits from units on 0 */
    memcpy(p, x, 8);
    memcpy(p + units - 8, x + 8, 8);
    i = (unsigned)etw_ctz32(~mu); /* ≤ units */
    p += i;
  }
#endif
  while (i < units) {
#ifdef JW_SSE2
    if (simd && units - i >= 16) {
      /* 16 units packed to bytes (units above 0xFF saturate to 0xFF or 0, both not plain);
       * plain = 0x20..0x7E (x + 0x60 below -33 as a signed byte) and not '"' or '\\' */
      unsigned c;
      unsigned m = simd_narrow16(p, s + 2 * i, &c);
      if (!m) {
        p += 16;
        i += 16;
        continue;
      }
      /* quotes and backslashes (paths) before the first other unit not plain (c) escaped in
       * the block: each one's backslash stored, then the block from it on one byte further
       * (from a copy; at most 15 + 16 + 16 bytes: the room holds 6 per unit left, ≥ 16 left) */
      unsigned e = (m ^ c) & (c ^ (c - 1)); /* (c = 0: all) */
      if (e) {
        size_t f = e;
        unsigned char t[32];
        memcpy(t, p, 16);
        memcpy(t + 16, p, 16);
        do {
          size_t j = jw_low(f);
          f &= f - 1;
          p[j] = '\\';
          memcpy(p + j + 1, t + j, 16);
          p++;
        } while (f);
      }
      if (!c) {
        p += 16;
        i += 16;
        continue;
      }
      size_t good = (size_t)(unsigned)etw_ctz32(c);
      p += good;
      i += good;
      uint32_t u = jw_u16(s, i);
      if (!u) break; /* the terminating NUL */
    } else if (simd && units >= 16 && units - i >= 3) {
      /* the last 3–15 units: the string's last 16 units as one block, the 16 - (units - i)
       * before i (done) shifted out through a copy; 16 bytes stored (room: 6 per unit left + 1) */
      unsigned sh = (unsigned)(16 - (units - i));
      unsigned char t[32];
      unsigned m = (~simd_narrow16(t, s + 2 * units - 32, NULL) & 0xFFFFu) >> sh; /* (bits from 16 - sh on: 0) */
      memcpy(t + 16, t, 16);
      memcpy(p, t + sh, 16);
      unsigned good = (unsigned)etw_ctz32(~m); /* ≤ units - i */
      p += good;
      i += good;
      if (i == units) break;
      uint32_t u = (uint32_t)s[2 * i] | ((uint32_t)s[2 * i + 1] << 8);
      if (!u) break; /* the terminating NUL */
      if (u == '\\' || u == '"') {
        p[0] = '\\';
        p[1] = (char)u;
        p += 2;
        i++;
        continue;
      }
    }
#endif
    uint32_t u = (uint32_t)s[2 * i] | ((uint32_t)s[2 * i + 1] << 8);
    if (u < 0x80) {
      if (cls[u] == 0) {
        *p++ = (char)u;
        i++;
        continue;
      }
      if (u == 0) break;
      *p++ = '\\';
      switch (u) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default:
          *p++ = 'u';
          *p++ = '0';
          *p++ = '0';
          *p++ = hexd[u >> 4];
          *p++ = hexd[u & 15];
      }
      i++;
      continue;
    }
    uint32_t cp = u;
    if (u >= 0xD800 && u <= 0xDBFF) {
      cp = 0xFFFD;
      if (i + 1 < units) {
        uint32_t l = (uint32_t)s[2 * i + 2] | ((uint32_t)s[2 * i + 3] << 8);
        if (l >= 0xDC00 && l <= 0xDFFF) {
          cp = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
          i++;
        }
      }
    } else if (u >= 0xDC00 && u <= 0xDFFF) {
      cp = 0xFFFD;
    }
    p = put_utf8(p, cp);
    i++;
  }
  *p++ = '"';
  *conv = i;
  return p;
}

JW_INLINE size_t str16_body(struct etw_jw *w, const unsigned char *s, size_t units, int simd) {
  if (etw_jw_reserve(w, units * 6 + 2)) { /* nothing written (w->err is set): just the length */
    size_t i = 0;
    while (i < units && (s[2 * i] | s[2 * i + 1])) i++;
    return i;
  }
  char *p = w->buf + w->len;
  *p++ = '"';
  size_t i;
  p = str16_put(p, s, units, &i, simd);
  w->len = (size_t)(p - w->buf);
  return i;
}

char *etw_jw_put_str16(char *p, const unsigned char *s, size_t units, size_t *conv) {
#ifdef JW_SSE2
  return str16_put(p, s, units, conv, 1);
#else
  return str16_put(p, s, units, conv, 0);
#endif
}

size_t etw_jw_str16n(struct etw_jw *w, const unsigned char *s, size_t units) {
#ifdef JW_SSE2
  return str16_body(w, s, units, 1);
#else
  return str16_body(w, s, units, 0);
#endif
}

size_t etw_jw_str16n_scalar(struct etw_jw *w, const unsigned char *s, size_t units) {
  return str16_body(w, s, units, 0);
}

void etw_jw_str16(struct etw_jw *w, const unsigned char *s, size_t units) { (void)etw_jw_str16n(w, s, units); }

void etw_jw_u64(struct etw_jw *w, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  if (etw_jw_reserve(w, (size_t)n)) return;
  char *p = w->buf + w->len;
  while (n) *p++ = tmp[--n];
  w->len = (size_t)(p - w->buf);
}

void etw_jw_i64(struct etw_jw *w, int64_t v) {
  if (v < 0) {
    etw_jw_ch(w, '-');
    etw_jw_u64(w, (uint64_t)0 - (uint64_t)v);
  } else {
    etw_jw_u64(w, (uint64_t)v);
  }
}

void etw_jw_hexw(struct etw_jw *w, uint64_t v, int digits) {
  if (digits < 1) digits = 1;
  if (digits > 16) digits = 16;
  if (etw_jw_reserve(w, (size_t)digits + 4)) return;
  char *p = w->buf + w->len;
  *p++ = '"';
  *p++ = '0';
  *p++ = 'x';
  for (int i = digits - 1; i >= 0; i--) *p++ = hexd[(v >> (4 * i)) & 15];
  *p++ = '"';
  w->len = (size_t)(p - w->buf);
}

void etw_jw_hex(struct etw_jw *w, uint64_t v) {
  int d = 1;
  while (d < 16 && (v >> (4 * d))) d++;
  etw_jw_hexw(w, v, d);
}

void etw_jw_double(struct etw_jw *w, double v) {
  char tmp[40];
  if (isnan(v)) {
    etw_jw_lit(w, "\"NaN\"");
    return;
  }
  if (isinf(v)) {
    etw_jw_lit(w, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v) break;
  }
  etw_jw_raw(w, tmp, (size_t)n);
}

void etw_format_guid(char out[39], const unsigned char g[16]) {
  static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  char *p = out;
  *p++ = '{';
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    unsigned char b = g[order[i]];
    *p++ = hexd[b >> 4];
    *p++ = hexd[b & 15];
  }
  *p++ = '}';
  *p = 0;
}

void etw_jw_guid(struct etw_jw *w, const unsigned char g[16]) {
  char t[39];
  etw_format_guid(t, g);
  if (etw_jw_reserve(w, 40)) return;
  w->buf[w->len++] = '"';
  memcpy(w->buf + w->len, t, 38);
  w->len += 38;
  w->buf[w->len++] = '"';
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int etw_parse_guid(const char *s, unsigned char g[16]) {
  static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  int brace = 0;
  if (*s == '{') {
    brace = 1;
    s++;
  }
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      if (*s != '-') return -1;
      s++;
    }
    int h = hexval((unsigned char)s[0]), l = h < 0 ? -1 : hexval((unsigned char)s[1]);
    if (h < 0 || l < 0) return -1;
    g[order[i]] = (unsigned char)(h * 16 + l);
    s += 2;
  }
  if (brace) {
    if (*s != '}') return -1;
    s++;
  }
  return *s ? -1 : 0;
}

/* days since 1970-01-01 -> civil date (Howard Hinnant's algorithm, public domain facts) */
static void civil(int64_t days, int *y, unsigned *m, unsigned *d) {
  days += 719468;
  int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  unsigned doe = (unsigned)(days - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t yy = (int64_t)yoe + era * 400;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int)(yy + (*m <= 2));
}

static void put_n(char **pp, unsigned v, int digits) {
  char *p = *pp;
  for (int i = digits - 1; i >= 0; i--) {
    p[i] = (char)('0' + v % 10);
    v /= 10;
  }
  *pp = p + digits;
}

/* ticks: 100 ns units since 1970-01-01 (may be negative) */
static void put_time(struct etw_jw *w, int64_t ticks) {
  int64_t secs = ticks / 10000000;
  if (ticks % 10000000 < 0) secs--;
  unsigned frac = (unsigned)(ticks - secs * 10000000);
  int64_t days = secs / 86400;
  if (secs % 86400 < 0) days--;
  unsigned sod = (unsigned)(secs - days * 86400);
  int y;
  unsigned mo, d;
  civil(days, &y, &mo, &d);
  if (y < 0 || y > 9999) {
    etw_jw_lit(w, "null");
    return;
  }
  if (etw_jw_reserve(w, 32)) return;
  char *p = w->buf + w->len;
  *p++ = '"';
  put_n(&p, (unsigned)y, 4);
  *p++ = '-';
  put_n(&p, mo, 2);
  *p++ = '-';
  put_n(&p, d, 2);
  *p++ = 'T';
  put_n(&p, sod / 3600, 2);
  *p++ = ':';
  put_n(&p, sod / 60 % 60, 2);
  *p++ = ':';
  put_n(&p, sod % 60, 2);
  *p++ = '.';
  put_n(&p, frac, 7);
  *p++ = 'Z';
  *p++ = '"';
  w->len = (size_t)(p - w->buf);
}

#define FILETIME_UNIX_DIFF 116444736000000000LL

void etw_jw_filetime(struct etw_jw *w, uint64_t ft) {
  if (ft > (uint64_t)INT64_MAX) {
    etw_jw_lit(w, "null");
    return;
  }
  put_time(w, (int64_t)ft - FILETIME_UNIX_DIFF);
}

void etw_jw_unix_ns(struct etw_jw *w, int64_t ns) {
  int64_t t = ns / 100; /* floor division, no overflow at INT64_MIN */
  if (ns % 100 < 0) t--;
  put_time(w, t);
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
#if ETW_LE
/* Two base64 characters per 12 bits (filled once: etw_jw_base64's table). */
static uint16_t B64P[4096];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;
static void b64_fill(void) {
  for (unsigned v = 0; v < 4096; v++) {
    unsigned char c[2] = {(unsigned char)b64[v >> 6], (unsigned char)b64[v & 63]};
    memcpy(&B64P[v], c, 2);
  }
}
#endif

void etw_jw_base64(struct etw_jw *w, const unsigned char *s, size_t n) {
  if (etw_jw_reserve(w, (n + 2) / 3 * 4 + 2)) return;
  char *p = w->buf + w->len;
  *p++ = '"';
  size_t i = 0;
#if ETW_LE
  if (n >= 8) {
    /* 6 bytes to 8 characters per step: one 8-byte read (2 bytes past the group: i + 8 <= n),
     * four 12-bit table entries, one 8-byte store (within the reservation: 8 ≤ the 8 + 2 left) */
    pthread_once(&b64_once, b64_fill);
    for (; i + 8 <= n; i += 6) {
      uint64_t v;
      memcpy(&v, s + i, 8);
      v = etw_bswap64(v) >> 16; /* the 6 bytes, the first one highest */
      uint64_t o = (uint64_t)B64P[v >> 36] | (uint64_t)B64P[(v >> 24) & 4095] << 16 |
                   (uint64_t)B64P[(v >> 12) & 4095] << 32 | (uint64_t)B64P[v & 4095] << 48;
      memcpy(p, &o, 8);
      p += 8;
    }
  }
#endif
  for (; i + 3 <= n; i += 3) {
    uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
    *p++ = b64[v >> 18];
    *p++ = b64[(v >> 12) & 63];
    *p++ = b64[(v >> 6) & 63];
    *p++ = b64[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)s[i] << 16;
    *p++ = b64[v >> 18];
    *p++ = b64[(v >> 12) & 63];
    *p++ = '=';
    *p++ = '=';
  } else if (n - i == 2) {
    uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
    *p++ = b64[v >> 18];
    *p++ = b64[(v >> 12) & 63];
    *p++ = b64[(v >> 6) & 63];
    *p++ = '=';
  }
  *p++ = '"';
  w->len = (size_t)(p - w->buf);
}

