/* openapi.c — the OpenAPI 3.1 document (schemas in JSON Schema 2020-12), generated from the route
 * table (router.c) so the two cannot drift, plus the component schemas below (the event shape is a
 * stable contract). tests/e2e/test_api.py checks every route appears with its security and that
 * every $ref resolves; tests/e2e/test_openapi.py lints it (redocly) and validates real responses
 * against it (ajv). */
#include <string.h>

#include "api.h"
#include "etwcore/caps.h"
#include "etwcore/evcsv.h"

static const char schemas[] =
    "\"Problem\":{\"type\":\"object\",\"description\":\"RFC 7807 problem details; every 4xx/5xx.\","
    "\"required\":[\"type\",\"title\",\"status\"],\"additionalProperties\":false,\"properties\":{\"type\":{\"type\":\"string\","
    "\"description\":\"stable: urn:etwd:problem:<name>\"},\"title\":{\"type\":\"string\"},"
    "\"status\":{\"type\":\"integer\"},\"detail\":{\"type\":\"string\"},\"field\":{\"type\":\"string\","
    "\"description\":\"JSON pointer of the offending input\"}}},"
    "\"Health\":{\"type\":\"object\",\"required\":[\"status\"],\"properties\":{\"status\":{\"type\":\"string\",\"enum\":[\"ok\"]}}},"
    "\"Version\":{\"type\":\"object\",\"required\":[\"name\",\"version\",\"backends\"],\"properties\":{\"name\":{\"type\":\"string\"},\"version\":{\"type\":\"string\"},"
    "\"os\":{\"type\":\"object\"},\"tls\":{\"type\":\"boolean\"},\"backends\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"capabilities\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\"}},\"available\":{\"type\":\"boolean\"},\"error\":{\"type\":\"string\"}}}},"
    "\"limits\":{\"type\":\"object\"}}},"
    "\"Whoami\":{\"type\":\"object\",\"required\":[\"role\",\"token_id\"],\"properties\":{\"role\":{\"type\":\"string\",\"enum\":[\"admin\",\"reader\"]},"
    "\"token_id\":{\"type\":\"string\"},\"via_cookie\":{\"type\":\"boolean\"}}},"
    "\"Backends\":{\"type\":\"object\",\"required\":[\"backends\"],\"properties\":{\"backends\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"required\":[\"name\",\"available\",\"capabilities\",\"provider_strings\",\"members\",\"stream_parameters\",\"limits\"],"
    "\"properties\":{\"name\":{\"type\":\"string\"},\"available\":{\"type\":\"boolean\"},\"error\":{\"type\":\"string\"},"
    "\"capabilities\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"provider_strings\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\"},\"description\":\"forms a provider string takes with this backend\"},"
    "\"members\":{\"type\":\"array\",\"description\":\"spec members (/x, /providers/*/x); an unsupported one is "
    "refused (400 naming it) unless given at its default\",\"items\":{\"$ref\":\"#/components/schemas/BackendMember\"}},"
    "\"stream_parameters\":{\"type\":\"array\",\"description\":\"any other query parameter is refused (400)\","
    "\"items\":{\"$ref\":\"#/components/schemas/BackendMember\"}},\"limits\":{\"type\":\"object\"}}}}}},"
    "\"BackendMember\":{\"type\":\"object\",\"required\":[\"supported\",\"needs\",\"example\",\"description\"],\"properties\":{\"member\":{\"type\":\"string\"},\"parameter\":{\"type\":\"string\"},"
    "\"supported\":{\"type\":\"boolean\"},\"needs\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"default\":{},\"example\":{},\"description\":{\"type\":\"string\"}}},"
    "\"Tokens\":{\"type\":\"object\",\"properties\":{\"admin\":{\"type\":\"string\"},\"reader\":{\"type\":\"string\"}}},"
    "\"ProviderList\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"name\",\"backend\"],\"properties\":{\"name\":{\"type\":\"string\"},\"guid\":{\"type\":\"string\"},"
    "\"backend\":{\"type\":\"string\"},\"events\":{\"type\":\"integer\"},\"matched_events\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\"},\"description\":\"with ?q=: the provider's events whose names contain q "
    "(linux, etl; absent when only the provider's name matched)\"}}}},"
    "\"Provider\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"events\":{\"type\":\"array\","
    "\"items\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"name\":{\"type\":\"string\"},"
    "\"fields\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"type\":{\"type\":\"string\"},\"offset\":{\"type\":\"integer\"},\"size\":{\"type\":\"integer\"},"
    "\"signed\":{\"type\":\"boolean\"}}}}}}}}},"
    "\"ProviderSpec\":{\"type\":\"object\",\"required\":[\"name\"],\"additionalProperties\":false,\"properties\":{"
    "\"name\":{\"type\":\"string\",\"description\":\"tracepoint system (linux) or provider name/GUID (win)\"},"
    "\"events\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"default: all\"},"
    "\"filter\":{\"type\":\"string\",\"description\":\"tracefs filter expression (linux)\"},"
    "\"level\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":255,\"default\":5},"
    "\"keywords_any\":{\"type\":[\"string\",\"integer\"],\"description\":\"64-bit mask, \\\"0x…\\\"\"},"
    "\"keywords_all\":{\"type\":[\"string\",\"integer\"]},\"event_ids\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"integer\"}},\"event_ids_exclude\":{\"type\":\"boolean\"},\"stacks\":{\"oneOf\":[{\"enum\":[true,false,\"raw\"]},{\"type\":\"array\",\"minItems\":1,"
    "\"maxItems\":256,\"items\":{\"type\":[\"string\",\"integer\"]}}],"
    "\"description\":\"a stack with each event; \\\"raw\\\": linux kernel stacks keep their leading tracing frames; "
    "a list: stacks on these events only (event names on linux, event IDs on win)\"}}},"
    "\"SessionSpec\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"name\":{\"type\":[\"string\",\"null\"],\"pattern\":\"^[A-Za-z0-9._-]{1,64}$\"},"
    "\"backend\":{\"type\":\"string\",\"enum\":[\"linux\",\"etl\",\"win\",\"nats\"]},"
    "\"subjects\":{\"type\":\"array\",\"maxItems\":8,\"items\":{\"type\":\"string\"},\"description\":\"nats backend: subject filters of the stream to serve, e.g. etwd.>\"},"
    "\"nats\":{\"type\":\"object\",\"additionalProperties\":false,\"description\":\"nats backend: where to read\",\"properties\":{\"url\":{\"type\":\"string\"},\"stream\":{\"type\":\"string\",\"default\":\"ETWD\"},\"start_seq\":{\"type\":\"integer\",\"description\":\"begin at this stream sequence\"},\"start_time\":{\"type\":\"string\",\"description\":\"begin at this UTC time (RFC 3339)\"},"
    "\"creds\":{\"description\":\"a .creds file in the sink secrets directory (GET: whether one is used)\"},\"tls_ca\":{},\"tls_cert\":{},\"tls_key\":{},\"tls\":{\"type\":\"boolean\"}}},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"realtime\",\"file\",\"both\",\"flight\"],\"default\":\"realtime\"},"
    "\"buffer_kb\":{\"type\":\"integer\",\"description\":\"per-CPU buffer size in KiB\"},"
    "\"providers\":{\"type\":\"array\",\"items\":{\"oneOf\":[{\"$ref\":\"#/components/schemas/ProviderSpec\"},"
    "{\"type\":\"string\",\"description\":\"provider string: linux system, system:* or system:event[,event…]; "
    "etw/etl Name[:Level[:EventIDs[:AnyKeywords[:AllKeywords]]]] (GET shows the object form)\"}]}},"
    "\"pids\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
    "\"exe_names\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"etl backend: names in the data directory\"},"
    "\"replay\":{\"type\":\"string\",\"enum\":[\"fast\",\"recorded\"]},"
    "\"stackwalk_events\":{\"type\":\"boolean\",\"default\":false,\"description\":\"etl backend: also deliver the stack walk events (StackWalk/*, ClrStack/Walk), otherwise only attached to their events as Stack\"},"
    "\"attach\":{\"type\":\"string\",\"description\":\"win backend: attach read-only to this running ETW session\"},"
    "\"flight_s\":{\"type\":\"number\",\"minimum\":0.1,\"maximum\":86400,\"description\":\"mode flight: a snapshot keeps the last this many seconds (whole pages)\"},"
    "\"duration_s\":{\"type\":\"number\",\"minimum\":0.1,\"description\":\"stop after this many seconds\"},"
    "\"max_events\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"stop after this many events read\"},"
    "\"max_file_mb\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"mode file|both: stop when the recording holds this many MiB\"},"
    "\"start_when\":{\"$ref\":\"#/components/schemas/Trigger\"},\"stop_when\":{\"$ref\":\"#/components/schemas/Trigger\"},"
    "\"sinks\":{\"type\":\"array\",\"maxItems\":4,\"description\":\"also publish every event to NATS JetStream (docs/fleet.md)\",\"items\":{\"type\":\"object\",\"required\":[\"type\",\"url\"],\"properties\":{"
    "\"type\":{\"type\":\"string\",\"enum\":[\"nats\"]},\"url\":{\"type\":\"string\"},\"subject\":{\"type\":\"string\",\"default\":\"etwd.{host}.{session}.{provider}\"},"
    "\"stream\":{\"type\":\"string\",\"default\":\"ETWD\"},\"replicas\":{\"type\":\"integer\"},\"batch\":{\"type\":\"integer\"},\"ack_timeout_ms\":{\"type\":\"integer\"},"
    "\"spool_memory_kb\":{\"type\":\"integer\"},\"spool_disk_mb\":{\"type\":\"integer\"},\"creds\":{},\"tls_ca\":{},\"tls_cert\":{},\"tls_key\":{},\"tls\":{\"type\":\"boolean\"}}}},"
    "\"win\":{\"type\":\"object\",\"additionalProperties\":false,\"description\":\"win backend only\","
    "\"properties\":{\"min_buffers\":{\"type\":\"integer\"},\"max_buffers\":{\"type\":\"integer\"},"
    "\"flush_s\":{\"type\":\"integer\"},\"clock\":{\"type\":\"integer\",\"enum\":[1,2,3]},"
    "\"file\":{\"type\":\"string\",\"enum\":[\"sequential\",\"circular\"]},\"max_file_mb\":{\"type\":\"integer\"}}}}},"
    "\"Trigger\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"provider\"],"
    "\"description\":\"event match (provider, event, filter) or rate rule (rate_above|rate_below events/s for for_s seconds); fires after_s later\","
    "\"properties\":{\"provider\":{\"type\":\"string\"},\"event\":{\"type\":\"string\"},"
    "\"filter\":{\"type\":\"object\",\"additionalProperties\":{\"type\":[\"string\",\"number\"]}},"
    "\"after_s\":{\"type\":\"number\",\"minimum\":0},\"rate_above\":{\"type\":\"number\",\"minimum\":0},"
    "\"rate_below\":{\"type\":\"number\",\"minimum\":0},\"for_s\":{\"type\":\"number\",\"minimum\":1}}},"
    "\"SessionPatch\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"enable\":{\"type\":\"array\",\"items\":{\"oneOf\":[{\"$ref\":\"#/components/schemas/ProviderSpec\"},{\"type\":\"string\"}]}},"
    "\"disable\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}},"
    "\"TriggerState\":{\"type\":\"object\",\"required\":[\"armed\",\"met\",\"seen\",\"matched\",\"dropped\"],\"properties\":{"
    "\"armed\":{\"type\":\"boolean\"},\"met\":{\"type\":\"boolean\"},"
    "\"rate\":{\"type\":\"number\",\"description\":\"a rate rule's last 1-s window, events/s, dropped events included\"},"
    "\"for_s_met\":{\"type\":\"number\"},\"seen\":{\"type\":\"integer\"},\"matched\":{\"type\":\"integer\"},"
    "\"dropped\":{\"type\":\"integer\",\"description\":\"events the watcher lost: its queue, its session's hub and kernel buffers (a rate rule counts them)\"}}},"
    "\"Session\":{\"type\":\"object\",\"required\":[\"id\",\"name\",\"backend\",\"state\",\"created\",\"stopped\",\"recording\",\"spec\",\"stats\"],\"properties\":{\"id\":{\"type\":\"integer\"},\"name\":{\"type\":[\"string\",\"null\"]},"
    "\"backend\":{\"type\":\"string\"},\"state\":{\"type\":\"string\",\"enum\":[\"pending\",\"armed\",\"running\",\"stopped\",\"ended\",\"failed\"]},"
    "\"message\":{\"type\":\"string\"},\"os_name\":{\"type\":\"string\"},\"created\":{\"type\":\"string\"},"
    "\"stopped\":{\"type\":[\"string\",\"null\"]},\"recording\":{\"type\":\"boolean\"},"
    "\"stop_reason\":{\"type\":\"string\",\"enum\":[\"duration\",\"max_events\",\"max_file_mb\",\"requested\",\"trigger\",\"ended\",\"failed\",\"deleted\",\"shutdown\"]},"
    "\"recording_name\":{\"type\":\"string\"},\"recording_url\":{\"type\":\"string\"},"
    "\"snapshots\":{\"type\":\"integer\",\"description\":\"mode flight: snapshots written\"},"
    "\"last_snapshot\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"recording_name\",\"recording_url\"],"
    "\"properties\":{\"recording_name\":{\"type\":\"string\"},\"recording_url\":{\"type\":\"string\"}}},"
    "\"triggers\":{\"type\":\"object\",\"description\":\"what the start_when/stop_when watchers see\",\"additionalProperties\":false,"
    "\"properties\":{\"start_when\":{\"$ref\":\"#/components/schemas/TriggerState\"},\"stop_when\":{\"$ref\":\"#/components/schemas/TriggerState\"}}},"
    "\"spec\":{\"$ref\":\"#/components/schemas/SessionSpec\"},\"stats\":{\"type\":\"object\",\"required\":[\"events\",\"bytes\",\"last_seq\",\"subscribers\",\"loss\"],\"properties\":{"
    "\"events\":{\"type\":\"integer\"},\"bytes\":{\"type\":\"integer\"},\"last_seq\":{\"type\":\"integer\"},"
    "\"read_events\":{\"type\":\"integer\"},\"read_bytes\":{\"type\":\"integer\"},"
    "\"decode_errors\":{\"type\":\"integer\",\"description\":\"events delivered with Undecoded\"},"
    "\"unparsed\":{\"type\":\"integer\",\"description\":\"events delivered with Unparsed\"},"
    "\"stack_walks\":{\"type\":\"integer\",\"description\":\"replays: stack walk events of the files\"},"
    "\"stack_walks_unattached\":{\"type\":\"integer\",\"description\":\"of those, not attached to an event\"},"
    "\"stack_walks_dropped\":{\"type\":\"integer\",\"description\":\"of those, not kept by the stack index (its bounds or --stack-index-mb): their events go without that stack\"},"
    "\"stack_images_dropped\":{\"type\":\"integer\",\"description\":\"images and JIT methods the stack index did not keep (their frames show the address only)\"},"
    "\"process_table_dropped\":{\"type\":\"integer\",\"description\":\"replays: process names and thread owners the decoder's bounded tables could not keep (events of those processes go without ProcessName)\"},"
    "\"per_provider\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}},"
    "\"subscribers\":{\"type\":\"integer\"},\"loss\":{\"type\":\"object\",\"required\":[\"kernel\",\"hub\",\"subscribers\"],\"properties\":{"
    "\"kernel\":{\"type\":\"integer\"},\"kernel_overrun\":{\"type\":\"integer\"},\"kernel_dropped\":{\"type\":\"integer\"},\"hub\":{\"type\":\"integer\"},\"subscribers\":{\"type\":\"integer\"},\"sink\":{\"type\":\"integer\",\"description\":\"events no sink could keep (spools full)\"}}},"
    "\"stream_readers\":{\"type\":\"object\",\"description\":\"backend nats: the clients' own consumers (?from_stream_seq, ?from_time): active now, opened in all, events delivered through them\",\"properties\":{\"active\":{\"type\":\"integer\"},\"opened\":{\"type\":\"integer\"},\"events\":{\"type\":\"integer\"}}},"
    "\"sinks\":{\"type\":\"array\",\"description\":\"each sink's health: state (ok, disconnected, error), error (why the JetStream stream cannot take the events, or null), connected, acked, pending, spooled, spooled_disk, dropped, memory_bytes, disk_bytes, refused, gap_records, hub_dropped, retries, connects, last_error\",\"items\":{\"type\":\"object\"}},"
    "\"source\":{\"type\":\"object\",\"description\":\"backend nats: the broker's health, cached (never waits for the network): state (ok, disconnected, error), connected, status (libnats), reconnects, disconnects, disconnected_since, fetch_errors, last_message_time, last_message_age_ms, last_error, last_error_time, consumers [{subject, pending, ack_pending, delivered_stream_seq, info_time, info_age_ms}]\"},"
    "\"per_subscriber\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"buffer_kb\":{\"type\":\"integer\",\"description\":\"linux: the per-CPU buffer size (KiB) the kernel took, read back from the instance (the spec says 0 when it was not set: the default)\"},\"per_cpu\":{\"type\":\"array\",\"description\":\"linux: the kernel buffer of each CPU\",\"items\":{\"type\":\"object\",\"properties\":{\"cpu\":{\"type\":\"integer\"},\"overrun\":{\"type\":\"integer\"},\"dropped\":{\"type\":\"integer\"},\"entries\":{\"type\":\"integer\"},\"read_events\":{\"type\":\"integer\"},\"read_bytes\":{\"type\":\"integer\"}}}},\"provider_filters\":{\"type\":\"array\",\"description\":\"linux: where each provider's filter went: the events without a field it names run unfiltered (as with trace-cmd); their names and the reason when there are any\",\"items\":{\"type\":\"object\",\"properties\":{\"provider\":{\"type\":\"string\"},\"filter\":{\"type\":\"string\"},\"events_filtered\":{\"type\":\"integer\"},\"events_unfiltered\":{\"type\":\"integer\"},\"filtered\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"unfiltered\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"unfiltered_reason\":{\"type\":\"string\"}}}}}}}},"
    "\"OsSessions\":{\"type\":\"object\",\"description\":\"by backend: an array of {name, etwd, owner_alive} or {error}\","
    "\"additionalProperties\":{}},"
    "\"SessionList\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/Session\"}},"
    "\"File\":{\"type\":\"object\",\"required\":[\"name\",\"size\"],\"properties\":{\"name\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
    "\"modified\":{\"type\":\"string\"},\"kind\":{\"type\":\"string\",\"enum\":[\"upload\",\"recording\"]},"
    "\"url\":{\"type\":\"string\",\"description\":\"where it is downloaded and deleted\"},"
    "\"file\":{\"type\":\"string\",\"description\":\"recording: trace.dat or trace.etl\"},"
    "\"session\":{\"type\":[\"integer\",\"null\"],\"description\":\"recording: its session, if still in the table\"},"
    "\"writing\":{\"type\":\"boolean\",\"description\":\"recording: its session still writes it\"}}},"
    "\"FileList\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/File\"}},"
    "\"Event\":{\"type\":\"object\",\"description\":\"One event (WebSocket frames carry a JSON array of these; "
    "ndjson one per line). A record with Gap instead of System reports events dropped for this client.\",\"anyOf\":[{\"required\":[\"seq\",\"System\"]},{\"required\":[\"Gap\"]},{\"required\":[\"Heartbeat\"]},{\"required\":[\"End\"]}],"
    "\"properties\":{\"seq\":{\"type\":\"integer\",\"description\":\"per-session sequence number; resume with ?from=\"},"
    "\"stream_seq\":{\"type\":\"integer\",\"description\":\"backend nats: the message's JetStream stream sequence; resume with ?from_stream_seq=\"},"
    "\"System\":{\"type\":\"object\",\"required\":[\"Provider\",\"EventID\",\"TimeCreated\"],\"properties\":{\"Provider\":{\"type\":\"object\",\"properties\":{"
    "\"Name\":{\"type\":\"string\"},\"Guid\":{\"type\":\"string\"}}},\"Host\":{\"type\":\"string\",\"description\":\"the machine (--host-name); Linux events\"},\"EventID\":{\"type\":\"integer\"},"
    "\"Version\":{\"type\":\"integer\"},\"Level\":{\"type\":\"integer\"},\"Task\":{\"type\":\"integer\"},"
    "\"Opcode\":{\"type\":\"integer\"},\"Keywords\":{\"type\":\"string\",\"description\":\"0x + 16 hex digits\"},"
    "\"TimeCreated\":{\"type\":\"string\",\"description\":\"UTC, 7 fractional digits\"},"
    "\"EventName\":{\"type\":\"string\"},\"Execution\":{\"type\":\"object\",\"properties\":{"
    "\"ProcessID\":{\"type\":[\"integer\",\"null\"]},\"ThreadID\":{\"type\":[\"integer\",\"null\"]},"
    "\"ProcessorID\":{\"type\":[\"integer\",\"null\"]}}},\"Correlation\":{\"type\":\"object\"}}},"
    "\"EventData\":{\"type\":\"object\",\"description\":\"decoded fields; 64-bit integers are exact JSON integers\"},"
    "\"Undecoded\":{\"type\":\"object\",\"properties\":{\"Reason\":{\"type\":\"string\"},\"Payload\":{\"type\":\"string\","
    "\"description\":\"base64\"}}},"
    "\"Unparsed\":{\"type\":\"object\",\"description\":\"payload bytes after the fields the event's schema "
    "describes (ETL and Windows events): delivered, never cut\",\"properties\":{\"Offset\":{\"type\":\"integer\"},"
    "\"Bytes\":{\"type\":\"integer\"},\"Data\":{\"type\":\"string\",\"description\":\"base64\"}}},\"Gap\":{\"type\":\"object\",\"properties\":{\"Dropped\":{\"type\":\"integer\"},"
    "\"Layer\":{\"type\":\"string\"},\"Reason\":{\"type\":\"string\"}}},"
    "\"Heartbeat\":{\"type\":\"object\",\"description\":\"ndjson only: sent after 15 s without events\","
    "\"properties\":{\"Time\":{\"type\":\"string\"}}},"
    "\"End\":{\"type\":\"object\",\"description\":\"backend nats: the last record of a from_stream_seq/from_time pass "
    "that cannot go on (the broker no longer has its consumer); then the stream ends (WebSocket: close 1011)\","
    "\"properties\":{\"Reason\":{\"type\":\"string\"}}}}}";

static void op(struct etw_jw *w, const struct etwd_route *r) {
  char m[8];
  size_t i = 0;
  for (; r->method[i] && i < sizeof m - 1; i++) m[i] = (char)(r->method[i] | 0x20);
  m[i] = 0;
  etw_jw_ch(w, '"');
  etw_jw_lit(w, m);
  etw_jw_lit(w, "\":{\"operationId\":");
  etw_jw_cs(w, r->op_id);
  etw_jw_lit(w, ",\"summary\":");
  etw_jw_cs(w, r->summary);
  etw_jw_lit(w, ",\"x-etwd-role\":");
  etw_jw_cs(w, r->role == ROLE_ADMIN ? "admin" : r->role == ROLE_READER ? "reader" : "none");
  etw_jw_lit(w, ",\"security\":");
  etw_jw_lit(w, r->role == ROLE_NONE ? "[]" : "[{\"bearer\":[]},{\"cookie\":[]}]");
  etw_jw_lit(w, ",\"parameters\":[");
  int first = 1;
  for (const char *p = strchr(r->path, '{'); p; p = strchr(p + 1, '{')) {
    const char *e = strchr(p, '}');
    if (!first) etw_jw_ch(w, ',');
    first = 0;
    etw_jw_lit(w, "{\"name\":");
    etw_jw_str(w, p + 1, (size_t)(e - p - 1));
    etw_jw_lit(w, ",\"in\":\"path\",\"required\":true,\"schema\":{\"type\":\"string\"}}");
  }
  if (r->query) {
    const char *q = r->query;
    while (*q) {
      size_t k = strcspn(q, ","), nk = strcspn(q, "!=,"), ek = strcspn(q, "=,");
      int required = q[nk] == '!'; /* "name!": a required parameter; "name=x": x is its example */
      if (!first) etw_jw_ch(w, ',');
      first = 0;
      etw_jw_lit(w, "{\"name\":");
      etw_jw_str(w, q, nk);
      if (ek < k) {
        etw_jw_lit(w, ",\"example\":");
        etw_jw_str(w, q + ek + 1, k - ek - 1);
      }
      int fmt = nk == 6 && !memcmp(q, "format", 6); /* the HTTP stream's representation */
      for (const struct etw_member *mb = etw_members(); mb->name; mb++) /* a stream parameter's doc */
        if (mb->kind == ETW_MEMBER_STREAM && strlen(mb->name) == nk && !memcmp(mb->name, q, nk)) {
          size_t el = strlen(mb->example); /* a JSON string: its text, without the quotes */
          etw_jw_lit(w, ",\"description\":");
          etw_jw_cs(w, mb->doc);
          etw_jw_lit(w, ",\"example\":");
          etw_jw_str(w, mb->example + (mb->example[0] == '"'), el - 2 * (mb->example[0] == '"'));
          break;
        }
      etw_jw_lit(w, required ? ",\"in\":\"query\",\"required\":true,\"schema\":{\"type\":\"string\"}}"
                  : fmt ? ",\"in\":\"query\",\"required\":false,\"schema\":{\"type\":\"string\","
                          "\"enum\":[\"ndjson\",\"csv\"],\"default\":\"ndjson\"}}"
                        : ",\"in\":\"query\",\"required\":false,\"schema\":{\"type\":\"string\"}}");
      q += k;
      if (*q) q++;
    }
  }
  etw_jw_ch(w, ']');
  if (r->body == BODY_JSON && r->req_schema) {
    etw_jw_lit(w, ",\"requestBody\":{\"required\":true,\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/");
    etw_jw_lit(w, r->req_schema);
    etw_jw_lit(w, "\"}}}}");
  } else if (r->body == BODY_RAW) {
    etw_jw_lit(w, ",\"requestBody\":{\"required\":true,\"content\":{\"application/octet-stream\":{\"schema\":{\"type\":\"string\",\"format\":\"binary\"}}}}");
  }
  int created = !strcmp(r->method, "POST") && (r->fn == h_session_create || r->fn == h_file_upload);
  int nocontent = !strcmp(r->method, "DELETE") || r->fn == h_logout;
  int download = r->fn == h_file_get || r->fn == h_session_file;
  etw_jw_lit(w, ",\"responses\":{\"");
  etw_jw_lit(w, created ? "201" : nocontent ? "204" : "200");
  etw_jw_lit(w, "\":{\"description\":\"success\"");
  if (download) {
    etw_jw_lit(w, ",\"content\":{\"application/octet-stream\":{}}},\"206\":{\"description\":"
                  "\"the part asked for with Range: bytes=A-B, A- or -N (one range)\",\"headers\":{"
                  "\"Content-Range\":{\"schema\":{\"type\":\"string\"},\"description\":\"bytes A-B/SIZE\"}},"
                  "\"content\":{\"application/octet-stream\":{}}");
  } else if (r->fn == h_metrics) {
    etw_jw_lit(w, ",\"content\":{\"text/plain\":{\"schema\":{\"type\":\"string\","
                  "\"description\":\"Prometheus text format 0.0.4\"}}}");
  } else if (r->resp_schema && !nocontent) {
    const char *ct = r->fn == h_session_events || r->fn == h_file_events ? "application/x-ndjson" : "application/json";
    etw_jw_lit(w, ",\"content\":{\"");
    etw_jw_lit(w, ct);
    etw_jw_lit(w, "\":{\"schema\":{\"$ref\":\"#/components/schemas/");
    etw_jw_lit(w, r->resp_schema);
    etw_jw_lit(w, "\"}}");
    if (r->fn == h_session_events || r->fn == h_file_events)
      etw_jw_lit(w, ",\"text/csv\":{\"schema\":{\"type\":\"string\",\"description\":\"format=csv: the header "
                    "row " ETW_CSV_COLS ",EventData, then one row per event (RFC 4180; EventData is the event's JSON "
                    "text; a text cell starting with = + - @ TAB or CR that is not a plain number gets a leading ' "
                    "against spreadsheet formula injection); an empty line after 15 s without events; no Gap rows: the chunked body's trailer says "
                    "what the stream lost, Etwd-Events (rows), Etwd-Dropped (events its Gap records would have "
                    "reported), Etwd-Dropped-Layers (hub=N, subscriber=N) and, when the client's own pass ended by "
                    "itself, Etwd-End (the reason an ndjson End record gives)\"}}");
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, '}');
  etw_jw_lit(w, ",\"4XX\":{\"$ref\":\"#/components/responses/Problem\"},"
                "\"default\":{\"$ref\":\"#/components/responses/Problem\"}}}");
}

void etwd_openapi_json(struct etw_jw *w) {
  etw_jw_lit(w, "{\"openapi\":\"3.1.0\",\"info\":{\"title\":\"etwd\",\"version\":\"" ETWD_VERSION
                "\",\"description\":\"Event Tracing for Windows, remotely: sessions, providers, event streams, files.\"},"
                "\"servers\":[{\"url\":\"/\",\"description\":\"the server this document was fetched from\"}],"
                "\"components\":{\"securitySchemes\":{\"bearer\":{\"type\":\"http\",\"scheme\":\"bearer\"},"
                "\"cookie\":{\"type\":\"apiKey\",\"in\":\"cookie\",\"name\":\"etwd_session\"}},"
                "\"responses\":{\"Problem\":{\"description\":\"error (RFC 9457 problem details)\",\"content\":{"
                "\"application/problem+json\":{\"schema\":{\"$ref\":\"#/components/schemas/Problem\"}}}}},"
                "\"schemas\":{");
  etw_jw_lit(w, schemas);
  etw_jw_lit(w, "}},\"paths\":{");
  /* group routes by path, keeping table order */
  int firstp = 1;
  for (const struct etwd_route *r = etwd_routes; r->method; r++) {
    int seen = 0;
    for (const struct etwd_route *q = etwd_routes; q < r; q++) seen |= !strcmp(q->path, r->path);
    if (seen) continue;
    if (!firstp) etw_jw_ch(w, ',');
    firstp = 0;
    etw_jw_cs(w, r->path);
    etw_jw_lit(w, ":{");
    int firsto = 1;
    for (const struct etwd_route *q = r; q->method; q++) {
      if (strcmp(q->path, r->path)) continue;
      if (!firsto) etw_jw_ch(w, ',');
      firsto = 0;
      op(w, q);
    }
    etw_jw_ch(w, '}');
  }
  etw_jw_lit(w, "}}");
}
