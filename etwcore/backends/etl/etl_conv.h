/* etl_conv.h — pieces `etwd convert` shares between its files (etl_convert.c: options, filters,
 * ndjson and CSV; etl_chrome.c: Chrome trace-event JSON). Single-threaded, CLI only. */
#ifndef ETWD_ETL_CONV_H
#define ETWD_ETL_CONV_H

#include <stdint.h>
#include <stdio.h>

#include "etwcore/etl.h"

/* One event as convert sees it after decoding: the writer's text is `"System":{…},"EventData":{…}}`
 * (or `,"Undecoded":…`); the spans below point into it. */
struct conv_ev {
  const struct etw_rec *rec;
  const struct etw_evref *ref;
  uint64_t seq;               /* the event's number in the input (1-based, before filtering) */
  const char *sys;            /* the System object (from its '{') */
  size_t sys_len;
  const char *data;           /* EventData's object, or NULL (Undecoded events) */
  size_t data_len;
  int64_t pid, tid;           /* Execution.ProcessID/ThreadID, -1 = null */
  int lx;                     /* a Linux event (a trace.dat's): rec has only time, cpu and id */
  const char *stack;          /* the event's "Stack" array (after EventData), or NULL */
  size_t stack_len;
};

/** conv_json_span - length of the JSON value at s[0] ('{', '[', '"' or a scalar); 0 if it does
 *  not end within @n bytes. */
size_t conv_json_span(const char *s, size_t n);
/** conv_json_member - the value of top-level member @key (a plain name) of the object at @obj
 *  (@n bytes); its span in *vlen. NULL if absent. */
const char *conv_json_member(const char *obj, size_t n, const char *key, size_t *vlen);
/** conv_json_int - the integer at @v (a number, or a string holding digits); -1 if none. */
int64_t conv_json_int(const char *v, size_t n);

/* Chrome trace-event JSON (etl_chrome.c; the mapping: docs/etl.md "Chrome trace-event JSON").
 * Events are kept in memory (at most etw_convert_chrome_max bytes of text) and written, sorted
 * by time, by conv_chrome_finish. */
struct conv_chrome;
struct conv_chrome *conv_chrome_new(void);
/** conv_chrome_event - adds one event; -1 when the memory maximum is reached. */
int conv_chrome_event(struct conv_chrome *c, const struct conv_ev *e);
/** conv_chrome_finish - writes the document to @out (@source: the input names) and frees @c. */
int conv_chrome_finish(struct conv_chrome *c, FILE *out, const char *source);
extern size_t etw_convert_chrome_max;

#endif
