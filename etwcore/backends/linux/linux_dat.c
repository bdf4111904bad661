/* linux_dat.c — a trace.dat as a stream of encoded events, for `etwd convert` (linux_dat.h).
 *
 * Debian's libtracecmd reads the file (any version trace-cmd reads: etwd's v6, trace-cmd
 * record's and extract's v6/v7, compressed or not, with buffer instances); its tep handle holds
 * the file's event formats. Every (buffer, CPU) is a stream of records in time order; the streams
 * are merged by time (one record held per stream, the earliest taken: a scan, as files have few
 * CPUs). Each record goes through the live stream's decoder (linux_decode.c: one struct lx_dec
 * per stream, all on the file's tep) into a one-event batch, so the text is the live stream's:
 * ProcessName from the file's own comm changes (task_newtask, task_rename, sched_process_fork /
 * exec — linux_comm.c's table, which is always complete here as the records come in time order),
 * else the file's saved cmdlines, never this machine's /proc; ProcessID is the thread id (neither
 * trace.dat version has a place for thread group ids: trace-cmd.dat.v6(5), v7(5)). Times: a trace
 * clock of wall time (trace-cmd record --date, clock realtime) is UTC as it is; other clocks
 * (etwd's mono, trace-cmd's local) are offset by this machine's REALTIME - MONOTONIC now
 * (lx_dat_clock_guessed).
 *
 * Stacks: each stream's decoder has linux_stack.c's joiner (lx_stk_attach_file), fed the stream's
 * records in order as a live reader feeds it a CPU's: when an event is handed out, the stack
 * records that follow it on its CPU are read at once and joined onto it (either order, the first
 * of each kind; the owner rules are the joiner's); a stack record with no event to take it (an
 * interrupted event's, or the stream's first) is orphaned, never an event. Every event wants
 * stacks (the file does not say which asked). Kernel frames: this machine's kallsyms when the
 * file is from this boot (before_boot, then the joiner's test of the first kernel stack), else
 * addresses; user frames: addresses (no process mappings in the file).
 *
 * Damage: lx_dat_check (linux_datchk.c) looks at a v6 file's tables before libtracecmd does
 * (libtracecmd crashes on a file cut inside its CPU data); a cut file is read through a repaired
 * private copy and lx_dat_damage says what is missing.
 *
 * Owned by one thread (the convert CLI); everything is freed by lx_dat_close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <trace-cmd.h>

#include "linux/linux_dat.h"
#include "linux/linux_int.h"
#include "linux/linux_sess.h" /* lx_calib_offset */
#include "linux/linux_sym.h"  /* lx_stk_counted */

#ifdef __SANITIZE_ADDRESS__
/* libtraceevent 1.7.1 leaks a few bytes in tep_parse_event for some of the formats trace-cmd
 * stores (seen with `trace-cmd extract`'s files); not etwd's memory: not reported by the
 * sanitizer build's leak check (a leaked handle of ours is still: its own allocations) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:tep_parse_event\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
#endif

#define DAT_MAX_STREAMS 4096 /* (buffer, CPU) pairs: beyond them the file is refused */
#define DAT_WALL_NS 100000000000000000LL /* times above this (1973) are taken as UTC already */

struct stream {
  struct tracecmd_input *h; /* the buffer's handle (not owned, but for instances: see own) */
  int cpu;
  struct tep_record *rec;   /* the next record of this stream, or NULL (at its end) */
  struct lx_dec *dec;       /* made at its first record */
};

struct lx_dat {
  struct tracecmd_input *top;
  struct tracecmd_input **inst; /* buffer instances' handles (owned) */
  int ninst;
  struct stream *s;
  int ns;
  struct tep_record *cur;   /* the record whose event was handed out last (freed at the next) */
  struct lx_comm *cm;       /* comm changes seen so far (ncpu 0: every lookup is complete) */
  struct etw_batch *b;      /* one event at a time */
  int64_t offset;           /* added to a record's time to get UTC ns */
  int guessed, clock_set, other_boot;
  uint64_t dropped, lost, lost_unknown;
  _Atomic uint8_t *want;    /* every event wants its stacks (linux_stack.c), shared by the decoders */
  int ksyms;                /* kernel frames: -1 undecided, 1 this machine's kallsyms, 0 addresses */
  char damage[600];         /* "" or what lx_dat_check found (truncated: read up to the cut) */
  uint64_t stk0[2];         /* the process's stack record counts at open: joined, orphaned */
};

static void sink_flush(void *ctx, struct lx_sink *s) {
  (void)ctx;
  s->b->n = 0; /* the caller takes each event out at once: the batch only fills with one */
  s->b->data.len = 0;
}

/* the stream's next record (NULL at its end), its loss counted */
static void next_rec(struct lx_dat *r, struct stream *s) {
  struct tep_record *rec = s->rec = tracecmd_read_data(s->h, s->cpu);
  if (!rec) return;
  if (rec->missed_events > 0) r->lost += (uint64_t)rec->missed_events;
  else if (rec->missed_events < 0) r->lost_unknown++;
}

static int add_streams(struct lx_dat *r, struct tracecmd_input *h) {
  int ncpu = tep_get_cpus(tracecmd_get_tep(h));
  for (int c = 0; c < ncpu; c++) {
    if (r->ns >= DAT_MAX_STREAMS) return -1;
    struct stream *n = realloc(r->s, (size_t)(r->ns + 1) * sizeof *n);
    if (!n) return -1;
    r->s = n;
    r->s[r->ns++] = (struct stream){h, c, NULL, NULL};
    next_rec(r, &r->s[r->ns - 1]);
  }
  return 0;
}

/* Whether the file was recorded before this boot, by its earliest record: boot-based times
 * beyond this machine's uptime, or wall-clock times before its boot. Its kernel addresses are
 * then another kernel's: written without symbols. */
static int before_boot(const struct lx_dat *r) {
  uint64_t t0 = UINT64_MAX;
  for (int i = 0; i < r->ns; i++)
    if (r->s[i].rec && r->s[i].rec->ts < t0) t0 = r->s[i].rec->ts;
  if (t0 == UINT64_MAX) return 0;
  int64_t boot = lx_now_ns(CLOCK_REALTIME) - lx_now_ns(CLOCK_BOOTTIME);
  return (int64_t)t0 < DAT_WALL_NS ? (int64_t)t0 > lx_now_ns(CLOCK_MONOTONIC) : (int64_t)t0 < boot;
}

struct lx_dat *lx_dat_open(const char *path, size_t max_bytes, char *err, size_t errlen) {
  struct lx_dat *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  tracecmd_set_loglevel(TEP_LOG_CRITICAL); /* the library's warnings are not ours to print */
  int fd = -1, flags = TRACECMD_FL_LOAD_NO_PLUGINS | TRACECMD_FL_LOAD_NO_SYSTEM_PLUGINS;
  int cut = lx_dat_check(path, &fd, r->damage, sizeof r->damage);
  if (cut < 0) {
    snprintf(err, errlen, "%s", r->damage);
    free(r);
    return NULL;
  }
  r->top = cut ? tracecmd_open_fd(fd, flags) : tracecmd_open(path, flags); /* (fd: the handle's) */
  if (!r->top) {
    if (fd >= 0) close(fd);
    snprintf(err, errlen, "%s: not a trace.dat that libtracecmd can read (damaged, or a version it does not know)",
             path);
    free(r);
    return NULL;
  }
  int ni = tracecmd_buffer_instances(r->top);
  r->inst = calloc((size_t)(ni > 0 ? ni : 1), sizeof *r->inst);
  r->cm = lx_comm_new(0);
  r->b = etw_batch_new(4, max_bytes);
  r->want = lx_stk_want_all();
  int bad = !r->inst || !r->cm || !r->b || !r->want || add_streams(r, r->top);
  for (int i = 0; i < ni && !bad; i++) {
    r->inst[i] = tracecmd_buffer_instance_handle(r->top, i);
    if (!r->inst[i]) continue; /* (an instance the library cannot open: its events are left out) */
    r->ninst = i + 1;
    bad = add_streams(r, r->inst[i]);
  }
  if (bad) {
    snprintf(err, errlen, "%s: out of memory (or more than %d CPU buffers)", path, DAT_MAX_STREAMS);
    lx_dat_close(r);
    return NULL;
  }
  r->ksyms = before_boot(r) ? 0 : -1;
  r->stk0[0] = lx_stk_counted(0);
  r->stk0[1] = lx_stk_counted(1) + lx_stk_counted(2);
  return r;
}

static struct lx_dec *stream_dec(struct lx_dat *r, struct stream *s) {
  if (s->dec) return s->dec;
  struct lx_dec *d = malloc(sizeof *d);
  if (!d) return NULL;
  struct tep_handle *tep = tracecmd_get_tep(s->h);
  if (lx_dec_init(d, tep, s->cpu, r->offset)) {
    d->tep = NULL; /* (the file's: not the decoder's to free) */
    lx_dec_fini(d);
    free(d);
    return NULL;
  }
  d->resolve_tgid = 0; /* not this machine's /proc: ProcessID = ThreadID */
  d->cm = r->cm;
  d->cseq = r->cm->seq;
  d->cmdlines = tep;
  lx_stk_attach_file(d, r->want, &r->ksyms); /* (no memory: the stack records stay events) */
  return s->dec = d;
}

int lx_dat_next(struct lx_dat *r, struct lx_dat_ev *ev) {
  for (;;) {
    if (r->cur) {
      tracecmd_free_record(r->cur);
      r->cur = NULL;
    }
    struct stream *best = NULL;
    for (int i = 0; i < r->ns; i++)
      if (r->s[i].rec && (!best || r->s[i].rec->ts < best->rec->ts)) best = &r->s[i];
    if (!best) return 0;
    struct tep_record *rec = best->rec;
    r->cur = rec;
    next_rec(r, best);
    if (!r->clock_set) { /* the first record (the earliest) tells which clock the file has */
      r->clock_set = 1;
      r->guessed = (int64_t)rec->ts < DAT_WALL_NS;
      r->offset = r->guessed ? lx_calib_offset() : 0;
    }
    if (r->guessed && !r->other_boot && (int64_t)rec->ts > lx_now_ns(CLOCK_MONOTONIC)) r->other_boot = 1;
    struct lx_dec *d = stream_dec(r, best);
    if (!d) {
      r->dropped++;
      continue;
    }
    uint64_t und = atomic_load(&d->undecoded), drop = atomic_load(&d->enc_dropped);
    struct lx_sink sk = {r->b, sink_flush, r};
    r->b->n = 0;
    r->b->data.len = 0;
    if (rec->size > 0 && d->stk) lx_stk_record(d, rec->data, (uint32_t)rec->size, rec->ts, &sk);
    else if (rec->size > 0) lx_dec_event(d, rec->data, (uint32_t)rec->size, rec->ts, &sk);
    if (atomic_load(&d->enc_dropped) != drop || rec->size <= 0) r->dropped++;
    /* the stack records that follow it on its CPU, as the live reader takes them */
    while (d->stk && best->rec && best->rec->size >= 8 && lx_stk_is(d, best->rec->data, (uint32_t)best->rec->size)) {
      lx_stk_record(d, best->rec->data, (uint32_t)best->rec->size, best->rec->ts, &sk);
      tracecmd_free_record(best->rec);
      next_rec(r, best);
    }
    if (r->b->n != 1) continue; /* dropped (counted above) or hidden */
    const struct etw_evref *h = &r->b->ev[0];
    ev->txt = r->b->data.buf + h->off;
    ev->len = h->len;
    ev->ref = *h;
    ev->undecoded = atomic_load(&d->undecoded) != und;
    return 1;
  }
}

uint64_t lx_dat_dropped(const struct lx_dat *r) { return r->dropped; }
const char *lx_dat_damage(const struct lx_dat *r) { return r->damage[0] ? r->damage : NULL; }
void lx_dat_stacks(const struct lx_dat *r, uint64_t *joined, uint64_t *orphaned) {
  *joined = lx_stk_counted(0) - r->stk0[0];
  *orphaned = lx_stk_counted(1) + lx_stk_counted(2) - r->stk0[1];
}
int lx_dat_clock_guessed(const struct lx_dat *r) { return r->guessed; }
int lx_dat_other_boot(const struct lx_dat *r) { return r->other_boot; }
uint64_t lx_dat_lost(const struct lx_dat *r, uint64_t *unknown) {
  *unknown = r->lost_unknown;
  return r->lost;
}

void lx_dat_close(struct lx_dat *r) {
  if (!r) return;
  if (r->cur) tracecmd_free_record(r->cur);
  for (int i = 0; i < r->ns; i++) {
    if (r->s[i].rec) tracecmd_free_record(r->s[i].rec);
    if (r->s[i].dec) {
      r->s[i].dec->tep = NULL; /* the file's */
      lx_dec_fini(r->s[i].dec);
      free(r->s[i].dec);
    }
  }
  free(r->s);
  for (int i = 0; i < r->ninst; i++)
    if (r->inst[i]) tracecmd_close(r->inst[i]);
  free(r->inst);
  if (r->top) tracecmd_close(r->top);
  lx_comm_free(r->cm);
  free((void *)r->want); /* (after the decoders) */
  if (r->b) etw_batch_unref(r->b);
  free(r);
}
