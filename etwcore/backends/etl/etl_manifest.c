/* etl_manifest.c — see etwcore/manifest.h. */
#include "etwcore/manifest.h"

#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"

int etw_manifest_check(const char *xml, size_t n) {
  if (!xml || !n || n > ETW_MANIFEST_MAX || n >= DEC_MAX_MANIFEST) return -1;
  char *copy = malloc(n + 1);
  struct etw_decoder *d = etw_decoder_new(NULL);
  int rc = -1;
  if (copy && d) {
    memcpy(copy, xml, n);
    copy[n] = 0;
    rc = dec_manifest_load(d, copy, n, NULL) == 0 ? 0 : -1;
  }
  etw_decoder_free(d);
  free(copy);
  return rc;
}
