/* tls_win.c — tls.h for Windows builds, where this binary has no OpenSSL linked in.
 *
 * civetweb loads OpenSSL 3 at run time from libssl-3-x64.dll and libcrypto-3-x64.dll (beside
 * etwd.exe or on PATH). This file checks up front that they load, so a missing DLL is a clear
 * start-up error rather than a server whose every handshake fails. It does not generate a
 * certificate (that needs OpenSSL's X.509 code): it uses --cert/--key, or <state>/cert.pem and
 * key.pem if present, and says how to make them otherwise. The fingerprint is the SHA-256 of
 * the certificate's DER bytes (crypt32 base64 decoding + CNG). The SSL_CTX set-up calls the
 * DLL's own functions through GetProcAddress.
 */
#ifdef _WIN32
#include <windows.h>
#include <wincrypt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openssl/sha.h"
#include "tls.h"

#define SSL_DLL "libssl-3-x64.dll"
#define CRYPTO_DLL "libcrypto-3-x64.dll"
#define MAX_CERT_FILE (1u << 20)

static int file_exists(const char *p) {
  DWORD a = GetFileAttributesA(p);
  return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

static int dlls_present(char *err, size_t n) {
  HMODULE c = LoadLibraryA(CRYPTO_DLL), s = c ? LoadLibraryA(SSL_DLL) : NULL;
  if (c && s) return 1; /* kept loaded: civetweb loads the same modules */
  snprintf(err, n,
           "HTTPS needs OpenSSL 3 for Windows: put %s and %s beside etwd.exe or on PATH "
           "(e.g. from vcpkg's openssl:x64-windows or an OpenSSL 3 installer), or run with "
           "--insecure-http on a loopback address",
           SSL_DLL, CRYPTO_DLL);
  if (c) FreeLibrary(c);
  return 0;
}

/* SHA-256 of the first CERTIFICATE block of @path, as "AB:CD:…" */
static int cert_fingerprint(const char *path, char fp[96], char *err, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, n, "TLS certificate %s: %s", path, strerror(errno));
    return -1;
  }
  char *pem = malloc(MAX_CERT_FILE + 1);
  size_t len = pem ? fread(pem, 1, MAX_CERT_FILE, f) : 0;
  fclose(f);
  if (!pem) {
    snprintf(err, n, "out of memory");
    return -1;
  }
  pem[len] = 0;
  const char *b = strstr(pem, "-----BEGIN CERTIFICATE-----");
  const char *e = b ? strstr(b, "-----END CERTIFICATE-----") : NULL;
  DWORD dlen = 0;
  BYTE *der = NULL;
  int rc = -1;
  if (b && e) {
    e += strlen("-----END CERTIFICATE-----");
    DWORD in = (DWORD)(e - b);
    if (CryptStringToBinaryA(b, in, CRYPT_STRING_BASE64HEADER, NULL, &dlen, NULL, NULL) && dlen &&
        (der = malloc(dlen)) &&
        CryptStringToBinaryA(b, in, CRYPT_STRING_BASE64HEADER, der, &dlen, NULL, NULL)) {
      unsigned char md[32];
      if (SHA256(der, dlen, md)) {
        char *p = fp;
        for (unsigned i = 0; i < 32; i++) p += sprintf(p, i ? ":%02X" : "%02X", md[i]);
        rc = 0;
      }
    }
  }
  if (rc) snprintf(err, n, "TLS certificate %s is not a PEM certificate", path);
  free(der);
  free(pem);
  return rc;
}

int etwd_tls_prepare(const char *state_dir, char *cert, size_t certsz, char *key, size_t keysz,
                     char fp[96], char *err, size_t n) {
  if (!dlls_present(err, n)) return -1;
  if (!cert[0]) {
    snprintf(cert, certsz, "%s/cert.pem", state_dir);
    snprintf(key, keysz, "%s/key.pem", state_dir);
    if (!file_exists(cert) || !file_exists(key)) {
      snprintf(err, n,
               "no certificate: the Windows build does not generate one. Pass --cert/--key, or "
               "create %s and %s, e.g. `openssl req -x509 -newkey ec -pkeyopt "
               "ec_paramgen_curve:P-256 -nodes -days 397 -subj /CN=localhost -keyout key.pem "
               "-out cert.pem`; or run with --insecure-http on a loopback address",
               cert, key);
      return -1;
    }
  }
  if (!file_exists(key)) {
    snprintf(err, n, "TLS key %s: no such file", key);
    return -1;
  }
  return cert_fingerprint(cert, fp, err, n);
}

typedef int (*ctx_file_fn)(void *, const char *);
typedef int (*ctx_file_type_fn)(void *, const char *, int);
typedef int (*ctx_check_fn)(const void *);
typedef long (*ctx_ctrl_fn)(void *, int, long, void *);
typedef int (*ctx_str_fn)(void *, const char *);

int etwd_tls_init_ctx(void *ctx, const char *cert, const char *key) {
  HMODULE s = GetModuleHandleA(SSL_DLL);
  if (!s) return -1;
  ctx_ctrl_fn ctrl = (ctx_ctrl_fn)(void (*)(void))GetProcAddress(s, "SSL_CTX_ctrl");
  ctx_file_fn chain = (ctx_file_fn)(void (*)(void))GetProcAddress(s, "SSL_CTX_use_certificate_chain_file");
  ctx_file_type_fn pkey = (ctx_file_type_fn)(void (*)(void))GetProcAddress(s, "SSL_CTX_use_PrivateKey_file");
  ctx_check_fn check = (ctx_check_fn)(void (*)(void))GetProcAddress(s, "SSL_CTX_check_private_key");
  ctx_str_fn ciphers = (ctx_str_fn)(void (*)(void))GetProcAddress(s, "SSL_CTX_set_cipher_list");
  if (!ctrl || !chain || !pkey || !check || !ciphers) return -1;
  /* SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) is SSL_CTX_ctrl(ctx, 123, 0x0303, NULL) */
  if (!ctrl(ctx, 123, 0x0303, NULL)) return -1;
  if (ciphers(ctx, ETWD_TLS12_CIPHERS) != 1) return -1; /* TLS 1.2: ECDHE + AEAD only */
  if (chain(ctx, cert) != 1) return -1;
  if (pkey(ctx, key, 1 /* SSL_FILETYPE_PEM */) != 1) return -1;
  if (check(ctx) != 1) return -1;
  return 1;
}

#endif
