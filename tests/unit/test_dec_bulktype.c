/* test_dec_bulktype.c — CLR Type/BulkType (Microsoft-Windows-DotNETRuntime event 15) decodes
 * right without manifests, from the EventInfo blob net.4.5.2.x64 carries.
 *
 * The manifest (ClrEtwAll.man, template BulkType) declares Count UInt32, ClrInstanceID UInt16,
 * then a struct array Values[Count] of TypeID UInt64 (hex), ModuleID UInt64 (hex), TypeNameID
 * UInt32, Flags UInt32 (map), CorElementType UInt8, Name UnicodeString, TypeParameterCount UInt32
 * and TypeParameters UInt64 (hex) with count="TypeParameterCount". The trace's EventInfo blob gives
 * TypeParameters a fixed count of 1, so every element after one with 0 or 2+ parameters was
 * misread and 15 events had bytes left ("Unparsed"); dec_clr_fix makes the count the
 * TypeParameterCount member.
 *
 * For every BulkType record, decoded without manifests:
 *  1. the EventData object is built here from the record bytes with the manifest's layout
 *     (every element, every type parameter) and must be the event's last member, Flags aside
 *     (its map text comes from the trace's EventMapInfo and is compared in 2.); the layout must
 *     end exactly at the payload's end;
 *  2. EventData equals the one decoded from the same record with the manifests directory.
 * Pinned against PerfView's baseline: the first BulkType line (Count=3; ClrInstanceID=11;
 * TypeID_0=0x072c61f4; TypeName_0=System.Runtime.Compi...) and the COUNT line (54).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"
#include "t.h"
#include "test_etl_util.h"

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static unsigned rd16(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

struct sb {
  char *b;
  size_t n, cap;
  int bad;
};
static void put(struct sb *s, const char *t) {
  size_t l = strlen(t);
  if (s->n + l + 1 > s->cap) {
    s->bad = 1;
    return;
  }
  memcpy(s->b + s->n, t, l + 1);
  s->n += l;
}
#define putu(s, fmt, v)                                                                            \
  do {                                                                                             \
    char t_[64];                                                                                   \
    snprintf(t_, sizeof t_, fmt, (unsigned long long)(v));                                         \
    put(s, t_);                                                                                    \
  } while (0)

/* EventData built from @p[0..n); 0 when the layout does not end at n */
static int expect(struct sb *s, const unsigned char *p, size_t n) {
  if (n < 6) return 0;
  uint32_t cnt = rd32(p);
  putu(s, "\"EventData\":{\"Count\":%llu", cnt);
  putu(s, ",\"ClrInstanceID\":%llu,\"Values\":[", rd16(p + 4));
  size_t pos = 6;
  for (uint32_t i = 0; i < cnt; i++) {
    if (pos + 25 > n) return 0;
    if (i) put(s, ",");
    putu(s, "{\"TypeID\":\"0x%llx\"", rd64(p + pos));
    putu(s, ",\"ModuleID\":\"0x%llx\"", rd64(p + pos + 8));
    putu(s, ",\"TypeNameID\":%llu,\"Flags\":", rd32(p + pos + 16));
    /* Flags: compared through the manifest decoding (the marker is cut from both) */
    putu(s, ",\"CorElementType\":%llu,\"Name\":\"", p[pos + 24]);
    pos += 25;
    for (;;) {
      if (pos + 2 > n) return 0;
      unsigned c = rd16(p + pos);
      pos += 2;
      if (!c) break;
      if (c < 0x20 || c > 0x7e) s->bad = 1; /* the corpus names are ASCII */
      char t[3] = {(char)c, 0, 0};
      if (c == '"' || c == '\\') t[0] = '\\', t[1] = (char)c;
      put(s, t);
    }
    if (pos + 4 > n) return 0;
    uint32_t k = rd32(p + pos);
    pos += 4;
    putu(s, "\",\"TypeParameterCount\":%llu,\"TypeParameters\":[", k);
    if ((uint64_t)k * 8 > n - pos) return 0;
    for (uint32_t j = 0; j < k; j++) {
      putu(s, j ? ",\"0x%llx\"" : "\"0x%llx\"", rd64(p + pos));
      pos += 8;
    }
    put(s, "]}");
  }
  put(s, "]}");
  return pos == n;
}

/* @j with each `"Flags":<value>` cut to `"Flags":` (the value ends at `,"CorElementType"`) */
static char *cut_flags(const char *j) {
  char *o = malloc(strlen(j) + 1), *q = o;
  while (*j) {
    if (!strncmp(j, "\"Flags\":", 8)) {
      memcpy(q, j, 8);
      q += 8;
      const char *e = strstr(j, ",\"CorElementType\":");
      j = e ? e : j + 8;
      continue;
    }
    *q++ = *j++;
  }
  *q = 0;
  return o;
}

static const char *event_data(const char *j) { return strstr(j, "},\"EventData\":{"); }

int main(void) {
  size_t len = 0;
  unsigned char *img =
      tu_corpus_file("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl", &len);
  CHECK(img != NULL);
  if (!img) T_DONE();
  struct etw_etl_reader *r;
  struct etw_decoder *d, *dm = etw_decoder_new(tu_manifests());
  struct etw_status st;
  if (!dm || tu_open(img, len, "net.4.5.2.x64.etl", NULL, &r, &d)) {
    CHECK(!"reader");
    T_DONE();
  }
  struct etw_jw w, wm;
  etw_jw_init(&w, 0);
  etw_jw_init(&wm, 0);
  struct etw_evref ref, refm;
  const struct etw_rec *rec;
  struct sb s = {malloc(1 << 20), 0, 1 << 20, 0};
  size_t n_bulk = 0, bad = 0, elems = 0, params = 0, multi = 0;
  int k, first = 1;
  while ((k = etw_etl_reader_next_ref(r, &rec, &st)) == 1) {
    w.len = 0;
    int dec = etw_decoder_write(d, rec, &w, &ref);
    if (strcmp(ref.provider, "Microsoft-Windows-DotNETRuntime") || rec->desc.id != 15) {
      wm.len = 0;
      etw_decoder_write(dm, rec, &wm, &refm); /* both decoders see the whole stream */
      continue;
    }
    wm.len = 0;
    int decm = etw_decoder_write(dm, rec, &wm, &refm);
    n_bulk++;
    const char *j = etw_jw_cstr(&w), *jm = etw_jw_cstr(&wm);
    s.n = 0;
    s.bad = 0;
    s.b[0] = 0;
    int ok = expect(&s, rec->user_data, rec->user_len) && !s.bad && dec == 1 && decm == 1;
    const unsigned char *p = rec->user_data;
    uint32_t cnt = rec->user_len >= 4 ? rd32(p) : 0;
    elems += cnt;
    /* count elements with 0 or 2+ type parameters: the ones the fixed count 1 misread after */
    for (const char *t = strstr(s.b, "\"TypeParameterCount\":"); t; t = strstr(t + 1, "\"TypeParameterCount\":")) {
      unsigned long v = strtoul(t + 21, NULL, 10);
      params += v;
      multi += v != 1;
    }
    char *cj = cut_flags(j);
    size_t cl = strlen(cj);
    /* the event is `…},"EventData":{…}}`: EventData is its last member */
    ok = ok && cl > s.n + 1 && cj[cl - 1] == '}' && !memcmp(cj + cl - 1 - s.n, s.b, s.n) && cj[cl - 2 - s.n] == ',' &&
         !strstr(j, "\"Unparsed\"");
    const char *e1 = event_data(j), *e2 = event_data(jm);
    ok = ok && e1 && e2 && !strcmp(e1, e2); /* EventData (and nothing after it) as with the manifest */
    if (first) {
      CHECK(!strncmp(s.b, "\"EventData\":{\"Count\":3,\"ClrInstanceID\":11,\"Values\":[{\"TypeID\":\"0x72c61f4\",", 74));
      CHECK(strstr(s.b, "\"Name\":\"System.Runtime.CompilerServices.ConditionalWeakTable`2[System.Object,System.Object]\"") != NULL);
      first = 0;
    }
    if (!ok && bad++ < 5)
      fprintf(stderr, "BulkType (len %u):\n  want %.800s\n  got  %.800s\n  man  %.800s\n", rec->user_len, s.b,
              e1 ? e1 : cj, e2 ? e2 : jm);
    CHECK(ok);
    free(cj);
  }
  CHECK_EQ(k, 0);
  CHECK_EQ(bad, 0);
  CHECK_EQ(n_bulk, 54); /* COUNT Microsoft-Windows-DotNETRuntime/Type/BulkType:54 */
  CHECK(multi > 0);
  printf("BulkType without manifests: %zu events, %zu elements (%zu with 0 or 2+ type parameters), %zu type parameters; "
         "each as its bytes say and as with the manifest\n",
         n_bulk, elems, multi, params);
  free(s.b);
  etw_jw_free(&w);
  etw_jw_free(&wm);
  etw_decoder_free(d);
  etw_decoder_free(dm);
  etw_etl_reader_free(r);
  free(img);
  T_DONE();
}
