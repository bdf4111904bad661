/* compat.h — the POSIX pieces etwd's portable sources use and MinGW-w64 lacks.
 *
 * Windows builds only: the top-level CMakeLists.txt force-includes this header (-include) into
 * etwd's own sources (etwcore, api, server, never civetweb/cJSON), so the shared files need no
 * Windows branches for these. Everything here is a thin mapping onto the C runtime or Win32;
 * the functions that need a body live in etwcore/compat/win_compat.c. It is the lowest layer:
 * what only the server needs (stop signals, the service) is in server/win/signals.h.
 *
 *  - mkdir(path, mode) → _mkdir(path)  (NTFS permissions come from the parent's ACL: the
 *    README tells Windows users to keep the state directory under an admin-only folder)
 *  - O_CLOEXEC → _O_NOINHERIT | _O_BINARY: every open() in etwd passes O_CLOEXEC, and on
 *    Windows each of them must also be binary (no CRLF translation of ETL/trace data)
 *  - fchmod → no-op (0), fsync → _commit, pread → _lseeki64 + _read (callers own the fd),
 *    rename → MoveFileEx(REPLACE_EXISTING) (POSIX semantics: the target is replaced),
 *    fopen(…, "r…") → CreateFile with FILE_SHARE_DELETE (an open file can be deleted)
 *  - struct stat gains st_mtim (a struct timespec) — `stat` is mapped to etwd_stat, which
 *    fills it from _stat64, so `sb.st_mtim.tv_sec` works unchanged
 */
#ifndef ETWD_WIN_COMPAT_H
#define ETWD_WIN_COMPAT_H
#ifdef _WIN32

#include <direct.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- files */
#define mkdir(path, mode) ((void)(mode), _mkdir(path))
#ifndef O_CLOEXEC
#define O_CLOEXEC (_O_NOINHERIT | _O_BINARY)
#endif
static inline int etwd_fchmod(int fd, unsigned mode) {
  (void)fd;
  (void)mode;
  return 0;
}
#define fchmod(fd, mode) etwd_fchmod((fd), (unsigned)(mode))
#define fsync(fd) _commit(fd)
#ifndef S_IRWXG
#define S_IRWXG 0
#define S_IRWXO 0
#endif

/* rename() that replaces an existing target, as POSIX does (the CRT's fails with EEXIST):
 * token rotation and upload-with-overwrite write a temporary file and rename it over the old */
int etwd_rename(const char *from, const char *to);
#define rename(from, to) etwd_rename((from), (to))

/* fopen() for reading shares delete access, as POSIX allows: a file being replayed can still be
 * deleted through the API (other modes are the CRT's fopen) */
FILE *etwd_fopen(const char *path, const char *mode);
#define fopen(path, mode) etwd_fopen((path), (mode))
/* the same for a read-only descriptor (binary, not inherited): a file being downloaded can still
 * be deleted. Returns -1 with errno set. (`open` itself is not redefined: it is also a member
 * name of the backend interface.) */
int etwd_open_read(const char *path);

ssize_t etwd_pread(int fd, void *buf, size_t n, int64_t off);
#define pread(fd, buf, n, off) etwd_pread((fd), (buf), (n), (int64_t)(off))

static inline struct tm *etwd_gmtime_r(const time_t *t, struct tm *out) {
  return gmtime_s(out, t) ? NULL : out;
}
#undef gmtime_r
#define gmtime_r etwd_gmtime_r

/* struct stat with st_mtim (see above). The macro renames the struct tag and the functions. */
struct etwd_stat {
  unsigned st_mode;
  int64_t st_size;
  time_t st_mtime;
  struct timespec st_mtim;
};
int etwd_stat(const char *path, struct etwd_stat *sb);
int etwd_fstat(int fd, struct etwd_stat *sb);
#define stat etwd_stat
#define fstat etwd_fstat

#endif /* _WIN32 */
#endif
