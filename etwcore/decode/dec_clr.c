/* dec_clr.c — schemas that no public permissive manifest carries, added after the manifests
 * directory was loaded (facts from ../shared/manifests/README.md "Gaps"): newer versions of
 * .NET runtime GC events (GCHeapStats v2, GCAllocationTick v4, GCGlobalHeapHistory v4) and
 * GCLOHCompact / GCFitBucketInfo, whose array elements are C structs with alignment padding.
 */
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static const unsigned char CLR_RUNTIME[16] = {0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e,
                                              0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4};

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
