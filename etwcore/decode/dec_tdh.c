/* dec_tdh.c — schemas carried inside relogged traces: KernelTraceControl "MetaData" events
 * (provider bbccf6c1-6cd1-48c4-80ff-839482e37671) whose payload is a TDH TRACE_EVENT_INFO
 * (opcode 32, EventInfo) or EVENT_MAP_INFO (opcode 33, EventMapInfo) blob, written just before
 * the first event of each type. A parsed EventInfo becomes the authoritative schema of its
 * (provider, id, version) — and, for classic/kernel events, of its (class GUID, opcode,
 * version) — for the rest of the stream.
 *
 * TRACE_EVENT_INFO layout (all offsets relative to the blob; strings are UTF-16z):
 *   0 ProviderGuid, 16 EventGuid, 32 EVENT_DESCRIPTOR (Id u16, Version, Channel, Level,
 *   Opcode u8, Task u16, Keyword u64), 48 DecodingSource, 52 ProviderNameOffset,
 *   56 LevelNameOffset, 60 ChannelNameOffset, 64 KeywordsNameOffset, 68 TaskNameOffset,
 *   72 OpcodeNameOffset, 76 EventMessageOffset, 80 ProviderMessageOffset, 84 BinaryXMLOffset,
 *   88 BinaryXMLSize, 92 EventNameOffset, 96 EventAttributesOffset, 100 PropertyCount,
 *   104 TopLevelPropertyCount, 108 Flags, 112 EVENT_PROPERTY_INFO[PropertyCount] (24 bytes:
 *   Flags, NameOffset, InType u16 / StructStartIndex, OutType u16 / NumOfStructMembers,
 *   MapNameOffset, count u16, length u16, Tags).
 * A character property (AnsiChar, UnicodeChar, UInt8/UInt16 with OutType String) with a count is
 * an array of characters, one string; with a length (PropertyParamLength: another property's
 * value, PropertyParamFixedLength: a constant) too, that many characters (dec_char_length).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

#define TEI_HDR 112
#define EPI_SIZE 24
#define PF_STRUCT 0x1
#define PF_PARAM_LENGTH 0x2
#define PF_PARAM_COUNT 0x4
#define PF_FIXED_LENGTH 0x10
#define PF_FIXED_COUNT 0x20

/* UTF-16z at @off of blob[0..n) → malloc'd UTF-8, or NULL (off 0 / out of range). */
static char *wstr(const unsigned char *b, size_t n, uint32_t off) {
  if (!off || off >= n) return NULL;
  struct etw_jw w;
  etw_jw_init(&w, 16384);
  size_t units = 0, max = (n - off) / 2;
  while (units < max && units < 1024 && (b[off + 2 * units] | b[off + 2 * units + 1])) units++;
  etw_jw_str16(&w, b + off, units);
  if (w.err || w.len < 2) {
    etw_jw_free(&w);
    return NULL;
  }
  /* strip the quotes the JSON writer added; keep escapes out of names by rejecting them */
  char *s = malloc(w.len - 1);
  if (s) {
    memcpy(s, w.buf + 1, w.len - 2);
    s[w.len - 2] = 0;
  }
  etw_jw_free(&w);
  return s;
}

/* TDH's _TDH_OUT_TYPE numbering → the TraceLogging/manifest OutType numbering dec_value uses. */
static uint16_t tdh_out(uint16_t o) {
  static const uint8_t M[39] = {
      0,    2,    16,   17,   18,   17,   18,   17,   18,   17, /* 0-9 */
      18,   0,    0,    3,    0,    0,    4,    4,    4,    4,  /* 10-19 */
      5,    6,    7,    8,    9,    10,   0,    0,    11,   4,  /* 20-29 */
      13,   14,   15,   0x21, 12,   0x23, 0x24, 0x25, 0x26};   /* 30-38 */
  return o < 39 ? M[o] : 0;
}

struct tb {
  const unsigned char *b;
  size_t n;
  uint32_t np;
  struct dec_field *f;
  uint32_t nf, cap;
  int32_t map[DEC_MAX_FIELDS]; /* property index → flattened index (top level) */
};

static int emit(struct tb *t, uint32_t pi, int depth) {
  if (pi >= t->np || depth > DEC_MAX_DEPTH || t->nf >= DEC_MAX_FIELDS) return -1;
  if (t->nf == t->cap) { /* right-sized: most schemas have a few fields */
    uint32_t nc = t->cap ? t->cap * 2 : 16;
    if (nc > DEC_MAX_FIELDS) nc = DEC_MAX_FIELDS;
    struct dec_field *nf = realloc(t->f, nc * sizeof *nf);
    if (!nf) return -1;
    t->f = nf;
    t->cap = nc;
  }
  const unsigned char *e = t->b + TEI_HDR + (size_t)pi * EPI_SIZE;
  uint32_t flags = d_rd32(e), name = d_rd32(e + 4);
  uint32_t idx = t->nf++;
  struct dec_field *f = &t->f[idx];
  memset(f, 0, sizeof *f);
  f->name = wstr(t->b, t->n, name);
  if (!f->name) f->name = strdup("_");
  if (!f->name) return -1;
  f->len = -1;
  f->count = 1;
  f->len_ref = f->count_ref = -1;
  if (pi < DEC_MAX_FIELDS && depth == 0) t->map[pi] = (int32_t)idx;
  uint16_t cnt = d_rd16(e + 16), len = d_rd16(e + 18);
  if (flags & PF_PARAM_COUNT) {
    f->is_array = 1;
    f->count_ref = cnt < DEC_MAX_FIELDS ? t->map[cnt] : -1;
  } else if (cnt > 1 || (flags & PF_FIXED_COUNT)) {
    f->is_array = 1;
    f->count = cnt;
  }
  if (flags & PF_STRUCT) {
    f->in = 24;
    uint16_t start = d_rd16(e + 8), nm = d_rd16(e + 10);
    for (uint32_t k = 0; k < nm; k++) {
      if (emit(t, (uint32_t)start + k, depth + 1) < 0) return -1;
    }
    t->f[idx].members = (uint16_t)(t->nf - idx - 1);
    return 0;
  }
  f->in = d_rd16(e + 8);
  f->out = tdh_out(d_rd16(e + 10));
  char *mn = wstr(t->b, t->n, d_rd32(e + 12));
  if (mn && *mn) f->map_name = etw_intern(mn);
  free(mn);
  if (flags & PF_PARAM_LENGTH) f->len_ref = len < DEC_MAX_FIELDS ? t->map[len] : -1;
  else if (len && (f->in == 1 || f->in == 2 || f->in == 14)) f->len = len;
  else if ((flags & PF_FIXED_LENGTH) && dec_char_width(f->in, f->out)) f->len = len;
  dec_char_length(f); /* characters with a length: that many (one string) */
  return 0;
}

struct dec_map *dec_trace_map(struct dec_provider *p, const char *name) {
  for (uint32_t i = 0; p && i < p->n_maps; i++)
    if (p->maps[i]->name && !strcmp(p->maps[i]->name, name)) return p->maps[i];
  return NULL;
}

/* EventMapInfo payload: the provider GUID, then an EVENT_MAP_INFO (offsets relative to it):
 * NameOffset, Flag (1 value map, 2 bitmap), EntryCount, value type, {OutputOffset, Value}[].
 * Map strings often end in a space: trimmed. The map joins its provider's maps. */
static void event_map_info(struct etw_decoder *d, const unsigned char *blob, size_t bn) {
  if (bn < 16 + 16) return;
  const unsigned char *b = blob + 16;
  size_t n = bn - 16;
  uint32_t flag = d_rd32(b + 4), cnt = d_rd32(b + 8);
  if (cnt > 4096 || 16 + (size_t)cnt * 8 > n || !(flag & 3)) return;
  struct dec_provider *h = dec_provider_get(d, blob, 1);
  if (!h || h->n_maps >= 4096) return;
  char *name = wstr(b, n, d_rd32(b));
  if (!name) return;
  if (dec_trace_map(h, name)) {
    free(name);
    return;
  }
  struct dec_map *m = calloc(1, sizeof *m);
  if (!m) {
    free(name);
    return;
  }
  m->name = name;
  m->bitmap = (flag & 2) != 0;
  m->val = calloc(cnt ? cnt : 1, sizeof *m->val);
  m->str = calloc(cnt ? cnt : 1, sizeof *m->str);
  if (!m->val || !m->str) {
    dec_map_free(m);
    return;
  }
  for (uint32_t i = 0; i < cnt; i++) {
    char *s = wstr(b, n, d_rd32(b + 16 + 8 * i));
    if (!s) continue;
    size_t l = strlen(s);
    while (l && s[l - 1] == ' ') s[--l] = 0;
    m->val[m->n] = d_rd32(b + 20 + 8 * i);
    m->str[m->n++] = s;
  }
  struct dec_map **nm = realloc(h->maps, (h->n_maps + 1) * sizeof *nm);
  if (!nm) {
    dec_map_free(m);
    return;
  }
  h->maps = nm;
  h->maps[h->n_maps++] = m;
}

void dec_eventinfo(struct etw_decoder *d, const struct etw_rec *r) {
  if (r->desc.opcode == 33) {
    event_map_info(d, r->user_data, r->user_len);
    return;
  }
  if (r->desc.opcode != 32) return;
  const unsigned char *b = r->user_data;
  size_t n = r->user_len;
  if (n < TEI_HDR) return;
  uint32_t np = d_rd32(b + 100), ntop = d_rd32(b + 104);
  if (np > DEC_MAX_FIELDS || ntop > np || TEI_HDR + (size_t)np * EPI_SIZE > n) return;
  uint64_t gen0 = d->reg_gen; /* (a lazy manifest load for b adds schemas too) */
  struct dec_provider *p = dec_provider_get(d, b, 1);
  if (!p) return;
  const char *name0 = p->name;
  if (!p->name) {
    char *pn = wstr(b, n, d_rd32(b + 52));
    if (pn) p->name = etw_intern(pn);
    free(pn);
  }
  if (!p->source) p->source = "eventinfo";
  struct dec_event *e = calloc(1, sizeof *e);
  struct tb t;
  t.b = b;
  t.n = n;
  t.np = np;
  t.f = NULL;
  t.nf = t.cap = 0;
  if (!e) return;
  memset(t.map, 0xFF, sizeof t.map); /* all -1 */
  int ok = 1;
  for (uint32_t i = 0; i < ntop && ok; i++) ok = emit(&t, i, 0) == 0;
  if (!t.f && ok) t.f = calloc(1, sizeof *t.f); /* no fields: an empty template */
  if (!t.f) {
    free(e);
    return;
  }
  e->f = t.f;
  e->nf = t.nf;
  if (!ok) {
    dec_event_free(e);
    return;
  }
  e->id = d_rd16(b + 32);
  e->version = b[34];
  e->channel = b[35];
  e->level = b[36];
  e->opcode = b[37];
  e->task = d_rd16(b + 38);
  e->keywords = d_rd64(b + 40);
  e->has_template = 1;
  e->quality = 2;
  char *tn = wstr(b, n, d_rd32(b + 68)), *on = wstr(b, n, d_rd32(b + 72)), *en = wstr(b, n, d_rd32(b + 92));
  static const char *const wins[][2] = {{"win:Info", ""}, {"win:Start", "Start"}, {"win:Stop", "Stop"},
                                        {"win:DC_Start", "DCStart"}, {"win:DC_Stop", "DCStop"},
                                        {"win:Extension", "Extension"}, {"win:Reply", "Reply"},
                                        {"win:Resume", "Resume"}, {"win:Suspend", "Suspend"},
                                        {"win:Send", "Send"}, {"win:Receive", "Receive"}};
  for (size_t i = 0; on && i < sizeof wins / sizeof wins[0]; i++)
    if (!strcmp(on, wins[i][0])) {
      size_t l = strlen(wins[i][1]);
      memcpy(on, wins[i][1], l + 1);
      break;
    }
  char nb[300];
  int omit_op = !on || !*on || e->opcode == 0;
  if (tn && *tn && !omit_op) snprintf(nb, sizeof nb, "%s/%s", tn, on);
  else if (tn && *tn) snprintf(nb, sizeof nb, "%s", tn);
  else if (en && *en) snprintf(nb, sizeof nb, "%s", en);
  else snprintf(nb, sizeof nb, "EventID(%u)", e->id);
  e->name = etw_intern(nb);
  e->task_name = tn && *tn ? etw_intern(tn) : NULL;
  e->opcode_name = on && *on ? etw_intern(on) : NULL;
  free(tn), free(on), free(en);
  dec_event_add(p, e);
  /* kernel names may now resolve through this schema: a new generation empties the cache (not
   * when the registry did not change: a repeated schema is rejected by dec_event_add) */
  if (d->reg_gen != gen0 || p->name != name0)
    if (++d->kn_gen == 0) memset(d->kn, 0, sizeof d->kn); /* after 2^32 generations */
}
