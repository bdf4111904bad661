/* config.h — etwd's configuration: defaults, command-line flags and an optional config file
 * (`key = value` lines using the long flag names; flags given on the command line win). */
#ifndef ETWD_CONFIG_H
#define ETWD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "api.h" /* struct etwd_api_config: the part of the configuration the REST layer reads */

#define ETWD_MAX_CONNECTIONS_DEFAULT 1024

struct etwd_config {
  struct etwd_api_config api; /* listen, dirs, limits, origins, time-outs */
  int plain_http;        /* --insecure-http: only accepted on loopback */
  char cert[1024], key[1024]; /* empty = generated self-signed in state_dir */
  int log_level;
  uint32_t max_subscribers;
  uint32_t sub_queue_events;
  size_t replay_kb;
  int print_token; /* print the admin token at start-up (README's run command) */
  int reader_nice; /* Linux: nice value of the per-CPU reader threads (-20..19; 0 = unchanged) */
  int reader_pinning; /* Linux: 1 = the reader of CPU n runs only on CPU n */
  char decode[16];    /* --decode fast|reference ("" = fast) */
  char host_name[64];        /* --host-name: System.Host and sink subjects (empty = machine's name) */
  char sink_secrets_dir[1024]; /* sinks' creds/tls_* files must be in it (default <state>/sink-secrets) */
  uint64_t sink_spool_memory_mb, sink_spool_disk_mb; /* caps on the sum of all sinks' spools */
  uint64_t stack_index_mb; /* --stack-index-mb: all ETL/Windows stack indexes together */
};

/** etwd_config_defaults - fill @c with defaults (state dir from $ETWD_STATE_DIR or /var/lib/etwd). */
void etwd_config_defaults(struct etwd_config *c);
/**
 * etwd_config_parse - apply argv[from..argc) (and --config FILE) to @c.
 * Returns 0, 1 when --help/--version was printed (exit 0), or -1 after printing a clear error
 * to stderr (exit 2).
 */
int etwd_config_parse(struct etwd_config *c, int argc, char **argv, int from);
/** etwd_config_usage - the --help text. */
void etwd_config_usage(const char *prog);
/** etwd_listen_is_loopback - 1 if the host of one HOST:PORT is 127.0.0.0/8, ::1 or localhost. */
int etwd_listen_is_loopback(const char *listen);

#endif
