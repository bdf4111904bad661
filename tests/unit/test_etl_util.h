/* test_etl_util.h — helpers shared by the ETL unit tests: corpus paths (ETWD_CORPUS,
 * ETWD_MANIFESTS), reading files, unpacking the corpus .zip/.etlgz files with the system's
 * `unzip`/`gzip` (scripts/deps.sh installs them), decoding a whole trace into JSON lines, and
 * pulling raw JSON values out of an event without a JSON library (64-bit values stay exact).
 */
#ifndef TEST_ETL_UTIL_H
#define TEST_ETL_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etwcore/etl.h"

/* The ETL test data must be there: else the test fails at once and says how to get it. */
static inline void tu_need_dir(const char *env, const char *dir) {
  if (access(dir, R_OK | X_OK) == 0) return;
  fprintf(stderr,
          "FAILED: no ETL test data at %s (%s): run scripts/fetch-corpus.sh (it downloads the pinned "
          "public .etl files and manifests listed in tests/data-sources.txt into tests/data/, then "
          "re-run cmake), or set ETWD_CORPUS and ETWD_MANIFESTS\n",
          dir, env);
  exit(1);
}
static inline char *tu_path(const char *env, const char *fallback, const char *rel) {
  const char *base = getenv(env);
  if (!base || !*base) base = fallback;
  tu_need_dir(env, base);
  size_t n = strlen(base) + strlen(rel) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", base, rel);
  return p;
}
static inline char *tu_corpus(const char *rel) { return tu_path("ETWD_CORPUS", "../shared/corpus", rel); }
static inline const char *tu_manifests(void) {
  const char *m = getenv("ETWD_MANIFESTS");
  m = m && *m ? m : "../shared/manifests";
  tu_need_dir("ETWD_MANIFESTS", m);
  return m;
}

/* Read everything a shell command prints (bounded to 256 MiB). */
static inline unsigned char *tu_cmd(const char *cmd, size_t *n) {
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t cap = 1 << 20, len = 0;
  unsigned char *b = malloc(cap);
  while (b) {
    if (len == cap) {
      if (cap >= (256u << 20)) break;
      unsigned char *nb = realloc(b, cap * 2);
      if (!nb) break;
      b = nb;
      cap *= 2;
    }
    size_t k = fread(b + len, 1, cap - len, p);
    if (!k) break;
    len += k;
  }
  if (pclose(p) != 0 && b) {
    free(b);
    return NULL;
  }
  *n = len;
  return b;
}

static inline unsigned char *tu_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(sz > 0 ? (size_t)sz : 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = (size_t)sz;
  return b;
}

/* A corpus file, transparently unpacked: "x.zip!member" via unzip -p, "*.etlgz" via gzip -dc. */
static inline unsigned char *tu_corpus_file(const char *rel, size_t *n) {
  char *bang = strchr(rel, '!');
  char relp[1024];
  snprintf(relp, sizeof relp, "%.*s", bang ? (int)(bang - rel) : (int)strlen(rel), rel);
  char *p = tu_corpus(relp);
  unsigned char *b = NULL;
  char cmd[2048];
  if (bang) {
    snprintf(cmd, sizeof cmd, "unzip -p '%s' '%s'", p, bang + 1);
    b = tu_cmd(cmd, n);
  } else if (strlen(relp) > 6 && !strcmp(relp + strlen(relp) - 6, ".etlgz")) {
    snprintf(cmd, sizeof cmd, "gzip -dc < '%s'", p);
    b = tu_cmd(cmd, n);
  } else {
    b = tu_file(p, n);
  }
  if (!b) fprintf(stderr, "cannot read corpus file %s (ETWD_CORPUS, unzip, gzip?)\n", p);
  free(p);
  return b;
}

/* One decoded event. */
struct tu_ev {
  char *json; /* "{"seq":N,"System":…}" */
  uint64_t filetime;
  uint32_t user_len, pid, tid;
  uint16_t cpu;
  uint8_t kind;
  const char *provider, *name;
  int decoded;
};
struct tu_trace {
  struct tu_ev *ev;
  size_t n;
  int rc;                /* last etw_etl_reader_next result (0 clean, -1 damage) */
  struct etw_status st;
  struct etw_etl_info info; /* of the first file */
};

/* Decode a whole in-memory trace (manifests from @mdir, may be NULL). */
static inline int tu_decode(const unsigned char *data, size_t len, const char *name, const char *mdir,
                     struct tu_trace *t) {
  memset(t, 0, sizeof *t);
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_decoder *d = etw_decoder_new(mdir);
  if (!r || !d) return -1;
  if (etw_etl_reader_add_mem(r, name, data, len, &t->st)) {
    etw_etl_reader_free(r);
    etw_decoder_free(d);
    t->rc = -2;
    return -1;
  }
  t->info = *etw_etl_reader_info(r, 0);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_rec rec;
  struct etw_evref ref;
  size_t cap = 0;
  while ((t->rc = etw_etl_reader_next(r, &rec, &t->st)) == 1) {
    if (t->n == cap) {
      cap = cap ? cap * 2 : 256;
      struct tu_ev *ne = realloc(t->ev, cap * sizeof *ne);
      if (!ne) break;
      t->ev = ne;
    }
    w.len = 0;
    char pre[40];
    int k = snprintf(pre, sizeof pre, "{\"seq\":%zu,", t->n + 1);
    etw_jw_raw(&w, pre, (size_t)k);
    struct tu_ev *e = &t->ev[t->n++];
    e->decoded = etw_decoder_write(d, &rec, &w, &ref);
    e->json = strdup(etw_jw_cstr(&w));
    e->filetime = rec.filetime;
    e->user_len = rec.user_len;
    e->pid = rec.pid;
    e->tid = rec.tid;
    e->cpu = rec.cpu;
    e->kind = rec.kind;
    e->provider = ref.provider;
    e->name = ref.name;
  }
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(r);
  return 0;
}

static inline void tu_free(struct tu_trace *t) {
  for (size_t i = 0; i < t->n; i++) free(t->ev[i].json);
  free(t->ev);
  t->ev = NULL;
  t->n = 0;
}

/* Raw JSON text of the first member named @key inside @json (e.g. "\"abc\"" or "-5"), copied
 * to @out; returns 0 when found. Objects/arrays are returned whole. */
static inline int tu_raw(const char *json, const char *key, char *out, size_t cap) {
  char pat[256];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  if (!p) return -1;
  p += strlen(pat);
  const char *q = p;
  int depth = 0, str = 0;
  for (; *q; q++) {
    if (str) {
      if (*q == '\\' && q[1]) q++;
      else if (*q == '"') str = 0;
      continue;
    }
    if (*q == '"') str = 1;
    else if (*q == '{' || *q == '[') depth++;
    else if (*q == '}' || *q == ']') {
      if (depth == 0) break;
      depth--;
    } else if (*q == ',' && depth == 0) break;
  }
  size_t n = (size_t)(q - p);
  if (n >= cap) n = cap - 1;
  memcpy(out, p, n);
  out[n] = 0;
  return 0;
}

/* The JSON string value of @key, unquoted (escapes \\ and \" undone); 0 when found. */
static inline int tu_str(const char *json, const char *key, char *out, size_t cap) {
  char raw[4096];
  if (tu_raw(json, key, raw, sizeof raw) || raw[0] != '"') return -1;
  size_t o = 0;
  for (size_t i = 1; raw[i] && raw[i] != '"' && o + 1 < cap; i++) {
    if (raw[i] == '\\' && raw[i + 1]) i++;
    out[o++] = raw[i];
  }
  out[o] = 0;
  return 0;
}

/* ---- PerfView baseline lines ("EVENT <ms>: <Prov>/<Name> K=V; K=V; …") */
struct pv_line {
  char ms[32];
  char name[256];
  int nkv;
  char key[64][64];
  char val[64][256];
};

static inline int pv_parse(const char *line, struct pv_line *l) {
  memset(l, 0, sizeof *l);
  if (strncmp(line, "EVENT ", 6)) return -1;
  const char *p = line + 6, *c = strchr(p, ':');
  if (!c || (size_t)(c - p) >= sizeof l->ms) return -1;
  memcpy(l->ms, p, (size_t)(c - p));
  p = c + 2;
  const char *e = strstr(p, " PID=");
  if (!e || (size_t)(e - p) >= sizeof l->name) return -1;
  memcpy(l->name, p, (size_t)(e - p));
  p = e + 1;
  while (*p && *p != '\n' && l->nkv < 64) {
    const char *eq = strchr(p, '=');
    if (!eq) break;
    const char *end = strstr(eq, "; ");
    if (!end) end = eq + strlen(eq);
    snprintf(l->key[l->nkv], sizeof l->key[0], "%.*s", (int)(eq - p), p);
    snprintf(l->val[l->nkv], sizeof l->val[0], "%.*s", (int)(end - eq - 1), eq + 1);
    l->nkv++;
    p = *end ? end + 2 : end;
  }
  return 0;
}

/* "1,234.5" → "1234.5"; returns 1 when @s looks like a (comma-grouped) number. */
static inline int pv_number(const char *s, char *out, size_t cap) {
  size_t o = 0;
  int digits = 0;
  for (size_t i = 0; s[i]; i++) {
    if (s[i] == ',') continue;
    if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.')) return 0;
    digits += s[i] >= '0' && s[i] <= '9';
    if (o + 1 < cap) out[o++] = s[i];
  }
  out[o] = 0;
  return digits > 0;
}

/* Our JSON value rendered as PerfView text (strings unquoted, ISO times as yy/MM/dd HH:mm:ss.ffffff). */
static inline void pv_render(const char *raw, char *out, size_t cap) {
  if (raw[0] == '"') {
    size_t o = 0;
    for (size_t i = 1; raw[i] && raw[i] != '"' && o + 1 < cap; i++) {
      if (raw[i] == '\\' && raw[i + 1]) i++;
      out[o++] = raw[i];
    }
    out[o] = 0;
    /* 2021-09-09T14:59:35.7990000Z → 21/09/09 14:59:35.799000 */
    if (o == 28 && out[4] == '-' && out[10] == 'T' && out[27] == 'Z') {
      char t[32];
      snprintf(t, sizeof t, "%.2s/%.2s/%.2s %.8s.%.6s", out + 2, out + 5, out + 8, out + 11, out + 20);
      snprintf(out, cap, "%s", t);
    }
    if (o == 38 && out[0] == '{') { /* GUID without braces */
      memmove(out, out + 1, 36);
      out[36] = 0;
    }
    return;
  }
  size_t l = strlen(raw);
  if (l >= cap) l = cap - 1;
  memcpy(out, raw, l);
  out[l] = 0;
}

/* Does our raw JSON value match PerfView's printed value (formatting rules of the corpus README)? */
static inline int pv_match(const char *want, const char *raw) {
  char ours[1024], w[300], wn[300], on[1024];
  pv_render(raw, ours, sizeof ours);
  snprintf(w, sizeof w, "%s", want);
  size_t wl = strlen(w);
  int trunc = wl > 3 && !strcmp(w + wl - 3, "...");
  if (trunc) w[wl - 3] = 0;
  if (!strcmp(w, "True")) return !strcmp(ours, "true") || !strcmp(ours, "1");
  if (!strcmp(w, "False")) return !strcmp(ours, "false") || !strcmp(ours, "0");
  if (trunc) return !strncmp(ours, w, strlen(w));
  if (!strcmp(ours, w)) return 1;
  /* numbers: decimal with separators, hex, negative (two's complement), floats */
  int wnum = pv_number(w, wn, sizeof wn) || (w[0] == '0' && w[1] == 'x');
  if (!(w[0] == '0' && w[1] == 'x')) {
    if (!pv_number(w, wn, sizeof wn)) wnum = 0;
  } else {
    snprintf(wn, sizeof wn, "%s", w);
  }
  if (!wnum) return 0;
  if (strlen(ours) == 1 && !(ours[0] >= '0' && ours[0] <= '9')) /* char rendered as text */
    return strtoull(wn, NULL, 0) == (unsigned char)ours[0];
  memcpy(on, ours, sizeof on);
  if (strchr(wn, '.') || strchr(on, '.') || strchr(on, 'e')) {
    double a = strtod(wn, NULL), b = strtod(on, NULL);
    double d = a > b ? a - b : b - a;
    return d <= 0.0005 + (a < 0 ? -a : a) * 1e-9;
  }
  unsigned long long a = strtoull(wn, NULL, 0), b = strtoull(on, NULL, 0);
  if (a == b) return 1;
  return wn[0] == '-' && (a & 0xFFFFFFFFull) == b; /* signed 32-bit printed, hex rendered */
}

/* PerfView's "<ms>" for an event: (ts − start) in ms, 3 decimals, thousands separators. */
static inline void pv_ms(uint64_t ft, uint64_t start, char *out, size_t cap) {
  uint64_t us = ft >= start ? (ft - start) / 10 : 0; /* FILETIME is 100 ns */
  uint64_t ms = us / 1000, frac = us % 1000;
  char digits[32], grouped[48];
  int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)ms), o = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) grouped[o++] = ',';
    grouped[o++] = digits[i];
  }
  grouped[o++] = '.';
  grouped[o++] = (char)('0' + frac / 100);
  grouped[o++] = (char)('0' + frac / 10 % 10);
  grouped[o++] = (char)('0' + frac % 10);
  grouped[o] = 0;
  if ((size_t)o >= cap) o = (int)cap - 1;
  memcpy(out, grouped, (size_t)o);
  out[o] = 0;
}

/* a reader over @img (called @name) and a decoder with @mdir (NULL: no manifests); 0, or -1
 * with nothing left to free */
static inline int tu_open(const unsigned char *img, size_t len, const char *name, const char *mdir,
                          struct etw_etl_reader **r, struct etw_decoder **d) {
  struct etw_status st;
  *r = etw_etl_reader_new();
  *d = etw_decoder_new(mdir);
  if (*r && *d && etw_etl_reader_add_mem(*r, name, img, len, &st) == ETW_E_OK) return 0;
  if (*r) etw_etl_reader_free(*r);
  if (*d) etw_decoder_free(*d);
  *r = NULL;
  *d = NULL;
  return -1;
}

/* XPRESS reference decoder, one item and one byte at a time (MS-XCA §2.4 as read): what the
 * fast decoder (etw_xpress_decompress) is compared with. */
static inline long tu_xpress_ref(const unsigned char *in, size_t n_in, unsigned char *out, size_t n_out) {
  size_t ip = 0, op = 0, half = (size_t)-1;
  uint32_t flags = 0;
  int nflags = 0;
  while (op < n_out) {
    if (nflags == 0) {
      if (n_in - ip < 4) break;
      flags = (uint32_t)in[ip] | (uint32_t)in[ip + 1] << 8 | (uint32_t)in[ip + 2] << 16 |
              (uint32_t)in[ip + 3] << 24;
      ip += 4;
      nflags = 32;
    }
    nflags--;
    if (!(flags >> nflags & 1)) {
      if (ip >= n_in) break;
      out[op++] = in[ip++];
      continue;
    }
    if (n_in - ip < 2) break;
    size_t tok = (size_t)in[ip] | (size_t)in[ip + 1] << 8;
    ip += 2;
    size_t off = (tok >> 3) + 1, len = tok & 7;
    if (len == 7) {
      size_t nib;
      if (half == (size_t)-1) {
        if (ip >= n_in) return -1;
        half = ip++;
        nib = in[half] & 15;
      } else {
        nib = in[half] >> 4;
        half = (size_t)-1;
      }
      len = 7 + nib;
      if (nib == 15) {
        if (ip >= n_in) return -1;
        size_t b = in[ip++];
        len = 22 + b;
        if (b == 255) {
          if (n_in - ip < 2) return -1;
          len = (size_t)in[ip] | (size_t)in[ip + 1] << 8;
          ip += 2;
          if (len == 0) {
            if (n_in - ip < 4) return -1;
            len = (size_t)in[ip] | (size_t)in[ip + 1] << 8 | (size_t)in[ip + 2] << 16 |
                  (size_t)in[ip + 3] << 24;
            ip += 4;
          }
          if (len < 22) return -1;
        }
      }
    }
    len += 3;
    if (off > op) return -1;
    for (size_t i = 0; i < len && op < n_out; i++, op++) out[op] = out[op - off];
  }
  return (long)op;
}

/* Appends one XPRESS match item (distance @off ≥ 1, length @m + 3) at in[*k]: the token, then the
 * nibble (shared by two items: *half is the byte holding the first one, or (size_t)-1), the
 * length byte, and the 16- or 32-bit length — the forms of MS-XCA §2.4, for random test streams. */
static inline void tu_xpress_put_match(unsigned char *in, size_t *k, size_t *half, size_t off, size_t m) {
  size_t tok = (off - 1) << 3 | (m < 7 ? m : 7);
  in[(*k)++] = (unsigned char)tok;
  in[(*k)++] = (unsigned char)(tok >> 8);
  if (m < 7) return;
  size_t nib = m - 7 < 15 ? m - 7 : 15;
  if (*half == (size_t)-1) {
    *half = *k;
    in[(*k)++] = (unsigned char)nib;
  } else {
    in[*half] |= (unsigned char)(nib << 4);
    *half = (size_t)-1;
  }
  if (nib != 15) return;
  if (m - 22 < 255) {
    in[(*k)++] = (unsigned char)(m - 22);
    return;
  }
  in[(*k)++] = 255;
  if (m < 65536) {
    in[(*k)++] = (unsigned char)m;
    in[(*k)++] = (unsigned char)(m >> 8);
  } else {
    in[(*k)++] = 0;
    in[(*k)++] = 0;
    for (int i = 0; i < 4; i++) in[(*k)++] = (unsigned char)(m >> (8 * i));
  }
}

/* Little-endian stores for synthetic trace images. */
static inline void tu_w16(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static inline void tu_w32(unsigned char *p, uint32_t v) {
  tu_w16(p, v & 0xFFFF);
  tu_w16(p + 2, v >> 16);
}
static inline void tu_w64(unsigned char *p, uint64_t v) {
  tu_w32(p, (uint32_t)v);
  tu_w32(p + 4, (uint32_t)(v >> 32));
}

#define TU_MIX(h, v) ((h) = ((h) ^ (uint64_t)(v)) * 1099511628211ull)

/* A digest (FNV-1a style) of every field of record @r: ext items and user data by content. */
static inline uint64_t tu_rec_digest(const struct etw_rec *r) {
  uint64_t h = 1469598103934665603ull;
  TU_MIX(h, r->kind);
  TU_MIX(h, r->ptr_size);
  TU_MIX(h, r->flags);
  TU_MIX(h, r->event_property);
  TU_MIX(h, r->hook_id);
  TU_MIX(h, r->tid);
  TU_MIX(h, r->pid);
  TU_MIX(h, r->timestamp);
  TU_MIX(h, r->filetime);
  for (int i = 0; i < 16; i++) TU_MIX(h, r->provider_id[i]);
  TU_MIX(h, r->desc.id);
  TU_MIX(h, r->desc.version);
  TU_MIX(h, r->desc.channel);
  TU_MIX(h, r->desc.level);
  TU_MIX(h, r->desc.opcode);
  TU_MIX(h, r->desc.task);
  TU_MIX(h, r->desc.keyword);
  TU_MIX(h, r->kernel_time);
  TU_MIX(h, r->user_time);
  for (int i = 0; i < 16; i++) TU_MIX(h, r->activity_id[i]);
  TU_MIX(h, r->cpu);
  TU_MIX(h, r->n_ext);
  for (unsigned i = 0; i < r->n_ext && i < ETW_REC_MAX_EXT; i++) {
    TU_MIX(h, r->ext[i].type);
    TU_MIX(h, r->ext[i].len);
    for (unsigned j = 0; j < r->ext[i].len; j++) TU_MIX(h, r->ext[i].data[j]);
  }
  TU_MIX(h, r->user_len);
  for (uint32_t j = 0; j < r->user_len; j++) TU_MIX(h, r->user_data[j]);
  TU_MIX(h, r->wpp_msg_number);
  TU_MIX(h, r->wpp_flags);
  TU_MIX(h, r->wpp_sequence);
  TU_MIX(h, r->file != NULL);
  TU_MIX(h, r->file_index);
  TU_MIX(h, r->file_offset);
  return h;
}

#endif
