/* test_dec_disp.c — the decoder dispatch (etw_decoder_write): the manifest/classic plans' one-word
 * hit test, whose registry generation is the provider name pointer's (a registry change sets every
 * plan's pnamep to a dead name: dec_reg_bump), and the kernel plans' key (kn generation, hook,
 * kind). A decoder with plans against one that takes the general path only (reference mode), record by
 * record over a corpus trace:
 *  - registry changes between records: every 97th manifest event's schema replaced by one with no
 *    fields (its text changes: the next event of the type must show it), every 89th an unrelated
 *    schema added (the plans expire, then revalidate); after each, no plan may pass the one-word
 *    test until it is made valid again;
 *  - mutated copies: other kinds (0, the other kernel kind, WPP, 6), extended data items (related
 *    activity, TraceLogging schema, another type) on kernel, manifest and classic records, other
 *    hooks and versions, the string-only flag, an unused flag bit (15), activity IDs; the
 *    one-word test takes only records without extended data (n_ext 0), the others the full
 *    test. */
#include "decode.h"
#include "t.h"
#include "test_etl_util.h"

/* The eplan_dispatch's test for plan @pl's generation and provider name: 1 = it passes. */
static int name_passes(const struct dec_eplan *pl) { return *pl->pnamep == pl->pname; }

/* Replace the schema of manifest record @r in decoder @d by a template without fields
 * (quality + 1: it wins); 1 when done. */
static int replace_schema(struct etw_decoder *d, const struct etw_rec *r) {
  struct dec_provider *p = dec_provider_get(d, r->provider_id, 0);
  if (!p) return 0;
  struct dec_event *old = dec_event_find(p, r->desc.id, r->desc.version);
  if (!old || !old->has_template || !old->nf) return 0;
  struct dec_event *e = calloc(1, sizeof *e);
  if (!e) return 0;
  e->id = old->id;
  e->version = old->version;
  e->level = old->level;
  e->opcode = old->opcode;
  e->channel = old->channel;
  e->task = old->task;
  e->keywords = old->keywords;
  e->name = old->name;
  e->task_name = old->task_name;
  e->opcode_name = old->opcode_name;
  e->has_template = 1;
  e->quality = old->quality + 1;
  dec_event_add(p, e);
  return 1;
}

/* Add an unrelated schema (id 0xFF00 + @k) to @r's provider in @d; 1 when done. */
static int add_schema(struct etw_decoder *d, const struct etw_rec *r, unsigned k) {
  struct dec_provider *p = dec_provider_get(d, r->provider_id, 0);
  if (!p) return 0;
  struct dec_event *e = calloc(1, sizeof *e);
  if (!e) return 0;
  e->id = (uint16_t)(0xFF00 + k % 200); /* (again: rejected, no change) */
  e->has_template = 1;
  e->quality = 3;
  dec_event_add(p, e);
  return 1;
}

static int same(struct etw_decoder *fast, struct etw_decoder *plain, const struct etw_rec *m, struct etw_jw *a,
                struct etw_jw *c) {
  struct etw_evref ra, rc;
  a->len = c->len = 0;
  int ka = etw_decoder_write(fast, m, a, &ra);
  int kc = etw_decoder_write(plain, m, c, &rc);
  return ka == kc && a->len == c->len && !memcmp(a->buf, c->buf, a->len) && ra.provider == rc.provider &&
         ra.name == rc.name && ra.event_id == rc.event_id && ra.off == rc.off && ra.len == rc.len;
}

static void run(const char *rel) {
  size_t n;
  unsigned char *b = tu_corpus_file(rel, &n);
  CHECK(b != NULL);
  if (!b) return;
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  CHECK_EQ(etw_etl_reader_add_mem(r, rel, b, n, &st), ETW_E_OK);
  struct etw_decoder *fast = etw_decoder_new(tu_manifests()), *plain = etw_decoder_new(tu_manifests());
  etw_decoder_set_mode(plain, ETW_DECODE_REFERENCE);
  struct etw_jw a, c, before;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  etw_jw_init(&before, 0);
  struct etw_rec rec;
  size_t events = 0, diff = 0, replaced = 0, changed = 0, added = 0, expired_hits = 0, kernel = 0, man = 0, plainf = 0;
  unsigned char act[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  uint64_t rnd = 0x9E3779B97F4A7C15ull;
  while (etw_etl_reader_next(r, &rec, &st) == 1) {
    events++;
    if (!same(fast, plain, &rec, &a, &c) && diff++ < 3)
      fprintf(stderr, "%s #%zu differs:\n %s\n %s\n", rel, events, etw_jw_cstr(&a), etw_jw_cstr(&c));
    kernel += rec.kind == ETW_REC_SYSTEM || rec.kind == ETW_REC_PERFINFO;
    plainf += rec.n_ext == 0;
    if (rec.kind == ETW_REC_EVENT) man++;
    /* registry changes: in both decoders, then the same record again (its plan, if any, expired) */
    int ch = 0;
    uint64_t gen0 = fast->reg_gen;
    if (rec.kind == ETW_REC_EVENT && man % 97 == 0) {
      before.len = 0;
      etw_jw_raw(&before, a.buf, a.len);
      if (replace_schema(fast, &rec) && replace_schema(plain, &rec)) ch = 1;
    } else if (rec.kind == ETW_REC_EVENT && man % 89 == 0) {
      if (add_schema(fast, &rec, (unsigned)man) && add_schema(plain, &rec, (unsigned)man)) ch = 2;
    }
    if (ch && fast->reg_gen == gen0) ch = 0; /* (a rejected schema changes nothing) */
    replaced += ch == 1;
    added += ch == 2;
    if (ch) {
      for (uint32_t i = 0; i < DEC_EPLAN_N; i++)
        if (fast->eplan[i] && name_passes(fast->eplan[i])) expired_hits++;
      if (!same(fast, plain, &rec, &a, &c) && diff++ < 3)
        fprintf(stderr, "%s #%zu after a registry change differs:\n %s\n %s\n", rel, events, etw_jw_cstr(&a), etw_jw_cstr(&c));
      if (ch == 1 && (a.len != before.len || memcmp(a.buf, before.buf, a.len))) changed++;
      /* and again (the plan rebuilt or revalidated by the write above) */
      if (!same(fast, plain, &rec, &a, &c) && diff++ < 3)
        fprintf(stderr, "%s #%zu twice after a registry change differs:\n %s\n %s\n", rel, events, etw_jw_cstr(&a),
                etw_jw_cstr(&c));
    }
    /* mutated copies (every 3rd record), each written twice (the second through a plan the first
     * may have built) */
    if (events % 3) continue;
    for (int v = 0; v < 11; v++) {
      struct etw_rec m = rec;
      rnd ^= rnd << 13;
      rnd ^= rnd >> 7;
      rnd ^= rnd << 17;
      switch (v) {
      case 0: m.kind = 0; break;
      case 1: m.kind = rec.kind == ETW_REC_SYSTEM ? ETW_REC_PERFINFO : rec.kind == ETW_REC_PERFINFO ? ETW_REC_SYSTEM : rec.kind; break;
      case 2: m.kind = ETW_REC_WPP; break;
      case 3: m.kind = 6; break;
      case 4: case 5: case 6:
        if (m.n_ext >= ETW_REC_MAX_EXT) break;
        m.ext[m.n_ext].type = v == 4 ? ETW_EXT_RELATED_ACTIVITYID : v == 5 ? ETW_EXT_EVENT_SCHEMA_TL : (uint16_t)(2 + rnd % 8);
        m.ext[m.n_ext].len = v == 5 ? 0 : 16;
        m.ext[m.n_ext].data = act;
        m.n_ext++;
        break;
      case 7: m.hook_id ^= (uint16_t)(1u << (rnd % 16)); m.desc.version ^= (uint8_t)(rnd >> 20) & 1; break;
      case 8: m.flags ^= 0x8000; break; /* a flag bit Windows leaves unused: the same text */
      case 9: memcpy(m.activity_id + (rnd & 1) * 8, act, 8); break; /* an activity ID (in either half) */
      default: m.flags ^= ETW_EVH_STRING_ONLY; break; /* (the flag kept: string-only is tested apart) */
      }
      for (int k = 0; k < 2; k++)
        if (!same(fast, plain, &m, &a, &c) && diff++ < 3)
          fprintf(stderr, "%s #%zu (variant %d) differs:\n %s\n %s\n", rel, events, v, etw_jw_cstr(&a), etw_jw_cstr(&c));
    }
  }
  fprintf(stderr, "%s: %zu records (%zu kernel, %zu manifest), %zu schemas replaced (%zu texts changed), %zu added\n", rel,
          events, kernel, man, replaced, changed, added);
  CHECK(events > 0);
  CHECK(plainf > events / 2); /* (the reader's records mostly have no extended data) */
  CHECK_EQ(diff, 0);
  CHECK_EQ(expired_hits, 0);
  if (man > 1000) CHECK(replaced > 5 && changed > 0 && added > 5);
  CHECK_EQ(fast->decoded, plain->decoded);
  CHECK_EQ(fast->undecoded, plain->undecoded);
  CHECK_EQ(fast->unparsed, plain->unparsed);
  etw_jw_free(&a);
  etw_jw_free(&c);
  etw_jw_free(&before);
  etw_decoder_free(fast);
  etw_decoder_free(plain);
  etw_etl_reader_free(r);
  free(b);
}

/* The one-word test by hand: a plan made, a schema added to another provider (a registry change
 * anywhere expires every plan), the next record must not pass it. */
static void one_provider(void) {
  static const unsigned char G[16] = {0x21, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0, 0x01};
  static const unsigned char H[16] = {0x31, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0, 0x02};
  struct etw_decoder *d = etw_decoder_new(NULL), *q = etw_decoder_new(NULL);
  etw_decoder_set_mode(q, ETW_DECODE_REFERENCE);
  struct etw_decoder *ds[2] = {d, q};
  for (int j = 0; j < 2; j++) {
    struct dec_provider *p = dec_provider_get(ds[j], G, 1);
    CHECK(p != NULL);
    if (!p) return;
    p->name = etw_intern("Disp-Test");
    struct dec_event *e = calloc(1, sizeof *e);
    e->f = calloc(1, sizeof *e->f);
    e->f[0].name = strdup("A");
    e->f[0].in = 8;
    e->f[0].len = -1;
    e->f[0].count = 1;
    e->f[0].len_ref = e->f[0].count_ref = -1;
    e->nf = 1;
    e->id = 5;
    e->has_template = 1;
    e->quality = 3;
    CHECK_EQ(dec_event_add(p, e), 0);
  }
  unsigned char pay[4] = {7, 0, 0, 0};
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_EVENT;
  r.ptr_size = 8;
  r.pid = r.tid = 4;
  r.filetime = 132404488206530625ull;
  memcpy(r.provider_id, G, 16);
  r.desc.id = 5;
  r.user_data = pay;
  r.user_len = sizeof pay;
  struct etw_jw a, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&c, 0);
  for (int round = 0; round < 6; round++) {
    /* with and without an unused flag bit (15: the same plan) */
    r.flags = round & 1 ? 0 : 0x8000;
    for (int k = 0; k < 3; k++) CHECK(same(d, q, &r, &a, &c)); /* builds, then hits the plan */
    CHECK(strstr(etw_jw_cstr(&a), "\"A\":7") != NULL);
    size_t valid = 0;
    for (uint32_t i = 0; i < DEC_EPLAN_N; i++)
      valid += d->eplan[i] && d->eplan[i]->gen == d->reg_gen && name_passes(d->eplan[i]);
    CHECK_EQ(valid, 1);
    /* a schema for another provider: every plan expires */
    for (int j = 0; j < 2; j++) {
      struct dec_provider *p = dec_provider_get(ds[j], H, 1);
      struct dec_event *e = calloc(1, sizeof *e);
      e->id = (uint16_t)(100 + round);
      e->quality = 3;
      CHECK_EQ(dec_event_add(p, e), 0);
    }
    for (uint32_t i = 0; i < DEC_EPLAN_N; i++) CHECK(!d->eplan[i] || !name_passes(d->eplan[i]));
    /* the provider's name changed (round 3): the next record shows it */
    if (round == 3) {
      dec_provider_get(d, G, 0)->name = etw_intern("Disp-Renamed");
      dec_provider_get(q, G, 0)->name = etw_intern("Disp-Renamed");
    }
    CHECK(same(d, q, &r, &a, &c));
    if (round >= 3) CHECK(strstr(etw_jw_cstr(&a), "Disp-Renamed") != NULL);
  }
  etw_jw_free(&a);
  etw_jw_free(&c);
  etw_decoder_free(d);
  etw_decoder_free(q);
}

int main(void) {
  one_provider();
  run("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl");
  run("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl");
  T_DONE();
}
