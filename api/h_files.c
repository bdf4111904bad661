/* h_files.c — ETL files in the data directory: list (with the recordings after them), upload (size-limited, kept only when complete
 * and an ETL file: a temporary name, then rename), download with Range, delete, and
 * decode-to-ndjson through the etl backend and a private hub. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "etwcore/backend.h"
#include "etwcore/etl.h"
#include "etwcore/unpack.h"
#include "etwcore/util.h"
#include "files.h"

#ifdef _WIN32 /* MinGW has no lstat: no symbolic links are refused there */
#define lstat stat
#define S_ISLNK(m) 0
#endif

int etwd_file_name_valid(const char *n) {
  size_t len = strlen(n);
  if (len < 5 || len > 200 || n[0] == '.') return 0;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-'))
      return 0;
  if (strstr(n, "..")) return 0;
  return !strcasecmp(n + len - 4, ".etl");
}

char *etwd_file_resolve(struct etwd_server *s, const char *name, int must_exist, const char *field,
                        struct etw_status *st) {
  if (!etwd_file_name_valid(name)) {
    etw_fail(st, ETW_E_INVALID, field,
             "\"%.200s\" is not a valid file name: use a plain name of letters, digits, '.', '_' "
             "or '-' ending in .etl (no paths)",
             name);
    return NULL;
  }
  size_t n = strlen(s->cfg->data_dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) {
    etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    return NULL;
  }
  snprintf(p, n, "%s/%s", s->cfg->data_dir, name);
  struct stat sb;
  /* lstat: a symbolic link placed in the data directory (which may be a drop folder others can
   * write) could lead anywhere, the token file included: only regular files are used */
  if (must_exist && !lstat(p, &sb) && S_ISLNK(sb.st_mode)) {
    etw_fail(st, ETW_E_PERM, field, "\"%.200s\" in the data directory is a symbolic link: only regular "
             "files are used (copy the file there instead)", name);
    free(p);
    return NULL;
  }
  if (must_exist && (lstat(p, &sb) || !S_ISREG(sb.st_mode))) {
    etw_fail(st, ETW_E_NOT_FOUND, field, "no file \"%.200s\" in the data directory", name);
    free(p);
    return NULL;
  }
  return p;
}

void etwd_hide_dir(struct etw_status *st, const char *dir) {
  size_t dl = strlen(dir);
  char *p;
  while (dl && (p = strstr(st->msg, dir)) && (p[dl] == '/' || p[dl] == 0)) {
    size_t skip = dl + (p[dl] == '/');
    memmove(p, p + skip, strlen(p + skip) + 1);
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void h_files_list(struct etwd_req *r) {
  DIR *d = opendir(r->srv->cfg->data_dir);
  struct etw_jw w;
  etw_jw_init(&w, 1 << 22);
  etw_jw_ch(&w, '[');
  if (d) {
    char *names[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096)
      if (etwd_file_name_valid(e->d_name)) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    int first = 1;
    for (int i = 0; i < n; i++) {
      char path[2048];
      struct stat sb;
      snprintf(path, sizeof path, "%s/%s", r->srv->cfg->data_dir, names[i]);
      if (names[i] && !lstat(path, &sb) && S_ISREG(sb.st_mode)) { /* no symbolic links */
        if (!first) etw_jw_ch(&w, ',');
        first = 0;
        etw_jw_lit(&w, "{\"name\":");
        etw_jw_cs(&w, names[i]);
        etw_jw_lit(&w, ",\"kind\":\"upload\",\"url\":\"/api/v1/files/");
        etw_jw_lit(&w, names[i]); /* etwd_file_name_valid: nothing to escape */
        etw_jw_lit(&w, "\",\"size\":");
        etw_jw_u64(&w, (uint64_t)sb.st_size);
        etw_jw_lit(&w, ",\"modified\":");
        etw_jw_unix_ns(&w, (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec);
        etw_jw_ch(&w, '}');
      }
      free(names[i]);
    }
  }
  /* then the recordings of file-mode sessions, served and deleted under their "url" */
  int first = w.len == 1;
  etwd_recordings_append(r, &w, &first);
  etw_jw_ch(&w, ']');
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}


/* Copy the request body into @fd, at most @max bytes. 0 when the body arrived complete (exactly
 * Content-Length bytes, or a chunked body up to its last chunk); else 413 (over @max), 400 (cut
 * short: the client went away or stopped sending) or 500 (write error), the status to answer. */
static int receive_body(struct etwd_req *r, int fd, size_t max, size_t *total) {
  long long cl = r->ri->content_length; /* -1: chunked */
  char *buf = malloc(1 << 16);
  int n = 0, status = buf ? 0 : 500;
  *total = 0;
  while (!status && (n = mg_read(r->conn, buf, 1 << 16)) > 0) {
    *total += (size_t)n;
    if (*total > max)
      status = 413;
    else if (write(fd, buf, (size_t)n) != n)
      status = 500;
  }
  free(buf);
  if (!status && (n < 0 || (cl >= 0 && (long long)*total != cl))) status = 400;
  return status;
}

/* multipart and form bodies are not ETL files (curl's --data-binary default type is let through:
 * the content check decides) */
static int upload_ctype_refused(const char *ct) {
  return ct && !strncasecmp(ct + strspn(ct, " \t"), "multipart/", 10);
}

/* Is the file at @tmp an ETL file (a first buffer header and a logfile header the project's
 * reader accepts)? 0 yes; else a reply was sent. */
static int check_etl(struct etwd_req *r, const char *tmp) {
  struct etw_status st;
  etw_status_clear(&st);
  struct etw_etl_reader *rd = etw_etl_reader_new();
  enum etw_err e = rd ? etw_etl_reader_add_file(rd, tmp, &st) : etw_fail(&st, ETW_E_NOMEM, NULL, NULL);
  etw_etl_reader_free(rd);
  if (!e) return 0;
  size_t tl = strlen(tmp);
  const char *why = !strncmp(st.msg, tmp, tl) && st.msg[tl] == ':' ? st.msg + tl + 1 : st.msg;
  char detail[300];
  snprintf(detail, sizeof detail, "the upload is not an ETL file:%s%.240s", *why == ' ' ? "" : " ", why);
  if (e == ETW_E_CORRUPT)
    etwd_problem(r, ETWD_P_NOT_ETL, detail, NULL, NULL);
  else if (e == ETW_E_LIMIT) /* more buffers than the reader takes */
    etwd_problem(r, ETWD_P_TOO_LARGE, why, NULL, NULL);
  else
    etwd_problem(r, etwd_prob_of(e), "could not check the upload", NULL, NULL);
  return -1;
}

/* A gzip or zip body (.gz, .etlgz, .zip) is stored decompressed: @tmp is replaced by the file
 * it holds (etwcore/unpack.h), at most @max (--max-upload) bytes, else 413, zip bombs included.
 * 0 = ok or not compressed (*total = the stored size); else a reply was sent. */
static int unpack_upload(struct etwd_req *r, const char *tmp, size_t max, size_t *total) {
  enum etw_pack k = etw_pack_kind_file(tmp);
  if (k == ETW_PACK_NONE) return 0;
  char out[2100], err[1200];
  snprintf(out, sizeof out, "%s.unpacked", tmp);
  int rc = etw_unpack_file(tmp, k, out, max, NULL, 0, err, sizeof err);
  struct stat sb;
  if (rc > 0) {
    etwd_problem(r, ETWD_P_TOO_LARGE, "the decompressed upload exceeds the server's --max-upload", NULL, NULL);
    return -1;
  }
  size_t tl = strlen(tmp);
  const char *why = !strncmp(err, tmp, tl) && err[tl] == ':' ? err + tl + 2 : err;
  if (rc < 0) {
    char detail[400];
    snprintf(detail, sizeof detail, "the %s upload cannot be decompressed: %.300s",
             k == ETW_PACK_ZIP ? "zip" : "gzip", why);
    etwd_problem(r, ETWD_P_INVALID, detail, NULL, NULL);
    return -1;
  }
  if (rename(out, tmp) || stat(tmp, &sb)) {
    unlink(out);
    etwd_problem(r, ETWD_P_IO, "could not store the upload", NULL, NULL);
    return -1;
  }
  *total = (size_t)sb.st_size;
  return 0;
}

static void upload_reply(struct etwd_req *r, const char *name, size_t total) {
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  etw_jw_lit(&w, "{\"name\":");
  etw_jw_cs(&w, name);
  etw_jw_lit(&w, ",\"size\":");
  etw_jw_u64(&w, total);
  etw_jw_ch(&w, '}');
  char loc[400];
  snprintf(loc, sizeof loc, "Location: /api/v1/files/%.200s\r\n", name);
  etwd_reply_jw(r, 201, &w, loc);
  etw_jw_free(&w);
}

/* An archive's name is that of the .etl it is stored as: x.etl.zip, x.etl.gz and x.etlgz
 * (PerfView's and OneDrive's names) become x.etl; other names stay as they are. */
static void archive_name(char *n) {
  size_t len = strlen(n);
  if (len > 6 && !strcasecmp(n + len - 6, ".etlgz")) {
    n[len - 2] = 0;
    return;
  }
  if (len > 8 && !strcasecmp(n + len - 8, ".etl.zip"))
    n[len - 4] = 0;
  else if (len > 7 && !strcasecmp(n + len - 7, ".etl.gz"))
    n[len - 3] = 0;
}

/* unlink @path (@from NULL) or rename @from over it — refused with 409 naming the session while
 * a session replays the file: each of its passes opens the file again by path, so a later pass
 * would fail (or read other data). 0: done; else replied. */
static int change_file(struct etwd_req *r, const char *path, const char *from, const char *name) {
  char sname[128], d[400];
  int rc = 0;
  uint64_t id = etw_core_file_change(r->srv->core, path, from, &rc, sname, sizeof sname);
  if (id) {
    snprintf(d, sizeof d, "file \"%.100s\" is replayed by session %llu%s%.100s%s: delete that session first "
             "(DELETE /api/v1/sessions/%llu)", name, (unsigned long long)id, sname[0] ? " (\"" : "", sname,
             sname[0] ? "\")" : "", (unsigned long long)id);
    snprintf(r->audit_detail, sizeof r->audit_detail, "%s %.200s: in use by session %llu",
             from ? "upload" : "delete", name, (unsigned long long)id);
    etwd_problem(r, ETWD_P_STATE, d, NULL, NULL);
    return 1;
  }
  if (rc) etwd_problem(r, ETWD_P_IO, from ? "could not store the upload" : "could not delete the file", NULL, NULL);
  return rc != 0;
}

/* Upload: the body goes to a temporary name in the data directory and is renamed over @name
 * only when it arrived complete and is an ETL file; anything else leaves no trace. */
void h_file_upload(struct etwd_req *r) {
  char name[256] = "", ow[8] = "";
  struct etw_status st;
  etw_status_clear(&st);
  if (etwd_query(r, "name", name, sizeof name)) {
    etwd_problem(r, ETWD_P_INVALID, "give the file name as ?name=NAME.etl", "name", NULL);
    return;
  }
  etwd_query(r, "overwrite", ow, sizeof ow);
  archive_name(name);
  char *path = etwd_file_resolve(r->srv, name, 0, "name", &st);
  if (!path) {
    etwd_fail(r, st.code, &st);
    return;
  }
  snprintf(r->audit_detail, sizeof r->audit_detail, "upload %s", name);
  size_t max = r->srv->cfg->max_upload, total = 0;
  struct stat sb;
  char tmp[2048];
  int fd = -1, status;
  snprintf(tmp, sizeof tmp, "%s/.upload-%ld-%p", r->srv->cfg->data_dir, (long)getpid(), (void *)r);
  if (upload_ctype_refused(etwd_header(r, "Content-Type"))) {
    etwd_problem(r, ETWD_P_MEDIA_TYPE,
                 "send the ETL file itself as the body (application/octet-stream), not a form", NULL,
                 "Connection: close\r\n");
  } else if (r->ri->content_length > (long long)max) {
    etwd_problem(r, ETWD_P_TOO_LARGE, "the upload exceeds the server's --max-upload", NULL,
                 "Connection: close\r\n");
  } else if (!stat(path, &sb) && strcmp(ow, "true")) {
    etwd_problem(r, ETWD_P_EXISTS, "a file of that name exists; add ?overwrite=true to replace it",
                 "name", NULL);
  } else if (etw_mkdirs(r->srv->cfg->data_dir)) {
    etwd_problem(r, ETWD_P_IO, "cannot create the data directory", NULL, NULL);
  } else if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
    etwd_problem(r, ETWD_P_IO, "cannot create a temporary file in the data directory", NULL, NULL);
  } else {
    status = receive_body(r, fd, max, &total);
    if (close(fd) && !status) status = 500;
    if (status == 413)
      etwd_problem(r, ETWD_P_TOO_LARGE, "the upload exceeds the server's --max-upload", NULL,
                   "Connection: close\r\n");
    else if (status == 400)
      etwd_problem(r, ETWD_P_INCOMPLETE_BODY,
                   "the upload ended before all of its bytes arrived; nothing was kept", NULL,
                   "Connection: close\r\n");
    else if (status)
      etwd_problem(r, ETWD_P_IO, "could not store the upload", NULL, NULL);
    else if (total == 0)
      etwd_problem(r, ETWD_P_INVALID, "the upload is empty", NULL, NULL);
    else if (!unpack_upload(r, tmp, max, &total) && !check_etl(r, tmp) && !change_file(r, path, tmp, name))
      upload_reply(r, name, total);
    if (r->status != 201) unlink(tmp);
  }
  free(path);
}

/* the existing data-directory file named by the {name} path parameter, or NULL after replying */
static char *path_param_or_reply(struct etwd_req *r) {
  struct etw_status st;
  etw_status_clear(&st);
  char *path = etwd_file_resolve(r->srv, r->params[0], 1, NULL, &st);
  if (!path) etwd_fail(r, st.code, &st);
  return path;
}

void h_file_get(struct etwd_req *r) {
  char *path = path_param_or_reply(r);
  if (!path) return;
  etwd_send_file(r, path, "application/octet-stream", r->params[0]);
  free(path);
}

void h_file_delete(struct etwd_req *r) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "delete %s", r->params[0]);
  char *path = path_param_or_reply(r);
  if (!path) return;
  if (!change_file(r, path, NULL, r->params[0])) etwd_reply(r, 204, "application/json", "", 0, NULL);
  free(path);
}

/* Decode one file as ndjson (or CSV: ?format=csv): a private session (not in the table: it takes no --max-sessions
 * slot) replayed as fast as possible. The caller holds a decode slot. */
static void file_events(struct etwd_req *r) {
  char *path = path_param_or_reply(r);
  if (!path) return;
  char ferr[200];
  int csv = etwd_stream_format(r->ri->query_string, ferr, sizeof ferr);
  if (csv < 0) { /* refused before the decode starts */
    free(path);
    etwd_problem(r, ETWD_P_INVALID, ferr, "format", NULL);
    return;
  }
  if (!strcmp(r->ri->request_method, "HEAD")) { /* a stream has no length: headers only */
    free(path);
    etwd_reply(r, 200, etwd_stream_ctype(csv), "", 0, NULL);
    return;
  }
  struct etw_status st;
  etw_status_clear(&st);
  cJSON *body = cJSON_CreateObject();
  cJSON *files = cJSON_AddArrayToObject(body, "files");
  cJSON_AddItemToArray(files, cJSON_CreateString(r->params[0]));
  cJSON_AddStringToObject(body, "backend", "etl");
  cJSON_AddStringToObject(body, "replay", "fast");
  /* stackwalk_events=true|false: the file's stack walk rows too (a spec member of the private
   * session); the other parameters go to the stream */
  const char *q = r->ri->query_string ? r->ri->query_string : "";
  char rest[2048], swv[8] = "";
  size_t rl = 0;
  for (const char *p = q; *p;) {
    size_t k = strcspn(p, "&");
    if (k > 17 && !strncmp(p, "stackwalk_events=", 17)) snprintf(swv, sizeof swv, "%.*s", (int)(k - 17), p + 17);
    else if (k && rl + k + 2 < sizeof rest) rl += (size_t)snprintf(rest + rl, sizeof rest - rl, "%s%.*s", rl ? "&" : "", (int)k, p);
    p += k;
    if (*p) p++;
  }
  rest[rl] = 0;
  if (swv[0] && strcmp(swv, "true") && strcmp(swv, "false")) {
    cJSON_Delete(body);
    free(path);
    etwd_problem(r, ETWD_P_INVALID, "stackwalk_events must be true or false", NULL, NULL);
    return;
  }
  if (!strcmp(swv, "true")) cJSON_AddTrueToObject(body, "stackwalk_events");
  const char *paths[2] = {path, NULL};
  struct etw_session *s = NULL;
  enum etw_err e = etw_session_create_private(r->srv->core, body, paths, &s, &st);
  cJSON_Delete(body);
  free(path);
  if (e) {
    etwd_hide_dir(&st, r->srv->cfg->data_dir);
    etwd_fail(r, e, &st);
    return;
  }
  etwd_stream_ndjson(r, s, strlen(q) < sizeof rest ? rest : q);
  etw_session_discard(s); /* frees its memory (and trims malloc's) now */
}

/* take a decode slot; a client whose previous decode just ended (its last chunk is sent before
 * the slot comes back) may wait up to 0.5 s for one. 0 = none free. */
static int decode_slot_take(struct etwd_server *s) {
  for (int tries = 0;; tries++) {
    if (atomic_fetch_add(&s->active_decodes, 1) < s->cfg->max_decodes) return 1;
    atomic_fetch_sub(&s->active_decodes, 1);
    if (tries == 50 || atomic_load(&s->stopping)) return 0;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* A decode's memory is bounded by its subscriber queue: --max-decodes bounds how many exist. */
void h_file_events(struct etwd_req *r) {
  if (!decode_slot_take(r->srv)) {
    etwd_problem(r, ETWD_P_LIMIT, "too many file decodes at once (--max-decodes)", NULL,
                 "Retry-After: 1\r\n");
    return;
  }
  file_events(r);
  atomic_fetch_sub(&r->srv->active_decodes, 1);
}
