/* bench_linux_latency.c — kernel event → hub subscriber latency of the Linux backend.
 *
 * A child issues getppid() at a paced rate (default 10,000/s); the session traces
 * raw_syscalls:sys_enter filtered to that child; a subscriber thread reads the hub as a sender
 * would and, for every event, takes now(CLOCK_REALTIME) − TimeCreated (the kernel's timestamp
 * converted to UTC by the backend). Prints p50/p90/p99/max in ms. The network hop of the real
 * server comes on top (docs/benchmarks.md measures the whole path).
 *
 * usage: bench_linux_latency [rate_per_s=10000] [seconds=5]   (root)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_linux.h"

#define MAX_SAMPLES (1u << 22)

static double *g_lat;
static size_t g_n;
static char g_key[64];

static int64_t now_real(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "TimeCreated":"2026-11-22T01:27:55.4504710Z" → ns since 1970 */
static int parse_time(const char *p, int64_t *ns) {
  struct tm tm = {0};
  unsigned frac;
  if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d.%7uZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &frac) != 7)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  *ns = (int64_t)timegm(&tm) * 1000000000 + (int64_t)frac * 100;
  return 0;
}

static void *sub_main(void *arg) {
  struct etw_sub *sub = arg;
  struct etw_jw w;
  etw_jw_init(&w, 8u << 20);
  for (;;) {
    etw_jw_truncate(&w, 0);
    int r = etw_sub_read(sub, &w, ETW_FMT_NDJSON, 4u << 20, 100);
    if (r < 0) break;
    if (r == 0) continue;
    int64_t now = now_real();
    const char *p = w.buf, *end = w.buf + w.len;
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      if (!nl) break;
      const char *t = strstr(p, "\"TimeCreated\":\"");
      int64_t ts;
      if (t && t < nl && memmem(p, (size_t)(nl - p), g_key, strlen(g_key)) &&
          parse_time(t + 15, &ts) == 0 && g_n < MAX_SAMPLES)
        g_lat[g_n++] = (double)(now - ts) / 1e6;
      p = nl + 1;
    }
  }
  etw_jw_free(&w);
  return NULL;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  double rate = argc > 1 ? atof(argv[1]) : 10000;
  double secs = argc > 2 ? atof(argv[2]) : 5;
  g_lat = malloc(MAX_SAMPLES * sizeof *g_lat);
  int go[2];
  if (!g_lat || pipe(go)) return 1;
  pid_t child = fork();
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t done = 0;
    for (;;) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      double el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
      if (el >= secs) break;
      uint64_t due = (uint64_t)(el * rate);
      if (done >= due) {
        struct timespec sl = {0, 50000};
        nanosleep(&sl, NULL);
        continue;
      }
      while (done < due) {
        syscall(SYS_getppid);
        done++;
      }
    }
    _exit(0);
  }
  close(go[0]);
  snprintf(g_key, sizeof g_key, "\"ProcessID\":%d,", (int)child);
  char filt[64];
  snprintf(filt, sizeof filt, "common_pid == %d", (int)child);
  char *evs[] = {"sys_enter"};
  struct etw_provider_spec p = {.name = "raw_syscalls", .events = evs, .n_events = 1,
                                .filter = filt, .level = 5};
  struct bench_session b;
  if (bench_open(&b, &p, 0, "lat")) return 1;
  pthread_t th = bench_start(&b, sub_main);
  if (write(go[1], "x", 1) != 1) return 1;
  waitpid(child, NULL, 0);
  usleep(200000);
  bench_stop(&b, th);
  struct etw_backend_stats bs;
  B->stats(b.s, &bs);
  B->destroy(b.s);
  qsort(g_lat, g_n, sizeof *g_lat, cmp_d);
  if (!g_n) {
    printf("no events\n");
    return 1;
  }
  printf("rate=%.0f events=%zu lost=%llu latency_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f\n", rate,
         g_n, (unsigned long long)bs.kernel_lost, g_lat[g_n / 2], g_lat[g_n * 9 / 10],
         g_lat[g_n * 99 / 100], g_lat[g_n - 1]);
  bench_close(&b);
  free(g_lat);
  return 0;
}
