/* bench_linux_stacks.c — the cost of `stacks: true` on Linux live events (docs/benchmarks.md).
 *
 * One run: an etwd Linux session (raw_syscalls:sys_enter filtered to getppid, realtime: decode +
 * JSON + stacks joined and symbolised + hub + one subscriber thread reading ndjson) while one load
 * process per CPU calls getppid() as fast as it can for @seconds, through main → outer → inner
 * built with frame pointers (this file is compiled with -fno-omit-frame-pointer by the bench's
 * CMake rule, so the user stacks are real). Reports the load's syscall rate (the kernel's cost of
 * recording the event and its stacks falls on the traced process), the events delivered per
 * second, the loss (per_cpu stats), and this process's CPU time per delivered event (readers +
 * subscriber; the load runs in child processes). Hardware counters (instructions) are not
 * available on this kind of machine (stack-notes §3), so CPU time stands in for them.
 *
 * usage: bench_linux_stacks <stacks 0|1> [seconds=3] [buffer_kb=8192]
 * prints one line of key=value pairs.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etwcore/backend.h"
#include "etwcore/hub.h"

static const struct etw_backend *B = &etw_backend_linux;
static volatile int g_sub_stop;
static uint64_t g_sub_records, g_sub_bytes;
static int g_pipe[2];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_self(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void *sub_main(void *arg) {
  struct etw_sub *sub = arg;
  struct etw_jw w;
  etw_jw_init(&w, 8u << 20);
  for (;;) {
    etw_jw_truncate(&w, 0);
    int r = etw_sub_read(sub, &w, ETW_FMT_NDJSON, 1u << 20, 50);
    if (r > 0) {
      g_sub_records += (uint64_t)r;
      g_sub_bytes += w.len;
    } else if (r < 0 || g_sub_stop) {
      break;
    }
  }
  etw_jw_free(&w);
  return NULL;
}

__attribute__((noinline)) static uint64_t inner(double end) {
  uint64_t n = 0;
  while (now() < end) {
    for (int i = 0; i < 1000; i++) syscall(SYS_getppid);
    n += 1000;
  }
  return n;
}
__attribute__((noinline)) static uint64_t outer(double end) { return inner(end) + 0; }

static void load(int cpu, double secs) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
  uint64_t n = outer(now() + secs);
  if (write(g_pipe[1], &n, sizeof n) != (ssize_t)sizeof n) _exit(1);
  _exit(0);
}

static void inst_loss(const char *inst, uint64_t *lost, uint64_t *read) {
  *lost = *read = 0;
  for (int cpu = 0; cpu < 256; cpu++) {
    char p[256], line[256];
    snprintf(p, sizeof p, "/sys/kernel/tracing/instances/%s/per_cpu/cpu%d/stats", inst, cpu);
    FILE *f = fopen(p, "r");
    if (!f) break;
    while (fgets(line, sizeof line, f)) {
      unsigned long long v;
      if (sscanf(line, "overrun: %llu", &v) == 1 || sscanf(line, "dropped events: %llu", &v) == 1)
        *lost += v;
      else if (sscanf(line, "read events: %llu", &v) == 1)
        *read += v;
    }
    fclose(f);
  }
}

int main(int argc, char **argv) {
  int stacks = argc > 1 ? atoi(argv[1]) : 0;
  double secs = argc > 2 ? atof(argv[2]) : 3;
  unsigned bkb = argc > 3 ? (unsigned)atoi(argv[3]) : 8192;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  struct etw_status st;
  if (B->init(&st)) {
    fprintf(stderr, "init: %s\n", st.msg);
    return 1;
  }
  char *evs[] = {"sys_enter"};
  char filter[32];
  snprintf(filter, sizeof filter, "id == %d", (int)SYS_getppid);
  struct etw_provider_spec p = {.name = "raw_syscalls", .events = evs, .n_events = 1, .level = 5,
                                .filter = filter, .stacks = stacks};
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1, .buffer_kb = bkb};
  struct etw_hub_limits lim = {.replay_max_bytes = 0, .sub_queue_events = 1u << 20,
                               .max_subscribers = 2};
  struct etw_hub *hub = etw_hub_new(&lim);
  int err;
  struct etw_sub *sub = etw_hub_subscribe(hub, NULL, 0, &err);
  char name[64];
  snprintf(name, sizeof name, "%sstk_%d", ETW_SESSION_PREFIX, (int)getpid());
  struct etw_backend_args a = {.spec = &sp, .hub = hub, .os_name = name};
  void *s;
  if (B->open(&a, &s, &st)) {
    fprintf(stderr, "open: %s %s\n", st.field, st.msg);
    return 1;
  }
  pthread_t th;
  pthread_create(&th, NULL, sub_main, sub);
  B->start(s, &st);
  if (pipe(g_pipe)) return 1;
  double c0 = cpu_self(), t0 = now();
  pid_t kids[256];
  for (int c = 0; c < ncpu && c < 256; c++)
    if ((kids[c] = fork()) == 0) load(c, secs);
  uint64_t issued = 0;
  for (int c = 0; c < ncpu && c < 256; c++) {
    uint64_t n = 0;
    if (read(g_pipe[0], &n, sizeof n) == (ssize_t)sizeof n) issued += n;
  }
  for (int c = 0; c < ncpu && c < 256; c++) waitpid(kids[c], NULL, 0);
  double dt = now() - t0;
  usleep(200000);
  B->stop(s);
  g_sub_stop = 1;
  etw_hub_end(hub);
  pthread_join(th, NULL);
  double cpu = cpu_self() - c0;
  uint64_t lost, rd;
  inst_loss(name, &lost, &rd);
  B->destroy(s);
  printf("stacks=%d secs=%.2f issued_per_s=%.0f delivered=%llu delivered_per_s=%.0f lost=%llu "
         "bytes_per_event=%.0f cpu_us_per_event=%.3f\n",
         stacks, dt, (double)issued / dt, (unsigned long long)g_sub_records,
         (double)g_sub_records / dt, (unsigned long long)lost,
         g_sub_records ? (double)g_sub_bytes / (double)g_sub_records : 0.0,
         g_sub_records ? cpu * 1e6 / (double)g_sub_records : 0.0);
  etw_sub_close(sub);
  etw_hub_free(hub);
  return 0;
}
