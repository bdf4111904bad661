/* unpack.c — see unpack.h. */
#include "etwcore/unpack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef _WIN32
#include <io.h>
#define UNPACK_OFLAGS O_BINARY
#else
#include <unistd.h>
#define UNPACK_OFLAGS (O_CLOEXEC | O_NOFOLLOW)
#endif

#ifdef ETWD_UNPACK
#include <minizip/unzip.h>
#include <zlib.h>
#endif

enum etw_pack etw_pack_kind_file(const char *path) {
  unsigned char h[4] = {0};
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(h, 1, sizeof h, f) : 0;
  if (f) fclose(f);
  if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b) return ETW_PACK_GZIP;
  if (n == 4 && !memcmp(h, "PK\x03\x04", 4)) return ETW_PACK_ZIP;
  return ETW_PACK_NONE;
}

static const char *base_name(const char *p) {
  const char *b = strrchr(p, '/');
#ifdef _WIN32
  const char *bs = strrchr(b ? b : p, '\\');
  if (bs) b = bs;
#endif
  return b ? b + 1 : p;
}

#ifdef ETWD_UNPACK
#define CHUNK (1u << 16)

/* put - append @n bytes to @o; 1 if that passes @max (nothing written), -1 on a write error */
static int put(FILE *o, const void *b, size_t n, uint64_t *total, uint64_t max) {
  if (*total + n > max) return 1;
  *total += n;
  return fwrite(b, 1, n, o) == n ? 0 : -1;
}

static int gunzip(const char *in, FILE *o, uint64_t max, char *err, size_t errlen) {
  gzFile g = gzopen(in, "rb");
  if (!g) {
    snprintf(err, errlen, "%s: cannot open: %s", in, strerror(errno));
    return -1;
  }
  gzbuffer(g, CHUNK);
  char *buf = malloc(CHUNK);
  uint64_t total = 0;
  int rc = buf ? 0 : -1, n;
  while (!rc && (n = gzread(g, buf, CHUNK)) > 0) rc = put(o, buf, (size_t)n, &total, max);
  int ze = 0;
  const char *zm = gzerror(g, &ze);
  if (!rc && ze != Z_OK && ze != Z_STREAM_END) {
    snprintf(err, errlen, "%s: not a valid gzip file: %s", in, zm);
    rc = -1;
  } else if (rc < 0 && !err[0]) {
    snprintf(err, errlen, "%s: %s", in, buf ? "write error while decompressing" : "out of memory");
  }
  gzclose(g);
  free(buf);
  return rc;
}

/* pick_entry - make the entry to extract current: the first "*.etl", else the only file */
static int pick_entry(unzFile z, const char *in, char *entry, size_t cap, unz_file_info64 *fi, char *err,
                      size_t errlen) {
  int files = 0, r;
  char nm[512];
  unz_file_pos first = {0, 0};
  for (r = unzGoToFirstFile(z); r == UNZ_OK; r = unzGoToNextFile(z)) {
    if (unzGetCurrentFileInfo64(z, fi, nm, sizeof nm, NULL, 0, NULL, 0) != UNZ_OK) break;
    size_t l = strlen(nm);
    if (l == 0 || nm[l - 1] == '/') continue; /* a directory */
    if (l > 4 && !strcasecmp(nm + l - 4, ".etl")) {
      snprintf(entry, cap, "%s", nm);
      return 0;
    }
    if (files++ == 0) {
      unzGetFilePos(z, &first);
      snprintf(entry, cap, "%s", nm);
    }
  }
  if (files == 1 && unzGoToFilePos(z, &first) == UNZ_OK &&
      unzGetCurrentFileInfo64(z, fi, NULL, 0, NULL, 0, NULL, 0) == UNZ_OK)
    return 0;
  snprintf(err, errlen, "%s: the zip archive has %s", in,
           files ? "several files and none ending in .etl" : "no file in it (or is damaged)");
  return -1;
}

static int unzip_one(const char *in, FILE *o, uint64_t max, char *name, size_t namecap, char *err,
                     size_t errlen) {
  unzFile z = unzOpen64(in);
  if (!z) {
    snprintf(err, errlen, "%s: not a valid zip archive", in);
    return -1;
  }
  char entry[512];
  unz_file_info64 fi;
  int rc = pick_entry(z, in, entry, sizeof entry, &fi, err, errlen);
  if (!rc && name) snprintf(name, namecap, "%s", base_name(entry));
  if (!rc && (fi.flag & 1)) {
    snprintf(err, errlen, "%s: %s is encrypted", in, entry);
    rc = -1;
  } else if (!rc && fi.uncompressed_size > max) {
    rc = 1; /* what the header says; the reads below hold the bound whatever it says */
  } else if (!rc && unzOpenCurrentFile(z) != UNZ_OK) {
    snprintf(err, errlen, "%s: cannot read %s (unsupported compression method?)", in, entry);
    rc = -1;
  } else if (!rc) {
    char *buf = malloc(CHUNK);
    uint64_t total = 0;
    int n = 0;
    rc = buf ? 0 : -1;
    while (!rc && (n = unzReadCurrentFile(z, buf, CHUNK)) > 0) rc = put(o, buf, (size_t)n, &total, max);
    int cr = unzCloseCurrentFile(z); /* UNZ_CRCERROR for a damaged entry */
    if (!rc && (n < 0 || cr != UNZ_OK))
      snprintf(err, errlen, "%s: %s is damaged (%s)", in, entry, cr == UNZ_CRCERROR ? "CRC mismatch" : "inflate error");
    if (!rc && (n < 0 || cr != UNZ_OK)) rc = -1;
    if (rc < 0 && !err[0]) snprintf(err, errlen, "%s: write error while decompressing", in);
    free(buf);
  }
  unzClose(z);
  return rc;
}
#endif

int etw_unpack_file(const char *in, enum etw_pack kind, const char *out, uint64_t max, char *name,
                    size_t namecap, char *err, size_t errlen) {
  err[0] = 0;
  if (name && namecap) { /* gzip: the outer name without its suffix */
    const char *b = base_name(in);
    size_t l = strlen(b);
    if (l > 6 && !strcasecmp(b + l - 6, ".etlgz"))
      snprintf(name, namecap, "%.*s.etl", (int)(l - 6), b);
    else if (l > 3 && !strcasecmp(b + l - 3, ".gz"))
      snprintf(name, namecap, "%.*s", (int)(l - 3), b);
    else
      snprintf(name, namecap, "%s", b);
  }
#ifdef ETWD_UNPACK
  /* replaced, never followed: whatever is at @out (a symbolic link planted in a shared data
   * directory) goes, and the new file is created exclusively, mode 0600 */
  remove(out);
  int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | UNPACK_OFLAGS, 0600);
  FILE *o = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!o && fd >= 0) close(fd);
  if (!o) {
    snprintf(err, errlen, "cannot create %s: %s", out, strerror(errno));
    return -1;
  }
  int rc = kind == ETW_PACK_GZIP ? gunzip(in, o, max, err, errlen)
           : kind == ETW_PACK_ZIP ? unzip_one(in, o, max, name, namecap, err, errlen)
                                  : (snprintf(err, errlen, "%s: not compressed", in), -1);
  if (fclose(o) && !rc) {
    snprintf(err, errlen, "cannot write %s", out);
    rc = -1;
  }
  if (rc) remove(out);
  return rc;
#else
  (void)kind;
  (void)out;
  (void)max;
  snprintf(err, errlen, "%s is compressed (%s), and this build of etwd has no zlib/minizip: "
           "decompress it first", in, kind == ETW_PACK_ZIP ? "zip" : "gzip");
  return -1;
#endif
}
