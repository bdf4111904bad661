/* test_etl_convert.c — `etwd convert` (etw_convert_main): ndjson of two merged files, csv,
 * usage errors (exit 2), unreadable and damaged input (exit 1, after every event before the
 * damage was written).
 */
#include <unistd.h>

#include "t.h"
#include "test_etl_util.h"

#define SIH "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl"
#define AMSI "airbus-cert+etl-parser/tests/example/AMSITrace.etl"

static int run(int argc, const char **argv) { return etw_convert_main(argc, (char **)argv); }

static size_t lines(const char *path, char **text) {
  size_t n = 0, len = 0;
  unsigned char *b = tu_file(path, &len);
  if (!b) return 0;
  for (size_t i = 0; i < len; i++) n += b[i] == '\n';
  *text = realloc(b, len + 1);
  (*text)[len] = 0;
  return n;
}

int main(void) {
  char *f1 = tu_corpus(SIH), *f2 = tu_corpus(AMSI);
  char tmpl[] = "/tmp/etl_convert_XXXXXX";
  char *dir = mkdtemp(tmpl);
  CHECK(dir != NULL);
  char out[256], bad[256];
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(bad, sizeof bad, "%s/cut.etl", dir);

  const char *a1[] = {"convert", f1, f2, "-o", out, "--quiet"};
  CHECK_EQ(run(6, a1), 0);
  char *text = NULL;
  CHECK_EQ(lines(out, &text), 33);
  if (text) {
    CHECK(!strncmp(text, "{\"seq\":1,\"System\":{\"Provider\":{\"Name\":\"Windows Kernel\"", 54));
    CHECK(strstr(text, "{\"seq\":33,\"System\":") != NULL);
    CHECK(strstr(text, "\"Info\":\"wmain\"") != NULL);
  }
  free(text);

  const char *a2[] = {"convert", "--format", "csv", f1, "-o", out};
  CHECK_EQ(run(6, a2), 0);
  text = NULL;
  CHECK_EQ(lines(out, &text), 13); /* header + 12 */
  if (text) {
    CHECK(!strncmp(text, "seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,"
                         "ProcessID,ThreadID,ProcessName,Host,ProcessorID,EventData\n", 136));
    CHECK(strstr(text, "\n3,2023-04-22T10:47:24.4722782Z,\"SIHTraceLogging\",\"SIH\",0,0,4,0,0,0x0000000000400000,6412,3240,,,0,\"{\"\"Info\"\":\"\"wmain\"\"}\"\n") != NULL);
  }
  free(text);

  /* filters (issue 20 item 9): SIH holds 2 EventTrace events then 10 SIHTraceLogging/SIH ones
   * (seq 3-12; seq 8-12 from 10:47:45.03, the first event at 10:47:24.36); seq stays the input's */
  const char *f1a[] = {"convert", f1, "--event", "sih", "-o", out};
  CHECK_EQ(run(6, f1a), 0);
  text = NULL;
  CHECK_EQ(lines(out, &text), 10);
  if (text) CHECK(!strncmp(text, "{\"seq\":3,", 9));
  free(text);
  const char *f1b[] = {"convert", f1, "--provider=SIHTRACELOGGING", "--limit", "2", "-o", out};
  CHECK_EQ(run(7, f1b), 0);
  text = NULL;
  CHECK_EQ(lines(out, &text), 2);
  free(text);
  const char *f1c[] = {"convert", f1, "--from", "2023-04-22T10:47:45Z", "-o", out};
  CHECK_EQ(run(6, f1c), 0);
  text = NULL;
  CHECK_EQ(lines(out, &text), 5);
  if (text) CHECK(!strncmp(text, "{\"seq\":8,", 9));
  free(text);
  const char *f1d[] = {"convert", f1, "--from", "20.6", "--to", "21.3", "--pid", "6412", "-o", out};
  CHECK_EQ(run(10, f1d), 0);
  text = NULL;
  CHECK_EQ(lines(out, &text), 3); /* seq 8-10: 11 is at 10:47:45.7255414, 21.36 s after the first */
  free(text);
  const char *f1e[] = {"convert", f1, "--format", "csv", "--event", "SIH", "-o", out};
  CHECK_EQ(run(8, f1e), 0);
  text = NULL;
  CHECK_EQ(lines(out, &text), 11); /* one event type: a column per field */
  if (text) CHECK(strstr(text, ",ProcessID,ThreadID,ProcessName,Host,ProcessorID,\"Info\"\n3,") != NULL);
  if (text) CHECK(strstr(text, ",6412,3240,,,0,\"wmain\"\n") != NULL);
  free(text);
  const char *f1f[] = {"convert", f1, "--format", "chrome", "-o", out};
  CHECK_EQ(run(6, f1f), 0);
  text = NULL;
  (void)lines(out, &text);
  size_t inst = 0;
  for (char *m = text; m && (m = strstr(m, "\"ph\":\"i\"")) != NULL; m++) inst++;
  CHECK_EQ(inst, 12);
  if (text) CHECK(!strncmp(text, "{\"traceEvents\":[", 16));
  if (text) CHECK(strstr(text, "\"ts\":108983.900,\"pid\":6412,\"tid\":3240,\"args\":{\"Info\":\"wmain\",\"seq\":3,\"cpu\":0}}") != NULL);
  free(text);
  const char *u5[] = {"convert", f1, "--from", "yesterday"};
  CHECK_EQ(run(4, u5), 2);
  const char *u6[] = {"convert", f1, "--limit", "0"};
  CHECK_EQ(run(4, u6), 2);

  const char *u1[] = {"convert"};
  CHECK_EQ(run(1, u1), 2);
  const char *u2[] = {"convert", f1, "--format", "xml"};
  CHECK_EQ(run(4, u2), 2);
  const char *u3[] = {"convert", f1, "--bogus"};
  CHECK_EQ(run(3, u3), 2);
  const char *u4[] = {"convert", f1, "-o"};
  CHECK_EQ(run(3, u4), 2);
  const char *h[] = {"convert", "--help"};
  CHECK_EQ(run(2, h), 0);

  const char *m1[] = {"convert", "/nonexistent/x.etl", "-o", out};
  CHECK_EQ(run(4, m1), 1);

  size_t len;
  unsigned char *b = tu_file(f1, &len);
  FILE *f = fopen(bad, "wb");
  if (f && b) {
    fwrite(b, 1, len - 100, f);
    fclose(f);
  }
  const char *c1[] = {"convert", bad, "-o", out, "--quiet"};
  CHECK_EQ(run(5, c1), 1);
  text = NULL;
  size_t got = lines(out, &text);
  CHECK(got >= 2 && got < 12); /* everything before the damage */
  free(text);

  /* events whose text does not fit the writer's maximum: dropped and counted (exit 1), every
   * other event still written — the same lines as with room or, when the fields' worst case
   * does not fit, with the payload as `Undecoded` "event too large" (SIH + AMSI: 33 events of
   * 348 to 13,500 bytes; a 4 KiB maximum drops the three largest, never one below 1 KiB) */
  const char *a3[] = {"convert", f1, f2, "-o", out, "--quiet"};
  CHECK_EQ(run(6, a3), 0);
  char *full = NULL;
  CHECK_EQ(lines(out, &full), 33);
  size_t saved = etw_convert_writer_max;
  etw_convert_writer_max = 4096;
  char errf[256];
  snprintf(errf, sizeof errf, "%s/stderr", dir);
  const char *a4[] = {"convert", f1, f2, "-o", out}; /* (not quiet: the summary) */
  fflush(stderr);
  int saved_fd = dup(2);
  FILE *ef = fopen(errf, "w");
  if (ef && saved_fd >= 0) dup2(fileno(ef), 2);
  int rc4 = run(5, a4);
  fflush(stderr);
  if (ef && saved_fd >= 0) dup2(saved_fd, 2);
  if (saved_fd >= 0) close(saved_fd);
  if (ef) fclose(ef);
  CHECK_EQ(rc4, 1);
  etw_convert_writer_max = saved;
  char *err = NULL;
  (void)lines(errf, &err);
  remove(errf);
  text = NULL;
  got = lines(out, &text);
  CHECK(got >= 26 && got <= 30);
  if (full && text) {
    size_t small_missing = 0, big_written = 0, same = 0;
    for (char *l = full; *l;) {
      char *nl = strchr(l, '\n');
      size_t ll = (size_t)(nl - l) + 1;
      char *hit = NULL;
      for (char *m = text; *m;) { /* the same line in the small run */
        char *mn = strchr(m, '\n');
        if ((size_t)(mn - m) + 1 == ll && !memcmp(m, l, ll)) hit = m;
        m = mn + 1;
      }
      if (hit) same++;
      if (!hit && ll < 1024) small_missing++;
      if (hit && ll > 10000) big_written++;
      l = nl + 1;
    }
    size_t too_large = 0; /* the others: `Undecoded` with the payload (the decoder reserves for
                           * its worst case before writing an event's fields) */
    for (char *m = text; (m = strstr(m, "\"Reason\":\"event too large\"")) != NULL; m++) too_large++;
    CHECK_EQ(same + too_large, got);
    /* stderr: the dropped count (33 - lines) and the `Undecoded` ones too large for the writer */
    char want[160];
    snprintf(want, sizeof want, "etwd convert: %zu events dropped: their text did not fit 4096 bytes", 33 - got);
    CHECK(err && strstr(err, want) != NULL);
    snprintf(want, sizeof want, ", %zu too large for the writer's maximum (written with \"Undecoded\"", too_large);
    CHECK(err && (too_large == 0 || strstr(err, want) != NULL));
    if (err && !strstr(err, want)) fprintf(stderr, "stderr was: %s\n", err);
    CHECK_EQ(small_missing, 0);
    CHECK_EQ(big_written, 0);
    CHECK(strstr(text, "{\"seq\":33,") != NULL); /* went on after the drops (33 is small) */
  }
  free(full);
  free(text);
  free(err);

  free(b);
  remove(out);
  remove(bad);
  rmdir(dir);
  free(f1);
  free(f2);
  T_DONE();
}
