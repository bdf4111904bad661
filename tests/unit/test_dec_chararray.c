/* test_dec_chararray.c — arrays of characters render as ONE string (dec_char_array), the rule for
 * every decoder family: TraceLogging (TraceLoggingWCharArray = UInt16 + OutType String with a
 * variable count, TraceLoggingCharFixedArray = UInt8 + String with a constant count, Int8 +
 * String) and manifests (win:UInt16 / win:UInt8 with outType xs:string and a count, which the TDH
 * schemas of relogged traces reach through the same walker). The count is the length; trailing
 * NULs (padding) are left out; a NUL before other characters stays as \u0000; quotes, backslashes
 * and surrogate pairs as in any string; long arrays (the converter's 16-unit blocks) with a NUL in
 * the middle; arrays of other integers stay JSON arrays; a payload cut inside the array is
 * undecoded. Manifest events are decoded in fast and in reference mode: the same bytes.
 * (The old code rendered ["a","b",…] for TraceLogging and numbers for the manifest fields.)
 */
#include "decode.h"
#include "t.h"
#include "test_tl_util.h"

static void want(const char *j, const char *s) {
  if (!strstr(j, s)) fprintf(stderr, "missing %s in\n%s\n", s, j);
  CHECK(strstr(j, s) != NULL);
}

static void test_tracelogging(void) {
  struct buf prov = {0}, meta = {0}, pay = {0};
  u16(&prov, 0);
  str(&prov, "Char.Provider");
  prov.b[0] = (unsigned char)prov.n;
  u16(&meta, 0);
  u8(&meta, 0);
  str(&meta, "Chars");
  /* TraceLoggingWCharArray: quote, backslash, a NUL inside, U+1F600, two NULs of padding */
  field(&meta, "w", 6 | 0x40, 2);
  u16(&pay, 11);
  w16(&pay, "a\"b\\c");
  u16(&pay, 0);
  u16(&pay, 'd');
  u16(&pay, 0xD83D), u16(&pay, 0xDE00);
  u16(&pay, 0), u16(&pay, 0);
  /* 40 'x', NUL, 40 'y' (the converter's 16-unit blocks on both sides of the NUL) */
  field(&meta, "long", 6 | 0x40, 2);
  u16(&pay, 81);
  for (int i = 0; i < 40; i++) u16(&pay, 'x');
  u16(&pay, 0);
  for (int i = 0; i < 40; i++) u16(&pay, 'y');
  /* TraceLoggingCharFixedArray(buf, 8) of "hi" and its padding */
  str(&meta, "fixed8");
  u8(&meta, 4 | 0x20 | 0x80), u8(&meta, 2), u16(&meta, 8);
  str(&pay, "hi");
  for (int i = 0; i < 5; i++) u8(&pay, 0);
  /* Int8 + String: 8-bit text, UTF-8 kept */
  field(&meta, "i8", 3 | 0x40, 2);
  u16(&pay, 3);
  u8(&pay, 'e'), u8(&pay, 0xC3), u8(&pay, 0xA9);
  field(&meta, "empty", 6 | 0x40, 2);
  u16(&pay, 0);
  field(&meta, "all0", 6 | 0x40, 2);
  u16(&pay, 2);
  u16(&pay, 0), u16(&pay, 0);
  /* not characters: still arrays */
  field(&meta, "nums", 6 | 0x40, -1);
  u16(&pay, 2);
  u16(&pay, 1), u16(&pay, 2);
  field(&meta, "hex", 4 | 0x40, 4);
  u16(&pay, 2);
  u8(&pay, 1), u8(&pay, 255);
  field(&meta, "tail", 8, -1);
  u32(&pay, 7);
  meta.b[0] = (unsigned char)(meta.n & 255);
  meta.b[1] = (unsigned char)(meta.n >> 8);

  struct etw_rec r;
  init_rec(&r);
  r.flags |= ETW_EVH_EXTENDED_INFO;
  r.n_ext = 2;
  r.ext[0] = (struct etw_ext_item){ETW_EXT_PROV_TRAITS, (uint16_t)prov.n, prov.b};
  r.ext[1] = (struct etw_ext_item){ETW_EXT_EVENT_SCHEMA_TL, (uint16_t)meta.n, meta.b};
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  char longv[128] = "\"long\":\"";
  for (int i = 0; i < 40; i++) strcat(longv, "x");
  strcat(longv, "\\u0000");
  for (int i = 0; i < 40; i++) strcat(longv, "y");
  strcat(longv, "\"");
  for (int mode = 0; mode < 2; mode++) { /* (TraceLogging has one path: both modes the same) */
    struct etw_decoder *d = etw_decoder_new(NULL);
    etw_decoder_set_mode(d, mode ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
    struct etw_jw w;
    etw_jw_init(&w, 0);
    int ok;
    const char *j = decode(d, &r, &w, &ok);
    CHECK(ok);
    want(j, "\"EventData\":{\"w\":\"a\\\"b\\\\c\\u0000d\xF0\x9F\x98\x80\",");
    want(j, longv);
    want(j, ",\"fixed8\":\"hi\",\"i8\":\"e\xC3\xA9\",\"empty\":\"\",\"all0\":\"\",\"nums\":[1,2],"
            "\"hex\":[\"0x1\",\"0xff\"],\"tail\":7}}");
    /* a count past the payload: undecoded, nothing read beyond it */
    r.user_len = 2 + 10;
    j = decode(d, &r, &w, &ok);
    CHECK(!ok);
    want(j, "\"Undecoded\":{\"Reason\":\"TraceLogging payload does not match its metadata\"");
    r.user_len = (uint32_t)pay.n;
    etw_jw_free(&w);
    etw_decoder_free(d);
  }
}

/* A manifest's characters (Microsoft Learn, DataDefinitionType: inType win:UInt8 / win:UInt16
 * with outType xs:string is an ANSI / a Unicode character) and arrays of them. */
static const char MANIFEST[] =
    "<instrumentationManifest><instrumentation><events>"
    "<provider name='Test-Chars' guid='{11111111-2222-3333-4444-888888888888}' symbol='PC'>"
    "<templates><template tid='TC'>"
    "<data name='N' inType='win:UInt16'/>"
    "<data name='W' inType='win:UInt16' outType='xs:string' count='N'/>"
    "<data name='F' inType='win:UInt8' outType='xs:string' count='6'/>"
    "<data name='C' inType='win:UInt8' outType='xs:string'/>"
    "<data name='U' inType='win:UInt16' count='N'/>"
    "<data name='T' inType='win:UInt32'/>"
    "</template></templates>"
    "<events><event value='0x21' template='TC'/></events>"
    "</provider></events></instrumentation></instrumentationManifest>";

static void test_manifest(void) {
  struct buf pay = {0};
  u16(&pay, 4);
  w16(&pay, "a\"c");
  u16(&pay, 0); /* padding */
  str(&pay, "ok");
  for (int i = 0; i < 3; i++) u8(&pay, 0);
  u8(&pay, 'M');
  u16(&pay, 1), u16(&pay, 2), u16(&pay, 3), u16(&pay, 4);
  u32(&pay, 9);
  struct etw_rec r;
  init_rec(&r);
  etw_parse_guid("11111111-2222-3333-4444-888888888888", r.provider_id);
  r.desc.id = 0x21;
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  char *text[2] = {NULL, NULL};
  for (int mode = 0; mode < 2; mode++) {
    struct etw_decoder *d = etw_decoder_new(NULL);
    etw_decoder_set_mode(d, mode ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
    CHECK_EQ(dec_manifest_load(d, MANIFEST, sizeof MANIFEST - 1, NULL), 0);
    struct etw_jw w;
    etw_jw_init(&w, 0);
    int ok;
    for (int k = 0; k < 3; k++) { /* again: fast mode's compiled plan, where there is one */
      const char *j = decode(d, &r, &w, &ok);
      CHECK(ok);
      want(j, "\"EventData\":{\"N\":4,\"W\":\"a\\\"c\",\"F\":\"ok\",\"C\":\"M\",\"U\":[1,2,3,4],\"T\":9}}");
      if (!text[mode]) text[mode] = strdup(j);
      else CHECK(!strcmp(text[mode], j));
    }
    /* the payload cut inside W */
    r.user_len = 2 + 5;
    decode(d, &r, &w, &ok);
    CHECK(!ok);
    r.user_len = (uint32_t)pay.n;
    etw_jw_free(&w);
    etw_decoder_free(d);
  }
  CHECK(text[0] && text[1] && !strcmp(text[0], text[1]));
  free(text[0]);
  free(text[1]);
}

int main(void) {
  test_tracelogging();
  test_manifest();
  T_DONE();
}
