/* evcsv.h — CSV rows of encoded events (RFC 4180 quoting), shared by `etwd convert --format csv`
 * (its common columns) and the HTTP event streams' `?format=csv` (api/stream.c). Pure functions
 * of their input: no state, any thread. */
#ifndef ETWCORE_EVCSV_H
#define ETWCORE_EVCSV_H

#include <stddef.h>

#include "etwcore/jw.h"

/* the common columns of an event row, in order; the mixed form (events of several types) adds
 * EventData, the event's payload as one JSON text cell */
#define ETW_CSV_COLS "seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,ProcessID,ThreadID," \
                     "ProcessName,Host,ProcessorID"
#define ETW_CSV_HEADER ETW_CSV_COLS ",EventData\n"

/** etw_json_span - length of the (compact) JSON value at s[0] ('{', '[', '"' or a scalar); 0 if
 *  it does not end within @n bytes. */
size_t etw_json_span(const char *s, size_t n);
/** etw_csv_risky - whether the cell text @s[0..n) would be a formula to a spreadsheet (OWASP "CSV
 *  Injection"): it starts with = + - @ TAB or CR and is not a plain number
 *  (-?D+(.D+)?([eE][+-]?D+)?, D a digit: "-5", "-1.5e3"). Every quoted cell written here gets a
 *  single quote in front of such text, inside its quotes ("'=HYPERLINK(…)"); web/export.js's
 *  csv() applies the same rule. */
int etw_csv_risky(const char *s, size_t n);
/** etw_csv_cell - @s[0..n) as one quoted cell (each '"' doubled; etw_csv_risky text after a '). */
void etw_csv_cell(struct etw_jw *w, const char *s, size_t n);
/** etw_csv_json_cell - the JSON value @v[0..n) as a cell: a string's text (escapes undone, \uXXXX
 *  as UTF-8) quoted (etw_csv_risky text after a '), an object or array as its JSON text quoted,
 *  null empty, other scalars (numbers, true, false) as they are. */
void etw_csv_json_cell(struct etw_jw *w, const char *v, size_t n);
/** etw_csv_data_cell - the EventData cell: @s[0..n) is the text after `"EventData":` (or
 *  `"Undecoded":`) up to the event's closing brace; members after EventData ("Unparsed", …) go
 *  into the same JSON object, so the cell is one JSON value. */
void etw_csv_data_cell(struct etw_jw *w, const char *s, size_t n);
/** etw_csv_common - the common columns (ETW_CSV_COLS; no trailing comma or newline) of an event:
 *  @seq[0..seq_len) as text, the rest from its System object @sys[0..sys_len) (the values its
 *  JSON form carries: a column is what ndjson says). */
void etw_csv_common(struct etw_jw *w, const char *seq, size_t seq_len, const char *sys, size_t sys_len);
/** etw_csv_event_row - the mixed-form row (ETW_CSV_HEADER's columns, then '\n') of the event
 *  @ev[0..n) as the hub writes it, `{"seq":N,"System":{…},"EventData":…}` (no newline; an event of
 *  another shape gets its seq and, in the last cell, its whole text). 0, or -1 (nothing
 *  written) when it is not an event line (a Gap or Heartbeat record). */
int etw_csv_event_row(struct etw_jw *w, const char *ev, size_t n);

#endif
