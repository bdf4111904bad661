/* etl_convert.c — `etwd convert`: tracerpt for any OS.
 *
 *   etwd convert FILE... [--format ndjson|csv|chrome|folded] [-o OUT] [--manifests DIR] [--quiet]
 *                [--provider P,…] [--event E,…] [--pid N,…] [--process NAME,…] [--from T] [--to T]
 *                [--limit N]
 *                [--decode fast|reference] [--stackwalk-events | --no-stacks] [--stack-index-mb N]
 *
 * Reads one or more .etl files, merges them into one time-ordered stream, decodes every event
 * and writes ndjson (one full event object `{"seq":N,"System":…}` per line), CSV (header fields
 * as columns, EventData as a JSON text column; when the selected events are all of one type, one
 * column per field instead, in two passes over the input), Chrome trace-event JSON
 * (etl_chrome.c) or folded stacks (the events' "Stack" members aggregated, etwcore/folded.h). The filters select events; `seq` stays the event's number in the whole input,
 * so a filtered line is the same line as in the unfiltered output. Progress goes to stderr for
 * inputs of 32 MiB or more. `--decode reference` makes the reader and decoder use their plain
 * walkers only (same bytes, slower). Stacks: the input is read once before the events are written
 * (dec_stack.h: the stack walks indexed by their event); each event carries its "Stack", and the
 * stack walk rows themselves are written only with --stackwalk-events; the index is bounded
 * (dec_stack.h, --stack-index-mb). Exit status: 0 ok, 1 unreadable/corrupt input (after writing
 * every event before the damage) or something counted as dropped (events, stacks: every other
 * event written), 2 usage error. Single-threaded.
 * A Linux trace.dat (found by its magic; Linux builds with libtracecmd) is one input on its own:
 * linux_dat.c hands over its events, encoded by the Linux decoder, in place of decoded records
 * (one_dat), through the same selection and writers; the .etl-only options are refused by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "dec_stack.h"
#include "decode.h" /* the decoder's counts (unparsed) */
#include "etl_conv.h"
#include "etwcore/etl.h"
#include "etwcore/evcsv.h"
#include "etwcore/unpack.h"
#ifndef _WIN32
#include <sys/stat.h>
#include <unistd.h>
#endif
#include "etwcore/folded.h"
#ifdef ETWD_HAVE_TRACECMD
#include "linux/linux_dat.h" /* a trace.dat's events (the Linux build with libtracecmd) */
#endif

size_t etw_convert_writer_max = (size_t)64 << 20;

enum { MAX_SEL = 64, MAX_FIELDS = 1024 };
enum fmt { F_NDJSON, F_CSV, F_CHROME, F_FOLDED };
enum phase { P_WRITE, P_COLLECT }; /* P_COLLECT: the first pass of per-field CSV */

/* The options and, for per-field CSV, what the first pass found. */
struct conv {
  enum fmt fmt;
  const char *out_path, *mdir;
  int quiet;
  int walks; /* --stackwalk-events: the stack walk rows are written too */
  int nostacks; /* --no-stacks: no stack index, nothing attached, walk rows written as they are */
  enum etw_decode_mode mode; /* --decode: of the readers and decoders of both passes */
  int mode_given, stk_given; /* --decode, --stack-index-mb were given (refused for a trace.dat) */
  int dat;                   /* the input is a trace.dat (Linux), not .etl files */
  const char **files;
  int nf;
  struct etw_folded *fold; /* F_FOLDED: the selected events' stacks (etw_convert_main's) */
  char *prov[MAX_SEL], *ev[MAX_SEL];
  int nprov, nev, npid;
  uint32_t nproc;
  int64_t pids[MAX_SEL];
  char procs[MAX_SEL][ETW_PNAME_PAT_MAX]; /* --process patterns (etwcore/event.h) */
  const char *from_s, *to_s; /* as given */
  int from_rel, to_rel;      /* seconds after the first event (else absolute) */
  double from_sec, to_sec;
  uint64_t from_ft, to_ft;   /* absolute, FILETIME; 0 = none */
  uint64_t limit;
  /* per-field CSV: the one type (NULL provider: none seen; mixed: several) and its fields */
  int mixed;
  const char *t_prov, *t_name;
  unsigned t_id;
  char *fields[MAX_FIELDS]; /* raw JSON key text, quotes included */
  size_t nfields;
};

/* the synopsis; with @full every option (--help), else a pointer to it (after a usage error) */
static void usage(FILE *f, int full) {
  fputs("usage: etwd convert FILE... [--format ndjson|csv|chrome|folded] [-o OUT] [--manifests DIR[:DIR...]]\n"
        "                    [--quiet] [--provider P,...] [--event E,...] [--pid N,...] [--process NAME,...]\n"
        "                    [--from T] [--to T] [--limit N] [--decode fast|reference]\n"
        "                    [--stackwalk-events | --no-stacks] [--stack-index-mb N]\n",
        f);
  if (!full) {
    fputs("(etwd convert --help describes every option)\n", f);
    return;
  }
  fputs("  Decodes Windows .etl files (several files are merged in time order); a FILE may also be\n"
        "  compressed: .zip (its .etl), .gz, .etlgz (recognised by content, at most 64 GiB unpacked)\n"
        "  or one Linux trace.dat (etwd's file mode, trace-cmd record; recognised by content; Linux\n"
        "  builds): its events as the live stream shows them, stacks joined (any --format; not\n"
        "  --manifests, --decode or the stack options)\n"
        "  --format    ndjson (default): one event object per line; csv: one row per event (one column\n"
        "              per field when the selected events are all of one type); chrome: Chrome\n"
        "              trace-event JSON (ui.perfetto.dev, chrome://tracing); folded: the events'\n"
        "              stacks, `root;...;leaf COUNT` per distinct stack (flamegraph.pl, speedscope)\n"
        "  -o OUT      write to OUT instead of standard output\n"
        "  --manifests DIR[:DIR...]  provider manifests (*.man, *.xml) for manifest-based events; of\n"
        "              several directories the first listed wins (newest manifests first)\n"
        "  --quiet     no progress on stderr\n"
        "  --provider  only these providers (names, case-insensitive)\n"
        "  --event     only these events (EventName, case-insensitive, or EventID)\n"
        "  --pid       only these process ids\n"
        "  --process   only these process names (System.Execution.ProcessName, ASCII case ignored;\n"
        "              NAME* matches names that start with NAME)\n"
        "  --from, --to  only events at or after --from and before --to: an ISO 8601 UTC time\n"
        "              (2023-04-22T10:47:24.47Z) or seconds after the input's first event (1.5)\n"
        "  --limit N   at most N events\n"
        "  --decode    fast (default): the reader's and decoder's fast paths (plans, memos);\n"
        "              reference: the plain walkers only (same output, slower)\n"
        "  --stackwalk-events  also write the stack walk events (StackWalk/*, ClrStack/Walk), which\n"
        "              are otherwise only attached to their events as \"Stack\"\n"
        "  --no-stacks  attach no stacks (the input is read once, not twice): the stack walk\n"
        "              events are written as they are, with raw addresses\n"
        "  --stack-index-mb N  MiB the stack index may hold (default 1024); beyond them later\n"
        "              events go without their stacks, counted on stderr, exit status 1\n",
        f);
}

/* ---- JSON scanning (shared with etl_chrome.c) */

size_t conv_json_span(const char *s, size_t n) { return etw_json_span(s, n); } /* evcsv.c's */

/* Calls @fn for every top-level member of the object at @obj (compact JSON, as etwd writes it):
 * the key with its quotes, and the value's span. Stops when @fn returns non-zero. */
static int members(const char *obj, size_t n, int (*fn)(void *, const char *, size_t, const char *, size_t), void *arg) {
  size_t i = 1;
  if (!n || obj[0] != '{') return 0;
  while (i < n && obj[i] == '"') {
    size_t kl = conv_json_span(obj + i, n - i);
    if (!kl || i + kl >= n || obj[i + kl] != ':') return 0;
    const char *v = obj + i + kl + 1;
    size_t vl = conv_json_span(v, n - (size_t)(v - obj));
    if (!vl) return 0;
    int r = fn(arg, obj + i, kl, v, vl);
    if (r) return r;
    i = (size_t)(v - obj) + vl;
    if (i < n && obj[i] == ',') i++;
  }
  return 0;
}

struct find { const char *key; const char *v; size_t vl; };

static int find_cb(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
  struct find *f = arg;
  if (kl != strlen(f->key) + 2 || memcmp(k + 1, f->key, kl - 2)) return 0;
  f->v = v;
  f->vl = vl;
  return 1;
}

const char *conv_json_member(const char *obj, size_t n, const char *key, size_t *vlen) {
  struct find f = {key, NULL, 0};
  members(obj, n, find_cb, &f);
  *vlen = f.vl;
  return f.v;
}

int64_t conv_json_int(const char *v, size_t n) {
  if (!v || !n) return -1;
  if (v[0] == '"') {
    v++;
    n = n >= 2 ? n - 2 : 0;
  }
  if (!n || v[0] < '0' || v[0] > '9') return -1;
  char buf[32];
  if (n >= sizeof buf) return -1;
  memcpy(buf, v, n);
  buf[n] = 0;
  char *end;
  long long x = strtoll(buf, &end, 0);
  return *end ? -1 : (int64_t)x;
}

/* ---- options */

/* Adds the comma-separated items of @s to @list (at most MAX_SEL in all). */
static int add_list(char **list, int *n, const char *s) {
  const char *p = s;
  while (*p) {
    const char *c = strchr(p, ',');
    size_t l = c ? (size_t)(c - p) : strlen(p);
    if (l) {
      if (*n >= MAX_SEL) return -1;
      char *x = malloc(l + 1);
      if (!x) return -1;
      memcpy(x, p, l);
      x[l] = 0;
      list[(*n)++] = x;
    }
    p += l + (c ? 1 : 0);
  }
  return 0;
}

/* days since 1970-01-01 of a civil date (proleptic Gregorian) */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

/* @s as seconds after the first event (*rel = 1) or an ISO 8601 time (FILETIME in *ft); -1 if
 * neither. */
static int parse_time(const char *s, int *rel, double *sec, uint64_t *ft) {
  char *end;
  double v = strtod(s, &end);
  if (end != s && !*end && v >= 0) {
    *rel = 1;
    *sec = v;
    return 0;
  }
  int Y, M, D, h, m, sc, n = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sc, &n) != 6 || M < 1 || M > 12 ||
      D < 1 || D > 31 || h > 23 || m > 59 || sc > 60 || Y < 1601)
    return -1;
  const char *p = s + n;
  uint64_t frac = 0, scale = 10000000; /* in 100 ns units */
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++) {
      scale /= 10;
      frac += (uint64_t)(*p - '0') * scale;
    }
  }
  int64_t off = 0;
  if (*p == 'Z') p++;
  else if ((*p == '+' || *p == '-') && p[1] && p[2] && p[3] == ':') {
    int oh = (p[1] - '0') * 10 + (p[2] - '0'), om = (p[4] - '0') * 10 + (p[5] - '0');
    off = (*p == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
    p += 6;
  }
  if (*p) return -1;
  int64_t unix_s = days_from_civil(Y, (unsigned)M, (unsigned)D) * 86400 + h * 3600 + m * 60 + sc - off;
  *rel = 0;
  *ft = (uint64_t)(unix_s + 11644473600LL) * 10000000u + frac;
  return 0;
}

static int parse_args(struct conv *c, int argc, char **argv, int *help) {
  const char *fmt = "ndjson";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    static const char *const valued[] = {"--format", "-f", "-o", "--output", "--manifests", "--provider",
                                         "--event", "--pid", "--process", "--from", "--to", "--limit", "--decode",
                                         "--stack-index-mb", NULL};
    const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
    char name[32];
    snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
    int takes = 0;
    for (int k = 0; valued[k]; k++) takes |= !strcmp(name, valued[k]);
    if (takes) {
      if (eq) v = eq + 1;
      else if (++i < argc) v = argv[i];
      else {
        fprintf(stderr, "etwd convert: option '%s' needs a value\n", a);
        return 2;
      }
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      *help = 1;
      return 0;
    } else if (!strcmp(name, "--format") || !strcmp(name, "-f")) {
      fmt = v;
    } else if (!strcmp(name, "-o") || !strcmp(name, "--output")) {
      c->out_path = v;
    } else if (!strcmp(name, "--manifests")) {
      c->mdir = v;
    } else if (!strcmp(a, "--stackwalk-events")) {
      c->walks = 1;
    } else if (!strcmp(a, "--no-stacks")) {
      c->nostacks = c->walks = 1;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      c->quiet = 1;
    } else if (!strcmp(name, "--decode")) {
      c->mode_given = 1;
      if (etw_decode_parse(v, &c->mode)) {
        fprintf(stderr, "etwd convert: unknown decode mode '%s' (fast or reference)\n", v);
        return 2;
      }
    } else if (!strcmp(name, "--provider") || !strcmp(name, "--event")) {
      int prov = !strcmp(name, "--provider");
      if (add_list(prov ? c->prov : c->ev, prov ? &c->nprov : &c->nev, v)) {
        fprintf(stderr, "etwd convert: at most %d values of %s\n", MAX_SEL, name);
        return 2;
      }
    } else if (!strcmp(name, "--pid")) {
      for (const char *p = v; *p;) {
        char *end;
        long long x = strtoll(p, &end, 0);
        if (end == p || x < 0 || x > 0xFFFFFFFFll || (*end && *end != ',') || c->npid >= MAX_SEL) {
          fprintf(stderr, "etwd convert: --pid %s: want process ids separated by ',' (at most %d)\n", v, MAX_SEL);
          return 2;
        }
        c->pids[c->npid++] = x;
        p = *end ? end + 1 : end;
      }
    } else if (!strcmp(name, "--process")) {
      if (etw_pname_list(v, c->procs, MAX_SEL, &c->nproc)) {
        fprintf(stderr, "etwd convert: --process %s: want process names separated by ',' (at most %d, each 1-%d "
                        "bytes without control characters; NAME* for a prefix)\n", v, MAX_SEL, ETW_PNAME_PAT_MAX - 1);
        return 2;
      }
    } else if (!strcmp(name, "--from") || !strcmp(name, "--to")) {
      int from = !strcmp(name, "--from");
      if (parse_time(v, from ? &c->from_rel : &c->to_rel, from ? &c->from_sec : &c->to_sec,
                     from ? &c->from_ft : &c->to_ft)) {
        fprintf(stderr, "etwd convert: %s %s: want an ISO 8601 time (2023-04-22T10:47:24.5Z) or seconds "
                        "after the first event (1.5)\n", name, v);
        return 2;
      }
      *(from ? &c->from_s : &c->to_s) = v;
    } else if (!strcmp(name, "--limit")) {
      char *end;
      long long x = strtoll(v, &end, 10);
      if (*end || x <= 0) {
        fprintf(stderr, "etwd convert: --limit %s: want a positive number of events\n", v);
        return 2;
      }
      c->limit = (uint64_t)x;
    } else if (!strcmp(name, "--stack-index-mb")) {
      char *end;
      long long x = strtoll(v, &end, 10);
      if (!*v || *end || x < 1 || x > (1ll << 30)) {
        fprintf(stderr, "etwd convert: --stack-index-mb %s: want a number of MiB, 1 to %lld\n", v, 1ll << 30);
        return 2;
      }
      etw_stk_budget_set((uint64_t)x << 20);
      c->stk_given = 1;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "etwd convert: unknown option '%s'\n", a);
      return 2;
    } else {
      c->files[c->nf++] = a;
    }
  }
  if (!strcmp(fmt, "csv")) c->fmt = F_CSV;
  else if (!strcmp(fmt, "chrome")) c->fmt = F_CHROME;
  else if (!strcmp(fmt, "folded")) c->fmt = F_FOLDED;
  else if (strcmp(fmt, "ndjson")) {
    fprintf(stderr, "etwd convert: unknown format '%s' (ndjson, csv, chrome or folded)\n", fmt);
    return 2;
  }
  if (!c->nf) {
    fprintf(stderr, "etwd convert: no input file\n");
    return 2;
  }
  if (c->nf > ETW_ETL_MAX_FILES) {
    fprintf(stderr, "etwd convert: at most %d files\n", ETW_ETL_MAX_FILES);
    return 2;
  }
  return 0;
}

/* ---- selection */

/* Execution.ProcessID and ThreadID of the System object (-1 = null or absent). */
static void exec_ids(struct conv_ev *e) {
  size_t vl;
  e->pid = e->tid = -1;
  const char *x = conv_json_member(e->sys, e->sys_len, "Execution", &vl);
  if (!x) return;
  size_t l;
  const char *p = conv_json_member(x, vl, "ProcessID", &l);
  e->pid = conv_json_int(p, l);
  p = conv_json_member(x, vl, "ThreadID", &l);
  e->tid = conv_json_int(p, l);
}

static int selected(const struct conv *c, const struct conv_ev *e) {
  int ok = !c->nprov;
  for (int i = 0; i < c->nprov && !ok; i++) ok = !strcasecmp(c->prov[i], e->ref->provider);
  if (!ok) return 0;
  ok = !c->nev;
  for (int i = 0; i < c->nev && !ok; i++) {
    char *end;
    unsigned long id = strtoul(c->ev[i], &end, 0);
    ok = *end ? (e->ref->name && !strcasecmp(c->ev[i], e->ref->name)) : id == e->rec->desc.id;
  }
  if (!ok) return 0;
  ok = !c->npid;
  for (int i = 0; i < c->npid && !ok; i++) ok = c->pids[i] == e->pid;
  if (!ok || !c->nproc) return ok;
  char nm[256];
  int n = etw_event_pname(e->sys, e->sys_len, nm, sizeof nm);
  ok = 0;
  for (uint32_t i = 0; i < c->nproc && !ok && n >= 0; i++) ok = etw_pname_match(nm, (size_t)n, c->procs[i]);
  return ok;
}

/* ---- CSV */

static void csv_part(FILE *out, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"') fputc('"', out);
    fputc(s[i], out);
  }
}

#define CSV_COLS ETW_CSV_COLS /* etwcore/evcsv.h: the columns the HTTP streams' ?format=csv writes too */
static const char CSV_HEAD[] = CSV_COLS;

/* Rows are built in the scratch writer @t by the shared writer (etwcore/evcsv.h), then written
 * whole. The common columns come from the event's System object, so each is what the ndjson form
 * says (Task of a classic kernel event: 0, as in System, not the header's event group). */
static void csv_common(struct etw_jw *t, const struct conv_ev *e) {
  char sq[24];
  int n = snprintf(sq, sizeof sq, "%llu", (unsigned long long)e->seq);
  etw_jw_truncate(t, 0);
  etw_csv_common(t, sq, (size_t)n, e->sys, e->sys_len);
}

/* the row (or what fitted: the writer's bound is far above any event's) to @out */
static void csv_flush(FILE *out, struct etw_jw *t) {
  etw_jw_ch(t, '\n');
  fwrite(t->buf, 1, t->len, out);
}

/* first pass: the selected events' type(s) and the union of their fields, in first-seen order */
static int collect_cb(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
  struct conv *c = arg;
  (void)v, (void)vl;
  for (size_t i = 0; i < c->nfields; i++)
    if (strlen(c->fields[i]) == kl && !memcmp(c->fields[i], k, kl)) return 0;
  char *x = c->nfields < MAX_FIELDS ? malloc(kl + 1) : NULL;
  if (!x) {
    c->mixed = 1; /* too many fields for columns: the common form */
    return 1;
  }
  memcpy(x, k, kl);
  x[kl] = 0;
  c->fields[c->nfields++] = x;
  return 0;
}

static void collect(struct conv *c, const struct conv_ev *e) {
  if (c->mixed) return;
  if (!c->t_prov) {
    c->t_prov = e->ref->provider;
    c->t_name = e->ref->name;
    c->t_id = e->rec->desc.id;
  } else if (c->t_prov != e->ref->provider || c->t_name != e->ref->name || (!c->t_name && c->t_id != e->rec->desc.id)) {
    c->mixed = 1;
    return;
  }
  if (e->data) members(e->data, e->data_len, collect_cb, c);
}

struct row { struct conv *c; FILE *out; const char **vals; size_t *lens; };

static int row_cb(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
  struct row *r = arg;
  for (size_t i = 0; i < r->c->nfields; i++)
    if (strlen(r->c->fields[i]) == kl && !memcmp(r->c->fields[i], k, kl)) {
      r->vals[i] = v;
      r->lens[i] = vl;
      break;
    }
  return 0;
}

static void csv_fields_row(struct conv *c, FILE *out, struct etw_jw *t, const struct conv_ev *e,
                           const char **vals, size_t *lens) {
  csv_common(t, e);
  memset(vals, 0, c->nfields * sizeof *vals);
  struct row r = {c, out, vals, lens};
  if (e->data) members(e->data, e->data_len, row_cb, &r);
  for (size_t i = 0; i < c->nfields; i++) {
    etw_jw_ch(t, ',');
    if (vals[i]) etw_csv_json_cell(t, vals[i], lens[i]);
  }
  csv_flush(out, t);
}

static int per_field(const struct conv *c) { return c->fmt == F_CSV && c->t_prov && !c->mixed; }

static void csv_header(struct conv *c, FILE *out) {
  fputs(CSV_HEAD, out);
  if (!per_field(c)) {
    fputs(",EventData\n", out);
    return;
  }
  struct etw_jw h; /* a cell of the shared writer (a field name may start a formula too) */
  etw_jw_init(&h, 0);
  for (size_t i = 0; i < c->nfields; i++) { /* the key's text; "" inside it doubled */
    const char *k = c->fields[i];
    size_t l = strlen(k);
    int clash = 0; /* a field named like a common column gets the prefix "EventData." */
    char name[300];
    snprintf(name, sizeof name, ",%.*s,", (int)(l - 2), k + 1);
    clash = strstr("," CSV_COLS ",", name) != NULL;
    fputc(',', out);
    if (clash) {
      fputs("\"EventData.", out);
      csv_part(out, k + 1, l - 2);
      fputc('"', out);
      continue;
    }
    etw_jw_truncate(&h, 0);
    etw_csv_cell(&h, k + 1, l - 2);
    fwrite(etw_jw_cstr(&h), 1, h.len, out);
  }
  etw_jw_free(&h);
  fputc('\n', out);
}

/* ---- the pass over the input */

struct counts {
  uint64_t seq, written, undecoded, dropped, unparsed, too_large, proc_dropped;
  struct etw_stk_counts stk;
  int damaged;
  int cut; /* the read stopped at --limit: later events (and their stack walks) were not read */
  char damage[700];
};

/* One pass's state: its reader, decoder and writers (owned by run_pass, one thread). */
struct pass {
  struct conv *c;
  enum phase ph;
  FILE *out;
  struct conv_chrome *ch;   /* the Chrome document being built (F_CHROME) */
  struct counts *n;
  struct etw_etl_reader *r;
  struct etw_decoder *d;
  struct etw_stk *stk;      /* the input's stacks (P_WRITE) */
  struct etw_jw w, t;       /* the event's text (ndjson: the block of lines); scratch */
#ifdef ETWD_HAVE_TRACECMD
  struct lx_dat *dat;       /* the trace.dat being read (c->dat), instead of r and d */
#endif
  int ndjson, filtered, need_exec, need_data; /* need_data: e.data/e.stack (per-field CSV, Chrome) */
  const char **vals;        /* per-field CSV: a row's values [nfields] */
  size_t *lens;
  uint64_t from_ft, to_ft;  /* the --from/--to bounds, relative ones once the first event is seen */
  int first;
  char sq[24];              /* ndjson: seq + 1 as text, incremented in place */
  size_t sqn, batch;
};

/* Increments the decimal text @sq (*@sqn digits) by one. */
static void seq_next(char *sq, size_t *sqn) {
  size_t i = *sqn;
  while (i > 0 && sq[i - 1] == '9') sq[--i] = '0';
  if (i > 0) {
    sq[i - 1]++;
  } else {
    memmove(sq + 1, sq, (*sqn)++);
    sq[0] = '1';
  }
}

/* ndjson: writes out a full block, then appends `{"seq":N,` to p->w. Returns where the line
 * starts (to truncate back to). Other formats: empties p->w, 0. */
static size_t line_start(struct pass *p) {
  struct etw_jw *w = &p->w;
  if (!p->ndjson) {
    w->len = 0;
    return 0;
  }
  if (w->len >= p->batch) {
    fwrite(w->buf, 1, w->len, p->out);
    w->len = 0;
  }
  size_t start = w->len;
  if (!w->err && w->cap - w->len > 7 + sizeof p->sq) { /* room for fixed-size copies */
    char *o = w->buf + w->len;
    memcpy(o, "{\"seq\":", 7);
    memcpy(o + 7, p->sq, sizeof p->sq); /* the digits and what follows them (overwritten) */
    o[7 + p->sqn] = ',';
    w->len += 8 + p->sqn;
  } else if (!etw_jw_reserve(w, 8 + p->sqn)) {
    char *o = w->buf + w->len;
    memcpy(o, "{\"seq\":", 7);
    memcpy(o + 7, p->sq, p->sqn);
    o[7 + p->sqn] = ',';
    w->len += 8 + p->sqn;
  }
  return start;
}

/* Whether the record is inside --from/--to (relative bounds count from the input's first). */
static int in_time(struct pass *p, const struct etw_rec *rec) {
  const struct conv *c = p->c;
  if (p->first) {
    p->first = 0;
    if (c->from_s && c->from_rel) p->from_ft = rec->filetime + (uint64_t)(c->from_sec * 1e7 + 0.5);
    if (c->to_s && c->to_rel) p->to_ft = rec->filetime + (uint64_t)(c->to_sec * 1e7 + 0.5);
  }
  return !((c->from_s && rec->filetime < p->from_ft) || (c->to_s && rec->filetime >= p->to_ft));
}

/* Outputs the selected event @e (its text in p->w). 0, or -1 when the Chrome document is full
 * (said on stderr). */
static int emit(struct pass *p, const struct conv_ev *e) {
  struct conv *c = p->c;
  struct etw_jw *w = &p->w;
  if (p->ph == P_COLLECT) {
    collect(c, e);
  } else if (p->ndjson) {
    w->buf[w->len++] = '\n'; /* the writer keeps a byte past its length */
  } else if (c->fmt == F_CHROME) {
    if (conv_chrome_event(p->ch, e)) {
      fprintf(stderr, "etwd convert: the Chrome document reached its maximum of %llu MiB after %llu events: "
                      "select fewer events (--from/--to, --provider, --limit)\n",
              (unsigned long long)(etw_convert_chrome_max >> 20), (unsigned long long)p->n->written);
      return -1;
    }
  } else if (c->fmt == F_FOLDED) {
    etw_folded_add(c->fold, w->buf, w->len); /* (a stack beyond the bounds: counted, reported) */
  } else if (p->vals) {
    csv_fields_row(c, p->out, &p->t, e, p->vals, p->lens);
  } else {
    const char *j = etw_jw_cstr(w);
    const char *data = e->sys + e->sys_len; /* ,"EventData":{…}} or ,"Undecoded":… */
    const char *colon = strchr(data, ':');
    size_t dl = colon ? w->len - (size_t)(colon + 1 - j) - 1 : 0;
    csv_common(&p->t, e);
    etw_jw_ch(&p->t, ',');
    if (colon) etw_csv_data_cell(&p->t, colon + 1, dl);
    csv_flush(p->out, &p->t);
  }
  return 0;
}

static int select_emit(struct pass *p, const struct etw_rec *rec, const struct etw_evref *ref, size_t start,
                       size_t body, int ok);

/* Decodes one record and, when selected, outputs it. 0 go on, 1 the --limit is reached, -1 stop
 * with exit status 1. */
static int one_record(struct pass *p, const struct etw_rec *rec) {
  struct conv *c = p->c;
  struct etw_jw *w = &p->w;
  struct etw_evref ref;
  const char *pn, *en;
  if (!c->walks && etw_stk_is_walk(rec)) { /* not an event of the output: its names only */
    etw_decoder_names(p->d, rec, &pn, &en);
    return 0;
  }
  seq_next(p->sq, &p->sqn); /* sq = seq + 1 */
  p->n->seq++;
  if (!in_time(p, rec)) { /* not selected: its names only (schemas in the stream are read) */
    etw_decoder_names(p->d, rec, &pn, &en);
    if (p->stk) etw_stk_claim(p->stk, rec);
    return 0;
  }
  size_t start = line_start(p), body = w->len;
  int ok = etw_decoder_write(p->d, rec, w, &ref);
  if (w->err) { /* this event is not written: dropped and counted (the writer's error cleared) */
    etw_jw_truncate(w, start);
    p->n->dropped++;
    if (p->stk) etw_stk_claim(p->stk, rec);
    return 0;
  }
  if (p->stk) etw_stk_attach(p->stk, rec, w); /* (no room for the stack: the event without it) */
  return select_emit(p, rec, &ref, start, body, ok);
}

/* The event just written to p->w from @body on (its line from @start): selected, counted and
 * output, or taken back. @ok: decoded (else "Undecoded"). As one_record. */
static int select_emit(struct pass *p, const struct etw_rec *rec, const struct etw_evref *ref, size_t start,
                       size_t body, int ok) {
  struct conv *c = p->c;
  struct etw_jw *w = &p->w;
  struct conv_ev e = {rec, ref, p->n->seq, NULL, 0, NULL, 0, -1, -1, c->dat, NULL, 0};
  if (p->filtered || !p->ndjson) {
    const char *j = etw_jw_cstr(w) + body; /* "System":{…},"EventData":{…}} */
    size_t jl = w->len - body;
    e.sys = j + 9;
    e.sys_len = conv_json_span(e.sys, jl - 9);
    const char *rest = e.sys + e.sys_len;
    if (p->need_data && !strncmp(rest, ",\"EventData\":", 13)) { /* (plain CSV scans them itself) */
      e.data = rest + 13;
      e.data_len = conv_json_span(e.data, jl - (size_t)(e.data - j));
      rest = e.data + e.data_len;
      if (e.data_len && !strncmp(rest, ",\"Stack\":", 9)) {
        e.stack = rest + 9;
        e.stack_len = conv_json_span(e.stack, jl - (size_t)(e.stack - j));
      }
    }
    if (p->need_exec) exec_ids(&e);
    if (!selected(c, &e)) {
      etw_jw_truncate(w, start);
      return 0;
    }
  }
  if (!ok) p->n->undecoded++;
  p->n->written++;
  if (emit(p, &e)) return -1;
  return c->limit && p->n->written >= c->limit;
}

#ifdef ETWD_HAVE_TRACECMD
/* One event of a trace.dat (its text and header from linux_dat.c) through the same selection
 * and writers as a decoded ETL record: a record with the fields the writers read (time, CPU,
 * event id, level) stands for it. As one_record. */
static int one_dat(struct pass *p, const struct lx_dat_ev *ev) {
  struct etw_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.filetime = (uint64_t)(ev->ref.ts_ns / 100 + 116444736000000000LL);
  rec.cpu = ev->ref.cpu;
  rec.desc.id = ev->ref.event_id;
  rec.desc.level = ev->ref.level;
  rec.tid = ev->ref.tid;
  rec.pid = ev->ref.pid;
  seq_next(p->sq, &p->sqn); /* sq = seq + 1 */
  p->n->seq++;
  if (!in_time(p, &rec)) return 0;
  size_t start = line_start(p), body = p->w.len;
  etw_jw_raw(&p->w, ev->txt, ev->len);
  if (p->w.err) {
    etw_jw_truncate(&p->w, start);
    p->n->dropped++;
    return 0;
  }
  return select_emit(p, &rec, &ev->ref, start, body, !ev->undecoded);
}
#endif

/* Makes p->r (with every input file) and p->d. 0, or 1 (said on stderr). */
static int pass_open(struct pass *p) {
  const struct conv *c = p->c;
  struct etw_status st;
  etw_status_clear(&st);
#ifdef ETWD_HAVE_TRACECMD
  if (c->dat) { /* a trace.dat: its reader only (parse_args allowed one input) */
    char err[1200];
    if (!(p->dat = lx_dat_open(c->files[0], etw_convert_writer_max / 2, err, sizeof err))) {
      fprintf(stderr, "etwd convert: %s\n", err);
      return 1;
    }
    if (p->ph == P_WRITE && per_field(c)) {
      p->vals = calloc(c->nfields + 1, sizeof *p->vals);
      p->lens = calloc(c->nfields + 1, sizeof *p->lens);
      if (!p->vals || !p->lens) {
        fprintf(stderr, "etwd convert: out of memory\n");
        return 1;
      }
    }
    return 0;
  }
#endif
  p->r = etw_etl_reader_new();
  char *md_default = c->mdir ? NULL : etw_etl_manifest_dir();
  p->d = etw_decoder_new(c->mdir ? c->mdir : md_default);
  free(md_default);
  if (p->ph == P_WRITE && per_field(c)) {
    p->vals = calloc(c->nfields + 1, sizeof *p->vals);
    p->lens = calloc(c->nfields + 1, sizeof *p->lens);
  }
  if (!p->r || !p->d || (per_field(c) && p->ph == P_WRITE && (!p->vals || !p->lens))) {
    fprintf(stderr, "etwd convert: out of memory\n");
    return 1;
  }
  for (int i = 0; i < c->nf; i++) {
    if (etw_etl_reader_add_file(p->r, c->files[i], &st)) {
      fprintf(stderr, "etwd convert: %s\n", st.msg);
      return 1;
    }
  }
  if (p->ph == P_WRITE && !c->nostacks) { /* the stacks: one read of the input before the events */
    p->stk = etw_stk_new(1);
    if (!p->stk || etw_stk_prepass(p->stk, c->files, c->nf, NULL, 0 /* the user's own paths: links followed */)) {
      fprintf(stderr, "etwd convert: out of memory\n");
      return 1;
    }
  }
  return 0;
}

/* How the input files' clocks were aligned (etw_etl_reader_clock_ref), on stderr, when more
 * than one file is merged: each group of files of one boot and QPC clock, then each file on its
 * own header. */
static void clock_note(struct etw_etl_reader *r, int nf) {
  if (nf < 2) return;
  int own = 0;
  for (int i = 0; i < nf; i++) {
    int ref = etw_etl_reader_clock_ref(r, (uint32_t)i), n = 0;
    for (int j = 0; j < nf; j++) n += etw_etl_reader_clock_ref(r, (uint32_t)j) == ref;
    if (n < 2) {
      own++;
      continue;
    }
    if (ref != i) continue; /* (said with its reference) */
    fprintf(stderr, "etwd convert: one boot and QPC clock (same BootTime and PerfFreq), aligned on the raw timestamps "
                    "with %s's header:", etw_etl_reader_info(r, (uint32_t)ref)->path);
    for (int j = 0; j < nf; j++)
      if (etw_etl_reader_clock_ref(r, (uint32_t)j) == ref) fprintf(stderr, " %s", etw_etl_reader_info(r, (uint32_t)j)->path);
    fputc('\n', stderr);
  }
  if (own) {
    fprintf(stderr, "etwd convert: no clock shared with another input, aligned by its own header's StartTime:");
    for (int i = 0; i < nf; i++) {
      int ref = etw_etl_reader_clock_ref(r, (uint32_t)i), n = 0;
      for (int j = 0; j < nf; j++) n += etw_etl_reader_clock_ref(r, (uint32_t)j) == ref;
      if (n < 2) fprintf(stderr, " %s", etw_etl_reader_info(r, (uint32_t)i)->path);
    }
    fputc('\n', stderr);
  }
}

/* Reads every input file once. P_COLLECT only looks at the selected events (per-field CSV);
 * P_WRITE writes them to @out (@ch: the Chrome document being built). Returns 0, or 1 when an
 * input cannot be opened or the output's maximum is reached (said on stderr). */
static int run_pass(struct conv *c, enum phase ph, FILE *out, struct conv_chrome *ch, struct counts *n) {
  struct pass *p = calloc(1, sizeof *p);
  if (!p) return 1;
  memset(n, 0, sizeof *n);
  *p = (struct pass){.c = c, .ph = ph, .out = out, .ch = ch, .n = n, .first = 1, .sq = "0", .sqn = 1};
  p->ndjson = c->fmt == F_NDJSON && ph == P_WRITE;
  p->filtered = c->nprov || c->nev || c->npid || c->nproc || c->from_s || c->to_s || c->limit;
  p->need_exec = c->npid || c->fmt == F_CHROME;
  p->need_data = ph == P_COLLECT || per_field(c) || c->fmt == F_CHROME;
  p->from_ft = c->from_ft;
  p->to_ft = c->to_ft;
  /* ndjson: the lines are collected in w and written in blocks of about BATCH bytes */
  enum { BATCH = 256 << 10 };
  p->batch = etw_convert_writer_max / 4 < BATCH ? etw_convert_writer_max / 4 : BATCH;
  etw_jw_init(&p->w, etw_convert_writer_max);
  etw_jw_init(&p->t, 3 * etw_convert_writer_max); /* a CSV row: cells double each '"' */
  int rc = pass_open(p);
  if (rc) goto done;
  if (ph == P_WRITE && c->fmt == F_CSV) csv_header(c, out);
  /* (next_batch's loop without a bound test takes a call's first max - ETL_BATCH - 1 records) */
#ifdef ETWD_HAVE_TRACECMD
  if (p->dat) {
    struct lx_dat_ev ev;
    int y = 0;
    while (!y && lx_dat_next(p->dat, &ev) > 0) y = one_dat(p, &ev);
    if (y < 0) rc = 1;
    n->cut = y == 1;
    n->dropped += lx_dat_dropped(p->dat);
    if (p->ndjson && p->w.len) fwrite(p->w.buf, 1, p->w.len, out);
    if (lx_dat_damage(p->dat)) { /* a truncated file: its events up to the cut were written */
      n->damaged = 1;
      snprintf(n->damage, sizeof n->damage, "%s", lx_dat_damage(p->dat));
    }
    if (ph == P_WRITE && lx_dat_other_boot(p->dat)) /* (said even with --quiet: the times are wrong) */
      fprintf(stderr, "etwd convert: %s holds no wall-clock times (its trace clock counts from boot) and was "
                      "recorded before this machine's last boot or on another machine: TimeCreated is wrong by "
                      "the time between (--from/--to in seconds after the first event still select right)\n",
              c->files[0]);
    else if (ph == P_WRITE && !c->quiet && lx_dat_clock_guessed(p->dat))
      fprintf(stderr, "etwd convert: %s holds no wall-clock times (its trace clock counts from boot): "
                      "TimeCreated assumes it was recorded since this machine's last boot\n", c->files[0]);
    uint64_t joined, orphaned, unk, lost = lx_dat_lost(p->dat, &unk);
    lx_dat_stacks(p->dat, &joined, &orphaned);
    if (ph == P_WRITE && ((orphaned && !n->cut && !n->damaged) || (!c->quiet && (joined || orphaned))))
      fprintf(stderr, "etwd convert: %llu stack records: %llu joined to their events, %llu orphaned%s%s\n",
              (unsigned long long)(joined + orphaned), (unsigned long long)joined,
              (unsigned long long)orphaned,
              orphaned ? " (no event took them: an event interrupted before its stacks were recorded goes "
                         "without, as in the live stream)" : "",
              n->cut ? " (the read stopped at --limit)" : "");
    if (ph == P_WRITE && (lost || unk) && !n->cut)
      fprintf(stderr, "etwd convert: the kernel lost %llu events%s before they were recorded in %s (its ring "
                      "buffer was full), as the file's pages say\n", (unsigned long long)lost,
              unk ? " (and an unknown number more)" : "", c->files[0]);
    goto done;
  }
#endif
  const struct etw_rec *recs[512];
  struct etw_status st;
  etw_status_clear(&st);
  uint64_t done = 0, total = 0;
  etw_etl_reader_progress(p->r, &done, &total);
  int progress = !c->quiet && total >= (32u << 20) && ph == P_WRITE;
  time_t last = time(NULL);
  int k, x = 0;
  /* the records come in batches (pointers into the reader, valid until the next call) */
  while (!x && (k = etw_etl_reader_next_batch(p->r, recs, sizeof recs / sizeof recs[0], &st)) > 0) {
    for (int ri = 0; ri < k && !x; ri++) {
      x = one_record(p, recs[ri]);
      if (progress && (n->seq & 4095) == 0 && time(NULL) != last) {
        last = time(NULL);
        etw_etl_reader_progress(p->r, &done, &total);
        fprintf(stderr, "\retwd convert: %3d%%  %llu events", (int)(total ? done * 100 / total : 0),
                (unsigned long long)n->seq);
      }
    }
  }
  if (!x && k < 0) {
    n->damaged = 1;
    snprintf(n->damage, sizeof n->damage, "%s", st.msg);
  }
  if (x < 0) rc = 1;
  n->cut = x == 1;
  if (p->ndjson && p->w.len) fwrite(p->w.buf, 1, p->w.len, out);
  if (progress) fprintf(stderr, "\retwd convert: 100%%  %llu events\n", (unsigned long long)n->seq);
  if (ph == P_WRITE && !c->quiet) clock_note(p->r, c->nf);
  n->unparsed = p->d->unparsed;
  n->too_large = p->d->too_large;
  if (p->stk) etw_stk_counts(p->stk, &n->stk);
  n->proc_dropped = etw_decoder_proc_dropped(p->d);
done:
  etw_stk_free(p->stk);
  etw_jw_free(&p->w);
  etw_jw_free(&p->t);
  free(p->vals);
  free(p->lens);
  etw_etl_reader_free(p->r);
  etw_decoder_free(p->d);
#ifdef ETWD_HAVE_TRACECMD
  lx_dat_close(p->dat);
#endif
  free(p);
  return rc;
}

static void summary(const struct conv *c, const struct counts *n) {
  if (!c->quiet && !n->damaged && !n->written && n->seq && (c->nprov || c->nev || c->npid || c->from_s || c->to_s))
    fprintf(stderr, "etwd convert: no event matched the filters (%llu events in the input)\n",
            (unsigned long long)n->seq);
  if (n->proc_dropped)
    fprintf(stderr,
            "etwd convert: %llu process names or thread owners not kept (the decoder's tables were full of "
            "live processes and threads): some events go without ProcessName or payload ProcessID\n",
            (unsigned long long)n->proc_dropped);
  if (n->dropped)
    fprintf(stderr,
            "etwd convert: %llu events dropped: their text did not fit %llu bytes or found no memory "
            "(the other events were written)\n",
            (unsigned long long)n->dropped, (unsigned long long)etw_convert_writer_max);
  if (n->damaged) {
    fprintf(stderr, "etwd convert: %s (%llu events written before the damage)\n", n->damage,
            (unsigned long long)n->written);
  } else if (!c->quiet && (n->undecoded || n->unparsed)) {
    uint64_t big = n->too_large < n->undecoded ? n->too_large : n->undecoded;
    fprintf(stderr, "etwd convert: %llu events", (unsigned long long)n->written);
    if (n->undecoded > big)
      fprintf(stderr, ", %llu without a schema (written with \"Undecoded\")", (unsigned long long)(n->undecoded - big));
    if (big)
      fprintf(stderr, ", %llu too large for the writer's maximum (written with \"Undecoded\", \"event too large\")",
              (unsigned long long)big);
    if (n->unparsed)
      fprintf(stderr, ", %llu with payload bytes after their schema's fields (written with \"Unparsed\")",
              (unsigned long long)n->unparsed);
    fputc('\n', stderr);
  }
  /* (after a --limit cut the walks of the events never read count as not attached: said, and
   * not a warning then — --quiet leaves the line out) */
  const struct etw_stk_counts *k = &n->stk;
  if (!n->damaged && ((k->unattached && !n->cut) || (!c->quiet && (k->walks || k->in_event)))) {
    fprintf(stderr, "etwd convert: %llu stack walks: %llu attached to their events, %llu not attached",
            (unsigned long long)k->walks, (unsigned long long)k->attached, (unsigned long long)k->unattached);
    if (k->unattached && n->cut)
      fprintf(stderr, " (the read stopped at --limit %llu: the walks of the events after it, never read, are "
                      "counted here)", (unsigned long long)c->limit);
    if (k->in_event) fprintf(stderr, "; %llu events with their own stack", (unsigned long long)k->in_event);
    fputc('\n', stderr);
  }
  if (k->dropped || k->images_dropped) { /* (exit status 1) */
    struct etw_stk_budget b;
    etw_stk_budget_get(&b);
    fprintf(stderr, "etwd convert: the stack index kept no more (its bounds, or --stack-index-mb %llu):",
            (unsigned long long)(b.limit >> 20));
    if (k->dropped)
      fprintf(stderr, " %llu stack walks dropped, their events written without that stack%s",
              (unsigned long long)k->dropped, k->images_dropped ? ";" : "");
    if (k->images_dropped)
      fprintf(stderr, " %llu images or methods dropped, their frames written with the address only",
              (unsigned long long)k->images_dropped);
    fputc('\n', stderr);
  }
}

/* ---- compressed inputs: each is decompressed into DIR/<i>/<name inside>, a private temporary
 * directory, and converted from there (so the output is that of the unpacked file); removed at
 * the end by unpack_cleanup. */
#define UNPACK_MAX ((uint64_t)64 << 30)

struct unpacked {
  char dir[512];
  char **made; /* [nf]: the temporary path that replaced files[i], or NULL */
};

static int unpack_inputs(struct conv *c, struct unpacked *u) {
  u->made = calloc((size_t)(c->nf > 0 ? c->nf : 1), sizeof *u->made);
  if (!u->made) return 1;
  for (int i = 0; i < c->nf; i++) {
    enum etw_pack k = etw_pack_kind_file(c->files[i]);
    if (k == ETW_PACK_NONE) continue;
    char err[1024], name[256], sub[600], path[1024];
    path[0] = 0;
#ifndef _WIN32
    if (!u->dir[0]) {
      const char *t = getenv("TMPDIR");
      snprintf(u->dir, sizeof u->dir, "%s/etwd-convert-XXXXXX", t && *t ? t : "/tmp");
      if (!mkdtemp(u->dir)) {
        fprintf(stderr, "etwd convert: cannot create a temporary directory in %s\n", t && *t ? t : "/tmp");
        u->dir[0] = 0;
        return 1;
      }
    }
    snprintf(sub, sizeof sub, "%s/%d", u->dir, i);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/.unpacking", sub);
#else
    (void)sub;
#endif
    name[0] = 0;
    int rc = etw_unpack_file(c->files[i], k, path, UNPACK_MAX, name, sizeof name, err, sizeof err);
    if (rc) {
      if (rc > 0) snprintf(err, sizeof err, "%s: more than 64 GiB when decompressed", c->files[i]);
      fprintf(stderr, "etwd convert: %s\n", err);
#ifndef _WIN32
      rmdir(sub);
#endif
      return 1;
    }
#ifndef _WIN32 /* under the name of the file inside (a Chrome trace names its sources) */
    char named[1024];
    snprintf(named, sizeof named, "%s/%s", sub, name[0] && name[0] != '.' ? name : "input.etl");
    if (rename(path, named) == 0) snprintf(path, sizeof path, "%s", named);
#endif
    if (!(u->made[i] = strdup(path))) return 1;
    c->files[i] = u->made[i];
  }
  return 0;
}

static void unpack_cleanup(struct conv *c, struct unpacked *u) {
  for (int i = 0; u->made && i < c->nf; i++) {
    if (!u->made[i]) continue;
    remove(u->made[i]);
#ifndef _WIN32
    char sub[600];
    snprintf(sub, sizeof sub, "%s/%d", u->dir, i);
    rmdir(sub);
#endif
    free(u->made[i]);
  }
#ifndef _WIN32
  if (u->dir[0]) rmdir(u->dir);
#endif
  free(u->made);
}

/* ---- trace.dat inputs (linux_dat.c) */

/* 1 when @path starts with trace-cmd's magic: 0x17 0x08 0x44 "tracing" (then the version). */
static int is_tdat(const char *path) {
  unsigned char m[10];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t k = fread(m, 1, sizeof m, f);
  fclose(f);
  return k == sizeof m && !memcmp(m, "\x17\x08\x44tracing", sizeof m);
}

/* Sets c->dat when the input is a trace.dat, refusing what does not apply to one by name.
 * 0, or the exit status (said on stderr). */
static int dat_inputs(struct conv *c) {
  int nd = 0, first = -1;
  for (int i = 0; i < c->nf; i++)
    if (is_tdat(c->files[i])) nd++, first = first < 0 ? i : first;
  if (!nd) return 0;
#ifndef ETWD_HAVE_TRACECMD
  fprintf(stderr, "etwd convert: %s is a trace.dat (a Linux ftrace recording): this etwd reads .etl files only "
                  "(trace.dat files are converted by etwd on Linux, built with libtracecmd; or read by trace-cmd report)\n",
          c->files[first]);
  return 1;
#else
  if (c->nf > 1) {
    fprintf(stderr, "etwd convert: %s is a trace.dat: convert one trace.dat at a time, with no other input\n",
            c->files[first]);
    return 2;
  }
  const char *bad = c->mdir ? "--manifests" : c->mode_given ? "--decode" : c->nostacks ? "--no-stacks"
                  : c->walks ? "--stackwalk-events" : c->stk_given ? "--stack-index-mb" : NULL;
  if (bad) {
    fprintf(stderr, "etwd convert: %s does not apply to a trace.dat (%s): it is for .etl files\n", bad, c->files[0]);
    return 2;
  }
  c->dat = 1;
  return 0;
#endif
}

/* --format folded: writes the lines and says how many events had a stack (unless quiet, and
 * always when stacks were dropped by the aggregator's bounds). 1 = the exit status is 1. */
static int folded_finish(const struct conv *c, FILE *out, const struct counts *n) {
  uint64_t fe, fs, fd;
  etw_folded_stats(c->fold, &fe, &fs, &fd);
  int rc = etw_folded_write(c->fold, out) ? 1 : 0;
  if (!c->quiet || fd)
    fprintf(stderr, "etwd convert: %llu events, %llu with a stack, %llu distinct stacks%s\n",
            (unsigned long long)n->written, (unsigned long long)fe, (unsigned long long)fs,
            fd ? " (some stacks beyond the bounds were dropped)" : "");
  return rc || fd;
}

int etw_convert_main(int argc, char **argv) {
  struct conv *c = calloc(1, sizeof *c);
  const char **files = calloc((size_t)(argc > 0 ? argc : 1), sizeof *files);
  if (!c || !files) {
    free(c);
    free(files);
    return 1;
  }
  c->files = files;
  c->mode = etw_decode_default();
  int help = 0, rc = parse_args(c, argc, argv, &help);
  FILE *out = stdout;
  struct conv_chrome *ch = NULL;
  struct counts n;
  struct unpacked u;
  memset(&u, 0, sizeof u);
  if (help || rc) {
    usage(help ? stdout : stderr, help);
    goto end;
  }
  if ((rc = unpack_inputs(c, &u))) goto end;
  if ((rc = dat_inputs(c))) goto end;
  etw_decode_set_default(c->mode); /* (the readers and decoders run_pass makes) */
  if (c->fmt == F_CSV) { /* per-field columns when the selection is one event type: a first pass */
    rc = run_pass(c, P_COLLECT, NULL, NULL, &n);
    if (rc) goto end;
  }
  if (c->out_path && strcmp(c->out_path, "-")) {
    out = fopen(c->out_path, "wb");
    if (!out) {
      fprintf(stderr, "etwd convert: cannot write %s\n", c->out_path);
      rc = 1;
      goto end;
    }
  }
  /* csv goes through stdio's buffer; ndjson is written in blocks of ~BATCH bytes, which an
   * unbuffered stream hands to write() as they are (a buffered one copies a part of each block
   * into its buffer first: ≈ 35 M instructions on net.etl's 97 MB) */
  static char obuf[1 << 16];
  if (c->fmt != F_NDJSON) setvbuf(out, obuf, _IOFBF, sizeof obuf);
  else setvbuf(out, NULL, _IONBF, 0);
  if ((c->fmt == F_CHROME && !(ch = conv_chrome_new())) || (c->fmt == F_FOLDED && !(c->fold = etw_folded_new(0, 0)))) {
    fprintf(stderr, "etwd convert: out of memory\n");
    rc = 1;
    goto end;
  }
  rc = run_pass(c, P_WRITE, out, ch, &n);
  if (ch) {
    char src[1024] = "";
    for (int i = 0; i < c->nf; i++) {
      const char *b = strrchr(c->files[i], '/');
#ifdef _WIN32
      const char *bs = strrchr(b ? b : c->files[i], '\\');
      if (bs) b = bs;
#endif
      snprintf(src + strlen(src), sizeof src - strlen(src), "%s%s", i ? ", " : "", b ? b + 1 : c->files[i]);
    }
    if (!rc && conv_chrome_finish(ch, out, src)) rc = 1;
    else if (rc) conv_chrome_finish(ch, NULL, NULL);
    ch = NULL;
  }
  if (c->fold && !rc && folded_finish(c, out, &n)) rc = 1;
  if (fflush(out) || (out != stdout && fclose(out))) {
    fprintf(stderr, "etwd convert: write error\n");
    rc = 1;
  }
  out = stdout;
  if (!rc) summary(c, &n);
  if (n.dropped || n.damaged || n.stk.dropped || n.stk.images_dropped) rc = 1;
end:
  unpack_cleanup(c, &u);
  if (out != stdout) fclose(out);
  for (int i = 0; i < c->nprov; i++) free(c->prov[i]);
  for (int i = 0; i < c->nev; i++) free(c->ev[i]);
  for (size_t i = 0; i < c->nfields; i++) free(c->fields[i]);
  etw_folded_free(c->fold);
  free(c);
  free(files);
  return rc;
}
