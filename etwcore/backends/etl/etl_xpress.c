/* etl_xpress.c — XPRESS decompressors for compressed ETL buffers (MS-XCA §2.1–2.4).
 *
 * Written from the prose description of the format (docs/etl.md, etl-format.md §3.3). Both
 * functions are bounded by their input and output sizes and never read or write outside them.
 * On x86-64 with GCC or Clang the bulk of a plain XPRESS buffer goes through a loop in inline
 * assembly (xp_asm: AVX2 where the CPU has it and not on Windows, else SSE2); the C loops stay the
 * portable path (and the test reference: etw_xpress_c_only, etw_xpress_sse2_only,
 * tests/unit/test_etl_xpress.c).
 */
#include <stdint.h>
#include <stdlib.h>
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

#if defined(__GNUC__)
#define XP_INLINE static inline __attribute__((always_inline))
#define XP_UNLIKELY(x) __builtin_expect(!!(x), 0)
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
      size_t run = (size_t)(unsigned)__builtin_clzll(f);
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

/* Test hooks (not static so that the unit tests can set them): the C loops only; the SSE2
 * assembly even where the AVX2 one would run (no effect where there is no assembly loop). */
int etw_xpress_c_only;
int etw_xpress_sse2_only;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(ETWD_XP_NO_ASM)
#define XP_ASM 1

/* Output room kept at the start of a flag word by the "medium" assembly loop, which checks the
 * 1-, 2- and 4-byte length forms against the output end but not matches of ≤ 24 bytes: 32 items
 * of ≤ 24 bytes plus a 32-byte store. */
#define XP_MED_MARGIN (32 * 24 + 32)
/* The tail variant checks the input and the output before every step (it may stop mid-word;
 * the flag word itself is checked before it is read): a step reads at most 26 bytes from its
 * start (a 16-byte literal copy; up to 16 literals, a 2-byte token and up to 8 bytes of length)
 * and writes at most 48 (a 16-byte literal copy; up to 16 literals, then a match copy of at most
 * 32 bytes) unless its length is checked (1-, 2- and 4-byte forms: the room must keep
 * XP_TAIL_MARGIN past the match). Both with some slack. */
#define XP_TAIL_IN 32
#define XP_TAIL_MARGIN 48
/* The same for the AVX2 family (whole words, 32-byte literal stores, match copies writing up to
 * 32 bytes past a match of at most 24 bytes and up to 63 past a longer one, in 64-byte turns):
 * roomy 32 items of ≤ 279 bytes plus 64; medium 32 items of ≤ 24 bytes plus 64; a tail step
 * reads at most 42 bytes (a 32-byte literal copy; up to 32 literals, the token and up to 8
 * bytes of length) and writes at most 64 (up to 32 literals, then a copy of at most 32 bytes)
 * unless its length is checked (the room must keep XP_TAIL_MARGIN_W past the match). */
#define XP_ROOMY_MARGIN_W (32 * 279 + 64)
#define XP_MED_MARGIN_W (32 * 24 + 64)
#define XP_TAIL_IN_W 48
#define XP_TAIL_MARGIN_W 64

/* The fast loop (xp_fast) written out in x86-64 assembly (the SSE2 family XS as described here;
 * the AVX2 family XA below takes whole words and 32-byte copies). Same bounds as the C:
 * whole flag words while ip < in_lim and op < out_lim at the start of each. One step is a run
 * of literals (copied as 16 bytes) and the match after it, so there is no branch on literal
 * vs. match. A flag word is taken in two halves of 16 items, each followed by a sentinel bit,
 * so a run is at most 16: f holds a half's flags from bit 63 down (the current item first),
 * then the sentinel; g the word, its bit 32 set while the second half is still to do. bsr
 * gives b = 63 - run, and a shift by -b & 63 = run + 1 drops the run and the match's bit at
 * once (0: the sentinel went, the half ended in literals).
 * The loop is written twice: part "a" without a pending length nibble, part "b" with one (the
 * high half of the byte in the half register): a match with a nibble continues in the other
 * part, so the state needs no test. In part "a" the half register is stale (0 on the way out;
 * 0x100 | the byte on the way out of part "b").
 * Registers: rcx the shift count / scratch, eax the token, edx the length (as XP_F(F, TOK)).
 * Between a match and the next step's head op is kept B bytes short (B = 10 after a 3-bit
 * length or a long match, 25 after a nibble length, 0 after a flag word; the head adds B in its
 * displacements) and ip D bytes short (a nibble or length byte, the AVX2 flag word's last 2
 * bytes: D = 0..2, taken by the head's displacements or, in the tail variant, by SCHK).
 * Variants (macros pasted into the loop, given the label suffix of the state): @DCHK the
 * distance checked against out0 (the first 8 KiB: a distance is at most 8192), at the token
 * before anything else; @BCHK the 1-byte length form (25..279 bytes) checked against the
 * output end like the 2- and 4-byte forms (which always are), with [margin] - 25 the room that
 * must stay after the match (rdx: the length - 25); @SCHK the input and output limits checked
 * before every step (the tail variant; it may stop mid-word; the output limit less B).
 * Ends: 0 at a word boundary past a limit; -1 malformed (a distance before the output, a 2/4-
 * byte length below 22); 2 a checked length did not leave the margin: its fields are read (ip,
 * half after them; f without its bit), rdx the length - 25 and eax the distance for the C to copy
 * the checked way; 3 stopped before a step (SCHK). */
#define XP_ASM_NONE(...) ""
#define XP_ASM_DCHK(S) /* token >> 3 >= op - out0 <=> token >= 8 op - 8 out0 */               \
  "lea (%[nout08],%[op],8), %%rcx\n\t"                                                         \
  "cmp %%rcx, %%rax\n\t"                                                                       \
  "jae .Lxp_bad%=\n\t"
/* The same for the AVX2 family with g = 8 op - 8 out0 at the word's start (XP_ASM_DCHKW_WORD): a
 * token below it is within the output written (2 instructions); the others take the test above */
#define XP_ASM_DCHKW(S)                                                                        \
  "cmp %[g], %%rax\n\t"                                                                        \
  "jb 1f\n\t"                                                                                  \
  XP_ASM_DCHK(S)                                                                               \
  "1:\n\t"
/* what a flag word's start adds for DCHK (the AVX2 family's g is free) */
#define XP_ASM_NONE_WORD ""
#define XP_ASM_DCHK_WORD ""
#define XP_ASM_DCHKW_WORD "lea (%[nout08],%[op],8), %[g]\n\t"
#define XP_ASM_BCHK(S)                                                                         \
  "mov %[out_end], %%rcx\n\t"                                                                  \
  "sub %[op], %%rcx\n\t"                                                                       \
  "sub %[margin], %%rcx\n\t"                                                                   \
  "cmp %%rdx, %%rcx\n\t"                                                                       \
  "jl .Lxp_near" S "%=\n\t"
/* (D: ip is D bytes short, taken here, so that the head's displacement is 0: XP_ASM_SCHK_HD) */
#define XP_ASM_SCHK(S, B, D) /* (B: op's bias, 0 or 10: the output limit less B) */            \
  XP_IPADD(D)                                                                                  \
  "cmp %[in_lim], %[ip]\n\t"                                                                   \
  "jae .Lxp_mid" S #B "%=\n\t"                                                                 \
  "cmp " XP_OL_##B ", %[op]\n\t"                                                               \
  "jae .Lxp_mid" S #B "%=\n\t"
#define XP_ASM_SCHK_HD(D) 0
#define XP_ASM_NONE_HD(D) D
#define XP_OL_0 "%[out_lim]"
#define XP_OL_10 "%[out_lim10]"
#define XP_OL_25 "%[out_lim25]"
/* the nibble as edx = 15 - nibble (ZF: 15, a length byte follows): part "a" the low half of a new
 * byte (ip left on it: the paths after it take the byte, ND = 1), which the half register keeps;
 * part "b" the high half of it (the register as part "b" was entered: the byte, or 0x100 | the
 * byte from the caller). The AVX2 family by andn (masks the 0x100 too). */
#define XP_XS_NIB_a                                                                            \
  "movzbl (%[ip]), %k[half]\n\t"                                                               \
  "mov %k[half], %%edx\n\t"                                                                    \
  "and $15, %%edx\n\t"                                                                         \
  "xor $15, %%edx\n\t"
#define XP_XA_NIB_a                                                                            \
  "movzbl (%[ip]), %k[half]\n\t"                                                               \
  "andn %k[fifteen], %k[half], %%edx\n\t"
#define XP_XS_NIB_b                                                                            \
  "movzbl %b[half], %%edx\n\t"                                                                 \
  "shr $4, %%edx\n\t"                                                                          \
  "xor $15, %%edx\n\t"
#define XP_XA_NIB_b                                                                            \
  "shr $4, %k[half]\n\t"                                                                       \
  "andn %k[fifteen], %k[half], %%edx\n\t"
/* The two families (F): XS, SSE2 (halves of 16 items, 16-byte literal stores, the pieces above
 * as round 8 wrote them), and XA, AVX2 (whole words of 32 items without a sentinel: a head
 * whose bsr finds no match left copies the t literals after the word's last match, t = tzcnt of
 * the word taken at its start, and goes on to the next word; 32-byte literal stores, 32-byte match copies from distance >= 32, VEX encodings only so that no
 * legacy-SSE instruction meets a dirty upper half; vzeroupper on the way out). */
#define XP_S(x) XP_S_(x)
#define XP_S_(x) #x
#define XP_CAT(a, b) XP_CAT_(a, b)
#define XP_CAT_(a, b) a##b
/* ip advanced by D bytes (a displacement the paths carry until an instruction takes it) */
#define XP_IPADD(D) XP_CAT(XP_IPADD_, D)
#define XP_IPADD_0 ""
#define XP_IPADD_1 "inc %[ip]\n\t"
#define XP_IPADD_2 "add $2, %[ip]\n\t"
/* the head's ip displacement: D, or 0 where SCHK takes it */
#define XP_HD(SCHK, D) XP_CAT(SCHK, _HD)(D)
#define XP_F(F, N) XP_F_(F, N)
#define XP_F_(F, N) XP_##F##_##N
#define XP_XS_V "" /* the mnemonics' prefix */
#define XP_XS_WD 0 /* ip short by this after a flag word */
#define XP_XA_WD 2
#define XP_XA_V "v"
#define XP_XS_EXIT ""
#define XP_XA_EXIT                                                                             \
  "xor %k[g], %k[g]\n\t" /* (g: XP_ASM_DCHKW's limit) */                                       \
  "vzeroupper\n\t"
/* the clobbers: xmm0; for XA all 16 (vzeroupper clears every upper half, which matters should
 * the file be compiled for AVX) */
#define XP_XS_CLOB "xmm0"
#define XP_XA_CLOB                                                                             \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",      \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#define XP_XS_DONE ""
#define XP_XA_DONE "sub $2, %[ip]\n\t" /* (see XP_XA_WORD) */
/* the literals: 16 (XS) or 32 (XA) bytes from ip whatever their number */
#define XP_XS_LIT(B, D)                                                                        \
  "movdqu " XP_S(D) "(%[ip]), %%xmm0\n\t"                                                      \
  "movdqu %%xmm0, " #B "(%[op])\n\t"
#define XP_XA_LIT(B, D)                                                                        \
  "vmovdqu " XP_S(D) "(%[ip]), %%ymm0\n\t"                                                     \
  "vmovdqu %%ymm0, " #B "(%[op])\n\t"
/* the token's length field (eax the token): ZF set for 7 (a nibble follows); else XS edx = the
 * length - 2, XA edx = 10 - the length (andn: ~token & 7, one instruction for both). ADV: op
 * past a 3-bit length's match less 10 (the bias the next step's head takes back); LEN3: eax =
 * that length */
#define XP_XS_TOK                                                                              \
  "lea 1(%%rax), %%edx\n\t"                                                                    \
  "and $7, %%edx\n\t"
#define XP_XA_TOK "andn %k[seven], %%eax, %%edx\n\t"
#define XP_XS_ADV "lea -8(%[op],%%rdx), %[op]\n\t"
#define XP_XA_ADV "sub %%rdx, %[op]\n\t"
#define XP_XS_LEN3 "lea 2(%%rdx), %%eax\n\t"
#define XP_XA_LEN3                                                                             \
  "mov $10, %%eax\n\t"                                                                         \
  "sub %%edx, %%eax\n\t"
/* distance 4: the 4 bytes before op repeated over 16 */
#define XP_XS_D4                                                                               \
  "movd -4(%[op]), %%xmm0\n\t"                                                                 \
  "pshufd $0, %%xmm0, %%xmm0\n\t"                                                              \
  "movdqu %%xmm0, (%[op])\n\t"
#define XP_XA_D4                                                                               \
  "vpbroadcastd -4(%[op]), %%xmm0\n\t"                                                         \
  "vmovdqu %%xmm0, (%[op])\n\t"
/* distance 8: the 8 bytes before op repeated over 16 */
#define XP_XS_D8                                                                               \
  "movq -8(%[op]), %%xmm0\n\t"                                                                 \
  "punpcklqdq %%xmm0, %%xmm0\n\t"                                                              \
  "movdqu %%xmm0, (%[op])\n\t"
#define XP_XA_D8                                                                               \
  "vpbroadcastq -8(%[op]), %%xmm0\n\t"                                                         \
  "vmovdqu %%xmm0, (%[op])\n\t"
/* the end of a half (XS) or word (XA) in literals (there was no token after them), then a flag
 * word while the limits hold: XS the word's second half (g's bit 32) or the next word; XA the
 * next word, its 32 flags in bits 63..32 (bits 31..0 zero) and t its trailing zeros (XP_XA_TL) */
#define XP_XS_WORD(S, NX, WH)                                                                  \
  ".Lxp_wend" S "%=:\n\t"                                                                      \
  "sub $2, %[ip]\n\t"                                                                          \
  "btr $32, %[g]\n\t"                                                                          \
  "jnc .Lxp_word" S "%=\n\t"                                                                   \
  "mov %[g], %[f]\n\t"                                                                         \
  "shl $48, %[f]\n\t"                                                                          \
  "bts $47, %[f]\n\t"                                                                          \
  NX                                                                                           \
  ".Lxp_word" S "%=:\n\t"                                                                      \
  "cmp %[in_lim], %[ip]\n\t"                                                                   \
  "jae .Lxp_done" S "%=\n\t"                                                                   \
  "cmp %[out_lim], %[op]\n\t"                                                                  \
  "jae .Lxp_done" S "%=\n\t"                                                                   \
  "movl (%[ip]), %k[g]\n\t"                                                                    \
  "add $4, %[ip]\n\t"                                                                          \
  "mov %[g], %[f]\n\t"                                                                         \
  "bts $32, %[g]\n\t"                                                                          \
  "shr $16, %[f]\n\t"                                                                          \
  "shl $48, %[f]\n\t"                                                                          \
  "bts $47, %[f]\n\t"                                                                          \
  NX
#define XP_XA_WORD(S, NX, WH) /* (ip 2 past the word from wend on: the limits hold 2 bytes early) */ \
  ".Lxp_word" S "%=:\n\t"                                                                      \
  "add $2, %[ip]\n\t"                                                                          \
  "jmp .Lxp_wend" S "%=\n\t"                                                                   \
  XP_XA_TL(S, 0, 0) XP_XA_TL(S, 0, 1) XP_XA_TL(S, 0, 2)                                        \
  XP_XA_TL(S, 25, 0) XP_XA_TL(S, 25, 1) XP_XA_TL(S, 25, 2)                                     \
  XP_XA_TL(S, 10, 1) XP_XA_TL(S, 10, 2)                                                        \
  ".Lxp_tl" S "10_0%=:\n\t" /* (the most common one falls through) */                          \
  XP_XA_LIT(10, 0)                                                                             \
  "lea 2(%[ip],%[t]), %[ip]\n\t"                                                               \
  "lea 10(%[op],%[t]), %[op]\n\t"                                                              \
  ".Lxp_wend" S "%=:\n\t"                                                                      \
  "cmp %[in_lim], %[ip]\n\t"                                                                   \
  "jae .Lxp_done" S "%=\n\t"                                                                   \
  "cmp %[out_lim], %[op]\n\t"                                                                  \
  "jae .Lxp_done" S "%=\n\t"                                                                   \
  "movl -2(%[ip]), %k[f]\n\t" /* (ip 2 short: XP_XA_WD) */                                     \
  "tzcnt %k[f], %k[t]\n\t" /* (the literals after the word's last match; 32: none) */          \
  WH                                                                                           \
  "shl $32, %[f]\n\t"                                                                          \
  NX
/* the end of an AVX2 word (XA: no sentinel; the head's bsr found no match left, ZF): the t
 * literals after its last match as a head's (B, D) would copy them, ip and op past them (ip 2
 * more, as the word expects) */
#define XP_XA_TL(S, B, D)                                                                      \
  ".Lxp_tl" S #B "_" #D "%=:\n\t"                                                              \
  XP_XA_LIT(B, D)                                                                              \
  "lea 2+" #D "(%[ip],%[t]), %[ip]\n\t"                                                        \
  "lea " #B "(%[op],%[t]), %[op]\n\t"                                                          \
  "jmp .Lxp_wend" S "%=\n\t"
/* a nibble length (rdx = 15 - the nibble, the length 25 - rdx; eax the token; after it op is left
 * 25 short, the next head's bias): XS two 16-byte copies from distance
 * >= 16; XA one 32-byte copy from distance >= 32, two 16-byte ones from 16..31; below 16 the
 * general copy */
#define XP_XS_NIBCOPY(S, O, NX, ND)                                                            \
  "cmp $0x78, %%eax\n\t"                                                                       \
  "jb .Lxp_nibg" S "%=\n\t"                                                                    \
  XP_ASM_C32(S, O, "", "sub %%rdx, %[op]\n\t", NX)                                             \
  ".Lxp_nibg" S "%=:\n\t"                                                                      \
  XP_IPADD(ND)                                                                                 \
  "neg %%edx\n\t"                                                                              \
  "add $25, %%edx\n\t"                                                                         \
  "jmp .Lxp_gent" S "%=\n\t"
#define XP_XA_NIBCOPY(S, O, NX, ND)                                                            \
  "cmp $0xf8, %%eax\n\t"                                                                       \
  "jb .Lxp_nibs" S "%=\n\t"                                                                    \
  "shr $3, %%eax\n\t"                                                                          \
  "not %%rax\n\t"                                                                              \
  "vmovdqu (%[op],%%rax), %%ymm0\n\t"                                                          \
  "vmovdqu %%ymm0, (%[op])\n\t"                                                                \
  "sub %%rdx, %[op]\n\t"                                                                       \
  NX                                                                                           \
  ".Lxp_nibs" S "%=:\n\t"                                                                      \
  "cmp $0x78, %%eax\n\t"                                                                       \
  "jb .Lxp_nibg" S "%=\n\t"                                                                    \
  XP_ASM_C32(S, O, "v", "neg %%rdx\n\t" "lea 15(%[op],%%rdx), %[op]\n\t",                      \
             XP_IPADD(ND) "jmp .Lxp_step" O "%=\n\t")                                          \
  ".Lxp_nibg" S "%=:\n\t"                                                                      \
  XP_IPADD(ND)                                                                                 \
  "neg %%edx\n\t"                                                                              \
  "add $25, %%edx\n\t"                                                                         \
  "jmp .Lxp_gent" S "%=\n\t"
/* 32 bytes in two 16-byte copies from distance >= 16 (eax the token), then ADV (op) */
#define XP_ASM_C32(S, O, V, ADV, NX)                                                           \
  "shr $3, %%eax\n\t"                                                                          \
  "not %%rax\n\t"                                                                              \
  V "movdqu (%[op],%%rax), %%xmm0\n\t"                                                         \
  V "movdqu %%xmm0, (%[op])\n\t"                                                               \
  V "movdqu 16(%[op],%%rax), %%xmm0\n\t"                                                       \
  V "movdqu %%xmm0, 16(%[op])\n\t"                                                             \
  ADV                                                                                          \
  NX
/* a long match (rdx = its length - 25, the length 25 or more, the room checked where needed; eax
 * the token): XS 32 bytes a turn in 16-byte copies from distance >= 16; XA 64 bytes a turn in
 * 32-byte copies from distance >= 32 (the first turn before any test: most are 25..64 bytes),
 * 32 in 16-byte ones from 16..31; below 16 the general copy */
#define XP_ASM_L32(S, O, V, NX)                                                                \
  "shr $3, %%eax\n\t"                                                                          \
  "not %%rax\n\t"                                                                              \
  "lea 25(%[op],%%rdx), %%rcx\n\t"                                                             \
  ".Lxp_long32" S "%=:\n\t"                                                                    \
  V "movdqu (%[op],%%rax), %%xmm0\n\t"                                                         \
  V "movdqu %%xmm0, (%[op])\n\t"                                                               \
  V "movdqu 16(%[op],%%rax), %%xmm0\n\t"                                                       \
  V "movdqu %%xmm0, 16(%[op])\n\t"                                                             \
  "add $32, %[op]\n\t"                                                                         \
  "cmp %%rcx, %[op]\n\t"                                                                       \
  "jb .Lxp_long32" S "%=\n\t"                                                                  \
  "lea -10(%%rcx), %[op]\n\t"                                                                  \
  NX
#define XP_XS_LONG(S, O, NX)                                                                   \
  ".Lxp_long" S "%=:\n\t"                                                                      \
  "cmp $0x78, %%eax\n\t"                                                                       \
  "jb .Lxp_longg" S "%=\n\t"                                                                   \
  XP_ASM_L32(S, O, "", NX)                                                                     \
  ".Lxp_longg" S "%=:\n\t"                                                                     \
  "add $25, %%rdx\n\t"                                                                         \
  "jmp .Lxp_gent" S "%=\n\t"
#define XP_XA_LONG(S, O, NX)                                                                   \
  ".Lxp_long" S "%=:\n\t"                                                                      \
  "cmp $0xf8, %%eax\n\t"                                                                       \
  "jb .Lxp_longs" S "%=\n\t"                                                                   \
  "shr $3, %%eax\n\t"                                                                          \
  "not %%rax\n\t"                                                                              \
  "vmovdqu (%[op],%%rax), %%ymm0\n\t"                                                          \
  "vmovdqu %%ymm0, (%[op])\n\t"                                                                \
  "vmovdqu 32(%[op],%%rax), %%ymm0\n\t"                                                        \
  "vmovdqu %%ymm0, 32(%[op])\n\t"                                                              \
  "cmp $64 - 25, %%rdx\n\t"                                                                    \
  "ja .Lxp_long64" S "%=\n\t"                                                                  \
  "lea 25 - 10(%[op],%%rdx), %[op]\n\t"                                                        \
  NX                                                                                           \
  ".Lxp_long64" S "%=:\n\t"                                                                    \
  "lea 25(%[op],%%rdx), %%rcx\n\t"                                                             \
  "add $64, %[op]\n\t"                                                                         \
  ".Lxp_l64" S "%=:\n\t"                                                                       \
  "vmovdqu (%[op],%%rax), %%ymm0\n\t"                                                          \
  "vmovdqu %%ymm0, (%[op])\n\t"                                                                \
  "vmovdqu 32(%[op],%%rax), %%ymm0\n\t"                                                        \
  "vmovdqu %%ymm0, 32(%[op])\n\t"                                                              \
  "add $64, %[op]\n\t"                                                                         \
  "cmp %%rcx, %[op]\n\t"                                                                       \
  "jb .Lxp_l64" S "%=\n\t"                                                                     \
  "lea -10(%%rcx), %[op]\n\t"                                                                  \
  NX /* (the head pasted: no jump back) */                                                     \
  ".Lxp_longs" S "%=:\n\t"                                                                     \
  "cmp $0x78, %%eax\n\t"                                                                       \
  "jb .Lxp_longg" S "%=\n\t"                                                                   \
  XP_ASM_L32(S, O, "v", "jmp .Lxp_step" O "%=\n\t")                                          \
  ".Lxp_longg" S "%=:\n\t"                                                                     \
  "add $25, %%rdx\n\t"                                                                         \
  "jmp .Lxp_gent" S "%=\n\t"
/* A length byte's copy before its 255 test (BYTE; the AVX2 roomy variants, where the length
 * byte is not checked against the output end: 64 bytes are within the margin): from distance
 * >= 32 the first 64-byte turn as XP_XA_LONG's, then the 255 test only for longer ones; 255 reads
 * the 2- or 4-byte length (checked, as always; its first 64 bytes are copied, rax = -distance:
 * the "nearx" exit) and goes on in XP_XA_LONG's 64-byte turns. Below distance 32 the checked
 * order (the 255 test, then XP_XA_LONG from its start). BYTE0: nothing (the 255 test first). */
#define XP_ASM_BYTE0(S, O, NX, NB) ""
#define XP_ASM_BYTE64(S, O, NX, NB)                                                            \
  "cmp $0xf8, %%eax\n\t"                                                                       \
  "jb .Lxp_byts" S "%=\n\t"                                                                    \
  "shr $3, %%eax\n\t"                                                                          \
  "not %%rax\n\t"                                                                              \
  "vmovdqu (%[op],%%rax), %%ymm0\n\t"                                                          \
  "vmovdqu %%ymm0, (%[op])\n\t"                                                                \
  "vmovdqu 32(%[op],%%rax), %%ymm0\n\t"                                                        \
  "vmovdqu %%ymm0, 32(%[op])\n\t"                                                              \
  "cmp $64 - 25, %%edx\n\t"                                                                    \
  "ja .Lxp_byt64" S "%=\n\t"                                                                   \
  "lea 25 - 10(%[op],%%rdx), %[op]\n\t"                                                        \
  NX                                                                                           \
  ".Lxp_byt64" S "%=:\n\t"                                                                     \
  XP_IPADD(NB)                                                                                 \
  "cmp $255, %%edx\n\t"                                                                        \
  "jne .Lxp_long64" S "%=\n\t"                                                                 \
  "movzwl (%[ip]), %%edx\n\t"                                                                  \
  "add $2, %[ip]\n\t"                                                                          \
  "test %%edx, %%edx\n\t"                                                                      \
  "jnz .Lxp_bw2got" S "%=\n\t"                                                                 \
  "movl (%[ip]), %%edx\n\t"                                                                    \
  "add $4, %[ip]\n\t"                                                                          \
  ".Lxp_bw2got" S "%=:\n\t"                                                                    \
  "sub $22, %%rdx\n\t"                                                                         \
  "jb .Lxp_bad%=\n\t"                                                                          \
  "mov %[out_end], %%rcx\n\t" /* XP_ASM_BCHK to the nearx exit */                             \
  "sub %[op], %%rcx\n\t"                                                                       \
  "sub %[margin], %%rcx\n\t"                                                                   \
  "cmp %%rdx, %%rcx\n\t"                                                                       \
  "jl .Lxp_nearx" O "%=\n\t"                                                                   \
  "cmp $64 - 25, %%rdx\n\t"                                                                    \
  "ja .Lxp_long64" S "%=\n\t"                                                                  \
  "lea 25 - 10(%[op],%%rdx), %[op]\n\t"                                                        \
  "jmp .Lxp_step" O "%=\n\t"                                                                   \
  ".Lxp_byts" S "%=:\n\t"
/* A step's head: the literals before the next match (run = 63 - b), the match's token and its
 * length class; on to the 16-byte copy (distance >= 16) or past the end of the head (distance
 * 1..15, the fall-through of the loop's own head). The paths that end a step paste it (NEXT:
 * the head, then a jump to the small distances) instead of jumping back to the loop's. */
/* the end of a word: XS after the shift (0: the sentinel went), XA at the bsr (no match left) */
#define XP_XS_HZ(S, B, D) ""
#define XP_XS_SZ(S) "jz .Lxp_wend" S "%=\n\t"
#define XP_XA_HZ(S, B, D) XP_XA_HZ_(S, B, D)
#define XP_XA_HZ_(S, B, D) "jz .Lxp_tl" S #B "_" #D "%=\n\t"
#define XP_XA_SZ(S) ""
#define XP_ASM_HEAD(S, DCHK, SCHK, F, B, D)                                                    \
  SCHK(S, B, D)                                                                                \
  "bsr %[f], %%rcx\n\t"                                                                        \
  XP_F(F, HZ)(S, B, XP_HD(SCHK, D))                                                            \
  XP_F(F, LIT)(B, XP_HD(SCHK, D))                                                              \
  "neg %%rcx\n\t"                                                                              \
  "lea 65+" XP_S(XP_HD(SCHK, D)) "(%[ip],%%rcx), %[ip]\n\t" /* past the run and the token */   \
  "lea 63+" #B "(%[op],%%rcx), %[op]\n\t" /* past the run (and the bias) */                    \
  "shl %%cl, %[f]\n\t"             /* by run + 1 (1..17 / 1..32) */                             \
  XP_F(F, SZ)(S)                                                                               \
  "movzwl -2(%[ip]), %%eax\n\t"                                                                \
  DCHK(S)                                                                                      \
  XP_F(F, TOK)                                                                                 \
  "jz .Lxp_nib" S "%=\n\t"                                                                     \
  "shr $3, %%eax\n\t"                                                                          \
  "cmp $8, %%eax\n\t" /* distance >= 9 >= the length: one 16-byte copy reads done bytes */     \
  "jae .Lxp_s16" S "%=\n\t"
/* (the small distances' first test pasted too: distance 4 straight to its copy, the others to
 * the rest of the tests; no more instructions than a jump to .Lxp_small on any path) */
#define XP_ASM_NEXT(S, DCHK, SCHK, F, B, D)                                                    \
  XP_ASM_HEAD(S, DCHK, SCHK, F, B, D)                                                          \
  "cmp $3, %%eax\n\t"                                                                           \
  "je .Lxp_d4" S "%=\n\t"                                                                       \
  "jmp .Lxp_sdx" S "%=\n\t"
/* One part: S its label suffix, O the other part's, NIB its nibble fetch, F the family. */
#define XP_ASM_PART(S, O, NIB, ND, NB, DCHK, BCHK, SCHK, F, BYTE)                              \
  /* 3..9 bytes from distance >= 9: one 16-byte copy (the common step's end; the bytes past the \
   * length are rewritten later or lie past the output) */                                     \
  ".Lxp_s16" S "%=:\n\t" /* (eax = the token >> 3 from here on) */                             \
  "not %%rax\n\t"                                                                              \
  XP_F(F, V) "movdqu (%[op],%%rax), %%xmm0\n\t"                                                \
  XP_F(F, V) "movdqu %%xmm0, (%[op])\n\t"                                                      \
  XP_F(F, ADV)                                                                                 \
  /* a step */                                                                                 \
  ".Lxp_step" S "%=:\n\t"                                                                      \
  XP_ASM_HEAD(S, DCHK, SCHK, F, 10, 0)                                                         \
  /* 3..9 bytes from distance 1..8 */                                                          \
  ".Lxp_small" S "%=:\n\t"                                                                     \
  "cmp $3, %%eax\n\t"                                                                          \
  "jne .Lxp_sdx" S "%=\n\t"                                                                    \
  ".Lxp_d4" S "%=:\n\t"                                                                         \
  XP_F(F, D4)                                                                                  \
  XP_F(F, ADV)                                                                                 \
  XP_ASM_NEXT(S, DCHK, SCHK, F, 10, 0)                                                         \
  ".Lxp_sdx" S "%=:\n\t"                                                                       \
  "cmp $7, %%eax\n\t"                                                                          \
  "jne .Lxp_sd1" S "%=\n\t"                                                                    \
  XP_F(F, D8)                                                                                  \
  XP_F(F, ADV)                                                                                 \
  XP_ASM_NEXT(S, DCHK, SCHK, F, 10, 0)                                                         \
  /* 1..7 but 4: d[0..8) from the distance back, then the period doubled in place (p =       \
   * distance × 2^k) until p >= 8; a 9-byte match with p = 8 takes one more 8-byte copy */     \
  ".Lxp_sd1" S "%=:\n\t"                                                                       \
  "inc %%eax\n\t"                                                                              \
  "mov %[op], %%rcx\n\t"                                                                       \
  "sub %%rax, %%rcx\n\t"                                                                       \
  XP_F(F, V) "movq (%%rcx), %%xmm0\n\t"                                                        \
  XP_F(F, V) "movq %%xmm0, (%[op])\n\t"                                                        \
  "mov %%eax, %%ecx\n\t"                                                                       \
  ".Lxp_sd8d" S "%=:\n\t"                                                                      \
  XP_F(F, V) "movq (%[op]), %%xmm0\n\t"                                                        \
  XP_F(F, V) "movq %%xmm0, (%[op],%%rcx)\n\t"                                                  \
  "add %%ecx, %%ecx\n\t"                                                                       \
  "cmp $8, %%ecx\n\t"                                                                          \
  "jb .Lxp_sd8d" S "%=\n\t"                                                                    \
  XP_F(F, LEN3)                                                                                \
  "cmp %%ecx, %%eax\n\t"                                                                       \
  "jbe .Lxp_sd8e" S "%=\n\t"                                                                   \
  XP_F(F, V) "movq (%[op]), %%xmm0\n\t"                                                        \
  XP_F(F, V) "movq %%xmm0, 8(%[op])\n\t"                                                       \
  ".Lxp_sd8e" S "%=:\n\t"                                                                      \
  XP_F(F, ADV)                                                                                 \
  "jmp .Lxp_step" S "%=\n\t"                                                                   \
  XP_F(F, WORD)(S, XP_ASM_NEXT(S, DCHK, SCHK, F, 0, XP_F(F, WD)), XP_CAT(DCHK, _WORD))         \
  /* the length continues in a nibble (from here on the other part's state) */                 \
  ".Lxp_nib" S "%=:\n\t"                                                                       \
  NIB                                                                                          \
  "jz .Lxp_byte" S "%=\n\t"                                                                    \
  XP_F(F, NIBCOPY)(S, O, XP_ASM_NEXT(O, DCHK, SCHK, F, 25, ND), ND) /* 10..24 bytes */         \
  /* a length byte: 25..279 bytes, or 255 and a 2-byte length (0: a 4-byte one) */             \
  ".Lxp_byte" S "%=:\n\t" /* (the byte at ip + ND; ip short by NB after it) */                 \
  "movzbl " #ND "(%[ip]), %%edx\n\t"                                                           \
  BYTE(S, O, XP_ASM_NEXT(O, DCHK, SCHK, F, 10, NB), NB)                                        \
  XP_IPADD(NB)                                                                                 \
  "cmp $255, %%edx\n\t"                                                                        \
  "je .Lxp_word2" S "%=\n\t"                                                                   \
  BCHK(O) /* (rdx = the length - 25 from here on) */                                          \
  XP_F(F, LONG)(S, O, XP_ASM_NEXT(O, DCHK, SCHK, F, 10, 0))                                    \
  ".Lxp_word2" S "%=:\n\t"                                                                     \
  "movzwl (%[ip]), %%edx\n\t"                                                                  \
  "add $2, %[ip]\n\t"                                                                          \
  "test %%edx, %%edx\n\t"                                                                      \
  "jnz .Lxp_w2got" S "%=\n\t"                                                                  \
  "movl (%[ip]), %%edx\n\t"                                                                    \
  "add $4, %[ip]\n\t"                                                                          \
  ".Lxp_w2got" S "%=:\n\t"                                                                     \
  "sub $22, %%rdx\n\t" /* (64-bit: the length - 25 = this - 22, up to 2^32 - 23) */            \
  "jb .Lxp_bad%=\n\t"                                                                          \
  XP_ASM_BCHK(O)                                                                               \
  "jmp .Lxp_long" S "%=\n\t"                                                                   \
  /* distance 1..15 (eax = token), rdx bytes: d[0..8) from the distance back; below 8 the      \
   * period doubled in place (p = distance × 2^k) until p >= 8, then 8-byte copies from p      \
   * on; from 8..15, 8-byte copies from 8 on; each from p back (finished bytes) */             \
  ".Lxp_gent" S "%=:\n\t"                                                                      \
  "shr $3, %%eax\n\t"                                                                          \
  "inc %%eax\n\t"                                                                              \
  "mov %[op], %%rcx\n\t"                                                                       \
  "sub %%rax, %%rcx\n\t"                                                                       \
  XP_F(F, V) "movq (%%rcx), %%xmm0\n\t"                                                        \
  XP_F(F, V) "movq %%xmm0, (%[op])\n\t"                                                        \
  "mov %%rax, %%rcx\n\t"                                                                       \
  "cmp $8, %%rcx\n\t"                                                                          \
  "jae .Lxp_gen8s" S "%=\n\t"                                                                  \
  ".Lxp_gen2" S "%=:\n\t"                                                                      \
  XP_F(F, V) "movq (%[op]), %%xmm0\n\t"                                                        \
  XP_F(F, V) "movq %%xmm0, (%[op],%%rcx)\n\t"                                                  \
  "add %%rcx, %%rcx\n\t"                                                                       \
  "cmp $8, %%rcx\n\t"                                                                          \
  "jb .Lxp_gen2" S "%=\n\t"                                                                    \
  "lea -10(%[op],%%rcx), %%rax\n\t" /* from p (rax, op less 10) */                             \
  "jmp .Lxp_gen8p" S "%=\n\t"                                                                  \
  ".Lxp_gen8s" S "%=:\n\t"                                                                     \
  "lea 8 - 10(%[op]), %%rax\n\t" /* distance 8..15: from 8 */                                  \
  ".Lxp_gen8p" S "%=:\n\t"                                                                     \
  "lea -10(%[op],%%rdx), %[op]\n\t"                                                            \
  "neg %%rcx\n\t"                                                                              \
  ".Lxp_gen8" S "%=:\n\t"                                                                      \
  "cmp %[op], %%rax\n\t"                                                                       \
  "jae .Lxp_step" O "%=\n\t"                                                                   \
  XP_F(F, V) "movq 10(%%rax,%%rcx), %%xmm0\n\t"                                                \
  XP_F(F, V) "movq %%xmm0, 10(%%rax)\n\t"                                                      \
  "add $8, %%rax\n\t"                                                                          \
  "jmp .Lxp_gen8" S "%=\n\t"
#define XP_ASM_LOOP(F, DCHK, BCHK, SCHK, MARGIN, BYTE)                                         \
  __asm__ volatile(                                                                            \
      /* f = 0: at a word boundary; else mid-word (f, g as left by an earlier call) */          \
      "cmpq $0, %[fin]\n\t"                                                                     \
      "jz .Lxp_entw%=\n\t"                                                                     \
      "sub $10, %[op]\n\t" /* (a step's head takes op less 10) */                              \
      "test %[half], %[half]\n\t"                                                              \
      "jnz .Lxp_stepb%=\n\t"                                                                   \
      "jmp .Lxp_stepa%=\n\t"                                                                   \
      ".Lxp_entw%=:\n\t"                                                                       \
      "test %[half], %[half]\n\t"                                                              \
      "jnz .Lxp_wordb%=\n\t"                                                                   \
      "jmp .Lxp_worda%=\n\t"                                                                   \
      XP_ASM_PART("a", "b", XP_F(F, NIB_a), 1, 2, DCHK, BCHK, SCHK, F, BYTE)                   \
      XP_ASM_PART("b", "a", XP_F(F, NIB_b), 0, 1, DCHK, BCHK, SCHK, F, BYTE)                   \
      /* the ends; the half register 0 in state "a", 0x100 | the byte in state "b" */          \
      ".Lxp_nearxa%=:\n\t" /* (as near, the distance's complement in rax: XP_ASM_BYTE64) */     \
      "xor %k[half], %k[half]\n\t"                                                             \
      "jmp .Lxp_nearxc%=\n\t"                                                                  \
      ".Lxp_nearxb%=:\n\t"                                                                     \
      "or $0x100, %k[half]\n\t"                                                                \
      ".Lxp_nearxc%=:\n\t"                                                                     \
      "not %%rax\n\t"                                                                          \
      "inc %%eax\n\t"                                                                          \
      "mov $2, %k[rc]\n\t"                                                                     \
      "jmp .Lxp_out%=\n\t"                                                                     \
      ".Lxp_neara%=:\n\t"                                                                      \
      "xor %k[half], %k[half]\n\t"                                                             \
      "jmp .Lxp_nearc%=\n\t"                                                                   \
      ".Lxp_nearb%=:\n\t" /* near the end: the C copies it, checked */                         \
      "or $0x100, %k[half]\n\t"                                                                \
      ".Lxp_nearc%=:\n\t"                                                                      \
      "shr $3, %%eax\n\t"                                                                      \
      "inc %%eax\n\t"                                                                          \
      "mov $2, %k[rc]\n\t"                                                                     \
      "jmp .Lxp_out%=\n\t"                                                                     \
      ".Lxp_mida25%=:\n\t"                                                                     \
      "add $15, %[op]\n\t"                                                                     \
      ".Lxp_mida10%=:\n\t"                                                                     \
      "add $10, %[op]\n\t"                                                                     \
      ".Lxp_mida0%=:\n\t"                                                                      \
      "xor %k[half], %k[half]\n\t"                                                             \
      "jmp .Lxp_midc%=\n\t"                                                                    \
      ".Lxp_midb25%=:\n\t"                                                                     \
      "add $15, %[op]\n\t"                                                                     \
      ".Lxp_midb10%=:\n\t"                                                                     \
      "add $10, %[op]\n\t"                                                                     \
      ".Lxp_midb0%=:\n\t"                                                                      \
      "or $0x100, %k[half]\n\t"                                                                \
      ".Lxp_midc%=:\n\t"                                                                       \
      "mov $3, %k[rc]\n\t"                                                                     \
      "jmp .Lxp_out%=\n\t"                                                                     \
      ".Lxp_bad%=:\n\t"                                                                        \
      "mov $-1, %k[rc]\n\t"                                                                    \
      "jmp .Lxp_out%=\n\t"                                                                     \
      ".Lxp_donea%=:\n\t"                                                                      \
      "xor %k[half], %k[half]\n\t"                                                             \
      "jmp .Lxp_donec%=\n\t"                                                                   \
      ".Lxp_doneb%=:\n\t"                                                                      \
      "or $0x100, %k[half]\n\t"                                                                \
      ".Lxp_donec%=:\n\t"                                                                      \
      XP_F(F, DONE)                                                                            \
      "xor %k[rc], %k[rc]\n\t"                                                                 \
      ".Lxp_out%=:\n\t"                                                                        \
      XP_F(F, EXIT)                                                                            \
      : [ip] "+r"(ip), [op] "+r"(op), [f] "+r"(f), [g] "+r"(g), [half] "+r"(half),            \
        [t] "+r"(t), [rc] "=r"(rc), "=&a"(a), "=&c"(c), "=&d"(d)                               \
      : [in_lim] "m"(in_lim), [out_lim] "m"(out_lim), [out_end] "m"(out_end),                 \
        [out_lim10] "m"(out_lim10), [out_lim25] "m"(out_lim25), [seven] "r"(7u),               \
        [fifteen] "r"(15u), [fin] "m"(fin),                                                    \
        [nout08] "r"(nout08), [margin] "i"((MARGIN) + 25)                                         \
      : XP_F(F, CLOB), "cc", "memory")

/* The assembly loop from *pip, *pop, *phv (a pending length nibble: 0x100 | the byte whose high
 * half it is; 0 none) at a word boundary (*pf = 0), or for the tail
 * variant also mid-word (*pf, *pg as an earlier call left them): @near = the distance checked
 * (out_lim at most out0 + 8192); @med = 1 the medium variant (1-byte lengths checked,
 * XP_MED_MARGIN), 2 the tail variant (every step checked, XP_TAIL_MARGIN), else the roomy one
 * (XP_ROOMY_MARGIN); @wide the AVX2 family (the _W margins; *pg stays 0). Returns as xp_fast:
 * 0 (*pf = 0), -1, or 1 when a length came near the output end (copied here the checked way,
 * as xp_fast does) or the tail variant stopped before a step; then *pf, *pg hold the rest of
 * the word (xp_flags_left). */
/* The AVX2 family where the CPU (and the OS) has AVX2 and the environment has no
 * ETWD_ETL_NO_AVX2 (not "0"); chosen once. Not on Windows (as the decoders' AVX2 paths). */
#if !defined(_WIN32)
static signed char xp_avx2_sel = -1;
static int xp_wide(void) {
  int v = __atomic_load_n(&xp_avx2_sel, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *no = getenv("ETWD_ETL_NO_AVX2");
    __builtin_cpu_init();
    v = (no && *no && strcmp(no, "0")) ? 0
        : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") ? 1 : 0; /* (andn) */
    __atomic_store_n(&xp_avx2_sel, (signed char)v, __ATOMIC_RELAXED);
  }
  return v && !etw_xpress_sse2_only;
}
#else
static int xp_wide(void) { return 0; }
#endif

static int xp_asm(const unsigned char **pip, unsigned char **pop, uint64_t *phv,
                  uint64_t *pf, uint64_t *pg, const unsigned char *in_lim, const unsigned char *out0,
                  unsigned char *out_lim, unsigned char *out_end, int near, int med, int wide) {
  const unsigned char *ip = *pip;
  unsigned char *op = *pop;
  uint64_t f = *pf, g = *pg, half = *phv, a, c, d;
  /* (the AVX2 family's words have no sentinel: mid-word, f without it and t the literals after
   * the word's last match, found from where the sentinel is; the entry tests the word as given) */
  uint64_t fin = f, t = 0;
  if (wide && f) {
    int s = __builtin_ctzll(f);
    f &= f - 1;
    t = (uint64_t)((f ? __builtin_ctzll(f) : 64) - s - 1);
  }
  uintptr_t nout08 = -((uintptr_t)out0 * 8); /* (mod 2^64, as the assembly's 8 op) */
  /* (the tail variant's limits for op left 10 or 25 short) */
  unsigned char *out_lim10 = out_lim - 10, *out_lim25 = out_lim - 25;
  long rc;
  if (wide) {
    if (med == 2 && near)
      XP_ASM_LOOP(XA, XP_ASM_DCHKW, XP_ASM_BCHK, XP_ASM_SCHK, XP_TAIL_MARGIN_W, XP_ASM_BYTE0);
    else if (med == 2)
      XP_ASM_LOOP(XA, XP_ASM_NONE, XP_ASM_BCHK, XP_ASM_SCHK, XP_TAIL_MARGIN_W, XP_ASM_BYTE0);
    else if (near && med)
      XP_ASM_LOOP(XA, XP_ASM_DCHKW, XP_ASM_BCHK, XP_ASM_NONE, XP_MED_MARGIN_W, XP_ASM_BYTE0);
    else if (near)
      XP_ASM_LOOP(XA, XP_ASM_DCHKW, XP_ASM_NONE, XP_ASM_NONE, XP_ROOMY_MARGIN_W, XP_ASM_BYTE64);
    else if (med)
      XP_ASM_LOOP(XA, XP_ASM_NONE, XP_ASM_BCHK, XP_ASM_NONE, XP_MED_MARGIN_W, XP_ASM_BYTE0);
    else
      XP_ASM_LOOP(XA, XP_ASM_NONE, XP_ASM_NONE, XP_ASM_NONE, XP_ROOMY_MARGIN_W, XP_ASM_BYTE64);
  } else {
    if (med == 2 && near)
      XP_ASM_LOOP(XS, XP_ASM_DCHK, XP_ASM_BCHK, XP_ASM_SCHK, XP_TAIL_MARGIN, XP_ASM_BYTE0);
    else if (med == 2)
      XP_ASM_LOOP(XS, XP_ASM_NONE, XP_ASM_BCHK, XP_ASM_SCHK, XP_TAIL_MARGIN, XP_ASM_BYTE0);
    else if (near && med)
      XP_ASM_LOOP(XS, XP_ASM_DCHK, XP_ASM_BCHK, XP_ASM_NONE, XP_MED_MARGIN, XP_ASM_BYTE0);
    else if (near)
      XP_ASM_LOOP(XS, XP_ASM_DCHK, XP_ASM_NONE, XP_ASM_NONE, XP_ROOMY_MARGIN, XP_ASM_BYTE0);
    else if (med)
      XP_ASM_LOOP(XS, XP_ASM_NONE, XP_ASM_BCHK, XP_ASM_NONE, XP_MED_MARGIN, XP_ASM_BYTE0);
    else
      XP_ASM_LOOP(XS, XP_ASM_NONE, XP_ASM_NONE, XP_ASM_NONE, XP_ROOMY_MARGIN, XP_ASM_BYTE0);
  }
  (void)c;
  if (rc <= 0)
    f = 0;
  else if (wide) /* (the sentinel put back below the t literals) */
    f |= 1ull << ((f ? __builtin_ctzll(f) : 64) - (int)t - 1);
  *pip = ip;
  *phv = half;
  *pf = f;
  *pg = g;
  if (rc == 2) {
    size_t len = (size_t)d + 25, off = (size_t)a, room = (size_t)(out_end - op);
    if (len > room) len = room;
    copy_match(op, off, len, room);
    op += len;
    rc = 1;
  } else if (rc == 3) {
    rc = 1; /* stopped before a step: *pf holds the rest of the word */
  }
  *pop = op;
  return (int)rc;
}
#endif

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
    uint64_t f = 0, g = 0; /* (g: the assembly loop's second half of a word) */
    uint64_t hv = 0;       /* (the assembly loop's pending nibble, as pend) */
    int rc = 0;
#ifdef XP_ASM
    if (!etw_xpress_c_only) {
      /* the first 8 KiB and then the rest up to XP_ROOMY_MARGIN; up to XP_MED_MARGIN the same
       * (both only as far as they reach); the _W margins for the AVX2 family (both ≤ 360 input
       * and 512 output bytes) */
      int w = xp_wide();
      size_t roomy_m = w ? XP_ROOMY_MARGIN_W : XP_ROOMY_MARGIN, med_m = w ? XP_MED_MARGIN_W : XP_MED_MARGIN;
      size_t tail_in = w ? XP_TAIL_IN_W : XP_TAIL_IN, tail_m = w ? XP_TAIL_MARGIN_W : XP_TAIL_MARGIN;
      unsigned char *near_lim = out + (n_out < 8192 ? n_out : 8192);
      if (n_out >= roomy_m) {
        unsigned char *roomy_lim = out + (n_out - roomy_m) + 1;
        rc = xp_asm(&fip, &fop, &hv, &f, &g, in_lim, out, near_lim < roomy_lim ? near_lim : roomy_lim, out + n_out, 1, 0, w);
        if (rc == 0 && fop - out >= 8192)
          rc = xp_asm(&fip, &fop, &hv, &f, &g, in_lim, out, roomy_lim, out + n_out, 0, 0, w);
      }
      if (rc == 0 && n_out >= med_m) {
        unsigned char *med_lim = out + (n_out - med_m) + 1;
        if (fop - out < 8192)
          rc = xp_asm(&fip, &fop, &hv, &f, &g, in_lim, out, near_lim < med_lim ? near_lim : med_lim, out + n_out, 1, 1, w);
        if (rc == 0 && fop - out >= 8192)
          rc = xp_asm(&fip, &fop, &hv, &f, &g, in_lim, out, med_lim, out + n_out, 0, 1, w);
      }
      /* then step by step up to the tail margins (the distance checked unless 8 KiB are
       * written), also after a long match near the end (mid-word) */
      if (rc >= 0)
        rc = xp_asm(&fip, &fop, &hv, &f, &g, in + (n_in - tail_in) + 1, out, out + (n_out - tail_m) + 1,
                    out + n_out, fop - out < 8192, 2, w);
    } else
#endif
    {
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
    }
    if (rc < 0) return -1;
    ip = (size_t)(fip - in);
    op = (size_t)(fop - out);
    pend = fhalf ? 0x100u | *fhalf : (unsigned)hv;
    if (rc > 0) {
      if (g >> 32 & 1) {
        /* the assembly loop stopped in a word's first half: its second half after the items
         * left, then the sentinel (f's lowest set bit, at 47 or above) */
        int p = __builtin_ctzll(f);
        f = (f & ~(1ull << p)) | (g & 0xFFFF) << (p - 15) | 1ull << (p - 16);
      }
      /* the rest of that word goes the checked way: the sentinel is the lowest set bit, below
       * the flags not yet used */
      nflags = 63 - __builtin_ctzll(f);
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
