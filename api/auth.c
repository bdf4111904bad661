/* auth.c — token file, constant-time checks, cookie sessions (see auth.h). */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* cookie slots per role: [0, ADMIN_COOKIES) admin, the rest reader; a login evicts only a cookie
 * of its own role, so reader logins can never push an admin out */
#define ADMIN_COOKIES 256
#define READER_COOKIES 1024
#define MAX_COOKIES (ADMIN_COOKIES + READER_COOKIES)
#define COOKIE_TTL (12 * 3600)

struct tok {
  enum etwd_role role;
  char id[32];
  char secret[80];
  unsigned char digest[32];
};

struct cookie {
  unsigned char digest[32];
  unsigned char token_digest[32]; /* the token it was made from: a changed secret kills it */
  char token_id[32];
  enum etwd_role role;
  time_t expires;
};

struct etwd_auth {
  pthread_mutex_t mu;
  char path[1100];
  struct tok t[2];
  int nt;
  struct timespec mtime;
  time_t checked;
  struct cookie c[MAX_COOKIES];
};

const char *etwd_role_name(enum etwd_role r) {
  return r == ROLE_ADMIN ? "admin" : r == ROLE_READER ? "reader" : "none";
}

static void hexrand(char *out, size_t bytes) {
  unsigned char b[64];
  static const char hx[] = "0123456789abcdef";
  if (bytes > sizeof b) bytes = sizeof b;
  if (RAND_bytes(b, (int)bytes) != 1) abort(); /* no entropy: refuse to make weak secrets */
  for (size_t i = 0; i < bytes; i++) {
    out[2 * i] = hx[b[i] >> 4];
    out[2 * i + 1] = hx[b[i] & 15];
  }
  out[2 * bytes] = 0;
}

static void make_tok(struct tok *t, enum etwd_role r) {
  char rid[9], sec[65];
  t->role = r;
  hexrand(rid, 4);
  hexrand(sec, 32);
  snprintf(t->id, sizeof t->id, "%s-%s", etwd_role_name(r), rid);
  snprintf(t->secret, sizeof t->secret, "etwd_%s_%s", r == ROLE_ADMIN ? "a" : "r", sec);
  SHA256((const unsigned char *)t->secret, strlen(t->secret), t->digest);
}

static int write_file(struct etwd_auth *a) {
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.tmp", a->path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  fchmod(fd, 0600);
  char buf[512];
  int n = snprintf(buf, sizeof buf,
                   "# etwd tokens: id role secret. Keep this file secret (mode 0600).\n"
                   "%s %s %s\n%s %s %s\n",
                   a->t[0].id, etwd_role_name(a->t[0].role), a->t[0].secret, a->t[1].id,
                   etwd_role_name(a->t[1].role), a->t[1].secret);
  int ok = write(fd, buf, (size_t)n) == n && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp, a->path)) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* parse the file; 0 = ok, 1 = absent, -1 = bad */
static int read_file(struct etwd_auth *a, char *err, size_t errlen) {
  FILE *f = fopen(a->path, "r");
  if (!f) {
    if (errno == ENOENT) return 1;
    snprintf(err, errlen, "cannot read %s: %s", a->path, strerror(errno));
    return -1;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077)) {
    fclose(f);
    snprintf(err, errlen, "%s is readable by others (mode %o): chmod 600 it", a->path,
             (unsigned)(sb.st_mode & 0777));
    return -1;
  }
  struct tok t[2];
  int n = 0;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char id[32], role[16], sec[80];
    if (n >= 2 || sscanf(line, "%31s %15s %79s", id, role, sec) != 3) {
      fclose(f);
      snprintf(err, errlen, "%s: malformed line (expected `id role secret`)", a->path);
      return -1;
    }
    t[n].role = !strcmp(role, "admin") ? ROLE_ADMIN : !strcmp(role, "reader") ? ROLE_READER : ROLE_NONE;
    if (t[n].role == ROLE_NONE || strlen(sec) < 32) {
      fclose(f);
      snprintf(err, errlen, "%s: bad role or secret shorter than 32 characters", a->path);
      return -1;
    }
    snprintf(t[n].id, sizeof t[n].id, "%s", id);
    snprintf(t[n].secret, sizeof t[n].secret, "%s", sec);
    SHA256((const unsigned char *)sec, strlen(sec), t[n].digest);
    n++;
  }
  fclose(f);
  if (n == 0) {
    OPENSSL_cleanse(t, sizeof t);
    return 1;
  }
  memcpy(a->t, t, sizeof t);
  OPENSSL_cleanse(t, sizeof t);
  a->nt = n;
  a->mtime = sb.st_mtim;
  return 0;
}

struct etwd_auth *etwd_auth_open(const char *state_dir, char *err, size_t errlen) {
  struct etwd_auth *a = calloc(1, sizeof *a);
  if (!a) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&a->mu, NULL);
  snprintf(a->path, sizeof a->path, "%s/tokens", state_dir);
  int r = read_file(a, err, errlen);
  if (r < 0) {
    etwd_auth_free(a);
    return NULL;
  }
  if (r == 1) {
    make_tok(&a->t[0], ROLE_ADMIN);
    make_tok(&a->t[1], ROLE_READER);
    a->nt = 2;
    if (write_file(a)) {
      snprintf(err, errlen, "cannot write %s: %s", a->path, strerror(errno));
      etwd_auth_free(a);
      return NULL;
    }
    struct stat sb;
    if (stat(a->path, &sb) == 0) a->mtime = sb.st_mtim;
  }
  return a;
}

void etwd_auth_free(struct etwd_auth *a) {
  if (!a) return;
  OPENSSL_cleanse(a->t, sizeof a->t);
  pthread_mutex_destroy(&a->mu);
  free(a);
}

const char *etwd_auth_path(struct etwd_auth *a) { return a->path; }

/* re-read the file if it changed (at most once per second); caller holds mu */
static void maybe_reload(struct etwd_auth *a) {
  time_t now = time(NULL);
  if (now == a->checked) return;
  a->checked = now;
  struct stat sb;
  if (stat(a->path, &sb) || (sb.st_mtim.tv_sec == a->mtime.tv_sec && sb.st_mtim.tv_nsec == a->mtime.tv_nsec))
    return;
  char err[256];
  if (read_file(a, err, sizeof err) == 0) {
    /* cookies of tokens that no longer exist (same id and same secret) die */
    for (int i = 0; i < MAX_COOKIES; i++) {
      int alive = 0;
      for (int k = 0; k < a->nt; k++)
        alive |= !strcmp(a->c[i].token_id, a->t[k].id) &&
                 CRYPTO_memcmp(a->c[i].token_digest, a->t[k].digest, 32) == 0;
      if (!alive) memset(&a->c[i], 0, sizeof a->c[i]);
    }
  }
}

int etwd_auth_rotate(struct etwd_auth *a, char *admin, char *reader) {
  pthread_mutex_lock(&a->mu);
  struct tok old[2];
  memcpy(old, a->t, sizeof old);
  int oldn = a->nt;
  make_tok(&a->t[0], ROLE_ADMIN);
  make_tok(&a->t[1], ROLE_READER);
  a->nt = 2;
  int rc = write_file(a);
  if (rc) {
    memcpy(a->t, old, sizeof old);
    a->nt = oldn;
  }
  OPENSSL_cleanse(old, sizeof old);
  if (!rc) {
    memset(a->c, 0, sizeof a->c);
    struct stat sb;
    if (stat(a->path, &sb) == 0) a->mtime = sb.st_mtim;
    if (admin) snprintf(admin, 80, "%s", a->t[0].secret);
    if (reader) snprintf(reader, 80, "%s", a->t[1].secret);
  }
  pthread_mutex_unlock(&a->mu);
  return rc;
}

int etwd_auth_secret(struct etwd_auth *a, enum etwd_role role, char *out, size_t n) {
  int rc = -1;
  pthread_mutex_lock(&a->mu);
  for (int i = 0; i < a->nt; i++)
    if (a->t[i].role == role) {
      snprintf(out, n, "%s", a->t[i].secret);
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&a->mu);
  return rc;
}

void etwd_auth_bearer(struct etwd_auth *a, const char *authz, struct etwd_principal *p) {
  memset(p, 0, sizeof *p);
  if (!authz || strncasecmp(authz, "Bearer ", 7)) return;
  const char *s = authz + 7;
  while (*s == ' ') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\r')) n--;
  unsigned char d[32];
  SHA256((const unsigned char *)s, n, d);
  pthread_mutex_lock(&a->mu);
  maybe_reload(a);
  for (int i = 0; i < a->nt; i++) {
    /* every token is compared, whatever matched before: no early exit */
    int eq = CRYPTO_memcmp(d, a->t[i].digest, 32) == 0;
    if (eq) {
      p->role = a->t[i].role;
      snprintf(p->token_id, sizeof p->token_id, "%s", a->t[i].id);
    }
  }
  pthread_mutex_unlock(&a->mu);
}

static int cookie_value(const char *hdr, char *out, size_t n) {
  if (!hdr) return -1;
  const char *p = hdr;
  while ((p = strstr(p, "etwd_session="))) {
    if (p == hdr || p[-1] == ' ' || p[-1] == ';') {
      p += 13;
      size_t k = strcspn(p, "; ");
      if (k == 0 || k >= n) return -1;
      memcpy(out, p, k);
      out[k] = 0;
      return 0;
    }
    p += 13;
  }
  return -1;
}

void etwd_auth_cookie(struct etwd_auth *a, const char *hdr, struct etwd_principal *p) {
  memset(p, 0, sizeof *p);
  char v[80];
  if (cookie_value(hdr, v, sizeof v)) return;
  unsigned char d[32];
  SHA256((const unsigned char *)v, strlen(v), d);
  time_t now = time(NULL);
  pthread_mutex_lock(&a->mu);
  maybe_reload(a);
  for (int i = 0; i < MAX_COOKIES; i++) {
    if (!a->c[i].role) continue;
    if (CRYPTO_memcmp(d, a->c[i].digest, 32) == 0) {
      if (a->c[i].expires < now) {
        memset(&a->c[i], 0, sizeof a->c[i]);
        break;
      }
      p->role = a->c[i].role;
      p->via_cookie = 1;
      snprintf(p->token_id, sizeof p->token_id, "%s", a->c[i].token_id);
      break;
    }
  }
  pthread_mutex_unlock(&a->mu);
}

int etwd_auth_login(struct etwd_auth *a, const struct etwd_principal *p, char out[65]) {
  hexrand(out, 32);
  time_t now = time(NULL);
  pthread_mutex_lock(&a->mu);
  int lo = p->role == ROLE_ADMIN ? 0 : ADMIN_COOKIES;
  int hi = p->role == ROLE_ADMIN ? ADMIN_COOKIES : MAX_COOKIES;
  int slot = lo;
  for (int i = lo; i < hi; i++) {
    if (!a->c[i].role || a->c[i].expires < now) {
      slot = i;
      break;
    }
    if (a->c[i].expires < a->c[slot].expires) slot = i; /* evict the oldest */
  }
  struct cookie *c = &a->c[slot];
  SHA256((const unsigned char *)out, 64, c->digest);
  memset(c->token_digest, 0, sizeof c->token_digest);
  for (int k = 0; k < a->nt; k++)
    if (!strcmp(a->t[k].id, p->token_id)) memcpy(c->token_digest, a->t[k].digest, 32);
  snprintf(c->token_id, sizeof c->token_id, "%s", p->token_id);
  c->role = p->role;
  c->expires = now + COOKIE_TTL;
  pthread_mutex_unlock(&a->mu);
  return 0;
}

void etwd_auth_logout(struct etwd_auth *a, const char *hdr) {
  char v[80];
  if (cookie_value(hdr, v, sizeof v)) return;
  unsigned char d[32];
  SHA256((const unsigned char *)v, strlen(v), d);
  pthread_mutex_lock(&a->mu);
  for (int i = 0; i < MAX_COOKIES; i++)
    if (a->c[i].role && CRYPTO_memcmp(d, a->c[i].digest, 32) == 0) memset(&a->c[i], 0, sizeof a->c[i]);
  pthread_mutex_unlock(&a->mu);
}
