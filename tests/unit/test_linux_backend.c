/* test_linux_backend.c — the Linux (tracefs) backend against the real kernel (needs root).
 *
 * Each case opens a session through etw_backend_linux with a real hub, generates known activity
 * (fork+execve, syscall loops), and checks exactly what arrives, what the kernel reports as lost,
 * that invalid specs fail with the right code and JSON pointer, and that no instance is left.
 * Instance names are etwd_t<n>_<pid> (the owner's pid last, as the session manager names them)
 * so parallel runs never collide and never reap each other.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etwcore/backend.h"
#include "etwcore/hub.h"
#include "t.h"

static const struct etw_backend *B = &etw_backend_linux;
static int g_n;

struct sess {
  char name[64];
  void *st;
  struct etw_hub *hub;
  struct etw_sub *sub;
};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int instance_exists(const char *name) {
  char p[256];
  snprintf(p, sizeof p, "/sys/kernel/tracing/instances/%s", name);
  struct stat sb;
  return stat(p, &sb) == 0;
}

static enum etw_err sess_open(struct sess *s, struct etw_session_spec *sp, const char *path,
                              struct etw_status *st) {
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%st%d_%d", ETW_SESSION_PREFIX, ++g_n, (int)getpid());
  struct etw_hub_limits lim = {.replay_max_bytes = 0, .sub_queue_events = 1u << 22,
                               .max_subscribers = 4};
  s->hub = etw_hub_new(&lim);
  int err = 0;
  s->sub = etw_hub_subscribe(s->hub, NULL, 0, &err);
  struct etw_backend_args a = {.spec = sp, .hub = s->hub, .os_name = s->name,
                               .record_path = path};
  etw_status_clear(st);
  enum etw_err rc = B->open(&a, &s->st, st);
  if (rc) {
    etw_sub_close(s->sub);
    etw_hub_free(s->hub);
    s->sub = NULL;
    s->hub = NULL;
  }
  return rc;
}

static void sess_close(struct sess *s) {
  if (s->st) B->destroy(s->st);
  s->st = NULL;
  CHECK(!instance_exists(s->name));
  if (s->sub) etw_sub_close(s->sub);
  if (s->hub) etw_hub_free(s->hub);
}

/* read everything published so far (waits up to @ms for the first and 150 ms after the last) */
static void collect(struct sess *s, struct etw_jw *out, int ms) {
  int waited = 0;
  for (;;) {
    int r = etw_sub_read(s->sub, out, ETW_FMT_NDJSON, 1 << 20, 50);
    if (r > 0) {
      waited = ms - 150 > 0 ? ms - 150 : 0;
      continue;
    }
    waited += 50;
    if (r < 0 || waited >= ms) break;
  }
}

/* count ndjson lines containing all of @a, @b, @c (NULL = ignore) */
static int count_lines(const char *txt, const char *a, const char *b, const char *c) {
  int n = 0;
  const char *p = txt;
  while (p && *p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char *line = strndup(p, len);
    if ((!a || strstr(line, a)) && (!b || strstr(line, b)) && (!c || strstr(line, c))) n++;
    free(line);
    p = e ? e + 1 : NULL;
  }
  return n;
}

/* fork a child that waits for a byte on a pipe, then execs @prog */
struct child {
  pid_t pid;
  int wfd;
};

static struct child spawn_wait(const char *prog) {
  int p[2];
  struct child c = {-1, -1};
  if (pipe(p)) return c;
  pid_t pid = fork();
  if (pid == 0) {
    char b;
    close(p[1]);
    if (read(p[0], &b, 1) != 1) _exit(3);
    char *const argv[] = {(char *)prog, NULL};
    execv(prog, argv);
    _exit(127);
  }
  close(p[0]);
  c.pid = pid;
  c.wfd = p[1];
  return c;
}

static void release(struct child *c) {
  if (write(c->wfd, "x", 1) != 1) perror("write");
  close(c->wfd);
  int stt;
  waitpid(c->pid, &stt, 0);
}

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "2026-11-22T01:27:55.4504710Z" → ns since 1970 */
static int parse_time(const char *p, int64_t *ns) {
  struct tm tm = {0};
  unsigned frac;
  if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d.%7uZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &frac) != 7)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  *ns = (int64_t)timegm(&tm) * 1000000000 + (int64_t)frac * 100;
  return 0;
}

static struct etw_provider_spec prov(char *name, char **evs, uint32_t n, char *filter) {
  struct etw_provider_spec p;
  memset(&p, 0, sizeof p);
  p.name = name;
  p.events = evs;
  p.n_events = n;
  p.filter = filter;
  p.level = 5;
  return p;
}

static char *ev_exec[] = {"sched_process_exec"};

/* N execs → exactly N exec events with the right filename and pid */
static void test_exec_exact(void) {
  enum { N = 25 };
  struct etw_provider_spec p = prov("sched", ev_exec, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME,
                                .providers = &p, .n_providers = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (!s.st) {
    fprintf(stderr, "open: %s %s\n", st.field, st.msg);
    return;
  }
  CHECK(instance_exists(s.name));
  {
    /* the exclusion of our own threads is a few range terms, not one term per thread */
    char fp[256], txt[4096] = {0};
    snprintf(fp, sizeof fp, "/sys/kernel/tracing/instances/%s/events/sched/sched_process_exec/filter",
             s.name);
    FILE *ff = fopen(fp, "r");
    size_t got = ff ? fread(txt, 1, sizeof txt - 1, ff) : 0;
    if (ff) fclose(ff);
    int terms = 0;
    for (const char *q = txt; (q = strstr(q, "common_pid")); q++) terms++;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(got > 0 && terms >= 1 && terms <= 2 * (8 + ncpu + 1));
    char me[64];
    snprintf(me, sizeof me, "%d", (int)getpid());
    CHECK(strstr(txt, me) != NULL);
  }
  CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  pid_t pids[N];
  int64_t t_first = 0, t_last = 0;
  for (int i = 0; i < N; i++) {
    struct child c = spawn_wait("/bin/true");
    pids[i] = c.pid;
    if (!i) t_first = real_ns();
    release(&c);
    t_last = real_ns();
  }
  struct etw_jw out;
  etw_jw_init(&out, 64 << 20);
  collect(&s, &out, 600);
  /* stop drains the readers into the hub (tracing off, final drain), so after it the output is
   * complete however late the readers ran on a loaded machine */
  B->stop(s.st);
  B->stop(s.st); /* idempotent */
  collect(&s, &out, 100);
  /* every exec's TimeCreated lies between the first release and the last wait (+-1 ms) */
  int timed = 0;
  for (const char *q = etw_jw_cstr(&out); (q = strstr(q, "\"EventName\":\"sched_process_exec\""));
       q++) {
    const char *ln = q;
    while (ln > etw_jw_cstr(&out) && ln[-1] != '\n') ln--;
    const char *tc = strstr(ln, "\"TimeCreated\":\"");
    int64_t ts;
    int mine = 0;
    for (int i = 0; i < N; i++) {
      char k[64];
      snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)pids[i]);
      const char *hit = strstr(ln, k);
      if (hit && hit < q + 200) mine = 1;
    }
    if (!mine || !tc || parse_time(tc + 15, &ts)) continue;
    timed++;
    if (ts < t_first - 1000000 || ts > t_last + 1000000) {
      fprintf(stderr, "exec at %lld outside [%lld, %lld]\n", (long long)ts, (long long)t_first,
              (long long)t_last);
      t_failures++;
    }
  }
  CHECK_EQ(timed, N);
  const char *txt = etw_jw_cstr(&out);
  int total = 0;
  for (int i = 0; i < N; i++) {
    char pidk[64];
    snprintf(pidk, sizeof pidk, "\"pid\":%d,", (int)pids[i]);
    char exk[64];
    snprintf(exk, sizeof exk, "\"ProcessID\":%d,", (int)pids[i]);
    int n = count_lines(txt, pidk, exk, "\"filename\":\"/bin/true\"");
    CHECK_EQ(n, 1);
    total += n;
  }
  CHECK_EQ(total, N);
  CHECK(count_lines(txt, "\"Provider\":{\"Name\":\"sched\"}", "\"EventName\":\"sched_process_exec\"",
                    "\"TimeCreated\":\"20") >= N);
  /* the time is the current UTC hour (or the previous one, right after a change of hour) */
  char now[32], before[32];
  time_t t = time(NULL), t0 = t - 10;
  struct tm tmv;
  gmtime_r(&t, &tmv);
  strftime(now, sizeof now, "\"TimeCreated\":\"%Y-%m-%dT%H", &tmv);
  gmtime_r(&t0, &tmv);
  strftime(before, sizeof before, "\"TimeCreated\":\"%Y-%m-%dT%H", &tmv);
  CHECK(count_lines(txt, now, "sched_process_exec", NULL) +
            (strcmp(now, before) ? count_lines(txt, before, "sched_process_exec", NULL) : 0) >=
        N);
  struct etw_backend_stats bs;
  B->stats(s.st, &bs);
  CHECK(bs.read_events >= (uint64_t)N);
  CHECK_EQ(bs.kernel_lost, 0);
  struct etw_jw sj;
  etw_jw_init(&sj, 1 << 16);
  etw_jw_ch(&sj, '{');
  B->stats_json(s.st, &sj);
  etw_jw_ch(&sj, '}');
  CHECK(strstr(etw_jw_cstr(&sj), "\"per_cpu\":[{\"cpu\":0,\"overrun\":0,\"dropped\":0") != NULL);
  etw_jw_free(&sj);
  etw_jw_free(&out);
  sess_close(&s);
}

/* PID filter and filter expressions select exactly what they should */
static void test_filters(void) {
  /* pid filter: only child a */
  struct child a = spawn_wait("/bin/true"), b = spawn_wait("/bin/true");
  uint32_t pids[] = {(uint32_t)a.pid};
  struct etw_provider_spec p = prov("sched", ev_exec, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1, .pids = pids, .n_pids = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (s.st) {
    CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
    release(&a);
    release(&b);
    struct etw_jw out;
    etw_jw_init(&out, 16 << 20);
    collect(&s, &out, 400);
    B->stop(s.st);
    collect(&s, &out, 100);
    char ka[64], kb[64];
    snprintf(ka, sizeof ka, "\"ProcessID\":%d,", (int)a.pid);
    snprintf(kb, sizeof kb, "\"ProcessID\":%d,", (int)b.pid);
    CHECK_EQ(count_lines(etw_jw_cstr(&out), ka, "sched_process_exec", NULL), 1);
    CHECK_EQ(count_lines(etw_jw_cstr(&out), kb, NULL, NULL), 0);
    CHECK_EQ(count_lines(etw_jw_cstr(&out), "sched_process_exec", NULL, NULL), 1);
    etw_jw_free(&out);
    sess_close(&s);
  } else {
    release(&a);
    release(&b);
  }
  /* filter expression: /bin/true only, not /bin/echo */
  struct etw_provider_spec p2 = prov("sched", ev_exec, 1, "filename == \"/bin/true\"");
  struct etw_session_spec sp2 = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p2,
                                 .n_providers = 1};
  CHECK_EQ(sess_open(&s, &sp2, NULL, &st), ETW_E_OK);
  if (!s.st) return;
  CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  pid_t tp[3], ep[3];
  for (int i = 0; i < 3; i++) {
    struct child c = spawn_wait("/bin/true");
    tp[i] = c.pid;
    release(&c);
    c = spawn_wait("/bin/echo");
    ep[i] = c.pid;
    release(&c);
  }
  struct etw_jw out;
  etw_jw_init(&out, 16 << 20);
  collect(&s, &out, 400);
  B->stop(s.st);
  collect(&s, &out, 100);
  for (int i = 0; i < 3; i++) {
    char k[64];
    snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)tp[i]);
    CHECK_EQ(count_lines(etw_jw_cstr(&out), k, "/bin/true", NULL), 1);
    snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)ep[i]);
    CHECK_EQ(count_lines(etw_jw_cstr(&out), k, NULL, NULL), 0);
  }
  CHECK_EQ(count_lines(etw_jw_cstr(&out), "/bin/echo", NULL, NULL), 0);
  etw_jw_free(&out);
  sess_close(&s);
}

/* enabling a provider (a new system) on a running session starts its events; disable stops */
static void test_enable_running(void) {
  char *ev_exit[] = {"sched_process_exit"};
  struct etw_provider_spec p = prov("sched", ev_exit, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (!s.st) return;
  CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  /* a child that makes K getppid calls each time it is poked */
  enum { K = 7 };
  int tochild[2], fromchild[2];
  CHECK(pipe(tochild) == 0 && pipe(fromchild) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    close(tochild[1]);
    close(fromchild[0]);
    while (read(tochild[0], &c, 1) == 1) {
      for (int i = 0; i < K; i++) syscall(SYS_getppid);
      if (write(fromchild[1], "y", 1) != 1) _exit(2);
    }
    _exit(0);
  }
  close(tochild[0]);
  close(fromchild[1]);
  char c;
  /* round 1: not enabled yet */
  CHECK(write(tochild[1], "x", 1) == 1 && read(fromchild[0], &c, 1) == 1);
  char *ev_g[] = {"sys_enter_getppid"};
  char filt[64];
  snprintf(filt, sizeof filt, "common_pid == %d", (int)pid);
  struct etw_provider_spec np = prov("syscalls", ev_g, 1, filt);
  CHECK_EQ(B->enable(s.st, &np, &st), ETW_E_OK);
  /* round 2: enabled; our own getppid calls are excluded by the backend's filter */
  CHECK(write(tochild[1], "x", 1) == 1 && read(fromchild[0], &c, 1) == 1);
  for (int i = 0; i < K; i++) syscall(SYS_getppid);
  struct etw_jw out;
  etw_jw_init(&out, 16 << 20);
  collect(&s, &out, 400);
  CHECK_EQ(B->disable(s.st, "syscalls", &st), ETW_E_OK);
  CHECK_EQ(B->disable(s.st, "nosuch", &st), ETW_E_NOT_FOUND);
  /* round 3: disabled again */
  CHECK(write(tochild[1], "x", 1) == 1 && read(fromchild[0], &c, 1) == 1);
  close(tochild[1]);
  close(fromchild[0]);
  int stt;
  waitpid(pid, &stt, 0);
  collect(&s, &out, 300);
  B->stop(s.st);
  collect(&s, &out, 100);
  char k[64];
  snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)pid);
  CHECK_EQ(count_lines(etw_jw_cstr(&out), k, "\"EventName\":\"sys_enter_getppid\"",
                       "\"Provider\":{\"Name\":\"syscalls\"}"),
           K);
  CHECK_EQ(count_lines(etw_jw_cstr(&out), k, "\"EventName\":\"sched_process_exit\"", NULL), 1);
  snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)getpid());
  CHECK_EQ(count_lines(etw_jw_cstr(&out), k, "sys_enter_getppid", NULL), 0);
  etw_jw_free(&out);
  sess_close(&s);
}

/* a thread of a multi-threaded process: ThreadID is the thread, ProcessID the process */
static int g_tpipe[2], g_tdone[2];
static void *getppid_thread(void *arg) {
  (void)arg;
  pid_t tid = (pid_t)syscall(SYS_gettid);
  for (int i = 0; i < 5; i++) syscall(SYS_getppid);
  if (write(g_tpipe[1], &tid, sizeof tid) != (ssize_t)sizeof tid) _exit(3);
  char c;
  if (read(g_tdone[0], &c, 1) < 0) _exit(3); /* stay alive until the events were read */
  return NULL;
}

static void test_threads(void) {
  int go[2];
  CHECK(pipe(go) == 0 && pipe(g_tpipe) == 0 && pipe(g_tdone) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    close(go[1]);
    close(g_tdone[1]);
    if (read(go[0], &c, 1) != 1) _exit(2);
    pthread_t th;
    if (pthread_create(&th, NULL, getppid_thread, NULL)) _exit(2);
    pthread_join(th, NULL);
    _exit(0);
  }
  close(go[0]);
  close(g_tpipe[1]);
  close(g_tdone[0]);
  char *ev_g[] = {"sys_enter_getppid"};
  struct etw_provider_spec p = prov("syscalls", ev_g, 1, NULL);
  uint32_t pids[] = {(uint32_t)pid};
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1, .pids = pids, .n_pids = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (s.st) CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  CHECK(write(go[1], "x", 1) == 1);
  pid_t tid = 0;
  CHECK(read(g_tpipe[0], &tid, sizeof tid) == (ssize_t)sizeof tid);
  struct etw_jw out;
  etw_jw_init(&out, 16 << 20);
  if (s.st) collect(&s, &out, 300);
  close(g_tdone[1]); /* the thread may exit now */
  int stt;
  waitpid(pid, &stt, 0);
  close(go[1]);
  close(g_tpipe[0]);
  if (!s.st) return;
  B->stop(s.st);
  collect(&s, &out, 100);
  char k[96], k2[64];
  /* ProcessName (the thread's comm) lies between them */
  snprintf(k, sizeof k, "\"Execution\":{\"ProcessID\":%d,", (int)pid);
  snprintf(k2, sizeof k2, ",\"ThreadID\":%d,", (int)tid);
  CHECK(tid != pid);
  CHECK_EQ(count_lines(etw_jw_cstr(&out), k, k2, "sys_enter_getppid"), 5);
  if (t_failures) fprintf(stderr, "threads: pid %d tid %d, got:\n%.2000s\n", (int)pid, (int)tid, etw_jw_cstr(&out));
  etw_jw_free(&out);
  sess_close(&s);
}

/* invalid specs give the right code and field; nothing is left behind */
static void test_invalid(void) {
  struct sess s;
  struct etw_status st;
  char *evs[] = {"sched_process_exec", "no_such_event"};
  struct etw_provider_spec p[2];
  p[0] = prov("sched", ev_exec, 1, NULL);
  p[1] = prov("no_such_system", NULL, 0, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = p,
                                .n_providers = 2};
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/1/name");
  CHECK(!instance_exists(s.name));

  p[1] = prov("sched", evs, 2, NULL);
  sp.providers = &p[1];
  sp.n_providers = 1;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/0/events/1");
  CHECK(strstr(st.msg, "no_such_event") != NULL);

  p[1] = prov("../sched", NULL, 0, NULL);
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/0/name");

  p[0] = prov("sched", ev_exec, 1, NULL);
  p[1] = prov("raw_syscalls", NULL, 0, "bogus_field == 3");
  sp.providers = p;
  sp.n_providers = 2;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_KERNEL);
  CHECK_STR(st.field, "/providers/1/filter");
  CHECK(strstr(st.msg, "Field not found") != NULL);
  CHECK(strstr(st.msg, "bogus_field == 3") != NULL);
  fprintf(stderr, "kernel filter message: %s\n", st.msg);
  CHECK(!instance_exists(s.name));

  p[1] = prov("sched", ev_exec, 1, "filename ~ \"unterminated");
  sp.providers = &p[1];
  sp.n_providers = 1;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_KERNEL);
  CHECK_STR(st.field, "/providers/0/filter");
  CHECK(strstr(st.msg, "parse_error") != NULL);

  sp.providers = p;
  sp.n_providers = 1;
  sp.buffer_kb = 1;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/buffer_kb");
  sp.buffer_kb = 262145;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/buffer_kb");
  sp.buffer_kb = 0;

  uint32_t badpid[] = {0x3fffffff};
  sp.pids = badpid;
  sp.n_pids = 1;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/pids/0");
  sp.n_pids = 0;

  /* running session: enabling an unknown provider/bad filter fails, session keeps working */
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (s.st) {
    CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
    struct etw_provider_spec q = prov("nope", NULL, 0, NULL);
    CHECK_EQ(B->enable(s.st, &q, &st), ETW_E_INVALID);
    CHECK_STR(st.field, "/providers/0/name");
    q = prov("sched", ev_exec, 1, "nope == 1");
    CHECK_EQ(B->enable(s.st, &q, &st), ETW_E_KERNEL);
    CHECK_STR(st.field, "/providers/0/filter");
    sess_close(&s);
  }
}

/* tiny buffer + busy syscall loop: loss is reported and equals the per-CPU stats */
static uint64_t stat_sum(const char *inst, const char *key) {
  uint64_t sum = 0;
  for (int cpu = 0; cpu < 256; cpu++) {
    char p[256];
    snprintf(p, sizeof p, "/sys/kernel/tracing/instances/%s/per_cpu/cpu%d/stats", inst, cpu);
    FILE *f = fopen(p, "r");
    if (!f) break;
    char line[256];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, key, kl)) sum += strtoull(line + kl, NULL, 10);
    fclose(f);
  }
  return sum;
}

static void test_loss(void) {
  /* the child is the only traced process (pids), so once it has exited the kernel's counters
   * stand still: stats after stop (the instance is gone then: its counters were saved at stop)
   * must equal what the instance's per-CPU stats said just before the stop */
  int go[2];
  CHECK_EQ(pipe(go), 0);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
      for (int i = 0; i < 1000; i++) syscall(SYS_getppid);
      clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 700000000L);
    _exit(0);
  }
  close(go[0]);
  char *evs[] = {"sys_enter"};
  uint32_t pids[1] = {(uint32_t)pid};
  struct etw_provider_spec p = prov("raw_syscalls", evs, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1, .buffer_kb = 8, .pids = pids, .n_pids = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (!s.st) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return;
  }
  CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  CHECK_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  /* drain the hub meanwhile so the hub never holds everything */
  struct etw_jw out;
  etw_jw_init(&out, 1 << 30);
  for (int i = 0; i < 20; i++) {
    etw_sub_read(s.sub, &out, ETW_FMT_NDJSON, 1 << 20, 50);
    etw_jw_truncate(&out, 0);
  }
  int stt;
  waitpid(pid, &stt, 0);
  uint64_t ov = stat_sum(s.name, "overrun: "), dr = stat_sum(s.name, "dropped events: ");
  B->stop(s.st);
  char dir[256];
  snprintf(dir, sizeof dir, "/sys/kernel/tracing/instances/%s", s.name);
  CHECK(access(dir, F_OK) != 0); /* stop removed the instance (its buffers) */
  struct etw_backend_stats bs;
  B->stats(s.st, &bs);
  fprintf(stderr, "loss test: read %llu events, kernel overrun %llu dropped %llu\n",
          (unsigned long long)bs.read_events, (unsigned long long)bs.kernel_overrun,
          (unsigned long long)bs.kernel_dropped);
  CHECK(bs.kernel_lost > 0);
  CHECK_EQ(bs.kernel_overrun, ov);
  CHECK_EQ(bs.kernel_dropped, dr);
  CHECK_EQ(bs.kernel_lost, ov + dr);
  CHECK(bs.read_events > 0);
  etw_jw_free(&out);
  sess_close(&s);
}

/* `trace-cmd report @path`: how many of @pids have exactly one exec of /bin/true (-1: failed);
 * @quiet: no diagnostics on a mismatch */
static int report_count_q(const char *path, const pid_t *pids, int n, int quiet) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "trace-cmd report %s 2>&1", path);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[1024];
  int found[64] = {0}, lines = 0;
  while (fgets(line, sizeof line, f)) {
    lines++;
    if (!strstr(line, "sched_process_exec") || !strstr(line, "filename=/bin/true")) continue;
    for (int i = 0; i < n && i < 64; i++) {
      char k[64];
      snprintf(k, sizeof k, " pid=%d ", (int)pids[i]);
      if (strstr(line, k)) found[i]++;
    }
  }
  int rc = pclose(f);
  int ok = 0;
  for (int i = 0; i < n && i < 64; i++) ok += found[i] == 1;
  if (!quiet && (rc != 0 || ok != n))
    fprintf(stderr, "trace-cmd report: rc %d, %d lines, %d/%d execs\n", rc, lines, ok, n);
  return rc == 0 ? ok : -1;
}

static int report_count(const char *path, const pid_t *pids, int n) {
  return report_count_q(path, pids, n, 0);
}

/* file mode: trace-cmd report opens the file and shows the exec events, during and after */
static void test_file_mode(void) {
  enum { N = 5 };
  char dir[] = "/tmp/etwd_lxtestXXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(0);
    return;
  }
  char path[128];
  snprintf(path, sizeof path, "%s/trace.dat", dir);
  struct etw_provider_spec p = prov("sched", ev_exec, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME | ETW_MODE_FILE,
                                .providers = &p, .n_providers = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, path, &st), ETW_E_OK);
  if (!s.st) {
    fprintf(stderr, "open: %s\n", st.msg);
    return;
  }
  struct stat sb;
  CHECK(stat(path, &sb) == 0); /* a valid empty recording exists while recording */
  CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  pid_t pids[N];
  for (int i = 0; i < N; i++) {
    struct child c = spawn_wait("/bin/true");
    pids[i] = c.pid;
    release(&c);
  }
  /* a system enabled during the recording: its formats are in the file too. The child makes
   * its calls only once the enable has returned (a pipe, not a sleep). */
  char *ev_g[] = {"sys_enter_getppid"};
  int gpipe[2];
  CHECK(pipe(gpipe) == 0);
  pid_t gp = fork();
  if (gp == 0) {
    char b;
    close(gpipe[1]);
    if (read(gpipe[0], &b, 1) != 1) _exit(3);
    for (int i = 0; i < 3; i++) syscall(SYS_getppid);
    _exit(0);
  }
  close(gpipe[0]);
  char filt[64];
  snprintf(filt, sizeof filt, "common_pid == %d", (int)gp);
  struct etw_provider_spec np = prov("syscalls", ev_g, 1, filt);
  CHECK_EQ(B->enable(s.st, &np, &st), ETW_E_OK);
  CHECK(write(gpipe[1], "x", 1) == 1);
  close(gpipe[1]);
  int gst;
  waitpid(gp, &gst, 0);
  /* while recording: the file is refreshed about every second; wait for a refresh that has
   * the execs (generous deadline: the snapshot thread and readers may run late under load) */
  {
    int got = -1;
    for (int waited = 0; waited < 120000; waited += 200) {
      if ((got = report_count_q(path, pids, N, 1)) == N) break;
      sleep_ms(200);
    }
    if (got != N) got = report_count(path, pids, N); /* once more, with the diagnostics */
    CHECK_EQ(got, N);
  }
  B->stop(s.st);
  {
    char cmd[512], line[1024];
    snprintf(cmd, sizeof cmd, "trace-cmd report %s 2>&1", path);
    FILE *f = popen(cmd, "r");
    int g = 0;
    char k[32];
    snprintf(k, sizeof k, "-%d ", (int)gp);
    while (f && fgets(line, sizeof line, f))
      if (strstr(line, "sys_enter_getppid") && strstr(line, k)) g++;
    if (f) pclose(f);
    CHECK_EQ(g, 3);
  }
  struct etw_jw out;
  etw_jw_init(&out, 16 << 20);
  collect(&s, &out, 100);
  CHECK_EQ(report_count(path, pids, N), N);
  /* realtime got them too */
  for (int i = 0; i < N; i++) {
    char k[64];
    snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)pids[i]);
    CHECK_EQ(count_lines(etw_jw_cstr(&out), k, "/bin/true", NULL), 1);
  }
  etw_jw_free(&out);
  sess_close(&s);
  unlink(path);
  rmdir(dir);
}

/* lifecycles without start, and two sessions side by side on the same event */
static void test_lifecycles(void) {
  struct etw_provider_spec p = prov("sched", ev_exec, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1};
  struct sess a, b;
  struct etw_status st;
  /* open then destroy, never started */
  CHECK_EQ(sess_open(&a, &sp, NULL, &st), ETW_E_OK);
  CHECK(instance_exists(a.name));
  sess_close(&a);
  /* open, stop, stop, destroy */
  CHECK_EQ(sess_open(&a, &sp, NULL, &st), ETW_E_OK);
  if (a.st) {
    B->stop(a.st);
    B->stop(a.st);
    CHECK_EQ(B->start(a.st, &st), ETW_E_STATE); /* a stopped session does not start again */
    sess_close(&a);
  }
  /* two sessions: each gets every exec */
  CHECK_EQ(sess_open(&a, &sp, NULL, &st), ETW_E_OK);
  CHECK_EQ(sess_open(&b, &sp, NULL, &st), ETW_E_OK);
  if (!a.st || !b.st) return;
  CHECK_EQ(B->start(a.st, &st), ETW_E_OK);
  CHECK_EQ(B->start(b.st, &st), ETW_E_OK);
  pid_t pids[4];
  for (int i = 0; i < 4; i++) {
    struct child c = spawn_wait("/bin/true");
    pids[i] = c.pid;
    release(&c);
  }
  struct etw_jw oa, ob;
  etw_jw_init(&oa, 16 << 20);
  etw_jw_init(&ob, 16 << 20);
  collect(&a, &oa, 300);
  collect(&b, &ob, 300);
  B->stop(a.st);
  B->stop(b.st);
  collect(&a, &oa, 100);
  collect(&b, &ob, 100);
  for (int i = 0; i < 4; i++) {
    char k[64];
    snprintf(k, sizeof k, "\"ProcessID\":%d,", (int)pids[i]);
    CHECK_EQ(count_lines(etw_jw_cstr(&oa), k, "sched_process_exec", NULL), 1);
    CHECK_EQ(count_lines(etw_jw_cstr(&ob), k, "sched_process_exec", NULL), 1);
  }
  etw_jw_free(&oa);
  etw_jw_free(&ob);
  sess_close(&a);
  sess_close(&b);
}

/* cleanup() at exit removes live instances; a later destroy() only frees */
static void test_cleanup(void) {
  struct etw_provider_spec p = prov("sched", ev_exec, 1, NULL);
  struct etw_session_spec sp = {.backend = "linux", .mode = ETW_MODE_REALTIME, .providers = &p,
                                .n_providers = 1};
  struct sess s;
  struct etw_status st;
  CHECK_EQ(sess_open(&s, &sp, NULL, &st), ETW_E_OK);
  if (!s.st) return;
  CHECK_EQ(B->start(s.st, &st), ETW_E_OK);
  CHECK(instance_exists(s.name));
  B->cleanup();
  CHECK(!instance_exists(s.name));
  /* nothing may touch the top-level instance now (a NULL instance in libtracefs) */
  struct etw_provider_spec q = prov("sched", ev_exec, 1, NULL);
  CHECK_EQ(B->enable(s.st, &q, &st), ETW_E_STATE);
  CHECK_EQ(B->disable(s.st, "sched", &st), ETW_E_STATE);
  struct etw_backend_stats bs;
  B->stats(s.st, &bs); /* still safe */
  CHECK_EQ(bs.kernel_lost, 0);
  sess_close(&s);
  /* init() reaps instances with our prefix whose owner (trailing _<pid>) is dead, and only those */
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  char stale[96], alive[96];
  snprintf(stale, sizeof stale, "/sys/kernel/tracing/instances/%sstale_%d", ETW_SESSION_PREFIX,
           (int)dead);
  snprintf(alive, sizeof alive, "/sys/kernel/tracing/instances/%salive_%d", ETW_SESSION_PREFIX,
           (int)getpid());
  CHECK(mkdir(stale, 0755) == 0);
  CHECK(mkdir(alive, 0755) == 0);
  CHECK_EQ(B->init(&st), ETW_E_OK);
  struct stat sb;
  CHECK(stat(stale, &sb) != 0);
  CHECK(stat(alive, &sb) == 0);
  rmdir(stale);
  rmdir(alive);
}

static void test_providers(void) {
  struct etw_jw w;
  struct etw_status st;
  etw_jw_init(&w, 1 << 22);
  CHECK_EQ(B->list_providers(NULL, &w, &st), ETW_E_OK);
  CHECK(strstr(etw_jw_cstr(&w), "{\"name\":\"sched\",\"events\":") != NULL);
  CHECK(etw_jw_cstr(&w)[0] == '[');
  etw_jw_truncate(&w, 0);
  CHECK_EQ(B->list_providers("SCHE", &w, &st), ETW_E_OK);
  CHECK(strstr(etw_jw_cstr(&w), "\"sched\"") != NULL);
  CHECK(strstr(etw_jw_cstr(&w), "\"raw_syscalls\"") == NULL);
  etw_jw_truncate(&w, 0);
  CHECK_EQ(B->describe_provider("sched", &w, &st), ETW_E_OK);
  const char *d = etw_jw_cstr(&w);
  CHECK(!strncmp(d, "{\"name\":\"sched\",\"events\":[", 26));
  CHECK(strstr(d, "\"name\":\"sched_process_exec\",\"fields\":[{\"name\":\"common_type\","
                  "\"type\":\"unsigned short\",\"offset\":0,\"size\":2,\"signed\":false,"
                  "\"common\":true}") != NULL);
  CHECK(strstr(d, "{\"name\":\"filename\",\"type\":\"__data_loc char[]\",\"offset\":8,\"size\":4,"
                  "\"signed\":false}") != NULL);
  etw_jw_truncate(&w, 0);
  CHECK_EQ(B->describe_provider("no_such", &w, &st), ETW_E_NOT_FOUND);
  CHECK(strstr(st.msg, "no_such") != NULL);
  CHECK_EQ(B->describe_provider("../..", &w, &st), ETW_E_NOT_FOUND);
  etw_jw_free(&w);
}

int main(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "test_linux_backend needs root (real tracefs)\n");
    return 1;
  }
  struct etw_status st;
  CHECK_EQ(B->init(&st), ETW_E_OK);
  CHECK_STR(B->name, "linux");
  test_providers();
  test_exec_exact();
  test_filters();
  test_enable_running();
  test_threads();
  test_invalid();
  test_loss();
  test_file_mode();
  test_lifecycles();
  test_cleanup();
  B->cleanup();
  T_DONE();
}
