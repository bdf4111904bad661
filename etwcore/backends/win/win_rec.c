/* win_rec.c — EVENT_RECORD → struct etw_rec (see win_rec.h). */
#ifdef _WIN32
#include "win_rec.h"

#include <stdint.h>
#include <string.h>

void etw_win_rec_from_event(const EVENT_RECORD *er, struct etw_rec *r) {
  const EVENT_HEADER *h = &er->EventHeader;
  memset(r, 0, offsetof(struct etw_rec, ext));
  r->flags = h->Flags;
  r->kind = (h->Flags & EVENT_HEADER_FLAG_CLASSIC_HEADER) ? ETW_REC_CLASSIC
            : (h->Flags & EVENT_HEADER_FLAG_TRACE_MESSAGE) ? ETW_REC_WPP : ETW_REC_EVENT;
  r->ptr_size = (h->Flags & EVENT_HEADER_FLAG_32_BIT_HEADER) ? 4 : 8;
  r->event_property = h->EventProperty;
  r->hook_id = 0; /* live classic events name their class by GUID, not by HookId */
  r->tid = h->ThreadId;
  r->pid = h->ProcessId;
  r->timestamp = h->TimeStamp.QuadPart;
  r->filetime = (uint64_t)h->TimeStamp.QuadPart; /* no PROCESS_TRACE_MODE_RAW_TIMESTAMP */
  memcpy(r->provider_id, &h->ProviderId, 16);
  r->desc.id = h->EventDescriptor.Id;
  r->desc.version = h->EventDescriptor.Version;
  r->desc.channel = h->EventDescriptor.Channel;
  r->desc.level = h->EventDescriptor.Level;
  r->desc.opcode = h->EventDescriptor.Opcode;
  r->desc.task = h->EventDescriptor.Task;
  r->desc.keyword = h->EventDescriptor.Keyword;
  r->kernel_time = h->KernelTime;
  r->user_time = h->UserTime;
  memcpy(r->activity_id, &h->ActivityId, 16);
  r->cpu = (h->Flags & EVENT_HEADER_FLAG_PROCESSOR_INDEX) ? er->BufferContext.ProcessorIndex
                                                          : er->BufferContext.ProcessorNumber;
  r->n_ext = 0;
  for (USHORT i = 0; er->ExtendedData && i < er->ExtendedDataCount && r->n_ext < ETW_REC_MAX_EXT; i++) {
    const EVENT_HEADER_EXTENDED_DATA_ITEM *x = &er->ExtendedData[i];
    r->ext[r->n_ext].type = x->ExtType;
    r->ext[r->n_ext].len = x->DataSize;
    r->ext[r->n_ext].data = (const unsigned char *)(uintptr_t)x->DataPtr;
    r->n_ext++;
  }
  r->user_data = er->UserData;
  r->user_len = er->UserDataLength;
  r->wpp_msg_number = r->kind == ETW_REC_WPP ? h->EventDescriptor.Id : 0;
  r->wpp_flags = 0;
  r->wpp_sequence = 0;
  r->file = NULL; /* a live record */
  r->file_index = 0;
  r->file_offset = 0;
}
#endif
