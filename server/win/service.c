/* service.c — `etwd service run [OPTIONS]`: run as a Windows service under the Service Control
 * Manager (`etwd service install [OPTIONS]` registers that command line: svcctl.c, which also
 * has uninstall, start and stop; the older form `etwd service --option ...` still runs). The SCM
 * thread runs etwd's own main() with `serve OPTIONS`; a stop or shutdown request becomes the
 * same ordered stop as Ctrl+C (every ETW session etwd created is stopped). stdout/stderr go to
 * %ProgramData%\etwd\service.log (a service has no console). Windows builds only. */
#ifdef _WIN32
#include <windows.h>

#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "win/signals.h" /* etwd_win_request_stop (signals.c) */

#define MAX_ARGS 256

static int (*g_main)(int, char **);
static int g_argc, g_rc;
static char *g_argv[MAX_ARGS + 3];
static SERVICE_STATUS_HANDLE g_h;
static SERVICE_STATUS g_st;

static void report(DWORD state, int rc) {
  g_st.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
  g_st.dwCurrentState = state;
  g_st.dwControlsAccepted = state == SERVICE_RUNNING ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN : 0;
  g_st.dwWin32ExitCode = rc ? ERROR_SERVICE_SPECIFIC_ERROR : NO_ERROR;
  g_st.dwServiceSpecificExitCode = (DWORD)rc;
  g_st.dwWaitHint = state == SERVICE_STOP_PENDING ? 30000 : 0;
  if (g_h) SetServiceStatus(g_h, &g_st);
}

static DWORD WINAPI control(DWORD code, DWORD type, LPVOID data, LPVOID ctx) {
  (void)type, (void)data, (void)ctx;
  switch (code) {
    case SERVICE_CONTROL_STOP:
    case SERVICE_CONTROL_SHUTDOWN:
      report(SERVICE_STOP_PENDING, 0);
      etwd_win_request_stop(SIGTERM);
      return NO_ERROR;
    case SERVICE_CONTROL_INTERROGATE: return NO_ERROR;
    default: return ERROR_CALL_NOT_IMPLEMENTED;
  }
}

static void redirect_output(void) {
  const char *pd = getenv("ProgramData");
  char dir[600], path[700];
  snprintf(dir, sizeof dir, "%.580s\\etwd", pd && *pd ? pd : "C:\\ProgramData");
  CreateDirectoryA(dir, NULL);
  snprintf(path, sizeof path, "%s\\service.log", dir);
  int fd = _open(path, _O_WRONLY | _O_CREAT | _O_APPEND | _O_BINARY | _O_NOINHERIT, _S_IREAD | _S_IWRITE);
  if (fd < 0) return;
  _dup2(fd, 1);
  _dup2(fd, 2);
  _close(fd);
  setvbuf(stdout, NULL, _IONBF, 0);
}

static void WINAPI service_main(DWORD n, LPWSTR *args) {
  (void)n, (void)args;
  g_h = RegisterServiceCtrlHandlerExW(L"etwd", control, NULL);
  if (!g_h) return;
  redirect_output();
  report(SERVICE_RUNNING, 0);
  g_rc = g_main(g_argc, g_argv);
  report(SERVICE_STOPPED, g_rc);
}

int etwd_win_svcctl(int argc, char **argv); /* svcctl.c */

static int usage(void) {
  fprintf(stderr, "usage: etwd service install [OPTIONS] | uninstall | start | stop\n"
                  "  install registers `etwd.exe service run OPTIONS` with the Service Control Manager\n"
                  "  (name etwd, or $ETWD_SERVICE_NAME; starts at boot); run it from an administrator's prompt\n");
  return 2;
}

int etwd_win_service(int argc, char **argv, int (*real_main)(int, char **)) {
  if (argc < 3) return usage();
  const char *c = argv[2];
  if (!strcmp(c, "install") || !strcmp(c, "uninstall") || !strcmp(c, "start") || !strcmp(c, "stop"))
    return etwd_win_svcctl(argc, argv);
  int first = !strcmp(c, "run") ? 3 : 2; /* `service --opt ...`: the form before `run` existed */
  if (first == 2 && c[0] != '-') return usage();
  if (argc - first > MAX_ARGS) {
    fprintf(stderr, "etwd service: too many arguments\n");
    return 2;
  }
  g_main = real_main;
  g_argv[0] = argv[0];
  g_argv[1] = "serve";
  g_argc = 2;
  for (int i = first; i < argc; i++) g_argv[g_argc++] = argv[i];
  g_argv[g_argc] = NULL;
  SERVICE_TABLE_ENTRYW table[] = {{L"etwd", service_main}, {NULL, NULL}};
  if (!StartServiceCtrlDispatcherW(table)) {
    if (GetLastError() == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT)
      fprintf(stderr, "etwd service run: only the Service Control Manager starts this; install the service with\n"
                      "  etwd service install [OPTIONS]\n"
                      "or run `etwd serve [OPTIONS]` in a console\n");
    else
      fprintf(stderr, "etwd service: StartServiceCtrlDispatcher failed (Win32 error %lu)\n", GetLastError());
    return 2;
  }
  return g_rc;
}
#endif
