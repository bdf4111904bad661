/* err.c — names and messages of the etw error space (see err.h). */
#include "etwcore/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {
#define N_(e, n, m) n,
    ETW_ERR_MAP(N_)
#undef N_
};
static const char *const msgs[] = {
#define M_(e, n, m) m,
    ETW_ERR_MAP(M_)
#undef M_
};

const char *etw_err_name(enum etw_err e) {
  return (unsigned)e < ETW_E__COUNT ? names[e] : "internal-error";
}

const char *etw_err_msg(enum etw_err e) {
  return (unsigned)e < ETW_E__COUNT ? msgs[e] : "internal error";
}

void etw_status_clear(struct etw_status *st) {
  if (!st) return;
  st->code = ETW_E_OK;
  st->field[0] = 0;
  st->msg[0] = 0;
}

enum etw_err etw_fail(struct etw_status *st, enum etw_err code, const char *field,
                      const char *fmt, ...) {
  if (!st) return code;
  st->code = code;
  snprintf(st->field, sizeof st->field, "%s", field ? field : "");
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
  } else {
    snprintf(st->msg, sizeof st->msg, "%s", etw_err_msg(code));
  }
  return code;
}
