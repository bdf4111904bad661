/* test_dec_clrbuiltin.c — the built-in .NET runtime schemas (dec_clr.c) and the manifests search
 * path (issue 25 item 5). Every payload is built here from the public layout (field by field,
 * both pointer sizes where the layout has pointers) and must decode to exactly the EventData
 * built here from the same values:
 *   Microsoft-Windows-DotNETRuntime GCHeapStats v2 (4), GCAllocationTick v4 (10),
 *   GCGlobalHeapHistory v3 and v4 (205), GCLOHCompact (208, padded C structs), GCFitBucketInfo
 *   (209, padded C structs); Microsoft-Windows-DotNETRuntimeRundown GCSettingsRundown (10, .NET 8).
 * Each without any manifest, with ../shared/manifests, and with the search path
 * manifests-next:manifests (where the newer manifest's own schema, quality 3, must be the one
 * used for GCHeapStats v2, and the built-in one, quality 2, where no manifest has the event).
 * Then the search path itself: a throwaway manifest listed after manifests-next adds what the
 * newer one lacks but does not replace what it has; listed first, it wins.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "test_etl_util.h"
#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"

static const unsigned char RUNTIME[16] = {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e,
                                          0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4};
static const unsigned char RUNDOWN[16] = {0x1c, 0x02, 0x69, 0xa6, 0x50, 0xc4, 0x09, 0x46,
                                          0xa0, 0x35, 0x5a, 0xf5, 0x9a, 0xf4, 0xdf, 0x18};

struct buf {
  unsigned char b[1024];
  size_t n;
};
static void put(struct buf *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p->b[p->n++] = (unsigned char)(v >> (8 * i));
}
static void wstr(struct buf *p, const char *s) {
  for (; *s; s++) put(p, (unsigned char)*s, 2);
  put(p, 0, 2);
}

/* expected text */
struct exp {
  char s[4096];
  size_t n;
};
static void ex(struct exp *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(e->s + e->n, sizeof e->s - e->n, fmt, ap);
  va_end(ap);
  if (k > 0) e->n += (size_t)k;
}

static char *mdir_main, *mdir_next, *mdir_path;

/* Decode (provider, id, version, ptr) with @payload by a decoder over @mdir (NULL: none); the
 * event text must end with "EventName":@name … ,"EventData":@want}}. */
static void one(const char *label, const char *mdir, const unsigned char guid[16], uint16_t id, uint8_t ver, int ptr,
                const struct buf *pay, const char *name, const char *want) {
  struct etw_decoder *d = etw_decoder_new(mdir);
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_EVENT;
  r.ptr_size = (uint8_t)ptr;
  r.flags = ptr == 8 ? ETW_EVH_64_BIT_HEADER : ETW_EVH_32_BIT_HEADER;
  r.pid = 100;
  r.tid = 200;
  r.filetime = 133229284000000000ULL;
  memcpy(r.provider_id, guid, 16);
  r.desc.id = id;
  r.desc.version = ver;
  r.desc.level = 4;
  r.user_data = pay->b;
  r.user_len = (uint32_t)pay->n;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_evref ref;
  int ok = etw_decoder_write(d, &r, &w, &ref);
  const char *t = etw_jw_cstr(&w);
  char nm[128], tail[4200];
  snprintf(nm, sizeof nm, "\"EventName\":\"%s\"", name);
  snprintf(tail, sizeof tail, ",\"EventData\":%s}", want);
  size_t tl = strlen(tail), l = strlen(t);
  int good = ok == 1 && strstr(t, nm) && l >= tl && !strcmp(t + l - tl, tail);
  if (!good) fprintf(stderr, "%s (%s, %d-bit):\n  got:  %s\n  want: ...%s ...%s\n", label, mdir ? mdir : "no manifests",
                     ptr * 8, t, nm, tail);
  CHECK(good);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

/* ... in the three manifest settings */
static void all(const char *label, const unsigned char guid[16], uint16_t id, uint8_t ver, int ptr, const struct buf *pay,
                const char *name, const char *want) {
  one(label, NULL, guid, id, ver, ptr, pay, name, want);
  one(label, mdir_main, guid, id, ver, ptr, pay, name, want);
  one(label, mdir_path, guid, id, ver, ptr, pay, name, want);
}

static void test_heapstats2(void) {
  struct buf p = {0};
  struct exp e = {0};
  static const char *const g[] = {"GenerationSize0", "TotalPromotedSize0", "GenerationSize1", "TotalPromotedSize1",
                                  "GenerationSize2", "TotalPromotedSize2", "GenerationSize3", "TotalPromotedSize3",
                                  "FinalizationPromotedSize"};
  ex(&e, "{");
  for (int i = 0; i < 9; i++) {
    uint64_t v = 0x248ULL + (uint64_t)i * 0x10001ULL;
    put(&p, v, 8);
    ex(&e, "%s\"%s\":\"0x%llx\"", i ? "," : "", g[i], (unsigned long long)v);
  }
  put(&p, 6, 8), put(&p, 1, 4), put(&p, 0, 4), put(&p, 53, 4), put(&p, 8, 2);
  put(&p, 0x3ff0, 8), put(&p, 0x1234567890ULL, 8);
  ex(&e, ",\"FinalizationPromotedCount\":6,\"PinnedObjectCount\":1,\"SinkBlockCount\":0,\"GCHandleCount\":53,"
         "\"ClrInstanceID\":8,\"GenerationSize4\":\"0x3ff0\",\"TotalPromotedSize4\":\"0x1234567890\"}");
  CHECK_EQ(p.n, 9 * 8 + 8 + 3 * 4 + 2 + 16);
  all("GCHeapStats v2", RUNTIME, 4, 2, 8, &p, "GC/HeapStats", e.s);
}

static void test_alloctick4(void) {
  for (int ptr = 4; ptr <= 8; ptr += 4)
    for (uint32_t kind = 0; kind < 2; kind++) {
      struct buf p = {0};
      struct exp e = {0};
      uint64_t type = ptr == 8 ? 0x7ffb485e1c08ULL : 0x8c3d188ULL, addr = ptr == 8 ? 0x1b0f3818b30ULL : 0x1118b854ULL;
      put(&p, 0x1aa40, 4), put(&p, kind, 4), put(&p, 8, 2), put(&p, 0x1aa40, 8), put(&p, type, ptr);
      wstr(&p, "System.String");
      put(&p, 3, 4), put(&p, addr, ptr), put(&p, 32, 8);
      ex(&e, "{\"AllocationAmount\":\"0x1aa40\",\"AllocationKind\":\"%s\",\"ClrInstanceID\":8,"
             "\"AllocationAmount64\":\"0x1aa40\",\"TypeID\":\"0x%llx\",\"TypeName\":\"System.String\",\"HeapIndex\":3,"
             "\"Address\":\"0x%llx\",\"ObjectSize\":32}",
         kind ? "Large" : "Small", (unsigned long long)type, (unsigned long long)addr);
      all("GCAllocationTick v4", RUNTIME, 10, 4, ptr, &p, "GC/AllocationTick", e.s);
    }
}

static void test_global_heap_history(void) {
  for (uint8_t ver = 3; ver <= 4; ver++) {
    struct buf p = {0};
    struct exp e = {0};
    put(&p, 0x475fb8, 8), put(&p, 1, 4), put(&p, 1, 4), put(&p, 0, 4), put(&p, 1, 4), put(&p, 30, 4), put(&p, 8, 2);
    put(&p, 1, 4), put(&p, 59, 4), put(&p, 7, 4), put(&p, 0x80000000u, 4);
    ex(&e, "{\"FinalYoungestDesired\":\"0x475fb8\",\"NumHeaps\":1,\"CondemnedGeneration\":1,\"Gen0ReductionCount\":0,"
           "\"Reason\":1,\"GlobalMechanisms\":30,\"ClrInstanceID\":8,\"PauseMode\":1,\"MemoryPressure\":59,"
           "\"CondemnReasons0\":7,\"CondemnReasons1\":2147483648");
    CHECK_EQ(p.n, 46); /* v3: 46 bytes (../shared/manifests/README.md) */
    if (ver == 4) {
      static const uint32_t times[] = {0, 156, 0, 16, 1, 154, 142, 4294967295u};
      put(&p, 8, 4);
      ex(&e, ",\"Count\":8,\"Times\":[");
      for (int i = 0; i < 8; i++) {
        put(&p, times[i], 4);
        ex(&e, "%s%u", i ? "," : "", times[i]);
      }
      ex(&e, "]");
    }
    ex(&e, "}");
    all(ver == 3 ? "GCGlobalHeapHistory v3" : "GCGlobalHeapHistory v4", RUNTIME, 205, ver, 8, &p, "GC/GlobalHeapHistory",
        e.s);
  }
}

static void test_loh_compact(void) {
  for (int ptr = 4; ptr <= 8; ptr += 4) {
    struct buf p = {0};
    struct exp e = {0};
    put(&p, 8, 2), put(&p, 2, 2);
    ex(&e, "{\"ClrInstanceID\":8,\"Count\":2,\"Values\":[");
    for (int i = 0; i < 2; i++) {
      size_t at = p.n;
      put(&p, 1u + (unsigned)i, 4), put(&p, 17, 4), put(&p, 3, 4);
      if (ptr == 8) put(&p, 0, 4); /* C struct padding before the 8-byte TotalRefs */
      put(&p, 1000u + (unsigned)i, ptr), put(&p, 5, ptr);
      CHECK_EQ(p.n - at, ptr == 8 ? 32 : 20);
      ex(&e, "%s{\"TimePlan\":%d,\"TimeCompact\":17,\"TimeRelocate\":3,\"TotalRefs\":%d,\"ZeroRefs\":5}", i ? "," : "",
         1 + i, 1000 + i);
    }
    ex(&e, "]}");
    all("GCLOHCompact", RUNTIME, 208, 0, ptr, &p, "GC/LOHCompact", e.s);
  }
}

static void test_fit_bucket(void) {
  for (int ptr = 4; ptr <= 8; ptr += 4) {
    struct buf p = {0};
    struct exp e = {0};
    put(&p, 8, 2), put(&p, 1, 2), put(&p, 310848, 8), put(&p, 3, 2);
    ex(&e, "{\"ClrInstanceID\":8,\"BucketKind\":1,\"TotalSize\":310848,\"Count\":3,\"Values\":[");
    for (int i = 0; i < 3; i++) {
      size_t at = p.n;
      put(&p, (unsigned)i, 2), put(&p, 0, 2), put(&p, 215u - (unsigned)i, 4), put(&p, 26400u * (unsigned)(i + 1), ptr);
      CHECK_EQ(p.n - at, ptr == 8 ? 16 : 12);
      ex(&e, "%s{\"Index\":%d,\"Count\":%d,\"Size\":%d}", i ? "," : "", i, 215 - i, 26400 * (i + 1));
    }
    ex(&e, "]}");
    if (ptr == 8) CHECK_EQ(p.n, 14 + 3 * 16);
    all("GCFitBucketInfo", RUNTIME, 209, 0, ptr, &p, "GC/FitBucketInfo", e.s);
  }
}

static void test_settings_rundown(void) {
  struct buf p = {0};
  put(&p, 0x20000000ULL, 8), put(&p, 85000, 8), put(&p, 0, 8), put(&p, 0x100000, 8), put(&p, 0x600000, 8);
  put(&p, 90, 4), put(&p, 0x25, 4), put(&p, 9, 2);
  CHECK_EQ(p.n, 50);
  all("GCSettingsRundown", RUNDOWN, 10, 0, 8, &p, "GC/SettingsRundown",
      "{\"HardLimit\":536870912,\"LOHThreshold\":85000,\"PhysicalMemoryConfig\":0,\"Gen0MinBudgetConfig\":1048576,"
      "\"Gen0MaxBudgetConfig\":6291456,\"HighMemPercentConfig\":90,\"BitSettings\":37,\"ClrInstanceID\":9}");
}

/* A LOHCompact whose Count says more entries than the payload holds: Undecoded, nothing read
 * past the payload. */
static void test_short(void) {
  struct buf p = {0};
  put(&p, 8, 2), put(&p, 3, 2), put(&p, 1, 4), put(&p, 2, 4), put(&p, 3, 4), put(&p, 0, 4), put(&p, 9, 8), put(&p, 9, 8);
  struct etw_decoder *d = etw_decoder_new(NULL);
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_EVENT;
  r.ptr_size = 8;
  memcpy(r.provider_id, RUNTIME, 16);
  r.desc.id = 208;
  r.user_data = p.b;
  r.user_len = (uint32_t)p.n;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_evref ref;
  etw_decoder_write(d, &r, &w, &ref);
  CHECK(strstr(etw_jw_cstr(&w), "\"Undecoded\":{") != NULL);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

/* Which schema the registry holds for (id, version) of the runtime provider, and its quality. */
static int quality(const char *mdir, uint16_t id, uint8_t ver, const char **first_field) {
  struct etw_decoder *d = etw_decoder_new(mdir);
  struct dec_provider *p = dec_provider_get(d, RUNTIME, 0);
  if (!p) p = dec_builtin_get(d, RUNTIME); /* (what an event of the provider does) */
  struct dec_event *e = p ? dec_event_find(p, id, ver) : NULL;
  int q = e ? e->quality : -1;
  static char f0[64];
  snprintf(f0, sizeof f0, "%s", e && e->nf ? e->f[0].name : "");
  if (first_field) *first_field = f0;
  etw_decoder_free(d);
  return q;
}

static void test_precedence(void) {
  const char *f;
  CHECK_EQ(quality(NULL, 4, 2, NULL), 2);      /* built in */
  CHECK_EQ(quality(mdir_main, 4, 2, NULL), 2); /* the older copies lack it */
  CHECK_EQ(quality(mdir_path, 4, 2, NULL), 3); /* manifests-next has it: its own schema */
  CHECK_EQ(quality(mdir_next, 4, 2, NULL), 3);
  CHECK_EQ(quality(mdir_path, 10, 4, NULL), 2);
  CHECK_EQ(quality(mdir_path, 297, 0, NULL), 3); /* JitInstrumentationData: manifests-next only */
  CHECK_EQ(quality(mdir_main, 297, 0, NULL), -1);
  /* the search path: a throwaway manifest of the runtime provider with event 10 v3 (also in
   * manifests-next, other field names) and 9999 v0 (in no other manifest) */
  char tmp[] = "/tmp/etwd-mpathXXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  char path[600], sp[1400];
  snprintf(path, sizeof path, "%s/mine.man", tmp);
  FILE *fp = fopen(path, "w");
  CHECK(fp != NULL);
  if (!fp) return;
  fputs("<instrumentationManifest><instrumentation><events>"
        "<provider name=\"Microsoft-Windows-DotNETRuntime\" guid=\"{e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}\">"
        "<tasks><task name=\"Mine\" value=\"77\" message=\"$(string.t)\"/></tasks>"
        "<templates><template tid=\"T\"><data name=\"Mine\" inType=\"win:UInt32\"/></template></templates>"
        "<events><event value=\"10\" version=\"3\" task=\"Mine\" template=\"T\" message=\"$(string.t)\"/>"
        "<event value=\"9999\" version=\"0\" task=\"Mine\" template=\"T\" message=\"$(string.t)\"/></events>"
        "</provider></events></instrumentation><localization><resources culture=\"en-US\"><stringTable>"
        "<string id=\"t\" value=\"Mine\"/></stringTable></resources></localization></instrumentationManifest>",
        fp);
  fclose(fp);
  snprintf(sp, sizeof sp, "%s:%s", mdir_next, tmp);
  CHECK_EQ(quality(sp, 9999, 0, &f), 3); /* what the newer manifest lacks: from the later directory */
  CHECK_STR(f, "Mine");
  CHECK_EQ(quality(sp, 10, 3, &f), 3); /* what it has: its own */
  CHECK_STR(f, "AllocationAmount");
  snprintf(sp, sizeof sp, "%s:%s", tmp, mdir_next);
  CHECK_EQ(quality(sp, 10, 3, &f), 3); /* listed first: the throwaway one wins */
  CHECK_STR(f, "Mine");
  unlink(path);
  rmdir(tmp);
}

int main(void) {
  mdir_main = strdup(tu_manifests());
  const char *nx = getenv("ETWD_MANIFESTS_NEXT");
  if (!nx || !*nx) {
    static char def[1200];
    snprintf(def, sizeof def, "%s/../manifests-next", mdir_main);
    nx = def;
  }
  tu_need_dir("ETWD_MANIFESTS_NEXT", nx);
  mdir_next = strdup(nx);
  mdir_path = malloc(strlen(mdir_next) + strlen(mdir_main) + 2);
  sprintf(mdir_path, "%s:%s", mdir_next, mdir_main);
  test_heapstats2();
  test_alloctick4();
  test_global_heap_history();
  test_loh_compact();
  test_fit_bucket();
  test_settings_rundown();
  test_short();
  test_precedence();
  free(mdir_main);
  free(mdir_next);
  free(mdir_path);
  T_DONE();
}
