/* test_dec_known.c — the built-in table of well-known provider GUIDs (dec_known.c): every entry
 * is found by its own GUID (so the table is sorted for the binary search), GUIDs are in
 * etw_format_guid's form, names are registered-name shaped, and other GUIDs are not found. The
 * decoder's use of it (Provider names without manifests, both decode modes) is
 * tests/e2e/test_known_providers.py. */
#include <ctype.h>

#include "decode.h"
#include "t.h"

int main(void) {
  const char *g[256], *nm[256];
  size_t n = dec_known_providers(g, nm, 256);
  CHECK(n >= 40 && n <= 256);
  for (size_t i = 0; i < n && i < 256; i++) {
    CHECK_STR(dec_known_provider(g[i]), nm[i]);
    CHECK(strlen(g[i]) == 38 && g[i][0] == '{' && g[i][37] == '}');
    for (const char *c = g[i]; *c; c++) CHECK(!isupper((unsigned char)*c));
    CHECK(nm[i][0] && !strchr(nm[i], '{'));
    if (i) CHECK(strcmp(g[i - 1], g[i]) < 0);
  }
  CHECK(dec_known_provider("{00000000-0000-0000-0000-000000000000}") == NULL);
  CHECK(dec_known_provider("{A0C1853B-5C40-4B15-8766-3CF1C58F985A}") == NULL); /* not its form */
  CHECK_STR(dec_known_provider("{a0c1853b-5c40-4b15-8766-3cf1c58f985a}"), "Microsoft-Windows-PowerShell");
  CHECK_STR(dec_known_provider("{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}"), "Microsoft-Windows-Kernel-Process");
  T_DONE();
}
