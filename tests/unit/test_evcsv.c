/* test_evcsv.c — the CSV row writer shared by `etwd convert --format csv` and the HTTP streams'
 * ?format=csv (etwcore/evcsv.h): RFC 4180 quoting, JSON escapes undone, null and absent members
 * empty, EventData with the members after it in one JSON cell, events of another shape kept
 * whole, Gap and Heartbeat records not rows. */
#include "etwcore/evcsv.h"
#include "t.h"

/* the row of @ev as a C string (static buffer) or "(none)" when it is not an event line */
static const char *row(const char *ev) {
  static char out[4096];
  struct etw_jw w;
  etw_jw_init(&w, 1 << 20);
  int r = etw_csv_event_row(&w, ev, strlen(ev));
  snprintf(out, sizeof out, "%s", r ? "(none)" : etw_jw_cstr(&w));
  etw_jw_free(&w);
  return out;
}

int main(void) {
  CHECK_STR(ETW_CSV_HEADER, "seq,TimeCreated,Provider,EventName,EventID,Version,Level,Task,Opcode,Keywords,"
                            "ProcessID,ThreadID,ProcessName,Host,ProcessorID,EventData\n");
  /* a Linux event: Host, ProcessName with a quote, a comma and an escaped newline */
  CHECK_STR(row("{\"seq\":7,\"System\":{\"Provider\":{\"Name\":\"sched\"},\"Host\":\"box,1\",\"EventID\":3,"
                "\"Version\":0,\"Level\":4,\"Task\":0,\"Opcode\":0,\"Keywords\":\"0x0000000000000000\","
                "\"TimeCreated\":\"2026-11-29T05:00:00.1234567Z\",\"EventName\":\"sched_switch\","
                "\"Execution\":{\"ProcessID\":12,\"ProcessName\":\"a\\\"b\\nc\",\"ThreadID\":13,\"ProcessorID\":1}},"
                "\"EventData\":{\"prev_comm\":\"x\\\"y\",\"n\":-1}}"),
            "7,2026-11-29T05:00:00.1234567Z,\"sched\",\"sched_switch\",3,0,4,0,0,0x0000000000000000,12,13,"
            "\"a\"\"b\nc\",\"box,1\",1,\"{\"\"prev_comm\"\":\"\"x\\\"\"y\"\",\"\"n\"\":-1}\"\n");
  /* nulls and absent members are empty; \u escapes (a surrogate pair, a lone one) become UTF-8 */
  CHECK_STR(row("{\"seq\":1,\"System\":{\"Provider\":{\"Name\":\"P\\u00e9\",\"Guid\":\"{0}\"},\"EventID\":0,"
                "\"Version\":1,\"Level\":0,\"Task\":2,\"Opcode\":3,\"Keywords\":\"0x8000000000000000\","
                "\"TimeCreated\":null,\"Execution\":{\"ProcessID\":null,\"ProcessName\":\"\\ud83d\\ude00\\ud800\","
                "\"ThreadID\":null,\"ProcessorID\":null}},\"EventData\":{}}"),
            "1,,\"P\xc3\xa9\",\"\",0,1,0,2,3,0x8000000000000000,,,\"\xf0\x9f\x98\x80\xef\xbf\xbd\",,,\"{}\"\n");
  /* Unparsed (and what follows EventData) goes into the EventData cell's object */
  CHECK_STR(row("{\"seq\":2,\"System\":{\"Provider\":{\"Name\":\"P\"},\"EventID\":1,\"Version\":0,\"Level\":4,"
                "\"Task\":0,\"Opcode\":0,\"Keywords\":\"0x0\",\"TimeCreated\":\"T\",\"Execution\":{\"ProcessID\":1,"
                "\"ThreadID\":2,\"ProcessorID\":0}},\"EventData\":{\"a\":1},\"Unparsed\":{\"Offset\":4}}"),
            "2,T,\"P\",\"\",1,0,4,0,0,0x0,1,2,,,0,\"{\"\"a\"\":1,\"\"Unparsed\"\":{\"\"Offset\"\":4}}\"\n");
  CHECK_STR(row("{\"seq\":3,\"System\":{\"Provider\":{\"Name\":\"P\"},\"EventID\":1,\"Version\":0,\"Level\":4,"
                "\"Task\":0,\"Opcode\":0,\"Keywords\":\"0x0\",\"TimeCreated\":\"T\",\"Execution\":{\"ProcessID\":1,"
                "\"ThreadID\":2,\"ProcessorID\":0}},\"EventData\":{},\"Unparsed\":{\"Offset\":0}}"),
            "3,T,\"P\",\"\",1,0,4,0,0,0x0,1,2,,,0,\"{\"\"Unparsed\"\":{\"\"Offset\"\":0}}\"\n");
  /* an undecoded event: its Undecoded object is the cell */
  CHECK_STR(row("{\"seq\":4,\"System\":{\"Provider\":{\"Name\":\"P\"},\"EventID\":9,\"Version\":0,\"Level\":4,"
                "\"Task\":0,\"Opcode\":0,\"Keywords\":\"0x0\",\"TimeCreated\":\"T\",\"Execution\":{\"ProcessID\":1,"
                "\"ThreadID\":2,\"ProcessorID\":0}},\"Undecoded\":{\"Reason\":\"r\",\"Payload\":\"AA==\"}}"),
            "4,T,\"P\",\"\",9,0,4,0,0,0x0,1,2,,,0,\"{\"\"Reason\"\":\"\"r\"\",\"\"Payload\"\":\"\"AA==\"\"}\"\n");
  /* a member before System (a nats event's stream_seq) is passed over */
  CHECK_STR(row("{\"seq\":5,\"stream_seq\":77,\"System\":{\"Provider\":{\"Name\":\"P\"},\"EventID\":1,"
                "\"TimeCreated\":\"T\"},\"EventData\":{}}"),
            "5,T,\"P\",\"\",1,,,,,,,,,,,\"{}\"\n");
  /* another shape: its seq, empty columns, and the whole event in the last cell (never dropped) */
  CHECK_STR(row("{\"seq\":6,\"Other\":[1,\"x\"]}"), "6,,\"\",\"\",,,,,,,,,,,,\"{\"\"seq\"\":6,\"\"Other\"\":[1,\"\"x\"\"]}\"\n");
  /* formula injection (OWASP): text cells starting with = + - @ TAB CR get a ' inside their
   * quotes (escapes undone first: \t, \u003d); plain numbers, JSON numbers and {…} cells do not */
  CHECK_STR(row("{\"seq\":8,\"System\":{\"Provider\":{\"Name\":\"@P\"},\"EventName\":\"\\u003dcmd|' /C calc'!A0\","
                "\"EventID\":-1,\"Version\":0,\"Level\":4,\"Task\":0,\"Opcode\":0,\"Keywords\":\"0x0\","
                "\"TimeCreated\":\"T\",\"Host\":\"-5\",\"Execution\":{\"ProcessID\":-7,\"ProcessName\":\"\\tx\","
                "\"ThreadID\":2,\"ProcessorID\":0}},\"EventData\":{\"a\":\"=1+1\"}}"),
            "8,T,\"'@P\",\"'=cmd|' /C calc'!A0\",-1,0,4,0,0,0x0,-7,2,\"'\tx\",\"-5\",0,"
            "\"{\"\"a\"\":\"\"=1+1\"\"}\"\n");
  /* System values of another kind (a nats publisher's own event): quoted cells, guarded */
  CHECK_STR(row("{\"seq\":9,\"System\":{\"Provider\":{\"Name\":\"P\"},\"EventID\":1,\"TimeCreated\":\"=HYPERLINK(\\\"x\\\")\","
                "\"Keywords\":\"a,b\",\"Level\":{\"x\":1},\"Execution\":{\"ProcessID\":\"+2\",\"ThreadID\":\"-2\"}},"
                "\"EventData\":{}}"),
            "9,\"'=HYPERLINK(\"\"x\"\")\",\"P\",\"\",1,,\"{\"\"x\"\":1}\",,,\"a,b\",\"'+2\",-2,,,,\"{}\"\n");
  {
    static const char *const yes[] = {"=", "+1", "-", "-2+3", "@x", "\tx", "\rx", "-1e", "-.5", "-1.", "-0x10", "+5"};
    static const char *const no[] = {"", "x=1", "5", "-5", "-1.5e3", "-1.5E-3", "-0.25", "1e+9", "'=x", " =x", "{\"a\":1}"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) CHECK(etw_csv_risky(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) CHECK(!etw_csv_risky(no[i], strlen(no[i])));
    struct etw_jw w;
    etw_jw_init(&w, 1 << 20);
    etw_csv_cell(&w, "-x\"y", 4);
    etw_csv_json_cell(&w, "\"\\r\\n\"", 6);
    etw_csv_json_cell(&w, "-3", 2);
    CHECK_STR(etw_jw_cstr(&w), "\"'-x\"\"y\"\"'\r\n\"-3");
    etw_jw_free(&w);
  }
  /* not events */
  CHECK_STR(row("{\"Gap\":{\"Dropped\":3,\"Layer\":\"subscriber\",\"Reason\":\"r\"}}"), "(none)");
  CHECK_STR(row("{\"Heartbeat\":{\"Time\":\"T\"}}"), "(none)");
  CHECK_STR(row(""), "(none)");
  T_DONE();
}
