/* backends.c — the table of backends compiled into this binary (CMake defines ETWD_BACKEND_*). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etwcore/backend.h"
#include "etwcore/sink.h"
#ifdef ETWD_BACKEND_ETL
#include "etwcore/etl.h"
#endif
#ifdef ETWD_BACKEND_LINUX
#include "etwcore/linux.h"
#endif

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
#ifdef ETWD_HAVE_NATS
    &etw_backend_nats, /* last: never the default backend */
#endif
    NULL};

const struct etw_backend *const *etw_backends(void) { return table; }

const struct etw_backend *etw_backend_find(const char *name) {
  for (int i = 0; table[i]; i++)
    if (name && !strcmp(table[i]->name, name)) return table[i];
  return NULL;
}

enum etw_err etw_backends_configure(const struct etw_backends_config *c, struct etw_status *st) {
  if (c->reader_nice < -20 || c->reader_nice > 19)
    return etw_fail(st, ETW_E_INVALID, "reader_nice", "expected an integer between -20 and 19, got %d",
                    c->reader_nice);
#ifdef ETWD_BACKEND_ETL
  enum etw_decode_mode mode = etw_decode_default();
  if (c->decode && etw_decode_parse(c->decode, &mode))
    return etw_fail(st, ETW_E_INVALID, "decode", "expected fast or reference, got \"%.64s\"", c->decode);
  etw_decode_set_default(mode); /* every ETL reader and decoder made from now on */
  etw_etl_set_dirs(c->data_dir, c->manifest_dir);
  if (c->stack_index_mb) etw_etl_set_stack_index_mb(c->stack_index_mb);
#endif
#ifdef ETWD_BACKEND_LINUX
  etw_linux_set_reader_nice(c->reader_nice);
  etw_linux_set_reader_pinning(c->reader_pinning);
#endif
  etw_sinks_configure(c->sink_secrets_dir, c->sink_spool_memory_mb, c->sink_spool_disk_mb);
  return ETW_E_OK;
}

void etw_backends_metrics(struct etw_jw *w) {
  (void)w;
#ifdef ETWD_BACKEND_LINUX
  etw_linux_metrics(w);
#endif
#ifdef ETWD_BACKEND_ETL
  etw_etl_metrics(w);
#endif
}

void etw_caps_json(unsigned caps, struct etw_jw *w) {
  static const char *const names[] = {"live",          "file",         "replay",
                                      "list_providers", "filter_pid",  "filter_expression",
                                      "filter_exe",    "level_keywords", "event_ids",
                                      "stacks",        "kernel_flags", "enable_running",
                                      "event_names",   "buffer_size",  "win_settings",
                                      "order_time",      "markers",         "flight",          "sinks",         "nats_source",
                                      "stack_events"};
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

#ifndef _WIN32
/* State letter and start time (field 22 of /proc/PID/stat: clock ticks after boot) of @pid.
 * Returns 0 if the process does not exist (no /proc entry) or its stat cannot be parsed. */
static int proc_stat(long pid, char *state, unsigned long long *start) {
  char path[48], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
  if (!p || p[1] != ' ' || !p[2]) return 0;
  *state = p[2];
  p += 3;
  for (int field = 4; field <= 22; field++) { /* after the state: ppid (4) .. starttime (22) */
    while (*p == ' ') p++;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) return 0;
    if (field == 22) *start = v;
    p = end;
  }
  return 1;
}
#endif

/* @kind: "" for a session of the table, "p" for a private one (its own ids) */
static void os_name(char *buf, size_t n, const char *kind, unsigned long long id) {
#ifndef _WIN32
  char st;
  unsigned long long start;
  if (proc_stat((long)getpid(), &st, &start)) {
    snprintf(buf, n, "%s%s%llu_s%llu_%ld", ETW_SESSION_PREFIX, kind, id, start, (long)getpid());
    return;
  }
#endif
  snprintf(buf, n, "%s%s%llu_%ld", ETW_SESSION_PREFIX, kind, id, (long)getpid());
}

void etw_os_name_make(char *buf, size_t n, unsigned long long id) { os_name(buf, n, "", id); }

void etw_os_name_private(char *buf, size_t n, unsigned long long id) { os_name(buf, n, "p", id); }

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
  /* kill(pid, 0) is not enough: a killed owner stays a zombie until its parent reaps it, and a
   * pid can be reused by another process. Dead = no /proc entry, state Z/X, or (when the name
   * records it: `_s<starttime>_<pid>`) a different start time. */
  char st;
  unsigned long long start;
  if (!proc_stat(pid, &st, &start)) return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
  if (st == 'Z' || st == 'X' || st == 'x') return 1;
  const char *seg = us;
  while (seg > name + pl && seg[-1] != '_') seg--; /* the segment before _<pid> */
  if (seg < us && *seg == 's' && seg + 1 < us) {
    unsigned long long want = strtoull(seg + 1, &end, 10);
    if (end == us && want != start) return 1;
  }
  return 0;
#endif
}
