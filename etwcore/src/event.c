/* event.c — event batches, the shared System block writer, and the string interner. */
#include "etwcore/event.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct etw_batch *etw_batch_new(uint32_t cap, size_t max_bytes) {
  struct etw_batch *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->ev = malloc((size_t)(cap ? cap : 1) * sizeof *b->ev);
  if (!b->ev) {
    free(b);
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->cap = cap ? cap : 1;
  etw_jw_init(&b->data, max_bytes ? max_bytes : (1u << 20));
  return b;
}

void etw_batch_ref(struct etw_batch *b) { atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); }

void etw_batch_unref(struct etw_batch *b) {
  if (!b) return;
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  etw_jw_free(&b->data);
  free(b->ev);
  free(b);
}

/* Copied into a right-sized block rather than shrunk in place (realloc): shrinking leaves a hole
 * just smaller than the producer's next reservation next to every held batch, so a quiet session
 * would still grow by a few touched pages per batch; freed whole, the reservation's block is what
 * the producer's next batch gets back. Only when more than half is unused: full batches (high
 * rates) are not copied. */
void etw_batch_trim(struct etw_batch *b) {
  size_t used = b->data.len ? b->data.len : 1;
  if (b->data.buf && b->data.cap - b->data.len > 4096 && b->data.cap - used > used) {
    char *nb = malloc(used);
    if (nb) {
      memcpy(nb, b->data.buf, used);
      free(b->data.buf);
      b->data.buf = nb;
      b->data.cap = used;
    }
  }
  uint32_t n = b->n ? b->n : 1;
  if ((size_t)(b->cap - b->n) * sizeof *b->ev > 4096 && b->cap - n > n) {
    struct etw_evref *ne = malloc(n * sizeof *ne);
    if (ne) {
      memcpy(ne, b->ev, n * sizeof *ne);
      free(b->ev);
      b->ev = ne;
      b->cap = n;
    }
  }
}

size_t etw_batch_mem(const struct etw_batch *b) {
  return sizeof *b + b->data.cap + (size_t)b->cap * sizeof *b->ev;
}

int etw_batch_full(const struct etw_batch *b) {
  return b->n >= b->cap || b->data.len >= b->data.max - b->data.max / 8;
}

int etw_batch_commit(struct etw_batch *b, size_t mark, const struct etw_evref *hdr) {
  if (b->data.err || b->n >= b->cap || b->data.len - mark > UINT32_MAX) {
    etw_jw_truncate(&b->data, mark);
    return -1;
  }
  struct etw_evref *e = &b->ev[b->n++];
  *e = *hdr;
  e->off = (uint32_t)mark;
  e->len = (uint32_t)(b->data.len - mark);
  return 0;
}

void etw_event_write_system(struct etw_jw *w, const struct etw_sys *s) {
  etw_jw_lit(w, "\"System\":{\"Provider\":{\"Name\":");
  etw_jw_cs(w, s->provider ? s->provider : "");
  if (s->provider_guid) {
    etw_jw_lit(w, ",\"Guid\":");
    etw_jw_guid(w, s->provider_guid);
  }
  etw_jw_ch(w, '}');
  if (s->host) {
    etw_jw_lit(w, ",\"Host\":");
    etw_jw_cs(w, s->host);
  }
  etw_jw_lit(w, ",\"EventID\":");
  etw_jw_u64(w, s->event_id);
  etw_jw_lit(w, ",\"Version\":");
  etw_jw_u64(w, s->version);
  etw_jw_lit(w, ",\"Level\":");
  etw_jw_u64(w, s->level);
  etw_jw_lit(w, ",\"Task\":");
  etw_jw_u64(w, s->task);
  etw_jw_lit(w, ",\"Opcode\":");
  etw_jw_u64(w, s->opcode);
  etw_jw_lit(w, ",\"Keywords\":");
  etw_jw_hexw(w, s->keywords, 16);
  etw_jw_lit(w, ",\"TimeCreated\":");
  if (s->filetime)
    etw_jw_filetime(w, s->filetime);
  else
    etw_jw_unix_ns(w, s->ts_ns);
  if (s->event_name) {
    etw_jw_lit(w, ",\"EventName\":");
    etw_jw_cs(w, s->event_name);
  }
  if (s->task_name) {
    etw_jw_lit(w, ",\"TaskName\":");
    etw_jw_cs(w, s->task_name);
  }
  if (s->opcode_name) {
    etw_jw_lit(w, ",\"OpcodeName\":");
    etw_jw_cs(w, s->opcode_name);
  }
  etw_jw_lit(w, ",\"Execution\":{\"ProcessID\":");
  if (s->pid < 0) etw_jw_lit(w, "null"); else etw_jw_i64(w, s->pid);
  if (s->process_name) {
    etw_jw_lit(w, ",\"ProcessName\":");
    etw_jw_cs(w, s->process_name);
  }
  etw_jw_lit(w, ",\"ThreadID\":");
  if (s->tid < 0) etw_jw_lit(w, "null"); else etw_jw_i64(w, s->tid);
  etw_jw_lit(w, ",\"ProcessorID\":");
  if (s->cpu < 0) etw_jw_lit(w, "null"); else etw_jw_i64(w, s->cpu);
  etw_jw_ch(w, '}');
  if (s->activity_id || s->related_activity_id) {
    etw_jw_lit(w, ",\"Correlation\":{");
    if (s->activity_id) {
      etw_jw_lit(w, "\"ActivityID\":");
      etw_jw_guid(w, s->activity_id);
    }
    if (s->related_activity_id) {
      if (s->activity_id) etw_jw_ch(w, ',');
      etw_jw_lit(w, "\"RelatedActivityID\":");
      etw_jw_guid(w, s->related_activity_id);
    }
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, '}');
}

/* ---- interner: open-addressing hash set of strdup'd strings, never shrinks */
static pthread_mutex_t intern_mu = PTHREAD_MUTEX_INITIALIZER;
static char **intern_tab;
static size_t intern_cap, intern_n;

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) {
    h ^= (unsigned char)*s++;
    h *= 1099511628211ull;
  }
  return h;
}

const char *etw_intern(const char *s) {
  static const char other[] = "(other)";
  if (!s) return NULL;
  uint64_t h = fnv1a(s);
  const char *res = other;
  pthread_mutex_lock(&intern_mu);
  if (intern_n * 2 >= intern_cap) {
    size_t nc = intern_cap ? intern_cap * 2 : 256;
    char **nt = calloc(nc, sizeof *nt);
    if (!nt) goto out;
    for (size_t i = 0; i < intern_cap; i++) {
      if (!intern_tab[i]) continue;
      size_t j = fnv1a(intern_tab[i]) & (nc - 1);
      while (nt[j]) j = (j + 1) & (nc - 1);
      nt[j] = intern_tab[i];
    }
    free(intern_tab);
    intern_tab = nt;
    intern_cap = nc;
  }
  size_t j = h & (intern_cap - 1);
  while (intern_tab[j]) {
    if (!strcmp(intern_tab[j], s)) {
      res = intern_tab[j];
      goto out;
    }
    j = (j + 1) & (intern_cap - 1);
  }
  if (intern_n >= ETW_INTERN_MAX) goto out;
  intern_tab[j] = strdup(s);
  if (intern_tab[j]) {
    res = intern_tab[j];
    intern_n++;
  }
out:
  pthread_mutex_unlock(&intern_mu);
  return res;
}

/* ---- process-name filters */

int etw_pname_pattern_ok(const char *pat) {
  size_t n = strlen(pat);
  if (n == 0 || n >= ETW_PNAME_PAT_MAX || !strcmp(pat, "*")) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)pat[i];
    if (c < 0x20 || c == 0x7f || c == ',' || (c == '*' && i != n - 1)) return 0;
  }
  return 1;
}

int etw_pname_list(const char *v, char (*pats)[ETW_PNAME_PAT_MAX], uint32_t max, uint32_t *n) {
  for (const char *p = v;; p++) {
    size_t k = strcspn(p, ",");
    if (k >= ETW_PNAME_PAT_MAX || *n >= max) return -1;
    memcpy(pats[*n], p, k);
    pats[*n][k] = 0;
    if (!etw_pname_pattern_ok(pats[(*n)++])) return -1;
    p += k;
    if (!*p) return 0;
  }
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

int etw_pname_match(const char *name, size_t len, const char *pat) {
  size_t n = strlen(pat);
  int prefix = n && pat[n - 1] == '*';
  if (prefix) n--;
  if (prefix ? len < n : len != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (lower((unsigned char)name[i]) != lower((unsigned char)pat[i])) return 0;
  return 1;
}

static int hexval(const char *p, const char *end, uint32_t *v) {
  if (end - p < 4) return -1;
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    *v = *v << 4 | (uint32_t)d;
  }
  return 0;
}

/* append @cp as UTF-8 to @buf at *o (what does not fit @cap is left out) */
static void put_cp(char *buf, size_t cap, size_t *o, uint32_t cp) {
  char t[4];
  size_t k;
  if (cp < 0x80) {
    t[0] = (char)cp;
    k = 1;
  } else if (cp < 0x800) {
    t[0] = (char)(0xC0 | cp >> 6);
    t[1] = (char)(0x80 | (cp & 0x3F));
    k = 2;
  } else if (cp < 0x10000) {
    t[0] = (char)(0xE0 | cp >> 12);
    t[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    t[2] = (char)(0x80 | (cp & 0x3F));
    k = 3;
  } else {
    t[0] = (char)(0xF0 | cp >> 18);
    t[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    t[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    t[3] = (char)(0x80 | (cp & 0x3F));
    k = 4;
  }
  for (size_t i = 0; i < k && *o < cap; i++) buf[(*o)++] = t[i];
}

int etw_event_pname(const char *ev, size_t n, char *buf, size_t cap) {
  /* the writers put `"Execution":{"ProcessID":N,"ProcessName":"…"` in the System object, which
   * comes first; the key cannot occur inside a JSON string (its quotes would be escaped) */
  static const char EXEC[] = "\"Execution\":{\"ProcessID\":", NAME[] = ",\"ProcessName\":\"";
  const char *p = ev, *end = ev + n, *q = NULL;
  while (p + sizeof EXEC - 1 <= end && (p = memchr(p, '"', (size_t)(end - p))) != NULL) {
    if ((size_t)(end - p) >= sizeof EXEC - 1 && !memcmp(p, EXEC, sizeof EXEC - 1)) {
      q = p + sizeof EXEC - 1;
      break;
    }
    p++;
  }
  if (!q) return -1;
  while (q < end && *q != ',' && *q != '}') q++; /* the id: digits or null */
  if ((size_t)(end - q) < sizeof NAME - 1 || memcmp(q, NAME, sizeof NAME - 1)) return -1;
  size_t o = 0;
  for (q += sizeof NAME - 1; q < end && *q != '"'; q++) {
    if (*q != '\\') {
      if (o < cap) buf[o++] = *q;
      continue;
    }
    if (++q == end) return -1;
    uint32_t cp, lo;
    switch (*q) {
    case 'b': cp = '\b'; break;
    case 'f': cp = '\f'; break;
    case 'n': cp = '\n'; break;
    case 'r': cp = '\r'; break;
    case 't': cp = '\t'; break;
    case 'u':
      if (hexval(q + 1, end, &cp)) return -1;
      q += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && end - q > 6 && q[1] == '\\' && q[2] == 'u' && !hexval(q + 3, end, &lo) &&
          lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        q += 6;
      } else if (cp >= 0xD800 && cp < 0xE000) {
        cp = 0xFFFD;
      }
      break;
    default: cp = (unsigned char)*q; /* \" \\ \/ */
    }
    put_cp(buf, cap, &o, cp);
  }
  return q < end ? (int)o : -1; /* (@cap is small: a name's buffer) */
}
