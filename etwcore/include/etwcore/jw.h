/* jw.h — the hand-written JSON writer used for every event (encode once, fan out many).
 *
 * cJSON is ~20x slower per event and stores numbers as doubles (64-bit values lose precision),
 * so events are written with these append functions; cJSON is kept for REST bodies only.
 *
 * A `struct etw_jw` is a growable byte buffer with a hard maximum (`max`). When an append would
 * exceed the maximum (or allocation fails) the writer sets `err` and ignores further appends; the
 * caller checks `err` once at the end, rolls back with `etw_jw_truncate` and drops/counts the
 * event. Nothing here is thread-safe: one writer per thread. The buffer is freed by
 * `etw_jw_free` (or handed over by `etw_jw_steal`).
 *
 * Strings are escaped per RFC 8259; invalid UTF-8 bytes become U+FFFD so output is always valid
 * JSON text.
 */
#ifndef ETWCORE_JW_H
#define ETWCORE_JW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct etw_jw {
  char *buf;
  size_t len, cap, max;
  int err; /* 1 = maximum reached, 2 = out of memory */
};

/** etw_jw_init - empty writer with hard maximum @max bytes (0 = 64 MiB). No allocation yet. */
void etw_jw_init(struct etw_jw *w, size_t max);
/** etw_jw_free - free the buffer; @w may be reused after etw_jw_init. */
void etw_jw_free(struct etw_jw *w);
/** etw_jw_grow - slow path of reservation; returns 0 when @extra more bytes fit. */
int etw_jw_grow(struct etw_jw *w, size_t extra);
/** etw_jw_steal - hand the buffer (NUL-terminated) to the caller, who frees it; resets @w. */
char *etw_jw_steal(struct etw_jw *w, size_t *len);

static inline int etw_jw_reserve(struct etw_jw *w, size_t extra) {
  if (w->err) return -1;
  if (w->cap - w->len > extra) return 0; /* keep one byte for a NUL */
  return etw_jw_grow(w, extra);
}
static inline void etw_jw_truncate(struct etw_jw *w, size_t len) {
  if (len < w->len) w->len = len;
  w->err = 0;
}
static inline void etw_jw_raw(struct etw_jw *w, const char *s, size_t n) {
  if (etw_jw_reserve(w, n)) return;
  memcpy(w->buf + w->len, s, n);
  w->len += n;
}
static inline void etw_jw_lit(struct etw_jw *w, const char *s) { etw_jw_raw(w, s, strlen(s)); }
static inline void etw_jw_ch(struct etw_jw *w, char c) {
  if (etw_jw_reserve(w, 1)) return;
  w->buf[w->len++] = c;
}
/** etw_jw_cstr - the NUL-terminated content (always valid after any append; "" when empty). */
const char *etw_jw_cstr(struct etw_jw *w);

/** etw_jw_str - append @s[0..n) as a quoted, escaped JSON string (plain ASCII runs 16 bytes at a
 *  time where SSE2 is available). */
void etw_jw_str(struct etw_jw *w, const char *s, size_t n);
/** etw_jw_str_scalar - etw_jw_str without SIMD (kept callable so the tests compare both). */
void etw_jw_str_scalar(struct etw_jw *w, const char *s, size_t n);
static inline void etw_jw_cs(struct etw_jw *w, const char *s) { etw_jw_str(w, s, s ? strlen(s) : 0); }
/** etw_jw_key - append `"key":` (key must not need escaping: it is copied verbatim). */
static inline void etw_jw_key(struct etw_jw *w, const char *k) {
  size_t n = strlen(k);
  if (etw_jw_reserve(w, n + 3)) return;
  char *p = w->buf + w->len;
  *p++ = '"';
  memcpy(p, k, n);
  p += n;
  *p++ = '"';
  *p++ = ':';
  w->len += n + 3;
}
/** etw_jw_str16 - append UTF-16LE code units @s[0..n) (bytes need not be aligned) as a string;
 *  stops at the first NUL unit; unpaired surrogates become U+FFFD. */
void etw_jw_str16(struct etw_jw *w, const unsigned char *s, size_t units);
/** etw_jw_str16n - the same, returning the units converted (< @units when a NUL unit ended the
 *  string; also when the writer is in error, which writes nothing). Plain ASCII is converted 8
 *  units at a time where SSE2 is available. */
size_t etw_jw_str16n(struct etw_jw *w, const unsigned char *s, size_t units);
/** etw_jw_put_str16 - etw_jw_str16n's text after the opening quote (the string's characters and
 *  the closing quote) at @p, which must have room for 6 bytes per unit + 1 (no reservation, no
 *  error state): returns the end, *@conv = the units converted. */
char *etw_jw_put_str16(char *p, const unsigned char *s, size_t units, size_t *conv);
/** etw_jw_str16n_scalar - etw_jw_str16n without SIMD (the fallback where SSE2 is missing; kept
 *  callable so the tests compare both on every platform). */
size_t etw_jw_str16n_scalar(struct etw_jw *w, const unsigned char *s, size_t units);

void etw_jw_u64(struct etw_jw *w, uint64_t v);
void etw_jw_i64(struct etw_jw *w, int64_t v);
/** etw_jw_hex - append "0x…" (quoted, lower-case, no leading zeros, width >= 1). */
void etw_jw_hex(struct etw_jw *w, uint64_t v);
/** etw_jw_hexw - append "0x" + exactly @digits hex digits (quoted), e.g. keywords as 16 digits. */
void etw_jw_hexw(struct etw_jw *w, uint64_t v, int digits);
/** etw_jw_double - shortest round-trip representation; NaN/Inf are written as strings. */
void etw_jw_double(struct etw_jw *w, double v);
/** etw_jw_bool - true/false. */
static inline void etw_jw_bool(struct etw_jw *w, int v) { etw_jw_lit(w, v ? "true" : "false"); }
/** etw_jw_guid - append "{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}" from the 16-byte Windows
 *  layout (first three groups little-endian). */
void etw_jw_guid(struct etw_jw *w, const unsigned char g[16]);
/** etw_jw_time100 - append an ISO 8601 UTC string with 7 fractional digits from a FILETIME
 *  (100 ns ticks since 1601-01-01). */
void etw_jw_filetime(struct etw_jw *w, uint64_t filetime);
/** etw_jw_unix_ns - same shape from nanoseconds since 1970-01-01 (rounded down to 100 ns). */
void etw_jw_unix_ns(struct etw_jw *w, int64_t ns);
/** etw_jw_base64 - append @p[0..n) base64-encoded (quoted). */
void etw_jw_base64(struct etw_jw *w, const unsigned char *p, size_t n);

/** etw_format_guid - the same GUID text into @out (39 bytes incl. NUL, with braces). */
void etw_format_guid(char out[39], const unsigned char g[16]);
/** etw_parse_guid - parse "{…}" or bare GUID text into the 16-byte Windows layout; 0 = ok. */
int etw_parse_guid(const char *s, unsigned char g[16]);
/** ETW_GUID_BYTES - an initializer of the 16-byte Windows layout of GUID
 *  {a-b-c-d0d1-d2d3d4d5d6d7} (Data1..Data3 little-endian), for constant tables. */
#define ETW_GUID_BYTES(a, b, c, d0, d1, d2, d3, d4, d5, d6, d7)                                        \
  {(unsigned char)((a) & 0xff), (unsigned char)((a) >> 8 & 0xff), (unsigned char)((a) >> 16 & 0xff), \
   (unsigned char)((a) >> 24 & 0xff), (unsigned char)((b) & 0xff), (unsigned char)((b) >> 8 & 0xff), \
   (unsigned char)((c) & 0xff), (unsigned char)((c) >> 8 & 0xff), d0, d1, d2, d3, d4, d5, d6, d7}

#endif
