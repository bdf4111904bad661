/* signals.h — what server/main.c needs of POSIX signals on Windows (server/win/signals.c), and
 * `etwd service` (service.c). Included by main.c and service.c in Windows builds only.
 *  - sigemptyset/sigaddset/sigwait: sigwait waits for Ctrl+C, Ctrl+Break, console close,
 *    log-off/shutdown or a service stop and reports SIGINT/SIGTERM */
#ifndef ETWD_WIN_SIGNALS_H
#define ETWD_WIN_SIGNALS_H
#ifdef _WIN32

#include <pthread.h>
#include <signal.h>

/* ---- signals: main.c blocks SIGINT/SIGTERM and takes them with sigwait */
#ifndef _POSIX
typedef _sigset_t sigset_t;
#endif
static inline int etwd_sigemptyset(sigset_t *set) {
  *set = 0;
  return 0;
}
static inline int etwd_sigaddset(sigset_t *set, int sig) {
  *set |= (sigset_t)1 << sig;
  return 0;
}
#define sigemptyset etwd_sigemptyset
#define sigaddset etwd_sigaddset
#undef sigwait
int etwd_win_sigwait(const sigset_t *set, int *sig);
#define sigwait(set, sig) etwd_win_sigwait((set), (sig))

/* ---- `etwd service`: main() hands over to the Service Control Manager (server/win/service.c) */
int etwd_win_service(int argc, char **argv, int (*real_main)(int, char **));

/** etwd_win_request_stop - make sigwait return @sig (the service's stop handler). */
void etwd_win_request_stop(int sig);

#endif /* _WIN32 */
#endif
