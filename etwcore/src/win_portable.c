/* win_portable.c — the portable half of the Windows ETW backend (see winreq.h): session
 * configuration limits, the EVENT_TRACE_PROPERTIES layout, EnableTraceEx2 parameters and
 * filter descriptors, kernel flag names, Win32 error mapping and UTF-8/UTF-16 conversion.
 * Pure functions over caller-owned fixed-size buffers; compiled on every OS. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "etwcore/jw.h"
#include "etwcore/winreq.h"

#define G16 ETW_GUID_BYTES

const unsigned char etw_guid_system_trace_control[16] =
    G16(0x9e814aadu, 0x3204, 0x11d2, 0x9a, 0x82, 0x00, 0x60, 0x08, 0xa8, 0x69, 0x39);

/* System providers (docs: "System Providers", evntrace.h of SDK 20348) */
static const unsigned char g_sys_process[16] =
    G16(0x151f55dcu, 0x467d, 0x471f, 0x83, 0xb5, 0x5f, 0x88, 0x9d, 0x46, 0xff, 0x66);
static const unsigned char g_sys_io[16] =
    G16(0x3d5c43e3u, 0x0f1c, 0x4202, 0xb8, 0x17, 0x17, 0x4c, 0x00, 0x70, 0xdc, 0x79);
static const unsigned char g_sys_registry[16] =
    G16(0x16156bd9u, 0xfab4, 0x4cfa, 0xa2, 0x32, 0x89, 0xd1, 0x09, 0x90, 0x58, 0xe3);
static const unsigned char g_sys_scheduler[16] =
    G16(0x599a2a76u, 0x4d91, 0x4910, 0x9a, 0xc7, 0x7d, 0x33, 0xf2, 0xe9, 0x7a, 0x6c);
static const unsigned char g_sys_profile[16] =
    G16(0xbfeb0324u, 0x1cee, 0x496f, 0xa4, 0x09, 0x2a, 0xc2, 0xb4, 0x8a, 0x63, 0x22);
static const unsigned char g_sys_memory[16] =
    G16(0x82958ca9u, 0xb6cd, 0x47f8, 0xa3, 0xa8, 0x03, 0xae, 0x85, 0xa4, 0xbc, 0x24);
static const unsigned char g_sys_syscall[16] =
    G16(0x434286f7u, 0x6f1b, 0x45bb, 0xb3, 0x7e, 0x95, 0xf6, 0x23, 0x04, 0x6c, 0x7c);
static const unsigned char g_sys_interrupt[16] =
    G16(0xd4bbee17u, 0xb545, 0x4888, 0x85, 0x8b, 0x74, 0x41, 0x69, 0x01, 0x5b, 0x25);
static const unsigned char g_sys_alpc[16] =
    G16(0xfcb9baafu, 0xe529, 0x4980, 0x92, 0xe9, 0xce, 0xd1, 0xa6, 0xaa, 0xdf, 0xdf);

/* EVENT_TRACE_FLAG_* → SYSTEM_*_KW_* */
static const struct etw_win_kflag kflags[] = {
    {"process", 0x00000001u, g_sys_process, 0x1},               /* KW_GENERAL */
    {"thread", 0x00000002u, g_sys_process, 0x800},              /* KW_THREAD */
    {"image", 0x00000004u, g_sys_process, 0x1000},              /* KW_LOADER */
    {"disk_io", 0x00000100u | 0x00000400u, g_sys_io, 0x1 | 0x2}, /* DISK + DISK_INIT */
    {"file_io", 0x02000000u | 0x04000000u | 0x00000200u, g_sys_io, 0x10 | 0x400 | 0x4},
    {"network", 0x00010000u, g_sys_io, 0x200},                  /* KW_NETWORK */
    {"registry", 0x00020000u, g_sys_registry, 0x1},
    {"context_switch", 0x00000010u, g_sys_scheduler, 0x200},    /* KW_CONTEXT_SWITCH */
    {"sampled_profile", 0x01000000u, g_sys_profile, 0x1},
    {"page_faults", 0x00001000u, g_sys_memory, 0x4},            /* KW_ALL_FAULTS */
    {"hard_faults", 0x00002000u, g_sys_memory, 0x2},
    {"virtual_alloc", 0x00004000u, g_sys_memory, 0x400},
    {"syscall", 0x00000080u, g_sys_syscall, 0x1},
    {"dpc", 0x00000020u, g_sys_interrupt, 0x4},
    {"interrupt", 0x00000040u, g_sys_interrupt, 0x1},
    {"dispatcher", 0x00000800u, g_sys_scheduler, 0x2},
    {"alpc", 0x00100000u, g_sys_alpc, 0x1},
    {"driver", 0x00800000u, g_sys_io, 0x80},
    {"split_io", 0x00200000u, g_sys_io, 0x8},
    {"process_counters", 0x00000008u, g_sys_process, 0x8},
    {"job", 0x00080000u, g_sys_process, 0x200},
    {"debug_events", 0x00400000u, g_sys_process, 0x80},
    {"dbgprint", 0x00040000u, g_sys_process, 0x100},
    {NULL, 0, NULL, 0}};

static const struct {
  const char *alias, *name;
} kalias[] = {{"image_load", "image"}, {"disk", "disk_io"},       {"diskio", "disk_io"},
              {"file", "file_io"},     {"fileio", "file_io"},     {"tcpip", "network"},
              {"net", "network"},      {"cswitch", "context_switch"}, {"profile", "sampled_profile"},
              {"pagefaults", "page_faults"}, {"systemcall", "syscall"}};

const struct etw_win_kflag *etw_win_kflags(void) { return kflags; }

/* ---- little-endian access */
static void put16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

/* ---- text */
long etw_utf8_to_utf16(const char *s, uint16_t *out, size_t cap) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = 0;
  if (!cap) return -1;
  while (*p) {
    uint32_t cp;
    int extra;
    if (*p < 0x80) cp = *p, extra = 0;
    else if ((*p & 0xe0) == 0xc0) cp = *p & 0x1f, extra = 1;
    else if ((*p & 0xf0) == 0xe0) cp = *p & 0x0f, extra = 2;
    else if ((*p & 0xf8) == 0xf0) cp = *p & 0x07, extra = 3;
    else return -1;
    p++;
    for (int i = 0; i < extra; i++, p++) {
      if ((*p & 0xc0) != 0x80) return -1;
      cp = cp << 6 | (*p & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
    if (cp >= 0x10000) {
      if (n + 2 >= cap) return -1;
      cp -= 0x10000;
      out[n++] = (uint16_t)(0xd800 | cp >> 10);
      out[n++] = (uint16_t)(0xdc00 | (cp & 0x3ff));
    } else {
      if (n + 1 >= cap) return -1;
      out[n++] = (uint16_t)cp;
    }
  }
  out[n] = 0;
  return (long)n;
}

size_t etw_utf16_to_utf8(const uint16_t *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  if (!cap) return 0;
  for (size_t i = 0; i < n && s[i]; i++) {
    uint32_t cp = s[i];
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < n && s[i + 1] >= 0xdc00 && s[i + 1] <= 0xdfff) {
      cp = 0x10000 + ((cp - 0xd800) << 10) + (s[i + 1] - 0xdc00u);
      i++;
    } else if (cp >= 0xd800 && cp <= 0xdfff) {
      cp = 0xfffd;
    }
    unsigned char b[4];
    size_t k;
    if (cp < 0x80) b[0] = (unsigned char)cp, k = 1;
    else if (cp < 0x800) b[0] = (unsigned char)(0xc0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3f)), k = 2;
    else if (cp < 0x10000)
      b[0] = (unsigned char)(0xe0 | cp >> 12), b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)),
      b[2] = (unsigned char)(0x80 | (cp & 0x3f)), k = 3;
    else
      b[0] = (unsigned char)(0xf0 | cp >> 18), b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f)),
      b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), b[3] = (unsigned char)(0x80 | (cp & 0x3f)), k = 4;
    if (o + k >= cap) break;
    memcpy(out + o, b, k);
    o += k;
  }
  out[o] = 0;
  return o;
}

/* ---- sessions */
void etw_win_cfg_from_spec(const struct etw_session_spec *s, struct etw_win_session_cfg *c) {
  memset(c, 0, sizeof *c);
  c->buffer_kb = s->buffer_kb;
  c->realtime = (s->mode & ETW_MODE_REALTIME) != 0;
  c->file = (s->mode & ETW_MODE_FILE) ? ETW_WFILE_SEQUENTIAL : ETW_WFILE_NONE;
  c->clock = 1;
  if (s->win.set) { /* the spec's "win" member (etw_spec_parse checked types and ranges) */
    c->min_buffers = s->win.min_buffers;
    c->max_buffers = s->win.max_buffers;
    c->flush_s = s->win.flush_s;
    c->max_file_mb = s->win.max_file_mb;
    if (s->win.clock) c->clock = s->win.clock;
    if (s->win.circular && c->file != ETW_WFILE_NONE) c->file = ETW_WFILE_CIRCULAR;
  }
}

static void apply_defaults(const struct etw_win_session_cfg *in, uint32_t ncpu,
                           struct etw_win_session_cfg *c) {
  *c = *in;
  if (!c->buffer_kb) c->buffer_kb = 64;
  if (!c->min_buffers && ncpu) c->min_buffers = 2 * ncpu;
  if (!c->max_buffers) c->max_buffers = c->min_buffers > 64 ? c->min_buffers : 64;
  if (!c->flush_s) c->flush_s = 1;
  if (!c->clock) c->clock = 1;
}

static int newfile_pattern_ok(const char *f) {
  int pct_d = 0;
  for (const char *p = f; *p; p++) {
    if (*p != '%') continue;
    if (p[1] == 'd') pct_d++, p++;
    else return 0; /* any other conversion (or a lone %) would be misread by ETW's sprintf */
  }
  return pct_d == 1;
}

enum etw_err etw_win_cfg_check(const struct etw_win_session_cfg *in, uint32_t ncpu, const char *file,
                               struct etw_status *st) {
  struct etw_win_session_cfg c;
  apply_defaults(in, ncpu, &c);
  if (c.buffer_kb > ETW_WIN_BUFFER_KB_MAX)
    return etw_fail(st, ETW_E_INVALID, "/buffer_kb", "/buffer_kb must be 1-%u (ETW buffers are at most 1 MB)",
                    ETW_WIN_BUFFER_KB_MAX);
  if (ncpu && in->min_buffers && in->min_buffers < 2 * ncpu)
    return etw_fail(st, ETW_E_INVALID, "/win/min_buffers",
                    "ETW needs at least 2 buffers per processor: %u or more on this machine", 2 * ncpu);
  if (c.max_buffers < c.min_buffers)
    return etw_fail(st, ETW_E_INVALID, "/win/max_buffers", "max_buffers (%u) is below min_buffers (%u)",
                    c.max_buffers, c.min_buffers);
  if ((uint64_t)c.max_buffers * c.buffer_kb > (uint64_t)ETW_WIN_TOTAL_MB_MAX * 1024)
    return etw_fail(st, ETW_E_LIMIT, "/win/max_buffers", "buffer_kb × max_buffers exceeds %u MB",
                    ETW_WIN_TOTAL_MB_MAX);
  if (c.flush_s > ETW_WIN_FLUSH_S_MAX)
    return etw_fail(st, ETW_E_INVALID, "/win/flush_s", "the flush timer must be at most %u s", ETW_WIN_FLUSH_S_MAX);
  if (c.clock > 3)
    return etw_fail(st, ETW_E_INVALID, "/win/clock", "clock must be 1 (QPC), 2 (system time) or 3 (CPU cycles)");
  if (c.kernel_logger && c.system_logger)
    return etw_fail(st, ETW_E_INVALID, "/providers", "a session is either the NT Kernel Logger or a system logger, not both");
  if (c.kernel_flags && !c.kernel_logger && !c.system_logger)
    return etw_fail(st, ETW_E_INVALID, "/providers", "kernel flags need the kernel logger or a system-logger session");
  if (c.buffering && (c.realtime || c.file != ETW_WFILE_NONE))
    return etw_fail(st, ETW_E_INVALID, "/mode", "a flight session keeps its events in memory only: no real time, no file");
  if (!c.realtime && c.file == ETW_WFILE_NONE && !c.buffering)
    return etw_fail(st, ETW_E_INVALID, "/mode", "a session needs real-time delivery, a file, or both");
  if (c.file > ETW_WFILE_NEWFILE) return etw_fail(st, ETW_E_INVALID, "/win/file", "unknown file mode");
  if (c.file != ETW_WFILE_NONE) {
    if (!file || !*file) return etw_fail(st, ETW_E_INVALID, "/mode", "file mode needs a log file path");
    uint16_t tmp[ETW_WIN_PATH_MAX];
    if (etw_utf8_to_utf16(file, tmp, ETW_WIN_PATH_MAX) < 0)
      return etw_fail(st, ETW_E_INVALID, "/mode", "the log file path is not valid UTF-8 or longer than %u characters",
                      ETW_WIN_PATH_MAX - 1);
    if ((c.file == ETW_WFILE_CIRCULAR || c.file == ETW_WFILE_NEWFILE) && !c.max_file_mb)
      return etw_fail(st, ETW_E_INVALID, "/win/max_file_mb", "circular and new-file modes need max_file_mb");
    if (c.file == ETW_WFILE_NEWFILE && !newfile_pattern_ok(file))
      return etw_fail(st, ETW_E_INVALID, "/win/file", "new-file mode needs a path with exactly one %%d (and no other %%)");
    if (c.max_file_mb > ETW_WIN_FILE_MB_MAX)
      return etw_fail(st, ETW_E_INVALID, "/win/max_file_mb", "max_file_mb must be at most %u", ETW_WIN_FILE_MB_MAX);
  } else if (c.max_file_mb) {
    return etw_fail(st, ETW_E_INVALID, "/win/max_file_mb", "max_file_mb needs file mode");
  }
  return ETW_E_OK;
}

uint32_t etw_win_log_file_mode(const struct etw_win_session_cfg *c) {
  uint32_t m = 0;
  if (c->realtime) m |= ETW_LOG_REAL_TIME;
  switch (c->file) {
    case ETW_WFILE_SEQUENTIAL: m |= ETW_LOG_FILE_SEQUENTIAL; break;
    case ETW_WFILE_CIRCULAR: m |= ETW_LOG_FILE_CIRCULAR; break;
    case ETW_WFILE_NEWFILE: m |= ETW_LOG_FILE_NEWFILE; break; /* implies sequential */
    default: break;
  }
  if (c->buffering) m |= ETW_LOG_BUFFERING;
  if (c->system_logger) m |= ETW_LOG_SYSTEM_LOGGER;
  return m;
}

enum etw_err etw_win_props_build(unsigned char *buf, size_t cap, const struct etw_win_session_cfg *in,
                                 uint32_t ncpu, const char *name, const char *file, size_t *len,
                                 struct etw_status *st) {
  uint16_t wname[ETW_WIN_NAME_MAX], wfile[ETW_WIN_PATH_MAX];
  long nn = 0, nf = 0;
  if (name && (nn = etw_utf8_to_utf16(name, wname, ETW_WIN_NAME_MAX)) < 0)
    return etw_fail(st, ETW_E_INVALID, "/name", "the session name is not valid UTF-8 or longer than %u characters",
                    ETW_WIN_NAME_MAX - 1);
  if (file && (nf = etw_utf8_to_utf16(file, wfile, ETW_WIN_PATH_MAX)) < 0)
    return etw_fail(st, ETW_E_INVALID, "/mode", "the log file path is not valid UTF-8 or longer than %u characters",
                    ETW_WIN_PATH_MAX - 1);
  /* for queries (in == NULL) leave room for the longest names the system may write back */
  size_t name_units = in ? (size_t)nn + 1 : ETW_WIN_NAME_MAX;
  size_t file_units = in ? (file ? (size_t)nf + 1 : 0) : ETW_WIN_PATH_MAX;
  size_t total = ETW_ETP_SIZE + 2 * (name_units + file_units);
  if (total > cap) return etw_fail(st, ETW_E_TOO_LARGE, NULL, "EVENT_TRACE_PROPERTIES needs %zu bytes", total);
  memset(buf, 0, total);
  put32(buf + ETW_ETP_WNODE_BUFFERSIZE, (uint32_t)total);
  put32(buf + ETW_ETP_WNODE_FLAGS, ETW_WNODE_FLAG_TRACED_GUID);
  uint32_t name_off = ETW_ETP_SIZE, file_off = (uint32_t)(ETW_ETP_SIZE + 2 * name_units);
  put32(buf + ETW_ETP_LOGGERNAMEOFFSET, name_off);
  if (file_units) put32(buf + ETW_ETP_LOGFILENAMEOFFSET, file_off);
  if (name)
    for (long i = 0; i <= nn; i++) put16(buf + name_off + 2 * i, wname[i]);
  if (file && file_units)
    for (long i = 0; i <= nf; i++) put16(buf + file_off + 2 * i, wfile[i]);
  if (in) {
    struct etw_win_session_cfg c;
    apply_defaults(in, ncpu, &c);
    put32(buf + ETW_ETP_WNODE_CLIENTCONTEXT, c.clock);
    if (c.kernel_logger) memcpy(buf + ETW_ETP_WNODE_GUID, etw_guid_system_trace_control, 16);
    put32(buf + ETW_ETP_BUFFERSIZE, c.buffer_kb);
    put32(buf + ETW_ETP_MINIMUMBUFFERS, c.min_buffers);
    put32(buf + ETW_ETP_MAXIMUMBUFFERS, c.max_buffers);
    put32(buf + ETW_ETP_MAXIMUMFILESIZE, c.max_file_mb);
    put32(buf + ETW_ETP_LOGFILEMODE, etw_win_log_file_mode(&c));
    put32(buf + ETW_ETP_FLUSHTIMER, c.flush_s);
    put32(buf + ETW_ETP_ENABLEFLAGS, c.kernel_flags);
  }
  *len = total;
  return ETW_E_OK;
}

static void read_name(const unsigned char *buf, size_t len, uint32_t off, char *out, size_t cap) {
  if (!out || !cap) return;
  out[0] = 0;
  if (!off || off < ETW_ETP_SIZE || off >= len) return;
  uint16_t w[ETW_WIN_PATH_MAX];
  size_t n = 0;
  for (size_t p = off; p + 1 < len && n < ETW_WIN_PATH_MAX; p += 2) {
    w[n] = (uint16_t)(buf[p] | buf[p + 1] << 8);
    if (!w[n]) break;
    n++;
  }
  etw_utf16_to_utf8(w, n, out, cap);
}

int etw_win_props_read(const unsigned char *buf, size_t len, struct etw_win_props_stats *s, char *name,
                       size_t name_cap, char *file, size_t file_cap) {
  if (len < ETW_ETP_SIZE) return -1;
  memset(s, 0, sizeof *s);
  s->buffer_kb = get32(buf + ETW_ETP_BUFFERSIZE);
  s->min_buffers = get32(buf + ETW_ETP_MINIMUMBUFFERS);
  s->max_buffers = get32(buf + ETW_ETP_MAXIMUMBUFFERS);
  s->max_file_mb = get32(buf + ETW_ETP_MAXIMUMFILESIZE);
  s->log_file_mode = get32(buf + ETW_ETP_LOGFILEMODE);
  s->flush_s = get32(buf + ETW_ETP_FLUSHTIMER);
  s->enable_flags = get32(buf + ETW_ETP_ENABLEFLAGS);
  s->n_buffers = get32(buf + ETW_ETP_NUMBEROFBUFFERS);
  s->free_buffers = get32(buf + ETW_ETP_FREEBUFFERS);
  s->events_lost = get32(buf + ETW_ETP_EVENTSLOST);
  s->buffers_written = get32(buf + ETW_ETP_BUFFERSWRITTEN);
  s->log_buffers_lost = get32(buf + ETW_ETP_LOGBUFFERSLOST);
  s->rt_buffers_lost = get32(buf + ETW_ETP_REALTIMEBUFFERSLOST);
  s->logger_thread = get64(buf + ETW_ETP_LOGGERTHREADID);
  read_name(buf, len, get32(buf + ETW_ETP_LOGGERNAMEOFFSET), name, name_cap);
  read_name(buf, len, get32(buf + ETW_ETP_LOGFILENAMEOFFSET), file, file_cap);
  return 0;
}

/* ---- EnableTraceEx2 */
static struct etw_win_filter *add_filter(struct etw_win_enable *e, uint32_t type) {
  struct etw_win_filter *f = &e->f[e->nf++];
  f->type = type;
  f->size = 0;
  return f;
}

static void id_filter(struct etw_win_filter *f, int in, const uint32_t *ids, uint32_t n) {
  f->data[0] = in ? 1 : 0;
  f->data[1] = 0;
  put16(f->data + 2, (uint16_t)n);
  for (uint32_t i = 0; i < n; i++) put16(f->data + ETW_FILTER_EVENT_ID_HDR + 2 * i, (uint16_t)ids[i]);
  f->size = ETW_FILTER_EVENT_ID_HDR + 2 * n;
}

enum etw_err etw_win_enable_build(const struct etw_session_spec *s, const struct etw_provider_spec *p,
                                  const char *ptr, uint32_t winver, uint32_t build,
                                  struct etw_win_enable *out, struct etw_status *st) {
  (void)build;
  char fld[128];
  memset(out, 0, offsetof(struct etw_win_enable, f));
  out->nf = 0;
  if (!ptr) ptr = "/providers/0";
  if (p->level < 0 || p->level > 255) {
    snprintf(fld, sizeof fld, "%s/level", ptr);
    return etw_fail(st, ETW_E_INVALID, fld, "level must be 0-255 (1 critical … 5 verbose, 0 = everything)");
  }
  if (p->filter) {
    snprintf(fld, sizeof fld, "%s/filter", ptr);
    return etw_fail(st, ETW_E_UNSUPPORTED, fld, "filter expressions are a tracefs feature; on ETW use event_ids, level and keywords");
  }
  if (p->n_events) {
    snprintf(fld, sizeof fld, "%s/events", ptr);
    return etw_fail(st, ETW_E_UNSUPPORTED, fld, "ETW providers are filtered by event_ids (event names select kernel flags only)");
  }
  out->level = (uint8_t)p->level;
  out->keywords_any = p->keywords_any;
  out->keywords_all = p->keywords_all;
  int win81 = !winver || winver >= ETW_WINVER(6, 3), win10 = !winver || winver >= ETW_WINVER(10, 0);
  if (p->n_event_ids) {
    snprintf(fld, sizeof fld, "%s/event_ids", ptr);
    if (!win10) return etw_fail(st, ETW_E_UNSUPPORTED, fld, "event ID filters need Windows 10 or later");
    if (p->n_event_ids > ETW_MAX_FILTER_EVENT_IDS)
      return etw_fail(st, ETW_E_LIMIT, fld, "ETW filters at most %d event IDs per provider", ETW_MAX_FILTER_EVENT_IDS);
    for (uint32_t i = 0; i < p->n_event_ids; i++) {
      if (p->event_ids[i] > 0xffff) {
        snprintf(fld, sizeof fld, "%s/event_ids/%u", ptr, i);
        return etw_fail(st, ETW_E_INVALID, fld, "ETW event IDs are 0-65535");
      }
      for (uint32_t j = 0; j < i; j++)
        if (p->event_ids[j] == p->event_ids[i]) {
          snprintf(fld, sizeof fld, "%s/event_ids/%u", ptr, i);
          return etw_fail(st, ETW_E_INVALID, fld, "event ID %u is listed twice", p->event_ids[i]);
        }
    }
    id_filter(add_filter(out, ETW_FILTER_TYPE_EVENT_ID), !p->event_ids_exclude, p->event_ids, p->n_event_ids);
  }
  if (p->n_stack_events) {
    snprintf(fld, sizeof fld, "%s/stacks/0", ptr);
    return etw_fail(st, ETW_E_INVALID, fld, "ETW events are named by their IDs here: \"stacks\" lists event IDs "
                    "(integers, as in event_ids)");
  }
  if (p->n_stack_ids) { /* stacks on these events only (spec.c checked them against event_ids) */
    snprintf(fld, sizeof fld, "%s/stacks", ptr);
    if (!win10) return etw_fail(st, ETW_E_UNSUPPORTED, fld, "stack walks of listed events need Windows 10 or later");
    if (p->n_stack_ids > ETW_MAX_FILTER_EVENT_IDS)
      return etw_fail(st, ETW_E_LIMIT, fld, "ETW filters at most %d event IDs per provider", ETW_MAX_FILTER_EVENT_IDS);
    id_filter(add_filter(out, ETW_FILTER_TYPE_STACKWALK), 1, p->stack_ids, p->n_stack_ids);
  } else if (p->stacks) {
    if (p->n_event_ids && !p->event_ids_exclude)
      id_filter(add_filter(out, ETW_FILTER_TYPE_STACKWALK), 1, p->event_ids, p->n_event_ids);
    else
      out->enable_property |= ETW_ENABLE_PROPERTY_STACK_TRACE;
  }
  if (s && s->n_pids) {
    if (!win81) return etw_fail(st, ETW_E_UNSUPPORTED, "/pids", "PID filters need Windows 8.1 or later");
    if (s->n_pids > ETW_MAX_FILTER_PIDS)
      return etw_fail(st, ETW_E_LIMIT, "/pids", "ETW filters at most %d process IDs", ETW_MAX_FILTER_PIDS);
    struct etw_win_filter *f = add_filter(out, ETW_FILTER_TYPE_PID);
    for (uint32_t i = 0; i < s->n_pids; i++) put32(f->data + 4 * i, s->pids[i]);
    f->size = 4 * s->n_pids;
  }
  if (s && s->n_exe_names) {
    if (!win81) return etw_fail(st, ETW_E_UNSUPPORTED, "/exe_names", "executable name filters need Windows 8.1 or later");
    struct etw_win_filter *f = add_filter(out, ETW_FILTER_TYPE_EXECUTABLE_NAME);
    size_t units = 0, max_units = ETW_MAX_FILTER_DATA / 2;
    uint16_t w[ETW_MAX_FILTER_DATA / 2];
    for (uint32_t i = 0; i < s->n_exe_names; i++) {
      const char *x = s->exe_names[i];
      snprintf(fld, sizeof fld, "/exe_names/%u", i);
      if (!x || !*x || strpbrk(x, ";\\/"))
        return etw_fail(st, ETW_E_INVALID, fld, "an executable name is a file name such as \"notepad.exe\" (no path, no ';')");
      if (i) {
        if (units + 1 >= max_units) goto too_long;
        w[units++] = ';';
      }
      long n = etw_utf8_to_utf16(x, w + units, max_units - units);
      if (n < 0) goto too_long;
      units += (size_t)n;
    }
    w[units++] = 0;
    for (size_t i = 0; i < units; i++) put16(f->data + 2 * i, w[i]);
    f->size = (uint32_t)(2 * units);
  }
  return ETW_E_OK;
too_long:
  return etw_fail(st, ETW_E_LIMIT, "/exe_names", "the executable names together must fit in %d bytes of UTF-16 (ETW's limit)",
                  ETW_MAX_FILTER_DATA);
}

/* ---- kernel */

int etw_win_is_kernel_provider(const char *name) {
  if (!name) return 0;
  static const char *const names[] = {"kernel", ETW_KERNEL_LOGGER_NAME, "Windows Kernel Trace",
                                      "SystemTraceProvider"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcasecmp(name, names[i])) return 1; /* (ASCII: etwd keeps the C locale) */
  unsigned char g[16];
  return etw_parse_guid(name, g) == 0 && !memcmp(g, etw_guid_system_trace_control, 16);
}

/* lower-case, '-' and ' ' as '_'; 0 when it does not fit */
static int norm_flag(const char *in, char *out, size_t cap) {
  size_t i = 0;
  for (; in[i]; i++) {
    if (i + 1 >= cap) return 0;
    char c = in[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
    if (c == '-' || c == ' ') c = '_';
    out[i] = c;
  }
  out[i] = 0;
  return 1;
}

enum etw_err etw_win_kernel_flags(char *const *names, uint32_t n, const char *ptr, uint32_t *flags,
                                  struct etw_status *st) {
  *flags = 0;
  if (!n) {
    *flags = 0x1 | 0x2 | 0x4; /* process, thread, image */
    return ETW_E_OK;
  }
  for (uint32_t i = 0; i < n; i++) {
    char nm[40];
    const struct etw_win_kflag *k = NULL;
    if (names[i] && norm_flag(names[i], nm, sizeof nm)) {
      for (size_t a = 0; a < sizeof kalias / sizeof kalias[0]; a++)
        if (!strcmp(nm, kalias[a].alias)) snprintf(nm, sizeof nm, "%s", kalias[a].name);
      for (k = kflags; k->name && strcmp(k->name, nm); k++) {
      }
    }
    if (!k || !k->name) {
      char fld[128], known[600];
      size_t o = 0;
      known[0] = 0;
      for (const struct etw_win_kflag *q = kflags; q->name && o + 24 < sizeof known; q++)
        o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", o ? ", " : "", q->name);
      snprintf(fld, sizeof fld, "%s/events/%u", ptr ? ptr : "/providers/0", i);
      return etw_fail(st, ETW_E_INVALID, fld, "unknown kernel flag \"%.40s\"; known: %s",
                      names[i] ? names[i] : "", known);
    }
    *flags |= k->flags;
  }
  return ETW_E_OK;
}

uint32_t etw_win_kernel_sysproviders(uint32_t flags, struct etw_win_sysprov *out, uint32_t max) {
  uint32_t n = 0;
  for (const struct etw_win_kflag *k = kflags; k->name; k++) {
    if ((flags & k->flags) != k->flags) continue;
    uint32_t j = 0;
    while (j < n && memcmp(out[j].guid, k->sys_guid, 16)) j++;
    if (j == n) {
      if (n == max) continue;
      out[n].guid = k->sys_guid;
      out[n].keywords = 0;
      n++;
    }
    out[j].keywords |= k->sys_keywords;
  }
  return n;
}

int etw_win_has_system_providers(uint32_t winver, uint32_t build) {
  return winver > ETW_WINVER(10, 0) || (winver == ETW_WINVER(10, 0) && build >= 20348);
}

/* ---- errors */
enum etw_err etw_win_error(uint32_t code, const char *what, int kernel, struct etw_status *st) {
  const char *w = what ? what : "ETW";
  switch (code) {
    case 0: return ETW_E_OK;
    case 5:    /* ERROR_ACCESS_DENIED */
    case 1314: /* ERROR_PRIVILEGE_NOT_HELD */
      return etw_fail(st, ETW_E_PERM, NULL,
                      "%s: access denied (Win32 error %u). ETW sessions need etwd to run elevated "
                      "(as Administrator) or as a member of the Performance Log Users group%s",
                      w, code,
                      kernel ? "; the kernel logger also needs SeSystemProfilePrivilege "
                               "(Administrators have it; grant it with secpol.msc otherwise)"
                             : "");
    case 183: /* ERROR_ALREADY_EXISTS */
      return etw_fail(st, ETW_E_EXISTS, NULL, "%s: a trace session with this name already exists%s", w,
                      kernel ? " (the NT Kernel Logger can run only once per machine)" : "");
    case 1450: /* ERROR_NO_SYSTEM_RESOURCES */
      return etw_fail(st, ETW_E_LIMIT, NULL,
                      "%s: no free trace session: Windows allows %d at once%s (`logman query -ets` lists them)",
                      w, ETW_WIN_MAX_SESSIONS, kernel ? ", and 8 system-logger sessions for kernel events" : "");
    case 4201: /* ERROR_WMI_INSTANCE_NOT_FOUND */
      return etw_fail(st, ETW_E_NOT_FOUND, NULL, "%s: no trace session with this name is running", w);
    case 4200: /* ERROR_WMI_GUID_NOT_FOUND */
    case 1168: /* ERROR_NOT_FOUND */
      return etw_fail(st, ETW_E_NOT_FOUND, NULL, "%s: not found (Win32 error %u)", w, code);
    case 87: /* ERROR_INVALID_PARAMETER */
      return etw_fail(st, ETW_E_KERNEL, NULL, "%s: Windows rejected a parameter (Win32 error 87)", w);
    case 24: /* ERROR_BAD_LENGTH */
      return etw_fail(st, ETW_E_INTERNAL, NULL, "%s: bad structure size (Win32 error 24)", w);
    case 8:  /* ERROR_NOT_ENOUGH_MEMORY */
    case 14: /* ERROR_OUTOFMEMORY */
      return etw_fail(st, ETW_E_NOMEM, NULL, "%s: not enough memory (Win32 error %u)", w, code);
    case 3:   /* ERROR_PATH_NOT_FOUND */
    case 161: /* ERROR_BAD_PATHNAME */
    case 32:  /* ERROR_SHARING_VIOLATION */
    case 112: /* ERROR_DISK_FULL */
      return etw_fail(st, ETW_E_IO, NULL, "%s: cannot write the log file (Win32 error %u)", w, code);
    case 50:  /* ERROR_NOT_SUPPORTED */
    case 120: /* ERROR_CALL_NOT_IMPLEMENTED */
      return etw_fail(st, ETW_E_UNSUPPORTED, NULL, "%s: not supported by this Windows (Win32 error %u)", w, code);
    case 6: /* ERROR_INVALID_HANDLE */
      return etw_fail(st, ETW_E_STATE, NULL, "%s: the session is gone (Win32 error 6)", w);
    default:
      return etw_fail(st, ETW_E_KERNEL, NULL, "%s failed with Win32 error %u", w, code);
  }
}

/* ---- schemas */
static const char *const in_types[] = {
    "win:Null",    "win:UnicodeString", "win:AnsiString", "win:Int8",     "win:UInt8",
    "win:Int16",   "win:UInt16",        "win:Int32",      "win:UInt32",   "win:Int64",
    "win:UInt64",  "win:Float",         "win:Double",     "win:Boolean",  "win:Binary",
    "win:GUID",    "win:Pointer",       "win:FILETIME",   "win:SYSTEMTIME", "win:SID",
    "win:HexInt32", "win:HexInt64"};

/* UTF-16z string at @off inside the blob, as UTF-8 (empty when absent or out of range) */
static void tei_str(const unsigned char *b, size_t n, uint32_t off, char *out, size_t cap) {
  out[0] = 0;
  if (!off || off >= n || (n - off) < 2) return;
  uint16_t w[512];
  size_t k = 0;
  for (size_t p = off; p + 1 < n && k < 512; p += 2) {
    w[k] = (uint16_t)(b[p] | b[p + 1] << 8);
    if (!w[k]) break;
    k++;
  }
  etw_utf16_to_utf8(w, k, out, cap);
}

int etw_win_tei_json(const unsigned char *b, size_t n, struct etw_jw *w) {
  if (!b || n < 112) return -1;
  uint32_t np = get32(b + 100), ntop = get32(b + 104);
  if (np > 4096 || ntop > np || 112 + (size_t)np * 24 > n) return -1;
  char name[600], task[300], op[300];
  tei_str(b, n, get32(b + 92), name, sizeof name);
  tei_str(b, n, get32(b + 68), task, sizeof task);
  tei_str(b, n, get32(b + 72), op, sizeof op);
  uint16_t id = (uint16_t)(b[32] | b[33] << 8);
  if (!name[0]) {
    if (task[0] && op[0] && b[37]) snprintf(name, sizeof name, "%s/%s", task, op);
    else if (task[0]) snprintf(name, sizeof name, "%s", task);
    else snprintf(name, sizeof name, "EventID(%u)", id);
  }
  etw_jw_lit(w, "{\"id\":");
  etw_jw_u64(w, id);
  etw_jw_lit(w, ",\"version\":");
  etw_jw_u64(w, b[34]);
  etw_jw_lit(w, ",\"name\":");
  etw_jw_cs(w, name);
  etw_jw_lit(w, ",\"level\":");
  etw_jw_u64(w, b[36]);
  etw_jw_lit(w, ",\"opcode\":");
  etw_jw_u64(w, b[37]);
  etw_jw_lit(w, ",\"task\":");
  etw_jw_u64(w, (uint64_t)(b[38] | b[39] << 8));
  etw_jw_lit(w, ",\"keywords\":");
  etw_jw_hexw(w, get64(b + 40), 16);
  etw_jw_lit(w, ",\"fields\":[");
  for (uint32_t i = 0; i < ntop; i++) {
    const unsigned char *e = b + 112 + (size_t)i * 24;
    uint32_t flags = get32(e);
    char fname[300];
    tei_str(b, n, get32(e + 4), fname, sizeof fname);
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, fname[0] ? fname : "?");
    etw_jw_lit(w, ",\"type\":");
    if (flags & 0x1) { /* PropertyStruct */
      etw_jw_lit(w, "\"struct\",\"members\":");
      etw_jw_u64(w, (uint64_t)(e[10] | e[11] << 8));
    } else {
      uint16_t in = (uint16_t)(e[8] | e[9] << 8);
      if (in < sizeof in_types / sizeof in_types[0]) etw_jw_cs(w, in_types[in]);
      else {
        char t[32];
        snprintf(t, sizeof t, "win:InType(%u)", in);
        etw_jw_cs(w, t);
      }
    }
    uint16_t count = (uint16_t)(e[16] | e[17] << 8);
    if (flags & 0x4) etw_jw_lit(w, ",\"array\":\"counted\""); /* PropertyParamCount */
    else if ((flags & 0x20) || count > 1) { /* PropertyParamFixedCount */
      etw_jw_lit(w, ",\"array\":");
      etw_jw_u64(w, count);
    }
    etw_jw_ch(w, '}');
  }
  etw_jw_lit(w, "]}");
  return 0;
}
