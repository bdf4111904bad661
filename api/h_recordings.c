/* h_recordings.c — the recordings of file-mode sessions, this run's and earlier runs':
 * <state_dir>/recordings/<name>/trace.dat (Linux) or trace.etl (Windows), where <name> is
 * "<UTC start>-s<session id>[-N]" (session.c claims it with mkdir, so no recording is ever
 * overwritten). Listed from the directory on every request, so a restart after SIGTERM or
 * kill -9 finds them again. A recording outlives its session: deleting the session keeps it; it is
 * deleted here once its session has stopped. Runs on civetweb worker threads; no state of its own. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"

#define REC_MAX 4096 /* recordings listed at most */

static const char *const rec_files[] = {"trace.dat", "trace.etl"};

/* [A-Za-z0-9._-], 1..128 characters, not starting with a dot (no paths, no "..") */
static int rec_name_valid(const char *n) {
  size_t len = strlen(n);
  if (!len || len > 128 || n[0] == '.') return 0;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-'))
      return 0;
  return 1;
}

/* The recording file of @name into @path; its index in rec_files, or -1 (none). */
static int rec_find(struct etwd_req *r, const char *name, char *path, size_t n, struct stat *sb) {
  if (!rec_name_valid(name)) return -1;
  for (int i = 0; i < 2; i++) {
    snprintf(path, n, "%s/recordings/%s/%s", r->srv->cfg->state_dir, name, rec_files[i]);
    if (stat(path, sb) == 0 && S_ISREG(sb->st_mode)) return i;
  }
  return -1;
}

static int rec_or_404(struct etwd_req *r, char *path, size_t n, struct stat *sb) {
  int i = rec_find(r, r->params[0], path, n, sb);
  if (i < 0) {
    char d[300];
    snprintf(d, sizeof d, "no recording \"%.200s\"", r->params[0]);
    etwd_problem(r, ETWD_P_NOT_FOUND, d, NULL, NULL);
  }
  return i;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append every recording to the JSON array in @w ("," before each entry unless *@first). Each is
 * {"name","kind":"recording","file","size","modified","session","writing","url"}; GET
 * /api/v1/files lists them too, after the uploads (their names never end in .etl: no clash). */
void etwd_recordings_append(struct etwd_req *r, struct etw_jw *w, int *first) {
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/recordings", r->srv->cfg->state_dir);
  char **names = calloc(REC_MAX, sizeof *names);
  int n = 0;
  DIR *d = names ? opendir(dir) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < REC_MAX)
    if (rec_name_valid(e->d_name) && (names[n] = strdup(e->d_name))) n++;
  if (d) closedir(d);
  if (n) qsort(names, (size_t)n, sizeof names[0], cmp_str); /* by start time */
  for (int i = 0; i < n; i++) {
    char path[2048];
    struct stat sb;
    int k = rec_find(r, names[i], path, sizeof path, &sb);
    if (k >= 0) {
      uint64_t owner = etw_core_recording_owner(r->srv->core, names[i]);
      struct etw_session *s = owner ? etw_session_get(r->srv->core, owner) : NULL;
      int writing = s && etw_session_is_recording(s);
      etw_session_put(s);
      if (!*first) etw_jw_ch(w, ',');
      *first = 0;
      etw_jw_lit(w, "{\"name\":");
      etw_jw_cs(w, names[i]);
      etw_jw_lit(w, ",\"kind\":\"recording\",\"file\":");
      etw_jw_cs(w, rec_files[k]);
      etw_jw_lit(w, ",\"size\":");
      etw_jw_u64(w, (uint64_t)sb.st_size);
      etw_jw_lit(w, ",\"modified\":");
      etw_jw_unix_ns(w, (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec);
      etw_jw_lit(w, ",\"session\":");
      if (owner)
        etw_jw_u64(w, owner);
      else
        etw_jw_lit(w, "null");
      etw_jw_lit(w, ",\"writing\":");
      etw_jw_bool(w, writing);
      etw_jw_lit(w, ",\"url\":\"/api/v1/recordings/");
      etw_jw_lit(w, names[i]); /* rec_name_valid: nothing to escape */
      etw_jw_lit(w, "\"}");
    }
    free(names[i]);
  }
  free(names);
}

void h_recordings_list(struct etwd_req *r) {
  struct etw_jw w;
  etw_jw_init(&w, 1 << 22);
  etw_jw_ch(&w, '[');
  int first = 1;
  etwd_recordings_append(r, &w, &first);
  etw_jw_ch(&w, ']');
  etwd_reply_jw(r, 200, &w, NULL);
  etw_jw_free(&w);
}

void h_recording_get(struct etwd_req *r) {
  char path[2048], dl[200];
  struct stat sb;
  int k = rec_or_404(r, path, sizeof path, &sb);
  if (k < 0) return;
  snprintf(dl, sizeof dl, "%s%s", r->params[0], strrchr(rec_files[k], '.'));
  etwd_send_file(r, path, "application/octet-stream", dl);
}

void h_recording_delete(struct etwd_req *r) {
  char path[2048];
  struct stat sb;
  int k = rec_or_404(r, path, sizeof path, &sb);
  if (k < 0) return;
  /* a stopped session's recording is deleted on its own; one still being written is not. A
   * session that ended by itself (a failure) is first stopped for good (timeout 0: no wait). */
  uint64_t owner = etw_core_recording_owner(r->srv->core, r->params[0]);
  struct etw_session *s = owner ? etw_session_get(r->srv->core, owner) : NULL;
  if (s) etw_session_wait_stopped(s, 0, NULL);
  int writing = s && etw_session_is_recording(s);
  etw_session_put(s);
  if (writing) {
    char d[300];
    snprintf(d, sizeof d, "session %llu is still writing recording \"%.200s\": stop the session first",
             (unsigned long long)owner, r->params[0]);
    snprintf(r->audit_detail, sizeof r->audit_detail, "recording %.200s: in use", r->params[0]);
    etwd_problem(r, ETWD_P_STATE, d, NULL, NULL);
    return;
  }
  int rc = unlink(path);
  int err = errno;
  snprintf(r->audit_detail, sizeof r->audit_detail, "recording %.200s: %s", r->params[0],
           rc ? strerror(err) : "deleted");
  if (rc) {
    etwd_problem(r, ETWD_P_IO, "the recording could not be deleted", NULL, NULL);
    return;
  }
  /* what a killed server may have left beside it (a snapshot being written), then the directory */
  snprintf(path, sizeof path, "%s/recordings/%s/%s.part", r->srv->cfg->state_dir, r->params[0],
           rec_files[k]);
  unlink(path);
  snprintf(path, sizeof path, "%s/recordings/%s", r->srv->cfg->state_dir, r->params[0]);
  rmdir(path);
  etwd_reply(r, 204, "application/json", "", 0, NULL);
}
