/* win_backend.c — placeholder while the real ETW backend is written (replaced below). */
#include "etwcore/backend.h"

static enum etw_err win_init(struct etw_status *st) {
  return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "the win backend is not finished");
}

const struct etw_backend etw_backend_win = {.name = "win", .caps = 0, .init = win_init};
