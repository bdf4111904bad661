/* web_assets.h — the web page embedded at build time (cmake/embed_web.cmake). */
#ifndef ETWD_WEB_ASSETS_H
#define ETWD_WEB_ASSETS_H
#include <stddef.h>
struct etw_web_asset {
  const char *path; /* "/index.html" */
  const unsigned char *data;
  size_t len;
};
extern const struct etw_web_asset etw_web_assets[]; /* terminated by {NULL} */
#endif
