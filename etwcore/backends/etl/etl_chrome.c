/* etl_chrome.c — `etwd convert --format chrome`: Chrome trace-event JSON (ui.perfetto.dev,
 * chrome://tracing), the mapping the web page's export uses too (docs/etl.md):
 *   every event → an instant {"name","cat","ph":"i","s":"t","ts","pid","tid","args"} (ts: µs since
 *   the earliest exported event, ns kept as 3 decimals; args: EventData + seq + cpu);
 *   an Opcode 1 event followed by an Opcode 2 event of the same provider, Task and ThreadID →
 *   also one "X" (named as the start event, dur in µs, args start_seq/stop_seq);
 *   process_name / thread_name metadata ("M") from Execution.ProcessName/ThreadName, and from
 *   EventData ProcessName (or ImageFileName) of process start/rundown events, ThreadName;
 *   events sorted by ts, then seq.
 * The events' text is kept in memory (at most etw_convert_chrome_max bytes) with a small index
 * that is sorted at the end. Single-threaded (the convert CLI). */
#include <stdlib.h>
#include <string.h>

#include "etl_conv.h"
#include "etwcore/jw.h"

size_t etw_convert_chrome_max = (size_t)1 << 30;

enum { MAP_MAX = 1 << 16 }; /* start events waiting for their stop; named processes; threads */

struct item {
  int64_t ft;       /* FILETIME of the event (an X: of its start) */
  uint64_t seq;     /* (an X: its start's) */
  uint32_t idx;     /* arrival order of the instant (an X: its start's) */
  uint8_t x;        /* 1 = the X of a pair (after its start's instant) */
  size_t off;       /* text: head (up to `"ts":`) then tail, in c->txt */
  uint32_t head, len;
};

/* open addressing map from (p, a, b) to an index (bounded: MAP_MAX keys) */
struct kent { const void *p; int64_t a, b; uint32_t v; };
struct kmap { struct kent *e; uint32_t n; };

struct start { int64_t ft; uint64_t seq; uint32_t idx, open; int64_t pid, tid; size_t name_off; uint32_t name_len; };
struct pname { int64_t pid, tid; char *name; }; /* name: JSON string text */

struct conv_chrome {
  struct etw_jw txt;
  struct item *it;
  size_t n, cap;
  uint32_t arrivals;
  int64_t ft0;
  int any;
  struct kmap pairs, procs, threads;
  struct start *st;
  struct pname *pn, *tn;
  uint32_t nst, npn, ntn;
};

static uint32_t *kmap_get(struct kmap *m, const void *p, int64_t a, int64_t b, uint32_t next) {
  if (!m->e && !(m->e = calloc(2 * MAP_MAX, sizeof *m->e))) return NULL;
  uint64_t h = ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)a * 0xC2B2AE3D27D4EB4Full) ^
               ((uint64_t)b * 0x165667B19E3779F9ull);
  for (uint32_t i = (uint32_t)(h >> 40) & (2 * MAP_MAX - 1);; i = (i + 1) & (2 * MAP_MAX - 1)) {
    struct kent *e = &m->e[i];
    if (e->v && e->p == p && e->a == a && e->b == b) return &e->v;
    if (!e->v) {
      if (m->n >= MAP_MAX) return NULL; /* full: this key is not tracked */
      e->p = p;
      e->a = a;
      e->b = b;
      e->v = next + 1; /* stored + 1 (0 = empty) */
      m->n++;
      return &e->v;
    }
  }
}

struct conv_chrome *conv_chrome_new(void) {
  struct conv_chrome *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  etw_jw_init(&c->txt, etw_convert_chrome_max);
  c->st = calloc(MAP_MAX, sizeof *c->st);
  c->pn = calloc(MAP_MAX, sizeof *c->pn);
  c->tn = calloc(MAP_MAX, sizeof *c->tn);
  if (!c->st || !c->pn || !c->tn) {
    conv_chrome_finish(c, NULL, NULL);
    return NULL;
  }
  return c;
}

static int push(struct conv_chrome *c, struct item *x) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 4096;
    struct item *p = realloc(c->it, cap * sizeof *p);
    if (!p) return -1;
    c->it = p;
    c->cap = cap;
  }
  c->it[c->n++] = *x;
  return 0;
}

/* ASCII case-insensitive substring */
static int has_ci(const char *s, const char *w) {
  for (; *s; s++) {
    size_t i = 0;
    while (w[i] && s[i] && (s[i] | 32) == (w[i] | 32)) i++;
    if (!w[i]) return 1;
  }
  return 0;
}

/* Records @name (a JSON value's text) for (pid, tid) in @tab (last one wins, first-seen order). */
static void set_name(struct conv_chrome *c, struct kmap *m, struct pname *tab, uint32_t *n, int64_t pid,
                     int64_t tid, const char *v, size_t vl) {
  uint32_t *slot = kmap_get(m, NULL, pid, tid, *n);
  if (!slot) return;
  uint32_t k = *slot - 1;
  int str = v[0] == '"';
  char *s = malloc(vl + 3);
  if (!s) return;
  snprintf(s, vl + 3, "%s%.*s%s", str ? "" : "\"", (int)vl, v, str ? "" : "\"");
  if (k == *n) { /* new */
    tab[k].pid = pid;
    tab[k].tid = tid;
    (*n)++;
  } else {
    free(tab[k].name);
  }
  tab[k].name = s;
  (void)c;
}

/* a number member of the event's System object (Opcode, Task); -1 if none */
static int64_t sys_int(const struct conv_ev *e, const char *key) {
  size_t vl;
  const char *v = conv_json_member(e->sys, e->sys_len, key, &vl);
  return conv_json_int(v, vl);
}

static void names(struct conv_chrome *c, const struct conv_ev *e, const char *name, int64_t pid, int64_t tid) {
  size_t xl, vl;
  const char *x = conv_json_member(e->sys, e->sys_len, "Execution", &xl), *v;
  if (x && (v = conv_json_member(x, xl, "ProcessName", &vl)) && strncmp(v, "null", 4))
    set_name(c, &c->procs, c->pn, &c->npn, pid, 0, v, vl);
  if (x && (v = conv_json_member(x, xl, "ThreadName", &vl)) && strncmp(v, "null", 4))
    set_name(c, &c->threads, c->tn, &c->ntn, pid, tid, v, vl);
  if (!e->data) return;
  int64_t op = sys_int(e, "Opcode");
  if ((v = conv_json_member(e->data, e->data_len, "ProcessName", &vl)) == NULL)
    v = conv_json_member(e->data, e->data_len, "ImageFileName", &vl);
  if (v && (op == 1 || op == 3 || op == 4 || has_ci(name, "start") || has_ci(name, "rundown"))) {
    size_t pl;
    const char *p = conv_json_member(e->data, e->data_len, "ProcessID", &pl);
    if (!p) p = conv_json_member(e->data, e->data_len, "ProcessId", &pl);
    int64_t ppid = p ? conv_json_int(p, pl) : pid;
    set_name(c, &c->procs, c->pn, &c->npn, ppid < 0 ? 0 : ppid, 0, v, vl);
  }
  if ((v = conv_json_member(e->data, e->data_len, "ThreadName", &vl)))
    set_name(c, &c->threads, c->tn, &c->ntn, pid, tid, v, vl);
}

int conv_chrome_event(struct conv_chrome *c, const struct conv_ev *e) {
  struct etw_jw *w = &c->txt;
  int64_t pid = e->pid < 0 ? 0 : e->pid, tid = e->tid < 0 ? 0 : e->tid;
  int64_t ft = (int64_t)e->rec->filetime;
  if (!c->any || ft < c->ft0) c->ft0 = ft;
  c->any = 1;
  struct item x = {ft, e->seq, c->arrivals++, 0, w->len, 0, 0};
  etw_jw_lit(w, "{\"name\":");
  size_t name_off = w->len;
  char nm[300];
  if (e->ref->name) snprintf(nm, sizeof nm, "%s", e->ref->name);
  else snprintf(nm, sizeof nm, "%s/%u", e->ref->provider, e->rec->desc.id);
  etw_jw_cs(w, nm);
  size_t name_len = w->len - name_off;
  etw_jw_lit(w, ",\"cat\":");
  etw_jw_cs(w, e->ref->provider);
  etw_jw_lit(w, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
  x.head = (uint32_t)(w->len - x.off);
  etw_jw_lit(w, ",\"pid\":");
  etw_jw_i64(w, pid);
  etw_jw_lit(w, ",\"tid\":");
  etw_jw_i64(w, tid);
  etw_jw_lit(w, ",\"args\":{");
  if (e->data && e->data_len > 2) {
    etw_jw_raw(w, e->data + 1, e->data_len - 2);
    etw_jw_ch(w, ',');
  }
  etw_jw_lit(w, "\"seq\":");
  etw_jw_u64(w, e->seq);
  etw_jw_lit(w, ",\"cpu\":");
  etw_jw_u64(w, e->rec->cpu);
  etw_jw_lit(w, "}}");
  if (w->err) return -1;
  x.len = (uint32_t)(w->len - x.off);
  if (push(c, &x)) return -1;
  names(c, e, nm, pid, tid);
  /* start/stop pairs: Opcode 1 then Opcode 2 of the same provider, Task and ThreadID */
  int64_t op = sys_int(e, "Opcode");
  if (op != 1 && op != 2) return 0;
  uint32_t *slot = kmap_get(&c->pairs, e->ref->provider, sys_int(e, "Task"), tid, c->nst);
  if (!slot) return 0;
  uint32_t k = *slot - 1;
  if (k == c->nst) c->nst++;
  struct start *s = &c->st[k];
  if (op == 1) {
    *s = (struct start){ft, e->seq, x.idx, 1, pid, tid, name_off, (uint32_t)name_len};
    return 0;
  }
  if (!s->open) return 0;
  s->open = 0;
  if (etw_jw_reserve(w, s->name_len + 16)) return -1; /* the start's name is copied from w itself */
  struct item y = {s->ft, s->seq, s->idx, 1, w->len, 0, 0};
  etw_jw_lit(w, "{\"name\":");
  memmove(w->buf + w->len, w->buf + s->name_off, s->name_len);
  w->len += s->name_len;
  etw_jw_lit(w, ",\"cat\":");
  etw_jw_cs(w, e->ref->provider);
  etw_jw_lit(w, ",\"ph\":\"X\",\"ts\":");
  y.head = (uint32_t)(w->len - y.off);
  int64_t d = (ft - s->ft) * 100; /* ns */
  char dur[48];
  snprintf(dur, sizeof dur, ",\"dur\":%s%lld.%03lld", d < 0 ? "-" : "", (long long)(d < 0 ? -d : d) / 1000,
           (long long)(d < 0 ? -d : d) % 1000);
  etw_jw_lit(w, dur);
  etw_jw_lit(w, ",\"pid\":");
  etw_jw_i64(w, s->pid);
  etw_jw_lit(w, ",\"tid\":");
  etw_jw_i64(w, s->tid);
  etw_jw_lit(w, ",\"args\":{\"start_seq\":");
  etw_jw_u64(w, s->seq);
  etw_jw_lit(w, ",\"stop_seq\":");
  etw_jw_u64(w, e->seq);
  etw_jw_lit(w, "}}");
  if (w->err) return -1;
  y.len = (uint32_t)(w->len - y.off);
  return push(c, &y);
}

static int by_time(const void *pa, const void *pb) {
  const struct item *a = pa, *b = pb;
  if (a->ft != b->ft) return a->ft < b->ft ? -1 : 1;
  if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
  if (a->idx != b->idx) return a->idx < b->idx ? -1 : 1;
  return (int)a->x - (int)b->x;
}

int conv_chrome_finish(struct conv_chrome *c, FILE *out, const char *source) {
  int rc = 0;
  if (out) {
    qsort(c->it, c->n, sizeof *c->it, by_time);
    fputs("{\"traceEvents\":[", out);
    int first = 1;
    for (uint32_t i = 0; i < c->npn; i++, first = 0)
      fprintf(out, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"args\":{\"name\":%s}}",
              first ? "" : ",", (long long)c->pn[i].pid, c->pn[i].name);
    for (uint32_t i = 0; i < c->ntn; i++, first = 0)
      fprintf(out, "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"name\":%s}}",
              first ? "" : ",", (long long)c->tn[i].pid, (long long)c->tn[i].tid, c->tn[i].name);
    for (size_t i = 0; i < c->n; i++, first = 0) {
      const struct item *x = &c->it[i];
      int64_t ns = (x->ft - c->ft0) * 100;
      fputs(first ? "\n" : ",\n", out);
      fwrite(c->txt.buf + x->off, 1, x->head, out);
      fprintf(out, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
      fwrite(c->txt.buf + x->off + x->head, 1, x->len - x->head, out);
    }
    struct etw_jw s;
    etw_jw_init(&s, 4096);
    etw_jw_cs(&s, source ? source : "");
    fprintf(out, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"etwd\",\"source\":%s}}\n",
            etw_jw_cstr(&s));
    etw_jw_free(&s);
  }
  for (uint32_t i = 0; i < c->npn; i++) free(c->pn[i].name);
  for (uint32_t i = 0; i < c->ntn; i++) free(c->tn[i].name);
  free(c->pn);
  free(c->tn);
  free(c->st);
  free(c->pairs.e);
  free(c->procs.e);
  free(c->threads.e);
  free(c->it);
  etw_jw_free(&c->txt);
  free(c);
  return rc;
}
