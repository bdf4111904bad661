/* test_etl_primitive.c — primitive-types.etl (TraceLogging, provider solar_system) against
 * PerfView's published baseline: every field of all 5 events, plus the logfile header event,
 * timestamps, PID/TID/processor and payload length. Deliberate differences (docs/etl.md):
 *  - char_type: TraceLogging says UInt8 + OutType String, so we render the character ("M");
 *    PerfView prints the code (77). Compared by code.
 *  - int64_type: the metadata says UInt64 (InType 10) although the value is a negative Int64;
 *    we follow the metadata (18446744073709551412 = −204 as two's complement). Compared modulo 2^64.
 *  - system_time_type: PerfView prints a wrong fraction (.03 for every event); compared to the
 *    second.
 */
#include "t.h"
#include "test_etl_util.h"

#define REL "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/"

static double ms_of(const char *s) {
  char n[64];
  if (!pv_number(s, n, sizeof n)) return -1;
  return strtod(n, NULL);
}

int main(void) {
  size_t n, bl;
  unsigned char *b = tu_corpus_file(REL "primitive-types.etl.zip!*.etl", &n);
  char *bp = tu_corpus(REL "primitive-types.baseline.txt");
  char *base = (char *)tu_file(bp, &bl);
  free(bp);
  CHECK(b && base);
  if (!b || !base) T_DONE();
  base = realloc(base, bl + 1);
  base[bl] = 0;
  struct tu_trace t;
  CHECK_EQ(tu_decode(b, n, "primitive-types.etl", NULL, &t), 0);
  CHECK_EQ(t.rc, 0);
  /* events of the trace that PerfView lists: the header and the 5 TraceLogging events
   * (PerfView does not show the PartitionInfoExtension record). */
  size_t idx[8], ni = 0;
  for (size_t i = 0; i < t.n && ni < 8; i++)
    if (!strstr(t.ev[i].json, "PartitionInfoExtension")) idx[ni++] = i;
  CHECK_EQ(ni, 6);
  int line_no = 0, fields = 0;
  for (char *line = strtok(base, "\n"); line; line = strtok(NULL, "\n")) {
    struct pv_line l;
    if (pv_parse(line, &l)) {
      if (!strncmp(line, "COUNT solar_system/PrimitiveTypesTest:", 38)) CHECK_EQ(atoi(line + 38), 5);
      continue;
    }
    CHECK(line_no < (int)ni);
    if (line_no >= (int)ni) break;
    const struct tu_ev *e = &t.ev[idx[line_no++]];
    char full[300];
    snprintf(full, sizeof full, "%s/%s", e->provider, e->name);
    if (!strcmp(l.name, "Windows Kernel/EventTrace")) CHECK_STR(full, "Windows Kernel/EventTrace");
    else CHECK_STR(full, l.name);
    char ms[48];
    pv_ms(e->filetime, t.info.start_time, ms, sizeof ms);
    double dm = ms_of(ms) - ms_of(l.ms);
    CHECK(dm < 0.0015 && dm > -0.0015);
    for (int k = 0; k < l.nkv; k++) {
      const char *key = l.key[k], *want = l.val[k];
      char raw[1024];
      if (!strcmp(key, "PName")) continue; /* derived by PerfView */
      if (!strcmp(key, "PID")) { CHECK_EQ(e->pid, atoll(want)); continue; }
      if (!strcmp(key, "TID")) { CHECK_EQ(e->tid, atoll(want)); continue; }
      if (!strcmp(key, "ProceNum")) { CHECK_EQ(e->cpu, atoll(want)); continue; }
      if (!strcmp(key, "DataLen")) {
        CHECK_EQ(e->user_len, atoll(want));
        continue;
      }
      const char *data = strstr(e->json, "\"EventData\":");
      if (!data || tu_raw(data, key, raw, sizeof raw)) {
        fprintf(stderr, "line %d: field %s missing in %s\n", line_no, key, e->json);
        CHECK(0);
        continue;
      }
      fields++;
      if (!strcmp(key, "system_time_type")) {
        char r[64];
        pv_render(raw, r, sizeof r);
        CHECK(!strncmp(r, want, 17)); /* yy/MM/dd HH:mm:ss */
        continue;
      }
      if (!pv_match(want, raw)) {
        fprintf(stderr, "line %d: %s: want %s, got %s\n", line_no, key, want, raw);
        CHECK(0);
      }
    }
  }
  CHECK_EQ(line_no, 6);
  CHECK(fields >= 5 * 12 + 20);
  /* a few exact values in our own format */
  CHECK(strstr(t.ev[idx[1]].json, "\"string_type\":\"Mercury\",\"boolean_type\":false,\"char_type\":\"M\"") != NULL);
  CHECK(strstr(t.ev[idx[1]].json, "\"guid_type\":\"{0ad614c4-0ef4-4225-8") != NULL);
  CHECK(strstr(t.ev[idx[1]].json, "\"Provider\":{\"Name\":\"solar_system\"") != NULL);
  CHECK(strstr(t.ev[idx[1]].json, "\"EventName\":\"PrimitiveTypesTest\"") != NULL);
  tu_free(&t);
  free(b);
  free(base);
  T_DONE();
}
