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
                         "ProcessID,ThreadID,ProcessorID,EventData\n", 108));
    CHECK(strstr(text, "\n3,2023-04-22T10:47:24.4722782Z,\"SIHTraceLogging\",\"SIH\",0,0,4,0,0,0x0000000000400000,6412,3240,0,\"{\"\"Info\"\":\"\"wmain\"\"}\"\n") != NULL);
  }
  free(text);

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

  free(b);
  remove(out);
  remove(bad);
  rmdir(dir);
  free(f1);
  free(f2);
  T_DONE();
}
