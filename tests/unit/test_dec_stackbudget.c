/* test_dec_stackbudget.c — the process-wide budget of the stack indexes (dec_stack.c,
 * `--stack-index-mb`): an index stops growing when its reservation is refused, what it could not
 * keep is counted (its own counts and the process-wide ones), the walks kept before still attach,
 * later events get no stack, and everything it held goes back when it is freed; and two indexes of
 * different sizes learnt on two threads at once (a replay's passes) each sort their own walks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec_stack.h"
#include "t.h"

static struct etw_rec kernel(uint16_t hook, const unsigned char *u, uint32_t n) {
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_SYSTEM;
  r.ptr_size = 8;
  r.hook_id = hook;
  r.desc.opcode = (uint8_t)(hook & 255);
  r.desc.version = 2;
  r.tid = r.pid = 0xFFFFFFFFu;
  r.user_data = u;
  r.user_len = n;
  return r;
}

/* StackWalk/Stack (0x1820) of the event at @ts on thread @tid: 4 user frames from @fr */
static void walk(struct etw_stk *k, uint64_t ts, uint32_t tid, uint64_t fr) {
  unsigned char u[16 + 4 * 8];
  uint32_t pid = 7;
  memcpy(u, &ts, 8);
  memcpy(u + 8, &pid, 4);
  memcpy(u + 12, &tid, 4);
  for (int i = 0; i < 4; i++) {
    uint64_t a = fr + (uint64_t)i;
    memcpy(u + 16 + 8 * i, &a, 8);
  }
  struct etw_rec r = kernel(0x1820, u, sizeof u);
  etw_stk_learn(k, &r);
}

/* the events at @ts0 .. @ts0 + @n - 1 (thread @tid) in time order: how many got a Stack; the
 * first one without, in *@first_none */
static uint32_t attach_all(struct etw_stk *k, uint64_t ts0, uint32_t n, uint32_t tid, uint32_t *first_none) {
  struct etw_rec ev = kernel(0x0301, NULL, 0); /* Process/Start */
  ev.tid = tid;
  ev.pid = 7;
  uint32_t got = 0;
  *first_none = n;
  struct etw_jw w;
  etw_jw_init(&w, 1 << 16);
  for (uint32_t i = 0; i < n; i++) {
    ev.timestamp = (int64_t)(ts0 + i);
    etw_jw_truncate(&w, 0);
    etw_jw_lit(&w, "{}");
    int rc = etw_stk_attach(k, &ev, &w);
    if (rc == 1) got++;
    else if (*first_none == n) *first_none = i;
  }
  etw_jw_free(&w);
  return got;
}

static void budget(void) {
  struct etw_stk_budget b0, b;
  etw_stk_budget_get(&b0);
  CHECK_EQ(b0.limit, (uint64_t)ETW_STK_BUDGET_DEFAULT_MB << 20);
  etw_stk_budget_set(256 << 10);
  struct etw_stk *k = etw_stk_new(1);
  enum { N = 20000 };
  for (uint32_t i = 0; i < N; i++) walk(k, 1000 + i, 5, 0x10000 + 16 * (uint64_t)i);
  etw_stk_learn_end(k);
  struct etw_stk_counts c;
  etw_stk_counts(k, &c);
  CHECK_EQ(c.walks, N);
  CHECK(c.dropped > 0 && c.dropped < N);
  etw_stk_budget_get(&b);
  CHECK(b.used <= 256 << 10 && b.used > b0.used);
  CHECK(b.peak >= b.used && b.peak <= 256 << 10);
  CHECK_EQ(b.refused, b0.refused + 1); /* one refusal: the index grows no more */
  CHECK_EQ(b.walks_dropped, b0.walks_dropped + c.dropped);
  /* the walks kept (the first ones) attach; every later event goes without */
  uint32_t first_none, got = attach_all(k, 1000, N, 5, &first_none);
  CHECK_EQ(got, N - c.dropped);
  CHECK_EQ(first_none, N - c.dropped);
  etw_stk_counts(k, &c);
  CHECK_EQ(c.attached, N - c.dropped);
  CHECK_EQ(c.unattached, c.dropped);
  /* another index meanwhile: refused at once beyond its first tables, counted */
  struct etw_stk *k2 = etw_stk_new(1);
  for (uint32_t i = 0; i < 300; i++) walk(k2, 5000 + i, 6, 0x90000);
  etw_stk_learn_end(k2);
  struct etw_stk_counts c2;
  etw_stk_counts(k2, &c2);
  CHECK_EQ(c2.dropped, 300);
  etw_stk_free(k2);
  etw_stk_free(k);
  etw_stk_budget_get(&b);
  CHECK_EQ(b.used, b0.used); /* all given back */
  /* with the default budget the same walks all attach */
  etw_stk_budget_set((uint64_t)ETW_STK_BUDGET_DEFAULT_MB << 20);
  k = etw_stk_new(1);
  for (uint32_t i = 0; i < N; i++) walk(k, 1000 + i, 5, 0x10000 + 16 * (uint64_t)i);
  etw_stk_learn_end(k);
  CHECK_EQ(attach_all(k, 1000, N, 5, &first_none), N);
  etw_stk_counts(k, &c);
  CHECK_EQ(c.dropped, 0);
  etw_stk_free(k);
}

/* one thread: @n walks learnt in reverse time order (the sort has work), sorted, attached —
 * 20 times, or (@until) until that thread is done; the rounds in which not every event got its
 * stack */
struct job {
  uint32_t n, tid;
  int bad;
  _Atomic int done, *until;
};

static void *learner(void *arg) {
  struct job *j = arg;
  for (int round = 0; j->until ? !atomic_load(j->until) : round < 20; round++) {
    struct etw_stk *k = etw_stk_new(1);
    for (uint32_t i = j->n; i-- > 0;) walk(k, 1000 + i, j->tid, 0x20000 + 16 * (uint64_t)i);
    etw_stk_learn_end(k);
    uint32_t first_none;
    if (attach_all(k, 1000, j->n, j->tid, &first_none) != j->n) j->bad++;
    etw_stk_free(k);
  }
  atomic_store(&j->done, 1);
  return NULL;
}

static void two_threads(void) {
  struct job big = {20000, 11, 0, 0, NULL}, small = {3, 12, 0, 0, &big.done};
  pthread_t a, b;
  CHECK_EQ(pthread_create(&a, NULL, learner, &big), 0);
  CHECK_EQ(pthread_create(&b, NULL, learner, &small), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CHECK_EQ(big.bad, 0);
  CHECK_EQ(small.bad, 0);
}

int main(void) {
  budget();
  two_threads();
  T_DONE();
}
