/* test_dec_proc.c — the decoder's process table (dec_proc.c) at its bounds, with hand-made kernel
 * Process records (v4, 64-bit, SYSTEM header) fed through etw_decoder_write: a pid named by a
 * Start shows its name (image name without directory and extension), a reused pid takes the name
 * of its new Start, an End keeps the name; 16,384 live processes fill the table, the next Starts
 * are dropped and counted (etw_decoder_proc_dropped) and their events go without a name; once
 * processes have ended, new Starts evict them and are named again. Fast and reference decoders
 * write the same bytes throughout. */
#include <stdint.h>
#include <string.h>

#include "etwcore/etl.h"
#include "t.h"

static const unsigned char PROCESS_GUID[16] = {0xd0, 0xa8, 0x6f, 0x3d, 0x05, 0xfe, 0xd0, 0x11,
                                               0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c};

/* A Process event (type @op) of @pid with @image (v4 payload: key, pid, ppid, session, exit,
 * DTB, flags, SID 0, image, empty UTF-16 command line, package, app id) into @buf. */
static void process_rec(struct etw_rec *r, unsigned char *buf, unsigned op, uint32_t pid, const char *image,
                        uint64_t ft) {
  memset(r, 0, sizeof *r);
  size_t n = 0;
  memset(buf, 0, 256);
  n = 8;                     /* UniqueProcessKey */
  memcpy(buf + n, &pid, 4);  /* ProcessId */
  n += 16;                   /* ParentId, SessionId, ExitStatus */
  n += 8 + 4;                /* DirectoryTableBase, Flags */
  n += 4;                    /* UserSID: 0 */
  memcpy(buf + n, image, strlen(image) + 1);
  n += strlen(image) + 1;
  n += 6; /* three empty UTF-16 strings */
  r->kind = ETW_REC_SYSTEM;
  r->ptr_size = 8;
  r->hook_id = (uint16_t)(0x0300 | op);
  r->pid = 4;
  r->tid = 8;
  r->desc.version = 4;
  r->desc.opcode = (uint8_t)op;
  memcpy(r->provider_id, PROCESS_GUID, 16);
  r->filetime = ft;
  r->user_data = buf;
  r->user_len = (uint32_t)n;
}

/* An event of @pid (a Process/Terminate record: its payload names the pid) */
static void term_rec(struct etw_rec *r, unsigned char *buf, uint32_t pid, uint64_t ft) {
  memset(r, 0, sizeof *r);
  memcpy(buf, &pid, 4);
  r->kind = ETW_REC_SYSTEM;
  r->ptr_size = 8;
  r->hook_id = 0x030B;
  r->pid = 4;
  r->tid = 8;
  r->desc.version = 2;
  r->desc.opcode = 11;
  memcpy(r->provider_id, PROCESS_GUID, 16);
  r->filetime = ft;
  r->user_data = buf;
  r->user_len = 4;
}

static struct etw_decoder *fast, *ref;
static struct etw_jw wf, wr;
static uint64_t ft = 132400000000000000ull;

/* Decodes @r with both decoders; the fast one's text (NUL-terminated) */
static const char *both(const struct etw_rec *r) {
  struct etw_evref e1, e2;
  etw_jw_truncate(&wf, 0);
  etw_jw_truncate(&wr, 0);
  etw_decoder_write(fast, r, &wf, &e1);
  etw_decoder_write(ref, r, &wr, &e2);
  CHECK(wf.len == wr.len && !memcmp(wf.buf, wr.buf, wf.len));
  CHECK_EQ(e1.pid, e2.pid);
  return etw_jw_cstr(&wf);
}

static void start(unsigned op, uint32_t pid, const char *image) {
  unsigned char buf[256];
  struct etw_rec r;
  process_rec(&r, buf, op, pid, image, ft++);
  both(&r);
}

/* Whether an event of @pid shows `"ProcessName":"@name"` (NULL: no name) */
static int named(uint32_t pid, const char *name) {
  unsigned char buf[8];
  struct etw_rec r;
  term_rec(&r, buf, pid, ft++);
  const char *t = both(&r);
  char want[128];
  snprintf(want, sizeof want, "\"ProcessID\":%u,\"ProcessName\":\"%s\",\"ThreadID\":null", pid, name ? name : "");
  char none[64];
  snprintf(none, sizeof none, "\"ProcessID\":%u,\"ThreadID\":null", pid);
  int ok = name ? strstr(t, want) != NULL : strstr(t, none) != NULL;
  if (!ok) fprintf(stderr, "pid %u: want %s in %s\n", pid, name ? want : none, t);
  return ok;
}

int main(void) {
  fast = etw_decoder_new(NULL);
  ref = etw_decoder_new(NULL);
  etw_decoder_set_mode(ref, ETW_DECODE_REFERENCE);
  etw_jw_init(&wf, 1 << 20);
  etw_jw_init(&wr, 1 << 20);
  CHECK(named(100, NULL));
  start(1, 100, "C:\\Tools\\Test.x64.exe");
  CHECK(named(100, "Test.x64"));
  start(2, 100, "Test.x64.exe"); /* End: the name stays */
  CHECK(named(100, "Test.x64"));
  start(1, 100, "cmd.exe"); /* the pid reused */
  CHECK(named(100, "cmd"));
  start(3, 101, "a\"b.exe"); /* a quote, escaped the same way on both paths */
  CHECK(named(101, "a\\\"b"));
  /* fill the table: 16,384 live processes in all */
  for (uint32_t pid = 1000; pid < 1000 + 16384 - 2; pid++) start(1, pid, "svchost.exe");
  CHECK_EQ(etw_decoder_proc_dropped(fast), 0);
  CHECK(named(1000 + 16384 - 3, "svchost"));
  for (uint32_t pid = 50000; pid < 50010; pid++) start(1, pid, "late.exe");
  CHECK_EQ(etw_decoder_proc_dropped(fast), 10);
  CHECK_EQ(etw_decoder_proc_dropped(ref), 10);
  CHECK(named(50005, NULL));
  CHECK(named(100, "cmd"));
  /* half of them end: new Starts evict ended ones */
  for (uint32_t pid = 1000; pid < 1000 + 8192; pid++) start(2, pid, "svchost.exe");
  start(1, 50005, "late.exe");
  CHECK_EQ(etw_decoder_proc_dropped(fast), 10);
  CHECK(named(50005, "late"));
  CHECK(named(1000, NULL));             /* ended and evicted */
  CHECK(named(1000 + 8192, "svchost")); /* live: kept */
  etw_jw_free(&wf);
  etw_jw_free(&wr);
  etw_decoder_free(fast);
  etw_decoder_free(ref);
  T_DONE();
}
