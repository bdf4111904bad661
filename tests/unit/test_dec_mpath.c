/* test_dec_mpath.c — dec_manifest_paths: a manifests search path ("dirA:dirB") lists each
 * directory's .man/.xml files sorted by path, the directories in the order given (so the first
 * directory's schemas win), skipping dot-names, other extensions, empty elements and missing
 * directories; one directory gives what the single-directory walk always gave; "\:" is a ':'
 * inside a directory's name, as etw_mpath_append writes it (a state directory such as /tmp/a:b).
 * Built on a throwaway tree under /tmp (real files, real directory walk). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decode.h"
#include "t.h"

static char root[64];

static void touch(const char *rel) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  if (f) fclose(f);
}
static void mk(const char *rel) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  CHECK(mkdir(p, 0700) == 0);
}

/* the list as "rel1,rel2,…" (root prefix removed), then freed */
static const char *got(const char *dirs) {
  static char out[1024];
  char **list;
  int n;
  dec_manifest_paths(dirs, &list, &n);
  out[0] = 0;
  size_t rl = strlen(root);
  for (int i = 0; i < n; i++) {
    const char *p = list[i];
    if (!strncmp(p, root, rl)) p += rl + 1;
    if (i) strncat(out, ",", sizeof out - strlen(out) - 1);
    strncat(out, p, sizeof out - strlen(out) - 1);
    free(list[i]);
  }
  free(list);
  return out;
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/etwd-mpath-XXXXXX");
  CHECK(mkdtemp(root) != NULL);
  mk("next");
  mk("next/vm");
  mk("base");
  mk("base/b");
  mk("base/a");
  mk("base/.git");
  touch("next/vm/ClrEtwAll.man");
  touch("next/README.md");
  touch("base/b/ClrEtwAll.man");
  touch("base/a/Kernel.xml");
  touch("base/a/notes.txt");
  touch("base/.hidden.man");
  touch("base/.git/x.man");
  char a[256], b[256], both[600], rev[600], odd[900];
  snprintf(a, sizeof a, "%s/next", root);
  snprintf(b, sizeof b, "%s/base", root);
  snprintf(both, sizeof both, "%s:%s", a, b);
  snprintf(rev, sizeof rev, "%s:%s", b, a);
  snprintf(odd, sizeof odd, "::%s/missing:%s::%s:", root, b, a);
  /* one directory: sorted, dot-names and other extensions skipped, subdirectories walked */
  CHECK_STR(got(b), "base/a/Kernel.xml,base/b/ClrEtwAll.man");
  /* two: each directory's files together, in the order the path gives */
  CHECK_STR(got(both), "next/vm/ClrEtwAll.man,base/a/Kernel.xml,base/b/ClrEtwAll.man");
  CHECK_STR(got(rev), "base/a/Kernel.xml,base/b/ClrEtwAll.man,next/vm/ClrEtwAll.man");
  /* empty elements and a missing directory contribute nothing */
  CHECK_STR(got(odd), "base/a/Kernel.xml,base/b/ClrEtwAll.man,next/vm/ClrEtwAll.man");
  CHECK_STR(got(""), "");
  CHECK_STR(got(NULL), "");
  /* a ':' inside a name: escaped "\:", it stays one directory; etw_mpath_append escapes it */
  mk("c:d");
  touch("c:d/Colon.man");
  char esc[600], built[600] = "", small[8] = "x";
  snprintf(esc, sizeof esc, "%s/c\\:d:%s", root, b);
  CHECK_STR(got(esc), "c:d/Colon.man,base/a/Kernel.xml,base/b/ClrEtwAll.man");
  char cd[256];
  snprintf(cd, sizeof cd, "%s/c:d", root);
  CHECK(etw_mpath_append(built, sizeof built, cd) == 0);
  CHECK(etw_mpath_append(built, sizeof built, b) == 0);
  CHECK_STR(built, esc);
  char **dirs;
  int nd = etw_mpath_dirs(built, &dirs);
  CHECK(nd == 2);
  if (nd == 2) {
    CHECK_STR(dirs[0], cd);
    CHECK_STR(dirs[1], b);
  }
  for (int i = 0; i < nd; i++) free(dirs[i]);
  free(dirs);
  CHECK(etw_mpath_dirs("::", &dirs) == 0 && dirs == NULL);
  /* what cannot be written: too long (the path unchanged), a name ending in '\' */
  CHECK(etw_mpath_append(small, sizeof small, "a:b:c") == -1);
  CHECK_STR(small, "x");
  CHECK(etw_mpath_append(small, sizeof small, "ab\\") == -1);
  CHECK(etw_mpath_append(small, sizeof small, "a:b") == 0);
  CHECK_STR(small, "x:a\\:b");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0);
  T_DONE();
}
