/* test_winreq.c — the portable half of the Windows backend (etwcore/src/win_portable.c):
 * EVENT_TRACE_PROPERTIES layout and sizing, session limits, EnableTraceEx2 filter descriptors
 * and their OS limits, kernel flag names, Win32 error mapping, UTF-8/UTF-16. The expected bytes
 * follow the documented 64-bit layouts (evntrace.h / evntprov.h). */
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "etwcore/spec.h"
#include "etwcore/winreq.h"
#include "t.h"

static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* the UTF-16LE text at @p equals ASCII @s (with its NUL) */
static int wide_eq(const unsigned char *p, const char *s) {
  for (size_t i = 0;; i++) {
    if (rd16(p + 2 * i) != (unsigned char)s[i]) return 0;
    if (!s[i]) return 1;
  }
}

static unsigned char buf[ETW_ETP_MAX];

static void test_props(void) {
  struct etw_status st;
  struct etw_win_session_cfg c;
  memset(&c, 0, sizeof c);
  c.realtime = 1;
  c.buffer_kb = 256;
  size_t len = 0;
  /* realtime: name right after the 120-byte structure, no file */
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 4, "etwd_1_42", NULL, &len, &st), ETW_E_OK);
  CHECK_EQ(len, 120 + 2 * 10);
  CHECK_EQ(rd32(buf + 0), len);                        /* Wnode.BufferSize */
  CHECK_EQ(rd32(buf + 44), 0x00020000);                /* WNODE_FLAG_TRACED_GUID */
  CHECK_EQ(rd32(buf + 40), 1);                         /* ClientContext: QPC */
  CHECK_EQ(rd32(buf + 48), 256);                       /* BufferSize KB */
  CHECK_EQ(rd32(buf + 52), 8);                         /* 2 per CPU */
  CHECK_EQ(rd32(buf + 56), 64);
  CHECK_EQ(rd32(buf + 64), 0x100);                     /* EVENT_TRACE_REAL_TIME_MODE */
  CHECK_EQ(rd32(buf + 68), 1);                         /* FlushTimer */
  CHECK_EQ(rd32(buf + 116), 120);                      /* LoggerNameOffset */
  CHECK_EQ(rd32(buf + 112), 0);                        /* no LogFileNameOffset */
  CHECK(wide_eq(buf + 120, "etwd_1_42"));
  for (int i = 24; i < 40; i++) CHECK_EQ(buf[i], 0);   /* no session GUID: the system picks */

  /* realtime + sequential file: file after the name */
  c.file = ETW_WFILE_SEQUENTIAL;
  c.max_file_mb = 100;
  const char *path = "C:\\etwd\\recordings\\1\\trace.etl";
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 4, "etwd_1_42", path, &len, &st), ETW_E_OK);
  CHECK_EQ(rd32(buf + 112), 120 + 20);
  CHECK_EQ(len, 120 + 20 + 2 * (strlen(path) + 1));
  CHECK(wide_eq(buf + 140, path));
  CHECK_EQ(rd32(buf + 64), 0x101);
  CHECK_EQ(rd32(buf + 60), 100);                       /* MaximumFileSize MB */

  /* circular, new-file */
  c.file = ETW_WFILE_CIRCULAR;
  CHECK_EQ(etw_win_log_file_mode(&c), 0x102);
  c.file = ETW_WFILE_NEWFILE;
  c.realtime = 0;
  CHECK_EQ(etw_win_log_file_mode(&c), 0x008);
  c.system_logger = 1;
  CHECK_EQ(etw_win_log_file_mode(&c), 0x02000008);

  /* the kernel logger: SystemTraceControlGuid in Wnode.Guid, flags in EnableFlags */
  memset(&c, 0, sizeof c);
  c.realtime = 1;
  c.kernel_logger = 1;
  c.kernel_flags = 0x13;
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 2, ETW_KERNEL_LOGGER_NAME, NULL, &len, &st), ETW_E_OK);
  static const unsigned char kg[16] = {0xad, 0x4a, 0x81, 0x9e, 0x04, 0x32, 0xd2, 0x11,
                                       0x9a, 0x82, 0x00, 0x60, 0x08, 0xa8, 0x69, 0x39};
  CHECK(!memcmp(buf + 24, kg, 16));
  CHECK_EQ(rd32(buf + 72), 0x13);
  CHECK(wide_eq(buf + 120, "NT Kernel Logger"));

  /* the query form: room for the longest names the system may write back */
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, NULL, 0, NULL, NULL, &len, &st), ETW_E_OK);
  CHECK_EQ(len, 120 + 2 * (1024 + 1024));
  CHECK_EQ(len, ETW_ETP_MAX);
  CHECK_EQ(rd32(buf + 116), 120);
  CHECK_EQ(rd32(buf + 112), 120 + 2048);
  CHECK_EQ(rd32(buf + 0), len);
  CHECK_EQ(rd32(buf + 64), 0);

  /* limits: buffer too small, names too long */
  CHECK_EQ(etw_win_props_build(buf, 200, NULL, 0, NULL, NULL, &len, &st), ETW_E_TOO_LARGE);
  memset(&c, 0, sizeof c);
  c.realtime = 1;
  static char longname[1100];
  memset(longname, 'a', 1023);
  longname[1023] = 0;
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 1, longname, NULL, &len, &st), ETW_E_OK);
  CHECK_EQ(len, 120 + 2 * 1024);
  longname[1023] = 'a';
  longname[1024] = 0;
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 1, longname, NULL, &len, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/name");
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 1, "bad\xff", NULL, &len, &st), ETW_E_INVALID);
}

static void test_props_read(void) {
  size_t len = 0;
  struct etw_status st;
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, NULL, 0, NULL, NULL, &len, &st), ETW_E_OK);
  wr32(buf + 48, 64);
  wr32(buf + 64, 0x101);
  wr32(buf + 80, 20);
  wr32(buf + 84, 3);
  wr32(buf + 88, 7);   /* EventsLost */
  wr32(buf + 92, 900); /* BuffersWritten */
  wr32(buf + 96, 2);   /* LogBuffersLost */
  wr32(buf + 100, 5);  /* RealTimeBuffersLost */
  wr32(buf + 104, 0x1234);
  const char *nm = "etwd_7_99";
  for (size_t i = 0; i <= strlen(nm); i++) buf[120 + 2 * i] = (unsigned char)nm[i], buf[121 + 2 * i] = 0;
  /* a file name with a non-ASCII character: "C:\é.etl" */
  static const uint16_t f16[] = {'C', ':', '\\', 0xe9, '.', 'e', 't', 'l', 0};
  for (size_t i = 0; i < 9; i++) buf[120 + 2048 + 2 * i] = (unsigned char)f16[i], buf[121 + 2048 + 2 * i] = (unsigned char)(f16[i] >> 8);
  struct etw_win_props_stats s;
  char name[64], file[64];
  CHECK_EQ(etw_win_props_read(buf, len, &s, name, sizeof name, file, sizeof file), 0);
  CHECK_EQ(s.buffer_kb, 64);
  CHECK_EQ(s.log_file_mode, 0x101);
  CHECK_EQ(s.n_buffers, 20);
  CHECK_EQ(s.free_buffers, 3);
  CHECK_EQ(s.events_lost, 7);
  CHECK_EQ(s.buffers_written, 900);
  CHECK_EQ(s.log_buffers_lost, 2);
  CHECK_EQ(s.rt_buffers_lost, 5);
  CHECK_EQ(s.logger_thread, 0x1234);
  CHECK_STR(name, "etwd_7_99");
  CHECK_STR(file, "C:\\\xc3\xa9.etl");
  /* truncated names stay within the caller's buffer; offsets out of range give "" */
  char small[5];
  CHECK_EQ(etw_win_props_read(buf, len, &s, small, sizeof small, NULL, 0), 0);
  CHECK_STR(small, "etwd");
  wr32(buf + 116, 999999);
  CHECK_EQ(etw_win_props_read(buf, len, &s, name, sizeof name, NULL, 0), 0);
  CHECK_STR(name, "");
  CHECK_EQ(etw_win_props_read(buf, 100, &s, NULL, 0, NULL, 0), -1);
}

static void test_cfg_check(void) {
  struct etw_status st;
  struct etw_win_session_cfg c;
  memset(&c, 0, sizeof c);
  c.realtime = 1;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_OK);
  c.buffer_kb = 2048;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/buffer_kb");
  c.buffer_kb = 1024;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_OK);
  c.min_buffers = 8; /* below 2 per CPU on 8 CPUs */
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/win/min_buffers");
  c.min_buffers = 16;
  c.max_buffers = 10;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  c.max_buffers = 8192; /* 8 GB of buffers */
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_LIMIT);
  c.max_buffers = 64;
  c.flush_s = 3601;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  c.flush_s = 0;
  c.realtime = 0;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID); /* neither realtime nor file */
  CHECK_STR(st.field, "/mode");
  c.file = ETW_WFILE_SEQUENTIAL;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID); /* no path */
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t.etl", &st), ETW_E_OK);
  c.file = ETW_WFILE_CIRCULAR;
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t.etl", &st), ETW_E_INVALID); /* needs a size */
  c.max_file_mb = 64;
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t.etl", &st), ETW_E_OK);
  c.file = ETW_WFILE_NEWFILE;
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t.etl", &st), ETW_E_INVALID); /* no %d */
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t_%d_%d.etl", &st), ETW_E_INVALID);
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t_%s.etl", &st), ETW_E_INVALID);
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t_%d.etl", &st), ETW_E_OK);
  c.max_file_mb = ETW_WIN_FILE_MB_MAX + 1;
  CHECK_EQ(etw_win_cfg_check(&c, 8, "C:\\t_%d.etl", &st), ETW_E_INVALID);
  memset(&c, 0, sizeof c);
  c.realtime = 1;
  c.max_file_mb = 10; /* without a file */
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  c.max_file_mb = 0;
  c.kernel_flags = 1; /* flags without the kernel logger */
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  c.kernel_logger = 1;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_OK);
  c.system_logger = 1;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);
  c.kernel_logger = 0;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_OK);
  c.clock = 4;
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_INVALID);

  /* the generic spec maps onto realtime / sequential file */
  struct etw_session_spec sp;
  memset(&sp, 0, sizeof sp);
  sp.mode = ETW_MODE_REALTIME | ETW_MODE_FILE;
  sp.buffer_kb = 128;
  etw_win_cfg_from_spec(&sp, &c);
  CHECK_EQ(c.realtime, 1);
  CHECK_EQ(c.file, ETW_WFILE_SEQUENTIAL);
  CHECK_EQ(c.buffer_kb, 128);
  CHECK_EQ(etw_win_log_file_mode(&c), 0x101);
}

static void test_enable(void) {
  struct etw_status st;
  struct etw_win_enable e;
  struct etw_session_spec s;
  struct etw_provider_spec p;
  memset(&s, 0, sizeof s);
  memset(&p, 0, sizeof p);
  p.name = "Microsoft-Windows-Kernel-Process";
  p.level = 4;
  p.keywords_any = 0x10;
  p.keywords_all = 0x8000000000000000ull;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.level, 4);
  CHECK_EQ(e.keywords_any, 0x10);
  CHECK(e.keywords_all == 0x8000000000000000ull);
  CHECK_EQ(e.nf, 0);
  CHECK_EQ(e.enable_property, 0);

  p.level = 256;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/3", 0, 0, &e, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/3/level");
  p.level = 5;

  /* event IDs in: EVENT_FILTER_EVENT_ID {FilterIn=1, Reserved, Count=3, ids…} */
  uint32_t ids[70];
  for (int i = 0; i < 70; i++) ids[i] = (uint32_t)(i + 1);
  ids[0] = 1, ids[1] = 2, ids[2] = 0x1234;
  p.event_ids = ids;
  p.n_event_ids = 3;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.nf, 1);
  CHECK_EQ(e.f[0].type, 0x80000200u);
  CHECK_EQ(e.f[0].size, 4 + 2 * 3);
  CHECK_EQ(e.f[0].data[0], 1);
  CHECK_EQ(rd16(e.f[0].data + 2), 3);
  CHECK_EQ(rd16(e.f[0].data + 4), 1);
  CHECK_EQ(rd16(e.f[0].data + 8), 0x1234);
  /* out */
  p.event_ids_exclude = 1;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.f[0].data[0], 0);
  /* stacks with excluded IDs: stacks for every event */
  p.stacks = 1;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.nf, 1);
  CHECK_EQ(e.enable_property, 0x4);
  /* stacks for the included IDs only: a STACKWALK filter with the same IDs */
  p.event_ids_exclude = 0;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.nf, 2);
  CHECK_EQ(e.f[1].type, 0x80001000u);
  CHECK_EQ(e.f[1].data[0], 1);
  CHECK_EQ(e.f[1].size, 10);
  CHECK_EQ(e.enable_property, 0);
  p.stacks = 0;
  /* limits: 64 IDs fit, 65 do not; duplicates and IDs above 65535 are refused */
  p.n_event_ids = 64;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.f[0].size, 4 + 128);
  p.n_event_ids = 65;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_LIMIT);
  CHECK_STR(st.field, "/providers/0/event_ids");
  ids[3] = 2;
  p.n_event_ids = 4;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/0/event_ids/3");
  ids[3] = 70000;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_INVALID);
  ids[3] = 4;
  /* OS limits: event ID filters need Windows 10 */
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", ETW_WINVER(6, 3), 9600, &e, &st), ETW_E_UNSUPPORTED);
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", ETW_WINVER(10, 0), 19045, &e, &st), ETW_E_OK);
  p.n_event_ids = 0;

  /* PIDs: ≤ 8, as ULONGs */
  uint32_t pids[9] = {4, 1234, 3, 4, 5, 6, 7, 8, 9};
  s.pids = pids;
  s.n_pids = 2;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.nf, 1);
  CHECK_EQ(e.f[0].type, 0x80000004u);
  CHECK_EQ(e.f[0].size, 8);
  CHECK_EQ(rd32(e.f[0].data + 4), 1234);
  s.n_pids = 9;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_LIMIT);
  CHECK_STR(st.field, "/pids");
  s.n_pids = 8;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", ETW_WINVER(6, 1), 7601, &e, &st), ETW_E_UNSUPPORTED);
  s.n_pids = 0;

  /* executable names: "a.exe;b.exe\0" in UTF-16 */
  char *exes[2] = {"notepad.exe", "cmd.exe"};
  s.exe_names = exes;
  s.n_exe_names = 2;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.f[0].type, 0x80000008u);
  CHECK_EQ(e.f[0].size, 2 * (strlen("notepad.exe;cmd.exe") + 1));
  CHECK(wide_eq(e.f[0].data, "notepad.exe;cmd.exe"));
  char *bad[1] = {"C:\\Windows\\notepad.exe"};
  s.exe_names = bad;
  s.n_exe_names = 1;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/exe_names/0");
  static char big[600];
  memset(big, 'x', 511);
  big[511] = 0; /* 511 units + NUL = 1024 bytes: fits exactly */
  char *one[2] = {big, "y.exe"};
  s.exe_names = one;
  s.n_exe_names = 1;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.f[0].size, 1024);
  s.n_exe_names = 2;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_LIMIT);
  s.n_exe_names = 0;

  /* all four filters at once stay within MAX_EVENT_FILTERS_COUNT */
  p.event_ids = ids;
  p.n_event_ids = 2;
  p.stacks = 1;
  s.pids = pids;
  s.n_pids = 1;
  s.exe_names = exes;
  s.n_exe_names = 1;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.nf, 4);
  CHECK(e.nf <= ETW_MAX_FILTERS);

  /* tracefs-only features are refused */
  p.filter = "pid == 4";
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/1", 0, 0, &e, &st), ETW_E_UNSUPPORTED);
  CHECK_STR(st.field, "/providers/1/filter");
  p.filter = NULL;
  char *evn[1] = {"ProcessStart"};
  p.events = evn;
  p.n_events = 1;
  CHECK_EQ(etw_win_enable_build(&s, &p, "/providers/1", 0, 0, &e, &st), ETW_E_UNSUPPORTED);
}

static void test_kernel(void) {
  struct etw_status st;
  uint32_t f = 0;
  CHECK_EQ(etw_win_kernel_flags(NULL, 0, "/providers/0", &f, &st), ETW_E_OK);
  CHECK_EQ(f, 0x7);
  char *names[] = {"process", "Disk-IO", "cswitch", "File IO", "network", "registry", "image",
                   "sampled_profile", "page_faults", "thread", "context_switch"};
  CHECK_EQ(etw_win_kernel_flags(names, 3, "/providers/0", &f, &st), ETW_E_OK);
  CHECK_EQ(f, 0x1 | 0x100 | 0x400 | 0x10);
  CHECK_EQ(etw_win_kernel_flags(names, 11, "/providers/0", &f, &st), ETW_E_OK);
  CHECK_EQ(f, 0x1 | 0x2 | 0x4 | 0x10 | 0x100 | 0x400 | 0x200 | 0x1000 | 0x10000 | 0x20000 |
                  0x01000000 | 0x02000000 | 0x04000000);
  char *bad[] = {"process", "thread", "gpu"};
  CHECK_EQ(etw_win_kernel_flags(bad, 3, "/providers/1", &f, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/1/events/2");
  CHECK(strstr(st.msg, "context_switch") != NULL); /* lists the known names */

  /* the same flags through the system providers */
  struct etw_win_sysprov sp[8];
  CHECK_EQ(etw_win_kernel_flags(names, 3, "/providers/0", &f, &st), ETW_E_OK);
  f |= 0x2; /* + thread */
  uint32_t n = etw_win_kernel_sysproviders(f, sp, 8);
  CHECK_EQ(n, 3); /* process (general|thread), io (disk|disk_init), scheduler (cswitch) */
  char g[39];
  etw_format_guid(g, sp[0].guid);
  CHECK_STR(g, "{151f55dc-467d-471f-83b5-5f889d46ff66}");
  CHECK_EQ(sp[0].keywords, 0x801);
  etw_format_guid(g, sp[1].guid);
  CHECK_STR(g, "{3d5c43e3-0f1c-4202-b817-174c0070dc79}");
  CHECK_EQ(sp[1].keywords, 0x3);
  etw_format_guid(g, sp[2].guid);
  CHECK_STR(g, "{599a2a76-4d91-4910-9ac7-7d33f2e97a6c}");
  CHECK_EQ(sp[2].keywords, 0x200);
  CHECK_EQ(etw_win_kernel_sysproviders(f, sp, 1), 1);
  etw_format_guid(g, etw_guid_system_trace_control);
  CHECK_STR(g, "{9e814aad-3204-11d2-9a82-006008a86939}");

  CHECK(!etw_win_has_system_providers(ETW_WINVER(10, 0), 19045));
  CHECK(etw_win_has_system_providers(ETW_WINVER(10, 0), 20348));
  CHECK(etw_win_has_system_providers(ETW_WINVER(10, 0), 22631));
  CHECK(!etw_win_has_system_providers(ETW_WINVER(6, 3), 9600));

  CHECK(etw_win_is_kernel_provider("kernel"));
  CHECK(etw_win_is_kernel_provider("NT KERNEL LOGGER"));
  CHECK(etw_win_is_kernel_provider("{9E814AAD-3204-11D2-9A82-006008A86939}"));
  CHECK(!etw_win_is_kernel_provider("Microsoft-Windows-Kernel-Process"));
  CHECK(!etw_win_is_kernel_provider(NULL));
  /* every flag has a system provider; no two names share the same bits */
  const struct etw_win_kflag *k = etw_win_kflags();
  for (int i = 0; k[i].name; i++) {
    CHECK(k[i].sys_guid != NULL && k[i].sys_keywords != 0);
    for (int j = 0; j < i; j++) CHECK((k[i].flags & k[j].flags) == 0);
  }
}

static void test_errors(void) {
  struct etw_status st;
  CHECK_EQ(etw_win_error(0, "StartTraceW", 0, &st), ETW_E_OK);
  CHECK_EQ(etw_win_error(5, "StartTraceW", 0, &st), ETW_E_PERM);
  CHECK(strstr(st.msg, "Administrator") && strstr(st.msg, "Performance Log Users"));
  CHECK(!strstr(st.msg, "SeSystemProfilePrivilege"));
  CHECK_EQ(etw_win_error(5, "StartTraceW", 1, &st), ETW_E_PERM);
  CHECK(strstr(st.msg, "SeSystemProfilePrivilege") != NULL);
  CHECK_EQ(etw_win_error(1314, "StartTraceW", 1, &st), ETW_E_PERM);
  CHECK_EQ(etw_win_error(1450, "StartTraceW", 0, &st), ETW_E_LIMIT);
  CHECK(strstr(st.msg, "64") != NULL && !strstr(st.msg, "system-logger"));
  CHECK_EQ(etw_win_error(1450, "StartTraceW", 1, &st), ETW_E_LIMIT);
  CHECK(strstr(st.msg, "8 system-logger") != NULL);
  CHECK_EQ(etw_win_error(183, "StartTraceW", 0, &st), ETW_E_EXISTS);
  CHECK_EQ(etw_win_error(4201, "ControlTraceW", 0, &st), ETW_E_NOT_FOUND);
  CHECK_EQ(etw_win_error(87, "EnableTraceEx2", 0, &st), ETW_E_KERNEL);
  CHECK_EQ(etw_win_error(120, "ProcessTrace", 0, &st), ETW_E_UNSUPPORTED);
  CHECK_EQ(etw_win_error(99999, "X", 0, &st), ETW_E_KERNEL);
  CHECK(strstr(st.msg, "99999") != NULL);
}

static void test_utf(void) {
  uint16_t w[16];
  /* é (2 bytes), € (3), 😀 (4 → surrogate pair) */
  CHECK_EQ(etw_utf8_to_utf16("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", w, 16), 5);
  CHECK_EQ(w[0], 'a');
  CHECK_EQ(w[1], 0xe9);
  CHECK_EQ(w[2], 0x20ac);
  CHECK_EQ(w[3], 0xd83d);
  CHECK_EQ(w[4], 0xde00);
  CHECK_EQ(w[5], 0);
  char back[32];
  CHECK_EQ(etw_utf16_to_utf8(w, 16, back, sizeof back), 10);
  CHECK_STR(back, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  CHECK_EQ(etw_utf8_to_utf16("\xff", w, 16), -1);
  CHECK_EQ(etw_utf8_to_utf16("\xc0\x80", w, 16), -1);      /* overlong */
  CHECK_EQ(etw_utf8_to_utf16("\xed\xa0\x80", w, 16), -1);  /* a surrogate */
  CHECK_EQ(etw_utf8_to_utf16("\xf4\x90\x80\x80", w, 16), -1); /* > U+10FFFF */
  CHECK_EQ(etw_utf8_to_utf16("\xc3", w, 16), -1);          /* truncated */
  CHECK_EQ(etw_utf8_to_utf16("abc", w, 4), 3);             /* exact fit with the NUL */
  CHECK_EQ(etw_utf8_to_utf16("abcd", w, 4), -1);
  CHECK_EQ(etw_utf8_to_utf16("a\xf0\x9f\x98\x80", w, 3), -1); /* the pair does not fit */
  uint16_t lone[] = {'x', 0xd800, 'y', 0};
  CHECK_EQ(etw_utf16_to_utf8(lone, 4, back, sizeof back), 5);
  CHECK_STR(back, "x\xef\xbf\xbdy");
  char tiny[3];
  CHECK_EQ(etw_utf8_to_utf16("\xc3\xa9\xe2\x82\xac", w, 16), 2);
  CHECK_EQ(etw_utf16_to_utf8(w, 2, tiny, sizeof tiny), 2); /* é fits, € does not */
  CHECK_STR(tiny, "\xc3\xa9");
}

static size_t put_w(unsigned char *b, size_t off, const char *s) {
  size_t i = 0;
  for (; s[i]; i++) b[off + 2 * i] = (unsigned char)s[i], b[off + 2 * i + 1] = 0;
  b[off + 2 * i] = b[off + 2 * i + 1] = 0;
  return off + 2 * (i + 1);
}

static void test_tei(void) {
  /* TRACE_EVENT_INFO: 3 top-level properties (UInt32, UnicodeString, a struct of 2) */
  static unsigned char b[1024];
  memset(b, 0, sizeof b);
  b[32] = 1;                       /* Id */
  b[34] = 3;                       /* Version */
  b[36] = 4;                       /* Level */
  b[37] = 1;                       /* Opcode */
  b[38] = 1;                       /* Task */
  b[47] = 0x80, b[40] = 0x10;      /* Keyword 0x8000000000000010 */
  wr32(b + 100, 5);
  wr32(b + 104, 3);
  size_t o = 112 + 5 * 24;
  wr32(b + 68, (uint32_t)o);
  o = put_w(b, o, "Process");
  wr32(b + 72, (uint32_t)o);
  o = put_w(b, o, "Start");
  unsigned char *e = b + 112;
  wr32(e + 4, (uint32_t)o);
  o = put_w(b, o, "ProcessID");
  e[8] = 8;                        /* win:UInt32 */
  e += 24;
  wr32(e + 4, (uint32_t)o);
  o = put_w(b, o, "ImageName");
  e[8] = 1;                        /* win:UnicodeString */
  e += 24;
  wr32(e, 1);                      /* PropertyStruct */
  wr32(e + 4, (uint32_t)o);
  o = put_w(b, o, "Pair");
  e[8] = 3, e[10] = 2;             /* StructStartIndex 3, 2 members */
  e[16] = 4;                       /* fixed count 4 */
  wr32(e, 1 | 0x20);
  struct etw_jw w;
  etw_jw_init(&w, 4096);
  CHECK_EQ(etw_win_tei_json(b, o, &w), 0);
  CHECK_STR(etw_jw_cstr(&w),
            "{\"id\":1,\"version\":3,\"name\":\"Process/Start\",\"level\":4,\"opcode\":1,\"task\":1,"
            "\"keywords\":\"0x8000000000000010\",\"fields\":[{\"name\":\"ProcessID\",\"type\":\"win:UInt32\"},"
            "{\"name\":\"ImageName\",\"type\":\"win:UnicodeString\"},"
            "{\"name\":\"Pair\",\"type\":\"struct\",\"members\":2,\"array\":4}]}");
  /* malformed: property table past the end, counts out of range, offsets outside the blob */
  etw_jw_truncate(&w, 0);
  CHECK_EQ(etw_win_tei_json(b, 112 + 24, &w), -1);
  CHECK_EQ(w.len, 0);
  wr32(b + 104, 6);
  CHECK_EQ(etw_win_tei_json(b, o, &w), -1);
  wr32(b + 104, 3);
  wr32(b + 68, 5000);
  wr32(b + 72, 0);
  CHECK_EQ(etw_win_tei_json(b, o, &w), 0);
  CHECK(strstr(etw_jw_cstr(&w), "\"name\":\"EventID(1)\"") != NULL);
  etw_jw_free(&w);
}

/* untrusted blobs (a TRACE_EVENT_INFO from TDH, a queried EVENT_TRACE_PROPERTIES): random and
 * mutated inputs of every length must neither crash nor read outside (ASan) nor write invalid JSON
 * framing; the buffers are exactly as long as the lengths passed */
static void test_robust(void) {
  uint32_t x = 12345;
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = (size_t)(iter % 700);
    unsigned char *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
      x = x * 1103515245u + 12345u;
      b[i] = (unsigned char)(x >> 16);
    }
    if (n >= 112 && iter % 3 == 0) { /* plausible counts so the property walk runs */
      b[100] = (unsigned char)(iter % 5), b[101] = b[102] = b[103] = 0;
      b[104] = (unsigned char)(iter % 4), b[105] = b[106] = b[107] = 0;
    }
    etw_jw_truncate(&w, 0);
    if (etw_win_tei_json(b, n, &w) == 0) CHECK(w.len > 2 && w.buf[0] == '{' && w.buf[w.len - 1] == '}');
    else CHECK_EQ(w.len, 0);
    struct etw_win_props_stats ps;
    char nm[64], fl[64];
    etw_win_props_read(b, n, &ps, nm, sizeof nm, fl, sizeof fl);
    CHECK(strlen(nm) < sizeof nm && strlen(fl) < sizeof fl);
    free(b);
  }
  etw_jw_free(&w);
}

/* "stacks": [IDs] (spec.c parses it, the builder makes the STACKWALK filter of those IDs only) */
static void test_stack_list(void) {
  struct etw_status st;
  struct etw_win_enable e;
  struct etw_provider_spec p;
  cJSON *o = cJSON_Parse("{\"name\":\"Microsoft-Windows-Kernel-Process\",\"event_ids\":[1,2,4660],\"stacks\":[4660,1]}");
  CHECK_EQ(etw_provider_parse(o, "win", &p, "/providers/2", &st), ETW_E_OK);
  CHECK_EQ(p.stacks, 1);
  CHECK_EQ(p.n_stack_ids, 2);
  CHECK_EQ(etw_win_enable_build(NULL, &p, "/providers/2", 0, 0, &e, &st), ETW_E_OK);
  /* the event-ID filter {in, 3 IDs}, then EVENT_FILTER_TYPE_STACKWALK {FilterIn=1, Count=2, 0x1234, 1} */
  CHECK_EQ(e.nf, 2);
  CHECK_EQ(e.f[0].type, 0x80000200u);
  CHECK_EQ(rd16(e.f[0].data + 2), 3);
  CHECK_EQ(e.f[1].type, 0x80001000u);
  CHECK_EQ(e.f[1].size, 4 + 2 * 2);
  CHECK_EQ(e.f[1].data[0], 1);
  CHECK_EQ(e.f[1].data[1], 0);
  CHECK_EQ(rd16(e.f[1].data + 2), 2);
  CHECK_EQ(rd16(e.f[1].data + 4), 0x1234);
  CHECK_EQ(rd16(e.f[1].data + 6), 1);
  CHECK_EQ(e.enable_property, 0); /* not every event's stack */
  /* before Windows 10: refused naming the list */
  CHECK_EQ(etw_win_enable_build(NULL, &p, "/providers/2", ETW_WINVER(6, 3), 9600, &e, &st), ETW_E_UNSUPPORTED);
  etw_provider_free(&p);
  cJSON_Delete(o);
  /* without event_ids: any IDs; with excluded ones: not those */
  o = cJSON_Parse("{\"name\":\"P\",\"stacks\":[7]}");
  CHECK_EQ(etw_provider_parse(o, "win", &p, "/providers/0", &st), ETW_E_OK);
  CHECK_EQ(etw_win_enable_build(NULL, &p, "/providers/0", 0, 0, &e, &st), ETW_E_OK);
  CHECK_EQ(e.nf, 1);
  CHECK_EQ(e.f[0].type, 0x80001000u);
  CHECK_EQ(rd16(e.f[0].data + 4), 7);
  etw_provider_free(&p);
  cJSON_Delete(o);
  static const struct {
    const char *json, *field;
  } bad[] = {
      {"{\"name\":\"P\",\"event_ids\":[1,2],\"stacks\":[2,3]}", "/providers/0/stacks/1"},
      {"{\"name\":\"P\",\"event_ids\":[1,2],\"event_ids_exclude\":true,\"stacks\":[3,1]}", "/providers/0/stacks/1"},
      {"{\"name\":\"P\",\"stacks\":[1,1]}", "/providers/0/stacks/1"},
      {"{\"name\":\"P\",\"stacks\":[1,\"x\"]}", "/providers/0/stacks/1"},
      {"{\"name\":\"P\",\"stacks\":[70000]}", "/providers/0/stacks/0"},
      {"{\"name\":\"P\",\"stacks\":[]}", "/providers/0/stacks"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o = cJSON_Parse(bad[i].json);
    CHECK_EQ(etw_provider_parse(o, "win", &p, "/providers/0", &st), ETW_E_INVALID);
    CHECK_STR(st.field, bad[i].field);
    etw_provider_free(&p);
    cJSON_Delete(o);
  }
  /* event names are linux's form: the builder refuses them by name */
  o = cJSON_Parse("{\"name\":\"P\",\"stacks\":[\"Start\"]}");
  CHECK_EQ(etw_provider_parse(o, "win", &p, "/providers/0", &st), ETW_E_OK);
  CHECK_EQ(etw_win_enable_build(NULL, &p, "/providers/0", 0, 0, &e, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/providers/0/stacks/0");
  etw_provider_free(&p);
  cJSON_Delete(o);
  /* 65 IDs: more than ETW filters */
  char big[1024];
  int n = snprintf(big, sizeof big, "{\"name\":\"P\",\"stacks\":[");
  for (int i = 0; i < 65; i++) n += snprintf(big + n, sizeof big - (size_t)n, "%s%d", i ? "," : "", i + 1);
  snprintf(big + n, sizeof big - (size_t)n, "]}");
  o = cJSON_Parse(big);
  CHECK_EQ(etw_provider_parse(o, "win", &p, "/providers/0", &st), ETW_E_OK);
  CHECK_EQ(etw_win_enable_build(NULL, &p, "/providers/0", 0, 0, &e, &st), ETW_E_LIMIT);
  CHECK_STR(st.field, "/providers/0/stacks");
  etw_provider_free(&p);
  cJSON_Delete(o);
}

int main(void) {
  test_robust();
  test_tei();
  test_props();
  test_props_read();
  test_cfg_check();
  test_enable();
  test_stack_list();
  test_kernel();
  test_errors();
  test_utf();
  T_DONE();
}
