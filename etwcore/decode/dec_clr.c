/* dec_clr.c — schemas that no public permissive manifest carries, added after the manifests
 * directory was loaded (facts from ../shared/manifests/README.md "Gaps"): newer versions of
 * .NET runtime GC events (GCHeapStats v2, GCAllocationTick v4, GCGlobalHeapHistory v4) and
 * GCLOHCompact / GCFitBucketInfo, whose array elements are C structs with alignment padding;
 * and the CLR stack walk template corrected in every schema that declares it (dec_clr_fix).
 */
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static const unsigned char CLR_RUNTIME[16] = {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e,
                                              0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4};

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
  if (e->id == 15 && !memcmp(p->guid, CLR_RUNTIME, 16)) {
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

struct fdef {
  const char *name;
  uint16_t in;
  int32_t count_ref; /* -1 or index */
  uint16_t members;
};

static struct dec_event *new_event(uint16_t id, uint8_t ver, const char *name, const struct dec_event *like,
                                   const struct fdef *extra, uint32_t n_extra) {
  struct dec_event *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  uint32_t base = like ? like->nf : 0;
  e->f = calloc(base + n_extra ? base + n_extra : 1, sizeof *e->f);
  if (!e->f) {
    free(e);
    return NULL;
  }
  if (like) {
    e->level = like->level;
    e->opcode = like->opcode;
    e->task = like->task;
    e->keywords = like->keywords;
    e->name = like->name;
    e->task_name = like->task_name;
    e->opcode_name = like->opcode_name;
    for (uint32_t i = 0; i < base; i++) {
      e->f[i] = like->f[i];
      e->f[i].name = strdup(like->f[i].name ? like->f[i].name : "_");
      e->f[i].key = NULL;
      e->f[i].key_len = 0;
      e->f[i].kind = 0;
    }
  } else {
    if (!name) name = "GC/?";
    e->name = etw_intern(name);
    e->task_name = etw_intern("GC");
    const char *sl = strchr(name, '/');
    e->opcode_name = sl ? etw_intern(sl + 1) : NULL;
    e->level = 4;
    e->task = 1;
  }
  for (uint32_t i = 0; i < n_extra; i++) {
    struct dec_field *f = &e->f[base + i];
    memset(f, 0, sizeof *f);
    f->name = strdup(extra[i].name);
    f->in = extra[i].in;
    f->len = -1;
    f->count = 1;
    f->len_ref = -1;
    f->count_ref = extra[i].count_ref >= 0 ? (int32_t)base + extra[i].count_ref : -1;
    f->is_array = extra[i].count_ref >= 0;
    f->members = extra[i].members;
  }
  e->nf = base + n_extra;
  for (uint32_t i = 0; i < e->nf; i++)
    if (!e->f[i].name) {
      dec_event_free(e);
      return NULL;
    }
  e->id = id;
  e->version = ver;
  e->has_template = 1;
  e->quality = 3;
  return e;
}

static void extend(struct dec_provider *p, uint16_t id, uint8_t from, const struct fdef *x, uint32_t n) {
  if (dec_event_find(p, id, (uint8_t)(from + 1))) return;
  struct dec_event *like = dec_event_find(p, id, from);
  if (!like || !like->has_template) return;
  struct dec_event *e = new_event(id, (uint8_t)(from + 1), NULL, like, x, n);
  if (e) dec_event_add(p, e);
}

void dec_builtin_supplements(struct etw_decoder *d) {
  struct dec_provider *p = dec_provider_get(d, CLR_RUNTIME, 0);
  if (!p) return;
  static const struct fdef heapstats2[] = {{"GenerationSize4", 10, -1, 0}, {"TotalPromotedSize4", 10, -1, 0}};
  extend(p, 4, 1, heapstats2, 2);
  static const struct fdef alloctick4[] = {{"ObjectSize", 10, -1, 0}};
  extend(p, 10, 3, alloctick4, 1);
  static const struct fdef ghh3[] = {{"CondemnReasons0", 8, -1, 0}, {"CondemnReasons1", 8, -1, 0}};
  extend(p, 205, 2, ghh3, 2);
  static const struct fdef ghh4[] = {{"Count", 8, -1, 0}, {"Times", 8, 0, 0}};
  extend(p, 205, 3, ghh4, 2);
  if (!dec_event_find(p, 208, 0)) {
    static const struct fdef lc[] = {
        {"ClrInstanceID", 6, -1, 0}, {"Count", 6, -1, 0}, {"Values", 24, 1, 6},
        {"TimePlan", 8, -1, 0},      {"TimeCompact", 8, -1, 0}, {"TimeRelocate", 8, -1, 0},
        {"_align", DEC_IN_ALIGN_PTR, -1, 0}, {"TotalRefs", 308, -1, 0}, {"ZeroRefs", 308, -1, 0}};
    struct dec_event *e = new_event(208, 0, "GC/LOHCompact", NULL, lc, 9);
    if (e) {
      e->opcode = 208 & 0xFF;
      dec_event_add(p, e);
    }
  }
  if (!dec_event_find(p, 209, 0)) {
    static const struct fdef fb[] = {
        {"ClrInstanceID", 6, -1, 0}, {"BucketKind", 6, -1, 0}, {"TotalSize", 10, -1, 0},
        {"Count", 6, -1, 0},         {"Values", 24, 3, 4},     {"Index", 6, -1, 0},
        {"_align", DEC_IN_ALIGN_4, -1, 0}, {"Count", 8, -1, 0}, {"Size", 308, -1, 0}};
    struct dec_event *e = new_event(209, 0, "GC/FitBucketInfo", NULL, fb, 9);
    if (e) dec_event_add(p, e);
  }
}
