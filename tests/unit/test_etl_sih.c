/* test_etl_sih.c — SIH.20230422.034724.362.1.etl (TraceLogging SIHTraceLogging/SIH) against
 * its published expected text, record by record: timestamp (shown at UTC−07:00, 100 ns),
 * provider GUID and name, event name, id, version, level, opcode, task, keywords, PID, TID and
 * the Info string; the logfile header record's fields; the PartitionInfoExtension payload.
 * Naming difference (docs/etl.md): the expected text calls the kernel header provider
 * "MSNT_SystemTrace"/"Header"; we use PerfView's "Windows Kernel"/"EventTrace".
 */
#include "t.h"
#include "test_etl_util.h"

#define REL "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl"

struct kv {
  char k[64];
  char v[512];
};

/* Split "TS K=V K="quoted \"x\"" …" into pairs; returns the count. */
static int split(const char *line, char *ts, size_t tscap, struct kv *out, int max) {
  const char *sp = strchr(line, ' ');
  if (!sp) return 0;
  snprintf(ts, tscap, "%.*s", (int)(sp - line), line);
  const char *p = sp + 1;
  int n = 0;
  while (*p && n < max) {
    const char *eq = strchr(p, '=');
    if (!eq) break;
    snprintf(out[n].k, sizeof out[n].k, "%.*s", (int)(eq - p), p);
    p = eq + 1;
    size_t o = 0;
    if (*p == '"') {
      p++;
      while (*p && *p != '"') {
        if (*p == '\\' && p[1]) p++;
        if (o + 1 < sizeof out[n].v) out[n].v[o++] = *p;
        p++;
      }
      if (*p == '"') p++;
    } else {
      while (*p && *p != ' ') {
        if (o + 1 < sizeof out[n].v) out[n].v[o++] = *p;
        p++;
      }
    }
    out[n].v[o] = 0;
    n++;
    while (*p == ' ') p++;
  }
  return n;
}

/* FILETIME → "YYYY-MM-DDTHH:MM:SS.fffffff-07:00" (local time at UTC−7). */
static void local7(uint64_t ft, char *out, size_t cap) {
  struct etw_jw w;
  etw_jw_init(&w, 0);
  etw_jw_filetime(&w, ft - 7ULL * 3600 * 10000000);
  const char *s = etw_jw_cstr(&w);
  snprintf(out, cap, "%.27s-07:00", s + 1);
  etw_jw_free(&w);
}

static void iso(uint64_t ft, char *out, size_t cap) {
  struct etw_jw w;
  etw_jw_init(&w, 0);
  etw_jw_filetime(&w, ft);
  snprintf(out, cap, "%s", etw_jw_cstr(&w));
  etw_jw_free(&w);
}

int main(void) {
  size_t n, xl;
  unsigned char *b = tu_corpus_file(REL, &n);
  char *xp = tu_corpus(REL ".expected.txt");
  char *x = (char *)tu_file(xp, &xl);
  free(xp);
  CHECK(b && x);
  if (!b || !x) T_DONE();
  x = realloc(x, xl + 1);
  x[xl] = 0;
  struct tu_trace t;
  CHECK_EQ(tu_decode(b, n, "SIH.etl", NULL, &t), 0);
  CHECK_EQ(t.rc, 0);
  CHECK_EQ(t.n, 12);
  size_t i = 0;
  int tl = 0;
  static struct kv kv[64];
  for (char *line = strtok(x, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    CHECK(i < t.n);
    if (i >= t.n) break;
    const struct tu_ev *e = &t.ev[i++];
    const char *data = strstr(e->json, "\"EventData\":");
    CHECK(data != NULL);
    if (!data) continue;
    char ts[64], mine[64];
    int nk = split(line, ts, sizeof ts, kv, 64);
    local7(e->filetime, mine, sizeof mine);
    CHECK_STR(mine, ts);
    char raw[1024], s[1024];
    int seen_version = 0;
    for (int k = 0; k < nk; k++) {
      const char *key = kv[k].k, *v = kv[k].v;
      if (!strcmp(key, "Provider")) {
        CHECK(tu_str(e->json, "Guid", s, sizeof s) == 0 && !strcmp(s, v));
      } else if (!strcmp(key, "ProviderName")) {
        if (strcmp(v, "MSNT_SystemTrace")) CHECK_STR(e->provider, v);
        else CHECK_STR(e->provider, "Windows Kernel");
      } else if (!strcmp(key, "EventName")) {
        if (!strcmp(v, "Header")) CHECK_STR(e->name, "EventTrace");
        else if (!strcmp(v, "PartitionInfoExtension")) CHECK_STR(e->name, "EventTrace/PartitionInfoExtension");
        else CHECK_STR(e->name, v);
      } else if (!strcmp(key, "EventId")) {
        CHECK(tu_raw(e->json, "EventID", raw, sizeof raw) == 0 && !strcmp(raw, v));
      } else if (!strcmp(key, "Version") && !seen_version) {
        seen_version = 1;
        CHECK(tu_raw(e->json, "Version", raw, sizeof raw) == 0 && !strcmp(raw, v));
      } else if (!strcmp(key, "Level") || !strcmp(key, "Opcode") || !strcmp(key, "Task")) {
        CHECK(tu_raw(e->json, key, raw, sizeof raw) == 0 && !strcmp(raw, v));
      } else if (!strcmp(key, "Keywords")) {
        CHECK(tu_str(e->json, "Keywords", s, sizeof s) == 0 && strtoull(s, NULL, 16) == strtoull(v, NULL, 16));
      } else if (!strcmp(key, "PID")) {
        CHECK_EQ(e->pid, atoll(v));
      } else if (!strcmp(key, "TID")) {
        CHECK_EQ(e->tid, atoll(v));
      } else if (!strcmp(key, "HookId")) {
        /* kernel records only: the header (0x0000) and PartitionInfoExtension (0x0050) */
        CHECK(e->kind == ETW_REC_SYSTEM || e->kind == ETW_REC_PERFINFO);
      } else if (!strcmp(key, "Payload")) {
        CHECK_EQ(e->user_len, (strlen(v) - 2) / 2); /* 0x + hex */
        CHECK(strstr(data, "\"PartitionId\":\"{00000000-0000-0000-0000-000000000000}\"") != NULL);
      } else if (!strcmp(key, "Info")) {
        tl++;
        CHECK(tu_str(data, "Info", s, sizeof s) == 0);
        CHECK_STR(s, v);
      } else if (!strcmp(key, "LoggerName") || !strcmp(key, "LogFileName")) {
        /* raw clock-source integers in the header (etl-format.md §5.2); not rendered */
      } else if (!strcmp(key, "SessionNameString")) {
        CHECK(tu_str(data, "SessionName", s, sizeof s) == 0);
        CHECK_STR(s, v);
      } else if (!strcmp(key, "LogFileNameString")) {
        CHECK(tu_str(data, "LogFileName", s, sizeof s) == 0);
        CHECK_STR(s, v);
      } else if (!strcmp(key, "EndTime") || !strcmp(key, "BootTime") || !strcmp(key, "StartTime")) {
        char want[64];
        iso(strtoull(v, NULL, 10), want, sizeof want);
        CHECK(tu_raw(data, key, raw, sizeof raw) == 0);
        CHECK_STR(raw, want);
      } else {
        /* header numbers: BufferSize, Version, …, ReservedFlags (hex or decimal) */
        CHECK(tu_raw(data, key, raw, sizeof raw) == 0);
        const char *r = raw[0] == '"' ? raw + 1 : raw;
        if (strtoull(r, NULL, 0) != strtoull(v, NULL, 0)) {
          fprintf(stderr, "%s: want %s got %s\n", key, v, raw);
          CHECK(0);
        }
      }
    }
  }
  CHECK_EQ(i, 12);
  CHECK_EQ(tl, 10);
  tu_free(&t);
  free(b);
  free(x);
  T_DONE();
}
