/* h_misc.c — health, version, login/logout/whoami, token rotation, metrics, providers. */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "api.h"
#include "netguard.h"
#include "etwcore/backend.h"
#include "etwcore/caps.h"

void h_health(struct etwd_req *r) {
  static const char body[] = "{\"status\":\"ok\"}";
  etwd_reply(r, 200, "application/json", body, sizeof body - 1, NULL);
}

/* a backend's ,"available":bool and, when it is not, ,"error":"why" (GET /version, /backends) */
static void backend_available(struct etwd_req *r, const struct etw_backend *b, struct etw_jw *w) {
  const char *e = etw_core_backend_error(r->srv->core, b);
  etw_jw_lit(w, ",\"available\":");
  etw_jw_bool(w, e == NULL);
  if (e) {
    etw_jw_lit(w, ",\"error\":");
    etw_jw_cs(w, e);
  }
}

void h_version(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 16);
  struct utsname u;
  uname(&u);
  etw_jw_lit(&w, "{\"name\":\"etwd\",\"version\":\"" ETWD_VERSION "\",\"os\":{\"sysname\":");
  etw_jw_cs(&w, u.sysname);
  etw_jw_lit(&w, ",\"release\":");
  etw_jw_cs(&w, u.release);
  etw_jw_lit(&w, ",\"machine\":");
  etw_jw_cs(&w, u.machine);
  etw_jw_lit(&w, "},\"tls\":");
  etw_jw_bool(&w, r->srv->tls);
  etw_jw_lit(&w, ",\"backends\":[");
  const struct etw_backend *const *b = etw_backends();
  for (int i = 0; b[i]; i++) {
    if (i) etw_jw_ch(&w, ',');
    etw_jw_lit(&w, "{\"name\":");
    etw_jw_cs(&w, b[i]->name);
    etw_jw_lit(&w, ",\"capabilities\":");
    etw_caps_json(b[i]->caps, &w);
    backend_available(r, b[i], &w);
    etw_jw_ch(&w, '}');
  }
  etw_jw_lit(&w, "],\"limits\":{\"max_sessions\":");
  etw_jw_u64(&w, r->srv->cfg->max_sessions);
  etw_jw_lit(&w, ",\"max_streams\":");
  etw_jw_u64(&w, r->srv->cfg->max_streams);
  etw_jw_lit(&w, ",\"max_decodes\":");
  etw_jw_u64(&w, r->srv->cfg->max_decodes);
  etw_jw_lit(&w, ",\"max_body\":");
  etw_jw_u64(&w, r->srv->cfg->max_body);
  etw_jw_lit(&w, ",\"max_upload\":");
  etw_jw_u64(&w, r->srv->cfg->max_upload);
  etw_jw_lit(&w, "}}");
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

/* GET /api/v1/backends: each backend's capabilities, generated from the member table (caps.h)
 * that also produces the refusals, so what it says is what a session gets. */
void h_backends(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  etw_jw_lit(&w, "{\"backends\":[");
  const struct etw_backend *const *b = etw_backends();
  for (int i = 0; b[i]; i++) {
    if (i) etw_jw_ch(&w, ',');
    etw_jw_lit(&w, "{\"name\":");
    etw_jw_cs(&w, b[i]->name);
    backend_available(r, b[i], &w);
    etw_jw_ch(&w, ',');
    etw_backend_caps_json(b[i], &w);
    etw_jw_ch(&w, '}');
  }
  etw_jw_lit(&w, "]}");
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

void h_openapi(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 22);
  etwd_openapi_json(&w);
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

static void whoami_body(struct etw_jw *w, const struct etwd_principal *p) {
  etw_jw_lit(w, "{\"role\":");
  etw_jw_cs(w, etwd_role_name(p->role));
  etw_jw_lit(w, ",\"token_id\":");
  etw_jw_cs(w, p->token_id);
  etw_jw_lit(w, ",\"via_cookie\":");
  etw_jw_bool(w, p->via_cookie);
  etw_jw_ch(w, '}');
}

void h_login(struct etwd_req *r) {
  if (r->who.via_cookie) {
    etwd_problem(r, ETWD_P_INVALID, "log in with Authorization: Bearer <token>", NULL, NULL);
    return;
  }
  char cookie[65], hdr[256];
  etwd_auth_login(r->srv->auth, &r->who, cookie);
  snprintf(hdr, sizeof hdr,
           "Set-Cookie: etwd_session=%s; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=43200\r\n",
           cookie);
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  struct etwd_principal p = r->who;
  p.via_cookie = 1;
  whoami_body(&w, &p);
  snprintf(r->audit_detail, sizeof r->audit_detail, "cookie session created");
  etwd_reply_jw(r, 200, &w, hdr);
  etw_jw_free(&w);
}

void h_logout(struct etwd_req *r) {
  etwd_auth_logout(r->srv->auth, etwd_header(r, "Cookie"));
  etwd_reply(r, 204, "application/json", "", 0,
             "Set-Cookie: etwd_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0\r\n");
}

void h_whoami(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  whoami_body(&w, &r->who);
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

void h_rotate(struct etwd_req *r) {
  char a[80], rd[80];
  if (etwd_auth_rotate(r->srv->auth, a, rd)) {
    etwd_problem(r, ETWD_P_IO, "could not write the token file", NULL, NULL);
    return;
  }
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  etw_jw_lit(&w, "{\"admin\":");
  etw_jw_cs(&w, a);
  etw_jw_lit(&w, ",\"reader\":");
  etw_jw_cs(&w, rd);
  etw_jw_ch(&w, '}');
  snprintf(r->audit_detail, sizeof r->audit_detail, "both tokens replaced");
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

void h_metrics(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 22);
  etw_core_metrics(r->srv->core, &w);
  etw_jw_lit(&w, "# HELP etwd_http_requests_total HTTP requests served.\n# TYPE etwd_http_requests_total counter\netwd_http_requests_total ");
  etw_jw_u64(&w, atomic_load(&r->srv->requests_total));
  etw_jw_lit(&w, "\n# HELP etwd_http_errors_total HTTP responses with status >= 400.\n# TYPE etwd_http_errors_total counter\netwd_http_errors_total ");
  etw_jw_u64(&w, atomic_load(&r->srv->errors_total));
  etw_jw_lit(&w, "\n# HELP etwd_streams Current WebSocket and ndjson clients.\n# TYPE etwd_streams gauge\netwd_streams ");
  etw_jw_u64(&w, atomic_load(&r->srv->active_streams));
  etw_jw_ch(&w, '\n');
  etwd_netguard_metrics(&w);
  etw_backends_metrics(&w); /* each backend's own (Linux: stack symbolisation caches) */
  etwd_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", etw_jw_cstr(&w), w.len, NULL);
  etw_jw_free(&w);
}

/* backend chosen by ?backend=, else every backend that lists providers */
void h_providers(struct etwd_req *r) {
  char q[256] = "", bname[32] = "";
  etwd_query(r, "q", q, sizeof q);
  int have_b = etwd_query(r, "backend", bname, sizeof bname) == 0;
  struct etw_jw w;
  etw_jw_init(&w, 1 << 24);
  etw_jw_ch(&w, '[');
  const struct etw_backend *const *b = etw_backends();
  int first = 1, found = 0;
  for (int i = 0; b[i]; i++) {
    if (have_b && strcmp(b[i]->name, bname)) continue;
    found = 1;
    if (!b[i]->list_providers || etw_core_backend_error(r->srv->core, b[i])) continue;
    struct etw_jw one;
    etw_jw_init(&one, 1 << 23);
    struct etw_status st;
    etw_status_clear(&st);
    if (b[i]->list_providers(q[0] ? q : NULL, &one, &st) == ETW_E_OK && one.len > 2 && !one.err) {
      /* splice the backend's array items, tagging each with its backend */
      const char *s = etw_jw_cstr(&one);
      if (!first) etw_jw_ch(&w, ',');
      first = 0;
      /* items look like {"name":...}: insert "backend" after each opening brace at depth 1 */
      int depth = 0, instr = 0, esc = 0;
      for (size_t k = 1; k + 1 < one.len; k++) {
        char c = s[k];
        etw_jw_ch(&w, c);
        if (instr) {
          if (esc) esc = 0;
          else if (c == '\\') esc = 1;
          else if (c == '"') instr = 0;
          continue;
        }
        if (c == '"') instr = 1;
        else if (c == '{' && depth++ == 0) {
          etw_jw_lit(&w, "\"backend\":");
          etw_jw_cs(&w, b[i]->name);
          etw_jw_ch(&w, ',');
        } else if (c == '}') depth--;
      }
    }
    etw_jw_free(&one);
  }
  etw_jw_ch(&w, ']');
  if (have_b && !found) {
    etw_jw_free(&w);
    etwd_problem(r, ETWD_P_INVALID, "?backend= names no backend of this server", "backend", NULL);
    return;
  }
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

void h_provider(struct etwd_req *r) {
  char bname[32] = "";
  int have_b = etwd_query(r, "backend", bname, sizeof bname) == 0;
  const struct etw_backend *const *b = etw_backends();
  struct etw_status st;
  etw_status_clear(&st);
  enum etw_err last = ETW_E_NOT_FOUND;
  for (int i = 0; b[i]; i++) {
    if (have_b && strcmp(b[i]->name, bname)) continue;
    if (!b[i]->describe_provider || etw_core_backend_error(r->srv->core, b[i])) continue;
    struct etw_jw w;
    etw_jw_init(&w, 1 << 24);
    struct etw_status one;
    etw_status_clear(&one);
    enum etw_err e = b[i]->describe_provider(r->params[0], &w, &one);
    if (e == ETW_E_OK && !w.err) {
      etwd_reply_jw(r, 200, &w, NULL);
      etw_jw_free(&w);
      return;
    }
    etw_jw_free(&w);
    if (e != ETW_E_NOT_FOUND || last == ETW_E_NOT_FOUND) {
      last = e;
      st = one;
    }
  }
  if (last == ETW_E_NOT_FOUND && !st.msg[0])
    snprintf(st.msg, sizeof st.msg, "no provider named \"%.200s\"", r->params[0]);
  etwd_fail(r, last, &st);
}

/* {"linux":[…], "win":[…]}: what each live backend's OS has now */
void h_os_sessions(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 22);
  etw_jw_ch(&w, '{');
  const struct etw_backend *const *b = etw_backends();
  int first = 1;
  for (int i = 0; b[i]; i++) {
    if (!b[i]->list_os_sessions) continue;
    if (!first) etw_jw_ch(&w, ',');
    first = 0;
    etw_jw_cs(&w, b[i]->name);
    etw_jw_ch(&w, ':');
    const char *berr = etw_core_backend_error(r->srv->core, b[i]);
    struct etw_status st;
    etw_status_clear(&st);
    size_t mark = w.len;
    if (berr || b[i]->list_os_sessions(&w, &st) != ETW_E_OK) {
      etw_jw_truncate(&w, mark);
      etw_jw_lit(&w, "{\"error\":");
      etw_jw_cs(&w, berr ? berr : st.msg);
      etw_jw_ch(&w, '}');
    }
  }
  etw_jw_ch(&w, '}');
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}
