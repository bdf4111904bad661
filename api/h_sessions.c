/* h_sessions.c — session control: create, list, get, patch, stop, delete, recording download,
 * and the event stream entry point (WebSocket upgrades are taken by stream.c before this). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "files.h"

static struct etw_session *session_or_404(struct etwd_req *r) {
  unsigned long long id = etwd_parse_id(r->params[0]);
  struct etw_session *s = id ? etw_session_get(r->srv->core, id) : NULL;
  if (!s) {
    char d[300];
    snprintf(d, sizeof d, "no session \"%.200s\"", r->params[0]);
    etwd_problem(r, 404, "not-found", NULL, d, NULL, NULL);
  }
  return s;
}

static void reply_session(struct etwd_req *r, int status, struct etw_session *s, const char *extra) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 22);
  etw_session_json(s, &w);
  etwd_reply_jw(r, status, &w, extra);
  etw_jw_free(&w);
}

void h_sessions_list(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 24);
  etw_core_sessions_json(r->srv->core, &w);
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

void h_session_create(struct etwd_req *r) {
  struct etw_status st;
  etw_status_clear(&st);
  char *paths[ETW_SPEC_MAX_FILES + 1] = {0};
  const char *cpaths[ETW_SPEC_MAX_FILES + 1] = {0};
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(r->body, "files");
  const cJSON *be = cJSON_GetObjectItemCaseSensitive(r->body, "backend");
  int nf = 0;
  /* only a replay's files are looked up: another backend refuses /files itself (spec.c) */
  if (cJSON_IsArray(files) && !(cJSON_IsString(be) && strcmp(be->valuestring, "etl"))) {
    for (const cJSON *f = files->child; f && nf < ETW_SPEC_MAX_FILES; f = f->next, nf++) {
      char ptr[32];
      snprintf(ptr, sizeof ptr, "/files/%d", nf);
      if (!cJSON_IsString(f)) break; /* the spec parser reports it precisely */
      paths[nf] = etwd_file_resolve(r->srv, f->valuestring, 1, ptr, &st);
      if (!paths[nf]) {
        for (int i = 0; i < nf; i++) free(paths[i]);
        etwd_fail(r, st.code, &st);
        return;
      }
      cpaths[nf] = paths[nf];
    }
  }
  struct etw_session *s = NULL;
  enum etw_err e = etw_session_create(r->srv->core, r->body, nf ? cpaths : NULL, &s, &st);
  for (int i = 0; i < nf; i++) free(paths[i]);
  if (e) {
    etwd_hide_dir(&st, r->srv->cfg->data_dir);
    snprintf(r->audit_detail, sizeof r->audit_detail, "%s: %.200s", etw_err_name(e), st.msg);
    etwd_fail(r, e, &st);
    return;
  }
  char loc[96];
  snprintf(loc, sizeof loc, "Location: /api/v1/sessions/%llu\r\n", (unsigned long long)etw_session_id(s));
  snprintf(r->audit_detail, sizeof r->audit_detail, "session %llu created",
           (unsigned long long)etw_session_id(s));
  reply_session(r, 201, s, loc);
  etw_session_put(s);
}

void h_session_get(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  reply_session(r, 200, s, NULL);
  etw_session_put(s);
}

void h_session_patch(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  struct etw_status st;
  etw_status_clear(&st);
  enum etw_err e = etw_session_patch(s, r->body, &st);
  snprintf(r->audit_detail, sizeof r->audit_detail, "session %s: %s", r->params[0],
           e ? etw_err_name(e) : "providers changed");
  if (e)
    etwd_fail(r, e, &st);
  else
    reply_session(r, 200, s, NULL);
  etw_session_put(s);
}

void h_session_stop(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  struct etw_status st;
  etw_status_clear(&st);
  enum etw_err e = etw_session_stop(s, &st);
  snprintf(r->audit_detail, sizeof r->audit_detail, "session %s: %s", r->params[0],
           e ? etw_err_name(e) : "stopped");
  if (e)
    etwd_fail(r, e, &st);
  else
    reply_session(r, 200, s, NULL);
  etw_session_put(s);
}

void h_session_delete(struct etwd_req *r) {
  unsigned long long id = etwd_parse_id(r->params[0]);
  struct etw_status st;
  etw_status_clear(&st);
  enum etw_err e = id ? etw_session_delete(r->srv->core, id, &st)
                      : etw_fail(&st, ETW_E_NOT_FOUND, NULL, "no session \"%.200s\"", r->params[0]);
  snprintf(r->audit_detail, sizeof r->audit_detail, "session %s: %s", r->params[0],
           e ? etw_err_name(e) : "deleted");
  if (e)
    etwd_fail(r, e, &st);
  else
    etwd_reply(r, 204, "application/json", "", 0, NULL);
}

void h_session_file(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  const char *p = etw_session_record_path(s);
  if (!p) {
    etwd_problem(r, 404, "not-found", NULL, "this session does not record to a file (mode realtime)",
                 NULL, NULL);
  } else {
    char name[64];
    const char *ext = strrchr(p, '.');
    snprintf(name, sizeof name, "etwd-session-%s%s", r->params[0], ext ? ext : "");
    etwd_send_file(r, p, "application/octet-stream", name);
  }
  etw_session_put(s);
}

void h_session_events(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  if (!strcmp(r->ri->request_method, "HEAD")) { /* a stream has no length: headers only */
    etwd_reply(r, 200, "application/x-ndjson", "", 0, NULL);
    etw_session_put(s);
    return;
  }
  const char *accept = etwd_header(r, "Accept");
  if (accept && !strstr(accept, "application/x-ndjson") && !strstr(accept, "*/*") &&
      !strstr(accept, "application/*")) {
    etwd_problem(r, 406, "not-acceptable", NULL,
                 "this stream is application/x-ndjson over HTTP, or a WebSocket upgrade", NULL, NULL);
  } else {
    etwd_stream_ndjson(r, s);
  }
  etw_session_put(s);
}
