/* main.c — etwd's entry point: subcommand → configuration → state directory → core (backends
 * initialised, stale sessions reaped) → TLS → HTTPS server → wait for SIGINT/SIGTERM → ordered
 * stop (streams closed, server stopped, every session stopped and its OS object removed). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "etwcore/backend.h"
#include "etwcore/etl.h" /* etw_convert_main */
#include "etwcore/host.h"
#include "etwcore/util.h"
#include "log.h"
#include "selftest.h"
#ifdef ETWD_REMOTE
#include "remote.h"
#endif
#include "tls.h"
#ifdef _WIN32
#include "win/signals.h" /* sigwait on console/service stop events, etwd_win_service */
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* glibc gives every thread that allocates under contention an arena of its own, up to 8 per CPU,
 * and keeps what each arena once held: ~100 civetweb workers and the readers spread a busy
 * session's batches over a dozen arenas (bench/rss.py: RSS after 30 decodes 39 MB with the default,
 * 25 MB with 2 arenas). One arena per CPU (2..8) keeps readers apart; set before any thread. */
static void limit_malloc_arenas(void) {
#if defined(__GLIBC__)
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  mallopt(M_ARENA_MAX, (int)(n < 2 ? 2 : n > 8 ? 8 : n));
#endif
}

/* glibc's per-thread cache (tcache) keeps up to 7 freed chunks of every small size in each
 * thread; ~100 long-lived civetweb workers each pinning pages of freed chunks kept RSS 7 MB up
 * after 100 busy sessions (bench/rss.py: 33 MB with it, 26 MB without; malloc_trim cannot free a
 * page a cached chunk is on). Only GLIBC_TUNABLES at process start turns it off, so the server
 * executes itself again, once, with glibc.malloc.tcache_count=0 added, unless a tcache tunable is
 * set already (the operator's choice wins). On failure it runs on with the cache. */
static void exec_without_tcache(char **argv) {
#if defined(__GLIBC__) && defined(__linux__)
  const char *t = getenv("GLIBC_TUNABLES");
  if (t && strstr(t, "glibc.malloc.tcache")) return;
  char old[1024], v[1100];
  snprintf(old, sizeof old, "%s", t ? t : "");
  if (t && strlen(t) >= sizeof old) return;
  snprintf(v, sizeof v, "%s%sglibc.malloc.tcache_count=0", old, old[0] ? ":" : "");
  if (setenv("GLIBC_TUNABLES", v, 1)) return;
  execv("/proc/self/exe", argv);
  if (t)
    setenv("GLIBC_TUNABLES", old, 1);
  else
    unsetenv("GLIBC_TUNABLES");
#else
  (void)argv;
#endif
}



static int cmd_tokens(int argc, char **argv) {
  struct etwd_config cfg;
  etwd_config_defaults(&cfg);
  int rotate = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--rotate"))
      rotate = 1;
    else if (!strcmp(argv[i], "--state-dir") && i + 1 < argc)
      snprintf(cfg.api.state_dir, sizeof cfg.api.state_dir, "%s", argv[++i]);
    else {
      fprintf(stderr, "etwd tokens: unknown argument \"%s\" (usage: etwd tokens [--rotate] [--state-dir DIR])\n", argv[i]);
      return 2;
    }
  }
  /* a missing state directory is not made here: it would look like an installed etwd (the
   * package refuses to install over one) while no etwd has run */
  struct stat sd;
  if (stat(cfg.api.state_dir, &sd) != 0 || !S_ISDIR(sd.st_mode)) {
    fprintf(stderr,
            "etwd tokens: no state directory %s: etwd makes it and the tokens when it first starts;"
            " pass --state-dir DIR for another one\n",
            cfg.api.state_dir);
    return 1;
  }
  char err[512];
  struct etwd_auth *a = etwd_auth_open(cfg.api.state_dir, err, sizeof err);
  if (!a) {
    fprintf(stderr, "etwd tokens: %s\n", err);
    return 1;
  }
  if (rotate && etwd_auth_rotate(a, NULL, NULL)) {
    fprintf(stderr, "etwd tokens: could not rewrite %s\n", etwd_auth_path(a));
    etwd_auth_free(a);
    return 1;
  }
  char adm[80], rd[80];
  etwd_auth_secret(a, ROLE_ADMIN, adm, sizeof adm);
  etwd_auth_secret(a, ROLE_READER, rd, sizeof rd);
  printf("token file: %s%s\nadmin:  %s\nreader: %s\n", etwd_auth_path(a),
         rotate ? " (rotated; a running etwd picks the new tokens up within a second)" : "", adm, rd);
  etwd_auth_free(a);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "convert")) return etw_convert_main(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "tokens")) return cmd_tokens(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "selftest")) return etwd_selftest_main(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "remote")) {
#ifdef ETWD_REMOTE
    return etwd_remote_main(argc - 1, argv + 1);
#else
    fprintf(stderr, "etwd remote: this build has no remote CLI (libcurl was not found when it was built)\n");
    return 2;
#endif
  }
#ifdef _WIN32 /* install/start/stop, and run under the Service Control Manager: server/win/ */
  if (argc > 1 && !strcmp(argv[1], "service")) return etwd_win_service(argc, argv, main);
#else
  if (argc > 1 && !strcmp(argv[1], "service")) {
    fprintf(stderr, "etwd service: Windows only (it manages the Windows service). On Linux the Debian package\n"
                    "installs the systemd unit etwd.service: systemctl enable --now etwd\n");
    return 2;
  }
#endif
  int from = (argc > 1 && !strcmp(argv[1], "serve")) ? 2 : 1;
  limit_malloc_arenas();

  struct etwd_config cfg;
  etwd_config_defaults(&cfg);
  int rc = etwd_config_parse(&cfg, argc, argv, from);
  if (rc) return rc > 0 ? 0 : 2;
  exec_without_tcache(argv); /* before any thread exists */
  etwd_log_set_level((enum etwd_log_level)cfg.log_level);
  /* the backends' process-wide knobs: one etwcore-level call (etwcore/backend.h) */
  struct etw_backends_config bc = {cfg.api.data_dir, cfg.api.manifest_dir, cfg.decode[0] ? cfg.decode : NULL,
                                   cfg.reader_nice, cfg.reader_pinning, cfg.sink_secrets_dir,
                                   cfg.sink_spool_memory_mb, cfg.sink_spool_disk_mb, cfg.stack_index_mb};
  struct etw_status bst;
  etw_status_clear(&bst);
  if (etw_backends_configure(&bc, &bst)) {
    for (char *p = bst.field; *p; p++) *p = *p == '_' ? '-' : *p; /* the flag's name */
    fprintf(stderr, "etwd: --%s: %s\n", bst.field, bst.msg);
    return 2;
  }
#ifdef SIGPIPE /* Windows has none: a closed socket is an error return there */
  signal(SIGPIPE, SIG_IGN);
#endif
  /* SIGINT/SIGTERM are blocked in every thread (threads inherit the mask) and taken
   * synchronously by the main thread with sigwait below. */
  sigset_t stopsigs;
  sigemptyset(&stopsigs);
  sigaddset(&stopsigs, SIGINT);
  sigaddset(&stopsigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopsigs, NULL);

  if (etw_mkdirs(cfg.api.state_dir)) {
    fprintf(stderr, "etwd: cannot create the state directory %s: %s\n", cfg.api.state_dir, strerror(errno));
    return 1;
  }
  chmod(cfg.api.state_dir, 0700);
  etw_mkdirs(cfg.api.data_dir);
  etw_mkdirs(cfg.api.manifest_upload_dir); /* the others of --manifests may be missing */
  etw_mkdirs(cfg.sink_secrets_dir);

  char err[512];
  struct etwd_server srv;
  memset(&srv, 0, sizeof srv);
  srv.cfg = &cfg.api;
  srv.tls_init = etwd_tls_init_ctx;
  srv.tls = !cfg.plain_http;
  snprintf(srv.cert, sizeof srv.cert, "%s", cfg.cert);
  snprintf(srv.key, sizeof srv.key, "%s", cfg.key);
  if (srv.tls && etwd_tls_prepare(cfg.api.state_dir, srv.cert, sizeof srv.cert, srv.key, sizeof srv.key,
                                  srv.fingerprint, err, sizeof err)) {
    fprintf(stderr, "etwd: TLS set-up failed: %s\n", err);
    return 1;
  }
  srv.auth = etwd_auth_open(cfg.api.state_dir, err, sizeof err);
  if (!srv.auth) {
    fprintf(stderr, "etwd: %s\n", err);
    return 1;
  }

  etw_host_set(cfg.host_name[0] ? cfg.host_name : NULL); /* checked by the parser */
  struct etw_core_config cc = {cfg.api.max_sessions, cfg.max_subscribers, cfg.sub_queue_events,
                               cfg.replay_kb * 1024, cfg.api.state_dir};
  struct etw_status st;
  etw_status_clear(&st);
  srv.core = etw_core_new(&cc, &st);
  if (!srv.core) {
    fprintf(stderr, "etwd: out of memory\n");
    return 1;
  }
  if (st.code) etwd_log(LOG_WARN, "backend unavailable", "detail=\"%.400s\"", st.msg);

  if (etwd_server_start(&srv, err, sizeof err)) {
    fprintf(stderr, "etwd: %s\n", err);
    etw_core_free(srv.core);
    etwd_auth_free(srv.auth);
    return 1;
  }
  char addrs[ETWD_MAX_LISTEN][128];
  int naddr = etwd_listen_split(cfg.api.listen, addrs, ETWD_MAX_LISTEN);
  printf("etwd %s listening on", ETWD_VERSION);
  for (int i = 0; i < naddr; i++)
    printf("%s %s://%s/", i ? "," : "", srv.tls ? "https" : "http", addrs[i]);
  printf("\n");
  if (srv.tls) printf("certificate SHA-256 fingerprint: %s\n", srv.fingerprint);
  /* `etwd tokens` alone reads the default state directory: name ours if it is another */
  struct etwd_config *dflt = calloc(1, sizeof *dflt);
  if (dflt) etwd_config_defaults(dflt);
  int other_dir = !dflt || strcmp(dflt->api.state_dir, cfg.api.state_dir);
  free(dflt);
  printf("tokens: %s (admin and reader; `etwd tokens%s%s` shows them)\n", etwd_auth_path(srv.auth),
         other_dir ? " --state-dir " : "", other_dir ? cfg.api.state_dir : "");
  if (cfg.print_token) {
    char adm[80];
    etwd_auth_secret(srv.auth, ROLE_ADMIN, adm, sizeof adm);
    printf("admin token: %s\n", adm);
  }
  fflush(stdout);
  etwd_log(LOG_INFO, "started", "listen=%s tls=%d state_dir=%s", cfg.api.listen, srv.tls, cfg.api.state_dir);

  int sig = 0;
  sigwait(&stopsigs, &sig);

  etwd_log(LOG_INFO, "stopping", "signal=%d sessions=%u", sig, etw_core_session_count(srv.core));
  etwd_server_stop(&srv);
  etw_core_free(srv.core); /* stops sessions and removes their OS objects */
  etwd_auth_free(srv.auth);
  etwd_log(LOG_INFO, "stopped", NULL);
  return 0;
}
