/* linux_stack.c — call stacks of Linux live events.
 *
 * Kernel side (control thread: open/enable/disable, lx_stk_set). Kernel stacks come from one
 * of two sources. Option mode (c->opt: every provider of the session wants stacks at open, or
 * more than LX_STK_TRIGGERS_MAX events do): the instance's `stacktrace` option records a kernel
 * stack after every committed event of the instance (the filters apply first; markers get
 * none); those that follow events which want none (etwd's hidden task events, a provider
 * without stacks) are dropped here, counted. Trigger mode (a mixed session with few stack
 * events, or a provider without stacks enabled later: lx_stk_to_triggers): each event that
 * wants stacks gets the per-event `stacktrace` trigger. Option mode exists because removing a
 * trigger costs the kernel an RCU grace period (~70-100 ms here) under its global event_mutex:
 * removing a session with triggers on all of `syscalls` (~700 events) took ~60 s, blocking
 * every tracefs operation of the machine meanwhile. User stacks: the instance's
 * `userstacktrace` option records one after EVERY event of the instance (the kernel has no
 * per-event user-stack trigger), so it is on while any event wants stacks and the user stacks
 * that follow other events are dropped here (counted). They are unwound by frame pointers, at
 * most 8 frames (the kernel's user_stack record).
 *
 * Reader side (one lx_stk per reader thread, lx_stk_record): the stacks are separate records of
 * the ftrace system (`user_stack` and `kernel_stack`, in either order) that follow their event
 * on the same CPU. An event that wants stacks is encoded and committed as usual and then HELD:
 * it is the batch's last event, so each stack record that follows rewrites its tail,
 * `…}` → `…,"Stack":[kernel frames…, user frames…]}` (innermost first; frames from linux_sym.c).
 * The next other record ends the hold. A stack whose event was already published (a batch
 * flushed in between: rare) is orphaned and counted, never delivered on its own.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracefs.h>

#include "linux_int.h"
#include "linux_sym.h"

#define STK_TXT_MAX (64u * 1024) /* rendered frames of one stack */
#define STK_KFRAMES 128

struct lx_stk {
  _Atomic uint8_t *want;
  int kid, uid, xid; /* ids of ftrace:kernel_stack, ftrace:user_stack, sched:sched_process_exec */
  /* the held event: hb->ev[hidx] (while hb->n == hidx + 1), its `}` at hend */
  struct etw_batch *hb;
  uint32_t hidx;
  size_t hend;
  int held;
  struct etw_jw ktxt, utxt; /* the frames of the held event's stacks, rendered */
};

/* an event's id, from its format file (the ftrace system's events have no `id` file) */
static int event_id(struct tracefs_instance *inst, const char *sys, const char *ev) {
  int size = 0;
  char *t = tracefs_event_file_read(inst, sys, ev, "format", &size);
  const char *p = t ? strstr(t, "\nID: ") : NULL;
  int id = p ? atoi(p + 5) : -1;
  free(t);
  return id > 0 && id <= 65535 ? id : -1;
}

/* The trigger always carries a condition, the event's own filter: a trigger without one runs
 * at every hit of the tracepoint, before the event's filter and its pid filter are applied (so
 * every syscall of every process, etwd's readers included, would record a kernel stack); a
 * conditional trigger runs on the record, only when it matches, after the event is committed. */
static char *trigger_text(const char *cond) {
  if (!cond || !*cond || !strcmp(cond, "0")) cond = "common_pid >= 0";
  size_t n = strlen(cond) + 32;
  char *t = malloc(n);
  if (t) snprintf(t, n, "stacktrace if %s", cond);
  return t;
}

/* want[id]: 0 = no stacks, WANT_OPT = stacks from the option, WANT_TRIG = from its trigger */
#define WANT_OPT 1
#define WANT_TRIG 2

/* the stacktrace trigger of one event on (@cond) or off; 0 or -1 */
static int trigger_write(struct tracefs_instance *inst, const char *sys, const char *ev, int on,
                         const char *cond) {
  char *t = on ? trigger_text(cond) : strdup("!stacktrace");
  if (!t) return -1;
  int r = tracefs_event_file_write(inst, sys, ev, "trigger", t);
  free(t);
  return r < 0 ? -1 : 0;
}

/* the instance's options as the want flags need them (c->nwant) */
static enum etw_err options_apply(struct lx_stkcfg *c, struct tracefs_instance *inst,
                                  const char *pfx, struct etw_status *st) {
  char field[128];
  snprintf(field, sizeof field, "%s/stacks", pfx);
  int u = c->nwant > 0;
  if (u != c->ustack) {
    int r = u ? tracefs_option_enable(inst, TRACEFS_OPTION_USERSTACKTRACE)
              : tracefs_option_disable(inst, TRACEFS_OPTION_USERSTACKTRACE);
    if (r != 0 && u)
      return etw_fail(st, ETW_E_KERNEL, field, "cannot turn the userstacktrace option on");
    c->ustack = u;
  }
  int k = c->opt && c->nwant > 0;
  if (k != c->kopt) {
    int r = k ? tracefs_option_enable(inst, TRACEFS_OPTION_STACKTRACE)
              : tracefs_option_disable(inst, TRACEFS_OPTION_STACKTRACE);
    if (r != 0 && k)
      return etw_fail(st, ETW_E_KERNEL, field, "cannot turn the stacktrace option on");
    c->kopt = k;
  }
  return ETW_E_OK;
}

enum etw_err lx_stk_set(struct lx_stkcfg *c, struct tracefs_instance *inst, const char *sys,
                        char *const *evs, uint32_t nev, int on, const char *cond,
                        const char *pfx, struct etw_status *st) {
  _Atomic uint8_t *want = atomic_load(&c->want);
  if (!want && !on) return ETW_E_OK;
  if (!want) {
    if (!(want = calloc(65536, 1))) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    atomic_store(&c->want, want);
  }
  /* too many triggers to remove in reasonable time: the option from now on (the triggers
   * already set stay until the instance goes, their events' second kernel stack replacing the
   * first) */
  if (on && !c->opt && c->ntrig + nev > LX_STK_TRIGGERS_MAX) c->opt = 1;
  char field[128];
  for (uint32_t j = 0; j < nev; j++) {
    int id = event_id(inst, sys, evs[j]);
    if (id < 0) continue;
    uint8_t w = atomic_load(&want[id]);
    if (!!on == !!w) continue;
    if (w == WANT_TRIG || (on && !c->opt)) {
      if (trigger_write(inst, sys, evs[j], on, cond) != 0) {
        if (!on) continue;
        snprintf(field, sizeof field, "%s/stacks", pfx);
        return etw_fail(st, ETW_E_KERNEL, field, "cannot set the stacktrace trigger of %s:%s", sys,
                        evs[j]);
      }
      c->ntrig = on ? c->ntrig + 1 : c->ntrig - 1;
    }
    atomic_store(&want[id], (uint8_t)(!on ? 0 : c->opt ? WANT_OPT : WANT_TRIG));
    c->nwant = on ? c->nwant + 1 : c->nwant - 1;
  }
  return options_apply(c, inst, pfx, st);
}

int lx_stk_can_trigger(const struct lx_stkcfg *c) {
  return c->opt && c->nwant && c->ntrig + c->nwant <= LX_STK_TRIGGERS_MAX;
}

enum etw_err lx_stk_to_triggers(struct lx_stkcfg *c, struct tracefs_instance *inst,
                                const char *sys, char *const *evs, uint32_t nev,
                                const char *cond, const char *pfx, struct etw_status *st) {
  _Atomic uint8_t *want = atomic_load(&c->want);
  for (uint32_t j = 0; want && j < nev; j++) {
    int id = event_id(inst, sys, evs[j]);
    if (id < 0 || atomic_load(&want[id]) != WANT_OPT) continue;
    if (trigger_write(inst, sys, evs[j], 1, cond) != 0) {
      char field[128];
      snprintf(field, sizeof field, "%s/stacks", pfx);
      return etw_fail(st, ETW_E_KERNEL, field, "cannot set the stacktrace trigger of %s:%s", sys,
                      evs[j]);
    }
    atomic_store(&want[id], WANT_TRIG);
    c->ntrig++;
  }
  return ETW_E_OK;
}

/* after the triggers are on (an event may get two kernel stacks meanwhile: the last wins) */
void lx_stk_opt_off(struct lx_stkcfg *c, struct tracefs_instance *inst) {
  c->opt = 0;
  if (c->kopt) tracefs_option_disable(inst, TRACEFS_OPTION_STACKTRACE);
  c->kopt = 0;
}

void lx_stkcfg_free(struct lx_stkcfg *c) {
  free((void *)atomic_load(&c->want));
  atomic_store(&c->want, NULL);
}

void lx_stk_attach(struct lx_dec *d, _Atomic uint8_t *want) {
  if (d->stk || !want) return;
  struct lx_stk *k = calloc(1, sizeof *k);
  if (!k) return;
  k->want = want;
  k->kid = event_id(NULL, "ftrace", "kernel_stack");
  k->uid = event_id(NULL, "ftrace", "user_stack");
  k->xid = event_id(NULL, "sched", "sched_process_exec");
  etw_jw_init(&k->ktxt, STK_TXT_MAX);
  etw_jw_init(&k->utxt, STK_TXT_MAX);
  d->stk = k;
}

int lx_stk_is(const struct lx_dec *d, const unsigned char *data, uint32_t size) {
  if (size < 8) return 0;
  uint16_t t;
  memcpy(&t, data, 2);
  return t == d->stk->kid || t == d->stk->uid;
}

void lx_stk_free(struct lx_dec *d) {
  if (!d->stk) return;
  etw_jw_free(&d->stk->ktxt);
  etw_jw_free(&d->stk->utxt);
  free(d->stk);
  d->stk = NULL;
}

/* the addresses of a stack record: kernel_stack {int size; unsigned long caller[size]},
 * user_stack {unsigned tgid; unsigned long caller[8]} (0-terminated) */
static uint32_t stack_addrs(const unsigned char *data, uint32_t size, int kernel, uint64_t *a,
                            uint32_t max) {
  if (size < 16) return 0;
  uint32_t n = (size - 16) / 8, cnt;
  memcpy(&cnt, data + 8, 4);
  if (kernel && cnt < n) n = cnt;
  if (n > max) n = max;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t v;
    memcpy(&v, data + 16 + 8 * i, 8);
    if (!v || v == UINT64_MAX) break;
    a[k++] = v;
  }
  return k;
}

/* rewrite the held event's tail with the frames rendered so far */
static void held_rewrite(struct lx_stk *k) {
  struct etw_batch *b = k->hb;
  struct etw_jw *w = &b->data;
  size_t need = 16 + k->ktxt.len + k->utxt.len;
  if (k->hend + need >= w->max) { /* no room in this batch: the event keeps what it has */
    lx_stk_count(1, 1);
    k->held = 0;
    return;
  }
  size_t tgt = k->hend + need;
  if (tgt > w->len && etw_jw_reserve(w, tgt - w->len)) { /* out of memory */
    etw_jw_truncate(w, w->len);                           /* (clears the writer's error) */
    lx_stk_count(1, 1);
    k->held = 0;
    return;
  }
  w->len = k->hend;
  etw_jw_lit(w, ",\"Stack\":[");
  if (k->ktxt.len) etw_jw_raw(w, k->ktxt.buf, k->ktxt.len);
  if (k->ktxt.len && k->utxt.len) etw_jw_ch(w, ',');
  if (k->utxt.len) etw_jw_raw(w, k->utxt.buf, k->utxt.len);
  etw_jw_lit(w, "]}");
  b->ev[k->hidx].len = (uint32_t)(w->len - b->ev[k->hidx].off);
  lx_stk_count(0, 1);
}

void lx_stk_record(struct lx_dec *d, const unsigned char *data, uint32_t size, uint64_t ts,
                   struct lx_sink *s) {
  struct lx_stk *k = d->stk;
  int type = -1;
  if (size >= 8) {
    uint16_t t;
    memcpy(&t, data, 2);
    type = t;
  }
  if (type >= 0 && (type == k->kid || type == k->uid)) {
    if (!k->held) {
      lx_stk_count(2, 1);
      return;
    }
    if (s->b != k->hb || s->b->n != k->hidx + 1) { /* published since */
      k->held = 0;
      lx_stk_count(1, 1);
      return;
    }
    uint64_t a[STK_KFRAMES];
    int kern = type == k->kid;
    uint32_t n = stack_addrs(data, size, kern, a, STK_KFRAMES), tgid = 0;
    if (!kern) memcpy(&tgid, data + 8, 4);
    struct etw_jw *t = kern ? &k->ktxt : &k->utxt;
    t->len = 0;
    if (n && (kern || tgid)) lx_sym_frames(t, kern ? 0 : tgid, a, n, 0);
    if (t->err) { /* too long: this part is left out */
      t->len = 0;
      t->err = 0;
    }
    held_rewrite(k);
    return;
  }
  k->held = 0;
  if (type >= 0 && type == k->xid && size >= 8) { /* exec: new mappings for this process */
    int32_t pid;
    memcpy(&pid, data + 4, 4);
    lx_sym_forget((uint32_t)pid);
  }
  struct etw_batch *b0 = s->b;
  uint32_t n0 = b0 ? b0->n : 0;
  lx_dec_event(d, data, size, ts, s);
  struct etw_batch *b = s->b;
  if (type < 0 || !atomic_load_explicit(&k->want[type], memory_order_relaxed) || !b || !b->n ||
      (b == b0 && b->n != n0 + 1))
    return;
  const struct etw_evref *r = &b->ev[b->n - 1];
  if (r->len < 2 || b->data.buf[r->off + r->len - 1] != '}') return;
  k->held = 1;
  k->hb = b;
  k->hidx = b->n - 1;
  k->hend = r->off + r->len - 1;
  k->ktxt.len = k->utxt.len = 0;
}
