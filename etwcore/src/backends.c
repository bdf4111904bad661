/* backends.c — the table of backends compiled into this binary (CMake defines ETWD_BACKEND_*). */
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
                                      "stacks",        "kernel_flags", "enable_running"};
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
