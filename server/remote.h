/* remote.h — `etwd remote`: a command-line client of a (remote) etwd over HTTPS, built on libcurl.
 * Compiled only where libcurl was found at build time (ETWD_REMOTE; not in the Windows build). */
#ifndef ETWD_REMOTE_H
#define ETWD_REMOTE_H

/* Exit codes a script can rely on (README "Remote CLI"). */
enum etwd_remote_exit {
  RX_OK = 0,
  RX_LOCAL = 1,   /* a local failure: cannot write the output file, out of memory */
  RX_USAGE = 2,   /* bad arguments */
  RX_CONNECT = 3, /* the server could not be reached, or the connection broke (after retries) */
  RX_TLS = 4,     /* TLS verification failed: fingerprint mismatch, unknown CA, wrong host name */
  RX_AUTH = 5,    /* 401/403: the token was refused or lacks the role */
  RX_REFUSED = 6, /* any other 4xx: the server refused the request (its problem detail is shown) */
  RX_SERVER = 7,  /* 5xx: the server failed */
  RX_TIMEOUT = 8, /* the server answered, but a recording did not end in time */
};

/** etwd_remote_main - `etwd remote …`; argv[0] is "remote". Returns the exit code above. */
int etwd_remote_main(int argc, char **argv);

/** etwd_remote_spec - the session spec (JSON text, malloc'd) for PROVIDER arguments
 *  (`system:event`, `system:*`, `Name[:Level[:IDs[:AnyKeywords[:AllKeywords]]]]`; events of one
 *  system are merged into one provider), @mode and, when > 0, duration_s. NULL with a message in
 *  @err on a bad argument. */
char *etwd_remote_spec(int n, char **args, const char *mode, double duration_s, char *err, unsigned en);

#endif
