/* linux_comm.c — the comm (Execution.ProcessName) of a task as of an event's time.
 *
 * One table per realtime session (struct lx_comm), shared by its reader threads: tid → the
 * comm changes the kernel itself reported, each with its trace time — task:task_newtask and
 * sched:sched_process_fork (a new task: its comm at birth), task:task_rename (exec and
 * PR_SET_NAME: every comm change goes through it), sched:sched_process_exec (the basename of
 * the file). Each reader records what it decodes, in its CPU's event order; a lookup answers
 * for one time: the last change at or before it, or, before the first change recorded, the old
 * comm of that change (a rename's oldcomm).
 *
 * Readers decode their CPUs independently, so a change made on another CPU may not be recorded
 * yet when a reader needs it. Each reader publishes `applied[cpu]`: the trace time up to which
 * everything of its CPU is decoded (and so recorded). A lookup at time t is complete once every
 * reader has applied t (lx_comm_horizon); lx_comm_wait waits for that, briefly (LX_COMM_WAIT_NS,
 * and LX_COMM_WAIT_BUDGET per second per reader),
 * waking the readers that are behind (each polls its `wake[cpu]` eventfd beside its buffer) so
 * that they read their CPU at once instead of at their next 20 ms tick.
 *
 * Bounds: LX_COMM_SLOTS slots (direct-mapped by tid; a slot taken by another tid forgets the
 * old one: counted in `evicted`) of LX_COMM_HIST changes each (the oldest dropped first).
 * Threads: one mutex for the slots (writes are rare: a fork, exec or rename); `seq` (per slot,
 * bumped on every change) and `applied` are atomics read without it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "linux/linux_int.h"

struct lx_comm *lx_comm_new(int ncpu) {
  struct lx_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->ncpu = ncpu;
  c->slot = calloc(LX_COMM_SLOTS, sizeof *c->slot);
  c->applied = calloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof *c->applied);
  c->wake = malloc((size_t)(ncpu > 0 ? ncpu : 1) * sizeof *c->wake);
  for (int i = 0; c->wake && i < ncpu; i++) c->wake[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!c->slot || !c->applied || !c->wake) {
    lx_comm_free(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  c->mu_ok = 1;
  return c;
}

void lx_comm_free(struct lx_comm *c) {
  if (!c) return;
  if (c->mu_ok) pthread_mutex_destroy(&c->mu);
  for (int i = 0; c->wake && i < c->ncpu; i++)
    if (c->wake[i] >= 0) close(c->wake[i]);
  free(c->wake);
  free(c->slot);
  free((void *)c->applied);
  free(c);
}

/* @s (up to 16 bytes, NUL-terminated or not) as a 16-byte comm, NUL-padded */
static void comm16(char out[16], const char *s, size_t max) {
  size_t n = strnlen(s, max < 15 ? max : 15);
  memcpy(out, s, n);
  memset(out + n, 0, 16 - n);
}

void lx_comm_set(struct lx_comm *c, int32_t tid, uint64_t ts, const char *comm, size_t max,
                 const char *old, int birth) {
  if (!c || tid <= 0) return;
  char cm[16];
  comm16(cm, comm, max);
  if (!cm[0]) return;
  uint32_t i = (uint32_t)tid & (LX_COMM_SLOTS - 1);
  struct lx_comm_slot *e = &c->slot[i];
  pthread_mutex_lock(&c->mu);
  if (e->tid != tid) {
    if (e->tid) c->evicted++;
    memset(e, 0, sizeof *e);
    e->tid = tid;
  }
  uint32_t k = e->n; /* the changes stay sorted by time: insert after every one at or before ts */
  while (k > 0 && e->h[k - 1].ts > ts) k--;
  if (!(k > 0 && e->h[k - 1].ts == ts && !memcmp(e->h[k - 1].comm, cm, 16))) {
    if (e->n == LX_COMM_HIST) { /* full: the oldest goes (an insert before it: nothing to do) */
      if (k == 0) goto out;
      memmove(&e->h[0], &e->h[1], (LX_COMM_HIST - 1) * sizeof e->h[0]);
      e->n--;
      k--;
      e->old[0] = 0; /* its oldcomm described the time before it */
    }
    memmove(&e->h[k + 1], &e->h[k], (e->n - k) * sizeof e->h[0]);
    e->h[k].ts = ts;
    memcpy(e->h[k].comm, cm, 16);
    e->h[k].birth = (uint8_t)(birth != 0);
    e->n++;
    if (k == 0) { /* the first change known: what was before it */
      if (old && !birth) comm16(e->old, old, 16);
      else e->old[0] = 0;
    }
    c->changes++;
    atomic_fetch_add_explicit(&c->seq[i], 1, memory_order_release);
  }
out:
  pthread_mutex_unlock(&c->mu);
}

int lx_comm_get(struct lx_comm *c, int32_t tid, uint64_t ts, char out[16], uint64_t *when) {
  out[0] = 0;
  *when = 0;
  if (!c || tid <= 0) return LX_COMM_UNKNOWN;
  struct lx_comm_slot *e = &c->slot[(uint32_t)tid & (LX_COMM_SLOTS - 1)];
  int r = LX_COMM_UNKNOWN;
  pthread_mutex_lock(&c->mu);
  if (e->tid == tid && e->n) {
    uint32_t k = e->n;
    while (k > 0 && e->h[k - 1].ts > ts) k--;
    if (k > 0) {
      memcpy(out, e->h[k - 1].comm, 16);
      *when = e->h[k - 1].ts;
      r = e->h[k - 1].birth ? LX_COMM_BORN : LX_COMM_KNOWN;
    } else if (e->old[0]) { /* before the first change: its oldcomm */
      memcpy(out, e->old, 16);
      r = LX_COMM_KNOWN;
    } else {
      r = e->h[0].birth ? LX_COMM_UNKNOWN : LX_COMM_LATER; /* changed after ts: not /proc's */
    }
  }
  pthread_mutex_unlock(&c->mu);
  return r;
}

void lx_comm_applied(struct lx_comm *c, int cpu, uint64_t ts) {
  if (!c || cpu < 0 || cpu >= c->ncpu) return;
  if (ts > atomic_load_explicit(&c->applied[cpu], memory_order_relaxed))
    atomic_store_explicit(&c->applied[cpu], ts, memory_order_release);
}

uint64_t lx_comm_horizon(struct lx_comm *c, int cpu) {
  uint64_t h = UINT64_MAX;
  for (int i = 0; i < c->ncpu; i++) {
    if (i == cpu) continue;
    uint64_t a = atomic_load_explicit(&c->applied[i], memory_order_acquire);
    if (a < h) h = a;
  }
  return h;
}

/* wake the readers that have not applied @ts yet */
static void poke(struct lx_comm *c, int cpu, uint64_t ts) {
  for (int i = 0; i < c->ncpu; i++) {
    if (i == cpu || c->wake[i] < 0 ||
        atomic_load_explicit(&c->applied[i], memory_order_acquire) >= ts)
      continue;
    uint64_t one = 1;
    if (write(c->wake[i], &one, sizeof one) < 0) { /* full (never in practice): awake anyway */
    }
  }
}

int lx_comm_wait(struct lx_comm *c, int cpu, uint64_t ts, int64_t max_ns, int64_t *waited) {
  *waited = 0;
  if (!c) return 1;
  if (lx_comm_horizon(c, cpu) >= ts) return 1;
  /* this reader has decoded everything before ts: so two readers never wait for each other */
  if (ts) lx_comm_applied(c, cpu, ts - 1);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  atomic_fetch_add_explicit(&c->waits, 1, memory_order_relaxed);
  for (int k = 0;; k++) {
    if (k % 5 == 0) poke(c, cpu, ts); /* again every ~1 ms: a reader keeps 1 ms of margin */
    struct timespec nap = {0, 200000};
    nanosleep(&nap, NULL);
    int ok = lx_comm_horizon(c, cpu) >= ts;
    clock_gettime(CLOCK_MONOTONIC, &now);
    *waited = (int64_t)(now.tv_sec - t0.tv_sec) * 1000000000LL + (now.tv_nsec - t0.tv_nsec);
    if (ok) return 1;
    if (*waited >= max_ns) {
      atomic_fetch_add_explicit(&c->wait_timeouts, 1, memory_order_relaxed);
      return 0;
    }
  }
}
