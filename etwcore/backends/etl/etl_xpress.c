/* etl_xpress.c — XPRESS decompressors for compressed ETL buffers (MS-XCA §2.1–2.4).
 *
 * Written from the prose description of the format (docs/etl.md, etl-format.md §3.3). Both
 * functions are bounded by their input and output sizes and never read or write outside them.
 */
#include <stdint.h>
#include <string.h>

#include "etwcore/etl.h"

/* Copy a match of @len bytes at distance @off ending no later than out + n_out (room = bytes
 * left from d). Overlapping copies repeat the pattern byte by byte (LZ77 semantics). */
static inline void copy_match(unsigned char *d, size_t off, size_t len, size_t room) {
  const unsigned char *s = d - off;
  if (off >= 16 && room >= len + 16) {
    /* 16-byte steps: each reads bytes written at least 16 before (overlap-safe) */
    memcpy(d, s, 16);
    for (size_t i = 16; i < len; i += 16) memcpy(d + i, s + i, 16);
  } else if (off >= 8 && room >= len + 8) {
    for (size_t i = 0; i < len; i += 8) memcpy(d + i, s + i, 8);
  } else if (off >= len) {
    memcpy(d, s, len);
  } else {
    for (size_t i = 0; i < len; i++) d[i] = s[i];
  }
}

static inline uint32_t rd32le(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t rd16le(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
#else
  return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

/* Input bytes one flag word can consume at most: 4 (flags) + 32 items × 10 (token, nibble,
 * byte, word, dword), + 32 for the fixed-size literal copy. */
#define XP_FAST_MARGIN 360
/* Output room kept at the start of every fast flag word: 31 items of ≤ 10 bytes plus a 32-byte
 * literal store (a long match goes the fast way only when this much room is left after it). */
#define XP_OUT_MARGIN 512

/* Copy a match of @len bytes at distance @off (1 ≤ off) with ≥ len + 32 bytes of room: may
 * write up to 31 bytes past the match (they are rewritten later or lie past the output). */
static inline void copy_match_fast(unsigned char *d, size_t off, size_t len) {
  const unsigned char *s = d - off;
  if (off >= 16) {
    memcpy(d, s, 16); /* 16-byte steps: each reads bytes written at least 16 before */
    for (size_t i = 16; i < len; i += 32) { /* two per turn: ≤ 31 bytes past, within the room */
      memcpy(d + i, s + i, 16);
      memcpy(d + i + 16, s + i + 16, 16);
    }
  } else if (off >= 8) {
    memcpy(d, s, 8);
    for (size_t i = 8; i < len; i += 8) memcpy(d + i, s + i, 8);
  } else {
    /* a pattern of period off: its first 8 bytes one by one, then 8-byte copies from `step`
     * back (the smallest multiple of off that is ≥ 8, so each copy reads finished bytes) */
    static const unsigned char STEP[8] = {8, 8, 8, 9, 8, 10, 12, 14};
    for (size_t i = 0; i < 8; i++) d[i] = s[i];
    size_t step = STEP[off];
    for (size_t i = 8; i < len; i += 8) memcpy(d + i, d + i - step, 8);
  }
}

#if defined(__GNUC__)
#define XP_INLINE static inline __attribute__((always_inline))
#else
#define XP_INLINE static inline
#endif

struct xp {
  const unsigned char *in;
  unsigned char *out;
  size_t n_out, ip, op, half;
  uint64_t f0; /* the flags of the item handed back (see xp_word) */
};

/* One flag word on the fast path (see below). @far: op ≥ 8192 at the start, so no match can
 * reach before the output (a 2-byte token's distance is at most 8192). Returns 0 when the word
 * is done, -1 on malformed input, 1 when a long match would come within XP_OUT_MARGIN of the
 * output end: that item is not consumed and x->f0 holds its flags for the checked loop. */
XP_INLINE int xp_word(struct xp *x, int far) {
  const unsigned char *in = x->in;
  unsigned char *out = x->out;
  size_t ip = x->ip, op = x->op, half = x->half;
  /* the flags in the top 32 bits (the current item first), then a sentinel 1: the word is
   * done when only the sentinel is left at the top */
  uint64_t f = (uint64_t)rd32le(in + ip) << 32 | 0x80000000u;
  ip += 4;
  for (;;) {
    if (!(f >> 63)) { /* a run of literals up to the next match or the sentinel */
      unsigned run = (unsigned)__builtin_clzll(f);
      memcpy(out + op, in + ip, 16);
      memcpy(out + op + 16, in + ip + 16, 16);
      op += run;
      ip += run;
      f <<= run;
    }
    if (f == (uint64_t)1 << 63) break;
    uint64_t f0 = f; /* to hand the item back to the checked loop */
    f <<= 1;
    uint32_t tok = rd16le(in + ip);
    size_t ip0 = ip, half0 = half;
    ip += 2;
    size_t off = (tok >> 3) + 1;
    size_t len = tok & 7;
    if (!far && off > op) return -1;
    if (len != 7) {
      if (off >= 16) {
        memcpy(out + op, out + op - off, 16);
      } else {
        copy_match_fast(out + op, off, len + 3);
      }
      op += len + 3;
      continue;
    }
    uint32_t nib;
    if (half == (size_t)-1) {
      half = ip++;
      nib = in[half] & 15;
    } else {
      nib = in[half] >> 4;
      half = (size_t)-1;
    }
    len = 7 + nib;
    if (nib == 15) {
      uint32_t b = in[ip++];
      if (b == 255) {
        uint32_t w = rd16le(in + ip);
        ip += 2;
        if (w == 0) {
          w = rd32le(in + ip);
          ip += 4;
        }
        if (w < 15 + 7) return -1;
        len = w;
      } else {
        len = 7 + 15 + b;
      }
    }
    len += 3;
    if (x->n_out - op < len + XP_OUT_MARGIN) { /* near the output end */
      x->ip = ip0;
      x->half = half0;
      x->op = op;
      x->f0 = f0;
      return 1;
    }
    copy_match_fast(out + op, off, len);
    op += len;
  }
  x->ip = ip;
  x->op = op;
  x->half = half;
  return 0;
}

long etw_xpress_decompress(const unsigned char *in, size_t n_in, unsigned char *out, size_t n_out) {
  uint32_t flags = 0;
  int nflags = 0;
  /* Fast path: whole flag words while the input holds a margin for any 32 items and the output
   * a margin of XP_OUT_MARGIN, so no bound is checked per item (only a long match's length). */
  struct xp x = {in, out, n_out, 0, 0, (size_t)-1, 0};
  while (n_in - x.ip >= XP_FAST_MARGIN && n_out - x.op >= XP_OUT_MARGIN) {
    int rc = x.op >= 8192 ? xp_word(&x, 1) : xp_word(&x, 0);
    if (rc < 0) return -1;
    if (rc > 0) {
      /* this item and the rest of the word go the checked way; the sentinel is the lowest
       * set bit, at 31 + the items already done */
      nflags = 63 - __builtin_ctzll(x.f0);
      flags = (uint32_t)(x.f0 >> 32) >> (32 - nflags);
      break;
    }
  }
  size_t ip = x.ip, op = x.op, half = x.half;
  while (op < n_out) {
    if (nflags == 0) {
      if (n_in - ip < 4) break; /* input exhausted */
      flags = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8 | (uint32_t)in[ip + 2] << 16 |
              (uint32_t)in[ip + 3] << 24;
      ip += 4;
      nflags = 32;
    }
    nflags--;
    if (!((flags >> nflags) & 1)) {
      /* a run of literals: this item and the following zero flag bits */
      uint32_t rest = nflags ? flags << (32 - nflags) : 0;
      size_t run = 1 + (size_t)(rest ? __builtin_clz(rest) : nflags);
      if (run > n_in - ip) run = n_in - ip;
      if (run > n_out - op) run = n_out - op;
      if (!run) break;
      if (n_in - ip >= 32 && n_out - op >= 32) {
        /* run ≤ 32: fixed-size copies (the bytes past the run are rewritten later or lie
         * beyond the returned length) */
        memcpy(out + op, in + ip, 16);
        if (run > 16) memcpy(out + op + 16, in + ip + 16, 16);
      } else if (run < 8) {
        for (size_t i = 0; i < run; i++) out[op + i] = in[ip + i];
      } else {
        memcpy(out + op, in + ip, run);
      }
      op += run;
      ip += run;
      nflags -= (int)run - 1;
      continue;
    }
    if (n_in - ip < 2) break;
    uint32_t tok = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8;
    ip += 2;
    size_t off = (tok >> 3) + 1;
    size_t len = tok & 7;
    if (len == 7) {
      uint32_t nib;
      if (half == (size_t)-1) {
        if (ip >= n_in) return -1;
        half = ip++;
        nib = in[half] & 15;
      } else {
        nib = in[half] >> 4;
        half = (size_t)-1;
      }
      len = 7 + nib;
      if (nib == 15) {
        if (ip >= n_in) return -1;
        uint32_t b = in[ip++];
        if (b == 255) {
          if (n_in - ip < 2) return -1;
          uint32_t w = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8;
          ip += 2;
          if (w == 0) {
            if (n_in - ip < 4) return -1;
            w = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8 | (uint32_t)in[ip + 2] << 16 |
                (uint32_t)in[ip + 3] << 24;
            ip += 4;
          }
          if (w < 15 + 7) return -1;
          len = w; /* the complete match length minus 3 */
        } else {
          len = 7 + 15 + b;
        }
      }
    }
    len += 3;
    if (off > op) return -1;
    if (len > n_out - op) len = n_out - op;
    copy_match(out + op, off, len, n_out - op);
    op += len;
  }
  return (long)op;
}

/* ---- XPRESS Huffman: 64 KiB chunks, each with a 256-byte table of 512 4-bit code lengths. */
#define HUFF_SYMS 512
#define HUFF_TBITS 15

struct bits {
  const unsigned char *p;
  size_t n, i;
  uint32_t v;  /* next bits, MSB first */
  int cnt;     /* valid bits in v (≥ 16 after refill unless input ended) */
};

static void br_refill(struct bits *b) {
  while (b->cnt < 16) {
    uint32_t w = 0;
    if (b->n - b->i >= 2) {
      w = (uint32_t)b->p[b->i] | (uint32_t)b->p[b->i + 1] << 8;
      b->i += 2;
    } else {
      b->i = b->n;
    }
    b->v |= w << (16 - b->cnt);
    b->cnt += 16;
  }
}

static void br_skip(struct bits *b, int n) {
  b->v <<= n;
  b->cnt -= n;
  br_refill(b);
}

long etw_xpress_huff_decompress(const unsigned char *in, size_t n_in, unsigned char *out,
                                size_t n_out) {
  static const size_t CHUNK = 65536;
  size_t ip = 0, op = 0;
  uint16_t *table = NULL;
  static _Thread_local uint16_t tab[1u << HUFF_TBITS];
  table = tab;
  while (op < n_out) {
    if (n_in - ip < 256 + 4) break;
    unsigned char lens[HUFF_SYMS];
    for (int i = 0; i < 256; i++) {
      lens[2 * i] = in[ip + (size_t)i] & 15;
      lens[2 * i + 1] = in[ip + (size_t)i] >> 4;
    }
    ip += 256;
    /* canonical codes → direct lookup table (symbol << 4 | length) */
    size_t fill = 0;
    for (int l = 1; l <= HUFF_TBITS; l++) {
      for (int s = 0; s < HUFF_SYMS; s++) {
        if (lens[s] != l) continue;
        size_t cnt = (size_t)1 << (HUFF_TBITS - l);
        if (fill + cnt > ((size_t)1 << HUFF_TBITS)) return -1;
        for (size_t k = 0; k < cnt; k++) table[fill + k] = (uint16_t)(s << 4 | l);
        fill += cnt;
      }
    }
    if (fill == 0) return -1;
    for (; fill < ((size_t)1 << HUFF_TBITS); fill++) table[fill] = 0; /* invalid */
    if (n_in - ip < 4) return -1;
    struct bits b = {in, n_in, ip + 4, 0, 32};
    b.v = ((uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8) << 16 | (uint32_t)in[ip + 2] |
          (uint32_t)in[ip + 3] << 8;
    size_t end = op + CHUNK < n_out ? op + CHUNK : n_out;
    while (op < end) {
      uint16_t e = table[b.v >> (32 - HUFF_TBITS)];
      if (!e) return -1;
      int sym = e >> 4;
      br_skip(&b, e & 15);
      if (sym < 256) {
        out[op++] = (unsigned char)sym;
        continue;
      }
      sym -= 256;
      size_t len = (size_t)(sym & 15);
      int ob = sym >> 4;
      if (len == 15) {
        if (b.i >= n_in) return -1;
        len = in[b.i++];
        if (len == 255) {
          if (n_in - b.i < 2) return -1;
          len = (size_t)in[b.i] | (size_t)in[b.i + 1] << 8;
          b.i += 2;
          if (len == 0) {
            if (n_in - b.i < 4) return -1;
            len = (size_t)in[b.i] | (size_t)in[b.i + 1] << 8 | (size_t)in[b.i + 2] << 16 |
                  (size_t)in[b.i + 3] << 24;
            b.i += 4;
          }
          if (len < 15) return -1;
          len -= 15;
        }
        len += 15;
      }
      len += 3;
      size_t off = ((size_t)1 << ob) + (ob ? (b.v >> (32 - ob)) : 0);
      if (ob) br_skip(&b, ob);
      if (off > op) return -1;
      if (len > n_out - op) len = n_out - op;
      for (size_t i = 0; i < len; i++) out[op + i] = out[op + i - off];
      op += len;
    }
    /* the next chunk's table starts after the consumed 16-bit words */
    ip = b.i;
  }
  return (long)op;
}
