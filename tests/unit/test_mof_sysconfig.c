/* test_mof_sysconfig.c — the kernel SystemConfig layouts of net.4.5.2.x64 (Windows 8, x64) cover
 * their payloads and decode every field right.
 *
 * For every SystemConfig/CPU v3, Services v3 and PnP v4 record the expected EventData object is
 * built here from the record's own bytes (not through the decoder) and the event must end with
 * exactly `"EventData":<that object>}` — so no "Unparsed" member:
 *  - CPU v3: MHz, NumberOfProcessors, MemSize, PageSize, AllocationGranularity (u32),
 *    ComputerName wchar[256], DomainName wchar[134], HyperThreadingFlag and HighestUserAddress
 *    (pointers), ProcessorArchitecture/Level/Revision (u16), NxEnabled, PaeEnabled (u8),
 *    MemorySpeed (u32): 828 bytes.
 *  - Services v3: ProcessId, ServiceState, SubProcessTag (u32), then 5 NUL-terminated UTF-16
 *    strings: ServiceName, DisplayName, ProcessName, LoadOrderGroup, SvchostGroup.
 *  - PnP v4: ClassGuid, UpperFilterCount, LowerFilterCount (u32), 5 strings (DeviceID,
 *    DeviceDescription, FriendlyName, PdoName, ServiceName), then UpperFilterCount strings
 *    (UpperFilters) and LowerFilterCount strings (LowerFilters), each an array (also when the
 *    payload ends after ServiceName: [] for a count of 0).
 * The payload must end exactly where these layouts end. Values also pinned against PerfView's
 * baseline (net.4.5.2.x64.baseline.txt: CPU line, the first Services lines) and known facts
 * (device setup class GUIDs; serenum is the serial port's upper filter).
 * Also the two v2 SystemConfig types without a PerfView name: Opcode(18) (evntrace.h
 * EVENT_TRACE_TYPE_CONFIG_OPTICALMEDIA: DiskNumber, BusType, DeviceType, MediaType u16,
 * StartingOffset, Size, NumberOfFreeBlocks, TotalNumberOfBlocks, NextWritableAddress u64,
 * NumberOfSessions, NumberOfTracks, BytesPerSector u32, DiscStatus, LastSessionStatus u16, then
 * DriveLetter, FileSystem UTF-16 and ProductId, VendorId ANSI strings) and Opcode(28)
 * (EVENT_TRACE_TYPE_CONFIG_DPI: MachineDPI, UserDPI u32); they were Undecoded before.
 * Hand-made PnP v4 records exercise the filter arrays' bounds (huge counts, unterminated names,
 * a payload ending after ServiceName).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"
#include "t.h"
#include "test_etl_util.h"

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static unsigned rd16(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

struct sb {
  char b[8192];
  size_t n;
  int bad;
};
static void put(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void put(struct sb *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(s->b + s->n, sizeof s->b - s->n, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= sizeof s->b - s->n) s->bad = 1;
  else s->n += (size_t)k;
}

/* a UTF-16 string of @units units at @p as JSON (the corpus strings are printable ASCII) */
static void jstr(struct sb *s, const unsigned char *p, size_t units) {
  put(s, "\"");
  for (size_t i = 0; i < units; i++) {
    unsigned c = rd16(p + 2 * i);
    if (c < 0x20 || c > 0x7e) s->bad = 1;
    if (c == '"' || c == '\\') put(s, "\\%c", (char)c);
    else put(s, "%c", (char)c);
  }
  put(s, "\"");
}

/* NUL-terminated string at *pos: written as JSON, *pos moved past the NUL; 0 when unterminated */
static int zstr(struct sb *s, const unsigned char *p, size_t n, size_t *pos) {
  size_t i = *pos;
  while (i + 2 <= n && (p[i] || p[i + 1])) i += 2;
  if (i + 2 > n) return 0;
  jstr(s, p + *pos, (i - *pos) / 2);
  *pos = i + 2;
  return 1;
}

/* fixed wchar[m]: up to the first NUL */
static void fstr(struct sb *s, const unsigned char *p, size_t m) {
  size_t u = 0;
  while (u < m && rd16(p + 2 * u)) u++;
  jstr(s, p, u);
}

static int ends_with(const char *s, size_t sl, const char *t, size_t tl) { return sl >= tl && !memcmp(s + sl - tl, t, tl); }

/* NUL-terminated ANSI string at *pos (the corpus strings are printable ASCII) */
static int astr(struct sb *s, const unsigned char *p, size_t n, size_t *pos) {
  size_t i = *pos;
  while (i < n && p[i]) i++;
  if (i >= n) return 0;
  put(s, "\"");
  for (size_t k = *pos; k < i; k++) {
    if (p[k] < 0x20 || p[k] > 0x7e) s->bad = 1;
    if (p[k] == '"' || p[k] == '\\') put(s, "\\%c", p[k]);
    else put(s, "%c", p[k]);
  }
  put(s, "\"");
  *pos = i + 1;
  return 1;
}

enum { K_CPU, K_SVC, K_PNP, K_OPT, K_DPI, K_N };

/* Hand-made PnP v4 records (the W<off> string-array type): counts larger than the payload,
 * unterminated filter names, a payload ending right after ServiceName with nonzero counts. */
static const char *pnp(struct etw_decoder *d, struct etw_jw *w, const unsigned char *pay, size_t n, int *ok) {
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_SYSTEM;
  r.hook_id = 0x0B << 8 | 22;
  r.desc.opcode = 22;
  r.desc.version = 4;
  r.ptr_size = 8;
  r.user_data = pay;
  r.user_len = (uint32_t)n;
  struct etw_evref ref;
  w->len = 0;
  *ok = etw_decoder_write(d, &r, w, &ref);
  return etw_jw_cstr(w);
}

static void handmade(void) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  unsigned char b[64];
  memset(b, 0, sizeof b);
  /* GUID 0, counts (1, 2), 5 empty strings (10 bytes), "a", then "b" and "c" as lower filters */
  b[16] = 1;
  b[20] = 2;
  size_t n = 24 + 10;
  const char *ab = "a\0b\0c\0";
  for (size_t i = 0; i < 6; i++) b[n + 2 * i] = (unsigned char)ab[i];
  n += 12;
  int ok;
  const char *j = pnp(d, &w, b, n, &ok);
  CHECK(ok == 1 && strstr(j, "\"ServiceName\":\"\",\"UpperFilters\":[\"a\"],\"LowerFilters\":[\"b\",\"c\"]}}"));
  /* a name unterminated, a count beyond the payload: like any field the payload cuts, the
   * event is Undecoded with its whole payload (never read past it) */
  j = pnp(d, &w, b, n - 2, &ok);
  CHECK(ok == 0 && strstr(j, "},\"Undecoded\":{\"Reason\":\"payload shorter than the layout of this event version\",\"Payload\":\""));
  /* a count far beyond the payload */
  b[23] = 0x7f;
  j = pnp(d, &w, b, n, &ok);
  CHECK(ok == 0 && strstr(j, "},\"Undecoded\":{\"Reason\":\"payload shorter than the layout of this event version\",\"Payload\":\""));
  /* the payload ends after ServiceName: counts 0 -> both arrays empty; nonzero -> Undecoded */
  memset(b + 16, 0, 8);
  j = pnp(d, &w, b, 34, &ok);
  CHECK(ok == 1 && strstr(j, "\"ServiceName\":\"\",\"UpperFilters\":[],\"LowerFilters\":[]}}"));
  b[16] = 3;
  j = pnp(d, &w, b, 34, &ok);
  CHECK(ok == 0 && strstr(j, "},\"Undecoded\":{\"Reason\":\"payload shorter than the layout of this event version\",\"Payload\":\""));
  /* cut inside the counts */
  j = pnp(d, &w, b, 18, &ok);
  CHECK(ok == 0 && strstr(j, "},\"Undecoded\":{\"Reason\":\"payload shorter than the layout of this event version\",\"Payload\":\""));
  /* cut right after the GUID: the rest is absent (shorter version) */
  j = pnp(d, &w, b, 16, &ok);
  CHECK(ok == 1 && strstr(j, "\"EventData\":{\"ClassGuid\":\"{00000000-0000-0000-0000-000000000000}\"}}"));
  etw_jw_free(&w);
  etw_decoder_free(d);
}

/* ---- every SystemConfig type and version against the public layouts (the MSNT_SystemTrace MOF
 * classes SystemConfig_V0 … _V5 of the Windows 11 kernel MOF dump, etl-format.md §0), plus
 * Image opcode 34 (HypercallPage) and KernelTraceControl ImageID opcodes 38/40 (PerfView's
 * DbgPPDBTraceData / DbgDetermTraceData). Each payload is built here field by field from the
 * public layout and must decode to exactly the expected EventData, with no leftover. */
struct pb {
  unsigned char b[4096]; /* Video: 2,584 bytes */
  size_t n;
};
static void pb_u8(struct pb *b, unsigned v) { b->b[b->n++] = (unsigned char)v; }
static void pb_u16(struct pb *b, unsigned v) { pb_u8(b, v & 255); pb_u8(b, v >> 8 & 255); }
static void pb_u32(struct pb *b, uint32_t v) { pb_u16(b, v & 0xffff); pb_u16(b, v >> 16); }
static void pb_u64(struct pb *b, uint64_t v) { pb_u32(b, (uint32_t)v); pb_u32(b, (uint32_t)(v >> 32)); }
static void pb_w(struct pb *b, const char *s) { /* UTF-16, NUL-terminated */
  while (*s) pb_u16(b, (unsigned char)*s++);
  pb_u16(b, 0);
}
static void pb_c(struct pb *b, const char *s, size_t m) { /* wchar[m], NUL-padded */
  for (size_t i = 0; i < m; i++) pb_u16(b, *s ? (unsigned char)*s++ : 0);
}

static const unsigned char KTC_IMAGEID_G[16] = {0xd7, 0x75, 0xe6, 0xb3, 0x54, 0x25, 0x18, 0x4f,
                                                0x83, 0x0b, 0x27, 0x62, 0x73, 0x25, 0x60, 0xde};

/* decode one record; returns its EventData object text ("" when none) */
static const char *one(struct etw_decoder *d, struct etw_jw *w, int classic, unsigned group, unsigned type, unsigned ver,
                       int ps, const struct pb *b, const char **name) {
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  if (classic) {
    r.kind = ETW_REC_CLASSIC;
    memcpy(r.provider_id, KTC_IMAGEID_G, 16);
  } else {
    r.kind = ETW_REC_SYSTEM;
    r.hook_id = (uint16_t)(group << 8 | type);
  }
  r.desc.opcode = (uint8_t)type;
  r.desc.version = (uint8_t)ver;
  r.ptr_size = (uint8_t)ps;
  r.user_data = b->b;
  r.user_len = (uint32_t)b->n;
  struct etw_evref ref;
  w->len = 0;
  int ok = etw_decoder_write(d, &r, w, &ref);
  *name = ref.name;
  const char *j = etw_jw_cstr(w);
  const char *ed = strstr(j, "\"EventData\":");
  if (ok != 1 || !ed || strstr(j, "\"Unparsed\"") || strstr(j, "\"Undecoded\"")) {
    fprintf(stderr, "group %u type %u v%u: %s\n", group, type, ver, j);
    return "";
  }
  return ed;
}
#define EXPECT(got, want)                                                                                              \
  do {                                                                                                                 \
    const char *g_ = (got), *w_ = (want);                                                                              \
    int m_ = !strncmp(g_, w_, strlen(w_)) && !strcmp(g_ + strlen(w_), "}");                                          \
    if (!m_) fprintf(stderr, "want %s}\n got  %s\n", w_, g_);                                                          \
    CHECK(m_);                                                                                                         \
  } while (0)

static void v_irq_pnp(struct etw_decoder *d, struct etw_jw *wp) {
  struct etw_jw w = *wp; /* the caller's writer (its buffer may grow: handed back at the end) */
  struct pb b;
  const char *nm;
  /* IRQ v0–v2: IRQAffinity u64 (hex), IRQNum, DeviceDescriptionLen, DeviceDescription */
  for (unsigned v = 0; v <= 2; v++) {
    b.n = 0;
    pb_u64(&b, 0xff);
    pb_u32(&b, 17);
    pb_u32(&b, 4);
    pb_w(&b, "ACPI");
    EXPECT(one(d, &w, 0, 0x0B, 21, v, 8, &b, &nm),
           "\"EventData\":{\"IRQAffinity\":\"0xff\",\"IRQNum\":17,\"DeviceDescriptionLen\":4,\"DeviceDescription\":\"ACPI\"}");
    CHECK(!strcmp(nm, "SystemConfig/IRQ"));
  }
  /* IRQ v3 (the bug of issue 25): IRQGroup u16 and Reserved u16 after IRQAffinity */
  for (unsigned v = 3; v <= 4; v++) {
    b.n = 0;
    pb_u64(&b, 0xf);
    pb_u16(&b, 1);
    pb_u16(&b, 0);
    pb_u32(&b, 4294967286u);
    pb_u32(&b, 31);
    pb_w(&b, "High precision event timer");
    EXPECT(one(d, &w, 0, 0x0B, 21, v, 8, &b, &nm),
           "\"EventData\":{\"IRQAffinity\":\"0xf\",\"IRQGroup\":1,\"Reserved\":0,\"IRQNum\":4294967286,"
           "\"DeviceDescriptionLen\":31,\"DeviceDescription\":\"High precision event timer\"}");
  }
  /* PnP v0–v2: three lengths, DeviceID, DeviceDescription, FriendlyName; v3 adds PdoName */
  for (unsigned v = 0; v <= 3; v++) {
    b.n = 0;
    pb_u32(&b, 8);
    pb_u32(&b, 3);
    pb_u32(&b, 2);
    pb_w(&b, "ROOT\\X\\0");
    pb_w(&b, "Dev");
    pb_w(&b, "Fr");
    if (v == 3) pb_w(&b, "\\Device\\00000001");
    char want[512];
    snprintf(want, sizeof want,
             "\"EventData\":{\"IDLength\":8,\"DescriptionLength\":3,\"FriendlyNameLength\":2,\"DeviceID\":\"ROOT\\\\X\\\\0\","
             "\"DeviceDescription\":\"Dev\",\"FriendlyName\":\"Fr\"%s}",
             v == 3 ? ",\"PdoName\":\"\\\\Device\\\\00000001\"" : "");
    EXPECT(one(d, &w, 0, 0x0B, 22, v, 8, &b, &nm), want);
  }
  *wp = w;
}

static void v_old(struct etw_decoder *d, struct etw_jw *wp) {
  struct etw_jw w = *wp; /* the caller's writer (its buffer may grow: handed back at the end) */
  struct pb b;
  const char *nm;
  /* CPU v0/v1: DomainName is wchar[132] and the layout ends at HyperThreadingFlag (pointer) */
  for (int ps = 4; ps <= 8; ps += 4) {
    b.n = 0;
    pb_u32(&b, 2400);
    pb_u32(&b, 2);
    pb_u32(&b, 1024);
    pb_u32(&b, 4096);
    pb_u32(&b, 65536);
    pb_c(&b, "PC", 256);
    pb_c(&b, "DOM", 132);
    if (ps == 8) pb_u64(&b, 1);
    else pb_u32(&b, 1);
    EXPECT(one(d, &w, 0, 0x0B, 10, 1, ps, &b, &nm),
           "\"EventData\":{\"MHz\":2400,\"NumberOfProcessors\":2,\"MemSize\":1024,\"PageSize\":4096,\"AllocationGranularity\":65536,"
           "\"ComputerName\":\"PC\",\"DomainName\":\"DOM\",\"HyperThreadingFlag\":\"0x1\"}");
  }
  /* Services v0/v1: ServiceName wchar[34], DisplayName wchar[256], ProcessName wchar[34], ProcessId */
  b.n = 0;
  pb_c(&b, "svc", 34);
  pb_c(&b, "A service", 256);
  pb_c(&b, "svchost.exe", 34);
  pb_u32(&b, 812);
  EXPECT(one(d, &w, 0, 0x0B, 15, 0, 4, &b, &nm),
         "\"EventData\":{\"ServiceName\":\"svc\",\"DisplayName\":\"A service\",\"ProcessName\":\"svchost.exe\",\"ProcessId\":812}");
  /* NIC v0/v1: NICName wchar[256], Index, PhysicalAddrLen, PhysicalAddr wchar[8], Size, 10 × i32, Data */
  b.n = 0;
  pb_c(&b, "eth", 256);
  pb_u32(&b, 1);
  pb_u32(&b, 6);
  pb_c(&b, "abc", 8);
  pb_u32(&b, 40);
  for (int i = 0; i < 10; i++) pb_u32(&b, (uint32_t)(i == 0 ? -2 : i));
  pb_u32(&b, 7);
  EXPECT(one(d, &w, 0, 0x0B, 13, 1, 4, &b, &nm),
         "\"EventData\":{\"NICName\":\"eth\",\"Index\":1,\"PhysicalAddrLen\":6,\"PhysicalAddr\":\"abc\",\"Size\":40,\"IpAddress\":-2,"
         "\"SubnetMask\":1,\"DhcpServer\":2,\"Gateway\":3,\"PrimaryWinsServer\":4,\"SecondaryWinsServer\":5,\"DnsServer1\":6,"
         "\"DnsServer2\":7,\"DnsServer3\":8,\"DnsServer4\":9,\"Data\":7}");
  /* Power v0 (same as v2) */
  b.n = 0;
  for (int i = 0; i < 8; i++) pb_u8(&b, (unsigned)(i < 5));
  EXPECT(one(d, &w, 0, 0x0B, 16, 0, 8, &b, &nm),
         "\"EventData\":{\"S1\":1,\"S2\":1,\"S3\":1,\"S4\":1,\"S5\":1,\"Pad1\":0,\"Pad2\":0,\"Pad3\":0}");
  *wp = w;
}

static void v_new_fixed(struct etw_decoder *d, struct etw_jw *wp) {
  struct etw_jw w = *wp; /* the caller's writer (its buffer may grow: handed back at the end) */
  struct pb b;
  const char *nm;
  /* 29 CodeIntegrity, 30 TelemetryInfo, 33 DeviceFamily, 34 FlightIds, 36 Virtualization, 37 Boot */
  b.n = 0;
  pb_u32(&b, 0x2001);
  EXPECT(one(d, &w, 0, 0x0B, 29, 2, 8, &b, &nm), "\"EventData\":{\"CodeIntegrityInfo\":8193}");
  CHECK(!strcmp(nm, "SystemConfig/Opcode(29)"));
  b.n = 0;
  for (int i = 0; i < 16; i++) pb_u8(&b, (unsigned)i);
  EXPECT(one(d, &w, 0, 0x0B, 30, 2, 8, &b, &nm), "\"EventData\":{\"MachineId\":\"{03020100-0504-0706-0809-0a0b0c0d0e0f}\"}");
  b.n = 0;
  pb_u64(&b, 0x000a00004a610000ull);
  pb_u32(&b, 3);
  pb_u32(&b, 5);
  EXPECT(one(d, &w, 0, 0x0B, 33, 2, 8, &b, &nm),
         "\"EventData\":{\"UAPInfo\":2814751014977536,\"DeviceFamily\":3,\"DeviceForm\":5}");
  b.n = 0;
  pb_w(&b, "U1");
  pb_w(&b, "F1,F2");
  EXPECT(one(d, &w, 0, 0x0B, 34, 2, 8, &b, &nm), "\"EventData\":{\"UpdateId\":\"U1\",\"FlightIdList\":\"F1,F2\"}");
  b.n = 0;
  pb_u8(&b, 1);
  pb_u8(&b, 0);
  pb_u8(&b, 1);
  pb_u8(&b, 0);
  EXPECT(one(d, &w, 0, 0x0B, 36, 2, 8, &b, &nm),
         "\"EventData\":{\"VbsEnabled\":1,\"HvciEnabled\":0,\"HyperVisorEnabled\":1,\"Reserved\":0}");
  b.n = 0;
  pb_u64(&b, 0x10);
  pb_u32(&b, 2);
  pb_u8(&b, 1);
  pb_u8(&b, 1);
  pb_u8(&b, 0);
  pb_u8(&b, 0);
  EXPECT(one(d, &w, 0, 0x0B, 37, 2, 8, &b, &nm),
         "\"EventData\":{\"BootFlags\":16,\"FirmwareType\":2,\"SecureBootEnabled\":1,\"SecureBootCapable\":1,\"Reserved1\":0,"
         "\"Reserved2\":0}");
  *wp = w;
}

static void v_new_var(struct etw_decoder *d, struct etw_jw *wp) {
  struct etw_jw w = *wp; /* the caller's writer (its buffer may grow: handed back at the end) */
  struct pb b;
  const char *nm;
  /* 35 Processors: ProcessorIndex, FeatureSet, ProcessorSpeed, wchar[64], wchar[16], wchar[128] */
  b.n = 0;
  pb_u32(&b, 3);
  pb_u32(&b, 0x3f);
  pb_u32(&b, 3600);
  pb_c(&b, "CPU X", 64);
  pb_c(&b, "GenuineIntel", 16);
  pb_c(&b, "Intel64 Family 6", 128);
  EXPECT(one(d, &w, 0, 0x0B, 35, 2, 8, &b, &nm),
         "\"EventData\":{\"ProcessorIndex\":3,\"FeatureSet\":63,\"ProcessorSpeed\":3600,\"ProcessorName\":\"CPU X\","
         "\"VendorIdentifier\":\"GenuineIntel\",\"ProcessorIdentifier\":\"Intel64 Family 6\"}");
  /* 31 Defrag: 14 × u64, 23 × u32, VolumeId GUID, VolumePathNames */
  {
    static const char *const Q[14] = {"AlignmentClusters", "AvgFreeSpaceSize", "ClustersPerSlab", "FragmentedDirectoryExtents",
                                      "FragmentedExtents", "FreeSpaceCount", "LargestFreeSpaceSize",
                                      "LastRunActualPurgeClusters", "LastRunClustersTrimmed", "LastRunFullDefragTime",
                                      "LastRunTime", "MFTSize", "TotalClusters", "TotalUsedClusters"};
    static const char *const U[23] = {"AvgFragmentsPerFile", "BytesPerCluster", "DirectoryCount", "FragmentedDirectories",
                                      "FragmentedFiles", "FragmentedSpace", "HardwareIssue", "InUseMFTRecords", "InUseSlabs",
                                      "LastRunActualPurgeSlabs", "LastRunInitialBackedSlabs", "LastRunPercentFragmentation",
                                      "LastRunPinnedSlabs", "LastRunPotentialPurgeSlabs", "LastRunSpaceInefficientSlabs",
                                      "LastRunTrimmedSlabs", "LastRunUnknownEvictFailSlabs", "LastRunVolsnapPinnedSlabs",
                                      "MFTFragmentCount", "MovableFiles", "TotalMFTRecords", "TotalSlabs", "UnmovableFiles"};
    struct sb *e = malloc(sizeof *e);
    e->n = 0;
    e->bad = 0;
    b.n = 0;
    put(e, "\"EventData\":{");
    for (int i = 0; i < 14; i++) {
      pb_u64(&b, 1000u + (unsigned)i);
      put(e, "%s\"%s\":%d", i ? "," : "", Q[i], 1000 + i);
    }
    for (int i = 0; i < 23; i++) {
      pb_u32(&b, 100u + (unsigned)i);
      put(e, ",\"%s\":%d", U[i], 100 + i);
    }
    for (int i = 0; i < 16; i++) pb_u8(&b, 0);
    pb_w(&b, "C:\\");
    put(e, ",\"VolumeId\":\"{00000000-0000-0000-0000-000000000000}\",\"VolumePathNames\":\"C:\\\\\"}");
    CHECK(!e->bad);
    EXPECT(one(d, &w, 0, 0x0B, 31, 2, 8, &b, &nm), e->b);
    free(e);
  }
  /* 32 MobilePlatform: v2 15 strings, v3 12, v4+ 7 (names per version) */
  {
    static const char *const V2[15] = {"BootLoaderVersion", "FirmwareRevision", "FriendlyName", "HardwareRevision",
                                       "Manufacturer", "ManufacturerDisplayName", "ManufacturerModelName",
                                       "MobileOperatorDisplayName", "MobileOperatorName", "ModelName", "RadioHardwareRevision",
                                       "RadioSoftwareRevision", "ROMVersion", "SOCVersion", "HardwareVariant"};
    static const char *const V3[12] = {"DeviceManufacturer", "DeviceManufacturerDisplayName", "DeviceModel",
                                       "DeviceModelDisplayName", "MobileOperator", "MobileOperatorDisplayName",
                                       "HardwareVersion", "SocVersion", "RadioHardwareVersion", "RadioSoftwareVersion",
                                       "BspVersion", "OemSoftwareVersion"};
    static const char *const V4[7] = {"DeviceManufacturer", "DeviceManufacturerDisplayName", "DeviceModel",
                                      "DeviceModelDisplayName", "MobileOperator", "SocVersion", "BspVersion"};
    const char *const *names[3] = {V2, V3, V4};
    int counts[3] = {15, 12, 7};
    for (int v = 0; v < 3; v++) {
      struct sb *e = malloc(sizeof *e);
      e->n = 0;
      e->bad = 0;
      b.n = 0;
      put(e, "\"EventData\":{");
      for (int i = 0; i < counts[v]; i++) {
        char s[8];
        snprintf(s, sizeof s, "s%d", i);
        pb_w(&b, s);
        put(e, "%s\"%s\":\"%s\"", i ? "," : "", names[v][i], s);
      }
      put(e, "}");
      EXPECT(one(d, &w, 0, 0x0B, 32, (unsigned)v + 2, 8, &b, &nm), e->b);
      free(e);
    }
  }
  *wp = w;
}

static void v_image(struct etw_decoder *d, struct etw_jw *wp) {
  struct etw_jw w = *wp; /* the caller's writer (its buffer may grow: handed back at the end) */
  struct pb b;
  const char *nm;
  /* Image opcode 34 (HypercallPage): one pointer; the corpus record's payload, 8 bytes */
  b.n = 0;
  pb_u64(&b, 0xfffff80242310000ull);
  EXPECT(one(d, &w, 0, 0x14, 34, 2, 8, &b, &nm), "\"EventData\":{\"HypercallPageVa\":\"0xfffff80242310000\"}");
  /* KernelTraceControl ImageID/DbgPPDB: ImageBase, ProcessId, TimeDateStamp, MajorVersion and
   * MinorVersion (u16); DbgDeterm: ImageBase, ProcessId. Both pointer sizes. */
  for (int ps = 4; ps <= 8; ps += 4) {
    b.n = 0;
    if (ps == 8) pb_u64(&b, 0x7ff812340000ull);
    else pb_u32(&b, 0x12340000u);
    pb_u32(&b, 4321);
    pb_u32(&b, 0x5e0cafe0u);
    pb_u16(&b, 0x0100);
    pb_u16(&b, 0x504d);
    char want[256];
    snprintf(want, sizeof want,
             "\"EventData\":{\"ImageBase\":\"%s\",\"ProcessId\":4321,\"TimeDateStamp\":1577889760,\"MajorVersion\":256,"
             "\"MinorVersion\":20557}",
             ps == 8 ? "0x7ff812340000" : "0x12340000");
    EXPECT(one(d, &w, 1, 0, 38, 0, ps, &b, &nm), want);
    CHECK(!strcmp(nm, "ImageID/DbgPPDB"));
    b.n = (size_t)ps + 4;
    snprintf(want, sizeof want, "\"EventData\":{\"ImageBase\":\"%s\",\"ProcessId\":4321}", ps == 8 ? "0x7ff812340000" : "0x12340000");
    EXPECT(one(d, &w, 1, 0, 40, 0, ps, &b, &nm), want);
    CHECK(!strcmp(nm, "ImageID/DbgDeterm"));
  }
  *wp = w;
}

/* The per-version layouts the first pass left untested (issue 25 item 1 audit), each built from
 * PerfView's KernelTraceEventParser.cs (offsets by version; the MOF classes of
 * kerneltraceeventparser.mof for the v0/v1/v2 Video and Services fields):
 *  - PnP v5: SystemConfigPnPTraceData's DeviceIDStart is 32 from v5 on (v4: 24) — ClassGuid,
 *    UpperFilterCount, LowerFilterCount, DevStatus, DevProblem (named in its comment after
 *    ntwmi.h's WMI_PNP_RECORD_V5, the only public trace of the v5 layout), then the strings;
 *  - Video v0–v2: one fixed layout of 2,584 bytes (MemorySize … VRefresh u32, five wchar[256],
 *    StateFlags hex u32 at 2580);
 *  - CPU v2: DomainName wchar[134] at 532, HyperThreadingFlag a pointer at 800 (804 / 808 bytes);
 *  - Services v2: ProcessId, ServiceState, SubProcessTag (u32), strings from offset 12. */
static void v_more(struct etw_decoder *d, struct etw_jw *wp) {
  struct etw_jw w = *wp; /* the caller's writer (its buffer may grow: handed back at the end) */
  struct pb b;
  const char *nm;
  /* PnP v5 */
  static const unsigned char ports[16] = {0x78, 0xe9, 0x36, 0x4d, 0x25, 0xe3, 0xce, 0x11,
                                          0xbf, 0xc1, 0x08, 0x00, 0x2b, 0xe1, 0x03, 0x18};
  b.n = 0;
  memcpy(b.b, ports, 16);
  b.n = 16;
  pb_u32(&b, 1);          /* UpperFilterCount */
  pb_u32(&b, 2);          /* LowerFilterCount */
  pb_u32(&b, 0x0180200a); /* DevStatus */
  pb_u32(&b, 28);         /* DevProblem */
  CHECK(b.n == 32);
  pb_w(&b, "ACPI\\PNP0501\\1");
  pb_w(&b, "Communications Port");
  pb_w(&b, "COM1");
  pb_w(&b, "\\Device\\00000042");
  pb_w(&b, "Serial");
  pb_w(&b, "serenum");
  pb_w(&b, "lo1");
  pb_w(&b, "lo2");
  EXPECT(one(d, &w, 0, 0x0B, 22, 5, 8, &b, &nm),
         "\"EventData\":{\"ClassGuid\":\"{4d36e978-e325-11ce-bfc1-08002be10318}\",\"UpperFilterCount\":1,"
         "\"LowerFilterCount\":2,\"DevStatus\":\"0x180200a\",\"DevProblem\":28,\"DeviceID\":\"ACPI\\\\PNP0501\\\\1\","
         "\"DeviceDescription\":\"Communications Port\",\"FriendlyName\":\"COM1\",\"PdoName\":\"\\\\Device\\\\00000042\","
         "\"ServiceName\":\"Serial\",\"UpperFilters\":[\"serenum\"],\"LowerFilters\":[\"lo1\",\"lo2\"]}");
  CHECK(!strcmp(nm, "SystemConfig/PnP"));
  /* Video v0–v2 */
  for (unsigned v = 0; v <= 2; v++) {
    b.n = 0;
    pb_u32(&b, 268435456);
    pb_u32(&b, 1920);
    pb_u32(&b, 1080);
    pb_u32(&b, 32);
    pb_u32(&b, 60);
    pb_c(&b, "Chip", 256);
    pb_c(&b, "DAC", 256);
    pb_c(&b, "Adapter", 256);
    pb_c(&b, "Bios 1.0", 256);
    pb_c(&b, "\\\\.\\DISPLAY1", 256);
    CHECK(b.n == 2580);
    pb_u32(&b, 0x8000005);
    EXPECT(one(d, &w, 0, 0x0B, 14, v, 8, &b, &nm),
           "\"EventData\":{\"MemorySize\":268435456,\"XResolution\":1920,\"YResolution\":1080,\"BitsPerPixel\":32,"
           "\"VRefresh\":60,\"ChipType\":\"Chip\",\"DACType\":\"DAC\",\"AdapterString\":\"Adapter\",\"BiosString\":\"Bios 1.0\","
           "\"DeviceId\":\"\\\\\\\\.\\\\DISPLAY1\",\"StateFlags\":\"0x8000005\"}");
    CHECK(!strcmp(nm, "SystemConfig/Video"));
  }
  /* CPU v2, both pointer sizes */
  for (int ps = 4; ps <= 8; ps += 4) {
    b.n = 0;
    pb_u32(&b, 3000);
    pb_u32(&b, 8);
    pb_u32(&b, 16384);
    pb_u32(&b, 4096);
    pb_u32(&b, 65536);
    pb_c(&b, "HOST", 256);
    pb_c(&b, "CORP", 134);
    CHECK(b.n == 800);
    if (ps == 8) pb_u64(&b, 1);
    else pb_u32(&b, 1);
    CHECK(b.n == (size_t)(800 + ps));
    EXPECT(one(d, &w, 0, 0x0B, 10, 2, ps, &b, &nm),
           "\"EventData\":{\"MHz\":3000,\"NumberOfProcessors\":8,\"MemSize\":16384,\"PageSize\":4096,\"AllocationGranularity\":65536,"
           "\"ComputerName\":\"HOST\",\"DomainName\":\"CORP\",\"HyperThreadingFlag\":\"0x1\"}");
    CHECK(!strcmp(nm, "SystemConfig/CPU"));
  }
  /* Services v2 */
  b.n = 0;
  pb_u32(&b, 1044);
  pb_u32(&b, 4);
  pb_u32(&b, 7);
  pb_w(&b, "Dnscache");
  pb_w(&b, "DNS Client");
  pb_w(&b, "svchost.exe");
  EXPECT(one(d, &w, 0, 0x0B, 15, 2, 8, &b, &nm),
         "\"EventData\":{\"ProcessId\":1044,\"ServiceState\":4,\"SubProcessTag\":7,\"ServiceName\":\"Dnscache\","
         "\"DisplayName\":\"DNS Client\",\"ProcessName\":\"svchost.exe\"}");
  CHECK(!strcmp(nm, "SystemConfig/Services"));
  *wp = w;
}

static void by_version(void) {
  struct etw_decoder *d = etw_decoder_new(NULL);
  struct etw_jw w;
  etw_jw_init(&w, 0);
  v_irq_pnp(d, &w);
  v_old(d, &w);
  v_new_fixed(d, &w);
  v_new_var(d, &w);
  v_image(d, &w);
  v_more(d, &w);
  etw_jw_free(&w);
  etw_decoder_free(d);
}

int main(void) {
  handmade();
  by_version();
  size_t len = 0;
  unsigned char *img =
      tu_corpus_file("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl", &len);
  CHECK(img != NULL);
  if (!img) T_DONE();
  struct etw_etl_reader *r;
  struct etw_decoder *d;
  struct etw_status st;
  if (tu_open(img, len, "net.4.5.2.x64.etl", NULL, &r, &d)) {
    CHECK(!"reader");
    T_DONE();
  }
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_evref ref;
  const struct etw_rec *rec;
  size_t got[K_N] = {0}, bad = 0, filt = 0, loadgrp = 0, svcgrp = 0;
  int seen_serial = 0, seen_ndiswan = 0, first_svc = 1;
  int k;
  struct sb *e = malloc(sizeof *e);
  while ((k = etw_etl_reader_next_ref(r, &rec, &st)) == 1) {
    if (rec->kind != ETW_REC_SYSTEM && rec->kind != ETW_REC_PERFINFO) continue;
    w.len = 0;
    int dec = etw_decoder_write(d, rec, &w, &ref);
    if (strcmp(ref.provider, "Windows Kernel") || strncmp(ref.name, "SystemConfig/", 13)) continue;
    const char *j = etw_jw_cstr(&w);
    const unsigned char *p = rec->user_data;
    size_t n = rec->user_len, pos = 0;
    int kind = -1, ok = 1;
    e->n = 0;
    e->bad = 0;
    put(e, "\"EventData\":{");
    if (!strcmp(ref.name, "SystemConfig/CPU") && rec->desc.version == 3) {
      kind = K_CPU;
      ok = n == 828 && rec->ptr_size == 8;
      if (ok) {
        put(e, "\"MHz\":%u,\"NumberOfProcessors\":%u,\"MemSize\":%u,\"PageSize\":%u,\"AllocationGranularity\":%u,", rd32(p),
            rd32(p + 4), rd32(p + 8), rd32(p + 12), rd32(p + 16));
        put(e, "\"ComputerName\":");
        fstr(e, p + 20, 256);
        put(e, ",\"DomainName\":");
        fstr(e, p + 532, 134);
        put(e, ",\"HyperThreadingFlag\":\"0x%llx\",\"HighestUserAddress\":\"0x%llx\"", (unsigned long long)rd64(p + 800),
            (unsigned long long)rd64(p + 808));
        put(e, ",\"ProcessorArchitecture\":%u,\"ProcessorLevel\":%u,\"ProcessorRevision\":%u,\"NxEnabled\":%u,\"PaeEnabled\":%u",
            rd16(p + 816), rd16(p + 818), rd16(p + 820), p[822], p[823]);
        put(e, ",\"MemorySpeed\":%u}", rd32(p + 824));
        /* PerfView's baseline: MHz=3,592; NumberOfProcessors=8; MemSize=4,096; PageSize=4,096;
         * AllocationGranularity=65,536; ComputerName=BRIANROB-W8; DomainName=;
         * HyperThreadingFlag=0x00000000. The rest: x64 (architecture 9 = AMD64) and the x64
         * user address limit of Windows 8. */
        CHECK(strstr(e->b, "\"MHz\":3592,\"NumberOfProcessors\":8,\"MemSize\":4096,\"PageSize\":4096,"
                           "\"AllocationGranularity\":65536,\"ComputerName\":\"BRIANROB-W8\",\"DomainName\":\"\","
                           "\"HyperThreadingFlag\":\"0x0\",\"HighestUserAddress\":\"0x7fffffeffff\",\"ProcessorArchitecture\":9,"));
      }
    } else if (!strcmp(ref.name, "SystemConfig/Services") && rec->desc.version == 3) {
      kind = K_SVC;
      ok = n >= 12;
      if (ok) {
        put(e, "\"ProcessId\":%u,\"ServiceState\":%u,\"SubProcessTag\":%u", rd32(p), rd32(p + 4), rd32(p + 8));
        static const char *const NM[5] = {"ServiceName", "DisplayName", "ProcessName", "LoadOrderGroup", "SvchostGroup"};
        pos = 12;
        for (int i = 0; i < 5 && ok; i++) {
          size_t at = pos;
          put(e, ",\"%s\":", NM[i]);
          ok = zstr(e, p, n, &pos);
          if (ok && i == 3 && pos - at > 2) loadgrp++;
          if (ok && i == 4 && pos - at > 2) svcgrp++;
        }
        put(e, "}");
        ok = ok && pos == n;
        if (first_svc) /* baseline: ServiceName=AeLookupSvc; ProcessID=0; ServiceState=1; SubProcessTag=1 */
          CHECK(ok && !strcmp(e->b, "\"EventData\":{\"ProcessId\":0,\"ServiceState\":1,\"SubProcessTag\":1,\"ServiceName\":"
                                    "\"AeLookupSvc\",\"DisplayName\":\"Application Experience\",\"ProcessName\":\"\","
                                    "\"LoadOrderGroup\":\"\",\"SvchostGroup\":\"netsvcs\"}"));
        first_svc = 0;
      }
    } else if (!strcmp(ref.name, "SystemConfig/PnP") && rec->desc.version == 4) {
      kind = K_PNP;
      ok = n >= 24;
      if (ok) {
        const unsigned char *g = p;
        uint32_t up = rd32(p + 16), lo = rd32(p + 20);
        put(e, "\"ClassGuid\":\"{%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x}\"", rd32(g), rd16(g + 4), rd16(g + 6), g[8],
            g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
        put(e, ",\"UpperFilterCount\":%u,\"LowerFilterCount\":%u", up, lo);
        static const char *const NM[5] = {"DeviceID", "DeviceDescription", "FriendlyName", "PdoName", "ServiceName"};
        pos = 24;
        for (int i = 0; i < 5 && ok; i++) {
          put(e, ",\"%s\":", NM[i]);
          ok = zstr(e, p, n, &pos);
        }
        if (ok) {
          filt += up || lo;
          put(e, ",\"UpperFilters\":[");
          for (uint32_t i = 0; i < up && ok; i++) {
            if (i) put(e, ",");
            ok = zstr(e, p, n, &pos);
          }
          put(e, "],\"LowerFilters\":[");
          for (uint32_t i = 0; i < lo && ok; i++) {
            if (i) put(e, ",");
            ok = zstr(e, p, n, &pos);
          }
          put(e, "]");
        }
        put(e, "}");
        ok = ok && pos == n;
        /* device setup classes: Ports {4d36e978-…} with serenum as upper filter; Net {4d36e972-…} */
        if (strstr(e->b, "\"ServiceName\":\"Serial\"")) {
          seen_serial++;
          CHECK(strstr(e->b, "\"ClassGuid\":\"{4d36e978-e325-11ce-bfc1-08002be10318}\",\"UpperFilterCount\":1,"
                             "\"LowerFilterCount\":0,"));
          CHECK(strstr(e->b, "\"UpperFilters\":[\"serenum\"],\"LowerFilters\":[]}"));
        }
        if (strstr(e->b, "\"ServiceName\":\"NdisWan\"")) {
          seen_ndiswan++;
          CHECK(strstr(e->b, "\"ClassGuid\":\"{4d36e972-e325-11ce-bfc1-08002be10318}\""));
        }
      }
    } else if (!strcmp(ref.name, "SystemConfig/Opcode(18)") && rec->desc.version == 2) {
      /* optical media: 4 x u16, 5 x u64, 3 x u32, 2 x u16, 2 UTF-16 + 2 ANSI strings */
      kind = K_OPT;
      ok = n >= 64;
      if (ok) {
        put(e, "\"DiskNumber\":%u,\"BusType\":%u,\"DeviceType\":%u,\"MediaType\":%u", rd16(p), rd16(p + 2), rd16(p + 4),
            rd16(p + 6));
        static const char *const Q[5] = {"StartingOffset", "Size", "NumberOfFreeBlocks", "TotalNumberOfBlocks",
                                         "NextWritableAddress"};
        for (int i = 0; i < 5; i++) put(e, ",\"%s\":%llu", Q[i], (unsigned long long)rd64(p + 8 + 8 * i));
        put(e, ",\"NumberOfSessions\":%u,\"NumberOfTracks\":%u,\"BytesPerSector\":%u,\"DiscStatus\":%u,\"LastSessionStatus\":%u",
            rd32(p + 48), rd32(p + 52), rd32(p + 56), rd16(p + 60), rd16(p + 62));
        pos = 64;
        put(e, ",\"DriveLetter\":");
        ok = zstr(e, p, n, &pos);
        put(e, ",\"FileSystem\":");
        ok = ok && zstr(e, p, n, &pos);
        put(e, ",\"ProductId\":");
        ok = ok && astr(e, p, n, &pos);
        put(e, ",\"VendorId\":");
        ok = ok && astr(e, p, n, &pos);
        put(e, "}");
        ok = ok && pos == n;
        /* the Hyper-V virtual DVD drive: BusType 2 (STORAGE_BUS_TYPE BusTypeAtapi), DeviceType 5
         * (SCSI peripheral type CD/DVD), 2048-byte sectors, drive D: as in the trace's
         * SysConfig/VolumeMapping (\Device\CdRom0 -> D:) */
        CHECK(strstr(e->b, "\"BytesPerSector\":2048,") && strstr(e->b, "\"DriveLetter\":\"D:\",\"FileSystem\":\"UDF\""));
      }
    } else if (!strcmp(ref.name, "SystemConfig/Opcode(28)") && rec->desc.version == 2) {
      kind = K_DPI; /* machine and user DPI (u32) */
      ok = n == 8;
      if (ok) put(e, "\"MachineDPI\":%u,\"UserDPI\":%u}", rd32(p), rd32(p + 4));
      CHECK(ok && !strcmp(e->b, "\"EventData\":{\"MachineDPI\":96,\"UserDPI\":96}"));
    } else {
      continue;
    }
    got[kind]++;
    /* the event is `…},"EventData":{…}}`: EventData is its last member */
    int match = ok && !e->bad && dec == 1 && w.len > e->n + 1 && j[w.len - 1] == '}' &&
                ends_with(j, w.len - 1, e->b, e->n) && j[w.len - 2 - e->n] == ',' && !strstr(j, "\"Unparsed\"");
    if (!match && bad++ < 5)
      fprintf(stderr, "%s v%u (len %zu, layout end %zu, ok %d):\n  want %.*s\n  got  ...%.600s\n", ref.name, rec->desc.version, n,
              pos, ok, (int)e->n, e->b, w.len > 600 ? j + w.len - 600 : j);
    CHECK(match);
  }
  CHECK_EQ(k, 0);
  CHECK_EQ(bad, 0);
  /* COUNT lines of PerfView's baseline: CPU 1, Services 157, PnP 78 */
  CHECK_EQ(got[K_CPU], 1);
  CHECK_EQ(got[K_SVC], 157);
  CHECK_EQ(got[K_PNP], 78);
  CHECK_EQ(got[K_OPT], 1);
  CHECK_EQ(got[K_DPI], 1);
  CHECK_EQ(filt, 5);
  CHECK_EQ(seen_serial, 2);
  CHECK_EQ(seen_ndiswan, 3);
  CHECK(loadgrp > 0 && svcgrp > 0);
  printf("SystemConfig: CPU %zu, Services %zu (%zu with a load order group, %zu with a svchost group), PnP %zu (%zu with "
         "filters), optical media %zu, DPI %zu: every field as the record's bytes say, no leftover\n",
         got[K_CPU], got[K_SVC], loadgrp, svcgrp, got[K_PNP], filt, got[K_OPT], got[K_DPI]);
  free(e);
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(r);
  free(img);
  T_DONE();
}
