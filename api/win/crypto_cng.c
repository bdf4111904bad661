/* crypto_cng.c — the four OpenSSL calls auth.c makes (api/win/include/openssl/), on the Windows
 * CNG (bcrypt: BCryptHash SHA-256, BCryptGenRandom), for Windows builds without OpenSSL headers.
 * Compiled into etwapi in Windows builds only (api/CMakeLists.txt). */
#ifdef _WIN32
#include <windows.h>
#include <bcrypt.h>

#include <stdint.h>

#include "openssl/crypto.h"
#include "openssl/rand.h"
#include "openssl/sha.h"

#ifndef BCRYPT_SHA256_ALG_HANDLE /* Windows 10 pseudo-handle; MinGW 10 headers lack it */
#define BCRYPT_SHA256_ALG_HANDLE ((BCRYPT_ALG_HANDLE)(uintptr_t)0x00000041)
#endif

/* ---- crypto helpers (CNG) */
unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md) {
  if (n > 0xffffffffu) return NULL;
  NTSTATUS s = BCryptHash(BCRYPT_SHA256_ALG_HANDLE, NULL, 0, (PUCHAR)(uintptr_t)d, (ULONG)n, md, 32);
  if (s < 0) { /* before Windows 10 there are no pseudo-handles: open the provider */
    BCRYPT_ALG_HANDLE h;
    if (BCryptOpenAlgorithmProvider(&h, BCRYPT_SHA256_ALGORITHM, NULL, 0) < 0) return NULL;
    s = BCryptHash(h, NULL, 0, (PUCHAR)(uintptr_t)d, (ULONG)n, md, 32);
    BCryptCloseAlgorithmProvider(h, 0);
    if (s < 0) return NULL;
  }
  return md;
}

int RAND_bytes(unsigned char *buf, int num) {
  if (num < 0) return 0;
  return BCryptGenRandom(NULL, buf, (ULONG)num, BCRYPT_USE_SYSTEM_PREFERRED_RNG) >= 0 ? 1 : 0;
}

int CRYPTO_memcmp(const void *a, const void *b, size_t len) {
  const volatile unsigned char *x = a, *y = b;
  unsigned char r = 0;
  for (size_t i = 0; i < len; i++) r |= (unsigned char)(x[i] ^ y[i]);
  return r;
}

void OPENSSL_cleanse(void *ptr, size_t len) { SecureZeroMemory(ptr, len); }

#endif
