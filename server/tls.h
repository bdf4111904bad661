/* tls.h — the server certificate: generate a self-signed one on first run (key file 0600) or
 * check a user-supplied one; load it into civetweb's SSL_CTX with TLS 1.2 as the minimum. */
#ifndef ETWD_TLS_H
#define ETWD_TLS_H

#include <stddef.h>

/* generated certificates: valid this many days (browsers refuse more than 397), renewed at
 * start when fewer than ETWD_TLS_RENEW_DAYS are left */
#define ETWD_TLS_CERT_DAYS 397
#define ETWD_TLS_RENEW_DAYS 30
/* the TLS 1.2 cipher list: ECDHE key exchange with AES-GCM or ChaCha20-Poly1305 only */
#define ETWD_TLS12_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL"

/**
 * etwd_tls_prepare - make sure @cert/@key exist: if both are empty, use (or generate)
 * <state_dir>/cert.pem and key.pem and write their paths back; a self-signed one there is
 * renewed when it expires within ETWD_TLS_RENEW_DAYS (logged). Checks that the key matches the
 * certificate. Fills @fingerprint with the certificate's SHA-256 ("AB:CD:…", 96 bytes).
 * Returns 0, or -1 with a clear message in @err.
 */
int etwd_tls_prepare(const char *state_dir, char *cert, size_t certsz, char *key, size_t keysz,
                     char fingerprint[96], char *err, size_t errlen);
/** etwd_tls_init_ctx - civetweb's init_ssl callback body: load @cert/@key, TLS >= 1.2,
 * ETWD_TLS12_CIPHERS. 1 = ok. */
int etwd_tls_init_ctx(void *ssl_ctx, const char *cert, const char *key);

#endif
