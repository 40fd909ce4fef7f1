/* outfile.c — the one way Pagoda writes a file: complete or not at all, regular files only.
 *
 * Every writer (pgd_npy_write, the program cache, the GEMM tuning store, and through the public
 * API the CLI's JSON, heat maps and staged outputs) goes through here:
 *
 *   1. the target is checked with lstat: it may be absent or a regular file; a directory, a
 *      symbolic link, a FIFO, a socket or a device node is refused, naming it (a rename over a
 *      device node would replace the node itself, even /dev/null when run as root);
 *   2. a temporary file "<target>.tmp-<12 random characters>" is created in the target's own
 *      directory (so that the rename stays within one file system) with
 *      open(O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600): O_EXCL never opens an
 *      existing file, nor follows a symbolic link planted at that name; on EEXIST another name
 *      is tried. The suffix mixes a process-wide atomic counter, the process id, the clock and
 *      an address, so two threads or processes never race for one name and a name cannot be
 *      guessed ahead of time;
 *   3. the data is written, flushed and fsync'ed, the file is given its final mode (that of the
 *      regular file it replaces, else 0666 less the umask, as a plain creat() would) and closed;
 *   4. at commit the target is checked again (something may have been planted meanwhile) and the
 *      temporary file is renamed over it; on any failure the temporary file is removed.
 *
 * The window between the second check and rename() cannot be closed with POSIX calls: whoever
 * can make a device node in the directory at that moment is root already. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

struct pgd_outfile {
    char *path;   /* the target */
    char *tmp;    /* the temporary file beside it */
    FILE *stream; /* open on the temporary file until closed; NULL after */
    mode_t mode;  /* the final mode */
    int failed;   /* an earlier write failed: commit refuses */
    int write_errno;
};

/* What kind of thing an lstat found, for messages. */
static const char *kind_name(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* 0 when path is absent or a regular file (then *st is filled and *exists set), else an error
 * naming what it is. */
static int check_target(const char *path, struct stat *st, int *exists, pgd_error **err)
{
    *exists = 0;
    if (lstat(path, st) != 0) {
        if (errno == ENOENT)
            return PGD_OK;
        return pgd__error_set(err, PGD_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    if (!S_ISREG(st->st_mode))
        return pgd__error_set(err, PGD_ERR_IO,
                              "%s: refusing to write: it exists and is %s, not a regular file "
                              "(outputs replace regular files only)",
                              path, kind_name(st->st_mode));
    *exists = 1;
    return PGD_OK;
}

/* The directory part of path ("." when it has none), malloc'd; NULL when out of memory. */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return pgd__strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

pgd_status pgd_outfile_check(const char *path, pgd_error **err)
{
    if (!path || !*path)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_outfile_check: empty path");
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* "out/", "." or "..": a directory's name where a file's is wanted; say so before the
     * lstat below finds the directory and calls the target one. */
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return pgd__error_set(err, PGD_ERR_IO,
                              "%s: refusing to write: it names a directory, not a file (give a "
                              "file name inside it)",
                              path);
    struct stat st;
    int exists;
    int rc = check_target(path, &st, &exists, err);
    if (rc || exists)
        return rc;
    char *dir = parent_of(path);
    if (!dir)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: cannot check it", path);
    if (stat(dir, &st) != 0)
        rc = pgd__error_set(err, PGD_ERR_IO, "%s: cannot write: its directory %s: %s", path, dir,
                            strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = pgd__error_set(err, PGD_ERR_IO, "%s: cannot write: %s is not a directory", path, dir);
    free(dir);
    return rc;
}

/* The process's umask, without changing it (umask() would, for a moment, for every thread):
 * Linux shows it in /proc/self/status; elsewhere the common 022 is assumed. */
static mode_t current_umask(void)
{
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return mask;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned m;
        if (sscanf(line, "Umask: %o", &m) == 1) {
            mask = (mode_t)(m & 0777);
            break;
        }
    }
    fclose(f);
    return mask;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A fresh suffix: 12 characters of [0-9a-zA-Z_-] (72 bits). */
static void random_suffix(char out[13])
{
    static atomic_uint_fast64_t counter;
    static const char alphabet[] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t n = atomic_fetch_add(&counter, 1);
    uint64_t h = mix64(n ^ ((uint64_t)getpid() << 40));
    h = mix64(h ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
    h = mix64(h ^ (uint64_t)(uintptr_t)&ts);
    uint64_t h2 = mix64(h ^ n);
    for (int i = 0; i < 12; i++) {
        uint64_t *src = i < 8 ? &h : &h2;
        out[i] = alphabet[*src & 63];
        *src >>= 6;
    }
    out[12] = 0;
}

pgd_status pgd_outfile_open(const char *path, pgd_outfile **out, pgd_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !*path || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_outfile_open: path or out is NULL or empty");
    struct stat st;
    int exists = 0;
    int rc = check_target(path, &st, &exists, err);
    if (rc)
        return rc;
    pgd_outfile *f = calloc(1, sizeof *f);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".tmp-" + 12);
    char *copy = pgd__strdup(path);
    if (!f || !tmp || !copy) {
        free(f), free(tmp), free(copy);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: cannot write", path);
    }
    f->path = copy;
    f->tmp = tmp;
    f->mode = exists ? (st.st_mode & 0777) : (0666 & ~current_umask());
    int fd = -1, e = EEXIST;
    for (int attempt = 0; attempt < 100 && fd < 0 && e == EEXIST; attempt++) {
        char suffix[13];
        random_suffix(suffix);
        memcpy(tmp, path, plen);
        memcpy(tmp + plen, ".tmp-", 5);
        memcpy(tmp + plen + 5, suffix, 13);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        e = fd < 0 ? errno : 0;
    }
    if (fd >= 0)
        f->stream = fdopen(fd, "wb");
    if (!f->stream) {
        if (fd >= 0) {
            e = errno;
            close(fd);
            unlink(tmp);
        }
        rc = pgd__error_set(err, e == ENOMEM ? PGD_ERR_OUT_OF_HOST_MEMORY : PGD_ERR_IO,
                            "%s: cannot create a temporary file beside it: %s", path, strerror(e));
        free(f->path), free(f->tmp), free(f);
        return rc;
    }
    *out = f;
    return PGD_OK;
}

FILE *pgd_outfile_get_stream(pgd_outfile *f)
{
    return f ? f->stream : NULL;
}

const char *pgd_outfile_get_path(const pgd_outfile *f)
{
    return f ? f->path : NULL;
}

pgd_status pgd_outfile_write(pgd_outfile *f, const void *data, size_t size, pgd_error **err)
{
    if (!f || (!data && size))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_outfile_write: NULL argument");
    if (!f->stream)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: pgd_outfile_write after the file was closed", f->path);
    if (!f->failed && size && fwrite(data, 1, size, f->stream) != size) {
        f->failed = 1;
        f->write_errno = errno;
    }
    if (f->failed)
        return pgd__error_set(err, PGD_ERR_IO, "%s: cannot write: %s", f->path,
                              strerror(f->write_errno ? f->write_errno : EIO));
    return PGD_OK;
}

pgd_status pgd_outfile_close(pgd_outfile *f, pgd_error **err)
{
    if (!f)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_outfile_close: NULL file");
    if (!f->stream)
        return f->failed ? pgd__error_set(err, PGD_ERR_IO, "%s: cannot write: %s", f->path,
                                          strerror(f->write_errno ? f->write_errno : EIO))
                         : PGD_OK;
    FILE *s = f->stream;
    f->stream = NULL;
    int e = 0;
    errno = 0;
    if (!f->failed && (fflush(s) != 0 || ferror(s)))
        e = errno ? errno : EIO;
    /* The data reaches the disk before the name does: after a crash the target holds the old
     * contents or the new ones, never an empty file. (EINVAL: a file system without fsync.) */
    if (!f->failed && !e && fsync(fileno(s)) != 0 && errno != EINVAL)
        e = errno;
    if (!f->failed && !e && fchmod(fileno(s), f->mode) != 0)
        e = errno;
    if (fclose(s) != 0 && !e)
        e = errno;
    if (e && !f->failed) {
        f->failed = 1;
        f->write_errno = e;
    }
    if (f->failed)
        return pgd__error_set(err, PGD_ERR_IO, "%s: cannot write: %s", f->path,
                              strerror(f->write_errno ? f->write_errno : EIO));
    return PGD_OK;
}

pgd_status pgd_outfile_commit(pgd_outfile *f, pgd_error **err)
{
    if (!f)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_outfile_commit: NULL file");
    int rc = pgd_outfile_close(f, err);
    struct stat st;
    int exists;
    if (!rc)
        rc = check_target(f->path, &st, &exists, err);
    if (!rc && rename(f->tmp, f->path) != 0)
        rc = pgd__error_set(err, PGD_ERR_IO, "%s: cannot rename the temporary file into place: %s",
                            f->path, strerror(errno));
    if (rc)
        unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    free(f);
    return rc;
}

void pgd_outfile_abort(pgd_outfile *f)
{
    if (!f)
        return;
    if (f->stream)
        fclose(f->stream);
    unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    free(f);
}

pgd_status pgd_file_write_atomic(const char *path, const void *data, size_t size, pgd_error **err)
{
    pgd_outfile *f = NULL;
    int rc = pgd_outfile_open(path, &f, err);
    if (!rc)
        rc = pgd_outfile_write(f, data, size, err);
    if (rc) {
        pgd_outfile_abort(f);
        return rc;
    }
    return pgd_outfile_commit(f, err);
}
