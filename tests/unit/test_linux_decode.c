/* test_linux_decode.c — the Linux backend's generic decoder (linux_decode.c), byte for byte.
 *
 * Builds raw tracefs records by hand from the real format files (tracefs must be mounted; the
 * test mounts it through the backend's init), decodes them with lx_dec_event, and compares the
 * JSON with the shape the core writes (etw_event_write_system + EventData): strings, escapes,
 * exact 64-bit numbers, arrays, __data_loc, truncated records, unknown ids, and timestamps.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event-parse.h>
#include <tracefs.h>

#include "etwcore/backend.h"
#include "etwcore/host.h"
#include "linux/linux_int.h"
#include "t.h"

static struct tep_handle *tep;

static struct tep_event *ev(const char *sys, const char *name) {
  return tep_find_event_by_name(tep, sys, name);
}

static void put(unsigned char *rec, struct tep_event *e, const char *field, const void *v,
                size_t n) {
  struct tep_format_field *f = tep_find_any_field(e, field);
  if (!f) {
    fprintf(stderr, "no field %s\n", field);
    t_failures++;
    return;
  }
  memcpy(rec + f->offset, v, n);
}

static void hdr(unsigned char *rec, struct tep_event *e, int32_t pid) {
  uint16_t t = (uint16_t)e->id;
  memcpy(rec, &t, 2);
  memcpy(rec + 4, &pid, 4);
}

static void flush_none(void *ctx, struct lx_sink *s) {
  (void)ctx;
  (void)s;
}

/* decode one record into a batch of @max bytes and return the event bytes (caller frees) */
static char *decode_max(struct lx_dec *d, const unsigned char *rec, uint32_t size, uint64_t ts,
                        size_t max) {
  struct lx_sink s = {.b = etw_batch_new(16, max), .flush = flush_none};
  lx_dec_event(d, rec, size, ts, &s);
  char *out = NULL;
  if (s.b->n == 1) out = strndup(s.b->data.buf + s.b->ev[0].off, s.b->ev[0].len);
  etw_batch_unref(s.b);
  return out;
}

/* the unchecked encoder (big batch) and the checked one (a batch too small for the worst case
 * the descriptor reserves, but big enough for the event) must write the same bytes */
static char *decode(struct lx_dec *d, const unsigned char *rec, uint32_t size, uint64_t ts) {
  char *fast = decode_max(d, rec, size, ts, 1 << 20);
  char *slow = decode_max(d, rec, size, ts, 600 + strlen(etw_host_name()) + 10); /* + ,"Host":"…" */
  if (fast && slow) CHECK_STR(slow, fast);
  free(slow);
  return fast;
}

static char *expect_sys2(struct tep_event *e, int64_t ts_real, int32_t pid, int32_t tid,
                         int cpu, const char *data) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 16);
  struct etw_sys s = {0};
  s.provider = e->system;
  s.event_id = (uint32_t)e->id;
  s.level = 4;
  s.ts_ns = ts_real;
  s.event_name = e->name;
  s.pid = pid;
  s.tid = tid;
  s.cpu = cpu;
  etw_event_write_system(&w, &s);
  /* System.Host follows the Provider object */
  const char *at = strstr(w.buf, "},\"EventID\":");
  size_t cut = at ? (size_t)(at - w.buf) + 1 : w.len;
  char *tail = strndup(w.buf + cut, w.len - cut);
  etw_jw_truncate(&w, cut);
  etw_jw_lit(&w, ",\"Host\":");
  etw_jw_cs(&w, etw_host_name());
  etw_jw_lit(&w, tail);
  free(tail);
  etw_jw_lit(&w, ",\"EventData\":{");
  etw_jw_lit(&w, data);
  etw_jw_lit(&w, "}}");
  size_t n;
  return etw_jw_steal(&w, &n);
}

static char *expect_sys(struct tep_event *e, int64_t ts_real, int32_t pid, int cpu,
                        const char *data) {
  return expect_sys2(e, ts_real, pid, pid, cpu, data);
}

/* TimeCreated through the cached formatter (minute prefix, second digits, fraction) against
 * the core's writer: every rollover, backwards steps, before 1970 and the int64 ends. */
static void test_times(struct lx_dec *d, struct tep_event *se) {
  unsigned char rec[128] = {0};
  hdr(rec, se, 1);
  int64_t id = 39;
  uint64_t args[6] = {1, 2, 3, 4, 5, 6};
  put(rec, se, "id", &id, 8);
  put(rec, se, "args", args, sizeof args);
  const int64_t S = 1000000000;
  /* UTC ns of boundaries: minute, hour, day, month, year, leap day, epoch, far past/future */
  const int64_t marks[] = {1767225540LL * S, 1767222000LL * S, 1767139200LL * S,
                           1764547200LL * S, 1767225600LL * S, 1709164800LL * S, 0,
                           -86400LL * S, -9223372036LL * S + 120 * S, 9223372035LL * S};
  const int64_t steps[] = {-2 * S - 1, -S - 1, -S, -1, 0, 1, 99, 100, 999999999, S, S + 1,
                           59 * S, 60 * S, 61 * S, -60 * S, 3600 * S};
  const int64_t saved = d->mono_to_real;
  int n = 0;
  for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
      if (steps[k] > 0 && marks[m] > INT64_MAX - steps[k]) continue; /* past INT64_MAX */
      int64_t real = marks[m] + steps[k];
      /* a fixed trace timestamp: the offset carries the time, as mono_to_real does */
      uint64_t ts = 5 * (uint64_t)S;
      d->mono_to_real = real - (int64_t)ts;
      char *got = decode(d, rec, 72, ts);
      char *want = expect_sys(se, real, 1, 1, "\"id\":39,\"args\":[1,2,3,4,5,6]");
      CHECK_STR(got, want);
      free(got);
      free(want);
      n++;
    }
  }
  /* near the int64 ends (not cached below INT64_MIN + 60 s: the core writes those; the core's
   * etw_jw_unix_ns itself overflows for ns < INT64_MIN + 99, so the test stays above that) */
  const int64_t ends[] = {INT64_MIN + 100, INT64_MIN + 59 * S, INT64_MIN + 61 * S, INT64_MAX,
                          INT64_MAX - 1};
  for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) {
    d->mono_to_real = ends[k];
    char *got = decode(d, rec, 72, 0);
    char *want = expect_sys(se, ends[k], 1, 1, "\"id\":39,\"args\":[1,2,3,4,5,6]");
    CHECK_STR(got, want);
    free(got);
    free(want);
    n++;
  }
  d->mono_to_real = saved;
  fprintf(stderr, "times: %d cases\n", n);
}

/* integers at every length and edge, signed and unsigned, against printf */
static void test_numbers(struct lx_dec *d, struct tep_event *se, int64_t off) {
  uint64_t vals[300];
  size_t nv = 0;
  uint64_t p10 = 1;
  for (int k = 0; k <= 19; k++) { /* 10^k - 1, 10^k, 10^k + 1 */
    vals[nv++] = p10 - 1;
    vals[nv++] = p10;
    vals[nv++] = p10 + 1;
    vals[nv++] = p10 * 9 + (p10 - 1); /* 99..9 of k+1 digits */
    if (k < 19) p10 *= 10;
  }
  for (int k = 0; k < 64; k++) {
    vals[nv++] = 1ULL << k;
    vals[nv++] = (1ULL << k) - 1;
  }
  vals[nv++] = UINT64_MAX;
  vals[nv++] = UINT64_MAX - 1;
  vals[nv++] = 18446744073709551000ULL;
  vals[nv++] = 10000000000000000000ULL;
  vals[nv++] = 1234567890123456789ULL;
  vals[nv++] = 140018112981536ULL;
  unsigned char rec[128] = {0};
  hdr(rec, se, 1);
  int cases = 0;
  for (size_t i = 0; i < nv; i += 6) {
    uint64_t a[6];
    char want_args[256];
    size_t wl = 0;
    for (size_t k = 0; k < 6; k++) {
      a[k] = vals[(i + k) % nv];
      wl += (size_t)snprintf(want_args + wl, sizeof want_args - wl, "%s%llu", k ? "," : "",
                             (unsigned long long)a[k]);
    }
    int64_t id = (int64_t)vals[i]; /* signed: covers negatives and INT64_MIN */
    put(rec, se, "id", &id, 8);
    put(rec, se, "args", a, sizeof a);
    char data[400];
    snprintf(data, sizeof data, "\"id\":%lld,\"args\":[%s]", (long long)id, want_args);
    char *got = decode(d, rec, 72, 777);
    char *want = expect_sys(se, 777 + off, 1, 1, data);
    CHECK_STR(got, want);
    free(got);
    free(want);
    cases++;
  }
  fprintf(stderr, "numbers: %zu values in %d events\n", nv, cases);
}

/* __data_loc strings of every length 0..40 at offsets where the 16 bytes before their end are
 * in the record or not, plain and needing escapes, against the core's string writer */
static void test_dstr(struct lx_dec *d, struct tep_event *ex) {
  static const char pat[] = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus-and-more";
  const uint32_t offs[] = {4, 12, 20, 23, 40};
  int cases = 0;
  for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
    for (uint32_t len = 0; len <= 40; len++) {
      for (int shape = 0; shape < 3; shape++) {
        unsigned char rec[128];
        memset(rec, 0x55, sizeof rec);
        unsigned char *sp = rec + offs[o];
        memcpy(sp, pat, len);
        if (len && shape == 1) sp[len - 1] = 0;       /* NUL-terminated, as the kernel writes */
        if (len > 2 && shape == 2) sp[len / 2] = '"'; /* needs an escape */
        /* the header and fields last: at small offsets the string overlaps them, and the
         * reference below reads what the record finally holds */
        hdr(rec, ex, 77);
        int32_t p = 77, op = 76;
        put(rec, ex, "pid", &p, 4);
        put(rec, ex, "old_pid", &op, 4);
        uint32_t loc = (len << 16) | offs[o];
        put(rec, ex, "filename", &loc, 4);
        uint32_t size = offs[o] + len > 24 ? offs[o] + len : 24;
        char *got = decode(d, rec, size, 1000);
        struct etw_jw ref;
        etw_jw_init(&ref, 1024);
        etw_jw_lit(&ref, "\"filename\":");
        /* what the record holds now (the header may have overwritten the string's start) */
        etw_jw_str(&ref, (const char *)sp, strnlen((const char *)sp, len));
        etw_jw_ch(&ref, ',');
        if (!got || !strstr(got, etw_jw_cstr(&ref))) {
          fprintf(stderr, "dstr off %u len %u shape %d: got %s want %s\n", offs[o], len, shape,
                  got ? got : "(null)", etw_jw_cstr(&ref));
          t_failures++;
        }
        etw_jw_free(&ref);
        free(got);
        cases++;
      }
    }
  }
  fprintf(stderr, "dstr: %d cases\n", cases);
}

/* ProcessID / ThreadID: negative ids are null (as the core writes them); tasks that take
 * turns, and tids that share an id-text slot, keep their own text */
static void test_ids(struct lx_dec *d, struct tep_event *se, int64_t off) {
  unsigned char rec[128] = {0};
  int64_t id = 0;
  uint64_t args[6] = {0};
  put(rec, se, "id", &id, 8);
  put(rec, se, "args", args, sizeof args);
  const int32_t tids[] = {-5, 1, 257, 1, 513, -1, 0, 2147483647, 257, -2147483647 - 1, 1, 0};
  for (size_t k = 0; k < sizeof tids / sizeof tids[0]; k++) {
    hdr(rec, se, tids[k]);
    char *got = decode(d, rec, 72, 1000 + k);
    char *want = expect_sys(se, (int64_t)(1000 + k) + off, tids[k], 1,
                            "\"id\":0,\"args\":[0,0,0,0,0,0]");
    CHECK_STR(got, want);
    free(got);
    free(want);
  }
}

static char *with_pname(char *want, const char *name);

/* sched_switch's s32 (pids, priorities) and s64 (prev_state) fields at every length and edge,
 * negative included, against printf */
static void test_small_ints(struct lx_dec *d, struct tep_event *sw, int64_t off) {
  int64_t vals[200];
  size_t nv = 0;
  int64_t p10 = 1;
  for (int k = 0; k <= 18; k++) { /* ±(10^k - 1), ±10^k */
    vals[nv++] = p10 - 1;
    vals[nv++] = p10;
    vals[nv++] = -p10;
    vals[nv++] = 1 - p10;
    if (k < 18) p10 *= 10;
  }
  const int64_t ends[] = {INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
                          INT64_MAX, INT64_MIN, INT64_MIN + 1, 4294967295LL, 99999999,
                          100000000, 120, 4242, 21733};
  for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) vals[nv++] = ends[k];
  unsigned char rec[128] = {0};
  hdr(rec, sw, 9);
  put(rec, sw, "prev_comm", "a", 2);
  put(rec, sw, "next_comm", "b", 2);
  int cases = 0;
  const char *cur = NULL; /* task 9's comm as the events so far named it (prev/next_pid 9) */
  for (size_t i = 0; i < nv; i++) {
    int32_t v32 = (int32_t)vals[i], w32 = (int32_t)vals[(i + 7) % nv];
    if (v32 == 9) cur = "a";
    else if (w32 == 9) cur = "b";
    int64_t v64 = vals[(i + 3) % nv];
    put(rec, sw, "prev_pid", &v32, 4);
    put(rec, sw, "prev_prio", &w32, 4);
    put(rec, sw, "prev_state", &v64, 8);
    put(rec, sw, "next_pid", &w32, 4);
    put(rec, sw, "next_prio", &v32, 4);
    char data[400];
    snprintf(data, sizeof data,
             "\"prev_comm\":\"a\",\"prev_pid\":%d,\"prev_prio\":%d,\"prev_state\":%lld,"
             "\"next_comm\":\"b\",\"next_pid\":%d,\"next_prio\":%d",
             (int)v32, (int)w32, (long long)v64, (int)w32, (int)v32);
    char *got = decode(d, rec, 64, 555);
    char *want = with_pname(expect_sys(sw, 555 + off, 9, 1, data), cur);
    CHECK_STR(got, want);
    free(got);
    free(want);
    cases++;
  }
  fprintf(stderr, "small ints: %d events\n", cases);
}

/* the Tgid of task @tid from /proc, or @tid when there is no such task */
static int32_t proc_pid(int32_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return tid;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *t = strstr(buf, "\nTgid:");
  return t ? (int32_t)atoi(t + 7) : tid;
}

/* the Execution.ProcessName the decoder writes for @tid now: its /proc Name, or NULL (gone) */
static char *proc_name(int32_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  if (strncmp(buf, "Name:\t", 6)) return NULL;
  size_t k = strcspn(buf + 6, "\n");
  return strndup(buf + 6, k > 15 ? 15 : k);
}

/* the decoder's ProcessName of @tid now: /proc (a task that is gone has none: saved_cmdlines
 * may name another task that had the pid since) */
static char *task_name(int32_t tid) { return proc_name(tid); }

/* @want with `,"ProcessName":"@name"` after its ProcessID (plain names only; NULL: unchanged) */
static char *with_pname(char *want, const char *name) {
  if (!name) return want;
  char *t = strstr(want, ",\"ThreadID\":");
  if (!t) return want;
  size_t a = (size_t)(t - want);
  char *o = malloc(strlen(want) + strlen(name) + 32);
  memcpy(o, want, a);
  sprintf(o + a, ",\"ProcessName\":\"%s\"%s", name, t);
  free(want);
  return o;
}

/* unsigned long arrays of 1 to 20 elements (the unrolled and the looped encoder), from a
 * format of our own parsed into the tep as the kernel's are */
static void test_arrays(struct lx_dec *d, int64_t off) {
  static const char fmt[] =
      "name: lxt_arrays\nID: 60001\nformat:\n"
      "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
      "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
      "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
      "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
      "\tfield:unsigned long a1[1];\toffset:8;\tsize:8;\tsigned:0;\n"
      "\tfield:unsigned long a7[7];\toffset:16;\tsize:56;\tsigned:0;\n"
      "\tfield:unsigned long a8[8];\toffset:72;\tsize:64;\tsigned:0;\n"
      "\tfield:unsigned long a9[9];\toffset:136;\tsize:72;\tsigned:0;\n"
      "\tfield:unsigned long a20[20];\toffset:208;\tsize:160;\tsigned:0;\n\n"
      "print fmt: \"x\"\n";
  CHECK_EQ(tep_parse_event(tep, fmt, sizeof fmt - 1, "lxtest"), 0);
  struct tep_event *e = ev("lxtest", "lxt_arrays");
  CHECK(e != NULL);
  if (!e) return;
  const uint32_t lens[] = {1, 7, 8, 9, 20};
  unsigned char rec[368];
  for (int round = 0; round < 3; round++) {
    memset(rec, 0, sizeof rec);
    hdr(rec, e, 5);
    char data[2048];
    size_t dl = 0;
    uint32_t at = 8;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(round + 1);
    for (size_t k = 0; k < 5; k++) {
      dl += (size_t)snprintf(data + dl, sizeof data - dl, "%s\"a%u\":[", k ? "," : "", lens[k]);
      for (uint32_t i = 0; i < lens[k]; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t v = round == 0 ? i : round == 1 ? x : x >> (x % 64);
        memcpy(rec + at + 8 * i, &v, 8);
        dl += (size_t)snprintf(data + dl, sizeof data - dl, "%s%llu", i ? "," : "",
                               (unsigned long long)v);
      }
      at += 8 * lens[k];
      dl += (size_t)snprintf(data + dl, sizeof data - dl, "]");
    }
    char *got = decode(d, rec, sizeof rec, 4444);
    char *want = expect_sys(e, 4444 + off, 5, 1, data);
    CHECK_STR(got, want);
    free(got);
    free(want);
  }
}

static void *park(void *arg) {
  int *fds = arg;
  int32_t tid = (int32_t)syscall(SYS_gettid);
  char c;
  if (write(fds[1], &tid, sizeof tid) != sizeof tid) return NULL;
  if (read(fds[2], &c, 1) < 0) return NULL; /* until the test is done */
  return NULL;
}

/* ProcessID from /proc (resolve_tgid on): a thread of this process has ProcessID getpid();
 * a task that shares its id-text slot, and the answer's expiry (LX_TGID_TTL of trace time),
 * keep it right */
static void test_tgid(struct lx_dec *d, struct tep_event *se, int64_t off) {
  int fds[4];
  if (pipe(fds) || pipe(fds + 2)) {
    CHECK(0);
    return;
  }
  pthread_t th; /* it writes its tid to fds[1] and waits on fds[2] */
  CHECK_EQ(pthread_create(&th, NULL, park, fds), 0);
  int32_t ttid = 0;
  CHECK_EQ(read(fds[0], &ttid, sizeof ttid), (ssize_t)sizeof ttid);
  int32_t me = (int32_t)getpid();
  CHECK(ttid != me);
  unsigned char rec[128] = {0};
  int64_t id = 0;
  uint64_t args[6] = {0};
  put(rec, se, "id", &id, 8);
  put(rec, se, "args", args, sizeof args);
  d->resolve_tgid = 1;
  /* slot mates: ttid + 3 * LX_IDS shares the id-text slot, ttid + LX_TGID_SLOTS (4096) the
   * tgid cache slot too (most likely no such tasks: ProcessID = ThreadID) */
  const int32_t other = ttid < INT32_MAX - 3 * LX_IDS ? ttid + 3 * LX_IDS : ttid - 3 * LX_IDS;
  const int32_t other2 = ttid < INT32_MAX - 4096 ? ttid + 4096 : ttid - 4096;
  /* trace times after the tasks started: /proc's answer is taken only for a task that surely
   * existed at the event (its start time a tick before it) */
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t T = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec + 50000000ULL;
  const uint64_t TTL = 2000000000ULL; /* LX_TGID_TTL */
  /* the comm of each task as /proc had it when its answer was made (the thread's is this
   * process's; "" once the thread is gone) */
  char *mename = proc_name(me), *oname = task_name(other), *o2name = task_name(other2);
  char *gname = NULL; /* the thread's, once it is gone: none */
  struct { int32_t tid; uint64_t ts; int32_t pid; } seq[] = {
      {ttid, T, me}, {ttid, T + 1, me}, {other, T + 2, proc_pid(other)},
      {ttid, T + 3, me}, /* the tgid entry made at T */
      {me, T + 4, me}, {other2, T + 5, proc_pid(other2)},
      {ttid, T + 6, me}, /* a new lookup at T + 6 */
      /* the thread is gone from here on: the answer made at T + 6 holds until it expires */
      {ttid, T + 7, me}, {ttid, T + 6 + TTL - 1, me}, {ttid, T + 6 + TTL, ttid},
      {ttid, T + 6 + TTL + 1, ttid}, {other, T + 6 + TTL + 2, proc_pid(other)},
      {ttid, T + 6 + TTL + 3, ttid}};
  for (size_t k = 0; k < sizeof seq / sizeof seq[0]; k++) {
    if (k == 7) { /* end the thread and wait until /proc no longer has it */
      if (write(fds[3], "x", 1) != 1) CHECK(0);
      pthread_join(th, NULL);
      for (int i = 0; i < 60000 && proc_pid(ttid) != ttid; i++) usleep(1000); /* <= ~60 s */
      CHECK_EQ(proc_pid(ttid), ttid);
    }
    hdr(rec, se, seq[k].tid);
    char *got = decode(d, rec, 72, seq[k].ts);
    char *want = expect_sys2(se, (int64_t)seq[k].ts + off, seq[k].pid, seq[k].tid, 1,
                             "\"id\":0,\"args\":[0,0,0,0,0,0]");
    const char *nm = seq[k].tid == other ? oname : seq[k].tid == other2 ? o2name
                     : seq[k].tid == me || k < 9 ? mename : gname;
    want = with_pname(want, nm);
    if (strcmp(got ? got : "", want)) fprintf(stderr, "tgid step %zu\n", k);
    CHECK_STR(got, want);
    free(got);
    free(want);
  }
  d->resolve_tgid = 0;
  free(mename);
  free(oname);
  free(o2name);
  free(gname);
  for (int i = 0; i < 4; i++) close(fds[i]);
}

static void slots_reset(struct lx_dec *d) {
  for (uint32_t i = 0; i < LX_IDS; i++) d->ids[i].key = UINT64_MAX;
}

/* real pages from a throwaway instance: the direct walker and kbuffer must agree exactly */
static void test_walkers(struct lx_dec *d) {
  char name[64];
  snprintf(name, sizeof name, "%sdect_%d", ETW_SESSION_PREFIX, (int)getpid());
  struct tracefs_instance *in = tracefs_instance_create(name);
  CHECK(in != NULL);
  if (!in) return;
  tracefs_instance_set_buffer_size(in, 2048, -1);
  tracefs_event_enable(in, "raw_syscalls", "sys_enter");
  tracefs_event_enable(in, "sched", NULL);
  tracefs_trace_on(in);
  pid_t pid = fork();
  if (pid == 0) {
    for (int k = 0; k < 10; k++) {
      for (int i = 0; i < 3000; i++) syscall(SYS_getppid);
      usleep(k % 4 ? 1000 : 150000); /* gaps > 2^27 ns need time-extend records */
      if (fork() == 0) {
        execl("/bin/true", "/bin/true", (char *)NULL);
        _exit(1);
      }
      wait(NULL);
    }
    _exit(0);
  }
  waitpid(pid, NULL, 0);
  tracefs_trace_off(in);
  int ps = getpagesize();
  unsigned char *page = calloc(1, (size_t)ps);
  uint64_t total = 0;
  int pages = 0;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  for (int c = 0; c < ncpu; c++) {
    struct tracefs_cpu *tc = tracefs_cpu_open(in, c, true);
    if (!tc) continue;
    for (;;) {
      memset(page, 0, (size_t)ps);
      if (tracefs_cpu_read(tc, page, true) <= 0) break;
      pages++;
      struct lx_sink a = {.b = etw_batch_new(4096, 8 << 20), .flush = flush_none};
      struct lx_sink b = {.b = etw_batch_new(4096, 8 << 20), .flush = flush_none};
      d->walk = 1;
      slots_reset(d); /* the same names for both: comms in the payload name their tasks */
      uint64_t na = lx_dec_page(d, page, &a);
      slots_reset(d);
      d->walk = 0;
      uint64_t nb = lx_dec_page(d, page, &b);
      d->walk = 1;
      CHECK_EQ(na, nb);
      CHECK_EQ(lx_count_page(d, page), na);
      CHECK_EQ(a.b->data.len, b.b->data.len);
      if (a.b->data.len == b.b->data.len) CHECK(!memcmp(a.b->data.buf, b.b->data.buf, a.b->data.len));
      total += na;
      etw_batch_unref(a.b);
      etw_batch_unref(b.b);
    }
    tracefs_cpu_close(tc);
  }
  fprintf(stderr, "walkers agree on %d pages, %llu events\n", pages, (unsigned long long)total);
  CHECK(total > 30000);
  free(page);
  tracefs_instance_destroy(in);
  tracefs_instance_free(in);
}

/* every test */
static void run(void) {
  const char *systems[] = {"sched", "raw_syscalls", NULL};
  tep = lx_tep_new(systems);
  CHECK(tep != NULL);
  if (!tep) return;
  struct lx_dec d;
  const int64_t off = 1763776000LL * 1000000000LL; /* mono → real */
  CHECK_EQ(lx_dec_init(&d, tep, 1, off), 0);
  d.resolve_tgid = 0; /* the hand-made records' pids are not real tasks */

  /* sched_switch: char arrays with escapes and invalid UTF-8, signed long */
  struct tep_event *sw = ev("sched", "sched_switch");
  CHECK(sw != NULL);
  if (sw) {
    unsigned char rec[128] = {0};
    hdr(rec, sw, 4242);
    put(rec, sw, "prev_comm", "a\"b\\c\xff", 7);
    int32_t pp = 4242, pr = 120, np = 7, npr = 99;
    int64_t state = -5;
    put(rec, sw, "prev_pid", &pp, 4);
    put(rec, sw, "prev_prio", &pr, 4);
    put(rec, sw, "prev_state", &state, 8);
    put(rec, sw, "next_comm", "0123456789abcdef", 16); /* no NUL: all 16 bytes */
    put(rec, sw, "next_pid", &np, 4);
    put(rec, sw, "next_prio", &npr, 4);
    uint64_t ts = 5ull * 1000000000ull + 123456789ull;
    char *got = decode(&d, rec, 64, ts);
    char *want = expect_sys(sw, (int64_t)ts + off, 4242, 1,
                            "\"prev_comm\":\"a\\\"b\\\\c\xef\xbf\xbd\",\"prev_pid\":4242,"
                            "\"prev_prio\":120,\"prev_state\":-5,"
                            "\"next_comm\":\"0123456789abcdef\",\"next_pid\":7,\"next_prio\":99");
    want = with_pname(want, "a\\u0022b\\u005cc\\u00ff"); /* prev_pid is the task: its comm */
    CHECK_STR(got, want);
    free(got);
    free(want);
    /* comm strings of every length and shape vs the core's writer on strnlen */
    static const char *const comms[] = {"", "a", "abcdefg", "abcdefgh", "abcdefghi",
                                        "abcdefghijklmno", "tab\there", "q\"x", "\xc3\xa9t\xc3\xa9",
                                        "sixteen-chars-xx", "bad\x80" "byte", "0123456\"",
                                        "01234567\\", "x\0hidden\"stuff"};
    for (size_t k = 0; k < sizeof comms / sizeof comms[0]; k++) {
      char comm[16] = {0};
      size_t cl = strlen(comms[k]);
      memcpy(comm, comms[k], cl > 16 ? 16 : cl);
      if (k == sizeof comms / sizeof comms[0] - 1) memcpy(comm, "x\0hidden\"stuff", 15);
      put(rec, sw, "prev_comm", comm, 16);
      char *g = decode(&d, rec, 64, ts);
      struct etw_jw ref;
      etw_jw_init(&ref, 1024);
      etw_jw_lit(&ref, "\"prev_comm\":");
      etw_jw_str(&ref, comm, strnlen(comm, 16));
      etw_jw_ch(&ref, ',');
      if (!g || !strstr(g, etw_jw_cstr(&ref))) {
        fprintf(stderr, "comm case %zu: got %s want %s\n", k, g ? g : "(null)", etw_jw_cstr(&ref));
        t_failures++;
      }
      etw_jw_free(&ref);
      free(g);
    }
    test_small_ints(&d, sw, off);
    put(rec, sw, "prev_comm", "a\"b\\c\xff", 7);
    /* truncated record: fields beyond the end are null */
    got = decode(&d, rec, 30, ts);
    CHECK(got && strstr(got, "\"prev_pid\":4242,\"prev_prio\":null,\"prev_state\":null,"
                             "\"next_comm\":null,\"next_pid\":null,\"next_prio\":null}}"));
    free(got);
  }

  /* sys_enter: signed long id, unsigned long args[6] with the extremes */
  struct tep_event *se = ev("raw_syscalls", "sys_enter");
  CHECK(se != NULL);
  if (se) {
    unsigned char rec[128] = {0};
    hdr(rec, se, 1);
    int64_t id = -1;
    uint64_t args[6] = {0, 1, UINT64_MAX, 0x7fffffffffffffffull, 1000000000000ull, 42};
    put(rec, se, "id", &id, 8);
    put(rec, se, "args", args, sizeof args);
    for (int k = 0; k < 3; k++) { /* crosses the cached second */
      uint64_t ts = 999999999ull + (uint64_t)k;
      char *got = decode(&d, rec, 72, ts);
      char *want = expect_sys(se, (int64_t)ts + off, 1, 1,
                              "\"id\":-1,\"args\":[0,1,18446744073709551615,"
                              "9223372036854775807,1000000000000,42]");
      CHECK_STR(got, want);
      free(got);
      free(want);
    }
    test_times(&d, se);
    test_numbers(&d, se, off);
    test_ids(&d, se, off);
    test_tgid(&d, se, off);
  }

  /* sched_process_exec: __data_loc string; out of range → null */
  struct tep_event *ex = ev("sched", "sched_process_exec");
  CHECK(ex != NULL);
  if (ex) {
    unsigned char rec[128] = {0};
    hdr(rec, ex, 77);
    const char *fn = "/usr/bin/\xe2\x82\xac\ttrue";
    uint32_t len = (uint32_t)strlen(fn) + 1, offs = 20;
    uint32_t loc = (len << 16) | offs;
    memcpy(rec + offs, fn, len);
    put(rec, ex, "filename", &loc, 4);
    int32_t p = 77, op = 76;
    put(rec, ex, "pid", &p, 4);
    put(rec, ex, "old_pid", &op, 4);
    char *got = decode(&d, rec, offs + len, 1000);
    char *want = expect_sys(ex, 1000 + off, 77, 1,
                            "\"filename\":\"/usr/bin/\xe2\x82\xac\\ttrue\",\"pid\":77,\"old_pid\":76");
    /* the comm exec gives: the file's name (its bytes as /proc escapes are written \u00XX) */
    want = with_pname(want, "\\u00e2\\u0082\\u00ac\\u0009true");
    CHECK_STR(got, want);
    free(got);
    free(want);
    loc = (200u << 16) | offs;
    put(rec, ex, "filename", &loc, 4);
    got = decode(&d, rec, offs + len, 1000);
    CHECK(got && strstr(got, "\"EventData\":{\"filename\":null,\"pid\":77,"));
    free(got);
    test_dstr(&d, ex);
  }

  /* unknown event id → Undecoded with the payload */
  {
    unsigned char rec[8] = {0xfe, 0xff, 0, 0, 5, 0, 0, 0};
    char *got = decode(&d, rec, 8, 0);
    CHECK(got && strstr(got, "\"Provider\":{\"Name\":\"tracefs\"}"));
    CHECK(got && strstr(got, ",\"Undecoded\":{\"Reason\":\"unknown event id\",\"Payload\":\"/v8AAAUAAAA=\"}}"));
    free(got);
    CHECK_EQ(atomic_load(&d.undecoded), 2); /* decode() runs both encoders */
  }
  /* a full batch is flushed through the sink; no sink batch → counted as dropped */
  {
    struct lx_sink s = {.b = NULL, .flush = flush_none};
    unsigned char rec[8] = {0};
    lx_dec_event(&d, rec, 8, 0, &s);
    CHECK_EQ(atomic_load(&d.enc_dropped), 1);
  }
  test_arrays(&d, off);
  test_walkers(&d);
  lx_dec_fini(&d);
}

int main(void) {
  struct etw_status st;
  if (etw_backend_linux.init(&st) != ETW_E_OK) {
    fprintf(stderr, "init: %s\n", st.msg);
    return 1;
  }
  /* the machine's name, then the longest host name (63 characters) */
  for (int h = 0; h < 2; h++) {
    if (h) CHECK_EQ(etw_host_set("h23456789.123456789.123456789.123456789.123456789.123456789.123"), 0);
    fprintf(stderr, "-- host %s\n", etw_host_name());
    run();
  }
  CHECK_EQ(etw_host_set("bad name"), -1);
  CHECK_EQ(etw_host_set("h23456789.123456789.123456789.123456789.123456789.123456789.1234"), -1);
  T_DONE();
}
