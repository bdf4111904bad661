/* dec_core.c — the decoder object: provider registry, dispatch by record kind, the System
 * block, the Undecoded fallback (header + reason + base64 payload; nothing is dropped), and the
 * Unparsed member after EventData for payload bytes the applied schema did not consume.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "decode.h"

#define ICACHE 1024

struct icache_ent {
  uint64_t h;
  const char *s;
};
static _Thread_local struct icache_ent icache[ICACHE];

/* Interned copy of s[0..n), cached per thread (etw_intern takes a global lock). */
static const char *intern_n(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  struct icache_ent *e = &icache[h & (ICACHE - 1)];
  if (e->s && e->h == h && strlen(e->s) == n && !memcmp(e->s, s, n)) return e->s;
  char buf[512];
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, s, n);
  buf[n] = 0;
  for (size_t i = 0; i < n; i++)
    if (!buf[i]) buf[i] = '?';
  e->h = h;
  e->s = etw_intern(buf);
  return e->s;
}

/* ---- registry */
static uint32_t guid_hash(const unsigned char g[16]) { return d_rd32(g) ^ d_rd32(g + 4) ^ d_rd32(g + 8) ^ d_rd32(g + 12); }

/* The manifests directory is indexed before the registry answers its first question, whatever
 * asks it (an event, an EventInfo/EventMapInfo blob, an EventSource manifest, TraceLogging): a
 * provider's manifests are then always loaded before any schema the trace carries for it, so the
 * schema precedence (dec_event_add: quality, then first loaded) and every name it gives are the
 * same whichever record comes first — in a merge of several files, in any order (issue 25). */
struct dec_provider *dec_provider_get(struct etw_decoder *d, const unsigned char guid[16], int create) {
  if (ETW_EXPECT(!d->manifests_scanned, 0) && d->manifest_dir) {
    d->manifests_scanned = 1;
    dec_manifest_index_dir(d, d->manifest_dir);
  }
  if (d->prov_cap) {
    uint32_t i = guid_hash(guid) & (d->prov_cap - 1);
    while (d->prov[i]) {
      if (!memcmp(d->prov[i]->guid, guid, 16)) return d->prov[i];
      i = (i + 1) & (d->prov_cap - 1);
    }
  }
  if (d->lazy && dec_lazy_load(d, guid)) return dec_provider_get(d, guid, create);
  if (!create || d->n_prov >= DEC_MAX_PROVIDERS) return NULL;
  if ((d->n_prov + 1) * 2 > d->prov_cap) {
    uint32_t nc = d->prov_cap ? d->prov_cap * 2 : 64;
    struct dec_provider **nt = calloc(nc, sizeof *nt);
    if (!nt) return NULL;
    for (uint32_t k = 0; k < d->prov_cap; k++) {
      if (!d->prov[k]) continue;
      uint32_t j = guid_hash(d->prov[k]->guid) & (nc - 1);
      while (nt[j]) j = (j + 1) & (nc - 1);
      nt[j] = d->prov[k];
    }
    free(d->prov);
    d->prov = nt;
    d->prov_cap = nc;
  }
  struct dec_provider *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  memcpy(p->guid, guid, 16);
  p->dec = d;
  uint32_t j = guid_hash(guid) & (d->prov_cap - 1);
  while (d->prov[j]) j = (j + 1) & (d->prov_cap - 1);
  d->prov[j] = p;
  d->n_prov++;
  dec_builtin_provider(p);
  return p;
}

static uint32_t ev_hash(uint16_t id, uint8_t v) { return ((uint32_t)id * 2654435761u) ^ v; }

struct dec_event *dec_event_find(struct dec_provider *p, uint16_t id, uint8_t version) {
  if (!p->ev_cap) return NULL;
  uint32_t i = ev_hash(id, version) & (p->ev_cap - 1);
  while (p->ev[i]) {
    if (p->ev[i]->id == id && p->ev[i]->version == version) return p->ev[i];
    i = (i + 1) & (p->ev_cap - 1);
  }
  return NULL;
}

void dec_map_free(struct dec_map *m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->n; i++) free(m->str[i]);
  free(m->str);
  free(m->slen);
  free(m->val);
  free(m->name);
  free(m);
}

void dec_event_free(struct dec_event *e) {
  if (!e) return;
  for (uint32_t i = 0; i < e->nf; i++) {
    free(e->f[i].name);
    free(e->f[i].key);
  }
  free(e->f);
  free(e);
}

/* The provider name pointer of every expired manifest/classic plan (eplan_dispatch's one-word test
 * has no generation compare): its address is no provider's name, so *pnamep != pname. Invariant:
 * a plan whose gen is not reg_gen reads it through pnamep (dec_reg_bump, eplan_settle). */
static const char eplan_dead_c;
const char *const dec_eplan_dead = &eplan_dead_c;

/* A new registry generation: every plan expires (pnamep to dec_eplan_dead), once per generation with a
 * valid plan (a manifest's many schemas: one sweep). */
static void dec_reg_bump(struct etw_decoder *d) {
  d->reg_gen++;
  if (!d->eplan_live) return;
  d->eplan_live = 0;
  for (uint32_t i = 0; i < DEC_EPLAN_N; i++)
    if (d->eplan[i]) d->eplan[i]->pnamep = &dec_eplan_dead;
}

int dec_event_add(struct dec_provider *p, struct dec_event *e) {
  e->owner = p;
  dec_clr_fix(p, e);
  if (p->ev_cap) {
    uint32_t i = ev_hash(e->id, e->version) & (p->ev_cap - 1);
    while (p->ev[i]) {
      if (p->ev[i]->id == e->id && p->ev[i]->version == e->version) {
        if (p->ev[i]->quality >= e->quality) { /* the first of the best quality wins */
          dec_event_free(e);
          return 0;
        }
        dec_event_free(p->ev[i]);
        p->ev[i] = e;
        if (p->dec) dec_reg_bump(p->dec); /* a schema replaced: the plans made with it expire */
        return 0;
      }
      i = (i + 1) & (p->ev_cap - 1);
    }
  }
  if (p->n_ev >= DEC_MAX_EVENTS) {
    dec_event_free(e);
    return -1;
  }
  if ((p->n_ev + 1) * 2 > p->ev_cap) {
    uint32_t nc = p->ev_cap ? p->ev_cap * 2 : 32;
    struct dec_event **nt = calloc(nc, sizeof *nt);
    if (!nt) {
      dec_event_free(e);
      return -1;
    }
    for (uint32_t k = 0; k < p->ev_cap; k++) {
      if (!p->ev[k]) continue;
      uint32_t j = ev_hash(p->ev[k]->id, p->ev[k]->version) & (nc - 1);
      while (nt[j]) j = (j + 1) & (nc - 1);
      nt[j] = p->ev[k];
    }
    free(p->ev);
    p->ev = nt;
    p->ev_cap = nc;
  }
  uint32_t j = ev_hash(e->id, e->version) & (p->ev_cap - 1);
  while (p->ev[j]) j = (j + 1) & (p->ev_cap - 1);
  p->ev[j] = e;
  p->n_ev++;
  if (p->dec) dec_reg_bump(p->dec); /* a schema added (a rejected one changes nothing) */
  return 0;
}

/* the mode of new decoders and readers (etw_decode_set_default) */
static _Atomic int decode_default;

void etw_decode_set_default(enum etw_decode_mode m) {
  atomic_store_explicit(&decode_default, m == ETW_DECODE_REFERENCE, memory_order_relaxed);
}
enum etw_decode_mode etw_decode_default(void) {
  return atomic_load_explicit(&decode_default, memory_order_relaxed) ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST;
}
int etw_decode_parse(const char *s, enum etw_decode_mode *m) {
  if (s && !strcmp(s, "fast")) *m = ETW_DECODE_FAST;
  else if (s && !strcmp(s, "reference")) *m = ETW_DECODE_REFERENCE;
  else return -1;
  return 0;
}

void etw_decoder_set_mode(struct etw_decoder *d, enum etw_decode_mode m) {
  d->reference = m == ETW_DECODE_REFERENCE;
  if (d->reference) dec_plans_free(d); /* (the dispatch finds no plan: every event on the general path) */
}

struct etw_decoder *etw_decoder_new(const char *manifest_dir) {
  struct etw_decoder *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->reference = etw_decode_default() == ETW_DECODE_REFERENCE;
  d->reg_gen = 1;
  dec_plans_init(d);
  d->eplan_mul = DEC_EPLAN_MUL;
  if (manifest_dir && *manifest_dir) {
    d->manifest_dir = strdup(manifest_dir);
    if (!d->manifest_dir) {
      free(d);
      return NULL;
    }
  }
  return d;
}

void etw_decoder_free(struct etw_decoder *d) {
  if (!d) return;
  for (uint32_t i = 0; i < d->prov_cap; i++) {
    struct dec_provider *p = d->prov[i];
    if (!p) continue;
    for (uint32_t k = 0; k < p->ev_cap; k++) dec_event_free(p->ev[k]);
    for (uint32_t k = 0; k < p->n_maps; k++) dec_map_free(p->maps[k]);
    free(p->maps);
    free(p->ev);
    free(p->es_buf);
    free(p->es_last);
    free(p->tl_names);
    free(p);
  }
  free(d->prov);
  dec_sys_free(d);
  dec_proc_free(d);
  dec_lazy_free(d);
  free(d->manifest_dir);
  free(d);
}

/* ---- names */
struct names {
  const char *prov, *name, *task, *opcode;
  struct dec_provider *p;
  struct dec_event *e;
  struct dec_kname *kc; /* kernel records: the name cache entry */
  int tl;
};

static void guid_name(char out[39], const unsigned char g[16]) { etw_format_guid(out, g); }

/* Keep the TraceLogging event names of a provider (bounded; the last one is checked first). */
static void remember_tl_name(struct dec_provider *p, const char *name) {
  if (p->n_tl && p->tl_names[p->n_tl - 1] == name) return;
  for (uint32_t i = 0; i < p->n_tl; i++)
    if (p->tl_names[i] == name) {
      p->tl_names[i] = p->tl_names[p->n_tl - 1]; /* move to the end: next hit is O(1) */
      p->tl_names[p->n_tl - 1] = name;
      return;
    }
  if (p->n_tl >= DEC_MAX_TL_NAMES) return;
  const char **nn = realloc(p->tl_names, (p->n_tl + 1) * sizeof *nn);
  if (!nn) return;
  p->tl_names = nn;
  p->tl_names[p->n_tl++] = name;
}

static int as_classic(const struct etw_rec *r);
static void resolve_classic(struct etw_decoder *d, const struct etw_rec *r, struct names *n, int *stable);

/* @cls: as_classic(r), computed by the caller. */
static void resolve(struct etw_decoder *d, const struct etw_rec *r, struct names *n, int cls) {
  memset(n, 0, sizeof *n);
  char buf[300];
  if (r->kind == ETW_REC_EVENT && !cls) {
    const char *pn, *en;
    size_t pl, el;
    if (r->n_ext && dec_tl_names(r, &pn, &pl, &en, &el) == 2) {
      n->tl = 1;
      n->prov = pn ? intern_n(pn, pl) : NULL;
      n->name = intern_n(en, el);
      if (!n->prov) {
        guid_name(buf, r->provider_id);
        n->prov = intern_n(buf, strlen(buf));
      }
      n->p = dec_provider_get(d, r->provider_id, 1);
      if (n->p && !n->p->name) {
        n->p->name = n->prov;
        n->p->source = "tracelogging";
      }
      if (n->p) remember_tl_name(n->p, n->name);
      return;
    }
    struct dec_provider *p = dec_provider_get(d, r->provider_id, 0); /* (indexes the manifests first) */
    if (!p) p = dec_builtin_get(d, r->provider_id);
    n->p = p;
    if (p && p->name) n->prov = p->name;
    else { /* no manifest or metadata named it: the built-in table, else the GUID */
      guid_name(buf, r->provider_id);
      const char *kn = dec_known_provider(buf);
      n->prov = kn ? intern_n(kn, strlen(kn)) : intern_n(buf, strlen(buf));
    }
    if (r->desc.id == 0xFFFE && r->desc.opcode == 254) {
      n->name = intern_n("ManifestData", 12);
      return;
    }
    if (p) n->e = dec_event_find(p, r->desc.id, r->desc.version);
    if (n->e) {
      n->name = n->e->name;
      n->task = n->e->task_name;
      n->opcode = n->e->opcode_name;
    } else {
      int k = snprintf(buf, sizeof buf, "EventID(%u)", r->desc.id);
      n->name = intern_n(buf, (size_t)k);
    }
    return;
  }
  if (r->kind == ETW_REC_WPP) {
    guid_name(buf, r->provider_id);
    n->prov = intern_n(buf, strlen(buf));
    int k = snprintf(buf, sizeof buf, "Message(%u)", r->wpp_msg_number);
    n->name = intern_n(buf, (size_t)k);
    return;
  }
  /* kernel and classic */
  struct dec_kname *kc = NULL;
  if (r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) {
    uint32_t key32 = ((uint32_t)r->hook_id << 8 | r->desc.version) + 1;
    uint64_t key = (uint64_t)d->kn_gen << 32 | key32;
    kc = &d->kn[(key32 * 2654435761u) >> 22];
    n->kc = kc;
    if (kc->key == key) {
      n->prov = kc->prov;
      n->name = kc->name;
      n->task = kc->task;
      n->opcode = kc->opcode;
      n->p = kc->p;
      n->e = kc->e;
      return;
    }
    kc->key = key;
  }
  struct dec_cname *cc = NULL;
  uint32_t ckey = 0;
  if (!kc) {
    ckey = ((uint32_t)r->kind << 16 | (uint32_t)r->desc.opcode << 8 | r->desc.version) + 1;
    uint32_t h = (ckey ^ d_rd32(r->provider_id) ^ d_rd32(r->provider_id + 12)) * 2654435761u;
    cc = &d->cn[h >> 26 & (DEC_CNAME_N - 1)];
    if (cc->key == ckey && !memcmp(cc->guid, r->provider_id, 16)) {
      n->prov = cc->prov;
      n->name = cc->name;
      n->task = cc->task;
      n->opcode = cc->opcode;
      return;
    }
  }
  int stable = 0;
  resolve_classic(d, r, n, &stable);
  if (cc && stable) { /* names from the built-in tables only (no registry state involved) */
    cc->key = ckey;
    memcpy(cc->guid, r->provider_id, 16);
    cc->prov = n->prov;
    cc->name = n->name;
    cc->task = n->task;
    cc->opcode = n->opcode;
  }
  if (kc) {
    kc->prov = n->prov;
    kc->name = n->name;
    kc->task = n->task;
    kc->opcode = n->opcode;
    kc->p = n->p;
    kc->e = n->e;
  }
}

static void resolve_classic(struct etw_decoder *d, const struct etw_rec *r, struct names *n, int *stable) {
  char buf[300];
  const char *t = NULL, *o = NULL;
  int known = dec_mof_names(r, &t, &o);
  *stable = o != NULL;
  if (!o) { /* unknown to the built-in tables: a schema carried in the trace (EventInfo)? */
    const unsigned char *g = dec_mof_guid(r);
    struct dec_provider *p = g ? dec_provider_get(d, g, 0) : NULL;
    for (uint32_t i = 0; p && i < p->ev_cap; i++) {
      struct dec_event *e = p->ev[i];
      if (e && e->quality == 2 && e->id == 0 && e->opcode == r->desc.opcode && e->version == r->desc.version) {
        n->p = p;
        n->e = e;
        n->prov = p->name ? p->name : intern_n("MSNT_SystemTrace", 16);
        n->name = e->name;
        n->task = e->task_name;
        n->opcode = e->opcode_name;
        return;
      }
    }
  }
  if (r->kind != ETW_REC_SYSTEM && r->kind != ETW_REC_PERFINFO && known == 2) {
    n->prov = intern_n("KernelTraceControl", 18);
  } else if (r->kind != ETW_REC_SYSTEM && r->kind != ETW_REC_PERFINFO && known != 1) {
    guid_name(buf, r->provider_id);
    n->prov = intern_n(buf, strlen(buf));
  } else {
    n->prov = intern_n("Windows Kernel", 14);
  }
  if (t && o && *o) {
    int k = snprintf(buf, sizeof buf, "%s/%s", t, o);
    n->name = intern_n(buf, (size_t)k);
  } else if (t && o) {
    n->name = intern_n(t, strlen(t));
  } else if (t) {
    int k = snprintf(buf, sizeof buf, "%s/Opcode(%u)", t, r->desc.opcode);
    n->name = intern_n(buf, (size_t)k);
  } else {
    int k = snprintf(buf, sizeof buf, "Opcode(%u)", r->desc.opcode);
    n->name = intern_n(buf, (size_t)k);
  }
  n->task = t ? intern_n(t, strlen(t)) : NULL;
  n->opcode = o && *o ? intern_n(o, strlen(o)) : NULL;
}

/* Records handled by the classic/kernel decoder (MOF layouts). */
static int as_classic(const struct etw_rec *r) {
  if (r->kind == ETW_REC_CLASSIC || r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) return 1;
  return r->kind == ETW_REC_EVENT && !r->n_ext && dec_mof_classic_guid(r->provider_id);
}

void etw_decoder_names(struct etw_decoder *d, const struct etw_rec *r, const char **provider,
                       const char **name) {
  struct names n;
  if (r->kind == ETW_REC_EVENT && r->desc.id == 0xFFFE && r->desc.opcode == 254) dec_eventsource_chunk(d, r);
  /* the process names, thread owners and host the record carries (as etw_decoder_write takes them) */
  if (r->kind >= ETW_REC_SYSTEM ? dec_proc_groups[r->hook_id >> 8] : r->kind == ETW_REC_CLASSIC)
    (void)dec_proc_apply(d, r, &d->rtmp);
  int cls = as_classic(r);
  if (cls && !memcmp(r->provider_id, DEC_GUID_KTC_METADATA, 16)) dec_eventinfo(d, r);
  resolve(d, r, &n, cls);
  *provider = n.prov;
  *name = n.name;
}

/* ---- writing */
/* Returns the payload bytes the schema consumed (all of them where none applies), or -1. */
static long write_manifest_event(struct etw_decoder *d, struct etw_jw *w, const struct etw_rec *r, const struct names *n,
                                 const char **why) {
  if (r->flags & ETW_EVH_STRING_ONLY) {
    etw_jw_lit(w, "\"String\":");
    dec_str16(w, r->user_data, r->user_len / 2);
    return (long)r->user_len;
  }
  if (!n->e) {
    *why = n->p && (n->p->source || !n->p->builtin_only) ? "no schema for this event id/version in the provider's manifest"
                : "no schema for this provider (add its manifest to the manifests directory)";
    return -1;
  }
  if (!n->e->has_template) {
    if (r->user_len == 0) return 0;
    *why = "the manifest has no template for this event";
    return -1;
  }
  return dec_fields_write_d(d, w, n->e, r->user_data, r->user_len, r->ptr_size, why);
}

/* The payload bytes after what the schema consumed: `,"Unparsed":{"Offset":N,"Bytes":M,"Data":"…"}`
 * after EventData (kept out of line: the hot path pays one comparison). */
ETW_NOINLINE static void write_unparsed(struct etw_jw *w, const struct etw_rec *r, size_t used) {
  etw_jw_lit(w, ",\"Unparsed\":{\"Offset\":");
  etw_jw_u64(w, used);
  etw_jw_lit(w, ",\"Bytes\":");
  etw_jw_u64(w, r->user_len - used);
  etw_jw_lit(w, ",\"Data\":");
  etw_jw_base64(w, r->user_data + used, r->user_len - used);
  etw_jw_ch(w, '}');
}

static int write_es_manifest(struct etw_jw *w, const struct etw_rec *r) {
  const unsigned char *p = r->user_data;
  if (r->user_len < 8) return -1;
  etw_jw_lit(w, "\"Format\":");
  etw_jw_u64(w, p[0]);
  etw_jw_lit(w, ",\"MajorVersion\":");
  etw_jw_u64(w, p[1]);
  etw_jw_lit(w, ",\"MinorVersion\":");
  etw_jw_u64(w, p[2]);
  etw_jw_lit(w, ",\"Magic\":");
  etw_jw_u64(w, p[3]);
  etw_jw_lit(w, ",\"TotalChunks\":");
  etw_jw_u64(w, d_rd16(p + 4));
  etw_jw_lit(w, ",\"ChunkNumber\":");
  etw_jw_u64(w, d_rd16(p + 6));
  etw_jw_lit(w, ",\"Data\":");
  etw_jw_str(w, (const char *)p + 8, r->user_len - 8);
  return 0;
}

static int write_wpp(struct etw_jw *w, const struct etw_rec *r) {
  etw_jw_lit(w, "\"MessageNumber\":");
  etw_jw_u64(w, r->wpp_msg_number);
  if (r->wpp_flags & 1) {
    etw_jw_lit(w, ",\"SequenceNumber\":");
    etw_jw_u64(w, r->wpp_sequence);
  }
  if (r->wpp_flags & 4) {
    etw_jw_lit(w, ",\"ComponentID\":");
    etw_jw_u64(w, r->desc.task);
  }
  etw_jw_lit(w, ",\"Arguments\":");
  etw_jw_base64(w, r->user_data, r->user_len);
  return 0;
}

/* MetaData EventInfo/EventMapInfo: the schema blob itself, summarized. */
static int write_ktc(struct etw_jw *w, const struct etw_rec *r) {
  etw_jw_lit(w, "\"Kind\":");
  etw_jw_cs(w, r->desc.opcode == 32 ? "TRACE_EVENT_INFO" : r->desc.opcode == 33 ? "EVENT_MAP_INFO" : "other");
  if (r->desc.opcode == 32 && r->user_len >= 48) {
    etw_jw_lit(w, ",\"ProviderGuid\":");
    etw_jw_guid(w, r->user_data);
    etw_jw_lit(w, ",\"EventID\":");
    etw_jw_u64(w, d_rd16(r->user_data + 32));
    etw_jw_lit(w, ",\"Version\":");
    etw_jw_u64(w, r->user_data[34]);
    etw_jw_lit(w, ",\"Opcode\":");
    etw_jw_u64(w, r->user_data[37]);
  }
  etw_jw_lit(w, ",\"Blob\":");
  etw_jw_base64(w, r->user_data, r->user_len);
  return 0;
}

/* The end of every event: EventData closed (with the Unparsed member when the schema left
 * payload bytes; @rc = bytes consumed), or, on failure (@rc < 0 or the writer in error), everything
 * from @mark (after the System block) replaced by the Undecoded member; then @ref. */
int dec_finish(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
               const char *prov, const char *name, size_t mark, long rc, const char *why) {
  if (rc >= 0 && !w->err) {
    if (ETW_EXPECT((size_t)rc < r->user_len, 0)) {
      etw_jw_ch(w, '}');
      write_unparsed(w, r, (size_t)rc);
      etw_jw_ch(w, '}');
      d->unparsed++;
    } else {
      etw_jw_lit(w, "}}");
    }
    d->decoded++;
  } else {
    int big = w->err != 0; /* (etw_jw_truncate clears it) */
    etw_jw_truncate(w, mark);
    etw_jw_lit(w, ",\"Undecoded\":{\"Reason\":");
    etw_jw_cs(w, big ? "event too large" : why);
    etw_jw_lit(w, ",\"Payload\":");
    etw_jw_base64(w, r->user_data, r->user_len);
    etw_jw_lit(w, "}}");
    d->undecoded++;
    if (big && !w->err) d->too_large++;
    rc = -1;
  }
  if (ref) dec_fill_ref(ref, r, prov, name);
  return rc >= 0;
}

/* The plan set of a record (2 ways: slots s and s + 1): the GUID's last 8 bytes and the
 * descriptor bytes, multiplied (classic records of one GUID differ in the opcode only; the
 * product's top bits depend on every input bit). */
static inline uint32_t eplan_slot(const struct etw_decoder *d, const struct etw_rec *r, uint64_t d8) {
  uint64_t g1;
  memcpy(&g1, r->provider_id + 8, 8);
  uint64_t h = (g1 ^ d8) * d->eplan_mul; /* (DEC_EPLAN_MUL: a multiply by memory, no movabs) */
  return (uint32_t)(h >> 55) << 1;
}
_Static_assert(DEC_EPLAN_N == 1024, "eplan_slot gives 10 bits");

/* Non-zero unless plan @pl's GUID, descriptor bytes (@d8) and keywords are record @r's and @r
 * has no activity ID (eplan_hit and eplan_dispatch's one-word test). */
static inline ETW_ALWAYS_INLINE uint64_t eplan_key_diff(const struct dec_eplan *pl, const struct etw_rec *r,
                                                        uint64_t d8) {
  uint64_t g0, g1, p0, p1, a0, a1;
  memcpy(&g0, r->provider_id, 8);
  memcpy(&g1, r->provider_id + 8, 8);
  memcpy(&p0, pl->guid, 8);
  memcpy(&p1, pl->guid + 8, 8);
  memcpy(&a0, r->activity_id, 8);
  memcpy(&a1, r->activity_id + 8, 8);
  return (g0 ^ p0) | (g1 ^ p1) | (pl->d8 ^ d8) | (pl->kw ^ r->desc.keyword) | a0 | a1;
}

/* Non-zero unless record @r is of plan @pl's kind and not a string-only event. */
static inline ETW_ALWAYS_INLINE uint32_t eplan_kind_diff(const struct dec_eplan *pl, const struct etw_rec *r) {
#if ETW_LE
  _Static_assert(offsetof(struct etw_rec, kind) == 0 && offsetof(struct etw_rec, flags) == 2,
                 "kind, ptr_size, flags: the record's first word");
  uint32_t k4; /* the kind and the string-only flag in one test */
  memcpy(&k4, r, 4);
  return (k4 ^ pl->kindw) & (0xFFu | (uint32_t)ETW_EVH_STRING_ONLY << 16);
#else
  return pl->kind != r->kind || (r->flags & ETW_EVH_STRING_ONLY);
#endif
}

/* Plan @pl applies to record @r (descriptor bytes @d8): same kind, GUID, descriptor and
 * keywords, registry generation; no activity ID, not a string-only event; a manifest event's:
 * the same provider name, no TraceLogging or related activity extended data; a classic
 * record's: no extended data. */
static inline int eplan_hit(const struct etw_decoder *d, const struct dec_eplan *pl, const struct etw_rec *r,
                            uint64_t d8) {
  if (eplan_key_diff(pl, r, d8) || pl->gen != d->reg_gen || eplan_kind_diff(pl, r)) return 0;
  if (*pl->pnamep != pl->pname) return 0; /* (a classic plan's: its own pname, always equal) */
  if (!r->n_ext) return 1;
  if (pl->cls) return 0; /* (a classic GUID with extended data is a manifest event) */
  for (uint16_t i = 0; i < r->n_ext; i++)
    if (r->ext[i].type == ETW_EXT_EVENT_SCHEMA_TL || r->ext[i].type == ETW_EXT_RELATED_ACTIVITYID) return 0;
  return 1;
}

/* The kernel plan key of kernel record @r (no extended data) and its kplan slot: the kn
 * generation, the hook and the kind (never 0: kinds 3 and 4; a record of another kind matches no
 * plan: every plan's key is a kernel record's). The version is the descriptor's (compared with
 * it). */
static inline uint64_t kernel_key(const struct etw_decoder *d, const struct etw_rec *r, uint32_t *kslot) {
  uint32_t key32 = (uint32_t)r->hook_id << 8 | r->kind;
  *kslot = (key32 * 2654435761u) >> 22;
#if ETW_LE
  _Static_assert(offsetof(struct etw_decoder, kn_gen) == offsetof(struct etw_decoder, kn_zero) + 4 &&
                     offsetof(struct etw_decoder, kn_zero) % 8 == 0,
                 "kn_zero, kn_gen: one aligned word");
  uint64_t g; /* kn_gen << 32 in one load */
  memcpy(&g, &d->kn_zero, 8);
  return g | key32;
#else
  return (uint64_t)d->kn_gen << 32 | key32;
#endif
}

ETW_NOINLINE int dec_kernel_general(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                                 struct etw_evref *ref) {
  uint64_t d8;
  memcpy(&d8, &r->desc, 8);
  uint32_t kslot;
  uint64_t kkey = kernel_key(d, r, &kslot);
  return dec_write_general(d, r, w, ref, d8, kslot, kkey);
}

/* A record without a plan (or a manifest/classic one without a valid plan). */
ETW_NOINLINE static int other_general(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                                   struct etw_evref *ref) {
  uint64_t d8;
  memcpy(&d8, &r->desc, 8);
  return dec_write_general(d, r, w, ref, d8, 0, 0);
}

/* Manifest events and classic records, every case but the first way's plan for a record without
 * extended data: both ways' full tests, else the general path. */
ETW_NOINLINE static int eplan_slow(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                                struct etw_evref *ref) {
  uint64_t d8;
  memcpy(&d8, &r->desc, 8);
  uint32_t slot = eplan_slot(d, r, d8);
  struct dec_eplan *pl = d->eplan[slot];
  if (pl && eplan_hit(d, pl, r, d8)) return pl->run(d, r, w, ref, pl, d8);
  pl = d->eplan[slot + 1];
  if (pl && eplan_hit(d, pl, r, d8)) return pl->run(d, r, w, ref, pl, d8);
  return other_general(d, r, w, ref); /* (a tail call with 4 arguments: no frame here) */
}

/* Manifest events and classic records: the type's plan by (GUID, id, version) (no resolve). The
 * first way's plan for a record with no extended data items (n_ext 0): every test of
 * eplan_hit in one word (the others: eplan_slow); the registry generation's by the
 * provider name's (an expired plan's pnamep is dec_eplan_dead: dec_reg_bump, eplan_settle). */
static inline ETW_ALWAYS_INLINE int eplan_dispatch(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                                    struct etw_evref *ref) {
  uint64_t d8;
  memcpy(&d8, &r->desc, 8); /* id, version, channel, level, opcode, task */
  uint32_t slot = eplan_slot(d, r, d8);
  struct dec_eplan *pl = d->eplan[slot];
  if (!pl) return eplan_slow(d, r, w, ref);
  /* (a record with extended data takes eplan_slow's full test: n_ext) */
  uint64_t m = eplan_key_diff(pl, r, d8) | ((uintptr_t)*pl->pnamep ^ (uintptr_t)pl->pname) | eplan_kind_diff(pl, r) |
               r->n_ext;
  if (ETW_EXPECT(m == 0, 1)) return pl->run(d, r, w, ref, pl, d8);
  return eplan_slow(d, r, w, ref);
}

/* A kernel record whose plan does not apply, or a record of another kind (not manifest or classic). */
ETW_NOINLINE static int kernel_slow(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                                 struct etw_evref *ref) {
  if (r->kind <= ETW_REC_PERFINFO && !r->n_ext) return dec_kernel_general(d, r, w, ref);
  return other_general(d, r, w, ref);
}

/* The record's plan, else the general path. */
static inline ETW_ALWAYS_INLINE int dispatch(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                             struct etw_evref *ref) {
  _Static_assert(offsetof(struct etw_rec, desc.keyword) - offsetof(struct etw_rec, desc) == 8,
                 "the descriptor's first 8 bytes are id, version, channel, level, opcode, task");
  /* (tail calls with at most 6 arguments only: no frame here) */
  _Static_assert(ETW_REC_EVENT == 1 && ETW_REC_CLASSIC == 2 && ETW_REC_SYSTEM == 3 && ETW_REC_PERFINFO == 4,
                 "kinds: one compare for manifest and classic records; the kind in the kernel key");
  /* manifest events and classic records (a kind 0 record finds no plan: every plan's kind is 1
   * or 2) */
  if (r->kind <= ETW_REC_CLASSIC) return eplan_dispatch(d, r, w, ref);
  /* kernel records: the type's plan, reached with the kind and hook (no resolve); extended data or
   * another kind: no plan applies (kernel_slow) */
  uint64_t d8;
  memcpy(&d8, &r->desc, 8);
  uint32_t kslot;
  uint64_t kkey = kernel_key(d, r, &kslot);
  struct dec_kplan *pl = d->kplan[kslot]; /* (never NULL: dec_kplan_none's key is 0) */
  if (((pl->key ^ kkey) | (pl->d8 ^ d8) | (pl->kw ^ r->desc.keyword) | r->n_ext) == 0) return pl->run(d, r, w, ref, pl);
  return kernel_slow(d, r, w, ref);
}

/* A record of a kernel group with process context (or a classic one: maybe a live kernel
 * event): the tables updated, then the record with the PID/TID its payload gives. */
ETW_NOINLINE static int proc_write(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                   struct etw_evref *ref) {
  const struct etw_rec *x = r->hook_id == 0x0F2E && r->kind == ETW_REC_PERFINFO ? dec_proc_sample(d, r, &d->rtmp)
                                                                                : dec_proc_apply(d, r, &d->rtmp);
  return dispatch(d, x, w, ref); /* (the copy in the decoder: no frame here) */
}

int etw_decoder_write(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                      struct etw_evref *ref) {
  if (ETW_EXPECT(r->kind >= ETW_REC_SYSTEM ? dec_proc_groups[r->hook_id >> 8] : r->kind == ETW_REC_CLASSIC, 0))
    return proc_write(d, r, w, ref);
  return dispatch(d, r, w, ref);
}

/* After dec_eplan_update on set @slot: its expired ways (a failed build: gen 0) read dec_eplan_dead
 * (the one-word test's generation compare), a valid one makes the next registry change sweep. */
static void eplan_settle(struct etw_decoder *d, uint32_t slot) {
  for (uint32_t k = slot; k < slot + 2; k++) {
    struct dec_eplan *pl = d->eplan[k];
    if (!pl) continue;
    if (pl->gen != d->reg_gen) pl->pnamep = &dec_eplan_dead;
    else d->eplan_live = 1;
  }
}

/* Every record without a valid plan: names resolved, the System block (cached per schema), the
 * EventData writer of the record's kind. @kkey (0 = not a kernel record without extended data):
 * the kernel type's name cache key in slot @kslot. */
ETW_NOINLINE int dec_write_general(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                                struct etw_evref *ref, uint64_t d8, uint32_t kslot, uint64_t kkey) {
  struct names n;
  int is_es = r->kind == ETW_REC_EVENT && r->desc.id == 0xFFFE && r->desc.opcode == 254;
  int cls = as_classic(r);
  int is_ktc = cls && !memcmp(r->provider_id, DEC_GUID_KTC_METADATA, 16);
  if (is_es) dec_eventsource_chunk(d, r);
  if (is_ktc) dec_eventinfo(d, r);
  resolve(d, r, &n, cls);
  /* activity IDs (they make the block variable: the shared writer) */
  const unsigned char *act = NULL, *rel = NULL;
  if (r->kind == ETW_REC_EVENT) {
    uint64_t a0, a1;
    memcpy(&a0, r->activity_id, 8);
    memcpy(&a1, r->activity_id + 8, 8);
    if (a0 | a1) act = r->activity_id;
  }
  for (uint16_t i = 0; i < r->n_ext; i++)
    if (r->ext[i].type == ETW_EXT_RELATED_ACTIVITYID && r->ext[i].len >= 16) rel = r->ext[i].data;
  /* the schema that fixes the block's constant text with the descriptor: a manifest event's,
   * or a kernel record's name entry */
  void **hint = NULL;
  const void *tag = NULL;
  if (r->kind == ETW_REC_EVENT && !cls && n.e && !n.tl) {
    hint = &n.e->sys_hint;
    tag = n.e;
  } else if (n.kc) {
    hint = &n.kc->sys_hint;
    tag = n.kc;
  }
  /* a kernel record without an EventInfo schema: its type's plan is (re)built below */
  int kplan = kkey && n.kc && !n.e && !rel;
  /* a manifest event with a template: its type's plan is (re)built below unless it applies */
  uint32_t eslot = 0;
  int eplan = 0;
  if (r->kind == ETW_REC_EVENT && !cls && n.e && !n.tl && !is_es && !act && !rel && n.e->has_template &&
      !(r->flags & ETW_EVH_STRING_ONLY) && !dec_mof_classic_guid(r->provider_id) && !d->reference) {
    eslot = eplan_slot(d, r, d8);
    const struct dec_eplan *p0 = d->eplan[eslot], *p1 = d->eplan[eslot + 1];
    eplan = !(p0 && p0->e == n.e && eplan_hit(d, p0, r, d8)) && !(p1 && p1->e == n.e && eplan_hit(d, p1, r, d8));
  } else if (cls && !n.e && !is_ktc && !is_es && (r->kind == ETW_REC_CLASSIC || r->kind == ETW_REC_EVENT) && !r->n_ext &&
             !act && !(r->flags & ETW_EVH_STRING_ONLY) && !d->reference) {
    /* a classic record named by the built-in tables (no registry state): its type's plan */
    const char *t, *o;
    dec_mof_names(r, &t, &o);
    if (o) {
      eslot = eplan_slot(d, r, d8);
      const struct dec_eplan *p0 = d->eplan[eslot], *p1 = d->eplan[eslot + 1];
      eplan = !(p0 && eplan_hit(d, p0, r, d8)) && !(p1 && eplan_hit(d, p1, r, d8));
    }
  }
  uint64_t sft = r->filetime ? r->filetime : 1;
  int64_t pid = r->pid == 0xFFFFFFFFu ? -1 : (int64_t)r->pid, tid = r->tid == 0xFFFFFFFFu ? -1 : (int64_t)r->tid;
  const struct dec_sys_hint *hk = hint ? (const struct dec_sys_hint *)*hint : NULL;
  if (kplan || eplan || !hk || act || rel || hk->tag != tag || hk->d8 != d8 || hk->kw != r->desc.keyword ||
      hk->prov != n.prov || hk->name != n.name || hk->task_name != n.task || hk->opcode_name != n.opcode ||
      !dec_sys_emit_hint(d, w, *hint, sft, pid, tid, r->cpu)) {
    struct etw_sys s; /* every member is set below */
    s.ts_ns = 0;
    s.activity_id = act;
    s.related_activity_id = rel;
    s.provider = n.prov;
    s.provider_guid = r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO ? dec_mof_guid(r) : r->provider_id;
    s.event_id = r->desc.id;
    s.version = r->desc.version;
    s.level = r->desc.level;
    s.task = r->kind == ETW_REC_EVENT || r->kind == ETW_REC_WPP ? r->desc.task : 0;
    s.opcode = r->desc.opcode;
    s.keywords = r->desc.keyword;
    s.filetime = sft;
    s.event_name = n.name;
    s.task_name = n.task;
    s.opcode_name = n.opcode;
    s.pid = pid;
    s.tid = tid;
    s.cpu = r->cpu;
    s.host = d->host;
    s.process_name = dec_proc_name(d, pid);
    dec_write_system(d, w, &s, hint, tag, d8);
    if (kplan) dec_kplan_update(d, kslot, kkey, r, &s, d8);
    if (eplan) {
      dec_eplan_update(d, eslot, r, &s, d8, n.p, n.e, cls);
      eplan_settle(d, eslot);
    }
  }
  if (ETW_EXPECT(w->err, 0)) {
    /* the System block did not fit the writer's maximum (or a plan's reservation failed before
     * this): no usable text. The error stays set, so the caller drops and counts the event
     * (etw_batch_commit) instead of committing an `Undecoded` fragment without its System block. */
    if (ref) dec_fill_ref(ref, r, n.prov, n.name);
    return 0;
  }
  size_t mark = w->len;
  etw_jw_lit(w, ",\"EventData\":{");
  const char *why = "unknown event";
  /* rc: the payload bytes the schema consumed (all of them where no schema applies), or -1 */
  long rc;
  if (is_ktc) {
    rc = write_ktc(w, r) < 0 ? -1 : (long)r->user_len;
  } else if (cls && n.e) {
    rc = dec_fields_write_d(d, w, n.e, r->user_data, r->user_len, r->ptr_size, &why);
  } else if (r->kind == ETW_REC_EVENT && !cls) {
    if (n.tl) rc = dec_tl_write(w, r, &why);
    else if (is_es) rc = write_es_manifest(w, r) < 0 ? -1 : (long)r->user_len;
    else rc = write_manifest_event(d, w, r, &n, &why);
  } else if (r->kind == ETW_REC_WPP) {
    rc = write_wpp(w, r) < 0 ? -1 : (long)r->user_len;
  } else {
    rc = dec_mof_write(w, r, &why);
  }
  if (n.p) n.p->seen++;
  return dec_finish(d, r, w, ref, n.prov, n.name, mark, rc, why);
}
/* case-insensitive substring test (ASCII), portable (no strcasestr on MinGW) */
static int contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return 1;
  }
  return n == 0;
}


/* the names of @p's events (schemas, then TraceLogging names seen) that contain @q, each once,
 * as "matched_events":[...] into @w (if @w); how many there are */
static unsigned matched_events(const struct dec_provider *p, const char *q, struct etw_jw *w) {
  unsigned n = 0;
  uint32_t total = p->ev_cap + p->n_tl;
  for (uint32_t k = 0; k < total; k++) {
    const char *name = k < p->ev_cap ? (p->ev[k] ? p->ev[k]->name : NULL) : p->tl_names[k - p->ev_cap];
    if (!name || !contains_nocase(name, q)) continue;
    int dup = 0; /* another version of the same event (names are interned) */
    for (uint32_t j = 0; j < k && !dup; j++)
      dup = name == (j < p->ev_cap ? (p->ev[j] ? p->ev[j]->name : NULL) : p->tl_names[j - p->ev_cap]);
    if (dup) continue;
    if (w) {
      etw_jw_lit(w, n ? "," : ",\"matched_events\":[");
      etw_jw_cs(w, name);
    }
    n++;
  }
  if (w && n) etw_jw_ch(w, ']');
  return n;
}

void etw_decoder_providers_json(struct etw_decoder *d, const char *q, struct etw_jw *w) {
  etw_jw_ch(w, '[');
  int first = 1;
  for (uint32_t i = 0; i < d->prov_cap; i++) {
    struct dec_provider *p = d->prov[i];
    if (!p || !p->name) continue;
    int by_events = q && *q && matched_events(p, q, NULL) > 0;
    if (q && *q && !contains_nocase(p->name, q) && !by_events) continue;
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, p->name);
    etw_jw_lit(w, ",\"guid\":");
    etw_jw_guid(w, p->guid);
    etw_jw_lit(w, ",\"events\":");
    etw_jw_u64(w, p->n_ev + p->n_tl);
    etw_jw_lit(w, ",\"source\":");
    etw_jw_cs(w, p->source ? p->source : "");
    etw_jw_lit(w, ",\"seen\":");
    etw_jw_u64(w, p->seen);
    if (by_events) matched_events(p, q, w);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
}
