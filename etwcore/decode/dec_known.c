/* dec_known.c — well-known ETW provider GUIDs and their registered names, so events of these
 * providers carry a name even without a manifest (facts: GUID → name, as `logman query
 * providers` lists them; sources: the manifests of tests/data-sources.txt and public lists).
 * The lowest source of a provider's name: a manifest, an EventInfo blob or an EventSource
 * manifest in the trace, or TraceLogging metadata names it first (docs/etl.md). Read-only data,
 * no state: any thread. */
#include <stdlib.h>
#include <string.h>

#include "decode.h"

struct known {
  const char *guid; /* "{...}" lower case, as etw_format_guid writes it; the table is sorted */
  const char *name;
};

static const struct known KNOWN[] = {
    {"{0063715b-eeda-4007-9429-ad526f62696e}", "Microsoft-Windows-Services"},
    {"{11cd958a-c507-4ef3-b3f2-5fd9dfbd2c78}", "Microsoft-Windows-Windows Defender"},
    {"{1418ef04-b0b4-4623-bf7e-d74ab47bbdaa}", "Microsoft-Windows-WMI-Activity"},
    {"{1c95126e-7eea-49a9-a3fe-a378b03ddb4d}", "Microsoft-Windows-DNS-Client"},
    {"{222962ab-6180-4b88-a825-346b75f2a24a}", "HeapTraceProvider"},
    {"{22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716}", "Microsoft-Windows-Kernel-Process"},
    {"{2a576b87-09a7-520e-c21a-4942f0271d67}", "Microsoft-Antimalware-Scan-Interface"},
    {"{2e5dba47-a3d2-4d16-8ee0-6671ffdcd7b5}", "System.Threading.Tasks.TplEventSource"},
    {"{2f07e2ee-15db-40f1-90ef-9d7ba282188a}", "Microsoft-Windows-TCPIP"},
    {"{315a8872-923e-4ea2-9889-33cd4754bf64}", "Microsoft-Windows-Immersive-Shell"},
    {"{331c3b3a-2005-44c2-ac5e-77220c37d6b4}", "Microsoft-Windows-Kernel-Power"},
    {"{3ac66736-cc59-4cff-8115-8df50e39816b}", "CritSecTraceProvider"},
    {"{43d1a55c-76d6-4f7e-995c-64c711e5cafe}", "Microsoft-Windows-WinINet"},
    {"{4ee76bd8-3cf4-44a0-a0ac-3937643e37a3}", "Microsoft-Windows-CodeIntegrity"},
    {"{5322d61a-9efa-4bc3-a3f9-14be95c144f8}", "Microsoft-Windows-Kernel-Prefetch"},
    {"{54849625-5478-4994-a5ba-3e3b0328c30d}", "Microsoft-Windows-Security-Auditing"},
    {"{5770385f-c22a-43e0-bf4c-06f5698ffbd9}", "Microsoft-Windows-Sysmon"},
    {"{6ad52b32-d609-4be9-ae07-ce8dae937e39}", "Microsoft-Windows-RPC"},
    {"{70eb4f03-c1de-4f73-a051-33d13d5413bd}", "Microsoft-Windows-Kernel-Registry"},
    {"{763fd754-7086-4dfe-95eb-c01a46faf4ca}", "Microsoft-Windows-DotNETRuntimePrivate"},
    {"{7dd42a49-5329-4832-8dfd-43d979153a88}", "Microsoft-Windows-Kernel-Network"},
    {"{802ec45a-1e99-4b83-9920-87c98277ba9d}", "Microsoft-Windows-DxgKrnl"},
    {"{8c416c79-d49b-4f01-a467-e56d3aa8234c}", "Microsoft-Windows-Win32k"},
    {"{988c59c5-0a1c-45b6-a555-0c62276e327d}", "Microsoft-Windows-SMBClient"},
    {"{9c205a39-1250-487d-abd7-e831c6290539}", "Microsoft-Windows-Kernel-PnP"},
    {"{a0c1853b-5c40-4b15-8766-3cf1c58f985a}", "Microsoft-Windows-PowerShell"},
    {"{a669021c-c450-4609-a035-5af59af4df18}", "Microsoft-Windows-DotNETRuntimeRundown"},
    {"{a68ca8b7-004f-d7b6-a698-07e2de0f1f5d}", "Microsoft-Windows-Kernel-General"},
    {"{b675ec37-bdb6-4648-bc92-f3fdc74d3ca2}", "Microsoft-Windows-Kernel-EventTracing"},
    {"{c7bde69a-e1e0-4177-b6ef-283ad1525271}", "Microsoft-Windows-Kernel-Disk"},
    {"{c861d0e2-a2c1-4d36-9f9c-970bab943a12}", "ThreadPool"},
    {"{ca11c036-0102-4a2d-a6ad-f03cfed5d3c9}", "Microsoft-Windows-DXGI"},
    {"{cc2bcbba-16b6-4cf3-8990-d74c2e8af500}", "Microsoft-Windows-DotNETRuntimeStress"},
    {"{d1d93ef7-e1f2-4f45-9943-03d245fe6c00}", "Microsoft-Windows-Kernel-Memory"},
    {"{dd5ef90a-6398-47a4-ad34-4dcecdef795f}", "Microsoft-Windows-HttpService"},
    {"{de7b24ea-73c8-4a09-985d-5bdadcfa9017}", "Microsoft-Windows-TaskScheduler"},
    {"{e02a841c-75a3-4fa7-afc8-ae09cf9b7f23}", "Microsoft-Windows-Kernel-Audit-API-Calls"},
    {"{e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}", "Microsoft-Windows-DotNETRuntime"},
    {"{e53c6823-7bb8-44bb-90dc-3f86090d48a6}", "Microsoft-Windows-Winsock-AFD"},
    {"{edd08927-9cc4-4e65-b970-c2560fb5c289}", "Microsoft-Windows-Kernel-File"},
    {"{f4e1897c-bb5d-5668-f1d8-040f4d8dd344}", "Microsoft-Windows-Threat-Intelligence"},
    {"{f90714a8-5509-434a-bf6d-b1624c8a19a2}", "PowerShellCore"},
    {"{fc65ddd8-d6ef-4962-83d5-6e5cfe9ce148}", "Microsoft-Windows-Eventlog"},
};

static int cmp_known(const void *key, const void *elem) {
  return strcmp((const char *)key, ((const struct known *)elem)->guid);
}

const char *dec_known_provider(const char *guid_text) {
  const struct known *k = bsearch(guid_text, KNOWN, sizeof KNOWN / sizeof KNOWN[0], sizeof KNOWN[0], cmp_known);
  return k ? k->name : NULL;
}

size_t dec_known_providers(const char **guids, const char **names, size_t max) {
  size_t n = sizeof KNOWN / sizeof KNOWN[0];
  for (size_t i = 0; i < n && i < max; i++) {
    if (guids) guids[i] = KNOWN[i].guid;
    if (names) names[i] = KNOWN[i].name;
  }
  return n;
}
