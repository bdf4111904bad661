/* win_rec.h — EVENT_RECORD (a live ETW event) → struct etw_rec (the record shape the ETL reader
 * produces and the shared decoder reads). Windows builds only; tested under wine by
 * tests/unit/test_win_rec.c against the corpus ETL files. */
#ifndef ETWCORE_WIN_REC_H
#define ETWCORE_WIN_REC_H

#include <windows.h>
#include <evntcons.h>

#include "etwcore/etl.h"

/**
 * etw_win_rec_from_event - fill every field of @r from @er (pointers into @er's memory, valid
 * for the duration of the event callback). Timestamps are FILETIMEs (the consumer does not ask
 * for raw timestamps); classic/kernel events become ETW_REC_CLASSIC with the MOF class GUID as
 * provider, WPP events ETW_REC_WPP; at most ETW_REC_MAX_EXT extended data items are kept.
 */
void etw_win_rec_from_event(const EVENT_RECORD *er, struct etw_rec *r);

#endif
