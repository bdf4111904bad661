/* test_decode_tl.c — the decoder fed through the EVENT_RECORD mirror (struct etw_rec), the way
 * the Windows live consumer will feed it: TraceLogging in/out types, Ccount/Vcount arrays,
 * nested structs and arrays of structs, provider traits; a manifest from memory with a
 * length reference, a value map and a struct array; STRING_ONLY events; undecodable events
 * (reason + base64 payload); bounded behaviour on hostile metadata.
 */
#include "decode.h"
#include "t.h"
#include "test_tl_util.h"

/* the shared record (test_tl_util.h) with extended info, channel 11 and provider 01 02 … 10 */
static void init_tl_rec(struct etw_rec *r) {
  init_rec(r);
  r->flags |= ETW_EVH_EXTENDED_INFO;
  r->desc.channel = 11;
  for (int i = 0; i < 16; i++) r->provider_id[i] = (unsigned char)(i + 1);
}

static void test_tracelogging(void) {
  struct buf prov = {0}, meta = {0}, pay = {0};
  u16(&prov, 0);
  str(&prov, "My.Provider");
  u16(&prov, 3 + 16); /* trait: group GUID */
  u8(&prov, 1);
  for (int i = 0; i < 16; i++) u8(&prov, 0xA0 + i);
  prov.b[0] = (unsigned char)prov.n;
  u16(&meta, 0);
  u8(&meta, 0); /* tags: none */
  str(&meta, "Everything");
  field(&meta, "s16", 1, -1);            wstr(&pay, "hi");
  field(&meta, "s8", 2, 0x23);           str(&pay, "utf8 \xc3\xa9");
  field(&meta, "i8", 3, -1);             u8(&pay, 0xFF);
  field(&meta, "u8bool", 4, 3);          u8(&pay, 1);
  field(&meta, "i16", 5, -1);            u16(&pay, 0xFFFE);
  field(&meta, "port", 6, 7);            u16(&pay, 0x5000); /* network order: 80 */
  field(&meta, "i32", 7, -1);            u32(&pay, (uint32_t)-5);
  field(&meta, "hex32", 8, 4);           u32(&pay, 255);
  field(&meta, "ip4", 8, 8);             u32(&pay, 0x0100007F);
  field(&meta, "i64", 9, -1);            u64(&pay, (uint64_t)-9000000000LL);
  field(&meta, "u64", 10, -1);           u64(&pay, 18446744073709551615ULL);
  field(&meta, "f", 11, -1);             { float f = 1.5f; uint32_t x; memcpy(&x, &f, 4); u32(&pay, x); }
  field(&meta, "d", 12, -1);             { double f = -0.25; uint64_t x; memcpy(&x, &f, 8); u64(&pay, x); }
  field(&meta, "b32", 13, -1);           u32(&pay, 0);
  field(&meta, "bin", 14, -1);           u16(&pay, 3); u8(&pay, 0xDE); u8(&pay, 0xAD); u8(&pay, 0x01);
  field(&meta, "g", 15, -1);             for (int i = 0; i < 16; i++) u8(&pay, (unsigned)i);
  field(&meta, "ft", 17, -1);            u64(&pay, 132754283728578510ULL);
  field(&meta, "st", 18, -1);            u16(&pay, 2021); u16(&pay, 9); u16(&pay, 4); u16(&pay, 9);
                                         u16(&pay, 14); u16(&pay, 59); u16(&pay, 35); u16(&pay, 799);
  field(&meta, "sid", 19, -1);           u8(&pay, 1); u8(&pay, 1); for (int i = 0; i < 5; i++) u8(&pay, 0); u8(&pay, 5); u32(&pay, 18);
  field(&meta, "h64", 21, -1);           u64(&pay, 0x1234);
  field(&meta, "cs", 22, -1);            u16(&pay, 4); u16(&pay, 'o'); u16(&pay, 'k');
  field(&meta, "cas", 23, -1);           u16(&pay, 2); u8(&pay, 'n'); u8(&pay, 'o');
  field(&meta, "ip6", 14, 9);            u16(&pay, 16); for (int i = 0; i < 16; i++) u8(&pay, i == 15 ? 1 : 0);
  /* constant-count array of 3 u16 */
  str(&meta, "carr"); u8(&meta, 6 | 0x20); u16(&meta, 3);   u16(&pay, 1); u16(&pay, 2); u16(&pay, 3);
  /* variable-count array of strings */
  str(&meta, "varr"); u8(&meta, 2 | 0x40);                 u16(&pay, 2); str(&pay, "a"); str(&pay, "b");
  /* struct with a nested struct */
  field(&meta, "outer", 24, 2);
  field(&meta, "x", 8, -1);                                u32(&pay, 7);
  field(&meta, "inner", 24, 1);
  field(&meta, "y", 1, -1);                                wstr(&pay, "deep");
  /* variable-count array of structs {a u8, b u8} */
  str(&meta, "pts"); u8(&meta, 24 | 0x40 | 0x80); u8(&meta, 2); u16(&pay, 2);
  field(&meta, "a", 4, -1); field(&meta, "b", 4, -1);      u8(&pay, 1); u8(&pay, 2); u8(&pay, 3); u8(&pay, 4);
  meta.b[0] = (unsigned char)(meta.n & 255);
  meta.b[1] = (unsigned char)(meta.n >> 8);

  struct etw_rec r;
  init_tl_rec(&r);
  r.n_ext = 2;
  r.ext[0] = (struct etw_ext_item){ETW_EXT_PROV_TRAITS, (uint16_t)prov.n, prov.b};
  r.ext[1] = (struct etw_ext_item){ETW_EXT_EVENT_SCHEMA_TL, (uint16_t)meta.n, meta.b};
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  struct etw_decoder *d = etw_decoder_new(NULL);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  int ok;
  const char *j = decode(d, &r, &w, &ok);
  CHECK(ok);
  CHECK(strstr(j, "\"Provider\":{\"Name\":\"My.Provider\",\"Guid\":\"{04030201-0605-0807-090a-0b0c0d0e0f10}\"}") != NULL);
  CHECK(strstr(j, "\"EventName\":\"Everything\"") != NULL);
  CHECK(strstr(j, "\"Execution\":{\"ProcessID\":100,\"ThreadID\":200,\"ProcessorID\":0}") != NULL);
  static const char *const want[] = {
      "\"s16\":\"hi\"", "\"s8\":\"utf8 \xc3\xa9\"", "\"i8\":-1", "\"u8bool\":true", "\"i16\":-2",
      "\"port\":80", "\"i32\":-5", "\"hex32\":\"0xff\"", "\"ip4\":\"127.0.0.1\"", "\"i64\":-9000000000",
      "\"u64\":18446744073709551615", "\"f\":1.5", "\"d\":-0.25", "\"b32\":false", "\"bin\":\"DEAD01\"",
      "\"g\":\"{03020100-0504-0706-0809-0a0b0c0d0e0f}\"", "\"ft\":\"2021-09-06T18:59:32.8578510Z\"",
      "\"st\":\"2021-09-09T14:59:35.7990000Z\"", "\"sid\":\"S-1-5-18\"", "\"h64\":\"0x1234\"",
      "\"cs\":\"ok\"", "\"cas\":\"no\"", "\"ip6\":\"::1\"", "\"carr\":[1,2,3]", "\"varr\":[\"a\",\"b\"]",
      "\"outer\":{\"x\":7,\"inner\":{\"y\":\"deep\"}}", "\"pts\":[{\"a\":1,\"b\":2},{\"a\":3,\"b\":4}]}}"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!strstr(j, want[i])) {
      fprintf(stderr, "missing %s in\n%s\n", want[i], j);
      CHECK(0);
    }
  }
  /* payload cut short: delivered undecoded with the reason and the payload */
  r.user_len -= 3;
  j = decode(d, &r, &w, &ok);
  CHECK(!ok);
  CHECK(strstr(j, "\"Undecoded\":{\"Reason\":\"TraceLogging payload does not match its metadata\",\"Payload\":\"") != NULL);
  /* hostile metadata: a struct claiming 200 members, deep nesting — bounded */
  struct buf bad = {0};
  u16(&bad, 0);
  u8(&bad, 0);
  str(&bad, "Bad");
  for (int i = 0; i < 40; i++) field(&bad, "s", 24, 200);
  bad.b[0] = (unsigned char)bad.n;
  r.ext[1] = (struct etw_ext_item){ETW_EXT_EVENT_SCHEMA_TL, (uint16_t)bad.n, bad.b};
  j = decode(d, &r, &w, &ok);
  CHECK(!ok);
  CHECK(strstr(j, "\"Undecoded\"") != NULL);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

static const char MANIFEST[] =
    "<?xml version='1.0'?><instrumentationManifest xmlns='x'><instrumentation><events>"
    "<provider name='Test-Provider' guid='{11111111-2222-3333-4444-555555555555}' symbol='P'>"
    "<tasks><task name='Work' value='7' message='$(string.task.work)'/></tasks>"
    "<maps><valueMap name='Colors'><map value='1' message='$(string.red)'/>"
    "<map value='2' message='$(string.green)'/></valueMap>"
    "<bitMap name='Bits'><map value='0x1' message='$(string.a)'/><map value='0x4' message='$(string.c)'/></bitMap></maps>"
    "<templates><template tid='T'>"
    "<data name='Len' inType='win:UInt16'/>"
    "<data name='Blob' inType='win:Binary' length='Len'/>"
    "<data name='Color' inType='win:UInt32' map='Colors'/>"
    "<data name='Flags' inType='win:UInt32' map='Bits'/>"
    "<data name='N' inType='win:UInt16'/>"
    "<struct name='Items' count='N'><data name='Id' inType='win:UInt32'/>"
    "<data name='Name' inType='win:UnicodeString'/></struct>"
    "<data name='Ptr' inType='win:Pointer'/>"
    "</template></templates>"
    "<events><event value='0x10' version='1' level='win:Warning' task='Work' opcode='win:Start' template='T'/></events>"
    "</provider></events></instrumentation>"
    "<localization><resources culture='en-US'><stringTable>"
    "<string id='task.work' value='Job'/><string id='red' value='Red'/><string id='green' value='Green'/>"
    "<string id='a' value='A'/><string id='c' value='C'/>"
    "</stringTable></resources></localization></instrumentationManifest>";

static void test_manifest(void) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  CHECK_EQ(dec_manifest_load(d, MANIFEST, sizeof MANIFEST - 1, NULL), 0);
  struct buf pay = {0};
  u16(&pay, 2);
  u8(&pay, 0xAB);
  u8(&pay, 0xCD);
  u32(&pay, 2);
  u32(&pay, 5);
  u16(&pay, 2);
  u32(&pay, 10);
  wstr(&pay, "ten");
  u32(&pay, 11);
  wstr(&pay, "eleven");
  u32(&pay, 0x1000); /* 32-bit record: 4-byte pointer */
  struct etw_rec r;
  init_tl_rec(&r);
  r.n_ext = 0;
  r.flags = ETW_EVH_32_BIT_HEADER;
  r.ptr_size = 4;
  etw_parse_guid("11111111-2222-3333-4444-555555555555", r.provider_id);
  r.desc.id = 0x10;
  r.desc.version = 1;
  r.desc.opcode = 1;
  r.desc.task = 7;
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  int ok;
  const char *j = decode(d, &r, &w, &ok);
  CHECK(ok);
  CHECK(strstr(j, "\"Name\":\"Test-Provider\"") != NULL);
  CHECK(strstr(j, "\"EventName\":\"Job/Start\"") != NULL);
  CHECK(strstr(j, "\"EventData\":{\"Len\":2,\"Blob\":\"ABCD\",\"Color\":\"Green\",\"Flags\":\"A|C\",\"N\":2,"
                  "\"Items\":[{\"Id\":10,\"Name\":\"ten\"},{\"Id\":11,\"Name\":\"eleven\"}],\"Ptr\":\"0x1000\"}}") != NULL);
  if (!ok || !strstr(j, "\"Ptr\":\"0x1000\"")) fprintf(stderr, "%s\n", j);
  /* unknown version: undecoded, with the reason */
  r.desc.version = 9;
  j = decode(d, &r, &w, &ok);
  CHECK(!ok);
  CHECK(strstr(j, "no schema for this event id/version") != NULL);
  /* STRING_ONLY */
  struct buf s = {0};
  wstr(&s, "plain text");
  r.flags |= ETW_EVH_STRING_ONLY;
  r.user_data = s.b;
  r.user_len = (uint32_t)s.n;
  j = decode(d, &r, &w, &ok);
  CHECK(ok);
  CHECK(strstr(j, "\"EventData\":{\"String\":\"plain text\"}}") != NULL);
  /* providers API */
  w.len = 0;
  etw_decoder_providers_json(d, "Test", &w);
  CHECK(strstr(etw_jw_cstr(&w), "\"name\":\"Test-Provider\"") != NULL);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

/* Runs of fixed-size scalars (one room check for several fields) and integer/pointer arrays
 * of every width, with 8- and 4-byte pointers, and a payload one byte short of the run. */
static const char MANIFEST2[] =
    "<instrumentationManifest><instrumentation><events>"
    "<provider name='Test-Arrays' guid='{11111111-2222-3333-4444-666666666666}' symbol='P2'>"
    "<templates><template tid='T2'>"
    "<data name='A' inType='win:UInt8'/><data name='B' inType='win:Int16'/>"
    "<data name='C' inType='win:UInt32' outType='win:HexInt32'/><data name='D' inType='win:Int64'/>"
    "<data name='E' inType='win:Pointer'/><data name='Cnt' inType='win:UInt16'/>"
    "<data name='U8s' inType='win:UInt8' count='Cnt'/><data name='U16s' inType='win:UInt16' count='Cnt'/>"
    "<data name='U32s' inType='win:UInt32' count='Cnt'/><data name='U64s' inType='win:UInt64' count='Cnt'/>"
    "<data name='Ps' inType='win:Pointer' count='Cnt'/><data name='Tail' inType='win:Int32'/>"
    "</template></templates>"
    "<events><event value='0x11' template='T2'/></events>"
    "</provider></events></instrumentation></instrumentationManifest>";

static void test_runs_arrays(void) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  CHECK_EQ(dec_manifest_load(d, MANIFEST2, sizeof MANIFEST2 - 1, NULL), 0);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  for (int ps = 8; ps >= 4; ps -= 4) {
    struct buf pay = {0};
    u8(&pay, 200);
    u16(&pay, 0xFFFE);
    u32(&pay, 0xBEEF);
    u64(&pay, (uint64_t)-5);
    if (ps == 8) u64(&pay, 0x1122334455667788ull);
    else u32(&pay, 0x11223344u);
    u16(&pay, 3);
    u8(&pay, 1), u8(&pay, 2), u8(&pay, 255);
    u16(&pay, 0), u16(&pay, 65535), u16(&pay, 7);
    u32(&pay, 0xFFFFFFFFu), u32(&pay, 0), u32(&pay, 10);
    u64(&pay, UINT64_MAX), u64(&pay, 1), u64(&pay, 0);
    if (ps == 8) u64(&pay, 0), u64(&pay, 0x10), u64(&pay, UINT64_MAX);
    else u32(&pay, 0), u32(&pay, 0x10), u32(&pay, 0xFFFFFFFFu);
    u32(&pay, (uint32_t)-7);
    struct etw_rec r;
    init_tl_rec(&r);
    r.n_ext = 0;
    r.flags = ps == 4 ? ETW_EVH_32_BIT_HEADER : ETW_EVH_64_BIT_HEADER;
    r.ptr_size = (uint8_t)ps;
    etw_parse_guid("11111111-2222-3333-4444-666666666666", r.provider_id);
    r.desc.id = 0x11;
    r.user_data = pay.b;
    r.user_len = (uint32_t)pay.n;
    int ok;
    const char *j = decode(d, &r, &w, &ok);
    CHECK(ok);
    const char *want = ps == 8 ? "\"EventData\":{\"A\":200,\"B\":-2,\"C\":\"0xbeef\",\"D\":-5,\"E\":\"0x1122334455667788\","
                                 "\"Cnt\":3,\"U8s\":[1,2,255],\"U16s\":[0,65535,7],\"U32s\":[4294967295,0,10],"
                                 "\"U64s\":[18446744073709551615,1,0],\"Ps\":[\"0x0\",\"0x10\",\"0xffffffffffffffff\"],"
                                 "\"Tail\":-7}}"
                               : "\"EventData\":{\"A\":200,\"B\":-2,\"C\":\"0xbeef\",\"D\":-5,\"E\":\"0x11223344\","
                                 "\"Cnt\":3,\"U8s\":[1,2,255],\"U16s\":[0,65535,7],\"U32s\":[4294967295,0,10],"
                                 "\"U64s\":[18446744073709551615,1,0],\"Ps\":[\"0x0\",\"0x10\",\"0xffffffff\"],"
                                 "\"Tail\":-7}}";
    CHECK(strstr(j, want) != NULL);
    if (!strstr(j, want)) fprintf(stderr, "%s\n", j);
    /* the run A..E cut one byte short: the fields before the cut, then the short one fails */
    r.user_len = ps == 8 ? 22 : 18;
    j = decode(d, &r, &w, &ok);
    CHECK(!ok);
    CHECK(strstr(j, "\"Undecoded\"") != NULL);
  }
  etw_jw_free(&w);
  etw_decoder_free(d);
}

/* Counts and lengths taken from 64-bit fields: a value past the limits is an error ("array count
 * or length out of range"), never "no length" (values of 2^63 and more cast to a negative long) nor
 * its low bits (Windows' 32-bit long); a length of 2^32 + 2 must not read as 2. */
static const char MANIFEST3[] =
    "<instrumentationManifest><instrumentation><events>"
    "<provider name='Test-Refs' guid='{11111111-2222-3333-4444-777777777777}' symbol='P3'>"
    "<templates><template tid='T3'>"
    "<data name='Len' inType='win:UInt64'/><data name='S' inType='win:AnsiString' length='Len'/>"
    "<data name='Cnt' inType='win:UInt64'/><data name='A' inType='win:UInt8' count='Cnt'/>"
    "</template></templates>"
    "<events><event value='0x12' template='T3'/></events>"
    "</provider></events></instrumentation></instrumentationManifest>";

static void test_huge_refs(void) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  CHECK_EQ(dec_manifest_load(d, MANIFEST3, sizeof MANIFEST3 - 1, NULL), 0);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  static const struct {
    uint64_t len, cnt;
    int ok;
  } C[] = {{2, 2, 1}, {UINT64_MAX, 2, 0}, {1ull << 63, 2, 0}, {(1ull << 32) + 2, 2, 0}, {2, (1ull << 32) + 2, 0},
           {2, UINT64_MAX, 0}, {2, 1ull << 63, 0}, {(1ull << 31) + 2, 2, 0}};
  for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
    for (int twice = 0; twice < 2; twice++) { /* the second time through the compiled plan */
      struct buf pay = {0};
      u64(&pay, C[i].len);
      u8(&pay, 'h'), u8(&pay, 'i');
      u64(&pay, C[i].cnt);
      u8(&pay, 7), u8(&pay, 9);
      struct etw_rec r;
      init_tl_rec(&r);
      r.n_ext = 0;
      r.flags = ETW_EVH_64_BIT_HEADER;
      r.ptr_size = 8;
      etw_parse_guid("11111111-2222-3333-4444-777777777777", r.provider_id);
      r.desc.id = 0x12;
      r.user_data = pay.b;
      r.user_len = (uint32_t)pay.n;
      int ok;
      const char *j = decode(d, &r, &w, &ok);
      CHECK_EQ(ok, C[i].ok);
      if (C[i].ok) CHECK(strstr(j, "\"S\":\"hi\",\"Cnt\":2,\"A\":[7,9]}}") != NULL);
      else CHECK(strstr(j, "\"Reason\":\"array count or length out of range\"") != NULL);
      if (ok != C[i].ok) fprintf(stderr, "case %zu: %s\n", i, j);
    }
  }
  etw_jw_free(&w);
  etw_decoder_free(d);
}

int main(void) {
  test_tracelogging();
  test_manifest();
  test_runs_arrays();
  test_huge_refs();
  T_DONE();
}
