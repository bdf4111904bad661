/* nats_src.c — parsing the spec of a "nats" backend session (see nats_src.h). */
#include "etwcore/nats_src.h"
#include "etwcore/sink.h"
#include "etwcore/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a subject filter: dot-separated tokens of printable ASCII, `*` tokens, `>` only last */
static int filter_ok(const char *s) {
  size_t n = strlen(s);
  if (!n || n > 200 || s[0] == '.' || s[n - 1] == '.' || strstr(s, "..")) return 0;
  for (const char *p = s; *p; p++) {
    if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || *p == '"' || *p == '\\') return 0;
    if ((*p == '*' || *p == '>') && ((p > s && p[-1] != '.') || (p[1] && p[1] != '.'))) return 0;
    if (*p == '>' && p[1]) return 0;
  }
  return 1;
}

static int is_secret(const char *k) {
#ifdef ETWD_HAVE_NATS
  return !strcmp(k, "creds") || !strcmp(k, "tls_ca") || !strcmp(k, "tls_cert") || !strcmp(k, "tls_key");
#else
  (void)k;
  return 0;
#endif
}

/* the credential files of a secured broker, as a sink's (sink.h: inside the secrets directory) */
static enum etw_err secrets(const cJSON *nats, struct etw_nats_src *n, struct etw_status *st) {
#ifdef ETWD_HAVE_NATS
  enum etw_err e;
  if ((e = etw_sink_secret_file(nats, "creds", &n->creds, "/nats", st)) ||
      (e = etw_sink_secret_file(nats, "tls_ca", &n->tls_ca, "/nats", st)) ||
      (e = etw_sink_secret_file(nats, "tls_cert", &n->tls_cert, "/nats", st)) ||
      (e = etw_sink_secret_file(nats, "tls_key", &n->tls_key, "/nats", st)))
    return e;
  if (!n->tls_cert != !n->tls_key)
    return etw_fail(st, ETW_E_INVALID, "/nats", "/nats: tls_cert and tls_key go together");
#else
  (void)nats, (void)n, (void)st;
#endif
  return ETW_E_OK;
}

enum etw_err etw_nats_src_parse(const cJSON *body, struct etw_session_spec *s, struct etw_status *st) {
  const cJSON *subj = cJSON_GetObjectItemCaseSensitive(body, "subjects");
  const cJSON *nats = cJSON_GetObjectItemCaseSensitive(body, "nats");
  if (strcmp(s->backend, "nats")) {
    if (subj || nats)
      return etw_fail(st, ETW_E_INVALID, subj ? "/subjects" : "/nats",
                      "%s is only valid for the \"nats\" backend", subj ? "/subjects" : "/nats");
    return ETW_E_OK;
  }
  if (!cJSON_IsArray(subj) || cJSON_GetArraySize(subj) < 1 || cJSON_GetArraySize(subj) > ETW_NATS_SUBJECTS_MAX)
    return etw_fail(st, ETW_E_INVALID, "/subjects", "/subjects must list 1-%d subject filters (e.g. \"etwd.>\")",
                    ETW_NATS_SUBJECTS_MAX);
  if (!cJSON_IsObject(nats))
    return etw_fail(st, ETW_E_INVALID, "/nats", "/nats must be {\"url\":\"nats://HOST:PORT\",\"stream\":NAME}");
  for (const cJSON *c = nats->child; c; c = c->next) {
    int secret = is_secret(c->string);
    if (strcmp(c->string, "url") && strcmp(c->string, "stream") && strcmp(c->string, "start_seq") &&
        strcmp(c->string, "start_time") && !secret)
      return etw_fail(st, ETW_E_INVALID, "/nats", "unknown member \"%s\" at /nats", c->string);
    if (secret && (!cJSON_IsString(c) || strlen(c->valuestring) > 1024))
      return etw_fail(st, ETW_E_INVALID, "/nats", "/nats/%s must be a string (at most 1024 bytes)", c->string);
  }
  const cJSON *url = cJSON_GetObjectItemCaseSensitive(nats, "url");
  const cJSON *stream = cJSON_GetObjectItemCaseSensitive(nats, "stream");
  if (!cJSON_IsString(url) || (strncmp(url->valuestring, "nats://", 7) && strncmp(url->valuestring, "tls://", 6)) ||
      strlen(url->valuestring) > 1024 || strpbrk(url->valuestring, " \"\\"))
    return etw_fail(st, ETW_E_INVALID, "/nats/url", "/nats/url must be nats://HOST:PORT or tls://HOST:PORT (comma-separated for a cluster)");
  if (stream && (!cJSON_IsString(stream) || !stream->valuestring[0] || strlen(stream->valuestring) > 64 ||
                 strpbrk(stream->valuestring, " .*>/\\\"")))
    return etw_fail(st, ETW_E_INVALID, "/nats/stream", "/nats/stream must be 1-64 characters without . * > / \\");
  const cJSON *sseq = cJSON_GetObjectItemCaseSensitive(nats, "start_seq");
  const cJSON *stime = cJSON_GetObjectItemCaseSensitive(nats, "start_time");
  if (sseq && stime)
    return etw_fail(st, ETW_E_INVALID, "/nats/start_time", "give /nats/start_seq or /nats/start_time, not both");
  if (sseq && (!cJSON_IsNumber(sseq) || sseq->valuedouble < 1 || sseq->valuedouble > 9007199254740991.0 ||
               sseq->valuedouble != (double)(uint64_t)sseq->valuedouble))
    return etw_fail(st, ETW_E_INVALID, "/nats/start_seq", "/nats/start_seq must be a stream sequence number (>= 1)");
  int64_t t_ns = 0;
  if (stime && (!cJSON_IsString(stime) || etw_rfc3339_ns(stime->valuestring, &t_ns)))
    return etw_fail(st, ETW_E_INVALID, "/nats/start_time", "/nats/start_time must be UTC like 2026-11-29T05:00:00Z");
  struct etw_nats_src *n = calloc(1, sizeof *n);
  if (!n) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  s->nats = n;
  n->url = strdup(url->valuestring);
  n->stream = strdup(stream ? stream->valuestring : "ETWD");
  n->start_seq = sseq ? (uint64_t)sseq->valuedouble : 0;
  n->start_time_ns = t_ns;
  enum etw_err e = secrets(nats, n, st);
  if (e) return e;
  for (const cJSON *c = subj->child; c; c = c->next) {
    char ptr[32];
    snprintf(ptr, sizeof ptr, "/subjects/%u", n->n_subjects);
    if (!cJSON_IsString(c) || !filter_ok(c->valuestring))
      return etw_fail(st, ETW_E_INVALID, ptr, "%s must be a subject filter like etwd.> or etwd.*.*.sched", ptr);
    n->subjects[n->n_subjects++] = strdup(c->valuestring);
  }
  return ETW_E_OK;
}

void etw_nats_src_free(struct etw_nats_src *n) {
  if (!n) return;
  free(n->url);
  free(n->stream);
  free(n->creds);
  free(n->tls_ca);
  free(n->tls_cert);
  free(n->tls_key);
  for (uint32_t i = 0; i < n->n_subjects; i++) free(n->subjects[i]);
  free(n);
}

void etw_nats_src_json(const struct etw_nats_src *n, struct etw_jw *w) {
  if (!n) return;
  etw_jw_lit(w, ",\"subjects\":[");
  for (uint32_t i = 0; i < n->n_subjects; i++) {
    if (i) etw_jw_ch(w, ',');
    etw_jw_cs(w, n->subjects[i]);
  }
  char url[1100]; /* without its credentials: readers see the spec */
  etw_url_hide_userinfo(n->url, url, sizeof url);
  etw_jw_lit(w, "],\"nats\":{\"url\":");
  etw_jw_cs(w, url);
  etw_jw_lit(w, ",\"stream\":");
  etw_jw_cs(w, n->stream);
  if (n->start_seq) {
    etw_jw_lit(w, ",\"start_seq\":");
    etw_jw_u64(w, n->start_seq);
  }
  if (n->start_time_ns) {
    etw_jw_lit(w, ",\"start_time\":");
    etw_jw_unix_ns(w, n->start_time_ns);
  }
  etw_jw_lit(w, ",\"tls\":"); /* whether, not which files (as for sinks) */
  etw_jw_bool(w, n->tls_ca || n->tls_cert || (n->url && !strncmp(n->url, "tls://", 6)));
  etw_jw_lit(w, ",\"creds\":");
  etw_jw_bool(w, n->creds != NULL);
  etw_jw_lit(w, "}");
}
