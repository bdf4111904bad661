/* test_dec_unparsed.c — payload bytes a schema leaves are delivered, not cut: a decoded event
 * whose template/metadata/layout consumed fewer bytes than the payload holds gets
 * `"Unparsed":{"Offset":N,"Bytes":M,"Data":"<base64 of payload[N..N+M)>"}` after EventData.
 *
 * 1. net.4.5.2.x64.etl with the manifests directory and without manifests: for every record
 *    the expected end of what its schema covers is computed here from the record bytes, with
 *    the layout each source declares (not through the decoder): Private GC/PerHeapHistory v2
 *    (empty template: 0), PerfView/ClrEnableParameters (the trace's EventSource manifest:
 *    keywords UInt64 + level UInt32 = 12 of 16 bytes), Type/BulkType (the manifest declares
 *    TypeParameters with TypeParameterCount elements, which covers the payload exactly; the
 *    trace's EventInfo blob says one element, which dec_clr_fix corrects: 15 events without
 *    manifests had bytes left before, test_dec_bulktype checks their fields). Those events must end with exactly the member
 *    built here from the rest of the record (own base64); every other event must have none.
 *    Counts per category are pinned. The kernel SystemConfig/CPU v3 (828 bytes), Services v3
 *    (3 x u32 + 5 strings) and PnP v4 (GUID, 2 filter counts, 5 strings + the filter strings)
 *    events had bytes left before their layouts were fixed; their expected ends are computed
 *    here too and must now cover the payload (no member).
 * 2. Hand-made records: a manifest-style schema (fully covered, 3 bytes more, empty template),
 *    a TraceLogging event with bytes after its fields.
 * 3. `etwd convert` of net.4.5.2.x64 as ndjson and csv: the ClrEnableParameters events with the
 *    member after EventData; in csv the EventData column is one JSON object with "Unparsed" as
 *    its last member.
 */
#include <unistd.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"
#include "t.h"
#include "test_etl_util.h"

static size_t b64(const unsigned char *p, size_t n, char *o) {
  static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t k = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    o[k++] = A[v >> 18 & 63];
    o[k++] = A[v >> 12 & 63];
    o[k++] = i + 1 < n ? A[v >> 6 & 63] : '=';
    o[k++] = i + 2 < n ? A[v & 63] : '=';
  }
  o[k] = 0;
  return k;
}

/* the expected member for @p[off..n), in @o (at least 80 + 4 * n / 3 bytes) */
static void want_member(const unsigned char *p, size_t off, size_t n, char *o) {
  int k = sprintf(o, "},\"Unparsed\":{\"Offset\":%zu,\"Bytes\":%zu,\"Data\":\"", off, n - off);
  k += (int)b64(p + off, n - off, o + k);
  strcpy(o + k, "\"}}");
}

static int ends_with(const char *s, size_t sl, const char *t) {
  size_t tl = strlen(t);
  return sl >= tl && !memcmp(s + sl - tl, t, tl);
}

/* end of a NUL-terminated UTF-16 string at @pos (the payload's end when unterminated) */
static size_t wz(const unsigned char *p, size_t n, size_t pos) {
  while (pos + 2 <= n) {
    int z = !p[pos] && !p[pos + 1];
    pos += 2;
    if (z) return pos;
  }
  return n;
}

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* BulkType: Count u32, ClrInstanceID u16, Count x {TypeID u64, ModuleID u64, TypeNameID u32,
 * Flags u32, CorElementType u8, Name UTF-16z, TypeParameterCount u32, TypeParameters u64[k]}
 * with k = TypeParameterCount (manifest) or 1 (@one: the trace's EventInfo blob). Returns the
 * end, or the payload's size when it runs out. */
static size_t bulktype_end(const unsigned char *p, size_t n, int one) {
  if (n < 6) return n;
  uint32_t cnt = rd32(p);
  size_t pos = 6;
  for (uint32_t i = 0; i < cnt; i++) {
    if (pos + 25 > n) return n;
    pos = wz(p, n, pos + 25);
    if (pos + 4 > n) return n;
    uint64_t k = one ? 1 : rd32(p + pos);
    pos += 4;
    if (k * 8 > n - pos) return n;
    pos += (size_t)k * 8;
  }
  return pos;
}

enum { C_PHH, C_CEP, C_BULK, C_CPU, C_SVC, C_PNP, C_N };
static const char *const CNAME[C_N] = {"PerHeapHistory", "ClrEnableParameters", "BulkType", "CPU", "Services", "PnP"};

static void run(const unsigned char *img, size_t len, const char *mdir, const char *label, const size_t want[C_N],
                size_t want_total) {
  struct etw_etl_reader *r;
  struct etw_decoder *d;
  struct etw_status st;
  if (tu_open(img, len, "net.4.5.2.x64.etl", mdir, &r, &d)) {
    CHECK(!"reader");
    return;
  }
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_evref ref;
  const struct etw_rec *rec;
  size_t got[C_N] = {0}, total = 0, bad = 0, full = 0, bulk_full = 0;
  char *exp = malloc(80 + 4 * 65536 / 3 + 8);
  int k;
  while ((k = etw_etl_reader_next_ref(r, &rec, &st)) == 1) {
    w.len = 0;
    int dec = etw_decoder_write(d, rec, &w, &ref);
    const char *j = etw_jw_cstr(&w);
    const unsigned char *p = rec->user_data;
    size_t n = rec->user_len, end = n;
    int c = -1;
    if (!strcmp(ref.provider, "Microsoft-Windows-DotNETRuntimePrivate") && rec->desc.id == 4 && rec->desc.version == 2 &&
        mdir) {
      c = C_PHH;
      end = 0; /* event 4 v2 uses template GCPerHeapHistory, which declares no field */
    } else if (!strcmp(ref.provider, "PerfView") && !strcmp(ref.name, "ClrEnableParameters")) {
      c = C_CEP;
      CHECK_EQ(n, 16);
      end = 8 + 4;
    } else if (!strcmp(ref.provider, "Microsoft-Windows-DotNETRuntime") && rec->desc.id == 15) {
      c = C_BULK;
      end = bulktype_end(p, n, 0); /* the EventInfo schema too, since dec_clr_fix */
      if (bulktype_end(p, n, 0) == n) bulk_full++; /* the real layout covers the payload */
    } else if (!strcmp(ref.provider, "Windows Kernel") && !strcmp(ref.name, "SystemConfig/CPU") && rec->desc.version == 3) {
      c = C_CPU; /* 5 x u32, wchar[256], wchar[134], 2 pointers, 3 x u16, 2 x u8, u32 */
      end = 5 * 4 + 256 * 2 + 134 * 2 + 2 * 8 + 3 * 2 + 2 + 4;
    } else if (!strcmp(ref.provider, "Windows Kernel") && !strcmp(ref.name, "SystemConfig/Services") &&
               rec->desc.version == 3) {
      c = C_SVC; /* 3 x u32 + 5 strings */
      end = 12;
      for (int s = 0; s < 5; s++) end = wz(p, n, end);
    } else if (!strcmp(ref.provider, "Windows Kernel") && !strcmp(ref.name, "SystemConfig/PnP") && rec->desc.version == 4) {
      c = C_PNP; /* GUID, 2 x u32 filter counts, 5 strings, then that many filter strings */
      end = 24;
      uint32_t nf = n >= 24 ? rd32(p + 16) + rd32(p + 20) : 0;
      for (uint32_t s = 0; s < 5 + nf && end < n; s++) end = wz(p, n, end);
    }
    int has = strstr(j, "},\"Unparsed\":{\"Offset\":") != NULL;
    int ok;
    if (end < n) {
      want_member(p, end, n, exp);
      ok = dec == 1 && ends_with(j, w.len, exp) && strstr(j, ",\"EventData\":{");
      got[c]++;
      total++;
    } else {
      ok = !has;
      if (dec == 1 && !has) full++;
    }
    if (!ok && bad++ < 5)
      fprintf(stderr, "%s: %s/%s (len %zu, expected end %zu) wrong: ...%.300s\n", label, ref.provider, ref.name, n, end,
              w.len > 300 ? j + w.len - 300 : j);
  }
  CHECK_EQ(k, 0);
  CHECK_EQ(bad, 0);
  for (int i = 0; i < C_N; i++) {
    if (got[i] != want[i]) fprintf(stderr, "%s: %s: %zu events with bytes left, want %zu\n", label, CNAME[i], got[i], want[i]);
    CHECK_EQ(got[i], want[i]);
  }
  CHECK_EQ(total, want_total);
  CHECK_EQ(d->unparsed, want_total);
  CHECK(bulk_full > 0);
  CHECK(full > 170000); /* the decoded events without the member */
  printf("%s: %zu events with \"Unparsed\", %zu decoded without; BulkType covered by its manifest layout: %zu\n", label,
         total, full, bulk_full);
  free(exp);
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(r);
}

/* ---- hand-made records */
static void init_rec(struct etw_rec *r, const unsigned char g[16], const unsigned char *pay, size_t n) {
  memset(r, 0, sizeof *r);
  r->kind = ETW_REC_EVENT;
  r->ptr_size = 8;
  r->flags = ETW_EVH_64_BIT_HEADER;
  r->pid = 1;
  r->tid = 2;
  r->filetime = 132404548209705519ull;
  memcpy(r->provider_id, g, 16);
  r->user_data = pay;
  r->user_len = (uint32_t)n;
}

static const char *dec(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, int *ok) {
  struct etw_evref ref;
  w->len = 0;
  *ok = etw_decoder_write(d, r, w, &ref);
  return etw_jw_cstr(w);
}

static void synthetic(void) {
  static const unsigned char G[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0, 0x01};
  struct etw_decoder *d = etw_decoder_new(NULL);
  struct dec_provider *p = dec_provider_get(d, G, 1);
  CHECK(p != NULL);
  if (!p) return;
  /* id 1: A UInt32, B UInt16 (6 bytes); id 2: a template without fields */
  struct dec_event *e = calloc(1, sizeof *e);
  e->f = calloc(2, sizeof *e->f);
  e->f[0].name = strdup("A");
  e->f[0].in = 8;
  e->f[1].name = strdup("B");
  e->f[1].in = 6;
  for (int i = 0; i < 2; i++) {
    e->f[i].len = -1;
    e->f[i].count = 1;
    e->f[i].len_ref = e->f[i].count_ref = -1;
  }
  e->nf = 2;
  e->id = 1;
  e->has_template = 1;
  e->quality = 3;
  CHECK_EQ(dec_event_add(p, e), 0);
  struct dec_event *z = calloc(1, sizeof *z);
  z->id = 2;
  z->has_template = 1;
  z->quality = 3;
  CHECK_EQ(dec_event_add(p, z), 0);

  unsigned char pay[16] = {7, 0, 0, 0, 9, 0, 0xfb, 0xff, 0x00, 1, 2, 3, 4, 5};
  struct etw_rec r;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  int ok;
  init_rec(&r, G, pay, 6); /* exactly the template */
  r.desc.id = 1;
  const char *j = dec(d, &r, &w, &ok);
  CHECK(ok == 1 && ends_with(j, w.len, ",\"EventData\":{\"A\":7,\"B\":9}}"));
  CHECK(!strstr(j, "Unparsed"));
  init_rec(&r, G, pay, 9); /* 3 bytes more */
  r.desc.id = 1;
  j = dec(d, &r, &w, &ok);
  CHECK(ok == 1 && ends_with(j, w.len, ",\"EventData\":{\"A\":7,\"B\":9},\"Unparsed\":{\"Offset\":6,\"Bytes\":3,\"Data\":\"+/8A\"}}"));
  init_rec(&r, G, pay, 5); /* shorter than the template: Undecoded as before, no member */
  r.desc.id = 1;
  j = dec(d, &r, &w, &ok);
  CHECK(ok == 0 && strstr(j, ",\"Undecoded\":{\"Reason\":\"payload shorter than the template\",\"Payload\":\"BwAAAAk=\"}}"));
  CHECK(!strstr(j, "Unparsed"));
  init_rec(&r, G, pay, 14); /* empty template */
  r.desc.id = 2;
  j = dec(d, &r, &w, &ok);
  CHECK(ok == 1 && ends_with(j, w.len, ",\"EventData\":{},\"Unparsed\":{\"Offset\":0,\"Bytes\":14,\"Data\":\"BwAAAAkA+/8AAQIDBAU=\"}}"));
  init_rec(&r, G, pay, 0); /* empty template, empty payload */
  r.desc.id = 2;
  j = dec(d, &r, &w, &ok);
  CHECK(ok == 1 && ends_with(j, w.len, ",\"EventData\":{}}"));
  CHECK_EQ(d->unparsed, 2);

  /* TraceLogging: one UInt32 field "v", payload 4 + 2 bytes */
  unsigned char meta[32], prov[32];
  size_t mn = 0, pn = 0;
  meta[mn++] = 0;
  meta[mn++] = 0;
  meta[mn++] = 0; /* tags */
  memcpy(meta + mn, "Ev", 3);
  mn += 3;
  memcpy(meta + mn, "v", 2);
  mn += 2;
  meta[mn++] = 8; /* UInt32 */
  meta[0] = (unsigned char)mn;
  prov[pn++] = 0;
  prov[pn++] = 0;
  memcpy(prov + pn, "TL.P", 5);
  pn += 5;
  prov[0] = (unsigned char)pn;
  static const unsigned char GT[16] = {0xfe, 0xed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  unsigned char tp[6] = {42, 0, 0, 0, 0xAB, 0xCD};
  for (size_t n = 4; n <= 6; n += 2) {
    init_rec(&r, GT, tp, n);
    r.flags |= ETW_EVH_EXTENDED_INFO;
    r.n_ext = 2;
    r.ext[0] = (struct etw_ext_item){ETW_EXT_PROV_TRAITS, (uint16_t)pn, prov};
    r.ext[1] = (struct etw_ext_item){ETW_EXT_EVENT_SCHEMA_TL, (uint16_t)mn, meta};
    j = dec(d, &r, &w, &ok);
    CHECK(ok == 1);
    if (n == 4) CHECK(ends_with(j, w.len, ",\"EventData\":{\"v\":42}}"));
    else CHECK(ends_with(j, w.len, ",\"EventData\":{\"v\":42},\"Unparsed\":{\"Offset\":4,\"Bytes\":2,\"Data\":\"q80=\"}}"));
  }
  CHECK_EQ(d->unparsed, 3);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

static char *slurp(const char *path) {
  size_t len = 0;
  unsigned char *b = tu_file(path, &len);
  if (!b) return NULL;
  char *t = realloc(b, len + 1);
  t[len] = 0;
  return t;
}

static void convert(const unsigned char *img, size_t len, const char *mdir) {
  char tmpl[] = "/tmp/dec_unparsed_XXXXXX";
  char *dir = mkdtemp(tmpl);
  CHECK(dir != NULL);
  if (!dir) return;
  char in[256], out[256];
  snprintf(in, sizeof in, "%s/net.etl", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  FILE *f = fopen(in, "wb");
  CHECK(f && fwrite(img, 1, len, f) == len);
  if (f) fclose(f);
  const char *a1[] = {"convert", in, "--manifests", mdir, "-o", out, "--quiet"};
  CHECK_EQ(etw_convert_main(7, (char **)a1), 0);
  char *t = slurp(out);
  CHECK(t && strstr(t, "\"EventName\":\"ClrEnableParameters\",\"TaskName\":\"ClrEnableParameters\",\"Execution\":{\"ProcessID\":3988,"
                       "\"ProcessName\":\"PerfView\",\"ThreadID\":3780,\"ProcessorID\":4}},\"EventData\":{\"keywords\":89142578365,\"level\":\"Verbose\"},"
                       "\"Unparsed\":{\"Offset\":12,\"Bytes\":4,\"Data\":\"AAAAAA==\"}}\n"));
  free(t);
  const char *a2[] = {"convert", in, "--manifests", mdir, "--format", "csv", "-o", out, "--quiet"};
  CHECK_EQ(etw_convert_main(9, (char **)a2), 0);
  t = slurp(out);
  CHECK(t && strstr(t, "\n7961,2020-07-29T00:07:00.7952058Z,\"PerfView\",\"ClrEnableParameters\",13,0,4,65521,0,"
                       "0x0000f00000000000,3988,3780,\"PerfView\",,4,\"{\"\"keywords\"\":89142578365,\"\"level\"\":\"\"Verbose\"\",\"\"Unparsed\"\":"
                       "{\"\"Offset\"\":12,\"\"Bytes\"\":4,\"\"Data\"\":\"\"AAAAAA==\"\"}}\"\n"));
  /* an empty EventData: {"Unparsed":{…}} */
  CHECK(t && strstr(t, ",\"{\"\"Unparsed\"\":{\"\"Offset\"\":0,\"\"Bytes\"\":433,\"\"Data\"\":\""));
  free(t);
  remove(out);
  remove(in);
  rmdir(dir);
}

int main(void) {
  synthetic();
  const char *mdir = tu_manifests();
  size_t len = 0;
  unsigned char *img =
      tu_corpus_file("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl", &len);
  CHECK(img != NULL);
  if (!img) T_DONE();
  /* PerHeapHistory, ClrEnableParameters, BulkType, CPU, Services, PnP */
  /* the SystemConfig layouts cover their payloads (test_mof_sysconfig checks their fields) */
  static const size_t with_man[C_N] = {264, 2, 0, 0, 0, 0}, without[C_N] = {0, 2, 0, 0, 0, 0};
  run(img, len, mdir, "manifests", with_man, 266);
  run(img, len, NULL, "no manifests", without, 2);
  convert(img, len, mdir);
  free(img);
  T_DONE();
}
