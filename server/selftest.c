/* selftest.c — `etwd selftest [--json] [--state-dir DIR]`: checks, step by step, that tracing
 * works on this machine and says what fails and why. Linux: privileges, tracefs, a tracefs
 * instance of our own, sched_process_exec of a child, a trace_marker, clean-up; Windows: the
 * privileges and whether ETW is usable (under wine it is not, and the steps say so); everywhere:
 * an HTTPS request to a short-lived in-process server with the state directory's certificate.
 * Single-threaded (the in-process server's threads run only during the last step). Exit code 0
 * only if every step passed. */
#include "selftest.h"

#include <errno.h>
#ifndef _WIN32 /* the Windows build has no OpenSSL to link (civetweb loads its DLLs at run time) */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "etwcore/backend.h"
#include "log.h"
#include "etwcore/util.h"
#include "tls.h"

#ifdef __linux__
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#endif
#ifdef _WIN32
#include <windows.h>

#include <cjson/cJSON.h>

#include "etwcore/etl.h"
#include "etwcore/session.h"
#include "etwcore/tlw.h"
#include "etwcore/winprov.h"
#endif

#define ST_MAX_STEPS 16

struct st_run {
  int json;
  int n, failed;
  struct {
    char step[32];
    int ok;
    char detail[600];
  } s[ST_MAX_STEPS];
};

/* step - record one result; the human form is printed at once (a hang later shows where). */
static int step(struct st_run *r, const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int step(struct st_run *r, const char *name, int ok, const char *fmt, ...) {
  if (r->n >= ST_MAX_STEPS) return ok;
  snprintf(r->s[r->n].step, sizeof r->s[r->n].step, "%s", name);
  r->s[r->n].ok = ok;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->s[r->n].detail, sizeof r->s[r->n].detail, fmt, ap);
  va_end(ap);
  if (!ok) r->failed++;
  if (!r->json) {
    printf("%-14s %-4s %s\n", name, ok ? "ok" : "FAIL", r->s[r->n].detail);
    fflush(stdout);
  }
  r->n++;
  return ok;
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void print_json(const struct st_run *r) {
  printf("[");
  for (int i = 0; i < r->n; i++) {
    printf("%s{\"step\":", i ? "," : "");
    json_str(r->s[i].step);
    printf(",\"ok\":%s,\"detail\":", r->s[i].ok ? "true" : "false");
    json_str(r->s[i].detail);
    printf("}");
  }
  printf("]\n");
}

#ifdef __linux__
/* ---- Linux: tracefs, read and written directly (no libtracefs), so this checks the kernel */

static int write_file(const char *dir, const char *rel, const char *val) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  int fd = open(p, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, val, strlen(val));
  int e = errno;
  close(fd);
  errno = e;
  return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* grep_trace - 1 if the instance's `trace` file (read, not consumed) has a line holding both
 * @a and @b (b may be NULL); reads at most 4 MiB. */
static int grep_trace(const char *inst, const char *a, const char *b) {
  char p[1200], line[2048];
  snprintf(p, sizeof p, "%s/trace", inst);
  FILE *f = fopen(p, "re");
  if (!f) return 0;
  int hit = 0;
  size_t total = 0;
  while (!hit && total < (4u << 20) && fgets(line, sizeof line, f)) {
    total += strlen(line);
    hit = strstr(line, a) && (!b || strstr(line, b));
  }
  fclose(f);
  return hit;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int wait_trace(const char *inst, const char *a, const char *b) {
  for (int i = 0; i < 60; i++) { /* up to 3 s: the per-CPU buffers are read without flushing */
    if (grep_trace(inst, a, b)) return 1;
    sleep_ms(50);
  }
  return 0;
}

static int step_privileges(struct st_run *r) {
  unsigned long long eff = 0;
  char line[256];
  FILE *f = fopen("/proc/self/status", "re");
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "CapEff:", 7)) eff = strtoull(line + 7, NULL, 16);
  if (f) fclose(f);
  if (geteuid() == 0)
    return step(r, "privileges", 1, "running as root (uid 0)%s",
                eff & (1ull << 21) ? "" : ", without CAP_SYS_ADMIN (tracefs must be mounted already)");
  if (eff & (1ull << 21)) return step(r, "privileges", 1, "uid %u with CAP_SYS_ADMIN", (unsigned)geteuid());
  return step(r, "privileges", 0,
              "uid %u is not root and has no CAP_SYS_ADMIN: creating tracefs instances and enabling "
              "kernel events needs root (run `sudo etwd selftest`, or start etwd as root or with "
              "CAP_SYS_ADMIN)",
              (unsigned)geteuid());
}

/* step_tracefs - find tracefs in /proc/self/mounts, else mount it at /sys/kernel/tracing. */
static int step_tracefs(struct st_run *r, char *dir, size_t n) {
  char line[1024], dev[256], mp[512], type[64];
  FILE *f = fopen("/proc/self/mounts", "re");
  dir[0] = 0;
  while (f && fgets(line, sizeof line, f)) { /* a later mount on the same point hides it */
    if (sscanf(line, "%255s %511s %63s", dev, mp, type) != 3) continue;
    if (!strcmp(type, "tracefs") && (!dir[0] || !strcmp(mp, "/sys/kernel/tracing")))
      snprintf(dir, n, "%s", mp);
    else if (strcmp(type, "tracefs") && !strcmp(mp, dir))
      dir[0] = 0;
  }
  if (f) fclose(f);
  if (dir[0]) return step(r, "tracefs", 1, "tracefs is mounted at %s", dir);
  mkdir("/sys/kernel/tracing", 0755);
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0) {
    snprintf(dir, n, "/sys/kernel/tracing");
    return step(r, "tracefs", 1, "tracefs was not mounted; mounted it at %s", dir);
  }
  int e = errno;
  return step(r, "tracefs", 0, "tracefs is not mounted and mounting it at /sys/kernel/tracing failed: %s (%s)",
              strerror(e),
              e == EPERM ? "mounting needs CAP_SYS_ADMIN: run as full root, or mount it first with "
                           "`mount -t tracefs nodev /sys/kernel/tracing`; in a container, from the host"
              : e == ENODEV ? "this kernel has no tracefs: it needs CONFIG_FTRACE"
                            : "mount it with `mount -t tracefs nodev /sys/kernel/tracing`");
}

static void run_linux(struct st_run *r) {
  int priv = step_privileges(r);
  char tdir[512], inst[1100], name[128];
  int have = priv && step_tracefs(r, tdir, sizeof tdir);
  const char *later = priv ? "not run: no tracefs (see the tracefs step)" : "not run: no privileges (see the privileges step)";
  if (!priv) step(r, "tracefs", 0, "%s", later);
  /* our own instance, named like a session's so a crashed selftest is reaped by the next etwd */
  etw_os_name_make(name, sizeof name, 0);
  snprintf(inst, sizeof inst, "%s/instances/%s", have ? tdir : "", name);
  if (have && mkdir(inst, 0750) != 0)
    have = step(r, "session", 0, "cannot create the tracefs instance %s: %s", inst, strerror(errno));
  else if (have)
    step(r, "session", 1, "created the tracefs instance %s", inst);
  else
    step(r, "session", 0, "%s", later);

  if (!have) {
    step(r, "exec_event", 0, "%s", later);
    step(r, "trace_marker", 0, "%s", later);
    step(r, "cleanup", 0, "%s", later);
    return;
  }
  /* sched_process_exec of a child we start */
  if (write_file(inst, "events/sched/sched_process_exec/enable", "1") ||
      write_file(inst, "tracing_on", "1")) {
    step(r, "exec_event", 0, "cannot enable sched/sched_process_exec in %s: %s", inst, strerror(errno));
  } else {
    const char *prog = access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
    pid_t c = fork();
    if (c == 0) {
      execl(prog, prog, (char *)NULL);
      _exit(127);
    }
    int ws = 0;
    if (c > 0) waitpid(c, &ws, 0);
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "pid=%d ", (int)c);
    if (c < 0)
      step(r, "exec_event", 0, "cannot start a child: %s", strerror(errno));
    else if (wait_trace(inst, "sched_process_exec", pidtxt))
      step(r, "exec_event", 1, "saw sched_process_exec of %s (pid %d)", prog, (int)c);
    else
      step(r, "exec_event", 0,
           "started %s (pid %d) but no sched_process_exec event for it reached the instance's "
           "buffer within 3 s",
           prog, (int)c);
  }
  /* a trace_marker written into the instance */
  char mark[128];
  snprintf(mark, sizeof mark, "etwd-selftest-%d-%lld", (int)getpid(), (long long)time(NULL));
  if (write_file(inst, "trace_marker", mark))
    step(r, "trace_marker", 0, "cannot write %s/trace_marker: %s", inst, strerror(errno));
  else if (wait_trace(inst, mark, NULL))
    step(r, "trace_marker", 1, "wrote \"%s\" to the instance's trace_marker and read it back", mark);
  else
    step(r, "trace_marker", 0, "wrote \"%s\" to %s/trace_marker but it did not appear in the buffer", mark, inst);

  write_file(inst, "tracing_on", "0");
  write_file(inst, "events/enable", "0");
  int rc = -1;
  for (int i = 0; i < 100 && (rc = rmdir(inst)) != 0 && errno == EBUSY; i++) sleep_ms(20);
  struct stat sb;
  if (rc != 0)
    step(r, "cleanup", 0, "cannot remove the tracefs instance %s: %s", inst, strerror(errno));
  else if (stat(inst, &sb) == 0)
    step(r, "cleanup", 0, "the tracefs instance %s is still there after rmdir", inst);
  else
    step(r, "cleanup", 1, "tracing stopped, the instance %s removed", inst);
}
#endif

#ifdef _WIN32
/* ---- Windows: a private real-time session made by the server's own session code (the core's
 * etw_session_create_private → the win backend: StartTraceW, EnableTraceEx2, an
 * OpenTraceW/ProcessTrace consumer feeding the shared decoder), etwd's own TraceLogging events
 * read back decoded, Microsoft-Windows-Kernel-Process enabled on the running session (the PATCH
 * path) and a child's ProcessStart, then delete and a check that ETW no longer has the session.
 * Under wine the backend refuses ETW (the etw step); the self-test then makes the calls anyway
 * (etw_win_force_calls; TDH stays refused) so each step says what wine returned. */
#define KP_GUID "{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}" /* Microsoft-Windows-Kernel-Process */
#define ST_TL_EVENTS 3
#define ST_WAIT_MS 5000
#define ST_WMI_NOT_FOUND 4201 /* ERROR_WMI_INSTANCE_NOT_FOUND */

struct win_st {
  struct etw_core *core;
  struct etw_session *s;
  struct etw_sub *sub;
  char os_name[128];
  const char *wine; /* wine's version, or NULL on Windows */
  char why[520];    /* why there is no session (for the later steps) */
  struct etw_jw buf;
  uint64_t events_read;
};

/* "ETW not available: " under wine (what its stubs returned follows), nothing on Windows */
static const char *na(const struct win_st *w) { return w->wine ? "ETW not available: " : ""; }

/* read_until - read the session's events for up to ST_WAIT_MS; @match is called per line (0 =
 * go on); 1 once it matched, 0 on time-out or end of stream */
static int read_until(struct win_st *w, int (*match)(const char *line, void *ctx), void *ctx) {
  ULONGLONG end = GetTickCount64() + ST_WAIT_MS;
  while (GetTickCount64() < end) {
    w->buf.len = 0;
    int n = etw_sub_read(w->sub, &w->buf, ETW_FMT_NDJSON, 1u << 20, 200);
    if (n < 0) return 0;
    const char *p = etw_jw_cstr(&w->buf);
    while (p && *p) {
      char *nl = strchr(p, '\n');
      if (nl) *nl = 0;
      w->events_read++;
      if (match(p, ctx)) return 1;
      p = nl ? nl + 1 : NULL;
    }
  }
  return 0;
}

static int win_session(struct st_run *r, struct win_st *w) {
  struct etw_core_config cc = {1, 1, 0, 0, NULL};
  struct etw_status st;
  etw_status_clear(&st);
  etw_os_name_private(w->os_name, sizeof w->os_name, 1); /* a new core's first private session */
  w->core = etw_core_new(&cc, &st);
  const char *be = w->core ? etw_core_backend_error(w->core, &etw_backend_win) : "out of memory";
  if (be) {
    snprintf(w->why, sizeof w->why, "the win backend is unavailable: %.400s", be);
    return step(r, "session", 0, "%s%s", na(w), w->why);
  }
  cJSON *body = cJSON_Parse("{\"backend\":\"win\",\"name\":\"selftest\",\"providers\":[{\"name\":\"" ETW_TLW_PROVIDER_GUID
                            "\",\"level\":5}]}");
  enum etw_err e = body ? etw_session_create_private(w->core, body, NULL, &w->s, &st) : ETW_E_NOMEM;
  cJSON_Delete(body);
  if (e) {
    w->s = NULL;
    char first[420]; /* the message's first sentence: what the call returned */
    snprintf(first, sizeof first, "%.400s", st.msg);
    char *dot = strstr(first, "). ");
    if (dot) dot[1] = 0;
    snprintf(w->why, sizeof w->why, "creating the session %s failed: %s", w->os_name, first);
    if (w->wine)
      return step(r, "session", 0, "%s%s (wine %s: its StartTraceW and EnableTraceEx2 are stubs that succeed, "
                  "its OpenTraceW fails; not a privilege problem)", na(w), w->why, w->wine);
    return step(r, "session", 0, "creating the session %s failed: %s", w->os_name, st.msg);
  }
  int err = 0;
  w->sub = etw_session_subscribe(w->s, NULL, 0, &err);
  if (!w->sub) {
    snprintf(w->why, sizeof w->why, "cannot subscribe to the session (error %d)", err);
    return step(r, "session", 0, "%s", w->why);
  }
  return step(r, "session", 1,
              "started the private real-time session %s with the server's session code (StartTraceW, "
              "EnableTraceEx2 of etwd's provider, an OpenTraceW/ProcessTrace consumer)",
              w->os_name);
}

struct tl_ctx {
  uint64_t nonce;
  int seen[ST_TL_EVENTS + 1], n_seen, n_ours;
  char why[256], sample[300];
};
static int tl_match(const char *line, void *ctx) {
  struct tl_ctx *c = ctx;
  if (!strstr(line, "\"EventName\":\"" ETW_TLW_SELFTEST_EVENT "\"")) return 0;
  c->n_ours++;
  for (uint32_t k = 1; k <= ST_TL_EVENTS; k++)
    if (!c->seen[k] && etw_tlw_selftest_check(line, k, c->nonce, c->why, sizeof c->why)) {
      c->seen[k] = 1;
      c->n_seen++;
      return c->n_seen == ST_TL_EVENTS;
    }
  snprintf(c->sample, sizeof c->sample, "%.290s", line);
  return 0;
}

static void win_tracelogging(struct st_run *r, struct win_st *w) {
  struct etw_status st;
  etw_status_clear(&st);
  uint32_t rc = etw_win_provider_register(&st);
  if (rc) {
    step(r, "tracelogging", 0, "%sEventRegister of etwd's provider %s failed: %s", na(w), ETW_TLW_PROVIDER_GUID, st.msg);
    return;
  }
  struct tl_ctx c;
  memset(&c, 0, sizeof c);
  c.nonce = ((uint64_t)GetCurrentProcessId() << 32) ^ GetTickCount64() ^ 0x5e1f7e57ull;
  uint32_t wrc = 0;
  int enabled = 0;
  struct etw_tlw ev;
  for (uint32_t k = 1; k <= ST_TL_EVENTS && !wrc; k++)
    wrc = etw_tlw_selftest_event(&ev, k, c.nonce) ? 1 : etw_win_provider_write(&ev, 4, &enabled);
  if (!w->sub) {
    step(r, "tracelogging", 0,
         "%sEventRegister returned 0, EventWriteTransfer %lu (EventEnabled: %s), but nothing can be read "
         "back: %s",
         na(w), (unsigned long)wrc, enabled ? "yes" : "no", w->why);
    return;
  }
  if (wrc) {
    step(r, "tracelogging", 0, "EventWriteTransfer of etwd's event failed with Win32 error %lu", (unsigned long)wrc);
    return;
  }
  if (read_until(w, tl_match, &c))
    step(r, "tracelogging", 1,
         "wrote %d events of etwd's TraceLogging provider %s with known values (integers, double, bool, "
         "UTF-8 and UTF-16 text, GUID) and read all of them back decoded, every value as written",
         ST_TL_EVENTS, ETW_TLW_PROVIDER_GUID);
  else
    step(r, "tracelogging", 0,
         "wrote %d events of etwd's provider %s (EventEnabled: %s) but read back %d of them decoded as written "
         "within %d s (%llu events read, %d named %s%s%s%s%s)",
         ST_TL_EVENTS, ETW_TLW_PROVIDER_GUID, enabled ? "yes" : "no", c.n_seen, ST_WAIT_MS / 1000,
         (unsigned long long)w->events_read, c.n_ours, ETW_TLW_SELFTEST_EVENT, c.why[0] ? "; " : "", c.why,
         c.sample[0] ? "; one was: " : "", c.sample);
}

struct kp_ctx {
  char pid_field[48];
  int n_kp;
};
static int kp_match(const char *line, void *ctx) {
  struct kp_ctx *c = ctx;
  if (!strstr(line, KP_GUID)) return 0;
  c->n_kp++;
  const char *d = strstr(line, "\"EventData\":{");
  if (!strstr(line, "\"EventID\":1,") || !d) return 0;
  size_t n = strlen(c->pid_field);
  for (const char *p = d; (p = strstr(p, c->pid_field)); p += n)
    if (p[n] < '0' || p[n] > '9') return 1; /* the whole number: pid 12 is not 123 */
  return 0;
}

static void win_kernel_process(struct st_run *r, struct win_st *w) {
  if (!w->s) {
    step(r, "kernel_process", 0, "%sno session to enable Microsoft-Windows-Kernel-Process in: %s", na(w), w->why);
    return;
  }
  struct etw_status st;
  etw_status_clear(&st);
  cJSON *body = cJSON_Parse("{\"enable\":[{\"name\":\"" KP_GUID "\",\"level\":4,\"keywords_any\":\"0x10\"}]}");
  enum etw_err e = body ? etw_session_patch(w->s, body, &st) : ETW_E_NOMEM;
  cJSON_Delete(body);
  if (e) {
    step(r, "kernel_process", 0, "enabling Microsoft-Windows-Kernel-Process %s on the session failed: %s", KP_GUID, st.msg);
    return;
  }
  wchar_t cmd[MAX_PATH + 32];
  UINT n = GetSystemDirectoryW(cmd, MAX_PATH);
  STARTUPINFOW si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  memset(&pi, 0, sizeof pi);
  si.cb = sizeof si;
  if (!n || n >= MAX_PATH) wcscpy(cmd, L"C:\\Windows\\System32");
  wcscat(cmd, L"\\cmd.exe /c exit 0");
  if (!CreateProcessW(NULL, cmd, NULL, NULL, FALSE, CREATE_NO_WINDOW, NULL, NULL, &si, &pi)) {
    step(r, "kernel_process", 0, "cannot start a child (cmd.exe /c exit 0): Win32 error %lu", (unsigned long)GetLastError());
    return;
  }
  WaitForSingleObject(pi.hProcess, ST_WAIT_MS);
  CloseHandle(pi.hThread);
  CloseHandle(pi.hProcess);
  struct kp_ctx c;
  memset(&c, 0, sizeof c);
  snprintf(c.pid_field, sizeof c.pid_field, "\"ProcessID\":%lu", (unsigned long)pi.dwProcessId);
  if (read_until(w, kp_match, &c))
    step(r, "kernel_process", 1,
         "enabled Microsoft-Windows-Kernel-Process on the running session and saw ProcessStart (event 1) of "
         "the child cmd.exe (pid %lu), decoded",
         (unsigned long)pi.dwProcessId);
  else
    step(r, "kernel_process", 0,
         "started cmd.exe (pid %lu) but no ProcessStart (event 1) with ProcessID %lu arrived within %d s (%d "
         "Microsoft-Windows-Kernel-Process events read)",
         (unsigned long)pi.dwProcessId, (unsigned long)pi.dwProcessId, ST_WAIT_MS / 1000, c.n_kp);
}

static void win_cleanup_step(struct st_run *r, struct win_st *w) {
  if (w->sub) etw_session_unsubscribe(w->s, w->sub, NULL);
  if (w->s) etw_session_discard(w->s); /* what DELETE does: stop, ControlTraceW(STOP), join */
  uint32_t un = etw_win_provider_unregister();
  if (w->core) etw_core_free(w->core);
  w->sub = NULL;
  w->s = NULL;
  w->core = NULL;
  uint32_t q = etw_win_session_query(w->os_name);
  if (q == ST_WMI_NOT_FOUND && !un)
    step(r, "cleanup", 1, "the session %s was stopped and ETW no longer has it (ControlTraceW(QUERY): not found); "
         "etwd's provider unregistered", w->os_name);
  else if (q == ST_WMI_NOT_FOUND)
    step(r, "cleanup", 0, "the session %s is gone, but EventUnregister failed with Win32 error %lu", w->os_name,
         (unsigned long)un);
  else
    step(r, "cleanup", 0, "%sControlTraceW(QUERY) of %s answered %lu after the session was stopped (%lu = not found "
         "was expected)%s",
         na(w), w->os_name, (unsigned long)q, (unsigned long)ST_WMI_NOT_FOUND,
         w->wine ? ": wine's stub reports every session as present" : ": a session may be left behind");
}

/* ---- flight: a private flight recorder (mode "flight": an in-memory ETW buffering session,
 * win_flight.c) with etwd's provider, in a core of its own whose recordings go to a temporary
 * directory; marker A, snapshot 1, marker B, snapshot 2; both files read back with the ETL
 * reader and decoder. Proves on the user's machine what the project cannot observe: ETW writes
 * a complete .etl for ControlTraceW(UPDATE) on a buffering session, the session goes on in
 * memory (snapshot 2 holds B), and the files are final (snapshot 1 does not change with
 * snapshot 2, snapshot 2 not when the session stops). */
struct fl_file {
  char name[64], path[1200];
  long long size;
  int has_a, has_b;
  uint64_t events;
  char why[300];
};

/* read @f->path and look for the two markers' texts */
static void fl_read(struct fl_file *f, const char *a, const char *b) {
  struct etw_status st;
  etw_status_clear(&st);
  struct etw_etl_reader *rd = etw_etl_reader_new();
  struct etw_decoder *d = etw_decoder_new(NULL);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  if (!rd || !d) snprintf(f->why, sizeof f->why, "out of memory");
  else if (etw_etl_reader_add_file(rd, f->path, &st)) snprintf(f->why, sizeof f->why, "%.280s", st.msg);
  else {
    const struct etw_rec *rec;
    struct etw_evref ref;
    int rc;
    while ((rc = etw_etl_reader_next_ref(rd, &rec, &st)) == 1) {
      f->events++;
      w.len = 0;
      etw_decoder_write(d, rec, &w, &ref);
      const char *j = etw_jw_cstr(&w);
      f->has_a |= strstr(j, a) != NULL;
      f->has_b |= strstr(j, b) != NULL;
    }
    if (rc < 0) snprintf(f->why, sizeof f->why, "%.280s", st.msg);
  }
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(rd);
}

static int fl_snap(struct etw_session *s, const char *dir, struct fl_file *f, char *why, size_t n) {
  struct etw_status st;
  etw_status_clear(&st);
  uint64_t bytes = 0;
  if (etw_session_snapshot(s, f->name, sizeof f->name, &bytes, &st)) {
    snprintf(why, n, "the snapshot failed: %.400s", st.msg);
    return -1;
  }
  snprintf(f->path, sizeof f->path, "%s/recordings/%s/trace.etl", dir, f->name);
  struct stat sb;
  f->size = stat(f->path, &sb) == 0 ? (long long)sb.st_size : -1;
  return 0;
}

/* both snapshots read: snapshot 1 holds A and not B, snapshot 2 holds B, snapshot 1 is final */
static void fl_check(struct fl_file *f1, struct fl_file *f2, const char *a, const char *b, char *why, size_t n) {
  long long size1 = f1->size;
  struct stat sb;
  f1->size = stat(f1->path, &sb) == 0 ? (long long)sb.st_size : -1;
  fl_read(f1, a, b);
  fl_read(f2, a, b);
  if (f1->why[0] || f2->why[0])
    snprintf(why, n, "a snapshot does not read whole: %s", f1->why[0] ? f1->why : f2->why);
  else if (!f1->has_a || f1->has_b || !f2->has_b)
    snprintf(why, n, "snapshot 1 (%llu events) %s marker A and %s B; snapshot 2 (%llu events) %s B",
             (unsigned long long)f1->events, f1->has_a ? "holds" : "lacks", f1->has_b ? "holds" : "not",
             (unsigned long long)f2->events, f2->has_b ? "holds" : "lacks");
  else if (f1->size != size1)
    snprintf(why, n, "snapshot 1 grew from %lld to %lld bytes after snapshot 2: ETW went on writing it", size1,
             f1->size);
}

static void fl_remove(const char *dir, const struct fl_file *f) {
  char p[1300];
  if (!f->name[0]) return;
  unlink(f->path);
  snprintf(p, sizeof p, "%s/recordings/%s", dir, f->name);
  rmdir(p);
}

static void win_flight(struct st_run *r, struct win_st *w, const char *state_dir) {
  char dir[1100], why[600] = "", a[64], b[64];
  snprintf(dir, sizeof dir, "%s/selftest-flight-%lu", state_dir, (unsigned long)GetCurrentProcessId());
  struct etw_core_config cc = {1, 1, 0, 0, dir};
  struct etw_status st;
  etw_status_clear(&st);
  struct etw_core *c = etw_mkdirs(dir) ? NULL : etw_core_new(&cc, &st);
  struct etw_session *s = NULL;
  struct fl_file f1, f2;
  memset(&f1, 0, sizeof f1);
  memset(&f2, 0, sizeof f2);
  uint64_t nonce = ((uint64_t)GetCurrentProcessId() << 32) ^ GetTickCount64();
  snprintf(a, sizeof a, "etwd-selftest-flight-A-%llx", (unsigned long long)nonce);
  snprintf(b, sizeof b, "etwd-selftest-flight-B-%llx", (unsigned long long)nonce);
  cJSON *body = cJSON_Parse("{\"backend\":\"win\",\"name\":\"selftest-flight\",\"mode\":\"flight\",\"buffer_kb\":256,"
                            "\"providers\":[{\"name\":\"" ETW_TLW_PROVIDER_GUID "\",\"level\":5}]}");
  if (!c) snprintf(why, sizeof why, "cannot create %s or a core: %.300s", dir, st.msg);
  else if (!body || etw_session_create_private(c, body, NULL, &s, &st)) {
    s = NULL;
    snprintf(why, sizeof why, "creating the flight session failed: %.400s", st.msg);
  } else {
    char ma[460] = ""; /* a refused marker does not stop the step: the snapshot says what ETW does */
    if (etw_session_marker(s, a, strlen(a), &st)) snprintf(ma, sizeof ma, "marker A was refused: %.400s; ", st.msg);
    if (fl_snap(s, dir, &f1, why, sizeof why) || ma[0]) {
      char tmp[600];
      snprintf(tmp, sizeof tmp, "%s%s", ma, why[0] ? why : "snapshot 1 was written");
      snprintf(why, sizeof why, "%s", tmp);
    } else if (etw_session_marker(s, b, strlen(b), &st))
      snprintf(why, sizeof why, "marker B was refused: %.400s", st.msg);
    else if (!fl_snap(s, dir, &f2, why, sizeof why))
      fl_check(&f1, &f2, a, b, why, sizeof why);
  }
  cJSON_Delete(body);
  if (s) etw_session_discard(s); /* ControlTraceW(STOP): it must not touch the snapshots */
  if (c) etw_core_free(c);
  struct stat sb;
  long long size2 = stat(f2.path, &sb) == 0 ? (long long)sb.st_size : -1;
  if (!why[0] && size2 != f2.size)
    snprintf(why, sizeof why, "snapshot 2 changed from %lld to %lld bytes when the session stopped", f2.size, size2);
  if (why[0])
    step(r, "flight", 0, "%s%s", w->wine ? na(w) : "", why);
  else
    step(r, "flight", 1,
         "a flight recorder (ETW buffering mode) wrote two snapshots with ControlTraceW(UPDATE): the first "
         "(%llu events, %lld bytes) holds marker A and stayed final, the second (%llu events) holds marker B%s",
         (unsigned long long)f1.events, f1.size, (unsigned long long)f2.events,
         f2.has_a ? " and still A (the ring keeps what a snapshot saved)" : " (A had left the ring)");
  fl_remove(dir, &f1);
  fl_remove(dir, &f2);
  char rd[1200];
  snprintf(rd, sizeof rd, "%s/recordings", dir);
  rmdir(rd);
  rmdir(dir);
}

static void run_windows(struct st_run *r, const char *state_dir) {
  HANDLE tok = NULL;
  TOKEN_ELEVATION el = {0};
  DWORD len = 0;
  int admin = OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok) &&
              GetTokenInformation(tok, TokenElevation, &el, sizeof el, &len) && el.TokenIsElevated;
  if (tok) CloseHandle(tok);
  step(r, "privileges", admin, admin ? "the process is elevated (administrator)"
                                     : "not elevated: ETW sessions need an administrator (Run as "
                                       "administrator, or a member of Performance Log Users)");
  struct win_st w;
  memset(&w, 0, sizeof w);
  w.wine = etw_win_wine_version();
  struct etw_status st;
  etw_status_clear(&st);
  enum etw_err e = etw_backend_win.init ? etw_backend_win.init(&st) : ETW_E_OK;
  step(r, "etw", e == ETW_E_OK, e == ETW_E_OK ? "the ETW backend is available" : "ETW not available: %s", st.msg);
  if (e != ETW_E_OK && w.wine) etw_win_force_calls(); /* the next steps say what wine's stubs return */
  etw_jw_init(&w.buf, 0);
  win_session(r, &w);
  win_tracelogging(r, &w);
  win_kernel_process(r, &w);
  win_flight(r, &w, state_dir);
  win_cleanup_step(r, &w);
  etw_jw_free(&w.buf);
}
#endif

/* ---- HTTPS: a short-lived in-process server on 127.0.0.1 (a free port), asked for
 * /api/v1/health over TLS, verifying the state's certificate as the only trust anchor and
 * 127.0.0.1 against its subjectAltName. */
#ifndef _WIN32
static int https_get(const char *cert, int port, char *detail, size_t n) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  BIO *b = NULL;
  int ok = 0;
  if (!ctx || SSL_CTX_load_verify_locations(ctx, cert, NULL) != 1) {
    snprintf(detail, n, "cannot load the certificate %s as a trust anchor", cert);
    goto out;
  }
  X509_VERIFY_PARAM *vp = SSL_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_flags(vp, X509_V_FLAG_PARTIAL_CHAIN);
  X509_VERIFY_PARAM_set1_ip_asc(vp, "127.0.0.1");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  b = BIO_new_ssl_connect(ctx);
  char hp[64];
  snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
  SSL *ssl = NULL;
  BIO_get_ssl(b, &ssl);
  if (!b || !ssl || BIO_set_conn_hostname(b, hp) != 1) {
    snprintf(detail, n, "out of memory");
    goto out;
  }
  if (BIO_do_connect(b) != 1 || BIO_do_handshake(b) != 1) {
    long v = SSL_get_verify_result(ssl);
    char eb[256];
    ERR_error_string_n(ERR_get_error(), eb, sizeof eb);
    snprintf(detail, n, "TLS connection to %s failed: %s%s%s", hp, eb,
             v != X509_V_OK ? "; certificate: " : "", v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
    goto out;
  }
  const char *req = "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  char resp[512] = "";
  int got = 0, k;
  if (BIO_write(b, req, (int)strlen(req)) != (int)strlen(req)) {
    snprintf(detail, n, "cannot send the request to %s", hp);
    goto out;
  }
  while (got < (int)sizeof resp - 1 && (k = BIO_read(b, resp + got, (int)sizeof resp - 1 - got)) > 0) got += k;
  resp[got] = 0;
  if (strncmp(resp, "HTTP/1.1 200", 12)) {
    char *eol = strpbrk(resp, "\r\n");
    if (eol) *eol = 0;
    snprintf(detail, n, "GET /api/v1/health over TLS answered \"%.100s\", not 200", resp);
    goto out;
  }
  snprintf(detail, n, "GET https://%s/api/v1/health: 200, certificate verified against %s", hp, cert);
  ok = 1;
out:
  BIO_free_all(b);
  SSL_CTX_free(ctx);
  return ok;
}
#else
/* Windows: civetweb's own TLS client (the same OpenSSL DLLs, loaded at run time), with the
 * certificate as its only trust anchor (SSL_VERIFY_PEER; civetweb 1.15 does not check the name) */
static int https_get(const char *cert, int port, char *detail, size_t n) {
  struct mg_client_options o;
  memset(&o, 0, sizeof o);
  o.host = "127.0.0.1";
  o.port = port;
  o.server_cert = cert;
  char eb[256] = "";
  struct mg_connection *c = mg_connect_client_secure(&o, eb, sizeof eb);
  if (!c) {
    snprintf(detail, n, "TLS connection to 127.0.0.1:%d with %s as the trust anchor failed: %s", port,
             cert, eb[0] ? eb : "no reason given");
    return 0;
  }
  mg_printf(c, "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  int rc = mg_get_response(c, eb, sizeof eb, 10000);
  const struct mg_response_info *ri = rc >= 0 ? mg_get_response_info(c) : NULL;
  int ok = ri && ri->status_code == 200;
  if (ok)
    snprintf(detail, n, "GET https://127.0.0.1:%d/api/v1/health: 200, certificate verified against %s", port, cert);
  else if (ri)
    snprintf(detail, n, "GET /api/v1/health over TLS answered %d, not 200", ri->status_code);
  else
    snprintf(detail, n, "no HTTP answer over TLS from 127.0.0.1:%d: %s", port, eb[0] ? eb : "time-out");
  mg_close_connection(c);
  return ok;
}
#endif

static void run_https(struct st_run *r, const char *state_dir) {
  struct etwd_config cfg;
  etwd_config_defaults(&cfg);
  char *av[] = {"etwd", "--state-dir", (char *)state_dir, NULL}; /* derived limits as `etwd serve` */
  if (etwd_config_parse(&cfg, 3, av, 1)) {
    step(r, "https", 0, "invalid state directory %s", state_dir);
    return;
  }
  snprintf(cfg.api.listen, sizeof cfg.api.listen, "127.0.0.1:0"); /* civetweb picks a free port */
  char err[512], detail[600];
  struct etwd_server srv;
  memset(&srv, 0, sizeof srv);
  srv.cfg = &cfg.api;
  srv.tls_init = etwd_tls_init_ctx;
  srv.tls = 1;
  if (etw_mkdirs(state_dir)) {
    step(r, "https", 0, "cannot create the state directory %s: %s", state_dir, strerror(errno));
    return;
  }
  if (etwd_tls_prepare(state_dir, srv.cert, sizeof srv.cert, srv.key, sizeof srv.key, srv.fingerprint,
                       err, sizeof err)) {
    step(r, "https", 0, "TLS set-up in %s failed: %s", state_dir, err);
    return;
  }
  srv.auth = etwd_auth_open(state_dir, err, sizeof err);
  if (!srv.auth) {
    step(r, "https", 0, "%s", err);
    return;
  }
  if (etwd_server_start(&srv, err, sizeof err)) {
    step(r, "https", 0, "%s", err);
    etwd_auth_free(srv.auth);
    return;
  }
  struct mg_server_port port;
  memset(&port, 0, sizeof port);
  if (mg_get_server_ports(srv.mg, 1, &port) < 1)
    step(r, "https", 0, "the in-process server has no listening port");
  else
    step(r, "https", https_get(srv.cert, port.port, detail, sizeof detail), "%s", detail);
  etwd_server_stop(&srv);
  etwd_auth_free(srv.auth);
}

int etwd_selftest_main(int argc, char **argv) {
  struct st_run *r = calloc(1, sizeof *r);
  struct etwd_config cfg;
  etwd_config_defaults(&cfg);
  if (!r) return 1;
  etwd_log_set_level(LOG_WARN); /* the in-process server's access log is not the test's output */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      r->json = 1;
    else if (!strcmp(argv[i], "--state-dir") && i + 1 < argc)
      snprintf(cfg.api.state_dir, sizeof cfg.api.state_dir, "%s", argv[++i]);
    else {
      fprintf(stderr, "etwd selftest: unknown argument \"%s\" (usage: etwd selftest [--json] [--state-dir DIR])\n",
              argv[i]);
      free(r);
      return 2;
    }
  }
#if defined(__linux__)
  run_linux(r);
#elif defined(_WIN32)
  run_windows(r, cfg.api.state_dir);
#else
  step(r, "session", 0, "no live tracing backend on this operating system");
#endif
  run_https(r, cfg.api.state_dir);
  if (r->json)
    print_json(r);
  else
    printf("%s: %d of %d steps passed\n", r->failed ? "FAIL" : "ok", r->n - r->failed, r->n);
  int rc = r->failed ? 1 : 0;
  free(r);
  return rc;
}
