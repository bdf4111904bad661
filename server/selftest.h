/* selftest.h — `etwd selftest`: step-by-step check that tracing and HTTPS work here. */
#ifndef ETWD_SELFTEST_H
#define ETWD_SELFTEST_H

/** etwd_selftest_main - argv[0] is "selftest"; prints the steps (or --json); 0 if all passed,
 *  1 if a step failed, 2 on a usage error. Main thread, before any server is started. */
int etwd_selftest_main(int argc, char **argv);

#endif
