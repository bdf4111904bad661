/* test_folded.c — collapsed-stack aggregation (etwcore/src/folded.c): frame names, root-first
 * order, counts, sorting, events without a top-level Stack, and the bounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etwcore/folded.h"
#include "t.h"

static char *run(struct etw_folded *f) {
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  CHECK(etw_folded_write(f, m) == 0);
  fclose(m);
  return buf;
}

int main(void) {
  struct etw_folded *f = etw_folded_new(0, 0);
  /* a Linux event: kernel frames, then user frames, innermost first (as the backend writes it) */
  const char *lx =
      "\"System\":{\"Provider\":{\"Name\":\"raw_syscalls\"}},\"EventData\":{\"id\":110},\"Stack\":["
      "{\"Address\":\"0xffffffff821ef81a\",\"Module\":\"kernel\",\"Symbol\":\"do_syscall_64\",\"Offset\":506},"
      "{\"Address\":\"0x55c7a24c4168\",\"Module\":\"prog\",\"Symbol\":\"inner\",\"Offset\":31},"
      "{\"Address\":\"0x55c7a24c41f4\",\"Module\":\"prog\",\"Symbol\":\"main\",\"Offset\":83},"
      "{\"Address\":\"0x7fc52fc1624a\",\"Module\":\"libc.so.6\",\"Offset\":160330},"
      "{\"Address\":\"0x1000\"}]}";
  CHECK_EQ(etw_folded_add(f, lx, strlen(lx)), 1);
  CHECK_EQ(etw_folded_add(f, lx, strlen(lx)), 1);
  /* a whole object, names that the format cannot hold, bare-address frames */
  const char *odd = "{\"seq\":3,\"System\":{},\"Stack\":[{\"Symbol\":\"a;b c\"},\"0x42\"]}";
  CHECK_EQ(etw_folded_add(f, odd, strlen(odd)), 1);
  /* no Stack, an empty one, and a "Stack" inside EventData (not the event's): not counted */
  const char *none = "\"System\":{},\"EventData\":{\"x\":1}}";
  const char *empty = "\"System\":{},\"EventData\":{},\"Stack\":[]}";
  const char *nested = "\"System\":{},\"EventData\":{\"Stack\":[\"0x1\",\"0x2\"]}}";
  CHECK_EQ(etw_folded_add(f, none, strlen(none)), 0);
  CHECK_EQ(etw_folded_add(f, empty, strlen(empty)), 0);
  CHECK_EQ(etw_folded_add(f, nested, strlen(nested)), 0);
  char *out = run(f);
  CHECK_STR(out, "0x1000;libc.so.6+0x2724a;prog!main;prog!inner;kernel!do_syscall_64 2\n"
                 "0x42;a_b_c 1\n");
  free(out);
  uint64_t ev, st, dr;
  etw_folded_stats(f, &ev, &st, &dr);
  CHECK_EQ(ev, 3);
  CHECK_EQ(st, 2);
  CHECK_EQ(dr, 0);
  etw_folded_free(f);
  /* bounds: one distinct stack; the second is dropped and counted, the first still counts */
  f = etw_folded_new(1, 0);
  CHECK_EQ(etw_folded_add(f, lx, strlen(lx)), 1);
  CHECK_EQ(etw_folded_add(f, odd, strlen(odd)), -1);
  CHECK_EQ(etw_folded_add(f, lx, strlen(lx)), 1);
  etw_folded_stats(f, &ev, &st, &dr);
  CHECK(ev == 2 && st == 1 && dr == 1);
  etw_folded_free(f);
  /* many distinct stacks: the table grows and every one is kept */
  f = etw_folded_new(0, 0);
  char ev_txt[128];
  for (int i = 0; i < 5000; i++) {
    int n = snprintf(ev_txt, sizeof ev_txt, "\"System\":{},\"Stack\":[{\"Symbol\":\"f%d\"},{\"Symbol\":\"main\"}]}", i % 2500);
    CHECK_EQ(etw_folded_add(f, ev_txt, (size_t)n), 1);
  }
  etw_folded_stats(f, &ev, &st, &dr);
  CHECK(ev == 5000 && st == 2500 && dr == 0);
  out = run(f);
  CHECK(strncmp(out, "main;f0 2\nmain;f1 2\nmain;f10 2\n", 31) == 0);
  free(out);
  etw_folded_free(f);
  T_DONE();
}
