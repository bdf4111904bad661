/* test_dec_clrstack.c — CLR stack walk events (the ClrStackWalk template: ClrInstanceID,
 * Reserved1, Reserved2, FrameCount, Stack). Every manifest copy declares Stack with count="2",
 * the runtime writes FrameCount pointers (4 or 8 bytes by the record's header flags) and
 * TraceEvent reads FrameCount of them; the decoder corrects the template (dec_clr_fix).
 *
 * 1. net.4.5.2.x64.etl decoded with the manifests directory, without manifests (the trace's
 *    EventInfo blobs) and with the lilhoser dumps only: for every stack walk record the payload
 *    is exactly 8 + FrameCount × pointer size (nothing left over), the event is decoded, its
 *    FrameCount is the payload's, and Stack holds FrameCount values equal to the payload's
 *    pointers read here from the record bytes (not through the decoder).
 * 2. Two records pinned byte for byte (one 32-bit, one 64-bit process), with their frames.
 * 3. Independent plausibility: a frame is a return address, so it lies in an image loaded in
 *    that process (kernel Image events), a kernel image, or a JIT-compiled method (CLR method
 *    load/rundown events) — all but one frame of the pinned events, ≥ 99.9 % of all frames.
 * 4. Schemas: all four CLR providers' stack walk events after loading the manifests, and
 *    hand-made records (rundown provider, both pointer sizes, FrameCount 0, a short payload).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "etwcore/etl.h"
#include "etwcore/jw.h"
#include "t.h"
#include "test_etl_util.h"

/* the ClrStackWalk events: provider GUID (in record byte order), event id */
static const struct {
  unsigned char guid[16];
  uint16_t id;
  const char *name;
} STACKEV[4] = {
    {{0x23, 0x0d, 0x3c, 0xe1, 0xbc, 0xcc, 0x12, 0x4e, 0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4}, 82, "Runtime"},
    {{0x1c, 0x02, 0x69, 0xa6, 0x50, 0xc4, 0x09, 0x46, 0xa0, 0x35, 0x5a, 0xf5, 0x9a, 0xf4, 0xdf, 0x18}, 0, "Rundown"},
    {{0xba, 0xcb, 0x2b, 0xcc, 0xb6, 0x16, 0xf3, 0x4c, 0x89, 0x90, 0xd7, 0x4c, 0x2e, 0x8a, 0xf5, 0x00}, 1, "Stress"},
    {{0x54, 0xd7, 0x3f, 0x76, 0x86, 0x70, 0xfe, 0x4d, 0x95, 0xeb, 0xc0, 0x1a, 0x46, 0xfa, 0xf4, 0xca}, 151, "Private"},
};

static int stack_event(const struct etw_rec *r) {
  if (r->kind != ETW_REC_EVENT) return -1;
  for (int i = 0; i < 4; i++)
    if (!memcmp(r->provider_id, STACKEV[i].guid, 16) && r->desc.id == STACKEV[i].id) return i;
  return -1;
}

static uint64_t rd(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

/* The "Stack" array of @json as numbers; each element must be the text "0x<lower-case hex>".
 * Returns the element count, or -1 when absent or malformed. */
static long json_stack(const char *json, uint64_t *out, size_t cap) {
  const char *p = strstr(json, "\"Stack\":[");
  if (!p) return -1;
  p += 9;
  long n = 0;
  if (*p == ']') return 0;
  for (;;) {
    if (p[0] != '"' || p[1] != '0' || p[2] != 'x') return -1;
    char *e;
    unsigned long long v = strtoull(p + 3, &e, 16);
    if (*e != '"') return -1;
    char want[32];
    snprintf(want, sizeof want, "\"0x%llx\"", v);
    if (strncmp(p, want, strlen(want))) return -1; /* lower case, no leading zeros */
    if ((size_t)n < cap) out[n] = v;
    n++;
    p = e + 1;
    if (*p == ']') return n;
    if (*p != ',') return -1;
    p++;
  }
}

/* ---- pinned records: the first two runtime stack walks of net.4.5.2.x64.etl (record 9,499:
 * PerfView.exe, a 32-bit process; record 31,019: a 64-bit process), payload bytes as the file
 * holds them after decompression */
static const char PIN1_HEX[] =
    "0b00000043000000884d8b74f81293745d0b937492cf9a746f14777457137774"
    "802b5d74f72b5d74d72c5d743735570a252b570ac62a570a0729570a7728570a"
    "7728570a7728570a7728570a7728570a7728570a7728570a7728570a7728570a"
    "7728570ab21e570a431c570a891b570ad07efd080254fd084c51fd084050fd08"
    "0c04570aa78cdf08368adf082bd3eb066bd2eb0645d1eb06cacfeb06fa5feb06"
    "5943eb068ea08701d877de74cb78de749d89de74668ade742f582d07894c2d07"
    "ee4a2d074e4a2d07ad452d0729432d07a801ad0553fd6203bc395d0352255d74"
    "37f25d7460ff5d74898f757440686f74c53d7374683e73747a3f7374866b7374"
    "ccffc774167fcf74e34dcf7469ac76773cac7677";
static const char PIN2_HEX[] =
    "09000000090000001d0452bef9070000e23652bef90700004b1f52bef9070000"
    "605544bef90700002d0e1fbef90700004a7b23bef9070000b6fc1ebef9070000"
    "7e1659cff9070000f1c330d0f9070000";

static size_t unhex(const char *h, unsigned char *out) {
  size_t n = strlen(h) / 2;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(h + 2 * i, "%2x", &v);
    out[i] = (unsigned char)v;
  }
  return n;
}

/* ---- code ranges for the plausibility check */
struct range {
  uint32_t pid; /* 0 = kernel image (every process) */
  uint64_t lo, hi;
};
struct ranges {
  struct range *r;
  size_t n, cap;
};
static void range_add(struct ranges *R, uint32_t pid, uint64_t base, uint64_t size) {
  if (!size || base + size < base) return;
  if (R->n == R->cap) {
    R->cap = R->cap ? R->cap * 2 : 1024;
    R->r = realloc(R->r, R->cap * sizeof *R->r);
    if (!R->r) abort();
  }
  R->r[R->n++] = (struct range){pid, base, base + size};
}
static int range_cmp(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}
/* Is @a in a range of @pid? (sorted; ranges of one pid may overlap: a bounded look back) */
static int range_has(const struct ranges *R, uint32_t pid, uint64_t a) {
  size_t lo = 0, hi = R->n; /* first entry > (pid, a) */
  while (lo < hi) {
    size_t m = (lo + hi) / 2;
    if (R->r[m].pid < pid || (R->r[m].pid == pid && R->r[m].lo <= a)) lo = m + 1;
    else hi = m;
  }
  for (size_t k = lo, look = 0; k-- > 0 && look < 256; look++) {
    if (R->r[k].pid != pid) break;
    if (a >= R->r[k].lo && a < R->r[k].hi) return 1;
  }
  return 0;
}
static int num_of(const char *json, const char *key, uint64_t *v) {
  char raw[64];
  if (tu_raw(json, key, raw, sizeof raw)) return -1;
  const char *s = raw[0] == '"' ? raw + 1 : raw;
  char *e;
  *v = strtoull(s, &e, 0);
  return e == s ? -1 : 0;
}

struct frames { /* every stack walk's frames, for the plausibility check after the last record */
  uint64_t *f;
  size_t n, cap;
  struct {
    uint32_t pid;
    size_t at, n;
    int pinned;
  } *ev;
  size_t nev, cev;
};

/* Decode the whole trace; check every stack walk record. Returns the number of stack walks. */
static size_t run(const unsigned char *img, size_t len, const char *mdir, const char *label, int plaus) {
  struct etw_etl_reader *r;
  struct etw_decoder *d;
  struct etw_status st;
  if (tu_open(img, len, "net.4.5.2.x64.etl", mdir, &r, &d)) {
    CHECK(!"reader");
    return 0;
  }
  struct etw_jw w;
  etw_jw_init(&w, 0);
  struct etw_evref ref;
  const struct etw_rec *rec;
  size_t n = 0, n32 = 0, n64 = 0, nrt = 0, frames_total = 0, bad = 0, cap = 1 << 16;
  uint64_t *js = malloc(cap * sizeof *js);
  unsigned char pin1[512], pin2[512];
  size_t pin1_n = unhex(PIN1_HEX, pin1), pin2_n = unhex(PIN2_HEX, pin2);
  int saw1 = 0, saw2 = 0;
  struct ranges R = {0};
  struct frames F = {0};
  int k;
  while ((k = etw_etl_reader_next_ref(r, &rec, &st)) == 1) {
    w.len = 0;
    int decoded = etw_decoder_write(d, rec, &w, &ref);
    const char *json = etw_jw_cstr(&w);
    int which = stack_event(rec);
    if (which < 0) {
      if (!plaus) continue;
      /* code ranges: kernel Image events (ImageBase, ImageSize, ProcessId; 0 = kernel) and CLR
       * method events (MethodStartAddress, MethodSize; the record's process) */
      uint64_t base, size, pid;
      if (!strncmp(ref.name, "Image/", 6) && !num_of(json, "ImageBase", &base) && !num_of(json, "ImageSize", &size) &&
          !num_of(json, "ProcessId", &pid))
        range_add(&R, (uint32_t)pid, base, size);
      else if (!num_of(json, "MethodStartAddress", &base) && !num_of(json, "MethodSize", &size))
        range_add(&R, rec->pid, base, size);
      continue;
    }
    n++;
    if (which == 0) nrt++;
    /* the pointer size from the header flags, independently of the reader's ptr_size */
    int f32 = (rec->flags & ETW_EVH_32_BIT_HEADER) != 0, f64 = (rec->flags & ETW_EVH_64_BIT_HEADER) != 0;
    CHECK(f32 != f64);
    unsigned ps = f32 ? 4 : 8;
    n32 += f32;
    n64 += !f32;
    const unsigned char *p = rec->user_data;
    uint32_t fc = rec->user_len >= 8 ? (uint32_t)rd(p + 4, 4) : 0;
    int ok = rec->user_len >= 8 && (uint64_t)rec->user_len == 8 + (uint64_t)fc * ps; /* nothing left over */
    ok &= decoded == 1 && strstr(json, "\"EventData\":{") && !strstr(json, "\"Undecoded\"");
    uint64_t jfc = 0;
    ok &= !num_of(json, "FrameCount", &jfc) && jfc == fc;
    if (fc > cap) {
      cap = fc;
      js = realloc(js, cap * sizeof *js);
    }
    long got = json_stack(json, js, cap);
    ok &= got == (long)fc;
    for (uint32_t i = 0; ok && i < fc; i++) ok = js[i] == rd(p + 8 + (size_t)i * ps, ps);
    frames_total += fc;
    if (!ok && bad++ < 5)
      fprintf(stderr, "%s: stack walk #%zu (len %u, FrameCount %u, ptr %u) wrong: %.400s\n", label, n,
              rec->user_len, fc, ps, json);
    /* the pinned records */
    int pinned = 0;
    if (which == 0 && nrt == 1) {
      saw1 = pinned = 1;
      CHECK_EQ(rec->pid, 3988);
      CHECK_EQ(rec->tid, 3992);
      CHECK_EQ(ps, 4);
      CHECK(rec->user_len == pin1_n && !memcmp(p, pin1, pin1_n));
      CHECK(strstr(json, "\"FrameCount\":67,\"Stack\":[\"0x748b4d88\",\"0x749312f8\",\"0x74930b5d\","));
      CHECK(strstr(json, ",\"0x7776ac69\",\"0x7776ac3c\"]}}")); /* frames 66, 67 */
      CHECK_EQ(got, 67);
      CHECK_EQ(got >= 67 ? js[66] : 0, 0x7776ac3c);
    }
    if (which == 0 && nrt == 2) {
      saw2 = pinned = 1;
      CHECK_EQ(rec->pid, 3676);
      CHECK_EQ(ps, 8);
      CHECK(rec->user_len == pin2_n && !memcmp(p, pin2, pin2_n));
      CHECK(strstr(json, "\"ClrInstanceID\":9,\"Reserved1\":0,\"Reserved2\":0,\"FrameCount\":9,\"Stack\":["
                         "\"0x7f9be52041d\",\"0x7f9be5236e2\",\"0x7f9be521f4b\",\"0x7f9be445560\","
                         "\"0x7f9be1f0e2d\",\"0x7f9be237b4a\",\"0x7f9be1efcb6\",\"0x7f9cf59167e\","
                         "\"0x7f9d030c3f1\"]}}"));
    }
    if (plaus && got == (long)fc) {
      if (F.n + fc > F.cap) {
        F.cap = (F.n + fc) * 2;
        F.f = realloc(F.f, F.cap * sizeof *F.f);
      }
      if (F.nev == F.cev) {
        F.cev = F.cev ? F.cev * 2 : 1024;
        F.ev = realloc(F.ev, F.cev * sizeof *F.ev);
      }
      if (!F.f || !F.ev) abort();
      memcpy(F.f + F.n, js, fc * sizeof *js);
      F.ev[F.nev].pid = rec->pid;
      F.ev[F.nev].at = F.n;
      F.ev[F.nev].n = fc;
      F.ev[F.nev].pinned = pinned;
      F.nev++;
      F.n += fc;
    }
  }
  CHECK_EQ(k, 0);
  CHECK_EQ(bad, 0);
  CHECK(saw1 && saw2);
  CHECK(n32 > 0 && n64 > 0); /* both pointer sizes occur */
  fprintf(stderr, "%s: %zu stack walks (%zu of the runtime provider; %zu with 4-byte, %zu with 8-byte pointers), "
          "%zu frames\n", label, n, nrt, n32, n64, frames_total);
  if (plaus) {
    qsort(R.r, R.n, sizeof *R.r, range_cmp);
    size_t in = 0, tot = 0;
    for (size_t e = 0; e < F.nev; e++) {
      size_t ein = 0;
      for (size_t i = 0; i < F.ev[e].n; i++) {
        uint64_t a = F.f[F.ev[e].at + i];
        ein += range_has(&R, F.ev[e].pid, a) || range_has(&R, 0, a);
      }
      /* the pinned events: every frame but one (frame 40 of the first, 0x187a08e, is in no image
       * and no reported method — a stub; 29 frames of that process have that address) */
      if (F.ev[e].pinned) CHECK(ein + 1 >= F.ev[e].n && F.ev[e].n > 2);
      in += ein;
      tot += F.ev[e].n;
    }
    fprintf(stderr, "%s: %zu code ranges; %zu of %zu frames in an image or JIT-compiled method of their process\n",
            label, R.n, in, tot);
    CHECK(tot == frames_total && tot > 0);
    CHECK(in * 1000 >= tot * 999);
    free(R.r);
    free(F.f);
    free(F.ev);
  }
  free(js);
  etw_jw_free(&w);
  etw_decoder_free(d);
  etw_etl_reader_free(r);
  return n;
}

/* A hand-made stack walk record of provider STACKEV[@which] through the live-consumer path. */
static int synth(struct etw_decoder *d, int which, unsigned ps, uint32_t fc, uint32_t frames_present,
                 struct etw_jw *w) {
  unsigned char pl[8 + 8 * 8];
  memset(pl, 0, sizeof pl);
  pl[0] = 7; /* ClrInstanceID */
  pl[4] = (unsigned char)fc;
  for (uint32_t i = 0; i < frames_present; i++)
    for (unsigned b = 0; b < ps; b++) pl[8 + i * ps + b] = (unsigned char)(b == ps - 1 ? 0x10 + i : 0xA0 + b);
  struct etw_rec r;
  memset(&r, 0, sizeof r);
  r.kind = ETW_REC_EVENT;
  r.ptr_size = (uint8_t)ps;
  r.flags = ps == 4 ? ETW_EVH_32_BIT_HEADER : ETW_EVH_64_BIT_HEADER;
  memcpy(r.provider_id, STACKEV[which].guid, 16);
  r.desc.id = STACKEV[which].id;
  r.desc.opcode = 82;
  r.pid = 10;
  r.tid = 11;
  r.filetime = 132404548209705519ull;
  r.user_data = pl;
  r.user_len = 8 + frames_present * ps;
  w->len = 0;
  struct etw_evref ref;
  return etw_decoder_write(d, &r, w, &ref);
}

/* A ClrStackWalk-shaped schema (Stack count="2", as the manifests have it), Reserved1 of @in1. */
static struct dec_event *mk_stackwalk(uint16_t id, uint16_t in1) {
  struct dec_event *e = calloc(1, sizeof *e);
  e->f = calloc(5, sizeof *e->f);
  static const char *const nm[5] = {"ClrInstanceID", "Reserved1", "Reserved2", "FrameCount", "Stack"};
  const uint16_t in[5] = {6, in1, 4, 8, 16};
  for (int i = 0; i < 5; i++) {
    e->f[i].name = strdup(nm[i]);
    e->f[i].in = in[i];
    e->f[i].len = -1;
    e->f[i].count = i == 4 ? 2 : 1;
    e->f[i].is_array = i == 4;
    e->f[i].len_ref = e->f[i].count_ref = -1;
  }
  e->nf = 5;
  e->id = id;
  e->has_template = 1;
  e->quality = 3;
  return e;
}

static void schemas(const char *mdir) {
  /* every manifest loaded up front (what the providers catalog does) */
  struct etw_decoder *d = etw_decoder_new(NULL);
  dec_manifest_scan_dir(d, mdir);
  d->manifests_scanned = 1;
  for (int i = 0; i < 4; i++) {
    struct dec_provider *p = dec_provider_get(d, STACKEV[i].guid, 0);
    struct dec_event *e = p ? dec_event_find(p, STACKEV[i].id, 0) : NULL;
    CHECK(e && e->nf == 5);
    if (!e || e->nf != 5) continue;
    CHECK_STR(e->f[3].name, "FrameCount");
    CHECK_STR(e->f[4].name, "Stack");
    CHECK(e->f[4].is_array && e->f[4].count_ref == 3);
  }
  /* an event of another provider with the same fields, and a runtime event whose fields differ
   * in one type, are not touched */
  struct dec_provider *other = dec_provider_get(d, (const unsigned char *)"0123456789abcdef", 1);
  struct dec_event *e = mk_stackwalk(82, 4);
  dec_event_add(other, e);
  CHECK(dec_event_find(other, 82, 0) == e && e->f[4].count == 2 && e->f[4].count_ref == -1);
  struct dec_provider *rt = dec_provider_get(d, STACKEV[0].guid, 0);
  CHECK(rt != NULL);
  if (rt) {
    e = mk_stackwalk(999, 6); /* Reserved1 UInt16 */
    dec_event_add(rt, e);
    CHECK(dec_event_find(rt, 999, 0) == e && e->f[4].count == 2 && e->f[4].count_ref == -1);
    e = mk_stackwalk(998, 4); /* the template itself */
    dec_event_add(rt, e);
    CHECK(dec_event_find(rt, 998, 0) == e && e->f[4].is_array && e->f[4].count_ref == 3);
  }

  struct etw_jw w;
  etw_jw_init(&w, 0);
  /* rundown provider, 3 frames of 8 and of 4 bytes */
  CHECK_EQ(synth(d, 1, 8, 3, 3, &w), 1);
  CHECK(strstr(etw_jw_cstr(&w), "\"EventData\":{\"ClrInstanceID\":7,\"Reserved1\":0,\"Reserved2\":0,\"FrameCount\":3,"
                                "\"Stack\":[\"0x10a6a5a4a3a2a1a0\",\"0x11a6a5a4a3a2a1a0\",\"0x12a6a5a4a3a2a1a0\"]}}"));
  CHECK_EQ(synth(d, 1, 4, 3, 3, &w), 1);
  CHECK(strstr(etw_jw_cstr(&w), "\"FrameCount\":3,\"Stack\":[\"0x10a2a1a0\",\"0x11a2a1a0\",\"0x12a2a1a0\"]}}"));
  /* runtime and private providers, more than 2 frames */
  CHECK_EQ(synth(d, 0, 8, 5, 5, &w), 1);
  CHECK(strstr(etw_jw_cstr(&w), "\"FrameCount\":5,\"Stack\":[\"0x10a6a5a4a3a2a1a0\",\"0x11a6a5a4a3a2a1a0\","
                                "\"0x12a6a5a4a3a2a1a0\",\"0x13a6a5a4a3a2a1a0\",\"0x14a6a5a4a3a2a1a0\"]}}"));
  CHECK_EQ(synth(d, 3, 4, 4, 4, &w), 1);
  CHECK(strstr(etw_jw_cstr(&w),
               "\"FrameCount\":4,\"Stack\":[\"0x10a2a1a0\",\"0x11a2a1a0\",\"0x12a2a1a0\",\"0x13a2a1a0\"]}}"));
  /* no frames: the payload ends after FrameCount, and Stack is left out like every trailing
   * field the payload does not reach */
  CHECK_EQ(synth(d, 0, 8, 0, 0, &w), 1);
  CHECK(strstr(etw_jw_cstr(&w), "\"Reserved2\":0,\"FrameCount\":0}}"));
  /* FrameCount larger than the payload: kept whole as Undecoded, not cut short */
  CHECK_EQ(synth(d, 0, 8, 5, 3, &w), 0);
  CHECK(strstr(etw_jw_cstr(&w), "\"Undecoded\":{\"Reason\":\"payload shorter than the template\",\"Payload\":\""));
  etw_jw_free(&w);
  etw_decoder_free(d);
}

int main(void) {
  const char *mdir = tu_manifests();
  schemas(mdir);

  size_t len = 0;
  unsigned char *img =
      tu_corpus_file("microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip!*.etl", &len);
  CHECK(img != NULL);
  if (!img) T_DONE();
  size_t a = run(img, len, mdir, "manifests", 1);
  size_t b = run(img, len, NULL, "no manifests (EventInfo blobs)", 0);
  char lil[4096];
  snprintf(lil, sizeof lil, "%s/lilhoser+etwmanifests", mdir);
  size_t c = run(img, len, lil, "lilhoser dumps only", 0);
  CHECK(a > 0);
  CHECK_EQ(b, a);
  CHECK_EQ(c, a);
  free(img);
  T_DONE();
}
