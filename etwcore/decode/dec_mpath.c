/* dec_mpath.c — the manifest files of a manifests *search path*: one directory, or several
 * separated by the platform's path-list separator (':' on POSIX, ';' on Windows), e.g.
 * `../shared/manifests-next:../shared/manifests`. Each directory is walked like the single
 * directory always was (names starting with '.' skipped, subdirectories up to 6 deep, files
 * ending in .man or .xml, 4096 files at most in all) and its files sorted by path; the
 * directories' lists follow one another in the order given. Since the first schema with a
 * template wins for a (provider, id, version), a directory listed earlier takes precedence:
 * newer manifests first, older copies after them for what the newer ones dropped.
 * On POSIX "\:" in the path is a ':' inside a directory's name (a state directory such as
 * /tmp/a:b: the server's default path is built with etw_mpath_append); Windows has no escape
 * (';' is rare in names there, and '\' is its directory separator).
 *
 * Pure function of the file system; no state, callable from any thread. The caller owns the
 * returned strings and the array (free each, then the array). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decode.h"

#ifdef _WIN32
#define MPATH_SEP ';'
#else
#define MPATH_SEP ':'
#endif
#define MPATH_MAX_FILES 4096

static void walk(const char *dir, int depth, char ***list, int *n) {
  if (depth > 6 || *n >= MPATH_MAX_FILES) return;
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *de;
  while ((de = readdir(dp)) && *n < MPATH_MAX_FILES) {
    if (de->d_name[0] == '.') continue;
    size_t dl = strlen(dir), nl = strlen(de->d_name);
    char *path = malloc(dl + nl + 2);
    if (!path) break;
    memcpy(path, dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, de->d_name, nl + 1);
    struct stat sb;
    if (stat(path, &sb)) {
      free(path);
      continue;
    }
    if (S_ISDIR(sb.st_mode)) {
      walk(path, depth + 1, list, n);
      free(path);
      continue;
    }
    if (nl < 4 || (strcmp(de->d_name + nl - 4, ".man") && strcmp(de->d_name + nl - 4, ".xml"))) {
      free(path);
      continue;
    }
    char **grown = realloc(*list, (size_t)(*n + 1) * sizeof *grown);
    if (!grown) {
      free(path);
      break;
    }
    *list = grown;
    grown[(*n)++] = path;
  }
  closedir(dp);
}

static int cmp_path(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the next directory of the search path at *@s (its separator escapes undone) into @out, which
 * has room for strlen(*@s) + 1 bytes; *@s moves past it and its separator; NULL at the end */
static const char *next_dir(const char **s, char *out) {
  if (!**s) return NULL;
  size_t n = 0;
  const char *p = *s;
  for (; *p && *p != MPATH_SEP; p++) {
#ifndef _WIN32
    if (p[0] == '\\' && p[1] == MPATH_SEP) p++; /* "\:" is a ':' of the name */
#endif
    out[n++] = *p;
  }
  out[n] = 0;
  *s = *p ? p + 1 : p;
  return out;
}

int etw_mpath_dirs(const char *dirs, char ***out) {
  *out = NULL;
  int n = 0;
  char *one = dirs ? malloc(strlen(dirs) + 1) : NULL;
  if (!one) return dirs ? -1 : 0;
  for (const char *s = dirs; next_dir(&s, one);) {
    if (!one[0]) continue; /* an empty element names nothing */
    char **grown = realloc(*out, (size_t)(n + 1) * sizeof *grown);
    char *copy = strdup(one);
    if (grown) *out = grown;
    if (!grown || !copy) {
      free(copy);
      for (int i = 0; i < n; i++) free((*out)[i]);
      free(*out);
      *out = NULL;
      n = -1;
      break;
    }
    grown[n++] = copy;
  }
  free(one);
  return n;
}

int etw_mpath_append(char *path, size_t cap, const char *dir) {
  size_t len = strlen(path), dl = strlen(dir), need = len + (len ? 1 : 0) + dl + 1;
#ifdef _WIN32
  if (strchr(dir, MPATH_SEP)) return -1;
#else
  if (dl && dir[dl - 1] == '\\') return -1; /* it would escape the separator after it */
  for (const char *p = dir; (p = strchr(p, MPATH_SEP)); p++) need++;
#endif
  if (need > cap) return -1;
  char *o = path + len;
  if (len) *o++ = MPATH_SEP;
  for (const char *p = dir; *p; p++) {
#ifndef _WIN32
    if (*p == MPATH_SEP) *o++ = '\\';
#endif
    *o++ = *p;
  }
  *o = 0;
  return 0;
}

void dec_manifest_paths(const char *dirs, char ***list, int *n) {
  *list = NULL;
  *n = 0;
  char **dl;
  int nd = etw_mpath_dirs(dirs, &dl);
  for (int i = 0; i < nd; i++) {
    int first = *n;
    walk(dl[i], 0, list, n);
    if (*list && *n > first) qsort(*list + first, (size_t)(*n - first), sizeof **list, cmp_path);
    free(dl[i]);
  }
  if (nd > 0) free(dl);
}
