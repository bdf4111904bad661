/* dec_mpath.c — the manifest files of a manifests *search path*: one directory, or several
 * separated by the platform's path-list separator (':' on POSIX, ';' on Windows), e.g.
 * `../shared/manifests-next:../shared/manifests`. Each directory is walked like the single
 * directory always was (names starting with '.' skipped, subdirectories up to 6 deep, files
 * ending in .man or .xml, 4096 files at most in all) and its files sorted by path; the
 * directories' lists follow one another in the order given. Since the first schema with a
 * template wins for a (provider, id, version), a directory listed earlier takes precedence:
 * newer manifests first, older copies after them for what the newer ones dropped.
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

void dec_manifest_paths(const char *dirs, char ***list, int *n) {
  *list = NULL;
  *n = 0;
  if (!dirs) return;
  const char *s = dirs;
  for (;;) {
    const char *e = strchr(s, MPATH_SEP);
    size_t l = e ? (size_t)(e - s) : strlen(s);
    if (l) {
      char *one = malloc(l + 1);
      if (!one) return;
      memcpy(one, s, l);
      one[l] = 0;
      int first = *n;
      walk(one, 0, list, n);
      free(one);
      if (*list && *n > first) qsort(*list + first, (size_t)(*n - first), sizeof **list, cmp_path);
    }
    if (!e) break;
    s = e + 1;
  }
}
