/* test_spec.c — session spec parsing: defaults, every error field (JSON pointers), unknown
 * members, the round trip through etw_spec_json, and the "win" settings mapped onto the
 * portable ETW session configuration (etw_win_cfg_from_spec / etw_win_cfg_check). */
#include <cjson/cJSON.h>

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

int main(void) {
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
