/* tlw.h — a TraceLogging event writer: the self-describing blobs that EventWriteTransfer takes
 * for one event (provider traits, event metadata, payload), built by portable code so that the
 * Linux unit test feeds the same bytes to our decoder (dec_tl.c) that Windows delivers to it.
 *
 * Format (the decoder's reading of it: dec_tl.c, etl-format.md §9): provider traits = u16 total
 * size, the provider name (UTF-8, NUL); event metadata = u16 total size, u8 tags (0), the event
 * name (NUL), then per field its name (NUL) and u8 InType (bit 7: an OutType byte follows);
 * payload = the field values packed in order, little-endian, no alignment.
 *
 * A writer is plain memory owned by its caller; no function allocates or keeps a pointer.
 */
#ifndef ETWCORE_TLW_H
#define ETWCORE_TLW_H

#include <stddef.h>
#include <stdint.h>

/* etwd's own provider: name and its GUID, derived from the name as EventSource/TraceLogging
 * do (SHA-1 of the namespace 482C2DB2-C390-47C8-87F8-1A15BFC130FB and the upper-case UTF-16BE
 * name, version nibble 5), so tools that enable a provider by name ("*etwd") find it. */
#define ETW_TLW_PROVIDER "etwd"
#define ETW_TLW_PROVIDER_GUID "{923c4d8b-47a4-5050-333b-e904c11a4b60}"
#define ETW_TLW_CHANNEL 11 /* the TraceLogging channel (Windows before 10 needs it) */

#define ETW_TLW_META_MAX 512
#define ETW_TLW_DATA_MAX 2048 /* a marker: up to 1024 bytes of text and its NUL */

struct etw_tlw {
  unsigned char meta[ETW_TLW_META_MAX];
  size_t meta_len;
  unsigned char data[ETW_TLW_DATA_MAX];
  size_t data_len;
  int err; /* 1 once something did not fit (the event is then not to be written) */
};

/** etw_tlw_begin - start event @name (tags 0). */
void etw_tlw_begin(struct etw_tlw *w, const char *name);
/** fields, each appended to the metadata and the payload: */
void etw_tlw_u32(struct etw_tlw *w, const char *name, uint32_t v);   /* UINT32 */
void etw_tlw_i64(struct etw_tlw *w, const char *name, int64_t v);    /* INT64 */
void etw_tlw_hex64(struct etw_tlw *w, const char *name, uint64_t v); /* HEXINT64 */
void etw_tlw_double(struct etw_tlw *w, const char *name, double v);  /* DOUBLE */
void etw_tlw_bool(struct etw_tlw *w, const char *name, int v);       /* BOOL32 */
void etw_tlw_guid(struct etw_tlw *w, const char *name, const unsigned char g[16]); /* GUID */
void etw_tlw_str(struct etw_tlw *w, const char *name, const char *utf8);  /* ANSISTRING, OutType UTF8 */
void etw_tlw_wstr(struct etw_tlw *w, const char *name, const char *utf8); /* UNICODESTRING (UTF-16) */
/** etw_tlw_end - fill in the metadata's size; 0, or -1 if the event did not fit. */
int etw_tlw_end(struct etw_tlw *w);
/** etw_tlw_traits - provider traits of @provider into @out: its length, or 0 if @cap is short. */
size_t etw_tlw_traits(const char *provider, unsigned char *out, size_t cap);

/* `etwd selftest`'s event: the same code writes it on Windows and in the Linux unit test
 * (tests/unit/test_tlw.c), and the same check reads the decoded JSON back in both. */
#define ETW_TLW_SELFTEST_EVENT "SelfTest"
/** etw_tlw_selftest_event - event "SelfTest" {Seq, Nonce, Int64, Double, Bool, Text, Wide, Guid}
 *  with known values; 0, or -1 if it did not fit. */
int etw_tlw_selftest_event(struct etw_tlw *w, uint32_t seq, uint64_t nonce);
/** etw_tlw_selftest_check - 1 if @json (one decoded event) is that event from provider "etwd"
 *  with every value as written; else 0 and the first value that differs in @why. */
int etw_tlw_selftest_check(const char *json, uint32_t seq, uint64_t nonce, char *why, size_t n);

/* The marker event (POST /api/v1/sessions/{id}/markers on the win backend, win_marker.c):
 * provider "etwd", event "Marker", one UTF-8 field "buf" = the text (named as the Linux marker's
 * ftrace/print field, so a client finds the text in EventData.buf on both). Level 4. */
#define ETW_TLW_MARKER_EVENT "Marker"
#define ETW_TLW_MARKER_FIELD "buf"
/** etw_tlw_marker_event - that event with @text (UTF-8, NUL-terminated); 0, or -1 if it did
 *  not fit (text longer than ETW_TLW_DATA_MAX - 1 bytes). */
int etw_tlw_marker_event(struct etw_tlw *w, const char *text);

#endif
