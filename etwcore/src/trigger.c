/* trigger.c — start and stop triggers (trigger.h).
 *
 * Evaluation: the trigger's thread reads its watcher's subscription (ndjson, 100 ms waits) and
 * parses each event it gets (cJSON): an event match needs the provider (and event name, if
 * given) and every filter field of EventData equal to the given value (strings by text, numbers
 * by value); a rate rule counts the matching events in 1-s windows and fires when `for_s`
 * consecutive windows are above `rate_above` (or below `rate_below`) events/s. The watcher's
 * queue may drop events when they come faster than the thread parses them, and its session's
 * kernel buffers when they come faster than its readers decode them: a window's rate is then
 * the matches seen plus the window's lost events (both kinds) times the share of matches among the
 * events seen so far (all dropped events when the rule has no filter: the watcher enables only
 * the rule's provider and event, so every event of it matches) — so overload can neither hide a
 * rate above the limit nor fake one below it. The last window's rate and the drops are shown in
 * the session (etw_trigger_json). Before
 * etw_trigger_arm nothing is evaluated. Once the condition holds, the thread waits after_s and
 * calls fired(). Bounds: the watcher's subscriber queue is the hub's (overflow drops and is
 * counted there; a dropped event cannot fire a trigger), one read takes at most 1 MiB.
 */
#include "etwcore/trigger.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etwcore/jw.h"
#include "etwcore/session.h"
#include "etwcore/util.h"

#define TRIG_MAX_FILTER 8

struct etw_trigger {
  char provider[128], event[128];
  cJSON *filter; /* object or NULL */
  int rate;      /* 0 = event match, 1 = rate_above, 2 = rate_below */
  double n, for_s, after_s;
  struct etw_session *watch;
  struct etw_sub *sub;
  void (*fired)(void *ctx);
  void *ctx;
  pthread_t th;
  int th_started;
  atomic_int armed, quit, hit;
  /* what the thread saw (etw_trigger_json reads them while it runs) */
  atomic_uint_fast64_t seen, matched, dropped, rate_milli, run_ms;
};

static int name_ok(const cJSON *v) {
  return cJSON_IsString(v) && v->valuestring[0] && strlen(v->valuestring) < 128;
}

static int num_ok(const cJSON *v, double lo, double hi) {
  return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi;
}

enum etw_err etw_trigger_check(const cJSON *v, const char *ptr, struct etw_status *st) {
  static const char *const keys[] = {"provider", "event", "filter", "after_s", "rate_above",
                                     "rate_below", "for_s", NULL};
  char f[64];
  if (!cJSON_IsObject(v))
    return etw_fail(st, ETW_E_INVALID, ptr, "%s must be an object {\"provider\",\"event\",\"filter\",\"after_s\"} "
                    "or {\"provider\",\"rate_above\"|\"rate_below\",\"for_s\",\"after_s\"}", ptr);
  for (const cJSON *c = v->child; c; c = c->next) {
    int k = 0;
    while (keys[k] && strcmp(keys[k], c->string ? c->string : "")) k++;
    if (!keys[k]) {
      snprintf(f, sizeof f, "%s/%.40s", ptr, c->string ? c->string : "");
      return etw_fail(st, ETW_E_INVALID, f, "unknown member \"%s\" at %s", c->string ? c->string : "", ptr);
    }
  }
  const cJSON *above = cJSON_GetObjectItemCaseSensitive(v, "rate_above");
  const cJSON *below = cJSON_GetObjectItemCaseSensitive(v, "rate_below");
  const cJSON *fl = cJSON_GetObjectItemCaseSensitive(v, "filter");
#define BAD(m, ...) (snprintf(f, sizeof f, "%s/%s", ptr, m), etw_fail(st, ETW_E_INVALID, f, __VA_ARGS__))
  if (!name_ok(cJSON_GetObjectItemCaseSensitive(v, "provider")))
    return BAD("provider", "%s/provider must name the provider (1-127 bytes)", ptr);
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(v, "event");
  if (ev && !name_ok(ev)) return BAD("event", "%s/event must be an event name (1-127 bytes)", ptr);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(v, "after_s");
  if (a && !num_ok(a, 0, 86400)) return BAD("after_s", "%s/after_s must be 0 to 86400 seconds", ptr);
  if (fl) {
    if (!cJSON_IsObject(fl) || cJSON_GetArraySize(fl) > TRIG_MAX_FILTER)
      return BAD("filter", "%s/filter must be an object of at most %d {field: value}", ptr, TRIG_MAX_FILTER);
    for (const cJSON *c = fl->child; c; c = c->next)
      if (!cJSON_IsString(c) && !cJSON_IsNumber(c))
        return BAD("filter", "%s/filter values must be strings or numbers", ptr);
  }
  if (above && below) return BAD("rate_below", "%s: give rate_above or rate_below, not both", ptr);
  const cJSON *r = above ? above : below;
  const cJSON *fs = cJSON_GetObjectItemCaseSensitive(v, "for_s");
  if (r) {
    if (!num_ok(r, 0, 1e9)) return BAD(above ? "rate_above" : "rate_below", "%s: the rate must be 0 to 1e9 events/s", ptr);
    if (fs && !num_ok(fs, 1, 86400)) return BAD("for_s", "%s/for_s must be 1 to 86400 seconds", ptr);
  } else if (fs) {
    return BAD("for_s", "%s/for_s belongs to a rate rule (rate_above or rate_below)", ptr);
  }
#undef BAD
  return ETW_E_OK;
}

/* the event @e (one parsed record) matches the trigger's provider, event and filter */
static int event_matches(const struct etw_trigger *t, const cJSON *e) {
  const cJSON *sys = cJSON_GetObjectItemCaseSensitive(e, "System");
  const cJSON *pv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sys, "Provider"), "Name");
  if (!cJSON_IsString(pv) || strcmp(pv->valuestring, t->provider)) return 0;
  const cJSON *en = cJSON_GetObjectItemCaseSensitive(sys, "EventName");
  if (t->event[0] && (!cJSON_IsString(en) || strcmp(en->valuestring, t->event))) return 0;
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "EventData");
  for (const cJSON *c = t->filter ? t->filter->child : NULL; c; c = c->next) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, c->string);
    if (cJSON_IsString(c) && !(cJSON_IsString(v) && !strcmp(v->valuestring, c->valuestring))) return 0;
    if (cJSON_IsNumber(c) && !(cJSON_IsNumber(v) && v->valuedouble == c->valuedouble)) return 0;
  }
  return 1;
}

/* matching events in the ndjson lines of @w; the events among them (not gap records) in *@ev */
static uint64_t count_matches(const struct etw_trigger *t, const struct etw_jw *w, uint64_t *ev) {
  uint64_t n = 0;
  *ev = 0;
  const char *p = w->buf, *end = w->buf + w->len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    cJSON *e = cJSON_ParseWithLength(p, len);
    if (e && cJSON_GetObjectItemCaseSensitive(e, "System")) ++*ev;
    if (e && event_matches(t, e)) n++;
    cJSON_Delete(e);
    p += len + 1;
  }
  return n;
}

/* a rate rule's count for a window: @m matches among @ev events seen, and @drop events the
 * watcher's queue dropped, of which the same share as so far is taken to match (see top) */
static double window_count(const struct etw_trigger *t, uint64_t m, uint64_t drop) {
  if (!t->filter) return (double)(m + drop);
  uint64_t seen = atomic_load(&t->seen), matched = atomic_load(&t->matched);
  return (double)m + (seen ? (double)drop * (double)matched / (double)seen : 0);
}

static void *trig_main(void *arg) {
  struct etw_trigger *t = arg;
  struct etw_jw w;
  etw_jw_init(&w, 2u << 20);
  double win_start = 0, run = 0, hit_at = -1, win_n = 0;
  uint64_t drop_seen = 0;
  double lost_at = 0;
  while (!atomic_load(&t->quit)) {
    w.len = 0;
    int n = etw_sub_read(t->sub, &w, ETW_FMT_NDJSON, 1u << 20, 100);
    if (n < 0) break; /* the watcher ended (failed): the trigger can never fire */
    double now = (double)etw_mono_ns() / 1e9;
    uint64_t drop = 0;
    if (now - lost_at >= 0.1) { /* the losses (queue, hub, kernel: the backend's counters) */
      struct etw_sub_stats ss;
      etw_sub_stats(t->sub, &ss);
      uint64_t lost = ss.dropped + etw_session_lost_before_hub(t->watch);
      drop = lost - drop_seen;
      drop_seen = lost;
      lost_at = now;
    }
    if (!atomic_load(&t->armed)) continue;
    if (hit_at >= 0) {
      if (now >= hit_at + t->after_s) {
        t->fired(t->ctx);
        break;
      }
      continue;
    }
    uint64_t ev = 0, m = n > 0 ? count_matches(t, &w, &ev) : 0;
    atomic_fetch_add(&t->dropped, drop);
    if (!t->rate) {
      if (m) hit_at = now;
    } else {
      if (win_start == 0) win_start = now;
      win_n += window_count(t, m, drop);
      if (now - win_start >= 1.0) { /* a window ended: its rate */
        double rate = win_n / (now - win_start);
        int ok = t->rate == 1 ? rate > t->n : rate < t->n;
        run = ok ? run + (now - win_start) : 0;
        win_start = now;
        win_n = 0;
        atomic_store(&t->rate_milli, (uint64_t)(rate * 1000 + 0.5));
        atomic_store(&t->run_ms, (uint64_t)(run * 1000));
        if (run >= t->for_s - 0.05) hit_at = now;
      }
    }
    atomic_fetch_add(&t->seen, ev);
    atomic_fetch_add(&t->matched, m);
    if (hit_at >= 0) atomic_store(&t->hit, 1);
    if (hit_at >= 0 && t->after_s == 0) {
      t->fired(t->ctx);
      break;
    }
  }
  etw_jw_free(&w);
  /* done (fired, disarmed or the watcher ended): the watcher goes now, not at delete */
  etw_session_unsubscribe(t->watch, t->sub, NULL);
  etw_session_discard(t->watch);
  t->sub = NULL;
  t->watch = NULL;
  return NULL;
}

void etw_trigger_json(struct etw_trigger *t, struct etw_jw *w) {
  char b[320];
  if (t->rate)
    snprintf(b, sizeof b, "{\"armed\":%s,\"met\":%s,\"rate\":%.3f,\"for_s_met\":%.1f,\"seen\":%llu,"
             "\"matched\":%llu,\"dropped\":%llu}", atomic_load(&t->armed) ? "true" : "false",
             atomic_load(&t->hit) ? "true" : "false", (double)atomic_load(&t->rate_milli) / 1000,
             (double)atomic_load(&t->run_ms) / 1000, (unsigned long long)atomic_load(&t->seen),
             (unsigned long long)atomic_load(&t->matched), (unsigned long long)atomic_load(&t->dropped));
  else
    snprintf(b, sizeof b, "{\"armed\":%s,\"met\":%s,\"seen\":%llu,\"matched\":%llu,\"dropped\":%llu}",
             atomic_load(&t->armed) ? "true" : "false", atomic_load(&t->hit) ? "true" : "false",
             (unsigned long long)atomic_load(&t->seen), (unsigned long long)atomic_load(&t->matched),
             (unsigned long long)atomic_load(&t->dropped));
  etw_jw_lit(w, b);
}

enum etw_err etw_trigger_new(struct etw_core *c, const char *backend, const char *json,
                             const char *ptr, void (*fired)(void *ctx), void *ctx,
                             struct etw_trigger **out, struct etw_status *st) {
  *out = NULL;
  cJSON *v = cJSON_Parse(json);
  struct etw_trigger *t = calloc(1, sizeof *t);
  if (!v || !t) {
    cJSON_Delete(v);
    free(t);
    return etw_fail(st, ETW_E_NOMEM, NULL, NULL);
  }
  const cJSON *x;
  snprintf(t->provider, sizeof t->provider, "%s", cJSON_GetObjectItemCaseSensitive(v, "provider")->valuestring);
  if ((x = cJSON_GetObjectItemCaseSensitive(v, "event"))) snprintf(t->event, sizeof t->event, "%s", x->valuestring);
  if ((x = cJSON_GetObjectItemCaseSensitive(v, "after_s"))) t->after_s = x->valuedouble;
  if ((x = cJSON_GetObjectItemCaseSensitive(v, "rate_above"))) t->rate = 1, t->n = x->valuedouble;
  if ((x = cJSON_GetObjectItemCaseSensitive(v, "rate_below"))) t->rate = 2, t->n = x->valuedouble;
  t->for_s = (x = cJSON_GetObjectItemCaseSensitive(v, "for_s")) ? x->valuedouble : 1;
  t->filter = cJSON_DetachItemFromObjectCaseSensitive(v, "filter");
  t->fired = fired;
  t->ctx = ctx;
  cJSON_Delete(v);
  /* the watcher: the trigger's provider (and event) only */
  cJSON *body = cJSON_CreateObject(), *provs = cJSON_AddArrayToObject(body, "providers");
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(body, "backend", backend);
  cJSON_AddStringToObject(p, "name", t->provider);
  if (t->event[0]) cJSON_AddItemToArray(cJSON_AddArrayToObject(p, "events"), cJSON_CreateString(t->event));
  cJSON_AddItemToArray(provs, p);
  enum etw_err e = etw_session_create_private(c, body, NULL, &t->watch, st);
  cJSON_Delete(body);
  if (e) { /* name the trigger as the culprit: its provider or event is what the backend refused */
    char msg[sizeof st->msg];
    snprintf(msg, sizeof msg, "%s", st->msg);
    etw_fail(st, e, ptr, "%s: %s", ptr, msg);
    etw_trigger_free(t);
    return e;
  }
  int err = 0;
  t->sub = etw_session_subscribe(t->watch, NULL, 0, &err);
  if (!t->sub || pthread_create(&t->th, NULL, trig_main, t)) {
    etw_trigger_free(t);
    return etw_fail(st, ETW_E_NOMEM, ptr, "cannot start the watcher of %s", ptr);
  }
  t->th_started = 1;
  *out = t;
  return ETW_E_OK;
}

void etw_trigger_arm(struct etw_trigger *t) {
  if (t) atomic_store(&t->armed, 1);
}

void etw_trigger_disarm(struct etw_trigger *t) {
  if (t) atomic_store(&t->quit, 1);
}

void etw_trigger_free(struct etw_trigger *t) {
  if (!t) return;
  atomic_store(&t->quit, 1); /* the thread looks at it at least every 100 ms */
  if (t->th_started) pthread_join(t->th, NULL);
  if (t->sub) etw_session_unsubscribe(t->watch, t->sub, NULL);
  if (t->watch) etw_session_discard(t->watch);
  cJSON_Delete(t->filter);
  free(t);
}
