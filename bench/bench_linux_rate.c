/* bench_linux_rate.c — lossless event rate of the Linux backend vs `trace-cmd record`, same run.
 *
 * One run at one offered rate: an etwd session (raw_syscalls:sys_enter, realtime: decode + JSON +
 * hub + one subscriber thread reading ndjson as a streaming client would) and
 * `trace-cmd record -d --no-filter` (binary pages to disk, no decoding) on the same event in its
 * own instance, while one load process per CPU issues getppid() at the offered rate (paced in 1 ms
 * slices; 0 = as fast as possible). Loss for both comes from the instances' per_cpu/cpuN/stats
 * (overrun + dropped events); "read" is the stats' "read events" (events consumed by the reader;
 * trace-cmd splices pages, which the kernel does not count there, so tc_read stays 0 and its
 * coverage is judged by tc_lost alone). "issued" = getppid() calls the load made.
 *
 * usage: bench_linux_rate <rate_total_per_s|0> [seconds=3] [buffer_kb=4096] [reader_nice=-10] [pin=1]
 * prints one line: key=value pairs (bench/bench_linux_rate.sh makes the table).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_linux.h"
#include "etwcore/linux.h"

static int g_pipe[2];

static void load_done(uint64_t n) {
  if (write(g_pipe[1], &n, sizeof n) != (ssize_t)sizeof n) _exit(1);
  _exit(0);
}

static void load(int cpu, double per_s, double secs) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
  double t0 = bench_now(), end = t0 + secs;
  uint64_t done = 0;
  if (per_s <= 0) {
    while (bench_now() < end) {
      for (int i = 0; i < 1000; i++) syscall(SYS_getppid);
      done += 1000;
    }
    load_done(done);
  }
  for (;;) {
    double t = bench_now();
    if (t >= end) break;
    uint64_t due = (uint64_t)((t - t0) * per_s);
    while (done < due) {
      syscall(SYS_getppid);
      done++;
    }
  }
  load_done(done);
}

int main(int argc, char **argv) {
  double rate = argc > 1 ? atof(argv[1]) : 0;
  double secs = argc > 2 ? atof(argv[2]) : 3;
  unsigned bkb = argc > 3 ? (unsigned)atoi(argv[3]) : 4096;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (argc > 4) etw_linux_set_reader_nice(atoi(argv[4]));
  if (argc > 5) etw_linux_set_reader_pinning(atoi(argv[5]));
  char *evs[] = {"sys_enter"};
  struct etw_provider_spec p = {.name = "raw_syscalls", .events = evs, .n_events = 1, .level = 5};
  struct bench_session b;
  if (bench_open(&b, &p, bkb, "rate")) return 1;
  pthread_t th = bench_start(&b, bench_drain);

  /* trace-cmd in its own instance (not our prefix) */
  char tcinst[64], tcout[128], bstr[32], sl[32];
  snprintf(tcinst, sizeof tcinst, "tcbench_%d", (int)getpid());
  snprintf(tcout, sizeof tcout, "/tmp/tcbench_%d.dat", (int)getpid());
  snprintf(bstr, sizeof bstr, "%u", bkb);
  snprintf(sl, sizeof sl, "%.1f", secs + 1.5);
  pid_t tc = fork();
  if (tc == 0) {
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 1);
    dup2(fd, 2);
    execlp("trace-cmd", "trace-cmd", "record", "-d", "--no-filter", "-B", tcinst, "-b", bstr, "-e",
           "raw_syscalls:sys_enter", "-o", tcout, "sleep", sl, (char *)NULL);
    _exit(127);
  }
  usleep(700000); /* trace-cmd is up and recording */

  pid_t kids[256];
  if (pipe(g_pipe)) return 1;
  double t0 = bench_now();
  for (int c = 0; c < ncpu; c++) {
    kids[c] = fork();
    if (kids[c] == 0) load(c, rate / ncpu, secs);
  }
  uint64_t issued = 0;
  for (int c = 0; c < ncpu; c++) {
    uint64_t n = 0;
    if (read(g_pipe[0], &n, sizeof n) == (ssize_t)sizeof n) issued += n;
  }
  for (int c = 0; c < ncpu; c++) waitpid(kids[c], NULL, 0);
  double dt = bench_now() - t0;
  int tcst = 0;
  waitpid(tc, &tcst, 0);
  bench_stop(&b, th);

  struct etw_backend_stats bs;
  B->stats(b.s, &bs);
  uint64_t our_ov, our_dr, our_rd;
  bench_inst_stats(b.name, &our_ov, &our_dr, &our_rd);
  struct etw_hub_stats hs;
  etw_hub_stats(b.hub, &hs);
  struct etw_sub_stats ss;
  etw_sub_stats(b.sub, &ss);
  B->destroy(b.s);
  uint64_t tc_ov, tc_dr, tc_rd;
  bench_inst_stats(tcinst, &tc_ov, &tc_dr, &tc_rd);
  char path[256];
  snprintf(path, sizeof path, "/sys/kernel/tracing/instances/%s", tcinst);
  rmdir(path); /* trace-cmd leaves its instance behind */
  long tcsize = 0;
  FILE *f = fopen(tcout, "r");
  if (f) {
    fseek(f, 0, SEEK_END);
    tcsize = ftell(f);
    fclose(f);
  }
  unlink(tcout);
  uint64_t our_total = our_rd + our_ov + our_dr, tc_total = tc_rd + tc_ov + tc_dr;
  printf("nice=%d offered=%.0f issued=%llu secs=%.2f buffer_kb=%u etwd_read=%llu etwd_lost=%llu etwd_loss_pct=%.3f "
         "hub_produced=%llu sub_delivered=%llu sub_dropped=%llu json_MBps=%.1f "
         "tc_read=%llu tc_lost=%llu tc_loss_pct=%.3f tc_file_MB=%.1f etwd_rate=%.0f tc_rate=%.0f\n",
         etw_linux_reader_nice(), rate, (unsigned long long)issued, dt, bkb, (unsigned long long)our_rd, (unsigned long long)(our_ov + our_dr),
         our_total ? 100.0 * (double)(our_ov + our_dr) / (double)our_total : 0.0,
         (unsigned long long)hs.produced, (unsigned long long)ss.delivered,
         (unsigned long long)ss.dropped, (double)g_sub_bytes / dt / 1e6, (unsigned long long)tc_rd,
         (unsigned long long)(tc_ov + tc_dr),
         tc_total ? 100.0 * (double)(tc_ov + tc_dr) / (double)tc_total : 0.0, (double)tcsize / 1e6,
         (double)our_rd / dt, (double)tc_rd / dt);
  (void)bs;
  bench_close(&b);
  return 0;
}
