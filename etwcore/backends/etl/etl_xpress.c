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

/* Input bytes one flag word can consume at most: 4 (flags) + 32 items × 10 (token, nibble,
 * byte, word, dword), + 32 for the fixed-size literal copy. */
#define XP_FAST_MARGIN 360

long etw_xpress_decompress(const unsigned char *in, size_t n_in, unsigned char *out, size_t n_out) {
  size_t ip = 0, op = 0;
  uint32_t flags = 0;
  int nflags = 0;
  size_t half = (size_t)-1; /* position of the shared nibble byte, or none */
  /* Fast path: whole flag words while the input holds a margin for any 32 items, so no input
   * bound is checked per item; output bounds are still checked for every item. */
  while (op < n_out && n_in - ip >= XP_FAST_MARGIN) {
    uint32_t f = rd32le(in + ip); /* the current item's flag is bit 31 */
    ip += 4;
    unsigned nf = 32;
    while (nf) { /* op < n_out holds here: every item that fills the output returns */
      if (!(f & 0x80000000u)) {
        unsigned run = f ? (unsigned)__builtin_clz(f) : 32u;
        if (run > nf) run = nf;
        size_t room = n_out - op;
        if (room >= 32) {
          memcpy(out + op, in + ip, 16);
          if (run > 16) memcpy(out + op + 16, in + ip + 16, 16);
        } else {
          if (run >= room) { /* the output is full */
            memcpy(out + op, in + ip, room);
            return (long)n_out;
          }
          memcpy(out + op, in + ip, run);
        }
        op += run;
        ip += run;
        nf -= run;
        f = run < 32 ? f << run : 0;
        continue;
      }
      f <<= 1;
      nf--;
      uint32_t tok = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8;
      ip += 2;
      size_t off = (tok >> 3) + 1;
      size_t len = tok & 7;
      if (len != 7 && off >= 16 && off <= op && n_out - op > 32) {
        /* the common short match (3..9 bytes, distance ≥ 16, not at the output end): one
         * 16-byte copy (the bytes past the match are rewritten later) */
        memcpy(out + op, out + op - off, 16);
        op += len + 3;
        continue;
      }
      if (len == 7) {
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
            uint32_t w = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8;
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
      }
      len += 3;
      if (off > op) return -1;
      size_t room = n_out - op;
      if (len >= room) { /* the output is full */
        copy_match(out + op, off, room, room);
        return (long)n_out;
      }
      copy_match(out + op, off, len, room);
      op += len;
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
