/* test_linux_ktrim.c — the tracing frames of a kernel stack (linux_sym.c: lx_sym_is_tracing,
 * lx_sym_kframes; docs/linux.md "Tracing frames"): the prefix rule on names, and whole stacks
 * built from real addresses of /proc/kallsyms (root): the leading tracing frames are left out,
 * the same again from the frame cache, nothing with trim off, a stack of nothing but tracing
 * frames kept whole, an address without a symbol ending them, and a tracing frame after the
 * first other frame kept. Root: /proc/kallsyms shows other users zero addresses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linux/linux_sym.h"
#include "t.h"

static void names(void) {
  CHECK(lx_sym_is_tracing("trace_event_raw_event_sched_switch"));
  CHECK(lx_sym_is_tracing("trace_event_raw_event_sched_wakeup_template"));
  CHECK(lx_sym_is_tracing("__traceiter_sys_enter"));
  CHECK(lx_sym_is_tracing("ftrace_syscall_enter"));
  CHECK(lx_sym_is_tracing("perf_trace_sched_switch"));
  CHECK(lx_sym_is_tracing("trace_call_bpf"));
  CHECK(lx_sym_is_tracing("stack_trace_save"));
  CHECK(lx_sym_is_tracing("event_triggers_post_call"));
  CHECK(!lx_sym_is_tracing("syscall_trace_enter")); /* the kernel code that hit the tracepoint */
  CHECK(!lx_sym_is_tracing("syscall_exit_work"));
  CHECK(!lx_sym_is_tracing("do_execveat_common.isra.0"));
  CHECK(!lx_sym_is_tracing("trace_hardirqs_on")); /* preemptirq's tracepoints sit in it: kept */
  CHECK(!lx_sym_is_tracing("__schedule"));
  CHECK(!lx_sym_is_tracing(""));
  CHECK(!lx_sym_is_tracing(NULL));
}

/* the address of kernel text symbol @name, or 0 */
static uint64_t ksym(const char *name) {
  FILE *f = fopen("/proc/kallsyms", "r");
  char line[512], want[160];
  snprintf(want, sizeof want, " %s\n", name);
  uint64_t a = 0;
  while (f && fgets(line, sizeof line, f)) {
    size_t n = strlen(line), w = strlen(want);
    if (n > w && !strcmp(line + n - w, want) && (line[17] == 't' || line[17] == 'T')) {
      a = strtoull(line, NULL, 16);
      break;
    }
  }
  if (f) fclose(f);
  return a;
}

/* the symbols of rendered frames, space-separated */
static void syms(const char *json, char *out, size_t n) {
  out[0] = 0;
  for (const char *p = json; (p = strstr(p, "\"Symbol\":\"")); ) {
    p += 10;
    const char *e = strchr(p, '"');
    if (!e) break;
    size_t len = strlen(out);
    snprintf(out + len, n - len, "%s%.*s", len ? " " : "", (int)(e - p), p);
  }
}

static void stack(const uint64_t *a, uint32_t n, int trim, uint32_t want_cut, const char *want) {
  struct etw_jw w;
  char got[512];
  etw_jw_init(&w, 0);
  CHECK_EQ(lx_sym_kframes(&w, a, n, trim), want_cut);
  syms(etw_jw_cstr(&w), got, sizeof got);
  CHECK_STR(got, want);
  const char *s = etw_jw_cstr(&w);
  CHECK(s[0] == '{' && s[strlen(s) - 1] == '}' && !strstr(s, ",,")); /* no stray comma */
  etw_jw_free(&w);
}

static void stacks(void) {
  uint64_t raw = ksym("trace_event_raw_event_sys_enter"), it = ksym("__traceiter_sys_enter"),
           ste = ksym("syscall_trace_enter"), ds = ksym("do_syscall_64");
  CHECK(raw && it && ste && ds);
  if (!(raw && it && ste && ds)) return;
  /* return addresses a few bytes into each function, innermost first, as the kernel records */
  uint64_t a[4] = {raw + 0x40, it + 0x20, ste + 0x30, ds + 0x50};
  for (int round = 0; round < 2; round++) /* the second from the frame cache */
    stack(a, 4, 1, 2, "syscall_trace_enter do_syscall_64");
  stack(a, 4, 0, 0, "trace_event_raw_event_sys_enter __traceiter_sys_enter syscall_trace_enter do_syscall_64");
  stack(a, 2, 1, 0, "trace_event_raw_event_sys_enter __traceiter_sys_enter"); /* kept whole */
  uint64_t b[3] = {0x10, it + 0x20, ste + 0x30}; /* no symbol: not known to be tracing */
  stack(b, 3, 1, 0, "__traceiter_sys_enter syscall_trace_enter");
  uint64_t c[3] = {ste + 0x30, it + 0x20, ds + 0x50}; /* only the LEADING ones go */
  stack(c, 3, 1, 0, "syscall_trace_enter __traceiter_sys_enter do_syscall_64");
}

int main(void) {
  names();
  stacks(); /* (needs root: /proc/kallsyms shows other users zero addresses) */
  T_DONE();
}
