/* test_dec_opcodes.c — a manifest's opcodes: one declared inside a <task> belongs to that task,
 * so two tasks may each have an opcode of the same name (and other values and messages): an
 * event of task B with opcode "Step" is "Beta/Step of B" (task B's opcode's message and value),
 * not task A's; an opcode declared outside any task (the provider's <opcodes>) serves every
 * task. Decoded in fast and in reference mode (dec_man.c named_set, load_provider, ev_build).
 */
#include "decode.h"
#include "t.h"
#include "test_tl_util.h"

static const char MANIFEST[] =
    "<instrumentationManifest><instrumentation><events>"
    "<provider name='Ops-Provider' guid='{11111111-2222-3333-4444-777777777777}' symbol='P'>"
    "<tasks>"
    "<task name='A' value='1' message='$(string.a)'><opcodes>"
    "<opcode name='Step' value='10' message='$(string.stepa)'/></opcodes></task>"
    "<task name='B' value='2' message='$(string.b)'><opcodes>"
    "<opcode name='Step' value='11' message='$(string.stepb)'/></opcodes></task>"
    "</tasks>"
    "<opcodes><opcode name='Shared' value='12' message='$(string.shared)'/></opcodes>"
    "<events>"
    "<event value='1' task='A' opcode='Step'/>"
    "<event value='2' task='B' opcode='Step'/>"
    "<event value='3' task='B' opcode='Shared'/>"
    "</events>"
    "</provider></events></instrumentation>"
    "<localization><resources culture='en-US'><stringTable>"
    "<string id='a' value='Alpha'/><string id='b' value='Beta'/><string id='stepa' value='Step of A'/>"
    "<string id='stepb' value='Step of B'/><string id='shared' value='Common'/>"
    "</stringTable></resources></localization></instrumentationManifest>";

/* event @id of task @task with opcode @op decodes to EventName @name */
static void check_event(struct etw_decoder *d, unsigned id, unsigned task, unsigned op, const char *name) {
  struct etw_rec r;
  init_rec(&r);
  etw_parse_guid("11111111-2222-3333-4444-777777777777", r.provider_id);
  r.desc.id = (uint16_t)id;
  r.desc.task = (uint16_t)task;
  r.desc.opcode = (uint8_t)op;
  struct etw_jw w;
  etw_jw_init(&w, 0);
  char want[128];
  snprintf(want, sizeof want, "\"EventName\":\"%s\"", name);
  for (int i = 0; i < 3; i++) { /* (a fast decoder's plan is built on first use) */
    int ok;
    const char *j = decode(d, &r, &w, &ok);
    CHECK(ok);
    if (!strstr(j, want)) fprintf(stderr, "want %s in\n%s\n", want, j);
    CHECK(strstr(j, want) != NULL);
  }
  etw_jw_free(&w);
}

int main(void) {
  for (int reference = 0; reference < 2; reference++) {
    struct etw_decoder *d = etw_decoder_new(NULL);
    etw_decoder_set_mode(d, reference ? ETW_DECODE_REFERENCE : ETW_DECODE_FAST);
    CHECK_EQ(dec_manifest_load(d, MANIFEST, sizeof MANIFEST - 1, NULL), 0);
    check_event(d, 1, 1, 10, "Alpha/Step of A");
    check_event(d, 2, 2, 11, "Beta/Step of B");
    check_event(d, 3, 2, 12, "Beta/Common");
    etw_decoder_free(d);
  }
  T_DONE();
}
