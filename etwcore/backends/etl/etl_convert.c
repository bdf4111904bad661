/* etl_convert.c — `etwd convert`: tracerpt for any OS.
 *
 *   etwd convert FILE... [--format ndjson|csv|folded] [-o OUT] [--manifests DIR] [--quiet]
 *
 * Reads one or more .etl files, merges them into one time-ordered stream, decodes every event
 * and writes ndjson (one full event object `{"seq":N,"System":…}` per line), CSV (header
 * fields as columns, EventData as a JSON text column) or folded stacks (the events' "Stack"
 * members aggregated, etwcore/folded.h). Progress goes to stderr for inputs of
 * 32 MiB or more. Exit status: 0 ok, 1 unreadable/corrupt input (after writing every event
 * before the damage), 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etwcore/etl.h"
#include "etwcore/folded.h"
#include "decode.h" /* the decoder's counts (unparsed) */

size_t etw_convert_writer_max = (size_t)64 << 20;

static void usage(FILE *f) {
  fputs("usage: etwd convert FILE... [--format ndjson|csv|folded] [-o OUT] [--manifests DIR] [--quiet]\n"
        "  Decodes Windows .etl files (several files are merged in time order).\n"
        "  --format    ndjson (default): one event object per line; csv: one row per event;\n"
        "              folded: the events' stacks, `root;...;leaf COUNT` per distinct stack\n"
        "  -o OUT      write to OUT instead of standard output\n"
        "  --manifests DIR  provider manifests (*.man, *.xml) for manifest-based events\n"
        "  --quiet     no progress on stderr\n",
        f);
}

/* Length of the JSON value starting at s[0] ('{'), honouring strings; 0 if unbalanced. */
static size_t json_span(const char *s, size_t n) {
  int depth = 0, in_str = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (in_str) {
      if (c == '\\') i++;
      else if (c == '"') in_str = 0;
      continue;
    }
    if (c == '"') in_str = 1;
    else if (c == '{' || c == '[') depth++;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return 0;
}

static void csv_field(FILE *out, const char *s, size_t n) {
  fputc('"', out);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"') fputc('"', out);
    fputc(s[i], out);
  }
  fputc('"', out);
}

static void csv_part(FILE *out, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"') fputc('"', out);
    fputc(s[i], out);
  }
}

/* The EventData column: the text after `"EventData":` (or `"Undecoded":`) up to the event's
 * closing brace. When the event has an "Unparsed" member after EventData, the column is still
 * one JSON object: EventData's members followed by `"Unparsed":{…}`. */
static void csv_data(FILE *out, const char *s, size_t n) {
  size_t obj = json_span(s, n);
  if (!obj || obj >= n || s[obj] != ',') {
    csv_field(out, s, n);
    return;
  }
  fputc('"', out);
  csv_part(out, s, obj - 1); /* EventData without its '}' */
  if (obj > 2) fputc(',', out); /* EventData was not {} */
  csv_part(out, s + obj + 1, n - obj - 1); /* "Unparsed":{…} */
  fputs("}\"", out);
}

int etw_convert_main(int argc, char **argv) {
  const char *fmt = "ndjson", *out_path = NULL, *mdir = NULL;
  int quiet = 0;
  const char **files = calloc((size_t)(argc > 0 ? argc : 1), sizeof *files);
  int nf = 0;
  if (!files) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      free(files);
      return 0;
    } else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
      if (++i >= argc) goto missing;
      fmt = argv[i];
    } else if (!strncmp(a, "--format=", 9)) {
      fmt = a + 9;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (++i >= argc) goto missing;
      out_path = argv[i];
    } else if (!strcmp(a, "--manifests")) {
      if (++i >= argc) goto missing;
      mdir = argv[i];
    } else if (!strncmp(a, "--manifests=", 12)) {
      mdir = a + 12;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      quiet = 1;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "etwd convert: unknown option '%s'\n", a);
      usage(stderr);
      free(files);
      return 2;
    } else {
      files[nf++] = a;
    }
  }
  if (!nf) {
    fprintf(stderr, "etwd convert: no input file\n");
    usage(stderr);
    free(files);
    return 2;
  }
  int csv = 0;
  struct etw_folded *fold = NULL; /* --format folded: the events' stacks aggregated (folded.h) */
  if (!strcmp(fmt, "csv")) csv = 1;
  else if (!strcmp(fmt, "folded") && !(fold = etw_folded_new(0, 0))) {
    free(files);
    return 1;
  } else if (!fold && strcmp(fmt, "ndjson")) {
    fprintf(stderr, "etwd convert: unknown format '%s' (ndjson, csv or folded)\n", fmt);
    free(files);
    return 2;
  }
  if (nf > ETW_ETL_MAX_FILES) {
    fprintf(stderr, "etwd convert: at most %d files\n", ETW_ETL_MAX_FILES);
    free(files);
    return 2;
  }
  struct etw_etl_reader *r = etw_etl_reader_new();
  char *md_default = mdir ? NULL : etw_etl_manifest_dir();
  struct etw_decoder *d = etw_decoder_new(mdir ? mdir : md_default);
  free(md_default);
  struct etw_status st;
  etw_status_clear(&st);
  int rc = 0;
  if (!r || !d) {
    fprintf(stderr, "etwd convert: out of memory\n");
    rc = 1;
    goto done;
  }
  for (int i = 0; i < nf; i++) {
    if (etw_etl_reader_add_file(r, files[i], &st)) {
      fprintf(stderr, "etwd convert: %s\n", st.msg);
      rc = 1;
      goto done;
    }
  }
  FILE *out = stdout;
  if (out_path && strcmp(out_path, "-")) {
    out = fopen(out_path, "wb");
    if (!out) {
      fprintf(stderr, "etwd convert: cannot write %s\n", out_path);
      rc = 1;
      goto done;
    }
  }
  /* csv goes through stdio's buffer; ndjson is written in blocks of ~BATCH bytes (below), which
   * an unbuffered stream hands to write() as they are (a buffered one copies a part of each
   * block into its buffer first: ≈ 35 M instructions on net.etl's 97 MB) */
  static char obuf[1 << 16];
  if (csv) setvbuf(out, obuf, _IOFBF, sizeof obuf);
  else setvbuf(out, NULL, _IONBF, 0);
  if (csv && !fold)
    fputs("seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,"
          "ProcessID,ThreadID,ProcessorID,EventData\n", out);
  struct etw_jw w, t;
  etw_jw_init(&w, etw_convert_writer_max);
  etw_jw_init(&t, 4096);
  /* (next_batch's loop without a bound test takes a call's first max - ETL_BATCH - 1 records) */
  const struct etw_rec *recs[512];
  struct etw_evref ref;
  uint64_t seq = 0, undecoded = 0, done = 0, total = 0, dropped = 0;
  etw_etl_reader_progress(r, &done, &total);
  int progress = !quiet && total >= (32u << 20);
  time_t last = time(NULL);
  int k;
  /* ndjson: the lines are collected in w (`{"seq":N,` appended before each event, N kept as
   * text and incremented in place) and written in blocks of about BATCH bytes */
  enum { BATCH = 256 << 10 };
  size_t batch = etw_convert_writer_max / 4 < BATCH ? etw_convert_writer_max / 4 : BATCH;
  char sq[24] = "0";
  size_t sqn = 1;
  /* the records come in batches (pointers into the reader, valid until the next call) */
  while ((k = etw_etl_reader_next_batch(r, recs, sizeof recs / sizeof recs[0], &st)) > 0) {
    for (int ri = 0; ri < k; ri++) {
      const struct etw_rec *rec = recs[ri];
      size_t i = sqn; /* sq = seq + 1 */
      while (i > 0 && sq[i - 1] == '9') sq[--i] = '0';
      if (i > 0) {
        sq[i - 1]++;
      } else {
        memmove(sq + 1, sq, sqn++);
        sq[0] = '1';
      }
      size_t start = 0;
      if (csv || fold) {
        w.len = 0;
      } else {
        if (w.len >= batch) {
          fwrite(w.buf, 1, w.len, out);
          w.len = 0;
        }
        start = w.len;
        if (!w.err && w.cap - w.len > 7 + sizeof sq) { /* room for fixed-size copies */
          char *o = w.buf + w.len;
          memcpy(o, "{\"seq\":", 7);
          memcpy(o + 7, sq, sizeof sq); /* the digits and what follows them (overwritten) */
          o[7 + sqn] = ',';
          w.len += 8 + sqn;
        } else if (!etw_jw_reserve(&w, 8 + sqn)) {
          char *o = w.buf + w.len;
          memcpy(o, "{\"seq\":", 7);
          memcpy(o + 7, sq, sqn);
          o[7 + sqn] = ',';
          w.len += 8 + sqn;
        }
      }
      int ok = etw_decoder_write(d, rec, &w, &ref);
      seq++;
      if (w.err) { /* this event is not written: dropped and counted (the writer's error cleared) */
        etw_jw_truncate(&w, start);
        dropped++;
        continue;
      }
      if (!ok) undecoded++;
      if (fold) {
        etw_folded_add(fold, w.buf, w.len);
      } else if (!csv) {
        w.buf[w.len++] = '\n'; /* the writer keeps a byte past its length */
      } else {
        const char *j = etw_jw_cstr(&w);
        size_t sys = json_span(j + 9, w.len - 9); /* after "System": */
        const char *data = j + 9 + sys;         /* ,"EventData":{…}} or ,"Undecoded":… */
        const char *colon = strchr(data, ':');
        size_t dl = colon ? w.len - (size_t)(colon + 1 - j) - 1 : 0;
        t.len = 0;
        etw_jw_filetime(&t, rec->filetime);
        const char *ts = etw_jw_cstr(&t);
        fprintf(out, "%llu,%.*s,", (unsigned long long)seq, (int)(t.len - 2), ts + 1);
        csv_field(out, ref.provider, strlen(ref.provider));
        fputc(',', out);
        csv_field(out, ref.name ? ref.name : "", ref.name ? strlen(ref.name) : 0);
        fprintf(out, ",%u,%u,%u,%u,%u,0x%016llx,", rec->desc.id, rec->desc.version, rec->desc.level,
                rec->desc.task, rec->desc.opcode, (unsigned long long)rec->desc.keyword);
        if (rec->pid != 0xFFFFFFFFu) fprintf(out, "%u", rec->pid);
        fputc(',', out);
        if (rec->tid != 0xFFFFFFFFu) fprintf(out, "%u", rec->tid);
        fprintf(out, ",%u,", rec->cpu);
        if (colon) csv_data(out, colon + 1, dl);
        fputc('\n', out);
      }
      if (progress && (seq & 4095) == 0 && time(NULL) != last) {
        last = time(NULL);
        etw_etl_reader_progress(r, &done, &total);
        fprintf(stderr, "\retwd convert: %3d%%  %llu events", (int)(total ? done * 100 / total : 0),
                (unsigned long long)seq);
      }
    }
  }
  if (fold) {
    uint64_t fe, fs, fd;
    etw_folded_stats(fold, &fe, &fs, &fd);
    if (etw_folded_write(fold, out)) rc = 1;
    if (!quiet || fd)
      fprintf(stderr, "etwd convert: %llu events, %llu with a stack, %llu distinct stacks%s\n",
              (unsigned long long)seq, (unsigned long long)fe, (unsigned long long)fs,
              fd ? " (some stacks beyond the bounds were dropped)" : "");
    if (fd) rc = 1;
  } else if (!csv && w.len) {
    fwrite(w.buf, 1, w.len, out);
  }
  if (progress) fprintf(stderr, "\retwd convert: 100%%  %llu events\n", (unsigned long long)seq);
  etw_jw_free(&w);
  etw_jw_free(&t);
  if (fflush(out) || (out != stdout && fclose(out))) {
    fprintf(stderr, "etwd convert: write error\n");
    rc = 1;
  }
  if (dropped) {
    fprintf(stderr,
            "etwd convert: %llu events dropped: their text did not fit %llu bytes or found no memory "
            "(the other events were written)\n",
            (unsigned long long)dropped, (unsigned long long)etw_convert_writer_max);
    rc = 1;
  }
  if (k < 0) {
    fprintf(stderr, "etwd convert: %s (%llu events written before the damage)\n", st.msg,
            (unsigned long long)(seq - dropped));
    rc = 1;
  } else if (!quiet && (undecoded || d->unparsed)) {
    uint64_t big = d->too_large < undecoded ? d->too_large : undecoded;
    fprintf(stderr, "etwd convert: %llu events", (unsigned long long)seq);
    if (undecoded > big)
      fprintf(stderr, ", %llu without a schema (written with \"Undecoded\")", (unsigned long long)(undecoded - big));
    if (big)
      fprintf(stderr, ", %llu too large for the writer's maximum (written with \"Undecoded\", \"event too large\")",
              (unsigned long long)big);
    if (d->unparsed)
      fprintf(stderr, ", %llu with payload bytes after their schema's fields (written with \"Unparsed\")",
              (unsigned long long)d->unparsed);
    fputc('\n', stderr);
  }
done:
  etw_folded_free(fold);
  etw_etl_reader_free(r);
  etw_decoder_free(d);
  free(files);
  return rc;
missing:
  fprintf(stderr, "etwd convert: option '%s' needs a value\n", argv[argc - 1]);
  free(files);
  return 2;
}
