/* host.c — the host name events carry (see host.h). */
#include "etwcore/host.h"

#include <stdio.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

static char host[ETW_HOST_MAX + 1];

static int ok_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

int etw_host_valid(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (!n || n > ETW_HOST_MAX) return 0;
  for (; *s; s++)
    if (!ok_char(*s)) return 0;
  return 1;
}

static void machine_name(char *out, size_t n) {
  char buf[256] = "";
#ifdef _WIN32
  DWORD len = sizeof buf;
  if (!GetComputerNameA(buf, &len)) buf[0] = 0;
#else
  if (gethostname(buf, sizeof buf - 1)) buf[0] = 0;
#endif
  buf[sizeof buf - 1] = 0;
  size_t k = 0;
  for (const char *p = buf; *p && k + 1 < n; p++) out[k++] = ok_char(*p) ? *p : '-';
  out[k] = 0;
  if (!k) snprintf(out, n, "localhost");
}

int etw_host_set(const char *s) {
  if (!s) {
    machine_name(host, sizeof host);
    return 0;
  }
  if (!etw_host_valid(s)) return -1;
  memcpy(host, s, strlen(s) + 1);
  return 0;
}

const char *etw_host_name(void) {
  if (!host[0]) machine_name(host, sizeof host);
  return host;
}
