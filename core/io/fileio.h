/* Files without surprises: reading that never blocks on a FIFO or a device and never reads
 * without bound, and atomic writing that never leaves a temporary file behind for good.
 * Checkpoints (core/io/checkpoint.c) and text corpora (tasks/text.c) go through these. Every error
 * is RP_ERR_IO (RP_ERR_NOMEM for memory) with a message that starts with the path the caller
 * gave, never with a temporary name: "runs/a.ckpt: Permission denied"; bad arguments (a NULL or
 * empty path, a NULL out-pointer or writer, a negative max_bytes) are RP_ERR_ARG. */
#ifndef RP_FILEIO_H
#define RP_FILEIO_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "status.h"

/* "a folder", "a FIFO", "a character device", "a block device", "a socket", "a symbolic link",
 * "a regular file" or "an unknown kind of file" for an st_mode. */
const char *rp_file_kind(mode_t mode);

/* Opens path for reading: anything but a regular file is refused after a stat, before any open
 * ("f: not a regular file (a FIFO)"; a folder: "d: not a regular file (a folder)"), so a FIFO is
 * never opened (opening it would complete the open of a writer blocked on it); a symbolic link to
 * a regular file is followed. The open itself cannot block (O_NONBLOCK, for a path swapped
 * between the stat and the open: that is refused by an fstat), then the descriptor is made
 * blocking again. On success *fd is open (close-on-exec; the caller closes it) and *size is the
 * file's size at that moment. */
rp_status rp_file_open_read(const char *path, int *fd, int64_t *size);

/* Reads the whole regular file path (rp_file_open_read) of at most max_bytes (>= 0, up to
 * INT64_MAX) bytes into a new buffer: *data (malloc'ed, caller frees; one NUL byte after the
 * end) and *len. A larger file is refused before anything is read, and a file that grows while
 * it is read is cut off with the same error: "big.txt: 300.0 MiB is more than the limit of
 * 256.0 MiB (<limit_name>)".
 * limit_name names the setting that raises the limit (e.g. "max_bytes"); NULL leaves it out. */
rp_status rp_file_read_all(const char *path, int64_t max_bytes, const char *limit_name,
                           char **data, int64_t *len);

/* Reads up to n bytes from fd at its current position into buf, retrying after EINTR and short
 * reads; *got is how many arrived (fewer than n only at the end of the file). Returns 0 or the
 * errno value of a failed read. */
int rp_file_read_full(int fd, void *buf, size_t n, size_t *got);

/* The first (up to) n bytes of the regular file path (rp_file_open_read's checks and messages):
 * *got bytes in buf, fewer than n when the file is shorter. For telling formats apart by their
 * magic before choosing a reader. */
rp_status rp_file_peek(const char *path, void *buf, size_t n, size_t *got);

/* Writes the bytes that write(f, ctx) produces (it returns 0, or an errno value on failure) to
 * path atomically: a reader sees the old file or the whole new one, never part of one, and a
 * save that fails or is killed leaves the old file as it was.
 *  - A path that exists and is not a regular file (a folder, FIFO, device, ...) is refused
 *    before anything is written: "dev: not a regular file (a character device)". A symbolic
 *    link to a regular file is replaced by the new file, as rename(2) does; a link that cannot
 *    be followed for another reason than a missing target (a loop) is refused with stat's
 *    reason: "l: Too many levels of symbolic links". (A link to nothing is replaced.)
 *  - The data goes to an anonymous file in path's folder (O_TMPFILE), is flushed and fsync'ed,
 *    gets the temporary name "<path>.tmp.<pid>" (linkat) and is renamed over path; the folder
 *    is fsync'ed. A kill before the linkat leaves nothing; a kill in the moment between linkat
 *    and rename leaves "<path>.tmp.<pid>". Where the file system has no O_TMPFILE (or the
 *    environment holds ROPER_NO_TMPFILE=1, for tests) the data goes to "<path>.tmp.<pid>"
 *    directly. In "<path>.tmp.<pid>" the name of path is its stem (rp_file_temp_stem), so a
 *    temporary name fits in NAME_MAX (255 bytes) whenever path's name does.
 *  - Every save first removes the "<path>.tmp.<pid>" files whose process no longer exists
 *    (kill(pid, 0) fails with ESRCH), so whatever a killed save left is gone at the next save to
 *    the same path. Temporary files of live processes are left alone.
 * write may run twice (when the file system refuses to name the anonymous file, the save starts
 * again with a named one): it must produce the same bytes each time.
 * Returns RP_OK, or RP_ERR_IO "path: reason" with nothing left behind. */
typedef int (*rp_file_writer)(FILE *f, void *ctx);
rp_status rp_file_write_atomic(const char *path, rp_file_writer write, void *ctx);

/* The stem of a file name base (no slash) in the names of its temporary files, into buf
 * (RP_FILE_TEMP_STEM_MAX + 1 bytes); returns its length. base itself when it has at most
 * RP_FILE_TEMP_STEM_MAX bytes (".tmp." and a pid of up to 10 digits then fit in NAME_MAX);
 * a longer name is cut to its first RP_FILE_TEMP_STEM_MAX - 17 bytes (fewer where that would
 * split a UTF-8 character: never before a byte 10xxxxxx) followed by '~' and the 16 lowercase
 * hex digits of the FNV-1a 64 hash of the whole name, so names that differ anywhere get
 * different stems. */
#define RP_FILE_TEMP_STEM_MAX 240
size_t rp_file_temp_stem(char *buf, const char *base);

/* Removes the stale "<path>.tmp.<pid>" files described above: the name is exactly the stem of
 * path's name, ".tmp." and a pid as a save writes it (decimal, no sign, no leading zero, nothing
 * after it); only regular files and links are removed. Returns how many it removed (0 for a NULL path).
 * (rp_file_write_atomic calls it; exposed for tests and tools.) */
int rp_file_remove_stale_temps(const char *path);

#endif
