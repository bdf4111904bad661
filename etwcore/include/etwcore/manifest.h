/* manifest.h — checking a provider manifest before it is installed (POST /api/v1/manifests). */
#ifndef ETWCORE_MANIFEST_H
#define ETWCORE_MANIFEST_H

#include <stddef.h>

/** ETW_MANIFEST_MAX - the largest manifest XML accepted (the decoder's own bound). */
#define ETW_MANIFEST_MAX ((size_t)64 << 20)

/**
 * etw_manifest_check - 0 if @xml (@n bytes, need not be NUL-terminated) is an instrumentation
 * manifest the decoder loads (at least one provider), else -1. Parses it with the decoder's own
 * manifest parser into a throw-away decoder. Any thread.
 */
int etw_manifest_check(const char *xml, size_t n);

#endif
