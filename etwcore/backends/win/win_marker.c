/* win_marker.c — markers of the win backend: POST /api/v1/sessions/{id}/markers.
 *
 * A marker is an event "Marker" {buf: the text} of etwd's own TraceLogging provider ("etwd",
 * ETW_TLW_PROVIDER_GUID; the event is built by the portable etw_tlw_marker_event, which the
 * Linux unit test decodes) written with EventWriteTransfer (win_provider.c). Every session etwd
 * creates enables that provider (win_open → etw_win_marker_enable), so the event comes back
 * through the session's real-time consumer and into its .etl like any TraceLogging event.
 *
 * One provider, many sessions: an event goes to every session that enabled the provider whose
 * keywords match. So each session gets a keyword bit of its own (g_bits, bits 0..MK_BITS-1;
 * the high 16 are Microsoft's), is enabled with MatchAnyKeyword = that bit, and its markers
 * carry that bit: a marker reaches its own session only. More sessions than bits: the rest get
 * no markers (ETW allows 64 sessions per machine in all, so this is rarely reached).
 *
 * The provider is registered once for the process, at the first marker, and kept (the count in
 * win_provider.c lets `etwd selftest` register and unregister beside it).
 * Threads: any; g_mu guards g_bits and g_registered.
 */
#ifdef _WIN32
#include "win_marker.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "etwcore/jw.h"
#include "etwcore/tlw.h"
#include "etwcore/winprov.h"
#include "etwcore/winreq.h"

#define MK_BITS 40
#define MK_LEVEL 4 /* information */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_bits;   /* bits in use */
static int g_registered; /* this file holds one registration of the provider */

int etw_win_marker_enable(TRACEHANDLE h) {
  unsigned char gb[16];
  GUID g;
  if (etw_parse_guid(ETW_TLW_PROVIDER_GUID, gb)) return 0;
  memcpy(&g, gb, 16);
  pthread_mutex_lock(&g_mu);
  int bit = 0;
  while (bit < MK_BITS && (g_bits >> bit & 1)) bit++;
  if (bit < MK_BITS) g_bits |= 1ull << bit;
  pthread_mutex_unlock(&g_mu);
  if (bit == MK_BITS) return 0;
  ULONG rc = EnableTraceEx2(h, &g, EVENT_CONTROL_CODE_ENABLE_PROVIDER, MK_LEVEL, 1ull << bit, 0, 0, NULL);
  if (rc != ERROR_SUCCESS) {
    etw_win_marker_release(bit + 1);
    return 0;
  }
  return bit + 1;
}

void etw_win_marker_release(int mk) {
  if (mk <= 0) return;
  pthread_mutex_lock(&g_mu);
  g_bits &= ~(1ull << (mk - 1));
  pthread_mutex_unlock(&g_mu);
}

enum etw_err etw_win_marker_write(int mk, const char *text, struct etw_status *st) {
  if (mk <= 0)
    return etw_fail(st, ETW_E_UNSUPPORTED, NULL,
                    "this session takes no markers: etwd's provider %s is not enabled in it "
                    "(an attached session, the NT Kernel Logger, or ETW refused it)", ETW_TLW_PROVIDER_GUID);
  static struct etw_tlw w; /* 3 KB: not on the request thread's stack; g_mu guards it */
  pthread_mutex_lock(&g_mu);
  uint32_t rc = ERROR_SUCCESS;
  if (!g_registered) {
    rc = etw_win_provider_register(st);
    g_registered = rc == ERROR_SUCCESS;
  }
  if (rc != ERROR_SUCCESS) {
    pthread_mutex_unlock(&g_mu);
    return etw_win_error(rc, "EventRegister", 0, st);
  }
  if (etw_tlw_marker_event(&w, text)) {
    pthread_mutex_unlock(&g_mu);
    return etw_fail(st, ETW_E_TOO_LARGE, "/text", "the marker does not fit in one event");
  }
  int enabled = 0;
  rc = etw_win_provider_write_kw(&w, MK_LEVEL, 1ull << (mk - 1), &enabled);
  pthread_mutex_unlock(&g_mu);
  if (rc != ERROR_SUCCESS) return etw_win_error(rc, "EventWriteTransfer", 0, st);
  if (!enabled)
    return etw_fail(st, ETW_E_KERNEL, NULL, "ETW did not enable etwd's provider %s in this session: the marker "
                    "went nowhere", ETW_TLW_PROVIDER_GUID);
  return ETW_E_OK;
}
#endif
