/* file.c — the one way Pagoda opens an input file.
 *
 * Every reader (weights, .npy, images, kernel sources, the program cache, the tuning store, and
 * through pgd_file_read the apps' labels and bench files) opens its file here, so one set of
 * rules holds for all of them:
 *
 *   - open(2) with O_NONBLOCK, so that a FIFO with no writer cannot block the open (O_NONBLOCK
 *     is cleared again right after; it means nothing for a regular file);
 *   - fstat(2) on the descriptor, and only regular files go on: a FIFO, a character device
 *     (/dev/zero, a terminal), a directory or a socket is refused with an error naming it,
 *     before a byte is read, so an endless "file" is never read into memory;
 *   - the size is checked against the caller's cap before anything is allocated;
 *   - exactly the size fstat gave is read, with pread; a file that shrinks meanwhile is an
 *     error, bytes that appear past that size are ignored. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

const char *pgd__file_kind(unsigned mode)
{
    if (S_ISREG(mode))
        return "regular file";
    if (S_ISDIR(mode))
        return "directory";
    if (S_ISFIFO(mode))
        return "FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "character device";
    if (S_ISBLK(mode))
        return "block device";
#ifdef S_ISSOCK
    if (S_ISSOCK(mode))
        return "socket";
#endif
    return "special file";
}

/* "what 'path'" or "path" at the start of every message. */
static int file_fail(pgd_error **err, int code, const char *what, const char *path, const char *fmt,
                     const char *detail)
{
    if (what)
        return pgd__error_set(err, code, "%s '%s': %s%s", what, path, fmt, detail ? detail : "");
    return pgd__error_set(err, code, "%s: %s%s", path, fmt, detail ? detail : "");
}

int pgd__file_open(const char *path, const char *what, uint64_t max_bytes, int *fd, uint64_t *size,
                   pgd_error **err)
{
    *fd = -1;
    *size = 0;
    if (!path)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: path is NULL",
                              what ? what : "file");
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        return file_fail(err, e == ENOENT ? PGD_ERR_NOT_FOUND : PGD_ERR_IO, what, path,
                         "cannot open: ", strerror(e));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return file_fail(err, PGD_ERR_IO, what, path, "cannot stat: ", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return file_fail(err, PGD_ERR_IO, what, path, "not a regular file but a ",
                         pgd__file_kind((unsigned)st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags == -1 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) == -1) {
        int e = errno;
        close(f);
        return file_fail(err, PGD_ERR_IO, what, path, "cannot clear O_NONBLOCK: ", strerror(e));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes) {
        close(f);
        char msg[160];
        snprintf(msg, sizeof msg, "%" PRIu64 " bytes exceeds the limit of %" PRIu64 " bytes",
                 (uint64_t)st.st_size, max_bytes);
        return file_fail(err, PGD_ERR_TOO_LARGE, what, path, msg, NULL);
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return PGD_OK;
}

int pgd__file_pread(int fd, const char *what, const char *path, void *buf, size_t n,
                    uint64_t offset, pgd_error **err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (unsigned char *)buf + got, n - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "read failed at byte %" PRIu64 " (%zu of %zu bytes from offset %" PRIu64 "): ",
                     offset + got, got, n, offset);
            return file_fail(err, PGD_ERR_IO, what, path, msg,
                             r < 0 ? strerror(errno)
                                   : "unexpected end of file (was it truncated while open?)");
        }
        got += (size_t)r;
    }
    return PGD_OK;
}

int pgd__file_read(const char *path, const char *what, uint64_t max_bytes, unsigned char **data,
                   size_t *size, pgd_error **err)
{
    *data = NULL;
    *size = 0;
    int fd;
    uint64_t n;
    int rc = pgd__file_open(path, what, max_bytes, &fd, &n, err);
    if (rc)
        return rc;
    if (n >= SIZE_MAX) {
        close(fd);
        return file_fail(err, PGD_ERR_TOO_LARGE, what, path, "too large to address", NULL);
    }
    unsigned char *buf = malloc((size_t)n + 1);
    if (!buf) {
        close(fd);
        return file_fail(err, PGD_ERR_OUT_OF_HOST_MEMORY, what, path,
                         "out of host memory for its bytes", NULL);
    }
    rc = pgd__file_pread(fd, what, path, buf, (size_t)n, 0, err);
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = 0;
    *data = buf;
    *size = (size_t)n;
    return PGD_OK;
}

pgd_status pgd_file_read(const char *path, uint64_t max_bytes, void **data, size_t *size,
                         pgd_error **err)
{
    if (!data || !size)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_file_read: data or size is NULL");
    unsigned char *d = NULL;
    int rc = pgd__file_read(path, NULL, max_bytes, &d, size, err);
    *data = d;
    return rc;
}

pgd_status pgd_file_sha256(const char *path, char hex[65], uint64_t *size, pgd_error **err)
{
    if (!hex)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_file_sha256: hex is NULL");
    hex[0] = 0;
    int fd;
    uint64_t n;
    int rc = pgd__file_open(path, NULL, UINT64_MAX, &fd, &n, err);
    if (rc)
        return rc;
    /* Read in pieces: a checkpoint may be larger than the memory one would give it. */
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: cannot hash it", path);
    }
    pgd__sha256 s;
    pgd__sha256_init(&s);
    for (uint64_t off = 0; off < n && !rc;) {
        size_t want = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            rc = pgd__error_set(err, PGD_ERR_IO, "%s: cannot read it: %s", path,
                                got < 0 ? strerror(errno) : "the file shrank while read");
        else
            pgd__sha256_update(&s, buf, (size_t)got), off += (uint64_t)got;
    }
    free(buf);
    close(fd);
    if (rc)
        return rc;
    unsigned char digest[32];
    pgd__sha256_final(&s, digest);
    pgd__sha256_hex(digest, hex);
    if (size)
        *size = n;
    return PGD_OK;
}
