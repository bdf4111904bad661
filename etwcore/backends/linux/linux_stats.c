/* linux_stats.c — what a Linux session reports: stats() (the kernel's per-CPU loss counters and
 * the readers' counts), progress() (for the core's limit thread), stats_json() (the per-CPU
 * buffer size the kernel took, per CPU, the comm table, the stop limits, the recording, where
 * each provider's filter went) and
 * list_os_sessions() (every tracefs instance).
 *
 * Loss: the instance runs with overwrite off, so a full per-CPU buffer makes the kernel drop the
 * NEW events, counted in per_cpu/cpuN/stats "dropped events"; what is in the buffer is never
 * clobbered while we read it. Loss = overrun + dropped, summed over CPUs.
 *
 * Threads: any thread, until destroy(). The kernel's files and the file-mode fields are read under
 * s->mu (stop() or cleanup() may remove the instance meanwhile; it saves the counters first, and
 * a stopped session reports those saved values from then on); the readers'
 * counters are atomics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracefs.h>

#include "etwcore/util.h"
#include "linux/linux_sess.h"

/* per_cpu/cpuN/stats: "overrun: N", "dropped events: N", "entries: N"; after the instance was
 * removed, the values saved at removal. Caller holds s->mu. */
void lx_cpu_stats(struct lx_sess *s, int cpu, uint64_t *ov, uint64_t *dr, uint64_t *en) {
  char f[64];
  *ov = *dr = *en = 0;
  if (!s->inst) {
    if (s->saved) {
      *ov = s->saved[cpu][0];
      *dr = s->saved[cpu][1];
      *en = s->saved[cpu][2];
    }
    return;
  }
  snprintf(f, sizeof f, "per_cpu/cpu%d/stats", cpu);
  char *txt = tracefs_instance_file_read(s->inst, f, NULL);
  if (!txt) return;
  char *save = NULL;
  for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    unsigned long long v;
    if (sscanf(line, "overrun: %llu", &v) == 1) *ov = v;
    else if (sscanf(line, "dropped events: %llu", &v) == 1) *dr = v;
    else if (sscanf(line, "entries: %llu", &v) == 1) *en = v;
  }
  free(txt);
}

void lx_stats(void *vs, struct etw_backend_stats *o) {
  struct lx_sess *s = vs;
  memset(o, 0, sizeof *o);
  pthread_mutex_lock(&s->mu); /* lx_cpu_stats reads the instance; stop() may remove it */
  for (int i = 0; i < s->ncpu; i++) {
    uint64_t ov, dr, en;
    lx_cpu_stats(s, i, &ov, &dr, &en);
    o->kernel_overrun += ov;
    o->kernel_dropped += dr;
    o->read_events += atomic_load(&s->rd[i].raw_events);
    o->read_bytes += atomic_load(&s->rd[i].raw_bytes);
    o->decode_errors += atomic_load(&s->rd[i].dec.undecoded);
  }
  pthread_mutex_unlock(&s->mu);
  o->kernel_lost = o->kernel_overrun + o->kernel_dropped;
}

/* events read and page bytes recorded: atomics only (the core's limit thread asks every 100 ms;
 * stats() reads the kernel's per-CPU files) */
void lx_progress(void *vs, uint64_t *events, uint64_t *file_bytes) {
  struct lx_sess *s = vs;
  uint64_t n = 0;
  for (int i = 0; i < s->ncpu; i++) n += atomic_load_explicit(&s->rd[i].raw_events, memory_order_relaxed);
  *events = n;
  pthread_mutex_lock(&s->mu); /* lx_stop clears s->tdat under it before freeing it */
  *file_bytes = s->tdat ? lx_tdat_bytes(s->tdat) : s->file_bytes;
  pthread_mutex_unlock(&s->mu);
}

static void json_per_cpu(struct lx_sess *s, struct etw_jw *w) {
  etw_jw_lit(w, "\"per_cpu\":[");
  for (int i = 0; i < s->ncpu; i++) {
    uint64_t ov, dr, en;
    lx_cpu_stats(s, i, &ov, &dr, &en);
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"cpu\":");
    etw_jw_u64(w, (uint64_t)i);
    etw_jw_lit(w, ",\"overrun\":");
    etw_jw_u64(w, ov);
    etw_jw_lit(w, ",\"dropped\":");
    etw_jw_u64(w, dr);
    etw_jw_lit(w, ",\"entries\":");
    etw_jw_u64(w, en);
    etw_jw_lit(w, ",\"read_events\":");
    etw_jw_u64(w, atomic_load(&s->rd[i].raw_events));
    etw_jw_lit(w, ",\"read_bytes\":");
    etw_jw_u64(w, atomic_load(&s->rd[i].raw_bytes));
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
}

/* Execution.ProcessName: the comm table and what it cost */
static void json_comm_table(struct lx_sess *s, struct etw_jw *w) {
  uint64_t in = 0;
  for (int i = 0; i < s->ncpu; i++) in += atomic_load(&s->rd[i].dec.internal);
  pthread_mutex_lock(&s->cm->mu);
  uint64_t ch = s->cm->changes, ev = s->cm->evicted;
  pthread_mutex_unlock(&s->cm->mu);
  etw_jw_lit(w, ",\"comm_table\":{\"internal_events\":");
  etw_jw_u64(w, in);
  etw_jw_lit(w, ",\"changes\":");
  etw_jw_u64(w, ch);
  etw_jw_lit(w, ",\"evicted\":");
  etw_jw_u64(w, ev);
  etw_jw_lit(w, ",\"waits\":");
  etw_jw_u64(w, atomic_load(&s->cm->waits));
  etw_jw_lit(w, ",\"wait_timeouts\":");
  etw_jw_u64(w, atomic_load(&s->cm->wait_timeouts));
  etw_jw_ch(w, '}');
}

/* the recording (file mode). Caller holds s->mu. */
static void json_file(struct lx_sess *s, struct etw_jw *w) {
  etw_jw_lit(w, ",\"trace_clock\":\"mono\",\"file_bytes\":");
  etw_jw_u64(w, s->tdat ? lx_tdat_bytes(s->tdat) : s->file_bytes);
  etw_jw_lit(w, ",\"file_lost_pages\":");
  etw_jw_u64(w, s->tdat ? lx_tdat_lost_pages(s->tdat) : s->file_lost_pages);
  etw_jw_lit(w, ",\"file_events\":");
  etw_jw_u64(w, s->tdat ? lx_tdat_events(s->tdat) : s->file_events);
  etw_jw_lit(w, ",\"file_complete\":");
  etw_jw_bool(w, s->file_done);
  if (s->file_msg[0]) {
    etw_jw_lit(w, ",\"file_failure\":");
    etw_jw_cs(w, s->file_msg);
  }
  if (s->file_error[0]) {
    etw_jw_lit(w, ",\"file_error\":");
    etw_jw_cs(w, s->file_error);
  }
  if (s->snap_note[0]) {
    etw_jw_lit(w, ",\"file_snapshots\":");
    etw_jw_cs(w, s->snap_note);
  }
}

static void json_names(struct etw_jw *w, char *const *names, uint32_t n) {
  etw_jw_ch(w, '[');
  for (uint32_t i = 0; i < n; i++) {
    if (i) etw_jw_ch(w, ',');
    etw_jw_cs(w, names[i]);
  }
  etw_jw_ch(w, ']');
}

/* "provider_filters": where each provider's filter went (linux_enable.c write_filters); the
 * events' names only when some lack the filter's fields. Caller holds s->mu. */
static void json_filters(struct lx_sess *s, struct etw_jw *w) {
  int first = 1;
  for (uint32_t i = 0; i < s->n_prov; i++) {
    const struct lx_prov *q = &s->prov[i];
    if (!q->enabled || !q->filter) continue;
    etw_jw_lit(w, first ? ",\"provider_filters\":[" : ",");
    first = 0;
    etw_jw_lit(w, "{\"provider\":");
    etw_jw_cs(w, q->name);
    etw_jw_lit(w, ",\"filter\":");
    etw_jw_cs(w, q->filter);
    etw_jw_lit(w, ",\"events_filtered\":");
    etw_jw_u64(w, q->n_filtered);
    etw_jw_lit(w, ",\"events_unfiltered\":");
    etw_jw_u64(w, q->n_events - q->n_filtered);
    if (q->n_filtered < q->n_events) {
      etw_jw_lit(w, ",\"filtered\":");
      json_names(w, q->events, q->n_filtered);
      etw_jw_lit(w, ",\"unfiltered\":");
      json_names(w, q->events + q->n_filtered, q->n_events - q->n_filtered);
      etw_jw_lit(w, ",\"unfiltered_reason\":\"these events have no field of a name the filter "
                    "uses (the kernel: Field not found): they are enabled without the filter, "
                    "as the kernel's system filter and trace-cmd do\"");
    }
    etw_jw_ch(w, '}');
  }
  if (!first) etw_jw_ch(w, ']');
}

void lx_stats_json(void *vs, struct etw_jw *w) {
  struct lx_sess *s = vs;
  pthread_mutex_lock(&s->mu);
  etw_jw_lit(w, "\"buffer_kb\":"); /* effective per CPU: the spec's 0 means the default */
  etw_jw_u64(w, s->buffer_kb);
  etw_jw_ch(w, ',');
  json_per_cpu(s, w);
  if (s->cm) json_comm_table(s, w);
  uint64_t bad[2] = {0, 0}; /* (linux_stack.c lx_stk_addrs) */
  for (int i = 0; i < s->ncpu; i++)
    for (int k = 0; k < 2; k++) bad[k] += atomic_load(&s->rd[i].dec.stk_bad[k]);
  etw_jw_lit(w, ",\"stack_entries_dropped\":{\"kernel\":");
  etw_jw_u64(w, bad[0]);
  etw_jw_lit(w, ",\"user\":");
  etw_jw_u64(w, bad[1]);
  etw_jw_ch(w, '}');
  if (s->lim_events || s->lim_bytes) {
    etw_jw_lit(w, ",\"limit_skipped\":");
    etw_jw_u64(w, atomic_load(&s->lim_skipped));
  }
  if (s->record_path) json_file(s, w);
  json_filters(s, w);
  pthread_mutex_unlock(&s->mu);
}

/* every tracefs instance, ours ("etwd": true, with its owner's liveness) and others' */
enum etw_err lx_list_os_sessions(struct etw_jw *w, struct etw_status *st) {
  (void)st;
  char **names = tracefs_instances(NULL);
  etw_jw_ch(w, '[');
  for (int i = 0; names && names[i]; i++) {
    int ours = !strncmp(names[i], ETW_SESSION_PREFIX, strlen(ETW_SESSION_PREFIX));
    if (i) etw_jw_ch(w, ',');
    etw_jw_lit(w, "{\"name\":");
    etw_jw_cs(w, names[i]);
    etw_jw_lit(w, ",\"etwd\":");
    etw_jw_bool(w, ours);
    if (ours) {
      etw_jw_lit(w, ",\"owner_alive\":");
      etw_jw_bool(w, !etw_os_name_is_stale(names[i]));
    }
    etw_jw_ch(w, '}');
  }
  etw_jw_ch(w, ']');
  tracefs_list_free(names);
  return ETW_E_OK;
}
