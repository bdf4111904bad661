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

#include "bench_linux.h"

static int g_pipe[2];

static double cpu_self(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

__attribute__((noinline)) static uint64_t inner(double end) {
  uint64_t n = 0;
  while (bench_now() < end) {
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
  uint64_t n = outer(bench_now() + secs);
  if (write(g_pipe[1], &n, sizeof n) != (ssize_t)sizeof n) _exit(1);
  _exit(0);
}

int main(int argc, char **argv) {
  int stacks = argc > 1 ? atoi(argv[1]) : 0;
  double secs = argc > 2 ? atof(argv[2]) : 3;
  unsigned bkb = argc > 3 ? (unsigned)atoi(argv[3]) : 8192;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  char *evs[] = {"sys_enter"};
  char filter[32];
  snprintf(filter, sizeof filter, "id == %d", (int)SYS_getppid);
  struct etw_provider_spec p = {.name = "raw_syscalls", .events = evs, .n_events = 1, .level = 5,
                                .filter = filter, .stacks = stacks};
  struct bench_session b;
  if (bench_open(&b, &p, bkb, "stk")) return 1;
  pthread_t th = bench_start(&b, bench_drain);
  if (pipe(g_pipe)) return 1;
  double c0 = cpu_self(), t0 = bench_now();
  pid_t kids[256];
  for (int c = 0; c < ncpu && c < 256; c++)
    if ((kids[c] = fork()) == 0) load(c, secs);
  uint64_t issued = 0;
  for (int c = 0; c < ncpu && c < 256; c++) {
    uint64_t n = 0;
    if (read(g_pipe[0], &n, sizeof n) == (ssize_t)sizeof n) issued += n;
  }
  for (int c = 0; c < ncpu && c < 256; c++) waitpid(kids[c], NULL, 0);
  double dt = bench_now() - t0;
  usleep(200000);
  bench_stop(&b, th);
  double cpu = cpu_self() - c0;
  uint64_t ov, dr, rd;
  bench_inst_stats(b.name, &ov, &dr, &rd);
  uint64_t lost = ov + dr;
  B->destroy(b.s);
  printf("stacks=%d secs=%.2f issued_per_s=%.0f delivered=%llu delivered_per_s=%.0f lost=%llu "
         "bytes_per_event=%.0f cpu_us_per_event=%.3f\n",
         stacks, dt, (double)issued / dt, (unsigned long long)g_sub_records,
         (double)g_sub_records / dt, (unsigned long long)lost,
         g_sub_records ? (double)g_sub_bytes / (double)g_sub_records : 0.0,
         g_sub_records ? cpu * 1e6 / (double)g_sub_records : 0.0);
  bench_close(&b);
  return 0;
}
