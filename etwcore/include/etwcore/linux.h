/* linux.h — tuning knobs of the Linux (tracefs) backend beyond the generic backend interface.
 *
 * Everything else about the backend is reached through `etw_backend_linux` (backend.h).
 */
#ifndef ETWCORE_LINUX_H
#define ETWCORE_LINUX_H

#define ETW_LINUX_READER_NICE_DEFAULT (-10)

/**
 * etw_linux_set_reader_nice - scheduling nice value (-20..19) of the per-CPU reader threads of
 * sessions started after the call. Default ETW_LINUX_READER_NICE_DEFAULT: readers only use CPU
 * while events flow, and under a CPU-saturating workload a reader at nice 0 falls behind the
 * kernel and events are lost (docs/linux.md, "lossless rate"). 0 = do not change. Needs
 * CAP_SYS_NICE for negative values (failure is ignored). Any thread, any time.
 */
void etw_linux_set_reader_nice(int nice);
/** etw_linux_reader_nice - the current setting. */
int etw_linux_reader_nice(void);

/**
 * etw_linux_set_reader_pinning - 1 (default): the reader of CPU n runs only on CPU n, next to
 * the ring buffer it drains (at 2 M events/s with another busy process on the machine this took
 * the loss from 8-10 % to 0); 0: the scheduler places readers freely. Sessions started after the
 * call. Any thread.
 */
void etw_linux_set_reader_pinning(int on);

struct etw_jw;
/**
 * etw_linux_metrics - append the Prometheus text of the stack symbolisation caches (hits,
 * misses, evictions of processes, ELF files and frames; kernel symbols loaded) and of the stack
 * records (attached, orphaned, dropped). Any thread.
 */
void etw_linux_metrics(struct etw_jw *w);

#endif
