/* backend.h — the session spec and the one interface every backend (linux | etl | win) implements.
 *
 * The core parses and validates the generic parts of a session spec (etw_spec_parse), then asks
 * the backend named in it to realize the session. Backend state is opaque to the core.
 * Ownership: the core owns the spec and the hub and outlives every backend call on them; the
 * backend owns its reader threads and OS objects (tracefs instance, ETW session, open files).
 * Naming follows libtracefs: open/destroy act on the OS object, free on our memory.
 */
#ifndef ETWCORE_BACKEND_H
#define ETWCORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "etwcore/err.h"
#include "etwcore/hub.h"
#include "etwcore/jw.h"

/* OS objects we create are named ETW_SESSION_PREFIX "<id>_<pid>": the trailing pid says which
 * etwd process owns it, so start-up reaps only objects whose owner is gone (several etwd
 * processes may share a machine). */
#define ETW_SESSION_PREFIX "etwd_"

/** etw_os_name_is_stale - 1 if @name has our prefix and its trailing _<pid> names a process that
 *  no longer exists, is a zombie, or (Linux: `_s<starttime>_<pid>`) started at another time than
 *  the owner did (a reused pid), or no pid can be read from it; 0 otherwise (ours, or another
 *  live etwd's). */
int etw_os_name_is_stale(const char *name);
/** etw_os_name_make - this process's name for session @id's OS object: ETW_SESSION_PREFIX
 *  "<id>_s<starttime>_<pid>" on Linux (starttime from /proc/self/stat), "<id>_<pid>" elsewhere. */
void etw_os_name_make(char *buf, size_t n, unsigned long long id);
/** etw_os_name_private - the same for private session @id (trigger watchers, file decodes: ids
 *  of their own): ETW_SESSION_PREFIX "p<id>_…", never a visible session's name. */
void etw_os_name_private(char *buf, size_t n, unsigned long long id);

enum {
  ETW_CAP_LIVE = 1u << 0,           /* live sessions on this machine */
  ETW_CAP_FILE = 1u << 1,           /* file mode recording */
  ETW_CAP_REPLAY = 1u << 2,         /* replays recorded files as sessions */
  ETW_CAP_LIST_PROVIDERS = 1u << 3, /* providers API */
  ETW_CAP_FILTER_PID = 1u << 4,
  ETW_CAP_FILTER_EXPR = 1u << 5,    /* backend filter expressions (tracefs) */
  ETW_CAP_FILTER_EXE = 1u << 6,
  ETW_CAP_LEVEL_KEYWORDS = 1u << 7, /* ETW level + keywords any/all */
  ETW_CAP_EVENT_IDS = 1u << 8,
  ETW_CAP_STACKS = 1u << 9,
  ETW_CAP_KERNEL_FLAGS = 1u << 10,
  ETW_CAP_ENABLE_RUNNING = 1u << 11, /* enable/disable providers on a running session */
  ETW_CAP_EVENT_NAMES = 1u << 12,    /* a provider's "events" choose what is enabled */
  ETW_CAP_BUFFER_SIZE = 1u << 13,    /* "buffer_kb" sizes the OS buffers */
  ETW_CAP_WIN_SETTINGS = 1u << 14,   /* "win" session settings and "attach" */
  ETW_CAP_ORDER_TIME = 1u << 15,     /* "order": "time" (events in time order across CPUs) */
  ETW_CAP_MARKERS = 1u << 16,        /* POST /sessions/{id}/markers (ext->marker) */
  ETW_CAP_FLIGHT = 1u << 17,         /* mode "flight" + POST /sessions/{id}/snapshot (ext) */
  ETW_CAP_SINKS = 1u << 18,          /* "sinks": events also go to NATS JetStream (sink.h) */
  ETW_CAP_NATS_SOURCE = 1u << 19,    /* "subjects" and "nats": reads JetStream (nats_src.h) */
  ETW_CAP_STACK_EVENTS = 1u << 20    /* "stacks": [events] — stacks on the listed events only */
};
/* ETW_CAP_SINKS where this build has libnats (etwcore's ETWD_HAVE_NATS), else 0 */
#ifdef ETWD_HAVE_NATS
#define ETW_CAP_SINKS_BUILT ETW_CAP_SINKS
#else
#define ETW_CAP_SINKS_BUILT 0
#endif
/* What each bit means to a session spec or stream: the member table in etwcore/caps.h. */

/* ETW_MODE_FLIGHT (alone): the OS buffers keep the last events (overwrite), nothing is read
 * until a snapshot writes them to a recording (ETW_CAP_FLIGHT) */
enum { ETW_MODE_REALTIME = 1, ETW_MODE_FILE = 2, ETW_MODE_FLIGHT = 4 };

#define ETW_SPEC_MAX_PROVIDERS 64
#define ETW_SPEC_MAX_EVENTS 256
#define ETW_SPEC_MAX_PIDS 64
#define ETW_SPEC_MAX_FILES 16

struct etw_sink_spec;
struct etw_nats_src;

struct etw_provider_spec {
  char *name;             /* tracefs system, provider name or GUID text */
  char **events;          /* event names to enable; n_events == 0 means all */
  uint32_t n_events;
  uint32_t *event_ids;    /* ETW event ID filter */
  uint32_t n_event_ids;
  int event_ids_exclude;  /* 1 = the IDs are excluded rather than included */
  char *filter;           /* backend filter expression (tracefs) or NULL */
  int level;              /* 0..255 (ETW), default 5 */
  uint64_t keywords_any, keywords_all;
  int stacks;             /* 0, 1 (true) or ETW_STACKS_RAW ("raw": linux keeps the tracing frames) */
  /* "stacks": [list] (stacks 1, ETW_CAP_STACK_EVENTS): stacks on these events only — names
   * (linux) or IDs (win); at most one of the two lists is given */
  char **stack_events;
  uint32_t n_stack_events;
  uint32_t *stack_ids;
  uint32_t n_stack_ids;
};
#define ETW_STACKS_RAW 2

struct etw_session_spec {
  char *name;     /* user-visible name (may be NULL) */
  char *backend;  /* "linux", "etl" or "win"; never NULL after etw_spec_parse */
  unsigned mode;  /* ETW_MODE_* bits; at least one */
  uint32_t buffer_kb; /* per-CPU buffer size; 0 = backend default */
  struct etw_provider_spec *providers;
  uint32_t n_providers;
  uint32_t *pids;
  uint32_t n_pids;
  char **exe_names;
  uint32_t n_exe_names;
  struct etw_spec_win { /* "win": Windows session settings (other backends refuse them) */
    int set;              /* 1 if the member was given */
    uint32_t min_buffers, max_buffers, flush_s, max_file_mb, clock;
    int circular;         /* file mode writes one circular file of max_file_mb */
  } win;
  char **files;   /* file source: absolute paths resolved by the API layer */
  uint32_t n_files;
  int replay_realtime; /* file source: 1 = at recorded speed, 0 = as fast as possible */
  int order_time;      /* "order": "time": live events merged by time before seq (hub.h) */
  int stackwalk_events; /* file source: the stack walk rows are delivered too (else only attached) */
  /* stop limits (0 = none): the session stops at the first one reached (session.c) */
  double duration_s;    /* seconds after the session started consuming */
  uint64_t max_events;  /* events read (stats read_events) */
  uint32_t max_file_mb; /* MiB in the recording (file mode only) */
  double flight_s;      /* mode flight: a snapshot keeps the last this many seconds (0 = all) */
  /* triggers (etwcore/trigger.h): the checked JSON objects as given, or NULL */
  char *start_when, *stop_when;
  struct etw_sink_spec *sinks; /* where the events also go (sink.h); parsed by etw_sinks_parse */
  uint32_t n_sinks;
  struct etw_nats_src *nats; /* backend "nats": where to read (nats_src.h) */
};

/** Arguments to open(). Everything pointed to outlives the backend session. */
struct etw_backend_args {
  const struct etw_session_spec *spec;
  struct etw_hub *hub;     /* publish decoded batches here */
  const char *os_name;     /* name for the OS object: ETW_SESSION_PREFIX + id */
  const char *record_path; /* file mode: where to write the recording, else NULL */
  /* called once from a reader thread when the session ends by itself (end of file, error) */
  void (*ended)(void *ctx, enum etw_err code, const char *msg);
  /* @msg of an ended() with ETW_E_OK when a replay pass stopped at the spec's max_events: the
   * session then says stopped, stop_reason max_events (not ended) */
#define ETW_ENDED_MAX_EVENTS "max_events reached"
  void *ctx;
};

struct etw_backend_stats {
  uint64_t kernel_lost;      /* events lost in the kernel/OS buffers (overrun + dropped) */
  uint64_t kernel_overrun;
  uint64_t kernel_dropped;
  uint64_t read_events;      /* events read by the reader threads */
  uint64_t read_bytes;       /* raw bytes read */
  uint64_t decode_errors;    /* events delivered undecoded */
  uint64_t unparsed;         /* events decoded with payload bytes left after their schema's
                              * fields (delivered in the event's "Unparsed" member) */
  uint64_t stack_walks;      /* ETL: stack walk events of the files (dec_stack.h) */
  uint64_t stack_walks_unattached; /* of those, not attached to an event */
  uint64_t stack_walks_dropped;    /* of those, not kept by the stack index (its bounds or the
                                      server's --stack-index-mb budget): events without that stack */
  uint64_t stack_images_dropped;   /* images and JIT methods the index did not keep */
  uint64_t proc_dropped;     /* ETL, Windows: process names and thread owners the decoder's bounded tables
                              * could not keep (etw_decoder_proc_dropped): some events of those
                              * processes go without ProcessName or payload ProcessID */
  uint8_t source;            /* 1: the backend reads a remote source (nats): source_ok applies */
  uint8_t source_ok;         /* connected to it, and reading works (metrics etwd_session_source_ok) */
};

struct etw_backend {
  const char *name;
  unsigned caps;
  uint32_t buffer_kb_min, buffer_kb_max; /* "buffer_kb" range (ETW_CAP_BUFFER_SIZE), for the API */
  /** init - once at start-up (mount tracefs, reap stale sessions); may be NULL. */
  enum etw_err (*init)(struct etw_status *st);
  /** open - validate backend specifics and create the OS object (not yet consuming). */
  enum etw_err (*open)(const struct etw_backend_args *a, void **state, struct etw_status *st);
  /** enable/disable - change providers; before or after start (if ENABLE_RUNNING). */
  enum etw_err (*enable)(void *s, const struct etw_provider_spec *p, struct etw_status *st);
  enum etw_err (*disable)(void *s, const char *provider, struct etw_status *st);
  /** start - start the backend-owned reader thread(s). */
  enum etw_err (*start)(void *s, struct etw_status *st);
  /** stop - stop tracing, drain what the kernel holds, join threads. Idempotent; after it
   *  returns nothing more is published. Any thread except the backend's own. */
  void (*stop)(void *s);
  /** destroy - stop if needed, remove the OS object, free everything. */
  void (*destroy)(void *s);
  /** stats - counters; may be called from any thread at any time before destroy. */
  void (*stats)(void *s, struct etw_backend_stats *out);
  /** stats_json - optional extra members (e.g. `"per_cpu":[…]`), written after a comma. */
  void (*stats_json)(void *s, struct etw_jw *w);
  /** list_providers - JSON array of {"name":..,"events":N,…} matching @q (NULL = all): a
   *  substring of the name or, where the backend can list events cheaply, of an event's name
   *  (then "matched_events":[names]). */
  enum etw_err (*list_providers)(const char *q, struct etw_jw *w, struct etw_status *st);
  /** describe_provider - JSON object {"name":..,"events":[{"id","name","fields":[…]}]}. */
  enum etw_err (*describe_provider)(const char *name, struct etw_jw *w, struct etw_status *st);
  /** cleanup - at exit: remove anything left with our prefix. May be NULL. */
  void (*cleanup)(void);
  /** list_os_sessions - JSON array of the trace sessions the OS has now (ours and others':
   *  tracefs instances, ETW sessions), each {"name":..,"etwd":bool,…}. May be NULL. */
  enum etw_err (*list_os_sessions)(struct etw_jw *w, struct etw_status *st);
  /** progress - events read and bytes in the recording so far, cheaply (the stop limits ask
   *  every 100 ms, from the core's limit thread). May be NULL: the core then uses stats() for
   *  the events and the recording file's size. */
  void (*progress)(void *s, uint64_t *events, uint64_t *file_bytes);
  /** ext - optional operations (etw_backend_ext), NULL if none. */
  const struct etw_backend_ext *ext;
};

/* Optional operations. Each is called by the core with the session's lock held (never
 * concurrently with start/stop/destroy); its capability bit says whether the backend has it. */
struct etw_backend_ext {
  /** marker - put a marker event with @text (NUL-terminated, at most ETW_MARKER_MAX bytes) into
   *  the running session's stream and recording (ETW_CAP_MARKERS). */
  enum etw_err (*marker)(void *s, const char *text, struct etw_status *st);
  /** flight_start - instead of start() for mode flight: trace into the OS buffers in overwrite
   *  mode and read nothing (ETW_CAP_FLIGHT). */
  enum etw_err (*flight_start)(void *s, struct etw_status *st);
  /** snapshot - write what the buffers hold now to the recording @path (a new file) and go on
   *  tracing; the events written are gone from the buffers (ETW_CAP_FLIGHT). *@bytes: the
   *  event bytes written. */
  enum etw_err (*snapshot)(void *s, const char *path, uint64_t *bytes, struct etw_status *st);
};

#define ETW_MARKER_MAX 1024 /* bytes of a marker's text */

/* Backends compiled in (CMake chooses the sources; each defines its symbol). */
extern const struct etw_backend etw_backend_linux;
extern const struct etw_backend etw_backend_etl;
extern const struct etw_backend etw_backend_win;
extern const struct etw_backend etw_backend_nats; /* with libnats (ETWD_HAVE_NATS) */

/** etw_backends - NULL-terminated list of compiled-in backends (etwcore/src/backends.c). */
const struct etw_backend *const *etw_backends(void);
/** etw_backend_find - by name, or NULL. */
const struct etw_backend *etw_backend_find(const char *name);

/* Process-wide settings of the backends (`etwd serve`'s flags): the server gives them once, at
 * start-up in the main thread before any session, through etw_backends_configure, which hands
 * each backend compiled in what is its own (the only way the server reaches backend knobs). */
struct etw_backends_config {
  const char *data_dir;     /* ETL: files listed and described as providers (NULL = unchanged) */
  const char *manifest_dir; /* ETL and Windows: provider manifests (NULL = unchanged) */
  const char *decode;       /* ETL and Windows: "fast" | "reference" (NULL = unchanged; etl.h) */
  int reader_nice;          /* Linux: nice value of the per-CPU readers, -20..19 (0 = unchanged) */
  int reader_pinning;       /* Linux: 1 = the reader of CPU n runs only on CPU n */
  /* sinks (sink.h, etw_sinks_configure): the only directory creds/tls_* files may name, and the
   * caps on the sum of all sinks' spools (MiB) */
  const char *sink_secrets_dir;
  uint64_t sink_spool_memory_mb, sink_spool_disk_mb;
  /* ETL and Windows: MiB all stack indexes (dec_stack.h) may hold together (0 = unchanged) */
  uint64_t stack_index_mb;
};
/** etw_backends_configure - check every setting of @c, then apply them all: ETW_E_OK, or
 *  ETW_E_INVALID with the setting's name in @st->field ("decode", "reader_nice"), a sentence in
 *  @st->msg, and nothing applied. */
enum etw_err etw_backends_configure(const struct etw_backends_config *c, struct etw_status *st);
/** etw_backends_metrics - append the Prometheus text of every backend compiled in that has
 *  process-wide counters (Linux: stack symbolisation caches and stack records; ETL: the stack
 *  index budget). Any thread. */
void etw_backends_metrics(struct etw_jw *w);
/** etw_caps_json - write the capability bits of @caps as a JSON array of names. */
void etw_caps_json(unsigned caps, struct etw_jw *w);

#endif
