/* test_dec_maps.c — value-map / bit-map rendering (dec_map_render) against a reference written
 * here from the documented rules, on random maps and values.
 *
 * dec_map_render replaces the number just written at w[mark..] by the map's text. Its fast path
 * (map_prep: every text printable ASCII without '"' or '\\', and a bitmap's joined texts always
 * fit 1 KiB; the writer has room) writes the texts over the number directly; otherwise it builds
 * the text in a buffer and escapes it. The rules (docs/etl.md "Field rendering"):
 *   value map: the first entry whose value equals v gives the text; no entry: the number stays;
 *   bit map:   the entries in map order whose value is 0 (matches only v == 0) or whose bits are
 *              all set in v, their texts joined with '|' (a '|' only after something was
 *              written, so empty texts add nothing before the first non-empty one); joining
 *              stops at the first text that would bring the text to 1021 bytes or more; when
 *              nothing was written the number stays; otherwise the bits of v not covered by
 *              the joined entries follow as "|0x<hex>" if that still fits (text + 24 < 1024);
 *   the text is written as a JSON string (jw.c's escaping: RFC 8259, invalid UTF-8 → U+FFFD).
 *
 * Each random map is rendered three ways and compared byte for byte with the reference:
 * as it comes (fast path when eligible), with the general path forced (prep done, plain = 0),
 * and into a writer too small for the fast path. Maps: empty, value and bit maps of 1–40
 * entries, single bits, multi-bit masks, zero entries, duplicates; texts: plain ASCII, empty,
 * quotes, backslashes, control bytes, DEL, valid multi-byte UTF-8, invalid UTF-8, long texts
 * (joined > 1 KiB). Values: 0, entry values, unions of entries, with unmatched bits (also above
 * bit 31), random 64-bit numbers; the number written before as decimal or as "0x…" text.
 * ETWD_SEED=N reruns another sequence.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/jw.h"
#include "t.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 2685821657736338717ull;
}
static uint32_t below(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

/* ---- random texts */
static const char *const PIECES[] = {
    "\"", "\\", "\n", "\t", "\x01", "\x1f", "\x7f", "\xc3\xa9" /* é */, "\xe4\xb8\xad" /* 中 */,
    "\xf0\x9f\x98\x80" /* 😀 */, "\xc3" /* cut */, "\xff", "\xed\xa0\x80" /* surrogate */, "\xc0\xaf" /* overlong */,
    "\xe2\x82" /* cut */, "\x80"};

/* kind 0: plain ASCII; 1: may hold special pieces; 2: long plain */
static char *rand_text(int kind) {
  size_t n = kind == 2 ? 100 + below(500) : below(5) == 0 ? 0 : 1 + below(12);
  char *s = malloc(n * 4 + 8), *o = s;
  for (size_t i = 0; i < n; i++) {
    if (kind == 1 && below(4) == 0) {
      const char *p = PIECES[below(sizeof PIECES / sizeof PIECES[0])];
      size_t l = strlen(p);
      memcpy(o, p, l);
      o += l;
    } else {
      static const char A[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                              "_ .:/-()[]{}<>=!?#$%&*+,;@^`~'";
      *o++ = A[below(sizeof A - 1)];
    }
  }
  *o = 0;
  return s;
}

static uint32_t rand_val(int bitmap, const struct dec_map *m) {
  uint32_t c = below(8);
  if (c == 3 && m->n) return m->val[below(m->n)]; /* a duplicate of an earlier entry */
  if (bitmap) {
    if (c == 0) return 0;
    if (c == 1) return (1u << below(32)) | (1u << below(32)); /* a mask of 1–2 bits */
    if (c == 2) return (uint32_t)rnd();
    return 1u << below(32);
  }
  if (c < 3) return below(20);
  if (c < 5) return (uint32_t)rnd();
  return below(4);
}

static struct dec_map *rand_map(void) {
  struct dec_map *m = calloc(1, sizeof *m);
  m->bitmap = (int)below(2);
  uint32_t shape = below(10);
  uint32_t n = shape == 0 ? 0 : shape < 6 ? 1 + below(8) : 1 + below(40);
  int kind = below(10) < 6 ? 0 : 1; /* most maps plain, for the fast path */
  int longs = below(8) == 0;        /* some with long texts: joined > 1 KiB */
  m->val = calloc(n ? n : 1, sizeof *m->val);
  m->str = calloc(n ? n : 1, sizeof *m->str);
  for (uint32_t i = 0; i < n; i++) {
    m->n = i; /* rand_val may pick a duplicate among the entries so far */
    m->val[i] = rand_val(m->bitmap, m);
    m->str[i] = rand_text(longs && below(2) ? 2 : kind == 1 && below(3) == 0 ? 1 : 0);
  }
  m->n = n;
  return m;
}

static uint64_t rand_v(const struct dec_map *m) {
  uint64_t v = 0;
  switch (below(8)) {
  case 0: return 0;
  case 1: return rnd();
  case 2: return below(64);
  case 3: /* an entry value */
    return m->n ? m->val[below(m->n)] : rnd() & 0xFF;
  default: /* a union of entries, sometimes with other bits */
    for (uint32_t k = 1 + below(4); k-- > 0 && m->n;) v |= m->val[below(m->n)];
    if (below(2)) v |= 1ull << below(64);
    return v;
  }
}

/* ---- the reference */
static void ref_render(struct etw_jw *out, const struct dec_map *m, uint64_t v, const char *num, size_t numlen) {
  if (!m->bitmap) {
    for (uint32_t q = 0; q < m->n; q++)
      if ((uint64_t)m->val[q] == v) {
        etw_jw_str(out, m->str[q], strlen(m->str[q]));
        return;
      }
    etw_jw_raw(out, num, numlen);
    return;
  }
  /* the matching entries, in map order */
  uint32_t *hit = malloc((m->n ? m->n : 1) * sizeof *hit), nh = 0;
  for (uint32_t q = 0; q < m->n; q++)
    if (m->val[q] == 0 ? v == 0 : (v & m->val[q]) == m->val[q]) hit[nh++] = q;
  /* joined while each text keeps the total under 1021 bytes */
  char *text = malloc(1024 + 64);
  size_t tl = 0;
  uint64_t covered = 0;
  for (uint32_t k = 0; k < nh; k++) {
    const char *s = m->str[hit[k]];
    size_t l = strlen(s);
    if (tl + l + 3 >= 1024) break;
    if (tl > 0) text[tl++] = '|';
    memcpy(text + tl, s, l);
    tl += l;
    covered |= m->val[hit[k]];
  }
  if (tl == 0) {
    etw_jw_raw(out, num, numlen);
  } else {
    uint64_t rest = v & ~covered;
    if (rest && tl + 24 < 1024) tl += (size_t)sprintf(text + tl, "|0x%llx", (unsigned long long)rest);
    etw_jw_str(out, text, tl);
  }
  free(text);
  free(hit);
}

int main(void) {
  const char *seed = getenv("ETWD_SEED");
  if (seed && *seed) rs = strtoull(seed, NULL, 0);
  if (!rs) rs = 1; /* xorshift needs a non-zero state */
  fprintf(stderr, "seed 0x%llx\n", (unsigned long long)rs);
  const int MAPS = 20000, VALUES = 20;
  size_t renders = 0, fast = 0, fast_text = 0, kept = 0, rest_hex = 0, cut = 0, empty_maps = 0, nonplain = 0,
         bad = 0;
  struct etw_jw w, g, t, r;
  etw_jw_init(&w, 0);
  etw_jw_init(&g, 0);
  etw_jw_init(&r, 0);
  static const char PREFIX[] = ",\"Flags_field\":";
  for (int mi = 0; mi < MAPS; mi++) {
    struct dec_map *m = rand_map();
    /* the same texts, the general path forced */
    struct dec_map gm = *m;
    gm.prep = 1;
    gm.plain = 0;
    gm.slen = NULL;
    empty_maps += m->n == 0;
    for (int vi = 0; vi < VALUES; vi++) {
      uint64_t v = rand_v(m);
      int hex = (int)below(2);
      char num[32];
      size_t numlen;
      {
        struct etw_jw nw;
        etw_jw_init(&nw, 0);
        if (hex) dec_hex(&nw, v);
        else dec_u64(&nw, v);
        numlen = nw.len;
        memcpy(num, nw.buf, numlen);
        etw_jw_free(&nw);
      }
      r.len = 0;
      etw_jw_raw(&r, PREFIX, sizeof PREFIX - 1);
      ref_render(&r, m, v, num, numlen);
      const char *want = etw_jw_cstr(&r);
      /* 1. as it comes (room for the fast path) */
      w.len = 0;
      etw_jw_raw(&w, PREFIX, sizeof PREFIX - 1);
      size_t mark = w.len;
      etw_jw_raw(&w, num, numlen);
      etw_jw_reserve(&w, 4096);
      dec_map_render(&w, m, mark, v);
      int was_fast = m->plain;
      fast += was_fast;
      int ok = !w.err && !strcmp(etw_jw_cstr(&w), want);
      /* 2. the general path */
      g.len = 0;
      etw_jw_raw(&g, PREFIX, sizeof PREFIX - 1);
      etw_jw_raw(&g, num, numlen);
      dec_map_render(&g, &gm, mark, v);
      ok &= !g.err && !strcmp(etw_jw_cstr(&g), want);
      /* 3. a writer without room for the fast path (texts short enough for its maximum) */
      if (m->plain && r.len < 150) {
        etw_jw_init(&t, 1100);
        etw_jw_raw(&t, PREFIX, sizeof PREFIX - 1);
        etw_jw_raw(&t, num, numlen);
        CHECK(t.cap - t.len <= 1024 + 64);
        dec_map_render(&t, m, mark, v);
        ok &= !t.err && !strcmp(etw_jw_cstr(&t), want);
        etw_jw_free(&t);
      }
      renders++;
      if (!ok && bad++ < 5)
        fprintf(stderr, "map %d (bitmap %d, %u entries, plain %d) v=0x%llx:\n  want %s\n  fast %s\n  gen  %s\n", mi,
                m->bitmap, m->n, m->plain, (unsigned long long)v, want, etw_jw_cstr(&w), etw_jw_cstr(&g));
      /* coverage */
      int same_num = r.len == sizeof PREFIX - 1 + numlen;
      kept += same_num;
      if (was_fast && !same_num) fast_text++;
      rest_hex += !same_num && m->bitmap && strstr(want, "|0x") != NULL;
      nonplain += !m->plain;
    }
    /* a bitmap whose texts are cut: the joined texts pass 1 KiB */
    if (m->bitmap && !m->plain) {
      size_t total = 0;
      for (uint32_t q = 0; q < m->n; q++) total += strlen(m->str[q]) + 1;
      cut += total + 27 >= 1024;
    }
    dec_map_free(m);
  }
  etw_jw_free(&w);
  etw_jw_free(&g);
  etw_jw_free(&r);
  fprintf(stderr,
          "%zu renders of %d maps (%zu empty): %zu through the fast path (%zu wrote a text), %zu kept the number, "
          "%zu with unnamed bits as |0x…, %zu in maps that are not plain, %zu long bitmaps\n",
          renders, MAPS, empty_maps, fast, fast_text, kept, rest_hex, nonplain, cut);
  CHECK_EQ(bad, 0);
  /* the sequence reaches every case */
  CHECK(empty_maps > 100 && fast_text > 50000 && kept > 10000 && rest_hex > 10000 && nonplain > 10000 && cut > 100);
  T_DONE();
}
