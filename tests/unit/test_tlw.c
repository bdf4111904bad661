/* test_tlw.c — etwd's TraceLogging writer (etwcore/src/tlw.c) against our decoder: the event
 * `etwd selftest` writes on Windows (etw_tlw_selftest_event) is put into a struct etw_rec the
 * way win_rec.c mirrors the EVENT_RECORD ETW delivers (extended items 12 = provider traits,
 * 11 = event metadata, the payload as user data, channel 11) and decoded by the shared decoder
 * (the ETL reader's and the live consumer's), fast and reference: every known value comes back,
 * the self-test's own check accepts it and rejects other values, and the writer refuses what
 * does not fit instead of writing past its buffers. The marker event the win backend writes
 * (etw_tlw_marker_event, win_marker.c) decodes to provider "etwd", event "Marker", EventData.buf.
 */
#include "decode.h"
#include "etwcore/tlw.h"
#include "t.h"

static const char *decode(const struct etw_tlw *w, const unsigned char *traits, size_t tn,
                          enum etw_decode_mode mode, struct etw_jw *out, int *ok) {
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_EVENT;
  r.ptr_size = 8;
  r.flags = ETW_EVH_EXTENDED_INFO | ETW_EVH_64_BIT_HEADER;
  r.pid = 4242;
  r.tid = 77;
  r.filetime = 133800000000000000ULL;
  r.desc.level = 4;
  r.desc.channel = ETW_TLW_CHANNEL;
  etw_parse_guid(ETW_TLW_PROVIDER_GUID, r.provider_id);
  r.n_ext = 2;
  r.ext[0] = (struct etw_ext_item){ETW_EXT_PROV_TRAITS, (uint16_t)tn, traits};
  r.ext[1] = (struct etw_ext_item){ETW_EXT_EVENT_SCHEMA_TL, (uint16_t)w->meta_len, w->meta};
  r.user_data = w->data;
  r.user_len = (uint32_t)w->data_len;
  struct etw_decoder *d = etw_decoder_new(NULL);
  etw_decoder_set_mode(d, mode);
  struct etw_evref ref;
  out->len = 0;
  *ok = etw_decoder_write(d, &r, out, &ref);
  etw_decoder_free(d);
  return etw_jw_cstr(out);
}

static void test_selftest_event(void) {
  unsigned char traits[64];
  size_t tn = etw_tlw_traits(ETW_TLW_PROVIDER, traits, sizeof traits);
  CHECK_EQ(tn, 2 + 5);
  CHECK(traits[0] == 7 && traits[1] == 0 && !memcmp(traits + 2, "etwd", 5));
  struct etw_tlw w;
  CHECK_EQ(etw_tlw_selftest_event(&w, 3, 0x1234abcd5678ef01ULL), 0);
  CHECK_EQ(w.meta[0] | w.meta[1] << 8, w.meta_len);
  struct etw_jw out, ref;
  etw_jw_init(&out, 0);
  etw_jw_init(&ref, 0);
  int ok = 0, ok2 = 0;
  const char *j = decode(&w, traits, tn, ETW_DECODE_FAST, &out, &ok);
  const char *j2 = decode(&w, traits, tn, ETW_DECODE_REFERENCE, &ref, &ok2);
  CHECK(ok && ok2);
  CHECK_STR(j, j2);
  /* the values, spelled out here independently of the self-test's check */
  static const char *const want[] = {
      "\"Provider\":{\"Name\":\"etwd\",\"Guid\":\"{923c4d8b-47a4-5050-333b-e904c11a4b60}\"}",
      "\"EventName\":\"SelfTest\"", "\"Level\":4", "\"ProcessID\":4242,\"ThreadID\":77",
      "\"EventData\":{\"Seq\":3,\"Nonce\":\"0x1234abcd5678ef01\",\"Int64\":-1234567890123,\"Double\":2.5,"
      "\"Bool\":true,\"Text\":\"etwd selftest \xc3\xa9\xe2\x9c\x93\",\"Wide\":\"wide \xc3\xbc\xe2\x82\xac\","
      "\"Guid\":\"{923c4d8b-47a4-5050-333b-e904c11a4b60}\"}"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(j, want[i])) {
      fprintf(stderr, "missing %s in\n%s\n", want[i], j);
      CHECK(0);
    }
  char why[256] = "";
  CHECK(etw_tlw_selftest_check(j, 3, 0x1234abcd5678ef01ULL, why, sizeof why));
  CHECK(!etw_tlw_selftest_check(j, 4, 0x1234abcd5678ef01ULL, why, sizeof why));
  CHECK(strstr(why, "\"Seq\":4") != NULL);
  CHECK(!etw_tlw_selftest_check(j, 3, 1, why, sizeof why));
  CHECK(strstr(why, "\"Nonce\":\"0x1\"") != NULL);
  /* without the provider traits the name is not "etwd": the check says so */
  j = decode(&w, traits, 0, ETW_DECODE_FAST, &out, &ok);
  CHECK(!etw_tlw_selftest_check(j, 3, 0x1234abcd5678ef01ULL, why, sizeof why));
  CHECK(strstr(why, "Provider") != NULL);
  /* a payload cut short is not accepted as the event */
  w.data_len -= 4;
  j = decode(&w, traits, tn, ETW_DECODE_FAST, &out, &ok);
  CHECK(!ok);
  CHECK(!etw_tlw_selftest_check(j, 3, 0x1234abcd5678ef01ULL, why, sizeof why));
  etw_jw_free(&out);
  etw_jw_free(&ref);
}

/* the marker @text decodes (fast and reference) to exactly {"buf":@want_json} of etwd/Marker */
static void check_marker(const char *text, const char *want_json) {
  unsigned char traits[64];
  size_t tn = etw_tlw_traits(ETW_TLW_PROVIDER, traits, sizeof traits);
  static struct etw_tlw w;
  CHECK_EQ(etw_tlw_marker_event(&w, text), 0);
  struct etw_jw out, ref, want;
  etw_jw_init(&out, 0);
  etw_jw_init(&ref, 0);
  etw_jw_init(&want, 0);
  int ok = 0, ok2 = 0;
  const char *j = decode(&w, traits, tn, ETW_DECODE_FAST, &out, &ok);
  const char *j2 = decode(&w, traits, tn, ETW_DECODE_REFERENCE, &ref, &ok2);
  CHECK(ok && ok2);
  CHECK_STR(j, j2);
  etw_jw_raw(&want, "\"EventData\":{\"buf\":\"", 20);
  etw_jw_raw(&want, want_json, strlen(want_json));
  etw_jw_raw(&want, "\"}", 2);
  const char *wants[] = {
      "\"Provider\":{\"Name\":\"etwd\",\"Guid\":\"{923c4d8b-47a4-5050-333b-e904c11a4b60}\"}",
      "\"EventName\":\"Marker\"", "\"Level\":4", etw_jw_cstr(&want)};
  for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++)
    if (!strstr(j, wants[i])) {
      fprintf(stderr, "missing %s in\n%s\n", wants[i], j);
      CHECK(0);
    }
  etw_jw_free(&out);
  etw_jw_free(&ref);
  etw_jw_free(&want);
}

static void test_marker_event(void) {
  CHECK_STR(ETW_TLW_MARKER_EVENT, "Marker");
  CHECK_STR(ETW_TLW_MARKER_FIELD, "buf");
  check_marker("step 1 done", "step 1 done");
  check_marker("", "");
  check_marker("say \"hi\" \\ tab\there", "say \\\"hi\\\" \\\\ tab\\there");
  check_marker("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80");
  /* the largest marker the API takes: ETW_MARKER_MAX (1024) bytes, mixed ASCII and UTF-8 */
  static char big[1025];
  size_t n = 0;
  while (n + 3 <= 1024) {
    memcpy(big + n, n % 2 ? "\xe2\x82\xac" : "abc", 3); /* "€" / "abc" */
    n += 3;
  }
  while (n < 1024) big[n++] = 'z';
  big[n] = 0;
  CHECK_EQ(strlen(big), 1024);
  check_marker(big, big);
  /* one byte more than the payload holds is refused, not cut */
  static char huge[ETW_TLW_DATA_MAX + 1];
  memset(huge, 'y', sizeof huge - 1);
  struct etw_tlw w;
  CHECK_EQ(etw_tlw_marker_event(&w, huge), -1);
}

static void test_bounds(void) {
  struct etw_tlw w;
  char big[1100];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  etw_tlw_begin(&w, "Big");
  etw_tlw_str(&w, "a", big);
  CHECK_EQ(etw_tlw_end(&w), 0);
  etw_tlw_str(&w, "b", big); /* the payload is full now */
  CHECK(w.err);
  CHECK_EQ(etw_tlw_end(&w), -1);
  CHECK(w.data_len <= ETW_TLW_DATA_MAX && w.meta_len <= ETW_TLW_META_MAX);
  etw_tlw_begin(&w, "Wide");
  etw_tlw_wstr(&w, "w", big); /* more than the UTF-16 staging buffer */
  CHECK_EQ(etw_tlw_end(&w), -1);
  etw_tlw_begin(&w, "BadUtf8");
  etw_tlw_wstr(&w, "w", "\xff\xfe");
  CHECK_EQ(etw_tlw_end(&w), -1);
  for (int i = 0; i < 200 && !w.err; i++) { /* metadata bounded too */
    if (i == 0) etw_tlw_begin(&w, "Many");
    etw_tlw_u32(&w, "field_name_that_is_long", (uint32_t)i);
  }
  CHECK(w.err && w.meta_len <= ETW_TLW_META_MAX);
  unsigned char t[4];
  CHECK_EQ(etw_tlw_traits("etwd", t, sizeof t), 0);
}

int main(void) {
  test_selftest_event();
  test_marker_event();
  test_bounds();
  T_DONE();
}
