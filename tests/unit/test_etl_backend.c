/* test_etl_backend.c — the "etl" backend through the backend interface and a real hub:
 * replaying two files as one session (every event arrives once, in seq order, as ndjson
 * `{"seq":N,"System":…}` lines, then end-of-stream and ended(OK)), stats, idempotent stop,
 * a damaged file ending with ended(CORRUPT, file + offset), bad specs refused, and the
 * providers API over a data directory and the manifests directory.
 */
#include <pthread.h>
#include <unistd.h>

#include "etwcore/backend.h"
#include "etwcore/hub.h"
#include "t.h"
#include "test_etl_util.h"

#define SIH "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl"
#define AMSI "airbus-cert+etl-parser/tests/example/AMSITrace.etl"

struct ended {
  pthread_mutex_t mu;
  int calls;
  enum etw_err code;
  char msg[512];
};

static void on_end(void *ctx, enum etw_err code, const char *msg) {
  struct ended *e = ctx;
  pthread_mutex_lock(&e->mu);
  e->calls++;
  e->code = code;
  snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
  pthread_mutex_unlock(&e->mu);
}

/* Replay @files; returns the number of events read from the hub, fills @out with the text. */
static size_t replay(char **files, uint32_t nf, struct ended *en, struct etw_jw *out, int realtime) {
  struct etw_hub_limits lim = {1u << 20, 1u << 16, 4, 0};
  struct etw_hub *hub = etw_hub_new(&lim);
  int err = 0;
  struct etw_sub *sub = etw_hub_subscribe(hub, NULL, 0, &err);
  struct etw_session_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.backend = "etl";
  spec.files = files;
  spec.n_files = nf;
  spec.replay_realtime = realtime;
  struct etw_backend_args a = {&spec, hub, "etwd_test", NULL, on_end, en};
  void *s = NULL;
  struct etw_status st;
  etw_status_clear(&st);
  CHECK_EQ(etw_backend_etl.open(&a, &s, &st), ETW_E_OK);
  size_t n = 0;
  if (s) {
    CHECK_EQ(etw_backend_etl.start(s, &st), ETW_E_OK);
    for (int guard = 0; guard < 10000; guard++) {
      int k = etw_sub_read(sub, out, ETW_FMT_NDJSON, 1u << 20, 200);
      if (k < 0) break;
      n += (size_t)k;
    }
    etw_backend_etl.stop(s);
    etw_backend_etl.stop(s); /* idempotent */
    struct etw_backend_stats bs;
    etw_backend_etl.stats(s, &bs);
    CHECK(bs.read_events >= n);
    CHECK(bs.read_bytes > 0);
    etw_backend_etl.destroy(s);
  }
  etw_sub_close(sub);
  etw_hub_free(hub);
  return n;
}

int main(void) {
  char *f1 = tu_corpus(SIH), *f2 = tu_corpus(AMSI);
  char *files[2] = {f1, f2};
  struct ended en = {PTHREAD_MUTEX_INITIALIZER, 0, ETW_E_OK, ""};
  struct etw_jw out;
  etw_jw_init(&out, 64u << 20);
  size_t n = replay(files, 2, &en, &out, 0);
  CHECK_EQ(n, 12 + 21);
  CHECK_EQ(en.calls, 1);
  CHECK_EQ(en.code, ETW_E_OK);
  /* ndjson lines: seq 1..33 in order, each a full event */
  const char *p = etw_jw_cstr(&out);
  for (size_t i = 1; i <= n && p; i++) {
    char want[48];
    snprintf(want, sizeof want, "{\"seq\":%zu,\"System\":{", i);
    CHECK(!strncmp(p, want, strlen(want)));
    p = strchr(p, '\n');
    if (p) p++;
  }
  CHECK(strstr(etw_jw_cstr(&out), "\"EventName\":\"AmsiScript\"") != NULL);
  CHECK(strstr(etw_jw_cstr(&out), "\"Info\":\"NoOp success.\"") != NULL);

  /* damaged copy: truncated in its second buffer */
  size_t len = 0;
  unsigned char *b = tu_file(f1, &len);
  char tmpl[] = "/tmp/etl_backend_XXXXXX";
  char *dir = mkdtemp(tmpl);
  CHECK(dir != NULL && b != NULL);
  char cut[256];
  snprintf(cut, sizeof cut, "%s/cut.etl", dir);
  FILE *f = fopen(cut, "wb");
  if (f && b) {
    fwrite(b, 1, len - 100, f);
    fclose(f);
  }
  char *cf[1] = {cut};
  struct ended en2 = {PTHREAD_MUTEX_INITIALIZER, 0, ETW_E_OK, ""};
  out.len = 0;
  n = replay(cf, 1, &en2, &out, 0);
  CHECK(n >= 2);
  CHECK_EQ(en2.calls, 1);
  CHECK_EQ(en2.code, ETW_E_CORRUPT);
  CHECK(strstr(en2.msg, "cut.etl") != NULL && strstr(en2.msg, "offset") != NULL);

  /* recorded speed: SIH spans ~21 s, so only check that pacing starts and stop interrupts */
  {
    struct etw_hub_limits lim = {0, 1u << 16, 2, 0};
    struct etw_hub *hub = etw_hub_new(&lim);
    struct etw_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.backend = "etl";
    spec.files = files;
    spec.n_files = 1;
    spec.replay_realtime = 1;
    struct ended en3 = {PTHREAD_MUTEX_INITIALIZER, 0, ETW_E_OK, ""};
    struct etw_backend_args a = {&spec, hub, "etwd_test", NULL, on_end, &en3};
    void *s = NULL;
    struct etw_status st;
    CHECK_EQ(etw_backend_etl.open(&a, &s, &st), ETW_E_OK);
    CHECK_EQ(etw_backend_etl.start(s, &st), ETW_E_OK);
    usleep(100000);
    etw_backend_etl.stop(s); /* must return promptly although the file spans seconds */
    CHECK_EQ(en3.calls, 0);   /* a stop is not an end by itself */
    etw_backend_etl.destroy(s);
    etw_hub_free(hub);
  }

  /* refused specs */
  {
    struct etw_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.backend = "etl";
    struct etw_backend_args a = {&spec, NULL, "x", NULL, NULL, NULL};
    void *s = NULL;
    struct etw_status st;
    CHECK_EQ(etw_backend_etl.open(&a, &s, &st), ETW_E_INVALID);
    char *missing[1] = {"/nonexistent/x.etl"};
    spec.files = missing;
    spec.n_files = 1;
    CHECK_EQ(etw_backend_etl.open(&a, &s, &st), ETW_E_NOT_FOUND);
  }

  /* providers API: data dir with a copy of SIH, manifests from ../shared/manifests */
  char copy[256];
  snprintf(copy, sizeof copy, "%s/sih.etl", dir);
  f = fopen(copy, "wb");
  if (f && b) {
    fwrite(b, 1, len, f);
    fclose(f);
  }
  etw_etl_set_dirs(dir, tu_manifests());
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_status st;
  CHECK_EQ(etw_backend_etl.list_providers(NULL, &w, &st), ETW_E_OK);
  CHECK(strstr(etw_jw_cstr(&w), "\"name\":\"SIHTraceLogging\"") != NULL);
  CHECK(strstr(etw_jw_cstr(&w), "\"name\":\"Microsoft-Windows-DotNETRuntime\"") != NULL);
  w.len = 0;
  CHECK_EQ(etw_backend_etl.list_providers("SIH", &w, &st), ETW_E_OK);
  CHECK(strstr(etw_jw_cstr(&w), "DotNETRuntime") == NULL);
  w.len = 0;
  CHECK_EQ(etw_backend_etl.describe_provider("Microsoft-Windows-DotNETRuntime", &w, &st), ETW_E_OK);
  CHECK(strstr(etw_jw_cstr(&w), "\"name\":\"GC/Start\"") != NULL);
  w.len = 0;
  CHECK_EQ(etw_backend_etl.describe_provider("SIHTraceLogging", &w, &st), ETW_E_OK);
  CHECK(strstr(etw_jw_cstr(&w), "{\"name\":\"SIH\",\"selfDescribing\":true}") != NULL);
  w.len = 0;
  CHECK_EQ(etw_backend_etl.describe_provider("No-Such-Provider", &w, &st), ETW_E_NOT_FOUND);
  etw_jw_free(&w);
  remove(copy);
  remove(cut);
  rmdir(dir);
  free(b);
  etw_jw_free(&out);
  free(f1);
  free(f2);
  T_DONE();
}
