/* test_etl_nofollow.c — etw_etl_reader_set_nofollow (security review, session 15): the server's
 * readers of data-dir files (replays, file decodes, the provider catalog, the stack pre-pass)
 * open without following a symbolic link, so a link swapped in after the API's lstat check is
 * refused at the open itself (ETW_E_PERM, naming the file); a reader without the flag (`etwd
 * convert`, the user's own paths) still follows links. Real files and links in a temporary
 * directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t.h"
#include "test_etl_util.h"

#define SIH "jtmoon79+super-speedy-syslog-searcher/logs/Windows11Pro/Logs/SIH/SIH.20230422.034724.362.1.etl"

/* add @path to a new reader (nofollow @nf): the error, its message in @msg */
static enum etw_err add(const char *path, int nf, char *msg, size_t n) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  struct etw_status st;
  etw_status_clear(&st);
  if (!r) return ETW_E_NOMEM;
  etw_etl_reader_set_nofollow(r, nf);
  enum etw_err e = etw_etl_reader_add_file(r, path, &st);
  snprintf(msg, n, "%s", st.msg);
  etw_etl_reader_free(r);
  return e;
}

int main(void) {
  char *src = tu_corpus(SIH);
  char dir[] = "/tmp/etwd-nofollow-XXXXXX", link[300], msg[600];
  CHECK(src && mkdtemp(dir));
  snprintf(link, sizeof link, "%s/leak.etl", dir);
  CHECK(symlink(src, link) == 0);
  /* the server's readers: the link is refused at the open, naming it */
  CHECK_EQ(add(link, 1, msg, sizeof msg), ETW_E_PERM);
  CHECK(strstr(msg, link) && strstr(msg, "symbolic link"));
  if (!strstr(msg, "symbolic link")) fprintf(stderr, "message: %s\n", msg);
  /* a regular file is read the same with the flag */
  CHECK_EQ(add(src, 1, msg, sizeof msg), ETW_E_OK);
  /* without the flag (convert) the link is followed */
  CHECK_EQ(add(link, 0, msg, sizeof msg), ETW_E_OK);
  /* a missing file is still "not found", not a link refusal */
  char none[300];
  snprintf(none, sizeof none, "%s/none.etl", dir);
  CHECK_EQ(add(none, 1, msg, sizeof msg), ETW_E_NOT_FOUND);
  unlink(link);
  rmdir(dir);
  free(src);
  T_DONE();
}
