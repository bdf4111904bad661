/* config.c — defaults, flags and config file (see config.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etwd_buildinfo.h" /* generated: ETWD_GIT_COMMIT, ETWD_BUILD_OPTIONS */
#include "etwcore/etl.h"
#include "etwcore/host.h"
#include "log.h"

void etwd_config_defaults(struct etwd_config *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->api.listen, sizeof c->api.listen, "127.0.0.1:8443");
  const char *sd = getenv("ETWD_STATE_DIR");
#ifdef _WIN32 /* default: %ProgramData%\etwd */
  char pd[600];
  snprintf(pd, sizeof pd, "%.580s\\etwd", getenv("ProgramData") ? getenv("ProgramData") : "C:\\ProgramData");
  if (!sd || !*sd) sd = pd;
#endif
  snprintf(c->api.state_dir, sizeof c->api.state_dir, "%s", sd && *sd ? sd : "/var/lib/etwd");
  c->log_level = LOG_INFO;
  c->api.max_sessions = 16;
  c->api.max_streams = 64;
  c->api.max_requests = 32;
  c->max_subscribers = 64;
  c->api.max_decodes = 4;
  c->api.max_body = 1 << 20;
  c->api.max_upload = (size_t)1 << 30;
  c->sub_queue_events = 65536;
  c->replay_kb = 16384;
  c->reader_nice = -10; /* ETW_LINUX_READER_NICE_DEFAULT (etwcore/linux.h) */
  c->reader_pinning = 1;
  c->api.io_timeout_s = 10;
  c->api.head_timeout_s = 5;
  c->api.max_connections = 0; /* ETWD_MAX_CONNECTIONS_DEFAULT, or more for large --max-streams/requests */
  c->api.max_per_address = 128;
  c->sink_spool_memory_mb = 512;
  c->sink_spool_disk_mb = 8192;
  c->stack_index_mb = 1024; /* ETW_STK_BUDGET_DEFAULT_MB (etwcore/decode/dec_stack.h) */
}

#ifdef _WIN32
#define STATE_DIR_HELP "                           or %%ProgramData%%\\etwd)\n"
#define MANIFESTS_HELP "                           (';' between directories on Windows)\n"
#else
#define STATE_DIR_HELP "                           or /var/lib/etwd); created with mode 0700\n"
#define MANIFESTS_HELP "                           a ':' inside a directory's name is written \\:\n"
#endif

void etwd_config_usage(const char *prog) {
  const char *base = strrchr(prog, '/'); /* the name without its directory, also for the man page */
  prog = base ? base + 1 : prog;
#ifdef _WIN32
  base = strrchr(prog, '\\');
  prog = base ? base + 1 : prog;
#endif
  printf(
      "Usage: %s [serve] [OPTIONS]        run the server\n"
      "       %s convert FILE... [--format ndjson|csv|chrome|folded] [-o OUT] [--manifests DIR[:DIR...]]\n"
      "                                   [filters] [--decode fast|reference]\n"
      "                                   [--stackwalk-events | --no-stacks] [--stack-index-mb N]\n"
      "                                   decode .etl files to JSON lines, CSV, Chrome JSON or\n"
      "                                   folded stacks (etwd convert --help)\n"
      "       %s tokens [--rotate] [--state-dir DIR]\n"
      "                                   show token ids/roles, or replace both tokens\n"
      "       %s selftest [--json] [--state-dir DIR]\n"
      "                                   check step by step that tracing and HTTPS work here\n"
      "       %s remote --url URL --token-file F [--fingerprint SHA256] COMMAND ...\n"
      "                                   drive another etwd (etwd remote --help)\n"
      "       %s service install [OPTIONS] | uninstall | start | stop\n"
      "                                   Windows: etwd as a service (Linux: the systemd unit)\n"
      "\n"
      "Server options (also accepted as `name = value` lines in --config FILE):\n"
      "  --listen HOST:PORT[,HOST:PORT...]\n"
      "                           addresses to listen on, all HTTPS (default 127.0.0.1:8443)\n"
      "  --insecure-http          plain HTTP instead of HTTPS on every address; refused unless\n"
      "                           every HOST is loopback\n"
      "  --state-dir DIR          certificate, tokens and recordings (default $ETWD_STATE_DIR\n"
      STATE_DIR_HELP
      "  --data-dir DIR           ETL files served under /api/v1/files (default STATE/files)\n"
      "  --manifests DIR[:DIR...] provider manifest XML files; of several directories the first\n"
      "                           listed wins, uploads go to the last (default\n"
      "                           STATE/manifests-next:STATE/manifests)\n"
      MANIFESTS_HELP
      "  --cert FILE --key FILE   PEM certificate chain and private key (default: a self-signed\n"
      "                           certificate generated on first run into the state dir)\n"
      "  --log-level LEVEL        error | warn | info | debug (default info)\n"
      "  --host-name NAME         the host name events carry (System.Host) and sinks publish\n"
      "                           under; 1-63 of A-Z a-z 0-9 . _ - (default the machine's name)\n"
      "  --allow-origin ORIGIN    extra allowed WebSocket Origin, e.g. https://dash.example:443\n"
      "                           (repeatable; same-host origins are always allowed)\n"
      "  --max-sessions N         concurrent sessions (default 16)\n"
      "  --max-streams N          concurrent WebSocket/ndjson clients (default 64; the last\n"
      "                           eighth, at least 1 when N >= 3, is kept for the admin token)\n"
      "  --max-requests N         concurrent REST requests (default 32; a quarter of them is\n"
      "                           kept for the admin token: reader requests get 429 earlier)\n"
      "  --max-decodes N          concurrent file decodes, GET /api/v1/files/NAME/events\n"
      "                           (default 4; they take no session slot)\n"
      "  --max-subscribers N      subscribers per session (default 64)\n"
      "  --max-body BYTES         largest JSON request body (default 1048576)\n"
      "  --max-upload BYTES       largest ETL upload (default 1073741824)\n"
      "  --queue-events N         per-subscriber queue, in events (default 65536)\n"
      "  --replay-kb N            per-session replay window for ?from=SEQ (default 16384)\n"
      "  --io-timeout S           a write or read that makes no progress for S seconds ends the\n"
      "                           connection (default 10): a stream client that stops reading\n"
      "                           (it gets gap records until then), a stalled upload; 1..3600\n"
      "                           (long values let slow clients hold workers that long)\n"
      "  --head-timeout S         the TLS handshake and each request head must each arrive within\n"
      "                           S seconds (default 5; at most --io-timeout): a peer cannot hold\n"
      "                           a connection longer than that before it has authenticated\n"
      "  --max-connections N      open connections in all, one worker thread each (default 1024,\n"
      "                           at least --max-streams + --max-requests + 4); more are refused\n"
      "  --max-connections-per-address N\n"
      "                           open connections from one client address (default 128)\n"
      "  --reader-nice N          Linux: nice value of the per-CPU reader threads, -20..19\n"
      "                           (default -10: readers keep up under a CPU-saturating workload;\n"
      "                           0 leaves them at etwd's own priority)\n"
      "  --reader-pinning yes|no  Linux: pin the reader of CPU n to CPU n (default yes)\n"
      "  --decode fast|reference  ETL files and Windows events: fast (default) uses the decoder's\n"
      "                           plans and memos and the reader's fast record paths;\n"
      "                           reference only the plain walkers (same output, slower)\n"
      "  --stack-index-mb N       ETL replays, file decodes and Windows live: MiB all stack\n"
      "                           indexes (one per reader: per replay subscriber) may hold\n"
      "                           together (default 1024); an index that finds none grows no\n"
      "                           more: later events of its pass go without their stacks,\n"
      "                           counted (stats stack_walks_dropped, /metrics)\n"
      "  --sink-secrets-dir DIR   the only directory whose files a sink's creds, tls_ca,\n"
      "                           tls_cert, tls_key may name (default STATE/sink-secrets)\n"
      "  --sink-spool-memory-mb N, --sink-spool-disk-mb N\n"
      "                           caps on the sum of all sessions' sink spools in memory and\n"
      "                           on disk (default 512, 8192); beyond them events are dropped\n"
      "                           and counted as loss sink\n"
      "  --print-token            print the admin token at start-up\n"
      "  --config FILE            read options from FILE\n"
      "  -h, --help               this text\n"
      "  --version                the version, the git commit and the build options\n"
      "\n"
      "On start etwd prints the URL, the certificate's SHA-256 fingerprint and the token file.\n"
      "Stop it with Ctrl-C or SIGTERM: sessions are stopped and their kernel objects removed.\n",
      prog, prog, prog, prog, prog, prog);
}

/* the host part of one HOST:PORT entry is loopback: a dotted 127.x.x.x address, localhost or
 * [::1] (a name that merely starts with "127." is not: civetweb would resolve it) */
int etwd_listen_is_loopback(const char *l) {
  const char *colon = strrchr(l, ':');
  if (!colon) return 0;
  size_t hl = (size_t)(colon - l);
  if ((hl == 9 && !strncmp(l, "localhost", 9)) || (hl == 5 && !strncmp(l, "[::1]", 5))) return 1;
  /* 127.a.b.c, each part 0..255 in decimal digits only */
  unsigned part[4];
  int used = 0;
  if (hl > 15 || strspn(l, "0123456789.") < hl ||
      sscanf(l, "%3u.%3u.%3u.%3u%n", &part[0], &part[1], &part[2], &part[3], &used) != 4)
    return 0;
  return (size_t)used == hl && part[0] == 127 && part[1] < 256 && part[2] < 256 && part[3] < 256;
}

/* --listen: a comma-separated list of HOST:PORT (no spaces, no civetweb suffixes like "s") */
static int check_listen(const char *v) {
  char e[ETWD_MAX_LISTEN][128];
  int n = etwd_listen_split(v, e, ETWD_MAX_LISTEN);
  if (n < 0) {
    fprintf(stderr, "etwd: --listen: expected HOST:PORT[,HOST:PORT...] (at most %d), got \"%s\"\n",
            ETWD_MAX_LISTEN, v);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const char *colon = strrchr(e[i], ':');
    const char *port = colon ? colon + 1 : "";
    long pn = strspn(port, "0123456789") == strlen(port) && *port && strlen(port) <= 5 ? atol(port) : 0;
    if (!colon || colon == e[i] || pn < 1 || pn > 65535) {
      fprintf(stderr, "etwd: --listen: expected HOST:PORT with a port 1..65535, got \"%s\"\n", e[i]);
      return -1;
    }
  }
  return 0;
}

static int parse_u(const char *name, const char *v, unsigned long long lo, unsigned long long hi,
                   unsigned long long *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || !*v || *end || v[0] == '-' || x < lo || x > hi) {
    fprintf(stderr, "etwd: --%s: expected an integer between %llu and %llu, got \"%s\"\n", name, lo,
            hi, v);
    return -1;
  }
  *out = x;
  return 0;
}

static int copy(char *dst, size_t n, const char *name, const char *v) {
  if (strlen(v) >= n) {
    fprintf(stderr, "etwd: --%s: value too long\n", name);
    return -1;
  }
  memcpy(dst, v, strlen(v) + 1);
  return 0;
}

/* --manifests is a search path (the decoder's, dec_mpath.c): uploads and the manifest list use
 * its last directory; 0, or -1 (said) when it names none */
static int manifest_upload_dir(struct etwd_config *c) {
  char **dirs;
  int n = etw_mpath_dirs(c->api.manifest_dir, &dirs);
  if (n <= 0) {
    fprintf(stderr, "etwd: --manifests names no directory\n");
    return -1;
  }
  snprintf(c->api.manifest_upload_dir, sizeof c->api.manifest_upload_dir, "%s", dirs[n - 1]);
  for (int i = 0; i < n; i++) free(dirs[i]);
  free(dirs);
  return 0;
}

/* the default --manifests, STATE/manifests-next then STATE/manifests, each escaped as one
 * directory (a state directory such as /tmp/a:b is not split at its ':'); 0, or -1 (said) */
static int default_manifests(struct etwd_config *c) {
  char next[sizeof c->api.state_dir + 32], main_dir[sizeof c->api.state_dir + 32];
  snprintf(next, sizeof next, "%s/manifests-next", c->api.state_dir);
  snprintf(main_dir, sizeof main_dir, "%s/manifests", c->api.state_dir);
  c->api.manifest_dir[0] = 0;
  if (etw_mpath_append(c->api.manifest_dir, sizeof c->api.manifest_dir, next) ||
      etw_mpath_append(c->api.manifest_dir, sizeof c->api.manifest_dir, main_dir)) {
    c->api.manifest_dir[0] = 0;
#ifdef _WIN32
    fprintf(stderr, "etwd: --state-dir is too long or contains ';' for the default --manifests: give --manifests\n");
#else
    fprintf(stderr, "etwd: --state-dir is too long for the default --manifests: give --manifests\n");
#endif
    return -1;
  }
  return 0;
}

/* apply one option; returns 0, -1 on error */
static int apply(struct etwd_config *c, const char *name, const char *v) {
  unsigned long long x;
  if (!strcmp(name, "listen")) {
    if (check_listen(v)) return -1;
    return copy(c->api.listen, sizeof c->api.listen, name, v);
  }
  if (!strcmp(name, "state-dir")) return copy(c->api.state_dir, sizeof c->api.state_dir, name, v);
  if (!strcmp(name, "data-dir")) return copy(c->api.data_dir, sizeof c->api.data_dir, name, v);
  if (!strcmp(name, "manifests")) return copy(c->api.manifest_dir, sizeof c->api.manifest_dir, name, v);
  if (!strcmp(name, "cert")) return copy(c->cert, sizeof c->cert, name, v);
  if (!strcmp(name, "sink-secrets-dir")) return copy(c->sink_secrets_dir, sizeof c->sink_secrets_dir, name, v);
  if (!strcmp(name, "host-name")) {
    if (!etw_host_valid(v)) {
      fprintf(stderr, "etwd: --host-name must be 1-63 characters of A-Z a-z 0-9 . _ -, got \"%s\"\n", v);
      return -1;
    }
    return copy(c->host_name, sizeof c->host_name, name, v);
  }
  if (!strcmp(name, "key")) return copy(c->key, sizeof c->key, name, v);
  if (!strcmp(name, "log-level")) {
    int l = etwd_log_parse_level(v);
    if (l < 0) {
      fprintf(stderr, "etwd: --log-level: expected error, warn, info or debug, got \"%s\"\n", v);
      return -1;
    }
    c->log_level = l;
    return 0;
  }
  if (!strcmp(name, "allow-origin")) {
    if (c->api.n_origins >= ETWD_MAX_ORIGINS) {
      fprintf(stderr, "etwd: --allow-origin: at most %d origins\n", ETWD_MAX_ORIGINS);
      return -1;
    }
    return copy(c->api.origins[c->api.n_origins++], sizeof c->api.origins[0], name, v);
  }
  if (!strcmp(name, "reader-nice")) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || !*v || *end || n < -20 || n > 19) {
      fprintf(stderr, "etwd: --reader-nice: expected an integer between -20 and 19, got \"%s\"\n", v);
      return -1;
    }
    c->reader_nice = (int)n;
    return 0;
  }
  if (!strcmp(name, "decode")) /* checked and applied by etw_backends_configure (main.c) */
    return copy(c->decode, sizeof c->decode, name, v);
  if (!strcmp(name, "reader-pinning")) {
    int on = !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1");
    if (!on && strcmp(v, "no") && strcmp(v, "false") && strcmp(v, "0")) {
      fprintf(stderr, "etwd: --reader-pinning: expected yes or no, got \"%s\"\n", v);
      return -1;
    }
    c->reader_pinning = on;
    return 0;
  }
#define U(opt, field, lo, hi)                          \
  if (!strcmp(name, opt)) {                            \
    if (parse_u(name, v, lo, hi, &x)) return -1;       \
    c->field = (__typeof__(c->field))x;                \
    return 0;                                          \
  }
  U("max-sessions", api.max_sessions, 1, 1024)
  U("max-streams", api.max_streams, 1, 4096)
  U("max-requests", api.max_requests, 1, 4096)
  U("max-subscribers", max_subscribers, 1, 4096)
  U("max-decodes", api.max_decodes, 1, 1024)
  U("max-body", api.max_body, 1024, 1ull << 30)
  U("max-upload", api.max_upload, 1024, 1ull << 40)
  U("queue-events", sub_queue_events, 64, 1u << 26)
  U("replay-kb", replay_kb, 0, 1u << 22)
  U("io-timeout", api.io_timeout_s, 1, 3600)
  U("head-timeout", api.head_timeout_s, 1, 600)
  U("max-connections", api.max_connections, 8, 16384)
  U("max-connections-per-address", api.max_per_address, 1, 16384)
  U("sink-spool-memory-mb", sink_spool_memory_mb, 0, 1u << 20)
  U("sink-spool-disk-mb", sink_spool_disk_mb, 0, 1u << 30)
  U("stack-index-mb", stack_index_mb, 1, 1u << 30)
#undef U
  fprintf(stderr, "etwd: unknown option --%s (see --help)\n", name);
  return -1;
}

static int is_flag(const char *n) {
  return !strcmp(n, "insecure-http") || !strcmp(n, "print-token");
}

static int apply_flag(struct etwd_config *c, const char *n, const char *v) {
  int on = !v || !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1");
  if (v && !on && strcmp(v, "no") && strcmp(v, "false") && strcmp(v, "0")) {
    fprintf(stderr, "etwd: %s: expected yes or no, got \"%s\"\n", n, v);
    return -1;
  }
  if (!strcmp(n, "insecure-http")) c->plain_http = on;
  if (!strcmp(n, "print-token")) c->print_token = on;
  return 0;
}

static int load_file(struct etwd_config *c, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "etwd: --config %s: %s\n", path, strerror(errno));
    return -1;
  }
  char line[2048];
  int ln = 0, rc = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    char *eq = strchr(p, '=');
    char *e = p + strlen(p);
    while (e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ')) *--e = 0;
    char *key = p, *val = NULL;
    if (eq) {
      *eq = 0;
      val = eq + 1;
      while (*val == ' ' || *val == '\t') val++;
      char *k = eq;
      while (k > key && (k[-1] == ' ' || k[-1] == '\t')) *--k = 0;
    }
    if (is_flag(key)) {
      if (apply_flag(c, key, val)) rc = -1;
    } else if (!val) {
      fprintf(stderr, "etwd: %s:%d: expected `name = value`\n", path, ln);
      rc = -1;
    } else if (!strcmp(key, "config")) {
      fprintf(stderr, "etwd: %s:%d: config files cannot include others\n", path, ln);
      rc = -1;
    } else if (apply(c, key, val)) {
      fprintf(stderr, "etwd: (in %s line %d)\n", path, ln);
      rc = -1;
    }
    if (rc) break;
  }
  fclose(f);
  return rc;
}

int etwd_config_parse(struct etwd_config *c, int argc, char **argv, int from) {
  /* config file first, so that command-line flags win */
  for (int i = from; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) {
      if (load_file(c, argv[i + 1])) return -1;
    } else if (!strncmp(argv[i], "--config=", 9)) {
      if (load_file(c, argv[i] + 9)) return -1;
    }
  }
  for (int i = from; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      etwd_config_usage(argv[0]);
      return 1;
    }
    if (!strcmp(a, "--version")) {
      printf("etwd %s\ncommit %s\n%s\n", ETWD_VERSION, ETWD_GIT_COMMIT, ETWD_BUILD_OPTIONS);
      return 1;
    }
    if (strncmp(a, "--", 2)) {
      fprintf(stderr, "etwd: unexpected argument \"%s\" (see --help)\n", a);
      return -1;
    }
    char name[64];
    const char *eq = strchr(a + 2, '='), *val = NULL;
    size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    if (nl >= sizeof name) {
      fprintf(stderr, "etwd: unknown option %s\n", a);
      return -1;
    }
    memcpy(name, a + 2, nl);
    name[nl] = 0;
    if (eq) val = eq + 1;
    if (is_flag(name)) {
      if (apply_flag(c, name, val)) return -1;
      continue;
    }
    if (!val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "etwd: --%s needs a value (see --help)\n", name);
        return -1;
      }
      val = argv[++i];
    }
    if (!strcmp(name, "config")) continue;
    if (apply(c, name, val)) return -1;
  }
  if (!c->api.data_dir[0]) snprintf(c->api.data_dir, sizeof c->api.data_dir, "%.1000s/files", c->api.state_dir);
  if (!c->api.manifest_dir[0] && default_manifests(c)) return -1;
  if (manifest_upload_dir(c)) return -1;
  if (!c->sink_secrets_dir[0])
    snprintf(c->sink_secrets_dir, sizeof c->sink_secrets_dir, "%.1000s/sink-secrets", c->api.state_dir);
  if (!!c->cert[0] != !!c->key[0]) {
    fprintf(stderr, "etwd: --cert and --key must be given together\n");
    return -1;
  }
  if (c->api.head_timeout_s > c->api.io_timeout_s) c->api.head_timeout_s = c->api.io_timeout_s;
  uint32_t need = c->api.max_streams + c->api.max_requests + 4;
  if (!c->api.max_connections) {
    c->api.max_connections = need + 64 > ETWD_MAX_CONNECTIONS_DEFAULT ? need + 64 : ETWD_MAX_CONNECTIONS_DEFAULT;
  } else if (c->api.max_connections < need) {
    fprintf(stderr, "etwd: --max-connections %u is below --max-streams + --max-requests + 4 = %u\n",
            c->api.max_connections, need);
    return -1;
  }
  if (c->plain_http) { /* every address of the list: plain HTTP only where no one else can listen */
    char e[ETWD_MAX_LISTEN][128];
    int n = etwd_listen_split(c->api.listen, e, ETWD_MAX_LISTEN);
    for (int i = 0; i < n; i++)
      if (!etwd_listen_is_loopback(e[i])) {
        fprintf(stderr,
                "etwd: --insecure-http is only allowed on loopback addresses (127.x.x.x, localhost, "
                "[::1]); %s is not. Use HTTPS (the default) for other addresses.\n",
                e[i]);
        return -1;
      }
  }
  return 0;
}
