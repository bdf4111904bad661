/* bench_linux_decode.c — cost of the Linux backend's decode + encode, per event.
 *
 * Captures real ring-buffer pages from a throwaway tracefs instance (raw_syscalls:sys_enter and
 * sched:sched_switch/sched_process_exec under a getppid loop and a few execs), then decodes them
 * with lx_dec_page (kbuffer walk + generic field decode + JSON into etw_batch) as the reader
 * threads do, and prints events, bytes and ns/event. For instructions per event run it under
 * callgrind (bench/bench_linux_callgrind.sh): lx_dec_page is the only collected function.
 *
 * usage: bench_linux_decode [repeats] [pages] [event]   (root; tracefs is mounted if needed)
 *   env LX_BENCH_PAGES=file  reuse the pages saved there (captured and saved on the first run)
 *   env LX_BENCH_DUMP=file   write every event's JSON there, one a line, before measuring
 *   env LX_BENCH_T0=ns       shift the timestamps so that the first record is at this UTC ns
 *   env LX_BENCH_TGID=0      ProcessID = ThreadID (no /proc lookups: the captured tasks are gone
 *                            and their ids may be reused, so lookups make dumps irreproducible)
 *   event: only decode records of that tracepoint (e.g. sys_enter, sched_switch); callgrind
 *   collects the function `measured` only, which decodes exactly the printed number of events.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>
#include <tracefs.h>

#include "etwcore/backend.h"
#include "linux/linux_int.h"

static uint64_t g_events, g_bytes;
static FILE *g_dump; /* LX_BENCH_DUMP: every event's JSON, one a line (A/B byte comparisons) */

static void dump_batch(const struct etw_batch *b) {
  for (uint32_t i = 0; g_dump && i < b->n; i++) {
    fwrite(b->data.buf + b->ev[i].off, 1, b->ev[i].len, g_dump);
    fputc('\n', g_dump);
  }
}

static void flush(void *ctx, struct lx_sink *s) {
  (void)ctx;
  g_bytes += s->b->data.len;
  dump_batch(s->b);
  etw_batch_unref(s->b);
  s->b = etw_batch_new(512, 256 * 1024);
  etw_jw_reserve(&s->b->data, 128 * 1024); /* as the reader threads do */
}

struct rec {
  unsigned char *data;
  uint32_t size;
  uint64_t ts;
};

__attribute__((noinline)) uint64_t measured(struct lx_dec *d, struct rec *r, size_t n,
                                            struct lx_sink *s);
__attribute__((noinline)) uint64_t measured(struct lx_dec *d, struct rec *r, size_t n,
                                            struct lx_sink *s) {
  for (size_t i = 0; i < n; i++) lx_dec_event(d, r[i].data, r[i].size, r[i].ts, s);
  return n;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 20;
  int maxpages = argc > 2 ? atoi(argv[2]) : 2048;
  struct etw_status st;
  if (etw_backend_linux.init(&st)) {
    fprintf(stderr, "init: %s\n", st.msg);
    return 1;
  }
  int ps = getpagesize();
  unsigned char *pages = malloc((size_t)maxpages * (size_t)ps);
  int np = 0;
  /* LX_BENCH_PAGES=file: reuse the pages saved there (A/B comparisons on identical input) */
  const char *pf = getenv("LX_BENCH_PAGES");
  FILE *in_f = pf ? fopen(pf, "rb") : NULL;
  if (in_f) {
    np = (int)fread(pages, (size_t)ps, (size_t)maxpages, in_f);
    fclose(in_f);
    goto decode;
  }
  char name[64];
  snprintf(name, sizeof name, "%sbench_%d", ETW_SESSION_PREFIX, (int)getpid());
  struct tracefs_instance *in = tracefs_instance_create(name);
  if (!in) {
    perror("instance");
    return 1;
  }
  tracefs_instance_set_buffer_size(in, 16384, -1);
  tracefs_event_enable(in, "raw_syscalls", "sys_enter");
  tracefs_event_enable(in, "sched", "sched_switch");
  tracefs_event_enable(in, "sched", "sched_process_exec");
  tracefs_trace_on(in);
  pid_t pid = fork();
  if (pid == 0) {
    for (int k = 0; k < 20; k++) {
      for (int i = 0; i < 5000; i++) syscall(SYS_getppid);
      if (fork() == 0) {
        execl("/bin/true", "/bin/true", (char *)NULL);
        _exit(1);
      }
      wait(NULL);
    }
    _exit(0);
  }
  waitpid(pid, NULL, 0);
  tracefs_trace_off(in);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  for (int c = 0; c < ncpu && np < maxpages; c++) {
    struct tracefs_cpu *tc = tracefs_cpu_open(in, c, true);
    if (!tc) continue;
    while (np < maxpages) {
      memset(pages + (size_t)np * (size_t)ps, 0, (size_t)ps);
      if (tracefs_cpu_read(tc, pages + (size_t)np * (size_t)ps, true) <= 0) break;
      np++;
    }
    tracefs_cpu_close(tc);
  }
  tracefs_instance_destroy(in);
  tracefs_instance_free(in);
  if (pf) {
    FILE *out_f = fopen(pf, "wb");
    if (out_f) {
      fwrite(pages, (size_t)ps, (size_t)np, out_f);
      fclose(out_f);
    }
  }
decode:;

  const char *systems[] = {"raw_syscalls", "sched", NULL};
  const char *only = argc > 3 ? argv[3] : NULL;
  struct tep_handle *tep = lx_tep_new(systems);
  struct lx_dec d;
  lx_dec_init(&d, tep, 0, 1763776000LL * 1000000000LL);
  /* records of the pages (kbuffer), optionally of one event only */
  size_t nrec = 0, caprec = 1024;
  struct rec *recs = malloc(caprec * sizeof *recs);
  struct kbuffer *kb = tep_kbuffer(tep);
  for (int i = 0; i < np; i++) {
    unsigned long long ts;
    kbuffer_load_subbuffer(kb, pages + (size_t)i * (size_t)ps);
    for (void *ev = kbuffer_read_event(kb, &ts); ev; ev = kbuffer_next_event(kb, &ts)) {
      int sz = kbuffer_event_size(kb);
      if (sz < 8) continue;
      uint16_t type;
      memcpy(&type, ev, 2);
      struct tep_event *te = tep_find_event(tep, type);
      if (only && (!te || strcmp(te->name, only))) continue;
      if (nrec == caprec) recs = realloc(recs, (caprec *= 2) * sizeof *recs);
      recs[nrec++] = (struct rec){ev, (uint32_t)sz, ts};
    }
  }
  /* LX_BENCH_T0=<UTC ns>: the first record's TimeCreated (time-formatter rollover checks) */
  const char *t0s = getenv("LX_BENCH_T0");
  if (t0s && *t0s && nrec) d.mono_to_real = strtoll(t0s, NULL, 10) - (int64_t)recs[0].ts;
  const char *tg = getenv("LX_BENCH_TGID");
  if (tg && !strcmp(tg, "0")) d.resolve_tgid = 0;
  struct lx_sink s = {.b = etw_batch_new(512, 256 * 1024), .flush = flush};
  etw_jw_reserve(&s.b->data, 128 * 1024);
  for (size_t i = 0; i < nrec && i < 64; i++) /* build the descriptors (not measured) */
    lx_dec_event(&d, recs[i].data, recs[i].size, recs[i].ts, &s);
  const char *dump = getenv("LX_BENCH_DUMP");
  if (dump) { /* one pass over every record, written out, before the measured runs */
    g_dump = fopen(dump, "w");
    measured(&d, recs, nrec, &s);
    dump_batch(s.b);
    s.b->n = 0;
    s.b->data.len = 0;
    if (g_dump) fclose(g_dump);
    g_dump = NULL;
  }
  g_events = g_bytes = 0;
  double t0 = now();
  for (int r = 0; r < repeats; r++) g_events += measured(&d, recs, nrec, &s);
  double dt = now() - t0;
  g_bytes += s.b->data.len;
  uint64_t calls = g_events;
  printf("event=%s pages=%d events=%llu measured_calls=%llu json_bytes=%llu bytes/event=%.1f "
         "ns/event=%.1f Mev/s=%.2f undecoded=%llu\n",
         only ? only : "all", np, (unsigned long long)g_events, (unsigned long long)calls,
         (unsigned long long)g_bytes, g_events ? (double)g_bytes / (double)g_events : 0.0,
         g_events ? dt * 1e9 / (double)g_events : 0.0, g_events ? (double)g_events / dt / 1e6 : 0.0,
         (unsigned long long)atomic_load(&d.undecoded));
  /* the whole page path too (direct walker + decode), for ns/event */
  uint64_t pe = 0;
  t0 = now();
  for (int r = 0; r < (only ? 0 : repeats); r++)
    for (int i = 0; i < np; i++) pe += lx_dec_page(&d, pages + (size_t)i * (size_t)ps, &s);
  dt = now() - t0;
  if (pe) printf("page path: events=%llu ns/event=%.1f\n", (unsigned long long)pe, dt * 1e9 / (double)pe);
  free(recs);
  kbuffer_free(kb);
  etw_batch_unref(s.b);
  lx_dec_fini(&d);
  free(pages);
  return 0;
}
