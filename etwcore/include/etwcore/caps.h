/* caps.h — what each backend honours, from ONE table: every session-spec member (top-level and
 * per provider) and every stream parameter, with the capability bits (backend.h) a backend needs
 * to honour it. Session creation and PATCH refuse (400, naming the member) what the chosen
 * backend cannot honour unless it is given at its default value (so a spec copied from
 * GET /sessions/{id} is always accepted back); GET /api/v1/backends lists the same table, and
 * the stream's query parser knows only the stream parameters listed here.
 * Adding a spec member or stream parameter = adding a row here. */
#ifndef ETWCORE_CAPS_H
#define ETWCORE_CAPS_H

#include "etwcore/backend.h"

enum etw_member_kind { ETW_MEMBER_SPEC, ETW_MEMBER_PROVIDER, ETW_MEMBER_STREAM };

struct etw_member {
  enum etw_member_kind kind;
  const char *name;    /* JSON member name (in the spec or in a provider) or query parameter */
  unsigned need;       /* ETW_CAP_* bits a backend needs to honour it (all of them); 0 = every one */
  const char *dflt;    /* JSON text of the default, accepted by every backend; NULL = none */
  const char *example; /* JSON text of a non-default value (documentation; the e2e test sends it) */
  /* 1 when the parsed spec gives the member a non-default value; NULL for stream parameters */
  int (*given)(const struct etw_session_spec *s, const struct etw_provider_spec *p);
  const char *doc;
};

/** etw_members - the table, terminated by an entry whose name is NULL. */
const struct etw_member *etw_members(void);

/** etw_caps_check_spec - ETW_E_INVALID naming (st->field) the first member of @s, top-level or
 *  /providers/N/<member>, that backend @b cannot honour; ETW_E_OK when it honours all. */
enum etw_err etw_caps_check_spec(const struct etw_backend *b, const struct etw_session_spec *s,
                                 struct etw_status *st);
/** etw_caps_check_provider - the same for one provider; @ptr is its JSON pointer. */
enum etw_err etw_caps_check_provider(const struct etw_backend *b, const struct etw_provider_spec *p,
                                     const char *ptr, struct etw_status *st);

/** etw_stream_param_known - 1 if @name[0..n) is a stream parameter of the table. */
int etw_stream_param_known(const char *name, size_t n);
/** etw_stream_param_refused - the table's row of stream parameter @name[0..n) when backend @b
 *  cannot honour it (the stream then refuses it with 400), else NULL. */
const struct etw_member *etw_stream_param_refused(const struct etw_backend *b, const char *name, size_t n);

/** etw_backend_caps_json - write `"capabilities":[…],"provider_strings":[…],"members":[…],
 *  "stream_parameters":[…],"limits":{…}` (members of an object the caller opens and closes). */
void etw_backend_caps_json(const struct etw_backend *b, struct etw_jw *w);

#endif
