/* win_provider.c — etwd's own TraceLogging provider (winprov.h): EventRegister, the provider
 * traits, EventWriteTransfer of events built by the portable writer (tlw.c). Used by
 * `etwd selftest` and the backend's markers (win_marker.c). The registration handle is
 * process-wide and counted (g_mu): the first register registers, the last unregister
 * unregisters, so the self-test's register/unregister and the markers' share it; any thread. */
#ifdef _WIN32
#include <windows.h>
#include <evntprov.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "etwcore/jw.h"
#include "etwcore/winprov.h"
#include "etwcore/winreq.h"

/* EVENT_INFO_CLASS values and EVENT_DATA_DESCRIPTOR types MinGW's evntprov.h lacks (its
 * descriptor's `Reserved` is the SDK's `UCHAR Type; UCHAR Reserved1; USHORT Reserved2`) */
enum { INFO_SET_TRAITS = 2, INFO_USE_DESCRIPTOR_TYPE = 3, DESC_EVENT_METADATA = 1, DESC_PROVIDER_METADATA = 2 };
typedef ULONG(WINAPI *set_info_fn)(REGHANDLE, int, PVOID, ULONG);

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards the three below */
static REGHANDLE g_reg;
static unsigned g_users; /* registers not yet unregistered */
static unsigned char g_traits[64];
static size_t g_traits_len;

static uint32_t register_locked(struct etw_status *st);

uint32_t etw_win_provider_register(struct etw_status *st) {
  pthread_mutex_lock(&g_mu);
  uint32_t rc = g_users ? ERROR_SUCCESS : register_locked(st);
  if (rc == ERROR_SUCCESS) g_users++;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static uint32_t register_locked(struct etw_status *st) {
  unsigned char gb[16];
  GUID g;
  if (etw_parse_guid(ETW_TLW_PROVIDER_GUID, gb)) return ERROR_INVALID_PARAMETER;
  memcpy(&g, gb, 16);
  g_traits_len = etw_tlw_traits(ETW_TLW_PROVIDER, g_traits, sizeof g_traits);
  ULONG rc = EventRegister(&g, NULL, NULL, &g_reg);
  if (rc != ERROR_SUCCESS) {
    g_reg = 0;
    etw_win_error(rc, "EventRegister", 0, st);
    return rc;
  }
  /* the traits go with every event (below); setting them on the handle as TraceLoggingRegister
   * does also makes ETW honour the descriptors' Type (metadata, not payload). Windows 8+: looked
   * up at run time so that etwd.exe still loads on Windows 7 (there the event carries them). */
  set_info_fn set = (set_info_fn)(void (*)(void))GetProcAddress(GetModuleHandleA("advapi32.dll"), "EventSetInformation");
  if (set) {
    BOOLEAN yes = TRUE;
    set(g_reg, INFO_SET_TRAITS, g_traits, (ULONG)g_traits_len);
    set(g_reg, INFO_USE_DESCRIPTOR_TYPE, &yes, sizeof yes);
  }
  return ERROR_SUCCESS;
}

uint32_t etw_win_provider_write(const struct etw_tlw *w, uint8_t level, int *enabled) {
  return etw_win_provider_write_kw(w, level, 0, enabled);
}

uint32_t etw_win_provider_write_kw(const struct etw_tlw *w, uint8_t level, uint64_t keyword, int *enabled) {
  EVENT_DESCRIPTOR d;
  EVENT_DATA_DESCRIPTOR dd[3];
  memset(&d, 0, sizeof d);
  d.Level = level;
  d.Channel = ETW_TLW_CHANNEL;
  d.Keyword = keyword;
  pthread_mutex_lock(&g_mu); /* the handle stays registered while it is written to */
  *enabled = g_reg && EventEnabled(g_reg, &d);
  if (!g_reg) {
    pthread_mutex_unlock(&g_mu);
    return ERROR_INVALID_HANDLE;
  }
  const void *p[3] = {g_traits, w->meta, w->data};
  size_t n[3] = {g_traits_len, w->meta_len, w->data_len};
  ULONG type[3] = {DESC_PROVIDER_METADATA, DESC_EVENT_METADATA, 0};
  for (int i = 0; i < 3; i++) {
    dd[i].Ptr = (ULONGLONG)(uintptr_t)p[i];
    dd[i].Size = (ULONG)n[i];
    dd[i].Reserved = type[i];
  }
  ULONG rc = EventWriteTransfer(g_reg, &d, NULL, NULL, 3, dd);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

uint32_t etw_win_provider_unregister(void) {
  pthread_mutex_lock(&g_mu);
  ULONG rc = ERROR_SUCCESS;
  if (g_users && !--g_users && g_reg) {
    rc = EventUnregister(g_reg);
    g_reg = 0;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}
#endif
