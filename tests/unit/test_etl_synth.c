/* test_etl_synth.c — hand-built ETL images for what the corpus lacks: a 32-bit trace with the
 * CPU-cycle clock, system-time clock, buffers out of sequence order on two processors
 * (circular/flush order) merged by time, an XPRESS-compressed buffer (literal-only stream),
 * 32-bit EVENT_HEADER records in a 64-bit trace, a never-finalised file (BuffersWritten 0), a
 * zero-filled preallocated tail, and a damaged record inside a buffer.
 */
#include "t.h"
#include "test_etl_util.h"

struct img {
  unsigned char b[1 << 16];
  size_t n;
};


#define START_FT 132754283728578510ULL
#define T0 1000000ULL

/* Buffer header at @off; returns the payload start. */
static size_t buffer(struct img *im, size_t off, uint32_t size, uint64_t seq, unsigned cpu, uint32_t used,
                     unsigned flag, uint32_t state) {
  unsigned char *h = im->b + off;
  memset(h, 0xFF, size);
  memset(h, 0, 0x48);
  tu_w32(h, size);
  tu_w32(h + 4, used);
  tu_w64(h + 0x18, seq);
  tu_w16(h + 0x28, cpu);
  tu_w32(h + 0x2C, state);
  tu_w32(h + 0x30, used);
  tu_w16(h + 0x34, flag);
  if (off + size > im->n) im->n = off + size;
  return off + 0x48;
}

/* Logfile header record (SYSTEM32 or SYSTEM64) at @p; returns its size (8-aligned). */
static size_t logfile_header(unsigned char *p, int is64, uint32_t clock, uint32_t mhz, uint64_t freq,
                             uint32_t buffers_written) {
  size_t hl = is64 ? 0x118 : 0x110, size = 0x20 + hl + 4; /* two empty strings */
  memset(p, 0, size);
  tu_w32(p, 0xC0000002u | (is64 ? 0x00020000u : 0x00010000u));
  tu_w16(p, 2);
  p[2] = is64 ? 2 : 1;
  p[3] = 0xC0;
  tu_w16(p + 4, (unsigned)size);
  tu_w16(p + 6, 0);
  tu_w32(p + 8, 11);
  tu_w32(p + 12, 22);
  tu_w64(p + 0x10, T0);
  unsigned char *h = p + 0x20;
  tu_w32(h, 65536);
  tu_w32(h + 0x24, buffers_written);
  tu_w32(h + 0x2C, is64 ? 8 : 4);
  tu_w32(h + 0x34, mhz);
  size_t b = (is64 ? 0x48 : 0x40) + 176;
  tu_w64(h + b + 8, freq);
  tu_w64(h + b + 16, START_FT);
  tu_w32(h + b + 24, clock);
  return (size + 7) & ~(size_t)7;
}

/* PERFINFO record (32 or 64) with a u32 payload. */
static size_t perfinfo(unsigned char *p, int is64, unsigned hook, uint64_t ts, uint32_t val) {
  memset(p, 0, 0x18);
  tu_w16(p, 2);
  p[2] = is64 ? 0x11 : 0x10;
  p[3] = 0xC0;
  tu_w16(p + 4, 0x14);
  tu_w16(p + 6, hook);
  tu_w64(p + 8, ts);
  tu_w32(p + 0x10, val);
  return 0x18;
}

/* EVENT_HEADER record (32 or 64) without extended items, payload = one u32. */
static size_t evh(unsigned char *p, int is64, uint64_t ts, uint16_t id) {
  memset(p, 0, 0x58);
  tu_w16(p, 0x54);
  p[2] = is64 ? 0x13 : 0x12;
  p[3] = 0xC0;
  tu_w32(p + 8, 7);
  tu_w32(p + 12, 8);
  tu_w64(p + 0x10, ts);
  for (int i = 0; i < 16; i++) p[0x18 + i] = (unsigned char)(0x40 + i);
  tu_w16(p + 0x28, id);
  p[0x2C] = 4;
  tu_w32(p + 0x50, 0xABCD);
  return 0x58;
}

static size_t read_all(const struct img *im, uint64_t *ft, uint16_t *cpu, uint8_t *ps, size_t max, int *rc,
                       struct etw_status *st) {
  struct etw_etl_reader *r = etw_etl_reader_new();
  size_t n = 0;
  if (etw_etl_reader_add_mem(r, "synth.etl", im->b, im->n, st)) {
    *rc = -2;
    etw_etl_reader_free(r);
    return 0;
  }
  struct etw_rec rec;
  while ((*rc = etw_etl_reader_next(r, &rec, st)) == 1) {
    if (n < max) {
      ft[n] = rec.filetime;
      cpu[n] = rec.cpu;
      ps[n] = rec.ptr_size;
    }
    n++;
  }
  etw_etl_reader_free(r);
  return n;
}

/* 32-bit trace, CPU-cycle clock at 1000 MHz: +2,000,000 cycles = +2 ms. */
static void test_cpu_clock_32(void) {
  static struct img im;
  memset(&im, 0, sizeof im);
  size_t p = buffer(&im, 0, 1024, 0, 0, 0, 0x21, 0);
  p += logfile_header(im.b + p, 0, 3, 1000, 0, 0 /* never finalised */);
  p += perfinfo(im.b + p, 0, 0x0F2E, T0 + 2000000, 1);
  tu_w32(im.b + 0x30, (uint32_t)p);
  tu_w32(im.b + 4, (uint32_t)p);
  im.n = 1024 + 4096; /* preallocated zero tail */
  uint64_t ft[8];
  uint16_t cpu[8];
  uint8_t ps[8];
  int rc;
  struct etw_status st;
  size_t n = read_all(&im, ft, cpu, ps, 8, &rc, &st);
  CHECK_EQ(n, 2);
  CHECK_EQ(rc, 0);
  CHECK_EQ(ft[0], START_FT);
  CHECK_EQ(ft[1], START_FT + 20000);
  CHECK_EQ(ps[1], 4);
}

/* 64-bit trace, QPC 10 MHz; CPU 1's buffers are stored out of sequence order; buffer 3 is
 * XPRESS-compressed; EVH32 records inside. */
static void test_merge_compressed(void) {
  static struct img im;
  memset(&im, 0, sizeof im);
  size_t p = buffer(&im, 0, 1024, 0, 0, 0, 0x21, 3 /* XPRESS */);
  p += logfile_header(im.b + p, 1, 1, 0, 10000000, 4);
  tu_w32(im.b + 0x30, (uint32_t)p);
  tu_w32(im.b + 4, (uint32_t)p);
  /* CPU 1, sequence 5 stored first (times 40, 50), sequence 2 second (times 10, 30) */
  size_t q = buffer(&im, 1024, 512, 5, 1, 0, 0x20, 0);
  q += evh(im.b + q, 0, T0 + 40, 1);
  q += evh(im.b + q, 1, T0 + 50, 2);
  tu_w32(im.b + 1024 + 0x30, (uint32_t)(q - 1024));
  q = buffer(&im, 1536, 512, 2, 1, 0, 0x20, 0);
  q += evh(im.b + q, 0, T0 + 10, 3);
  q += evh(im.b + q, 1, T0 + 30, 4);
  tu_w32(im.b + 1536 + 0x30, (uint32_t)(q - 1536));
  /* CPU 0, compressed: payload = two records (times 20, 60) as literal-only XPRESS */
  unsigned char pay[256];
  size_t pl = 0;
  pl += evh(pay + pl, 1, T0 + 20, 5);
  pl += perfinfo(pay + pl, 1, 0x0F2E, T0 + 60, 9);
  unsigned char comp[400];
  size_t cl = 0;
  for (size_t i = 0; i < pl; i += 32) {
    tu_w32(comp + cl, 0); /* 32 literals follow */
    cl += 4;
    size_t k = pl - i < 32 ? pl - i : 32;
    memcpy(comp + cl, pay + i, k);
    cl += k;
  }
  size_t off = 2048;
  buffer(&im, off, (uint32_t)(0x48 + cl), 1, 0, (uint32_t)(0x48 + pl), 0x61, 0);
  memcpy(im.b + off + 0x48, comp, cl);
  uint64_t ft[16];
  uint16_t cpu[16];
  uint8_t ps[16];
  int rc;
  struct etw_status st;
  size_t n = read_all(&im, ft, cpu, ps, 16, &rc, &st);
  CHECK_EQ(n, 7);
  CHECK_EQ(rc, 0);
  static const uint64_t want[] = {0, 10, 20, 30, 40, 50, 60};
  static const uint8_t wps[] = {8, 4, 8, 8, 4, 8, 8};
  for (size_t i = 0; i < 7 && i < n; i++) {
    CHECK_EQ(ft[i], START_FT + want[i] * 1); /* 10 MHz = 100 ns ticks */
    CHECK_EQ(ps[i], wps[i]);
  }
  CHECK_EQ(cpu[1], 1);
  CHECK_EQ(cpu[2], 0);
  /* a damaged record in CPU 1's first buffer: the rest is still delivered, then the error */
  im.b[1536 + 0x48 + 0x58 + 2] = 0x77; /* second record's header type */
  n = read_all(&im, ft, cpu, ps, 16, &rc, &st);
  CHECK_EQ(n, 6);
  CHECK_EQ(rc, -1);
  CHECK(strstr(st.msg, "synth.etl") && strstr(st.msg, "offset 1536"));
}

/* System-time clock: timestamps already are FILETIMEs. */
static void test_system_clock(void) {
  static struct img im;
  memset(&im, 0, sizeof im);
  size_t p = buffer(&im, 0, 1024, 0, 0, 0, 0x21, 0);
  size_t hs = p;
  p += logfile_header(im.b + p, 1, 2, 0, 0, 1);
  tu_w64(im.b + hs + 0x10, START_FT); /* T0 == StartTime */
  p += perfinfo(im.b + p, 1, 0x0F2E, START_FT + 12345, 1);
  tu_w32(im.b + 0x30, (uint32_t)p);
  tu_w32(im.b + 4, (uint32_t)p);
  uint64_t ft[4];
  uint16_t cpu[4];
  uint8_t ps[4];
  int rc;
  struct etw_status st;
  size_t n = read_all(&im, ft, cpu, ps, 4, &rc, &st);
  CHECK_EQ(n, 2);
  CHECK_EQ(ft[1], START_FT + 12345);
}

int main(void) {
  test_cpu_clock_32();
  test_merge_compressed();
  test_system_clock();
  T_DONE();
}
