/* h_sessions.c — session control: create, list, get, patch, stop, delete, recording download,
 * and the event stream entry point (WebSocket upgrades are taken by stream.c before this). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "files.h"

static struct etw_session *session_or_404(struct etwd_req *r) {
  unsigned long long id = etwd_parse_id(r->params[0]);
  struct etw_session *s = id ? etw_session_get(r->srv->core, id) : NULL;
  if (!s) {
    char d[300];
    snprintf(d, sizeof d, "no session \"%.200s\"", r->params[0]);
    etwd_problem(r, ETWD_P_NOT_FOUND, d, NULL, NULL);
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

/* POST /sessions/{id}/markers {"text":"…"}: a marker event in the stream and the recording */
void h_session_marker(struct etwd_req *r) {
  const cJSON *text = cJSON_GetObjectItemCaseSensitive(r->body, "text");
  if (!cJSON_IsObject(r->body) || !cJSON_IsString(text)) {
    etwd_problem(r, ETWD_P_INVALID, "the body must be {\"text\":\"…\"}", "/text", NULL);
    return;
  }
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  struct etw_status st;
  etw_status_clear(&st);
  enum etw_err e = etw_session_marker(s, text->valuestring, strlen(text->valuestring), &st);
  snprintf(r->audit_detail, sizeof r->audit_detail, "session %s: marker %s", r->params[0],
           e ? etw_err_name(e) : "written");
  if (e == ETW_E_UNSUPPORTED) /* the backend has no way to do it: not implemented there */
    etwd_problem(r, ETWD_P_NOT_IMPLEMENTED, st.msg, NULL, NULL);
  else if (e)
    etwd_fail(r, e, &st);
  else
    etwd_reply(r, 204, "application/json", "", 0, NULL);
  etw_session_put(s);
}

/* POST /sessions/{id}/snapshot: a flight session's buffers into a new recording */
void h_session_snapshot(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  struct etw_status st;
  etw_status_clear(&st);
  char name[256] = "";
  uint64_t bytes = 0;
  enum etw_err e = etw_session_snapshot(s, name, sizeof name, &bytes, &st);
  snprintf(r->audit_detail, sizeof r->audit_detail, "session %s: snapshot %s %.100s", r->params[0],
           e ? etw_err_name(e) : "written", name);
  if (e) {
    etwd_fail(r, e, &st);
  } else {
    struct etw_jw w;
    char loc[400];
    etw_jw_init(&w, 4096);
    etw_jw_lit(&w, "{\"recording_name\":");
    etw_jw_cs(&w, name);
    etw_jw_lit(&w, ",\"recording_url\":\"/api/v1/recordings/");
    etw_jw_raw(&w, name, strlen(name)); /* a name of [0-9A-Z-]: nothing to escape */
    etw_jw_lit(&w, "\",\"size\":");
    etw_jw_u64(&w, bytes);
    etw_jw_ch(&w, '}');
    snprintf(loc, sizeof loc, "Location: /api/v1/recordings/%s\r\n", name);
    etwd_reply_jw(r, 201, &w, loc);
    etw_jw_free(&w);
  }
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

/* ?wait=true&timeout_s=N: how long to wait for the session to stop (ms), or -1 after a 400
 * reply; 0 = do not wait */
static int64_t wait_ms(struct etwd_req *r, struct etw_session *s) {
  char v[32];
  if (etwd_query(r, "wait", v, sizeof v) || !strcmp(v, "false") || !strcmp(v, "0")) return 0;
  if (strcmp(v, "true") && strcmp(v, "1")) {
    etwd_problem(r, ETWD_P_INVALID, "wait must be true or false", "wait", NULL);
    return -1;
  }
  if (etwd_query(r, "timeout_s", v, sizeof v) == 0) {
    char *end;
    double t = strtod(v, &end);
    if (end == v || *end || !(t > 0 && t <= 86400)) {
      etwd_problem(r, ETWD_P_INVALID, "timeout_s must be a number of seconds, above 0 and at most 86400",
                   "timeout_s", NULL);
      return -1;
    }
    return t < 0.001 ? 1 : (int64_t)(t * 1000);
  }
  if (!etw_session_is_recording(s)) return 0; /* stopped already: the file is complete */
  int64_t left = etw_session_remaining_ms(s);
  if (left < 0) {
    etwd_problem(r, ETWD_P_INVALID,
                 "this session has no duration_s, so there is no end to wait for: give timeout_s", "timeout_s",
                 NULL);
    return -1;
  }
  return left + 30000; /* the rest of its duration, and time for the stop to write the file */
}

/* GET /sessions/{id}/file[?wait=true[&timeout_s=N]]: the recording as it is now (refreshed about
 * once a second while recording), or, with wait, once the session has stopped and the file is
 * complete. A waiting request keeps its worker and REST slot; it gives up at server shutdown. */
void h_session_file(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  const char *p = etw_session_record_path(s);
  int64_t ms = p ? wait_ms(r, s) : 0;
  int w = ms > 0 ? etw_session_wait_stopped(s, ms, &r->srv->stopping) : 0;
  if (!p) {
    etwd_problem(r, ETWD_P_NOT_FOUND, "this session does not record to a file (mode realtime)",
                 NULL, NULL);
  } else if (ms < 0) {
    /* answered */
  } else if (w == 1) {
    char d[200];
    snprintf(d, sizeof d, "session %s was still running after %.1f s: ask again, or stop it", r->params[0],
             (double)ms / 1000);
    etwd_problem(r, ETWD_P_TIMEOUT, d, NULL, NULL);
  } else if (w == 2) {
    etwd_problem(r, ETWD_P_SHUTTING_DOWN, "the server is stopping", NULL, NULL);
  } else {
    char name[64];
    const char *ext = strrchr(p, '.');
    snprintf(name, sizeof name, "etwd-session-%s%s", r->params[0], ext ? ext : "");
    struct stat sb;
    if (stat(p, &sb) && errno == ENOENT && !etw_session_is_recording(s))
      etwd_problem(r, ETWD_P_NOT_FOUND, "the recording of this session was deleted", NULL, NULL);
    else
      etwd_send_file(r, p, "application/octet-stream", name);
  }
  etw_session_put(s);
}

void h_session_events(struct etwd_req *r) {
  struct etw_session *s = session_or_404(r);
  if (!s) return;
  char err[200];
  int csv = etwd_stream_format(r->ri->query_string, err, sizeof err);
  if (csv < 0) {
    etwd_problem(r, ETWD_P_INVALID, err, "format", NULL);
    etw_session_put(s);
    return;
  }
  if (!strcmp(r->ri->request_method, "HEAD")) { /* a stream has no length: headers only */
    etwd_reply(r, 200, etwd_stream_ctype(csv), "", 0, NULL);
    etw_session_put(s);
    return;
  }
  /* an explicit ?format= decides the representation; without it, Accept must allow ndjson */
  const char *accept = etwd_header(r, "Accept");
  char fv[16];
  if (accept && etwd_query(r, "format", fv, sizeof fv) && !strstr(accept, "application/x-ndjson") &&
      !strstr(accept, "*/*") && !strstr(accept, "application/*")) {
    etwd_problem(r, ETWD_P_NOT_ACCEPTABLE,
                 "this stream is application/x-ndjson over HTTP (text/csv with ?format=csv), or a WebSocket upgrade",
                 NULL, NULL);
  } else {
    etwd_stream_ndjson(r, s, r->ri->query_string);
  }
  etw_session_put(s);
}
