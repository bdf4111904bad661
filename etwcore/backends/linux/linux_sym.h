/* linux_sym.h — symbolisation of stack addresses for the Linux backend (linux_sym.c).
 *
 * Kernel addresses resolve through /proc/kallsyms (read once, a sorted table), user addresses
 * through the process's executable mappings (/proc/PID/maps) and the ELF symbol tables of the
 * mapped files (.symtab, else .dynsym; libelf). One cache for the whole server, bounded in
 * processes, files and resolved frames, guarded by one mutex: every function is safe from any
 * thread (the readers of every session share it). Counters: lx_sym_metrics.
 */
#ifndef ETWD_LINUX_SYM_H
#define ETWD_LINUX_SYM_H

#include <stddef.h>
#include <stdint.h>

#include "etwcore/jw.h"

/** lx_sym_frames - append @n frames `{"Address":"0x…","Module":…,"Symbol":…,"Offset":N}`
 *  (comma-separated, no brackets; a comma first when @comma) for the addresses @a of process
 *  @tgid, or of the kernel when @tgid is 0. Frames after the first are return addresses and are
 *  looked up at address - 1. Unresolvable parts are left out (an unknown address keeps only
 *  "Address"). */
void lx_sym_frames(struct etw_jw *w, uint32_t tgid, const uint64_t *a, uint32_t n, int comma);
/** lx_sym_uframes - lx_sym_frames of a user stack of @tgid (no comma first) that ends at the first
 *  return address outside every EXECUTABLE mapping of the process (its r-xp/--xp lines of
 *  /proc/PID/maps, [vdso] and anonymous code included): a frame-pointer walk gone astray, reading
 *  a heap, stack or data pointer for a return address, does not come back, so that frame and
 *  those after it are left out. Only when the process's maps are known and current: a process
 *  never seen and already gone, one whose maps could not be read again after a miss (exited),
 *  or a stack whose innermost frame (the instruction pointer) is in no executable mapping
 *  (the maps are stale) keeps every address. Returns the frames left out. */
uint32_t lx_sym_uframes(struct etw_jw *w, uint32_t tgid, const uint64_t *a, uint32_t n);
/** lx_sym_kframes - the frames of a kernel stack (lx_sym_frames with @tgid 0, no comma first).
 *  With @trim, its leading frames of the tracing machinery (lx_sym_is_tracing: the code between
 *  the tracepoint and the unwinder) are left out, unless every frame is one (then it is kept
 *  whole); an address without a symbol ends them. Returns the frames left out. */
uint32_t lx_sym_kframes(struct etw_jw *w, const uint64_t *a, uint32_t n, int trim);
/** lx_sym_is_tracing - @sym (a kernel symbol) belongs to the tracing machinery: it starts with
 *  one of a fixed list of prefixes (linux_sym.c, docs/linux.md "Tracing frames"). */
int lx_sym_is_tracing(const char *sym);
/** lx_sym_addrs - @n frames with their address only (`{"Address":"0x…"}`, comma-separated):
 *  what lx_sym_frames writes for an address it cannot resolve (a trace.dat's user stacks: the
 *  file keeps no process mappings). */
void lx_sym_addrs(struct etw_jw *w, const uint64_t *a, uint32_t n);
/** lx_sym_ktracing - 1 when the kernel address @a lies in a function of the tracing machinery
 *  (lx_sym_is_tracing) by this machine's /proc/kallsyms: the innermost frame of a kernel stack
 *  recorded by this kernel since its boot always does (a trace.dat's test, linux_stack.c). */
int lx_sym_ktracing(uint64_t a);
/** lx_sym_forget - @tgid exec'd (or exited): its mappings are read again on its next stack. */
void lx_sym_forget(uint32_t tgid);

/* ---- pieces, for the unit tests */
struct lx_ksyms;
/** lx_ksyms_load - parse a kallsyms-format file (text symbols only), sorted. NULL on error. */
struct lx_ksyms *lx_ksyms_load(const char *path);
void lx_ksyms_free(struct lx_ksyms *k);
uint32_t lx_ksyms_count(const struct lx_ksyms *k);
/** lx_ksyms_find - the symbol at or before @addr: its name (module in *@mod, NULL for the core
 *  kernel) and *@off = addr - symbol. NULL when @addr is before the first symbol. */
const char *lx_ksyms_find(const struct lx_ksyms *k, uint64_t addr, const char **mod,
                          uint64_t *off);

struct lx_elf;
/** lx_elf_load - the function symbols, load segments and build-id of the ELF file @path
 *  (lx_elf_load_max with the cache's bounds). */
struct lx_elf *lx_elf_load(const char *path);
/** lx_elf_load_max - the same, reading at most @max_syms function symbols whose table and names
 *  take at most @max_bytes (bounded while reading; what is left out, and names cut to 1024
 *  bytes, are counted in etwd_symcache_symbols_cut_total). */
struct lx_elf *lx_elf_load_max(const char *path, uint32_t max_syms, size_t max_bytes);
/** lx_elf_open - open @path to read an ELF file: O_NONBLOCK (a FIFO never blocks), O_NOFOLLOW
 *  unless @follow, a regular file only, and with @ino (not 0) that device (maps' major << 32 |
 *  minor) and inode. The descriptor, or -1. */
int lx_elf_open(const char *path, int follow, uint64_t dev, uint64_t ino);
void lx_elf_free(struct lx_elf *e);
/** lx_elf_vaddr - file offset → virtual address through the PT_LOAD segments; -1 if none. */
int lx_elf_vaddr(const struct lx_elf *e, uint64_t fileoff, uint64_t *vaddr);
/** lx_elf_find - the function symbol that contains @vaddr (*@off from its start), or NULL. */
const char *lx_elf_find(const struct lx_elf *e, uint64_t vaddr, uint64_t *off);
/** lx_elf_nsyms, lx_elf_mem - the function symbols kept, and the bytes they take. */
uint32_t lx_elf_nsyms(const struct lx_elf *e);
size_t lx_elf_mem(const struct lx_elf *e);
/** lx_elf_build_id - the GNU build-id (its length in *@n; 0 = none). */
const uint8_t *lx_elf_build_id(const struct lx_elf *e, uint32_t *n);

/* (the caches' Prometheus counters: etw_linux_metrics, etwcore/linux.h) */
/** lx_stk_count - stack records: 0 attached, 1 orphaned (their event was gone), 2 dropped (their
 *  event did not ask for a stack); stack entries dropped as no code address (lx_stk_addrs):
 *  3 kernel, 4 user (user: also those outside the process's code, lx_sym_uframes). Any thread. */
void lx_stk_count(int what, uint64_t n);
/** lx_stk_counted - the process's count of @what so far (the metrics'; etwd convert's summary). */
uint64_t lx_stk_counted(int what);

#endif
