/* spec.h — parse and validate the generic part of a session spec from its JSON body.
 * Backend-specific checks (does the provider exist, is the filter valid) happen in the
 * backend's open(). */
#ifndef ETWCORE_SPEC_H
#define ETWCORE_SPEC_H

#include <cjson/cJSON.h>

#include "etwcore/backend.h"

/**
 * etw_spec_parse - fill @out from @body (a JSON object). On error returns the code and sets
 * @st (field = JSON pointer of the offending member). @out must be freed with etw_spec_free
 * in every case. File names in "files" are copied verbatim: the API layer resolves them.
 */
enum etw_err etw_spec_parse(const cJSON *body, struct etw_session_spec *out, struct etw_status *st);
/**
 * etw_provider_parse - one provider (also used by PATCH): a JSON object, or a provider string
 * read by @backend's rules — "linux": "system", "system:*", "system:event[,event…]"; any other:
 * goetw's "Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]]" (Name or {GUID}; EventIDs
 * separated by ',' or ';'; numbers decimal or 0x hex; empty fields keep their defaults).
 * @ptr prefixes error fields (a malformed string is reported at @ptr itself).
 */
enum etw_err etw_provider_parse(const cJSON *o, const char *backend, struct etw_provider_spec *p,
                                const char *ptr, struct etw_status *st);
void etw_provider_free(struct etw_provider_spec *p);
void etw_spec_free(struct etw_session_spec *s);
/** etw_spec_json - write the spec back as a JSON object (what GET /sessions/{id} shows). */
void etw_spec_json(const struct etw_session_spec *s, struct etw_jw *w);

#endif
