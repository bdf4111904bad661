/* test_pname.c — the process-name filters' pieces (etwcore/event.h): etw_event_pname reads back
 * exactly the name etw_event_write_system wrote (quote, backslash, control byte, UTF-8, a 4-byte
 * character), from a batch's text or the System object alone; Linux-style \u00XX escapes and
 * surrogate pairs (a lone one: U+FFFD); none when the System block has no ProcessName (a
 * "ProcessName" member of EventData is not it), when the text is cut inside the name, or when the
 * key is only inside a string; the buffer's bound. etw_pname_pattern_ok, etw_pname_list and
 * etw_pname_match: the rule of the stream's process= and convert's --process. */
#include <stdint.h>
#include <string.h>

#include "etwcore/event.h"
#include "t.h"

/* the text a batch holds for an event of @pid named @name (NULL: no name), with EventData @data */
static void event_text(struct etw_jw *w, int64_t pid, const char *name, const char *data) {
  struct etw_sys s;
  memset(&s, 0, sizeof s);
  s.provider = "Windows Kernel";
  s.event_name = "Process/Start";
  s.ts_ns = 1700000000000000000LL;
  s.pid = pid;
  s.tid = 8;
  s.cpu = 1;
  s.process_name = name;
  etw_jw_truncate(w, 0);
  etw_event_write_system(w, &s);
  etw_jw_lit(w, ",\"EventData\":");
  etw_jw_lit(w, data);
  etw_jw_ch(w, '}');
}

/* etw_event_pname of @t (@n bytes) as a NUL-terminated string in @buf; NULL when none */
static const char *pname(const char *t, size_t n, char *buf, size_t cap) {
  int k = etw_event_pname(t, n, buf, cap - 1);
  if (k < 0) return NULL;
  buf[k] = 0;
  return buf;
}

static void round_trip(struct etw_jw *w, const char *name) {
  char buf[256];
  event_text(w, 1234, name, "{\"ProcessName\":\"other\"}");
  CHECK_STR(pname(w->buf, w->len, buf, sizeof buf), name);
  const char *sys = strchr(w->buf, '{'); /* the System object alone, as convert has it */
  CHECK_STR(pname(sys, w->len - (size_t)(sys - w->buf), buf, sizeof buf), name);
}

int main(void) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 16);
  char buf[256];
  round_trip(&w, "svchost");
  round_trip(&w, "a\"b\\c");
  round_trip(&w, "tab\there\x01");
  round_trip(&w, "caf\xc3\xa9");
  round_trip(&w, "\xf0\x9f\x98\x80x");
  event_text(&w, -1, "nullpid", "{}");
  CHECK_STR(pname(w.buf, w.len, buf, sizeof buf), "nullpid");

  /* no name in the System block: EventData's member is not it */
  event_text(&w, 1234, NULL, "{\"ProcessName\":\"other\",\"Execution\":{\"ProcessID\":1,\"ProcessName\":\"x\"}}");
  CHECK(pname(w.buf, w.len, buf, sizeof buf) == NULL);
  /* cut inside the name, or before it */
  event_text(&w, 1234, "svchost", "{}");
  const char *at = strstr(w.buf, "svchost");
  CHECK(pname(w.buf, (size_t)(at - w.buf) + 3, buf, sizeof buf) == NULL);
  CHECK(pname(w.buf, (size_t)(at - w.buf) - 3, buf, sizeof buf) == NULL);
  /* the buffer's bound: the first bytes, never more */
  memset(buf, '#', sizeof buf);
  CHECK_EQ(etw_event_pname(w.buf, w.len, buf, 3), 3);
  CHECK(!memcmp(buf, "svc#", 4));

  /* Linux comm escapes, surrogates, and a key inside a string value */
  static const char lx[] = "\"System\":{\"EventName\":\"\\\"Execution\\\":{\\\"ProcessID\\\":1,\\\"ProcessName\\\":\\\"no\","
                           "\"Execution\":{\"ProcessID\":7,\"ProcessName\":\"pf\\u0022\\u00e9\\/\\ud83d\\ude00\\ud800z\","
                           "\"ThreadID\":7}},\"EventData\":{}}";
  CHECK_STR(pname(lx, sizeof lx - 1, buf, sizeof buf), "pf\"\xc3\xa9/\xf0\x9f\x98\x80\xef\xbf\xbdz");
  static const char bad[] = "\"System\":{\"Execution\":{\"ProcessID\":7,\"ProcessName\":\"a\\u00g0\"}}";
  CHECK(pname(bad, sizeof bad - 1, buf, sizeof buf) == NULL);

  /* patterns */
  CHECK(etw_pname_pattern_ok("svchost"));
  CHECK(etw_pname_pattern_ok("kworker*"));
  CHECK(etw_pname_pattern_ok("caf\xc3\xa9"));
  CHECK(!etw_pname_pattern_ok(""));
  CHECK(!etw_pname_pattern_ok("*"));
  CHECK(!etw_pname_pattern_ok("*a"));
  CHECK(!etw_pname_pattern_ok("a*b"));
  CHECK(!etw_pname_pattern_ok("a,b"));
  CHECK(!etw_pname_pattern_ok("a\x1f"));
  char big[ETW_PNAME_PAT_MAX + 1];
  memset(big, 'a', sizeof big);
  big[ETW_PNAME_PAT_MAX - 1] = 0;
  CHECK(etw_pname_pattern_ok(big));
  big[ETW_PNAME_PAT_MAX - 1] = 'a';
  big[ETW_PNAME_PAT_MAX] = 0;
  CHECK(!etw_pname_pattern_ok(big));
  char pats[3][ETW_PNAME_PAT_MAX];
  uint32_t np = 0;
  CHECK_EQ(etw_pname_list("a,b*", pats, 3, &np), 0);
  CHECK_EQ(np, 2);
  CHECK_STR(pats[1], "b*");
  CHECK_EQ(etw_pname_list("c", pats, 3, &np), 0); /* appended (an option given twice) */
  CHECK_EQ(np, 3);
  CHECK_EQ(etw_pname_list("d", pats, 3, &np), -1); /* one too many */
  np = 0;
  CHECK_EQ(etw_pname_list("a,,b", pats, 3, &np), -1);
  np = 0;
  CHECK_EQ(etw_pname_list("a,", pats, 3, &np), -1);
  CHECK(etw_pname_match("SvcHost", 7, "svchost"));
  CHECK(!etw_pname_match("svchost", 7, "svchos"));
  CHECK(!etw_pname_match("svchos", 6, "svchost"));
  CHECK(etw_pname_match("svchost", 7, "SVC*"));
  CHECK(etw_pname_match("svc", 3, "svc*"));
  CHECK(!etw_pname_match("sv", 2, "svc*"));
  CHECK(etw_pname_match("CAF\xc3\xa9", 5, "caf\xc3\xa9"));
  CHECK(!etw_pname_match("caf\xc3\x89", 5, "caf\xc3\xa9")); /* only ASCII letters fold */
  etw_jw_free(&w);
  T_DONE();
}
