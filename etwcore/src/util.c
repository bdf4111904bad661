/* util.c — small portable helpers (see util.h). */
#include "etwcore/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#define MKDIR(p) _mkdir(p)
#else
#define MKDIR(p) mkdir(p, 0700)
#endif

int etw_mkdirs(const char *path) {
  char tmp[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(tmp, path, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/' && *p != '\\') continue;
    char c = *p;
    *p = 0;
    if (MKDIR(tmp) && errno != EEXIST) return -1;
    *p = c;
  }
  return MKDIR(tmp) && errno != EEXIST ? -1 : 0;
}

#if defined(__GLIBC__)
#include <malloc.h>
void etw_mem_trim(void) { malloc_trim(0); }
#else
void etw_mem_trim(void) {}
#endif

void etw_cond_init_mono(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
#ifndef _WIN32
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
#endif
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}
