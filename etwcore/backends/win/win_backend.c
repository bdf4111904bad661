/* win_backend.c — the "win" backend: real ETW sessions through advapi32 and TDH.
 *
 * Only the Win32 calls live here; everything that is plain data (EVENT_TRACE_PROPERTIES
 * layout, limits, filter descriptors, kernel flag names, error messages) is in the portable
 * src/win_portable.c (winreq.h), unit-tested on Linux, and the event decoding is the shared
 * decoder (etl.h) that the ETL reader uses too.
 *
 * A session we create is named ETW_SESSION_PREFIX "<id>_<pid>" and started with StartTraceW;
 * each provider is enabled with EnableTraceEx2 (level, keywords, filter descriptors). Kernel
 * events: on Windows 8 and later the session runs in system-logger mode (our own name, so
 * several etwd sessions and other tools coexist), with the kernel flags in EnableFlags, or —
 * where the OS has them (build 20348+) — by enabling the System Providers with keywords; on
 * Windows 7 the classic "NT Kernel Logger". A provider named "attach:<session>" attaches
 * read-only to a running session instead (nothing is started, enabled or stopped).
 *
 * One consumer thread per session runs OpenTraceW/ProcessTrace; its callback mirrors each
 * EVENT_RECORD into a struct etw_rec and hands it to the shared decoder. Manifest events the
 * decoder does not know get their schema once from TdhGetEventInformation (a TRACE_EVENT_INFO,
 * the same blob relogged traces carry), cached per provider/id/version. Batches are published
 * every 256 events or after each ETW buffer; a small flusher asks ETW to flush every 100 ms so
 * real-time latency stays low (FlushTimer's minimum is 1 s).
 *
 * Under wine the ETW calls are stubs and TDH aborts the process (stack-notes §4): init()
 * detects wine (ntdll's wine_get_version) and the backend reports itself unavailable; no Tdh*
 * function is ever resolved there. TDH is loaded at run time (tdh.dll) for the same reason.
 * Tests set ETWD_WIN_UNDER_WINE=1 to drive the advapi32 call sequence against wine's stubs
 * (error and clean-up paths); TDH stays refused even then.
 *
 * Threads: open/enable/disable/start/stop/destroy from the session manager (one at a time per
 * session, under its lock); stats from any thread; the callback on the consumer thread.
 */
#ifdef _WIN32
#include <windows.h>
#include <evntcons.h>
#include <evntrace.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dec_stack.h"
#include "decode.h"
#include "etwcore/backend.h"
#include "etwcore/etl.h"
#include "etwcore/host.h"
#include "etwcore/winprov.h"
#include "etwcore/winreq.h"
#include "win_marker.h"
#include "win_rec.h"
#include "win_sess.h"

/* the portable layout constants must match the real headers */
_Static_assert(sizeof(EVENT_TRACE_PROPERTIES) == ETW_ETP_SIZE, "EVENT_TRACE_PROPERTIES size");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, Wnode.Guid) == ETW_ETP_WNODE_GUID, "Wnode.Guid");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, Wnode.ClientContext) == ETW_ETP_WNODE_CLIENTCONTEXT, "ClientContext");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, Wnode.Flags) == ETW_ETP_WNODE_FLAGS, "Wnode.Flags");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, BufferSize) == ETW_ETP_BUFFERSIZE, "BufferSize");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, MaximumFileSize) == ETW_ETP_MAXIMUMFILESIZE, "MaximumFileSize");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LogFileMode) == ETW_ETP_LOGFILEMODE, "LogFileMode");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, EnableFlags) == ETW_ETP_ENABLEFLAGS, "EnableFlags");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, EventsLost) == ETW_ETP_EVENTSLOST, "EventsLost");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, RealTimeBuffersLost) == ETW_ETP_REALTIMEBUFFERSLOST, "RTBuffersLost");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LoggerThreadId) == ETW_ETP_LOGGERTHREADID, "LoggerThreadId");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LogFileNameOffset) == ETW_ETP_LOGFILENAMEOFFSET, "LogFileNameOffset");
_Static_assert(offsetof(EVENT_TRACE_PROPERTIES, LoggerNameOffset) == ETW_ETP_LOGGERNAMEOFFSET, "LoggerNameOffset");
_Static_assert(sizeof(ENABLE_TRACE_PARAMETERS) == ETW_ETPARAMS_SIZE, "ENABLE_TRACE_PARAMETERS");
_Static_assert(offsetof(ENABLE_TRACE_PARAMETERS, EnableFilterDesc) == 32, "EnableFilterDesc");
_Static_assert(sizeof(EVENT_FILTER_DESCRIPTOR) == ETW_FILTER_DESC_SIZE, "EVENT_FILTER_DESCRIPTOR");
_Static_assert(sizeof(GUID) == 16, "GUID");
_Static_assert(EVENT_HEADER_FLAG_CLASSIC_HEADER == ETW_EVH_CLASSIC_HEADER, "EVH flags");

#define BATCH_EVENTS 256
#define BATCH_BYTES (256u << 10)
#define FLUSH_MS 100
#define TEI_MAX (1u << 20)          /* largest TRACE_EVENT_INFO we accept from TDH */
#define PROVIDERS_MAX (16u << 20)   /* largest TdhEnumerateProviders answer */
#define TDH_TRIED_MAX 4096          /* schema look-ups remembered (hits and misses) per session */
#define MAX_PROV ETW_SPEC_MAX_PROVIDERS
#define ATTACH_PREFIX "attach:"

/* ---- the machine */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_wine;
static int g_wine_calls; /* ETWD_WIN_UNDER_WINE=1 (tests): make the advapi32 calls anyway */
static char g_wine_ver[64];
static uint32_t g_winver, g_build, g_ncpu;

typedef LONG(WINAPI *rtl_get_version_fn)(OSVERSIONINFOW *);
typedef const char *(__cdecl *wine_get_version_fn)(void);

static void detect(void) {
  HMODULE nt = GetModuleHandleA("ntdll.dll");
  if (nt) {
    wine_get_version_fn wgv = (wine_get_version_fn)(void (*)(void))GetProcAddress(nt, "wine_get_version");
    if (wgv) {
      g_wine = 1;
      snprintf(g_wine_ver, sizeof g_wine_ver, "%.40s", wgv());
      const char *force = getenv("ETWD_WIN_UNDER_WINE");
      g_wine_calls = force && !strcmp(force, "1");
    }
    rtl_get_version_fn rgv = (rtl_get_version_fn)(void (*)(void))GetProcAddress(nt, "RtlGetVersion");
    OSVERSIONINFOW vi;
    memset(&vi, 0, sizeof vi);
    vi.dwOSVersionInfoSize = sizeof vi;
    if (rgv && rgv(&vi) == 0) {
      g_winver = ETW_WINVER(vi.dwMajorVersion, vi.dwMinorVersion);
      g_build = vi.dwBuildNumber;
    }
  }
  DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  g_ncpu = n ? (uint32_t)n : 1;
}

static enum etw_err wine_refusal(struct etw_status *st) {
  return etw_fail(st, ETW_E_UNSUPPORTED, NULL,
                  "ETW is unavailable under wine %s: StartTraceW/EnableTraceEx2 are stubs, "
                  "OpenTraceW/ProcessTrace fail and TDH is not implemented (it aborts the "
                  "process), so the win backend is disabled; the etl backend (replays, "
                  "`etwd convert`) works",
                  g_wine_ver);
}

/* ---- TDH, loaded at run time and never under wine */
typedef ULONG(WINAPI *tdh_enum_providers_fn)(void *buf, ULONG *size);
typedef ULONG(WINAPI *tdh_event_info_fn)(PEVENT_RECORD rec, ULONG n, void *ctx, void *buf, ULONG *size);
typedef ULONG(WINAPI *tdh_enum_manifest_fn)(const GUID *g, void *buf, ULONG *size);
typedef ULONG(WINAPI *tdh_manifest_info_fn)(const GUID *g, const EVENT_DESCRIPTOR *d, void *buf, ULONG *size);
static struct {
  pthread_once_t once;
  tdh_enum_providers_fn enum_providers;
  tdh_event_info_fn event_info;
  tdh_enum_manifest_fn enum_manifest; /* Windows 8.1+ */
  tdh_manifest_info_fn manifest_info; /* Windows 8.1+ */
} g_tdh = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL};

static void tdh_load_once(void) {
  HMODULE h = LoadLibraryW(L"tdh.dll");
  if (!h) return;
  g_tdh.enum_providers = (tdh_enum_providers_fn)(void (*)(void))GetProcAddress(h, "TdhEnumerateProviders");
  g_tdh.event_info = (tdh_event_info_fn)(void (*)(void))GetProcAddress(h, "TdhGetEventInformation");
  g_tdh.enum_manifest = (tdh_enum_manifest_fn)(void (*)(void))GetProcAddress(h, "TdhEnumerateManifestProviderEvents");
  g_tdh.manifest_info = (tdh_manifest_info_fn)(void (*)(void))GetProcAddress(h, "TdhGetManifestEventInformation");
}

/* 0 = TDH usable; never loads anything under wine */
static enum etw_err tdh_ready(struct etw_status *st) {
  pthread_once(&g_once, detect);
  if (g_wine) return wine_refusal(st);
  pthread_once(&g_tdh.once, tdh_load_once);
  if (!g_tdh.enum_providers || !g_tdh.event_info)
    return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "tdh.dll (Trace Data Helper) could not be loaded");
  return ETW_E_OK;
}

/* ---- helpers */
static void guid_to_bytes(const GUID *g, unsigned char out[16]) { memcpy(out, g, 16); }
static void bytes_to_guid(const unsigned char in[16], GUID *g) { memcpy(g, in, 16); }

static int to_wide(const char *s, wchar_t *out, size_t cap) {
  return etw_utf8_to_utf16(s, (uint16_t *)out, cap) < 0 ? -1 : 0;
}

static int ci_contains(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i]) {
      int x = (unsigned char)hay[i], y = (unsigned char)needle[i];
      if (x >= 'A' && x <= 'Z') x += 32;
      if (y >= 'A' && y <= 'Z') y += 32;
      if (x != y) break;
      i++;
    }
    if (i == n) return 1;
  }
  return !n;
}

/* TdhEnumerateProviders into a heap buffer (caller frees); NULL + @st on failure */
static unsigned char *enum_providers(ULONG *len, struct etw_status *st) {
  if (tdh_ready(st)) return NULL;
  ULONG size = 256u << 10;
  for (int tries = 0; tries < 4; tries++) {
    unsigned char *b = malloc(size);
    if (!b) {
      etw_fail(st, ETW_E_NOMEM, NULL, NULL);
      return NULL;
    }
    ULONG need = size;
    ULONG rc = g_tdh.enum_providers(b, &need);
    if (rc == ERROR_SUCCESS) {
      *len = size;
      return b;
    }
    free(b);
    if (rc != ERROR_INSUFFICIENT_BUFFER || need > PROVIDERS_MAX) {
      etw_win_error(rc, "TdhEnumerateProviders", 0, st);
      return NULL;
    }
    size = need + 4096;
  }
  etw_fail(st, ETW_E_INTERNAL, NULL, "TdhEnumerateProviders kept growing");
  return NULL;
}

/* iterate the PROVIDER_ENUMERATION_INFO blob: 0 = stop */
typedef int (*prov_cb)(const GUID *g, uint32_t source, const char *name, void *ctx);
static void each_provider(const unsigned char *b, ULONG len, prov_cb cb, void *ctx) {
  if (len < 8) return;
  uint32_t n = *(const uint32_t *)b;
  for (uint32_t i = 0; i < n; i++) {
    size_t off = 8 + (size_t)i * 24; /* TRACE_PROVIDER_INFO: GUID, SchemaSource, NameOffset */
    if (off + 24 > len) return;
    const GUID *g = (const GUID *)(b + off);
    uint32_t src = *(const uint32_t *)(b + off + 16), no = *(const uint32_t *)(b + off + 20);
    char name[512] = "";
    if (no && no < len) etw_utf16_to_utf8((const uint16_t *)(b + no), (len - no) / 2, name, sizeof name);
    if (!cb(g, src, name, ctx)) return;
  }
}

struct find_ctx {
  const char *name;
  GUID g;
  char found[512];
  int ok;
};
static int find_cb(const GUID *g, uint32_t src, const char *name, void *ctx) {
  (void)src;
  struct find_ctx *f = ctx;
  if (strcasecmp(name, f->name)) return 1;
  f->g = *g;
  snprintf(f->found, sizeof f->found, "%s", name);
  f->ok = 1;
  return 0;
}

/* provider name or GUID text → GUID; @display gets the registered name when known */
static enum etw_err resolve_provider(const char *name, GUID *g, char *display, size_t dcap,
                                     const char *field, struct etw_status *st) {
  unsigned char b[16];
  if (!name || !*name) return etw_fail(st, ETW_E_INVALID, field, "a provider needs a name or GUID");
  if (etw_parse_guid(name, b) == 0) {
    bytes_to_guid(b, g);
    snprintf(display, dcap, "%s", name);
    return ETW_E_OK;
  }
  ULONG len = 0;
  unsigned char *blob = enum_providers(&len, st);
  if (!blob) return st ? st->code : ETW_E_INTERNAL;
  struct find_ctx f;
  memset(&f, 0, sizeof f);
  f.name = name;
  each_provider(blob, len, find_cb, &f);
  free(blob);
  if (!f.ok)
    return etw_fail(st, ETW_E_NOT_FOUND, field,
                    "provider \"%.200s\" is not registered on this machine (GET /api/v1/providers "
                    "lists them); TraceLogging and EventSource providers must be given by GUID",
                    name);
  *g = f.g;
  snprintf(display, dcap, "%s", f.found);
  return ETW_E_OK;
}

static int pid_alive(uint32_t pid) {
  HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
  if (!h) return GetLastError() != ERROR_INVALID_PARAMETER; /* access denied = exists */
  DWORD code = 0;
  int alive = GetExitCodeProcess(h, &code) && code == STILL_ACTIVE;
  CloseHandle(h);
  return alive;
}

/* one of ours whose owner process is gone (or unreadable) */
static int name_is_stale(const char *name) {
  size_t pl = strlen(ETW_SESSION_PREFIX);
  if (strncmp(name, ETW_SESSION_PREFIX, pl)) return 0;
  const char *us = strrchr(name + pl, '_');
  if (!us || !us[1]) return 1;
  char *end;
  unsigned long pid = strtoul(us + 1, &end, 10);
  if (*end || !pid) return 1;
  return !pid_alive((uint32_t)pid);
}

static int name_is_own(const char *name) {
  size_t pl = strlen(ETW_SESSION_PREFIX);
  if (strncmp(name, ETW_SESSION_PREFIX, pl)) return 0;
  const char *us = strrchr(name + pl, '_');
  return us && strtoul(us + 1, NULL, 10) == GetCurrentProcessId();
}

/* ControlTraceW on a session by name with a freshly laid out query block */
static ULONG control_by_name(const char *name, ULONG code, unsigned char *props) {
  wchar_t w[ETW_WIN_NAME_MAX];
  size_t len;
  if (to_wide(name, w, ETW_WIN_NAME_MAX) ||
      etw_win_props_build(props, ETW_ETP_MAX, NULL, 0, NULL, NULL, &len, NULL))
    return ERROR_INVALID_PARAMETER;
  return ControlTraceW(0, w, (EVENT_TRACE_PROPERTIES *)props, code);
}

/* QueryAllTracesW: calls @cb with each running session's name and query block */
typedef void (*sess_cb)(const char *name, const unsigned char *props, void *ctx);
static enum etw_err each_session(sess_cb cb, void *ctx, struct etw_status *st) {
  unsigned char *mem = calloc(ETW_WIN_MAX_SESSIONS, ETW_ETP_MAX);
  EVENT_TRACE_PROPERTIES *arr[ETW_WIN_MAX_SESSIONS];
  if (!mem) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  for (int i = 0; i < ETW_WIN_MAX_SESSIONS; i++) {
    size_t len;
    etw_win_props_build(mem + (size_t)i * ETW_ETP_MAX, ETW_ETP_MAX, NULL, 0, NULL, NULL, &len, NULL);
    arr[i] = (EVENT_TRACE_PROPERTIES *)(mem + (size_t)i * ETW_ETP_MAX);
  }
  ULONG count = 0;
  ULONG rc = QueryAllTracesW(arr, ETW_WIN_MAX_SESSIONS, &count);
  if (rc != ERROR_SUCCESS && rc != ERROR_MORE_DATA) {
    free(mem);
    return etw_win_error(rc, "QueryAllTracesW", 0, st);
  }
  for (ULONG i = 0; i < count && i < ETW_WIN_MAX_SESSIONS; i++) {
    char name[512];
    struct etw_win_props_stats ps;
    if (etw_win_props_read((const unsigned char *)arr[i], ETW_ETP_MAX, &ps, name, sizeof name, NULL, 0)) continue;
    cb(name, (const unsigned char *)arr[i], ctx);
  }
  free(mem);
  return ETW_E_OK;
}

struct reap_ctx {
  int own_too; /* at exit: also this process's sessions */
  unsigned n;
};
static void reap_cb(const char *name, const unsigned char *props, void *ctx) {
  (void)props;
  struct reap_ctx *r = ctx;
  if (!(name_is_stale(name) || (r->own_too && name_is_own(name)))) return;
  unsigned char *q = malloc(ETW_ETP_MAX);
  if (!q) return;
  if (control_by_name(name, EVENT_TRACE_CONTROL_STOP, q) == ERROR_SUCCESS) r->n++;
  free(q);
}

/* ---- sessions (struct win_sess: win_sess.h) */
static void publish(struct win_sess *s) {
  if (s->b && s->b->n) {
    etw_hub_publish(s->args.hub, s->b);
    s->b = NULL;
  }
}

static struct tried *tried_slot(struct win_sess *s, const unsigned char *g, uint16_t id, uint8_t v, int *hit) {
  uint32_t h = (d_rd32(g) ^ d_rd32(g + 12) ^ (uint32_t)id * 2654435761u ^ v) % TDH_TRIED_MAX;
  for (uint32_t i = 0; i < TDH_TRIED_MAX; i++) {
    struct tried *t = &s->tried[(h + i) % TDH_TRIED_MAX];
    if (!t->used) {
      *hit = 0;
      return s->n_tried + 1 < TDH_TRIED_MAX ? t : NULL;
    }
    if (t->id == id && t->version == v && !memcmp(t->guid, g, 16)) {
      *hit = 1;
      return t;
    }
  }
  *hit = 0;
  return NULL;
}

/* give the decoder the schema of a manifest event it does not know, once, from TDH */
static void schema_from_tdh(struct win_sess *s, PEVENT_RECORD er, const struct etw_rec *r) {
  struct dec_provider *p = dec_provider_get(s->dec, r->provider_id, 0);
  if (p && dec_event_find(p, r->desc.id, r->desc.version)) return;
  if (!s->tried || !g_tdh.event_info) return;
  int hit;
  struct tried *t = tried_slot(s, r->provider_id, r->desc.id, r->desc.version, &hit);
  if (hit || !t) return;
  memcpy(t->guid, r->provider_id, 16);
  t->id = r->desc.id;
  t->version = r->desc.version;
  t->used = 1;
  s->n_tried++;
  ULONG size = TEI_MAX;
  if (g_tdh.event_info(er, 0, NULL, s->tei, &size) != ERROR_SUCCESS) {
    atomic_fetch_add(&s->tdh_misses, 1);
    return;
  }
  struct etw_rec fake;
  memset(&fake, 0, sizeof fake);
  fake.kind = ETW_REC_EVENT;
  fake.desc.opcode = 32; /* EventInfo, as KernelTraceControl carries it in relogged traces */
  fake.user_data = s->tei;
  fake.user_len = size;
  dec_eventinfo(s->dec, &fake);
}

static void WINAPI on_event(PEVENT_RECORD er) {
  struct win_sess *s = er->UserContext;
  if (atomic_load(&s->stop) && !s->created) return;
  struct etw_rec r;
  etw_win_rec_from_event(er, &r);
  atomic_fetch_add(&s->events, 1);
  atomic_fetch_add(&s->bytes, (uint64_t)er->UserDataLength + sizeof er->EventHeader);

  /* manifest events: schema from TDH the first time (not TraceLogging: it carries its own) */
  int tl = 0;
  for (uint16_t i = 0; i < r.n_ext; i++) tl |= r.ext[i].type == ETW_EXT_EVENT_SCHEMA_TL;
  if (r.kind == ETW_REC_EVENT && !tl && !(r.desc.id == 0xFFFE && r.desc.opcode == 254))
    schema_from_tdh(s, er, &r);

  if (!s->b && !(s->b = etw_batch_new(BATCH_EVENTS, BATCH_BYTES))) {
    etw_hub_drop(s->args.hub, 1);
    return;
  }
  size_t mark = s->b->data.len;
  struct etw_evref ref;
  if (!etw_decoder_write(s->dec, &r, &s->b->data, &ref)) atomic_fetch_add(&s->errors, 1);
  etw_stk_learn(s->stk, &r);
  etw_stk_attach(s->stk, &r, &s->b->data); /* (no room: the event without its stack) */
  if (s->dec->unparsed != atomic_load_explicit(&s->unparsed, memory_order_relaxed)) /* the stats' copy */
    atomic_store_explicit(&s->unparsed, s->dec->unparsed, memory_order_relaxed);
  atomic_store_explicit(&s->proc_dropped, etw_decoder_proc_dropped(s->dec), memory_order_relaxed);
  if (etw_batch_commit(s->b, mark, &ref)) etw_hub_drop(s->args.hub, 1);
  if (etw_batch_full(s->b)) publish(s);
}

static ULONG WINAPI on_buffer(PEVENT_TRACE_LOGFILEW lf) {
  struct win_sess *s = lf->Context;
  publish(s); /* every delivered ETW buffer (at least each flush) */
  return atomic_load(&s->stop) && !s->created ? FALSE : TRUE;
}

static void *consumer_main(void *arg) {
  struct win_sess *s = arg;
  TRACEHANDLE ph = s->ph;
  ULONG rc = ProcessTrace(&ph, 1, NULL, NULL);
  publish(s);
  if (s->b) {
    etw_batch_unref(s->b);
    s->b = NULL;
  }
  if (s->args.ended && !atomic_load(&s->stop)) {
    struct etw_status st;
    etw_status_clear(&st);
    if (rc == ERROR_SUCCESS || rc == ERROR_CANCELLED)
      s->args.ended(s->args.ctx, ETW_E_OK, "the ETW session was stopped outside etwd");
    else {
      enum etw_err e = etw_win_error(rc, "ProcessTrace", s->kernel, &st);
      s->args.ended(s->args.ctx, e, st.msg);
    }
  }
  etw_hub_end(s->args.hub);
  return NULL;
}

/* asks ETW every FLUSH_MS to hand over partly filled buffers (real-time latency) */
static void *flusher_main(void *arg) {
  struct win_sess *s = arg;
  unsigned char *q = malloc(ETW_ETP_MAX);
  while (q && !atomic_load(&s->stop)) {
    Sleep(FLUSH_MS);
    if (atomic_load(&s->stop)) break;
    size_t len;
    if (!etw_win_props_build(q, ETW_ETP_MAX, NULL, 0, NULL, NULL, &len, NULL))
      ControlTraceW(s->h, NULL, (EVENT_TRACE_PROPERTIES *)q, EVENT_TRACE_CONTROL_FLUSH);
  }
  free(q);
  return NULL;
}

static void sess_free(struct win_sess *s) {
  if (!s) return;
  etw_win_marker_release(s->mk);
  etw_decoder_free(s->dec);
  etw_stk_free(s->stk);
  free(s->tried);
  free(s->tei);
  free(s->prov);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static ULONG enable_one(struct win_sess *s, const struct win_prov *p, ULONG code) {
  EVENT_FILTER_DESCRIPTOR fd[ETW_WIN_FILTERS_USED];
  ENABLE_TRACE_PARAMETERS tp;
  memset(&tp, 0, sizeof tp);
  tp.Version = ETW_ETPARAMS_VERSION_2;
  tp.EnableProperty = p->en.enable_property;
  for (uint32_t i = 0; i < p->en.nf; i++) {
    fd[i].Ptr = (ULONGLONG)(uintptr_t)p->en.f[i].data;
    fd[i].Size = p->en.f[i].size;
    fd[i].Type = p->en.f[i].type;
  }
  tp.EnableFilterDesc = p->en.nf ? fd : NULL;
  tp.FilterDescCount = p->en.nf;
  return EnableTraceEx2(s->h, &p->guid, code, p->en.level, p->en.keywords_any, p->en.keywords_all, 0,
                        code == EVENT_CONTROL_CODE_ENABLE_PROVIDER ? &tp : NULL);
}

static void stop_os_session(struct win_sess *s) {
  if (!s->created || atomic_exchange(&s->os_stopped, 1)) return;
  unsigned char *q = malloc(ETW_ETP_MAX);
  size_t len;
  if (q && !etw_win_props_build(q, ETW_ETP_MAX, NULL, 0, NULL, NULL, &len, NULL) &&
      ControlTraceW(s->h, NULL, (EVENT_TRACE_PROPERTIES *)q, EVENT_TRACE_CONTROL_STOP) == ERROR_SUCCESS) {
    etw_win_props_read(q, len, &s->last, NULL, 0, NULL, 0);
    s->have_last = 1;
  }
  free(q);
}

static enum etw_err win_init(struct etw_status *st) {
  pthread_once(&g_once, detect);
  if (g_wine && !g_wine_calls) return wine_refusal(st);
  struct reap_ctx r = {0, 0};
  each_session(reap_cb, &r, NULL); /* best effort: not elevated, it sees (and reaps) nothing */
  return ETW_E_OK;
}

static void win_cleanup(void) {
  pthread_once(&g_once, detect);
  if (g_wine && !g_wine_calls) return;
  struct reap_ctx r = {1, 0};
  each_session(reap_cb, &r, NULL);
}

/* 3. of open: etwd's marker provider first (a spec naming it then sets its own level/keywords),
 * the spec's providers, and the system providers of kernel events */
enum etw_err win_sess_enable_all(struct win_sess *s, struct etw_status *st) {
  enum etw_err e = ETW_E_OK;
  ULONG rc;
  if (!s->cfg.kernel_logger && !s->mk) s->mk = etw_win_marker_enable(s->h);
  for (uint32_t i = 0; !e && i < s->n_prov; i++)
    if ((rc = enable_one(s, &s->prov[i], EVENT_CONTROL_CODE_ENABLE_PROVIDER)) != ERROR_SUCCESS) {
      e = etw_win_error(rc, "EnableTraceEx2", 0, st);
      if (st) snprintf(st->field, sizeof st->field, "/providers");
    }
  if (!e && s->kernel && s->cfg.system_logger && !s->cfg.kernel_flags) {
    struct etw_win_sysprov sp[16];
    uint32_t n = etw_win_kernel_sysproviders(s->kflags, sp, 16);
    for (uint32_t i = 0; !e && i < n; i++) {
      GUID g;
      bytes_to_guid(sp[i].guid, &g);
      rc = EnableTraceEx2(s->h, &g, EVENT_CONTROL_CODE_ENABLE_PROVIDER, 255, sp[i].keywords, 0, 0, NULL);
      if (rc != ERROR_SUCCESS) e = etw_win_error(rc, "EnableTraceEx2(system provider)", 1, st);
    }
  }
  return e;
}

uint32_t win_ncpu(void) { return g_ncpu; }

static enum etw_err win_open(const struct etw_backend_args *a, void **state, struct etw_status *st) {
  pthread_once(&g_once, detect);
  if (g_wine && !g_wine_calls) return wine_refusal(st);
  const struct etw_session_spec *spec = a->spec;
  struct win_sess *s = calloc(1, sizeof *s);
  if (!s) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  pthread_mutex_init(&s->mu, NULL);
  s->args = *a;
  enum etw_err e = ETW_E_OK;
  uint32_t kflags = 0;
  const char *attach = NULL;
  s->prov = calloc(spec->n_providers ? spec->n_providers : 1, sizeof *s->prov);
  if (!s->prov) {
    sess_free(s);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  /* 1. validate everything before any call that changes the system */
  for (uint32_t i = 0; !e && i < spec->n_providers; i++) {
    const struct etw_provider_spec *p = &spec->providers[i];
    char ptr[48];
    snprintf(ptr, sizeof ptr, "/providers/%u", i);
    if (p->name && !strncmp(p->name, ATTACH_PREFIX, strlen(ATTACH_PREFIX))) {
      if (spec->n_providers != 1)
        e = etw_fail(st, ETW_E_INVALID, ptr, "attaching to a session excludes other providers");
      attach = p->name + strlen(ATTACH_PREFIX);
      if (!*attach) e = etw_fail(st, ETW_E_INVALID, ptr, "attach:<session name> names no session");
    } else if (etw_win_is_kernel_provider(p->name)) {
      uint32_t f = 0;
      if (p->stacks) e = etw_fail(st, ETW_E_UNSUPPORTED, ptr, "stack walks of kernel events are not supported yet");
      else e = etw_win_kernel_flags(p->events, p->n_events, ptr, &f, st);
      kflags |= f;
      s->kernel = 1;
    } else {
      struct win_prov *wp = &s->prov[s->n_prov];
      e = etw_win_enable_build(spec, p, ptr, g_winver, g_build, &wp->en, st);
      if (!e) e = resolve_provider(p->name, &wp->guid, wp->name, sizeof wp->name, ptr, st);
      if (!e) s->n_prov++;
    }
  }
  if (!e && attach) {
    s->attach = 1;
    if (spec->mode & (ETW_MODE_FILE | ETW_MODE_FLIGHT))
      e = etw_fail(st, ETW_E_INVALID, "/mode", "an attached session is read-only: it cannot record a file or "
                   "be a flight recorder");
    else if (spec->n_pids || spec->n_exe_names)
      e = etw_fail(st, ETW_E_INVALID, "/pids", "an attached session is read-only: filter with subscriptions");
    else if (snprintf(s->name, sizeof s->name, "%s", attach) >= (int)sizeof s->name ||
             to_wide(s->name, s->wname, ETW_WIN_NAME_MAX))
      e = etw_fail(st, ETW_E_INVALID, "/providers/0", "the session name is too long or not UTF-8");
    if (!e) { /* it must exist and deliver in real time */
      unsigned char *q = malloc(ETW_ETP_MAX);
      ULONG rc = q ? control_by_name(s->name, EVENT_TRACE_CONTROL_QUERY, q) : ERROR_NOT_ENOUGH_MEMORY;
      struct etw_win_props_stats ps;
      if (rc != ERROR_SUCCESS) e = etw_win_error(rc, "ControlTraceW(QUERY)", 0, st);
      else if (!etw_win_props_read(q, ETW_ETP_MAX, &ps, NULL, 0, NULL, 0) && !(ps.log_file_mode & ETW_LOG_REAL_TIME))
        e = etw_fail(st, ETW_E_INVALID, "/providers/0",
                     "session \"%.200s\" does not deliver events in real time (it only writes a file)", s->name);
      free(q);
    }
  } else if (!e) {
    s->kflags = kflags;
    if (spec->mode & ETW_MODE_FLIGHT) e = etw_win_flight_cfg(spec, g_ncpu, &s->cfg, st); /* a ring in memory */
    else etw_win_cfg_from_spec(spec, &s->cfg);
    if (s->kernel) {
      if (g_winver >= ETW_WINVER(6, 2)) { /* Windows 8+: kernel events in our own session */
        s->cfg.system_logger = 1;
        if (!etw_win_has_system_providers(g_winver, g_build)) s->cfg.kernel_flags = kflags;
      } else if (s->n_prov) {
        e = etw_fail(st, ETW_E_UNSUPPORTED, "/providers",
                     "before Windows 8 the kernel logger is a session of its own: create one session "
                     "with only the kernel provider");
      } else {
        s->cfg.kernel_logger = 1;
        s->cfg.kernel_flags = kflags;
      }
    }
    snprintf(s->name, sizeof s->name, "%s", s->cfg.kernel_logger ? ETW_KERNEL_LOGGER_NAME : a->os_name);
    if (!e) e = etw_win_cfg_check(&s->cfg, g_ncpu, a->record_path, st);
    if (!e && to_wide(s->name, s->wname, ETW_WIN_NAME_MAX))
      e = etw_fail(st, ETW_E_INVALID, "/name", "bad session name");
  }
  if (!e && (spec->mode & ETW_MODE_REALTIME)) {
    s->dec = etw_decoder_new(NULL);
    char *md = etw_etl_manifest_dir();
    if (s->dec && md) {
      etw_decoder_free(s->dec);
      s->dec = etw_decoder_new(md);
    }
    free(md);
    if (s->dec) etw_decoder_set_host(s->dec, etw_host_name()); /* System.Host: --host-name, else the machine's */
    s->tried = calloc(TDH_TRIED_MAX, sizeof *s->tried);
    s->tei = malloc(TEI_MAX);
    s->stk = etw_stk_new(0);
    if (!s->dec || !s->tried || !s->tei || !s->stk) e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    if (!e && tdh_ready(NULL) != ETW_E_OK) { /* decode without TDH: TraceLogging, manifests on disk */
      free(s->tried);
      s->tried = NULL;
    }
  }
  if (e || s->attach) {
    if (e) sess_free(s);
    else *state = s;
    return e;
  }

  /* 2. start the session */
  unsigned char *props = malloc(ETW_ETP_MAX);
  size_t len = 0;
  char file[ETW_WIN_PATH_MAX * 3] = "";
  if (a->record_path) {
    snprintf(file, sizeof file, "%s", a->record_path);
    for (char *p = file; *p; p++)
      if (*p == '/') *p = '\\';
  }
  if (!props) e = etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  if (!e) e = etw_win_props_build(props, ETW_ETP_MAX, &s->cfg, g_ncpu, s->name, file[0] ? file : NULL, &len, st);
  ULONG rc = ERROR_SUCCESS;
  if (!e) {
    rc = StartTraceW(&s->h, s->wname, (EVENT_TRACE_PROPERTIES *)props);
    if (rc == ERROR_ALREADY_EXISTS && !s->cfg.kernel_logger && name_is_own(s->name)) {
      unsigned char *q = malloc(ETW_ETP_MAX); /* left over from an earlier run with our pid */
      if (q) control_by_name(s->name, EVENT_TRACE_CONTROL_STOP, q);
      free(q);
      etw_win_props_build(props, ETW_ETP_MAX, &s->cfg, g_ncpu, s->name, file[0] ? file : NULL, &len, st);
      rc = StartTraceW(&s->h, s->wname, (EVENT_TRACE_PROPERTIES *)props);
    }
    if (rc != ERROR_SUCCESS) e = etw_win_error(rc, "StartTraceW", s->kernel, st);
  }
  free(props);
  if (e) {
    sess_free(s);
    return e;
  }
  s->created = 1;
  if (!(spec->mode & ETW_MODE_FLIGHT) && (e = win_sess_enable_all(s, st))) { /* flight: at flight_start */
    stop_os_session(s);
    sess_free(s);
    return e;
  }
  *state = s;
  return ETW_E_OK;
}

static enum etw_err win_start(void *sv, struct etw_status *st) {
  struct win_sess *s = sv;
  pthread_mutex_lock(&s->mu);
  if (s->started) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_STATE, NULL, "already started");
  }
  if (!(s->args.spec->mode & ETW_MODE_REALTIME)) { /* file only: ETW writes it, nothing to read */
    s->started = 1;
    s->joined = 1;
    pthread_mutex_unlock(&s->mu);
    return ETW_E_OK;
  }
  EVENT_TRACE_LOGFILEW lf;
  memset(&lf, 0, sizeof lf);
  lf.LoggerName = s->wname;
  lf.ProcessTraceMode = PROCESS_TRACE_MODE_REAL_TIME | PROCESS_TRACE_MODE_EVENT_RECORD;
  lf.EventRecordCallback = on_event;
  lf.BufferCallback = on_buffer;
  lf.Context = s;
  s->ph = OpenTraceW(&lf);
  if (s->ph == INVALID_PROCESSTRACE_HANDLE) {
    enum etw_err e = etw_win_error(GetLastError(), "OpenTraceW", s->kernel, st);
    pthread_mutex_unlock(&s->mu);
    return e;
  }
  if (pthread_create(&s->th, NULL, consumer_main, s)) {
    CloseTrace(s->ph);
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_INTERNAL, NULL, "cannot start the consumer thread");
  }
  s->started = 1;
  if (s->created && !pthread_create(&s->flusher, NULL, flusher_main, s)) s->flusher_on = 1;
  pthread_mutex_unlock(&s->mu);
  return ETW_E_OK;
}

static void win_stop(void *sv) {
  struct win_sess *s = sv;
  atomic_store(&s->stop, 1);
  pthread_mutex_lock(&s->mu);
  if (s->flusher_on) {
    pthread_join(s->flusher, NULL);
    s->flusher_on = 0;
  }
  stop_os_session(s); /* ours: ProcessTrace delivers what is buffered, then returns */
  if (s->started && !s->joined) {
    CloseTrace(s->ph); /* attached: ends ProcessTrace after the current buffer */
    pthread_join(s->th, NULL);
    s->joined = 1;
  }
  pthread_mutex_unlock(&s->mu);
}

static void win_destroy(void *sv) {
  struct win_sess *s = sv;
  win_stop(s);
  sess_free(s);
}

static void query(struct win_sess *s, struct etw_win_props_stats *ps, int *ok) {
  *ok = 0;
  if (s->have_last) {
    *ps = s->last;
    *ok = 1;
    return;
  }
  unsigned char *q = malloc(ETW_ETP_MAX);
  if (q && control_by_name(s->name, EVENT_TRACE_CONTROL_QUERY, q) == ERROR_SUCCESS)
    *ok = etw_win_props_read(q, ETW_ETP_MAX, ps, NULL, 0, NULL, 0) == 0;
  free(q);
}

static void win_stats(void *sv, struct etw_backend_stats *out) {
  struct win_sess *s = sv;
  memset(out, 0, sizeof *out);
  struct etw_win_props_stats ps;
  int ok;
  query(s, &ps, &ok);
  if (ok) {
    out->kernel_dropped = ps.events_lost;
    out->kernel_overrun = (uint64_t)ps.rt_buffers_lost + ps.log_buffers_lost; /* whole buffers */
    out->kernel_lost = out->kernel_dropped;
  }
  out->read_events = atomic_load(&s->events);
  out->read_bytes = atomic_load(&s->bytes);
  out->decode_errors = atomic_load(&s->errors);
  out->unparsed = atomic_load(&s->unparsed);
  out->proc_dropped = atomic_load(&s->proc_dropped);
}

static void win_stats_json(void *sv, struct etw_jw *w) {
  struct win_sess *s = sv;
  struct etw_win_props_stats ps;
  int ok;
  query(s, &ps, &ok);
  etw_jw_lit(w, "\"etw\":{\"session\":");
  etw_jw_cs(w, s->name);
  etw_jw_lit(w, ",\"attached\":");
  etw_jw_bool(w, s->attach);
  if (ok) {
    etw_jw_lit(w, ",\"events_lost\":");
    etw_jw_u64(w, ps.events_lost);
    etw_jw_lit(w, ",\"buffers_lost\":");
    etw_jw_u64(w, ps.log_buffers_lost);
    etw_jw_lit(w, ",\"realtime_buffers_lost\":");
    etw_jw_u64(w, ps.rt_buffers_lost);
    etw_jw_lit(w, ",\"buffers_written\":");
    etw_jw_u64(w, ps.buffers_written);
    etw_jw_lit(w, ",\"buffers\":");
    etw_jw_u64(w, ps.n_buffers);
    etw_jw_lit(w, ",\"free_buffers\":");
    etw_jw_u64(w, ps.free_buffers);
    etw_jw_lit(w, ",\"buffer_kb\":");
    etw_jw_u64(w, ps.buffer_kb);
  }
  if (s->args.spec->mode & ETW_MODE_FLIGHT) { /* win_flight.c's counters (s->mu) */
    pthread_mutex_lock(&s->mu);
    etw_jw_lit(w, ",\"flight\":{\"ring_kb\":");
    etw_jw_u64(w, (uint64_t)s->cfg.min_buffers * s->cfg.buffer_kb);
    etw_jw_lit(w, ",\"snapshots\":");
    etw_jw_u64(w, s->n_snapshots);
    etw_jw_lit(w, ",\"last_snapshot_events\":");
    etw_jw_u64(w, s->last_snapshot_events);
    if (s->args.spec->flight_s > 0) { /* the last snapshot's trim to flight_s (etl_trim.c) */
      etw_jw_lit(w, ",\"last_trim\":{\"buffers_kept\":");
      etw_jw_u64(w, s->trim.buffers_kept);
      etw_jw_lit(w, ",\"buffers_dropped\":");
      etw_jw_u64(w, s->trim.buffers_dropped);
      etw_jw_lit(w, ",\"events_dropped\":");
      etw_jw_u64(w, s->trim.events_dropped);
      etw_jw_lit(w, ",\"events_before_window\":");
      etw_jw_u64(w, s->trim.events_before_cut);
      etw_jw_ch(w, '}');
    }
    etw_jw_ch(w, '}');
    pthread_mutex_unlock(&s->mu);
  }
  etw_jw_lit(w, ",\"schema_misses\":");
  etw_jw_u64(w, atomic_load(&s->tdh_misses));
  etw_jw_ch(w, '}');
}

static enum etw_err win_enable(void *sv, const struct etw_provider_spec *p, struct etw_status *st) {
  struct win_sess *s = sv;
  if (s->attach) return etw_fail(st, ETW_E_STATE, NULL, "an attached session is read-only");
  if (etw_win_is_kernel_provider(p->name))
    return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "kernel flags are fixed when the session starts");
  struct win_prov wp;
  memset(&wp, 0, sizeof wp);
  enum etw_err e = etw_win_enable_build(s->args.spec, p, "/providers/0", g_winver, g_build, &wp.en, st);
  if (!e) e = resolve_provider(p->name, &wp.guid, wp.name, sizeof wp.name, "/providers/0/name", st);
  if (e) return e;
  ULONG rc = enable_one(s, &wp, EVENT_CONTROL_CODE_ENABLE_PROVIDER);
  return rc == ERROR_SUCCESS ? ETW_E_OK : etw_win_error(rc, "EnableTraceEx2", 0, st);
}

static enum etw_err win_disable(void *sv, const char *provider, struct etw_status *st) {
  struct win_sess *s = sv;
  if (s->attach) return etw_fail(st, ETW_E_STATE, NULL, "an attached session is read-only");
  struct win_prov wp;
  memset(&wp, 0, sizeof wp);
  enum etw_err e = resolve_provider(provider, &wp.guid, wp.name, sizeof wp.name, "/provider", st);
  if (e) return e;
  ULONG rc = enable_one(s, &wp, EVENT_CONTROL_CODE_DISABLE_PROVIDER);
  return rc == ERROR_SUCCESS ? ETW_E_OK : etw_win_error(rc, "EnableTraceEx2(disable)", 0, st);
}

/* ---- providers API: the same JSON shape as on Linux and for ETL files:
 * {"name","guid","source"} and, when few providers match, "events" (their manifest's count) */
#define LIST_COUNT_MAX 64 /* count events only when at most this many providers match */

/* PROVIDER_EVENT_INFO of a manifest provider into a heap buffer (caller frees), or NULL */
static unsigned char *manifest_events(const GUID *g, ULONG *size_out, ULONG *rc_out) {
  ULONG size = 64u << 10, rc = ERROR_INSUFFICIENT_BUFFER;
  unsigned char *pei = NULL;
  for (int tries = 0; tries < 4 && rc == ERROR_INSUFFICIENT_BUFFER && size <= TEI_MAX * 4; tries++) {
    free(pei);
    if (!(pei = malloc(size))) break;
    ULONG need = size;
    rc = g_tdh.enum_manifest(g, pei, &need);
    if (rc == ERROR_INSUFFICIENT_BUFFER) size = need + 1024;
  }
  if (rc_out) *rc_out = rc;
  if (rc != ERROR_SUCCESS || size < 8) {
    free(pei);
    return NULL;
  }
  *size_out = size;
  return pei;
}

struct list_ctx {
  const char *q;
  struct etw_jw *w;
  int first, counting, with_counts;
  uint32_t matches;
};
static int list_cb(const GUID *g, uint32_t src, const char *name, void *ctx) {
  struct list_ctx *l = ctx;
  char gs[39];
  unsigned char b[16];
  guid_to_bytes(g, b);
  etw_format_guid(gs, b);
  if (l->q && *l->q && !ci_contains(name, l->q) && !ci_contains(gs, l->q)) return 1;
  if (l->counting) return ++l->matches <= LIST_COUNT_MAX;
  if (!l->first) etw_jw_ch(l->w, ',');
  l->first = 0;
  etw_jw_lit(l->w, "{\"name\":");
  etw_jw_cs(l->w, name[0] ? name : gs);
  etw_jw_lit(l->w, ",\"guid\":");
  etw_jw_cs(l->w, gs);
  etw_jw_lit(l->w, ",\"source\":");
  etw_jw_cs(l->w, src == 0 ? "manifest" : src == 1 ? "mof" : "other");
  ULONG size = 0;
  unsigned char *pei = l->with_counts && src == 0 && g_tdh.enum_manifest ? manifest_events(g, &size, NULL) : NULL;
  if (pei) {
    etw_jw_lit(l->w, ",\"events\":");
    etw_jw_u64(l->w, *(const uint32_t *)pei);
    free(pei);
  }
  etw_jw_ch(l->w, '}');
  return !l->w->err;
}

static enum etw_err win_list_providers(const char *q, struct etw_jw *w, struct etw_status *st) {
  ULONG len = 0;
  unsigned char *blob = enum_providers(&len, st);
  if (!blob) return st ? st->code : ETW_E_INTERNAL;
  struct list_ctx l = {q, w, 1, 1, 0, 0};
  each_provider(blob, len, list_cb, &l); /* how many match? */
  l.counting = 0;
  l.with_counts = l.matches <= LIST_COUNT_MAX;
  etw_jw_ch(w, '[');
  each_provider(blob, len, list_cb, &l);
  etw_jw_ch(w, ']');
  free(blob);
  return ETW_E_OK;
}

static enum etw_err win_describe_provider(const char *name, struct etw_jw *w, struct etw_status *st) {
  GUID g;
  char disp[256];
  if (etw_win_is_kernel_provider(name)) { /* the kernel logger: its flag names */
    etw_jw_lit(w, "{\"name\":\"kernel\",\"guid\":\"{9e814aad-3204-11d2-9a82-006008a86939}\",\"events\":[");
    const struct etw_win_kflag *k = etw_win_kflags();
    for (int i = 0; k[i].name; i++) {
      if (i) etw_jw_ch(w, ',');
      etw_jw_lit(w, "{\"name\":");
      etw_jw_cs(w, k[i].name);
      etw_jw_lit(w, ",\"flags\":");
      etw_jw_hex(w, k[i].flags);
      etw_jw_lit(w, ",\"fields\":[]}");
    }
    etw_jw_lit(w, "]}");
    return ETW_E_OK;
  }
  enum etw_err e = resolve_provider(name, &g, disp, sizeof disp, NULL, st);
  if (e) return e;
  if (!g_tdh.enum_manifest || !g_tdh.manifest_info)
    return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "listing a provider's events needs Windows 8.1 or later");
  ULONG size = 0, rc = 0;
  unsigned char *pei = manifest_events(&g, &size, &rc);
  unsigned char gb[16];
  guid_to_bytes(&g, gb);
  char gs[39];
  etw_format_guid(gs, gb);
  etw_jw_lit(w, "{\"name\":");
  etw_jw_cs(w, disp);
  etw_jw_lit(w, ",\"guid\":");
  etw_jw_cs(w, gs);
  etw_jw_lit(w, ",\"events\":[");
  if (pei) {
    uint32_t n = *(const uint32_t *)pei; /* PROVIDER_EVENT_INFO: count, reserved, descriptors */
    unsigned char *tei = malloc(TEI_MAX);
    int first = 1;
    for (uint32_t i = 0; tei && i < n && 8 + (size_t)(i + 1) * sizeof(EVENT_DESCRIPTOR) <= size; i++) {
      const EVENT_DESCRIPTOR *d = (const EVENT_DESCRIPTOR *)(pei + 8) + i;
      ULONG ts = TEI_MAX;
      if (g_tdh.manifest_info(&g, d, tei, &ts) != ERROR_SUCCESS) continue;
      if (!first) etw_jw_ch(w, ',');
      first = 0;
      etw_win_tei_json(tei, ts, w);
    }
    free(tei);
  }
  etw_jw_lit(w, "]}");
  free(pei);
  if (rc != ERROR_SUCCESS && rc != ERROR_NOT_FOUND && rc != ERROR_FILE_NOT_FOUND)
    return etw_win_error(rc, "TdhEnumerateManifestProviderEvents", 0, st);
  return ETW_E_OK;
}

/* ---- running sessions (QueryAllTracesW) */
struct sessjson_ctx {
  struct etw_jw *w;
  int first;
};
static void sessjson_cb(const char *name, const unsigned char *props, void *ctx) {
  struct sessjson_ctx *c = ctx;
  struct etw_win_props_stats ps;
  char file[512];
  etw_win_props_read(props, ETW_ETP_MAX, &ps, NULL, 0, file, sizeof file);
  if (!c->first) etw_jw_ch(c->w, ',');
  c->first = 0;
  etw_jw_lit(c->w, "{\"name\":");
  etw_jw_cs(c->w, name);
  etw_jw_lit(c->w, ",\"ours\":");
  etw_jw_bool(c->w, !strncmp(name, ETW_SESSION_PREFIX, strlen(ETW_SESSION_PREFIX)));
  etw_jw_lit(c->w, ",\"realtime\":");
  etw_jw_bool(c->w, (ps.log_file_mode & ETW_LOG_REAL_TIME) != 0);
  if (file[0]) {
    etw_jw_lit(c->w, ",\"file\":");
    etw_jw_cs(c->w, file);
  }
  etw_jw_lit(c->w, ",\"events_lost\":");
  etw_jw_u64(c->w, ps.events_lost);
  etw_jw_lit(c->w, ",\"buffers\":");
  etw_jw_u64(c->w, ps.n_buffers);
  etw_jw_ch(c->w, '}');
}

enum etw_err etw_win_sessions_json(struct etw_jw *w, struct etw_status *st) {
  pthread_once(&g_once, detect);
  if (g_wine && !g_wine_calls) return wine_refusal(st);
  struct sessjson_ctx c = {w, 1};
  etw_jw_ch(w, '[');
  enum etw_err e = each_session(sessjson_cb, &c, st);
  etw_jw_ch(w, ']');
  return e;
}

/* ---- for `etwd selftest` (winprov.h) */
const char *etw_win_wine_version(void) {
  pthread_once(&g_once, detect);
  return g_wine ? g_wine_ver : NULL;
}

void etw_win_force_calls(void) {
  pthread_once(&g_once, detect);
  if (g_wine) g_wine_calls = 1;
}

uint32_t etw_win_session_query(const char *name) {
  unsigned char *q = malloc(ETW_ETP_MAX);
  ULONG rc = q ? control_by_name(name, EVENT_TRACE_CONTROL_QUERY, q) : ERROR_NOT_ENOUGH_MEMORY;
  free(q);
  return rc;
}

const struct etw_backend etw_backend_win = {
    .name = "win",
    .caps = ETW_CAP_LIVE | ETW_CAP_FILE | ETW_CAP_LIST_PROVIDERS | ETW_CAP_FILTER_PID | ETW_CAP_FILTER_EXE |
            ETW_CAP_LEVEL_KEYWORDS | ETW_CAP_EVENT_IDS | ETW_CAP_STACKS | ETW_CAP_STACK_EVENTS | ETW_CAP_KERNEL_FLAGS |
            ETW_CAP_ENABLE_RUNNING | ETW_CAP_EVENT_NAMES | ETW_CAP_BUFFER_SIZE | ETW_CAP_WIN_SETTINGS |
            ETW_CAP_MARKERS | ETW_CAP_FLIGHT,
    .buffer_kb_min = 1,
    .buffer_kb_max = ETW_WIN_BUFFER_KB_MAX,
    .init = win_init,
    .open = win_open,
    .enable = win_enable,
    .disable = win_disable,
    .start = win_start,
    .stop = win_stop,
    .destroy = win_destroy,
    .stats = win_stats,
    .stats_json = win_stats_json,
    .list_providers = win_list_providers,
    .describe_provider = win_describe_provider,
    .cleanup = win_cleanup,
    .list_os_sessions = etw_win_sessions_json,
    .ext = &win_ext,
};

#endif /* _WIN32 */
