/* etl_xpress.c — XPRESS decompressors for compressed ETL buffers (MS-XCA §2.1–2.4).
 *
 * Written from the prose description of the format (../shared/docs/etl-format.md §3.3; what
 * etwd does with it: docs/etl.md). Both functions are bounded by their input and output sizes
 * and never read or write outside them.
 * The bulk of a plain XPRESS buffer goes through whole flag words without per-item bounds
 * (xp_fast), the rest and every other case through the checked loop.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cc.h"
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
#if ETW_LE
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
#else
  return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

/* Copy a match of @len bytes at distance @off (1 ≤ off) with ≥ len + 32 bytes of room: may
 * write up to 31 bytes past the match (they are rewritten later or lie past the output). */
static inline void copy_match_fast(unsigned char *d, size_t off, size_t len) {
  const unsigned char *s = d - off;
  if (off >= 16) {
    /* 16-byte steps, each reading bytes written at least 16 before; two per turn (≤ 31 bytes
     * past, within the room) */
    memcpy(d, s, 16);
    memcpy(d + 16, s + 16, 16);
    for (size_t i = 32; i < len; i += 32) {
      memcpy(d + i, s + i, 16);
      memcpy(d + i + 16, s + i + 16, 16);
    }
  } else if (off >= 8) {
    memcpy(d, s, 8);
    for (size_t i = 8; i < len; i += 8) memcpy(d + i, s + i, 8);
  } else {
    /* a pattern of period off: d[0..off) from s (an 8-byte copy through a temporary; the
     * bytes past off are rewritten next), then doubled in place (d[p..2p) from d[0..p), p a
     * multiple of off) until p ≥ 8; then 8-byte copies from p back, each reading finished
     * bytes */
    unsigned char t[8];
    memcpy(t, s, 8);
    memcpy(d, t, 8);
    size_t p = off;
    do {
      memcpy(t, d, 8);
      memcpy(d + p, t, 8);
      p += p;
    } while (p < 8);
    for (size_t i = p; i < len; i += 8) memcpy(d + i, d + i - p, 8);
  }
}

#if ETW_GNUC
#define XP_INLINE static inline __attribute__((always_inline))
#define XP_UNLIKELY(x) ETW_EXPECT(!!(x), 0)
#else
#define XP_INLINE static inline
#define XP_UNLIKELY(x) (x)
#endif

/* Input bytes one flag word can consume at most: 4 (flags) + 32 items × 10 (token, nibble,
 * byte, word, dword), + 32 for the fixed-size literal copy. */
#define XP_FAST_MARGIN 360
/* Output room kept at the start of every fast flag word: 31 items of ≤ 10 bytes plus a 32-byte
 * literal store (a long match goes the fast way only when this much room is left after it). */
#define XP_OUT_MARGIN 512

/* Output room at the start of a flag word for which no match length is checked but the 4- and
 * 6-byte forms': 32 items of at most 3 + 7 + 15 + 254 bytes, plus a 32-byte store. */
#define XP_ROOMY_MARGIN (32 * 279 + 32)

/* The fast path: whole flag words while the input holds XP_FAST_MARGIN bytes and the output
 * XP_OUT_MARGIN at the start of each, so no bound is checked per item (only a long match's
 * length). @far: the output already holds 8192 bytes, so no match can reach before it (a
 * token's distance is at most 8192); without it the loop also stops once it does. @roomy:
 * @out_lim keeps XP_ROOMY_MARGIN, so only the longest matches (4- and 6-byte lengths) are
 * checked against the output end.
 * Returns 0 when a margin (or 8192) is reached at a word boundary, -1 on malformed input, 1
 * when a long match came within XP_OUT_MARGIN of the output end: that match was copied the
 * checked way (cut at the output end) and *f holds the rest of its word (the sentinel bit
 * below the flags not yet used) for the checked loop. */
XP_INLINE int xp_fast(const unsigned char **pip, unsigned char **pop, const unsigned char **phalf,
                      uint64_t *pf, const unsigned char *in_lim, const unsigned char *out0,
                      unsigned char *out_lim, unsigned char *out_end, int far, int roomy) {
  const unsigned char *ip = *pip, *half = *phalf;
  unsigned char *op = *pop;
  while (ip < in_lim && op < out_lim && (far || op - out0 < 8192)) {
    /* the flags in the top 32 bits (the current item first), then a sentinel 1: shifting the
     * sentinel out (to 0) ends the word */
    uint64_t f = (uint64_t)rd32le(ip) << 32 | 0x80000000u;
    ip += 4;
    for (;;) {
      /* one step: the run of literals before the next match (often none; 0..32, the leading
       * zeros of f), then that match. The literals are copied as 16 bytes whatever their
       * number (32 above 16: no branch on literal vs. match); shifting out the run and the
       * match's bit leaves 0 when the run reached the sentinel (the end of the word). */
      size_t run = (size_t)(unsigned)etw_clz64(f);
      memcpy(op, ip, 16);
      if (XP_UNLIKELY(run > 16)) memcpy(op + 16, ip + 16, 16);
      op += run;
      ip += run;
      f <<= run;
      f <<= 1;
      if (!f) break;
      uint32_t tok = (uint32_t)ip[0] | (uint32_t)ip[1] << 8;
      ip += 2;
      size_t len = tok & 7;
      if (!far && (tok >> 3) >= (size_t)(op - out0)) return -1; /* distance (tok >> 3) + 1 */
      if (len != 7) { /* 3..9 bytes */
        if (tok >= 15 << 3) { /* distance ≥ 16 */
          memcpy(op, op - (tok >> 3) - 1, 16);
        } else if (tok >= 7 << 3) { /* 8..15 */
          memcpy(op, op - (tok >> 3) - 1, 8);
          memcpy(op + 8, op + 8 - (tok >> 3) - 1, 8);
        } else {
          copy_match_fast(op, (tok >> 3) + 1, len + 3);
        }
        op += len + 3;
        continue;
      }
      size_t off = (tok >> 3) + 1;
      uint32_t nib;
      if (!half) {
        half = ip++;
        nib = *half & 15;
      } else {
        nib = *half >> 4;
        half = NULL;
      }
      len = nib + 7 + 3;
      int check = !roomy;
      if (nib == 15) {
        uint32_t b = *ip++;
        len = b + 22 + 3;
        if (b == 255) {
          uint32_t w = rd16le(ip);
          ip += 2;
          if (w == 0) {
            w = rd32le(ip);
            ip += 4;
          }
          if (w < 15 + 7) return -1;
          len = (size_t)w + 3;
          check = 1;
        }
      }
      if (check && (size_t)(out_end - op) < len + (roomy ? XP_ROOMY_MARGIN : XP_OUT_MARGIN)) {
        /* near the output end */
        size_t room = (size_t)(out_end - op);
        if (len > room) len = room;
        copy_match(op, off, len, room);
        *pip = ip;
        *pop = op + len;
        *phalf = half;
        *pf = f;
        return 1;
      }
      copy_match_fast(op, off, len);
      op += len;
    }
  }
  *pip = ip;
  *pop = op;
  *phalf = half;
  return 0;
}

long etw_xpress_decompress(const unsigned char *in, size_t n_in, unsigned char *out, size_t n_out) {
  uint32_t flags = 0;
  int nflags = 0;
  size_t ip = 0, op = 0;
  unsigned pend = 0; /* a pending length nibble: 0x100 | the byte whose high half it is */
  if (n_in >= XP_FAST_MARGIN && n_out >= XP_OUT_MARGIN) {
    const unsigned char *fip = in, *fhalf = NULL;
    unsigned char *fop = out;
    const unsigned char *in_lim = in + (n_in - XP_FAST_MARGIN) + 1;
    unsigned char *out_lim = out + (n_out - XP_OUT_MARGIN) + 1;
    uint64_t f = 0;
    int rc = 0;
    if (n_out >= XP_ROOMY_MARGIN) { /* the first 8 KiB, then the rest up to XP_ROOMY_MARGIN */
      unsigned char *roomy_lim = out + (n_out - XP_ROOMY_MARGIN) + 1;
      rc = xp_fast(&fip, &fop, &fhalf, &f, in_lim, out, roomy_lim, out + n_out, 0, 1);
      if (rc == 0 && fop - out >= 8192)
        rc = xp_fast(&fip, &fop, &fhalf, &f, in_lim, out, roomy_lim, out + n_out, 1, 1);
    }
    /* then up to XP_OUT_MARGIN */
    if (rc == 0 && fop - out < 8192)
      rc = xp_fast(&fip, &fop, &fhalf, &f, in_lim, out, out_lim, out + n_out, 0, 0);
    if (rc == 0 && fop - out >= 8192)
      rc = xp_fast(&fip, &fop, &fhalf, &f, in_lim, out, out_lim, out + n_out, 1, 0);
    if (rc < 0) return -1;
    ip = (size_t)(fip - in);
    op = (size_t)(fop - out);
    pend = fhalf ? 0x100u | *fhalf : 0;
    if (rc > 0) {
      /* the rest of that word goes the checked way: the sentinel is the lowest set bit, below
       * the flags not yet used */
      nflags = 63 - etw_ctz64(f);
      flags = nflags ? (uint32_t)(f >> 32) >> (32 - nflags) : 0;
    }
  }
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
      size_t run = 1 + (size_t)(rest ? (int)etw_clz32(rest) : nflags);
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
      if (!pend) {
        if (ip >= n_in) return -1;
        pend = 0x100u | in[ip++];
        nib = pend & 15;
      } else {
        nib = pend >> 4 & 15;
        pend = 0;
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
