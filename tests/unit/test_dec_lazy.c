/* test_dec_lazy.c — manifests loaded per provider on first use (dec_manifest_index_dir +
 * dec_lazy_load, what etw_decoder_new(dir) does) give the same output as loading every manifest:
 *
 *   lazy      etw_decoder_new(dir): the index is built at the first event of a manifest provider
 *             without schemas, a provider's files parsed when it is first asked for;
 *   scan      a decoder without a directory, in lockstep with the lazy one: at the record where
 *             the lazy decoder built its index, dec_manifest_scan_dir loads every file (what the
 *             decoder did before the lazy index);
 *   upfront   every file loaded before the first record (what the providers catalog does).
 *
 * Over every corpus file (and all of them merged, and net.4.5.2.x64 twice), with the manifests
 * directory, the lilhoser dumps only, the perfview copy only, the PowerShell manifest only, and
 * two directories of symlinks that put the lilhoser dumps and the PowerShell manifest in both
 * orders (the Microsoft-Windows-PowerShell alias of the PowerShellCore file applies in one order
 * only): every event's JSON is byte-identical in the three decoders, and
 * every provider the lazy decoder holds at the end has the same name, source, maps and event
 * schemas (names, levels, fields, counts, references, maps) as in the scan decoder.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"
#include "t.h"
#include "test_etl_util.h"

static int same_str(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static int same_map(const struct dec_map *a, const struct dec_map *b) {
  if (!a || !b) return a == b;
  if (!same_str(a->name, b->name) || a->bitmap != b->bitmap || a->n != b->n) return 0;
  for (uint32_t i = 0; i < a->n; i++)
    if (a->val[i] != b->val[i] || !same_str(a->str[i], b->str[i])) return 0;
  return 1;
}

static int same_event(const struct dec_event *a, const struct dec_event *b) {
  if (a->id != b->id || a->version != b->version || a->level != b->level || a->opcode != b->opcode ||
      a->channel != b->channel || a->task != b->task || a->keywords != b->keywords || !same_str(a->name, b->name) ||
      !same_str(a->task_name, b->task_name) || !same_str(a->opcode_name, b->opcode_name) || a->nf != b->nf ||
      a->has_template != b->has_template || a->quality != b->quality)
    return 0;
  for (uint32_t i = 0; i < a->nf; i++) {
    const struct dec_field *f = &a->f[i], *g = &b->f[i];
    if (!same_str(f->name, g->name) || f->in != g->in || f->out != g->out || f->len != g->len ||
        f->count != g->count || f->len_ref != g->len_ref || f->count_ref != g->count_ref || f->members != g->members ||
        f->is_array != g->is_array || !same_str(f->map_name, g->map_name) || !same_map(f->map, g->map))
      return 0;
  }
  return 1;
}

/* Every provider of @lz against the same GUID in @sc; returns the providers compared. */
static uint32_t compare_registries(struct etw_decoder *lz, struct etw_decoder *sc, const char *label) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < lz->prov_cap; i++) {
    struct dec_provider *p = lz->prov[i];
    if (!p) continue;
    n++;
    struct dec_provider *q = dec_provider_get(sc, p->guid, 0);
    char g[40];
    etw_format_guid(g, p->guid);
    if (!q) {
      fprintf(stderr, "%s: provider %s (%s) only in the lazy decoder\n", label, g, p->name ? p->name : "?");
      CHECK(q);
      continue;
    }
    int ok = same_str(p->name, q->name) && same_str(p->source, q->source) && p->n_ev == q->n_ev &&
             p->n_maps == q->n_maps && p->seen == q->seen && p->n_tl == q->n_tl;
    for (uint32_t k = 0; ok && k < p->n_maps; k++) ok = same_map(p->maps[k], q->maps[k]);
    for (uint32_t k = 0; ok && k < p->ev_cap; k++) {
      const struct dec_event *e = p->ev[k];
      if (!e) continue;
      const struct dec_event *f = dec_event_find(q, e->id, e->version);
      ok = f && same_event(e, f);
      if (!ok)
        fprintf(stderr, "%s: provider %s event %u v%u differs (%s / %s)\n", label, g, e->id, e->version,
                e->name ? e->name : "?", f && f->name ? f->name : "(absent)");
    }
    if (!ok) fprintf(stderr, "%s: provider %s (%s) differs\n", label, g, p->name ? p->name : "?");
    CHECK(ok);
  }
  return n;
}

struct img {
  const char *rel;
  unsigned char *b;
  size_t n;
};

/* Decode @files (merged) with the three decoders; returns the records. */
static size_t run(struct img *files, int nfiles, const char *mdir, const char *label) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_decoder *lz = etw_decoder_new(mdir), *sc = etw_decoder_new(NULL), *up = etw_decoder_new(NULL);
  struct etw_status st;
  if (!r || !lz || !sc || !up) abort();
  for (int i = 0; i < nfiles; i++) CHECK(etw_etl_reader_add_mem(r, files[i].rel, files[i].b, files[i].n, &st) == 0);
  dec_manifest_scan_dir(up, mdir);
  up->manifests_scanned = 1;
  struct etw_jw a, b, c;
  etw_jw_init(&a, 0);
  etw_jw_init(&b, 0);
  etw_jw_init(&c, 0);
  struct etw_evref ref;
  const struct etw_rec *rec;
  size_t n = 0, bad_sc = 0, bad_up = 0, decoded = 0, at = 0;
  int k;
  while ((k = etw_etl_reader_next_ref(r, &rec, &st)) == 1) {
    n++;
    a.len = b.len = c.len = 0;
    int was = lz->manifests_scanned;
    int ra = etw_decoder_write(lz, rec, &a, &ref);
    if (!was && lz->manifests_scanned) { /* the lazy decoder indexed the directory at this record */
      dec_manifest_scan_dir(sc, mdir);
      sc->manifests_scanned = 1;
      at = n;
    }
    int rb = etw_decoder_write(sc, rec, &b, &ref);
    int rc = etw_decoder_write(up, rec, &c, &ref);
    decoded += ra == 1;
    if (ra != rb || a.len != b.len || memcmp(a.buf, b.buf, a.len)) {
      if (bad_sc++ < 3)
        fprintf(stderr, "%s: record %zu, lazy vs scan:\n  %.600s\n  %.600s\n", label, n, etw_jw_cstr(&a),
                etw_jw_cstr(&b));
    }
    if (ra != rc || a.len != c.len || memcmp(a.buf, c.buf, a.len)) {
      if (bad_up++ < 3)
        fprintf(stderr, "%s: record %zu, lazy vs up front:\n  %.600s\n  %.600s\n", label, n, etw_jw_cstr(&a),
                etw_jw_cstr(&c));
    }
  }
  CHECK(k == 0 || k == -1); /* CldFlt2 and the merges report damage at the end; the same for all */
  CHECK_EQ(bad_sc, 0);
  CHECK_EQ(bad_up, 0);
  CHECK_EQ(lz->decoded, sc->decoded);
  CHECK_EQ(lz->undecoded, sc->undecoded);
  CHECK_EQ(lz->decoded, up->decoded);
  CHECK_EQ(lz->undecoded, up->undecoded);
  uint32_t np = compare_registries(lz, sc, label);
  fprintf(stderr, "%s: %zu records (%zu decoded), index built at record %zu, %u providers compared\n", label, n,
          decoded, at, np);
  etw_jw_free(&a);
  etw_jw_free(&b);
  etw_jw_free(&c);
  etw_decoder_free(lz);
  etw_decoder_free(sc);
  etw_decoder_free(up);
  etw_etl_reader_free(r);
  return n;
}

#define PV "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/"
#define JT "jtmoon79+super-speedy-syslog-searcher/logs/"
static struct img FILES[] = {
    {PV "inputs/net.4.5.2.x64.etl.zip!*.etl", NULL, 0},
    {PV "inputs/gcevents.etl.zip!*.etl", NULL, 0},
    {PV "inputs/primitive-types.etl.zip!*.etl", NULL, 0},
    {PV "inputs/Regression/SelfDescribingSingleEvent.etl", NULL, 0},
    {PV "smallEtlFile.etl", NULL, 0},
    {"airbus-cert+etl-parser/tests/example/AMSITrace.etl", NULL, 0},
    {"airbus-cert+etl-parser/tests/example/ShutdownPerfDiagLogger.etl", NULL, 0},
    {"airbus-cert+etl-parser/tests/example/lxcore_kernel.etl", NULL, 0},
    {"microsoft+krabsetw/examples/NativeExamples/powershell.etl", NULL, 0},
    {JT "Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl", NULL, 0},
    {JT "programs/Event_Trace_Log/waasmedic.20251005_113019_195.etl", NULL, 0},
    {JT "programs/OneDrive/Local/Microsoft/OneDrive/logs/Personal/CldFlt0-2025-12-21-121418.etlgz", NULL, 0},
    {JT "programs/OneDrive/Local/Microsoft/OneDrive/logs/Personal/CldFlt2-2025-12-21-121418.etlgz", NULL, 0},
};
#define NFILES ((int)(sizeof FILES / sizeof FILES[0]))

int main(void) {
  const char *m = tu_manifests();
  for (int i = 0; i < NFILES; i++) {
    FILES[i].b = tu_corpus_file(FILES[i].rel, &FILES[i].n);
    CHECK(FILES[i].b != NULL);
    if (!FILES[i].b) T_DONE();
  }
  /* manifest directories: the whole one, parts of it, and the PowerShell manifests in both orders */
  char tmp[] = "/tmp/etwd_lazy_XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  char dirs[6][4200], src[4200], dst[4200];
  snprintf(dirs[0], sizeof dirs[0], "%s", m);
  snprintf(dirs[1], sizeof dirs[1], "%s/lilhoser+etwmanifests", m);
  snprintf(dirs[2], sizeof dirs[2], "%s/microsoft+perfview", m);
  snprintf(dirs[3], sizeof dirs[3], "%s/PowerShell+PowerShell", m);
  /* 4 (ps_after): the lilhoser dumps (with a Microsoft-Windows-PowerShell manifest) before
   * PowerShellCore's manifest, so the alias does not apply; 5 (ps_first): the other way round */
  snprintf(dirs[4], sizeof dirs[4], "%s/ps_after", tmp);
  snprintf(dirs[5], sizeof dirs[5], "%s/ps_first", tmp);
  const char *abs_m = realpath(m, NULL);
  CHECK(abs_m != NULL);
  if (!abs_m) T_DONE();
  int ok = 1;
  ok &= mkdir(dirs[4], 0700) == 0 && mkdir(dirs[5], 0700) == 0;
  snprintf(src, sizeof src, "%s/lilhoser+etwmanifests", abs_m);
  snprintf(dst, sizeof dst, "%s/a", dirs[4]);
  ok &= symlink(src, dst) == 0;
  snprintf(dst, sizeof dst, "%s/b", dirs[5]);
  ok &= symlink(src, dst) == 0;
  snprintf(src, sizeof src, "%s/PowerShell+PowerShell", abs_m);
  snprintf(dst, sizeof dst, "%s/b", dirs[4]);
  ok &= symlink(src, dst) == 0;
  snprintf(dst, sizeof dst, "%s/a", dirs[5]);
  ok &= symlink(src, dst) == 0;
  CHECK(ok);

  for (int di = 0; di < 6; di++) {
    for (int i = 0; i < NFILES; i++) {
      char label[300];
      snprintf(label, sizeof label, "%s [%s]", strrchr(FILES[i].rel, '/') + 1, di ? strrchr(dirs[di], '/') + 1 : "all");
      CHECK(run(&FILES[i], 1, dirs[di], label) > 0);
    }
  }
  CHECK(run(FILES, NFILES, dirs[0], "all files merged [all]") > 0);
  struct img two[2] = {FILES[0], FILES[0]};
  CHECK(run(two, 2, dirs[0], "net twice [all]") > 0);

  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  CHECK(system(cmd) == 0);
  free((void *)abs_m);
  for (int i = 0; i < NFILES; i++) free(FILES[i].b);
  T_DONE();
}
