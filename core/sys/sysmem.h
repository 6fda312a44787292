/* How much memory this process may still use: the guard that keeps a model (or a checkpoint that
 * asks for one) from being allocated with the operating system's overcommit and then killed by
 * the kernel's OOM killer at its first forward pass. And giving freed heap memory back. */
#ifndef RP_SYSMEM_H
#define RP_SYSMEM_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Bytes this process can still allocate without swapping others out or hitting a limit: the
 * smallest of
 *   MemAvailable + SwapFree from /proc/meminfo,
 *   the cgroup's memory.max - memory.current (cgroup v2; "max" means no limit),
 *   RLIMIT_AS minus the process's current virtual size (only when RLIMIT_AS is set),
 * or -1 when none of them can be read (not Linux). Reads a few small files; never allocates on
 * the heap. The value is a snapshot: other processes change it. */
int64_t rp_mem_available(void);

/* Writes a size in bytes as "512 B", "3.2 KiB", "41.5 MiB", "7.1 GiB", "1.5 TiB" into buf (len
 * >= 16) and returns buf. */
const char *rp_bytes_str(char *buf, size_t len, double bytes);

/* RP_OK when bytes fit in rp_mem_available() (or when that cannot be read); otherwise RP_ERR_IO
 * "<path>: <what> needs 4.0 GiB, more than the 1.2 GiB of memory available". File readers call it
 * before an allocation whose size comes from the file, so a forged or sparse file cannot make
 * them allocate what the machine does not have. */
rp_status rp_mem_check(const char *path, const char *what, double bytes);

/* The bytes of cache one core of this machine can count on: its level-2 cache plus its share of
 * the level-3 cache (the L3's size over the CPUs that share it), each level counted once (a
 * unified or data cache). From /sys/devices/system/cpu/cpu0/cache/index* (level, type, size,
 * shared_cpu_list), else sysconf's _SC_LEVEL2_CACHE_SIZE and _SC_LEVEL3_CACHE_SIZE (glibc; the L3
 * over the online CPUs), else -1 (unknown). A virtual machine reports its host's caches: the
 * number is the operating system's word, not a measurement. Never allocates on the heap. */
int64_t rp_cache_bytes(void);

/* Gives the C heap's free memory back to the system: glibc's malloc_trim(0), which returns whole
 * free pages inside the heap as well as its top (glibc keeps freed blocks below its dynamic mmap
 * threshold, up to 32 MiB each, in the heap, resident); a no-op with other C libraries. Costs
 * about a quarter of a millisecond with a busy heap, and the pages fault in again when reused:
 * for after a big free (rp_model_free), not for every buffer. */
void rp_mem_trim(void);

#endif
