/* router.c — the route table (the source for auth checks, 404/405, and the OpenAPI document),
 * request dispatch (limits, auth, body parsing), the access and audit logs, and civetweb's
 * start-up with the pitfalls from stack-notes §1 designed out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "log.h"
#include "netguard.h"

/* clang-format off */
const struct etwd_route etwd_routes[] = {
  {"GET", "/api/v1/health", ROLE_NONE, BODY_NONE, h_health, "getHealth", "Liveness check (no auth, minimal)", NULL, "Health", NULL, 0},
  {"GET", "/api/v1/version", ROLE_READER, BODY_NONE, h_version, "getVersion", "Version, OS, backends and their capabilities", NULL, "Version", NULL, 0},
  {"GET", "/api/v1/backends", ROLE_READER, BODY_NONE, h_backends, "listBackends", "Each backend's capabilities: the spec members and stream parameters it honours, provider string forms, limits", NULL, "Backends", NULL, 0},
  {"GET", "/api/v1/openapi.json", ROLE_NONE, BODY_NONE, h_openapi, "getOpenApi", "This OpenAPI 3 document", NULL, NULL, NULL, 0},
  {"POST", "/api/v1/login", ROLE_READER, BODY_NONE, h_login, "login", "Exchange a bearer token for an HttpOnly session cookie", NULL, "Whoami", NULL, 1},
  {"POST", "/api/v1/logout", ROLE_READER, BODY_NONE, h_logout, "logout", "Forget the session cookie", NULL, NULL, NULL, 1},
  {"GET", "/api/v1/whoami", ROLE_READER, BODY_NONE, h_whoami, "whoami", "Role and token id of the caller", NULL, "Whoami", NULL, 0},
  {"POST", "/api/v1/tokens/rotate", ROLE_ADMIN, BODY_NONE, h_rotate, "rotateTokens", "Replace both tokens; returns the new secrets once", NULL, "Tokens", NULL, 1},
  {"GET", "/api/v1/providers", ROLE_READER, BODY_NONE, h_providers, "listProviders", "Providers (tracepoint systems, ETW providers, providers found in ETL files, providers seen in nats streams)", NULL, "ProviderList", "q=sched,backend=etl", 0},
  {"GET", "/api/v1/providers/{name}", ROLE_READER, BODY_NONE, h_provider, "getProvider", "A provider's events and their fields", NULL, "Provider", "backend=etl", 0},
  {"GET", "/api/v1/sessions", ROLE_READER, BODY_NONE, h_sessions_list, "listSessions", "All sessions with state, spec and stats", NULL, "SessionList", NULL, 0},
  {"POST", "/api/v1/sessions", ROLE_ADMIN, BODY_JSON, h_session_create, "createSession", "Start a session (live providers, or a replay of ETL files)", "SessionSpec", "Session", NULL, 1},
  {"GET", "/api/v1/sessions/{id}", ROLE_READER, BODY_NONE, h_session_get, "getSession", "One session: state, spec, stats and loss by layer", NULL, "Session", NULL, 0},
  {"PATCH", "/api/v1/sessions/{id}", ROLE_ADMIN, BODY_JSON, h_session_patch, "patchSession", "Enable or disable providers on a running session", "SessionPatch", "Session", NULL, 1},
  {"DELETE", "/api/v1/sessions/{id}", ROLE_ADMIN, BODY_NONE, h_session_delete, "deleteSession", "Stop the session and remove it with its OS object; its recording stays under /api/v1/recordings", NULL, NULL, NULL, 1},
  {"POST", "/api/v1/sessions/{id}/stop", ROLE_ADMIN, BODY_NONE, h_session_stop, "stopSession", "Stop consuming; stats and recording stay", NULL, "Session", NULL, 1},
  {"POST", "/api/v1/sessions/{id}/markers", ROLE_ADMIN, BODY_JSON, h_session_marker, "addMarker", "Put a marker event {\"text\":…} (at most 1024 bytes) into the running session's stream and recording (backends with the markers capability; others 501)", NULL, NULL, NULL, 1},
  {"POST", "/api/v1/sessions/{id}/snapshot", ROLE_ADMIN, BODY_NONE, h_session_snapshot, "snapshotSession", "Flight sessions (mode flight): write what the kernel buffers hold now to a new recording (201: its name and url) and go on", NULL, NULL, NULL, 1},
  {"GET", "/api/v1/sessions/{id}/events", ROLE_READER, BODY_NONE, h_session_events, "streamEvents", "Event stream: WebSocket upgrade (JSON array per frame) or chunked ndjson (Accept: application/x-ndjson), or CSV with format=csv (text/csv: a header row, one row per event; loss in the trailer)", NULL, "Event", "provider,event,pid,process,level,from,queue,limit,stackwalk_events,from_stream_seq,from_time,format", 0},
  {"GET", "/api/v1/sessions/{id}/file", ROLE_READER, BODY_NONE, h_session_file, "downloadRecording", "Download the session's recording (also while recording; Range supported); wait=true: once the session has stopped (its duration_s, or timeout_s), the complete file", NULL, NULL, "wait=true,timeout_s=5", 0},
  {"GET", "/api/v1/recordings", ROLE_READER, BODY_NONE, h_recordings_list, "listRecordings", "Recordings of file-mode sessions, this run's and earlier runs' (name, size, owning session or null, writing, url)", NULL, "FileList", NULL, 0},
  {"GET", "/api/v1/recordings/{name}", ROLE_READER, BODY_NONE, h_recording_get, "getRecording", "Download a recording (Range supported)", NULL, NULL, NULL, 0},
  {"DELETE", "/api/v1/recordings/{name}", ROLE_ADMIN, BODY_NONE, h_recording_delete, "deleteRecording", "Delete a recording (not while its session is still writing it)", NULL, NULL, NULL, 1},
  {"GET", "/api/v1/os-sessions", ROLE_READER, BODY_NONE, h_os_sessions, "listOsSessions", "Trace sessions the OS has now, by backend (tracefs instances, ETW sessions; ours and others')", NULL, "OsSessions", NULL, 0},
  {"GET", "/api/v1/files", ROLE_READER, BODY_NONE, h_files_list, "listFiles", "Uploaded ETL files (kind upload), then the recordings (kind recording; served and deleted at their url)", NULL, "FileList", NULL, 0},
  {"POST", "/api/v1/files", ROLE_ADMIN, BODY_RAW, h_file_upload, "uploadFile", "Upload an ETL file (raw body, size-limited)", NULL, "File", "name!=x.etl,overwrite=true", 1},
  {"GET", "/api/v1/files/{name}", ROLE_READER, BODY_NONE, h_file_get, "downloadFile", "Download an ETL file (Range supported)", NULL, NULL, NULL, 0},
  {"DELETE", "/api/v1/files/{name}", ROLE_ADMIN, BODY_NONE, h_file_delete, "deleteFile", "Delete an ETL file (not while a session replays it: 409 naming the session)", NULL, NULL, NULL, 1},
  {"GET", "/api/v1/files/{name}/events", ROLE_READER, BODY_NONE, h_file_events, "fileEvents", "Decode an ETL file as ndjson, or CSV with format=csv (text/csv: a header row, one row per event)", NULL, "Event", "provider,event,pid,process,level,from,queue,limit,stackwalk_events,format", 0},
  {"GET", "/api/v1/manifests", ROLE_READER, BODY_NONE, h_manifests_list, "listManifests", "Provider manifests in the manifest directory (name, size)", NULL, NULL, NULL, 0},
  {"POST", "/api/v1/manifests", ROLE_ADMIN, BODY_RAW, h_manifest_upload, "uploadManifest", "Install a provider manifest XML (raw body, at most 16 MiB, checked by the decoder's parser); later replays and decodes use it", NULL, NULL, "name!=x.man,overwrite=true", 1},
  {"GET", "/metrics", ROLE_READER, BODY_NONE, h_metrics, "getMetrics", "Prometheus metrics", NULL, NULL, NULL, 0},
  {NULL, NULL, ROLE_NONE, BODY_NONE, NULL, NULL, NULL, NULL, NULL, NULL, 0},
};
/* clang-format on */

/* match @path against @pat, capturing {x} segments; 1 on match */
static int match_path(const char *pat, const char *path, char params[][256]) {
  int np = 0;
  while (*pat && *path) {
    if (*pat == '{') {
      const char *e = strchr(pat, '}');
      size_t k = strcspn(path, "/");
      if (!e || k == 0 || k >= 256 || np >= ETWD_MAX_PARAMS) return 0;
      memcpy(params[np], path, k);
      params[np][k] = 0;
      int dl = mg_url_decode(params[np], (int)k, params[np], 256, 0);
      if (dl < 0 || strlen(params[np]) != (size_t)dl) return 0; /* a NUL would cut the name */
      np++;
      pat = e + 1;
      path += k;
      continue;
    }
    if (*pat != *path) return 0;
    pat++;
    path++;
  }
  return !*pat && !*path;
}

const struct etwd_route *etwd_route_find(const char *method, const char *uri,
                                         char params[ETWD_MAX_PARAMS][256], char *allow,
                                         size_t allowlen) {
  if (allowlen) allow[0] = 0;
  for (const struct etwd_route *x = etwd_routes; x->method; x++) {
    char p[ETWD_MAX_PARAMS][256];
    if (!match_path(x->path, uri, p)) continue;
    if (!strcmp(x->method, method) || (!strcmp(method, "HEAD") && !strcmp(x->method, "GET"))) {
      memcpy(params, p, sizeof p);
      return x;
    }
    if (strlen(allow) + strlen(x->method) + 3 < allowlen) {
      if (allow[0]) strcat(allow, ", ");
      strcat(allow, x->method);
    }
  }
  return NULL;
}

void etwd_principal_of(struct etwd_server *s, struct mg_connection *c, struct etwd_principal *p) {
  const char *authz = mg_get_header(c, "Authorization");
  if (authz) {
    etwd_auth_bearer(s->auth, authz, p);
    return; /* a bad bearer token is not rescued by a cookie */
  }
  etwd_auth_cookie(s->auth, mg_get_header(c, "Cookie"), p);
}

int etwd_origin_allowed(struct etwd_server *s, const struct mg_request_info *ri, const char *origin) {
  if (!origin) return 1; /* non-browser clients send none */
  for (int i = 0; i < s->cfg->n_origins; i++)
    if (!strcasecmp(origin, s->cfg->origins[i])) return 1;
  /* same origin: scheme://Host */
  const char *host = NULL;
  for (int i = 0; i < ri->num_headers; i++)
    if (!strcasecmp(ri->http_headers[i].name, "Host")) host = ri->http_headers[i].value;
  if (!host) return 0;
  const char *scheme = s->tls ? "https://" : "http://";
  size_t sl = strlen(scheme);
  if (strncasecmp(origin, scheme, sl)) return 0;
  return !strcasecmp(origin + sl, host);
}

/* CSRF: a cookie-authenticated change needs an allowed Origin (same origin or --allow-origin);
 * without an Origin, Sec-Fetch-Site must not say the browser sent it from another site */
static int cookie_change_allowed(struct etwd_server *s, struct etwd_req *r) {
  const char *origin = etwd_header(r, "Origin"), *site = etwd_header(r, "Sec-Fetch-Site");
  if (origin) return etwd_origin_allowed(s, r->ri, origin);
  return !site || !strcasecmp(site, "same-origin") || !strcasecmp(site, "none");
}

/* A NUL (%00) in the path or a query value would cut a name short in C strings: 400, naming the
 * query parameter (or "path"). 0 if there is none. */
static int refuse_nul(struct etwd_req *r, const char *uri) {
  const char *q = r->ri->query_string, *hit = q ? strstr(q, "%00") : NULL;
  char field[64] = "path";
  if (!strstr(uri, "%00") && !hit) return 0;
  if (!strstr(uri, "%00")) {
    const char *pair = hit;
    while (pair > q && pair[-1] != '&') pair--;
    snprintf(field, sizeof field, "%.*s", (int)strcspn(pair, "=&"), pair);
  }
  etwd_problem(r, ETWD_P_INVALID, "a NUL character (%00) is not allowed in a path or query value",
               field, NULL);
  return 1;
}

/* is @name[0..n) one of the parameters of a route's query list ("q=sched,backend=etl")? */
static int query_listed(const char *list, const char *name, size_t n) {
  for (const char *l = list ? list : ""; *l;) {
    size_t k = strcspn(l, ",");
    if (strcspn(l, "!=,") == n && !memcmp(l, name, n)) return 1;
    l += k;
    if (*l) l++;
  }
  return 0;
}

int etwd_query_unknown(const struct etwd_route *rt, const char *q, char *field, size_t fieldlen,
                       char *err, size_t errlen) {
  for (const char *p = q ? q : ""; *p;) {
    size_t k = strcspn(p, "&"), nk = strcspn(p, "=&");
    int listed = k && query_listed(rt->query, p, nk), twice = 0;
    for (const char *o = q; listed && o < p; o += strcspn(o, "&") + 1) /* given earlier too? */
      twice |= strcspn(o, "=&") == nk && !memcmp(o, p, nk);
    if (k && (!listed || twice || nk == k)) {
      snprintf(field, fieldlen, "%.*s", (int)(nk > 64 ? 64 : nk), p);
      int n = !listed ? snprintf(err, errlen, "unknown query parameter \"%s\" (%s %s takes %s", field,
                                 rt->method, rt->path, rt->query ? "" : "none")
              : twice ? snprintf(err, errlen, "query parameter \"%s\" is given twice", field)
                      : snprintf(err, errlen, "query parameter \"%s\" needs a value (%s=...)", field, field);
      for (const char *l = rt->query; !listed && l && *l && n > 0 && (size_t)n < errlen;) {
        size_t lk = strcspn(l, ",");
        n += snprintf(err + n, errlen - (size_t)n, "%s%.*s", l == rt->query ? "" : ", ",
                      (int)strcspn(l, "!=,"), l);
        l += lk;
        if (*l) l++;
      }
      if (!listed && n > 0 && (size_t)n < errlen) snprintf(err + n, errlen - (size_t)n, ")");
      return 1;
    }
    p += k;
    if (*p) p++;
  }
  return 0;
}

static void access_log(struct etwd_req *r) {
  char q1[300], q2[64], q3[64];
  const char *who = r->who.role ? r->who.token_id : "-";
  etwd_log(LOG_INFO, "request", "kind=access method=%s path=%s status=%d bytes=%zu remote=%s who=%s",
           r->ri->request_method, etwd_logq(q1, sizeof q1, r->ri->local_uri), r->status, r->bytes_out,
           etwd_logq(q2, sizeof q2, r->ri->remote_addr), etwd_logq(q3, sizeof q3, who));
  if (r->route && r->route->audit) {
    char q4[300], q5[300];
    etwd_log(LOG_INFO, "control action",
             "kind=audit action=%s token_id=%s role=%s path=%s status=%d result=%s detail=%s",
             r->route->op_id, etwd_logq(q3, sizeof q3, who), etwd_role_name(r->who.role),
             etwd_logq(q4, sizeof q4, r->ri->local_uri), r->status,
             r->status < 400 ? "ok" : "refused", etwd_logq(q5, sizeof q5, r->audit_detail));
  }
}

static int is_json_ctype(const char *ct) {
  if (!ct) return 0;
  while (*ct == ' ') ct++;
  size_t n = strcspn(ct, "; ");
  return (n == 16 && !strncasecmp(ct, "application/json", 16));
}

static int serve_asset(struct etwd_req *r, const char *uri) {
  if (strcmp(r->ri->request_method, "GET") && strcmp(r->ri->request_method, "HEAD")) return 0;
  if (!strcmp(uri, "/")) uri = "/index.html";
  for (const struct etw_web_asset *a = etw_web_assets; a->path; a++) {
    if (strcmp(a->path, uri)) continue;
    const char *ext = strrchr(uri, '.');
    const char *ct = !ext                    ? "application/octet-stream"
                     : !strcmp(ext, ".html") ? "text/html; charset=utf-8"
                     : !strcmp(ext, ".js")   ? "text/javascript; charset=utf-8"
                     : !strcmp(ext, ".css")  ? "text/css; charset=utf-8"
                     : !strcmp(ext, ".svg")  ? "image/svg+xml"
                     : !strcmp(ext, ".png")  ? "image/png"
                                             : "application/octet-stream";
    etwd_reply(r, 200, ct, (const char *)a->data, a->len,
               "Content-Security-Policy: default-src 'self'; connect-src 'self'; img-src 'self' data:; "
               "style-src 'self'; script-src 'self'; frame-ancestors 'none'\r\n");
    return 1;
  }
  return 0;
}

/* read a JSON body with the size limit; 0 ok, else a reply was sent */
static int read_json_body(struct etwd_req *r) {
  if (!is_json_ctype(etwd_header(r, "Content-Type"))) {
    etwd_problem(r, ETWD_P_MEDIA_TYPE, "the request body must be application/json",
                 NULL, NULL);
    return -1;
  }
  size_t max = r->srv->cfg->max_body;
  long long cl = r->ri->content_length;
  if (cl > (long long)max) {
    etwd_problem(r, ETWD_P_TOO_LARGE, "the request body exceeds the server's --max-body", NULL,
                 "Connection: close\r\n");
    return -1;
  }
  char *buf = malloc(max + 2);
  if (!buf) {
    etwd_problem(r, ETWD_P_NOMEM, NULL, NULL, NULL);
    return -1;
  }
  size_t len = 0;
  for (;;) {
    int n = mg_read(r->conn, buf + len, max + 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
    if (len > max) break;
  }
  if (len > max) {
    free(buf);
    etwd_problem(r, ETWD_P_TOO_LARGE, "the request body exceeds the server's --max-body", NULL,
                 "Connection: close\r\n");
    return -1;
  }
  buf[len] = 0;
  char ptr[200];
  if (etwd_json_find_nul(buf, len, ptr, sizeof ptr)) { /* cJSON would end the string there */
    free(buf);
    etwd_problem(r, ETWD_P_INVALID, "a NUL character (\\u0000) is not allowed in a JSON string",
                 ptr[0] ? ptr : NULL, NULL);
    return -1;
  }
  const char *endp = NULL;
  r->body = cJSON_ParseWithLengthOpts(buf, len + 1, &endp, 1); /* + the NUL */
  if (!r->body) {
    char detail[160];
    snprintf(detail, sizeof detail, "malformed JSON near byte %ld of the body",
             endp ? (long)(endp - buf) : (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - buf : 0));
    free(buf);
    etwd_problem(r, ETWD_P_BAD_JSON, detail, NULL, NULL);
    return -1;
  }
  free(buf);
  return 0;
}

/* OPTIONS on a route or page: 204 with Allow. A CORS preflight is granted (Allow-Origin, -Methods,
 * -Headers) only for an Origin given with --allow-origin; any other gets no CORS headers at all,
 * so the browser refuses the cross-origin request. Vary: Origin either way. */
static void options_reply(struct etwd_req *r, const char *uri, const char *allow) {
  if (!allow[0]) {
    const struct etw_web_asset *a = etw_web_assets;
    const char *u = strcmp(uri, "/") ? uri : "/index.html";
    while (a->path && strcmp(a->path, u)) a++;
    if (!a->path) {
      etwd_problem(r, ETWD_P_NOT_FOUND, "no such route", NULL, NULL);
      return;
    }
    allow = "GET";
  }
  char methods[160], extra[768];
  snprintf(methods, sizeof methods, "%s%s, OPTIONS", allow, strstr(allow, "GET") ? ", HEAD" : "");
  int n = snprintf(extra, sizeof extra, "Allow: %s\r\n", methods);
  const char *origin = etwd_header(r, "Origin");
  int listed = 0;
  for (int i = 0; origin && i < r->srv->cfg->n_origins; i++) listed |= !strcasecmp(origin, r->srv->cfg->origins[i]);
  if (listed && etwd_header(r, "Access-Control-Request-Method")) /* raw_reply adds Allow-Origin, Vary */
    snprintf(extra + n, sizeof extra - (size_t)n,
             "Access-Control-Allow-Methods: %s\r\nAccess-Control-Allow-Headers: Authorization, Content-Type\r\n"
             "Access-Control-Max-Age: 600\r\n", methods);
  else if (!listed)
    snprintf(extra + n, sizeof extra - (size_t)n, "Vary: Origin\r\n");
  etwd_reply(r, 204, "application/json", "", 0, extra);
}

static int dispatch(struct mg_connection *conn, void *cbdata) {
  struct etwd_server *s = cbdata;
  struct etwd_req r;
  memset(&r, 0, sizeof r);
  r.conn = conn;
  r.ri = mg_get_request_info(conn);
  r.srv = s;
  atomic_fetch_add(&s->requests_total, 1);
  unsigned active = 0;
  const char *uri = r.ri->local_uri ? r.ri->local_uri : "/";
  const char *method = r.ri->request_method;
  int is_stream = 0;

  char allow[128] = "";
  const struct etwd_route *rt = etwd_route_find(method, uri, r.params, allow, sizeof allow);
  r.route = rt;
  is_stream = rt && (rt->fn == h_session_events || rt->fn == h_file_events);
  /* streams are limited by --max-streams, not by the REST concurrency limit */
  if (!is_stream) active = atomic_fetch_add(&s->active_requests, 1) + 1;
  if (refuse_nul(&r, uri)) goto done;
  if (!strcmp(method, "OPTIONS")) {
    options_reply(&r, uri, allow);
    goto done;
  }
  if (!rt) {
    if (!allow[0] && serve_asset(&r, uri)) goto done;
    if (allow[0]) {
      char extra[160], detail[200];
      snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
      snprintf(detail, sizeof detail, "%s is not allowed on %s; allowed: %s", method, uri, allow);
      etwd_problem(&r, ETWD_P_METHOD, detail, NULL, extra);
    } else {
      etwd_problem(&r, ETWD_P_NOT_FOUND, "no such route", NULL, NULL);
    }
    goto done;
  }
  if (!is_stream && active > s->cfg->max_requests) {
    etwd_problem(&r, ETWD_P_LIMIT, "too many concurrent requests; retry shortly", NULL,
                 "Retry-After: 1\r\n");
    goto done;
  }
  if (rt->role != ROLE_NONE) {
    etwd_principal_of(s, conn, &r.who);
    if (r.who.role == ROLE_NONE) {
      etwd_problem(&r, ETWD_P_UNAUTHORIZED,
                   "a valid token is required: Authorization: Bearer <token>, or log in for a cookie",
                   NULL, "WWW-Authenticate: Bearer realm=\"etwd\"\r\n");
      goto done;
    }
    /* a quarter of --max-requests is kept for the admin: readers cannot lock control out */
    if (!is_stream && r.who.role == ROLE_READER &&
        active > s->cfg->max_requests - s->cfg->max_requests / 4) {
      etwd_problem(&r, ETWD_P_LIMIT,
                   "too many concurrent requests for the reader role; retry shortly", NULL,
                   "Retry-After: 1\r\n");
      goto done;
    }
    if (r.who.role < rt->role) {
      etwd_problem(&r, ETWD_P_FORBIDDEN, "this action needs the admin role", NULL, NULL);
      goto done;
    }
    /* cookie-authenticated changes must come from an allowed Origin (CSRF) */
    if (r.who.via_cookie && strcmp(method, "GET") && strcmp(method, "HEAD") &&
        !cookie_change_allowed(s, &r)) {
      etwd_problem(&r, ETWD_P_FORBIDDEN_ORIGIN, "cross-origin request refused", NULL, NULL);
      goto done;
    }
  }
  char qfield[80], qerr[512]; /* a parameter the route does not take would be ignored: refuse it */
  if (etwd_query_unknown(rt, r.ri->query_string, qfield, sizeof qfield, qerr, sizeof qerr)) {
    etwd_problem(&r, ETWD_P_INVALID, qerr, qfield, NULL);
    goto done;
  }
  if (rt->body == BODY_JSON && read_json_body(&r)) goto done;
  rt->fn(&r);
done:
  if (r.status == 0) r.status = 200;
  if (r.status >= 400) atomic_fetch_add(&s->errors_total, 1);
  access_log(&r);
  cJSON_Delete(r.body);
  if (!is_stream) atomic_fetch_sub(&s->active_requests, 1);
  return r.status; /* civetweb: >0 = handled, with this status for its own log */
}

static int log_message(const struct mg_connection *conn, const char *message) {
  (void)conn;
  etwd_log(LOG_WARN, "civetweb", "detail=\"%.300s\"", message);
  return 1;
}

/* civetweb's own error replies (malformed requests, a WebSocket upgrade where there is no
 * WebSocket, bad HTTP versions …) as problem+json like every other error; runs on the worker */
static int http_error(struct mg_connection *conn, int status, const char *msg) {
  if (status < 400) return 1; /* civetweb's reply (no body) */
  const struct mg_request_info *ri = mg_get_request_info(conn);
  if (status == 404 && mg_get_header(conn, "Upgrade"))
    msg = "no WebSocket endpoint at this path (event streams: /api/v1/sessions/{id}/events)";
  status = etwd_problem_conn(conn, etwd_prob_for_status(status), msg, "Connection: close\r\n");
  char q1[300], q2[64], q3[300];
  etwd_log(LOG_INFO, "request refused by the HTTP layer", "kind=access path=%s status=%d remote=%s detail=%s",
           etwd_logq(q1, sizeof q1, ri && ri->request_uri ? ri->request_uri : "-"), status,
           etwd_logq(q2, sizeof q2, ri ? ri->remote_addr : "-"), etwd_logq(q3, sizeof q3, msg));
  return 0;
}

static int init_ssl(void *ssl_ctx, void *user_data) {
  struct etwd_server *s = user_data;
  int rc = s->tls_init ? s->tls_init(ssl_ctx, s->cert, s->key) : 0;
  return rc == 1 ? 1 : -1;
}

int etwd_listen_split(const char *list, char out[][128], int max) {
  int n = 0;
  const char *p = list;
  for (;;) {
    size_t k = strcspn(p, ",");
    if (n >= max || k == 0 || k >= 128) return -1;
    memcpy(out[n], p, k);
    out[n++][k] = 0;
    if (!p[k]) return n;
    p += k + 1;
  }
}

int etwd_server_start(struct etwd_server *s, char *err, size_t errlen) {
  char ports[ETWD_MAX_LISTEN * 130] = "", threads[16], io_ms[16], addrs[ETWD_MAX_LISTEN][128];
  /* every address of --listen is HTTPS (civetweb's "s" suffix), or every one plain HTTP */
  int naddr = etwd_listen_split(s->cfg->listen, addrs, ETWD_MAX_LISTEN);
  for (int i = 0; i < naddr; i++)
    snprintf(ports + strlen(ports), sizeof ports - strlen(ports), "%s%s%s", i ? "," : "", addrs[i],
             s->tls ? "s" : "");
  /* one worker per open connection (civetweb 1.15 holds one for a connection's life, from the TLS
   * handshake on): --max-connections, at least streams + REST requests + 4, of which that many
   * start with the server and the rest on demand; api/netguard.c refuses connections beyond it
   * (and beyond the per-address cap) at accept, so none waits in civetweb's queue behind peers
   * that dawdle, and bounds their handshake and head time */
  snprintf(threads, sizeof threads, "%u", s->cfg->max_connections);
  if (etwd_netguard_start(s->cfg->max_connections, s->cfg->max_streams + s->cfg->max_requests + 4,
                          s->cfg->max_per_address, s->cfg->head_timeout_s)) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* civetweb's time-out (--io-timeout): a read or write that makes no progress (bodies,
   * downloads, stream frames to a client that stopped reading); the TLS handshake and request
   * heads have the shorter --head-timeout (api/netguard.c) */
  snprintf(io_ms, sizeof io_ms, "%u", s->cfg->io_timeout_s * 1000u);
  const char *opts[] = {"listening_ports", ports,
                        "num_threads", threads,
                        "tcp_nodelay", "1",
                        "enable_keep_alive", "yes",
                        "keep_alive_timeout_ms", "5000",
                        "request_timeout_ms", io_ms,
                        "websocket_timeout_ms", "30000",
                        "enable_websocket_ping_pong", "yes",
                        "ssl_protocol_version", "4",
                        "decode_url", "no",
                        "enable_directory_listing", "no",
                        "access_control_allow_origin", "", /* CORS: options_reply, --allow-origin only */
                        NULL};
  struct mg_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.log_message = log_message;
  cb.http_error = http_error;
  if (s->tls) cb.init_ssl = init_ssl;
  unsigned feat = mg_init_library(MG_FEATURES_TLS | MG_FEATURES_WEBSOCKET);
  if (s->tls && !(feat & MG_FEATURES_TLS)) {
    snprintf(err, errlen, "civetweb was built without working TLS (features 0x%x)", feat);
    return -1;
  }
  struct mg_init_data init = {&cb, s, opts};
  struct mg_error_data ed;
  char ebuf[256] = "";
  unsigned ecode = 0;
  memset(&ed, 0, sizeof ed);
  ed.code = &ecode;
  ed.text = ebuf;
  ed.text_buffer_size = sizeof ebuf;
  s->mg = mg_start2(&init, &ed);
  if (!s->mg) {
    etwd_netguard_stop();
    snprintf(err, errlen, "cannot start the HTTP%s server on %s: %s", s->tls ? "S" : "", s->cfg->listen,
             ebuf[0] ? ebuf : "unknown error");
    return -1;
  }
  mg_set_request_handler(s->mg, "/", dispatch, s);
  etwd_stream_register(s);
  return 0;
}

void etwd_server_stop(struct etwd_server *s) {
  if (!s->mg) return;
  atomic_store(&s->stopping, 1);
  etwd_stream_shutdown(s);
  mg_stop(s->mg);
  s->mg = NULL;
  etwd_netguard_stop(); /* every worker has ended: no hook runs any more */
}
