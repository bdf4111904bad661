/* linux_prov.c — the providers API of the Linux backend (list and describe tracepoint systems)
 * and the name checks the backend applies before a name goes into a tracefs path. Stateless:
 * any thread. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event-parse.h>
#include <tracefs.h>

#include "etwcore/backend.h"
#include "linux_int.h"

/* ---- name checks */

int lx_valid_name(const char *s) {
  if (!s || !*s || strlen(s) > 128) return 0;
  if (!strcmp(s, ".") || !strcmp(s, "..")) return 0;
  for (const char *p = s; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')) return 0;
  return 1;
}

int lx_system_exists(const char *sys) {
  if (!lx_valid_name(sys) || !strcmp(sys, "ftrace")) return 0;
  const char *dir = tracefs_tracing_dir();
  if (!dir) return 0;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/events/%s/enable", dir, sys);
  return access(path, F_OK) == 0;
}

int lx_event_exists(const char *sys, const char *ev) {
  if (!lx_valid_name(ev)) return 0;
  return tracefs_event_file_exists(NULL, sys, ev, "format");
}

/* ---- providers API */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

enum etw_err lx_list_providers(const char *q, struct etw_jw *w, struct etw_status *st) {
  char **sys = tracefs_event_systems(NULL);
  if (!sys) return etw_fail(st, ETW_E_IO, NULL, "cannot list tracefs event systems");
  size_t n = 0;
  while (sys[n]) n++;
  qsort(sys, n, sizeof *sys, cmp_str);
  etw_jw_ch(w, '[');
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(sys[i], "ftrace")) continue;
    char **ev = tracefs_system_events(NULL, sys[i]);
    size_t ne = 0, nm = 0; /* events; of them, names containing q (trace-cmd list -e style) */
    for (; ev && ev[ne]; ne++) nm += q && *q && strcasestr(ev[ne], q);
    if (q && *q && !strcasestr(sys[i], q) && !nm) {
      tracefs_list_free(ev);
      continue;
    }
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, sys[i]);
    etw_jw_lit(w, ",\"events\":");
    etw_jw_u64(w, ne);
    if (nm) {
      qsort(ev, ne, sizeof *ev, cmp_str);
      etw_jw_lit(w, ",\"matched_events\":[");
      for (size_t k = 0, m = 0; k < ne; k++)
        if (strcasestr(ev[k], q)) {
          if (m++) etw_jw_ch(w, ',');
          etw_jw_cs(w, ev[k]);
        }
      etw_jw_ch(w, ']');
    }
    tracefs_list_free(ev);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
  tracefs_list_free(sys);
  return ETW_E_OK;
}

static void write_fields(struct etw_jw *w, struct tep_format_field *f, int common, int *first) {
  for (; f; f = f->next) {
    if (!*first) etw_jw_ch(w, ',');
    *first = 0;
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, f->name);
    etw_jw_lit(w, ",\"type\":");
    etw_jw_cs(w, f->type);
    etw_jw_lit(w, ",\"offset\":");
    etw_jw_i64(w, f->offset);
    etw_jw_lit(w, ",\"size\":");
    etw_jw_i64(w, f->size);
    etw_jw_lit(w, ",\"signed\":");
    etw_jw_bool(w, (f->flags & TEP_FIELD_IS_SIGNED) != 0);
    if (common) etw_jw_lit(w, ",\"common\":true");
    etw_jw_ch(w, '}');
  }
}

enum etw_err lx_describe_provider(const char *name, struct etw_jw *w,
                                         struct etw_status *st) {
  if (!lx_system_exists(name))
    return etw_fail(st, ETW_E_NOT_FOUND, NULL,
                    "no tracepoint system '%s' in %s/events", name ? name : "",
                    tracefs_tracing_dir() ? tracefs_tracing_dir() : "tracefs");
  const char *systems[] = {name, NULL};
  struct tep_handle *tep = lx_tep_new(systems);
  if (!tep) return etw_fail(st, ETW_E_IO, NULL, "cannot parse the formats of '%s'", name);
  struct tep_event **evs = tep_list_events(tep, TEP_EVENT_SORT_NAME);
  etw_jw_lit(w, "{\"name\":");
  etw_jw_cs(w, name);
  etw_jw_lit(w, ",\"events\":[");
  int firste = 1;
  for (int i = 0; evs && evs[i]; i++) {
    struct tep_event *ev = evs[i];
    if (!ev->system || strcmp(ev->system, name)) continue;
    if (!firste) etw_jw_ch(w, ',');
    firste = 0;
    etw_jw_lit(w, "{\"id\":");
    etw_jw_i64(w, ev->id);
    etw_jw_lit(w, ",\"name\":");
    etw_jw_cs(w, ev->name);
    etw_jw_lit(w, ",\"fields\":[");
    int first = 1;
    write_fields(w, ev->format.common_fields, 1, &first);
    write_fields(w, ev->format.fields, 0, &first);
    etw_jw_lit(w, "]}");
  }
  etw_jw_lit(w, "]}");
  tep_free(tep);
  return ETW_E_OK;
}
