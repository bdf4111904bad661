/* tls.c — certificate generation and SSL_CTX set-up (see tls.h). */
#include "tls.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void ossl_err(char *err, size_t n, const char *what) {
  unsigned long e = ERR_get_error();
  char b[256];
  ERR_error_string_n(e, b, sizeof b);
  snprintf(err, n, "%s: %s", what, e ? b : "unknown OpenSSL error");
}

static int add_ext(X509 *x, int nid, const char *val) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
  X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, val);
  if (!ex) return -1;
  int ok = X509_add_ext(x, ex, -1);
  X509_EXTENSION_free(ex);
  return ok ? 0 : -1;
}

static int generate(const char *cert, const char *key, char *err, size_t n) {
  EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  X509 *x = X509_new();
  int rc = -1;
  FILE *f = NULL;
  char ktmp[1100] = "", ctmp[1100] = "";
  if (!pk || !x) {
    ossl_err(err, n, "key generation failed");
    goto out;
  }
  X509_set_version(x, 2);
  unsigned char serial[16];
  FILE *ur = fopen("/dev/urandom", "rb");
  if (!ur || fread(serial, 1, sizeof serial, ur) != sizeof serial) {
    if (ur) fclose(ur);
    snprintf(err, n, "cannot read /dev/urandom");
    goto out;
  }
  fclose(ur);
  serial[0] &= 0x7f;
  BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
  BN_free(bn);
  /* backdated an hour for skewed clocks; notAfter - notBefore stays within 397 days, the most
   * browsers accept for a server certificate */
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), (long)ETWD_TLS_CERT_DAYS * 24 * 3600 - 3600);
  X509_set_pubkey(x, pk);
  X509_NAME *name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"etwd", -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
  X509_set_issuer_name(x, name);
  char host[256] = "localhost", san[600];
  gethostname(host, sizeof host - 1);
  snprintf(san, sizeof san, "DNS:localhost,IP:127.0.0.1,IP:::1,DNS:%s", host);
  if (add_ext(x, NID_subject_alt_name, san) || add_ext(x, NID_basic_constraints, "critical,CA:FALSE") ||
      add_ext(x, NID_ext_key_usage, "serverAuth")) {
    ossl_err(err, n, "certificate extensions");
    goto out;
  }
  if (!X509_sign(x, pk, EVP_sha256())) {
    ossl_err(err, n, "certificate signing failed");
    goto out;
  }
  /* both files are written under temporary names and renamed when complete, so a renewal that
   * fails (disk full) leaves the old pair in place */
  snprintf(ktmp, sizeof ktmp, "%s.tmp", key);
  snprintf(ctmp, sizeof ctmp, "%s.tmp", cert);
  int fd = open(ktmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || fchmod(fd, 0600) || !(f = fdopen(fd, "w"))) {
    snprintf(err, n, "cannot write %s: %s", ktmp, strerror(errno));
    if (fd >= 0) close(fd);
    goto out;
  }
  int ok = PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
  if (fclose(f)) ok = 0;
  f = NULL;
  if (!ok) {
    ossl_err(err, n, "writing the key");
    goto out;
  }
  f = fopen(ctmp, "w");
  ok = f && PEM_write_X509(f, x);
  if (f && fclose(f)) ok = 0;
  f = NULL;
  if (!ok) {
    snprintf(err, n, "cannot write %s: %s", ctmp, strerror(errno));
    goto out;
  }
  if (rename(ktmp, key) || rename(ctmp, cert)) {
    snprintf(err, n, "cannot replace %s and %s: %s", key, cert, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  if (f) fclose(f);
  if (rc && ktmp[0]) unlink(ktmp);
  if (rc && ctmp[0]) unlink(ctmp);
  X509_free(x);
  EVP_PKEY_free(pk);
  return rc;
}

/* Days until @x expires (negative: expired); *@self_signed = 1 if issuer = subject. */
static int cert_days_left(X509 *x, int *self_signed) {
  int days = 0, secs = 0;
  ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x));
  *self_signed = !X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x));
  return days - (days <= 0 && secs < 0);
}

/* The generated certificate in the state dir: renewed (new key too) when it expires within
 * ETWD_TLS_RENEW_DAYS or has expired; a certificate there that someone else signed is kept, with a
 * warning. 0, or -1 with @err. */
static int renew_if_due(const char *cert, const char *key, char *err, size_t n) {
  FILE *f = fopen(cert, "r");
  X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
  if (f) fclose(f);
  if (!x) return 0; /* unreadable: the checks below say why */
  int self = 0, left = cert_days_left(x, &self);
  X509_free(x);
  if (left > ETWD_TLS_RENEW_DAYS) return 0;
  char q[1100];
  if (!self) {
    etwd_log(LOG_WARN, "certificate expires soon", "cert=%s days_left=%d detail=\"not self-signed: "
             "not renewed automatically\"", etwd_logq(q, sizeof q, cert), left);
    return 0;
  }
  if (generate(cert, key, err, n)) return -1;
  etwd_log(LOG_WARN, "certificate renewed", "cert=%s days_left=%d valid_days=%d",
           etwd_logq(q, sizeof q, cert), left, ETWD_TLS_CERT_DAYS);
  return 0;
}

int etwd_tls_prepare(const char *state_dir, char *cert, size_t certsz, char *key, size_t keysz,
                     char fp[96], char *err, size_t n) {
  if (!cert[0]) {
    snprintf(cert, certsz, "%s/cert.pem", state_dir);
    snprintf(key, keysz, "%s/key.pem", state_dir);
    if (access(cert, F_OK) || access(key, F_OK)) {
      if (generate(cert, key, err, n)) return -1;
    } else if (renew_if_due(cert, key, err, n)) {
      return -1;
    }
  }
  struct stat sb;
  if (stat(key, &sb)) {
    snprintf(err, n, "TLS key %s: %s", key, strerror(errno));
    return -1;
  }
  FILE *f = fopen(cert, "r");
  if (!f) {
    snprintf(err, n, "TLS certificate %s: %s", cert, strerror(errno));
    return -1;
  }
  X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
  fclose(f);
  if (!x) {
    ossl_err(err, n, "TLS certificate is not a PEM certificate");
    return -1;
  }
  f = fopen(key, "r");
  EVP_PKEY *pk = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
  if (f) fclose(f);
  if (!pk) {
    X509_free(x);
    ossl_err(err, n, "TLS key is not a readable unencrypted PEM private key");
    return -1;
  }
  int match = X509_check_private_key(x, pk);
  EVP_PKEY_free(pk);
  if (!match) {
    X509_free(x);
    snprintf(err, n, "TLS key %s does not match certificate %s", key, cert);
    return -1;
  }
  unsigned char md[32];
  unsigned mdlen = 0;
  X509_digest(x, EVP_sha256(), md, &mdlen);
  X509_free(x);
  char *p = fp;
  for (unsigned i = 0; i < mdlen; i++) p += sprintf(p, i ? ":%02X" : "%02X", md[i]);
  return 0;
}

int etwd_tls_init_ctx(void *ssl_ctx, const char *cert, const char *key) {
  SSL_CTX *ctx = ssl_ctx;
  if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) return -1;
  /* TLS 1.2: forward-secret AEAD suites only (no CBC, no RSA key exchange); TLS 1.3's suites
   * are all AEAD and keep OpenSSL's defaults */
  if (SSL_CTX_set_cipher_list(ctx, ETWD_TLS12_CIPHERS) != 1) return -1;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) return -1;
  if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) return -1;
  if (SSL_CTX_check_private_key(ctx) != 1) return -1;
  return 1;
}
