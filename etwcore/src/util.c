/* util.c — small portable helpers (see util.h). */
#include "etwcore/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
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

int etw_rfc3339_ns(const char *s, int64_t *ns) {
  struct tm tm = {0};
  int used = 0, oh = 0, om = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &used) != 6 || used != 19 || tm.tm_year < 1970 || tm.tm_mon < 1 ||
      tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
    return -1;
  const char *p = s + used;
  int64_t frac = 0;
  if (*p == '.') {
    int nd = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, nd++)
      if (nd < 9) frac = frac * 10 + (*p - '0');
    if (!nd) return -1;
    for (; nd < 9; nd++) frac *= 10;
  }
  int sign = 0;
  if (*p == 'Z' && !p[1]) {
  } else if ((*p == '+' || *p == ' ' || *p == '-') && strlen(p) == 6 && p[3] == ':' &&
             sscanf(p + 1, "%2d:%2d", &oh, &om) == 2 && p[1] >= '0' && p[4] >= '0' && oh < 24 && om < 60) {
    sign = *p == '-' ? -1 : 1;
  } else {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
#ifdef _WIN32
  int64_t t = (int64_t)_mkgmtime(&tm);
#else
  int64_t t = (int64_t)timegm(&tm);
#endif
  t -= sign * (oh * 3600 + om * 60);
  if (t < 0) return -1;
  *ns = t * 1000000000LL + frac;
  return 0;
}

void etw_cond_init_mono(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
#ifndef _WIN32
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
#endif
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

int64_t etw_mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int64_t etw_real_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void etw_url_hide_userinfo(const char *url, char *out, size_t n) {
  size_t o = 0;
  if (!n) return;
  for (const char *p = url ? url : ""; *p && o + 1 < n;) {
    size_t k = strcspn(p, ","); /* one URL: [p, p + k) */
    const char *sch = strstr(p, "://");
    size_t auth = sch && (size_t)(sch - p) < k ? (size_t)(sch - p) + 3 : 0; /* its authority's start */
    size_t alen = strcspn(p + auth, "/,?#");
    const char *at = NULL; /* the last '@' of the authority ends the userinfo */
    for (size_t i = auth; i < auth + alen; i++)
      if (p[i] == '@') at = p + i;
    int w = at ? snprintf(out + o, n - o, "%.*s***%.*s", (int)auth, p, (int)(k - (size_t)(at - p)), at)
               : snprintf(out + o, n - o, "%.*s", (int)k, p);
    if (w < 0 || (size_t)w >= n - o) break;
    o += (size_t)w;
    p += k;
    if (*p && o + 1 < n) out[o++] = *p++; /* the comma */
  }
  out[o < n ? o : n - 1] = 0;
}
