/* signals.c — SIGINT/SIGTERM for Windows builds (server/win/signals.h): main() blocks them and
 * takes them with sigwait, which here waits for Ctrl+C, Ctrl+Break, console close, log-off or
 * shutdown, or a service stop (service.c). The server's only: compiled into etwdsrv. */
#ifdef _WIN32
#include <windows.h>

#include <stdatomic.h>

#include "win/signals.h"

/* ---- stop requests: the console handler runs on a system thread; it sets the event and
 * returns TRUE so the process is not killed before main() has stopped every ETW session. */
static HANDLE g_stop_ev;
static atomic_int g_stop_sig;

static BOOL WINAPI console_handler(DWORD type) {
  int sig = type == CTRL_C_EVENT ? SIGINT : SIGTERM;
  atomic_store(&g_stop_sig, sig);
  if (g_stop_ev) SetEvent(g_stop_ev);
  if (type == CTRL_CLOSE_EVENT || type == CTRL_LOGOFF_EVENT || type == CTRL_SHUTDOWN_EVENT)
    Sleep(5000); /* the system ends the process when we return: give main() time to clean up */
  return TRUE;
}

__attribute__((constructor)) static void signals_init(void) {
  g_stop_ev = CreateEventW(NULL, TRUE, FALSE, NULL);
  SetConsoleCtrlHandler(console_handler, TRUE);
}

void etwd_win_request_stop(int sig) { /* used by the service control handler */
  atomic_store(&g_stop_sig, sig);
  if (g_stop_ev) SetEvent(g_stop_ev);
}

int etwd_win_sigwait(const sigset_t *set, int *sig) {
  (void)set;
  if (!g_stop_ev) return EINVAL;
  WaitForSingleObject(g_stop_ev, INFINITE);
  *sig = atomic_load(&g_stop_sig);
  return 0;
}

#endif
