/* test_spec.c — session spec parsing: defaults, every error field (JSON pointers), unknown
 * members, the round trip through etw_spec_json, and the "win" settings mapped onto the
 * portable ETW session configuration (etw_win_cfg_from_spec / etw_win_cfg_check). */
#include <cjson/cJSON.h>

#include "etwcore/caps.h"
#include "etwcore/spec.h"
#include "etwcore/winreq.h"
#include "t.h"

static enum etw_err parse(const char *json, struct etw_session_spec *s, struct etw_status *st) {
  cJSON *j = cJSON_Parse(json);
  etw_status_clear(st);
  enum etw_err e = j ? etw_spec_parse(j, s, st) : ETW_E_BAD_JSON;
  cJSON_Delete(j);
  return e;
}

static void bad(const char *json, const char *field) {
  struct etw_session_spec s;
  struct etw_status st;
  enum etw_err e = parse(json, &s, &st);
  CHECK(e != ETW_E_OK);
  if (strcmp(st.field, field)) fprintf(stderr, "for %s\n", json);
  CHECK_STR(st.field, field);
  etw_spec_free(&s);
}

/* the canonical JSON form (what GET shows) of a spec */
static char *spec_json(const char *json) {
  struct etw_session_spec s;
  struct etw_status st;
  enum etw_err e = parse(json, &s, &st);
  if (e) fprintf(stderr, "for %s: %s (%s)\n", json, st.msg, st.field);
  CHECK_EQ(e, ETW_E_OK);
  struct etw_jw w;
  etw_jw_init(&w, 1 << 16);
  if (!e) etw_spec_json(&s, &w);
  char *out = strdup(etw_jw_cstr(&w));
  etw_jw_free(&w);
  etw_spec_free(&s);
  return out;
}

/* a provider string and its object form give the same spec */
static void same(const char *with_string, const char *with_object) {
  char *a = spec_json(with_string), *b = spec_json(with_object);
  if (strcmp(a, b)) fprintf(stderr, "for %s\n", with_string);
  CHECK_STR(a, b);
  free(a);
  free(b);
}

/* the message names the element and says what is wrong */
static void bad_msg(const char *json, const char *field, const char *says) {
  struct etw_session_spec s;
  struct etw_status st;
  CHECK(parse(json, &s, &st) != ETW_E_OK);
  CHECK_STR(st.field, field);
  if (!strstr(st.msg, says)) fprintf(stderr, "for %s: message \"%s\" lacks \"%s\"\n", json, st.msg, says);
  CHECK(strstr(st.msg, says) != NULL);
  etw_spec_free(&s);
}

static void provider_strings(void) {
  /* linux: tracefs's system:event, system:*, system */
  same("{\"backend\":\"linux\",\"providers\":[\"sched:sched_switch\"]}",
       "{\"backend\":\"linux\",\"providers\":[{\"name\":\"sched\",\"events\":[\"sched_switch\"]}]}");
  same("{\"backend\":\"linux\",\"providers\":[\"sched:sched_switch,sched_wakeup\",{\"name\":\"irq\"}]}",
       "{\"backend\":\"linux\",\"providers\":[{\"name\":\"sched\",\"events\":[\"sched_switch\",\"sched_wakeup\"]},"
       "{\"name\":\"irq\"}]}");
  same("{\"backend\":\"linux\",\"providers\":[\"sched:*\"]}", "{\"backend\":\"linux\",\"providers\":[{\"name\":\"sched\"}]}");
  same("{\"backend\":\"linux\",\"providers\":[\"sched\"]}", "{\"backend\":\"linux\",\"providers\":[{\"name\":\"sched\"}]}");
  /* etw/etl: goetw's Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]] */
  same("{\"backend\":\"win\",\"providers\":[\"Microsoft-Windows-Kernel-Process:4::0x10\"]}",
       "{\"backend\":\"win\",\"providers\":[{\"name\":\"Microsoft-Windows-Kernel-Process\",\"level\":4,"
       "\"keywords_any\":\"0x10\"}]}");
  same("{\"backend\":\"win\",\"providers\":[\"Name:0x10:4\"]}",
       "{\"backend\":\"win\",\"providers\":[{\"name\":\"Name\",\"level\":16,\"event_ids\":[4]}]}");
  same("{\"backend\":\"win\",\"providers\":[\"{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}:5:1,2;5:0xff:0x8000000000000001\"]}",
       "{\"backend\":\"win\",\"providers\":[{\"name\":\"{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}\",\"level\":5,"
       "\"event_ids\":[1,2,5],\"keywords_any\":\"0xff\",\"keywords_all\":\"0x8000000000000001\"}]}");
  same("{\"backend\":\"win\",\"providers\":[\"P\",\"Q:::\"]}",
       "{\"backend\":\"win\",\"providers\":[{\"name\":\"P\"},{\"name\":\"Q\"}]}");
  same("{\"files\":[\"a.etl\"],\"providers\":[\"Microsoft-Windows-Kernel-Process\"]}",
       "{\"files\":[\"a.etl\"],\"providers\":[{\"name\":\"Microsoft-Windows-Kernel-Process\"}]}");
  /* malformed strings: 400 naming the element, saying what is wrong */
  bad_msg("{\"backend\":\"linux\",\"providers\":[\"sched\",\"Name:0x10:4\"]}", "/providers/1", "more than one ':'");
  bad_msg("{\"backend\":\"linux\",\"providers\":[\":x\"]}", "/providers/0", "system name");
  bad_msg("{\"backend\":\"linux\",\"providers\":[\"sched:a,,b\"]}", "/providers/0", "event 1");
  bad_msg("{\"backend\":\"linux\",\"providers\":[\"\"]}", "/providers/0", "1-4096 bytes");
  bad_msg("{\"backend\":\"linux\",\"providers\":[\"sched:sched_switch\",\"sched:sched_wakeup\"]}", "/providers/1",
          "listed twice");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"a\",\"P:256\"]}", "/providers/1", "Level must be 0-255");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:x\"]}", "/providers/0", "Level");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:4:1,70000\"]}", "/providers/0", "EventIDs");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:4:1,\"]}", "/providers/0", "EventIDs");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:4:1 2\"]}", "/providers/0", "EventIDs");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:4::zz\"]}", "/providers/0", "AnyKeywords");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:4::0x1:0x10000000000000000\"]}", "/providers/0", "AllKeywords");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"P:1:2:3:4:5\"]}", "/providers/0", "more than 5");
  bad_msg("{\"backend\":\"win\",\"providers\":[\"{nope}:4\"]}", "/providers/0", "{GUID}");
  bad_msg("{\"backend\":\"win\",\"providers\":[\":4\"]}", "/providers/0", "Name");
  bad_msg("{\"backend\":\"win\",\"providers\":[5]}", "/providers/0", "provider string");
}

/* refusals come from the member table: each member a backend lacks, at a non-default value */
static void caps_refusals(void) {
  const struct etw_backend lx = {.name = "linux", .caps = ETW_CAP_LIVE | ETW_CAP_FILE | ETW_CAP_FILTER_PID |
                                                        ETW_CAP_FILTER_EXPR | ETW_CAP_EVENT_NAMES | ETW_CAP_BUFFER_SIZE};
  const struct etw_backend etl = {.name = "replay-only", .caps = ETW_CAP_REPLAY}; /* a backend without filters */
  struct { const struct etw_backend *b; const char *json; const char *field; } cases[] = {
    {&lx, "{\"backend\":\"linux\",\"providers\":[\"sched\",{\"name\":\"irq\",\"level\":2}]}", "/providers/1/level"},
    {&lx, "{\"backend\":\"linux\",\"providers\":[{\"name\":\"irq\",\"keywords_any\":\"0x1\"}]}", "/providers/0/keywords_any"},
    {&lx, "{\"backend\":\"linux\",\"providers\":[{\"name\":\"irq\",\"keywords_all\":1}]}", "/providers/0/keywords_all"},
    {&lx, "{\"backend\":\"linux\",\"providers\":[{\"name\":\"irq\",\"stacks\":true}]}", "/providers/0/stacks"},
    {&lx, "{\"backend\":\"linux\",\"providers\":[{\"name\":\"irq\",\"event_ids\":[1]}]}", "/providers/0/event_ids"},
    {&lx, "{\"backend\":\"linux\",\"exe_names\":[\"a\"],\"providers\":[\"irq\"]}", "/exe_names"},
    {&etl, "{\"files\":[\"a.etl\"],\"buffer_kb\":64}", "/buffer_kb"},
    {&etl, "{\"files\":[\"a.etl\"],\"pids\":[1]}", "/pids"},
    {&etl, "{\"files\":[\"a.etl\"],\"mode\":\"file\"}", "/mode"},
    {&etl, "{\"files\":[\"a.etl\"],\"providers\":[{\"name\":\"P\",\"filter\":\"x\"}]}", "/providers/0/filter"},
    {&etl, "{\"files\":[\"a.etl\"],\"providers\":[\"P:2\"]}", "/providers/0/level"},
    {&etl, "{\"files\":[\"a.etl\"],\"providers\":[\"P::7\"]}", "/providers/0/event_ids"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct etw_session_spec s;
    struct etw_status st;
    CHECK_EQ(parse(cases[i].json, &s, &st), ETW_E_OK);
    etw_status_clear(&st);
    CHECK_EQ(etw_caps_check_spec(cases[i].b, &s, &st), ETW_E_INVALID);
    if (strcmp(st.field, cases[i].field)) fprintf(stderr, "for %s\n", cases[i].json);
    CHECK_STR(st.field, cases[i].field);
    etw_spec_free(&s);
  }
  /* at their defaults (what GET shows) they are accepted: a spec copied from GET goes back in */
  const char *ok[] = {
    "{\"backend\":\"linux\",\"mode\":\"both\",\"buffer_kb\":64,\"providers\":[{\"name\":\"irq\",\"events\":[\"a\"],"
    "\"level\":5,\"keywords_any\":\"0x0000000000000000\",\"keywords_all\":0,\"event_ids\":[],"
    "\"event_ids_exclude\":false,\"stacks\":false,\"filter\":\"x>1\"}],\"pids\":[1]}",
    "{\"files\":[\"a.etl\"],\"mode\":\"realtime\",\"replay\":\"recorded\",\"pids\":[],\"providers\":[\"P\",\"Q:5\"]}",
  };
  const struct etw_backend *okb[] = {&lx, &etl};
  for (int i = 0; i < 2; i++) {
    struct etw_session_spec s;
    struct etw_status st;
    CHECK_EQ(parse(ok[i], &s, &st), ETW_E_OK);
    CHECK_EQ(etw_caps_check_spec(okb[i], &s, &st), ETW_E_OK);
    etw_spec_free(&s);
  }
  CHECK(etw_stream_param_known("limit", 5));
  CHECK(!etw_stream_param_known("limits", 6));
  CHECK(!etw_stream_param_known("lim", 3));
}

int main(void) {
  provider_strings();
  caps_refusals();
  struct etw_session_spec s;
  struct etw_status st;
  CHECK_EQ(parse("{\"name\":\"a.b-c_1\",\"providers\":[{\"name\":\"sched\",\"events\":[\"sched_switch\"],"
                 "\"keywords_any\":\"0xffffffffffffffff\",\"level\":4}],\"pids\":[1,2],\"mode\":\"both\","
                 "\"buffer_kb\":2048}",
                 &s, &st),
           ETW_E_OK);
  CHECK_STR(s.backend, "linux");
  CHECK_EQ(s.mode, ETW_MODE_REALTIME | ETW_MODE_FILE);
  CHECK_EQ(s.n_pids, 2);
  CHECK(s.providers[0].keywords_any == UINT64_MAX); /* 64 bits exact */
  CHECK_EQ(s.providers[0].level, 4);
  struct etw_jw w;
  etw_jw_init(&w, 1 << 16);
  etw_spec_json(&s, &w);
  cJSON *back = cJSON_Parse(etw_jw_cstr(&w));
  CHECK(back != NULL);
  CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(back, "providers"), 0), "keywords_any")->valuestring,
            "0xffffffffffffffff");
  cJSON_Delete(back);
  etw_jw_free(&w);
  etw_spec_free(&s);

  /* replays default to the etl backend and need files */
  CHECK_EQ(parse("{\"files\":[\"x.etl\"]}", &s, &st), ETW_E_OK);
  CHECK_STR(s.backend, "etl");
  etw_spec_free(&s);

  bad("[]", "");
  bad("{\"providers\":[{\"name\":\"sched\"}],\"bogus\":1}", "");
  bad("{\"name\":\"has space\",\"providers\":[{\"name\":\"sched\"}]}", "/name");
  bad("{\"providers\":[{\"name\":\"sched\"}],\"mode\":\"x\"}", "/mode");
  bad("{\"providers\":[{\"name\":\"sched\"}],\"buffer_kb\":0}", "/buffer_kb");
  bad("{\"providers\":[{\"name\":\"sched\"}],\"buffer_kb\":1e300}", "/buffer_kb");
  bad("{\"providers\":[{\"name\":\"sched\"}],\"pids\":[-1]}", "/pids");
  bad("{\"providers\":[]}", "/providers");
  bad("{\"providers\":[{\"name\":\"\"}]}", "/providers/0/name");
  bad("{\"providers\":[{\"name\":\"a\"},{\"name\":\"a\"}]}", "/providers/1");
  bad("{\"providers\":[{\"name\":\"a\",\"level\":256}]}", "/providers/0/level");
  bad("{\"providers\":[{\"name\":\"a\",\"keywords_all\":\"0xzz\"}]}", "/providers/0/keywords_all");
  bad("{\"providers\":[{\"name\":\"a\",\"event_ids\":[70000]}]}", "/providers/0/event_ids");
  bad("{\"providers\":[{\"name\":\"a\",\"events\":[1]}]}", "/providers/0/events");
  bad("{\"providers\":[{\"name\":\"a\",\"x\":1}]}", "/providers/0");
  bad("{\"files\":[]}", "/files");
  bad("{\"backend\":\"linux\",\"files\":[\"a.etl\"]}", "/files");
  bad("{\"backend\":\"vms\",\"providers\":[{\"name\":\"a\"}]}", "/backend");
  bad("{\"files\":[\"a.etl\"],\"replay\":\"slow\"}", "/replay");
  bad("{\"providers\":[{\"name\":\"sched\"}],\"win\":{\"flush_s\":1}}", "/win");
  bad("{\"backend\":\"win\",\"providers\":[{\"name\":\"a\"}],\"win\":{\"flush_s\":4000}}", "/win/flush_s");
  bad("{\"backend\":\"win\",\"providers\":[{\"name\":\"a\"}],\"win\":{\"file\":\"newfile\"}}", "/win/file");
  bad("{\"backend\":\"win\",\"providers\":[{\"name\":\"a\"}],\"win\":{\"speed\":1}}", "/win");

  /* attach to an existing ETW session by name */
  CHECK_EQ(parse("{\"backend\":\"win\",\"attach\":\"EventLog-System\"}", &s, &st), ETW_E_OK);
  CHECK_EQ(s.n_providers, 1);
  CHECK_STR(s.providers[0].name, "attach:EventLog-System");
  etw_spec_free(&s);
  bad("{\"attach\":\"x\",\"providers\":[{\"name\":\"a\"}]}", "/attach");
  bad("{\"backend\":\"win\",\"attach\":\"x\",\"providers\":[{\"name\":\"a\"}]}", "/providers");

  /* "win" settings reach the ETW session configuration, and its checks name /win/... fields */
  CHECK_EQ(parse("{\"backend\":\"win\",\"mode\":\"both\",\"buffer_kb\":256,\"providers\":[{\"name\":\"a\"}],"
                 "\"win\":{\"min_buffers\":8,\"max_buffers\":64,\"flush_s\":2,\"clock\":2,\"file\":\"circular\","
                 "\"max_file_mb\":100}}",
                 &s, &st),
           ETW_E_OK);
  struct etw_win_session_cfg c;
  etw_win_cfg_from_spec(&s, &c);
  CHECK_EQ(c.buffer_kb, 256);
  CHECK_EQ(c.min_buffers, 8);
  CHECK_EQ(c.max_buffers, 64);
  CHECK_EQ(c.flush_s, 2);
  CHECK_EQ(c.clock, 2);
  CHECK_EQ(c.max_file_mb, 100);
  CHECK(c.realtime);
  CHECK_EQ(c.file, ETW_WFILE_CIRCULAR);
  CHECK_EQ(etw_win_cfg_check(&c, 4, "C:\\\\t\\\\trace.etl", &st), ETW_E_OK);
  c.min_buffers = 4; /* below 2 per CPU on 4 CPUs */
  CHECK(etw_win_cfg_check(&c, 4, "C:\\\\t\\\\trace.etl", &st) != ETW_E_OK);
  CHECK_STR(st.field, "/win/min_buffers");
  etw_jw_init(&w, 1 << 16);
  etw_spec_json(&s, &w);
  CHECK(strstr(etw_jw_cstr(&w), "\"win\":{\"min_buffers\":8,\"max_buffers\":64,\"flush_s\":2,\"clock\":2,"
                                "\"file\":\"circular\",\"max_file_mb\":100}") != NULL);
  etw_jw_free(&w);
  etw_spec_free(&s);
  T_DONE();
}
