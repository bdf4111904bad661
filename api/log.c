/* log.c — logfmt lines, one write(2) each (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum etwd_log_level g_level = LOG_INFO;
static int g_fd = 2;
static const char *const names[] = {"error", "warn", "info", "debug"};

void etwd_log_set_level(enum etwd_log_level lvl) { g_level = lvl; }
void etwd_log_set_fd(int fd) { g_fd = fd; }

int etwd_log_parse_level(const char *s) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

const char *etwd_logq(char *buf, unsigned size, const char *s) {
  if (!s) s = "";
  int need_q = !*s;
  for (const char *p = s; *p && !need_q; p++)
    need_q = (unsigned char)*p <= ' ' || *p == '"' || *p == '=' || *p == '\\';
  unsigned o = 0;
  if (size < 4) return "";
  if (need_q) buf[o++] = '"';
  for (const char *p = s; *p && o + 4 < size; p++) {
    unsigned char c = (unsigned char)*p;
    if (need_q && (c == '"' || c == '\\')) {
      buf[o++] = '\\';
      buf[o++] = (char)c;
    } else if (c < ' ') {
      buf[o++] = '?';
    } else {
      buf[o++] = (char)c;
    }
  }
  if (need_q) buf[o++] = '"';
  buf[o] = 0;
  return buf;
}

void etwd_log(enum etwd_log_level lvl, const char *msg, const char *fmt, ...) {
  if (lvl > g_level) return;
  char line[2048], q[512];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s msg=%s",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000000, names[lvl], etwd_logq(q, sizeof q, msg));
  if (n < 0) return;
  if (fmt && *fmt && (size_t)n < sizeof line - 2) {
    line[n++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m > 0) n += m;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
  }
  line[n++] = '\n';
  ssize_t w = write(g_fd, line, (size_t)n);
  (void)w;
}
