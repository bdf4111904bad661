/* fuzz_request.c — libFuzzer over everything the server parses from a request before any
 * handler logic: the path (route matching + parameter decoding), the query string (subscriber
 * filters), the JSON body (session spec and PATCH provider specs) and data-directory file names.
 * Input layout: path \0 query \0 body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "etwcore/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 3);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = buf[size + 1] = buf[size + 2] = 0;
  const char *path = buf;
  const char *query = path + strlen(path) + 1;
  if (query > buf + size) query = buf + size;
  const char *body = query + strlen(query) + 1;
  if (body > buf + size + 1) body = buf + size + 1;

  static const char *const methods[] = {"GET", "POST", "PATCH", "DELETE", "PUT", "HEAD"};
  char params[ETWD_MAX_PARAMS][256], allow[128];
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    (void)etwd_route_find(methods[i], path, params, allow, sizeof allow);
  (void)etwd_file_name_valid(path);

  struct etw_sub_filter f;
  unsigned long long from;
  char err[200];
  (void)etwd_sub_filter_from_query(query, &f, &from, err, sizeof err);
  char field[80], qerr[512];
  for (const struct etwd_route *rt = etwd_routes; rt->method; rt++)
    (void)etwd_query_unknown(rt, query, field, sizeof field, qerr, sizeof qerr);

  char ptr[200];
  (void)etwd_json_find_nul(body, strlen(body), ptr, sizeof ptr);
  size_t blen = body < buf + size ? size - (size_t)(body - buf) : 0; /* body may start past the end */
  (void)etwd_json_find_nul(body, blen, ptr, 16); /* raw NULs, short room */
  cJSON *j = cJSON_ParseWithLength(body, strlen(body));
  if (j) {
    struct etw_session_spec spec;
    struct etw_status st;
    etw_spec_parse(j, &spec, &st);
    struct etw_jw w;
    etw_jw_init(&w, 1 << 20);
    etw_spec_json(&spec, &w);
    etw_jw_free(&w);
    etw_spec_free(&spec);
    struct etw_provider_spec p;
    etw_provider_parse(j, (size & 1) ? "linux" : "win", &p, "/enable/0", &st);
    etw_provider_free(&p);
    cJSON_Delete(j);
  }
  free(buf);
  return 0;
}
