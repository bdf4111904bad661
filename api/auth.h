/* auth.h — bearer tokens with two roles, and cookie sessions for the web page.
 *
 * Tokens live in <state>/tokens (mode 0600): one `id role secret` line each. They are created
 * on first run, replaced by `etwd tokens --rotate` or POST /api/v1/tokens/rotate, and re-read
 * by a running server when the file changes. Secrets are compared in constant time (over their
 * SHA-256 digests, so length leaks nothing) and never logged: logs carry the token id.
 * A cookie session (POST /api/v1/login) maps a random cookie to a token id + role; it dies with
 * the token (rotation) or after 12 h. Thread-safe.
 */
#ifndef ETWD_AUTH_H
#define ETWD_AUTH_H

#include <stddef.h>

enum etwd_role { ROLE_NONE = 0, ROLE_READER = 1, ROLE_ADMIN = 2 };

struct etwd_principal {
  enum etwd_role role;
  char token_id[32]; /* "admin-3f2a" — safe to log */
  int via_cookie;
};

struct etwd_auth;

/** etwd_auth_open - load (or create on first run) <state_dir>/tokens. NULL + message on error. */
struct etwd_auth *etwd_auth_open(const char *state_dir, char *err, size_t errlen);
void etwd_auth_free(struct etwd_auth *a);
/** etwd_auth_rotate - replace both tokens (new ids and secrets); old cookies die. 0 = ok.
 *  The new secrets are copied into @admin/@reader if non-NULL (each >= 80 bytes). */
int etwd_auth_rotate(struct etwd_auth *a, char *admin, char *reader);
/** etwd_auth_secret - copy the current secret of @role into @out (for printing at start-up). */
int etwd_auth_secret(struct etwd_auth *a, enum etwd_role role, char *out, size_t n);
/** etwd_auth_path - the token file. */
const char *etwd_auth_path(struct etwd_auth *a);

/** etwd_auth_bearer - check an "Authorization" header value; fills @p (role NONE if bad). */
void etwd_auth_bearer(struct etwd_auth *a, const char *authz, struct etwd_principal *p);
/** etwd_auth_cookie - check a "Cookie" header value for etwd_session=…; fills @p. */
void etwd_auth_cookie(struct etwd_auth *a, const char *cookie_hdr, struct etwd_principal *p);
/** etwd_auth_login - new cookie session for @p; writes the cookie value (65 bytes) to @out. */
int etwd_auth_login(struct etwd_auth *a, const struct etwd_principal *p, char out[65]);
/** etwd_auth_logout - forget the cookie session named in @cookie_hdr. */
void etwd_auth_logout(struct etwd_auth *a, const char *cookie_hdr);
const char *etwd_role_name(enum etwd_role r);

#endif
