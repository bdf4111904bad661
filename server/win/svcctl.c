/* svcctl.c — `etwd service install|uninstall|start|stop`: etwd as a Windows service, through the
 * Service Control Manager's API (advapi32: OpenSCManager, CreateService, OpenService,
 * StartService, ControlService, QueryServiceStatus, DeleteService). The service it installs runs
 * `"C:\...\etwd.exe" service run OPTIONS` (server/win/service.c), started automatically at boot
 * as LocalSystem. The name is "etwd" (ETWD_SERVICE_NAME overrides it, e.g. for a second
 * instance or a test). Needs an administrator's prompt; each failure says why. Main thread only.
 * Windows builds only. */
#ifdef _WIN32
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define WAIT_MS 60000 /* start and stop wait at most this long for the service's new state */

static const char *svc_name(void) {
  const char *n = getenv("ETWD_SERVICE_NAME");
  return n && *n ? n : "etwd";
}

/* A Win32 error as a message that says what to do. */
static void fail(const char *what, DWORD e) {
  const char *hint = "";
  switch (e) {
    case ERROR_ACCESS_DENIED: hint = ": access denied — run it from an administrator's prompt"; break;
    case ERROR_SERVICE_EXISTS: hint = ": the service is installed already (etwd service uninstall first)"; break;
    case ERROR_SERVICE_DOES_NOT_EXIST: hint = ": the service is not installed (etwd service install)"; break;
    case ERROR_SERVICE_ALREADY_RUNNING: hint = ": the service is running already"; break;
    case ERROR_SERVICE_NOT_ACTIVE: hint = ": the service is not running"; break;
    case ERROR_SERVICE_MARKED_FOR_DELETE: hint = ": the service is being removed; close services.msc and try again"; break;
    default: break;
  }
  fprintf(stderr, "etwd service: %s failed (Win32 error %lu)%s\n", what, (unsigned long)e, hint);
}

/* Append @s to @out (capacity @cap) as one command-line argument, quoted when it needs it
 * (CommandLineToArgvW rules: backslashes before a quote are doubled). 0, or -1 when full. */
static int append_arg(char *out, size_t cap, const char *s) {
  size_t n = strlen(out);
  int quote = !*s || strpbrk(s, " \t\"") != NULL;
  if (n && n + 1 < cap) out[n++] = ' ';
  if (quote && n + 1 < cap) out[n++] = '"';
  for (const char *p = s; *p; p++) {
    size_t bs = 0;
    while (p[bs] == '\\') bs++;
    if (bs && (p[bs] == '"' || (!p[bs] && quote))) { /* backslashes before a quote: doubled */
      for (size_t i = 0; i < 2 * bs && n + 1 < cap; i++) out[n++] = '\\';
      p += bs - 1;
      continue;
    }
    if (*p == '"' && n + 2 < cap) out[n++] = '\\';
    if (n + 1 < cap) out[n++] = *p;
  }
  if (quote && n + 1 < cap) out[n++] = '"';
  if (n + 1 >= cap) return -1;
  out[n] = 0;
  return 0;
}

static int install(int argc, char **argv) {
  /* the options are checked here, so a typo is an error now rather than a service that stops */
  struct etwd_config cfg;
  etwd_config_defaults(&cfg);
  char *args[260];
  int n = 0;
  args[n++] = argv[0];
  for (int i = 3; i < argc && n < 259; i++) args[n++] = argv[i];
  args[n] = NULL;
  if (argc - 3 >= 259) {
    fprintf(stderr, "etwd service install: too many options\n");
    return 2;
  }
  int rc = etwd_config_parse(&cfg, n, args, 1);
  if (rc) return rc > 0 ? 0 : 2;
  char exe[MAX_PATH + 1], cmd[8192] = "";
  DWORD el = GetModuleFileNameA(NULL, exe, sizeof exe);
  if (!el || el >= sizeof exe) {
    fail("GetModuleFileName", GetLastError());
    return 1;
  }
  if (append_arg(cmd, sizeof cmd, exe) || append_arg(cmd, sizeof cmd, "service") || append_arg(cmd, sizeof cmd, "run")) {
    fprintf(stderr, "etwd service install: the command line is too long\n");
    return 2;
  }
  for (int i = 3; i < argc; i++)
    if (append_arg(cmd, sizeof cmd, argv[i])) {
      fprintf(stderr, "etwd service install: the command line is too long\n");
      return 2;
    }
  SC_HANDLE m = OpenSCManagerA(NULL, NULL, SC_MANAGER_CONNECT | SC_MANAGER_CREATE_SERVICE);
  if (!m) {
    fail("OpenSCManager", GetLastError());
    return 1;
  }
  SC_HANDLE s = CreateServiceA(m, svc_name(), "etwd trace server", SERVICE_ALL_ACCESS, SERVICE_WIN32_OWN_PROCESS,
                               SERVICE_AUTO_START, SERVICE_ERROR_NORMAL, cmd, NULL, NULL, NULL, NULL, NULL);
  if (!s) {
    fail("CreateService", GetLastError());
    CloseServiceHandle(m);
    return 1;
  }
  SERVICE_DESCRIPTIONA d = {"Trace sessions over HTTPS: ETW live sessions and .etl files (etwd)"};
  ChangeServiceConfig2A(s, SERVICE_CONFIG_DESCRIPTION, &d); /* cosmetic: a failure is harmless */
  printf("service %s installed (starts at boot as LocalSystem): %s\n"
         "start it now with `etwd service start`; its output goes to %%ProgramData%%\\etwd\\service.log\n",
         svc_name(), cmd);
  CloseServiceHandle(s);
  CloseServiceHandle(m);
  return 0;
}

/* Poll until the service reaches @want (or any state but @pending), at most WAIT_MS. */
static int wait_state(SC_HANDLE s, DWORD pending, DWORD want, SERVICE_STATUS *st) {
  for (int waited = 0;; waited += 250) {
    if (!QueryServiceStatus(s, st)) return -1;
    if (st->dwCurrentState == want) return 0;
    if (st->dwCurrentState != pending || waited >= WAIT_MS) return 1;
    Sleep(250);
  }
}

static const char *state_name(DWORD s) {
  switch (s) {
    case SERVICE_STOPPED: return "stopped";
    case SERVICE_START_PENDING: return "starting";
    case SERVICE_STOP_PENDING: return "stopping";
    case SERVICE_RUNNING: return "running";
    default: return "in another state";
  }
}

static int stop_service(SC_HANDLE s, int quiet_if_stopped) {
  SERVICE_STATUS st;
  if (!ControlService(s, SERVICE_CONTROL_STOP, &st)) {
    DWORD e = GetLastError();
    if (e == ERROR_SERVICE_NOT_ACTIVE && quiet_if_stopped) return 0;
    fail("ControlService(STOP)", e);
    return 1;
  }
  int w = wait_state(s, SERVICE_STOP_PENDING, SERVICE_STOPPED, &st);
  if (w) {
    fprintf(stderr, "etwd service: the service is %s, not stopped, after %d s\n", state_name(st.dwCurrentState), WAIT_MS / 1000);
    return 1;
  }
  printf("service %s stopped (exit code %lu)\n", svc_name(),
         (unsigned long)(st.dwWin32ExitCode == ERROR_SERVICE_SPECIFIC_ERROR ? st.dwServiceSpecificExitCode : st.dwWin32ExitCode));
  return 0;
}

int etwd_win_svcctl(int argc, char **argv);
int etwd_win_svcctl(int argc, char **argv) {
  const char *cmd = argv[2];
  if (!strcmp(cmd, "install")) return install(argc, argv);
  if (argc > 3) {
    fprintf(stderr, "etwd service %s: takes no arguments (set ETWD_SERVICE_NAME for another name)\n", cmd);
    return 2;
  }
  SC_HANDLE m = OpenSCManagerA(NULL, NULL, SC_MANAGER_CONNECT);
  if (!m) {
    fail("OpenSCManager", GetLastError());
    return 1;
  }
  DWORD access = !strcmp(cmd, "uninstall") ? DELETE | SERVICE_STOP | SERVICE_QUERY_STATUS
                 : !strcmp(cmd, "start")   ? SERVICE_START | SERVICE_QUERY_STATUS
                                           : SERVICE_STOP | SERVICE_QUERY_STATUS;
  SC_HANDLE s = OpenServiceA(m, svc_name(), access);
  if (!s) {
    fail("OpenService", GetLastError());
    CloseServiceHandle(m);
    return 1;
  }
  int rc = 0;
  SERVICE_STATUS st;
  if (!strcmp(cmd, "start")) {
    if (!StartServiceA(s, 0, NULL)) {
      fail("StartService", GetLastError());
      rc = 1;
    } else if (wait_state(s, SERVICE_START_PENDING, SERVICE_RUNNING, &st)) {
      fprintf(stderr, "etwd service: the service is %s, not running (exit code %lu): see %%ProgramData%%\\etwd\\service.log\n",
              state_name(st.dwCurrentState), (unsigned long)st.dwServiceSpecificExitCode);
      rc = 1;
    } else {
      printf("service %s running\n", svc_name());
    }
  } else if (!strcmp(cmd, "stop")) {
    rc = stop_service(s, 0);
  } else { /* uninstall: stop it first if it runs, then remove it */
    rc = stop_service(s, 1);
    if (!rc && !DeleteService(s)) {
      fail("DeleteService", GetLastError());
      rc = 1;
    } else if (!rc) {
      printf("service %s removed\n", svc_name());
    }
  }
  CloseServiceHandle(s);
  CloseServiceHandle(m);
  return rc;
}
#endif
