/* etwd_nats_tool — the tests' and benchmark's NATS client (Python has none here), on libnats.
 *   etwd_nats_tool fetch URL STREAM SUBJECT_FILTER   every message of the stream as ndjson:
 *       {"sseq":N,"subject":..,"hdr":{"Nats-Msg-Id":..,…},"data":<payload as it is>}
 *   etwd_nats_tool pub URL STREAM SUBJECT N SIZE [BATCH]   create STREAM (if missing) and publish
 *       N messages of SIZE bytes with async publishes and acks; prints {"msgs":N,"seconds":S}
 * Exit status 0 on success. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

static int die(const char *what, natsStatus s) {
  fprintf(stderr, "etwd_nats_tool: %s: %s %s\n", what, natsStatus_GetText(s),
          nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
  return 1;
}

static void json_str(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
    else putchar(*s);
  }
  putchar('"');
}

static int fetch(jsCtx *js, const char *stream, const char *filter) {
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
  if (s != NATS_OK) return die("stream info", s);
  uint64_t total = si->State.Msgs;
  jsStreamInfo_Destroy(si);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream;
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverAll;
  char durable[64];
  snprintf(durable, sizeof durable, "fetch%d", (int)getpid());
  natsSubscription *sub = NULL;
  if ((s = js_PullSubscribe(&sub, js, filter, durable, NULL, &so, &jerr)) != NATS_OK)
    return die("pull subscribe", s);
  static const char *const hk[] = {"Nats-Msg-Id", "Etwd-Host", "Etwd-Provider", "Etwd-Event",
                                   "Etwd-Pid", NULL};
  uint64_t got = 0;
  while (got < total) {
    natsMsgList l = {0};
    s = natsSubscription_Fetch(&l, sub, 1024, 5000, &jerr);
    if (s != NATS_OK) {
      natsSubscription_Unsubscribe(sub);
      natsSubscription_Destroy(sub);
      return die("fetch", s);
    }
    for (int i = 0; i < l.Count; i++) {
      natsMsg *m = l.Msgs[i];
      jsMsgMetaData *md = NULL;
      uint64_t sseq = 0;
      if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
        sseq = md->Sequence.Stream;
        jsMsgMetaData_Destroy(md);
      }
      printf("{\"sseq\":%" PRIu64 ",\"subject\":", sseq);
      json_str(natsMsg_GetSubject(m));
      printf(",\"hdr\":{");
      int first = 1;
      for (int k = 0; hk[k]; k++) {
        const char *v = NULL;
        if (natsMsgHeader_Get(m, hk[k], &v) != NATS_OK) continue;
        printf("%s", first ? "" : ",");
        first = 0;
        json_str(hk[k]);
        putchar(':');
        json_str(v);
      }
      printf("},\"data\":%.*s}\n", natsMsg_GetDataLength(m), natsMsg_GetData(m));
      got++;
    }
    natsMsgList_Destroy(&l);
  }
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int pub(jsCtx *js, const char *stream, const char *subject, long n, long size, long batch) {
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  const char *subs[1] = {subject};
  cfg.Name = stream;
  cfg.Subjects = subs;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus s = js_AddStream(&si, js, &cfg, NULL, &jerr);
  if (s == NATS_OK) jsStreamInfo_Destroy(si);
  char *data = malloc((size_t)size);
  if (!data) return 1;
  memset(data, 'x', (size_t)size);
  double t0 = now_s();
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 10000;
  for (long i = 0; i < n; i++) {
    if ((s = js_PublishAsync(js, subject, data, (int)size, NULL)) != NATS_OK) return die("publish", s);
    if ((i + 1) % batch == 0 && (s = js_PublishAsyncComplete(js, &po)) != NATS_OK) return die("complete", s);
  }
  if ((s = js_PublishAsyncComplete(js, &po)) != NATS_OK) return die("complete", s);
  printf("{\"msgs\":%ld,\"size\":%ld,\"seconds\":%.3f}\n", n, size, now_s() - t0);
  free(data);
  return 0;
}

/* one message with the body @body on @subject of an existing stream (a hostile publisher) */
static int body(jsCtx *js, const char *subject, const char *text) {
  jsPubAck *pa = NULL;
  natsStatus s = js_Publish(&pa, js, subject, text, (int)strlen(text), NULL, NULL);
  if (s != NATS_OK) return die("publish", s);
  jsPubAck_Destroy(pa);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: etwd_nats_tool fetch URL STREAM FILTER | pub URL STREAM SUBJECT N SIZE [BATCH] | body URL SUBJECT TEXT\n");
    return 2;
  }
  natsConnection *nc = NULL;
  jsCtx *js = NULL;
  natsStatus s = natsConnection_ConnectTo(&nc, argv[2]);
  if (s != NATS_OK) return die("connect", s);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = 4096;
  jo.Wait = 30000; /* a cluster that just lost a node may take a while to answer API requests */
  if ((s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) return die("jetstream", s);
  int rc;
  if (!strcmp(argv[1], "fetch"))
    rc = fetch(js, argv[3], argv[4]);
  else if (!strcmp(argv[1], "pub") && argc >= 7)
    rc = pub(js, argv[3], argv[4], atol(argv[5]), atol(argv[6]), argc > 7 ? atol(argv[7]) : 1024);
  else if (!strcmp(argv[1], "body") && argc >= 5)
    rc = body(js, argv[3], argv[4]);
  else
    rc = 2;
  fflush(stdout);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  nats_Close();
  return rc;
}
