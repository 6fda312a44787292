/* core/io/fileio.h on hostile inputs: bounded reads of regular files only (empty, /proc, exactly the
 * limit and one byte more, growing, a folder, a FIFO with a writer blocked in open, symbolic
 * links, missing paths, permission denied, limits near INT64_MAX, bad arguments), atomic writes
 * (replacement, mode, missing folder, the named fallback, failing writers) and the removal of
 * stale "<path>.tmp.<pid>" files (leading zeros, overflow, trailing garbage, live pids, other
 * paths with the same prefix), names of 255 bytes (their temporary names, long stale ones) and
 * links in a loop. Every group also checks that no file descriptor was leaked.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rp.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name)
{
    if (snprintf(buf, n, "%s/%s", g_dir, name) >= (int)n) {
        printf("FATAL: path too long: %s/%s\n", g_dir, name);
        exit(2);
    }
}

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* The whole file (malloc'ed, NUL-terminated; NULL when it cannot be read). */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 256, len = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while ((got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    b[len] = '\0';
    if (n) *n = len;
    return b;
}

/* Open file descriptors of this process (entries of /proc/self/fd, the one opendir uses
 * included: the same at every call). */
static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Entries of g_dir other than the names in keep (NULL-terminated); prints the strays. */
static int stray_files(const char *const *keep)
{
    DIR *d = opendir(g_dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int kept = 0;
        for (int i = 0; keep[i]; i++)
            if (!strcmp(e->d_name, keep[i])) kept = 1;
        if (!kept) {
            printf("  stray file: %s\n", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A pid that belonged to a process that has exited (and was reaped). */
static pid_t dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

/* ---- reading ---------------------------------------------------------------------------------- */

static void test_read_regular(void)
{
    int fds = fd_count();
    char p[256];
    char *data = NULL;
    int64_t len = -1;

    path_in(p, sizeof p, "hello.txt");
    CHECK(write_file(p, "hello\nworld", 11) == 0, "wrote %s", p);
    CHECK_STATUS(rp_file_read_all(p, 1000, "max_bytes", &data, &len), RP_OK, NULL);
    CHECK(len == 11 && data && !memcmp(data, "hello\nworld", 11) && data[11] == '\0',
          "regular file read whole and NUL-terminated (len %lld)", (long long)len);
    free(data);

    int fd = -1;
    int64_t size = -1;
    CHECK_STATUS(rp_file_open_read(p, &fd, &size), RP_OK, NULL);
    CHECK(fd >= 0 && size == 11, "open_read: fd %d, size %lld", fd, (long long)size);
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    int fdfl = fd >= 0 ? fcntl(fd, F_GETFD) : -1;
    CHECK(fl >= 0 && !(fl & O_NONBLOCK), "open_read leaves the descriptor blocking");
    CHECK(fdfl >= 0 && (fdfl & FD_CLOEXEC), "open_read sets close-on-exec");
    if (fd >= 0) close(fd);
    unlink(p);

    /* empty file: RP_OK, len 0, a buffer holding just the NUL (also with max_bytes 0) */
    path_in(p, sizeof p, "empty.txt");
    CHECK(write_file(p, "", 0) == 0, "wrote %s", p);
    data = NULL;
    len = -1;
    CHECK_STATUS(rp_file_read_all(p, 0, "max_bytes", &data, &len), RP_OK, NULL);
    CHECK(len == 0 && data && data[0] == '\0', "empty file: len %lld", (long long)len);
    free(data);
    unlink(p);

    /* /proc: size 0 in stat, content when read */
    data = NULL;
    len = -1;
    CHECK_STATUS(rp_file_read_all("/proc/self/status", 1 << 20, NULL, &data, &len), RP_OK, NULL);
    CHECK(len > 0 && data && strstr(data, "Pid:") && (int64_t)strlen(data) == len,
          "/proc/self/status read though its size is 0 (len %lld)", (long long)len);
    free(data);
    /* ... and bounded: more than max_bytes of it is refused */
    CHECK_STATUS(rp_file_read_all("/proc/self/status", 10, "max_bytes", &data, &len), RP_ERR_IO,
                 "is more than the limit of 10 B (max_bytes)");
    CHECK(!strncmp(rp_last_error(), "/proc/self/status: at least ", 28), "\"%s\"", rp_last_error());
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

static void test_read_limits(void)
{
    int fds = fd_count();
    char p[256];
    char buf[100];
    memset(buf, 'x', sizeof buf);
    path_in(p, sizeof p, "hundred.txt");
    CHECK(write_file(p, buf, 100) == 0, "wrote %s", p);
    char *data = NULL;
    int64_t len = -1;
    CHECK_STATUS(rp_file_read_all(p, 100, "max_bytes", &data, &len), RP_OK, NULL);
    CHECK(len == 100 && data && data[100] == '\0', "a file of exactly max_bytes is read");
    free(data);
    data = NULL;
    char want[512];
    snprintf(want, sizeof want, "%s: 100 B is more than the limit of 99 B (max_bytes)", p);
    CHECK_STATUS(rp_file_read_all(p, 99, "max_bytes", &data, &len), RP_ERR_IO, want);
    CHECK(data == NULL, "nothing returned for max_bytes + 1");
    snprintf(want, sizeof want, "%s: 100 B is more than the limit of 99 B", p);
    CHECK_STATUS(rp_file_read_all(p, 99, NULL, &data, &len), RP_ERR_IO, want);
    CHECK(!strstr(rp_last_error(), "("), "no limit name: \"%s\"", rp_last_error());

    /* limits near INT64_MAX: no overflow (UBSan) and no absurd allocation */
    CHECK_STATUS(rp_file_read_all(p, INT64_MAX, "max_bytes", &data, &len), RP_OK, NULL);
    CHECK(len == 100, "INT64_MAX: len %lld", (long long)len);
    free(data);
    CHECK_STATUS(rp_file_read_all(p, INT64_MAX - 1, "max_bytes", &data, &len), RP_OK, NULL);
    free(data);
    unlink(p);

    /* a file larger than its stat size says (/proc/self/maps, made over 64 KiB by many
     * mappings): the buffer grows past its first guess, with limits at INT64_MAX and below */
    long page = sysconf(_SC_PAGESIZE);
    int npages = 4000;
    char *area = mmap(NULL, (size_t)page * (size_t)npages, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED, "mmap: %s", strerror(errno));
    if (area != MAP_FAILED) {
        for (int i = 0; i < npages; i += 2)
            mprotect(area + (size_t)i * (size_t)page, (size_t)page, PROT_READ);
        data = NULL;
        CHECK_STATUS(rp_file_read_all("/proc/self/maps", INT64_MAX, "max_bytes", &data, &len),
                     RP_OK, NULL);
        CHECK(len > 65536 && data && (int64_t)strlen(data) == len,
              "/proc/self/maps over 64 KiB read whole with max_bytes INT64_MAX (len %lld)",
              (long long)len);
        free(data);
        data = NULL;
        CHECK_STATUS(rp_file_read_all("/proc/self/maps", INT64_MAX - 1, NULL, &data, &len), RP_OK,
                     NULL);
        free(data);
        data = NULL;
        /* the kernel's file has size 0, so the limit is met while reading ("at least"); qemu-user
         * opens a copy of it with its true size instead, which is refused before reading */
        struct stat sb;
        int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        int sized = mfd >= 0 && fstat(mfd, &sb) == 0 && sb.st_size > 0;
        if (mfd >= 0) close(mfd);
        if (sized)
            printf("  /proc/self/maps opens with a size (%lld bytes; qemu-user?): refused "
                   "before reading\n", (long long)sb.st_size);
        CHECK_STATUS(rp_file_read_all("/proc/self/maps", 100000, "max_bytes", &data, &len),
                     RP_ERR_IO,
                     sized ? " is more than the limit of 97.7 KiB (max_bytes)"
                           : "/proc/self/maps: at least 97.7 KiB is more than the limit of 97.7 "
                             "KiB (max_bytes)");
        CHECK(data == NULL, "nothing returned past the limit");
        munmap(area, (size_t)page * (size_t)npages);
    }
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

/* A file that grows while it is read (a child appends to it): either it is read up to some point
 * within the limit, or it is cut off with "at least"; never more than max_bytes. */
static void test_read_growing(void)
{
    int fds = fd_count();
    char p[256];
    path_in(p, sizeof p, "growing.txt");
    CHECK(write_file(p, "x", 1) == 0, "wrote %s", p);
    const int64_t max = 1 << 20;
    int cut = 0, whole = 0;
    for (int round = 0; round < 20 && !cut; round++) {
        CHECK(truncate(p, 1) == 0, "truncate");
        pid_t child = fork();
        if (child == 0) {
            alarm(10);
            char chunk[4096];
            memset(chunk, 'x', sizeof chunk);
            int fd = open(p, O_WRONLY | O_APPEND);
            for (int i = 0; i < 4096 && fd >= 0; i++)
                if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) break;
            _exit(0);
        }
        sleep_ms(round);
        char *data = NULL;
        int64_t len = -1;
        rp_status st = rp_file_read_all(p, max, "max_bytes", &data, &len);
        if (st == RP_OK) {
            int ok = len >= 1 && len <= max && data[len] == '\0';
            for (int64_t i = 0; ok && i < len; i++) ok = data[i] == 'x';
            if (!ok)
                CHECK(0, "growing file: a read within the limit is consistent (len %lld)",
                      (long long)len);
            whole++;
            free(data);
        } else {
            CHECK(st == RP_ERR_IO && strstr(rp_last_error(), "is more than the limit of 1.0 MiB") &&
                      data == NULL,
                  "growing file: refused with the limit message (\"%s\")", rp_last_error());
            cut++;
        }
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    CHECK(cut + whole > 0, "growing file: %d reads within the limit, %d cut off", whole, cut);
    printf("  growing file: %d reads within the limit, %d cut off\n", whole, cut);
    unlink(p);
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

/* Starts a child that opens fifo for writing (blocking until a reader opens it); exits 42 when
 * the open completes, dies by SIGALRM after 10 s. */
static pid_t fifo_writer(const char *fifo)
{
    pid_t child = fork();
    if (child == 0) {
        alarm(10);
        signal(SIGPIPE, SIG_DFL);
        int fd = open(fifo, O_WRONLY);
        _exit(fd >= 0 ? 42 : 43);
    }
    sleep_ms(200); /* let it block in open */
    return child;
}

/* 1 when child is still running after ms milliseconds, i.e. its open never completed. */
static int still_blocked(pid_t child, long ms)
{
    for (long t = 0; t < ms; t += 10) {
        int status;
        if (waitpid(child, &status, WNOHANG) == child) {
            printf("  the FIFO writer %s %d\n",
                   WIFEXITED(status) ? "exited with" : "died of signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            return 0;
        }
        sleep_ms(10);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 1;
}

static void test_read_special(void)
{
    int fds = fd_count();
    char p[256], l[256], want[512];
    char *data = NULL;
    int64_t len;

    snprintf(want, sizeof want, "%s: not a regular file (a folder)", g_dir);
    CHECK_STATUS(rp_file_read_all(g_dir, 100, NULL, &data, &len), RP_ERR_IO, want);
    CHECK_STATUS(rp_file_read_all("/dev/null", 100, NULL, &data, &len), RP_ERR_IO,
                 "/dev/null: not a regular file (a character device)");
    CHECK_STATUS(rp_file_read_all("/dev/zero", 100, NULL, &data, &len), RP_ERR_IO,
                 "/dev/zero: not a regular file (a character device)");

    /* a FIFO with a writer blocked in its open: refused without opening it (the writer stays
     * blocked), by rp_file_read_all, rp_file_open_read and through a symbolic link */
    path_in(p, sizeof p, "fifo");
    CHECK(mkfifo(p, 0600) == 0, "mkfifo: %s", strerror(errno));
    path_in(l, sizeof l, "link-to-fifo");
    CHECK(symlink(p, l) == 0, "symlink: %s", strerror(errno));
    for (int how = 0; how < 3; how++) {
        pid_t w = fifo_writer(p);
        int fd = -1;
        int64_t size;
        const char *q = how == 2 ? l : p;
        snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", q);
        if (how == 1)
            CHECK_STATUS(rp_file_open_read(q, &fd, &size), RP_ERR_IO, want);
        else
            CHECK_STATUS(rp_file_read_all(q, 100, NULL, &data, &len), RP_ERR_IO, want);
        CHECK(fd == -1, "no descriptor returned");
        CHECK(still_blocked(w, 300), "%s: the FIFO writer is still blocked in open (%s)",
              how == 0 ? "read_all" : how == 1 ? "open_read" : "read_all through a link",
              "the FIFO was never opened");
    }
    unlink(l);
    unlink(p);

    /* a symbolic link to a regular file is read */
    path_in(p, sizeof p, "target.txt");
    CHECK(write_file(p, "abc", 3) == 0, "wrote %s", p);
    path_in(l, sizeof l, "link.txt");
    CHECK(symlink("target.txt", l) == 0, "symlink: %s", strerror(errno));
    data = NULL;
    CHECK_STATUS(rp_file_read_all(l, 3, NULL, &data, &len), RP_OK, NULL);
    CHECK(len == 3 && data && !strcmp(data, "abc"), "read through a symbolic link");
    free(data);
    /* a dangling link, a link loop */
    unlink(p);
    snprintf(want, sizeof want, "%s: No such file or directory", l);
    CHECK_STATUS(rp_file_read_all(l, 3, NULL, &data, &len), RP_ERR_IO, want);
    unlink(l);
    CHECK(symlink("link.txt", l) == 0, "symlink loop: %s", strerror(errno));
    snprintf(want, sizeof want, "%s: Too many levels of symbolic links", l);
    CHECK_STATUS(rp_file_read_all(l, 3, NULL, &data, &len), RP_ERR_IO, want);
    unlink(l);

    /* missing path, a path through a missing folder, through a file */
    path_in(p, sizeof p, "missing.txt");
    snprintf(want, sizeof want, "%s: No such file or directory", p);
    CHECK_STATUS(rp_file_read_all(p, 3, NULL, &data, &len), RP_ERR_IO, want);
    path_in(p, sizeof p, "no-folder/x.txt");
    snprintf(want, sizeof want, "%s: No such file or directory", p);
    CHECK_STATUS(rp_file_read_all(p, 3, NULL, &data, &len), RP_ERR_IO, want);
    path_in(p, sizeof p, "plain");
    CHECK(write_file(p, "abc", 3) == 0, "wrote %s", p);
    path_in(l, sizeof l, "plain/x.txt");
    snprintf(want, sizeof want, "%s: Not a directory", l);
    CHECK_STATUS(rp_file_read_all(l, 3, NULL, &data, &len), RP_ERR_IO, want);
    unlink(p);
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

/* Both paths are refused with "<path>: Permission denied". */
static void expect_denied(const char *p, const char *q)
{
    char *data = NULL;
    int64_t len;
    char want[512];
    snprintf(want, sizeof want, "%s: Permission denied", p);
    CHECK_STATUS(rp_file_read_all(p, 10, NULL, &data, &len), RP_ERR_IO, want);
    snprintf(want, sizeof want, "%s: Permission denied", q);
    CHECK_STATUS(rp_file_read_all(q, 10, NULL, &data, &len), RP_ERR_IO, want);
}

/* Permission denied: a file without read permission, a folder without search permission. As
 * root (who may read anything) the checks run in a child that drops to uid/gid 65534. */
static void test_read_permission(void)
{
    int fds = fd_count();
    char p[256], q[256], sub[256];
    path_in(p, sizeof p, "secret.txt");
    CHECK(write_file(p, "abc", 3) == 0 && chmod(p, 0) == 0, "wrote %s mode 0", p);
    path_in(sub, sizeof sub, "closed");
    path_in(q, sizeof q, "closed/x.txt");
    CHECK(mkdir(sub, 0700) == 0 && write_file(q, "abc", 3) == 0 && chmod(sub, 0) == 0,
          "made %s mode 0", sub);
    int root = geteuid() == 0;
    if (root) {
        chmod(g_dir, 0711);
        pid_t child = fork();
        if (child == 0) {
            int failed = check_failed_;
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
            expect_denied(p, q);
            _exit(check_failed_ != failed ? 1 : 0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
            printf("  skipped: permission denied (running as root and cannot drop to uid 65534)\n");
        } else {
            printf("  permission denied: checked in a child dropped from root to uid 65534\n");
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "permission denied refused in the unprivileged child (status %d)", status);
        }
        chmod(g_dir, 0700);
    } else {
        expect_denied(p, q);
    }
    chmod(sub, 0700);
    unlink(q);
    rmdir(sub);
    unlink(p);
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

static int write_hello(FILE *f, void *ctx)
{
    const char *s = ctx ? ctx : "hello";
    return fputs(s, f) < 0 ? EIO : 0;
}

static void test_arguments(void)
{
    int fds = fd_count();
    char p[256];
    path_in(p, sizeof p, "arg.txt");
    CHECK(write_file(p, "abc", 3) == 0, "wrote %s", p);
    char *data = (char *)"untouched";
    int64_t len = 77;
    int fd = 77;
    int64_t size = 77;
    CHECK_STATUS(rp_file_read_all(NULL, 10, NULL, &data, &len), RP_ERR_ARG, "path is NULL");
    CHECK_STATUS(rp_file_read_all("", 10, NULL, &data, &len), RP_ERR_ARG, "the path is empty");
    CHECK_STATUS(rp_file_read_all(p, -1, "max_bytes", &data, &len), RP_ERR_ARG,
                 "max_bytes must be >= 0, got -1");
    CHECK_STATUS(rp_file_read_all(p, INT64_MIN, NULL, &data, &len), RP_ERR_ARG,
                 "the limit must be >= 0, got -9223372036854775808");
    CHECK_STATUS(rp_file_read_all(p, 10, NULL, NULL, &len), RP_ERR_ARG, "NULL output");
    CHECK_STATUS(rp_file_read_all(p, 10, NULL, &data, NULL), RP_ERR_ARG, "NULL output");
    CHECK(!strcmp(data, "untouched") && len == 77, "outputs untouched by refused calls");
    CHECK_STATUS(rp_file_open_read(NULL, &fd, &size), RP_ERR_ARG, "path is NULL");
    CHECK_STATUS(rp_file_open_read("", &fd, &size), RP_ERR_ARG, "the path is empty");
    CHECK_STATUS(rp_file_open_read(p, NULL, &size), RP_ERR_ARG, "NULL output");
    CHECK_STATUS(rp_file_open_read(p, &fd, NULL), RP_ERR_ARG, "NULL output");
    CHECK(fd == 77 && size == 77, "outputs untouched by refused calls");
    CHECK_STATUS(rp_file_write_atomic(NULL, write_hello, NULL), RP_ERR_ARG, "the path is empty");
    CHECK_STATUS(rp_file_write_atomic("", write_hello, NULL), RP_ERR_ARG, "the path is empty");
    CHECK_STATUS(rp_file_write_atomic(p, NULL, NULL), RP_ERR_ARG, "no writer");
    CHECK(rp_file_remove_stale_temps(NULL) == 0 && rp_file_remove_stale_temps("") == 0,
          "remove_stale_temps of no path removes nothing");
    size_t n;
    char *s = slurp(p, &n);
    CHECK(s && n == 3 && !strcmp(s, "abc"), "the file is untouched");
    free(s);
    unlink(p);
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

/* ---- writing ---------------------------------------------------------------------------------- */

static int write_fail(FILE *f, void *ctx)
{
    fputs("partial", f);
    return ENOSPC;
}

static void test_write(int named)
{
    int fds = fd_count();
    if (named) setenv("ROPER_NO_TMPFILE", "1", 1);
    else unsetenv("ROPER_NO_TMPFILE");
    const char *mode = named ? "named" : "anonymous";
    char p[256], want[512];
    path_in(p, sizeof p, "out.txt");
    CHECK(write_file(p, "old contents", 12) == 0 && chmod(p, 0600) == 0, "wrote %s", p);
    struct stat before, after;
    stat(p, &before);
    mode_t old_umask = umask(022);
    CHECK_STATUS(rp_file_write_atomic(p, write_hello, "new"), RP_OK, NULL);
    umask(old_umask);
    size_t n;
    char *s = slurp(p, &n);
    CHECK(s && n == 3 && !strcmp(s, "new"), "%s: contents replaced", mode);
    free(s);
    CHECK(stat(p, &after) == 0 && S_ISREG(after.st_mode) && (after.st_mode & 07777) == 0644,
          "%s: the new file has mode 0666 & ~umask (%o)", mode, (unsigned)(after.st_mode & 07777));
    CHECK(after.st_ino != before.st_ino, "%s: a new file was renamed over the old one", mode);
    const char *keep[] = {"out.txt", NULL};
    CHECK(stray_files(keep) == 0, "%s: no temporary file left", mode);

    /* a writer that fails: the old file stays, nothing is left */
    snprintf(want, sizeof want, "%s: %s", p, strerror(ENOSPC));
    CHECK_STATUS(rp_file_write_atomic(p, write_fail, NULL), RP_ERR_IO, want);
    s = slurp(p, &n);
    CHECK(s && !strcmp(s, "new"), "%s: failed save leaves the old file", mode);
    free(s);
    CHECK(stray_files(keep) == 0, "%s: no temporary file left after a failing writer", mode);

    /* our own pid's temporary name already taken (an earlier failure): taken over */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    CHECK(write_file(tmp, "junk junk junk", 14) == 0, "wrote %s", tmp);
    CHECK_STATUS(rp_file_write_atomic(p, write_hello, "again"), RP_OK, NULL);
    s = slurp(p, &n);
    CHECK(s && !strcmp(s, "again"), "%s: saved over a leftover of our own pid", mode);
    free(s);
    CHECK(stray_files(keep) == 0, "%s: our own leftover is gone", mode);

    /* a symbolic link to a regular file is replaced by the new file */
    char l[256];
    path_in(l, sizeof l, "out-link.txt");
    CHECK(symlink("out.txt", l) == 0, "symlink");
    CHECK_STATUS(rp_file_write_atomic(l, write_hello, "via link"), RP_OK, NULL);
    struct stat lsb;
    CHECK(lstat(l, &lsb) == 0 && S_ISREG(lsb.st_mode), "%s: the link became a regular file", mode);
    s = slurp(p, &n);
    CHECK(s && !strcmp(s, "again"), "%s: the link's target is untouched", mode);
    free(s);
    unlink(l);

    /* a link in a loop cannot be followed: refused with stat's reason, the links stay links;
     * a link to nothing names no file: replaced, as a missing path is created */
    char l2[256];
    path_in(l, sizeof l, "loop1");
    path_in(l2, sizeof l2, "loop2");
    CHECK(symlink("loop2", l) == 0 && symlink("loop1", l2) == 0, "symlink loop");
    snprintf(want, sizeof want, "%s: %s", l, strerror(ELOOP));
    CHECK_MSG(rp_file_write_atomic(l, write_hello, "x"), RP_ERR_IO, want);
    CHECK(lstat(l, &lsb) == 0 && S_ISLNK(lsb.st_mode) && lstat(l2, &lsb) == 0 &&
              S_ISLNK(lsb.st_mode),
          "%s: the looping links are left as they were", mode);
    unlink(l);
    unlink(l2);
    CHECK(symlink("nowhere", l) == 0, "symlink to nothing");
    CHECK_STATUS(rp_file_write_atomic(l, write_hello, "dangling"), RP_OK, NULL);
    s = slurp(l, &n);
    CHECK(lstat(l, &lsb) == 0 && S_ISREG(lsb.st_mode) && s && !strcmp(s, "dangling") &&
              !exists(l2),
          "%s: a link to nothing became the new file", mode);
    free(s);
    unlink(l);

    /* a missing folder: an error, nothing created */
    path_in(l, sizeof l, "no-such-folder/out.txt");
    snprintf(want, sizeof want, "%s: No such file or directory", l);
    CHECK_STATUS(rp_file_write_atomic(l, write_hello, NULL), RP_ERR_IO, want);
    CHECK(stray_files(keep) == 0, "%s: nothing left by a save into a missing folder", mode);

    /* not regular files: refused before writing (a FIFO with a blocked writer stays blocked) */
    snprintf(want, sizeof want, "%s: not a regular file (a folder)", g_dir);
    CHECK_STATUS(rp_file_write_atomic(g_dir, write_hello, NULL), RP_ERR_IO, want);
    path_in(l, sizeof l, "wfifo");
    CHECK(mkfifo(l, 0600) == 0, "mkfifo");
    pid_t w = fifo_writer(l);
    snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", l);
    CHECK_STATUS(rp_file_write_atomic(l, write_hello, NULL), RP_ERR_IO, want);
    CHECK(still_blocked(w, 200), "%s: the FIFO was never opened by a save", mode);
    unlink(l);
    CHECK(stray_files(keep) == 0, "%s: nothing left by refused saves", mode);

    /* a save in the current folder (a path without a slash) */
    char cwd[512];
    CHECK(getcwd(cwd, sizeof cwd) != NULL && chdir(g_dir) == 0, "chdir");
    pid_t dead = dead_pid();
    char stale[64];
    snprintf(stale, sizeof stale, "rel.txt.tmp.%ld", (long)dead);
    CHECK(write_file(stale, "x", 1) == 0, "wrote %s", stale);
    CHECK_STATUS(rp_file_write_atomic("rel.txt", write_hello, "rel"), RP_OK, NULL);
    CHECK(!exists(stale), "%s: a stale temp in the current folder removed by a save", mode);
    s = slurp("rel.txt", &n);
    CHECK(s && !strcmp(s, "rel"), "%s: relative path saved", mode);
    free(s);
    unlink("rel.txt");
    CHECK(chdir(cwd) == 0, "chdir back");

    unlink(p);
    unsetenv("ROPER_NO_TMPFILE");
    CHECK(fd_count() == fds, "%s: no fd leaked (%d before, %d after)", mode, fds, fd_count());
}

/* ---- stale temporary files -------------------------------------------------------------------- */

static void test_stale_temps(void)
{
    int fds = fd_count();
    pid_t dead = dead_pid(), dead2 = dead_pid();
    char target[256];
    path_in(target, sizeof target, "a.ckpt");
    struct {
        char name[96];
        int removed;
    } cases[32];
    int nc = 0;
#define CASE(rm, ...)                                                 \
    (snprintf(cases[nc].name, sizeof cases[nc].name, __VA_ARGS__), \
     cases[nc++].removed = (rm))
    CASE(1, "a.ckpt.tmp.%ld", (long)dead);
    CASE(1, "a.ckpt.tmp.%ld", (long)dead2);
    CASE(0, "a.ckpt.tmp.0%ld", (long)dead);  /* leading zero: not a name a save makes */
    CASE(0, "a.ckpt.tmp.00%ld", (long)dead);
    CASE(0, "a.ckpt.tmp.0");
    CASE(0, "a.ckpt.tmp.%ld", (long)getpid()); /* our own */
    CASE(0, "a.ckpt.tmp.1");                     /* init: alive */
    CASE(0, "a.ckpt.tmp.%ld", (long)getppid());  /* our parent: alive */
    CASE(0, "a.ckpt.tmp.4294967297");            /* overflows a 32-bit pid to 1 */
    CASE(0, "a.ckpt.tmp.18446744073709551617");  /* overflows 64 bits */
    CASE(0, "a.ckpt.tmp.99999999999999999999999999");
    CASE(0, "a.ckpt.tmp.%ldx", (long)dead);      /* trailing garbage */
    CASE(0, "a.ckpt.tmp.%ld.bak", (long)dead);
    CASE(0, "a.ckpt.tmp.%ld ", (long)dead);
    CASE(0, "a.ckpt.tmp. %ld", (long)dead);
    CASE(0, "a.ckpt.tmp.+%ld", (long)dead);
    CASE(0, "a.ckpt.tmp.-%ld", (long)dead);
    CASE(0, "a.ckpt.tmp.");
    CASE(0, "a.ckpt.tmp");
    CASE(0, "a.ckpt.TMP.%ld", (long)dead);
    CASE(0, "a.ckpt2.tmp.%ld", (long)dead);      /* another path with the same prefix */
    CASE(0, "a.ckpt.tmp.%ld.tmp.%ld", (long)dead, (long)dead2); /* the temp of a temp */
    CASE(0, "xa.ckpt.tmp.%ld", (long)dead);
    CASE(0, "a.ckp.tmp.%ld", (long)dead);
    CASE(0, "b.ckpt.tmp.%ld", (long)dead);
#undef CASE
    char p[512];
    for (int i = 0; i < nc; i++) {
        path_in(p, sizeof p, cases[i].name);
        CHECK(write_file(p, "x", 1) == 0, "wrote %s", p);
    }
    int removed = rp_file_remove_stale_temps(target);
    CHECK(removed == 2, "removed %d stale temps, want 2", removed);
    for (int i = 0; i < nc; i++) {
        path_in(p, sizeof p, cases[i].name);
        CHECK(exists(p) == !cases[i].removed, "\"%s\" %s", cases[i].name,
              cases[i].removed ? "removed (a dead process's temp of a.ckpt)" : "left alone");
        unlink(p);
    }
    /* the stale temp of a dead process is removed by a save to the same path, a folder with
     * that name is left alone */
    path_in(p, sizeof p, "a.ckpt.tmp.");
    snprintf(p + strlen(p), sizeof p - strlen(p), "%ld", (long)dead);
    CHECK(write_file(p, "x", 1) == 0, "wrote %s", p);
    char d2[512];
    path_in(d2, sizeof d2, "a.ckpt.tmp.");
    snprintf(d2 + strlen(d2), sizeof d2 - strlen(d2), "%ld", (long)dead2);
    CHECK(mkdir(d2, 0700) == 0, "mkdir %s", d2);
    CHECK_STATUS(rp_file_write_atomic(target, write_hello, NULL), RP_OK, NULL);
    CHECK(!exists(p), "a save removes the stale temp of a dead process");
    CHECK(exists(d2), "a folder named like a temp is left alone");
    rmdir(d2);
    /* a FIFO of that name stays too (only regular files and links are removed); a link goes,
     * not its target */
    CHECK(mkfifo(d2, 0600) == 0, "mkfifo %s", d2);
    char keep[512], link_[512];
    path_in(keep, sizeof keep, "kept.txt");
    CHECK(write_file(keep, "x", 1) == 0, "wrote %s", keep);
    snprintf(link_, sizeof link_, "%s", p);
    CHECK(symlink(keep, link_) == 0, "symlink %s", link_);
    CHECK(rp_file_remove_stale_temps(target) == 1, "one removed: the link");
    CHECK(exists(d2), "a FIFO named like a temp is left alone");
    CHECK(!exists(link_) && exists(keep), "the link removed, its target kept");
    unlink(d2);
    unlink(keep);
    unlink(target);
    const char *none[] = {NULL};
    CHECK(stray_files(none) == 0, "nothing left");
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

/* ---- long names ------------------------------------------------------------------------------ */

/* FNV-1a 64 of s, written here from its definition (the reference of fileio.h's stem rule). */
static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The writer of test_long_names: copies the names in g_dir with ".tmp." in them to ctx (one,
 * at most 300 bytes; "" when none, "several" when more) while the named temporary file is open. */
static int write_seeing_temp(FILE *f, void *ctx)
{
    char *seen = ctx;
    seen[0] = '\0';
    DIR *d = opendir(g_dir);
    if (!d) return errno;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) {
            if (seen[0]) snprintf(seen, 301, "several");
            else snprintf(seen, 301, "%s", e->d_name);
        }
    closedir(d);
    fputs("long", f);
    return 0;
}

/* Saves to names of 255 bytes (NAME_MAX): each works in both ways (anonymous, named), the named
 * temporary file's name is the stem rule of fileio.h (the name cut, '~', the hash of the whole
 * name, ".tmp.<pid>"), and a stale temporary file of a long name is removed by the next save. */
static void test_long_names(void)
{
    int fds = fd_count();
    char name[256], multi[256], p[512], want[300], seen[301], stale[600];
    memset(name, 'n', 251);
    memcpy(name + 251, ".txt", 5); /* 255 bytes */
    /* "é" (2 bytes) 127 times and "x": the cut at byte 223 would split an é: cut at 222 */
    for (int i = 0; i < 127; i++) memcpy(multi + 2 * i, "\xc3\xa9", 2);
    memcpy(multi + 254, "x", 2);
    const char *names[] = {name, multi};
    size_t cuts[] = {223, 222};
    for (int k = 0; k < 2; k++) {
        path_in(p, sizeof p, names[k]);
        CHECK(strlen(names[k]) == 255, "a name of 255 bytes");
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s~%016llx", (int)cuts[k], names[k],
                 (unsigned long long)fnv1a64(names[k]));
        for (int named = 0; named < 2; named++) {
            if (named) setenv("ROPER_NO_TMPFILE", "1", 1);
            else unsetenv("ROPER_NO_TMPFILE");
            const char *mode = named ? "named" : "anonymous";
            CHECK_STATUS(rp_file_write_atomic(p, write_seeing_temp, seen), RP_OK, NULL);
            size_t n;
            char *s = slurp(p, &n);
            CHECK(s && !strcmp(s, "long"), "%s, name %d: saved to a name of 255 bytes", mode, k);
            free(s);
            snprintf(want, sizeof want, "%s.tmp.%ld", stem, (long)getpid());
            if (named)
                CHECK(!strcmp(seen, want), "name %d: the temporary file is \"%s\", want \"%s\"",
                      k, seen, want);
            else
                CHECK(seen[0] == '\0', "anonymous: no temporary name while writing (\"%s\")", seen);
            const char *keep[] = {names[k], NULL};
            CHECK(stray_files(keep) == 0, "%s, name %d: nothing else left", mode, k);
        }
        unsetenv("ROPER_NO_TMPFILE");
        /* a stale temporary file of this long name: removed by a save; one of a live process
         * (ours) and one of the name cut without the hash stay */
        pid_t dead = dead_pid();
        snprintf(stale, sizeof stale, "%s/%s.tmp.%ld", g_dir, stem, (long)dead);
        CHECK(write_file(stale, "x", 1) == 0, "wrote %s", stale);
        char live[512], nohash[512];
        snprintf(live, sizeof live, "%s/%s.tmp.%ld", g_dir, stem, (long)getppid());
        CHECK(write_file(live, "x", 1) == 0, "wrote %s", live);
        snprintf(nohash, sizeof nohash, "%s/%.*s.tmp.%ld", g_dir, (int)cuts[k], names[k],
                 (long)dead);
        CHECK(write_file(nohash, "x", 1) == 0, "wrote %s", nohash);
        CHECK_STATUS(rp_file_write_atomic(p, write_hello, "again"), RP_OK, NULL);
        CHECK(!exists(stale), "name %d: a dead process's temporary file of it removed", k);
        CHECK(exists(live) && exists(nohash), "name %d: the others left alone", k);
        unlink(live);
        unlink(nohash);
        unlink(p);
    }
    /* a name of 240 bytes is its own stem: "<name>.tmp.<pid>" */
    memset(name, 's', 240);
    name[240] = '\0';
    path_in(p, sizeof p, name);
    pid_t dead = dead_pid();
    snprintf(stale, sizeof stale, "%s.tmp.%ld", p, (long)dead);
    CHECK(write_file(stale, "x", 1) == 0, "wrote %s", stale);
    CHECK(rp_file_remove_stale_temps(p) == 1 && !exists(stale),
          "a name of 240 bytes: its stale temporary file removed");
    const char *none[] = {NULL};
    CHECK(stray_files(none) == 0, "nothing left");
    CHECK(fd_count() == fds, "no fd leaked (%d before, %d after)", fds, fd_count());
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(g_dir, sizeof g_dir, "/tmp/rp_fileio_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    alarm(120); /* nothing here may hang */
    test_read_regular();
    test_read_limits();
    test_read_growing();
    test_read_special();
    test_read_permission();
    test_arguments();
    test_write(0);
    test_write(1);
    test_stale_temps();
    test_long_names();
    const char *none[] = {NULL};
    CHECK(stray_files(none) == 0, "temporary folder empty at the end");
    CHECK(rmdir(g_dir) == 0, "removed %s: %s", g_dir, strerror(errno));
    return check_summary("test_fileio");
}
