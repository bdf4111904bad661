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

#include "etwcore/backend.h"
#include "etwcore/hub.h"
#include "etwcore/linux.h"

static const struct etw_backend *B = &etw_backend_linux;
static volatile int g_sub_stop;
static uint64_t g_sub_records, g_sub_bytes;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sub_main(void *arg) {
  struct etw_sub *sub = arg;
  struct etw_jw w;
  etw_jw_init(&w, 4u << 20);
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
  double t0 = now(), end = t0 + secs;
  uint64_t done = 0;
  if (per_s <= 0) {
    while (now() < end) {
      for (int i = 0; i < 1000; i++) syscall(SYS_getppid);
      done += 1000;
    }
    load_done(done);
  }
  for (;;) {
    double t = now();
    if (t >= end) break;
    uint64_t due = (uint64_t)((t - t0) * per_s);
    while (done < due) {
      syscall(SYS_getppid);
      done++;
    }
  }
  load_done(done);
}

static void inst_stats(const char *inst, uint64_t *ov, uint64_t *dr, uint64_t *rd) {
  *ov = *dr = *rd = 0;
  for (int cpu = 0; cpu < 256; cpu++) {
    char p[256], line[256];
    snprintf(p, sizeof p, "%s/instances/%s/per_cpu/cpu%d/stats", "/sys/kernel/tracing", inst, cpu);
    FILE *f = fopen(p, "r");
    if (!f) break;
    while (fgets(line, sizeof line, f)) {
      unsigned long long v;
      if (sscanf(line, "overrun: %llu", &v) == 1) *ov += v;
      else if (sscanf(line, "dropped events: %llu", &v) == 1) *dr += v;
      else if (sscanf(line, "read events: %llu", &v) == 1) *rd += v;
    }
    fclose(f);
  }
}

int main(int argc, char **argv) {
  double rate = argc > 1 ? atof(argv[1]) : 0;
  double secs = argc > 2 ? atof(argv[2]) : 3;
  unsigned bkb = argc > 3 ? (unsigned)atoi(argv[3]) : 4096;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (argc > 4) etw_linux_set_reader_nice(atoi(argv[4]));
  if (argc > 5) etw_linux_set_reader_pinning(atoi(argv[5]));
  struct etw_status st;
  if (B->init(&st)) {
    fprintf(stderr, "init: %s\n", st.msg);
    return 1;
  }
  char *evs[] = {"sys_enter"};
  struct etw_provider_spec p = {.name = "raw_syscalls", .events = evs, .n_events = 1, .level = 5};
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1, .buffer_kb = bkb};
  struct etw_hub_limits lim = {.replay_max_bytes = 0, .sub_queue_events = 1u << 20,
                               .max_subscribers = 2};
  struct etw_hub *hub = etw_hub_new(&lim);
  int err;
  struct etw_sub *sub = etw_hub_subscribe(hub, NULL, 0, &err);
  char name[64];
  snprintf(name, sizeof name, "%srate_%d", ETW_SESSION_PREFIX, (int)getpid());
  struct etw_backend_args a = {.spec = &sp, .hub = hub, .os_name = name};
  void *s;
  if (B->open(&a, &s, &st)) {
    fprintf(stderr, "open: %s %s\n", st.field, st.msg);
    return 1;
  }
  pthread_t th;
  pthread_create(&th, NULL, sub_main, sub);
  B->start(s, &st);

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
  double t0 = now();
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
  double dt = now() - t0;
  int tcst = 0;
  waitpid(tc, &tcst, 0);
  B->stop(s);
  g_sub_stop = 1;
  etw_hub_end(hub);
  pthread_join(th, NULL);

  struct etw_backend_stats bs;
  B->stats(s, &bs);
  uint64_t our_ov, our_dr, our_rd;
  inst_stats(name, &our_ov, &our_dr, &our_rd);
  struct etw_hub_stats hs;
  etw_hub_stats(hub, &hs);
  struct etw_sub_stats ss;
  etw_sub_stats(sub, &ss);
  B->destroy(s);
  uint64_t tc_ov, tc_dr, tc_rd;
  inst_stats(tcinst, &tc_ov, &tc_dr, &tc_rd);
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
  etw_sub_close(sub);
  etw_hub_free(hub);
  return 0;
}
