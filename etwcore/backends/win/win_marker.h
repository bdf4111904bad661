/* win_marker.h — markers of the win backend (win_marker.c): POST /api/v1/sessions/{id}/markers
 * as an event of etwd's own TraceLogging provider. Windows builds only. */
#ifndef ETWCORE_WIN_MARKER_H
#define ETWCORE_WIN_MARKER_H

#include <windows.h>
#include <evntrace.h>

#include "etwcore/err.h"

/** etw_win_marker_enable - give the session @h (created by etwd, not the NT Kernel Logger) a
 *  keyword bit of its own and EnableTraceEx2 etwd's provider in it with that keyword; the bit
 *  + 1, or 0 if none is free or ETW refused (markers on that session then fail, the session
 *  itself works). Any thread. */
int etw_win_marker_enable(TRACEHANDLE h);
/** etw_win_marker_release - give back the bit @mk (etw_win_marker_enable's value; 0: none). */
void etw_win_marker_release(int mk);
/** etw_win_marker_write - write event "Marker" {buf: @text} with the session's bit @mk; it
 *  reaches that session only (stream and .etl). ETW_E_OK, or why not in @st. Any thread. */
enum etw_err etw_win_marker_write(int mk, const char *text, struct etw_status *st);

#endif
