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
 * `…}` → `…,"Stack":[kernel frames…, user frames…]}` (innermost first; frames from linux_sym.c;
 * the kernel stack's leading frames of the tracing machinery left out unless "stacks":"raw").
 * The next other record ends the hold. A held event takes the first kernel and the first user
 * stack that follow it: a second one of a kind belongs to an event that an interrupt interrupted
 * between its commit and its stack record (the interrupt's event and stacks come in between, and
 * end that event's hold), so it is orphaned. A stack whose event was already published (a batch
 * flushed in between: rare) is orphaned and counted, never delivered on its own.
 *
 * `etwd convert` of a trace.dat joins with the same code (lx_stk_attach_file, one joiner per CPU
 * stream of the file, fed its records in order by linux_dat.c): ids from the file's formats,
 * every event wanting stacks, user frames as addresses, kernel frames symbolised only when the
 * file's first kernel stack fits this machine's kallsyms (kframes).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <tracefs.h>

#include "etwcore/backend.h"
#include "linux_int.h"
#include "linux_sym.h"
#include "linux_uaddr.h"

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
  int hraw; /* the held event wants its kernel stack raw (WANT_RAW) */
  int hgot; /* the stacks it has: 1 kernel, 2 user (a second one of a kind is not its own) */
  struct etw_jw ktxt, utxt; /* the frames of the held event's stacks, rendered */
  /* a trace.dat's (lx_stk_attach_file; NULL live): how its kernel frames are written, shared by
   * its streams — -1 not decided yet (its first kernel stack decides), 1 symbols from this
   * machine's kallsyms, 0 addresses only; its user frames are addresses only */
  int *fks;
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

/* want[id]: 0 = no stacks, WANT_OPT = stacks from the option, WANT_TRIG = from its trigger
 * (WANT_SRC: the source), plus WANT_RAW for "stacks":"raw" (kernel stacks not trimmed) */
#define WANT_OPT 1
#define WANT_TRIG 2
#define WANT_SRC 3
#define WANT_RAW 4

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
   * already set stay until the instance goes, their events' second kernel stack orphaned) */
  if (on && !c->opt && c->ntrig + nev > LX_STK_TRIGGERS_MAX) c->opt = 1;
  char field[128];
  for (uint32_t j = 0; j < nev; j++) {
    int id = event_id(inst, sys, evs[j]);
    if (id < 0) continue;
    uint8_t w = atomic_load(&want[id]);
    if (!!on == !!w) continue;
    if ((w & WANT_SRC) == WANT_TRIG || (on && !c->opt)) {
      if (trigger_write(inst, sys, evs[j], on, cond) != 0) {
        if (!on) continue;
        snprintf(field, sizeof field, "%s/stacks", pfx);
        return etw_fail(st, ETW_E_KERNEL, field, "cannot set the stacktrace trigger of %s:%s", sys,
                        evs[j]);
      }
      c->ntrig = on ? c->ntrig + 1 : c->ntrig - 1;
    }
    uint8_t raw = on == ETW_STACKS_RAW ? WANT_RAW : 0;
    atomic_store(&want[id], (uint8_t)(!on ? 0 : (c->opt ? WANT_OPT : WANT_TRIG) | raw));
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
    uint8_t w = id < 0 ? 0 : atomic_load(&want[id]);
    if ((w & WANT_SRC) != WANT_OPT) continue;
    if (trigger_write(inst, sys, evs[j], 1, cond) != 0) {
      char field[128];
      snprintf(field, sizeof field, "%s/stacks", pfx);
      return etw_fail(st, ETW_E_KERNEL, field, "cannot set the stacktrace trigger of %s:%s", sys,
                      evs[j]);
    }
    atomic_store(&want[id], (uint8_t)(WANT_TRIG | (w & WANT_RAW)));
    c->ntrig++;
  }
  return ETW_E_OK;
}

/* after the triggers are on (an event may get two kernel stacks meanwhile: the first is kept) */
void lx_stk_opt_off(struct lx_stkcfg *c, struct tracefs_instance *inst) {
  c->opt = 0;
  if (c->kopt) tracefs_option_disable(inst, TRACEFS_OPTION_STACKTRACE);
  c->kopt = 0;
}

void lx_stkcfg_free(struct lx_stkcfg *c) {
  free((void *)atomic_load(&c->want));
  atomic_store(&c->want, NULL);
}

static struct lx_stk *stk_new(struct lx_dec *d, _Atomic uint8_t *want) {
  if (d->stk || !want) return NULL;
  struct lx_stk *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->want = want;
  etw_jw_init(&k->ktxt, STK_TXT_MAX);
  etw_jw_init(&k->utxt, STK_TXT_MAX);
  return d->stk = k;
}

void lx_stk_attach(struct lx_dec *d, _Atomic uint8_t *want) {
  struct lx_stk *k = stk_new(d, want);
  if (!k) return;
  k->kid = event_id(NULL, "ftrace", "kernel_stack");
  k->uid = event_id(NULL, "ftrace", "user_stack");
  k->xid = event_id(NULL, "sched", "sched_process_exec");
}

/* an event's id in @tep, or -1 */
static int tep_id(struct tep_handle *tep, const char *sys, const char *ev) {
  struct tep_event *e = tep_find_event_by_name(tep, sys, ev);
  return e ? e->id : -1;
}

void lx_stk_attach_file(struct lx_dec *d, _Atomic uint8_t *want, int *ksyms) {
  int kid = tep_id(d->tep, "ftrace", "kernel_stack"), uid = tep_id(d->tep, "ftrace", "user_stack");
  if (kid < 0 && uid < 0) return; /* a file without stack records: nothing to join */
  struct lx_stk *k = stk_new(d, want);
  if (!k) return;
  k->kid = kid;
  k->uid = uid;
  k->xid = -1; /* (no mappings are read for a file) */
  k->fks = ksyms;
}

_Atomic uint8_t *lx_stk_want_all(void) {
  _Atomic uint8_t *w = malloc(65536);
  if (w)
    for (int i = 0; i < 65536; i++) atomic_init(&w[i], WANT_OPT);
  return w;
}

int lx_stk_is(const struct lx_dec *d, const unsigned char *data, uint32_t size) {
  if (size < 8) return 0;
  uint16_t t;
  memcpy(&t, data, 2);
  return t == d->stk->kid || t == d->stk->uid;
}

int lx_stk_waiting(const struct lx_dec *d, const struct lx_sink *s) {
  const struct lx_stk *k = d->stk;
  return k && k->held && k->hgot != 3 && s->b && s->b == k->hb && s->b->n == k->hidx + 1;
}

void lx_stk_free(struct lx_dec *d) {
  if (!d->stk) return;
  etw_jw_free(&d->stk->ktxt);
  etw_jw_free(&d->stk->utxt);
  free(d->stk);
  d->stk = NULL;
}

/* Code addresses. A kernel stack's are in the upper half of the address space; a user stack's in
 * user space (linux_uaddr.h: by architecture, arm64's pointer-authentication bits stripped). The
 * kernel unwinds user stacks by frame pointers; code built without them leaves any value in %rbp,
 * and the walk then takes whatever lies above it for return addresses (measured on 6.18 under
 * load: about 2 in 1,000 user stacks, e.g. 0x8010000000000000 or 0x30; docs/linux.md "Stacks").
 * Junk that falls inside user space is caught later, by the process's executable mappings
 * (lx_sym_uframes). */
uint32_t lx_stk_addrs(const unsigned char *data, uint32_t size, int kernel, uint64_t *a,
                      uint32_t max, uint32_t *bad) {
  *bad = 0;
  if (size < 16) return 0;
  uint32_t n = (size - 16) / 8, cnt; /* (a record's size may include padding) */
  memcpy(&cnt, data + 8, 4);
  if (kernel && cnt < n) n = cnt;
  if (n > max) n = max;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t v;
    memcpy(&v, data + 16 + 8 * i, 8);
    if (!v || v == UINT64_MAX) break;
    if (!kernel) v = lx_uaddr_strip(v);
    if (*bad || !(kernel ? v >= 1ULL << 63 : lx_uaddr_code(v)))
      ++*bad; /* the walk went astray: none after it is kept */
    else
      a[k++] = v;
  }
  return k;
}

/* a kernel stack's frames: a file's as its state says (the first kernel stack decides: its
 * innermost frame is the tracing machinery by this machine's kallsyms, or the kernel that
 * recorded it had its text elsewhere — another boot, another machine), live ones symbolised */
static void kframes(struct lx_stk *k, struct etw_jw *t, const uint64_t *a, uint32_t n) {
  if (k->fks && *k->fks < 0) *k->fks = lx_sym_ktracing(a[0]);
  if (k->fks && !*k->fks) lx_sym_addrs(t, a, n);
  else lx_sym_kframes(t, a, n, !k->hraw);
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
    int kern = type == k->kid;
    if (k->hgot & (kern ? 1 : 2)) { /* an interrupted event's, recorded after the interrupt's */
      lx_stk_count(1, 1);
      return;
    }
    k->hgot |= kern ? 1 : 2;
    uint64_t a[STK_KFRAMES];
    uint32_t bad, n = lx_stk_addrs(data, size, kern, a, STK_KFRAMES, &bad), tgid = 0;
    if (!kern) memcpy(&tgid, data + 8, 4);
    struct etw_jw *t = kern ? &k->ktxt : &k->utxt;
    t->len = 0;
    if (n && kern) kframes(k, t, a, n);
    else if (n && tgid && k->fks) lx_sym_addrs(t, a, n);
    else if (n && tgid) bad += lx_sym_uframes(t, tgid, a, n); /* + those outside its code */
    if (bad) {
      atomic_fetch_add_explicit(&d->stk_bad[kern ? 0 : 1], bad, memory_order_relaxed);
      lx_stk_count(kern ? 3 : 4, bad);
    }
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
  uint8_t w = type < 0 ? 0 : atomic_load_explicit(&k->want[type], memory_order_relaxed);
  if (!w || !b || !b->n || (b == b0 && b->n != n0 + 1)) return;
  const struct etw_evref *r = &b->ev[b->n - 1];
  if (r->len < 2 || b->data.buf[r->off + r->len - 1] != '}') return;
  k->held = 1;
  k->hb = b;
  k->hidx = b->n - 1;
  k->hend = r->off + r->len - 1;
  k->hraw = !!(w & WANT_RAW);
  k->hgot = 0;
  k->ktxt.len = k->utxt.len = 0;
}
