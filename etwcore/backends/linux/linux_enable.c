/* linux_enable.c — the providers of a Linux session: name checks of a provider spec, the filters
 * written to its events (the user's, ANDed with the expression that keeps etwd's own threads
 * out), stacks, enabling and disabling (enable()/disable() of the backend), and the task events
 * the comm table needs.
 *
 * Exclusions: the threads in /proc/self/task at open (which include the session's readers) as
 * runs of consecutive ids, `(common_pid < a || common_pid > b)`, at most LX_MAX_EXCL_TERMS terms,
 * the readers' and the main thread's runs first. Each term costs the kernel time on every event,
 * hence runs instead of one `!=` per thread. The list is read again at every enable(); threads
 * created after that are not excluded.
 *
 * Threads: the session owner only (open, enable, disable: one at a time per session, see
 * linux_sess.h); s->mu is taken only to publish a new system to the readers and to read or
 * change the provider table against disable(), never across the kernel writes of enabling.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tracefs.h>

#include "linux/linux_sess.h"

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
}

/* ---- etwd's own threads, kept out by the filters */

static int cmp_pid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return x < y ? -1 : x > y;
}

static void excl_add(struct lx_sess *s, pid_t t) {
  if (s->excl && s->n_excl < LX_MAX_EXCL) s->excl[s->n_excl++] = t;
}

void lx_excl_self_tasks(struct lx_sess *s) {
  excl_add(s, getpid());
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)))
    if (isdigit((unsigned char)de->d_name[0])) excl_add(s, (pid_t)atoi(de->d_name));
  closedir(d);
}

struct run {
  pid_t a, b; /* a == 0: taken */
  int must;
};

/* s->excl (with s->must) sorted, without repeats, into runs of consecutive ids (*@nr of them,
 * malloc'd; NULL: none or no memory); a run holding a reader or the main thread is `must`. */
static struct run *excl_runs(struct lx_sess *s, uint32_t *nr) {
  *nr = 0;
  for (uint32_t i = 0; i < s->n_must; i++) excl_add(s, s->must[i]);
  if (!s->n_excl) return NULL;
  qsort(s->excl, s->n_excl, sizeof *s->excl, cmp_pid);
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n_excl; i++)
    if (!n || s->excl[n - 1] != s->excl[i]) s->excl[n++] = s->excl[i];
  s->n_excl = n;
  struct run *runs = calloc(n, sizeof *runs);
  if (!runs) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    if (*nr && runs[*nr - 1].b + 1 == s->excl[i])
      runs[*nr - 1].b = s->excl[i];
    else
      runs[(*nr)++] = (struct run){s->excl[i], s->excl[i], 0};
  }
  for (uint32_t i = 0; i < *nr; i++)
    for (uint32_t k = 0; k < s->n_must; k++)
      if (s->must[k] >= runs[i].a && s->must[k] <= runs[i].b) runs[i].must = 1;
  return runs;
}

/* Build the expression that keeps etwd's own threads out, as few terms as possible: our thread
 * ids sorted into runs of consecutive ids (threads created together get consecutive ids); a run
 * becomes `(common_pid < a || common_pid > b)`, a single id `common_pid != a`. Runs holding a
 * reader or the main thread come first; then the longest, up to LX_MAX_EXCL_TERMS terms. */
char *lx_excl_build(struct lx_sess *s) {
  uint32_t nr;
  struct run *runs = excl_runs(s, &nr);
  if (!runs) return strdup("");
  /* selection: must-runs first, then by length (simple selection, nr is small) */
  size_t cap = LX_MAX_EXCL_TERMS * 64 + 16;
  char *out = calloc(1, cap);
  size_t len = 0;
  int terms = 0;
  for (int pass = 0; pass < 2 && out; pass++) {
    for (;;) {
      int best = -1;
      for (uint32_t i = 0; i < nr; i++) {
        if (runs[i].a == 0) continue; /* taken */
        if (pass == 0 && !runs[i].must) continue;
        if (best < 0 || runs[i].b - runs[i].a > runs[best].b - runs[best].a) best = (int)i;
      }
      if (best < 0 || (pass == 1 && terms >= LX_MAX_EXCL_TERMS)) break;
      struct run *r = &runs[best];
      if (r->a == r->b)
        len += (size_t)snprintf(out + len, cap - len, "%scommon_pid != %d", terms ? " && " : "",
                                (int)r->a);
      else
        len += (size_t)snprintf(out + len, cap - len, "%s(common_pid < %d || common_pid > %d)",
                                terms ? " && " : "", (int)r->a, (int)r->b);
      terms++;
      r->a = 0;
      if (len + 80 > cap) break;
    }
  }
  free(runs);
  return out ? out : strdup("");
}

/* ---- filters and enabling */

/* Write @filter to sys:ev's filter file; on rejection return the kernel's own text. */
static int write_filter(struct lx_sess *s, const char *sys, const char *ev, const char *filter,
                        char *err, size_t errlen) {
  if (tracefs_event_file_write(s->inst, sys, ev, "filter", filter) >= 0) return 0;
  int e = errno;
  int sz = 0;
  char *txt = tracefs_event_file_read(s->inst, sys, ev, "filter", &sz);
  if (txt) {
    trim(txt);
    snprintf(err, errlen, "%s", txt);
    free(txt);
  } else {
    snprintf(err, errlen, "%s", strerror(e));
  }
  return -1;
}

enum etw_err lx_sys_add_locked(struct lx_sess *s, const char *sys) {
  for (uint32_t i = 0; i < s->n_sys; i++)
    if (!strcmp(s->systems[i], sys)) return ETW_E_OK;
  if (s->n_sys >= ETW_SPEC_MAX_PROVIDERS) return ETW_E_LIMIT;
  char *c = strdup(sys);
  if (!c) return ETW_E_NOMEM;
  s->systems[s->n_sys++] = c;
  s->systems[s->n_sys] = NULL;
  atomic_fetch_add(&s->gen, 1);
  return ETW_E_OK;
}

/* Validate names only (no kernel object needed). @pfx: JSON pointer of the provider object. */
enum etw_err lx_check_provider(const struct etw_provider_spec *p, const char *pfx,
                               struct etw_status *st) {
  char field[96];
  if (!p->name || !lx_system_exists(p->name)) {
    snprintf(field, sizeof field, "%s/name", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "unknown provider '%s': no tracepoint system of that name",
                    p->name ? p->name : "(null)");
  }
  if (p->n_events > ETW_SPEC_MAX_EVENTS) {
    snprintf(field, sizeof field, "%s/events", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "at most %d events per provider", ETW_SPEC_MAX_EVENTS);
  }
  for (uint32_t j = 0; j < p->n_events; j++) {
    if (!p->events[j] || !lx_event_exists(p->name, p->events[j])) {
      snprintf(field, sizeof field, "%s/events/%u", pfx, j);
      return etw_fail(st, ETW_E_INVALID, field, "unknown event '%s' in provider '%s'",
                      p->events[j] ? p->events[j] : "(null)", p->name);
    }
  }
  if (p->n_stack_ids) {
    snprintf(field, sizeof field, "%s/stacks/0", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "linux events are named: \"stacks\" lists event names (as in "
                    "events), not IDs");
  }
  for (uint32_t j = 0; j < p->n_stack_events; j++) { /* (in "events" when listed: spec.c) */
    if (!lx_event_exists(p->name, p->stack_events[j])) {
      snprintf(field, sizeof field, "%s/stacks/%u", pfx, j);
      return etw_fail(st, ETW_E_INVALID, field, "%s/stacks/%u: provider '%s' has no event '%s'", pfx, j,
                      p->name, p->stack_events[j]);
    }
  }
  if (p->filter && strlen(p->filter) > 2048) {
    snprintf(field, sizeof field, "%s/filter", pfx);
    return etw_fail(st, ETW_E_INVALID, field, "filter longer than 2048 bytes");
  }
  return ETW_E_OK;
}

static struct lx_prov *prov_find(struct lx_sess *s, const char *name) {
  for (uint32_t i = 0; i < s->n_prov; i++)
    if (!strcmp(s->prov[i].name, name)) return &s->prov[i];
  return NULL;
}

/* the filter written to a provider's events: the user's @filter and etwd's own exclusions */
static char *combined_filter(const struct lx_sess *s, const char *filter) {
  const char *x = s->excl_str ? s->excl_str : "";
  size_t n = (filter ? strlen(filter) : 0) + strlen(x) + 16;
  char *c = malloc(n);
  if (c && filter && *filter && *x) snprintf(c, n, "(%s) && (%s)", filter, x);
  else if (c) snprintf(c, n, "%s", filter && *filter ? filter : *x ? x : "0");
  return c;
}

/* A provider without stacks joined a session in option mode (linux_stack.c): triggers from now
 * on. Best effort: on failure the option stays (the readers drop the extra stacks, counted). */
static void stacks_to_triggers(struct lx_sess *s) {
  enum etw_err rc = ETW_E_OK;
  for (uint32_t i = 0; i < s->n_prov && !rc; i++) {
    struct lx_prov *q = &s->prov[i];
    if (!q->enabled || !q->stacks) continue;
    char *comb = combined_filter(s, q->filter), *combx = combined_filter(s, NULL);
    if (comb && combx)
      rc = lx_stk_to_triggers(&s->stk, s->inst, q->name, q->events, q->n_filtered, comb, "", NULL);
    if (comb && combx && !rc) /* the events that lack the filter's fields: without it */
      rc = lx_stk_to_triggers(&s->stk, s->inst, q->name, q->events + q->n_filtered,
                              q->n_events - q->n_filtered, combx, "", NULL);
    free(comb);
    free(combx);
    if (!comb || !combx) return;
  }
  if (!rc) lx_stk_opt_off(&s->stk, s->inst);
}

/* The event names of @p (its list, else every event of its system), copied into *@evs. */
static enum etw_err provider_events(const struct etw_provider_spec *p, char ***evs_out,
                                    uint32_t *nev_out, struct etw_status *st) {
  char **evs = NULL;
  uint32_t nev = 0;
  if (p->n_events) {
    evs = calloc(p->n_events, sizeof *evs);
    if (!evs) return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    for (uint32_t j = 0; j < p->n_events; j++) {
      evs[nev] = strdup(p->events[j]);
      if (!evs[nev]) {
        lx_free_list(evs, nev);
        return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
      }
      nev++;
    }
  } else {
    char **all = tracefs_system_events(NULL, p->name);
    uint32_t n = 0;
    while (all && all[n]) n++;
    evs = calloc(n ? n : 1, sizeof *evs);
    if (!evs) {
      tracefs_list_free(all);
      return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
    }
    for (uint32_t j = 0; j < n; j++)
      if ((evs[nev] = strdup(all[j]))) nev++;
    tracefs_list_free(all);
  }
  *evs_out = evs;
  *nev_out = nev;
  return ETW_E_OK;
}

/* the kernel refused a filter because the event has no field of a name it uses */
static int field_missing(const char *kerr) { return strstr(kerr, "Field not found") != NULL; }

/* @evs reordered: the events flagged 0 in @lack first, then the others (order kept in each) */
static void partition(char **evs, uint32_t nev, const unsigned char *lack, char **tmp) {
  uint32_t k = 0;
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t j = 0; j < nev; j++)
      if (lack[j] == pass) tmp[k++] = evs[j];
  memcpy(evs, tmp, nev * sizeof *evs);
}

/* The filters of @p's events. The user's filter alone first (so that the kernel's complaint is
 * about it), then @comb. An event that lacks a field the filter names (the kernel: "Field not
 * found") gets @combx (etwd's exclusion alone): it is enabled without the user's filter, as the
 * kernel's own system filter (events/<sys>/filter) and trace-cmd do. @evs is reordered so that
 * the first *@nfilt took the filter. Any other complaint, or no event taking the filter: the
 * kernel's text for the first event that failed. */
static enum etw_err write_filters(struct lx_sess *s, const struct etw_provider_spec *p,
                                  char **evs, uint32_t nev, const char *comb, const char *combx,
                                  uint32_t *nfilt, const char *pfx, struct etw_status *st) {
  char field[96], kerr[400], first[400] = "";
  const char *first_ev = NULL;
  *nfilt = nev;
  snprintf(field, sizeof field, "%s/filter", pfx);
  if (!p->filter || !*p->filter) {
    for (uint32_t j = 0; j < nev; j++)
      if (write_filter(s, p->name, evs[j], comb, kerr, sizeof kerr) != 0)
        return etw_fail(st, ETW_E_KERNEL, field, "the kernel rejected the filter for %s:%s: %s",
                        p->name, evs[j], kerr);
    return ETW_E_OK;
  }
  unsigned char *lack = calloc(nev ? nev : 1, 1);
  char **tmp = calloc(nev ? nev : 1, sizeof *tmp);
  enum etw_err rc = lack && tmp ? ETW_E_OK : etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  uint32_t nf = 0;
  for (uint32_t j = 0; !rc && j < nev; j++) {
    int miss = 0;
    if (write_filter(s, p->name, evs[j], p->filter, kerr, sizeof kerr) != 0) {
      if (!first_ev) {
        first_ev = evs[j];
        snprintf(first, sizeof first, "%s", kerr);
      }
      if (!field_missing(kerr))
        rc = etw_fail(st, ETW_E_KERNEL, field, "the kernel rejected the filter for %s:%s: %s",
                      p->name, evs[j], kerr);
      miss = 1;
    }
    if (!rc && write_filter(s, p->name, evs[j], miss ? combx : comb, kerr, sizeof kerr) != 0)
      rc = etw_fail(st, ETW_E_KERNEL, field, "the kernel rejected the filter for %s:%s: %s",
                    p->name, evs[j], kerr);
    lack[j] = (unsigned char)miss;
    nf += !miss;
  }
  if (!rc && !nf)
    rc = etw_fail(st, ETW_E_KERNEL, field, "the kernel rejected the filter for %s:%s: %s%s",
                  p->name, first_ev, first,
                  nev > 1 ? " (no event of the provider has the fields the filter names)" : "");
  if (!rc) {
    partition(evs, nev, lack, tmp);
    *nfilt = nf;
  }
  free(lack);
  free(tmp);
  return rc;
}

static enum etw_err enable_events(struct lx_sess *s, const char *sys, char *const *evs,
                                  uint32_t nev, const char *pfx, struct etw_status *st) {
  char field[96];
  enum etw_err rc = ETW_E_OK;
  for (uint32_t j = 0; !rc && j < nev; j++) {
    if (tracefs_event_enable(s->inst, sys, evs[j]) != 0) {
      snprintf(field, sizeof field, "%s/events/%u", pfx, j);
      rc = etw_fail(st, ETW_E_KERNEL, field, "cannot enable %s:%s: %s", sys, evs[j],
                    strerror(errno));
    }
  }
  return rc;
}

/* The provider table's entry for @p (@old, or a new one) takes @evs, the first @nfilt of them
 * filtered. Under s->mu: stats_json reads the table from any thread. */
static enum etw_err prov_store(struct lx_sess *s, const struct etw_provider_spec *p,
                               struct lx_prov *old, char **evs, uint32_t nev, uint32_t nfilt,
                               const char *pfx, struct etw_status *st) {
  pthread_mutex_lock(&s->mu);
  if (!old) {
    if (s->n_prov >= ETW_SPEC_MAX_PROVIDERS) {
      pthread_mutex_unlock(&s->mu);
      lx_free_list(evs, nev);
      return etw_fail(st, ETW_E_LIMIT, pfx, "at most %d providers", ETW_SPEC_MAX_PROVIDERS);
    }
    old = &s->prov[s->n_prov++];
    memset(old, 0, sizeof *old);
    old->name = strdup(p->name);
  } else {
    lx_free_list(old->events, old->n_events);
    free(old->filter);
  }
  old->events = evs;
  old->n_events = nev;
  old->n_filtered = nfilt;
  old->filter = p->filter ? strdup(p->filter) : NULL;
  old->enabled = 1;
  old->stacks = p->stacks;
  pthread_mutex_unlock(&s->mu);
  return ETW_E_OK;
}

/* the events of @evs[0..n) that want stacks — all of them, or those of @p's "stacks" list —
 * moved to the front (order kept); their count */
static uint32_t stack_subset(const struct etw_provider_spec *p, char **evs, uint32_t n) {
  if (!p->n_stack_events) return n;
  uint32_t k = 0;
  for (uint32_t j = 0; j < n; j++)
    for (uint32_t i = 0; i < p->n_stack_events; i++)
      if (!strcmp(evs[j], p->stack_events[i])) {
        char *t = evs[k];
        evs[k++] = evs[j];
        evs[j] = t;
        break;
      }
  return k;
}

/* Apply filters and enable the events of @p (validated). Called by the session owner (open,
 * enable: never concurrently); takes s->mu only to publish a new system to the readers. */
enum etw_err lx_apply_provider(struct lx_sess *s, const struct etw_provider_spec *p,
                               const char *pfx, struct etw_status *st) {
  char **evs = NULL;
  uint32_t nev = 0;
  enum etw_err rc = provider_events(p, &evs, &nev, st);
  if (rc) return rc;
  char *comb = combined_filter(s, p->filter), *combx = combined_filter(s, NULL);
  if (!comb || !combx) {
    free(comb);
    free(combx);
    lx_free_list(evs, nev);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  /* the provider's previous events (re-enable on a running session) */
  struct lx_prov *old = prov_find(s, p->name);
  if (old && old->enabled) tracefs_event_disable(s->inst, p->name, NULL);
  uint32_t nf = nev;
  rc = write_filters(s, p, evs, nev, comb, combx, &nf, pfx, st);
  /* stacks: the old events' triggers off, the new ones' on (with the events' own filter) */
  if (!rc && old && old->stacks)
    lx_stk_set(&s->stk, s->inst, p->name, old->events, old->n_events, 0, NULL, pfx, NULL);
  /* (with a "stacks" list only its events: each part's are moved to its front) */
  if (!rc && p->stacks)
    rc = lx_stk_set(&s->stk, s->inst, p->name, evs, stack_subset(p, evs, nf), p->stacks, comb, pfx, st);
  if (!rc && p->stacks)
    rc = lx_stk_set(&s->stk, s->inst, p->name, evs + nf, stack_subset(p, evs + nf, nev - nf), p->stacks,
                    combx, pfx, st);
  free(comb);
  free(combx);
  if (!rc) {
    pthread_mutex_lock(&s->mu);
    rc = lx_sys_add_locked(s, p->name);
    pthread_mutex_unlock(&s->mu);
    if (rc) etw_fail(st, rc, pfx, "too many providers");
  }
  if (!rc) rc = enable_events(s, p->name, evs, nev, pfx, st);
  if (rc) {
    tracefs_event_disable(s->inst, p->name, NULL);
    lx_stk_set(&s->stk, s->inst, p->name, evs, nev, 0, NULL, pfx, NULL);
    lx_free_list(evs, nev);
    if (old) {
      pthread_mutex_lock(&s->mu);
      old->enabled = 0;
      pthread_mutex_unlock(&s->mu);
    }
    return rc;
  }
  return prov_store(s, p, old, evs, nev, nf, pfx, st);
}

/* The comm table's sources (realtime sessions): task:task_newtask and task:task_rename — every
 * new task and every comm change, a record per fork, exec or rename — enabled in the instance
 * without a filter unless the user's own `task` provider has them; those etwd enabled for
 * itself are hidden from the stream (s->hide). Called by the session owner after any change to
 * the providers; best effort (without them names come from /proc). */
void lx_task_internal(struct lx_sess *s) {
  static const char *const ev[2] = {"task_newtask", "task_rename"};
  if (!s->cm || !s->inst || !lx_event_exists("task", ev[0])) return;
  pthread_mutex_lock(&s->mu);
  struct lx_prov *p = prov_find(s, "task");
  unsigned hide = 0;
  for (int i = 0; i < 2; i++) {
    int user = p && p->enabled && !p->n_events;
    for (uint32_t j = 0; p && p->enabled && j < p->n_events; j++)
      user |= !strcmp(p->events[j], ev[i]);
    if (user) continue;
    char kerr[64];
    write_filter(s, "task", ev[i], "0", kerr, sizeof kerr);
    if (tracefs_event_enable(s->inst, "task", ev[i]) == 0) hide |= 1u << i;
  }
  if (hide) lx_sys_add_locked(s, "task");
  atomic_store(&s->hide, hide);
  pthread_mutex_unlock(&s->mu);
}

/* ---- the backend's enable() and disable() */

enum etw_err lx_enable(void *vs, const struct etw_provider_spec *p, struct etw_status *st) {
  struct lx_sess *s = vs;
  /* (a NULL instance would mean the top-level tracing instance to libtracefs: never) */
  if (s->stopped || !s->inst) return etw_fail(st, ETW_E_STATE, NULL, "the session is stopped");
  /* field pointers as for providers[0]; the session manager rewrites the prefix */
  enum etw_err rc = lx_check_provider(p, "/providers/0", st);
  if (rc) return rc;
  /* etwd's threads are re-read: workers started since open are excluded from these events too */
  s->n_excl = 0;
  lx_excl_self_tasks(s);
  char *ex = lx_excl_build(s);
  if (ex) {
    free(s->excl_str);
    s->excl_str = ex;
  }
  /* no session lock across the kernel writes (enabling all of `syscalls` takes ~1 s): the
   * readers only take it briefly to learn new systems */
  rc = lx_apply_provider(s, p, "/providers/0", st);
  if (!rc && (!p->stacks || p->n_stack_events) && lx_stk_can_trigger(&s->stk)) stacks_to_triggers(s);
  if (!strcmp(p->name, "task")) lx_task_internal(s);
  /* a new system's formats go into the final header: keep room for them (best effort: without
   * it the final write makes room by removing the last snapshot) */
  if (!rc) lx_rec_reserve(s);
  return rc;
}

enum etw_err lx_disable(void *vs, const char *provider, struct etw_status *st) {
  struct lx_sess *s = vs;
  if (!s->inst) return etw_fail(st, ETW_E_STATE, NULL, "the session's instance is gone");
  pthread_mutex_lock(&s->mu);
  struct lx_prov *p = provider ? prov_find(s, provider) : NULL;
  if (!p || !p->enabled) {
    pthread_mutex_unlock(&s->mu);
    return etw_fail(st, ETW_E_NOT_FOUND, NULL, "provider '%s' is not enabled in this session",
                    provider ? provider : "(null)");
  }
  int r = tracefs_event_disable(s->inst, provider, NULL);
  if (p->stacks) lx_stk_set(&s->stk, s->inst, provider, p->events, p->n_events, 0, NULL, "", NULL);
  p->enabled = p->stacks = 0;
  pthread_mutex_unlock(&s->mu);
  if (!strcmp(provider, "task")) lx_task_internal(s);
  if (r != 0)
    return etw_fail(st, ETW_E_KERNEL, NULL, "cannot disable %s: %s", provider, strerror(errno));
  return ETW_E_OK;
}
