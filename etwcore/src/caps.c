/* caps.c — the member table (caps.h): which spec members and stream parameters a backend
 * honours, the refusals generated from it, and its JSON for GET /api/v1/backends.
 * Read-only data; every function is safe from any thread. */
#include "etwcore/caps.h"

#include <stdio.h>
#include <string.h>

typedef const struct etw_session_spec S;
typedef const struct etw_provider_spec P;

static int g_mode(S *s, P *p) { (void)p; return (s->mode & ETW_MODE_FILE) != 0; }
static int g_buffer(S *s, P *p) { (void)p; return s->buffer_kb != 0; }
static int g_pids(S *s, P *p) { (void)p; return s->n_pids != 0; }
static int g_exe(S *s, P *p) { (void)p; return s->n_exe_names != 0; }
static int g_files(S *s, P *p) { (void)p; return s->n_files != 0; }
static int g_replay(S *s, P *p) { (void)p; return s->replay_realtime != 0; }
static int g_win(S *s, P *p) { (void)p; return s->win.set != 0; }
static int g_attach(S *s, P *p) { /* spec.c turns "attach" into the provider "attach:<name>" */
  (void)p;
  return s->n_providers == 1 && s->providers[0].name && !strncmp(s->providers[0].name, "attach:", 7);
}
static int g_startw(S *s, P *p) { (void)p; return s->start_when != NULL; }
static int g_stopw(S *s, P *p) { (void)p; return s->stop_when != NULL; }
static int g_fmb(S *s, P *p) { (void)p; return s->max_file_mb != 0; }
static int g_flights(S *s, P *p) { (void)p; return s->flight_s > 0; }
static int g_order(S *s, P *p) { (void)p; return s->order_time != 0; }
static int g_swev(S *s, P *p) { (void)p; return s->stackwalk_events != 0; }
static int g_sinks(S *s, P *p) { (void)p; return s->n_sinks != 0; }
static int g_nats(S *s, P *p) { (void)p; return s->nats != NULL; }
static int g_events(S *s, P *p) { (void)s; return p->n_events != 0; }
static int g_filter(S *s, P *p) { (void)s; return p->filter != NULL; }
static int g_level(S *s, P *p) { (void)s; return p->level != 5; }
static int g_kany(S *s, P *p) { (void)s; return p->keywords_any != 0; }
static int g_kall(S *s, P *p) { (void)s; return p->keywords_all != 0; }
static int g_ids(S *s, P *p) { (void)s; return p->n_event_ids != 0; }
static int g_idx(S *s, P *p) { (void)s; return p->event_ids_exclude != 0; }
static int g_stacks(S *s, P *p) { (void)s; return p->stacks != 0; }
static int g_stklist(S *s, P *p) { (void)s; return p->n_stack_events || p->n_stack_ids; }

/* clang-format off */
static const struct etw_member table[] = {
  {ETW_MEMBER_SPEC, "name", 0, NULL, "\"web-1\"", NULL, "session name"},
  {ETW_MEMBER_SPEC, "backend", 0, NULL, "\"linux\"", NULL, "linux, etl or win"},
  {ETW_MEMBER_SPEC, "mode", ETW_CAP_FILE, "\"realtime\"", "\"both\"", g_mode, "realtime, file, both (file and both record) or flight (kernel buffers only, written by POST …/snapshot)"},
  {ETW_MEMBER_SPEC, "buffer_kb", ETW_CAP_BUFFER_SIZE, NULL, "64", g_buffer, "per-CPU buffer size in KiB"},
  {ETW_MEMBER_SPEC, "providers", 0, NULL, "[\"sched:sched_switch\"]", NULL, "provider objects or provider strings"},
  {ETW_MEMBER_SPEC, "pids", ETW_CAP_FILTER_PID, "[]", "[1]", g_pids, "record only these processes (and their children)"},
  {ETW_MEMBER_SPEC, "exe_names", ETW_CAP_FILTER_EXE, "[]", "[\"etwd-none.exe\"]", g_exe, "record only processes with these executable names"},
  {ETW_MEMBER_SPEC, "files", ETW_CAP_REPLAY, NULL, "[\"x.etl\"]", g_files, "files of the data directory to replay"},
  {ETW_MEMBER_SPEC, "replay", ETW_CAP_REPLAY, "\"fast\"", "\"recorded\"", g_replay, "replay as fast as possible or at recorded speed"},
  {ETW_MEMBER_SPEC, "duration_s", 0, NULL, "3", NULL, "stop after this many seconds (stop_reason duration)"},
  {ETW_MEMBER_SPEC, "max_events", 0, NULL, "1000", NULL, "stop after this many events (stop_reason max_events)"},
  {ETW_MEMBER_SPEC, "max_file_mb", ETW_CAP_FILE, NULL, "1", g_fmb, "stop when the recording reaches this many MiB (mode file or both)"},
  {ETW_MEMBER_SPEC, "flight_s", ETW_CAP_FLIGHT, NULL, "10", g_flights, "mode flight: a snapshot keeps only the events of the last this many seconds (whole ring-buffer pages on linux: a page is dropped when the next one began before then; whole ETW buffers on win: a buffer is kept when it holds an event of the window)"},
  {ETW_MEMBER_SPEC, "order", ETW_CAP_ORDER_TIME, "\"none\"", "\"time\"", g_order, "\"time\": events in time order across CPUs with increasing seq (live: each waits 100 ms in the hub; replays always are)"},
  {ETW_MEMBER_SPEC, "stackwalk_events", ETW_CAP_REPLAY, "false", "true", g_swev, "replays: also deliver the stack walk events (StackWalk/*, ClrStack/Walk), which are otherwise only attached to their events as \"Stack\""},
  {ETW_MEMBER_SPEC, "start_when", ETW_CAP_LIVE, NULL, "{\"provider\":\"sched\",\"event\":\"sched_process_exec\"}", g_startw, "start trigger: event match {provider,event,filter,after_s} or rate rule {provider,rate_above|rate_below,for_s,after_s}; the session is armed until it fires"},
  {ETW_MEMBER_SPEC, "stop_when", ETW_CAP_LIVE, NULL, "{\"provider\":\"sched\",\"event\":\"sched_process_exec\"}", g_stopw, "stop trigger (as start_when): stops the session with stop_reason trigger"},
  {ETW_MEMBER_SPEC, "win", ETW_CAP_WIN_SETTINGS, NULL, "{\"flush_s\":1}", g_win, "Windows session settings"},
  {ETW_MEMBER_SPEC, "attach", ETW_CAP_WIN_SETTINGS, NULL, "\"etwd-none\"", g_attach, "attach read-only to a running ETW session"},
  {ETW_MEMBER_SPEC, "sinks", ETW_CAP_SINKS, "[]", "[{\"type\":\"nats\",\"url\":\"nats://127.0.0.1:4222\"}]", g_sinks, "also publish the events to NATS JetStream (docs/fleet.md)"},
  {ETW_MEMBER_SPEC, "subjects", ETW_CAP_NATS_SOURCE, NULL, "[\"fleet.>\"]", g_nats, "JetStream subjects to read (backend nats)"},
  {ETW_MEMBER_SPEC, "nats", ETW_CAP_NATS_SOURCE, NULL, "{\"url\":\"nats://127.0.0.1:4222\"}", g_nats, "the NATS server and stream to read (backend nats)"},
  {ETW_MEMBER_PROVIDER, "name", 0, NULL, "\"sched\"", NULL, "tracepoint system, provider name or {GUID}"},
  {ETW_MEMBER_PROVIDER, "events", ETW_CAP_EVENT_NAMES, "[]", "[\"etwd_none\"]", g_events, "events to enable by name (default: all)"},
  {ETW_MEMBER_PROVIDER, "filter", ETW_CAP_FILTER_EXPR, NULL, "\"common_pid > 0\"", g_filter, "kernel filter expression"},
  {ETW_MEMBER_PROVIDER, "level", ETW_CAP_LEVEL_KEYWORDS, "5", "2", g_level, "events with Level <= this"},
  {ETW_MEMBER_PROVIDER, "keywords_any", ETW_CAP_LEVEL_KEYWORDS, "\"0x0000000000000000\"", "\"0x10\"", g_kany, "keyword mask: any bit"},
  {ETW_MEMBER_PROVIDER, "keywords_all", ETW_CAP_LEVEL_KEYWORDS, "\"0x0000000000000000\"", "\"0x10\"", g_kall, "keyword mask: all bits"},
  {ETW_MEMBER_PROVIDER, "event_ids", ETW_CAP_EVENT_IDS, "[]", "[1]", g_ids, "event ID filter"},
  {ETW_MEMBER_PROVIDER, "event_ids_exclude", ETW_CAP_EVENT_IDS, "false", "true", g_idx, "the event IDs are excluded"},
  {ETW_MEMBER_PROVIDER, "stacks", ETW_CAP_STACKS, "false", "true", g_stacks, "collect a stack with each event (true, or \"raw\": linux kernel stacks keep their leading tracing frames)"},
  {ETW_MEMBER_PROVIDER, "stacks", ETW_CAP_STACKS | ETW_CAP_STACK_EVENTS, "false", "[\"etwd_none\"]", g_stklist, "a list: stacks on these events only, trimmed as with true — event names on linux (as in events), event IDs on win (as in event_ids); each one of the provider's enabled events"},
  {ETW_MEMBER_STREAM, "provider", 0, NULL, "\"sched\"", NULL, "only these providers (comma-separated; ASCII case ignored)"},
  {ETW_MEMBER_STREAM, "event", 0, NULL, "\"sched_switch\"", NULL, "only these event names (ASCII case ignored) or IDs (comma-separated)"},
  {ETW_MEMBER_STREAM, "pid", 0, NULL, "\"1\"", NULL, "only these process IDs (comma-separated)"},
  {ETW_MEMBER_STREAM, "process", 0, NULL, "\"bash\"", NULL, "only events whose ProcessName is one of these names (comma-separated; ASCII case ignored; a trailing * matches a prefix)"},
  {ETW_MEMBER_STREAM, "level", 0, NULL, "\"4\"", NULL, "only events with Level <= this (backend linux: every event has Level 4, so below 4 is refused)"},
  {ETW_MEMBER_STREAM, "from", 0, NULL, "\"1\"", NULL, "resume at this sequence number (replay window)"},
  {ETW_MEMBER_STREAM, "queue", 0, NULL, "\"1024\"", NULL, "this client's queue bound in events"},
  {ETW_MEMBER_STREAM, "stackwalk_events", ETW_CAP_REPLAY, NULL, "\"true\"", NULL, "replay sessions and file decodes: this client's own pass also delivers (true) or leaves out (false) the stack walk rows, whatever the session's spec says"},
  {ETW_MEMBER_STREAM, "limit", 0, NULL, "\"5\"", NULL, "end the stream cleanly after this many events"},
  {ETW_MEMBER_STREAM, "format", 0, "\"ndjson\"", "\"csv\"", NULL, "HTTP streams only (a WebSocket's frames are JSON arrays): ndjson, or csv (text/csv: a header row, then one row per event with the columns of etwd convert --format csv; the events the stream's gap records would report go into its trailer, Etwd-Dropped)"},
  {ETW_MEMBER_STREAM, "from_stream_seq", ETW_CAP_NATS_SOURCE, NULL, "\"1\"", NULL, "backend nats: read the JetStream stream from this stream sequence (events carry stream_seq), through a consumer of this client's own"},
  {ETW_MEMBER_STREAM, "from_time", ETW_CAP_NATS_SOURCE, NULL, "\"2026-11-29T05:00:00Z\"", NULL, "backend nats: read the JetStream stream from the messages it stored at or after this RFC 3339 time, through a consumer of this client's own"},
  {ETW_MEMBER_SPEC, NULL, 0, NULL, NULL, NULL, NULL},
};
/* clang-format on */

const struct etw_member *etw_members(void) { return table; }

static int honours(const struct etw_backend *b, const struct etw_member *m) {
  return (b->caps & m->need) == m->need;
}

enum etw_err etw_caps_check_provider(const struct etw_backend *b, const struct etw_provider_spec *p,
                                     const char *ptr, struct etw_status *st) {
  for (const struct etw_member *m = table; m->name; m++) {
    if (m->kind != ETW_MEMBER_PROVIDER || honours(b, m) || !m->given || !m->given(NULL, p)) continue;
    char f[128];
    snprintf(f, sizeof f, "%s/%s", ptr, m->name);
    return etw_fail(st, ETW_E_INVALID, f, "backend \"%s\" cannot honour %s (%s)%s%s — see GET /api/v1/backends",
                    b->name, f, m->doc, m->dflt ? "; leave it out or give its default " : "",
                    m->dflt ? m->dflt : "");
  }
  return ETW_E_OK;
}

enum etw_err etw_caps_check_spec(const struct etw_backend *b, const struct etw_session_spec *s,
                                 struct etw_status *st) {
  for (const struct etw_member *m = table; m->name; m++) {
    if (m->kind != ETW_MEMBER_SPEC || honours(b, m) || !m->given || !m->given(s, NULL)) continue;
    char f[64];
    snprintf(f, sizeof f, "/%s", m->name);
    return etw_fail(st, ETW_E_INVALID, f, "backend \"%s\" cannot honour %s (%s)%s%s — see GET /api/v1/backends",
                    b->name, f, m->doc, m->dflt ? "; leave it out or give its default " : "",
                    m->dflt ? m->dflt : "");
  }
  if (g_attach(s, NULL)) return ETW_E_OK; /* the attach pseudo-provider is the win backend's */
  for (uint32_t i = 0; i < s->n_providers; i++) {
    char ptr[32];
    snprintf(ptr, sizeof ptr, "/providers/%u", i);
    enum etw_err e = etw_caps_check_provider(b, &s->providers[i], ptr, st);
    if (e) return e;
  }
  return ETW_E_OK;
}

const struct etw_member *etw_stream_param_refused(const struct etw_backend *b, const char *name, size_t n) {
  for (const struct etw_member *m = table; m->name; m++)
    if (m->kind == ETW_MEMBER_STREAM && strlen(m->name) == n && !memcmp(m->name, name, n))
      return honours(b, m) ? NULL : m;
  return NULL;
}

int etw_stream_param_known(const char *name, size_t n) {
  for (const struct etw_member *m = table; m->name; m++)
    if (m->kind == ETW_MEMBER_STREAM && strlen(m->name) == n && !memcmp(m->name, name, n)) return 1;
  return 0;
}

/* the spec members (top-level and per provider), or with @stream the stream parameters */
static void members_json(const struct etw_backend *b, int stream, struct etw_jw *w) {
  int first = 1;
  etw_jw_ch(w, '[');
  for (const struct etw_member *m = table; m->name; m++) {
    enum etw_member_kind kind = m->kind;
    if ((kind == ETW_MEMBER_STREAM) != stream) continue;
    char ptr[64];
    snprintf(ptr, sizeof ptr, "%s%s", kind == ETW_MEMBER_PROVIDER ? "/providers/*/" : kind == ETW_MEMBER_SPEC ? "/" : "",
             m->name);
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_lit(w, kind == ETW_MEMBER_STREAM ? "{\"parameter\":" : "{\"member\":");
    etw_jw_cs(w, ptr);
    etw_jw_lit(w, ",\"supported\":");
    etw_jw_bool(w, honours(b, m));
    etw_jw_lit(w, ",\"needs\":");
    etw_caps_json(m->need, w);
    if (m->dflt) {
      etw_jw_lit(w, ",\"default\":");
      etw_jw_lit(w, m->dflt);
    }
    etw_jw_lit(w, ",\"example\":");
    etw_jw_lit(w, m->example);
    etw_jw_lit(w, ",\"description\":");
    etw_jw_cs(w, m->doc);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
}

void etw_backend_caps_json(const struct etw_backend *b, struct etw_jw *w) {
  etw_jw_lit(w, "\"capabilities\":");
  etw_caps_json(b->caps, w);
  etw_jw_lit(w, ",\"provider_strings\":");
  etw_jw_lit(w, !strcmp(b->name, "linux")
                    ? "[\"system\",\"system:*\",\"system:event[,event…]\"]"
                    : "[\"Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]]\",\"{GUID}[:Level[:…]]\"]");
  etw_jw_lit(w, ",\"members\":");
  members_json(b, 0, w);
  etw_jw_lit(w, ",\"stream_parameters\":");
  members_json(b, 1, w);
  etw_jw_lit(w, ",\"limits\":{\"max_providers\":");
  etw_jw_u64(w, ETW_SPEC_MAX_PROVIDERS);
  etw_jw_lit(w, ",\"max_events_per_provider\":");
  etw_jw_u64(w, ETW_SPEC_MAX_EVENTS);
  etw_jw_lit(w, ",\"max_pids\":");
  etw_jw_u64(w, ETW_SPEC_MAX_PIDS);
  etw_jw_lit(w, ",\"max_files\":");
  etw_jw_u64(w, ETW_SPEC_MAX_FILES);
  if (b->caps & ETW_CAP_BUFFER_SIZE) {
    etw_jw_lit(w, ",\"buffer_kb\":{\"min\":");
    etw_jw_u64(w, b->buffer_kb_min);
    etw_jw_lit(w, ",\"max\":");
    etw_jw_u64(w, b->buffer_kb_max);
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, '}');
}
