/* etl.h — the portable ETL (Event Trace Log) reader, the event decoders and the etl backend.
 *
 * Three layers, usable separately:
 *  1. The reader (etw_etl_reader_*) walks the buffers of one or more .etl files (any OS, no
 *     Windows API), decompresses XPRESS buffers, and yields `struct etw_rec` records merged into
 *     one time-ordered stream (per-CPU k-way merge, across files too).
 *  2. `struct etw_rec` mirrors Windows' EVENT_RECORD (header, extended data items, user data):
 *     the future Windows live consumer fills the same struct from its EVENT_RECORD, so both go
 *     through one decoder path.
 *  3. The decoder (etw_decoder_*) turns a record into the event JSON of design.md §4 with the
 *     shared JSON writer (jw.h): TraceLogging, EventSource (self-describing and in-stream
 *     manifests), provider XML manifests, KernelTraceControl schemas, classic kernel (MOF)
 *     events, WPP (raw). What it cannot decode is still written, with a reason and the payload.
 *
 * Threads: a reader and a decoder are single-threaded objects (one per reader thread).
 * etw_etl_set_dirs is global and may be called at any time (it copies its arguments).
 * The format itself is described in docs/etl.md and ../shared/docs/etl-format.md.
 */
#ifndef ETWCORE_ETL_H
#define ETWCORE_ETL_H

#include <stddef.h>
#include <stdint.h>

#include "etwcore/err.h"
#include "etwcore/event.h"
#include "etwcore/jw.h"

/* ---- hard limits on untrusted input */
#define ETW_ETL_MAX_BUFFER (64u << 20)  /* largest buffer (on disk and decompressed) */
#define ETW_ETL_MAX_BUFFERS (16u << 20) /* buffers per file */
#define ETW_ETL_MAX_STREAMS 8192        /* per-processor streams over all files */
#define ETW_ETL_MAX_FILES 64
#define ETW_ETL_MAX_MEMORY (512ull << 20) /* decoded buffers held by one reader */
#define ETW_REC_MAX_EXT 16              /* extended data items kept per record */

/** Record kinds (which on-disk header the record had). */
enum etw_rec_kind {
  ETW_REC_EVENT = 1,  /* EVENT_HEADER: manifest, TraceLogging, EventSource */
  ETW_REC_CLASSIC,    /* EVENT_TRACE_HEADER (FULL) or instance header: MOF class events */
  ETW_REC_SYSTEM,     /* SYSTEM_TRACE_HEADER / compact: kernel events with PID/TID */
  ETW_REC_PERFINFO,   /* PERFINFO_TRACE_HEADER: kernel events without PID/TID */
  ETW_REC_WPP         /* MESSAGE_TRACE_HEADER (WPP / TraceMessage) */
};

/* EVENT_HEADER flags as Windows reports them (32/64_BIT_HEADER are derived by the reader). */
#define ETW_EVH_EXTENDED_INFO 0x0001
#define ETW_EVH_STRING_ONLY 0x0004
#define ETW_EVH_TRACE_MESSAGE 0x0008
#define ETW_EVH_32_BIT_HEADER 0x0020
#define ETW_EVH_64_BIT_HEADER 0x0040
#define ETW_EVH_CLASSIC_HEADER 0x0100

/* Extended data item types (EVENT_HEADER_EXT_TYPE_*). */
#define ETW_EXT_RELATED_ACTIVITYID 1
#define ETW_EXT_SID 2
#define ETW_EXT_TS_ID 3
#define ETW_EXT_STACK_TRACE32 5
#define ETW_EXT_STACK_TRACE64 6
#define ETW_EXT_STACK_KEY32 17 /* MatchId (u64), then the stack cache key (u32 / u64) */
#define ETW_EXT_STACK_KEY64 18
#define ETW_EXT_EVENT_SCHEMA_TL 11
#define ETW_EXT_PROV_TRAITS 12

struct etw_ext_item {
  uint16_t type;
  uint16_t len;
  const unsigned char *data;
};

/** What a file's logfile header says (one per file; kept for the life of the reader). */
struct etw_etl_info {
  const char *path;          /* name given to the reader */
  uint32_t buffer_size, version, provider_version, n_cpus;
  uint64_t end_time;         /* FILETIME, 0 if never finalised */
  uint32_t timer_resolution, max_file_size, log_file_mode, buffers_written, start_buffers;
  uint32_t pointer_size, events_lost, cpu_mhz, clock_type, buffers_lost;
  uint64_t boot_time, perf_freq, start_time; /* FILETIMEs, counts per second */
  int64_t t0;                /* raw timestamp of the logfile header record */
  int32_t tz_bias;           /* minutes, UTC = local + bias */
  uint32_t compression;      /* COMPRESSION_FORMAT_* of compressed buffers (3 = XPRESS) */
  char logger_name[128];     /* UTF-8 */
  char log_file_name[512];   /* UTF-8 */
};

/**
 * struct etw_rec - one event, EVENT_RECORD-shaped. All pointers point into reader (or
 * consumer) memory that stays valid until the next etw_etl_reader_next call.
 * For kernel/classic records provider_id is the MOF class (group) GUID, desc.opcode the event
 * type, desc.version the class version, and hook_id the raw kernel HookId (group << 8 | type).
 * Layout: from tid to activity_id (bytes 8..80) the fields are in the order and at the offsets
 * of an EVENT_HEADER on disk (the ETL reader copies them as one block); the derived ones
 * (kind, ptr_size, hook_id, filetime, cpu) around them.
 */
struct etw_rec {
  uint8_t kind;              /* enum etw_rec_kind */
  uint8_t ptr_size;          /* 4 or 8: pointer size of this record's payload */
  uint16_t flags;            /* ETW_EVH_* */
  uint16_t event_property;
  uint16_t hook_id;          /* kernel records: group << 8 | type */
  uint32_t tid, pid;         /* 0xFFFFFFFF when the header carries none */
  int64_t timestamp;         /* raw clock value */
  unsigned char provider_id[16];
  struct {
    uint16_t id;
    uint8_t version, channel, level, opcode;
    uint16_t task;
    uint64_t keyword;
  } desc;
  uint32_t kernel_time, user_time;
  unsigned char activity_id[16];
  uint64_t filetime;         /* UTC, 100 ns since 1601 */
  uint16_t cpu;              /* processor number */
  uint16_t n_ext;
  struct etw_ext_item ext[ETW_REC_MAX_EXT];
  const unsigned char *user_data;
  uint32_t user_len;
  /* WPP */
  uint16_t wpp_msg_number, wpp_flags;
  uint32_t wpp_sequence;
  /* where it came from */
  const struct etw_etl_info *file; /* NULL for live records */
  uint32_t file_index;
  uint32_t stream;           /* the ETL reader's own: its stream (file and processor) */
  uint64_t file_offset;      /* offset of the record's buffer in its file */
};

/* ---- reader */
struct etw_etl_reader;

/**
 * Decode mode (`etwd serve|convert --decode fast|reference`). ETW_DECODE_FAST (the default):
 * the reader's whole-word record paths and header memos, the decoder's kernel and manifest
 * plans, templates, memos and System block cache. ETW_DECODE_REFERENCE: the plain paths only —
 * the reader's generic record parser, the System block writer, the template and layout walkers.
 * Both give the same bytes (the tests and fuzzers compare them); reference is the yardstick, and
 * the way around a suspected fast-path bug.
 */
enum etw_decode_mode { ETW_DECODE_FAST = 0, ETW_DECODE_REFERENCE = 1 };
/** etw_decode_set_default - the mode of the readers and decoders created after this call, and of
 *  renderings without a decoder (process-wide; set once at start-up, or by single-threaded tests). */
void etw_decode_set_default(enum etw_decode_mode m);
enum etw_decode_mode etw_decode_default(void);
/** etw_decode_parse - "fast" or "reference" into *@m: 0; anything else: -1 (*@m unchanged). */
int etw_decode_parse(const char *s, enum etw_decode_mode *m);

/** etw_etl_reader_new - empty reader; NULL on ENOMEM. Freed by etw_etl_reader_free. */
struct etw_etl_reader *etw_etl_reader_new(void);
/** etw_etl_reader_set_mode - how @r parses records from now on (initially etw_decode_default()):
 *  ETW_DECODE_REFERENCE parses every record with the generic parser. */
void etw_etl_reader_set_mode(struct etw_etl_reader *r, enum etw_decode_mode m);
/** etw_etl_reader_set_nofollow - when @on, etw_etl_reader_add_file opens without following a
 *  symbolic link (O_NOFOLLOW where the OS has it): a path that is a link fails (ETW_E_PERM,
 *  naming it). For the server's data-dir files, whose links a check before the open cannot
 *  rule out (swapped in after it); `etwd convert` follows links (the user's own paths). */
void etw_etl_reader_set_nofollow(struct etw_etl_reader *r, int on);
void etw_etl_reader_free(struct etw_etl_reader *r);
/**
 * etw_etl_reader_add_file / _add_mem - add a file (opened and indexed now; the file stays open)
 * or a memory image (not copied: must outlive the reader). All files are merged into one
 * stream. Fails (ETW_E_IO/CORRUPT/LIMIT, @st says which file and offset) when even the logfile
 * header is unreadable; damage further in is reported by etw_etl_reader_next after everything
 * before it was delivered.
 */
enum etw_err etw_etl_reader_add_file(struct etw_etl_reader *r, const char *path,
                                     struct etw_status *st);
enum etw_err etw_etl_reader_add_mem(struct etw_etl_reader *r, const char *name, const void *data,
                                    size_t len, struct etw_status *st);
/**
 * etw_etl_reader_next - the next record in time order.
 * Returns 1 with @rec filled, 0 at the clean end, -1 at the end when some file was damaged
 * (@st names the first damage: file and offset). Every readable record is delivered first.
 */
int etw_etl_reader_next(struct etw_etl_reader *r, struct etw_rec *rec, struct etw_status *st);
/** etw_etl_reader_next_ref - the same without the copy: *@rec points into the reader and stays
 *  valid until the next call. */
int etw_etl_reader_next_ref(struct etw_etl_reader *r, const struct etw_rec **rec,
                            struct etw_status *st);
/**
 * etw_etl_reader_next_batch - the next records in time order, up to @max (≥ 1; 0 is taken as 1):
 * the same records in the same order as that many etw_etl_reader_next_ref calls, pointers into
 * the reader in @recs[0..n) valid until the next call of any etw_etl_reader_next* function.
 * Returns n ≥ 1 (it may be less than @max before the end: the caller simply calls again), 0 at
 * the clean end, -1 at the end when some file was damaged (@st names the first damage; every
 * readable record came in the earlier calls). Calls may be mixed with next_ref and next.
 */
int etw_etl_reader_next_batch(struct etw_etl_reader *r, const struct etw_rec **recs, size_t max,
                              struct etw_status *st);
/** etw_etl_reader_info - logfile header of file @i (0-based), or NULL. */
const struct etw_etl_info *etw_etl_reader_info(const struct etw_etl_reader *r, uint32_t i);
/** etw_etl_reader_clock_ref - the file (0-based) whose logfile header aligns file @i's raw
 *  timestamps: @i itself, or, when files share @i's clock (QPC, same frequency and BootTime: one
 *  boot), the first-started of them, so all of them are aligned on their raw QPC values; -1 for
 *  a bad index. */
int etw_etl_reader_clock_ref(const struct etw_etl_reader *r, uint32_t i);
/** etw_etl_reader_progress - bytes of buffers consumed so far / total bytes of all files. */
void etw_etl_reader_progress(const struct etw_etl_reader *r, uint64_t *done, uint64_t *total);

/* ---- trimming a file to its last seconds (etl_trim.c: the Windows flight recorder's snapshot) */
/** What etw_etl_trim did: counts of the input's buffers and records (a record = one event as the
 *  reader delivers it, the logfile header record included). */
struct etw_etl_trim_stats {
  uint64_t buffers_kept;      /* written to the output (the always-kept ones included) */
  uint64_t buffers_always;    /* of them, kept whatever their records' times: buffer 0 (the
                                 logfile header) and any buffer whose BufferType is not GENERIC */
  uint64_t buffers_dropped;
  uint64_t events_kept;       /* records in kept buffers */
  uint64_t events_dropped;    /* records in dropped buffers (every one before the cut) */
  uint64_t events_before_cut; /* of events_kept, those before the cut */
  uint64_t bytes_in, bytes_out; /* the input's buffers, the output file */
};
/**
 * etw_etl_trim - write to @out the .etl file @in without its buffers that end before @cut_ft
 * (FILETIME, UTC 100 ns, the reader's etw_rec.filetime): buffer 0 (the logfile header) and any
 * buffer that is not an ordinary event buffer are kept, every other buffer is kept (its bytes
 * unchanged, compressed or not) when it holds at least one record at or after @cut_ft, else
 * dropped whole; the output keeps the input's buffer order and its logfile header's
 * BuffersWritten is the output's buffer count. @ts (may be NULL) gets the counts.
 * Errors: @in unreadable or damaged anywhere (ETW_E_CORRUPT/IO/NOT_FOUND/LIMIT), @out not
 * writable (ETW_E_IO), @in and @out the same file (ETW_E_INVALID); @st says which, and @out does
 * not exist afterwards (it is written under a temporary name and renamed when complete) — but
 * for ETW_E_INVALID, which touches no file. Memory: the reader's (one buffer per processor) and
 * 8 bytes per buffer of @in. Any thread; nothing shared.
 */
enum etw_err etw_etl_trim(const char *in, const char *out, uint64_t cut_ft,
                          struct etw_etl_trim_stats *ts, struct etw_status *st);

/**
 * etw_xpress_decompress - plain LZ77 XPRESS (MS-XCA 2.3/2.4) of @in[0..n_in) into @out.
 * Returns the number of bytes produced (≤ @n_out), or -1 on malformed input.
 */
long etw_xpress_decompress(const unsigned char *in, size_t n_in, unsigned char *out, size_t n_out);
/** etw_xpress_huff_decompress - XPRESS with Huffman (MS-XCA 2.1/2.2); same contract. */
long etw_xpress_huff_decompress(const unsigned char *in, size_t n_in, unsigned char *out,
                                size_t n_out);

/* ---- decoder */
struct etw_decoder;

/** etw_decoder_new - decoder; @manifest_dir (may be NULL) is scanned for *.man / *.xml provider
 *  manifests (recursively, bounded) the first time an unknown manifest provider is seen. */
struct etw_decoder *etw_decoder_new(const char *manifest_dir);
void etw_decoder_free(struct etw_decoder *d);
/** etw_decoder_set_mode - @d's mode (initially etw_decode_default()); call it before @d's first
 *  event (switching to reference later drops @d's plans; the output is the same either way). */
void etw_decoder_set_mode(struct etw_decoder *d, enum etw_decode_mode m);
/** etw_decoder_set_host - write `"Host":@host` (1..63 of A-Z a-z 0-9 . _ -; NULL: none) in
 *  @d's events from now on (the Windows live consumer: etw_host_name()). Without it a decoder
 *  takes the ComputerName of the stream's SystemConfig/CPU event from that event on. -1 if
 *  @host is not a valid name. */
int etw_decoder_set_host(struct etw_decoder *d, const char *host);
/** etw_decoder_proc_dropped - process names and thread owners the decoder could not keep (its
 *  bounded tables were full of live processes/threads); their events go without them. */
uint64_t etw_decoder_proc_dropped(const struct etw_decoder *d);

/**
 * etw_decoder_write - append the event for @r to @w, without the leading `{"seq":N,`:
 * `"System":{…},"EventData":{…}}` (or `"Undecoded":{…}}`), and fill @ref (provider/name
 * interned). Returns 1 when decoded, 0 when written undecoded (a decode error to count).
 */
int etw_decoder_write(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                      struct etw_evref *ref);
/** etw_decoder_names - provider and event name (PerfView style "Task/Opcode") the decoder
 *  would use for @r; both are interned. Decodes schemas, process names, thread owners and the
 *  host carried in the stream as a side effect (so call it for every record, in order, when not
 *  calling etw_decoder_write). */
void etw_decoder_names(struct etw_decoder *d, const struct etw_rec *r, const char **provider,
                       const char **name);
/** etw_decoder_providers_json - `[{"name":..,"guid":..,"events":N,"source":..},…]` of the
 *  providers this decoder has seen or loaded, filtered by substring @q (NULL = all; ASCII case
 *  ignored) of the provider's name or of one of its event names; those events are listed in
 *  "matched_events" (absent when none matched). */
void etw_decoder_providers_json(struct etw_decoder *d, const char *q, struct etw_jw *w);

/* ---- backend and CLI */
/** etw_etl_set_dirs - where ETL files (list/describe providers) and manifests live; either may
 *  be NULL (unchanged). Copies the strings. */
void etw_etl_set_dirs(const char *data_dir, const char *manifest_dir);
/** etw_mpath_dirs - the directories of a manifests search path @dirs: DIR[:DIR...] (';' on
 *  Windows), empty elements skipped; on POSIX "\:" stands for a ':' inside a name. Returns their
 *  number (0 for NULL) and sets *@out to a malloc'd array of malloc'd strings (the caller frees
 *  each, then the array); -1 when out of memory. Pure, any thread (dec_mpath.c). */
int etw_mpath_dirs(const char *dirs, char ***out);
/** etw_mpath_append - append directory @dir to the search path @path (room for @cap bytes; a
 *  separator first unless @path is empty), escaped so that it stays one directory (POSIX: each
 *  ':' as "\:"). 0, or -1 with @path unchanged when it does not fit or @dir cannot be written
 *  (POSIX: it ends with '\'; Windows: it contains ';'). */
int etw_mpath_append(char *path, size_t cap, const char *dir);
/** etw_etl_manifest_dir - current manifest directory (or NULL); the returned copy is owned by
 *  the caller (free). */
char *etw_etl_manifest_dir(void);
/** etw_etl_set_stack_index_mb - the MiB all stack indexes of the process (one per ETL reader
 *  thread or Windows consumer, etl.md "Stacks") may hold together; beyond it an index grows no
 *  more and counts what it could not keep. Default 1024. */
void etw_etl_set_stack_index_mb(uint64_t mb);
/** etw_etl_metrics - the stack index budget's Prometheus text (etwd_stack_index_*). Any thread. */
void etw_etl_metrics(struct etw_jw *w);

/**
 * etw_convert_main - `etwd convert FILE... [--format ndjson|csv|folded] [-o OUT] [--manifests DIR]`.
 * argv[0] is "convert". Returns the process exit code: 0 ok, 1 corrupt/unreadable input (after
 * writing every event before the damage), 2 usage error.
 */
int etw_convert_main(int argc, char **argv);
/** The maximum of the writer one event's text goes into (64 MiB; tests lower it). An event whose
 *  text does not fit (or finds no memory) is dropped and counted: the conversion goes on, the
 *  count is reported on stderr and the exit code is 1. */
extern size_t etw_convert_writer_max;

#endif
