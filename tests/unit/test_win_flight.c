/* test_win_flight.c — the portable half of mode "flight" on Windows (etwcore/src/win_flight_cfg.c,
 * the buffering bits of win_portable.c): a flight spec → an in-memory ETW session
 * (EVENT_TRACE_BUFFERING_MODE, the ring = MinimumBuffers × BufferSize), its refusals, and the
 * EVENT_TRACE_PROPERTIES bytes StartTraceW would get. */
#include <stdint.h>
#include <string.h>

#include "etwcore/winreq.h"
#include "t.h"

static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static struct etw_session_spec flight(uint32_t buffer_kb) {
  struct etw_session_spec s;
  memset(&s, 0, sizeof s);
  s.mode = ETW_MODE_FLIGHT;
  s.buffer_kb = buffer_kb;
  return s;
}

static void test_sizes(void) {
  struct etw_status st;
  struct etw_win_session_cfg c;
  struct etw_session_spec s = flight(0); /* default: 4 MiB per processor */
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_OK);
  CHECK_EQ(c.buffering, 1);
  CHECK_EQ(c.realtime, 0);
  CHECK_EQ(c.file, ETW_WFILE_NONE);
  CHECK_EQ(c.buffer_kb, 64);
  CHECK_EQ(c.min_buffers, 4 * 4096 / 64); /* 256 buffers of 64 KiB = 16 MiB */
  CHECK_EQ(c.max_buffers, c.min_buffers);
  CHECK_EQ(etw_win_log_file_mode(&c), 0x400); /* EVENT_TRACE_BUFFERING_MODE alone */
  CHECK_EQ(etw_win_cfg_check(&c, 4, NULL, &st), ETW_E_OK);

  s = flight(100); /* 100 KiB × 3 = 300 KiB → 5 buffers, but at least 2 per processor */
  CHECK_EQ(etw_win_flight_cfg(&s, 3, &c, &st), ETW_E_OK);
  CHECK_EQ(c.min_buffers, 6);
  s = flight(1000); /* 3000 KiB → 46.9 → 47 buffers (rounded up: never smaller than asked) */
  CHECK_EQ(etw_win_flight_cfg(&s, 3, &c, &st), ETW_E_OK);
  CHECK_EQ(c.min_buffers, 47);
  s = flight(1024); /* unknown processor count: counted as one */
  CHECK_EQ(etw_win_flight_cfg(&s, 0, &c, &st), ETW_E_OK);
  CHECK_EQ(c.min_buffers, 16);

  s = flight(1024 * 1024 / 8); /* 128 MiB × 8 = 1 GiB: the cap, allowed */
  CHECK_EQ(etw_win_flight_cfg(&s, 8, &c, &st), ETW_E_OK);
  CHECK_EQ(c.min_buffers, 1024 * 1024 / 64);
  CHECK_EQ(etw_win_cfg_check(&c, 8, NULL, &st), ETW_E_OK);
  s = flight(1024 * 1024 / 8 + 1); /* one KiB more per processor: refused, naming buffer_kb */
  CHECK_EQ(etw_win_flight_cfg(&s, 8, &c, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/buffer_kb");
  CHECK(strstr(st.msg, "1024 MB") != NULL);
}

static void test_refusals(void) {
  struct etw_status st;
  struct etw_win_session_cfg c;
  struct etw_session_spec s = flight(0);
  s.flight_s = 10; /* a time window: the ring is sized as without it (the snapshot trims: etl_trim.c) */
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_OK);
  CHECK(c.buffering && c.min_buffers == 4 * 4096 / ETW_WIN_FLIGHT_BUF_KB);

  s = flight(0);
  s.win.set = 1;
  s.win.min_buffers = 100; /* the ring is sized by buffer_kb */
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/win");
  s.win.min_buffers = 0;
  s.win.circular = 1;
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_INVALID);
  s.win.circular = 0;
  s.win.clock = 2; /* clock and flush timer do apply */
  s.win.flush_s = 5;
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_OK);
  CHECK_EQ(c.clock, 2);
  CHECK_EQ(c.flush_s, 5);

  s = flight(0);
  s.mode = ETW_MODE_REALTIME;
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/mode");

  /* buffering is memory only: with real time or a file the configuration is refused */
  s = flight(0);
  CHECK_EQ(etw_win_flight_cfg(&s, 2, &c, &st), ETW_E_OK);
  c.realtime = 1;
  CHECK_EQ(etw_win_cfg_check(&c, 2, NULL, &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/mode");
  c.realtime = 0;
  c.file = ETW_WFILE_SEQUENTIAL;
  CHECK_EQ(etw_win_cfg_check(&c, 2, "C:\\t.etl", &st), ETW_E_INVALID);
  CHECK_STR(st.field, "/mode");
  /* and a session without buffering still needs real time or a file */
  memset(&c, 0, sizeof c);
  CHECK_EQ(etw_win_cfg_check(&c, 2, NULL, &st), ETW_E_INVALID);
}

static unsigned char buf[ETW_ETP_MAX];

static void test_props(void) {
  struct etw_status st;
  struct etw_win_session_cfg c;
  struct etw_session_spec s = flight(256);
  CHECK_EQ(etw_win_flight_cfg(&s, 2, &c, &st), ETW_E_OK);
  size_t len = 0;
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 2, "etwd_7_42", NULL, &len, &st), ETW_E_OK);
  CHECK_EQ(rd32(buf + ETW_ETP_BUFFERSIZE), 64);
  CHECK_EQ(rd32(buf + ETW_ETP_MINIMUMBUFFERS), 8); /* 256 KiB × 2 / 64 KiB */
  CHECK_EQ(rd32(buf + ETW_ETP_MAXIMUMBUFFERS), 8);
  CHECK_EQ(rd32(buf + ETW_ETP_LOGFILEMODE), 0x400);
  CHECK_EQ(rd32(buf + ETW_ETP_LOGFILENAMEOFFSET), 0); /* no file */
}

/* the block win_flight.c's snapshot gives ControlTraceW(EVENT_TRACE_CONTROL_UPDATE): the
 * session's own members (so the update changes nothing else: buffering stays, EnableFlags keep
 * the kernel flags — 0 there would switch them off) and the snapshot's file, named after them */
static void test_snapshot_update_block(void) {
  struct etw_status st;
  struct etw_win_session_cfg c;
  struct etw_session_spec s = flight(512);
  CHECK_EQ(etw_win_flight_cfg(&s, 4, &c, &st), ETW_E_OK);
  c.system_logger = 1; /* a flight recorder with kernel events (Windows 8+) */
  c.kernel_flags = 0x00000001 | 0x00000010; /* process + cswitch-like bits: passed through */
  const char *file = "C:\\ProgramData\\etwd\\recordings\\20261129T140000Z-s3\\trace.etl";
  size_t len = 0;
  CHECK_EQ(etw_win_props_build(buf, sizeof buf, &c, 4, "etwd_3_42", file, &len, &st), ETW_E_OK);
  CHECK_EQ(rd32(buf + ETW_ETP_LOGFILEMODE), 0x400u | 0x02000000u); /* buffering + system logger, no file mode */
  CHECK_EQ(rd32(buf + ETW_ETP_ENABLEFLAGS), 0x11);
  CHECK_EQ(rd32(buf + ETW_ETP_MINIMUMBUFFERS), 4 * 512 / 64);
  CHECK_EQ(rd32(buf + ETW_ETP_MAXIMUMFILESIZE), 0);
  uint32_t lo = rd32(buf + ETW_ETP_LOGGERNAMEOFFSET), fo = rd32(buf + ETW_ETP_LOGFILENAMEOFFSET);
  CHECK(lo >= ETW_ETP_SIZE && fo > lo && fo < len);
  size_t n = strlen(file);
  CHECK(fo + 2 * (n + 1) <= len);
  int same = 1;
  for (size_t i = 0; i <= n; i++) /* UTF-16LE, NUL-terminated */
    same &= buf[fo + 2 * i] == (unsigned char)file[i] && buf[fo + 2 * i + 1] == 0;
  CHECK(same);
  CHECK_EQ(rd32(buf + ETW_ETP_WNODE_BUFFERSIZE), (uint32_t)len);
}

int main(void) {
  test_sizes();
  test_refusals();
  test_props();
  test_snapshot_update_block();
  T_DONE();
}
