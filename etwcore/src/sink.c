/* sink.c — the "sinks" member of a session spec (see sink.h): parsing, validation, JSON; and the
 * refusal in builds without libnats. The running sinks are etwcore/sinks/sink_nats.c. */
#include "etwcore/sink.h"
#include "etwcore/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* set once at start-up (etw_sinks_configure), read-only afterwards */
static char g_secrets[4096];
static uint64_t g_total[2] = {UINT64_MAX, UINT64_MAX};

void etw_sinks_configure(const char *secrets_dir, uint64_t total_memory_mb, uint64_t total_disk_mb) {
  snprintf(g_secrets, sizeof g_secrets, "%s", secrets_dir ? secrets_dir : "");
  g_total[0] = total_memory_mb << 20;
  g_total[1] = total_disk_mb << 20;
}

uint64_t etw_sinks_total_bytes(int disk) {
  return g_total[disk ? 1 : 0];
}

#ifdef ETWD_HAVE_NATS
/* @key of @o, if present: a regular file inside the secrets directory once every symlink and
 * ".." is resolved (a relative name is taken relative to it); *out = the resolved path */
enum etw_err etw_sink_secret_file(const cJSON *o, const char *key, char **out, const char *ptr,
                                  struct etw_status *st) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = NULL;
  if (!v) return ETW_E_OK;
  char f[64];
  snprintf(f, sizeof f, "%s/%s", ptr, key);
  if (!g_secrets[0])
    return etw_fail(st, ETW_E_INVALID, f, "%s/%s: this server takes no sink credential files (no --sink-secrets-dir)", ptr, key);
  char joined[8200];
  snprintf(joined, sizeof joined, "%s%s%s", v->valuestring[0] == '/' ? "" : g_secrets,
           v->valuestring[0] == '/' ? "" : "/", v->valuestring);
  char *root = realpath(g_secrets, NULL), *real = realpath(joined, NULL);
  size_t rl = root ? strlen(root) : 0;
  struct stat sb;
  int ok = root && real && !strncmp(real, root, rl) && real[rl] == '/' && !stat(real, &sb) &&
           S_ISREG(sb.st_mode);
  free(root);
  if (!ok) {
    free(real);
    return etw_fail(st, ETW_E_INVALID, f, "%s/%s must name an existing file inside the sink secrets directory (--sink-secrets-dir; symlinks and .. leading out of it are refused)", ptr, key);
  }
  *out = real;
  return ETW_E_OK;
}

int etw_secret_hide(const char *text, const char *path, char *out, size_t n) {
  const char *base = path ? strrchr(path, '/') : NULL, *hit;
  size_t pl = path ? strlen(path) : 0, at = 0;
  int found = 0;
  base = base ? base + 1 : path;
  if (!n) return 0;
  out[0] = 0;
  while (text && *text && at < n - 1) {
    hit = pl ? strstr(text, path) : NULL;
    size_t keep = hit ? (size_t)(hit - text) : strlen(text);
    at += (size_t)snprintf(out + at, n - at, "%.*s%s", (int)keep, text, hit ? base : "");
    if (at >= n) at = n - 1;
    if (!hit) break;
    found = 1;
    text = hit + pl;
  }
  return found;
}

static int str_ok(const char *s, size_t max, const char *bad) {
  size_t n = strlen(s);
  if (!n || n > max) return 0;
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f || strchr(bad, *s)) return 0;
  return 1;
}

/* a subject template: dot-separated non-empty tokens of printable ASCII without wildcards, and
 * only the known placeholders */
static int subject_ok(const char *s) {
  if (!str_ok(s, 200, "*>") || s[0] == '.' || s[strlen(s) - 1] == '.' || strstr(s, "..")) return 0;
  for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{'))
    if (strncmp(p, "{host}", 6) && strncmp(p, "{session}", 9) && strncmp(p, "{provider}", 10) &&
        strncmp(p, "{event}", 7))
      return 0;
  return 1;
}

static char *dup_opt(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static enum etw_err get_num(const cJSON *o, const char *k, double lo, double hi, uint64_t def,
                            uint64_t *out, const char *ptr, struct etw_status *st) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  *out = def;
  if (!v) return ETW_E_OK;
  if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi ||
      v->valuedouble != (double)(uint64_t)v->valuedouble)
    return etw_fail(st, ETW_E_INVALID, NULL, "%s/%s must be an integer from %.0f to %.0f", ptr, k, lo, hi);
  *out = (uint64_t)v->valuedouble;
  return ETW_E_OK;
}

static enum etw_err parse_one(const cJSON *o, struct etw_sink_spec *k, const char *ptr,
                              struct etw_status *st) {
  static const char *const keys[] = {"type", "url", "subject", "stream", "creds", "tls_ca",
                                     "tls_cert", "tls_key", "replicas", "batch", "ack_timeout_ms",
                                     "spool_memory_kb", "spool_disk_mb", NULL};
  if (!cJSON_IsObject(o)) return etw_fail(st, ETW_E_INVALID, ptr, "%s must be an object", ptr);
  for (const cJSON *c = o->child; c; c = c->next) {
    int ok = 0;
    for (int i = 0; keys[i] && !ok; i++) ok = !strcmp(c->string, keys[i]);
    if (!ok) return etw_fail(st, ETW_E_INVALID, ptr, "unknown member \"%s\" at %s", c->string, ptr);
    if (strcmp(c->string, "replicas") && strcmp(c->string, "batch") &&
        strcmp(c->string, "ack_timeout_ms") && strncmp(c->string, "spool_", 6) &&
        (!cJSON_IsString(c) || strlen(c->valuestring) > 1024))
      return etw_fail(st, ETW_E_INVALID, ptr, "%s/%s must be a string (at most 1024 bytes)", ptr, c->string);
  }
  k->type = dup_opt(o, "type");
  if (!k->type || strcmp(k->type, "nats"))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s/type must be \"nats\"", ptr);
  k->url = dup_opt(o, "url");
  if (!k->url || (strncmp(k->url, "nats://", 7) && strncmp(k->url, "tls://", 6)) ||
      !str_ok(k->url, 1024, "\"\\"))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s/url must be nats://HOST:PORT or tls://HOST:PORT (comma-separated for a cluster)", ptr);
  k->subject = dup_opt(o, "subject");
  if (!k->subject) k->subject = strdup("etwd.{host}.{session}.{provider}");
  if (!k->subject || !subject_ok(k->subject))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s/subject must be dot-separated tokens without wildcards; placeholders {host} {session} {provider} {event}", ptr);
  k->stream = dup_opt(o, "stream");
  if (!k->stream) k->stream = strdup("ETWD");
  if (!k->stream || !str_ok(k->stream, 64, ".*>/\\\"'"))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s/stream must be 1-64 characters without . * > / \\", ptr);
  uint64_t x;
  enum etw_err e;
  if ((e = etw_sink_secret_file(o, "creds", &k->creds, ptr, st)) ||
      (e = etw_sink_secret_file(o, "tls_ca", &k->tls_ca, ptr, st)) ||
      (e = etw_sink_secret_file(o, "tls_cert", &k->tls_cert, ptr, st)) ||
      (e = etw_sink_secret_file(o, "tls_key", &k->tls_key, ptr, st)))
    return e;
  if (!k->tls_cert != !k->tls_key)
    return etw_fail(st, ETW_E_INVALID, ptr, "%s: tls_cert and tls_key go together", ptr);
  if ((e = get_num(o, "replicas", 1, 5, 1, &x, ptr, st))) return e;
  k->replicas = (uint32_t)x;
  if ((e = get_num(o, "batch", 1, 65536, 1024, &x, ptr, st))) return e;
  k->batch = (uint32_t)x;
  if ((e = get_num(o, "ack_timeout_ms", 100, 60000, 2000, &x, ptr, st))) return e;
  k->ack_timeout_ms = (uint32_t)x;
  if ((e = get_num(o, "spool_memory_kb", 0, 4194304, 65536, &k->spool_memory_kb, ptr, st))) return e;
  if ((e = get_num(o, "spool_disk_mb", 0, 1048576, 1024, &k->spool_disk_mb, ptr, st))) return e;
  return ETW_E_OK;
}

#endif

enum etw_err etw_sinks_parse(const cJSON *v, struct etw_sink_spec **out, uint32_t *n,
                             struct etw_status *st) {
  *out = NULL;
  *n = 0;
#ifndef ETWD_HAVE_NATS
  (void)v;
  return etw_fail(st, ETW_E_INVALID, "/sinks",
                  "/sinks is not available: this build has no NATS client (libnats)");
#else
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > ETW_SINKS_MAX)
    return etw_fail(st, ETW_E_INVALID, "/sinks", "/sinks must be an array of at most %d sinks", ETW_SINKS_MAX);
  *out = calloc((size_t)cJSON_GetArraySize(v) + 1, sizeof **out);
  if (!*out) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  for (const cJSON *c = v->child; c; c = c->next) {
    char ptr[32];
    snprintf(ptr, sizeof ptr, "/sinks/%u", *n);
    enum etw_err e = parse_one(c, &(*out)[(*n)++], ptr, st);
    if (e) {
      if (st && !st->field[0]) snprintf(st->field, sizeof st->field, "%s", ptr);
      return e;
    }
  }
  return ETW_E_OK;
#endif
}

void etw_sinks_spec_free(struct etw_sink_spec *v, uint32_t n) {
  for (uint32_t i = 0; v && i < n; i++) {
    struct etw_sink_spec *k = &v[i];
    free(k->type);
    free(k->url);
    free(k->subject);
    free(k->stream);
    free(k->creds);
    free(k->tls_ca);
    free(k->tls_cert);
    free(k->tls_key);
  }
  free(v);
}

void etw_sinks_spec_json(const struct etw_sink_spec *v, uint32_t n, struct etw_jw *w) {
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; i < n; i++) {
    const struct etw_sink_spec *k = &v[i];
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"type\":");
    etw_jw_cs(w, k->type);
    char url[1100]; /* without its credentials: readers see the spec */
    etw_url_hide_userinfo(k->url, url, sizeof url);
    etw_jw_lit(w, ",\"url\":");
    etw_jw_cs(w, url);
    etw_jw_lit(w, ",\"subject\":");
    etw_jw_cs(w, k->subject);
    etw_jw_lit(w, ",\"stream\":");
    etw_jw_cs(w, k->stream);
    etw_jw_lit(w, ",\"replicas\":");
    etw_jw_u64(w, k->replicas);
    etw_jw_lit(w, ",\"batch\":");
    etw_jw_u64(w, k->batch);
    etw_jw_lit(w, ",\"ack_timeout_ms\":");
    etw_jw_u64(w, k->ack_timeout_ms);
    etw_jw_lit(w, ",\"spool_memory_kb\":");
    etw_jw_u64(w, k->spool_memory_kb);
    etw_jw_lit(w, ",\"spool_disk_mb\":");
    etw_jw_u64(w, k->spool_disk_mb);
    etw_jw_lit(w, ",\"tls\":");
    etw_jw_bool(w, k->tls_ca || k->tls_cert || (k->url && !strncmp(k->url, "tls://", 6)));
    etw_jw_lit(w, ",\"creds\":");
    etw_jw_bool(w, k->creds != NULL);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
}

#ifndef ETWD_HAVE_NATS
enum etw_err etw_sinks_start(const struct etw_sink_spec *v, uint32_t n, struct etw_hub *hub,
                             const struct etw_sink_ctx *ctx, struct etw_sinks **out,
                             struct etw_status *st) {
  (void)v, (void)hub, (void)ctx;
  *out = NULL;
  if (n) return etw_fail(st, ETW_E_INVALID, "/sinks", "/sinks is not available in this build");
  return ETW_E_OK;
}
uint64_t etw_sinks_stop(struct etw_sinks *s) {
  (void)s;
  return 0;
}
uint64_t etw_sinks_lost(struct etw_sinks *s) {
  (void)s;
  return 0;
}
void etw_sinks_json(struct etw_sinks *s, struct etw_jw *w) {
  (void)s;
  etw_jw_lit(w, "[]");
}
int etw_sinks_ok(struct etw_sinks *s, uint32_t i) {
  (void)s, (void)i;
  return -1;
}
#endif
