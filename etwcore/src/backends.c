/* backends.c — the table of backends compiled into this binary (CMake defines ETWD_BACKEND_*). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "etwcore/backend.h"

static const struct etw_backend *const table[] = {
#ifdef ETWD_BACKEND_LINUX
    &etw_backend_linux,
#endif
#ifdef ETWD_BACKEND_WIN
    &etw_backend_win,
#endif
#ifdef ETWD_BACKEND_ETL
    &etw_backend_etl,
#endif
    NULL};

const struct etw_backend *const *etw_backends(void) { return table; }

const struct etw_backend *etw_backend_find(const char *name) {
  for (int i = 0; table[i]; i++)
    if (name && !strcmp(table[i]->name, name)) return table[i];
  return NULL;
}

void etw_caps_json(unsigned caps, struct etw_jw *w) {
  static const char *const names[] = {"live",          "file",         "replay",
                                      "list_providers", "filter_pid",  "filter_expression",
                                      "filter_exe",    "level_keywords", "event_ids",
                                      "stacks",        "kernel_flags", "enable_running",
                                      "event_names",   "buffer_size",  "win_settings"};
  etw_jw_ch(w, '[');
  int first = 1;
  for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (!(caps & (1u << i))) continue;
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_cs(w, names[i]);
  }
  etw_jw_ch(w, ']');
}

int etw_os_name_is_stale(const char *name) {
  size_t pl = strlen(ETW_SESSION_PREFIX);
  if (!name || strncmp(name, ETW_SESSION_PREFIX, pl)) return 0;
  const char *us = strrchr(name + pl, '_');
  if (!us || !us[1]) return 1;
  char *end;
  long pid = strtol(us + 1, &end, 10);
  if (*end || pid <= 0) return 1;
#ifdef _WIN32
  return 0; /* the win backend checks with OpenProcess */
#else
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
#endif
}
