/* ro_heap.c — a binary min-heap of held batches for the hub's time order (see ro_heap.h). */
#include "ro_heap.h"

#include <stdlib.h>

static int less(const struct ro_ent *x, const struct ro_ent *y) {
  return x->ts < y->ts || (x->ts == y->ts && x->arrival < y->arrival);
}

static void swap(struct ro_ent *x, struct ro_ent *y) {
  struct ro_ent t = *x;
  *x = *y;
  *y = t;
}

static void sift_up(struct ro_heap *h, uint32_t i) {
  while (i && less(&h->a[i], &h->a[(i - 1) / 2])) {
    swap(&h->a[i], &h->a[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
}

static void sift_down(struct ro_heap *h, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && less(&h->a[l], &h->a[m])) m = l;
    if (r < h->n && less(&h->a[r], &h->a[m])) m = r;
    if (m == i) return;
    swap(&h->a[i], &h->a[m]);
    i = m;
  }
}

int ro_heap_push(struct ro_heap *h, struct etw_batch *b, uint32_t pos, uint64_t arrival) {
  if (h->n == h->cap) {
    uint32_t nc = h->cap ? h->cap * 2 : 32;
    struct ro_ent *a = realloc(h->a, nc * sizeof *a);
    if (!a) return -1;
    h->a = a;
    h->cap = nc;
  }
  h->a[h->n] = (struct ro_ent){b->ev[pos].ts_ns, arrival, b, pos};
  sift_up(h, h->n++);
  return 0;
}

struct etw_batch *ro_heap_next(struct ro_heap *h) {
  struct ro_ent *t = &h->a[0];
  struct etw_batch *done = NULL;
  if (++t->pos < t->b->n) {
    t->ts = t->b->ev[t->pos].ts_ns;
  } else {
    done = t->b;
    *t = h->a[--h->n];
  }
  if (h->n) sift_down(h, 0);
  return done;
}

void ro_heap_free(struct ro_heap *h) {
  free(h->a);
  h->a = NULL;
  h->n = h->cap = 0;
}
