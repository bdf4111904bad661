/* test_jw.c — the JSON writer: escaping, invalid UTF-8, UTF-16 with surrogates, integers at the
 * ends of their range, GUIDs both ways, times (FILETIME and ns, before 1970 and at the int64
 * ends), base64, and the hard maximum. */
#include <stdint.h>

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
