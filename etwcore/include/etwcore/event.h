/* event.h — the event model shared by every backend, and the batches events travel in.
 *
 * Each event is encoded to JSON exactly once, by the backend's reader thread, into a batch.
 * The encoded bytes are the event object *without* its opening `{"seq":N,` — the sender adds
 * that prefix, because sequence numbers are assigned when the batch is published to the hub
 * (so the hub's order is the seq order even with one reader thread per CPU). Beside the bytes,
 * an `etw_evref` keeps the header fields that subscriber filters test, so fan-out never
 * re-decodes.
 *
 * Shape (design.md §4; documented in the OpenAPI document):
 *   {"seq":N,"System":{"Provider":{"Name":..,"Guid":..},"EventID":..,"Version":..,"Level":..,
 *    "Task":..,"Opcode":..,"Keywords":"0x..","TimeCreated":"…Z","EventName":..,
 *    "Execution":{"ProcessID":..,"ThreadID":..,"ProcessorID":..},"Correlation":{..}},
 *    "EventData":{...}}
 * Undecodable events carry "Undecoded":{"Reason":..,"Payload":"<base64>"} instead of EventData.
 */
#ifndef ETWCORE_EVENT_H
#define ETWCORE_EVENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "etwcore/jw.h"

/** Header fields kept beside an encoded event (strings are interned: etw_intern()). */
struct etw_evref {
  uint32_t off, len;    /* encoded bytes in batch->data.buf */
  const char *provider; /* interned provider name, never NULL */
  const char *name;     /* interned event name or NULL */
  int64_t ts_ns;        /* UTC nanoseconds since 1970 */
  uint32_t pid, tid;
  uint16_t event_id;
  uint8_t level;
  uint16_t cpu; /* processor number (ETW: up to 2,047; Linux: any the watermarks take) */
};

/** A batch of encoded events. Reference-counted: the hub and every subscriber queue that
 *  holds it own one reference; the last etw_batch_unref frees it. Immutable once published. */
struct etw_batch {
  atomic_int refs;
  uint64_t first_seq; /* seq of ev[0]; assigned by etw_hub_publish */
  uint32_t n, cap;
  struct etw_evref *ev;
  struct etw_jw data;
};

/** etw_batch_new - empty batch for up to @cap events and @max_bytes of JSON; NULL on ENOMEM. */
struct etw_batch *etw_batch_new(uint32_t cap, size_t max_bytes);
/** etw_batch_ref / etw_batch_unref - take / drop a reference (thread-safe). */
void etw_batch_ref(struct etw_batch *b);
void etw_batch_unref(struct etw_batch *b);
/** etw_batch_trim - give back the unused part of the batch's reservations (a quiet session's
 *  batch holds a few events in room reserved for hundreds of KiB). Only before publication. */
void etw_batch_trim(struct etw_batch *b);
/** etw_batch_mem - bytes of memory the batch holds (what bounds on held batches count). */
size_t etw_batch_mem(const struct etw_batch *b);
/** etw_batch_full - 1 when no more events should be added (count or ~90% of bytes used). */
int etw_batch_full(const struct etw_batch *b);

/**
 * etw_batch_commit - finish the event whose bytes were appended to b->data since @mark
 * (the value of b->data.len before encoding began). Copies @hdr (off/len are filled in).
 * Returns 0, or -1 if the writer overflowed: then the bytes are rolled back and the caller
 * counts the event as dropped (it never happens with a sane max_bytes and one event).
 */
int etw_batch_commit(struct etw_batch *b, size_t mark, const struct etw_evref *hdr);

/** System block fields, for etw_event_write_system(). Strings may be NULL (omitted). */
struct etw_sys {
  const char *provider;
  const unsigned char *provider_guid; /* 16 bytes or NULL */
  uint32_t event_id;
  uint32_t version;
  uint32_t level;
  uint32_t task;
  uint32_t opcode;
  uint64_t keywords;
  int64_t ts_ns;          /* UTC ns since 1970; used when filetime == 0 */
  uint64_t filetime;      /* 100 ns since 1601 (exact ETW precision); 0 = use ts_ns */
  const char *event_name;
  const char *task_name;   /* optional */
  const char *opcode_name; /* optional */
  int64_t pid, tid;       /* -1 = unknown (written as null) */
  int32_t cpu;            /* -1 = unknown */
  const unsigned char *activity_id;         /* 16 bytes or NULL */
  const unsigned char *related_activity_id; /* 16 bytes or NULL */
  const char *host;         /* `"Host"` after Provider, or NULL (omitted) */
  const char *process_name; /* `"ProcessName"` after ProcessID, or NULL (omitted) */
};

/** etw_event_write_system - append `"System":{…}` (no leading/trailing comma). */
void etw_event_write_system(struct etw_jw *w, const struct etw_sys *s);

/* Process-name filters (a stream's `process=`, `etwd convert --process`): a pattern is a name,
 * or a name prefix followed by '*', matched against System.Execution.ProcessName as the client
 * reads it (the JSON string's value), ASCII letters without regard to case. */
#define ETW_PNAME_PAT_MAX 128 /* bytes of a pattern, its NUL included */
/** etw_pname_pattern_ok - 1 when @pat is a pattern: 1-127 bytes, no control character, no ','
 *  and '*' only last, after at least one other byte. */
int etw_pname_pattern_ok(const char *pat);
/** etw_pname_list - the comma-separated patterns of @v appended to pats[*n…] (at most @max in
 *  all): 0, or -1 if one is not a pattern or there are too many. */
int etw_pname_list(const char *v, char (*pats)[ETW_PNAME_PAT_MAX], uint32_t max, uint32_t *n);
/** etw_pname_match - whether the name @name (@len bytes) matches pattern @pat. */
int etw_pname_match(const char *name, size_t len, const char *pat);
/** etw_event_pname - System.Execution.ProcessName of the encoded event @ev (@n bytes: a batch's
 *  `"System":{…},…` or the System object alone), its JSON escapes undone, into @buf (cut at @cap
 *  bytes, no NUL added): its length, or -1 when the event has no ProcessName. Any thread. */
int etw_event_pname(const char *ev, size_t n, char *buf, size_t cap);

/**
 * etw_intern - return a process-lifetime copy of @s (same pointer for equal strings).
 * Thread-safe; bounded (ETW_INTERN_MAX strings): beyond it returns the shared "(other)".
 * Reader threads should cache the result per provider/event.
 */
const char *etw_intern(const char *s);
#define ETW_INTERN_MAX 65536

#endif
