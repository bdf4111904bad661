/* api.h — the REST layer: server context, per-request context, the route table, and the
 * response helpers every handler uses (one write per response; problem+json for every error).
 * Layering: server/ → api/ → etwcore: nothing here sees server/ (its own CMake target); the
 * server fills struct etwd_api_config and the TLS hook in struct etwd_server before starting it.
 *
 * Threads: civetweb runs each request on one of its worker threads; a handler runs start to
 * finish on that thread. WebSocket streams get their own sender thread (stream.c).
 */
#ifndef ETWD_API_H
#define ETWD_API_H

#include <civetweb.h>
#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "etwcore/err.h"
#include "etwcore/jw.h"
#include "etwcore/session.h"
#include "problem.h"

#define ETWD_MAX_ORIGINS 8
#define ETWD_MAX_LISTEN 8 /* addresses in --listen */

/* What the REST layer needs of the configuration (the server's struct etwd_config embeds it and
 * fills it from flags and the config file); read-only once the server has started. */
struct etwd_api_config {
  char listen[512];        /* host:port[,host:port...] */
  char state_dir[1024];    /* recordings (<state>/recordings) */
  char data_dir[1024];     /* ETL files served by /api/v1/files */
  char manifest_dir[1024]; /* provider manifests: a search path DIR[:DIR...] (';' on Windows), first wins */
  char manifest_upload_dir[1024]; /* its last directory: POST/GET /api/v1/manifests */
  uint32_t max_sessions, max_streams, max_requests;
  uint32_t max_decodes; /* concurrent GET /files/{name}/events decodes */
  size_t max_body, max_upload;
  char origins[ETWD_MAX_ORIGINS][256]; /* extra allowed WebSocket Origins */
  int n_origins;
  uint32_t io_timeout_s;    /* a connection making no progress this long is closed (civetweb's request_timeout) */
  uint32_t head_timeout_s;  /* TLS handshake and each request head must finish within this */
  uint32_t max_connections; /* open connections in all = civetweb's worker pool */
  uint32_t max_per_address; /* open connections from one peer address */
};

/** etwd_listen_split - split a --listen list into @out (at most @max entries); count, or -1. */
int etwd_listen_split(const char *list, char out[][128], int max);

struct etwd_server {
  const struct etwd_api_config *cfg;
  /* civetweb's init_ssl: load @cert/@key into its SSL_CTX (the server's TLS code); 1 = ok.
   * Needed when tls is set. */
  int (*tls_init)(void *ssl_ctx, const char *cert, const char *key);
  struct etw_core *core;
  struct etwd_auth *auth;
  struct mg_context *mg;
  int tls;
  char fingerprint[96];
  char cert[1024], key[1024];
  atomic_uint active_requests;
  atomic_uint active_streams;
  atomic_uint active_decodes; /* file decodes now (h_files.c), bounded by --max-decodes */
  atomic_int stopping;
  atomic_ullong requests_total, errors_total;
};

enum body_kind { BODY_NONE = 0, BODY_JSON = 1, BODY_RAW = 2 };

struct etwd_req;
typedef void (*etwd_handler)(struct etwd_req *r);

struct etwd_route {
  const char *method;
  const char *path; /* "/api/v1/sessions/{id}" — {x} matches one segment */
  enum etwd_role role;
  enum body_kind body;
  etwd_handler fn;
  const char *op_id;
  const char *summary;
  const char *req_schema;  /* components/schemas name of the JSON body, or NULL */
  const char *resp_schema; /* components/schemas name of the 2xx body, or NULL */
  /* documented query parameters, "name[!][=example]" comma-separated ("!": required; a stream
   * parameter's example and doc come from etwcore/caps.h); a request with any other is refused */
  const char *query;
  int audit;               /* control action: goes to the audit log */
};

extern const struct etwd_route etwd_routes[];

/** etwd_query_unknown - 1 if query string @q has a parameter @rt does not list (its name in
 *  @field, the reason in @err), or one it lists given twice or without a value; else 0. Every
 *  routed request and WebSocket upgrade is checked: such a parameter would be ignored. */
int etwd_query_unknown(const struct etwd_route *rt, const char *q, char *field, size_t fieldlen,
                       char *err, size_t errlen);

#define ETWD_MAX_PARAMS 3

struct etwd_req {
  struct mg_connection *conn;
  const struct mg_request_info *ri;
  struct etwd_server *srv;
  const struct etwd_route *route;
  struct etwd_principal who;
  char params[ETWD_MAX_PARAMS][256];
  cJSON *body;
  int status;
  size_t bytes_out;
  char audit_detail[256];
};

/* ---- responses (http.c) */
/** etwd_reply - status line, headers (+ @extra_headers, each ending "\r\n") and body: one write. */
void etwd_reply(struct etwd_req *r, int status, const char *ctype, const char *body, size_t len,
                const char *extra_headers);
/** etwd_reply_jw - reply with the JSON in @w (application/json). */
void etwd_reply_jw(struct etwd_req *r, int status, struct etw_jw *w, const char *extra_headers);
/** etwd_problem - RFC 9457 problem+json reply: status, type and title from @p's row of the one
 *  table (problem.h); @detail (and @field, the offending input) are this occurrence's. */
void etwd_problem(struct etwd_req *r, enum etwd_prob p, const char *detail, const char *field,
                  const char *extra_headers);
/** etwd_fail - problem reply for a core error (its row of the table), detail from @st. */
void etwd_fail(struct etwd_req *r, enum etw_err code, const struct etw_status *st);
/** etwd_status_for - HTTP status of a core error code (its row of the one table). */
int etwd_status_for(enum etw_err code);
/* HSTS on every HTTPS response (never on plain HTTP: RFC 6797 §7.2); a year, this host only */
#define ETWD_HSTS_HEADER "Strict-Transport-Security: max-age=31536000\r\n"
/** etwd_hsts - ETWD_HSTS_HEADER if @c is a TLS connection, else "". */
const char *etwd_hsts(const struct mg_connection *c);
/** etwd_problem_conn - problem reply outside a routed request (WebSocket refusals, civetweb's
 *  own errors); returns the status sent. */
int etwd_problem_conn(struct mg_connection *c, enum etwd_prob p, const char *detail,
                      const char *extra_headers);
const char *etwd_reason(int status);

/* ---- helpers */
/** etwd_query - value of query parameter @name (URL-decoded) into @out; 0 if present. */
int etwd_query(const struct etwd_req *r, const char *name, char *out, size_t n);
/** etwd_parse_id - decimal session id from a path parameter; 0 if invalid. */
unsigned long long etwd_parse_id(const char *s);
/** etwd_send_file - serve one version of @path: ETag/Last-Modified, conditional requests
 *  (304/412), If-Range, one byte range (200/206/416). */
void etwd_send_file(struct etwd_req *r, const char *path, const char *ctype, const char *dl_name);
/** etwd_json_find_nul - 1 if the JSON text @buf holds a NUL (raw, or \\u0000 in a string), with
 *  the JSON pointer of the value holding it in @ptr ("" if unknown); 0 if none. */
int etwd_json_find_nul(const char *buf, size_t len, char *ptr, size_t n);
/** etwd_header - request header value or NULL. */
const char *etwd_header(const struct etwd_req *r, const char *name);

/** etwd_route_find - the route for @method + @uri (raw path), capturing {x} segments
 *  (URL-decoded) into @params; NULL if none, with the methods that do match the path in @allow
 *  ("GET, POST") for a 405. */
const struct etwd_route *etwd_route_find(const char *method, const char *uri,
                                         char params[ETWD_MAX_PARAMS][256], char *allow,
                                         size_t allowlen);
/** etwd_file_name_valid - 1 if @name is an acceptable data-directory file name (files.c). */
int etwd_file_name_valid(const char *name);

/* ---- server lifecycle (router.c) */
/** etwd_server_start - start civetweb with the routes; 0 or -1 with @err filled. */
int etwd_server_start(struct etwd_server *s, char *err, size_t errlen);
/** etwd_server_stop - close clients and stop civetweb. */
void etwd_server_stop(struct etwd_server *s);
/** etwd_origin_allowed - WebSocket/cookie CSRF Origin check against Host and --allow-origin. */
int etwd_origin_allowed(struct etwd_server *s, const struct mg_request_info *ri, const char *origin);
/** etwd_principal_of - who sent this request (bearer first, then cookie). */
void etwd_principal_of(struct etwd_server *s, struct mg_connection *c, struct etwd_principal *p);

/* ---- handlers, by file */
void h_health(struct etwd_req *r);
void h_version(struct etwd_req *r);
void h_backends(struct etwd_req *r);
void h_openapi(struct etwd_req *r);
void h_login(struct etwd_req *r);
void h_logout(struct etwd_req *r);
void h_whoami(struct etwd_req *r);
void h_rotate(struct etwd_req *r);
void h_metrics(struct etwd_req *r);
void h_providers(struct etwd_req *r);
void h_provider(struct etwd_req *r);
void h_os_sessions(struct etwd_req *r);
void h_sessions_list(struct etwd_req *r);
void h_session_create(struct etwd_req *r);
void h_session_get(struct etwd_req *r);
void h_session_patch(struct etwd_req *r);
void h_session_delete(struct etwd_req *r);
void h_session_stop(struct etwd_req *r);
void h_session_marker(struct etwd_req *r);
void h_session_snapshot(struct etwd_req *r);
void h_session_events(struct etwd_req *r);
void h_session_file(struct etwd_req *r);
void h_recordings_list(struct etwd_req *r);
/** etwd_recordings_append - the recordings as JSON objects appended to an array (h_recordings.c). */
void etwd_recordings_append(struct etwd_req *r, struct etw_jw *w, int *first);
void h_recording_get(struct etwd_req *r);
void h_recording_delete(struct etwd_req *r);
void h_files_list(struct etwd_req *r);
void h_file_upload(struct etwd_req *r);
void h_manifests_list(struct etwd_req *r);   /* h_manifests.c */
void h_manifest_upload(struct etwd_req *r);
void h_file_get(struct etwd_req *r);
void h_file_delete(struct etwd_req *r);
void h_file_events(struct etwd_req *r);

/* stream.c */
void etwd_stream_register(struct etwd_server *s);
void etwd_stream_shutdown(struct etwd_server *s);
/** etwd_stream_ndjson - stream a session's events as chunked ndjson (or, with ?format=csv, CSV)
 *  on this request, filtered by the stream parameters in @query (the request's, or what a
 *  handler left of them). */
void etwd_stream_ndjson(struct etwd_req *r, struct etw_session *sess, const char *query);
/** etwd_stream_format - the HTTP stream's ?format= in @query: 0 ndjson (also when absent), 1 csv,
 *  -1 anything else (@err says why). */
int etwd_stream_format(const char *query, char *err, size_t errlen);
/** etwd_stream_ctype - the Content-Type of an HTTP stream of format @csv (etwd_stream_format). */
const char *etwd_stream_ctype(int csv);
/** etwd_sub_filter_from_query - build a subscriber filter from ?provider=&event=&pid=&process=&level=. */
int etwd_sub_filter_from_query(const char *query, struct etw_sub_filter *f, unsigned long long *from,
                               char *err, size_t errlen);

/* openapi.c */
void etwd_openapi_json(struct etw_jw *w);

/* web assets (generated) */
#include "web_assets.h"

#endif
