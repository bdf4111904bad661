/* winreq.h — the portable half of the Windows ETW backend.
 *
 * Everything the Win32 calls in backends/win need that is plain data lives here, so that it
 * compiles on every OS and is unit-tested on Linux (tests/unit/test_winreq.c):
 *  - EVENT_TRACE_PROPERTIES: size, field offsets, where the logger and log file names go,
 *    building the block for StartTraceW/ControlTraceW and reading the counters back;
 *  - the session configuration (buffer size/min/max, flush timer, real-time, sequential /
 *    circular / new-file-on-size files) and its limits, checked BEFORE any call;
 *  - EnableTraceEx2 requests: level, keywords any/all, and the EVENT_FILTER_DESCRIPTORs (event
 *    IDs in/out, PIDs, executable names, stack walk by event ID) with the OS limits;
 *  - kernel flag names → EnableFlags bits of the NT Kernel Logger, and → (system provider GUID,
 *    keyword) pairs for sessions in system-logger mode (Windows 11 / Server 2022 and later);
 *  - Win32 error codes → the etw error space, with messages that say what to do (privileges).
 *
 * The layouts are the documented ones (evntrace.h / evntprov.h, 64-bit Windows). They are our
 * own constants: backends/win checks them against the real headers with static assertions.
 * Nothing here allocates; every buffer has a fixed maximum. Thread-safe (no state).
 */
#ifndef ETWCORE_WINREQ_H
#define ETWCORE_WINREQ_H

#include <stddef.h>
#include <stdint.h>

#include "etwcore/backend.h"
#include "etwcore/err.h"

/* ---- system limits */
#define ETW_WIN_MAX_SESSIONS 64   /* loggers the system allows at once (incl. its own ones) */
#define ETW_WIN_NAME_MAX 1024     /* logger name, UTF-16 units incl. the NUL */
#define ETW_WIN_PATH_MAX 1024     /* log file name, UTF-16 units incl. the NUL */
#define ETW_WIN_BUFFER_KB_MAX 1024 /* EVENT_TRACE_PROPERTIES.BufferSize: at most 1 MB */
#define ETW_WIN_TOTAL_MB_MAX 4096  /* our cap on buffer_kb × max_buffers */
#define ETW_WIN_FLUSH_S_MAX 3600
#define ETW_WIN_FILE_MB_MAX (1u << 20) /* 1 TiB */

/* ---- EVENT_TRACE_PROPERTIES (64-bit layout: WNODE_HEADER, then the session fields) */
#define ETW_ETP_SIZE 120
#define ETW_ETP_WNODE_BUFFERSIZE 0
#define ETW_ETP_WNODE_GUID 24
#define ETW_ETP_WNODE_CLIENTCONTEXT 40
#define ETW_ETP_WNODE_FLAGS 44
#define ETW_ETP_BUFFERSIZE 48
#define ETW_ETP_MINIMUMBUFFERS 52
#define ETW_ETP_MAXIMUMBUFFERS 56
#define ETW_ETP_MAXIMUMFILESIZE 60
#define ETW_ETP_LOGFILEMODE 64
#define ETW_ETP_FLUSHTIMER 68
#define ETW_ETP_ENABLEFLAGS 72
#define ETW_ETP_AGELIMIT 76
#define ETW_ETP_NUMBEROFBUFFERS 80
#define ETW_ETP_FREEBUFFERS 84
#define ETW_ETP_EVENTSLOST 88
#define ETW_ETP_BUFFERSWRITTEN 92
#define ETW_ETP_LOGBUFFERSLOST 96
#define ETW_ETP_REALTIMEBUFFERSLOST 100
#define ETW_ETP_LOGGERTHREADID 104
#define ETW_ETP_LOGFILENAMEOFFSET 112
#define ETW_ETP_LOGGERNAMEOFFSET 116
/* the largest block we ever build or query: header + both names at their maximum */
#define ETW_ETP_MAX (ETW_ETP_SIZE + 2 * (ETW_WIN_NAME_MAX + ETW_WIN_PATH_MAX))

#define ETW_WNODE_FLAG_TRACED_GUID 0x00020000u

/* LogFileMode bits */
#define ETW_LOG_FILE_SEQUENTIAL 0x00000001u
#define ETW_LOG_FILE_CIRCULAR 0x00000002u
#define ETW_LOG_FILE_NEWFILE 0x00000008u
#define ETW_LOG_REAL_TIME 0x00000100u
#define ETW_LOG_BUFFERING 0x00000400u /* EVENT_TRACE_BUFFERING_MODE: circular, in memory only */
#define ETW_LOG_SYSTEM_LOGGER 0x02000000u
#define ETW_LOG_INDEPENDENT_SESSION 0x08000000u

/* The NT Kernel Logger's name and SystemTraceControlGuid {9e814aad-3204-11d2-9a82-006008a86939} */
#define ETW_KERNEL_LOGGER_NAME "NT Kernel Logger"
extern const unsigned char etw_guid_system_trace_control[16];

enum etw_win_file {
  ETW_WFILE_NONE = 0,
  ETW_WFILE_SEQUENTIAL, /* one file, grows up to max_file_mb (0 = unbounded) */
  ETW_WFILE_CIRCULAR,   /* one file of max_file_mb, overwritten from the start */
  ETW_WFILE_NEWFILE     /* a new file every max_file_mb; the path must contain one "%d" */
};

/** How to start a session (StartTraceW). Zero fields take the defaults noted. */
struct etw_win_session_cfg {
  uint32_t buffer_kb;   /* per buffer, 1..1024; 0 = 64 */
  uint32_t min_buffers; /* 0 = 2 per CPU (the system minimum) */
  uint32_t max_buffers; /* 0 = max(min_buffers, 64) */
  uint32_t flush_s;     /* FlushTimer in seconds, ≤ 3600; 0 = 1 (keeps real-time latency low) */
  int realtime;         /* EVENT_TRACE_REAL_TIME_MODE */
  enum etw_win_file file;
  uint32_t max_file_mb; /* required for circular/newfile */
  uint32_t kernel_flags; /* EnableFlags (kernel logger or system-logger mode), 0 = none */
  int kernel_logger;    /* the classic "NT Kernel Logger" (fixed name, SystemTraceControlGuid) */
  int system_logger;    /* EVENT_TRACE_SYSTEM_LOGGER_MODE: kernel events in a named session */
  uint32_t clock;       /* WNODE ClientContext: 1 QPC (default), 2 system time, 3 CPU cycles */
  int buffering;        /* EVENT_TRACE_BUFFERING_MODE (mode "flight"): no real time, no file */
};

/** etw_win_cfg_from_spec - map the generic session spec (mode, buffer_kb) onto @c with the
 *  defaults above: realtime for ETW_MODE_REALTIME, a sequential .etl for ETW_MODE_FILE. */
void etw_win_cfg_from_spec(const struct etw_session_spec *s, struct etw_win_session_cfg *c);

/** etw_win_cfg_check - validate @c for a machine with @ncpu processors (0 = unknown) against
 *  the documented limits. @file is the log file (UTF-8) or NULL. ETW_E_INVALID with the field. */
enum etw_err etw_win_cfg_check(const struct etw_win_session_cfg *c, uint32_t ncpu,
                               const char *file, struct etw_status *st);

/* Mode "flight" (etw_win_flight_cfg): the ring in memory is MinimumBuffers × BufferSize */
#define ETW_WIN_FLIGHT_BUF_KB 64          /* BufferSize of a flight session's buffers */
#define ETW_WIN_FLIGHT_KB_DEFAULT 4096    /* per processor, when the spec gives no buffer_kb */
#define ETW_WIN_FLIGHT_TOTAL_MB_MAX 1024  /* our cap on the whole ring (non-paged memory) */

/**
 * etw_win_flight_cfg - map a mode "flight" spec onto @c (zeroed first) for @ncpu processors
 * (0 = unknown: counted as 1): a session in EVENT_TRACE_BUFFERING_MODE, neither real time nor
 * a file, whose ring holds buffer_kb KiB per processor (buffer_kb means what it means on Linux;
 * default ETW_WIN_FLIGHT_KB_DEFAULT) as ETW_WIN_FLIGHT_BUF_KB buffers: min_buffers = the ring /
 * the buffer size (rounded up, at least 2 per processor), max_buffers = min_buffers (ETW
 * ignores it in this mode). Refuses (ETW_E_INVALID, naming the member): a mode other than
 * "flight", "win" buffer/file settings (the ring is sized by buffer_kb), and a ring over
 * ETW_WIN_FLIGHT_TOTAL_MB_MAX. "flight_s" does not size the ring (the snapshot trims).
 */
enum etw_err etw_win_flight_cfg(const struct etw_session_spec *s, uint32_t ncpu, struct etw_win_session_cfg *c,
                                struct etw_status *st);

/** etw_win_log_file_mode - the LogFileMode bits for @c. */
uint32_t etw_win_log_file_mode(const struct etw_win_session_cfg *c);

/**
 * etw_win_props_build - lay out an EVENT_TRACE_PROPERTIES block in @buf (@cap bytes, zeroed
 * first): header fields from @c (after applying its defaults for @ncpu), the logger name
 * @name (UTF-8) right after the structure and the log file @file (UTF-8, may be NULL) after it,
 * both as UTF-16 with their offsets set. With @c == NULL only the sizes and name offsets are
 * set (the form ControlTraceW needs for QUERY/STOP/FLUSH). *@len = bytes used (= BufferSize).
 * Fails with ETW_E_INVALID (bad UTF-8, name too long) or ETW_E_TOO_LARGE (@cap too small).
 */
enum etw_err etw_win_props_build(unsigned char *buf, size_t cap, const struct etw_win_session_cfg *c,
                                 uint32_t ncpu, const char *name, const char *file, size_t *len,
                                 struct etw_status *st);

/** Counters ControlTraceW(QUERY) fills in. */
struct etw_win_props_stats {
  uint32_t buffer_kb, min_buffers, max_buffers, log_file_mode, flush_s, enable_flags;
  uint32_t n_buffers, free_buffers, events_lost, buffers_written, log_buffers_lost, rt_buffers_lost;
  uint32_t max_file_mb;
  uint64_t logger_thread;
};

/** etw_win_props_read - decode a queried block (@len bytes); the logger and file names (UTF-8,
 *  truncated to the buffers; empty when absent or out of range) if the pointers are non-NULL.
 *  Returns 0, or -1 when @len is too short for the structure. */
int etw_win_props_read(const unsigned char *buf, size_t len, struct etw_win_props_stats *s,
                       char *name, size_t name_cap, char *file, size_t file_cap);

/* ---- EnableTraceEx2 */
#define ETW_FILTER_TYPE_PID 0x80000004u
#define ETW_FILTER_TYPE_EXECUTABLE_NAME 0x80000008u
#define ETW_FILTER_TYPE_EVENT_ID 0x80000200u
#define ETW_FILTER_TYPE_STACKWALK 0x80001000u
#define ETW_MAX_FILTER_PIDS 8          /* MAX_EVENT_FILTER_PID_COUNT */
#define ETW_MAX_FILTER_EVENT_IDS 64    /* MAX_EVENT_FILTER_EVENT_ID_COUNT */
#define ETW_MAX_FILTER_DATA 1024       /* MAX_EVENT_FILTER_DATA_SIZE (bytes of one filter) */
#define ETW_MAX_FILTERS 13             /* MAX_EVENT_FILTERS_COUNT (per EnableTraceEx2) */
#define ETW_WIN_FILTERS_USED 4         /* PID, EXE, EVENT_ID, STACKWALK: each at most once */

/* ENABLE_TRACE_PARAMETERS (64-bit): Version, EnableProperty, ControlFlags, SourceId,
 * EnableFilterDesc (pointer at 32), FilterDescCount (40); 48 bytes. Version 2. */
#define ETW_ETPARAMS_SIZE 48
#define ETW_ETPARAMS_VERSION_2 2
/* EVENT_FILTER_DESCRIPTOR: Ptr (u64), Size (u32), Type (u32); 16 bytes */
#define ETW_FILTER_DESC_SIZE 16
/* EVENT_FILTER_EVENT_ID: FilterIn (u8), Reserved (u8), Count (u16), Events[] (u16) */
#define ETW_FILTER_EVENT_ID_HDR 4

#define ETW_ENABLE_PROPERTY_SID 0x1u
#define ETW_ENABLE_PROPERTY_TS_ID 0x2u
#define ETW_ENABLE_PROPERTY_STACK_TRACE 0x4u

/* Windows versions as (major << 16 | minor) with the build beside it */
#define ETW_WINVER(maj, min) ((uint32_t)(maj) << 16 | (uint32_t)(min))

struct etw_win_filter {
  uint32_t type;
  uint32_t size;                           /* bytes of data[] used */
  unsigned char data[ETW_MAX_FILTER_DATA]; /* the filter's payload, little-endian */
};

/** One EnableTraceEx2 call's worth of parameters (the provider GUID is resolved elsewhere). */
struct etw_win_enable {
  uint8_t level;
  uint64_t keywords_any, keywords_all;
  uint32_t enable_property;
  struct etw_win_filter f[ETW_WIN_FILTERS_USED];
  uint32_t nf;
};

/**
 * etw_win_enable_build - the EnableTraceEx2 parameters for provider @p of session @s: level
 * (0..255), keywords, and filters — event IDs in or out (@p->event_ids, ≤ 64, no duplicates),
 * stack walk (@p->stacks: for the events of @p->stack_ids — "stacks": [IDs] — or else of the
 * included event IDs via a STACKWALK filter, or for every event via
 * EVENT_ENABLE_PROPERTY_STACK_TRACE when none are listed; event names in "stacks" are refused), the session's PIDs (≤ 8) and
 * executable names (';'-joined UTF-16, ≤ 1024 bytes). @winver/@build describe the OS (0 =
 * assume the newest): PID/EXE filters need 8.1, event-ID and stack-walk filters Windows 10.
 * @ptr names @p in errors (e.g. "/providers/2"). Errors: ETW_E_INVALID / ETW_E_LIMIT /
 * ETW_E_UNSUPPORTED with the offending field.
 */
enum etw_err etw_win_enable_build(const struct etw_session_spec *s, const struct etw_provider_spec *p,
                                  const char *ptr, uint32_t winver, uint32_t build,
                                  struct etw_win_enable *out, struct etw_status *st);

/* ---- the kernel logger */
/** One documented kernel flag name (see etw_win_kernel_flags). */
struct etw_win_kflag {
  const char *name;    /* "process", "disk_io", … */
  uint32_t flags;      /* EVENT_TRACE_FLAG_* bits */
  const unsigned char *sys_guid; /* system provider GUID (16 bytes) */
  uint64_t sys_keywords;         /* its SYSTEM_*_KW_* keywords */
};
/** etw_win_kflags - the table (NULL-name terminated). */
const struct etw_win_kflag *etw_win_kflags(void);

/** etw_win_is_kernel_provider - 1 if a provider spec name means the kernel logger ("kernel",
 *  "NT Kernel Logger", "Windows Kernel Trace" or SystemTraceControlGuid's text). */
int etw_win_is_kernel_provider(const char *name);

/**
 * etw_win_kernel_flags - OR of the flags named in @names[0..n) (case-insensitive; '-' and ' '
 * count as '_'); n == 0 means process+thread+image. Unknown names fail with ETW_E_INVALID
 * naming the field @ptr/events/<i> and listing the known names.
 */
enum etw_err etw_win_kernel_flags(char *const *names, uint32_t n, const char *ptr, uint32_t *flags,
                                  struct etw_status *st);

/** A system provider and the keywords to enable on it (system-logger sessions). */
struct etw_win_sysprov {
  const unsigned char *guid;
  uint64_t keywords;
};
/** etw_win_kernel_sysproviders - group @flags (from etw_win_kernel_flags) by system provider;
 *  returns how many entries were written to @out (≤ @max). */
uint32_t etw_win_kernel_sysproviders(uint32_t flags, struct etw_win_sysprov *out, uint32_t max);
/** etw_win_has_system_providers - 1 when the OS enables kernel events through system providers
 *  (build 20348 and later: Windows 11, Server 2022). */
int etw_win_has_system_providers(uint32_t winver, uint32_t build);

/* ---- errors */
/**
 * etw_win_error - map a Win32 error @code returned by @what ("StartTraceW", …) to the etw error
 * space and write a message into @st that says what to do — e.g. ERROR_ACCESS_DENIED names
 * the privilege: Administrators or Performance Log Users, and SeSystemProfilePrivilege for the
 * kernel logger (@kernel = 1). Returns the code.
 */
enum etw_err etw_win_error(uint32_t code, const char *what, int kernel, struct etw_status *st);

/* ---- schemas */
/**
 * etw_win_tei_json - write one event's schema from a TRACE_EVENT_INFO blob (@tei[0..n), as
 * TdhGetManifestEventInformation returns it) as the describe-provider JSON object
 * `{"id":..,"version":..,"name":..,"level":..,"opcode":..,"task":..,"keywords":"0x..",
 * "fields":[{"name":..,"type":"win:UInt32"},…]}` (top-level properties; structs and arrays
 * say so). Offsets outside the blob are ignored, never followed. Returns 0, -1 if malformed
 * (nothing written then).
 */
int etw_win_tei_json(const unsigned char *tei, size_t n, struct etw_jw *w);

/** etw_win_sessions_json - Windows builds only (backends/win): the running trace sessions
 *  (QueryAllTracesW) as `[{"name":..,"ours":bool,"realtime":bool,"file":..,"events_lost":..}]`. */
enum etw_err etw_win_sessions_json(struct etw_jw *w, struct etw_status *st);

/* ---- text */
/** etw_utf8_to_utf16 - convert NUL-terminated @s into @out (@cap units incl. the NUL). Returns
 *  the units written without the NUL, or -1 on invalid UTF-8 or when it does not fit. */
long etw_utf8_to_utf16(const char *s, uint16_t *out, size_t cap);
/** etw_utf16_to_utf8 - convert @n units (stops at a NUL) into @out (@cap bytes incl. the NUL;
 *  truncated at a character boundary; unpaired surrogates become U+FFFD). Returns bytes. */
size_t etw_utf16_to_utf8(const uint16_t *s, size_t n, char *out, size_t cap);

#endif
