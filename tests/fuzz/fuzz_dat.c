/* fuzz_dat.c — libFuzzer over lx_dat_check (etwcore/backends/linux/linux_datchk.c), the parser
 * that reads a trace.dat's header and CPU table before libtracecmd may see the file, and repairs
 * a copy of a file cut inside its CPU data. Input: the file's bytes (seeded with small v6 files
 * from tests/fuzz/seeds_dat/, made by tests/fuzz/make_dat_seeds.py).
 *
 * Checked besides ASan/UBSan: the answer is -1, 0 or 1; a message is a terminated string, given
 * exactly when the answer is not 0; a descriptor exactly when the answer is 1; and the repaired
 * copy is whole — checked again, it is answered 0 (a finding aborts). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "linux/linux_dat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void finding(const char *what, int ret, const char *msg) {
  fprintf(stderr, "fuzz_dat: %s (answer %d, message \"%s\")\n", what, ret, msg);
  abort();
}

/* lx_dat_check of the file open as @in: its answer; *@out the copy's descriptor */
static int check(int in, int *out, char *msg, size_t msglen) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", in);
  memset(msg, 'x', msglen); /* (an unterminated message shows) */
  int ret = lx_dat_check(path, out, msg, msglen);
  if (ret < -1 || ret > 1) finding("answer out of range", ret, "");
  if (!memchr(msg, 0, msglen) && ret) finding("message not terminated", ret, "");
  if ((ret == 1) != (*out >= 0)) finding("descriptor without repair or repair without descriptor", ret, msg);
  return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int in = memfd_create("fuzz_dat", MFD_CLOEXEC);
  if (in < 0) return 0;
  if (write(in, data, size) != (ssize_t)size) {
    close(in);
    return 0;
  }
  char msg[600], again[600];
  int out = -1, out2 = -1;
  int ret = check(in, &out, msg, sizeof msg);
  if (ret == 1) {
    int ret2 = check(out, &out2, again, sizeof again);
    if (ret2 != 0) finding("the repaired copy is not whole", ret2, again);
    close(out);
  }
  close(in);
  return 0;
}
