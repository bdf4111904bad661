/* etwd_convert.c — etwd-convert: `etwd convert` without the server (no OpenSSL, civetweb or
 * tracefs), built by ETWD_PORTABLE_CORE=ON (cmake/portable_core.cmake) to run the conversions on
 * other CPUs (scripts/test-arm64.sh). Takes the same arguments as etwd, `convert` first or not. */
#include <string.h>

#include "etwcore/etl.h"

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "convert")) return etw_convert_main(argc - 1, argv + 1);
  return etw_convert_main(argc, argv);
}
