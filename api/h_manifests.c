/* h_manifests.c — provider manifests in the manifest directory (the last directory of the
 * --manifests search path, manifest_upload_dir): list them, and
 * install one (admin): the XML body (at most ETWD_MANIFEST_UPLOAD_MAX bytes) is parsed by the
 * decoder's own manifest parser (etwcore/manifest.h) and only then written under a temporary
 * name and renamed into place, so a reader never sees half a file. Replays and file decodes
 * started afterwards decode that provider's events by name (each decoder scans the directory the
 * first time it meets an unknown provider). Runs in civetweb worker threads; no shared state
 * besides the directory (the rename is atomic). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "etwcore/manifest.h"
#include "etwcore/util.h"

#ifndef O_NOFOLLOW /* MinGW */
#define O_NOFOLLOW 0
#endif
#define ETWD_MANIFEST_UPLOAD_MAX ((size_t)16 << 20) /* the largest known manifest is ~0.6 MB */

/* NAME.man or NAME.xml: letters, digits, '.', '_', '-', '+'; no leading dot; < 200 chars */
static int manifest_name_ok(const char *n) {
  size_t l = strlen(n);
  if (l < 5 || l >= 200 || n[0] == '.') return 0;
  if (strcasecmp(n + l - 4, ".man") && strcasecmp(n + l - 4, ".xml")) return 0;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr("._-+", *p)))
      return 0;
  return 1;
}

void h_manifests_list(struct etwd_req *r) {
  const char *dir = r->srv->cfg->manifest_upload_dir;
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  etw_jw_ch(&w, '[');
  DIR *d = opendir(dir);
  struct dirent *de;
  int first = 1, n = 0;
  while (d && n < 10000 && (de = readdir(d))) {
    char p[2048];
    struct stat sb;
    if (!manifest_name_ok(de->d_name)) continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (stat(p, &sb) || !S_ISREG(sb.st_mode)) continue;
    etw_jw_lit(&w, first ? "{\"name\":" : ",{\"name\":");
    etw_jw_cs(&w, de->d_name);
    etw_jw_lit(&w, ",\"size\":");
    etw_jw_u64(&w, (uint64_t)sb.st_size);
    etw_jw_ch(&w, '}');
    first = 0;
    n++;
  }
  if (d) closedir(d);
  etw_jw_ch(&w, ']');
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

/* read_body - the whole request body into a new buffer (at most @max bytes): 0, or the status
 * to answer (413 over @max, 400 cut short, 500 out of memory) */
static int read_body(struct etwd_req *r, size_t max, char **out, size_t *len) {
  long long cl = r->ri->content_length; /* -1: chunked */
  if (cl > (long long)max) return 413;
  size_t cap = cl > 0 ? (size_t)cl : 65536, n = 0;
  char *buf = malloc(cap + 1);
  int k = 0;
  if (!buf) return 500;
  while ((k = mg_read(r->conn, buf + n, cap - n)) > 0) {
    n += (size_t)k;
    if (n == cap && cl < 0) { /* chunked: grow, within the bound */
      if (cap >= max + 1) break;
      size_t nc = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *nb = realloc(buf, nc + 1);
      if (!nb) {
        free(buf);
        return 500;
      }
      buf = nb;
      cap = nc;
    }
  }
  if (n > max) {
    free(buf);
    return 413;
  }
  if (k < 0 || (cl >= 0 && (long long)n != cl)) {
    free(buf);
    return 400;
  }
  *out = buf;
  *len = n;
  return 0;
}

static int store(const char *dir, const char *name, const char *buf, size_t n, const void *who) {
  char tmp[2200], path[2200];
  snprintf(tmp, sizeof tmp, "%s/.upload-%ld-%p", dir, (long)getpid(), who);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  /* the directory may be writable by others (--manifests): whatever sits at the temporary name
   * (a symbolic link planted there) goes, and the file is created anew, never opened through it */
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return -1;
  int bad = write(fd, buf, n) != (ssize_t)n;
  if (close(fd)) bad = 1;
  if (bad || rename(tmp, path)) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

void h_manifest_upload(struct etwd_req *r) {
  char name[256] = "", ow[8] = "";
  if (etwd_query(r, "name", name, sizeof name) || !manifest_name_ok(name)) {
    etwd_problem(r, ETWD_P_INVALID,
                 "give the manifest's file name as ?name=NAME.man or NAME.xml (letters, digits, . _ - +)",
                 "name", NULL);
    return;
  }
  etwd_query(r, "overwrite", ow, sizeof ow);
  snprintf(r->audit_detail, sizeof r->audit_detail, "manifest %s", name);
  const char *dir = r->srv->cfg->manifest_upload_dir;
  char path[2200];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (!stat(path, &sb) && strcmp(ow, "true")) {
    etwd_problem(r, ETWD_P_EXISTS, "a manifest of that name exists; add ?overwrite=true to replace it",
                 "name", NULL);
    return;
  }
  char *buf = NULL;
  size_t n = 0;
  int st = read_body(r, ETWD_MANIFEST_UPLOAD_MAX, &buf, &n);
  if (st == 413)
    etwd_problem(r, ETWD_P_TOO_LARGE, "a manifest may have at most 16 MiB", NULL, "Connection: close\r\n");
  else if (st == 400)
    etwd_problem(r, ETWD_P_INCOMPLETE_BODY, "the manifest ended before all of its bytes arrived", NULL,
                 "Connection: close\r\n");
  else if (st)
    etwd_problem(r, ETWD_P_NOMEM, "out of memory", NULL, NULL);
  else if (etw_manifest_check(buf, n))
    etwd_problem(r, ETWD_P_INVALID_MANIFEST,
                 "the body is not an instrumentation manifest the decoder can load (no <provider> with a "
                 "name and GUID in <instrumentationManifest>); nothing was stored",
                 NULL, NULL);
  else if (etw_mkdirs(dir) || store(dir, name, buf, n, r))
    etwd_problem(r, ETWD_P_IO, "could not store the manifest", NULL, NULL);
  else {
    struct etw_jw w;
    etw_jw_init(&w, 512);
    etw_jw_lit(&w, "{\"name\":");
    etw_jw_cs(&w, name);
    etw_jw_lit(&w, ",\"size\":");
    etw_jw_u64(&w, n);
    etw_jw_ch(&w, '}');
    etwd_reply_jw(r, 201, &w, NULL);
    etw_jw_free(&w);
  }
  free(buf);
}
