/* decode.h — internals shared by the event decoders (the .c files in etwcore/decode). Not a public API.
 *
 * The decoder (struct etw_decoder) owns a registry of providers keyed by GUID. Each provider
 * has a name, where its schema came from, and a table of event schemas keyed by (id, version)
 * (manifest XML, EventSource in-stream manifests, KernelTraceControl EventInfo blobs).
 * TraceLogging events carry their schema in every event and need no registry entry, but are
 * registered too so the providers API can list them.
 *
 * Field values are rendered by dec_value() from a TDH InType/OutType pair, for every source.
 */
#ifndef ETWCORE_DECODE_H
#define ETWCORE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "cc.h"
#include "etwcore/etl.h"

#include "simd.h"

static inline uint16_t d_rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t d_rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t d_rd64(const unsigned char *p) { return d_rd32(p) | (uint64_t)d_rd32(p + 4) << 32; }

/* Fast number writers (same text as etw_jw_u64 / etw_jw_i64 / etw_jw_hex): the digit count
 * first, then the digits straight into the buffer (no temporary, no variable-length copy). */
static inline unsigned dec_digits(uint64_t v) {
  static const uint64_t P10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                   100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
                                   1000000000000ull, 10000000000000ull, 100000000000000ull,
                                   1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
                                   1000000000000000000ull, 10000000000000000000ull};
  unsigned t = (unsigned)(64 - etw_clz64(v | 1)) * 1233u >> 12; /* ≈ log10, low by ≤ 1 */
  return t + ((v | 1) >= P10[t]);
}
/* The same text for a 32-bit value, fewer instructions and no call: the length by comparisons (no
 * digit count), digit pairs from a table, the hundreds by a multiply-shift. */
static const char DEC_D2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
static inline char *dec_put_lt1e4(char *p, uint32_t v) { /* v < 10^4, no leading zeros */
  if (v < 100) {
    if (v < 10) {
      *p = (char)('0' + v);
      return p + 1;
    }
    memcpy(p, DEC_D2 + 2 * v, 2);
    return p + 2;
  }
  uint32_t h = (v * 5243u) >> 19; /* v / 100 (exact below 43699) */
  uint32_t l = v - h * 100u;
  if (h < 10) {
    *p = (char)('0' + h);
    memcpy(p + 1, DEC_D2 + 2 * l, 2);
    return p + 3;
  }
  memcpy(p, DEC_D2 + 2 * h, 2);
  memcpy(p + 2, DEC_D2 + 2 * l, 2);
  return p + 4;
}
static inline void dec_put4(char *p, uint32_t v) { /* exactly 4 digits of v < 10^4 */
  uint32_t h = (v * 5243u) >> 19;
  memcpy(p, DEC_D2 + 2 * h, 2);
  memcpy(p + 2, DEC_D2 + 2 * (v - h * 100u), 2);
}
static inline char *dec_put_u32(char *p, uint32_t v) {
  if (v < 10000) return dec_put_lt1e4(p, v);
  if (v < 100000000) {
    uint32_t h = v / 10000u;
    p = dec_put_lt1e4(p, h);
    dec_put4(p, v - h * 10000u);
    return p + 4;
  }
  uint32_t h = v / 100000000u, r = v - h * 100000000u, a = r / 10000u; /* h < 43 */
  if (h < 10) {
    *p++ = (char)('0' + h);
  } else {
    memcpy(p, DEC_D2 + 2 * h, 2);
    p += 2;
  }
  dec_put4(p, a);
  dec_put4(p + 4, r - a * 10000u);
  return p + 8;
}
static inline char *dec_put_u64(char *p, uint64_t v) {
  if (v <= UINT32_MAX) return dec_put_u32(p, (uint32_t)v);
  static const char D[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                          "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                          "8081828384858687888990919293949596979899";
  unsigned nd = dec_digits(v);
  char *e = p + nd;
  while (v >= 10000) { /* four digits per step: one 64-bit division, two 32-bit ones */
    unsigned r = (unsigned)(v % 10000);
    v /= 10000;
    unsigned hi = r / 100, lo = r - hi * 100;
    e -= 4;
    memcpy(e, D + 2 * hi, 2);
    memcpy(e + 2, D + 2 * lo, 2);
  }
  unsigned u = (unsigned)v; /* < 10000 */
  if (u >= 100) {
    unsigned hi = u / 100;
    e -= 2;
    memcpy(e, D + 2 * (u - hi * 100), 2);
    u = hi;
  }
  if (u >= 10) {
    e -= 2;
    memcpy(e, D + 2 * u, 2);
  } else {
    *--e = (char)('0' + u);
  }
  return p + nd;
}
static inline void dec_u64(struct etw_jw *w, uint64_t v) {
  if (etw_jw_reserve(w, 21)) return;
  w->len = (size_t)(dec_put_u64(w->buf + w->len, v) - w->buf);
}
static inline void dec_i64(struct etw_jw *w, int64_t v) {
  if (v < 0) {
    etw_jw_ch(w, '-');
    dec_u64(w, (uint64_t)0 - (uint64_t)v);
  } else {
    dec_u64(w, (uint64_t)v);
  }
}
#if ETW_LE
/* 8 lower-case hex digits of @x (most significant first) as 8 bytes in memory order. */
static inline uint64_t dec_hex8(uint32_t x32) {
  uint64_t x = x32;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full; /* byte i = nibble i */
  uint64_t ge10 = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
  x += 0x3030303030303030ull + ge10 * ('a' - '0' - 10);
  return etw_bswap64(x);
}
#endif
/* "0x…" (quoted) at @p, which must have 20 bytes of room; returns the end. */
static inline char *dec_put_hex(char *p, uint64_t v) {
  unsigned lz = (unsigned)etw_clz64(v | 1);
  unsigned nd = 16 - (lz >> 2); /* (64 - lz + 3) / 4 */
#if ETW_LE
  memcpy(p, "\"0x0", 4); /* one store (the 4th byte is overwritten by the digits) */
  /* all 16 digits of v shifted so the significant ones come first (by 4 * (16 - nd) = lz & 60
   * bits); the quote overwrites the rest */
  uint64_t t = v << (lz & 60);
  uint64_t a = dec_hex8((uint32_t)(t >> 32)), b = dec_hex8((uint32_t)t);
  memcpy(p + 3, &a, 8);
  memcpy(p + 11, &b, 8);
  p[3 + nd] = '"';
#else
  static const char X[] = "0123456789abcdef";
  p[0] = '"';
  p[1] = '0';
  p[2] = 'x';
  char *e = p + 3 + nd;
  *e = '"';
  do {
    *--e = X[v & 15];
    v >>= 4;
  } while (v);
#endif
  return p + 4 + nd;
}
static inline void dec_hex(struct etw_jw *w, uint64_t v) {
  if (etw_jw_reserve(w, 20)) return;
  w->len = (size_t)(dec_put_hex(w->buf + w->len, v) - w->buf);
}
/* `"{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}"` (etw_jw_guid's text, 40 bytes) of GUID @g at @p. */
static inline char *dec_put_guid(char *p, const unsigned char g[16]) {
#if ETW_LE
  uint64_t a = dec_hex8(d_rd32(g));
  uint64_t b = dec_hex8((uint32_t)d_rd16(g + 4) << 16 | d_rd16(g + 6));
  uint64_t c = dec_hex8((uint32_t)g[8] << 24 | (uint32_t)g[9] << 16 | (uint32_t)g[10] << 8 | g[11]);
  uint64_t e = dec_hex8((uint32_t)g[12] << 24 | (uint32_t)g[13] << 16 | (uint32_t)g[14] << 8 | g[15]);
  p[0] = '"';
  p[1] = '{';
  memcpy(p + 2, &a, 8);
  p[10] = '-';
  memcpy(p + 11, &b, 4);
  p[15] = '-';
  memcpy(p + 16, (const char *)&b + 4, 4);
  p[20] = '-';
  memcpy(p + 21, &c, 4);
  p[25] = '-';
  memcpy(p + 26, (const char *)&c + 4, 4);
  memcpy(p + 30, &e, 8);
  p[38] = '}';
  p[39] = '"';
  return p + 40;
#else
  static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  static const char X[] = "0123456789abcdef";
  *p++ = '"';
  *p++ = '{';
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    unsigned char v = g[order[i]];
    *p++ = X[v >> 4];
    *p++ = X[v & 15];
  }
  *p++ = '}';
  *p++ = '"';
  return p;
#endif
}
static inline char *dec_put_i64(char *p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return dec_put_u64(p, (uint64_t)0 - (uint64_t)v);
  }
  return dec_put_u64(p, (uint64_t)v);
}

/* Hard limits for schemas built from untrusted input. */
#define DEC_MAX_FIELDS 512      /* fields per event schema */
#define DEC_MAX_DEPTH 8         /* struct nesting */
#define DEC_MAX_ARRAY 65535     /* elements per array */
#define DEC_MAX_EVENTS 65536    /* event schemas per provider */
#define DEC_MAX_PROVIDERS 4096
#define DEC_MAX_MANIFEST (64u << 20) /* bytes of one manifest XML */

/* Pseudo InType inside a struct: skip padding up to the next pointer-size boundary. */
#define DEC_IN_ALIGN_PTR 0xFFF0
#define DEC_IN_ALIGN_4 0xFFF1

/** dec_str16 - append UTF-16LE @s[0..units) as a quoted JSON string, stopping at a NUL unit;
 * jw.c's converter (etw_jw_str16n). Returns the units converted (< @units when a NUL was met). */
static inline size_t dec_str16(struct etw_jw *w, const unsigned char *s, size_t units) {
  return etw_jw_str16n(w, s, units);
}

/* Value rendering modes for dec_value. */
enum { DV_TL = 1, DV_MANIFEST = 2 };

/**
 * dec_value - render one scalar of type (@in, @out) at @p (@n bytes available) as JSON.
 * @len: manifest `length` (characters for strings, bytes for binary) or -1.
 * Returns the bytes consumed, or -1 when @n is too short / the type is unknown.
 * @ival receives the integer value of integer types (for length/count references).
 */
long dec_value(struct etw_jw *w, unsigned in, unsigned out, const unsigned char *p, size_t n,
               long len, int ptr_size, int mode, uint64_t *ival);

/**
 * dec_char_width - the width in bytes (1 or 2) of a character of type (@in, @out) when an array
 * of them is text: Int8/UInt8 (8-bit) and UInt16 (UTF-16) with OutType String
 * (TraceLoggingCharArray, TraceLoggingWCharArray, …), AnsiChar, UnicodeChar; else 0.
 */
int dec_char_width(unsigned in, unsigned out);
/**
 * dec_char_array - an array of @count such characters of width @wd at @p (@n bytes available)
 * as ONE JSON string, the rule for every decoder family (TraceLogging, manifest, TDH schemas):
 * the count says the length; trailing NULs (a fixed buffer's padding) are left out, a NUL before
 * other characters is kept as \u0000 (nothing after it is hidden). 8-bit text as AnsiString's
 * (UTF-8 kept, other bytes U+FFFD), UTF-16 as UnicodeString's. Returns the bytes consumed
 * (@count * @wd), or -1 when @n is too short.
 */
long dec_char_array(struct etw_jw *w, int wd, const unsigned char *p, size_t n, size_t count);

/* A map (valueMap / bitMap) from a manifest or an EventMapInfo blob. */
struct dec_map {
  char *name;
  int bitmap;
  uint32_t n;
  uint32_t *val;
  char **str;
  /* dec_map_render, set on first use: the texts' lengths, and plain = 1 when every text is
   * printable ASCII without '"' or '\\' (its JSON string is itself) and a bitmap's joined texts
   * always fit its 1024-byte buffer */
  uint32_t *slen;
  uint8_t prep, plain;
};

/* One field of an event schema. */
struct dec_field {
  char *name;
  uint16_t in, out;
  int32_t len;           /* constant length or -1 */
  int32_t count;         /* constant count (1 = scalar) or -1 */
  int32_t len_ref;       /* index of the field holding the length, or -1 */
  int32_t count_ref;     /* index of the field holding the count, or -1 */
  uint16_t members;      /* in == 24 (struct): number of following member fields (incl. nested) */
  uint8_t is_array;      /* count given (even if 1) */
  struct dec_map *map;
  const char *map_name;  /* interned; EventInfo maps are looked up late (EventMapInfo) */
  char *key;             /* cached JSON key text `,"name":` (built on first use) */
  uint32_t key_len;      /* including the leading comma */
  uint8_t kind;          /* walker fast-path class (dec_man.c), 0 = not classified yet */
  /* walker: fixed-size scalars from this field on (0 = this one is not), and their payload
   * bytes with 4- and 8-byte pointers; set with dec_event.runs */
  uint16_t run_n;
  uint16_t run_b4, run_b8;
};

/**
 * dec_char_length - schema loaders' rule for a character field (dec_char_width) that has a length
 * but no count (a manifest's length="L" or length="3" on win:UInt8/UInt16 xs:string, a TDH
 * property's PropertyParamLength or PropertyParamFixedLength): the length is its number of
 * characters (as a string's), so it becomes an array of that many, counted by the same field or
 * constant: one string (dec_char_array), not the first character. Other fields are left alone.
 */
void dec_char_length(struct dec_field *f);

struct dec_event {
  uint16_t id;
  uint8_t version;
  uint8_t level, opcode, channel;
  uint16_t task;
  uint64_t keywords;
  const char *name;      /* interned PerfView-style name ("GC/Start") */
  const char *task_name, *opcode_name; /* interned or NULL */
  struct dec_field *f;
  uint32_t nf;
  int has_template;      /* 0 = no template known (payload rendered raw when non-empty) */
  struct dec_provider *owner; /* set by dec_event_add */
  int quality;           /* which schema wins: 3 manifest with message names, 2 EventInfo
                            carried in the trace, 1 other manifest template, 0 no template */
  int runs;              /* dec_field.run_* computed (walker, first use) */
  void *sys_hint;        /* the System-block cache entry last used for this event (dec_sys.c) */
};

struct dec_provider {
  unsigned char guid[16];
  struct etw_decoder *dec; /* the registry's decoder (dec_event_add bumps its reg_gen) */
  const char *name;      /* interned */
  const char *source;    /* "manifest", "eventsource", "tracelogging", "eventinfo", "kernel" */
  struct dec_event **ev; /* open hash by (id, version) */
  uint32_t ev_cap, n_ev;
  uint64_t seen;         /* events decoded */
  struct dec_map **maps;
  uint32_t n_maps;
  /* EventSource manifest reassembly */
  unsigned char *es_buf;
  size_t es_len;
  uint32_t es_next_chunk;
  unsigned char *es_last; /* the last manifest loaded (a repeat of it is not parsed again) */
  size_t es_last_len;
  /* TraceLogging: event names seen (interned), for the providers API */
  const char **tl_names;
  uint32_t n_tl;
  uint8_t builtin_only; /* created for its built-in schemas alone (dec_builtin_get) */
};
#define DEC_MAX_TL_NAMES 1024

/* Names of kernel records, resolved once per (HookId, version). */
struct dec_kname {
  uint64_t key; /* generation << 32 | (hook_id << 8 | version) + 1; 0 = empty */
  const char *prov, *name, *task, *opcode;
  struct dec_provider *p;
  struct dec_event *e;
  void *sys_hint; /* the System-block cache entry last used for these records (dec_sys.c) */
};

/* Names of classic records (KernelTraceControl etc.) known to the built-in tables, resolved
 * once per (GUID, kind, opcode, version). */
struct dec_cname {
  unsigned char guid[16];
  uint32_t key; /* 0 = empty */
  const char *prov, *name, *task, *opcode;
};
#define DEC_CNAME_N 64

struct dec_sysc;

/* A kernel record type's compiled plan (dec_sys.c builds it, dec_core.c dispatches to it): the
 * System block's constant text for one dec_kname entry (its names, the descriptor bytes and
 * keywords, the group GUID), and, for layouts whose fields all have a fixed size, the EventData
 * fields as a list of (key text, value writer) ops, the first key fused with
 * `,"EventData":{`. Reached from the record with the kn key, no resolve. */
#define DEC_KOPS 24
struct dec_kop {
  char key[32]; /* `,"Name":`, written as 32 bytes (the first op's key is dec_kplan.head) */
  uint8_t klen, ty; /* ty: DEC_KOP_* */
};
enum { DEC_KOP_U32, DEC_KOP_I32, DEC_KOP_X32, DEC_KOP_U16, DEC_KOP_U8, DEC_KOP_I8, DEC_KOP_U64, DEC_KOP_I64,
       DEC_KOP_X64, DEC_KOP_GUID,
       DEC_KOP_PORT, /* u16 in network byte order, as a number (write_fields_n's 'n') */
       DEC_KOP_IPV6, /* 16 bytes as the quoted RFC 5952 text (its '6'; ≤ 42 bytes written) */
       /* last op only (not the first): the rest of the payload, absent when nothing is left */
       DEC_KOP_STR16, /* UTF-16 up to the NUL unit (all of the rest when unterminated) */
       DEC_KOP_STACK, /* pointer array */
       DEC_KOP_ANSI,  /* 8-bit string up to the NUL (all of the rest when unterminated) */
       DEC_KOP_END    /* after the last fixed-size op of a layout without a variable one (key empty) */ };
/* A layout's ops (kernel records, and classic records named by the built-in tables). */
struct dec_kops {
  const char *prov, *name; /* the plan's names (for the event reference) */
  uint8_t hlen;       /* the plan template's head bytes (after the System block) */
  uint8_t ps;         /* pointer size of the ops (0xFF = no ops: EventData by dec_mof_write) */
  uint8_t nops;
  uint8_t tail;       /* the last op is DEC_KOP_STR16 / _STACK / _ANSI (variable size) */
  uint32_t need;      /* payload bytes of the fixed-size ops (> 0 when nops) */
  const struct dec_tpl *t; /* the plan's template (its event reference image) */
  struct dec_kop ops[DEC_KOPS + 1]; /* and a DEC_KOP_END after the last when it is not variable */
};
/* A plan's System text: at most DEC_TXT_MAX bytes of prefix, time slot and middle. */
#define DEC_TXT_MAX 544
/* A plan's live template (dec_sys.c): the System text of the type with the second of the last
 * event in its time slot and the last (pid, tid) text after `"ProcessID":`, then a processor
 * digit, `}}` and the head (`,"EventData":{` and, for kernel ops, the first key): one copy writes
 * everything up to the first variable value; the time's 7 fraction digits and the processor digit
 * are stored over it. @sec and @xkey say which second and (pid, tid) the text holds; a record with
 * others rewrites those parts of the template first. At most DEC_TXT_MAX + 47 + 3 + 64 bytes are
 * used; the rest is room for the copy's rounded-up chunks (32 bytes). */
#define DEC_TPL_BYTES 768
struct dec_tpl {
  uint64_t sec;       /* FILETIME / 10^7 whose text is in the time slot (UINT64_MAX: none yet) */
  uint64_t ft1;       /* sec * 10^7 + 1 (1 before the first: the slot holds second 0's text); a
                       * FILETIME ft with ft - ft1 < 10^7 - 1 is in that second, fraction ≥ 1 */
  uint64_t xkey;      /* pid << 32 | tid (the record's u32s) whose text follows "ProcessID": */
  uint16_t plen;      /* the time slot's offset (after `"TimeCreated":`) */
  uint16_t tlen;      /* the (pid, tid) text's offset (after `"ProcessID":`) */
  uint16_t cpos;      /* the processor digit's offset */
  uint16_t n;         /* bytes to copy: cpos + 3 + hlen */
  uint8_t hlen;       /* head bytes (after `}}`) */
  uint8_t n32, n16;   /* n in 32-byte and 16-byte chunks, rounded up (the copies' entry) */
  /* the event reference of a record in the slot's second with the slot's (pid, tid): rimg with
   * ts_ns = ts_base + (FILETIME - ft1) * ts_mul (wrapping) and the processor number stored over
   * it (tpl_copy_ref; ts_mul 0: a second before 1970 or after 2262, ts_ns constant) */
  uint64_t ts_base, ts_mul;
  /* the slot's fraction digits 1-3 are those of FILETIMEs fb … fb + 9999 (a 10^4 block of the
   * slot's second): a FILETIME ft with ft - fb - 1 < 9999 needs digits 4-7 only (T4[ft - fb]);
   * ts_fb: the reference's ts_ns at fb */
  uint64_t fb, ts_fb;
  struct etw_evref rimg; /* off, len 0; names; pid, tid of xkey; event ID and level of the plan */
  char head[64];      /* `,"EventData":{` and the first op's key */
  char txt[DEC_TPL_BYTES];
};

struct dec_kplan {
  /* the writer for the plan's ops: dec_kplan_event, or one specialized for their types */
  int (*run)(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
             struct dec_kplan *pl); /* (etw_decoder_write's argument order: no moves before the jump) */
  uint64_t key;       /* the dec_kname key it is valid for (0 = none) */
  uint64_t d8, kw;    /* descriptor bytes and keywords of the text */
  uint32_t hv;        /* (hook_id << 8 | version) + 1 it was built for */
  uint32_t builds;    /* texts built in this slot (no plan after DEC_KPLAN_BUILDS: thrash guard) */
  const char *prov, *name, *task, *opcode; /* names of the text */
  uint32_t room;      /* bytes reserved for the whole write */
  /* the PerfInfo/Sample writer (kplan_sample_*): the EventData text after the head (values, keys,
   * `}}`) of the last payload it rendered (16 bytes: memo_q), reused when the next one is the same
   * (an idle processor's samples repeat); memo_len ≤ DEC_MEMO_MAX, written as DEC_MEMO_COPY bytes */
  uint64_t memo_q[2];
  uint32_t memo_len;
  char memo[96];
  struct dec_kops k;  /* the EventData ops */
  struct dec_tpl t;   /* System text and head */
};
#define DEC_MEMO_MAX 90
#define DEC_MEMO_COPY 96
#define DEC_KPLAN_BUILDS 256
/* The entry of every empty kernel plan slot (etw_decoder_new; never matches a key, never run or
 * written: dec_kplan_update treats it as none), so the dispatch needs no NULL test. */
extern struct dec_kplan dec_kplan_none;

/* A manifest plan's hand-over to the runners by pointer size (dec_plan_hand): for ptr_size & 15 = i,
 * @op[i] (the plan's first op past its OP_CHK) applies to a payload of @n bytes when n - @lo[i] <
 * @span[i] (the first run in the payload, n ≤ DEC_EHAND_N); span 0: never (i not 4 nor 8). Arrays
 * of scalars: indexed by a scaled register. */
#define DEC_EHAND_N 1023u
struct dec_ehand {
  const void *op[16];
  uint32_t lo[16], span[16];
};

/* A manifest event type's plan: the System block's constant text for records of provider @guid
 * with descriptor bytes @d8 and keywords @kw that resolve to schema @e (no TraceLogging or
 * related-activity extended data, no activity ID, not a classic GUID), valid while the registry
 * generation is @gen and the provider's name still @pname. EventData: dec_fields_write_d.
 * Classic records (KernelTraceControl etc.) named by the built-in tables have one too (cls):
 * EventData by dec_mof_write. */
struct dec_eplan {
  /* the writer (its template copy variant) */
  int (*run)(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
             struct dec_eplan *pl, uint64_t d8);
  unsigned char guid[16];
  uint64_t d8, kw;
  uint64_t gen;       /* etw_decoder.reg_gen it was built in (0 = none: the generation starts at 1) */
  struct dec_provider *p;
  struct dec_event *e;
  const char *pname;  /* p->name at build */
  const char *const *pnamep; /* &p->name; a classic record's (p NULL): &pname (eplan_hit: no kind test) */
  const char *prov, *name, *task, *opcode; /* the names of the text */
  uint8_t kind;       /* ETW_REC_EVENT or ETW_REC_CLASSIC */
  uint8_t cls;        /* a classic record (names from the built-in tables, EventData by
                         dec_mof_write; p and e NULL) */
  uint8_t ok;         /* the template is built */
  uint32_t builds;
  uint32_t room;
  uint32_t kindw;     /* kind as the record's first 4 bytes would hold it (eplan_hit: one word) */
  uint64_t seq;       /* etw_decoder.eplan_seq at build (the older way of a set is rebuilt) */
  /* a manifest event's EventData memo (dec_sys.c eplan_event): the text after the head of the last
   * payload rendered, reused for the same payload bytes and pointer size (e.g. a thread's repeated
   * ClrStack/Walk stacks); memo_skip: the plan's events to render without it (UINT64_MAX: always —
   * counted down like the others, it would take 2^64 events to reach 0 —, for schemas with maps,
   * whose text may change with the trace's map definitions, and classic records; else set when the
   * memo hit fewer than 1 in 4 of 64 or more lookups, 512 doubling to 65536 each time) */
  struct dec_ememo *memo; /* NULL until the first payload is kept */
  uint64_t memo_skip;
  struct dec_kops k;  /* a classic record's layout ops (ps 0: dec_mof_write) */
  struct dec_tpl t;   /* System text and `,"EventData":{` (and a classic layout's first key) */
  /* a manifest event's hand-over to the EventData runners (dec_sys.c eplan_hand): dec_plan_hand's
   * by pointer size and its room (hfar), set
   * by ememo_reset with the schema; the room for the System block and the runners together
   * (hroom = room + hfar; UINT32_MAX until the first record after that, which the fast writer's
   * reservation sends the other way, where it is set) */
  uint32_t hfar, hroom;
  struct dec_ehand hand;
};
#define DEC_EMEMO_PAY 2048 /* payload bytes a memo keeps */
#define DEC_EMEMO_TXT 8192 /* text bytes a memo keeps */
struct dec_ememo {
  uint32_t plen, tlen;     /* payload and text bytes (text: EventData's members and `}}`) */
  uint32_t tries, hits;    /* recent lookups (halved at 1024) */
  uint32_t back;           /* the next memo_skip */
  size_t need;             /* used only when the writer's maximum is this far: tlen + what the
                              renderer could have reserved beyond it (dec_man.c plan.slack's bound:
                              32 per payload byte, 1,400 per field, 8 KiB), so it would not fail */
  uint8_t ps, valid;       /* the payload's pointer size; 1 = pay/txt hold a rendering */
  unsigned char pay[DEC_EMEMO_PAY];
  char txt[DEC_EMEMO_TXT];
};
/* The plan writers' number texts (tests): dec_put_u64's and dec_put_u32's, NUL-terminated at the
 * returned end (@p: 32 bytes of room). */
char *dec_plan_u64(char *p, uint64_t v);
char *dec_plan_u32(char *p, uint32_t v);
#define DEC_EPLAN_N 1024
#define DEC_EPLAN_MUL 0x9E3779B97F4A7C15ull
/** dec_plans_init - every kernel plan slot of new decoder @d empty (dec_kplan_none). */
void dec_plans_init(struct etw_decoder *d);

struct etw_decoder {
  struct dec_kname kn[1024];
  struct dec_kplan *kplan[1024]; /* per kn slot, allocated on first use (dec_sys.c) */
  struct dec_eplan *eplan[DEC_EPLAN_N]; /* manifest event / classic record plans: 2-way sets by
                                           (GUID, descriptor) hash */
  uint64_t eplan_seq;
  uint64_t eplan_mul; /* DEC_EPLAN_MUL (eplan_slot's multiplier, read from here: no 10-byte immediate) */
  int eplan_live; /* a plan was made valid (gen == reg_gen) since dec_reg_bump last expired every plan */
  uint64_t reg_gen; /* bumped by every dec_event_add (a schema may have been replaced) */
  uint32_t kn_zero; /* always 0: with kn_gen, one 64-bit word kn_gen << 32 (kernel_key, little-endian) */
  uint32_t kn_gen; /* bumped to invalidate every kn entry (no 40 KB memset per EventInfo event) */
  struct dec_cname cn[DEC_CNAME_N];
  struct dec_sysc *sysc; /* System block cache (dec_sys.c) */
  int reference;         /* ETW_DECODE_REFERENCE: no plans, memos or System block cache: the
                            walkers and etw_event_write_system only (etw_decoder_set_mode) */
  char *manifest_dir;
  int manifests_scanned;
  struct dec_lazy *lazy; /* manifests indexed, loaded per provider on first use (dec_man.c) */
  struct dec_provider **prov; /* open hash by GUID */
  uint32_t prov_cap, n_prov;
  uint64_t decoded, undecoded;
  uint64_t unparsed; /* decoded events whose schema left payload bytes ("Unparsed" member) */
  uint64_t too_large; /* of the undecoded: "event too large" (fields did not fit the writer) */
  struct dec_proc *proc; /* process names and thread owners from the stream (dec_proc.c) */
  struct etw_rec rtmp;   /* a record with the ids its payload gives (dec_proc_apply's copy) */
  const char *host;      /* System.Host (interned), or NULL (dec_proc.c: etw_decoder_set_host) */
  int host_fixed;        /* set by etw_decoder_set_host: the stream's ComputerName does not replace it */
};

/* process context (dec_proc.c): ProcessName from the stream's Process events, PID/TID of kernel
 * events from their payload, System.Host */
#define DEC_PNAME_MAX 64 /* bytes of `,"ProcessName":"…"` at most */
/* kernel groups (HookId >> 8) whose records dec_proc_apply looks at */
extern const unsigned char dec_proc_groups[256];
/* provider GUIDs more than one decoder file looks for: the CLR's runtime provider
 * (Microsoft-Windows-DotNETRuntime e13c0d23-ccbc-4e12-931b-d9cc2eee27e4) and KernelTraceControl
 * MetaData (bbccf6c1-6cd1-48c4-80ff-839482e37671: EventInfo, EventMapInfo) */
static const unsigned char DEC_GUID_CLR_RUNTIME[16] =
    ETW_GUID_BYTES(0xe13c0d23, 0xccbc, 0x4e12, 0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4);
static const unsigned char DEC_GUID_KTC_METADATA[16] =
    ETW_GUID_BYTES(0xbbccf6c1, 0x6cd1, 0x48c4, 0x80, 0xff, 0x83, 0x94, 0x82, 0xe3, 0x76, 0x71);
/* The record to decode for @r: @r itself, or @tmp (a copy of it) with the PID/TID its payload
 * gives; the tables updated from its Process/Thread payload first. */
const struct etw_rec *dec_proc_apply(struct etw_decoder *d, const struct etw_rec *r, struct etw_rec *tmp);
/* dec_proc_apply of a PerfInfo/Sample record (HookId 0x0F2E, PERFINFO kind) */
const struct etw_rec *dec_proc_sample(struct etw_decoder *d, const struct etw_rec *r, struct etw_rec *tmp);
/* `,"ProcessName":"…"` of @pid (its length; 0 and "" when the pid has no name) */
unsigned dec_proc_text(const struct etw_decoder *d, uint32_t pid, const char **txt);
/* @pid's name (NULL when none; pid < 0: none) */
const char *dec_proc_name(const struct etw_decoder *d, int64_t pid);
void dec_proc_free(struct etw_decoder *d);
/* dec_sys.c: the cached texts that show @pid's name (@all: every pid's) are written again;
 * dec_sys_reset: every cached System text and plan is dropped (the host changed) */
void dec_sys_pid_renamed(struct etw_decoder *d, uint32_t pid, int all);
void dec_sys_reset(struct etw_decoder *d);

/* registry (dec_core.c) */
struct dec_provider *dec_provider_get(struct etw_decoder *d, const unsigned char guid[16], int create);
struct dec_event *dec_event_find(struct dec_provider *p, uint16_t id, uint8_t version);
/** dec_event_add - insert (replacing the same id/version); takes ownership of @e. */
int dec_event_add(struct dec_provider *p, struct dec_event *e);
void dec_event_free(struct dec_event *e);
void dec_map_free(struct dec_map *m);
/** dec_map_render - replace the integer written at w[mark..] by its map text (if any). */
void dec_map_render(struct etw_jw *w, const struct dec_map *m, size_t mark, uint64_t v);
/** dec_fields_write - render @e's fields from @p[0..n) into an open JSON object; -1 on error. */
int dec_fields_write(struct etw_jw *w, const struct dec_event *e, const unsigned char *p, size_t n,
                     int ptr_size, const char **why);
/** dec_fields_write_d - same, resolving late-bound trace maps through @d (may be NULL); returns
 * the payload bytes the template consumed (< @n: the rest is reported as "Unparsed"), or -1. */
long dec_fields_write_d(struct etw_decoder *d, struct etw_jw *w, const struct dec_event *e,
                        const unsigned char *p, size_t n, int ptr_size, const char **why);
/* dec_fields_write_d's arguments in one block (in the caller's frame), and @mark: w->len at the
 * call. The runners take it by pointer and read what their rare paths need from it again, so that
 * they keep no copies of it (callers that have the values at hand fill it: the manifest plans). */
struct dec_ecall {
  struct etw_decoder *d;
  struct etw_jw *w;
  const struct dec_event *e;
  const unsigned char *p;
  size_t mark;
  uint32_t n;
  const char *why; /* (the reason, by value: the runners write &why) */
  int ptr_size;
  /* NULL, or the plan's first op for @ptr_size and @n handed over by the caller (a manifest plan:
   * dec_plan_hand): then the runner takes it as it is, without its own tests — the caller vouches
   * that the schema has a plan (@e->runs > 1), @ptr_size is 4 or 8, @op is the one for them and
   * @n (past the first run's OP_CHK: n ≥ its bytes, n ≤ DEC_EHAND_N) and that the buffer has
   * room: w->cap - mark > the room dec_plan_hand returned */
  const void *op;
};
/* (the runners require w->err 0: dec_fields_write_c and _d test it, the manifest plans have just
 * reserved) */
/* dec_fields_write_c's result: @rc as dec_fields_write_d's; @o NULL (w->len is the text's end), or
 * the end of the EventData written by a plan to its end and to the payload's (@rc is c->n): then
 * w->len is not that end (the caller sets it), w->err is 0, and the buffer has room for 64 bytes
 * more past @o (the plan's reservation for its SIMD stores), so a caller may append `}}` there
 * without a reservation. */
struct dec_eres {
  char *o;
  long rc;
};
static inline struct dec_eres dec_eres_rc(long rc) {
  struct dec_eres x = {NULL, rc};
  return x;
}
/** dec_fields_write_c - dec_fields_write_d(c->d, c->w, c->e, c->p, c->n, c->ptr_size, &c->why) when
 * c->mark == c->w->len (the block is not changed), with the end of the text (above). */
struct dec_eres dec_fields_write_c(struct dec_ecall *c);
/* the plan runner, for callers that call it themselves (with w->err 0; fast mode) */
struct dec_eres dec_plan_run(struct dec_ecall *c);
/** dec_plan_hand - @e's plan (built now when it is not yet) as hand-overs @h (4- and 8-byte
 * pointers; the other sizes never); returns the room a caller must have in the buffer past the
 * EventData's start to use them (w->cap - mark > it: < 2^20), or 0 with both spans 0 (no plan,
 * @e NULL or a plan whose room would be larger). */
uint32_t dec_plan_hand(const struct dec_event *e, struct dec_ehand *h);

/** dec_trace_map - a map of provider @p carried in the trace (EventMapInfo) by name, or NULL. */
struct dec_map *dec_trace_map(struct dec_provider *p, const char *name);

/* System block (dec_sys.c): byte-identical to etw_event_write_system, cached. */
/* @hint (may be NULL): a slot in the resolved schema (manifest event or kernel name entry)
 * remembering the cache entry; @tag identifies that schema and @d8 holds the record's
 * descriptor bytes (id, version, channel, level, opcode, task): with the names, keywords and
 * tag they determine the block's constant text, so a hint that matches them skips the lookup. */
void dec_write_system(struct etw_decoder *d, struct etw_jw *w, const struct etw_sys *s, void **hint,
                      const void *tag, uint64_t d8);
/* The head of a System-block cache entry, what a hint slot points to: the caller checks it
 * (tag, descriptor bytes, keywords, the four names) and on a match calls dec_sys_emit_hint. */
struct dec_sys_hint {
  const void *tag;
  uint64_t d8, kw;
  const char *prov, *name, *task_name, *opcode_name;
};
/* The block from the matching entry @hint, before any etw_sys is built: 1 = written (or the
 * writer is in error), 0 = use dec_write_system. The event has no activity IDs; @ft is never 0. */
int dec_sys_emit_hint(struct etw_decoder *d, struct etw_jw *w, void *hint, uint64_t ft, int64_t pid, int64_t tid,
                      int cpu);
void dec_sys_free(struct etw_decoder *d);
/* free @d's kernel and manifest plans (the slots empty again) */
void dec_plans_free(struct etw_decoder *d);
/** dec_kplan_update - after the general path wrote kernel record @r (kn slot @slot, key @key,
 * System fields @s, no activity IDs): make the slot's plan valid for it (revalidated when its
 * text still applies, else rebuilt; none after DEC_KPLAN_BUILDS builds in the slot). */
void dec_kplan_update(struct etw_decoder *d, uint32_t slot, uint64_t key, const struct etw_rec *r,
                      const struct etw_sys *s, uint64_t d8);
/* The name pointer of every expired plan (struct dec_eplan.pnamep): no provider's name. */
extern const char *const dec_eplan_dead;
/** dec_eplan_update - after the general path wrote manifest event @r of schema @e (provider @p),
 * or classic record @r (@cls), with System fields @s (no activity IDs): make plan slot @slot valid
 * for it (revalidated when its text still applies, else rebuilt). */
void dec_eplan_update(struct etw_decoder *d, uint32_t slot, const struct etw_rec *r, const struct etw_sys *s,
                      uint64_t d8, struct dec_provider *p, struct dec_event *e, int cls);
/** dec_kplan_event - all of kernel record @r through plan @pl (valid for its kn key, descriptor
 * bytes and keywords; checked by the caller): the System block from the plan's template, then the
 * fixed layout's fields when the plan has ops for r's pointer size and the payload holds them,
 * else dec_mof_write; dec_write_general when the time cannot be formatted or the reservation
 * fails. Returns as etw_decoder_write. (The plan's template is updated: not const.) */
int dec_kplan_event(struct etw_decoder *d, struct etw_jw *w, struct dec_kplan *pl, const struct etw_rec *r,
                    struct etw_evref *ref);
/** dec_eplan_event - all of manifest event @r through plan @pl (checked by the caller): the System
 * block, then dec_fields_write_d; dec_write_general when the time cannot be formatted. */
int dec_eplan_event(struct etw_decoder *d, struct etw_jw *w, struct dec_eplan *pl, const struct etw_rec *r,
                    struct etw_evref *ref, uint64_t d8);
/** dec_kernel_general - dec_write_general for a kernel record without extended data (its name
 * cache key recomputed). */
int dec_kernel_general(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref);

/* dispatch (dec_core.c) */
/** dec_write_general - etw_decoder_write without a plan: names resolved, the System block through
 * the cache, the EventData writer of the record's kind; plans (re)built. @kkey (0 = not a kernel
 * record without extended data): the kernel type's name cache key, in kn slot @kslot. */
int dec_write_general(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
                      uint64_t d8, uint32_t kslot, uint64_t kkey);
/** dec_finish - the end of every event: EventData closed (@rc = payload bytes consumed; the rest
 * as the Unparsed member), or, when @rc < 0 or the writer is in error, everything from @mark (the
 * end of the System block) replaced by the Undecoded member; counters; @ref (may be NULL). */
int dec_finish(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w, struct etw_evref *ref,
               const char *prov, const char *name, size_t mark, long rc, const char *why);
static inline void dec_fill_ref(struct etw_evref *ref, const struct etw_rec *r, const char *prov, const char *name) {
  ref->off = ref->len = 0;
  ref->provider = prov;
  ref->name = name;
  const uint64_t epoch = 116444736000000000ULL; /* 1970-01-01 as FILETIME */
  uint64_t ft = r->filetime;
  uint64_t dt = ft - epoch; /* wraps when ft < epoch */
#if ETW_GNUC
  int64_t ns; /* dt * 100 when 1 ≤ dt and it fits (as dt - 1 < INT64_MAX / 100) */
  if (ETW_EXPECT((int64_t)dt > 0 && !__builtin_mul_overflow((int64_t)dt, (int64_t)100, &ns), 1)) ref->ts_ns = ns;
#else
  if (dt - 1 < (uint64_t)INT64_MAX / 100) ref->ts_ns = (int64_t)dt * 100;
#endif
  else ref->ts_ns = ft <= epoch ? 0 : INT64_MAX;
#if ETW_LE
  _Static_assert(offsetof(struct etw_rec, pid) == offsetof(struct etw_rec, tid) + 4 &&
                     offsetof(struct etw_evref, tid) == offsetof(struct etw_evref, pid) + 4,
                 "tid, pid / pid, tid adjacent");
  uint64_t pt; /* the record's tid, pid as one word, swapped into the ref's pid, tid */
  memcpy(&pt, (const char *)r + offsetof(struct etw_rec, tid), 8);
  pt = pt >> 32 | pt << 32;
  memcpy((char *)ref + offsetof(struct etw_evref, pid), &pt, 8);
#else
  ref->pid = r->pid;
  ref->tid = r->tid;
#endif
  ref->event_id = r->desc.id;
  ref->level = r->desc.level;
  ref->cpu = r->cpu;
}


/* dec_finish's common case inline: every payload byte consumed, the writer not in error. */
static inline int dec_finish_fast(struct etw_decoder *d, const struct etw_rec *r, struct etw_jw *w,
                                  struct etw_evref *ref, const char *prov, const char *name, size_t mark, long rc,
                                  const char *why) {
  if (ETW_EXPECT(rc >= 0 && (size_t)rc == r->user_len && !w->err, 1)) {
    etw_jw_raw(w, "}}", 2);
    d->decoded++;
    if (ref) dec_fill_ref(ref, r, prov, name);
    return 1;
  }
  return dec_finish(d, r, w, ref, prov, name, mark, rc, why);
}

/* TraceLogging (dec_tl.c) */
int dec_tl_names(const struct etw_rec *r, const char **prov, size_t *prov_len, const char **name,
                 size_t *name_len);
/* returns the payload bytes the metadata's fields consumed, or -1 */
long dec_tl_write(struct etw_jw *w, const struct etw_rec *r, const char **why);

/* kernel / classic MOF (dec_mof.c) */
int dec_mof_names(const struct etw_rec *r, const char **task, const char **opcode);
/** dec_mof_classic_guid - 1 when @g is a classic (MOF) class GUID the MOF decoder handles. */
int dec_mof_classic_guid(const unsigned char g[16]);
/** dec_mof_write - the fields of a kernel/classic record: the payload bytes its layout consumed
 * (all of them for the logfile header), or -1 with *@why set (unknown class, payload mismatch). */
long dec_mof_write(struct etw_jw *w, const struct etw_rec *r, const char **why);
/** dec_fmt_ipv6 - the RFC 5952 text of the IPv6 address @p (16 bytes) at @buf (≤ 39 bytes and a
 *  NUL: 40 bytes of room), as dec_value writes it inside its quotes; returns its length. */
int dec_fmt_ipv6(char *buf, const unsigned char *p);
/** dec_mof_plan_ops - the layout of kernel or classic record @r as plan ops for pointer size @ps
 * when all its fields have a fixed size but perhaps the last (a UTF-16 or 8-bit string, or a
 * stack): the count (0 =
 * none: no layout, another variable-size field, or no fields), *@need = the fixed ones' bytes. */
unsigned dec_mof_plan_ops(const struct etw_rec *r, int ps, char head[64], uint8_t *hlen, struct dec_kop *ops,
                          unsigned max, uint32_t *need);
/** dec_mof_guid - provider GUID to report (the group GUID for kernel headers) or NULL. */
const unsigned char *dec_mof_guid(const struct etw_rec *r);

/* manifests (dec_man.c) */
/** dec_manifest_load - parse instrumentation manifest XML into the registry; 0 = ok. */
int dec_manifest_load(struct etw_decoder *d, const char *xml, size_t n, const unsigned char *force_guid);
void dec_manifest_scan_dir(struct etw_decoder *d, const char *dir);
/** dec_manifest_index_dir - what dec_manifest_scan_dir gives, loaded lazily: every manifest
 * under @dir is read and indexed by the provider GUIDs it may define; a provider is loaded (from
 * its files, in the same order) when dec_provider_get first asks for its GUID. Providers that
 * exist already are loaded at once. The registry then reads the same as after a full scan. */
void dec_manifest_index_dir(struct etw_decoder *d, const char *dir);
/** dec_lazy_load - load the manifests of @guid if it is indexed and not loaded yet (called by
 * dec_provider_get when @guid is not in the registry); 1 = something was loaded. */
int dec_lazy_load(struct etw_decoder *d, const unsigned char guid[16]);
void dec_lazy_free(struct etw_decoder *d);
/** dec_builtin_supplements - add the built-in schemas (dec_clr.c) to the CLR providers that
 *  exist and lack them. */
void dec_builtin_supplements(struct etw_decoder *d);
/** dec_builtin_provider - add the built-in schemas of provider @p (if any) it lacks; called when
 *  the registry creates a provider. */
void dec_builtin_provider(struct dec_provider *p);
/** dec_builtin_get - the provider @guid when it has built-in schemas (created if needed: a
 *  trace's events decode by them without any manifest), else NULL. */
struct dec_provider *dec_builtin_get(struct etw_decoder *d, const unsigned char guid[16]);
/** dec_clr_fix - correct a CLR schema of @p a source gets wrong (the ClrStackWalk template's
 * Stack count, BulkType's TypeParameters count) before @e is added (dec_clr.c). */
void dec_clr_fix(const struct dec_provider *p, struct dec_event *e);
/** dec_manifest_paths - the manifest files of a search path (dec_mpath.c): @dirs is one
 * directory or several joined by ':' (';' on Windows; etw_mpath_dirs splits it); each is walked
 * and sorted by path, the directories in the order given (earlier ones win). Caller frees each
 * path and *list. */
void dec_manifest_paths(const char *dirs, char ***list, int *n);
/** dec_known_provider - the registered name of a well-known provider GUID ("{...}" lower
 * case, etw_format_guid's text), or NULL (dec_known.c); the names with the lowest precedence. */
const char *dec_known_provider(const char *guid_text);
/** dec_known_providers - the table itself, for tests: up to @max GUIDs and names; returns the
 * number of entries. */
size_t dec_known_providers(const char **guids, const char **names, size_t max);
/** dec_eventsource_chunk - feed an EventSource ManifestData (0xFFFE) payload. */
void dec_eventsource_chunk(struct etw_decoder *d, const struct etw_rec *r);
/** dec_eventinfo - feed a KernelTraceControl MetaData EventInfo/EventMapInfo payload. */
void dec_eventinfo(struct etw_decoder *d, const struct etw_rec *r);

#endif
