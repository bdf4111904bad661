/* spec.c — session spec JSON → struct etw_session_spec, with precise errors (JSON pointers).
 * Unknown members are rejected so that a typo never silently records the wrong thing. */
#include "etwcore/spec.h"
#include "etwcore/nats_src.h"
#include "etwcore/sink.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etwcore/trigger.h"

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

static char *dupn(const char *s, size_t n) { /* strndup is not on every platform we build for */
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* a known member that @name is a prefix of, or that is a prefix of @name ("duration" for
 * "duration_s", "pid" for "pids"), case-insensitively: the likely meant one, or NULL */
static const char *meant(const char *name, const char *const *keys) {
  size_t n = strlen(name);
  for (int i = 0; n >= 3 && keys[i]; i++) {
    size_t j = 0;
    while (name[j] && keys[i][j] && tolower((unsigned char)name[j]) == tolower((unsigned char)keys[i][j])) j++;
    if (!name[j] || !keys[i][j]) return keys[i];
  }
  return NULL;
}

static int known(const cJSON *o, const char *const *keys, const char *ptr, struct etw_status *st) {
  for (const cJSON *c = o->child; c; c = c->next) {
    int ok = 0;
    for (int i = 0; keys[i] && !ok; i++) ok = c->string && !strcmp(c->string, keys[i]);
    if (!ok) {
      const char *m = c->string ? meant(c->string, keys) : NULL;
      etw_fail(st, ETW_E_INVALID, ptr, "unknown member \"%s\" at %s%s%s%s", c->string ? c->string : "",
               *ptr ? ptr : "/", m ? " (did you mean \"" : "", m ? m : "", m ? "\"?)" : "");
      return -1;
    }
  }
  return 0;
}

/* parses a JSON number or a "0x…"/decimal string into u64 */
static int get_u64(const cJSON *v, uint64_t *out) {
  if (cJSON_IsNumber(v)) {
    double d = v->valuedouble;
    if (d < 0 || d > 9007199254740991.0 || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
  }
  if (cJSON_IsString(v) && v->valuestring[0]) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->valuestring, &end, 0);
    if (errno || *end || v->valuestring[0] == '-') return -1;
    *out = x;
    return 0;
  }
  return -1;
}

static int get_int(const cJSON *v, long long lo, long long hi, long long *out) {
  if (!cJSON_IsNumber(v)) return -1;
  double d = v->valuedouble;
  if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long long)d) return -1; /* range first: the cast is UB outside it */
  *out = (long long)d;
  return 0;
}

static enum etw_err str_array(const cJSON *a, char ***out, uint32_t *n, uint32_t max, size_t maxlen,
                              const char *ptr, struct etw_status *st) {
  if (!cJSON_IsArray(a)) return etw_fail(st, ETW_E_INVALID, ptr, "%s must be an array of strings", ptr);
  int cnt = cJSON_GetArraySize(a);
  if (cnt < 0 || (uint32_t)cnt > max)
    return etw_fail(st, ETW_E_INVALID, ptr, "%s has more than %u entries", ptr, max);
  *out = calloc((size_t)cnt + 1, sizeof **out);
  if (!*out) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  int i = 0;
  for (const cJSON *c = a->child; c; c = c->next, i++) {
    if (!cJSON_IsString(c) || !c->valuestring[0] || strlen(c->valuestring) > maxlen)
      return etw_fail(st, ETW_E_INVALID, ptr, "%s/%d must be a non-empty string of at most %zu bytes",
                      ptr, i, maxlen);
    (*out)[i] = strdup(c->valuestring);
    (*n)++;
  }
  return ETW_E_OK;
}

static enum etw_err u32_array(const cJSON *a, uint32_t **out, uint32_t *n, uint32_t max,
                              long long lo, long long hi, const char *ptr, struct etw_status *st) {
  if (!cJSON_IsArray(a)) return etw_fail(st, ETW_E_INVALID, ptr, "%s must be an array of integers", ptr);
  int cnt = cJSON_GetArraySize(a);
  if (cnt < 0 || (uint32_t)cnt > max)
    return etw_fail(st, ETW_E_INVALID, ptr, "%s has more than %u entries", ptr, max);
  *out = calloc((size_t)cnt + 1, sizeof **out);
  if (!*out) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  int i = 0;
  for (const cJSON *c = a->child; c; c = c->next, i++) {
    long long v;
    if (get_int(c, lo, hi, &v))
      return etw_fail(st, ETW_E_INVALID, ptr, "%s/%d must be an integer in [%lld, %lld]", ptr, i, lo, hi);
    (*out)[i] = (uint32_t)v;
    (*n)++;
  }
  return ETW_E_OK;
}

/* ---- provider strings (README "Provider strings"): both forms fill the same struct as the
 * JSON object, which stays the canonical form (GET shows it). */

/* one number of a goetw string: decimal, or hex with 0x; -1 if not a number or above @max */
static int str_num(const char *s, size_t n, uint64_t max, uint64_t *out) {
  char buf[32];
  if (!n || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  int hex = buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
  const char *d = buf + (hex ? 2 : 0);
  if (!*d) return -1;
  for (const char *c = d; *c; c++)
    if (hex ? !isxdigit((unsigned char)*c) : !isdigit((unsigned char)*c)) return -1;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(d, &end, hex ? 16 : 10);
  if (errno || *end || x > max) return -1;
  *out = x;
  return 0;
}

static int is_guid_text(const char *s, size_t n) { /* {xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx} */
  if (n != 38 || s[0] != '{' || s[37] != '}') return 0;
  for (size_t i = 1; i < 37; i++)
    if ((i == 9 || i == 14 || i == 19 || i == 24) ? s[i] != '-' : !isxdigit((unsigned char)s[i])) return 0;
  return 1;
}

/* tracefs form: "system", "system:*" or "system:event[,event…]" */
static enum etw_err tracefs_string(const char *str, struct etw_provider_spec *p, const char *ptr,
                                   struct etw_status *st) {
  size_t nl = strcspn(str, ":");
  if (!nl || nl > 255)
    return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\" needs a tracepoint system name of 1-255 bytes before ':'", ptr, str);
  const char *ev = str[nl] ? str + nl + 1 : NULL;
  if (ev && strchr(ev, ':'))
    return etw_fail(st, ETW_E_INVALID, ptr,
                    "%s: \"%.100s\" has more than one ':' — a linux provider string is system, system:* or "
                    "system:event[,event…] (the Name:Level:EventIDs:… form is for the etw and etl backends)",
                    ptr, str);
  p->name = dupn(str, nl);
  if (!p->name) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  if (!ev || !strcmp(ev, "*")) return ETW_E_OK; /* all the system's events */
  uint32_t cnt = 1;
  for (const char *c = ev; *c; c++) cnt += *c == ',';
  if (cnt > ETW_SPEC_MAX_EVENTS)
    return etw_fail(st, ETW_E_INVALID, ptr, "%s: more than %d events", ptr, ETW_SPEC_MAX_EVENTS);
  p->events = calloc(cnt + 1, sizeof *p->events);
  if (!p->events) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  for (const char *c = ev;; c++) {
    size_t k = strcspn(c, ",");
    if (!k || k > 255 || (k == 1 && *c == '*'))
      return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\": event %u must be a name of 1-255 bytes (or the whole list \"*\")",
                      ptr, str, p->n_events);
    if (!(p->events[p->n_events] = dupn(c, k))) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    p->n_events++;
    c += k;
    if (!*c) break;
  }
  return ETW_E_OK;
}

/* goetw form: "Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]]"; Name may be a {GUID};
 * EventIDs separated by ',' or ';'; numbers decimal or 0x hex; an empty field keeps its default */
static enum etw_err goetw_string(const char *str, struct etw_provider_spec *p, const char *ptr,
                                 struct etw_status *st) {
  static const char *const what[] = {"Name", "Level", "EventIDs", "AnyKeywords", "AllKeywords"};
  const char *fld[5] = {0};
  size_t len[5] = {0};
  int nf = 0;
  for (const char *c = str;; c++) {
    if (nf == 5)
      return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\" has more than 5 ':'-separated fields "
                      "(Name:Level:EventIDs:AnyKeywords:AllKeywords)", ptr, str);
    fld[nf] = c;
    len[nf] = strcspn(c, ":");
    c += len[nf++];
    if (!*c) break;
  }
  if (!len[0] || len[0] > 255 || (fld[0][0] == '{' && !is_guid_text(fld[0], len[0])))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\": Name must be a provider name (1-255 bytes) or a "
                    "{GUID} like {9e814aad-3204-11d2-9a82-006008a86939}", ptr, str);
  if (!(p->name = dupn(fld[0], len[0]))) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  uint64_t x;
  if (nf > 1 && len[1]) {
    if (str_num(fld[1], len[1], 255, &x))
      return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\": %s must be 0-255 (decimal or 0x hex)%s", ptr, str,
                      what[1], nf == 2 ? "; system:event is the linux backend's form, this backend takes "
                                         "Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]]" : "");
    p->level = (int)x;
  }
  if (nf > 2 && len[2]) {
    p->event_ids = calloc(ETW_SPEC_MAX_EVENTS, sizeof *p->event_ids);
    if (!p->event_ids) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    for (const char *c = fld[2], *e = fld[2] + len[2];; c++) { /* an empty ID (",," or a trailing ',') fails */
      size_t k = strcspn(c, ",;:");
      if (p->n_event_ids >= ETW_SPEC_MAX_EVENTS || str_num(c, k, 65535, &x))
        return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\": %s must be 1-%d event IDs 0-65535 "
                        "separated by ',' or ';'", ptr, str, what[2], ETW_SPEC_MAX_EVENTS);
      p->event_ids[p->n_event_ids++] = (uint32_t)x;
      c += k;
      if (c >= e) break;
    }
  }
  for (int i = 3; i < nf; i++) {
    if (!len[i]) continue;
    if (str_num(fld[i], len[i], UINT64_MAX, &x))
      return etw_fail(st, ETW_E_INVALID, ptr, "%s: \"%.100s\": %s must be a 64-bit mask (0x hex or decimal)", ptr, str, what[i]);
    *(i == 3 ? &p->keywords_any : &p->keywords_all) = x;
  }
  return ETW_E_OK;
}

/* "stacks": [events]: stacks on these events only (kernel stacks trimmed, as with true). Event
 * names (strings: linux, as in "events") or event IDs (integers: win, as in "event_ids"), not
 * mixed, none twice; each one the provider enables as far as its spec says — in its "events"
 * when it lists them, in its "event_ids" when they include, not among them when they exclude
 * (the backend checks the rest: linux, that the system has it). Errors name @f/K. */
static enum etw_err stack_list(const cJSON *v, struct etw_provider_spec *p, const char *f,
                               struct etw_status *st) {
  int cnt = cJSON_GetArraySize(v);
  if (cnt < 1 || cnt > ETW_SPEC_MAX_EVENTS)
    return etw_fail(st, ETW_E_INVALID, f, "%s: a list of 1-%d events (or true, false, \"raw\")", f,
                    ETW_SPEC_MAX_EVENTS);
  int names = cJSON_IsString(v->child), i = 0;
  char k[160];
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    long long x;
    if (names ? cJSON_IsString(c) && c->valuestring[0] && strlen(c->valuestring) <= 255 : !get_int(c, 0, 65535, &x))
      continue;
    snprintf(k, sizeof k, "%s/%d", f, i);
    return etw_fail(st, ETW_E_INVALID, k, "%s: every entry an event name of 1-255 bytes (linux) or every "
                    "entry an event ID 0-65535 (win)", k);
  }
  enum etw_err e = names ? str_array(v, &p->stack_events, &p->n_stack_events, ETW_SPEC_MAX_EVENTS, 255, f, st)
                         : u32_array(v, &p->stack_ids, &p->n_stack_ids, ETW_SPEC_MAX_EVENTS, 0, 65535, f, st);
  if (e) return e;
  for (uint32_t u = 0; u < (uint32_t)cnt; u++) {
    const char *nm = names ? p->stack_events[u] : NULL;
    uint32_t id = names ? 0 : p->stack_ids[u];
    snprintf(k, sizeof k, "%s/%u", f, u);
    for (uint32_t j = 0; j < u; j++)
      if (names ? !strcmp(p->stack_events[j], nm) : p->stack_ids[j] == id)
        return etw_fail(st, ETW_E_INVALID, k, "%s: the event is listed twice", k);
    int in = 1;
    if (names && p->n_events) {
      in = 0;
      for (uint32_t j = 0; j < p->n_events && !in; j++) in = !strcmp(p->events[j], nm);
    } else if (!names && p->n_event_ids) {
      int listed = 0;
      for (uint32_t j = 0; j < p->n_event_ids && !listed; j++) listed = p->event_ids[j] == id;
      in = listed != p->event_ids_exclude;
    }
    if (!in && names)
      return etw_fail(st, ETW_E_INVALID, k, "%s: \"%s\" is not one of the provider's events (its "
                      "\"events\" list)", k, nm);
    if (!in)
      return etw_fail(st, ETW_E_INVALID, k, "%s: event ID %u is not one of the provider's events (its "
                      "\"event_ids\"%s)", k, id, p->event_ids_exclude ? ", which exclude it" : "");
  }
  p->stacks = 1;
  return ETW_E_OK;
}

enum etw_err etw_provider_parse(const cJSON *o, const char *backend, struct etw_provider_spec *p,
                                const char *ptr, struct etw_status *st) {
  static const char *const keys[] = {"name", "events", "filter", "level", "keywords_any",
                                     "keywords_all", "event_ids", "event_ids_exclude", "stacks", NULL};
  char f[128];
  memset(p, 0, sizeof *p);
  p->level = 5;
  if (cJSON_IsString(o)) {
    if (!o->valuestring[0] || strlen(o->valuestring) > 4096)
      return etw_fail(st, ETW_E_INVALID, ptr, "%s: a provider string must be 1-4096 bytes", ptr);
    return backend && !strcmp(backend, "linux") ? tracefs_string(o->valuestring, p, ptr, st)
                                                : goetw_string(o->valuestring, p, ptr, st);
  }
  if (!cJSON_IsObject(o))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s must be a provider object or a provider string", ptr);
  if (known(o, keys, ptr, st)) return st ? st->code : ETW_E_INVALID;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "name");
  snprintf(f, sizeof f, "%s/name", ptr);
  if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > 255)
    return etw_fail(st, ETW_E_INVALID, f, "%s is required: a provider name (1-255 bytes)", f);
  p->name = dupstr(v->valuestring);
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "events"))) {
    snprintf(f, sizeof f, "%s/events", ptr);
    enum etw_err e = str_array(v, &p->events, &p->n_events, ETW_SPEC_MAX_EVENTS, 255, f, st);
    if (e) return e;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "filter")) && !cJSON_IsNull(v)) {
    snprintf(f, sizeof f, "%s/filter", ptr);
    if (!cJSON_IsString(v) || strlen(v->valuestring) > 4096)
      return etw_fail(st, ETW_E_INVALID, f, "%s must be a string of at most 4096 bytes", f);
    if (v->valuestring[0]) p->filter = dupstr(v->valuestring);
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "level"))) {
    long long l;
    snprintf(f, sizeof f, "%s/level", ptr);
    if (get_int(v, 0, 255, &l)) return etw_fail(st, ETW_E_INVALID, f, "%s must be an integer 0-255", f);
    p->level = (int)l;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "keywords_any"))) {
    snprintf(f, sizeof f, "%s/keywords_any", ptr);
    if (get_u64(v, &p->keywords_any))
      return etw_fail(st, ETW_E_INVALID, f, "%s must be a 64-bit mask (\"0x…\" string or integer)", f);
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "keywords_all"))) {
    snprintf(f, sizeof f, "%s/keywords_all", ptr);
    if (get_u64(v, &p->keywords_all))
      return etw_fail(st, ETW_E_INVALID, f, "%s must be a 64-bit mask (\"0x…\" string or integer)", f);
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "event_ids"))) {
    snprintf(f, sizeof f, "%s/event_ids", ptr);
    enum etw_err e = u32_array(v, &p->event_ids, &p->n_event_ids, ETW_SPEC_MAX_EVENTS, 0, 65535, f, st);
    if (e) return e;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "event_ids_exclude"))) {
    if (!cJSON_IsBool(v)) return etw_fail(st, ETW_E_INVALID, ptr, "%s/event_ids_exclude must be a boolean", ptr);
    p->event_ids_exclude = cJSON_IsTrue(v);
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "stacks"))) {
    snprintf(f, sizeof f, "%s/stacks", ptr);
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "raw"))
      p->stacks = ETW_STACKS_RAW;
    else if (cJSON_IsBool(v))
      p->stacks = cJSON_IsTrue(v);
    else if (cJSON_IsArray(v))
      return stack_list(v, p, f, st);
    else
      return etw_fail(st, ETW_E_INVALID, f, "%s must be true, false, \"raw\" or a list of events", f);
  }
  return ETW_E_OK;
}

/* "win": {"min_buffers","max_buffers","flush_s","clock","file":"sequential"|"circular","max_file_mb"}
 * — ranges the OS checks against the machine are validated by the win backend (/win/… fields) */
static enum etw_err parse_win(const cJSON *o, struct etw_session_spec *s, struct etw_status *st) {
  static const char *const keys[] = {"min_buffers", "max_buffers", "flush_s", "clock", "file",
                                     "max_file_mb", NULL};
  if (!cJSON_IsObject(o)) return etw_fail(st, ETW_E_INVALID, "/win", "/win must be an object");
  if (strcmp(s->backend, "win"))
    return etw_fail(st, ETW_E_INVALID, "/win", "/win settings are for the \"win\" backend only");
  if (known(o, keys, "/win", st)) return st ? st->code : ETW_E_INVALID;
  s->win.set = 1;
  static const struct {
    const char *name;
    long long max;
  } nums[] = {{"min_buffers", 100000}, {"max_buffers", 100000}, {"flush_s", 3600}, {"clock", 3},
              {"max_file_mb", 1 << 30}};
  uint32_t *dst[] = {&s->win.min_buffers, &s->win.max_buffers, &s->win.flush_s, &s->win.clock,
                     &s->win.max_file_mb};
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, nums[i].name);
    long long x;
    if (!v) continue;
    if (get_int(v, nums[i].name[0] == 'c' ? 1 : 0, nums[i].max, &x)) {
      char f[32];
      snprintf(f, sizeof f, "/win/%s", nums[i].name);
      return etw_fail(st, ETW_E_INVALID, f, "%s must be an integer 0-%lld", f, nums[i].max);
    }
    *dst[i] = (uint32_t)x;
  }
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "file");
  if (v) {
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "sequential"))
      s->win.circular = 0;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "circular"))
      s->win.circular = 1;
    else
      return etw_fail(st, ETW_E_INVALID, "/win/file",
                      "/win/file must be \"sequential\" or \"circular\" (a new file per size would "
                      "make several files; the download endpoint serves one)");
  }
  return ETW_E_OK;
}

/* the stop limits: "duration_s" (seconds, fractions allowed), "max_events", "max_file_mb";
 * whether the backend and mode can honour them is checked by session.c */
static enum etw_err parse_limits(const cJSON *body, struct etw_session_spec *s, struct etw_status *st) {
  const cJSON *v;
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "duration_s"))) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.1 && v->valuedouble <= 604800))
      return etw_fail(st, ETW_E_INVALID, "/duration_s", "/duration_s must be a number of seconds, 0.1 to 604800");
    s->duration_s = v->valuedouble;
  }
  long long x;
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "max_events"))) {
    if (get_int(v, 1, 9007199254740991LL, &x))
      return etw_fail(st, ETW_E_INVALID, "/max_events", "/max_events must be a positive integer");
    s->max_events = (uint64_t)x;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "max_file_mb"))) {
    if (get_int(v, 1, 1 << 20, &x))
      return etw_fail(st, ETW_E_INVALID, "/max_file_mb", "/max_file_mb must be an integer 1-1048576 (MiB)");
    s->max_file_mb = (uint32_t)x;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "flight_s"))) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.1 && v->valuedouble <= 86400))
      return etw_fail(st, ETW_E_INVALID, "/flight_s", "/flight_s must be a number of seconds, 0.1 to 86400");
    s->flight_s = v->valuedouble;
  }
  return ETW_E_OK;
}

static int valid_name(const char *s) {
  size_t n = strlen(s);
  if (!n || n > 64) return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.') return 0;
  return 1;
}

enum etw_err etw_spec_parse(const cJSON *body, struct etw_session_spec *s, struct etw_status *st) {
  static const char *const keys[] = {"name", "backend", "mode", "buffer_kb", "providers", "pids",
                                     "exe_names", "files", "replay", "win", "attach", "duration_s",
                                     "max_events", "max_file_mb", "flight_s", "order", "stackwalk_events", "start_when", "stop_when", "sinks", "subjects", "nats", NULL};
  memset(s, 0, sizeof *s);
  s->mode = ETW_MODE_REALTIME;
  if (!cJSON_IsObject(body)) return etw_fail(st, ETW_E_INVALID, "", "the session spec must be a JSON object");
  if (known(body, keys, "", st)) return st ? st->code : ETW_E_INVALID;
  const cJSON *v;
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "name")) && !cJSON_IsNull(v)) {
    if (!cJSON_IsString(v) || !valid_name(v->valuestring))
      return etw_fail(st, ETW_E_INVALID, "/name", "/name must be 1-64 characters of A-Z a-z 0-9 . _ -");
    s->name = dupstr(v->valuestring);
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "files"))) {
    enum etw_err e = str_array(v, &s->files, &s->n_files, ETW_SPEC_MAX_FILES, 255, "/files", st);
    if (e) return e;
    if (!s->n_files) return etw_fail(st, ETW_E_INVALID, "/files", "/files must name at least one file");
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "backend"))) {
    /* the shape is checked here; whether this build has the backend, at session creation */
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "linux") && strcmp(v->valuestring, "etl") &&
                               strcmp(v->valuestring, "win") && strcmp(v->valuestring, "nats")))
      return etw_fail(st, ETW_E_INVALID, "/backend", "/backend must be \"linux\", \"etl\", \"win\" or \"nats\"");
    s->backend = dupstr(v->valuestring);
  } else {
    const struct etw_backend *const *all = etw_backends();
    const char *def = s->n_files ? "etl" : NULL;
    for (int i = 0; !def && all[i]; i++)
      if (all[i]->caps & ETW_CAP_LIVE) def = all[i]->name;
    s->backend = dupstr(def ? def : "etl");
  }
  int is_file_source = !strcmp(s->backend, "etl");
  if (is_file_source && !s->n_files)
    return etw_fail(st, ETW_E_INVALID, "/files", "a session of backend \"etl\" replays files: /files is required");
  if (!is_file_source && s->n_files)
    return etw_fail(st, ETW_E_INVALID, "/files", "/files is only valid for the \"etl\" backend");
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "replay"))) {
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "fast") && strcmp(v->valuestring, "recorded")))
      return etw_fail(st, ETW_E_INVALID, "/replay", "/replay must be \"fast\" or \"recorded\"");
    s->replay_realtime = !strcmp(v->valuestring, "recorded");
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "stackwalk_events"))) {
    if (!cJSON_IsBool(v))
      return etw_fail(st, ETW_E_INVALID, "/stackwalk_events", "/stackwalk_events must be true or false");
    s->stackwalk_events = cJSON_IsTrue(v);
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "order"))) {
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "none") && strcmp(v->valuestring, "time")))
      return etw_fail(st, ETW_E_INVALID, "/order", "/order must be \"none\" or \"time\"");
    s->order_time = !strcmp(v->valuestring, "time");
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "mode"))) {
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "realtime"))
      s->mode = ETW_MODE_REALTIME;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "file"))
      s->mode = ETW_MODE_FILE;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "both"))
      s->mode = ETW_MODE_REALTIME | ETW_MODE_FILE;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "flight"))
      s->mode = ETW_MODE_FLIGHT;
    else
      return etw_fail(st, ETW_E_INVALID, "/mode", "/mode must be \"realtime\", \"file\", \"both\" or \"flight\"");
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "buffer_kb"))) {
    long long kb;
    if (get_int(v, 1, 4194304, &kb))
      return etw_fail(st, ETW_E_INVALID, "/buffer_kb", "/buffer_kb must be a positive integer (KiB per CPU)");
    s->buffer_kb = (uint32_t)kb;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "pids"))) {
    enum etw_err e = u32_array(v, &s->pids, &s->n_pids, ETW_SPEC_MAX_PIDS, 0, 4194304, "/pids", st);
    if (e) return e;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "exe_names"))) {
    enum etw_err e = str_array(v, &s->exe_names, &s->n_exe_names, ETW_SPEC_MAX_PIDS, 255, "/exe_names", st);
    if (e) return e;
  }
  {
    enum etw_err e = etw_nats_src_parse(body, s, st);
    if (e) return e;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "sinks"))) {
    enum etw_err e = etw_sinks_parse(v, &s->sinks, &s->n_sinks, st);
    if (e) return e;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "win"))) {
    enum etw_err e = parse_win(v, s, st);
    if (e) return e;
  }
  enum etw_err le = parse_limits(body, s, st);
  if (le) return le;
  static const char *const trig[2] = {"start_when", "stop_when"};
  for (int i = 0; i < 2; i++) {
    if (!(v = cJSON_GetObjectItemCaseSensitive(body, trig[i])) || cJSON_IsNull(v)) continue;
    char ptr[16];
    snprintf(ptr, sizeof ptr, "/%s", trig[i]);
    if ((le = etw_trigger_check(v, ptr, st))) return le;
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    *(i ? &s->stop_when : &s->start_when) = dupstr(txt);
    cJSON_free(txt);
  }
  v = cJSON_GetObjectItemCaseSensitive(body, "providers");
  if (v) {
    if (!cJSON_IsArray(v)) return etw_fail(st, ETW_E_INVALID, "/providers", "/providers must be an array");
    int n = cJSON_GetArraySize(v);
    if (n > ETW_SPEC_MAX_PROVIDERS)
      return etw_fail(st, ETW_E_INVALID, "/providers", "/providers has more than %d entries", ETW_SPEC_MAX_PROVIDERS);
    s->providers = calloc((size_t)n + 1, sizeof *s->providers);
    if (!s->providers) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
      char ptr[32];
      snprintf(ptr, sizeof ptr, "/providers/%d", i);
      s->n_providers++;
      enum etw_err e = etw_provider_parse(c, s->backend, &s->providers[i], ptr, st);
      if (e) return e;
      for (int j = 0; j < i; j++)
        if (!strcmp(s->providers[j].name, s->providers[i].name))
          return etw_fail(st, ETW_E_INVALID, ptr,
                          "provider \"%s\" is listed twice (give all its events in one entry, e.g. "
                          "\"sched:sched_switch,sched_wakeup\")", s->providers[i].name);
    }
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(body, "attach"))) {
    /* read-only attach to an existing ETW session by name: the win backend takes it as a
     * provider named "attach:<session>" */
    if (strcmp(s->backend, "win"))
      return etw_fail(st, ETW_E_INVALID, "/attach", "/attach is for the \"win\" backend only");
    if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > 200)
      return etw_fail(st, ETW_E_INVALID, "/attach", "/attach must name a running ETW session (1-200 bytes)");
    if (s->n_providers)
      return etw_fail(st, ETW_E_INVALID, "/providers", "an attached session has the providers its owner enabled: leave /providers out");
    s->providers = calloc(2, sizeof *s->providers);
    if (!s->providers) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    size_t n = strlen(v->valuestring) + 8;
    s->providers[0].name = malloc(n);
    if (!s->providers[0].name) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    snprintf(s->providers[0].name, n, "attach:%s", v->valuestring);
    s->providers[0].level = 5;
    s->n_providers = 1;
  }
  if (!is_file_source && !s->nats && !s->n_providers)
    return etw_fail(st, ETW_E_INVALID, "/providers", "a live session needs at least one provider in /providers");
  return ETW_E_OK;
}

static void free_strv(char **v, uint32_t n) {
  if (!v) return;
  for (uint32_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void etw_provider_free(struct etw_provider_spec *p) {
  free(p->name);
  free_strv(p->events, p->n_events);
  free(p->event_ids);
  free_strv(p->stack_events, p->n_stack_events);
  free(p->stack_ids);
  free(p->filter);
  memset(p, 0, sizeof *p);
}

void etw_spec_free(struct etw_session_spec *s) {
  free(s->name);
  free(s->backend);
  for (uint32_t i = 0; i < s->n_providers; i++) etw_provider_free(&s->providers[i]);
  free(s->providers);
  free(s->pids);
  free_strv(s->exe_names, s->n_exe_names);
  free_strv(s->files, s->n_files);
  free(s->start_when);
  free(s->stop_when);
  etw_sinks_spec_free(s->sinks, s->n_sinks);
  etw_nats_src_free(s->nats);
  memset(s, 0, sizeof *s);
}

static void strv_json(struct etw_jw *w, char **v, uint32_t n) {
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; i < n; i++) {
    if (i) etw_jw_ch(w, ',');
    etw_jw_cs(w, v[i]);
  }
  etw_jw_ch(w, ']');
}

static void u32_json(struct etw_jw *w, const uint32_t *v, uint32_t n) {
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; i < n; i++) {
    if (i) etw_jw_ch(w, ',');
    etw_jw_u64(w, v[i]);
  }
  etw_jw_ch(w, ']');
}

void etw_spec_json(const struct etw_session_spec *s, struct etw_jw *w) {
  etw_jw_lit(w, "{\"name\":");
  if (s->name) etw_jw_cs(w, s->name); else etw_jw_lit(w, "null");
  etw_jw_lit(w, ",\"backend\":");
  etw_jw_cs(w, s->backend);
  etw_jw_lit(w, ",\"mode\":");
  etw_jw_cs(w, s->mode == (ETW_MODE_REALTIME | ETW_MODE_FILE) ? "both"
               : s->mode == ETW_MODE_FILE                    ? "file"
               : s->mode == ETW_MODE_FLIGHT                  ? "flight"
                                                             : "realtime");
  etw_jw_lit(w, ",\"buffer_kb\":");
  etw_jw_u64(w, s->buffer_kb);
  etw_jw_lit(w, ",\"pids\":");
  u32_json(w, s->pids, s->n_pids);
  if (s->n_exe_names) {
    etw_jw_lit(w, ",\"exe_names\":");
    strv_json(w, s->exe_names, s->n_exe_names);
  }
  if (s->n_files) {
    etw_jw_lit(w, ",\"files\":[");
    for (uint32_t i = 0; i < s->n_files; i++) {
      if (i) etw_jw_ch(w, ',');
      const char *b = strrchr(s->files[i], '/');
      etw_jw_cs(w, b ? b + 1 : s->files[i]); /* never show server paths */
    }
    etw_jw_lit(w, "],\"replay\":");
    etw_jw_cs(w, s->replay_realtime ? "recorded" : "fast");
  }
  if (s->order_time) etw_jw_lit(w, ",\"order\":\"time\"");
  if (s->stackwalk_events) etw_jw_lit(w, ",\"stackwalk_events\":true");
  if (s->win.set) {
    etw_jw_lit(w, ",\"win\":{\"min_buffers\":");
    etw_jw_u64(w, s->win.min_buffers);
    etw_jw_lit(w, ",\"max_buffers\":");
    etw_jw_u64(w, s->win.max_buffers);
    etw_jw_lit(w, ",\"flush_s\":");
    etw_jw_u64(w, s->win.flush_s);
    etw_jw_lit(w, ",\"clock\":");
    etw_jw_u64(w, s->win.clock);
    etw_jw_lit(w, ",\"file\":");
    etw_jw_cs(w, s->win.circular ? "circular" : "sequential");
    etw_jw_lit(w, ",\"max_file_mb\":");
    etw_jw_u64(w, s->win.max_file_mb);
    etw_jw_ch(w, '}');
  }
  if (s->duration_s > 0) {
    etw_jw_lit(w, ",\"duration_s\":");
    etw_jw_double(w, s->duration_s);
  }
  if (s->start_when) {
    etw_jw_lit(w, ",\"start_when\":");
    etw_jw_lit(w, s->start_when); /* checked and printed by cJSON */
  }
  if (s->stop_when) {
    etw_jw_lit(w, ",\"stop_when\":");
    etw_jw_lit(w, s->stop_when);
  }
  if (s->max_events) {
    etw_jw_lit(w, ",\"max_events\":");
    etw_jw_u64(w, s->max_events);
  }
  if (s->max_file_mb) {
    etw_jw_lit(w, ",\"max_file_mb\":");
    etw_jw_u64(w, s->max_file_mb);
  }
  if (s->flight_s > 0) {
    char b[40];
    snprintf(b, sizeof b, ",\"flight_s\":%.15g", s->flight_s);
    etw_jw_lit(w, b);
  }
  etw_jw_lit(w, ",\"providers\":[");
  for (uint32_t i = 0; i < s->n_providers; i++) {
    const struct etw_provider_spec *p = &s->providers[i];
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, p->name);
    etw_jw_lit(w, ",\"events\":");
    strv_json(w, p->events, p->n_events);
    if (p->filter) {
      etw_jw_lit(w, ",\"filter\":");
      etw_jw_cs(w, p->filter);
    }
    etw_jw_lit(w, ",\"level\":");
    etw_jw_u64(w, (uint64_t)p->level);
    etw_jw_lit(w, ",\"keywords_any\":");
    etw_jw_hexw(w, p->keywords_any, 16);
    etw_jw_lit(w, ",\"keywords_all\":");
    etw_jw_hexw(w, p->keywords_all, 16);
    if (p->n_event_ids) {
      etw_jw_lit(w, ",\"event_ids\":");
      u32_json(w, p->event_ids, p->n_event_ids);
      etw_jw_lit(w, ",\"event_ids_exclude\":");
      etw_jw_bool(w, p->event_ids_exclude);
    }
    etw_jw_lit(w, ",\"stacks\":");
    if (p->n_stack_events)
      strv_json(w, p->stack_events, p->n_stack_events);
    else if (p->n_stack_ids)
      u32_json(w, p->stack_ids, p->n_stack_ids);
    else if (p->stacks == ETW_STACKS_RAW)
      etw_jw_lit(w, "\"raw\"");
    else
      etw_jw_bool(w, p->stacks);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
  etw_nats_src_json(s->nats, w);
  if (s->n_sinks) {
    etw_jw_lit(w, ",\"sinks\":");
    etw_sinks_spec_json(s->sinks, s->n_sinks, w);
  }
  etw_jw_ch(w, '}');
}
