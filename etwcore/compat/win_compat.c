/* win_compat.c — bodies of the Windows POSIX layer (etwcore/compat/compat.h and the shim header
 * in etwcore/compat/include/): pread, rename, shared-delete opens, stat with st_mtim, uname, and
 * stdout in binary mode. The lowest layer: compiled into etwcore in Windows builds only
 * (etwcore/CMakeLists.txt); the stop signals are the server's (server/win/signals.c), the
 * OpenSSL-named CNG helpers the API's (api/win/crypto_cng.c). */
#ifdef _WIN32
#include <windows.h>

#include <string.h>
#include <sys/utsname.h>

ssize_t etwd_pread(int fd, void *buf, size_t n, int64_t off) {
  if (n > 0x7fffffffu) n = 0x7fffffffu;
  if (_lseeki64(fd, off, SEEK_SET) < 0) return -1;
  return _read(fd, buf, (unsigned)n);
}

int etwd_rename(const char *from, const char *to) {
  if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) return 0;
  DWORD e = GetLastError();
  errno = e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? ENOENT
          : e == ERROR_ACCESS_DENIED || e == ERROR_SHARING_VIOLATION ? EACCES : EIO;
  return -1;
}

static int open_shared(const char *path, int textmode) {
  HANDLE h = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                         OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD e = GetLastError();
    errno = e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? ENOENT
            : e == ERROR_ACCESS_DENIED || e == ERROR_SHARING_VIOLATION ? EACCES : EIO;
    return -1;
  }
  int fd = _open_osfhandle((intptr_t)h, _O_RDONLY | _O_NOINHERIT | (textmode ? _O_TEXT : _O_BINARY));
  if (fd < 0) CloseHandle(h);
  return fd;
}

int etwd_open_read(const char *path) { return open_shared(path, 0); }

FILE *etwd_fopen(const char *path, const char *mode) {
  if (mode[0] != 'r' || strchr(mode, '+')) return (fopen)(path, mode);
  int fd = open_shared(path, !strchr(mode, 'b'));
  if (fd < 0) return NULL;
  FILE *f = _fdopen(fd, mode);
  if (!f) _close(fd);
  return f;
}

static void fill_stat(struct etwd_stat *sb, const struct _stat64 *s) {
  /* the CRT copies the owner bits to group/other; access is really the file's ACL, so report
   * only the owner bits (auth.c refuses token files "readable by others" by these bits) */
  sb->st_mode = s->st_mode & ~0077u;
  sb->st_size = s->st_size;
  sb->st_mtime = (time_t)s->st_mtime;
  sb->st_mtim.tv_sec = (time_t)s->st_mtime;
  sb->st_mtim.tv_nsec = 0;
}

int etwd_stat(const char *path, struct etwd_stat *sb) {
  struct _stat64 s;
  if (_stat64(path, &s)) return -1;
  fill_stat(sb, &s);
  return 0;
}

int etwd_fstat(int fd, struct etwd_stat *sb) {
  struct _stat64 s;
  if (_fstat64(fd, &s)) return -1;
  fill_stat(sb, &s);
  return 0;
}

/* ---- uname */
typedef LONG(WINAPI *rtl_get_version_fn)(OSVERSIONINFOW *);
typedef const char *(__cdecl *wine_get_version_fn)(void);

int uname(struct utsname *u) {
  memset(u, 0, sizeof *u);
  snprintf(u->sysname, sizeof u->sysname, "Windows");
  HMODULE nt = GetModuleHandleA("ntdll.dll");
  OSVERSIONINFOW vi;
  memset(&vi, 0, sizeof vi);
  vi.dwOSVersionInfoSize = sizeof vi;
  rtl_get_version_fn rgv = nt ? (rtl_get_version_fn)(void (*)(void))GetProcAddress(nt, "RtlGetVersion") : NULL;
  if (rgv && rgv(&vi) == 0)
    snprintf(u->release, sizeof u->release, "%lu.%lu.%lu", (unsigned long)vi.dwMajorVersion,
             (unsigned long)vi.dwMinorVersion, (unsigned long)vi.dwBuildNumber);
  wine_get_version_fn wgv = nt ? (wine_get_version_fn)(void (*)(void))GetProcAddress(nt, "wine_get_version") : NULL;
  if (wgv) snprintf(u->version, sizeof u->version, "wine %.40s", wgv());
  DWORD n = sizeof u->nodename;
  if (!GetComputerNameA(u->nodename, &n)) snprintf(u->nodename, sizeof u->nodename, "localhost");
  SYSTEM_INFO si;
  GetNativeSystemInfo(&si);
  snprintf(u->machine, sizeof u->machine, "%s",
           si.wProcessorArchitecture == PROCESSOR_ARCHITECTURE_AMD64 ? "x86_64"
           : si.wProcessorArchitecture == PROCESSOR_ARCHITECTURE_ARM64 ? "aarch64" : "unknown");
  return 0;
}

__attribute__((constructor)) static void compat_init(void) {
  /* byte-identical output on every OS: `etwd convert` to stdout writes LF, not CRLF */
  _setmode(_fileno(stdout), _O_BINARY);
}

#endif
