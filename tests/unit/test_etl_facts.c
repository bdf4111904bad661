/* test_etl_facts.c — the published facts about the other corpus files:
 *  - SelfDescribingSingleEvent.etl: MySource/TestEvent, payload a = {b: "Hello", c: "World!"}
 *  - smallEtlFile.etl (32-bit): exactly one event, CLR rundown ModuleDCStop (154), ModuleILPath
 *    ending in Microsoft.VisualStudio.Services.Client.dll
 *  - AMSITrace (19 AmsiTrace/AmsiScript), lxcore_kernel (2 BreakPoint), waasmedic (17 events of
 *    the provider 30d25124-a468-505c-de82-8411646eb8b5), powershell.etl (112 manifest events via
 *    the PowerShellCore manifest), CldFlt0 (13 WPP records), ShutdownPerfDiagLogger (kernel
 *    Process v4 with SIDs), every record of every file delivered, none dropped.
 */
#include "t.h"
#include "test_etl_util.h"

#define PV "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/"
#define AB "airbus-cert+etl-parser/tests/example/"
#define S4 "jtmoon79+super-speedy-syslog-searcher/logs/programs/"

static int load(const char *rel, int with_manifests, struct tu_trace *t) {
  size_t n;
  unsigned char *b = tu_corpus_file(rel, &n);
  if (!b) return -1;
  int rc = tu_decode(b, n, rel, with_manifests ? tu_manifests() : NULL, t);
  free(b); /* events hold copies of their JSON */
  return rc;
}

static size_t count(const struct tu_trace *t, const char *prov, const char *name, size_t *decoded) {
  size_t c = 0;
  if (decoded) *decoded = 0;
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->ev[i].provider, prov) && (!name || (t->ev[i].name && !strcmp(t->ev[i].name, name)))) {
      c++;
      if (decoded && t->ev[i].decoded) (*decoded)++;
    }
  return c;
}

int main(void) {
  struct tu_trace t;
  size_t dec;

  CHECK_EQ(load(PV "inputs/Regression/SelfDescribingSingleEvent.etl", 0, &t), 0);
  CHECK_EQ(count(&t, "MySource", "TestEvent", &dec), 1);
  CHECK_EQ(dec, 1);
  for (size_t i = 0; i < t.n; i++)
    if (!strcmp(t.ev[i].provider, "MySource"))
      CHECK(strstr(t.ev[i].json, "\"EventData\":{\"a\":{\"b\":\"Hello\",\"c\":\"World!\"}}}") != NULL);
  tu_free(&t);

  CHECK_EQ(load(PV "smallEtlFile.etl", 1, &t), 0);
  CHECK_EQ(t.info.pointer_size, 4);
  CHECK_EQ(t.n, 2); /* the logfile header + one event */
  if (t.n == 2) {
    CHECK_STR(t.ev[1].provider, "Microsoft-Windows-DotNETRuntimeRundown");
    CHECK_STR(t.ev[1].name, "Loader/ModuleDCStop");
    CHECK(t.ev[1].decoded);
    CHECK(strstr(t.ev[1].json, "\"EventID\":154,") != NULL);
    char path[1024];
    CHECK(tu_str(strstr(t.ev[1].json, "\"EventData\""), "ModuleILPath", path, sizeof path) == 0);
    const char *want = "Microsoft.VisualStudio.Services.Client.dll";
    size_t pl = strlen(path), wl = strlen(want);
    CHECK(pl >= wl && !strcmp(path + pl - wl, want));
  }
  tu_free(&t);

  CHECK_EQ(load(AB "AMSITrace.etl", 0, &t), 0);
  CHECK_EQ(count(&t, "Microsoft-Antimalware-Scan-Interface", "AmsiScript", &dec) + count(&t, "AmsiTrace", "AmsiScript", NULL), 19);
  tu_free(&t);

  CHECK_EQ(load(AB "lxcore_kernel.etl", 0, &t), 0);
  CHECK_EQ(count(&t, "Microsoft.Windows.Subsystem.LxCore", "BreakPoint", &dec), 2);
  CHECK_EQ(dec, 2);
  tu_free(&t);

  CHECK_EQ(load(S4 "Event_Trace_Log/waasmedic.20251005_113019_195.etl", 0, &t), 0);
  CHECK_EQ(t.n, 21);
  size_t waas = 0;
  for (size_t i = 0; i < t.n; i++)
    if (strstr(t.ev[i].json, "\"Guid\":\"{30d25124-a468-505c-de82-8411646eb8b5}\"")) {
      waas++;
      CHECK(t.ev[i].decoded);
    }
  CHECK_EQ(waas, 17);
  CHECK(count(&t, "Windows Kernel", "EventTrace/BuildInfo", NULL) == 1);
  CHECK(count(&t, "Windows Kernel", "EventTrace/DbgIdRSDS", NULL) == 1);
  tu_free(&t);

  CHECK_EQ(load("microsoft+krabsetw/examples/NativeExamples/powershell.etl", 1, &t), 0);
  CHECK_EQ(count(&t, "Microsoft-Windows-PowerShell", NULL, &dec), 112);
  CHECK_EQ(dec, 112);
  size_t e7937 = 0;
  for (size_t i = 0; i < t.n; i++)
    if (strstr(t.ev[i].json, "\"EventID\":7937,")) e7937++;
  CHECK_EQ(e7937, 101);
  tu_free(&t);

  CHECK_EQ(load(S4 "OneDrive/Local/Microsoft/OneDrive/logs/Personal/CldFlt0-2025-12-21-121418.etlgz", 0, &t), 0);
  size_t wpp = 0;
  for (size_t i = 0; i < t.n; i++)
    if (t.ev[i].kind == ETW_REC_WPP) {
      wpp++;
      CHECK(strstr(t.ev[i].json, "\"MessageNumber\":") != NULL);
      CHECK(strstr(t.ev[i].json, "\"Arguments\":\"") != NULL);
      CHECK(t.ev[i].pid != 0xFFFFFFFFu && t.ev[i].tid != 0xFFFFFFFFu); /* SYSTEMINFO */
    }
  CHECK_EQ(wpp, 13);
  tu_free(&t);

  CHECK_EQ(load(AB "ShutdownPerfDiagLogger.etl", 0, &t), 0);
  CHECK_EQ(t.n, 17078);
  size_t sys_sid = 0, proc = 0, und = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!t.ev[i].decoded) und++;
    if (!strncmp(t.ev[i].name ? t.ev[i].name : "", "Process/", 8)) {
      proc++;
      if (strstr(t.ev[i].json, "\"UserSID\":\"S-1-5-18\"")) sys_sid++;
    }
  }
  CHECK(proc > 100);
  CHECK(sys_sid > 10);
  CHECK(und * 100 < t.n); /* < 1 % without a layout (delivered raw) */
  tu_free(&t);
  T_DONE();
}
