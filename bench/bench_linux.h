/* bench_linux.h — the set-up the Linux live benchmarks share (bench_linux_rate.c,
 * bench_linux_stacks.c, bench_linux_latency.c): a realtime session of one provider feeding a hub
 * with one subscriber, a thread that drains that subscriber as a streaming client would, the
 * clock, and an instance's per-CPU ring-buffer stats. A header of static functions: every .c in
 * bench/ is a program of its own (bench/CMakeLists.txt). Single-threaded set-up; the drain thread
 * owns only its writer and the counters below, read by main after pthread_join. */
#ifndef ETWD_BENCH_LINUX_H
#define ETWD_BENCH_LINUX_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "etwcore/backend.h"
#include "etwcore/hub.h"

static const struct etw_backend *B = &etw_backend_linux;

/* the drain thread's counters (bench_drain_stop tells it to end once the hub has ended) */
__attribute__((unused)) static volatile int g_sub_stop;
__attribute__((unused)) static uint64_t g_sub_records, g_sub_bytes;

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* reads @arg (an etw_sub) as ndjson, 1 MiB at a time, counting records and bytes */
static inline void *bench_drain(void *arg) {
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

/* one open session: its hub, the hub's one subscriber, the backend's handle, the instance name */
struct bench_session {
  struct etw_hub *hub;
  struct etw_sub *sub;
  void *s;
  char name[64];
};

/* init the backend, open a realtime session of provider @p (@buffer_kb, 0 = the default) named
 * <prefix><tag>_<pid> on a new hub with one subscriber. Returns 0, or 1 having said why. The
 * caller starts its reader (bench_drain or its own) on b->sub, then B->start(b->s, ...). */
static inline int bench_open(struct bench_session *b, struct etw_provider_spec *p,
                             unsigned buffer_kb, const char *tag) {
  struct etw_status st;
  if (B->init(&st)) {
    fprintf(stderr, "init: %s\n", st.msg);
    return 1;
  }
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = p,
                                .n_providers = 1, .buffer_kb = buffer_kb};
  struct etw_hub_limits lim = {.replay_max_bytes = 0, .sub_queue_events = 1u << 20,
                               .max_subscribers = 2};
  b->hub = etw_hub_new(&lim);
  int err;
  b->sub = etw_hub_subscribe(b->hub, NULL, 0, &err);
  snprintf(b->name, sizeof b->name, "%s%s_%d", ETW_SESSION_PREFIX, tag, (int)getpid());
  struct etw_backend_args a = {.spec = &sp, .hub = b->hub, .os_name = b->name};
  if (B->open(&a, &b->s, &st)) {
    fprintf(stderr, "open: %s %s\n", st.field, st.msg);
    return 1;
  }
  return 0;
}

/* start the session, @reader (bench_drain or the bench's own) draining its subscriber */
static inline pthread_t bench_start(struct bench_session *b, void *(*reader)(void *)) {
  pthread_t th;
  struct etw_status st;
  pthread_create(&th, NULL, reader, b->sub);
  B->start(b->s, &st);
  return th;
}

/* stop the session, end the hub (the reader then reads the rest and ends) and join @reader */
static inline void bench_stop(struct bench_session *b, pthread_t reader) {
  B->stop(b->s);
  g_sub_stop = 1;
  etw_hub_end(b->hub);
  pthread_join(reader, NULL);
}

/* after B->destroy(b->s): the subscriber and the hub */
static inline void bench_close(struct bench_session *b) {
  etw_sub_close(b->sub);
  etw_hub_free(b->hub);
}

/* the sums over CPUs of tracefs instance @inst's per_cpu/cpuN/stats: overrun, dropped events,
 * read events */
static inline void bench_inst_stats(const char *inst, uint64_t *ov, uint64_t *dr, uint64_t *rd) {
  *ov = *dr = *rd = 0;
  for (int cpu = 0; cpu < 256; cpu++) {
    char p[256], line[256];
    snprintf(p, sizeof p, "/sys/kernel/tracing/instances/%s/per_cpu/cpu%d/stats", inst, cpu);
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

#endif
