/* rp_mem_available: /proc/meminfo, the cgroup v2 limit and RLIMIT_AS (see sysmem.h); rp_mem_trim:
 * glibc's malloc_trim; rp_cache_bytes: sysfs's cache descriptions or sysconf. */
#include "sysmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* The value of "Key:   1234 kB" in /proc/meminfo in bytes, or -1. */
static int64_t meminfo_bytes(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p) return -1;
    long long kb = -1;
    if (sscanf(p + strlen(key), " %lld", &kb) != 1 || kb < 0) return -1;
    return (int64_t)kb * 1024;
}

/* Reads up to len-1 bytes of a small file into buf (NUL-terminated); 0 on failure. */
static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

/* A number (or "max" = -1) from a one-line cgroup file; -2 when unreadable. */
static int64_t cgroup_value(const char *path)
{
    char buf[64];
    if (!read_small(path, buf, sizeof buf)) return -2;
    if (strncmp(buf, "max", 3) == 0) return -1;
    long long v = -2;
    if (sscanf(buf, "%lld", &v) != 1 || v < 0) return -2;
    return (int64_t)v;
}

static int64_t min_known(int64_t a, int64_t b)
{
    if (a < 0) return b;
    if (b < 0) return a;
    return a < b ? a : b;
}

int64_t rp_mem_available(void)
{
    int64_t avail = -1;
    char text[8192];
    if (read_small("/proc/meminfo", text, sizeof text)) {
        int64_t mem = meminfo_bytes(text, "MemAvailable:");
        int64_t swap = meminfo_bytes(text, "SwapFree:");
        if (mem >= 0) avail = mem + (swap > 0 ? swap : 0);
    }
    /* cgroup v2: the limit of the process's own group ("0::/path" in /proc/self/cgroup) */
    char cg[512];
    if (read_small("/proc/self/cgroup", cg, sizeof cg) && strncmp(cg, "0::", 3) == 0) {
        char *nl = strchr(cg, '\n');
        if (nl) *nl = '\0';
        char path[700];
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", cg + 3);
        int64_t max = cgroup_value(path);
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", cg + 3);
        int64_t cur = cgroup_value(path);
        if (max >= 0 && cur >= 0) avail = min_known(avail, max > cur ? max - cur : 0);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        char st[4096];
        int64_t vm = 0;
        if (read_small("/proc/self/status", st, sizeof st)) {
            int64_t v = meminfo_bytes(st, "VmSize:");
            if (v > 0) vm = v;
        }
        int64_t lim = (int64_t)rl.rlim_cur;
        avail = min_known(avail, lim > vm ? lim - vm : 0);
    }
    return avail;
}

const char *rp_bytes_str(char *buf, size_t len, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 5) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%.0f B", bytes);
    else snprintf(buf, len, "%.1f %s", bytes, units[u]);
    return buf;
}

rp_status rp_mem_check(const char *path, const char *what, double bytes)
{
    int64_t avail = rp_mem_available();
    if (avail < 0 || bytes <= (double)avail) return RP_OK;
    char a[32], b[32];
    return rp_error(RP_ERR_IO, "%s: %s needs %s, more than the %s of memory available", path, what,
                    rp_bytes_str(a, sizeof a, bytes), rp_bytes_str(b, sizeof b, (double)avail));
}

void rp_mem_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* The CPUs of a cpulist ("0-1", "0,2-3"), or 0 when it cannot be read. */
static int64_t cpulist_count(const char *s)
{
    int64_t n = 0;
    while (*s && *s != '\n') {
        long a, b;
        int used = 0;
        if (sscanf(s, "%ld-%ld%n", &a, &b, &used) == 2 && b >= a) n += b - a + 1;
        else if (sscanf(s, "%ld%n", &a, &used) == 1) n += 1;
        else return 0;
        s += used;
        if (*s == ',') s++;
    }
    return n;
}

/* Level 2 and level 3 from sysfs as rp_cache_bytes counts them, or -1. */
static int64_t sysfs_cache_bytes(void)
{
    int64_t total = -1;
    int seen[4] = {0};
    for (int i = 0; i < 10; i++) {
        char path[96], level[16], type[32], size[32], shared[256];
        const char *dir = "/sys/devices/system/cpu/cpu0/cache/index";
        snprintf(path, sizeof path, "%s%d/level", dir, i);
        if (!read_small(path, level, sizeof level)) break;
        snprintf(path, sizeof path, "%s%d/type", dir, i);
        if (!read_small(path, type, sizeof type)) continue;
        snprintf(path, sizeof path, "%s%d/size", dir, i);
        if (!read_small(path, size, sizeof size)) continue;
        snprintf(path, sizeof path, "%s%d/shared_cpu_list", dir, i);
        int64_t sharers = read_small(path, shared, sizeof shared) ? cpulist_count(shared) : 0;
        int lv = atoi(level);
        long long kib = 0;
        char unit = 'K';
        if ((lv != 2 && lv != 3) || seen[lv] || strncmp(type, "Instruction", 11) == 0 ||
            sscanf(size, "%lld%c", &kib, &unit) < 1 || kib <= 0)
            continue;
        int64_t bytes = (int64_t)kib * (unit == 'M' ? 1024 * 1024 : unit == 'K' ? 1024 : 1);
        seen[lv] = 1;
        total = (total < 0 ? 0 : total) + bytes / (sharers > 0 ? sharers : 1);
    }
    return total;
}

int64_t rp_cache_bytes(void)
{
    int64_t b = sysfs_cache_bytes();
    if (b > 0) return b;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    b = (l2 > 0 ? (int64_t)l2 : 0) + (l3 > 0 ? (int64_t)l3 / (cpus > 0 ? cpus : 1) : 0);
    return b > 0 ? b : -1;
}
