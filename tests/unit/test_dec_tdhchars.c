/* test_dec_tdhchars.c — character arrays in schemas that come from a TDH TRACE_EVENT_INFO blob
 * (what TdhGetEventInformation returns on Windows and what relogged traces carry in
 * KernelTraceControl MetaData/EventInfo records, dec_tdh.c), and character arrays whose length is
 * another field's value.
 *
 * The blobs are built here byte for byte from Microsoft's documented layout (tdh.h:
 * TRACE_EVENT_INFO, 112 bytes before EventPropertyInfoArray; EVENT_PROPERTY_INFO, 24 bytes:
 * Flags, NameOffset, InType, OutType, MapNameOffset, count / countPropertyIndex, length /
 * lengthPropertyIndex, Tags; PROPERTY_FLAGS; _TDH_IN_TYPE: UNICODECHAR 306, ANSICHAR 307;
 * _TDH_OUT_TYPE: STRING 1) and fed to the decoder as the reader hands them over: a classic
 * record of provider bbccf6c1-6cd1-48c4-80ff-839482e37671, opcode 32, before the event.
 *
 * 1. Arrays of characters (UnicodeChar / AnsiChar / UInt16 / UInt8 with OutType String) with a
 *    count from another property (PropertyParamCount) or a fixed count (PropertyParamFixedCount)
 *    render as ONE string, the rule of docs/etl.md: the count is the length, trailing NULs are
 *    left out, a NUL before other characters stays as \u0000, surrogate pairs and escapes as in
 *    any string; a scalar character stays one character; a counted UInt16 array without OutType
 *    String stays a JSON array.
 * 2. A character property whose LENGTH is another property's value (PropertyParamLength) or a
 *    constant (PropertyParamFixedLength): that many characters, one string (the old code
 *    rendered the first character only and read the next fields from the wrong place). The same
 *    for a manifest's win:UInt8 / win:UInt16 with outType xs:string and length="Field" or
 *    length="3".
 * Every event is decoded in fast and in reference mode, three times each (a fast decoder's plan
 * is built on first use): the same bytes. A payload cut inside an array is undecoded.
 */
#include "decode.h"
#include "t.h"
#include "test_tl_util.h"

static void put32(struct buf *b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; i++) b->b[at + (size_t)i] = (unsigned char)(v >> (8 * i));
}
static void put16(struct buf *b, size_t at, unsigned v) {
  b->b[at] = (unsigned char)v;
  b->b[at + 1] = (unsigned char)(v >> 8);
}

/* tdh.h */
enum { PropertyParamLength = 0x2, PropertyParamCount = 0x4, PropertyParamFixedLength = 0x10,
       PropertyParamFixedCount = 0x20 };
enum { IN_UINT8 = 4, IN_UINT16 = 6, IN_UINT32 = 8, IN_UNICODECHAR = 306, IN_ANSICHAR = 307 };
enum { OUT_NULL = 0, OUT_STRING = 1, OUT_UNSIGNEDINT = 8 };

struct prop {
  const char *name;
  uint32_t flags;
  unsigned in, out, count, length;
};

/* A TRACE_EVENT_INFO of event @id (version 1, level 4) of provider @guid named @pname, task name
 * @task, with the top-level properties @p[0..np) (their names and the provider's and task's after
 * the array, UTF-16z). */
static void tei(struct buf *b, const unsigned char guid[16], const char *pname, const char *task, unsigned id,
                const struct prop *p, unsigned np) {
  memset(b, 0, sizeof *b);
  memcpy(b->b, guid, 16); /* ProviderGuid; EventGuid (16) zero */
  put16(b, 32, id);       /* EVENT_DESCRIPTOR: Id, Version, Channel, Level, Opcode, Task, Keyword */
  b->b[34] = 1;
  b->b[36] = 4;
  put32(b, 48, 0); /* DecodingSource: DecodingSourceXMLFile */
  put32(b, 100, np); /* PropertyCount */
  put32(b, 104, np); /* TopLevelPropertyCount */
  b->n = 112 + 24 * (size_t)np;
  put32(b, 52, (uint32_t)b->n); /* ProviderNameOffset */
  w16(b, pname), u16(b, 0);
  put32(b, 68, (uint32_t)b->n); /* TaskNameOffset */
  w16(b, task), u16(b, 0);
  for (unsigned i = 0; i < np; i++) {
    size_t e = 112 + 24 * (size_t)i;
    put32(b, e, p[i].flags);
    put32(b, e + 4, (uint32_t)b->n); /* NameOffset */
    w16(b, p[i].name), u16(b, 0);
    put16(b, e + 8, p[i].in);
    put16(b, e + 10, p[i].out);
    put32(b, e + 12, 0); /* MapNameOffset */
    put16(b, e + 16, p[i].count);
    put16(b, e + 18, p[i].length);
    put32(b, e + 20, 0); /* Tags */
  }
}

static const unsigned char KTC_METADATA[16] = {0xc1, 0xf6, 0xcc, 0xbb, 0xd1, 0x6c, 0xc4, 0x48,
                                               0x80, 0xff, 0x83, 0x94, 0x82, 0xe3, 0x76, 0x71};

/* the MetaData/EventInfo record of blob @b, as a relogged trace carries it */
static void feed_tei(struct etw_decoder *d, const struct buf *b) {
  struct etw_rec m;
  init_rec(&m);
  m.kind = ETW_REC_CLASSIC;
  m.flags = ETW_EVH_CLASSIC_HEADER;
  memcpy(m.provider_id, KTC_METADATA, 16);
  m.desc.opcode = 32;
  m.user_data = b->b;
  m.user_len = (uint32_t)b->n;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  int ok;
  decode(d, &m, &w, &ok);
  etw_jw_free(&w);
}

static void want(const char *j, const char *s) {
  if (!strstr(j, s)) fprintf(stderr, "missing %s in\n%s\n", s, j);
  CHECK(strstr(j, s) != NULL);
}

/* Event @r decoded by a fast and a reference decoder (@schema fed first: a TDH blob, or with
 * @man a manifest), three times each: @expect in each text, all texts the same; then the payload
 * cut to @cut bytes (inside an array): undecoded. */
static void both_modes(const struct buf *schema, const char *man, struct etw_rec *r, const char *expect, uint32_t cut) {
  char *text[2] = {NULL, NULL};
  for (int mode = 0; mode < 2; mode++) {
    struct etw_decoder *d = etw_decoder_new(NULL);
    etw_decoder_set_mode(d, mode ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
    if (man) CHECK_EQ(dec_manifest_load(d, man, strlen(man), NULL), 0);
    else feed_tei(d, schema);
    struct etw_jw w;
    etw_jw_init(&w, 0);
    int ok;
    for (int k = 0; k < 3; k++) {
      const char *j = decode(d, r, &w, &ok);
      CHECK(ok);
      want(j, expect);
      if (!text[mode]) text[mode] = strdup(j);
      else CHECK_STR(j, text[mode]);
    }
    uint32_t n = r->user_len;
    r->user_len = cut;
    decode(d, r, &w, &ok);
    CHECK(!ok);
    r->user_len = n;
    etw_jw_free(&w);
    etw_decoder_free(d);
  }
  CHECK_STR(text[0], text[1]);
  free(text[0]);
  free(text[1]);
}

/* 1. counts: from another property and fixed (decoded so before this file existed: the direct
 * test the EventInfo path lacked) */
static void test_tdh_counts(void) {
  static const unsigned char G[16] = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33,
                                      0x44, 0x44, 0x99, 0x99, 0x99, 0x99, 0x99, 0x01};
  const struct prop P[] = {
      {"N", 0, IN_UINT16, 6 /* TDH_OUTTYPE_UNSIGNEDSHORT */, 1, 2},
      {"W", PropertyParamCount, IN_UNICODECHAR, OUT_STRING, 0 /* N */, 0},
      {"F", PropertyParamFixedCount, IN_ANSICHAR, OUT_STRING, 6, 0},
      {"U16", PropertyParamCount, IN_UINT16, OUT_STRING, 0, 0},
      {"U8", PropertyParamFixedCount, IN_UINT8, OUT_STRING, 4, 0},
      {"C", 0, IN_UNICODECHAR, OUT_STRING, 1, 2},
      {"Nums", PropertyParamCount, IN_UINT16, OUT_NULL, 0, 2},
      {"T", 0, IN_UINT32, OUT_UNSIGNEDINT, 1, 4},
  };
  struct buf b, pay = {0};
  tei(&b, G, "Test-TdhChars", "Counted", 7, P, sizeof P / sizeof P[0]);
  u16(&pay, 6);
  w16(&pay, "a\""), u16(&pay, 0), u16(&pay, 'z'), u16(&pay, 0), u16(&pay, 0); /* W */
  u8(&pay, 'o'), u8(&pay, 'k');                                               /* F: 6 bytes */
  for (int i = 0; i < 4; i++) u8(&pay, 0);
  u16(&pay, 0xD83D), u16(&pay, 0xDE00), w16(&pay, "q\\"), u16(&pay, 0), u16(&pay, 0); /* U16 */
  u8(&pay, 'a'), u8(&pay, 'b'), u8(&pay, 'c'), u8(&pay, 'd');                          /* U8 */
  u16(&pay, 'Z');                                                                      /* C */
  for (unsigned i = 1; i <= 6; i++) u16(&pay, i);                                      /* Nums */
  u32(&pay, 9);
  struct etw_rec r;
  init_rec(&r);
  memcpy(r.provider_id, G, 16);
  r.desc.id = 7;
  r.desc.version = 1;
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  both_modes(&b, NULL, &r,
             "\"EventData\":{\"N\":6,\"W\":\"a\\\"\\u0000z\",\"F\":\"ok\",\"U16\":\"\xF0\x9F\x98\x80q\\\\\","
             "\"U8\":\"abcd\",\"C\":\"Z\",\"Nums\":[1,2,3,4,5,6],\"T\":9}}",
             2 + 12 + 6 + 5);
}

/* 2. lengths: from another property and fixed (TDH); before dec_char_length: "WL":"h","AL":"i",
 * "UL":"","BL":"","WF":"x", T read from the wrong bytes */
static void test_tdh_lengths(void) {
  static const unsigned char G[16] = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33,
                                      0x44, 0x44, 0x99, 0x99, 0x99, 0x99, 0x99, 0x02};
  const struct prop P[] = {
      {"L", 0, IN_UINT32, OUT_UNSIGNEDINT, 1, 4},
      {"WL", PropertyParamLength, IN_UNICODECHAR, OUT_STRING, 1, 0 /* L */},
      {"AL", PropertyParamLength, IN_ANSICHAR, OUT_STRING, 1, 0},
      {"UL", PropertyParamLength, IN_UINT16, OUT_STRING, 1, 0},
      {"BL", PropertyParamLength, IN_UINT8, OUT_STRING, 1, 0},
      {"WF", PropertyParamFixedLength, IN_UNICODECHAR, OUT_STRING, 1, 5},
      {"T", 0, IN_UINT32, OUT_UNSIGNEDINT, 1, 4},
  };
  struct buf b, pay = {0};
  tei(&b, G, "Test-TdhLengths", "Lengths", 8, P, sizeof P / sizeof P[0]);
  u32(&pay, 3);
  w16(&pay, "hi"), u16(&pay, 0);             /* WL: padding */
  u8(&pay, 'x'), u8(&pay, 0), u8(&pay, 'y'); /* AL: a NUL inside */
  w16(&pay, "Tom");                          /* UL */
  u8(&pay, 'a'), u8(&pay, 'b'), u8(&pay, 'c'); /* BL */
  w16(&pay, "fixed");                        /* WF: 5 characters */
  u32(&pay, 77);
  struct etw_rec r;
  init_rec(&r);
  memcpy(r.provider_id, G, 16);
  r.desc.id = 8;
  r.desc.version = 1;
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  both_modes(&b, NULL, &r,
             "\"EventData\":{\"L\":3,\"WL\":\"hi\",\"AL\":\"x\\u0000y\",\"UL\":\"Tom\",\"BL\":\"abc\","
             "\"WF\":\"fixed\",\"T\":77}}",
             4 + 6 + 3 + 4);
  /* a length past the payload: undecoded */
  pay.b[0] = 200;
  struct etw_decoder *d = etw_decoder_new(NULL);
  feed_tei(d, &b);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  int ok;
  decode(d, &r, &w, &ok);
  CHECK(!ok);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

/* 2. lengths in a manifest: length="L" and length="3" on win:UInt16 / win:UInt8 xs:string */
static const char MANIFEST[] =
    "<instrumentationManifest><instrumentation><events>"
    "<provider name='Test-CharLengths' guid='{11111111-2222-3333-4444-999999999903}' symbol='PL'>"
    "<templates><template tid='TL'>"
    "<data name='L' inType='win:UInt32'/>"
    "<data name='W' inType='win:UInt16' outType='xs:string' length='L'/>"
    "<data name='A' inType='win:UInt8' outType='xs:string' length='L'/>"
    "<data name='K' inType='win:UInt16' outType='xs:string' length='3'/>"
    "<data name='C' inType='win:UInt16' outType='xs:string'/>"
    "<data name='T' inType='win:UInt32'/>"
    "</template></templates>"
    "<events><event value='0x31' template='TL'/></events>"
    "</provider></events></instrumentation></instrumentationManifest>";

static void test_manifest_lengths(void) {
  struct buf pay = {0};
  u32(&pay, 4);
  w16(&pay, "ab"), u16(&pay, 0), u16(&pay, 0); /* W */
  u8(&pay, 'c'), u8(&pay, 'd'), u8(&pay, 'e'), u8(&pay, 'f'); /* A */
  w16(&pay, "x\"y");                          /* K */
  u16(&pay, 'M');                             /* C: one character */
  u32(&pay, 5);
  struct etw_rec r;
  init_rec(&r);
  etw_parse_guid("11111111-2222-3333-4444-999999999903", r.provider_id);
  r.desc.id = 0x31;
  r.user_data = pay.b;
  r.user_len = (uint32_t)pay.n;
  both_modes(NULL, MANIFEST, &r,
             "\"EventData\":{\"L\":4,\"W\":\"ab\",\"A\":\"cdef\",\"K\":\"x\\\"y\",\"C\":\"M\",\"T\":5}}",
             4 + 8 + 2);
}

int main(void) {
  test_tdh_counts();
  test_tdh_lengths();
  test_manifest_lengths();
  T_DONE();
}
