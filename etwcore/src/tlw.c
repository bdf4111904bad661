/* tlw.c — TraceLogging metadata and payload writer (see tlw.h). Pure data; any thread. */
#include "etwcore/tlw.h"

#include <stdio.h>
#include <string.h>

#include "etwcore/jw.h"
#include "etwcore/winreq.h"

enum { IN_UNICODESTRING = 1, IN_ANSISTRING = 2, IN_UINT32 = 8, IN_INT64 = 9, IN_DOUBLE = 12,
       IN_BOOL32 = 13, IN_GUID = 15, IN_HEXINT64 = 21, OUT_UTF8 = 35, CHAIN = 0x80 };

static void put(unsigned char *buf, size_t cap, size_t *len, int *err, const void *p, size_t n) {
  if (*err || n > cap - *len) {
    *err = 1;
    return;
  }
  memcpy(buf + *len, p, n);
  *len += n;
}

static void meta(struct etw_tlw *w, const void *p, size_t n) { put(w->meta, sizeof w->meta, &w->meta_len, &w->err, p, n); }
static void data(struct etw_tlw *w, const void *p, size_t n) { put(w->data, sizeof w->data, &w->data_len, &w->err, p, n); }

static void le(struct etw_tlw *w, uint64_t v, int bytes) {
  unsigned char b[8];
  for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
  data(w, b, (size_t)bytes);
}

/* the field's metadata: name, InType (and OutType) */
static void field(struct etw_tlw *w, const char *name, unsigned in, unsigned out) {
  unsigned char t[2] = {(unsigned char)(in | (out ? CHAIN : 0)), (unsigned char)out};
  meta(w, name, strlen(name) + 1);
  meta(w, t, out ? 2 : 1);
}

void etw_tlw_begin(struct etw_tlw *w, const char *name) {
  w->meta_len = w->data_len = 0;
  w->err = 0;
  unsigned char head[3] = {0, 0, 0}; /* size (filled by end), tags */
  meta(w, head, 3);
  meta(w, name, strlen(name) + 1);
}

void etw_tlw_u32(struct etw_tlw *w, const char *name, uint32_t v) {
  field(w, name, IN_UINT32, 0);
  le(w, v, 4);
}

void etw_tlw_i64(struct etw_tlw *w, const char *name, int64_t v) {
  field(w, name, IN_INT64, 0);
  le(w, (uint64_t)v, 8);
}

void etw_tlw_hex64(struct etw_tlw *w, const char *name, uint64_t v) {
  field(w, name, IN_HEXINT64, 0);
  le(w, v, 8);
}

void etw_tlw_double(struct etw_tlw *w, const char *name, double v) {
  uint64_t x;
  memcpy(&x, &v, 8);
  field(w, name, IN_DOUBLE, 0);
  le(w, x, 8);
}

void etw_tlw_bool(struct etw_tlw *w, const char *name, int v) {
  field(w, name, IN_BOOL32, 0);
  le(w, v ? 1 : 0, 4);
}

void etw_tlw_guid(struct etw_tlw *w, const char *name, const unsigned char g[16]) {
  field(w, name, IN_GUID, 0);
  data(w, g, 16);
}

void etw_tlw_str(struct etw_tlw *w, const char *name, const char *utf8) {
  field(w, name, IN_ANSISTRING, OUT_UTF8);
  data(w, utf8, strlen(utf8) + 1);
}

void etw_tlw_wstr(struct etw_tlw *w, const char *name, const char *utf8) {
  uint16_t u[256];
  long n = etw_utf8_to_utf16(utf8, u, sizeof u / sizeof u[0]);
  field(w, name, IN_UNICODESTRING, 0);
  if (n < 0) {
    w->err = 1;
    return;
  }
  for (long i = 0; i <= n; i++) le(w, u[i], 2); /* with the NUL */
}

int etw_tlw_end(struct etw_tlw *w) {
  if (w->err || w->meta_len > 0xFFFF) return -1;
  w->meta[0] = (unsigned char)(w->meta_len & 0xFF);
  w->meta[1] = (unsigned char)(w->meta_len >> 8);
  return 0;
}

size_t etw_tlw_traits(const char *provider, unsigned char *out, size_t cap) {
  size_t n = 2 + strlen(provider) + 1;
  if (n > cap || n > 0xFFFF) return 0;
  out[0] = (unsigned char)(n & 0xFF);
  out[1] = (unsigned char)(n >> 8);
  memcpy(out + 2, provider, n - 2);
  return n;
}

/* ---- the self-test's event: known values of every kind the writer has */
#define ST_INT64 (-1234567890123LL)
#define ST_TEXT "etwd selftest \xc3\xa9\xe2\x9c\x93"  /* UTF-8: é ✓ */
#define ST_WIDE "wide \xc3\xbc\xe2\x82\xac"           /* UTF-16 on the wire: ü € */

int etw_tlw_selftest_event(struct etw_tlw *w, uint32_t seq, uint64_t nonce) {
  unsigned char g[16];
  etw_parse_guid(ETW_TLW_PROVIDER_GUID, g);
  etw_tlw_begin(w, ETW_TLW_SELFTEST_EVENT);
  etw_tlw_u32(w, "Seq", seq);
  etw_tlw_hex64(w, "Nonce", nonce);
  etw_tlw_i64(w, "Int64", ST_INT64);
  etw_tlw_double(w, "Double", 2.5);
  etw_tlw_bool(w, "Bool", 1);
  etw_tlw_str(w, "Text", ST_TEXT);
  etw_tlw_wstr(w, "Wide", ST_WIDE);
  etw_tlw_guid(w, "Guid", g);
  return etw_tlw_end(w);
}

int etw_tlw_selftest_check(const char *json, uint32_t seq, uint64_t nonce, char *why, size_t n) {
  char want[10][160];
  int k = 0;
  snprintf(want[k++], sizeof want[0], "\"Provider\":{\"Name\":\"%s\",\"Guid\":\"%s\"}", ETW_TLW_PROVIDER,
           ETW_TLW_PROVIDER_GUID);
  snprintf(want[k++], sizeof want[0], "\"EventName\":\"%s\"", ETW_TLW_SELFTEST_EVENT);
  snprintf(want[k++], sizeof want[0], "\"Seq\":%u", (unsigned)seq);
  snprintf(want[k++], sizeof want[0], "\"Nonce\":\"0x%llx\"", (unsigned long long)nonce);
  snprintf(want[k++], sizeof want[0], "\"Int64\":%lld", (long long)ST_INT64);
  snprintf(want[k++], sizeof want[0], "\"Double\":2.5");
  snprintf(want[k++], sizeof want[0], "\"Bool\":true");
  snprintf(want[k++], sizeof want[0], "\"Text\":\"%s\"", ST_TEXT);
  snprintf(want[k++], sizeof want[0], "\"Wide\":\"%s\"", ST_WIDE);
  snprintf(want[k++], sizeof want[0], "\"Guid\":\"%s\"", ETW_TLW_PROVIDER_GUID);
  for (int i = 0; i < k; i++)
    if (!strstr(json, want[i])) {
      snprintf(why, n, "expected %s", want[i]);
      return 0;
    }
  return 1;
}

int etw_tlw_marker_event(struct etw_tlw *w, const char *text) {
  etw_tlw_begin(w, ETW_TLW_MARKER_EVENT);
  etw_tlw_str(w, ETW_TLW_MARKER_FIELD, text);
  return etw_tlw_end(w);
}
