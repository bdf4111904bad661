/* http.c — response helpers: every response is built in memory and sent with ONE mg_write
 * (a second small write costs a 40 ms Nagle/delayed-ACK stall), problem+json errors, the ONE
 * table from core error codes to HTTP statuses, query parsing and ranged file downloads. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"

/* The one table: core error → HTTP status. */
static const struct {
  enum etw_err code;
  int status;
} status_map[] = {
    {ETW_E_OK, 200},          {ETW_E_INVALID, 400},  {ETW_E_BAD_JSON, 400},
    {ETW_E_NOT_FOUND, 404},   {ETW_E_EXISTS, 409},   {ETW_E_STATE, 409},
    {ETW_E_LIMIT, 429},       {ETW_E_TOO_LARGE, 413}, {ETW_E_NOMEM, 503},
    {ETW_E_IO, 500},          {ETW_E_PERM, 403},     {ETW_E_UNSUPPORTED, 422},
    {ETW_E_KERNEL, 400},      {ETW_E_CORRUPT, 422},  {ETW_E_INTERNAL, 500},
};

int etwd_status_for(enum etw_err code) {
  for (size_t i = 0; i < sizeof status_map / sizeof status_map[0]; i++)
    if (status_map[i].code == code) return status_map[i].status;
  return 500;
}

const char *etwd_reason(int s) {
  switch (s) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

static const char common_headers[] =
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n";

const char *etwd_hsts(const struct mg_connection *c) {
  const struct mg_request_info *ri = mg_get_request_info(c);
  return ri && ri->is_ssl ? ETWD_HSTS_HEADER : "";
}

static void raw_reply(struct mg_connection *c, int status, const char *ctype, const char *body,
                      size_t len, const char *extra, size_t *out_bytes) {
  char head[2048];
  int hn = snprintf(head, sizeof head,
                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s\r\n", status,
                    etwd_reason(status), ctype, len, common_headers, etwd_hsts(c), extra ? extra : "");
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
    etwd_problem(r, 500, "internal-error", "Response too large", "the response exceeded its maximum size", NULL, NULL);
    return;
  }
  etwd_reply(r, status, "application/json", w->buf ? w->buf : "", w->len, extra);
}

static void problem_body(struct etw_jw *w, int status, const char *name, const char *title,
                         const char *detail, const char *field) {
  etw_jw_lit(w, "{\"type\":\"urn:etwd:problem:");
  etw_jw_lit(w, name);
  etw_jw_lit(w, "\",\"title\":");
  etw_jw_cs(w, title ? title : etwd_reason(status));
  etw_jw_lit(w, ",\"status\":");
  etw_jw_u64(w, (uint64_t)status);
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

void etwd_problem(struct etwd_req *r, int status, const char *name, const char *title,
                  const char *detail, const char *field, const char *extra) {
  struct etw_jw w;
  etw_jw_init(&w, 16384);
  problem_body(&w, status, name, title, detail, field);
  r->status = status;
  raw_reply(r->conn, status, "application/problem+json", etw_jw_cstr(&w), w.len, extra, &r->bytes_out);
  etw_jw_free(&w);
}

void etwd_problem_conn(struct mg_connection *c, int status, const char *name, const char *detail,
                       const char *extra) {
  struct etw_jw w;
  etw_jw_init(&w, 16384);
  problem_body(&w, status, name, NULL, detail, NULL);
  raw_reply(c, status, "application/problem+json", etw_jw_cstr(&w), w.len, extra, NULL);
  etw_jw_free(&w);
}

void etwd_fail(struct etwd_req *r, enum etw_err code, const struct etw_status *st) {
  int status = etwd_status_for(code);
  const char *detail = st && st->msg[0] ? st->msg : etw_err_msg(code);
  etwd_problem(r, status, etw_err_name(code), etw_err_msg(code), detail, st ? st->field : NULL, NULL);
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

unsigned long long etwd_parse_id(const char *s) {
  if (!*s || strlen(s) > 18) return 0;
  unsigned long long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return 0;
    v = v * 10 + (unsigned)(*s - '0');
  }
  return v;
}

void etwd_send_file(struct etwd_req *r, const char *path, const char *ctype, const char *dl_name) {
#ifdef _WIN32
  int fd = etwd_open_read(path); /* shares delete access: the file can be deleted meanwhile */
#else
  int fd = open(path, O_RDONLY | O_CLOEXEC);
#endif
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    if (fd >= 0) close(fd);
    etwd_problem(r, 404, "not-found", NULL, "the file does not exist (yet)", NULL, NULL);
    return;
  }
  unsigned long long size = (unsigned long long)sb.st_size, from = 0, to = size ? size - 1 : 0;
  int partial = 0;
  const char *range = etwd_header(r, "Range");
  if (range) {
    unsigned long long a = 0, b = 0;
    int ok = 0;
    /* one range of digits only: no signs, no lists (a list gets the whole file) */
    if (!strncmp(range, "bytes=", 6) && !strchr(range, ',') && strspn(range + 6, "0123456789-") == strlen(range + 6) &&
        strchr(range + 6, '-') == strrchr(range + 6, '-')) {
      const char *p = range + 6;
      char *end;
      if (*p == '-') {
        b = strtoull(p + 1, &end, 10);
        if (*end == 0 && end != p + 1 && b > 0) {
          from = b >= size ? 0 : size - b;
          to = size ? size - 1 : 0;
          ok = size > 0;
        }
      } else {
        a = strtoull(p, &end, 10);
        if (end != p && *end == '-') {
          const char *q = end + 1;
          if (!*q) {
            b = size ? size - 1 : 0;
            ok = a < size;
          } else {
            b = strtoull(q, &end, 10);
            ok = *end == 0 && a <= b && a < size;
            if (b >= size) b = size - 1;
          }
          from = a;
          to = b;
        }
      }
    }
    if (!ok) {
      close(fd);
      char extra[96];
      snprintf(extra, sizeof extra, "Content-Range: bytes */%llu\r\n", size);
      etwd_problem(r, 416, "range-not-satisfiable", NULL, "the requested range is outside the file",
                   NULL, extra);
      return;
    }
    partial = 1;
  }
  unsigned long long len = size ? to - from + 1 : 0;
  char head[1024];
  int hn = snprintf(head, sizeof head,
                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %llu\r\n"
                    "Accept-Ranges: bytes\r\n%s%s",
                    partial ? 206 : 200, partial ? "Partial Content" : "OK", ctype, len, common_headers,
                    etwd_hsts(r->conn));
  if (partial) hn += snprintf(head + hn, sizeof head - (size_t)hn, "Content-Range: bytes %llu-%llu/%llu\r\n", from, to, size);
  if (dl_name) hn += snprintf(head + hn, sizeof head - (size_t)hn, "Content-Disposition: attachment; filename=\"%s\"\r\n", dl_name);
  hn += snprintf(head + hn, sizeof head - (size_t)hn, "\r\n");
  r->status = partial ? 206 : 200;
  size_t bufsz = 256 * 1024;
  char *buf = malloc(bufsz);
  if (!buf) {
    close(fd);
    etwd_problem(r, 503, "out-of-memory", NULL, NULL, NULL, NULL);
    return;
  }
  /* first write carries the headers with the first block of the body */
  memcpy(buf, head, (size_t)hn);
  size_t off = (size_t)hn;
  unsigned long long left = len, pos = from;
  int head_only = !strcmp(r->ri->request_method, "HEAD");
  if (head_only) left = 0;
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
  close(fd);
}
