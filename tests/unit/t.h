/* t.h — the tiny assertion kit of the unit tests: CHECK records a failure and goes on,
 * T_DONE() returns the exit code. No framework, no dependency. */
#ifndef ETWD_T_H
#define ETWD_T_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int t_failures;
#define CHECK(c)                                                           \
  do {                                                                     \
    if (!(c)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      t_failures++;                                                        \
    }                                                                      \
  } while (0)
#define CHECK_STR(a, b)                                                               \
  do {                                                                                \
    const char *a_ = (a), *b_ = (b);                                                  \
    if (!a_ || !b_ || strcmp(a_, b_)) {                                               \
      fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:  %s\n  want: %s\n", __FILE__, \
              __LINE__, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                      \
      t_failures++;                                                                   \
    }                                                                                 \
  } while (0)
#define CHECK_EQ(a, b)                                                                     \
  do {                                                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);                                    \
    if (a_ != b_) {                                                                        \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, want %lld\n", __FILE__, __LINE__, \
              #a, a_, b_);                                                                 \
      t_failures++;                                                                        \
    }                                                                                      \
  } while (0)
#define T_DONE()                                                     \
  do {                                                               \
    if (t_failures) fprintf(stderr, "%d check(s) failed\n", t_failures); \
    return t_failures ? 1 : 0;                                       \
  } while (0)
#endif
