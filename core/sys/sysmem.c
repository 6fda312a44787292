/* rp_mem_available: /proc/meminfo, the cgroup v2 limit and RLIMIT_AS (see sysmem.h); rp_mem_trim:
 * glibc's malloc_trim. */
#include "sysmem.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
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
