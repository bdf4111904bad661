/* bench_bare_civetweb.c — the baseline for bench/rest.sh: a bare civetweb (same build, same TLS
 * settings, same thread count) answering a constant JSON document with one write and no auth.
 * Usage: bench_bare_civetweb PORT CERT KEY */
#include <civetweb.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_cert, *g_key;

static int init_ssl(void *ctx, void *ud) {
  (void)ud;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, g_cert) != 1) return -1;
  if (SSL_CTX_use_PrivateKey_file(ctx, g_key, SSL_FILETYPE_PEM) != 1) return -1;
  return 1;
}

static int handler(struct mg_connection *c, void *cb) {
  (void)cb;
  static const char resp[] =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
      "Cache-Control: no-store\r\n\r\n{\"status\":\"ok\"}";
  mg_write(c, resp, sizeof resp - 1);
  return 200;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT CERT KEY\n", argv[0]);
    return 2;
  }
  g_cert = argv[2];
  g_key = argv[3];
  char ports[64];
  snprintf(ports, sizeof ports, "127.0.0.1:%ss", argv[1]);
  const char *opts[] = {"listening_ports", ports, "num_threads", "100", "tcp_nodelay", "1",
                        "enable_keep_alive", "yes", "ssl_protocol_version", "4", NULL};
  struct mg_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.init_ssl = init_ssl;
  mg_init_library(MG_FEATURES_TLS);
  struct mg_context *ctx = mg_start(&cb, NULL, opts);
  if (!ctx) return 1;
  mg_set_request_handler(ctx, "/", handler, NULL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigprocmask(SIG_BLOCK, &s, NULL);
  int sig;
  sigwait(&s, &sig);
  mg_stop(ctx);
  return 0;
}
