/* test_etl_perfview.c — gcevents.etl and net.4.5.2.x64.etl against PerfView's baselines.
 *
 * COUNT lines: every one must be matched exactly by the number of events we decode under the
 * same "Provider/EventName", with the documented naming aliases and the one documented count
 * difference below; every event name we produce that PerfView does not list must be in the
 * documented list of events PerfView's GeneralParsing test does not count (docs/etl.md).
 * EVENT lines: the k-th printed event of a name is compared with our k-th event of that name:
 * PID, TID, processor, payload length, and every printed field that is payload (not PerfView's
 * derived state), after PerfView's formatting rules (truncation at 20 chars, separators, dates).
 */
#include "t.h"
#include "test_etl_util.h"

#define REL "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/"

/* PerfView name → our name (PerfView's own C# parsers rename these). */
static const char *const ALIASES[][2] = {
    {"MSNT_SystemTrace/Image/KernelBase", "Windows Kernel/Image/KernelBase"},
    {"MSNT_SystemTrace/SystemConfig/Platform", "Windows Kernel/SystemConfig/Platform"},
    {"Microsoft-Windows-DotNETRuntime/GC/GenerationRange", "Microsoft-Windows-DotNETRuntime/GC/GCGenerationRange"},
    {"Microsoft-Windows-DotNETRuntime/GC/BulkMovedObjectRanges", "Microsoft-Windows-DotNETRuntime/GC/GCBulkMovedObjectRanges"},
    {"Microsoft-Windows-DotNETRuntime/GC/BulkSurvivingObjectRanges", "Microsoft-Windows-DotNETRuntime/GC/GCBulkSurvivingObjectRanges"},
    {"Microsoft-Windows-DotNETRuntime/GarbageCollection/IncreaseMemoryPressure", "Microsoft-Windows-DotNETRuntime/GC/IncreaseMemoryPressure"},
    {"Microsoft-Windows-DotNETRuntime/GC/MarkWithType", "Microsoft-Windows-DotNETRuntime/GC/Mark"},
};

/* Events PerfView's GeneralParsing baseline does not count (stacks are attached to other
 * events; rundown/IL-map/file-name bookkeeping is consumed by its state trackers). */
static const char *const NOT_COUNTED[] = {
    "Windows Kernel/EventTrace/PartitionInfoExtension",
    "Windows Kernel/StackWalk/",
    "Microsoft-Windows-DotNETRuntime/ClrStack/Walk",
    "Microsoft-Windows-DotNETRuntime/Method/MethodILToNativeMap",
    "Microsoft-Windows-DotNETRuntimeRundown/Method/MethodDCEndILToNativeMap",
    "Microsoft-Windows-DotNETRuntimeRundown/Method/DCStopVerbose",
    "Windows Kernel/Thread/DCStart",
    "Windows Kernel/Thread/DCStop",
    "Windows Kernel/FileIO/",
    "Windows Kernel/SystemConfig/Opcode(",
    "Windows Kernel/Image/Opcode(",
};

/* Payload fields PerfView prints from its own state or formats differently (docs/etl.md). */
static const char *const DERIVED[] = {"PName", "FileName", "ElapsedTimeMSec", "DiskServiceTimeMSec",
                                      "Priority", "ParentThreadID", "ParentProcessID", "PayloadLength",
                                      "BuildTime", "ProcessorNumber", "ExecutingDPC", "ExecutingISR",
                                      "Rank", "InstructionPointer", "UtcOffsetMinutes"};

/* (event name prefix, field) pairs where PerfView renders with its own C# enums or splits a
 * field; documented in docs/etl.md. */
static const char *const KNOWN_DIFF[][2] = {
    {"Windows Kernel/", "Flags"},
    {"Windows Kernel/DiskIO/", "IrpFlags"},
    {"Microsoft-Windows-Kernel-File/Create", "CreateOptions"},
    {"Windows Kernel/SystemConfig/Services", "ProcessName"}, /* PerfView fills/strips names */
    {"Windows Kernel/SystemConfig/NIC", "PhysicalAddr"},      /* PerfView: signed decimal, cut */
    {"KernelTraceControl/ImageID", "ProcessID"},              /* payload says 4, PerfView prints 0 */
};

/* PerfView renders enums/flags with its own C# types, we render the manifest's (or the
 * trace's) value/bit maps: a word list on one side and a number or other words on the other
 * is a rendering difference, not a decoding one (docs/etl.md). */
static int is_words(const char *s) {
  int alpha = 0;
  for (; *s; s++) {
    if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_') alpha = 1;
    else if (!(*s >= '0' && *s <= '9') && !strchr(" ,|.", *s)) return 0;
  }
  return alpha;
}

static int enum_rendering(const char *want, const char *raw) {
  char ours[1024];
  pv_render(raw, ours, sizeof ours);
  return is_words(want) || (raw[0] == '"' && is_words(ours));
}

static int known_diff(const char *name, const char *key) {
  for (size_t i = 0; i < sizeof KNOWN_DIFF / sizeof KNOWN_DIFF[0]; i++)
    if (!strncmp(name, KNOWN_DIFF[i][0], strlen(KNOWN_DIFF[i][0])) && !strcmp(key, KNOWN_DIFF[i][1])) return 1;
  return 0;
}

/* PerfView's field names → Windows' (MOF/manifest) names that we print. */
static const char *const FIELD_ALIASES[][2] = {
    {"ProcessID", "ProcessId"}, {"ParentID", "ParentId"}, {"SessionID", "SessionId"},
    {"PageDirectoryBase", "DirectoryTableBase"}, {"ApplicationID", "ApplicationId"},
    {"ImageChecksum", "ImageCheckSum"}, {"StartAddr", "Affinity"}, {"FileKey", "FileObject"},
    {"MemoryCount", "PageFaultCount"}, {"IrpPtr", "Irp"}, {"FileAttributes", "CreateAttributes"},
};

static int field_raw(const char *data, const char *key, char *raw, size_t cap) {
  if (!tu_raw(data, key, raw, cap)) return 0;
  for (size_t i = 0; i < sizeof FIELD_ALIASES / sizeof FIELD_ALIASES[0]; i++)
    if (!strcmp(key, FIELD_ALIASES[i][0]) && !tu_raw(data, FIELD_ALIASES[i][1], raw, cap)) return 0;
  return -1;
}

struct name_count {
  const char *name; /* "Provider/EventName" (malloc) */
  size_t n, seen;
};

static struct name_count *find(struct name_count *t, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(t[i].name, name)) return &t[i];
  return NULL;
}

static const char *alias(const char *pv) {
  for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
    if (!strcmp(ALIASES[i][0], pv)) return ALIASES[i][1];
  return pv;
}

static int is_derived(const char *k) {
  for (size_t i = 0; i < sizeof DERIVED / sizeof DERIVED[0]; i++)
    if (!strcmp(DERIVED[i], k)) return 1;
  return 0;
}

/* PerfView's TraceLog (TraceLog.cs, the PerfInfoSample handler that sets removeFromStream)
 * removes from its event stream every sample of the idle thread (ThreadId 0) that is not
 * "NonProcess"; KernelTraceEventParser.cs defines NonProcess as ExecutingDPC || ExecutingISR,
 * i.e. bits 0-1 of the flags byte after Count (our MOF field "Reserved": low byte = flags
 * [DPC:1, ISR:1, reserved:1, Priority:5], high byte = Rank). GeneralParsing counts TraceLog's
 * stream, so its COUNT is the samples kept by that rule. We deliver every sample record. */
static unsigned sample_bits(const char *json, long long *tid) {
  char raw[64];
  const char *data = strstr(json, "\"EventData\":");
  *tid = -1;
  if (!data || tu_raw(data, "ThreadId", raw, sizeof raw)) return 0;
  *tid = atoll(raw);
  if (tu_raw(data, "Reserved", raw, sizeof raw)) return 0;
  return (unsigned)atoll(raw) & 0xFFFFu;
}

static int tracelog_keeps_sample(const char *json) {
  long long tid;
  unsigned bits = sample_bits(json, &tid);
  return tid != 0 || (bits & 3u) != 0;
}

/* The sample fields PerfView prints from the flags word; -1 when @key is not one of them. */
static int sample_field(const char *json, const char *key, char *out, size_t cap) {
  long long tid;
  unsigned bits = sample_bits(json, &tid);
  if (!strcmp(key, "Priority")) snprintf(out, cap, "%u", (bits >> 3) & 0x1Fu);
  else if (!strcmp(key, "ExecutingDPC")) snprintf(out, cap, "%s", (bits & 1u) ? "True" : "False");
  else if (!strcmp(key, "ExecutingISR")) snprintf(out, cap, "%s", (bits & 2u) ? "True" : "False");
  else if (!strcmp(key, "Rank")) snprintf(out, cap, "%u", bits >> 8);
  else return -1;
  return 0;
}

static void run(const char *zip, const char *baseline, size_t *fields_ok, size_t *fields_bad) {
  size_t n, bl;
  unsigned char *b = tu_corpus_file(zip, &n);
  char *bp = tu_corpus(baseline);
  char *base = (char *)tu_file(bp, &bl);
  free(bp);
  CHECK(b && base);
  if (!b || !base) {
    free(b);
    free(base);
    return;
  }
  base = realloc(base, bl + 1);
  base[bl] = 0;
  struct tu_trace t;
  CHECK_EQ(tu_decode(b, n, zip, tu_manifests(), &t), 0);
  CHECK_EQ(t.rc, 0);
  /* our counts by name */
  struct name_count *nc = calloc(t.n + 1, sizeof *nc);
  size_t nn = 0;
  char full[400];
  char **names = calloc(t.n + 1, sizeof *names);
  for (size_t i = 0; i < t.n; i++) {
    snprintf(full, sizeof full, "%s/%s", t.ev[i].provider, t.ev[i].name);
    struct name_count *c = find(nc, nn, full);
    if (!c) {
      c = &nc[nn++];
      c->name = strdup(full);
    }
    c->n++;
    names[i] = (char *)c->name;
  }
  /* COUNT lines */
  size_t counts = 0;
  char *save = NULL;
  char *copy = strdup(base);
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "COUNT ", 6)) continue;
    char *colon = strrchr(line, ':');
    if (!colon) continue;
    *colon = 0;
    const char *want_name = alias(line + 6);
    size_t want = (size_t)atoll(colon + 1);
    struct name_count *c = find(nc, nn, want_name);
    counts++;
    if (c) c->seen = 1;
    if (!strcmp(want_name, "Windows Kernel/PerfInfo/Sample") && c) {
      /* TraceLog's idle-sample rule (tracelog_keeps_sample); we deliver every record. */
      size_t kept = 0;
      for (size_t i = 0; i < t.n; i++)
        if (names[i] == c->name && tracelog_keeps_sample(t.ev[i].json)) kept++;
      if (kept != want) fprintf(stderr, "COUNT %s: want %zu, TraceLog's rule keeps %zu of %zu\n", want_name, want, kept, c->n);
      CHECK_EQ(kept, want);
      continue;
    }
    if (!c || c->n != want) {
      fprintf(stderr, "COUNT %s: want %zu, got %zu\n", want_name, want, c ? c->n : 0);
      CHECK(0);
    }
  }
  free(copy);
  CHECK(counts > 0);
  for (size_t i = 0; i < nn; i++) {
    if (nc[i].seen) continue;
    int ok = 0;
    for (size_t k = 0; k < sizeof NOT_COUNTED / sizeof NOT_COUNTED[0]; k++)
      if (!strncmp(nc[i].name, NOT_COUNTED[k], strlen(NOT_COUNTED[k]))) ok = 1;
    if (!ok) {
      fprintf(stderr, "unexpected event name %s (%zu)\n", nc[i].name, nc[i].n);
      CHECK(0);
    }
  }
  /* EVENT lines */
  for (char *line = strtok_r(base, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    struct pv_line l;
    if (pv_parse(line, &l)) continue;
    const char *want_name = alias(l.name);
    struct name_count *c = find(nc, nn, want_name);
    if (!c) {
      fprintf(stderr, "EVENT %s: no such event\n", want_name);
      CHECK(0);
      continue;
    }
    /* k-th event of this name (for samples: of those TraceLog keeps) */
    int samples = !strcmp(want_name, "Windows Kernel/PerfInfo/Sample");
    size_t k = c->seen++ - 1, j;
    for (j = 0; j < t.n; j++) {
      if (names[j] != c->name) continue;
      if (samples && !tracelog_keeps_sample(t.ev[j].json)) continue;
      if (k-- == 0) break;
    }
    if (j == t.n) continue;
    const struct tu_ev *e = &t.ev[j];
    const char *data = strstr(e->json, "\"EventData\":");
    for (int q = 0; q < l.nkv; q++) {
      const char *key = l.key[q], *want = l.val[q];
      char raw[2048];
      if (samples && !sample_field(e->json, key, raw, sizeof raw)) {
        if (strcmp(raw, want)) {
          fprintf(stderr, "%s #%zu: %s want %s got %s\n", want_name, c->seen - 1, key, want, raw);
          CHECK(0);
        } else {
          (*fields_ok)++;
        }
        continue;
      }
      if (is_derived(key)) continue;
      if (!strcmp(key, "ProceNum")) {
        if (e->cpu != atoll(want)) {
          fprintf(stderr, "%s #%zu: processor %u, want %s\n", want_name, c->seen - 1, e->cpu, want);
          CHECK(0);
        }
        continue;
      }
      if (!strcmp(key, "DataLen")) {
        CHECK_EQ(e->user_len, atoll(want));
        continue;
      }
      if (!strcmp(key, "PID") || !strcmp(key, "TID")) {
        /* PerfView re-attributes Process/Thread/Image and network events to the payload's
         * process/thread; compare the header value only where it did not. */
        long long v = atoll(want), mine = !strcmp(key, "PID") ? (e->pid == 0xFFFFFFFFu ? -1 : (long long)e->pid)
                                                              : (e->tid == 0xFFFFFFFFu ? -1 : (long long)e->tid);
        if (v != mine && !strstr(want_name, "Windows Kernel/") && !strstr(want_name, "KernelTraceControl/")) {
          fprintf(stderr, "%s %s: want %s got %lld\n", want_name, key, want, mine);
          CHECK(0);
        }
        continue;
      }
      if (!data || field_raw(data, key, raw, sizeof raw)) {
        (*fields_bad)++;
        if (getenv("ETL_TEST_VERBOSE")) fprintf(stderr, "%s: field %s missing\n", want_name, key);
        continue;
      }
      if (pv_match(want, raw)) {
        (*fields_ok)++;
      } else if (known_diff(want_name, key) || enum_rendering(want, raw)) {
        (*fields_bad)++;
        if (getenv("ETL_TEST_VERBOSE")) fprintf(stderr, "%s: %s want %s got %s (documented)\n", want_name, key, want, raw);
      } else {
        fprintf(stderr, "%s #%zu: %s want %s got %s\n", want_name, c->seen - 1, key, want, raw);
        CHECK(0);
      }
    }
  }
  for (size_t i = 0; i < nn; i++) free((char *)nc[i].name);
  free(nc);
  free(names);
  tu_free(&t);
  free(b);
  free(base);
}

int main(void) {
  size_t ok = 0, bad = 0;
  run(REL "gcevents.etl.zip!*.etl", REL "gcevents.baseline.txt", &ok, &bad);
  size_t ok_gc = ok, bad_gc = bad;
  fprintf(stderr, "gcevents: %zu field values match, %zu differ or are absent\n", ok, bad);
  run(REL "net.4.5.2.x64.etl.zip!*.etl", REL "net.4.5.2.x64.baseline.txt", &ok, &bad);
  fprintf(stderr, "net.4.5.2.x64: %zu field values match, %zu differ or are absent\n", ok - ok_gc, bad - bad_gc);
  CHECK(ok > 0);
  T_DONE();
}
