/* http.c — response helpers: every response is built in memory and sent with ONE mg_write
 * (a second small write costs a 40 ms Nagle/delayed-ACK stall), problem+json errors, the ONE
 * table from core error codes to HTTP statuses, query parsing and ranged file downloads. */
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

/* The one table (problem.h): the status of each core error, and the HTTP layer's own rows. */
static const short core_status[ETW_E__COUNT] = {
#define CORE_STATUS_(e, st) [ETW_E_##e] = st,
    ETWD_CORE_STATUS(CORE_STATUS_)
#undef CORE_STATUS_
};
enum { /* a row per core error: with -Woverride-init (-Wextra) against duplicates, all of them */
#define CORE_ROW_(e, st) CORE_ROW_##e,
  ETWD_CORE_STATUS(CORE_ROW_)
#undef CORE_ROW_
  CORE_ROWS
};
_Static_assert((int)CORE_ROWS == (int)ETW_E__COUNT, "ETWD_CORE_STATUS must give every core error a status");

static const struct etwd_prob_info http_rows[] = {
#define HTTP_ROW_(e, st, n, t) {st, n, t},
    ETWD_HTTP_PROBLEMS(HTTP_ROW_)
#undef HTTP_ROW_
};
_Static_assert(sizeof http_rows / sizeof http_rows[0] == (size_t)((int)ETWD_P__COUNT - (int)ETW_E__COUNT),
               "one row per problem");

struct etwd_prob_info etwd_prob_info(enum etwd_prob p) {
  if ((unsigned)p < ETW_E__COUNT) {
    struct etwd_prob_info i = {core_status[p], etw_err_name((enum etw_err)p), etw_err_msg((enum etw_err)p)};
    return i;
  }
  if ((unsigned)p < ETWD_P__COUNT) return http_rows[p - ETW_E__COUNT];
  return etwd_prob_info(ETWD_P_INTERNAL);
}

enum etwd_prob etwd_prob_for_status(int status) {
  if (status == 404) return ETWD_P_NOT_FOUND;
  if (status == 413) return ETWD_P_TOO_LARGE;
  for (int p = ETW_E__COUNT; p < ETWD_P__COUNT; p++) /* the first row of the HTTP layer's with it */
    if (http_rows[p - ETW_E__COUNT].status == status && (status < 500 || status == 501 || status == 505))
      return (enum etwd_prob)p;
  return status >= 400 && status < 500 ? ETWD_P_BAD_REQUEST : ETWD_P_INTERNAL;
}

int etwd_status_for(enum etw_err code) {
  return (unsigned)code < ETW_E__COUNT ? core_status[code] : 500;
}

const char *etwd_reason(int s) {
  switch (s) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

static const char common_headers[] =
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n";

/* CORS: a response to a request whose Origin is one given with --allow-origin grants that origin
 * (and says it varies by Origin); no other origin is ever granted. "" when nothing applies. */
static const char *cors_grant(struct mg_connection *c, char *out, size_t n) {
  const char *origin = mg_get_header(c, "Origin");
  struct etwd_server *s = mg_get_user_data(mg_get_context(c));
  out[0] = 0;
  for (int i = 0; origin && s && i < s->cfg->n_origins; i++)
    if (!strcasecmp(origin, s->cfg->origins[i])) {
      snprintf(out, n, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n", s->cfg->origins[i]);
      break;
    }
  return out;
}

const char *etwd_hsts(const struct mg_connection *c) {
  const struct mg_request_info *ri = mg_get_request_info(c);
  return ri && ri->is_ssl ? ETWD_HSTS_HEADER : "";
}

static void raw_reply(struct mg_connection *c, int status, const char *ctype, const char *body,
                      size_t len, const char *extra, size_t *out_bytes) {
  char head[2048], cors[320], clen[96] = "";
  if (status != 204) /* a 204 has neither body nor Content-Length (RFC 9110 8.6) */
    snprintf(clen, sizeof clen, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, len);
  else
    len = 0;
  int hn = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\n%s%s%s%s%s\r\n", status, etwd_reason(status),
                    clen, common_headers, etwd_hsts(c), cors_grant(c, cors, sizeof cors),
                    extra ? extra : "");
  if (hn < 0 || (size_t)hn >= sizeof head) hn = snprintf(head, sizeof head, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"), len = 0;
  const struct mg_request_info *ri = mg_get_request_info(c);
  int head_only = ri && ri->request_method && !strcmp(ri->request_method, "HEAD");
  size_t total = (size_t)hn + (head_only ? 0 : len);
  char stackbuf[16384];
  char *buf = total <= sizeof stackbuf ? stackbuf : malloc(total);
  if (!buf) {
    mg_write(c, head, (size_t)hn);
    if (!head_only) mg_write(c, body, len);
  } else {
    memcpy(buf, head, (size_t)hn);
    if (!head_only && len) memcpy(buf + hn, body, len);
    mg_write(c, buf, total);
    if (buf != stackbuf) free(buf);
  }
  if (out_bytes) *out_bytes = total;
}

void etwd_reply(struct etwd_req *r, int status, const char *ctype, const char *body, size_t len,
                const char *extra) {
  r->status = status;
  raw_reply(r->conn, status, ctype, body, len, extra, &r->bytes_out);
}

void etwd_reply_jw(struct etwd_req *r, int status, struct etw_jw *w, const char *extra) {
  if (w->err) {
    etwd_problem(r, ETWD_P_INTERNAL, "the response exceeded its maximum size", NULL, NULL);
    return;
  }
  etwd_reply(r, status, "application/json", w->buf ? w->buf : "", w->len, extra);
}

static void problem_body(struct etw_jw *w, const struct etwd_prob_info *p, const char *detail,
                         const char *field) {
  etw_jw_lit(w, "{\"type\":\"urn:etwd:problem:");
  etw_jw_lit(w, p->name);
  etw_jw_lit(w, "\",\"title\":");
  etw_jw_cs(w, p->title);
  etw_jw_lit(w, ",\"status\":");
  etw_jw_u64(w, (uint64_t)p->status);
  if (detail && *detail) {
    etw_jw_lit(w, ",\"detail\":");
    etw_jw_cs(w, detail);
  }
  if (field && *field) {
    etw_jw_lit(w, ",\"field\":");
    etw_jw_cs(w, field);
  }
  etw_jw_ch(w, '}');
}

void etwd_problem(struct etwd_req *r, enum etwd_prob prob, const char *detail, const char *field,
                  const char *extra) {
  struct etwd_prob_info p = etwd_prob_info(prob);
  struct etw_jw w;
  etw_jw_init(&w, 16384);
  problem_body(&w, &p, detail, field);
  r->status = p.status;
  raw_reply(r->conn, p.status, "application/problem+json", etw_jw_cstr(&w), w.len, extra, &r->bytes_out);
  etw_jw_free(&w);
}

int etwd_problem_conn(struct mg_connection *c, enum etwd_prob prob, const char *detail, const char *extra) {
  struct etwd_prob_info p = etwd_prob_info(prob);
  struct etw_jw w;
  etw_jw_init(&w, 16384);
  problem_body(&w, &p, detail, NULL);
  raw_reply(c, p.status, "application/problem+json", etw_jw_cstr(&w), w.len, extra, NULL);
  etw_jw_free(&w);
  return p.status;
}

void etwd_fail(struct etwd_req *r, enum etw_err code, const struct etw_status *st) {
  const char *detail = st && st->msg[0] ? st->msg : etw_err_msg(code);
  etwd_problem(r, etwd_prob_of(code), detail, st ? st->field : NULL, NULL);
}

const char *etwd_header(const struct etwd_req *r, const char *name) {
  return mg_get_header(r->conn, name);
}

int etwd_query(const struct etwd_req *r, const char *name, char *out, size_t n) {
  const char *q = r->ri->query_string;
  if (!q) return -1;
  int len = mg_get_var(q, strlen(q), name, out, n);
  return len >= 0 ? 0 : -1;
}

/* one level of the JSON container stack etwd_json_find_nul keeps */
struct jlevel {
  char kind;    /* '{' or '[' */
  char has_key; /* object: the current member's name was read */
  unsigned idx; /* array index */
  char key[48]; /* object: the current member's name (its first bytes, raw) */
};

/* a string at @p (just after its opening quote): its end (after the closing quote, or the body's
 * end), the first 46 bytes of its raw text in @raw, whether it holds a NUL (raw or \u0000) */
static const char *json_string(const char *p, const char *end, char *raw, int *nul) {
  size_t n = 0;
  *nul = 0;
  while (p < end && *p != '"') {
    if (*p == 0) *nul = 1;
    if (*p == '\\' && p + 1 < end) {
      if (p[1] == 'u' && end - p >= 6 && !memcmp(p + 2, "0000", 4)) *nul = 1;
      if (n < 46) raw[n++] = *p;
      p++;
    }
    if (n < 46) raw[n++] = *p;
    p++;
  }
  raw[n] = 0;
  return p < end ? p + 1 : end;
}

/* the JSON pointer of the first @levels levels of @st into @ptr */
static void json_pointer(const struct jlevel *st, int levels, char *ptr, size_t n) {
  size_t o = 0;
  ptr[0] = 0;
  for (int i = 0; i < levels; i++) {
    int w = st[i].kind == '{' ? snprintf(ptr + o, n - o, "/%s", st[i].key)
                              : snprintf(ptr + o, n - o, "/%u", st[i].idx);
    if (w < 0 || (size_t)w >= n - o) return;
    o += (size_t)w;
  }
}

int etwd_json_find_nul(const char *buf, size_t len, char *ptr, size_t n) {
  enum { KEEP = 16 };
  struct jlevel st[KEEP];
  int depth = 0; /* containers open; the first KEEP are in st */
  const char *p = buf, *end = buf + len;
  ptr[0] = 0;
  while (p < end) {
    char c = *p++;
    struct jlevel *top = depth && depth <= KEEP ? &st[depth - 1] : NULL;
    if (c == '"') {
      char raw[48];
      int nul, is_key = top && top->kind == '{' && !top->has_key;
      p = json_string(p, end, raw, &nul);
      if (nul) {
        if (depth <= KEEP) json_pointer(st, is_key ? depth - 1 : depth, ptr, n);
        return 1;
      }
      if (is_key) top->has_key = 1, snprintf(top->key, sizeof top->key, "%s", raw);
    } else if (c == '{' || c == '[') {
      if (depth < KEEP) st[depth].kind = c, st[depth].has_key = 0, st[depth].idx = 0;
      depth++;
    } else if ((c == '}' || c == ']') && depth) {
      depth--;
    } else if (c == ',' && top) {
      top->idx++;
      top->has_key = 0;
    } else if (c == 0) {
      return 1; /* a raw NUL outside any string */
    }
  }
  return 0;
}

unsigned long long etwd_parse_id(const char *s) {
  if (!*s || strlen(s) > 18) return 0;
  unsigned long long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return 0;
    v = v * 10 + (unsigned)(*s - '0');
  }
  return v;
}

/* ---- downloads: validators, conditional requests (RFC 9110 §13) and one byte range (§14) */

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* days since 1970-01-01 of a proleptic Gregorian date (no timegm on every platform) */
static long long days_from_civil(long long y, unsigned m, unsigned d) {
  y -= m <= 2;
  long long era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (long long)doe - 719468;
}

/* IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") to Unix seconds; -1 if it is not one */
static int http_date_parse(const char *s, long long *t) {
  char wd[4], mon[4];
  int d, y, hh, mm, ss, n = 0;
  if (sscanf(s, "%3s, %2d %3s %4d %2d:%2d:%2d GMT%n", wd, &d, mon, &y, &hh, &mm, &ss, &n) != 7 ||
      n == 0 || s[n] != 0)
    return -1;
  unsigned m = 0;
  while (m < 12 && strcmp(mon, months[m])) m++;
  if (m == 12 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60) return -1;
  *t = days_from_civil(y, m + 1, (unsigned)d) * 86400 + hh * 3600 + mm * 60 + ss;
  return 0;
}

static void http_date_format(long long t, char *out, size_t n) {
  time_t tt = (time_t)t;
  struct tm tm;
  if (!gmtime_r(&tt, &tm)) memset(&tm, 0, sizeof tm);
  snprintf(out, n, "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday % 7], tm.tm_mday,
           months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* Does the list of entity-tags in header @h ("*", or `"x", W/"y"`) match @etag (strong, quoted)?
 * @weak: weak comparison (W/ prefixes ignored, If-None-Match); else strong (If-Match, If-Range). */
static int etag_list_match(const char *h, const char *etag, int weak) {
  size_t el = strlen(etag);
  for (const char *p = h;;) {
    p += strspn(p, " \t,");
    if (!*p) return 0;
    if (*p == '*') return 1;
    int is_weak = !strncmp(p, "W/", 2);
    if (is_weak) p += 2;
    const char *q = *p == '"' ? strchr(p + 1, '"') : NULL;
    if (!q) return 0; /* malformed: no match */
    size_t tl = (size_t)(q - p) + 1;
    if ((weak || !is_weak) && tl == el && !memcmp(p, etag, el)) return 1;
    p = q + 1;
  }
}

/* saturating decimal digits at *@p (at least one); -1 if none */
static int range_num(const char **p, unsigned long long *v) {
  const char *s = *p;
  *v = 0;
  while (**p >= '0' && **p <= '9') {
    unsigned d = (unsigned)(*(*p)++ - '0');
    *v = *v > (~0ULL - d) / 10 ? ~0ULL : *v * 10 + d;
  }
  return *p == s ? -1 : 0;
}

enum { RANGE_WHOLE = 0, RANGE_ONE = 1, RANGE_UNSATISFIABLE = 2 };

/* Range header @h against a file of @size bytes. A unit other than bytes (any case), bad syntax
 * or several ranges are ignored: the whole file (RFC 9110 §14.2). One satisfiable range:
 * RANGE_ONE with [@from, @to]; no satisfiable range at all: RANGE_UNSATISFIABLE. */
static int parse_range(const char *h, unsigned long long size, unsigned long long *from,
                       unsigned long long *to) {
  if (strncasecmp(h, "bytes=", 6)) return RANGE_WHOLE;
  const char *p = h + 6;
  int specs = 0, satisfiable = 0;
  for (;;) {
    p += strspn(p, " \t");
    unsigned long long a, b = ~0ULL;
    int suffix = *p == '-';
    if (suffix) p++;
    if (range_num(&p, &a)) return RANGE_WHOLE;
    if (!suffix) {
      if (*p++ != '-') return RANGE_WHOLE;
      if (*p >= '0' && *p <= '9') {
        range_num(&p, &b);
        if (b < a) return RANGE_WHOLE; /* invalid range-spec */
      }
    }
    specs++;
    if (suffix ? a > 0 && size > 0 : a < size) {
      if (!satisfiable++) {
        *from = suffix ? (a >= size ? 0 : size - a) : a;
        *to = suffix || b >= size ? size - 1 : b;
      }
    }
    p += strspn(p, " \t");
    if (!*p) break;
    if (*p++ != ',') return RANGE_WHOLE;
  }
  if (!satisfiable) return RANGE_UNSATISFIABLE;
  return specs == 1 ? RANGE_ONE : RANGE_WHOLE;
}

/* The validators of the version of the file open as @sb: a strong ETag from inode, size and
 * mtime in ns (a replaced or rewritten file gets a new one), and Last-Modified. */
static void file_validators(const struct stat *sb, char *etag, size_t en, char *lm, size_t ln) {
  unsigned long long ino = 0;
#ifndef _WIN32
  ino = (unsigned long long)sb->st_ino;
#endif
  snprintf(etag, en, "\"%llx-%llx-%llx%09lx\"", ino, (unsigned long long)sb->st_size,
           (unsigned long long)sb->st_mtim.tv_sec, (unsigned long)sb->st_mtim.tv_nsec);
  http_date_format((long long)sb->st_mtim.tv_sec, lm, ln);
}

/* RFC 9110 §13.2.2 steps 1-4 (If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since):
 * 0 to go on, else the status to answer (304 or 412) */
static int preconditions(struct etwd_req *r, const char *etag, long long mtime) {
  const char *im = etwd_header(r, "If-Match"), *ius = etwd_header(r, "If-Unmodified-Since");
  const char *inm = etwd_header(r, "If-None-Match"), *ims = etwd_header(r, "If-Modified-Since");
  long long t;
  if (im ? !etag_list_match(im, etag, 0) : ius && !http_date_parse(ius, &t) && mtime > t) return 412;
  if (inm) return etag_list_match(inm, etag, 1) ? 304 : 0; /* GET and HEAD only come here */
  if (ims && !http_date_parse(ims, &t) && mtime <= t) return 304;
  return 0;
}

/* If-Range (§13.1.5): the Range applies only when it names this version by its ETag. A date is
 * not taken: a file replaced twice within its mtime's second would make it match the wrong
 * version, so a date gets the whole file. */
static int if_range_holds(struct etwd_req *r, const char *etag) {
  const char *ir = etwd_header(r, "If-Range");
  if (!ir) return 1;
  while (*ir == ' ' || *ir == '\t') ir++;
  return *ir == '"' && strlen(ir) >= 2 && etag_list_match(ir, etag, 0) && !strchr(ir, ',');
}

static void send_not_modified(struct etwd_req *r, const char *etag, const char *lm) {
  char head[1024];
  int hn = snprintf(head, sizeof head, "HTTP/1.1 304 Not Modified\r\nETag: %s\r\nLast-Modified: %s\r\n%s%s\r\n",
                    etag, lm, common_headers, etwd_hsts(r->conn));
  r->status = 304;
  if (hn > 0 && mg_write(r->conn, head, (size_t)hn) > 0) r->bytes_out = (size_t)hn;
}

/* the body from the open @fd, [@from, @from+@len), the first write carrying @head */
static void send_body(struct etwd_req *r, int fd, const char *head, size_t hn,
                      unsigned long long from, unsigned long long len) {
  size_t bufsz = 256 * 1024;
  char *buf = malloc(bufsz);
  if (!buf) {
    etwd_problem(r, ETWD_P_NOMEM, NULL, NULL, NULL);
    return;
  }
  memcpy(buf, head, hn);
  size_t off = hn;
  unsigned long long left = len, pos = from;
  if (!strcmp(r->ri->request_method, "HEAD")) left = 0;
  do {
    size_t want = bufsz - off;
    if (want > left) want = (size_t)left;
    ssize_t got = want ? pread(fd, buf + off, want, (off_t)pos) : 0;
    if (got < 0) break;
    if (got == 0 && want) { /* file shrank: pad is impossible, stop (client sees short body) */
      left = 0;
    }
    left -= (unsigned long long)got;
    pos += (unsigned long long)got;
    size_t n = off + (size_t)got;
    if (mg_write(r->conn, buf, n) <= 0) break;
    r->bytes_out += n;
    off = 0;
  } while (left);
  free(buf);
}

/* Serve one version of @path: it is opened once, its validators come from fstat of that
 * descriptor and the bytes from the same descriptor (a recording's snapshot replaced by rename
 * meanwhile does not mix in). */
void etwd_send_file(struct etwd_req *r, const char *path, const char *ctype, const char *dl_name) {
#ifdef _WIN32
  int fd = etwd_open_read(path); /* shares delete access: the file can be deleted meanwhile */
#else
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* a link swapped in after the checks: refused */
#endif
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    if (fd >= 0) close(fd);
    etwd_problem(r, ETWD_P_NOT_FOUND, "the file does not exist (yet)", NULL, NULL);
    return;
  }
  char etag[96], lm[64], extra[256];
  file_validators(&sb, etag, sizeof etag, lm, sizeof lm);
  unsigned long long size = (unsigned long long)sb.st_size, from = 0, to = size ? size - 1 : 0;
  int pre = preconditions(r, etag, (long long)sb.st_mtim.tv_sec);
  const char *range = etwd_header(r, "Range");
  int kind = pre || !range || !if_range_holds(r, etag) ? RANGE_WHOLE : parse_range(range, size, &from, &to);
  if (pre == 304) {
    send_not_modified(r, etag, lm);
  } else if (pre == 412 || kind == RANGE_UNSATISFIABLE) {
    int u = pre != 412;
    snprintf(extra, sizeof extra, u ? "ETag: %s\r\nContent-Range: bytes */%llu\r\n" : "ETag: %s\r\n", etag, size);
    etwd_problem(r, u ? ETWD_P_RANGE : ETWD_P_PRECONDITION,
                 u ? "the requested range is outside the file"
                   : "the file is not the version the request's If-Match/If-Unmodified-Since names",
                 NULL, extra);
  } else {
    int partial = kind == RANGE_ONE;
    if (!partial) from = 0, to = size ? size - 1 : 0;
    unsigned long long len = size ? to - from + 1 : 0;
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %llu\r\n"
                      "Accept-Ranges: bytes\r\nETag: %s\r\nLast-Modified: %s\r\n%s%s",
                      partial ? 206 : 200, partial ? "Partial Content" : "OK", ctype, len, etag, lm, common_headers,
                      etwd_hsts(r->conn));
    char cors[320];
    hn += snprintf(head + hn, sizeof head - (size_t)hn, "%s", cors_grant(r->conn, cors, sizeof cors));
    if (partial) hn += snprintf(head + hn, sizeof head - (size_t)hn, "Content-Range: bytes %llu-%llu/%llu\r\n", from, to, size);
    if (dl_name) hn += snprintf(head + hn, sizeof head - (size_t)hn, "Content-Disposition: attachment; filename=\"%s\"\r\n", dl_name);
    hn += snprintf(head + hn, sizeof head - (size_t)hn, "\r\n");
    r->status = partial ? 206 : 200;
    send_body(r, fd, head, (size_t)hn, from, len);
  }
  close(fd);
}
