/* Non-blocking, bounded reads and atomic writes (contracts in fileio.h). */
#define _GNU_SOURCE /* O_TMPFILE, AT_EMPTY_PATH */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist.h" /* rp_fnv64 */
#include "sysmem.h"

const char *rp_file_kind(mode_t mode)
{
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "an unknown kind of file";
}

/* ---- reading ---------------------------------------------------------------------------------- */

/* RP_ERR_ARG for a NULL or empty path (fn names the function in the message). */
static rp_status check_path(const char *fn, const char *path)
{
    if (!path) return rp_error(RP_ERR_ARG, "%s: the path is NULL", fn);
    if (!*path) return rp_error(RP_ERR_ARG, "%s: the path is empty", fn);
    return RP_OK;
}

rp_status rp_file_open_read(const char *path, int *fd_out, int64_t *size)
{
    RP_TRY(check_path("rp_file_open_read", path));
    if (!fd_out || !size) return rp_error(RP_ERR_ARG, "rp_file_open_read: NULL output pointer");
    /* stat first: opening a FIFO (even with O_NONBLOCK) completes the open of a writer blocked
     * on it, who then gets SIGPIPE when we close; stat opens nothing (a symbolic link is
     * followed: a link to a regular file is read) */
    struct stat sb;
    if (stat(path, &sb) != 0) return rp_error(RP_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return rp_error(RP_ERR_IO, "%s: not a regular file (%s)", path, rp_file_kind(sb.st_mode));
    /* the path may be swapped between stat and open: O_NONBLOCK and the fstat check again */
    int fd;
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return rp_error(RP_ERR_IO, "%s: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return rp_error(RP_ERR_IO, "%s: not a regular file (%s)", path, rp_file_kind(sb.st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
    }
    *fd_out = fd;
    *size = (int64_t)sb.st_size;
    return RP_OK;
}

int rp_file_read_full(int fd, void *buf, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;
        ssize_t k = read(fd, (char *)buf + *got, want);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno ? errno : EIO;
        }
        if (k == 0) break;
        *got += (size_t)k;
    }
    return 0;
}

rp_status rp_file_peek(const char *path, void *buf, size_t n, size_t *got)
{
    RP_TRY(check_path("rp_file_peek", path));
    if (!got || (!buf && n)) return rp_error(RP_ERR_ARG, "rp_file_peek: NULL output pointer");
    int fd;
    int64_t size;
    RP_TRY(rp_file_open_read(path, &fd, &size));
    int e = rp_file_read_full(fd, buf, n, got);
    close(fd);
    if (e) return rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
    return RP_OK;
}

/* "big.txt: 300.0 MiB is more than the limit of 256.0 MiB (max_bytes)" */
static rp_status too_large(const char *path, double got, int64_t max, const char *limit_name,
                           int at_least)
{
    char a[32], b[32];
    rp_bytes_str(a, sizeof a, got);
    rp_bytes_str(b, sizeof b, (double)max);
    return rp_error(RP_ERR_IO, "%s: %s%s is more than the limit of %s%s%s%s", path,
                    at_least ? "at least " : "", a, b, limit_name ? " (" : "",
                    limit_name ? limit_name : "", limit_name ? ")" : "");
}

rp_status rp_file_read_all(const char *path, int64_t max_bytes, const char *limit_name,
                           char **data, int64_t *len)
{
    RP_TRY(check_path("rp_file_read_all", path));
    if (!data || !len) return rp_error(RP_ERR_ARG, "rp_file_read_all: NULL output pointer");
    if (max_bytes < 0)
        return rp_error(RP_ERR_ARG, "%s: %s must be >= 0, got %lld", path,
                        limit_name ? limit_name : "the limit", (long long)max_bytes);
    int fd;
    int64_t size;
    RP_TRY(rp_file_open_read(path, &fd, &size));
    if (size > max_bytes) {
        close(fd);
        return too_large(path, (double)size, max_bytes, limit_name, 0);
    }
    /* st_size is a hint (files in /proc say 0, a file may grow): read to the end, at most
     * limit = max_bytes + 1 bytes (no overflow: 0 <= max_bytes <= INT64_MAX), growing the buffer
     * as needed; the buffer holds cap bytes and the NUL */
    uint64_t limit = (uint64_t)max_bytes + 1;
    if (limit > (uint64_t)SIZE_MAX - 1) limit = (uint64_t)SIZE_MAX - 1; /* 32-bit size_t */
    uint64_t first = size > 0 ? (uint64_t)size + 1 : 65536;
    size_t cap = (size_t)(first < limit ? first : limit);
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return rp_error(RP_ERR_NOMEM, "%s: out of memory for %lld bytes", path, (long long)size);
    }
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            if ((uint64_t)cap >= limit) break;
            size_t ncap = (uint64_t)cap <= limit / 2 ? cap * 2 : (size_t)limit;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                close(fd);
                return rp_error(RP_ERR_NOMEM, "%s: out of memory after %zu bytes", path, n);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
        if ((uint64_t)n > (uint64_t)max_bytes) break;
    }
    close(fd);
    if ((uint64_t)n > (uint64_t)max_bytes) {
        free(buf);
        return too_large(path, (double)n, max_bytes, limit_name, 1);
    }
    buf[n] = '\0';
    *data = buf;
    *len = (int64_t)n;
    return RP_OK;
}

/* ---- writing ---------------------------------------------------------------------------------- */

/* The folder of path ("." when it has no slash, "/" for a file at the root); malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* The name path has in its folder (what follows the last slash). */
static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

size_t rp_file_temp_stem(char *buf, const char *base)
{
    size_t n = strlen(base);
    if (n <= RP_FILE_TEMP_STEM_MAX) {
        memcpy(buf, base, n + 1);
        return n;
    }
    /* a cut that ends a UTF-8 character: never before a continuation byte (10xxxxxx) */
    size_t cut = RP_FILE_TEMP_STEM_MAX - 17;
    while (cut > 0 && ((unsigned char)base[cut] & 0xC0) == 0x80) cut--;
    memcpy(buf, base, cut);
    snprintf(buf + cut, 18, "~%016llx", (unsigned long long)rp_fnv64(RP_FNV64_INIT, base, n));
    return cut + 17;
}

int rp_file_remove_stale_temps(const char *path)
{
    if (!path || !*path) return 0;
    char *dir = dir_of(path);
    if (!dir) return 0;
    char base[RP_FILE_TEMP_STEM_MAX + 1];
    size_t blen = rp_file_temp_stem(base, base_of(path));
    DIR *d = opendir(dir);
    free(dir);
    if (!d) return 0;
    int removed = 0;
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (blen == 0 || strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp.", 5) != 0)
            continue;
        const char *digits = name + blen + 5;
        size_t nd = strspn(digits, "0123456789");
        /* exactly the decimal pid a save writes: no sign, no leading zero, nothing after it, at
         * most 9 digits (Linux pids stay below 2^22; no overflow of pid_t) */
        if (nd == 0 || nd > 9 || digits[0] == '0' || digits[nd] != '\0') continue;
        pid_t pid = (pid_t)atol(digits);
        if (pid <= 0 || pid == self) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        /* a regular file or a link (not followed) only: a FIFO or socket of that name stays */
        struct stat sb;
        if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !(S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)))
            continue;
        if (unlinkat(dirfd(d), name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}

/* Best effort: makes a rename in dir durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Gives the anonymous (O_TMPFILE) file fd the name tmp; 0 or an errno value. */
static int link_anonymous(int fd, const char *tmp)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
        int e = errno;
        if (e == ENOENT && access("/proc/self/fd", F_OK) != 0) {
            /* no /proc: AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH) */
            if (linkat(fd, "", AT_FDCWD, tmp, AT_EMPTY_PATH) == 0) return 0;
            return errno;
        }
        if (e != EEXIST) return e;
        unlink(tmp); /* our own pid's name, left by an earlier failure: take it over */
    }
    return EEXIST;
}

/* One attempt: anonymous (O_TMPFILE) or named temporary file. Returns 0 or an errno value;
 * *no_anon is set when the anonymous way is not available here (then nothing was written). */
static int write_once(const char *path, const char *dir, const char *tmp, int anonymous,
                      rp_file_writer write, void *ctx, int *no_anon)
{
    int fd;
    if (anonymous) {
        fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0) {
            int e = errno;
            if (e == EOPNOTSUPP || e == EISDIR || e == EINVAL || e == ENOTSUP) *no_anon = 1;
            return e;
        }
    } else {
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0) return errno;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        if (!anonymous) unlink(tmp);
        return e;
    }
    int named = !anonymous; /* tmp exists on disk */
    int e = write(f, ctx);
    if (!e && fflush(f) != 0) e = errno ? errno : EIO;
    if (!e && fsync(fileno(f)) != 0) e = errno ? errno : EIO;
    if (!e && anonymous) {
        e = link_anonymous(fileno(f), tmp);
        if (e == 0) named = 1;
        else if (e == EPERM || e == EACCES || e == ENOENT || e == EXDEV || e == ENOSYS)
            *no_anon = 1; /* cannot name it here: the caller retries with a named file */
    }
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp, path) != 0) e = errno ? errno : EIO;
    if (e && named) unlink(tmp);
    (void)path;
    return e;
}

rp_status rp_file_write_atomic(const char *path, rp_file_writer write, void *ctx)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "the path is empty");
    if (!write) return rp_error(RP_ERR_ARG, "%s: no writer function", path);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode))
            return rp_error(RP_ERR_IO, "%s: not a regular file (%s)", path,
                            rp_file_kind(sb.st_mode));
    } else if (errno != ENOENT) { /* a link in a loop (ELOOP), a folder we may not search, ... */
        return rp_error(RP_ERR_IO, "%s: %s", path, strerror(errno));
    }
    char *dir = dir_of(path);
    const char *base = base_of(path);
    size_t tlen = (size_t)(base - path) + RP_FILE_TEMP_STEM_MAX + 32;
    char *tmp = malloc(tlen);
    if (!dir || !tmp) {
        free(dir);
        free(tmp);
        return rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
    }
    char stem[RP_FILE_TEMP_STEM_MAX + 1];
    rp_file_temp_stem(stem, base);
    snprintf(tmp, tlen, "%.*s%s.tmp.%ld", (int)(base - path), path, stem, (long)getpid());
    rp_file_remove_stale_temps(path);
    /* ROPER_NO_TMPFILE=1: the named temporary file from the start, as on file systems without
     * O_TMPFILE (the tests use it to exercise that path) */
    const char *no_tmpfile = getenv("ROPER_NO_TMPFILE");
    int no_anon = no_tmpfile != NULL && no_tmpfile[0] == '1';
    int e = 0;
    if (!no_anon) e = write_once(path, dir, tmp, 1, write, ctx, &no_anon);
    if (no_anon) e = write_once(path, dir, tmp, 0, write, ctx, &no_anon);
    if (!e) sync_dir(dir);
    free(dir);
    free(tmp);
    if (e) return rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
    return RP_OK;
}
