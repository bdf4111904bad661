/* dec_value.c — renders one field value of a TDH InType/OutType pair as JSON.
 *
 * Shared by TraceLogging, manifest, EventSource and EventInfo decoding. Every read is bounded
 * by the bytes available; a value that does not fit returns -1 and the caller reports the event
 * as undecoded. Rendering follows what Windows' XML rendering shows where JSON allows:
 * integers as numbers (64-bit exact), Hex/pointers as "0x…" strings, GUIDs with braces,
 * FILETIME/SYSTEMTIME as ISO 8601 UTC, SIDs as "S-1-…", binary as upper-case hex text; an array
 * of characters (dec_char_array, called by the array loops) as one string.
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"


static void w_hexbytes(struct etw_jw *w, const unsigned char *p, size_t n) {
  static const char hx[] = "0123456789ABCDEF";
  if (etw_jw_reserve(w, n * 2 + 2)) return;
  char *o = w->buf + w->len;
  *o++ = '"';
  for (size_t i = 0; i < n; i++) {
    *o++ = hx[p[i] >> 4];
    *o++ = hx[p[i] & 15];
  }
  *o++ = '"';
  w->len = (size_t)(o - w->buf);
}

static void w_sid(struct etw_jw *w, const unsigned char *p, unsigned subs) {
  enum { CAP = 16 + 15 * 11 }; /* text longer than CAP - 1 is cut there */
  char buf[CAP + 32];
  uint64_t auth = 0;
  for (int i = 2; i < 8; i++) auth = auth << 8 | p[i];
  buf[0] = 'S';
  buf[1] = '-';
  int k = 2 + (int)(dec_put_u64(buf + 2, p[0]) - (buf + 2));
  buf[k++] = '-';
  k = (int)(dec_put_u64(buf + k, auth) - buf);
  for (unsigned i = 0; i < subs && k < CAP; i++) {
    buf[k++] = '-';
    k = (int)(dec_put_u64(buf + k, d_rd32(p + 8 + 4 * i)) - buf);
  }
  etw_jw_str(w, buf, k < CAP ? (size_t)k : CAP - 1);
}

/* "00" … "ff" as 16-bit little-endian words: the hex digits of a byte, the high one first. */
#if ETW_LE
#define HX4(n) HX(n), HX(n + 1), HX(n + 2), HX(n + 3)
#define HX16(n) HX4(n), HX4(n + 4), HX4(n + 8), HX4(n + 12)
#define HEXC(n) ((n) < 10 ? '0' + (n) : 'a' + (n) - 10)
#undef HX
#define HX(n) (uint16_t)(HEXC((n) >> 4) | HEXC((n) & 15) << 8)
static const uint16_t HEX2[256] = {HX16(0),   HX16(16),  HX16(32),  HX16(48),  HX16(64),  HX16(80),
                                   HX16(96),  HX16(112), HX16(128), HX16(144), HX16(160), HX16(176),
                                   HX16(192), HX16(208), HX16(224), HX16(240)};
#undef HX16
#undef HX4
#undef HX
#undef HEXC
#endif

/* RFC 5952 text of an IPv6 address (longest run of ≥ 2 zero groups as "::", the first of equal
 * ones) at @buf, NUL-terminated; its length (≤ 39). @buf: 40 bytes (a group's digits are written
 * as 4 bytes and the length advanced by their count: never past the NUL's byte). */
static int fmt_ipv6(char *buf, const unsigned char *p) {
  unsigned g[8], zm = 0; /* zm: bit i set when group i is 0 */
  for (int i = 0; i < 8; i++) {
    g[i] = (unsigned)(p[2 * i] << 8 | p[2 * i + 1]);
    zm |= (unsigned)(g[i] == 0) << i;
  }
  int best = 8, bl = 0; /* (best 8: no run; never equals a group index) */
  if (zm & zm >> 1) { /* two adjacent zero groups at least */
    for (int i = 0; i < 8;) {
      if (!(zm >> i & 1)) {
        i++;
        continue;
      }
      int j = i;
      while (j < 8 && (zm >> j & 1)) j++;
      if (j - i > bl) {
        best = i;
        bl = j - i;
      }
      i = j;
    }
  }
  int k = 0;
  for (int i = 0; i < 8; i++) {
    if (i == best) {
      buf[k++] = ':';
      buf[k++] = ':';
      i += bl - 1;
      continue;
    }
    if (i && i != best + bl) buf[k++] = ':';
    unsigned v = g[i];
    unsigned nd = 1u + (v >= 0x10) + (v >= 0x100) + (v >= 0x1000);
#if ETW_LE
    uint32_t four = (uint32_t)HEX2[v >> 8] | (uint32_t)HEX2[v & 255] << 16; /* 4 digits, the first first */
    four >>= 8 * (4 - nd);
    memcpy(buf + k, &four, 4);
#else
    for (int d = (int)nd - 1; d >= 0; d--, v >>= 4) buf[k + d] = "0123456789abcdef"[v & 15];
#endif
    k += (int)nd;
  }
  buf[k] = 0;
  return k;
}

int dec_fmt_ipv6(char *buf, const unsigned char *p) { return fmt_ipv6(buf, p); }

/* "%u" of a small number at buf; returns the length. */
static int put_small(char *buf, unsigned v) {
  char *e = dec_put_u64(buf, v);
  return (int)(e - buf);
}

static void w_ipv6(struct etw_jw *w, const unsigned char *p) {
  char buf[48];
  int k = fmt_ipv6(buf, p);
  etw_jw_str(w, buf, (size_t)k);
}

/* SOCKADDR_IN / SOCKADDR_IN6 as "a.b.c.d:port" / "[v6]:port"; 0 when not one of those. */
static int w_sockaddr(struct etw_jw *w, const unsigned char *p, size_t n) {
  if (n < 8) return 0;
  unsigned fam = d_rd16(p), port = (unsigned)(p[2] << 8 | p[3]);
  char buf[80];
  int k;
  if (fam == 2) {
    k = put_small(buf, p[4]);
    buf[k++] = '.';
    k += put_small(buf + k, p[5]);
    buf[k++] = '.';
    k += put_small(buf + k, p[6]);
    buf[k++] = '.';
    k += put_small(buf + k, p[7]);
    buf[k++] = ':';
    k += put_small(buf + k, port);
  } else if (fam == 23 && n >= 24) {
    buf[0] = '[';
    k = 1 + fmt_ipv6(buf + 1, p + 8); /* (79 bytes of room) */
    buf[k++] = ']';
    buf[k++] = ':';
    k += put_small(buf + k, port);
  } else {
    return 0;
  }
  etw_jw_str(w, buf, (size_t)k);
  return 1;
}

static void w_ipv4(struct etw_jw *w, uint32_t v) {
  char buf[20];
  int k = put_small(buf, v & 255);
  buf[k++] = '.';
  k += put_small(buf + k, (v >> 8) & 255);
  buf[k++] = '.';
  k += put_small(buf + k, (v >> 16) & 255);
  buf[k++] = '.';
  k += put_small(buf + k, v >> 24);
  etw_jw_str(w, buf, (size_t)k);
}

static void w_systemtime(struct etw_jw *w, const unsigned char *p) {
  char buf[40];
  int k = snprintf(buf, sizeof buf, "%04u-%02u-%02uT%02u:%02u:%02u.%03u0000Z", d_rd16(p),
                   d_rd16(p + 2) % 100, d_rd16(p + 6) % 100, d_rd16(p + 8) % 100,
                   d_rd16(p + 10) % 100, d_rd16(p + 12) % 100, d_rd16(p + 14) % 1000);
  etw_jw_str(w, buf, (size_t)k);
}

static void w_char(struct etw_jw *w, uint32_t c) {
  unsigned char u[2] = {(unsigned char)c, (unsigned char)(c >> 8)};
  if (c == 0) {
    etw_jw_lit(w, "\"\"");
    return;
  }
  etw_jw_str16(w, u, 1);
}

static void w_uint(struct etw_jw *w, uint64_t v, unsigned out, int width) {
  switch (out) {
  case 3: etw_jw_bool(w, v != 0); return;                /* Boolean */
  case 4: case 13: case 14: case 15:                     /* Hex, Win32Error, NTStatus, HResult */
  case 0x25:
    dec_hex(w, v);
    return;
  case 8: if (width == 4) { w_ipv4(w, (uint32_t)v); return; } break;
  case 17: /* Signed */
    dec_i64(w, width == 1 ? (int8_t)v : width == 2 ? (int16_t)v : width == 4 ? (int32_t)v : (int64_t)v);
    return;
  case 7: if (width == 2) { dec_u64(w, (uint64_t)((v >> 8) | ((v & 255) << 8))); return; } break;
  default: break;
  }
  dec_u64(w, v);
}

static void w_int(struct etw_jw *w, int64_t v, uint64_t raw, unsigned out) {
  if (out == 4 || (out >= 13 && out <= 15)) {
    dec_hex(w, raw);
    return;
  }
  if (out == 3) {
    etw_jw_bool(w, v != 0);
    return;
  }
  if (out == 18) { /* Unsigned */
    dec_u64(w, raw);
    return;
  }
  dec_i64(w, v);
}

/* The string types (@in 1, 2, 22, 23, 300–305): as dec_value. */
static long v_string(struct etw_jw *w, unsigned in, const unsigned char *p, size_t n, long len, int mode) {
  switch (in) {
  case 1: { /* UTF-16 string */
    if (len >= 0) {
      if ((size_t)len > n / 2) return -1;
      dec_str16(w, p, (size_t)len);
      return len * 2;
    }
    /* one pass: convert up to the NUL unit */
    size_t mark = w->len, units = n / 2;
    size_t k = dec_str16(w, p, units);
    if (k < units) return (long)k * 2 + 2;
    if (mode == DV_MANIFEST) return (long)n; /* unterminated at the end: take what is there */
    if (!w->err) etw_jw_truncate(w, mark);  /* (with w->err set nothing was written) */
    return -1;
  }
  case 2: { /* 8-bit string */
    if (len >= 0) {
      if ((size_t)len > n) return -1;
      size_t k = 0;
      while (k < (size_t)len && p[k]) k++;
      etw_jw_str(w, (const char *)p, k);
      return len;
    }
    const unsigned char *z = memchr(p, 0, n);
    if (!z) {
      if (mode == DV_MANIFEST) {
        etw_jw_str(w, (const char *)p, n);
        return (long)n;
      }
      return -1;
    }
    etw_jw_str(w, (const char *)p, (size_t)(z - p));
    return (long)(z - p) + 1;
  }
  case 22: case 300: case 302: { /* counted UTF-16 (byte count) */
    if (n < 2) return -1;
    size_t k = in == 302 ? (size_t)(p[0] << 8 | p[1]) : d_rd16(p);
    if (k > n - 2) return -1;
    dec_str16(w, p + 2, k / 2);
    return 2 + (long)k;
  }
  case 23: case 301: case 303: {
    if (n < 2) return -1;
    size_t k = in == 303 ? (size_t)(p[0] << 8 | p[1]) : d_rd16(p);
    if (k > n - 2) return -1;
    etw_jw_str(w, (const char *)p + 2, k);
    return 2 + (long)k;
  }
  case 304: /* non-NUL-terminated UTF-16: the rest */
    dec_str16(w, p, n / 2);
    return (long)n;
  case 305:
    etw_jw_str(w, (const char *)p, n);
    return (long)n;
  default:
    return -1;
  }
}

/* Binary, SID and hexdump types (@in 14, 25, 19, 310, 309): as dec_value. */
static long v_bytes(struct etw_jw *w, unsigned in, unsigned out, const unsigned char *p, size_t n, long len, int mode) {
  switch (in) {
  case 14: case 25: { /* binary */
    size_t k, hdr = 0;
    if (len >= 0) {
      k = (size_t)len;
    } else if (mode == DV_TL || in == 25) {
      if (n < 2) return -1;
      k = d_rd16(p);
      hdr = 2;
    } else {
      k = n; /* manifest binary without length: the rest */
    }
    if (k > n - hdr) return -1;
    if (out == 9 && k == 16) w_ipv6(w, p + hdr);
    else if (out == 10 && w_sockaddr(w, p + hdr, k)) {}
    else w_hexbytes(w, p + hdr, k);
    return (long)(hdr + k);
  }
  case 19: case 310: { /* SID */
    if (n < 8) return -1;
    unsigned subs = p[1];
    if (subs > 15 || 8 + 4 * (size_t)subs > n) return -1;
    w_sid(w, p, subs);
    return 8 + 4 * (long)subs;
  }
  case 309: { /* hexdump: u32 length + bytes */
    if (n < 4) return -1;
    size_t k = d_rd32(p);
    if (k > n - 4) return -1;
    w_hexbytes(w, p + 4, k);
    return 4 + (long)k;
  }
  default:
    return -1;
  }
}

int dec_char_width(unsigned in, unsigned out) {
  if (in == 306) return 2; /* UnicodeChar */
  if (in == 307) return 1; /* AnsiChar */
  if (out != 2) return 0;
  return in == 6 ? 2 : in == 3 || in == 4 ? 1 : 0;
}

void dec_char_length(struct dec_field *f) {
  if (f->is_array || (f->len < 0 && f->len_ref < 0) || !dec_char_width(f->in, f->out)) return;
  f->is_array = 1;
  f->count_ref = f->len_ref;
  f->count = f->len_ref >= 0 ? 1 : f->len;
  f->len = -1;
  f->len_ref = -1;
}

long dec_char_array(struct etw_jw *w, int wd, const unsigned char *p, size_t n, size_t count) {
  if (wd != 1 && wd != 2) return -1;
  if (count > n / (size_t)wd) return -1;
  size_t k = count; /* without the trailing NULs */
  if (wd == 1) {
    while (k && !p[k - 1]) k--;
    etw_jw_str(w, (const char *)p, k); /* (a NUL inside: \u0000) */
    return (long)count;
  }
  while (k && !(p[2 * k - 2] | p[2 * k - 1])) k--;
  if (etw_jw_reserve(w, k * 6 + 2)) return (long)count * 2; /* (w->err set: nothing written) */
  /* the UTF-16 converter stops at a NUL unit: each one becomes \u0000 in place of the closing
   * quote it wrote, and it goes on after it (≤ 6 bytes per unit, the reservation's rate) */
  char *o = w->buf + w->len;
  *o++ = '"';
  for (size_t i = 0;;) {
    size_t got;
    o = etw_jw_put_str16(o, p + 2 * i, k - i, &got);
    i += got;
    if (i >= k) break;
    memcpy(o - 1, "\\u0000", 6);
    o += 5;
    i++;
  }
  w->len = (size_t)(o - w->buf);
  return (long)count * 2;
}

long dec_value(struct etw_jw *w, unsigned in, unsigned out, const unsigned char *p, size_t n,
               long len, int ptr_size, int mode, uint64_t *ival) {
  uint64_t v;
  if (ival) *ival = 0;
  switch (in) {
  case 0:
    etw_jw_lit(w, "null");
    return 0;
  case 1: case 2: case 22: case 23: case 300: case 301: case 302: case 303: case 304: case 305:
    return v_string(w, in, p, n, len, mode);
  case 3:
    if (n < 1) return -1;
    if (ival) *ival = (uint64_t)(int64_t)(int8_t)p[0];
    if (out == 2) w_char(w, p[0]); else w_int(w, (int8_t)p[0], p[0], out);
    return 1;
  case 4:
    if (n < 1) return -1;
    if (ival) *ival = p[0];
    if (out == 2) w_char(w, p[0]); else w_uint(w, p[0], out, 1);
    return 1;
  case 5:
    if (n < 2) return -1;
    if (ival) *ival = (uint64_t)(int64_t)(int16_t)d_rd16(p);
    w_int(w, (int16_t)d_rd16(p), d_rd16(p), out);
    return 2;
  case 6:
    if (n < 2) return -1;
    if (ival) *ival = d_rd16(p);
    if (out == 2) w_char(w, d_rd16(p)); else w_uint(w, d_rd16(p), out, 2);
    return 2;
  case 7:
    if (n < 4) return -1;
    if (ival) *ival = (uint64_t)(int64_t)(int32_t)d_rd32(p);
    w_int(w, (int32_t)d_rd32(p), d_rd32(p), out);
    return 4;
  case 8:
    if (n < 4) return -1;
    if (ival) *ival = d_rd32(p);
    w_uint(w, d_rd32(p), out, 4);
    return 4;
  case 9:
    if (n < 8) return -1;
    if (ival) *ival = d_rd64(p);
    if (out == 16 || out == 0x21 || out == 0x26) etw_jw_filetime(w, d_rd64(p));
    else w_int(w, (int64_t)d_rd64(p), d_rd64(p), out);
    return 8;
  case 10:
    if (n < 8) return -1;
    if (ival) *ival = d_rd64(p);
    if (out == 16 || out == 0x21 || out == 0x26) etw_jw_filetime(w, d_rd64(p));
    else w_uint(w, d_rd64(p), out, 8);
    return 8;
  case 11: {
    if (n < 4) return -1;
    uint32_t b = d_rd32(p);
    float f;
    memcpy(&f, &b, 4);
    etw_jw_double(w, (double)f);
    return 4;
  }
  case 12: {
    if (n < 8) return -1;
    uint64_t b = d_rd64(p);
    double f;
    memcpy(&f, &b, 8);
    etw_jw_double(w, f);
    return 8;
  }
  case 13:
    if (n < 4) return -1;
    if (ival) *ival = d_rd32(p);
    etw_jw_bool(w, d_rd32(p) != 0);
    return 4;
  case 14: case 25: case 19: case 310: case 309:
    return v_bytes(w, in, out, p, n, len, mode);
  case 15:
    if (n < 16) return -1;
    etw_jw_guid(w, p);
    return 16;
  case 16: case 308: /* pointer / size_t */
    if ((size_t)ptr_size > n) return -1;
    v = ptr_size == 4 ? d_rd32(p) : d_rd64(p);
    if (ival) *ival = v;
    if (in == 308 && out != 4) dec_u64(w, v); else dec_hex(w, v);
    return ptr_size;
  case 17:
    if (n < 8) return -1;
    etw_jw_filetime(w, d_rd64(p));
    return 8;
  case 18:
    if (n < 16) return -1;
    w_systemtime(w, p);
    return 16;
  case 20:
    if (n < 4) return -1;
    if (ival) *ival = d_rd32(p);
    dec_hex(w, d_rd32(p));
    return 4;
  case 21:
    if (n < 8) return -1;
    if (ival) *ival = d_rd64(p);
    dec_hex(w, d_rd64(p));
    return 8;
  case 306:
    if (n < 2) return -1;
    w_char(w, d_rd16(p));
    return 2;
  case 307:
    if (n < 1) return -1;
    w_char(w, p[0]);
    return 1;
  default:
    return -1;
  }
}
