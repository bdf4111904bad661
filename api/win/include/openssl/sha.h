/* openssl/sha.h, openssl/rand.h, openssl/crypto.h — on Windows builds without OpenSSL headers
 * (MinGW from Debian), the four calls api/auth.c makes are implemented in
 * api/win/crypto_cng.c with the Windows CNG (bcrypt: BCryptGenRandom, BCryptHash SHA-256),
 * so tokens are as strong as on Linux. TLS itself is civetweb's run-time loaded OpenSSL DLLs. */
#ifndef ETWD_WIN_OPENSSL_SHIM_H
#define ETWD_WIN_OPENSSL_SHIM_H
#include <stddef.h>

/** SHA256 - digest of @d[0..n) into @md (32 bytes); returns @md (NULL if CNG fails). */
unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md);
/** RAND_bytes - @num bytes from the system CSPRNG; 1 = ok (OpenSSL's convention). */
int RAND_bytes(unsigned char *buf, int num);
/** CRYPTO_memcmp - constant-time comparison; 0 when equal. */
int CRYPTO_memcmp(const void *a, const void *b, size_t len);
/** OPENSSL_cleanse - zero memory in a way the compiler keeps (SecureZeroMemory). */
void OPENSSL_cleanse(void *ptr, size_t len);

#endif
