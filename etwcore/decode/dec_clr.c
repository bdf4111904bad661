/* dec_clr.c — built-in schemas of .NET runtime events that the manifests in ../shared lack or
 * that a trace may meet without any manifest (facts from ../shared/manifests/README.md "Gaps"
 * and the public layouts named below): GCHeapStats v2, GCAllocationTick v4, GCGlobalHeapHistory
 * v3/v4, GCLOHCompact and GCFitBucketInfo (array elements are C structs with alignment padding)
 * of Microsoft-Windows-DotNETRuntime, GCSettingsRundown of -Rundown. They are added, at quality
 * 2, when the registry creates either provider (dec_builtin_provider: also without a manifests
 * directory), so a manifest's own schema for the same (id, version) replaces them and they never
 * shadow one. And the CLR stack walk template corrected in every schema that declares it
 * (dec_clr_fix). Registry state belongs to its decoder's thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* The four CLR providers that declare the ClrStackWalk template: Microsoft-Windows-DotNETRuntime
 * (event 82), -Rundown (0), -Stress (1) and -Private (151). */
static const unsigned char CLR_STACK_PROVIDERS[4][16] = {
    {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e, 0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4},
    {0x1c, 0x02, 0x69, 0xa6, 0x50, 0xc4, 0x09, 0x46, 0xa0, 0x35, 0x5a, 0xf5, 0x9a, 0xf4, 0xdf, 0x18},
    {0xba, 0xcb, 0x2b, 0xcc, 0xb6, 0x16, 0xf3, 0x4c, 0x89, 0x90, 0xd7, 0x4c, 0x2e, 0x8a, 0xf5, 0x00},
    {0x54, 0xd7, 0x3f, 0x76, 0x86, 0x70, 0xfe, 0x4d, 0x95, 0xeb, 0xc0, 0x1a, 0x46, 0xfa, 0xf4, 0xca}};

static int named(const struct dec_field *f, const char *name, uint16_t in) {
  return f->in == in && f->name && !strcmp(f->name, name);
}

/* The ClrStackWalk template (ClrInstanceID UInt16, Reserved1 UInt8, Reserved2 UInt8, FrameCount
 * UInt32, Stack Pointer) declares Stack with count="2" in both ClrEtwAll.man copies (and in the
 * EventInfo blobs TDH writes from the registered manifest; the lilhoser dump has a scalar), but
 * the runtime writes FrameCount pointers: the payload is 8 + FrameCount × pointer size bytes, and
 * TraceEvent's ClrStackWalkTraceData reads FrameCount frames. Stack's count becomes the FrameCount
 * field, whatever the schema's source. Called by dec_event_add before the schema is used. */
/* The BulkType template (Microsoft-Windows-DotNETRuntime event 15): each element of the Values
 * struct array ends with TypeParameterCount (UInt32) and TypeParameters (UInt64), which the
 * manifest declares with count="TypeParameterCount"; the EventInfo blobs TDH writes into relogged
 * traces (net.4.5.2.x64) give TypeParameters a fixed count of 1 instead (a blob's count can only
 * name a top-level property), so every element after one with 0 or 2+ parameters was misread.
 * TypeParameters' count becomes the TypeParameterCount member before it. */
static void fix_type_params(struct dec_event *e) {
  for (uint32_t i = 1; i < e->nf; i++) {
    struct dec_field *f = &e->f[i];
    if (!named(f, "TypeParameters", 10) || !named(&f[-1], "TypeParameterCount", 8) || f->count_ref == (int32_t)(i - 1))
      continue;
    f->is_array = 1;
    f->count = 1;
    f->count_ref = (int32_t)(i - 1);
    f->kind = 0;
    e->runs = 0;
  }
}

void dec_clr_fix(const struct dec_provider *p, struct dec_event *e) {
  if (!e->has_template) return;
  if (e->id == 15 && !memcmp(p->guid, DEC_GUID_CLR_RUNTIME, 16)) {
    fix_type_params(e);
    return;
  }
  if (e->nf != 5) return;
  struct dec_field *f = e->f;
  if (!named(&f[0], "ClrInstanceID", 6) || !named(&f[1], "Reserved1", 4) || !named(&f[2], "Reserved2", 4) ||
      !named(&f[3], "FrameCount", 8) || !named(&f[4], "Stack", 16) || f[4].count_ref == 3)
    return;
  int clr = 0;
  for (int i = 0; i < 4 && !clr; i++) clr = !memcmp(p->guid, CLR_STACK_PROVIDERS[i], 16);
  if (!clr) return;
  f[4].is_array = 1;
  f[4].count = 1;
  f[4].count_ref = 3;
  f[4].kind = 0; /* walker classes and runs are computed on first use */
  e->runs = 0;
}

/* ---- built-in schemas (the layouts are facts from the public sources named at each) */
struct fdef {
  const char *name;
  uint16_t in, out;   /* manifest InType / OutType numbers (out 0: the InType's default) */
  int32_t count_ref;  /* -1, or the index (in this list) of the field holding the count */
  uint16_t members;   /* in 24 (struct): the member fields that follow */
  uint8_t kind_map;   /* 1: GCAllocationKindMap */
};
#define HEX64 10, 4 /* win:UInt64, OutType win:HexInt64 (dec_man.c's numbering) */
#define HEX32 8, 4  /* win:UInt32, win:HexInt32 */

struct sdef {
  int rundown;        /* 0 Microsoft-Windows-DotNETRuntime, 1 -Rundown */
  uint16_t id;
  uint8_t version, level, opcode;
  uint16_t task;
  uint64_t keywords;
  const char *task_name, *opcode_name;
  const struct fdef *f;
  uint32_t nf;
};

/* GCHeapStats v2 (Runtime 4): GCHeapStats_V1, then the POH's size and promoted size
 * (dotnet/runtime ClrEtwAll.man @ 00845426, template GCHeapStats_V2: ../shared/manifests-next). */
static const struct fdef HEAPSTATS2[] = {
    {"GenerationSize0", HEX64, -1, 0, 0},         {"TotalPromotedSize0", HEX64, -1, 0, 0},
    {"GenerationSize1", HEX64, -1, 0, 0},         {"TotalPromotedSize1", HEX64, -1, 0, 0},
    {"GenerationSize2", HEX64, -1, 0, 0},         {"TotalPromotedSize2", HEX64, -1, 0, 0},
    {"GenerationSize3", HEX64, -1, 0, 0},         {"TotalPromotedSize3", HEX64, -1, 0, 0},
    {"FinalizationPromotedSize", HEX64, -1, 0, 0}, {"FinalizationPromotedCount", 10, 0, -1, 0, 0},
    {"PinnedObjectCount", 8, 0, -1, 0, 0},        {"SinkBlockCount", 8, 0, -1, 0, 0},
    {"GCHandleCount", 8, 0, -1, 0, 0},            {"ClrInstanceID", 6, 0, -1, 0, 0},
    {"GenerationSize4", HEX64, -1, 0, 0},         {"TotalPromotedSize4", HEX64, -1, 0, 0}};
/* GCAllocationTick v4 (Runtime 10): GCAllocationTick_V3 (both ClrEtwAll.man copies), then
 * ObjectSize UInt64 (PerfView ClrTraceEventParser.cs, GCAllocationTickTraceData: version 4). */
static const struct fdef ALLOCTICK4[] = {
    {"AllocationAmount", HEX32, -1, 0, 0}, {"AllocationKind", 8, 0, -1, 0, 1}, {"ClrInstanceID", 6, 0, -1, 0, 0},
    {"AllocationAmount64", HEX64, -1, 0, 0}, {"TypeID", 16, 0, -1, 0, 0},     {"TypeName", 1, 0, -1, 0, 0},
    {"HeapIndex", 8, 0, -1, 0, 0},         {"Address", 16, 0, -1, 0, 0},     {"ObjectSize", 10, 0, -1, 0, 0}};
/* GCGlobalHeapHistory v3 / v4 (Runtime 205): GCGlobalHeap_V2 (ClrEtwAll.man), then CondemnReasons0,
 * CondemnReasons1 (v3, 46 bytes), then Count UInt32 and Times UInt32[Count] (v4) (PerfView
 * GCGlobalHeapHistoryTraceData; dotnet/runtime GCGlobalHeap_V3). */
static const struct fdef GHH4[] = {
    {"FinalYoungestDesired", HEX64, -1, 0, 0}, {"NumHeaps", 7, 0, -1, 0, 0},      {"CondemnedGeneration", 8, 0, -1, 0, 0},
    {"Gen0ReductionCount", 8, 0, -1, 0, 0},    {"Reason", 8, 0, -1, 0, 0},        {"GlobalMechanisms", 8, 0, -1, 0, 0},
    {"ClrInstanceID", 6, 0, -1, 0, 0},         {"PauseMode", 8, 0, -1, 0, 0},     {"MemoryPressure", 8, 0, -1, 0, 0},
    {"CondemnReasons0", 8, 0, -1, 0, 0},       {"CondemnReasons1", 8, 0, -1, 0, 0}, {"Count", 8, 0, -1, 0, 0},
    {"Times", 8, 0, 11, 0, 0}};
/* GCLOHCompact (Runtime 208): ClrInstanceID, Count, then Count C structs {TimePlan, TimeCompact,
 * TimeRelocate u32, TotalRefs, ZeroRefs pointer}: 32 bytes on 64-bit (padding before TotalRefs),
 * 20 on 32-bit (PerfView GCLOHCompactTraceData). */
static const struct fdef LOHCOMPACT[] = {
    {"ClrInstanceID", 6, 0, -1, 0, 0}, {"Count", 6, 0, -1, 0, 0},        {"Values", 24, 0, 1, 6, 0},
    {"TimePlan", 8, 0, -1, 0, 0},      {"TimeCompact", 8, 0, -1, 0, 0},  {"TimeRelocate", 8, 0, -1, 0, 0},
    {"_align", DEC_IN_ALIGN_PTR, 0, -1, 0, 0}, {"TotalRefs", 308, 0, -1, 0, 0}, {"ZeroRefs", 308, 0, -1, 0, 0}};
/* GCFitBucketInfo (Runtime 209): ClrInstanceID, BucketKind u16, TotalSize u64, Count u16, then
 * Count C structs {Index u16 (+2 padding), Count u32, Size pointer}: 16 bytes on 64-bit, 12 on
 * 32-bit (PerfView GCFitBucketInfoTraceData). */
static const struct fdef FITBUCKET[] = {
    {"ClrInstanceID", 6, 0, -1, 0, 0}, {"BucketKind", 6, 0, -1, 0, 0}, {"TotalSize", 10, 0, -1, 0, 0},
    {"Count", 6, 0, -1, 0, 0},         {"Values", 24, 0, 3, 4, 0},     {"Index", 6, 0, -1, 0, 0},
    {"_align", DEC_IN_ALIGN_4, 0, -1, 0, 0}, {"Count", 8, 0, -1, 0, 0}, {"Size", 308, 0, -1, 0, 0}};
/* GCSettingsRundown (Rundown 10, .NET 8): task CLRGCRundown (40), opcode GCSettingsRundown (10),
 * Informational, no keyword; template GCSettingsRundown (the .NET 8 ClrEtwAll.man as published
 * in Maoni0/runtime @ 5e6d1304, a fork of dotnet/runtime, MIT): 50 bytes. */
static const struct fdef GCSETTINGS[] = {
    {"HardLimit", 10, 0, -1, 0, 0},          {"LOHThreshold", 10, 0, -1, 0, 0},
    {"PhysicalMemoryConfig", 10, 0, -1, 0, 0}, {"Gen0MinBudgetConfig", 10, 0, -1, 0, 0},
    {"Gen0MaxBudgetConfig", 10, 0, -1, 0, 0}, {"HighMemPercentConfig", 8, 0, -1, 0, 0},
    {"BitSettings", 8, 0, -1, 0, 0},         {"ClrInstanceID", 6, 0, -1, 0, 0}};

#define N(a) (uint32_t)(sizeof a / sizeof a[0])
static const struct sdef BUILTIN[] = {
    {0, 4, 2, 4, 133, 1, 1, "GC", "HeapStats", HEAPSTATS2, N(HEAPSTATS2)},
    {0, 10, 4, 5, 11, 1, 1, "GC", "AllocationTick", ALLOCTICK4, N(ALLOCTICK4)},
    {0, 205, 3, 4, 205, 1, 1, "GC", "GlobalHeapHistory", GHH4, N(GHH4) - 2},
    {0, 205, 4, 4, 205, 1, 1, "GC", "GlobalHeapHistory", GHH4, N(GHH4)},
    {0, 208, 0, 4, 208, 1, 1, "GC", "LOHCompact", LOHCOMPACT, N(LOHCOMPACT)},
    {0, 209, 0, 5, 209, 1, 1, "GC", "FitBucketInfo", FITBUCKET, N(FITBUCKET)},
    {1, 10, 0, 4, 10, 40, 0, "GC", "SettingsRundown", GCSETTINGS, N(GCSETTINGS)}};

static const unsigned char *const BUILTIN_GUID[2] = {CLR_STACK_PROVIDERS[0], CLR_STACK_PROVIDERS[1]};

/* The AllocationKind value map of @p (both ClrEtwAll.man copies: 0 Small, 1 Large; 2 Pinned,
 * PerfView's GCAllocationKind), made once per provider. */
static struct dec_map *kind_map(struct dec_provider *p) {
  for (uint32_t i = 0; i < p->n_maps; i++)
    if (p->maps[i]->name && !strcmp(p->maps[i]->name, "etwd:GCAllocationKind")) return p->maps[i];
  static const char *const txt[] = {"Small", "Large", "Pinned"};
  struct dec_map *m = calloc(1, sizeof *m);
  struct dec_map **nm = m ? realloc(p->maps, (p->n_maps + 1) * sizeof *nm) : NULL;
  if (!nm) {
    free(m);
    return NULL;
  }
  p->maps = nm;
  m->name = strdup("etwd:GCAllocationKind");
  m->val = calloc(3, sizeof *m->val);
  m->str = calloc(3, sizeof *m->str);
  for (uint32_t i = 0; m->name && m->val && m->str && i < 3; i++) {
    m->val[i] = i;
    if ((m->str[i] = strdup(txt[i]))) m->n = i + 1;
  }
  if (m->n != 3) {
    dec_map_free(m);
    return NULL;
  }
  p->maps[p->n_maps++] = m;
  return m;
}

static struct dec_event *new_event(struct dec_provider *p, const struct sdef *s) {
  struct dec_event *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->f = calloc(s->nf, sizeof *e->f);
  if (!e->f) {
    free(e);
    return NULL;
  }
  char nb[96];
  snprintf(nb, sizeof nb, "%s/%s", s->task_name, s->opcode_name);
  e->name = etw_intern(nb);
  e->task_name = etw_intern(s->task_name);
  e->opcode_name = etw_intern(s->opcode_name);
  e->id = s->id;
  e->version = s->version;
  e->level = s->level;
  e->opcode = s->opcode;
  e->task = s->task;
  e->keywords = s->keywords;
  e->nf = s->nf;
  for (uint32_t i = 0; i < s->nf; i++) {
    struct dec_field *f = &e->f[i];
    const struct fdef *x = &s->f[i];
    f->name = strdup(x->name);
    f->in = x->in;
    f->out = x->out;
    f->len = -1;
    f->count = 1;
    f->len_ref = -1;
    f->count_ref = x->count_ref;
    f->is_array = x->count_ref >= 0;
    f->members = x->members;
    if (x->kind_map) f->map = kind_map(p);
    if (!f->name || (x->kind_map && !f->map)) {
      dec_event_free(e);
      return NULL;
    }
  }
  e->has_template = 1;
  e->quality = 2; /* as a schema carried in the trace: any manifest's own (quality 3) replaces it */
  return e;
}

void dec_builtin_provider(struct dec_provider *p) {
  for (size_t i = 0; i < sizeof BUILTIN / sizeof BUILTIN[0]; i++) {
    const struct sdef *s = &BUILTIN[i];
    if (memcmp(p->guid, BUILTIN_GUID[s->rundown], 16) || dec_event_find(p, s->id, s->version)) continue;
    struct dec_event *e = new_event(p, s);
    if (e) dec_event_add(p, e);
  }
}

struct dec_provider *dec_builtin_get(struct etw_decoder *d, const unsigned char guid[16]) {
  for (int i = 0; i < 2; i++)
    if (!memcmp(guid, BUILTIN_GUID[i], 16)) {
      struct dec_provider *p = dec_provider_get(d, guid, 1);
      if (p && !p->source) p->builtin_only = 1;
      return p;
    }
  return NULL;
}

void dec_builtin_supplements(struct etw_decoder *d) {
  for (int i = 0; i < 2; i++) {
    struct dec_provider *p = dec_provider_get(d, BUILTIN_GUID[i], 0);
    if (p) dec_builtin_provider(p);
  }
}
