/* remote.c — `etwd remote`: drive an etwd on another host from scripts, over HTTPS (libcurl).
 *
 *   etwd remote --url https://host:8443 --token-file F [--fingerprint SHA256 | --cacert F] CMD …
 *     providers [QUERY] | sessions | record PROVIDER… --duration 10s -o FILE |
 *     stream PROVIDER…|--session ID [--filter K=V] [--format ndjson|csv] [--limit N] |
 *     stop ID | marker ID TEXT | snapshot ID [-o FILE] | delete ID |
 *     recordings | get NAME -o FILE | delete-recording NAME
 *
 * Single-threaded: one curl easy handle, reused for every request (one TLS connection). The
 * server's identity is checked either by --fingerprint (the SHA-256 of the certificate's DER
 * bytes, the one etwd prints at start: checked in OpenSSL's verify callback during the handshake,
 * so nothing, not even the token, is sent to a server with another certificate) or --cacert / the
 * system's CAs (libcurl's own verification, host name included). Exit codes: remote.h.
 * SIGINT/SIGTERM set a flag the transfer callbacks and wait loops look at (see each command).
 */
#include "remote.h"
#include "etwcore/evcsv.h"
#include "etwcore/util.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODY (16u << 20) /* a JSON answer kept in memory; a larger one is an error */
#define MAX_LINE (16u << 20) /* one ndjson line of a stream */

struct remote {
  char url[512]; /* base URL, no trailing '/' */
  char token[256];
  unsigned char pin[32]; /* --fingerprint */
  int pinned, quiet, json, header; /* header: --header, a first line naming the columns */
  const char *cacert;
  long connect_timeout;
  CURL *c;
  char seen_fp[100]; /* the certificate's fingerprint when it did not match the pin */
  char curl_err[CURL_ERROR_SIZE];
};

/* A response: its status and (bounded) body, or a sink the body is handed to. */
struct resp {
  long status;
  char *body;
  size_t len, cap;
  int too_big;
  char etag[160];
};

static volatile sig_atomic_t stop_flag;
static struct remote *g_remote; /* for the OpenSSL verify callback (single-threaded CLI) */

static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("etwd remote: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void usage(FILE *f) {
  fputs("usage: etwd remote --url https://HOST:PORT --token-file FILE [--fingerprint SHA256 | --cacert FILE]\n"
        "                   [--connect-timeout S] [--quiet] [--json | --header] COMMAND ...\n"
        "commands (lists are tab-separated, one line each; --header: a first line naming the\n"
        "columns; --json: the server's JSON answer instead):\n"
        "  providers [QUERY]                 list the server's providers (name, events, backend, guid)\n"
        "  sessions                          list sessions (id, state, mode, backend, events, providers)\n"
        "  record PROVIDER... [--duration 10s] -o FILE [--keep]\n"
        "                                    record to a file on the server, wait, download it (resumed\n"
        "                                    after a broken connection); the session is deleted after a\n"
        "                                    complete download unless --keep (--duration: 10 s if not given)\n"
        "  stream PROVIDER...|--session ID [--filter K=V]... [--format ndjson|csv] [--limit N]\n"
        "                                    events to stdout until Ctrl-C, --limit or the session's end\n"
        "  stop ID | marker ID TEXT\n"
        "  delete ID                         stop and delete a session (its recording stays)\n"
        "  snapshot ID [-o FILE]             a flight session's buffers into a new recording on the\n"
        "                                    server: prints its name, size and URL; -o downloads it\n"
        "  recordings                        list the recordings on the server (name, size, session or\n"
        "                                    -, created: the UTC time the recording began)\n"
        "  get NAME -o FILE                  download a recording (resumed after a broken connection)\n"
        "  delete-recording NAME             delete a recording (not while its session writes it)\n"
        "  (record/stream --dry-run: print the session spec the PROVIDER arguments make, send nothing)\n"
        "PROVIDER: system:event[,event...], system:*, or Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]]\n"
        "exit codes: 0 ok, 1 local error, 2 usage, 3 unreachable/connection broken, 4 TLS verification\n"
        "  failed, 5 token refused (401/403), 6 request refused (other 4xx), 7 server error (5xx),\n"
        "  8 recording did not end in time\n",
        f);
}

/* ---- provider arguments → the JSON spec */

static int parse_u64(const char *s, unsigned long long *v) {
  char *end;
  if (!*s) return -1;
  errno = 0;
  *v = strtoull(s, &end, 0);
  return errno || *end ? -1 : 0;
}

/* Name[:Level[:IDs[:Any[:All]]]] with @parts split at ':' (n parts, n >= 2). */
static cJSON *goetw_provider(char **parts, int n, char *err, unsigned en) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", parts[0]);
  unsigned long long v;
  if (parts[1][0]) {
    if (parse_u64(parts[1], &v) || v > 255) goto bad;
    cJSON_AddNumberToObject(o, "level", (double)v);
  }
  if (n > 2 && parts[2][0]) {
    cJSON *ids = cJSON_AddArrayToObject(o, "event_ids");
    for (char *save = NULL, *t = strtok_r(parts[2], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      if (parse_u64(t, &v) || v > 65535) goto bad;
      cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)v));
    }
  }
  for (int k = 3; k < n && k < 5; k++) {
    if (!parts[k][0]) continue;
    char hex[24];
    if (parse_u64(parts[k], &v)) goto bad;
    snprintf(hex, sizeof hex, "0x%llx", v);
    cJSON_AddStringToObject(o, k == 3 ? "keywords_any" : "keywords_all", hex);
  }
  if (n > 5) goto bad;
  return o;
bad:
  snprintf(err, en, "provider \"%s…\": want Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]] "
           "(level 0-255, ids 0-65535 separated by ',', keywords as numbers, e.g. 0x10)", parts[0]);
  cJSON_Delete(o);
  return NULL;
}

char *etwd_remote_spec(int n, char **args, const char *mode, double duration_s, char *err, unsigned en) {
  cJSON *spec = cJSON_CreateObject(), *provs = cJSON_AddArrayToObject(spec, "providers");
  for (int i = 0; i < n; i++) {
    char buf[1024], *parts[8];
    int np = 0;
    if (!args[i][0] || strlen(args[i]) >= sizeof buf) {
      snprintf(err, en, "provider argument %d is empty or too long", i + 1);
      goto bad;
    }
    snprintf(buf, sizeof buf, "%s", args[i]);
    parts[np++] = buf;
    for (char *p = buf; *p && np < 8; p++)
      if (*p == ':') {
        *p = 0;
        parts[np++] = p + 1;
      }
    unsigned long long v;
    if (np == 1 || (np >= 2 && (!parts[1][0] || !parse_u64(parts[1], &v)))) { /* name, or goetw form */
      cJSON *o = np == 1 ? cJSON_CreateObject() : goetw_provider(parts, np, err, en);
      if (!o) goto bad;
      if (np == 1) cJSON_AddStringToObject(o, "name", parts[0]);
      cJSON_AddItemToArray(provs, o);
      continue;
    }
    if (np != 2) {
      snprintf(err, en, "provider \"%s\": want system:event, system:* or Name[:Level[:IDs[:Any[:All]]]]", args[i]);
      goto bad;
    }
    /* system:event or system:* — events of one system go into one provider object */
    cJSON *o = NULL, *it;
    cJSON_ArrayForEach(it, provs) {
      if (!strcmp(cJSON_GetObjectItem(it, "name")->valuestring, parts[0]) && cJSON_GetArraySize(it) <= 2) o = it;
    }
    if (!o) {
      o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", parts[0]);
      cJSON_AddItemToArray(provs, o);
      if (strcmp(parts[1], "*")) cJSON_AddArrayToObject(o, "events");
    }
    cJSON *ev = cJSON_GetObjectItem(o, "events");
    if (!strcmp(parts[1], "*")) {
      cJSON_DeleteItemFromObject(o, "events"); /* all of the system's events */
    } else if (ev) { /* system:a,b — as the server's provider strings: one event each */
      int added = 0;
      for (char *save = NULL, *e = strtok_r(parts[1], ",", &save); e; e = strtok_r(NULL, ",", &save), added++)
        cJSON_AddItemToArray(ev, cJSON_CreateString(e));
      if (!added) { /* "sched:," — an empty list would mean every event */
        snprintf(err, en, "provider \"%s\": no event name after ':'", args[i]);
        goto bad;
      }
    }
  }
  cJSON_AddStringToObject(spec, "mode", mode);
  if (duration_s > 0) cJSON_AddNumberToObject(spec, "duration_s", duration_s);
  char *s = cJSON_PrintUnformatted(spec);
  cJSON_Delete(spec);
  return s;
bad:
  cJSON_Delete(spec);
  return NULL;
}

/* ---- TLS: the fingerprint pin */

static void hexfp(const unsigned char *md, unsigned n, char *out) {
  for (unsigned i = 0; i < n; i++) sprintf(out + 3 * i, i + 1 < n ? "%02X:" : "%02X", md[i]);
}

static int parse_fingerprint(const char *s, unsigned char pin[32]) {
  if (!strncasecmp(s, "SHA256:", 7)) s += 7;
  int k = 0;
  for (; *s; s++) {
    if (*s == ':' || *s == ' ') continue;
    unsigned d;
    if (*s >= '0' && *s <= '9') d = (unsigned)(*s - '0');
    else if (*s >= 'a' && *s <= 'f') d = (unsigned)(*s - 'a' + 10);
    else if (*s >= 'A' && *s <= 'F') d = (unsigned)(*s - 'A' + 10);
    else return -1;
    if (k >= 64) return -1;
    pin[k / 2] = (unsigned char)(k % 2 ? (pin[k / 2] | d) : d << 4);
    k++;
  }
  return k == 64 ? 0 : -1;
}

/* OpenSSL's verify callback: the leaf certificate (depth 0) must have the pinned SHA-256; the
 * chain above it is not looked at (the pin is the identity, as with ssh's host keys). */
static int pin_verify(int ok, X509_STORE_CTX *x) {
  (void)ok;
  if (X509_STORE_CTX_get_error_depth(x) != 0) return 1;
  X509 *cert = X509_STORE_CTX_get_current_cert(x);
  unsigned char md[32];
  unsigned n = 0;
  if (!cert || !X509_digest(cert, EVP_sha256(), md, &n) || n != 32) return 0;
  if (!memcmp(md, g_remote->pin, 32)) return 1;
  hexfp(md, 32, g_remote->seen_fp);
  return 0;
}

static CURLcode ssl_ctx_cb(CURL *c, void *ctx, void *arg) {
  (void)c;
  (void)arg;
  SSL_CTX_set_verify((SSL_CTX *)ctx, SSL_VERIFY_PEER, pin_verify);
  return CURLE_OK;
}

/* ---- requests */

static size_t body_cb(char *p, size_t sz, size_t nm, void *arg) {
  struct resp *r = arg;
  size_t n = sz * nm;
  if (r->len + n > MAX_BODY) {
    r->too_big = 1;
    return 0;
  }
  if (r->len + n + 1 > r->cap) {
    size_t cap = (r->len + n + 1) * 2;
    char *b = realloc(r->body, cap);
    if (!b) return 0;
    r->body = b;
    r->cap = cap;
  }
  memcpy(r->body + r->len, p, n);
  r->len += n;
  r->body[r->len] = 0;
  return n;
}

static size_t header_cb(char *p, size_t sz, size_t nm, void *arg) {
  struct resp *r = arg;
  size_t n = sz * nm;
  if (n > 5 && !strncasecmp(p, "HTTP/", 5)) r->etag[0] = 0; /* a new response (after a 100) */
  if (n > 5 && !strncasecmp(p, "ETag:", 5)) {
    const char *v = p + 5;
    while (*v == ' ') v++;
    size_t l = (size_t)(p + n - v);
    while (l && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == ' ')) l--;
    if (l < sizeof r->etag) {
      memcpy(r->etag, v, l);
      r->etag[l] = 0;
    }
  }
  return n;
}

/* Map a failed transfer to an exit code and say why. */
static int transport_error(struct remote *R, CURLcode e, const char *what) {
  const char *why = R->curl_err[0] ? R->curl_err : curl_easy_strerror(e);
  if (R->seen_fp[0]) {
    say("%s: TLS verification failed: the server's certificate has the SHA-256 fingerprint %s, "
        "not the one given with --fingerprint", what, R->seen_fp);
    return RX_TLS;
  }
  switch (e) {
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    say("%s: TLS verification failed: %s (give the fingerprint etwd printed at start with "
        "--fingerprint, or its CA with --cacert)", what, why);
    return RX_TLS;
  case CURLE_URL_MALFORMAT:
  case CURLE_UNSUPPORTED_PROTOCOL:
    say("%s: bad --url: %s", what, why);
    return RX_USAGE;
  case CURLE_WRITE_ERROR:
    say("%s: could not keep the answer (out of memory, too large, or a write error)", what);
    return RX_LOCAL;
  default:
    say("%s: cannot reach %s: %s", what, R->url, why);
    return RX_CONNECT;
  }
}

/* Exit code for an HTTP status; for an error, says the status and the problem's detail. */
static int status_error(const struct resp *r, const char *what) {
  if (r->status >= 200 && r->status < 300) return RX_OK;
  char detail[600] = "";
  cJSON *j = r->body ? cJSON_Parse(r->body) : NULL;
  const cJSON *d = j ? cJSON_GetObjectItem(j, "detail") : NULL, *t = j ? cJSON_GetObjectItem(j, "title") : NULL;
  if (cJSON_IsString(d)) snprintf(detail, sizeof detail, ": %s", d->valuestring);
  else if (cJSON_IsString(t)) snprintf(detail, sizeof detail, ": %s", t->valuestring);
  cJSON_Delete(j);
  if (r->status == 401 || r->status == 403) {
    say("%s: authentication failed (%ld)%s — check --token-file (an admin token is needed to "
        "create, stop, mark and delete sessions and recordings)", what, r->status, detail);
    return RX_AUTH;
  }
  say("%s: the server answered %ld%s", what, r->status, detail);
  return r->status >= 500 ? RX_SERVER : r->status >= 400 ? RX_REFUSED : RX_REFUSED;
}

/* Common options of every request on the handle. */
static void setup(struct remote *R, const char *method, const char *path, struct curl_slist **h) {
  char url[1200];
  snprintf(url, sizeof url, "%s%s", R->url, path);
  curl_easy_reset(R->c);
  curl_easy_setopt(R->c, CURLOPT_URL, url);
  curl_easy_setopt(R->c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(R->c, CURLOPT_ERRORBUFFER, R->curl_err);
  curl_easy_setopt(R->c, CURLOPT_CONNECTTIMEOUT, R->connect_timeout);
  curl_easy_setopt(R->c, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(R->c, CURLOPT_SSL_SESSIONID_CACHE, 0L); /* every handshake is verified */
  if (R->pinned) {
    curl_easy_setopt(R->c, CURLOPT_SSL_VERIFYPEER, 0L); /* pin_verify decides, in the handshake */
    curl_easy_setopt(R->c, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(R->c, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_cb);
  } else if (R->cacert) {
    curl_easy_setopt(R->c, CURLOPT_CAINFO, R->cacert);
  }
  curl_easy_setopt(R->c, CURLOPT_CUSTOMREQUEST, method);
  if (!strcmp(method, "HEAD")) curl_easy_setopt(R->c, CURLOPT_NOBODY, 1L);
  char auth[300];
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", R->token);
  *h = curl_slist_append(*h, auth);
  R->curl_err[0] = 0;
  R->seen_fp[0] = 0;
}

/* One request with a JSON (or no) body; the answer kept in @r. Returns 0 or a transport exit
 * code (the HTTP status is for the caller: status_error). */
static int request(struct remote *R, const char *method, const char *path, const char *json,
                   struct resp *r, const char *what) {
  struct curl_slist *h = NULL;
  memset(r, 0, sizeof *r);
  setup(R, method, path, &h);
  if (json) {
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(R->c, CURLOPT_POSTFIELDS, json);
  } else if (!strcmp(method, "POST")) {
    curl_easy_setopt(R->c, CURLOPT_POSTFIELDS, "");
  }
  h = curl_slist_append(h, "Accept: application/json");
  curl_easy_setopt(R->c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(R->c, CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(R->c, CURLOPT_WRITEFUNCTION, body_cb);
  curl_easy_setopt(R->c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(R->c, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(R->c, CURLOPT_HEADERDATA, r);
  CURLcode e = curl_easy_perform(R->c);
  curl_slist_free_all(h);
  curl_easy_getinfo(R->c, CURLINFO_RESPONSE_CODE, &r->status);
  return e ? transport_error(R, e, what) : RX_OK;
}

/* request + status check + JSON parse; NULL with *rc set on any failure. */
static cJSON *call_json(struct remote *R, const char *method, const char *path, const char *json,
                        const char *what, int *rc) {
  struct resp r;
  *rc = request(R, method, path, json, &r, what);
  if (!*rc) *rc = status_error(&r, what);
  cJSON *j = NULL;
  if (!*rc && r.status != 204) {
    j = r.body ? cJSON_Parse(r.body) : NULL;
    if (!j) {
      say("%s: the server's answer is not JSON", what);
      *rc = RX_SERVER;
    }
  } else if (!*rc) {
    j = cJSON_CreateObject();
  }
  free(r.body);
  return j;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}

static double jnum(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static long parse_id(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  return *s && !*end && v > 0 ? v : -1;
}

/* Seconds in "10", "10s", "500ms", "2m", "1h"; < 0 if not. */
static double parse_duration(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  if (!*end || !strcmp(end, "s")) return v;
  if (!strcmp(end, "ms")) return v / 1000;
  if (!strcmp(end, "m")) return v * 60;
  if (!strcmp(end, "h")) return v * 3600;
  return -1;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double now_s(void) { return (double)etw_mono_ns() / 1e9; }

/* ---- providers, sessions, stop, marker, snapshot */

static const cJSON *list_of(const cJSON *j, const char *member) {
  return cJSON_IsArray(j) ? j : cJSON_GetObjectItem(j, member);
}

/* --header: the column names (tab-separated in @cols) before a tab-separated list */
static void header_line(const struct remote *R, const char *cols) {
  if (R->header && !R->json) printf("%s\n", cols);
}

static void print_json(const cJSON *j) {
  char *t = cJSON_PrintUnformatted(j);
  printf("%s\n", t ? t : "null");
  free(t);
}

static int cmd_providers(struct remote *R, const char *q) {
  char path[600] = "/api/v1/providers";
  if (q) {
    char *e = curl_easy_escape(R->c, q, 0);
    snprintf(path, sizeof path, "/api/v1/providers?q=%s", e ? e : "");
    curl_free(e);
  }
  int rc;
  cJSON *j = call_json(R, "GET", path, NULL, "providers", &rc);
  if (!j) return rc;
  const cJSON *p;
  if (R->json) {
    print_json(j);
  } else {
    header_line(R, "name\tevents\tbackend\tguid");
    cJSON_ArrayForEach(p, list_of(j, "providers")) {
      printf("%s\t%.0f\t%s\t%s\n", jstr(p, "name"), jnum(p, "events"), jstr(p, "backend"), jstr(p, "guid"));
    }
  }
  cJSON_Delete(j);
  return RX_OK;
}

/* the events a session has read: stats.read_events (a file-mode session publishes none, so its
 * stats.events stays 0), else stats.events */
static double events_read(const cJSON *stats) {
  const cJSON *r = cJSON_GetObjectItem(stats, "read_events");
  return cJSON_IsNumber(r) ? r->valuedouble : jnum(stats, "events");
}

static int cmd_sessions(struct remote *R) {
  int rc;
  cJSON *j = call_json(R, "GET", "/api/v1/sessions", NULL, "sessions", &rc);
  if (!j) return rc;
  if (R->json) {
    print_json(j);
  } else {
    const cJSON *s, *p;
    header_line(R, "id\tstate\tmode\tbackend\tevents\tproviders");
    cJSON_ArrayForEach(s, list_of(j, "sessions")) {
      const cJSON *spec = cJSON_GetObjectItem(s, "spec"), *st = cJSON_GetObjectItem(s, "stats");
      printf("%.0f\t%s\t%s\t%s\t%.0f\t", jnum(s, "id"), jstr(s, "state"), jstr(spec, "mode"),
             jstr(s, "backend"), events_read(st));
      int first = 1;
      cJSON_ArrayForEach(p, cJSON_GetObjectItem(spec, "providers")) {
        printf("%s%s", first ? "" : ",", jstr(p, "name"));
        first = 0;
      }
      printf("\n");
    }
  }
  cJSON_Delete(j);
  return RX_OK;
}

/* POST /sessions/ID/ACTION; a 404 for a session that exists means the route is not there. */
/* @answer: when not NULL, gets the answer's body (malloc'd) on success. */
static int cmd_action(struct remote *R, const char *what, const char *id_s, const char *action,
                      const char *json, const char *feature, char **answer) {
  long id = parse_id(id_s);
  if (id < 0) {
    say("%s: \"%s\" is not a session id", what, id_s);
    return RX_USAGE;
  }
  char path[128];
  snprintf(path, sizeof path, "/api/v1/sessions/%ld/%s", id, action);
  struct resp r;
  int rc = request(R, "POST", path, json, &r, what);
  if (!rc && r.status == 404 && feature) {
    struct resp g;
    snprintf(path, sizeof path, "/api/v1/sessions/%ld", id);
    if (!request(R, "GET", path, NULL, &g, what) && g.status == 200) {
      say("%s: this server has no %s (it is older than this etwd)", what, feature);
      rc = RX_REFUSED;
    }
    free(g.body);
  }
  if (!rc) rc = status_error(&r, what);
  if (!rc && !R->quiet) say("%s: session %ld: done", what, id);
  if (!rc && answer) {
    *answer = r.body;
    r.body = NULL;
  }
  free(r.body);
  return rc;
}

/* ---- record: create, wait, stop, download (resumed) */

struct dl {
  struct remote *R;
  FILE *f;
  long long have, total;
  int status_checked, failed_status;
  struct resp err; /* the body of an error answer */
  double last_progress;
  const char *name;
};

static size_t dl_write(char *p, size_t sz, size_t nm, void *arg) {
  struct dl *d = arg;
  size_t n = sz * nm;
  if (!d->status_checked) {
    long st = 0;
    curl_easy_getinfo(d->R->c, CURLINFO_RESPONSE_CODE, &st);
    d->status_checked = 1;
    if (st == 200 && d->have > 0) { /* the file changed (If-Range): start again */
      if (fflush(d->f) || ftruncate(fileno(d->f), 0) || fseek(d->f, 0, SEEK_SET)) return 0;
      d->have = 0;
    } else if (st != 200 && st != 206) {
      d->failed_status = 1;
    }
  }
  if (d->failed_status) return body_cb(p, sz, nm, &d->err);
  if (fwrite(p, 1, n, d->f) != n) return 0;
  d->have += (long long)n;
  return n;
}

static int dl_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  struct dl *d = arg;
  (void)dn;
  (void)ut;
  (void)un;
  if (stop_flag) return 1;
  double t = now_s();
  if (dt > 0 && d->total <= 0) d->total = d->have + (long long)(dt - dn); /* (dt: this request's) */
  if (!d->R->quiet && t - d->last_progress >= 1 && !d->failed_status && d->total > 0) {
    d->last_progress = t;
    fprintf(stderr, "etwd remote: downloading %s: %lld of %lld bytes\n", d->name, d->have, d->total);
  }
  return 0;
}

/* GET @path into @out (via @out.part), resuming with Range + If-Range after a broken
 * connection (up to 5 times; a changed file, answered with 200, starts again from 0). */
static int download(struct remote *R, const char *what, const char *path, const char *out) {
  char part[4200];
  snprintf(part, sizeof part, "%s.part", out);
  struct dl d;
  memset(&d, 0, sizeof d);
  d.R = R;
  d.name = out;
  d.f = fopen(part, "wb");
  if (!d.f) {
    say("%s: cannot write %s: %s", what, part, strerror(errno));
    return RX_LOCAL;
  }
  char etag[160] = "", dwhat[64];
  snprintf(dwhat, sizeof dwhat, "%s: download", what);
  int rc = RX_CONNECT;
  for (int attempt = 0; attempt < 6 && !stop_flag; attempt++) {
    struct curl_slist *h = NULL;
    struct resp hdr;
    memset(&hdr, 0, sizeof hdr);
    setup(R, "GET", path, &h);
    char range[64], ifr[200];
    if (d.have > 0 && etag[0]) {
      snprintf(range, sizeof range, "Range: bytes=%lld-", d.have);
      snprintf(ifr, sizeof ifr, "If-Range: %s", etag);
      h = curl_slist_append(h, range);
      h = curl_slist_append(h, ifr);
    } else if (d.have > 0) { /* no validator: a range could mix two versions of the file */
      if (fflush(d.f) || ftruncate(fileno(d.f), 0) || fseek(d.f, 0, SEEK_SET)) break;
      d.have = 0;
    }
    curl_easy_setopt(R->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(R->c, CURLOPT_WRITEFUNCTION, dl_write);
    curl_easy_setopt(R->c, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(R->c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(R->c, CURLOPT_HEADERDATA, &hdr);
    curl_easy_setopt(R->c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(R->c, CURLOPT_XFERINFOFUNCTION, dl_progress);
    curl_easy_setopt(R->c, CURLOPT_XFERINFODATA, &d);
    curl_easy_setopt(R->c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer is a broken one */
    curl_easy_setopt(R->c, CURLOPT_LOW_SPEED_TIME, 60L);
    d.status_checked = d.failed_status = 0;
    long long before = d.have;
    CURLcode e = curl_easy_perform(R->c);
    curl_slist_free_all(h);
    curl_easy_getinfo(R->c, CURLINFO_RESPONSE_CODE, &hdr.status);
    if (hdr.etag[0]) snprintf(etag, sizeof etag, "%s", hdr.etag);
    if (d.failed_status) {
      d.err.status = hdr.status;
      rc = status_error(&d.err, dwhat);
      break;
    }
    if (!e) {
      rc = RX_OK;
      break;
    }
    if (e == CURLE_ABORTED_BY_CALLBACK && stop_flag) {
      say("%s: download interrupted after %lld bytes (%s removed)", what, d.have, part);
      rc = RX_LOCAL;
      break;
    }
    rc = transport_error(R, e, dwhat);
    if (rc == RX_TLS || rc == RX_USAGE || rc == RX_LOCAL || stop_flag) break;
    if (!R->quiet) say("%s: download broken after %lld bytes; resuming (attempt %d of 5)", what, d.have, attempt + 1);
    if (d.have == before) sleep_ms(1000);
  }
  free(d.err.body);
  if (fclose(d.f) && !rc) {
    say("%s: cannot write %s: %s", what, part, strerror(errno));
    rc = RX_LOCAL;
  }
  if (!rc && rename(part, out)) {
    say("%s: cannot rename %s to %s: %s", what, part, out, strerror(errno));
    rc = RX_LOCAL;
  }
  if (!rc && !R->quiet) say("%s: %s: %lld bytes", what, out, d.have);
  if (rc) unlink(part);
  return rc;
}

static int session_state(struct remote *R, long id, char *state, size_t n, double *events, char *msg,
                         size_t mn) {
  char path[64];
  snprintf(path, sizeof path, "/api/v1/sessions/%ld", id);
  int rc;
  cJSON *j = call_json(R, "GET", path, NULL, "record: session state", &rc);
  if (!j) return rc;
  snprintf(state, n, "%s", jstr(j, "state"));
  snprintf(msg, mn, "%s", jstr(j, "message"));
  *events = events_read(cJSON_GetObjectItem(j, "stats"));
  cJSON_Delete(j);
  return RX_OK;
}

static int is_live(const char *state) {
  return !strcmp(state, "running") || !strcmp(state, "pending") || !strcmp(state, "armed");
}

static int cmd_record(struct remote *R, int n, char **provs, double dur, const char *out, int keep) {
  char err[400];
  char *spec = etwd_remote_spec(n, provs, "file", dur, err, sizeof err);
  if (!spec) {
    say("record: %s", err);
    return RX_USAGE;
  }
  struct resp r;
  int rc = request(R, "POST", "/api/v1/sessions", spec, &r, "record: create session");
  int server_stops = 1;
  if (!rc && r.status == 400 && r.body && strstr(r.body, "duration_s")) { /* an older server */
    free(r.body);
    free(spec);
    server_stops = 0;
    spec = etwd_remote_spec(n, provs, "file", 0, err, sizeof err);
    rc = request(R, "POST", "/api/v1/sessions", spec, &r, "record: create session");
  }
  free(spec);
  if (!rc) rc = status_error(&r, "record: create session");
  cJSON *j = rc ? NULL : cJSON_Parse(r.body ? r.body : "");
  free(r.body);
  if (rc) return rc;
  long id = (long)jnum(j, "id");
  cJSON_Delete(j);
  if (id <= 0) {
    say("record: the server's answer has no session id");
    return RX_SERVER;
  }
  if (!R->quiet) say("record: session %ld recording for %g s%s", id, dur, server_stops ? "" : " (stopped by this client)");
  /* wait: the server stops a session with duration_s itself; else (or if it is late, or on
   * Ctrl-C) this client stops it */
  double t0 = now_s(), last = t0, events = 0;
  char state[32] = "running", msg[300] = "";
  while (is_live(state)) {
    double t = now_s();
    if (stop_flag || (!server_stops && t - t0 >= dur) || t - t0 >= dur + 30) {
      if (server_stops && !stop_flag) say("record: session %ld still %s %g s after its duration; stopping it", id, state, t - t0);
      char path[64];
      snprintf(path, sizeof path, "%ld", id);
      int quiet = R->quiet;
      R->quiet = 1;
      stop_flag = 0; /* let the stop and the download go through */
      rc = cmd_action(R, "record: stop", path, "stop", NULL, NULL, NULL);
      R->quiet = quiet;
      if (rc) return rc;
      if (server_stops && t - t0 >= dur + 30) return RX_TIMEOUT;
      break;
    }
    sleep_ms(200);
    rc = session_state(R, id, state, sizeof state, &events, msg, sizeof msg);
    if (rc) return rc;
    if (!R->quiet && now_s() - last >= 1) {
      last = now_s();
      say("record: session %ld %s, %.0f s, %.0f events", id, state, last - t0, events);
    }
  }
  if (!strcmp(state, "failed")) {
    say("record: session %ld failed: %s", id, msg[0] ? msg : "(no message)");
    return RX_SERVER;
  }
  char path[96];
  snprintf(path, sizeof path, "/api/v1/sessions/%ld/file", id);
  rc = download(R, "record", path, out);
  if (!rc && !keep) {
    snprintf(path, sizeof path, "/api/v1/sessions/%ld", id);
    struct resp d;
    if (!request(R, "DELETE", path, NULL, &d, "record: delete session")) status_error(&d, "record: delete session");
    free(d.body);
  } else if (!rc && !R->quiet) {
    say("record: session %ld kept on the server", id);
  }
  return rc;
}

/* snapshot ID [-o FILE]: a flight session's buffers into a new recording on the server; its
 * name, size and URL on stdout (--json: the server's answer), and with -o the download. */
static int cmd_snapshot(struct remote *R, const char *id_s, const char *out) {
  char *body = NULL;
  int rc = cmd_action(R, "snapshot", id_s, "snapshot", NULL, "snapshots", &body);
  if (rc) return rc;
  cJSON *j = cJSON_Parse(body ? body : "");
  const char *url = jstr(j, "recording_url");
  if (!url[0] || strncmp(url, "/api/v1/recordings/", 19)) {
    say("snapshot: the server's answer names no recording: %.200s", body ? body : "");
    rc = RX_SERVER;
  } else if (R->json) {
    printf("%s\n", body);
  } else {
    header_line(R, "name\tsize\turl");
    printf("%s\t%.0f\t%s\n", jstr(j, "recording_name"), jnum(j, "size"), url);
  }
  fflush(stdout);
  if (!rc && out) rc = download(R, "snapshot", url, out);
  cJSON_Delete(j);
  free(body);
  return rc;
}

/* ---- recordings, get, delete-recording, delete */

/* "created": the UTC time a recording began, from its name ("20261129T113403Z-s3[-N]", the
 * server's record_dir_claim), as 2026-11-29T11:34:03Z; "-" for a name of another form. */
static void rec_created(const char *name, char *out, size_t n) {
  int ok = strlen(name) >= 16 && name[8] == 'T' && name[15] == 'Z';
  for (int i = 0; ok && i < 15; i++) ok = i == 8 || (name[i] >= '0' && name[i] <= '9');
  if (!ok) snprintf(out, n, "-");
  else
    snprintf(out, n, "%.4s-%.2s-%.2sT%.2s:%.2s:%.2sZ", name, name + 4, name + 6, name + 9, name + 11, name + 13);
}

static int cmd_recordings(struct remote *R) {
  int rc;
  cJSON *j = call_json(R, "GET", "/api/v1/recordings", NULL, "recordings", &rc);
  if (!j) return rc;
  if (R->json) {
    print_json(j);
  } else {
    const cJSON *r;
    header_line(R, "name\tsize\tsession\tcreated");
    cJSON_ArrayForEach(r, list_of(j, "recordings")) {
      char created[32], sess[24] = "-";
      const cJSON *s = cJSON_GetObjectItem(r, "session");
      if (cJSON_IsNumber(s)) snprintf(sess, sizeof sess, "%.0f", s->valuedouble);
      rec_created(jstr(r, "name"), created, sizeof created);
      printf("%s\t%.0f\t%s\t%s\n", jstr(r, "name"), jnum(r, "size"), sess, created);
    }
  }
  cJSON_Delete(j);
  return RX_OK;
}

/* /api/v1/recordings/NAME (the name escaped: the server says 404 to a name that is not one) */
static void rec_path(struct remote *R, const char *name, char *path, size_t n) {
  char *e = curl_easy_escape(R->c, name, 0);
  snprintf(path, n, "/api/v1/recordings/%s", e ? e : "");
  curl_free(e);
}

static int cmd_get(struct remote *R, const char *name, const char *out) {
  char path[1200];
  rec_path(R, name, path, sizeof path);
  return download(R, "get", path, out);
}

/* DELETE @path; "WHAT: LABEL: deleted" on stderr unless --quiet */
static int cmd_delete(struct remote *R, const char *what, const char *path, const char *label) {
  struct resp r;
  int rc = request(R, "DELETE", path, NULL, &r, what);
  if (!rc) rc = status_error(&r, what);
  free(r.body);
  if (!rc && !R->quiet) say("%s: %s: deleted", what, label);
  return rc;
}

/* ---- stream: ndjson events to stdout (or CSV) */

/* csv: 1 = rows written here from ndjson (a server without ?format=csv), 2 = the server's own
 * CSV (?format=csv), copied to stdout as it comes; its trailer (the rows written, the events
 * its Gap records reported) is kept in trl[] for stderr */
struct strm {
  CURL *c;
  long long limit, count, too_long;
  int csv, header_done, status_checked, failed, closed; /* closed: stdout's reader went away */
  char *line;
  size_t len, cap;
  struct resp err; /* the body of an error answer */
  char trl[3][200]; /* Etwd-Events, Etwd-Dropped, Etwd-Dropped-Layers (values; "" = not seen) */
};

/* a quoted cell (etwcore/evcsv.h: '"' doubled, a formula's text after a ') to stdout */
static void csv_cell(const char *s) {
  struct etw_jw w;
  etw_jw_init(&w, 0);
  etw_csv_cell(&w, s, strlen(s));
  fwrite(etw_jw_cstr(&w), 1, w.len, stdout);
  etw_jw_free(&w);
}

static void csv_num(const cJSON *v) {
  if (cJSON_IsNumber(v)) printf("%.0f", v->valuedouble);
}

static void csv_event(struct strm *st, const char *line) {
  cJSON *j = cJSON_Parse(line);
  if (!j) return;
  if (!st->header_done) {
    puts("seq,TimeCreated,Provider,EventName,EventID,Level,ProcessID,ThreadID,ProcessName,Host,ProcessorID,EventData");
    st->header_done = 1;
  }
  const cJSON *sys = cJSON_GetObjectItem(j, "System"), *ex = cJSON_GetObjectItem(sys, "Execution");
  csv_num(cJSON_GetObjectItem(j, "seq"));
  printf(",%s,", jstr(cJSON_GetObjectItem(sys, "TimeCreated"), "SystemTime")[0]
                     ? jstr(cJSON_GetObjectItem(sys, "TimeCreated"), "SystemTime")
                     : jstr(sys, "TimeCreated"));
  csv_cell(jstr(cJSON_GetObjectItem(sys, "Provider"), "Name"));
  putchar(',');
  csv_cell(jstr(sys, "EventName"));
  putchar(',');
  csv_num(cJSON_GetObjectItem(sys, "EventID"));
  putchar(',');
  csv_num(cJSON_GetObjectItem(sys, "Level"));
  putchar(',');
  csv_num(cJSON_GetObjectItem(ex, "ProcessID"));
  putchar(',');
  csv_num(cJSON_GetObjectItem(ex, "ThreadID"));
  putchar(',');
  if (cJSON_IsString(cJSON_GetObjectItem(ex, "ProcessName"))) csv_cell(jstr(ex, "ProcessName"));
  putchar(',');
  if (cJSON_IsString(cJSON_GetObjectItem(sys, "Host"))) csv_cell(jstr(sys, "Host")); /* empty: none */
  putchar(',');
  csv_num(cJSON_GetObjectItem(ex, "ProcessorID"));
  putchar(',');
  const cJSON *data = cJSON_GetObjectItem(j, "EventData");
  char *t = data ? cJSON_PrintUnformatted(data) : NULL;
  csv_cell(t ? t : "");
  free(t);
  putchar('\n');
  cJSON_Delete(j);
}

/* One complete line: an event goes to stdout, a heartbeat nowhere, any other record (a loss
 * notice) to stderr. */
static void stream_line(struct strm *st, char *line, size_t n) {
  if (!n || (st->limit && st->count >= st->limit)) return;
  line[n] = 0;
  if (!strncmp(line, "{\"seq\":", 7)) {
    st->count++;
    if (st->csv) csv_event(st, line);
    else {
      fwrite(line, 1, n, stdout);
      putchar('\n');
    }
  } else if (strncmp(line, "{\"Heartbeat\":", 13)) {
    say("stream: %s", line);
  }
}

static size_t stream_write(char *p, size_t sz, size_t nm, void *arg) {
  struct strm *st = arg;
  size_t n = sz * nm;
  if (!st->status_checked) {
    long status = 0;
    curl_easy_getinfo(st->c, CURLINFO_RESPONSE_CODE, &status);
    st->status_checked = 1;
    st->failed = status != 200;
  }
  if (st->failed) return body_cb(p, sz, nm, &st->err);
  if (st->csv == 2) { /* the server's CSV, byte for byte (--limit: the server's ?limit) */
    if (fwrite(p, 1, n, stdout) != n || fflush(stdout)) {
      st->closed = 1;
      return 0;
    }
    return n;
  }
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '\n') {
      if (st->len <= MAX_LINE) stream_line(st, st->line, st->len);
      st->len = 0;
      continue;
    }
    if (st->len >= MAX_LINE) { /* a line above the maximum: dropped and counted */
      if (st->len == MAX_LINE) st->too_long++;
      st->len = MAX_LINE + 1;
      continue;
    }
    if (st->len + 2 > st->cap) {
      size_t cap = st->cap ? st->cap * 2 : 65536;
      char *b = realloc(st->line, cap);
      if (!b) return 0;
      st->line = b;
      st->cap = cap;
    }
    st->line[st->len++] = p[i];
  }
  if (fflush(stdout) || ferror(stdout)) { /* e.g. `| head`: the stream ends as if by --limit */
    st->closed = 1;
    return 0;
  }
  return n;
}

static int stream_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  struct strm *st = arg;
  (void)a, (void)b, (void)c, (void)d;
  return stop_flag || (st->limit && st->count >= st->limit);
}

/* the response's header lines; with ?format=csv the chunked body's trailer comes here too
 * (libcurl passes trailers to the header callback): its Etwd-* values go into st->trl */
static size_t stream_header(char *p, size_t sz, size_t nm, void *arg) {
  struct strm *st = arg;
  size_t n = sz * nm;
  static const char *const names[3] = {"Etwd-Events:", "Etwd-Dropped:", "Etwd-Dropped-Layers:"};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(names[i]);
    if (n <= k || strncasecmp(p, names[i], k)) continue;
    const char *v = p + k;
    while (*v == ' ') v++;
    size_t l = (size_t)(p + n - v);
    while (l && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == ' ')) l--;
    snprintf(st->trl[i], sizeof st->trl[i], "%.*s", (int)l, v);
  }
  return n;
}

/* GET @path as a stream into @st (its csv mode chosen); the transfer's outcome as an exit code,
 * the status in st->err.status, an error answer's body in st->err.body (said by the caller) */
static int stream_get(struct remote *R, const char *path, struct strm *st, CURLcode *ecode) {
  struct curl_slist *h = NULL;
  setup(R, "GET", path, &h);
  /* (an explicit format= decides on a server that has it; an older one takes only ndjson) */
  h = curl_slist_append(h, st->csv == 2 ? "Accept: text/csv, application/x-ndjson;q=0.5" : "Accept: application/x-ndjson");
  curl_easy_setopt(R->c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(R->c, CURLOPT_WRITEFUNCTION, stream_write);
  curl_easy_setopt(R->c, CURLOPT_WRITEDATA, st);
  curl_easy_setopt(R->c, CURLOPT_HEADERFUNCTION, stream_header);
  curl_easy_setopt(R->c, CURLOPT_HEADERDATA, st);
  curl_easy_setopt(R->c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(R->c, CURLOPT_XFERINFOFUNCTION, stream_progress);
  curl_easy_setopt(R->c, CURLOPT_XFERINFODATA, st);
  curl_easy_setopt(R->c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* idle streams get a heartbeat every 15 s: */
  curl_easy_setopt(R->c, CURLOPT_LOW_SPEED_TIME, 60L); /* a minute of nothing is a dead connection */
  /* an error answer is small JSON, not a stream: look at the status before the body */
  *ecode = curl_easy_perform(R->c);
  curl_slist_free_all(h);
  long status = 0;
  curl_easy_getinfo(R->c, CURLINFO_RESPONSE_CODE, &status);
  st->err.status = status;
  if (status && status != 200) return RX_REFUSED;
  if (*ecode && *ecode != CURLE_ABORTED_BY_CALLBACK && !st->closed) return transport_error(R, *ecode, "stream");
  return RX_OK;
}

/* a 400 naming the query parameter `format`: a server older than ?format=csv */
static int refused_format(const struct strm *st) {
  if (st->err.status != 400 || !st->err.body) return 0;
  cJSON *j = cJSON_Parse(st->err.body);
  const cJSON *f = j ? cJSON_GetObjectItem(j, "field") : NULL, *d = j ? cJSON_GetObjectItem(j, "detail") : NULL;
  int r = (cJSON_IsString(f) && !strcmp(f->valuestring, "format")) ||
          (!cJSON_IsString(f) && cJSON_IsString(d) && strstr(d->valuestring, "format"));
  cJSON_Delete(j);
  return r;
}

static int cmd_stream(struct remote *R, int n, char **provs, long session, char **filters, int nfilt,
                      int csv, long long limit) {
  long id = session;
  int rc = RX_OK;
  if (id <= 0) {
    char err[400];
    char *spec = etwd_remote_spec(n, provs, "realtime", 0, err, sizeof err);
    if (!spec) {
      say("stream: %s", err);
      return RX_USAGE;
    }
    cJSON *j = call_json(R, "POST", "/api/v1/sessions", spec, "stream: create session", &rc);
    free(spec);
    if (!j) return rc;
    id = (long)jnum(j, "id");
    cJSON_Delete(j);
    if (!R->quiet) say("stream: session %ld created (deleted when the stream ends)", id);
  }
  char path[2048];
  int off = snprintf(path, sizeof path, "/api/v1/sessions/%ld/events", id);
  for (int i = 0; i < nfilt && off < (int)sizeof path; i++) {
    char *eq = strchr(filters[i], '=');
    *eq = 0;
    char *k = curl_easy_escape(R->c, filters[i], 0), *v = curl_easy_escape(R->c, eq + 1, 0);
    *eq = '=';
    off += snprintf(path + off, sizeof path - (size_t)off, "%c%s=%s", i ? '&' : '?', k ? k : "", v ? v : "");
    curl_free(k);
    curl_free(v);
  }
  /* --format csv: the server's own rows (?format=csv, with --limit as its ?limit) */
  int qoff = off;
  if (csv && off < (int)sizeof path)
    off += snprintf(path + off, sizeof path - (size_t)off, "%cformat=csv", nfilt ? '&' : '?');
  if (csv && limit && off < (int)sizeof path)
    off += snprintf(path + off, sizeof path - (size_t)off, "&limit=%lld", limit);
  struct strm st;
  memset(&st, 0, sizeof st);
  st.csv = csv ? 2 : 0;
  st.limit = csv ? 0 : limit;
  st.c = R->c;
  CURLcode e = CURLE_OK;
  rc = stream_get(R, path, &st, &e);
  if (csv && refused_format(&st)) { /* an older server: the rows are written here */
    say("stream: the server has no ?format=csv (an older etwd): the CSV is written here from its "
        "ndjson, with this client's columns");
    path[qoff] = 0;
    free(st.err.body);
    memset(&st, 0, sizeof st);
    st.csv = 1;
    st.limit = limit;
    st.c = R->c;
    rc = stream_get(R, path, &st, &e);
  }
  if (st.err.status && st.err.status != 200) rc = status_error(&st.err, "stream");
  if (st.csv == 2 && !rc) {
    if (st.trl[0][0]) st.count = strtoll(st.trl[0], NULL, 10);
    if (st.trl[1][0] && (strcmp(st.trl[1], "0") || !R->quiet)) /* loss is said even with --quiet */
      say("stream: Etwd-Dropped: %s (%s)%s", st.trl[1], st.trl[2][0] ? st.trl[2] : "?",
          strcmp(st.trl[1], "0") ? ": events the server dropped for this stream" : "");
    else if (!st.trl[1][0] && !st.closed && !stop_flag)
      say("stream: the server's trailer (Etwd-Dropped) did not come: the stream was cut");
  }
  if (st.too_long) say("stream: %lld lines above %u bytes were dropped", st.too_long, MAX_LINE);
  free(st.line);
  free(st.err.body);
  if (session <= 0 && rc != RX_TLS && rc != RX_CONNECT) {
    snprintf(path, sizeof path, "/api/v1/sessions/%ld", id);
    struct resp d;
    stop_flag = 0;
    if (!request(R, "DELETE", path, NULL, &d, "stream: delete session")) status_error(&d, "stream: delete session");
    free(d.body);
  }
  if (!R->quiet) say("stream: %lld events", st.count);
  return rc;
}

/* ---- arguments */

static int read_token(const char *path, char *tok, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    say("cannot read the token file %s: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  tok[0] = 0;
  while (fgets(line, sizeof line, f)) {
    char *save = NULL, *last = NULL;
    if (line[0] == '#') continue;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) last = t;
    if (last && strlen(last) < n) {
      snprintf(tok, n, "%s", last);
      break;
    }
  }
  fclose(f);
  if (!tok[0]) say("the token file %s holds no token", path);
  return tok[0] ? 0 : -1;
}

/* The command line: global options, the command, its arguments. */
struct cli {
  const char *url, *token_file, *fp, *out, *fmt, *cmd;
  double dur;
  long session;
  long long limit;
  int keep, npos, nfilt, dry, help;
  char **pos, **filt; /* pos[0] = the command */
};

/* One option with a value; 0, or RX_USAGE (said). */
static int option_value(struct cli *o, struct remote *R, const char *a, char *v) {
  if (!strcmp(a, "--url")) o->url = v;
  else if (!strcmp(a, "--token-file")) o->token_file = v;
  else if (!strcmp(a, "--fingerprint")) o->fp = v;
  else if (!strcmp(a, "--cacert")) R->cacert = v;
  else if (!strcmp(a, "-o") || !strcmp(a, "--output")) o->out = v;
  else if (!strcmp(a, "--format")) o->fmt = v;
  else if (!strcmp(a, "--connect-timeout")) R->connect_timeout = atol(v) > 0 ? atol(v) : 10;
  else if (!strcmp(a, "--duration")) {
    if ((o->dur = parse_duration(v)) <= 0) {
      say("--duration %s: want seconds, e.g. 10, 10s, 500ms, 2m", v);
      return RX_USAGE;
    }
  } else if (!strcmp(a, "--session")) {
    if ((o->session = parse_id(v)) < 0) {
      say("--session %s: want a session id", v);
      return RX_USAGE;
    }
  } else if (!strcmp(a, "--limit")) {
    char *end;
    o->limit = strtoll(v, &end, 10);
    if (*end || o->limit <= 0) {
      say("--limit %s: want a positive number of events", v);
      return RX_USAGE;
    }
  } else if (!strcmp(a, "--filter")) {
    if (!strchr(v, '=')) {
      say("--filter %s: want NAME=VALUE (a stream parameter: provider, event, pid, level, …)", v);
      return RX_USAGE;
    }
    o->filt[o->nfilt++] = v;
  } else {
    say("unknown option %s", a);
    return RX_USAGE;
  }
  return 0;
}

static int parse_cli(struct cli *o, struct remote *R, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) o->help = 1;
    else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) R->quiet = 1;
    else if (!strcmp(a, "--json")) R->json = 1;
    else if (!strcmp(a, "--header")) R->header = 1;
    else if (!strcmp(a, "--keep")) o->keep = 1;
    else if (!strcmp(a, "--dry-run")) o->dry = 1;
    else if (a[0] != '-' || !a[1]) o->pos[o->npos++] = argv[i];
    else if (i + 1 >= argc) {
      say("option %s needs a value", a);
      return RX_USAGE;
    } else if (option_value(o, R, a, argv[++i])) {
      return RX_USAGE;
    }
  }
  o->cmd = o->npos ? o->pos[0] : NULL;
  if (o->help) return 0;
  if (!o->cmd) {
    say("no command");
    return RX_USAGE;
  }
  return 0;
}

/* The checks that need a server (after --dry-run); fills R's URL and pin. */
static int check_cli(struct cli *o, struct remote *R) {
  const char *cmd = o->cmd;
  if (!o->url || !o->token_file) {
    say("--url and --token-file are required");
    return RX_USAGE;
  }
  if (o->fp && R->cacert) {
    say("give --fingerprint or --cacert, not both");
    return RX_USAGE;
  }
  if (o->fp && parse_fingerprint(o->fp, R->pin)) {
    say("--fingerprint %s: want the 64 hex digits of a SHA-256 (colons allowed), as etwd prints at start", o->fp);
    return RX_USAGE;
  }
  R->pinned = o->fp != NULL;
  if (strncmp(o->url, "https://", 8) && strncmp(o->url, "http://", 7)) {
    say("--url %s: want https://HOST:PORT", o->url);
    return RX_USAGE;
  }
  if ((o->fp || R->cacert) && strncmp(o->url, "https://", 8)) {
    say("--fingerprint and --cacert need an https:// URL");
    return RX_USAGE;
  }
  snprintf(R->url, sizeof R->url, "%s", o->url);
  for (size_t l = strlen(R->url); l && R->url[l - 1] == '/'; l--) R->url[l - 1] = 0;
  if (strcmp(o->fmt, "ndjson") && strcmp(o->fmt, "csv")) {
    say("--format %s: ndjson or csv", o->fmt);
    return RX_USAGE;
  }
  /* the number of words with the command (< 0: other rules, below) */
  int by_name = !strcmp(cmd, "get") || !strcmp(cmd, "delete-recording");
  int want = !strcmp(cmd, "providers") ? -2 : !strcmp(cmd, "sessions") || !strcmp(cmd, "recordings") ? 1
           : !strcmp(cmd, "stop") || !strcmp(cmd, "snapshot") || !strcmp(cmd, "delete") || by_name ? 2
           : !strcmp(cmd, "marker") ? 3 : !strcmp(cmd, "record") ? -1 : !strcmp(cmd, "stream") ? 0 : -9;
  if (want == -9) {
    say("unknown command \"%s\"", cmd);
    return RX_USAGE;
  }
  const char *why = NULL; /* what is wrong, in the words of the usage */
  if (by_name && o->npos != 2) why = "want a recording NAME (as `recordings` lists them)";
  else if (!strcmp(cmd, "get") && !o->out) why = "-o FILE is required (where the recording is downloaded to)";
  else if (want == -1 && o->npos < 2) why = "give at least one PROVIDER";
  else if (want == -1 && !o->out) why = "-o FILE is required (where the recording is downloaded to)";
  else if (want == 0 && o->npos < 2 && o->session <= 0) why = "give PROVIDER... or --session ID";
  else if (want == 0 && o->npos >= 2 && o->session > 0) why = "give PROVIDER... or --session ID, not both";
  else if (want == -2 && o->npos > 2) why = "at most one QUERY";
  else if (want > 0 && o->npos != want)
    why = want == 1 ? "takes no arguments" : want == 2 ? "want a session ID" : "want a session ID and a TEXT";
  if (why) {
    say("%s: %s", cmd, why);
    return RX_USAGE;
  }
  return 0;
}

/* --dry-run: the spec the PROVIDER arguments make, on stdout. */
static int dry_run(const struct cli *o) {
  char err[400];
  int rec = !strcmp(o->cmd, "record");
  char *spec = etwd_remote_spec(o->npos - 1, o->pos + 1, rec ? "file" : "realtime", rec ? o->dur : 0, err, sizeof err);
  if (spec) printf("%s\n", spec);
  else say("%s: %s", o->cmd, err);
  free(spec);
  return spec ? RX_OK : RX_USAGE;
}

static int dispatch(struct cli *o, struct remote *R) {
  const char *cmd = o->cmd;
  if (!strcmp(cmd, "providers")) return cmd_providers(R, o->npos > 1 ? o->pos[1] : NULL);
  if (!strcmp(cmd, "sessions")) return cmd_sessions(R);
  if (!strcmp(cmd, "stop")) return cmd_action(R, "stop", o->pos[1], "stop", NULL, NULL, NULL);
  if (!strcmp(cmd, "snapshot")) return cmd_snapshot(R, o->pos[1], o->out);
  if (!strcmp(cmd, "recordings")) return cmd_recordings(R);
  if (!strcmp(cmd, "get")) return cmd_get(R, o->pos[1], o->out);
  if (!strcmp(cmd, "delete-recording")) {
    char path[1200];
    rec_path(R, o->pos[1], path, sizeof path);
    return cmd_delete(R, "delete-recording", path, o->pos[1]);
  }
  if (!strcmp(cmd, "delete")) {
    char path[64], label[40];
    long id = parse_id(o->pos[1]);
    if (id < 0) {
      say("delete: \"%s\" is not a session id", o->pos[1]);
      return RX_USAGE;
    }
    snprintf(path, sizeof path, "/api/v1/sessions/%ld", id);
    snprintf(label, sizeof label, "session %ld", id);
    return cmd_delete(R, "delete", path, label);
  }
  if (!strcmp(cmd, "marker")) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "text", o->pos[2]);
    char *body = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    int rc = cmd_action(R, "marker", o->pos[1], "markers", body, "markers", NULL);
    free(body);
    return rc;
  }
  if (!strcmp(cmd, "record")) return cmd_record(R, o->npos - 1, o->pos + 1, o->dur, o->out, o->keep);
  return cmd_stream(R, o->npos - 1, o->pos + 1, o->session, o->filt, o->nfilt, !strcmp(o->fmt, "csv"), o->limit);
}

int etwd_remote_main(int argc, char **argv) {
  struct remote R;
  memset(&R, 0, sizeof R);
  R.connect_timeout = 10;
  struct cli o;
  memset(&o, 0, sizeof o);
  o.fmt = "ndjson";
  o.dur = 10;
  o.pos = calloc((size_t)argc + 1, sizeof *o.pos);
  o.filt = calloc((size_t)argc + 1, sizeof *o.filt);
  int rc = !o.pos || !o.filt ? RX_LOCAL : parse_cli(&o, &R, argc, argv);
  if (!rc && o.help) {
    usage(stdout);
  } else if (!rc && o.dry && (!strcmp(o.cmd, "record") || !strcmp(o.cmd, "stream")) && o.npos > 1) {
    rc = dry_run(&o);
  } else if (!rc && !(rc = check_cli(&o, &R))) {
    rc = RX_LOCAL;
    if (read_token(o.token_file, R.token, sizeof R.token)) goto out;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) || !(R.c = curl_easy_init())) {
      say("cannot initialise libcurl");
      goto out;
    }
    g_remote = &R;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = dispatch(&o, &R);
    curl_easy_cleanup(R.c);
    curl_global_cleanup();
  }
  if (rc == RX_USAGE) fputs("(etwd remote --help shows the usage)\n", stderr);
out:
  free(o.pos);
  free(o.filt);
  return rc;
}
